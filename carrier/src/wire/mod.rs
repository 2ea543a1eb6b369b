//! The carrier's QUIC wire profile (`PROTOCOL.md` §5–§7): frames, request
//! headers and response headers, as pure codecs (no I/O).
//!
//! A **frame** is
//!
//! ```text
//! header_len: u32 big-endian | body_len: u32 big-endian | header | body
//! ```
//!
//! where `header` is one strict-JSON object (read by [`rltp_proofs::json`]
//! under its frozen limits, narrowed to [`MAX_HEADER_BYTES`]) and `body` is
//! raw bytes (an envelope, a proof, a declaration) or empty. Lengths are
//! checked against the limits **before** anything is allocated or read.
//!
//! Every malformed frame or header is a [`FrameError`] whose `code()` is
//! one closed spelling; the server answers it on the stream and keeps the
//! connection.

pub mod response;

use rltp_proofs::json::{self, Number, Object, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_storage::DepositId;
use std::fmt;

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

/// The operations of this profile (`PROTOCOL.md` §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `declaration`: the current signed `registry-declaration/0.1`.
    Declaration,
    /// `submit {rkid, size}` + envelope body (§5a.5).
    Submit {
        /// The queue.
        rkid: Rkid,
        /// The body length the sender announces (bytes); must equal the
        /// body's length.
        size: u32,
    },
    /// `submit-stream`: many `{rkid, size}` + envelope frames follow on the
    /// same stream; verdicts come back in order.
    SubmitStream,
    /// `status {rkid, deposit}` (§5a.8, §6.1).
    Status {
        /// The queue.
        rkid: Rkid,
        /// The deposit id.
        deposit: DepositId,
    },
    /// `challenge {rkid, purpose}` (§5a.3).
    Challenge {
        /// The queue.
        rkid: Rkid,
        /// The purpose the challenge is for.
        purpose: Purpose,
    },
    /// `register` + proof body (register or rebind, §5a.3).
    Register,
    /// `collect {after?, limit?, watch?}` + proof body (§5a.3, §5a.8).
    Collect {
        /// Return deposits with `seq` above this (paging).
        after: Option<u64>,
        /// Most deposits in the page (1..=[`MAX_COLLECT_LIMIT`]).
        limit: u32,
        /// Keep the stream open and push new deposits.
        watch: bool,
    },
    /// `conclude {deposits}` + proof body (§5a.8).
    Conclude {
        /// The deposit ids to conclude.
        deposits: Vec<DepositId>,
    },
}

impl Request {
    /// The `op` spelling.
    pub const fn op(&self) -> &'static str {
        match self {
            Request::Declaration => "declaration",
            Request::Submit { .. } => "submit",
            Request::SubmitStream => "submit-stream",
            Request::Status { .. } => "status",
            Request::Challenge { .. } => "challenge",
            Request::Register => "register",
            Request::Collect { .. } => "collect",
            Request::Conclude { .. } => "conclude",
        }
    }

    /// The largest body this operation's frame may carry (bytes). A
    /// `submit` body is bounded by the frame alone: its envelope bound is
    /// §5a.5 s2's, and a `size` above it is answered `refused(bounds)`
    /// (after s1) without the body being read (`PROTOCOL.md` §7).
    pub const fn max_body(&self) -> usize {
        match self {
            Request::Submit { .. } => MAX_BODY_BYTES,
            Request::Register | Request::Collect { .. } | Request::Conclude { .. } => {
                MAX_PROOF_BYTES
            }
            _ => 0,
        }
    }

    /// Parses a request header (closed member set per operation).
    ///
    /// # Errors
    /// [`FrameError::UnknownOp`] or [`FrameError::Header`].
    pub fn from_header(header: &Object) -> Result<Request, FrameError> {
        let fields = Fields(header);
        let op = fields.str("op")?;
        let request = match op {
            "declaration" => {
                fields.closed(&["op"])?;
                Request::Declaration
            }
            "submit" => {
                fields.closed(&["op", "rkid", "size"])?;
                Request::Submit {
                    rkid: fields.rkid()?,
                    size: u32::try_from(fields.uint("size")?)
                        .map_err(|_| FrameError::Header("size out of range".into()))?,
                }
            }
            "submit-stream" => {
                fields.closed(&["op"])?;
                Request::SubmitStream
            }
            "status" => {
                fields.closed(&["op", "rkid", "deposit"])?;
                Request::Status {
                    rkid: fields.rkid()?,
                    deposit: fields.deposit_id(fields.str("deposit")?)?,
                }
            }
            "challenge" => {
                fields.closed(&["op", "rkid", "purpose"])?;
                let purpose = fields.str("purpose")?;
                Request::Challenge {
                    rkid: fields.rkid()?,
                    purpose: Purpose::from_wire(purpose).ok_or_else(|| {
                        FrameError::Header(format!("unknown purpose {purpose:?}"))
                    })?,
                }
            }
            "register" => {
                fields.closed(&["op"])?;
                Request::Register
            }
            "collect" => {
                fields.closed(&["op", "after", "limit", "watch"])?;
                let limit = match fields.opt_uint("limit")? {
                    None => MAX_COLLECT_LIMIT,
                    Some(n) if (1..=u64::from(MAX_COLLECT_LIMIT)).contains(&n) => n as u32,
                    Some(n) => {
                        return Err(FrameError::Header(format!(
                            "limit {n} outside 1..={MAX_COLLECT_LIMIT}"
                        )));
                    }
                };
                Request::Collect {
                    after: fields.opt_uint("after")?,
                    limit,
                    watch: fields.opt_bool("watch")?.unwrap_or(false),
                }
            }
            "conclude" => {
                fields.closed(&["op", "deposits"])?;
                let items = header
                    .get("deposits")
                    .and_then(Value::as_array)
                    .ok_or_else(|| FrameError::Header("deposits must be an array".into()))?;
                if items.is_empty() || items.len() > MAX_CONCLUDE_IDS {
                    return Err(FrameError::Header(format!(
                        "deposits must name 1..={MAX_CONCLUDE_IDS} ids"
                    )));
                }
                let deposits = items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .ok_or_else(|| FrameError::Header("deposit id must be a string".into()))
                            .and_then(|s| fields.deposit_id(s))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Request::Conclude { deposits }
            }
            other => return Err(FrameError::UnknownOp(other.to_owned())),
        };
        Ok(request)
    }

    /// The request header (the inverse of [`Request::from_header`]).
    pub fn to_header(&self) -> Object {
        let mut header = Object::new();
        header.insert("op", self.op());
        match self {
            Request::Submit { rkid, size } => {
                header.insert("rkid", rkid.to_multikey());
                header.insert("size", Number::from_u64(u64::from(*size)));
            }
            Request::Status { rkid, deposit } => {
                header.insert("rkid", rkid.to_multikey());
                header.insert("deposit", deposit.to_multibase());
            }
            Request::Challenge { rkid, purpose } => {
                header.insert("rkid", rkid.to_multikey());
                header.insert("purpose", purpose.as_str());
            }
            Request::Collect {
                after,
                limit,
                watch,
            } => {
                if let Some(after) = after {
                    header.insert("after", Number::from_u64(*after));
                }
                header.insert("limit", Number::from_u64(u64::from(*limit)));
                header.insert("watch", *watch);
            }
            Request::Conclude { deposits } => {
                header.insert(
                    "deposits",
                    Value::Array(
                        deposits
                            .iter()
                            .map(|d| Value::from(d.to_multibase()))
                            .collect(),
                    ),
                );
            }
            Request::Declaration | Request::SubmitStream | Request::Register => {}
        }
        header
    }
}

/// Largest proof body (bytes): a proof is ~600 bytes; 4 KiB leaves room
/// for long carrier identifiers (Identity §7a.2: up to 1 024 bytes).
pub const MAX_PROOF_BYTES: usize = 4_096;

/// One item of a pipelined `submit-stream`: `{rkid, size}` + envelope body.
///
/// # Errors
/// [`FrameError::Header`] for any other member set.
pub fn parse_stream_item(header: &Object) -> Result<(Rkid, u32), FrameError> {
    let fields = Fields(header);
    fields.closed(&["rkid", "size"])?;
    let size = u32::try_from(fields.uint("size")?)
        .map_err(|_| FrameError::Header("size out of range".into()))?;
    Ok((fields.rkid()?, size))
}

/// The header of one pipelined submission.
pub fn stream_item_header(rkid: &Rkid, size: u32) -> Object {
    let mut header = Object::new();
    header.insert("rkid", rkid.to_multikey());
    header.insert("size", Number::from_u64(u64::from(size)));
    header
}

struct Fields<'a>(&'a Object);

impl Fields<'_> {
    fn closed(&self, allowed: &[&str]) -> Result<(), FrameError> {
        match self.0.keys().find(|k| !allowed.contains(k)) {
            Some(unknown) => Err(FrameError::Header(format!("unknown member {unknown:?}"))),
            None => Ok(()),
        }
    }

    fn str(&self, name: &str) -> Result<&str, FrameError> {
        self.0
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| FrameError::Header(format!("{name} must be a string")))
    }

    fn uint(&self, name: &str) -> Result<u64, FrameError> {
        self.opt_uint(name)?
            .ok_or_else(|| FrameError::Header(format!("{name} is required")))
    }

    /// A non-negative canonical decimal integer (no sign, fraction, exponent
    /// or leading zero), at most 2^53 − 1.
    fn opt_uint(&self, name: &str) -> Result<Option<u64>, FrameError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) if n.lexeme() == "0" => Ok(Some(0)),
            Some(Value::Number(n)) => rltp_proofs::constants::parse_canonical_integer(n.lexeme())
                .map(Some)
                .map_err(|e| FrameError::Header(format!("{name}: {e}"))),
            Some(other) => Err(FrameError::Header(format!(
                "{name} is a json {}",
                other.kind()
            ))),
        }
    }

    fn opt_bool(&self, name: &str) -> Result<Option<bool>, FrameError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(FrameError::Header(format!(
                "{name} is a json {}",
                other.kind()
            ))),
        }
    }

    fn rkid(&self) -> Result<Rkid, FrameError> {
        Rkid::parse(self.str("rkid")?).map_err(|e| FrameError::Header(format!("rkid: {e}")))
    }

    fn deposit_id(&self, s: &str) -> Result<DepositId, FrameError> {
        DepositId::parse(s).map_err(|e| FrameError::Header(format!("deposit id: {e}")))
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.op())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rkid() -> Rkid {
        Rkid::parse("z6LSqY3EWDm5RNaC14mGJSHYcQNXGSNymfTom7wSaGzKdWWU").unwrap()
    }

    fn round_trip(request: Request) {
        let frame = encode_frame(&request.to_header(), b"");
        let prefix: [u8; 8] = frame[..8].try_into().unwrap();
        let (h, b) = parse_prefix(prefix, MAX_BODY_BYTES).unwrap();
        assert_eq!(b, 0);
        let header = parse_header(&frame[8..8 + h]).unwrap();
        assert_eq!(Request::from_header(&header).unwrap(), request);
    }

    #[test]
    fn every_request_round_trips() {
        let deposit = DepositId::of(b"x");
        round_trip(Request::Declaration);
        round_trip(Request::Submit {
            rkid: rkid(),
            size: 1400,
        });
        round_trip(Request::SubmitStream);
        round_trip(Request::Status {
            rkid: rkid(),
            deposit,
        });
        for purpose in Purpose::ALL {
            round_trip(Request::Challenge {
                rkid: rkid(),
                purpose,
            });
        }
        round_trip(Request::Register);
        round_trip(Request::Collect {
            after: Some(7),
            limit: 10,
            watch: true,
        });
        round_trip(Request::Collect {
            after: None,
            limit: 1,
            watch: false,
        });
        round_trip(Request::Conclude {
            deposits: vec![deposit, DepositId::of(b"y")],
        });
    }

    #[test]
    fn exact_frame_bytes() {
        let frame = encode_frame(&Request::Declaration.to_header(), b"");
        assert_eq!(
            frame,
            b"\x00\x00\x00\x14\x00\x00\x00\x00{\"op\":\"declaration\"}"
        );
    }

    #[test]
    fn refuses_oversize_prefixes_before_reading() {
        let mut prefix = [0u8; 8];
        prefix[..4].copy_from_slice(&(MAX_HEADER_BYTES as u32 + 1).to_be_bytes());
        assert_eq!(
            parse_prefix(prefix, MAX_BODY_BYTES).unwrap_err().code(),
            "frame-too-large"
        );
        let mut prefix = [0u8; 8];
        prefix[4..].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            parse_prefix(prefix, 100),
            Err(FrameError::TooLarge {
                what: "body",
                len: u32::MAX as usize,
                max: 100
            })
        );
    }

    #[test]
    fn refuses_malformed_headers_with_closed_codes() {
        let cases: [(&[u8], &str); 9] = [
            (b"[1]", "malformed-frame"),
            (b"{\"op\":1}", "malformed-frame"),
            (b"{\"op\":\"nope\"}", "unknown-operation"),
            (b"{\"op\":\"declaration\",\"x\":1}", "malformed-frame"),
            (b"{\"op\":\"submit\",\"rkid\":\"z6LS11111111111111111111111111111111111111111111\",\"size\":1}", "malformed-frame"),
            (b"{\"op\":\"submit\",\"rkid\":\"z6LSqY3EWDm5RNaC14mGJSHYcQNXGSNymfTom7wSaGzKdWWU\",\"size\":1.0}", "malformed-frame"),
            (b"{\"op\":\"collect\",\"limit\":0}", "malformed-frame"),
            (b"{\"op\":\"conclude\",\"deposits\":[]}", "malformed-frame"),
            (b"{\"op\":\"declaration\",\"op\":\"declaration\"}", "malformed-frame"),
        ];
        for (bytes, code) in cases {
            let result = parse_header(bytes).and_then(|h| Request::from_header(&h));
            assert_eq!(
                result.unwrap_err().code(),
                code,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn headers_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            if let Ok(header) = parse_header(&bytes) {
                let _ = Request::from_header(&header);
                let _ = parse_stream_item(&header);
            }
        }
    }
}
