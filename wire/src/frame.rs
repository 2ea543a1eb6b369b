//! Frames (`PROTOCOL.md` §6): an 8-byte prefix of two big-endian `u32`
//! lengths, a strict-JSON header and a raw body, with the profile's frozen
//! limits checked before anything is allocated or read.

use rltp_proofs::json::{self, Object, Value};

/// ALPN protocol id of this profile, version 1 (`PROTOCOL.md` §5).
pub const ALPN: &[u8] = b"rltp-carrier/1";
/// Size of the frame prefix: two `u32` lengths (bytes).
pub const PREFIX_BYTES: usize = 8;
/// Largest header (bytes of strict JSON).
pub const MAX_HEADER_BYTES: usize = 16_384;
/// Largest body (bytes): the strict reader's whole-input ceiling, which
/// bounds proofs and declarations; an envelope body is further bounded by
/// `proofs::envelope::MAX_ENVELOPE_BYTES` at s2.
pub const MAX_BODY_BYTES: usize = json::MAX_TOTAL_BYTES;
/// Most deposits a `conclude` may name in one request: a collect page's
/// most (`PROTOCOL.md` §7), so one conclude answers one page. It must fit
/// the header: an id costs 47 characters + 2 quotes + 1 comma = 50 bytes,
/// so 256 ids take 12 800 bytes plus `{"deposits":[],"op":"conclude"}`
/// (31), well under [`MAX_HEADER_BYTES`]; 1 024 would not fit.
pub const MAX_CONCLUDE_IDS: usize = 256;
/// Largest `limit` a `collect` may ask for (a page holds at most
/// 256 deposits whatever it asks, `PROTOCOL.md` §7).
pub const MAX_COLLECT_LIMIT: u32 = 1_024;
/// Largest proof body (bytes): a proof is ~600 bytes; 4 KiB leaves room
/// for long carrier identifiers (Identity §7a.2: up to 1 024 bytes).
pub const MAX_PROOF_BYTES: usize = 4_096;

/// Why a frame or header was refused (closed set; `code()` is the wire
/// spelling of the `error` member of the answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A length prefix above [`MAX_HEADER_BYTES`] / [`MAX_BODY_BYTES`] or
    /// the operation's own body bound.
    #[error("frame too large: {what} of {len} bytes exceeds {max}")]
    TooLarge {
        /// `header` or `body`.
        what: &'static str,
        /// The announced length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The stream ended inside a frame.
    #[error("truncated frame")]
    Truncated,
    /// The header is not strict JSON.
    #[error("header is not strict json: {0}")]
    Json(#[from] json::JsonError),
    /// The header is valid JSON but not a valid header for its operation.
    #[error("bad header: {0}")]
    Header(String),
    /// The `op` member names no operation.
    #[error("unknown operation {0:?}")]
    UnknownOp(String),
    /// Bytes followed a complete request frame: a request is one frame
    /// and then the end of the client's send side (`PROTOCOL.md` §6).
    #[error("bytes after the request frame (a request is one frame, then the end of the stream)")]
    TrailingBytes,
}

impl FrameError {
    /// The closed wire spelling.
    pub const fn code(&self) -> &'static str {
        match self {
            FrameError::TooLarge { .. } => "frame-too-large",
            FrameError::Truncated => "truncated-frame",
            FrameError::Json(_) | FrameError::Header(_) | FrameError::TrailingBytes => {
                "malformed-frame"
            }
            FrameError::UnknownOp(_) => "unknown-operation",
        }
    }
}

/// Splits an 8-byte prefix into `(header_len, body_len)` and checks both
/// against their bounds (`max_body` ≤ [`MAX_BODY_BYTES`]).
///
/// # Errors
/// [`FrameError::TooLarge`].
pub fn parse_prefix(
    prefix: [u8; PREFIX_BYTES],
    max_body: usize,
) -> Result<(usize, usize), FrameError> {
    let [a, b, c, d, e, f, g, h] = prefix;
    let header = u32::from_be_bytes([a, b, c, d]) as usize;
    let body = u32::from_be_bytes([e, f, g, h]) as usize;
    if header > MAX_HEADER_BYTES {
        return Err(FrameError::TooLarge {
            what: "header",
            len: header,
            max: MAX_HEADER_BYTES,
        });
    }
    let max_body = max_body.min(MAX_BODY_BYTES);
    if body > max_body {
        return Err(FrameError::TooLarge {
            what: "body",
            len: body,
            max: max_body,
        });
    }
    Ok((header, body))
}

/// Parses a header: one strict-JSON object of at most [`MAX_HEADER_BYTES`].
///
/// # Errors
/// [`FrameError::Json`] or [`FrameError::Header`] if it is not an object.
pub fn parse_header(bytes: &[u8]) -> Result<Object, FrameError> {
    let limits = json::Limits {
        max_total_bytes: MAX_HEADER_BYTES,
        ..json::Limits::FROZEN
    };
    match json::parse_with_limits(bytes, limits)? {
        Value::Object(object) => Ok(object),
        other => Err(FrameError::Header(format!(
            "header is a json {}",
            other.kind()
        ))),
    }
}

/// Encodes one frame: the header as JCS, then the body.
pub fn encode_frame(header: &Object, body: &[u8]) -> Vec<u8> {
    // JCS of an object built from strings, integers and booleans cannot
    // fail; an empty header is the fallback rather than a panic.
    let header = rltp_proofs::jcs::canonicalize(&Value::Object(header.clone()))
        .unwrap_or_else(|_| b"{}".to_vec());
    let mut out = Vec::with_capacity(PREFIX_BYTES + header.len() + body.len());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(body);
    out
}
