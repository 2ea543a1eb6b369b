//! Response headers of the wire profile (`PROTOCOL.md` §6–§7), as pure
//! codecs: the server builds them with `to_header`, the client reads them
//! with `from_header`. Every reader is strict: a closed member set, exact
//! verdict spellings, `retriable` equal to what the verdict implies.
//! Every set of spellings is one table ([`crate::verdict`], [`ErrorCode`]).

use crate::closed_set::closed_set;
use crate::fields::Fields;
use crate::frame::{FrameError, parse_header};
use crate::verdict::{DepositStatus, SubmitVerdict, Verdict};
use rltp_proofs::DepositId;
use rltp_proofs::encoding::{b64url_decode_array, b64url_encode};
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, check_shape};
use rltp_proofs::json::{Number, Object};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::SealedEnvelope;

closed_set! {
    /// The closed set of `error` codes a stream can be answered with
    /// (`PROTOCOL.md` §6). The first four are [`FrameError::code`]s.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum ErrorCode {
        /// A length prefix above its bound; nothing of the frame was read.
        FrameTooLarge = "frame-too-large";
        /// The stream ended inside a frame.
        TruncatedFrame = "truncated-frame";
        /// The header is not strict JSON or not a valid header.
        MalformedFrame = "malformed-frame";
        /// `op` names no operation.
        UnknownOperation = "unknown-operation";
        /// A frame did not arrive within the server's read deadline.
        ReadTimeout = "read-timeout";
        /// A second proof on a stream already authorized by one: one
        /// authorization session carries exactly one principal (§5a.3).
        SecondProof = "second-proof";
        /// The carrier's storage could not complete the operation; nothing
        /// changed; retry (a transport-level condition, not a verdict): the
        /// only retriable code.
        Unavailable = "unavailable", retriable;
    }
}

impl ErrorCode {
    /// The code of a frame error.
    pub fn of(error: &FrameError) -> ErrorCode {
        match error {
            FrameError::TooLarge { .. } => ErrorCode::FrameTooLarge,
            FrameError::Truncated => ErrorCode::TruncatedFrame,
            FrameError::UnknownOp(_) => ErrorCode::UnknownOperation,
            FrameError::Json(_) | FrameError::Header(_) | FrameError::TrailingBytes => {
                ErrorCode::MalformedFrame
            }
        }
    }
}

/// `{"error": code, "detail": text}`: the stream is finished after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorAnswer {
    /// The closed code.
    pub code: ErrorCode,
    /// Human-readable detail (never a key or envelope byte).
    pub detail: String,
}

/// Longest `detail` the server sends, in bytes (`PROTOCOL.md` §6): enough
/// to name the rule and the offending value's start; a detail never echoes
/// more of what the client sent.
pub const MAX_DETAIL_BYTES: usize = 256;

/// `text` cut to at most [`MAX_DETAIL_BYTES`] bytes on a character
/// boundary, ending in `…` when cut.
pub fn cap_detail(text: &str) -> &str {
    if text.len() <= MAX_DETAIL_BYTES {
        return text;
    }
    let mut end = MAX_DETAIL_BYTES - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

impl ErrorAnswer {
    /// The header; `detail` capped at [`MAX_DETAIL_BYTES`].
    pub fn to_header(&self) -> Object {
        let mut h = Object::new();
        h.insert("error", self.code.as_str());
        let capped = cap_detail(&self.detail);
        if capped.len() < self.detail.len() {
            h.insert("detail", format!("{capped}…"));
        } else {
            h.insert("detail", self.detail.as_str());
        }
        h
    }

    /// The answer to a malformed frame.
    pub fn of(error: &FrameError) -> ErrorAnswer {
        ErrorAnswer {
            code: ErrorCode::of(error),
            detail: error.to_string(),
        }
    }
}

/// Reads a response header: an [`ErrorAnswer`] if it has `error`, else the
/// header for the caller's typed reader.
///
/// # Errors
/// [`FrameError`] if the header is not strict JSON or a malformed error.
pub fn split_error(bytes: &[u8]) -> Result<Result<Object, ErrorAnswer>, FrameError> {
    let header = parse_header(bytes)?;
    if header.get("error").is_none() {
        return Ok(Ok(header));
    }
    let f = Fields(&header);
    f.closed(&["error", "detail"])?;
    let code = f.str("error")?;
    let code = ErrorCode::from_wire(code)
        .ok_or_else(|| FrameError::Header(format!("unknown error code {code:?}")))?;
    Ok(Err(ErrorAnswer {
        code,
        detail: f.str("detail")?.to_owned(),
    }))
}

/// `declaration` answer: `{"verdict":"ok"}` + the signed declaration body.
pub fn declaration_header() -> Object {
    let mut h = Object::new();
    h.insert("verdict", "ok");
    h
}

/// Checks a `declaration` answer header.
///
/// # Errors
/// [`FrameError::Header`].
pub fn parse_declaration_header(header: &Object) -> Result<(), FrameError> {
    let f = Fields(header);
    f.closed(&["verdict"])?;
    match f.str("verdict")? {
        "ok" => Ok(()),
        other => Err(FrameError::Header(format!("unexpected verdict {other:?}"))),
    }
}

/// `submit` / `submit-stream` item answer (§5a.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitAnswer {
    /// The §5a.5 outcome.
    pub verdict: SubmitVerdict,
    /// The deposit id, for `admitted` and `duplicate` (both mean held).
    pub deposit: Option<DepositId>,
}

impl SubmitAnswer {
    /// The answer for `verdict` on the envelope whose id is `id`
    /// ([`DepositId::of`] its bytes); the id is carried only when held.
    pub fn new(verdict: SubmitVerdict, id: DepositId) -> SubmitAnswer {
        let held = verdict.held();
        SubmitAnswer {
            verdict,
            deposit: held.then_some(id),
        }
    }

    /// The header `{"verdict", "retriable", "deposit"?}`.
    pub fn to_header(&self) -> Object {
        let mut h = Object::new();
        h.insert("verdict", self.verdict.as_str());
        h.insert("retriable", self.verdict.retriable());
        if let Some(d) = &self.deposit {
            h.insert("deposit", d.to_multibase());
        }
        h
    }

    /// Appends this answer as a whole frame (prefix, header, no body) to
    /// `out`: the bytes of [`encode_frame`](crate::encode_frame) of
    /// [`SubmitAnswer::to_header`], written directly, without a JSON tree
    /// or a JCS pass. The members are closed ASCII spellings with nothing
    /// to escape, in JCS order (`deposit`, `retriable`, `verdict`);
    /// `tests::direct_answer_frames_are_the_jcs_frames` keeps the bytes
    /// equal for every verdict.
    pub fn encode_frame_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; crate::PREFIX_BYTES]);
        out.push(b'{');
        if let Some(d) = &self.deposit {
            out.extend_from_slice(b"\"deposit\":\"");
            out.extend_from_slice(d.to_multibase().as_bytes());
            out.extend_from_slice(b"\",");
        }
        out.extend_from_slice(match self.verdict.retriable() {
            true => b"\"retriable\":true,\"verdict\":\"",
            false => b"\"retriable\":false,\"verdict\":\"",
        });
        out.extend_from_slice(self.verdict.as_str().as_bytes());
        out.extend_from_slice(b"\"}");
        let header_len = (out.len() - start - crate::PREFIX_BYTES) as u32;
        if let Some(prefix) = out.get_mut(start..start + 4) {
            prefix.copy_from_slice(&header_len.to_be_bytes());
        }
    }

    /// Reads an answer header from its bytes: a closed error answer, or
    /// an answer as [`SubmitAnswer::from_header`] reads it. The spelling
    /// the carrier writes ([`SubmitAnswer::encode_frame_into`]) is
    /// recognised by re-encoding a candidate and comparing bytes (no JSON
    /// tree); anything else goes through the strict reader, so every
    /// answer and error is the strict path's.
    ///
    /// # Errors
    /// As [`split_error`] and [`SubmitAnswer::from_header`].
    pub fn from_header_bytes(
        bytes: &[u8],
    ) -> Result<Result<SubmitAnswer, ErrorAnswer>, FrameError> {
        if let Some(answer) = SubmitAnswer::guess(bytes) {
            let mut again = Vec::with_capacity(crate::PREFIX_BYTES + bytes.len());
            answer.encode_frame_into(&mut again);
            if again.get(crate::PREFIX_BYTES..) == Some(bytes) {
                return Ok(Ok(answer));
            }
        }
        match split_error(bytes)? {
            Ok(header) => SubmitAnswer::from_header(&header).map(Ok),
            Err(error) => Ok(Err(error)),
        }
    }

    /// The answer `bytes` would be if they were spelled as the carrier
    /// writes them (checked by the caller).
    fn guess(bytes: &[u8]) -> Option<SubmitAnswer> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (_, verdict) = text.rsplit_once("\"verdict\":\"")?;
        let verdict = SubmitVerdict::from_wire(verdict.strip_suffix("\"}")?)?;
        let deposit = match text.strip_prefix("{\"deposit\":\"") {
            Some(rest) => Some(DepositId::parse(rest.split_once('"')?.0).ok()?),
            None => None,
        };
        // A deposit exactly for the held verdicts, as the strict reader asks.
        (deposit.is_some() == verdict.held()).then_some(SubmitAnswer { verdict, deposit })
    }

    /// Reads the header.
    ///
    /// # Errors
    /// [`FrameError::Header`].
    pub fn from_header(header: &Object) -> Result<SubmitAnswer, FrameError> {
        let f = Fields(header);
        f.closed(&["verdict", "retriable", "deposit"])?;
        let text = f.str("verdict")?;
        let verdict = SubmitVerdict::from_wire(text)
            .ok_or_else(|| FrameError::Header(format!("unknown submit verdict {text:?}")))?;
        f.retriable(verdict.retriable())?;
        let held = verdict.held();
        let deposit = f.opt_deposit("deposit")?;
        if deposit.is_some() != held {
            return Err(FrameError::Header(format!(
                "deposit must be present exactly for admitted and duplicate, not {verdict}"
            )));
        }
        Ok(SubmitAnswer { verdict, deposit })
    }
}

/// `status` answer (§5a.8, §6.1).
pub fn status_header(status: DepositStatus) -> Object {
    let mut h = Object::new();
    h.insert("status", status.as_str());
    h
}

/// Reads a `status` answer.
///
/// # Errors
/// [`FrameError::Header`].
pub fn parse_status_header(header: &Object) -> Result<DepositStatus, FrameError> {
    let f = Fields(header);
    f.closed(&["status"])?;
    let text = f.str("status")?;
    DepositStatus::from_wire(text)
        .ok_or_else(|| FrameError::Header(format!("unknown status {text:?}")))
}

/// `challenge` answer (§5a.3, `PROTOCOL.md` §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChallengeAnswer {
    /// `{"verdict":"issued", "principalChallenge", "addressChallenge"?, "expiresAt"}`.
    Issued {
        /// The principal challenge (43 base64url characters on the wire).
        principal_challenge: [u8; 32],
        /// For register/rebind: the §5 envelope sealed to the rkid.
        address_challenge: Option<SealedEnvelope>,
        /// Expiry, ms since the Unix epoch.
        expires_at: u64,
    },
    /// A refusal: `{"verdict", "retriable"}`.
    Refused(Verdict),
}

impl ChallengeAnswer {
    /// The header.
    pub fn to_header(&self) -> Object {
        match self {
            ChallengeAnswer::Issued {
                principal_challenge,
                address_challenge,
                expires_at,
            } => {
                let mut h = Object::new();
                h.insert("verdict", "issued");
                h.insert("principalChallenge", b64url_encode(principal_challenge));
                if let Some(sealed) = address_challenge {
                    h.insert("addressChallenge", sealed.to_json());
                }
                h.insert("expiresAt", Number::from_u64(*expires_at));
                h
            }
            ChallengeAnswer::Refused(verdict) => verdict_header(*verdict),
        }
    }

    /// Reads the header of a challenge requested for `rkid`; a sealed
    /// address challenge must be a §5 envelope to that `rkid`.
    ///
    /// # Errors
    /// [`FrameError::Header`].
    pub fn from_header(header: &Object, rkid: &Rkid) -> Result<ChallengeAnswer, FrameError> {
        let f = Fields(header);
        if f.str("verdict")? != "issued" {
            return parse_verdict_header(header, &[]).map(|(v, _)| ChallengeAnswer::Refused(v));
        }
        f.closed(&[
            "verdict",
            "principalChallenge",
            "addressChallenge",
            "expiresAt",
        ])?;
        let principal_challenge = b64url_decode_array::<32>(f.str("principalChallenge")?)
            .map_err(|e| FrameError::Header(format!("principalChallenge: {e}")))?;
        let address_challenge = match header.get("addressChallenge") {
            None => None,
            Some(value) => {
                let bytes = rltp_proofs::jcs::canonicalize(value)
                    .map_err(|e| FrameError::Header(format!("addressChallenge: {e}")))?;
                Some(
                    check_shape(&bytes, rkid, MAX_ENVELOPE_BYTES)
                        .map_err(|e| FrameError::Header(format!("addressChallenge: {e}")))?,
                )
            }
        };
        Ok(ChallengeAnswer::Issued {
            principal_challenge,
            address_challenge,
            expires_at: f.uint1("expiresAt")?,
        })
    }
}

/// A §5a.3 verdict header: `{"verdict", "retriable"}` plus, for
/// `refused(stale-generation)`, `generation` (the held generation).
pub fn verdict_header(verdict: Verdict) -> Object {
    let mut h = Object::new();
    h.insert("verdict", verdict.as_str());
    h.insert("retriable", verdict.retriable());
    if let Verdict::StaleGeneration { held } = verdict {
        h.insert("generation", Number::from_u64(held));
    }
    h
}

/// Reads a §5a.3 verdict header with the extra members `extra` allowed;
/// returns the verdict and the header for the caller to read the extras.
///
/// # Errors
/// [`FrameError::Header`].
pub fn parse_verdict_header<'a>(
    header: &'a Object,
    extra: &[&str],
) -> Result<(Verdict, &'a Object), FrameError> {
    let f = Fields(header);
    let mut allowed = vec!["verdict", "retriable", "generation"];
    allowed.extend_from_slice(extra);
    f.closed(&allowed)?;
    let text = f.str("verdict")?;
    let verdict = match Verdict::from_wire(text) {
        Some(Verdict::StaleGeneration { .. }) => Verdict::StaleGeneration {
            held: f.uint1("generation")?,
        },
        _ if header.get("generation").is_some() => {
            return Err(FrameError::Header(format!(
                "generation with verdict {text:?}"
            )));
        }
        Some(verdict) => verdict,
        None => return Err(FrameError::Header(format!("unknown verdict {text:?}"))),
    };
    f.retriable(verdict.retriable())?;
    Ok((verdict, header))
}

/// One collected deposit's frame header: `{"deposit", "seq"}` + envelope.
pub fn deposit_header(id: &DepositId, seq: u64) -> Object {
    let mut h = Object::new();
    h.insert("deposit", id.to_multibase());
    h.insert("seq", Number::from_u64(seq));
    h
}

/// What a frame on a collect stream is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollectFrame {
    /// A deposit: id and seq; the envelope is the frame body.
    Deposit {
        /// Deposit id.
        id: DepositId,
        /// Admission-order position.
        seq: u64,
    },
    /// The end of a page (or of a watch session): the verdict, and for
    /// `served` whether more deposits follow the page.
    End {
        /// The §5a.3 verdict.
        verdict: Verdict,
        /// `Some` exactly for `served`.
        more: Option<bool>,
    },
}

/// The trailer of a collect page: `{"verdict", "retriable", "more"?}`.
pub fn collect_end_header(verdict: Verdict, more: Option<bool>) -> Object {
    let mut h = verdict_header(verdict);
    if let Some(more) = more {
        h.insert("more", more);
    }
    h
}

impl CollectFrame {
    /// Reads a collect-stream frame header.
    ///
    /// # Errors
    /// [`FrameError::Header`].
    pub fn from_header(header: &Object) -> Result<CollectFrame, FrameError> {
        let f = Fields(header);
        if header.get("deposit").is_some() {
            f.closed(&["deposit", "seq"])?;
            let id = DepositId::parse(f.str("deposit")?)
                .map_err(|e| FrameError::Header(format!("deposit id: {e}")))?;
            return Ok(CollectFrame::Deposit {
                id,
                seq: f.uint0("seq")?,
            });
        }
        let (verdict, header) = parse_verdict_header(header, &["more"])?;
        let more = Fields(header).opt_bool("more")?;
        if more.is_some() != (verdict == Verdict::Served) {
            return Err(FrameError::Header(
                "more must be present exactly for served".into(),
            ));
        }
        Ok(CollectFrame::End { verdict, more })
    }
}

/// `conclude` answer: `{"verdict", "retriable", "concluded"?}` where
/// `concluded` (for `served`) counts the named deposits that were held.
pub fn conclude_header(verdict: Verdict, concluded: Option<u64>) -> Object {
    let mut h = verdict_header(verdict);
    if let Some(n) = concluded {
        h.insert("concluded", Number::from_u64(n));
    }
    h
}

/// Reads a `conclude` answer.
///
/// # Errors
/// [`FrameError::Header`].
pub fn parse_conclude_header(header: &Object) -> Result<(Verdict, Option<u64>), FrameError> {
    let (verdict, header) = parse_verdict_header(header, &["concluded"])?;
    let concluded = Fields(header).opt_uint0("concluded")?;
    if concluded.is_some() != (verdict == Verdict::Served) {
        return Err(FrameError::Header(
            "concluded must be present exactly for served".into(),
        ));
    }
    Ok((verdict, concluded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::encode_frame;
    use rltp_proofs::json::Value;

    fn jcs(header: &Object) -> String {
        let frame = encode_frame(header, b"");
        String::from_utf8(frame[8..].to_vec()).unwrap()
    }

    fn reparse(header: &Object) -> Object {
        match split_error(jcs(header).as_bytes()).unwrap() {
            Ok(h) => h,
            Err(e) => panic!("unexpected error answer {e:?}"),
        }
    }

    #[test]
    fn direct_answer_frames_are_the_jcs_frames() {
        let id = DepositId::of(b"an envelope");
        for verdict in SubmitVerdict::ALL {
            let answer = SubmitAnswer::new(verdict, id);
            let mut direct = b"kept".to_vec();
            answer.encode_frame_into(&mut direct);
            let mut expected = b"kept".to_vec();
            expected.extend(encode_frame(&answer.to_header(), b""));
            assert_eq!(
                String::from_utf8_lossy(&direct),
                String::from_utf8_lossy(&expected),
                "{verdict}"
            );
            assert_eq!(answer.deposit.is_some(), verdict.held());
            // Read back by the fast reader, and by the strict one after a
            // respelling.
            let header = &direct[4 + crate::PREFIX_BYTES..];
            assert_eq!(SubmitAnswer::from_header_bytes(header), Ok(Ok(answer)));
            let spaced = String::from_utf8_lossy(header).replacen(':', ": ", 1);
            assert_eq!(
                SubmitAnswer::from_header_bytes(spaced.as_bytes()),
                Ok(Ok(answer))
            );
        }
        let error = ErrorAnswer {
            code: ErrorCode::Unavailable,
            detail: "x".into(),
        };
        let frame = encode_frame(&error.to_header(), b"");
        assert_eq!(
            SubmitAnswer::from_header_bytes(&frame[crate::PREFIX_BYTES..]),
            Ok(Err(error))
        );
        // A held verdict without its deposit is refused, fast path or not.
        assert!(
            SubmitAnswer::from_header_bytes(br#"{"retriable":false,"verdict":"admitted"}"#)
                .is_err()
        );
        // The one answer without a deposit for a held verdict never
        // arises, but its bytes are the JCS ones too.
        let mut direct = Vec::new();
        SubmitAnswer {
            verdict: SubmitVerdict::Bounds,
            deposit: None,
        }
        .encode_frame_into(&mut direct);
        assert_eq!(
            direct,
            encode_frame(
                &SubmitAnswer {
                    verdict: SubmitVerdict::Bounds,
                    deposit: None
                }
                .to_header(),
                b""
            )
        );
    }

    #[test]
    fn submit_answers_have_exact_bytes_and_round_trip() {
        let bytes = DepositId::of(b"{}");
        let admitted = SubmitAnswer::new(SubmitVerdict::Admitted, bytes);
        assert_eq!(
            jcs(&admitted.to_header()),
            format!(
                "{{\"deposit\":\"{}\",\"retriable\":false,\"verdict\":\"admitted\"}}",
                bytes.to_multibase()
            )
        );
        for verdict in SubmitVerdict::ALL {
            let answer = SubmitAnswer::new(verdict, bytes);
            assert_eq!(
                SubmitAnswer::from_header(&reparse(&answer.to_header())).unwrap(),
                answer
            );
        }
        assert_eq!(
            jcs(&SubmitAnswer::new(SubmitVerdict::Capacity, bytes).to_header()),
            "{\"retriable\":true,\"verdict\":\"refused(capacity)\"}"
        );
        // retriable must agree with the verdict
        let lie = parse_header(b"{\"retriable\":false,\"verdict\":\"refused(capacity)\"}").unwrap();
        assert!(SubmitAnswer::from_header(&lie).is_err());
    }

    #[test]
    fn verdicts_round_trip_with_held_generation() {
        let mut all: Vec<Verdict> = Verdict::ALL
            .into_iter()
            .filter(|v| !matches!(v, Verdict::StaleGeneration { .. }))
            .collect();
        all.push(Verdict::StaleGeneration { held: 7 });
        for verdict in all {
            let header = reparse(&verdict_header(verdict));
            assert_eq!(parse_verdict_header(&header, &[]).unwrap().0, verdict);
        }
        assert_eq!(
            jcs(&verdict_header(Verdict::StaleGeneration { held: 7 })),
            "{\"generation\":7,\"retriable\":false,\"verdict\":\"refused(stale-generation)\"}"
        );
        assert_eq!(
            jcs(&verdict_header(Verdict::RegistrationCapacity)),
            "{\"retriable\":true,\"verdict\":\"registration-refused(capacity)\"}"
        );
    }

    #[test]
    fn collect_and_conclude_frames_round_trip() {
        let id = DepositId::of(b"x");
        let frame = CollectFrame::from_header(&reparse(&deposit_header(&id, 0))).unwrap();
        assert_eq!(frame, CollectFrame::Deposit { id, seq: 0 });
        let end = collect_end_header(Verdict::Served, Some(true));
        assert_eq!(
            jcs(&end),
            "{\"more\":true,\"retriable\":false,\"verdict\":\"served\"}"
        );
        assert_eq!(
            CollectFrame::from_header(&reparse(&end)).unwrap(),
            CollectFrame::End {
                verdict: Verdict::Served,
                more: Some(true)
            }
        );
        let refused = collect_end_header(Verdict::NoSuchQueue, None);
        assert_eq!(
            CollectFrame::from_header(&reparse(&refused)).unwrap(),
            CollectFrame::End {
                verdict: Verdict::NoSuchQueue,
                more: None
            }
        );
        assert_eq!(
            parse_conclude_header(&reparse(&conclude_header(Verdict::Served, Some(0)))).unwrap(),
            (Verdict::Served, Some(0))
        );
        assert!(parse_conclude_header(&reparse(&conclude_header(Verdict::Served, None))).is_err());
    }

    #[test]
    fn status_and_errors_round_trip() {
        for status in DepositStatus::ALL {
            assert_eq!(
                parse_status_header(&reparse(&status_header(status))).unwrap(),
                status
            );
        }
        for code in ErrorCode::ALL {
            let answer = ErrorAnswer {
                code,
                detail: "d".into(),
            };
            let text = jcs(&answer.to_header());
            assert_eq!(split_error(text.as_bytes()).unwrap(), Err(answer));
        }
        for frame_error in [
            FrameError::TooLarge {
                what: "body",
                len: 2,
                max: 1,
            },
            FrameError::Truncated,
            FrameError::Header("x".into()),
            FrameError::UnknownOp("x".into()),
            FrameError::TrailingBytes,
        ] {
            assert_eq!(ErrorCode::of(&frame_error).as_str(), frame_error.code());
            let header = ErrorAnswer::of(&frame_error).to_header();
            assert_eq!(header.len(), 2);
            assert_eq!(
                header.get("error").and_then(Value::as_str),
                Some(frame_error.code())
            );
            assert_eq!(
                header.get("detail").and_then(Value::as_str),
                Some(frame_error.to_string().as_str())
            );
        }
        // A detail never echoes more than MAX_DETAIL_BYTES of the input.
        let long = ErrorAnswer::of(&FrameError::Header(format!("size: {}", "9".repeat(5_000))));
        let header = long.to_header();
        let detail = header.get("detail").and_then(Value::as_str).unwrap();
        assert_eq!(detail.len(), MAX_DETAIL_BYTES);
        assert!(detail.starts_with("bad header: size: 999"), "{detail}");
        assert!(detail.ends_with("9…"), "{detail}");
        let multibyte = "é".repeat(200);
        assert_eq!(cap_detail(&multibyte).len(), 252);
        let e = ErrorAnswer::of(&FrameError::Truncated);
        assert_eq!(
            jcs(&e.to_header()),
            "{\"detail\":\"truncated frame\",\"error\":\"truncated-frame\"}"
        );
    }

    #[test]
    fn challenge_answers_round_trip() {
        let secret = [9u8; 32];
        let rkid = Rkid::from_bytes(
            x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(secret)).to_bytes(),
        );
        let sealed = rltp_proofs::seal::seal(b"hello", &rkid, &mut rand::rng()).unwrap();
        let issued = ChallengeAnswer::Issued {
            principal_challenge: [1u8; 32],
            address_challenge: Some(sealed),
            expires_at: 1_700_000_000_000,
        };
        assert_eq!(
            ChallengeAnswer::from_header(&reparse(&issued.to_header()), &rkid).unwrap(),
            issued
        );
        let other = Rkid::from_bytes([5u8; 32]);
        assert!(ChallengeAnswer::from_header(&reparse(&issued.to_header()), &other).is_err());
        let refused = ChallengeAnswer::Refused(Verdict::AdmissionResource);
        assert_eq!(
            ChallengeAnswer::from_header(&reparse(&refused.to_header()), &rkid).unwrap(),
            refused
        );
    }
}
