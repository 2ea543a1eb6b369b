//! Requests (`PROTOCOL.md` §6–§7): the header of each operation, with its
//! closed member set, parsed strictly and written as JCS.

use crate::fields::Fields;
use crate::frame::{FrameError, MAX_COLLECT_LIMIT, MAX_CONCLUDE_IDS};
use crate::op::Op;
use rltp_proofs::DepositId;
use rltp_proofs::json::{Number, Object, Value};
use rltp_proofs::multikey::{RKID_CHARS, Rkid, RkidText, RkidTexts};
use rltp_proofs::proof::Purpose;
use std::fmt;

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
    /// The operation ([`Op::as_str`] is the `op` member).
    pub const fn op(&self) -> Op {
        match self {
            Request::Declaration => Op::Declaration,
            Request::Submit { .. } => Op::Submit,
            Request::SubmitStream => Op::SubmitStream,
            Request::Status { .. } => Op::Status,
            Request::Challenge { .. } => Op::Challenge,
            Request::Register => Op::Register,
            Request::Collect { .. } => Op::Collect,
            Request::Conclude { .. } => Op::Conclude,
        }
    }

    /// The largest body this operation's frame may carry (bytes,
    /// [`Op::max_body`]).
    pub const fn max_body(&self) -> usize {
        self.op().max_body()
    }

    /// Parses a request header (closed member set per operation).
    ///
    /// # Errors
    /// [`FrameError::UnknownOp`] or [`FrameError::Header`].
    pub fn from_header(header: &Object) -> Result<Request, FrameError> {
        let fields = Fields(header);
        let op = fields.str("op")?;
        let Some(op) = Op::from_wire(op) else {
            return Err(FrameError::UnknownOp(op.to_owned()));
        };
        let request = match op {
            Op::Declaration => {
                fields.closed(&["op"])?;
                Request::Declaration
            }
            Op::Submit => {
                fields.closed(&["op", "rkid", "size"])?;
                Request::Submit {
                    rkid: fields.rkid()?,
                    size: u32::try_from(fields.uint0("size")?)
                        .map_err(|_| FrameError::Header("size out of range".into()))?,
                }
            }
            Op::SubmitStream => {
                fields.closed(&["op"])?;
                Request::SubmitStream
            }
            Op::Status => {
                fields.closed(&["op", "rkid", "deposit"])?;
                Request::Status {
                    rkid: fields.rkid()?,
                    deposit: Fields::deposit_id(fields.str("deposit")?)?,
                }
            }
            Op::Challenge => {
                fields.closed(&["op", "rkid", "purpose"])?;
                let purpose = fields.str("purpose")?;
                Request::Challenge {
                    rkid: fields.rkid()?,
                    purpose: Purpose::from_wire(purpose).ok_or_else(|| {
                        FrameError::Header(format!("unknown purpose {purpose:?}"))
                    })?,
                }
            }
            Op::Register => {
                fields.closed(&["op"])?;
                Request::Register
            }
            Op::Collect => {
                fields.closed(&["op", "after", "limit", "watch"])?;
                let limit = match fields.opt_uint0("limit")? {
                    None => MAX_COLLECT_LIMIT,
                    Some(n) if (1..=u64::from(MAX_COLLECT_LIMIT)).contains(&n) => n as u32,
                    Some(n) => {
                        return Err(FrameError::Header(format!(
                            "limit {n} outside 1..={MAX_COLLECT_LIMIT}"
                        )));
                    }
                };
                Request::Collect {
                    after: fields.opt_uint0("after")?,
                    limit,
                    watch: fields.opt_bool("watch")?.unwrap_or(false),
                }
            }
            Op::Conclude => {
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
                            .and_then(Fields::deposit_id)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Request::Conclude { deposits }
            }
        };
        Ok(request)
    }

    /// The request header (the inverse of [`Request::from_header`]).
    pub fn to_header(&self) -> Object {
        let mut header = Object::new();
        header.insert("op", self.op().as_str());
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

/// One item of a pipelined `submit-stream`: `{rkid, size}` + envelope body.
///
/// # Errors
/// [`FrameError::Header`] for any other member set.
pub fn parse_stream_item(header: &Object) -> Result<(RkidText, u32), FrameError> {
    let fields = Fields(header);
    fields.closed(&["rkid", "size"])?;
    let size = u32::try_from(fields.uint0("size")?)
        .map_err(|_| FrameError::Header("size out of range".into()))?;
    let rkid = RkidText::parse(fields.str("rkid")?)
        .map_err(|e| FrameError::Header(format!("rkid: {e}")))?;
    Ok((rkid, size))
}

/// [`parse_stream_item`] of the header's bytes. The JCS spelling every
/// client writes, `{"rkid":"…","size":N}`, is read by one scan (no JSON
/// tree, no allocation); any other bytes go through the strict reader
/// ([`parse_header`](crate::parse_header), then [`parse_stream_item`]),
/// so every answer, errors included, is the strict path's.
///
/// # Errors
/// As [`parse_header`](crate::parse_header) and [`parse_stream_item`].
pub fn parse_stream_item_bytes(bytes: &[u8]) -> Result<(RkidText, u32), FrameError> {
    parse_stream_item_bytes_with(bytes, &mut RkidTexts::default())
}

/// [`parse_stream_item_bytes`], the `rkid` text looked up in `known`
/// first (a stream's items name the same queues again and again: each
/// text is decoded once per stream).
///
/// # Errors
/// As [`parse_stream_item_bytes`].
pub fn parse_stream_item_bytes_with(
    bytes: &[u8],
    known: &mut RkidTexts,
) -> Result<(RkidText, u32), FrameError> {
    if let Some(item) = stream_item_fast(bytes, known) {
        return Ok(item);
    }
    parse_stream_item(&crate::frame::parse_header(bytes)?)
}

/// The JCS spelling of a stream item header, or `None`.
fn stream_item_fast(bytes: &[u8], known: &mut RkidTexts) -> Option<(RkidText, u32)> {
    let rest = bytes.strip_prefix(b"{\"rkid\":\"")?;
    let (text, rest) = rest.split_at_checked(RKID_CHARS)?;
    let digits = rest.strip_prefix(b"\",\"size\":")?.strip_suffix(b"}")?;
    // Canonical: `0`, or no leading zero; at most u32::MAX.
    if digits.is_empty()
        || digits.len() > 10
        || (digits.len() > 1 && digits.first() == Some(&b'0'))
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    let size = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    let size = u32::try_from(size).ok()?;
    // Base58 text has no `"` or `\\`; anything else the strict path judges.
    let rkid = known.parse(text).ok()?;
    Some((rkid, size))
}

/// Appends one pipelined submission as a whole frame to `out`: the bytes
/// of [`encode_frame`](crate::encode_frame) of [`stream_item_header`] and
/// `envelope`, with the header written directly (no JSON tree, no JCS
/// pass: `rkid` is base58btc, `size` an integer, members in JCS order).
pub fn encode_stream_item_into(rkid: &Rkid, envelope: &[u8], out: &mut Vec<u8>) {
    let rkid = rkid.to_multikey();
    let size = envelope.len().to_string();
    let header_len = b"{\"rkid\":\"\",\"size\":}".len() + rkid.len() + size.len();
    out.reserve(crate::PREFIX_BYTES + header_len + envelope.len());
    out.extend_from_slice(&(header_len as u32).to_be_bytes());
    out.extend_from_slice(&(envelope.len() as u32).to_be_bytes());
    out.extend_from_slice(b"{\"rkid\":\"");
    out.extend_from_slice(rkid.as_bytes());
    out.extend_from_slice(b"\",\"size\":");
    out.extend_from_slice(size.as_bytes());
    out.push(b'}');
    out.extend_from_slice(envelope);
}

/// The header of one pipelined submission.
pub fn stream_item_header(rkid: &Rkid, size: u32) -> Object {
    let mut header = Object::new();
    header.insert("rkid", rkid.to_multikey());
    header.insert("size", Number::from_u64(u64::from(size)));
    header
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.op().as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::*;

    fn rkid() -> Rkid {
        Rkid::parse("z6LSqY3EWDm5RNaC14mGJSHYcQNXGSNymfTom7wSaGzKdWWU").unwrap()
    }

    #[test]
    fn direct_stream_items_are_the_jcs_frames() {
        for len in [0usize, 1, 9, 10, 1_080, 87_557] {
            let envelope = vec![b'e'; len];
            let mut direct = Vec::new();
            encode_stream_item_into(&rkid(), &envelope, &mut direct);
            let expected = encode_frame(&stream_item_header(&rkid(), len as u32), &envelope);
            assert_eq!(direct, expected, "{len}");
            let (h, _) = parse_prefix(direct[..8].try_into().unwrap(), MAX_BODY_BYTES).unwrap();
            let (text, size) = parse_stream_item_bytes(&direct[8..8 + h]).unwrap();
            assert_eq!((*text.rkid(), size as usize), (rkid(), len));
        }
        // Another spelling: read by the strict path, to the same item.
        let spaced = format!("{{ \"size\": 5, \"rkid\": \"{}\" }}", rkid().to_multikey());
        let (text, size) = parse_stream_item_bytes(spaced.as_bytes()).unwrap();
        assert_eq!((*text.rkid(), size), (rkid(), 5));
        for bad in [
            r#"{"rkid":"z6LS","size":1}"#,
            r#"{"rkid":1,"size":1}"#,
            "{}",
        ] {
            let strict = parse_header(bad.as_bytes()).and_then(|h| parse_stream_item(&h));
            assert!(strict.is_err());
            assert_eq!(parse_stream_item_bytes(bad.as_bytes()), strict);
        }
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

    /// Issue 27 item 5: a deposit id has one wire spelling, `u` multibase
    /// (§6, §7); the same id in `z` (base58btc) is `malformed-frame`, in
    /// `status` and in `conclude` alike.
    #[test]
    fn a_deposit_id_in_z_multibase_is_malformed_frame() {
        let id = DepositId::of(b"");
        let u = id.to_multibase();
        let mut multihash = vec![0x12, 0x20];
        multihash.extend_from_slice(&id.0);
        let z = rltp_proofs::encoding::multibase_z(&multihash);
        // The same id, as a person may type it.
        assert_eq!(DepositId::parse(&z), Ok(id));
        let rkid = "z6LSqY3EWDm5RNaC14mGJSHYcQNXGSNymfTom7wSaGzKdWWU";
        let status =
            |d: &str| format!("{{\"op\":\"status\",\"rkid\":\"{rkid}\",\"deposit\":\"{d}\"}}");
        let conclude = |d: &str| format!("{{\"op\":\"conclude\",\"deposits\":[\"{u}\",\"{d}\"]}}");
        let expected = br#"{"detail":"bad header: deposit id: unsupported multibase prefix Some('z')","error":"malformed-frame"}"#;
        for header in [status(&z), conclude(&z)] {
            let error = parse_header(header.as_bytes())
                .and_then(|h| Request::from_header(&h))
                .unwrap_err();
            let mut out = Vec::new();
            crate::response::ErrorAnswer::of(&error).encode_frame_into(&mut out);
            let mut frame = (expected.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&[0; 4]);
            frame.extend_from_slice(expected);
            assert_eq!(out, frame, "{header}: {}", String::from_utf8_lossy(&out));
        }
        // The `u` spelling is the id.
        let parsed = parse_header(status(&u).as_bytes()).and_then(|h| Request::from_header(&h));
        assert!(matches!(parsed, Ok(Request::Status { deposit, .. }) if deposit == id));
        let parsed = parse_header(conclude(&u).as_bytes()).and_then(|h| Request::from_header(&h));
        assert!(matches!(parsed, Ok(Request::Conclude { deposits }) if deposits == [id, id]));
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
