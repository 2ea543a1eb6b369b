//! # rltp-wire: the carrier's QUIC wire profile as pure codecs
//!
//! Bytes in, typed values out, for `PROTOCOL.md` §5–§8: frames, request
//! and response headers, the closed verdict sets of §5a.3 and §5a.5, the
//! §5a.8 statuses, the stream error codes, the operations, and the
//! address-challenge opening of §8. Both sides use it: the server builds
//! answers with `to_header`, the client reads them with `from_header`.
//!
//! | module | what | spec |
//! |---|---|---|
//! | [`frame`] | the 8-byte prefix, the strict-JSON header, frozen limits, [`FrameError`] | `PROTOCOL.md` §6 |
//! | [`decoder`] | [`FrameDecoder`]: the frame reader both ends use, sans-IO (bytes pushed in, frames parsed from the buffer) | `PROTOCOL.md` §6 |
//! | [`op`] | the one [`Op`] table: `op` spellings, metric labels, each operation's answer set | `PROTOCOL.md` §6–§7 |
//! | [`request`] | request headers with closed member sets | `PROTOCOL.md` §7 |
//! | [`response`] | response headers, [`ErrorCode`](response::ErrorCode) | `PROTOCOL.md` §6–§7 |
//! | [`verdict`] | [`SubmitVerdict`], [`Verdict`], [`DepositStatus`]: one table per set | §5a.3, §5a.5, §5a.8, §6.1 |
//! | [`close`] | [`CloseCode`]: the QUIC application close codes (`going-away`) | `PROTOCOL.md` §5 |
//! | [`address_challenge`] | the §8 plaintext and its opening by the registrant | `PROTOCOL.md` §8 |
//!
//! What this crate does **not** do: no I/O, no async runtime, no QUIC or
//! TLS (moving bytes between a QUIC stream and a [`FrameDecoder`] is
//! `rltp-quic`'s `net` module), no
//! storage and no admission decisions (those are the engine's). Every
//! malformed input is a closed [`FrameError`], never a panic; the fuzz
//! crate (`fuzz/`) drives these parsers directly.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod address_challenge;
pub mod close;
mod closed_set;
pub mod decoder;
mod direct;
mod fields;
pub mod frame;
pub mod op;
pub mod request;
pub mod response;
pub mod verdict;

pub use close::CloseCode;
pub use decoder::{FrameDecoder, Prefix};
pub use frame::{
    ALPN, FrameError, MAX_BODY_BYTES, MAX_COLLECT_LIMIT, MAX_CONCLUDE_IDS, MAX_HEADER_BYTES,
    MAX_PROOF_BYTES, PREFIX_BYTES, encode_frame, parse_header, parse_prefix,
};
pub use op::Op;
pub use request::{
    Request, encode_stream_item_into, parse_stream_item, parse_stream_item_bytes,
    parse_stream_item_bytes_with, stream_item_header,
};
pub use verdict::{DepositStatus, SubmitVerdict, Verdict};
