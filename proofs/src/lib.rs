//! # rltp-proofs: the pure protocol core of rltp-carrier
//!
//! Bytes in, typed values out. This crate implements the byte-exact
//! primitives of the RLTP Delivery Contract 0.80 that a carrier touches:
//!
//! | module | what | spec |
//! |---|---|---|
//! | [`json`] | strict RFC 8259 reader over `&[u8]` with frozen structural limits and raw number lexemes | seed 003, §5a.3 (generation spelling) |
//! | [`jcs`] | RFC 8785 canonicalization | §2, §5a.3 |
//! | [`encoding`] | canonical base64url / base58btc / multibase, sha2-256 multihash, document digest | §2, §5, Encounter 2.3 |
//! | [`multikey`] | Ed25519 / X25519 Multikeys and `did:key`, decoded before any other check | §11, Identity §7a.4 |
//! | [`seal`] | §5 sealed envelope: `seal` and `open` | §5 |
//! | [`envelope`] | §5a.5 s2 shape check a carrier runs without any key | §5a.5 s2 |
//! | [`proof`] | `rltp-carrier-proof/0.3`: r1 parse, sign, verify | §5a.3 |
//! | [`constants`] | the seven carrier constants, Access §7.3 durations | §4.4, §11 |
//! | [`deposit`] | the shared vocabulary: [`DepositId`] (a deposit's content address) and [`Ms`] (instants) | §5a.5 s3, §5a.8 |
//! | [`declaration`] | `registry-declaration/0.1` with `eddsa-jcs-2022`, the generic revision rule | §3, §4.4 |
//! | [`identity`] | Identity §7a: carrier identifier `C` validation and `carrierSeed(C, N)` | Identity §7a.2, §7a.4 |
//! | [`context`] | Identity §5.1–§5.2: the `pair/<digest>` label, `edSeed`/`xSeed`, pair anchor and `rkid` | Identity §5.1, §5.2, §6.1 |
//! | [`ack_mac`] | the designated-verifier acknowledgement MAC and its ack key | §4.2, §4.4 |
//!
//! What this crate does **not** do: no I/O, no async, no clock reads, no
//! global state. Randomness enters only through caller-supplied RNGs or
//! explicit byte arrays, so every function is deterministic under test.
//!
//! Parse ≠ verify ≠ admit (seed 003): parsing yields a typed value or a
//! closed error; verification is a separate call; admission decisions
//! live in the carrier engine, not here.

pub mod ack_mac;
pub mod constants;
pub mod context;
pub mod declaration;
pub mod deposit;
pub mod encoding;
pub mod envelope;
pub mod identity;
pub mod jcs;
pub mod json;
pub mod multikey;
pub mod proof;
pub mod seal;

pub use deposit::{DepositId, Ms};
