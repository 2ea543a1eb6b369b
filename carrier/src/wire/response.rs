//! Response headers of the wire profile (`PROTOCOL.md` §6–§7), as pure
//! codecs: the server builds them with `to_header`, the client reads them
//! with `from_header`. Every reader is strict: a closed member set, exact
//! verdict spellings, `retriable` equal to what the verdict implies.

use super::{FrameError, parse_header};
use crate::engine::verdict::{DepositStatus, SubmitVerdict, Verdict};
use rltp_proofs::encoding::{b64url_decode_array, b64url_encode};
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, check_shape};
use rltp_proofs::json::{Number, Object, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::SealedEnvelope;
use rltp_storage::DepositId;

/// The closed set of `error` codes a stream can be answered with
/// (`PROTOCOL.md` §6). The first four are [`FrameError::code`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A length prefix above its bound; nothing of the frame was read.
    FrameTooLarge,
    /// The stream ended inside a frame.
    TruncatedFrame,
    /// The header is not strict JSON or not a valid header.
    MalformedFrame,
    /// `op` names no operation.
    UnknownOperation,
    /// A frame did not arrive within the server's read deadline.
    ReadTimeout,
    /// A second proof on a stream already authorized by one: one
    /// authorization session carries exactly one principal (§5a.3).
    SecondProof,
    /// The carrier's storage could not complete the operation; nothing
    /// changed; retry (a transport-level condition, not a verdict).
    Unavailable,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 7] = [
        ErrorCode::FrameTooLarge,
        ErrorCode::TruncatedFrame,
        ErrorCode::MalformedFrame,
        ErrorCode::UnknownOperation,
        ErrorCode::ReadTimeout,
        ErrorCode::SecondProof,
        ErrorCode::Unavailable,
    ];

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::FrameTooLarge => "frame-too-large",
            ErrorCode::TruncatedFrame => "truncated-frame",
            ErrorCode::MalformedFrame => "malformed-frame",
            ErrorCode::UnknownOperation => "unknown-operation",
            ErrorCode::ReadTimeout => "read-timeout",
            ErrorCode::SecondProof => "second-proof",
            ErrorCode::Unavailable => "unavailable",
        }
    }

    /// Parses the wire spelling.
    pub fn from_wire(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the same request may succeed later (only `unavailable`).
    pub const fn retriable(self) -> bool {
        matches!(self, ErrorCode::Unavailable)
    }

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

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
        let held = matches!(verdict, SubmitVerdict::Admitted | SubmitVerdict::Duplicate);
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
        let held = matches!(verdict, SubmitVerdict::Admitted | SubmitVerdict::Duplicate);
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
    match f.str("status")? {
        "accepted" => Ok(DepositStatus::Accepted),
        "given-up" => Ok(DepositStatus::GivenUp),
        "unknown" => Ok(DepositStatus::Unknown),
        other => Err(FrameError::Header(format!("unknown status {other:?}"))),
    }
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
            expires_at: f.uint("expiresAt")?,
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

const UNIT_VERDICTS: [Verdict; 9] = [
    Verdict::Registered,
    Verdict::RegisteredIdempotent,
    Verdict::Rebound,
    Verdict::Served,
    Verdict::NoSuchQueue,
    Verdict::PossessionFailed,
    Verdict::Malformed,
    Verdict::RegistrationCapacity,
    Verdict::AdmissionResource,
];

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
    let verdict = if text == "refused(stale-generation)" {
        Verdict::StaleGeneration {
            held: f.uint("generation")?,
        }
    } else {
        if header.get("generation").is_some() {
            return Err(FrameError::Header(format!(
                "generation with verdict {text:?}"
            )));
        }
        UNIT_VERDICTS
            .into_iter()
            .find(|v| v.as_str() == text)
            .ok_or_else(|| FrameError::Header(format!("unknown verdict {text:?}")))?
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

    fn retriable(&self, expected: bool) -> Result<(), FrameError> {
        match self.opt_bool("retriable")? {
            Some(b) if b == expected => Ok(()),
            Some(b) => Err(FrameError::Header(format!(
                "retriable {b} contradicts the verdict"
            ))),
            None => Err(FrameError::Header("retriable is required".into())),
        }
    }

    /// A canonical integer ≥ 0 (`0` allowed), at most 2^53 − 1.
    fn opt_uint0(&self, name: &str) -> Result<Option<u64>, FrameError> {
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

    fn uint0(&self, name: &str) -> Result<u64, FrameError> {
        self.opt_uint0(name)?
            .ok_or_else(|| FrameError::Header(format!("{name} is required")))
    }

    /// A canonical integer ≥ 1.
    fn uint(&self, name: &str) -> Result<u64, FrameError> {
        match self.0.get(name) {
            Some(Value::Number(n)) => rltp_proofs::constants::parse_canonical_integer(n.lexeme())
                .map_err(|e| FrameError::Header(format!("{name}: {e}"))),
            Some(other) => Err(FrameError::Header(format!(
                "{name} is a json {}",
                other.kind()
            ))),
            None => Err(FrameError::Header(format!("{name} is required"))),
        }
    }

    fn opt_deposit(&self, name: &str) -> Result<Option<DepositId>, FrameError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(_) => DepositId::parse(self.str(name)?)
                .map(Some)
                .map_err(|e| FrameError::Header(format!("{name}: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::encode_frame;

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
        let mut all = UNIT_VERDICTS.to_vec();
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
        for status in [
            DepositStatus::Accepted,
            DepositStatus::GivenUp,
            DepositStatus::Unknown,
        ] {
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
