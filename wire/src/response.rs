//! Response headers of the wire profile (`PROTOCOL.md` §6–§7), as pure
//! codecs: the server builds them with `to_header`, the client reads them
//! with `from_header`. Every reader is strict: a closed member set, exact
//! verdict spellings, `retriable` equal to what the verdict implies.
//! Every set of spellings is one table ([`crate::verdict`], [`ErrorCode`]).
//!
//! The carrier writes its answers with the `encode_*_into` encoders: the
//! JCS bytes of the matching `*_header` (the reference, and the fallback
//! for an integer above 2^53), written directly without a JSON tree or a
//! JCS pass (`crate::direct`). The client reads the frames it meets many
//! of ([`SubmitAnswer`], [`CollectFrame`]) with `from_header_bytes`: the
//! carrier's spelling is recognised by re-encoding a candidate and
//! comparing bytes, anything else goes through the strict reader.

use crate::closed_set::closed_set;
use crate::direct::{self, Flat};
use crate::fields::Fields;
use crate::frame::{FrameError, PREFIX_BYTES, encode_frame, parse_header};
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
        h.insert("detail", self.wire_detail().into_owned());
        h
    }

    /// `detail` as sent: capped at [`MAX_DETAIL_BYTES`], ending `…` when cut.
    fn wire_detail(&self) -> std::borrow::Cow<'_, str> {
        let capped = cap_detail(&self.detail);
        if capped.len() < self.detail.len() {
            format!("{capped}…").into()
        } else {
            self.detail.as_str().into()
        }
    }

    /// Appends this answer as a whole frame to `out`: the bytes of
    /// [`encode_frame`] of [`ErrorAnswer::to_header`], written directly
    /// (`detail` escaped as RFC 8785 §3.2.2.2 escapes it).
    pub fn encode_frame_into(&self, out: &mut Vec<u8>) {
        let detail = self.wire_detail();
        direct::frame_into(
            out,
            &mut [
                ("detail", Some(Flat::Str(&detail))),
                ("error", Some(Flat::Str(self.code.as_str()))),
            ],
            b"",
            || self.to_header(),
        );
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
    /// `out`: the bytes of [`encode_frame`] of [`SubmitAnswer::to_header`],
    /// written directly, without a JSON tree or a JCS pass;
    /// `tests::direct_answer_frames_are_the_jcs_frames` keeps the bytes
    /// equal for every verdict.
    pub fn encode_frame_into(&self, out: &mut Vec<u8>) {
        let deposit = self.deposit.as_ref().map(DepositId::to_multibase);
        direct::frame_into(
            out,
            &mut [
                ("deposit", deposit.as_deref().map(Flat::Str)),
                ("retriable", Some(Flat::Bool(self.verdict.retriable()))),
                ("verdict", Some(Flat::Str(self.verdict.as_str()))),
            ],
            b"",
            || self.to_header(),
        );
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
        fast_or_strict(
            bytes,
            SubmitAnswer::guess,
            SubmitAnswer::encode_frame_into,
            SubmitAnswer::from_header,
        )
    }

    /// The answer `bytes` would be if they were spelled as the carrier
    /// writes them (checked by the caller).
    fn guess(bytes: &[u8]) -> Option<SubmitAnswer> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (_, verdict) = text.rsplit_once("\"verdict\":\"")?;
        let verdict = SubmitVerdict::from_wire(verdict.strip_suffix("\"}")?)?;
        let deposit = match text.strip_prefix("{\"deposit\":\"") {
            Some(rest) => Some(DepositId::from_wire(rest.split_once('"')?.0).ok()?),
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

/// Whether `header` is exactly the header of the frame `encode` writes
/// (the check of a fast reader's candidate).
fn spelled(header: &[u8], encode: impl FnOnce(&mut Vec<u8>)) -> bool {
    let mut again = Vec::with_capacity(PREFIX_BYTES + header.len());
    encode(&mut again);
    again.get(PREFIX_BYTES..) == Some(header)
}

/// A fast reader: the candidate `guess` reads from `bytes` if `encode`
/// spells it as exactly `bytes`, else the strict path ([`split_error`],
/// then `strict`), so every answer and error is the strict path's.
fn fast_or_strict<T>(
    bytes: &[u8],
    guess: impl FnOnce(&[u8]) -> Option<T>,
    encode: impl FnOnce(&T, &mut Vec<u8>),
    strict: impl FnOnce(&Object) -> Result<T, FrameError>,
) -> Result<Result<T, ErrorAnswer>, FrameError> {
    if let Some(candidate) = guess(bytes)
        && spelled(bytes, |out| encode(&candidate, out))
    {
        return Ok(Ok(candidate));
    }
    match split_error(bytes)? {
        Ok(header) => strict(&header).map(Ok),
        Err(error) => Ok(Err(error)),
    }
}

/// `status` answer (§5a.8, §6.1).
pub fn status_header(status: DepositStatus) -> Object {
    let mut h = Object::new();
    h.insert("status", status.as_str());
    h
}

/// Appends the `status` answer frame to `out`: the bytes of
/// [`encode_frame`] of [`status_header`], written directly.
pub fn encode_status_into(status: DepositStatus, out: &mut Vec<u8>) {
    direct::frame_into(
        out,
        &mut [("status", Some(Flat::Str(status.as_str())))],
        b"",
        || status_header(status),
    );
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

    /// Appends this answer as a whole frame to `out`: the bytes of
    /// [`encode_frame`] of [`ChallengeAnswer::to_header`]; a refusal is
    /// written directly ([`encode_verdict_into`]), an issued challenge
    /// (which nests the sealed envelope) by the JCS path.
    pub fn encode_frame_into(&self, out: &mut Vec<u8>) {
        match self {
            ChallengeAnswer::Refused(verdict) => encode_verdict_into(*verdict, out),
            ChallengeAnswer::Issued { .. } => out.extend(encode_frame(&self.to_header(), b"")),
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

/// Appends the frame of a §5a.3 verdict header ([`verdict_header`]) with
/// one optional extra member `extra` and `body` to `out`, directly;
/// `reference` is the header it equals.
fn verdict_frame_into(
    out: &mut Vec<u8>,
    verdict: Verdict,
    extra: (&'static str, Option<Flat<'_>>),
    body: &[u8],
    reference: impl FnOnce() -> Object,
) {
    let generation = match verdict {
        Verdict::StaleGeneration { held } => Some(Flat::Uint(held)),
        _ => None,
    };
    direct::frame_into(
        out,
        &mut [
            ("verdict", Some(Flat::Str(verdict.as_str()))),
            ("retriable", Some(Flat::Bool(verdict.retriable()))),
            ("generation", generation),
            extra,
        ],
        body,
        reference,
    );
}

/// Appends the frame of [`verdict_header`] (the `register` answer) to
/// `out`: its [`encode_frame`] bytes, written directly.
pub fn encode_verdict_into(verdict: Verdict, out: &mut Vec<u8>) {
    verdict_frame_into(out, verdict, ("more", None), b"", || {
        verdict_header(verdict)
    });
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

/// Appends one collected deposit's frame (`{"deposit", "seq"}` + the
/// envelope) to `out`: the bytes of [`encode_frame`] of
/// [`deposit_header`] and `envelope`, written directly (a `seq` above
/// 2^53, which never arises, by the JCS path).
pub fn encode_deposit_frame_into(id: &DepositId, seq: u64, envelope: &[u8], out: &mut Vec<u8>) {
    let multibase = id.to_multibase();
    direct::frame_into(
        out,
        &mut [
            ("deposit", Some(Flat::Str(&multibase))),
            ("seq", Some(Flat::Uint(seq))),
        ],
        envelope,
        || deposit_header(id, seq),
    );
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

/// Appends the frame of [`collect_end_header`] to `out`: its
/// [`encode_frame`] bytes, written directly.
pub fn encode_collect_end_into(verdict: Verdict, more: Option<bool>, out: &mut Vec<u8>) {
    verdict_frame_into(out, verdict, ("more", more.map(Flat::Bool)), b"", || {
        collect_end_header(verdict, more)
    });
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
            let id = DepositId::from_wire(f.str("deposit")?)
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

    /// Appends this frame's header, with `envelope` for a deposit (empty
    /// for an end), as the carrier writes it.
    fn encode_into(&self, envelope: &[u8], out: &mut Vec<u8>) {
        match *self {
            CollectFrame::Deposit { id, seq } => encode_deposit_frame_into(&id, seq, envelope, out),
            CollectFrame::End { verdict, more } => encode_collect_end_into(verdict, more, out),
        }
    }

    /// Reads a collect-stream frame header from its bytes: a closed error
    /// answer, or a frame as [`CollectFrame::from_header`] reads it. The
    /// spelling the carrier writes ([`encode_deposit_frame_into`],
    /// [`encode_collect_end_into`]) is recognised by re-encoding a
    /// candidate and comparing bytes (no JSON tree); anything else goes
    /// through the strict reader, so every frame and error is the strict
    /// path's (the `shape` fuzz target holds the two to the same answer).
    ///
    /// # Errors
    /// As [`split_error`] and [`CollectFrame::from_header`].
    pub fn from_header_bytes(
        bytes: &[u8],
    ) -> Result<Result<CollectFrame, ErrorAnswer>, FrameError> {
        fast_or_strict(
            bytes,
            CollectFrame::guess,
            |frame, out| frame.encode_into(b"", out),
            CollectFrame::from_header,
        )
    }

    /// The frame `bytes` would be if they were spelled as the carrier
    /// writes them (checked by the caller); integers only in the strict
    /// reader's range.
    fn guess(bytes: &[u8]) -> Option<CollectFrame> {
        let text = std::str::from_utf8(bytes).ok()?;
        if let Some(rest) = text.strip_prefix("{\"deposit\":\"") {
            let (id, seq) = rest.split_once("\",\"seq\":")?;
            let seq = crate::fields::uint0(seq.strip_suffix('}')?).ok()?;
            let id = DepositId::from_wire(id).ok()?;
            return Some(CollectFrame::Deposit { id, seq });
        }
        let (head, verdict) = text.rsplit_once("\"verdict\":\"")?;
        let verdict = match Verdict::from_wire(verdict.strip_suffix("\"}")?)? {
            Verdict::StaleGeneration { .. } => {
                let (held, _) = head.strip_prefix("{\"generation\":")?.split_once(',')?;
                Verdict::StaleGeneration {
                    held: rltp_proofs::constants::parse_canonical_integer(held).ok()?,
                }
            }
            verdict => verdict,
        };
        let more = (verdict == Verdict::Served).then(|| head.starts_with("{\"more\":true"));
        Some(CollectFrame::End { verdict, more })
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

/// Appends the frame of [`conclude_header`] to `out`: its
/// [`encode_frame`] bytes, written directly.
pub fn encode_conclude_into(verdict: Verdict, concluded: Option<u64>, out: &mut Vec<u8>) {
    verdict_frame_into(
        out,
        verdict,
        ("concluded", concluded.map(Flat::Uint)),
        b"",
        || conclude_header(verdict, concluded),
    );
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
            let header = &direct[4 + PREFIX_BYTES..];
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
            SubmitAnswer::from_header_bytes(&frame[PREFIX_BYTES..]),
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

    /// Every verdict §5a.3 can answer, the stale generation at the edges
    /// of the direct writer's range.
    fn every_verdict() -> Vec<Verdict> {
        let mut all: Vec<Verdict> = Verdict::ALL
            .into_iter()
            .filter(|v| !matches!(v, Verdict::StaleGeneration { .. }))
            .collect();
        for held in [1, 7, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, u64::MAX] {
            all.push(Verdict::StaleGeneration { held });
        }
        all
    }

    /// The integers the direct writer meets: both ends of its exact range
    /// and past it.
    const EDGES: [u64; 8] = [0, 1, 9, 10, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, u64::MAX];

    /// `encode` appends to what `out` holds, and its bytes are `expected`.
    fn same(encode: impl FnOnce(&mut Vec<u8>), expected: Vec<u8>, what: &str) {
        let mut direct = b"kept".to_vec();
        encode(&mut direct);
        let mut want = b"kept".to_vec();
        want.extend(expected);
        assert_eq!(
            String::from_utf8_lossy(&direct),
            String::from_utf8_lossy(&want),
            "{what}"
        );
    }

    #[test]
    fn every_direct_encoder_writes_the_jcs_frame() {
        let id = DepositId::of(b"an envelope");
        for status in DepositStatus::ALL {
            same(
                |out| encode_status_into(status, out),
                encode_frame(&status_header(status), b""),
                status.as_str(),
            );
        }
        for verdict in every_verdict() {
            let what = format!("{verdict:?}");
            same(
                |out| encode_verdict_into(verdict, out),
                encode_frame(&verdict_header(verdict), b""),
                &what,
            );
            same(
                |out| ChallengeAnswer::Refused(verdict).encode_frame_into(out),
                encode_frame(&ChallengeAnswer::Refused(verdict).to_header(), b""),
                &what,
            );
            for more in [None, Some(false), Some(true)] {
                same(
                    |out| encode_collect_end_into(verdict, more, out),
                    encode_frame(&collect_end_header(verdict, more), b""),
                    &format!("{what} {more:?}"),
                );
            }
            for concluded in [None].into_iter().chain(EDGES.map(Some)) {
                same(
                    |out| encode_conclude_into(verdict, concluded, out),
                    encode_frame(&conclude_header(verdict, concluded), b""),
                    &format!("{what} {concluded:?}"),
                );
            }
        }
        for seq in EDGES {
            for envelope in [&b""[..], b"{\"sealed\":1}", &[0xff; 300]] {
                same(
                    |out| encode_deposit_frame_into(&id, seq, envelope, out),
                    encode_frame(&deposit_header(&id, seq), envelope),
                    &format!("deposit {seq}"),
                );
            }
        }
        let issued = ChallengeAnswer::Issued {
            principal_challenge: [3; 32],
            address_challenge: None,
            expires_at: 1_700_000_000_000,
        };
        same(
            |out| issued.encode_frame_into(out),
            encode_frame(&issued.to_header(), b""),
            "issued",
        );
        // Error answers: every code, details with everything JSON escapes,
        // and one cut at MAX_DETAIL_BYTES.
        let details = [
            String::new(),
            "truncated frame".into(),
            "quote \" backslash \\ slash /".into(),
            (0u8..0x20).map(char::from).collect(),
            "\u{7f} \u{80} \u{2028} \u{2029} é € 😀 \u{feff}".into(),
            format!("size: {}", "9".repeat(5_000)),
            "\n".repeat(300),
            "é".repeat(200),
        ];
        for code in ErrorCode::ALL {
            for detail in &details {
                let answer = ErrorAnswer {
                    code,
                    detail: detail.clone(),
                };
                same(
                    |out| answer.encode_frame_into(out),
                    encode_frame(&answer.to_header(), b""),
                    &format!("{code} {detail:?}"),
                );
            }
        }
    }

    /// The collect frames the carrier writes are read by the fast path to
    /// the strict reader's value; a respelling goes to the strict reader
    /// and reads the same; a frame the strict reader refuses is refused.
    #[test]
    fn collect_frames_read_from_bytes_are_the_strict_readers() {
        fn strict(bytes: &[u8]) -> Result<Result<CollectFrame, ErrorAnswer>, FrameError> {
            match split_error(bytes)? {
                Ok(header) => CollectFrame::from_header(&header).map(Ok),
                Err(error) => Ok(Err(error)),
            }
        }
        let id = DepositId::of(b"an envelope");
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for seq in EDGES {
            let mut out = Vec::new();
            encode_deposit_frame_into(&id, seq, b"", &mut out);
            frames.push(out);
        }
        for verdict in every_verdict() {
            for more in [None, Some(false), Some(true)] {
                let mut out = Vec::new();
                encode_collect_end_into(verdict, more, &mut out);
                frames.push(out);
            }
        }
        let mut error = Vec::new();
        ErrorAnswer {
            code: ErrorCode::Unavailable,
            detail: "carrier storage unavailable \"x\"".into(),
        }
        .encode_frame_into(&mut error);
        frames.push(error);
        let mut accepted = 0;
        for frame in &frames {
            let header = &frame[PREFIX_BYTES..];
            let fast = CollectFrame::from_header_bytes(header);
            assert_eq!(fast, strict(header), "{}", String::from_utf8_lossy(header));
            let spaced = String::from_utf8_lossy(header).replacen(':', ": ", 1);
            assert_eq!(CollectFrame::from_header_bytes(spaced.as_bytes()), fast);
            // What the strict reader accepts, the fast path recognised.
            if let Ok(Ok(value)) = fast {
                let guessed = CollectFrame::guess(header);
                assert_eq!(guessed, Some(value.clone()));
                assert!(spelled(header, |out| value.encode_into(b"", out)));
                accepted += 1;
            }
        }
        // Refused by both, though spelled as the carrier would spell them:
        // 3 seqs beyond 2^53 − 1; served without `more` (1); the 8 other
        // verdicts with `more` (16); the stale generation with `more` for
        // 3 good generations (6) and in all 3 forms for 3 bad ones (9);
        // and the error answer, read as one.
        assert_eq!(frames.len() - accepted, 3 + 1 + 16 + 6 + 9 + 1);
        assert!(matches!(
            CollectFrame::from_header_bytes(&frames[frames.len() - 1][PREFIX_BYTES..]),
            Ok(Err(ErrorAnswer {
                code: ErrorCode::Unavailable,
                ..
            }))
        ));
        assert_eq!(
            CollectFrame::from_header_bytes(&frames[1][PREFIX_BYTES..]),
            Ok(Ok(CollectFrame::Deposit { id, seq: 1 }))
        );
        for refused in [
            &br#"{"more":true,"retriable":false,"verdict":"refused(malformed)"}"#[..],
            br#"{"retriable":false,"verdict":"served"}"#,
            br#"{"deposit":"x","seq":1}"#,
            br#"{"deposit":"uEiA","seq":01}"#,
            br#"{"generation":0,"retriable":false,"verdict":"refused(stale-generation)"}"#,
            br#"{"retriable":true,"verdict":"served","more":true}"#,
        ] {
            assert!(CollectFrame::from_header_bytes(refused).is_err());
            assert!(strict(refused).is_err());
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
