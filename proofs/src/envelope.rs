//! §5a.5 s2: the shape-and-size check a carrier runs on submitted bytes
//! without any key ([`check_shape`]).
//!
//! A carrier may consider an envelope's shape and size against §5 (§5a.5,
//! item 2) and nothing else about it; it never decrypts. Every
//! [`ShapeError`] is the carrier verdict `refused(bounds)` (§5a.5 s2), which
//! the sender sees as `failed(oversize)` (§5a.5).

use crate::encoding::{EncodingError, b64url_decode};
use crate::json::{self, JsonError, Object};
use crate::multikey::{RKID_CHARS, Rkid, RkidText};
use crate::seal::{
    EPK_BYTES, MAX_CIPHERTEXT_BYTES, MIN_CIPHERTEXT_BYTES, NONCE_BYTES, SealedEnvelope,
};

/// Length of unpadded base64url text for `n` bytes, in characters.
const fn b64url_chars(n: usize) -> usize {
    n / 3 * 4
        + match n % 3 {
            0 => 0,
            1 => 2,
            _ => 3,
        }
}

/// Bytes of the JCS envelope that are not member values: `{` `}` (2), three
/// `,` (3), four `:` (4), sixteen `"` (16), and the member names
/// `ciphertext` `epk` `nonce` `rkid` (10 + 3 + 5 + 4 = 22): 47 bytes.
const JCS_ENVELOPE_OVERHEAD: usize = 2 + 3 + 4 + 16 + (10 + 3 + 5 + 4);

/// §5 / §5a.5 s2: the largest JCS sealed envelope, in bytes: 87 557, the one
/// a 65 536-byte plaintext produces
/// (`{"ciphertext":"<87403>","epk":"<43>","nonce":"<16>","rkid":"<48>"}`).
///
/// Arithmetic: ciphertext 65 536 + 16 = 65 552 bytes → 21 850 × 4 + 3 =
/// 87 403 base64url chars; `epk` 32 bytes → 43 chars; `nonce` 12 bytes → 16
/// chars; `rkid` 48 chars; values 87 403 + 43 + 16 + 48 = 87 510, plus the 47
/// bytes of JSON punctuation and member names = **87 557**.
pub const MAX_ENVELOPE_BYTES: usize = JCS_ENVELOPE_OVERHEAD
    + b64url_chars(MAX_CIPHERTEXT_BYTES)
    + b64url_chars(EPK_BYTES)
    + b64url_chars(NONCE_BYTES)
    + RKID_CHARS;

/// The four §5 members, in the order [`check_shape`] checks them.
const MEMBERS: [&str; 4] = ["rkid", "epk", "nonce", "ciphertext"];

/// Why submitted bytes fail the §5a.5 s2 shape-and-size check.
///
/// **Every variant is the carrier verdict `refused(bounds)`** (§5a.5 s2;
/// the sender's status `failed(oversize)`). The variants exist so that logs
/// and tests can name the failing rule; they never change the verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// The submission is larger than the bound in force; checked before any
    /// parsing.
    #[error("envelope of {len} bytes exceeds the bound of {max} bytes")]
    TooLarge {
        /// Submission length, in bytes.
        len: usize,
        /// The bound in force, in bytes.
        max: usize,
    },
    /// The bytes are not strict JSON (invalid UTF-8, duplicate key, syntax,
    /// structural limit).
    #[error("envelope is not strict json: {0}")]
    Json(#[from] JsonError),
    /// The top-level value is not an object.
    #[error("envelope is a json {kind}, not an object")]
    NotAnObject {
        /// The JSON type found.
        kind: &'static str,
    },
    /// A member other than `rkid`, `epk`, `nonce`, `ciphertext`.
    #[error("envelope has unknown member {member:?}")]
    UnknownMember {
        /// The member name, as decoded.
        member: String,
    },
    /// One of the four §5 members is absent.
    #[error("envelope lacks member {member:?}")]
    MissingMember {
        /// The absent member.
        member: &'static str,
    },
    /// One of the four §5 members is not a JSON string.
    #[error("envelope member {member:?} is a json {kind}, not a string")]
    NotAString {
        /// The member.
        member: &'static str,
        /// The JSON type found.
        kind: &'static str,
    },
    /// `rkid` is not an X25519 Multikey (`z6LS…`).
    #[error("rkid is not an x25519 multikey: {0}")]
    Rkid(EncodingError),
    /// `rkid` is a valid Multikey but not the queue the bytes were
    /// submitted to.
    #[error("rkid {rkid} does not name queue {queue}")]
    WrongQueue {
        /// The envelope's `rkid`.
        rkid: String,
        /// The queue's `rkid`.
        queue: String,
    },
    /// `epk` is not canonical unpadded base64url.
    #[error("epk is not canonical base64url: {0}")]
    EpkEncoding(EncodingError),
    /// `epk` does not decode to exactly 32 bytes.
    #[error("epk is {len} bytes, not 32")]
    EpkLength {
        /// Decoded length, in bytes.
        len: usize,
    },
    /// `nonce` is not canonical unpadded base64url.
    #[error("nonce is not canonical base64url: {0}")]
    NonceEncoding(EncodingError),
    /// `nonce` does not decode to exactly 12 bytes.
    #[error("nonce is {len} bytes, not 12")]
    NonceLength {
        /// Decoded length, in bytes.
        len: usize,
    },
    /// `ciphertext` is not canonical unpadded base64url.
    #[error("ciphertext is not canonical base64url: {0}")]
    CiphertextEncoding(EncodingError),
    /// `ciphertext` is below 17 bytes: tag-only (16 bytes, a zero-length
    /// plaintext, invalid per §5) or shorter.
    #[error("ciphertext is {len} bytes, below the minimum of 17")]
    CiphertextTooShort {
        /// Decoded length, in bytes.
        len: usize,
    },
    /// The bytes are a valid envelope but not its JCS (RFC 8785: members
    /// in the order `ciphertext`, `epk`, `nonce`, `rkid`, no whitespace, no
    /// escapes). The wire profile requires the JCS (`PROTOCOL.md` §7), so
    /// that byte identity (s3) is value identity and the size bound of s2
    /// is exact.
    #[error("envelope bytes are not its jcs (rfc 8785: sorted members, no whitespace, no escapes)")]
    NotCanonical,
    /// `ciphertext` is above 65 552 bytes (a plaintext above 65 536 bytes).
    /// Unreachable under [`MAX_ENVELOPE_BYTES`]; reachable with a larger
    /// `max_envelope_bytes`.
    #[error("ciphertext is {len} bytes, above the maximum of 65552")]
    CiphertextTooLarge {
        /// Decoded length, in bytes.
        len: usize,
    },
}

/// §5a.5 s2: checks submitted `bytes` against §5 for the queue `queue`,
/// without any key, and returns the decoded envelope.
///
/// Order (the first failure is returned):
/// 1. `bytes.len() <= max_envelope_bytes` (bytes), before parsing — pass
///    [`MAX_ENVELOPE_BYTES`] or a tighter carrier bound (above it, the strict
///    reader's frozen limits of step 2 still apply);
/// 2. strict JSON ([`crate::json::parse`]);
/// 3. a top-level object whose members are exactly `rkid`, `epk`, `nonce`,
///    `ciphertext`, all strings;
/// 4. `rkid` decodes as an X25519 Multikey and equals `queue`;
/// 5. `epk`: canonical unpadded base64url of exactly 32 bytes;
/// 6. `nonce`: canonical unpadded base64url of exactly 12 bytes;
/// 7. `ciphertext`: canonical unpadded base64url of 17..=65 552 bytes;
/// 8. `bytes` are the JCS (RFC 8785) of that object: exactly
///    `{"ciphertext":"…","epk":"…","nonce":"…","rkid":"…"}`.
///
/// Canonical base64url means: no `=` padding, no standard-alphabet `+` `/`,
/// length mod 4 ≠ 1, zero trailing bits. Requiring the JCS (a wire-profile
/// decision, `PROTOCOL.md` §7) makes byte identity (§5a.5 s3, the caller's
/// comparison on `bytes`) value identity: one envelope has one spelling, so
/// a re-serialized copy is a `duplicate`, never a second deposit, and
/// [`MAX_ENVELOPE_BYTES`] bounds every envelope exactly.
///
/// # Errors
/// One [`ShapeError`] per rule above; every one is `refused(bounds)`.
pub fn check_shape(
    bytes: &[u8],
    queue: &Rkid,
    max_envelope_bytes: usize,
) -> Result<SealedEnvelope, ShapeError> {
    if bytes.len() > max_envelope_bytes {
        return Err(ShapeError::TooLarge {
            len: bytes.len(),
            max: max_envelope_bytes,
        });
    }
    let value = json::parse(bytes)?;
    let object = value
        .as_object()
        .ok_or(ShapeError::NotAnObject { kind: value.kind() })?;
    if let Some(member) = object.keys().find(|key| !MEMBERS.contains(key)) {
        return Err(ShapeError::UnknownMember {
            member: member.to_owned(),
        });
    }
    let [rkid, epk, nonce, ciphertext] = [
        string_member(object, "rkid")?,
        string_member(object, "epk")?,
        string_member(object, "nonce")?,
        string_member(object, "ciphertext")?,
    ];

    let [rkid_text, epk_text, nonce_text, ciphertext_text] = [rkid, epk, nonce, ciphertext];
    let rkid = Rkid::parse(rkid).map_err(ShapeError::Rkid)?;
    if &rkid != queue {
        return Err(ShapeError::WrongQueue {
            rkid: rkid.to_multikey(),
            queue: queue.to_multikey(),
        });
    }
    let epk = fixed_bytes(epk, ShapeError::EpkEncoding, |len| ShapeError::EpkLength {
        len,
    })?;
    let nonce = fixed_bytes(nonce, ShapeError::NonceEncoding, |len| {
        ShapeError::NonceLength { len }
    })?;
    let ciphertext = b64url_decode(ciphertext).map_err(ShapeError::CiphertextEncoding)?;
    let len = ciphertext.len();
    if len < MIN_CIPHERTEXT_BYTES {
        return Err(ShapeError::CiphertextTooShort { len });
    }
    if len > MAX_CIPHERTEXT_BYTES {
        return Err(ShapeError::CiphertextTooLarge { len });
    }
    if !is_jcs(bytes, [ciphertext_text, epk_text, nonce_text, rkid_text]) {
        return Err(ShapeError::NotCanonical);
    }
    Ok(SealedEnvelope {
        rkid,
        epk,
        nonce,
        ciphertext,
    })
}

/// §5a.5 s2 as a yes/no, fast: [`fast_shape`] first, and only bytes it
/// does not pass go to the strict [`check_shape`]. The answer is always
/// `check_shape(bytes, queue, max_envelope_bytes).is_ok()`; the fast path
/// only saves the strict parse for the one spelling a valid envelope has
/// (the fuzz target `shape` and `proofs/tests/shape_fast.rs` keep
/// the two paths equal on every input).
pub fn passes_shape(
    bytes: &[u8],
    queue: &Rkid,
    queue_text: &RkidText,
    max_envelope_bytes: usize,
) -> bool {
    fast_shape(bytes, queue_text, max_envelope_bytes)
        || check_shape(bytes, queue, max_envelope_bytes).is_ok()
}

/// §5a.5 s2 by one scan of `bytes`, without allocating or decoding:
/// whether they are exactly
/// `{"ciphertext":"C","epk":"E","nonce":"N","rkid":"R"}` with `C`, `E`, `N`
/// canonical unpadded base64url of 17..=65 552, 32 and 12 bytes, `R` the
/// queue's Multikey text (`queue_text`, its one spelling: base58btc has no
/// other, so comparing the text decides what decoding both would), and at
/// most `max_envelope_bytes` (and the strict reader's whole-input ceiling)
/// long. That is the only spelling [`check_shape`] accepts, so `true`
/// here is `Ok` there; `false` means "ask [`check_shape`]"
/// ([`passes_shape`]).
pub fn fast_shape(bytes: &[u8], queue_text: &RkidText, max_envelope_bytes: usize) -> bool {
    if bytes.len() > max_envelope_bytes || bytes.len() > json::MAX_TOTAL_BYTES {
        return false;
    }
    let mut rest = bytes;
    let b64 = |rest: &mut &[u8], lead: &[u8]| {
        strip(rest, lead)
            .then(|| b64url_canonical_len(rest))
            .flatten()
    };
    b64(&mut rest, b"{\"ciphertext\":\"")
        .is_some_and(|n| (MIN_CIPHERTEXT_BYTES..=MAX_CIPHERTEXT_BYTES).contains(&n))
        && b64(&mut rest, b"\",\"epk\":\"") == Some(EPK_BYTES)
        && b64(&mut rest, b"\",\"nonce\":\"") == Some(NONCE_BYTES)
        && strip(&mut rest, b"\",\"rkid\":\"")
        && strip(&mut rest, queue_text.as_str().as_bytes())
        && rest == b"\"}"
}

/// Advances `rest` past `piece` if it starts with it.
fn strip(rest: &mut &[u8], piece: &[u8]) -> bool {
    match rest.strip_prefix(piece) {
        Some(after) => {
            *rest = after;
            true
        }
        None => false,
    }
}

/// Scans canonical unpadded base64url at the start of `rest` up to the
/// first byte outside the alphabet, advances `rest` past it, and returns
/// the decoded length; `None` if the text is not canonical (length mod
/// 4 = 1, or non-zero trailing bits).
fn b64url_canonical_len(rest: &mut &[u8]) -> Option<usize> {
    let text = *rest;
    let n = text
        .iter()
        .position(|&b| b64url_value(b).is_none())
        .unwrap_or(text.len());
    *rest = &text[n..];
    let last = match n.checked_sub(1) {
        Some(i) => text.get(i).copied().and_then(b64url_value),
        None => None,
    };
    let (extra, trailing_mask) = match n % 4 {
        0 => (0, 0),
        2 => (1, 0x0f),
        3 => (2, 0x03),
        _ => return None,
    };
    if trailing_mask != 0 && last.is_none_or(|v| v & trailing_mask != 0) {
        return None;
    }
    Some(n / 4 * 3 + extra)
}

/// The 6-bit value of a base64url character, `None` outside the alphabet:
/// one load from [`B64URL_VALUES`] (the s2 fast path runs it over every
/// byte of every ciphertext; a chain of range comparisons per byte was the
/// carrier's largest user-space cost in the 2026-12-01 profile).
const fn b64url_value(b: u8) -> Option<u8> {
    match B64URL_VALUES[b as usize] {
        NOT_B64URL => None,
        v => Some(v),
    }
}

/// [`B64URL_VALUES`]' mark for a byte outside the alphabet.
const NOT_B64URL: u8 = 0xff;

/// The base64url alphabet (RFC 4648 §5) as a table: each byte's 6-bit
/// value, [`NOT_B64URL`] outside the alphabet.
const B64URL_VALUES: [u8; 256] = {
    let mut table = [NOT_B64URL; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut i = 0;
    while i < alphabet.len() {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Whether `bytes` are exactly the JCS of the envelope object whose member
/// values (in JCS order: `ciphertext`, `epk`, `nonce`, `rkid`) are
/// `values`. Each value has passed its encoding check (base64url or
/// base58btc: no character JCS escapes), so its JCS is the text itself.
fn is_jcs(bytes: &[u8], values: [&str; 4]) -> bool {
    const NAMES: [&str; 4] = ["ciphertext", "epk", "nonce", "rkid"];
    let mut rest = bytes;
    let mut take = |piece: &[u8]| match rest.strip_prefix(piece) {
        Some(after) => {
            rest = after;
            true
        }
        None => false,
    };
    for (i, (name, value)) in NAMES.iter().zip(values).enumerate() {
        let lead: &[u8] = if i == 0 { b"{\"" } else { b",\"" };
        if !(take(lead)
            && take(name.as_bytes())
            && take(b"\":\"")
            && take(value.as_bytes())
            && take(b"\""))
        {
            return false;
        }
    }
    take(b"}") && rest.is_empty()
}

/// The string value of a required §5 member.
fn string_member<'a>(object: &'a Object, member: &'static str) -> Result<&'a str, ShapeError> {
    let value = object
        .get(member)
        .ok_or(ShapeError::MissingMember { member })?;
    value.as_str().ok_or(ShapeError::NotAString {
        member,
        kind: value.kind(),
    })
}

/// Canonical base64url of exactly `N` bytes.
fn fixed_bytes<const N: usize>(
    text: &str,
    encoding: fn(EncodingError) -> ShapeError,
    length: fn(usize) -> ShapeError,
) -> Result<[u8; N], ShapeError> {
    let bytes = b64url_decode(text).map_err(encoding)?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| length(bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base64url_table_is_rfc_4648_section_5() {
        for b in 0..=255u8 {
            let expected = match b {
                b'A'..=b'Z' => Some(b - b'A'),
                b'a'..=b'z' => Some(b - b'a' + 26),
                b'0'..=b'9' => Some(b - b'0' + 52),
                b'-' => Some(62),
                b'_' => Some(63),
                _ => None,
            };
            assert_eq!(b64url_value(b), expected, "byte {b:#04x}");
        }
    }

    #[test]
    fn b64url_chars_matches_unpadded_lengths() {
        for (n, chars) in [(0, 0), (1, 2), (2, 3), (3, 4), (12, 16), (16, 22), (17, 23)] {
            assert_eq!(b64url_chars(n), chars, "{n} bytes");
        }
        assert_eq!(b64url_chars(EPK_BYTES), 43);
        assert_eq!(b64url_chars(NONCE_BYTES), 16);
        assert_eq!(b64url_chars(MAX_CIPHERTEXT_BYTES), 87_403);
        for n in 0..300 {
            assert_eq!(
                b64url_chars(n),
                crate::encoding::b64url_encode(&vec![0; n]).len()
            );
        }
    }

    /// Step 8: only the JCS spelling passes; every other spelling of the
    /// same valid object is `NotCanonical` (so `refused(bounds)`).
    #[test]
    fn only_the_jcs_spelling_passes() {
        let rkid = Rkid::from_bytes([7; 32]);
        let jcs = SealedEnvelope {
            rkid,
            epk: [1; 32],
            nonce: [2; 12],
            ciphertext: vec![3; 40],
        }
        .to_bytes();
        let text = String::from_utf8(jcs.clone()).unwrap();
        assert!(check_shape(&jcs, &rkid, MAX_ENVELOPE_BYTES).is_ok());
        let epk = crate::encoding::b64url_encode(&[1; 32]);
        let first = epk.chars().next().unwrap();
        let escaped = epk.replacen(first, &format!("\\u{:04x}", first as u32), 1);
        let reordered = {
            let v = json::parse(&jcs).unwrap();
            let o = v.as_object().unwrap();
            let s = |k: &str| o.get(k).unwrap().as_str().unwrap().to_owned();
            format!(
                "{{\"rkid\":\"{}\",\"epk\":\"{}\",\"nonce\":\"{}\",\"ciphertext\":\"{}\"}}",
                s("rkid"),
                s("epk"),
                s("nonce"),
                s("ciphertext")
            )
        };
        for (name, spelling) in [
            ("leading space", format!(" {text}")),
            ("trailing newline", format!("{text}\n")),
            ("space after a colon", text.replacen("\":\"", "\": \"", 1)),
            ("reordered members", reordered),
            ("escaped character", text.replacen(&epk, &escaped, 1)),
        ] {
            assert_ne!(spelling, text, "{name}");
            assert_eq!(
                check_shape(spelling.as_bytes(), &rkid, MAX_ENVELOPE_BYTES),
                Err(ShapeError::NotCanonical),
                "{name}"
            );
        }
    }

    #[test]
    fn max_envelope_bytes_is_87557() {
        assert_eq!(JCS_ENVELOPE_OVERHEAD, 47);
        assert_eq!(MAX_ENVELOPE_BYTES, 87_557);
    }

    #[test]
    fn error_display_is_lowercase() {
        let samples = [
            ShapeError::TooLarge {
                len: 87_558,
                max: 87_557,
            },
            ShapeError::NotAnObject { kind: "array" },
            ShapeError::UnknownMember { member: "x".into() },
            ShapeError::MissingMember { member: "epk" },
            ShapeError::NotAString {
                member: "nonce",
                kind: "number",
            },
            ShapeError::EpkLength { len: 31 },
            ShapeError::NonceLength { len: 11 },
            ShapeError::CiphertextTooShort { len: 16 },
            ShapeError::CiphertextTooLarge { len: 65_553 },
            ShapeError::NotCanonical,
        ];
        for e in samples {
            let text = e.to_string();
            assert_eq!(text, text.to_lowercase(), "{text}");
        }
        assert_eq!(
            ShapeError::TooLarge {
                len: 87_558,
                max: 87_557
            }
            .to_string(),
            "envelope of 87558 bytes exceeds the bound of 87557 bytes"
        );
    }
}
