//! # rltp-quic: what both ends of the wire profile share
//!
//! The carrier's server and the client library both speak the wire profile
//! (`PROTOCOL.md` §5–§6) over quinn and rustls, and the same frames over
//! TLS 1.3/TCP with HTTP/2 (§5b, hyper); what they share of that
//! plumbing lives here, so that neither end borrows the other's crate.
//!
//! | module | what |
//! |---|---|
//! | [`stream`] | one operation's stream over either binding: QUIC (§5) or an HTTP/2 stream over TLS/TCP (§5b) |
//! | [`net`] | frame I/O over those streams: [`net::FrameReader`], the thin async adapter around `rltp_wire`'s sans-IO [`FrameDecoder`](rltp_wire::FrameDecoder); `write_frame`; one-frame reads for raw probes |
//! | [`tls`] | TLS 1.3 with ring, ALPN, SPKI fingerprints, PEM certificates, the client's trust modes (`PROTOCOL.md` §5) |
//! | [`transport`] | the `[transport]` tuning (ACK frequency, MTU) each end applies to its own endpoint |
//! | [`clock_hook`] | the test clock hook's file, read by both ends (`PROTOCOL.md` §11, tests only) |
//! | [`defaults`] | the constants of the above, each with its reason |
//!
//! What this crate does **not** do: no frame parsing of its own (the
//! decoder, its order and its limits are `rltp_wire`'s), no operation, no
//! store, no server or client logic, no async runtime of its own (quinn's
//! futures are awaited by the caller's; the HTTP/2 connections are the
//! caller's too: this crate has only the per-stream halves).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod clock_hook;
pub mod defaults;
pub mod net;
pub mod stream;
pub mod tls;
pub mod transport;
