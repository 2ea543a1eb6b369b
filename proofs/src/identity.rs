//! Identity §7a (client side): the carrier controller identifier `C`
//! (§7a.2), the carrier-nonce `generation` lexeme (§7a.3) and the
//! per-(relationship × carrier) derivation `carrierSeed(C, N)` (§7a.4),
//! with its two adapter-scoped siblings (Identity §13).
//!
//! Order of use, as §7a.2 requires: validate `C` into a [`CarrierId`]
//! first — there is no other way to obtain one — and only then derive.
//! A failed input has no principal.
//!
//! This class is Ed25519-only (§7a.1): no X25519 key is derived here.

use std::fmt;
use std::str::FromStr;

use ed25519_dalek::SigningKey;
use hkdf::Hkdf;
use sha2::Sha256;

use crate::encoding::digest_multibase;
use crate::multikey::DidKey;

/// Identity §7a.4: the literal prefix of the control-principal family,
/// `carrierSeed(C, N)`. ASCII, 40 bytes, no variable part.
pub const CARRIER_RELATIONSHIP_PREFIX: &str = "rltp/v1/carrier-relationship/ed25519/v1/";

/// Identity §7a.4 / §13: the literal prefix of the adapter-scoped
/// *connection* identity (same `Dc ‖ Dn` form as the control principal).
pub const CARRIER_CONNECTION_PREFIX: &str = "rltp/v1/carrier-connection/ed25519/v1/";

/// Identity §7a.4 / §13: the literal prefix of the adapter-scoped
/// *egress* identity (same `Dc ‖ Dn` form as the control principal).
pub const CARRIER_EGRESS_PREFIX: &str = "rltp/v1/carrier-egress/ed25519/v1/";

/// Identity §7a.2 step 3: the largest accepted carrier identifier, in
/// UTF-8 bytes (the smallest is 1).
pub const CARRIER_ID_MAX_BYTES: usize = 1024;

/// Identity §7a.3: the smallest valid carrier-nonce `generation`.
pub const GENERATION_MIN: u64 = 1;

/// Identity §7a.3: the largest valid carrier-nonce `generation`,
/// `2^53 − 1` (9 007 199 254 740 991).
pub const GENERATION_MAX: u64 = crate::constants::MAX_SAFE_INTEGER;

/// Identity §7a.2 step 4: the Unicode 15.0 property ranges, pinned as
/// data (copied from `identity-derivation.json`
/// `carrierRelationship.identifierGrammar.unicodePin`). Step 4 is
/// evaluated against these tables and never against the runtime's own
/// Unicode tables (`char::is_whitespace`, `char::is_control`), because
/// `Cf` grows between Unicode versions and the shipped ranges govern.
///
/// Each entry is an inclusive range `(first, last)` of code points,
/// sorted ascending and non-overlapping.
pub mod unicode_pin {
    /// The Unicode version the tables below pin (Identity §7a.2 step 4).
    pub const VERSION: &str = "15.0";

    /// General category `Cc` (control): fixed for all time, given as
    /// data for completeness, as the vector does.
    pub const CC: &[(u32, u32)] = &[(0x0000, 0x001F), (0x007F, 0x009F)];

    /// General category `Cf` (format), Unicode 15.0.
    pub const CF: &[(u32, u32)] = &[
        (0x00AD, 0x00AD),
        (0x0600, 0x0605),
        (0x061C, 0x061C),
        (0x06DD, 0x06DD),
        (0x070F, 0x070F),
        (0x0890, 0x0891),
        (0x08E2, 0x08E2),
        (0x180E, 0x180E),
        (0x200B, 0x200F),
        (0x202A, 0x202E),
        (0x2060, 0x2064),
        (0x2066, 0x206F),
        (0xFEFF, 0xFEFF),
        (0xFFF9, 0xFFFB),
        (0x110BD, 0x110BD),
        (0x110CD, 0x110CD),
        (0x13430, 0x1343F),
        (0x1BCA0, 0x1BCA3),
        (0x1D173, 0x1D17A),
        (0xE0001, 0xE0001),
        (0xE0020, 0xE007F),
    ];

    /// Binary property `White_Space`, Unicode 15.0.
    pub const WHITE_SPACE: &[(u32, u32)] = &[
        (0x0009, 0x000D),
        (0x0020, 0x0020),
        (0x0085, 0x0085),
        (0x00A0, 0x00A0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
    ];

    /// Whether `c` lies in one of the sorted inclusive `ranges`.
    pub(crate) fn contains(ranges: &[(u32, u32)], c: char) -> bool {
        let cp = u32::from(c);
        ranges
            .binary_search_by(|&(first, last)| {
                if last < cp {
                    std::cmp::Ordering::Less
                } else if first > cp {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }
}

/// Identity §7a.2 step 4: the pinned property a rejected code point
/// belongs to. Where a code point has several (U+0009 is both `Cc` and
/// `White_Space`), the first in the order `Cc`, `Cf`, `White_Space` is
/// reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForbiddenClass {
    /// General category `Cc` (control), [`unicode_pin::CC`].
    Cc,
    /// General category `Cf` (format), [`unicode_pin::CF`].
    Cf,
    /// Binary property `White_Space`, [`unicode_pin::WHITE_SPACE`].
    WhiteSpace,
}

impl ForbiddenClass {
    /// The Unicode property name, byte-exact: `Cc`, `Cf`, `White_Space`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ForbiddenClass::Cc => "Cc",
            ForbiddenClass::Cf => "Cf",
            ForbiddenClass::WhiteSpace => "White_Space",
        }
    }

    /// Identity §7a.2 step 4 for one code point, against the pinned
    /// Unicode 15.0 tables: `Some(class)` if `c` is forbidden anywhere in
    /// a carrier identifier, `None` if it is allowed.
    pub fn of(c: char) -> Option<ForbiddenClass> {
        if unicode_pin::contains(unicode_pin::CC, c) {
            Some(ForbiddenClass::Cc)
        } else if unicode_pin::contains(unicode_pin::CF, c) {
            Some(ForbiddenClass::Cf)
        } else if unicode_pin::contains(unicode_pin::WHITE_SPACE, c) {
            Some(ForbiddenClass::WhiteSpace)
        } else {
            None
        }
    }
}

impl fmt::Display for ForbiddenClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identity §7a.2: why a configured carrier identifier was rejected.
/// Each variant names the failing step of the ordered pipeline (see
/// [`CarrierIdError::step`]), because the value is one an operator
/// typed or pasted. A rejected input has no principal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CarrierIdError {
    /// Step 1: the bytes are not well-formed UTF-8 (over-long form,
    /// surrogate code point, truncated or stray continuation byte,
    /// code point above U+10FFFF). Rejected, never repaired.
    #[error(
        "carrier identifier rejected at step 1 (unicode scalar values): invalid utf-8 at byte offset {offset}"
    )]
    InvalidUtf8 {
        /// Byte offset of the first ill-formed sequence.
        offset: usize,
    },
    /// Step 3: the identifier is empty or longer than
    /// [`CARRIER_ID_MAX_BYTES`] UTF-8 bytes.
    #[error("carrier identifier rejected at step 3 (length): {len} utf-8 bytes, allowed 1..=1024")]
    Length {
        /// The length in UTF-8 bytes.
        len: usize,
    },
    /// Step 4: a `Cc`, `Cf` or `White_Space` code point (Unicode 15.0,
    /// pinned in [`unicode_pin`]) occurs in the identifier — leading,
    /// trailing or interior.
    #[error(
        "carrier identifier rejected at step 4 (no Cc, Cf or White_Space): U+{code_point:04X} ({class}) at byte offset {offset}",
        code_point = u32::from(*.code_point)
    )]
    ForbiddenCodePoint {
        /// The offending code point.
        code_point: char,
        /// The pinned property it belongs to.
        class: ForbiddenClass,
        /// Its byte offset in the UTF-8 string.
        offset: usize,
    },
}

impl CarrierIdError {
    /// The number of the Identity §7a.2 pipeline step that failed
    /// (1, 3 or 4; step 2 — "no normalization" — cannot fail).
    pub const fn step(&self) -> u8 {
        match self {
            CarrierIdError::InvalidUtf8 { .. } => 1,
            CarrierIdError::Length { .. } => 3,
            CarrierIdError::ForbiddenCodePoint { .. } => 4,
        }
    }
}

/// Identity §7a.2: a validated carrier controller identifier `C`.
///
/// The only ways to obtain one run the full ordered pipeline
/// ([`CarrierId::from_bytes`], [`FromStr`]). The accepted input **is**
/// the canonical string (step 5): it is stored unchanged, never
/// normalized (step 2), and two identifiers are equal exactly when
/// their UTF-8 bytes are equal (`PartialEq`, `Ord` and `Hash` are those
/// of the bytes).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CarrierId(String);

impl CarrierId {
    /// Identity §7a.2: validate raw configured bytes (a configuration
    /// file, an environment variable, a network response).
    ///
    /// Runs, in order: step 1, a strict UTF-8 decode (fails on over-long
    /// forms, surrogates, stray or truncated sequences and code points
    /// above U+10FFFF; never substitutes U+FFFD); step 2, no
    /// normalization; step 3, 1..=[`CARRIER_ID_MAX_BYTES`] bytes; step 4,
    /// no `Cc`/`Cf`/`White_Space` code point per [`unicode_pin`].
    ///
    /// # Errors
    /// The first failing step, as a [`CarrierIdError`].
    pub fn from_bytes(bytes: &[u8]) -> Result<CarrierId, CarrierIdError> {
        let s = std::str::from_utf8(bytes).map_err(|e| CarrierIdError::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        Self::validate_scalar_values(s)
    }

    /// Steps 2–5 on input that already is a sequence of Unicode scalar
    /// values (a Rust `&str` cannot hold a surrogate, so step 1 holds).
    fn validate_scalar_values(s: &str) -> Result<CarrierId, CarrierIdError> {
        // Step 2: no normalization — `s` is used exactly as received.
        // Step 3: length in UTF-8 bytes.
        if s.is_empty() || s.len() > CARRIER_ID_MAX_BYTES {
            return Err(CarrierIdError::Length { len: s.len() });
        }
        // Step 4: the pinned Unicode 15.0 property sets, anywhere.
        if let Some((offset, code_point, class)) = s
            .char_indices()
            .find_map(|(i, c)| ForbiddenClass::of(c).map(|class| (i, c, class)))
        {
            return Err(CarrierIdError::ForbiddenCodePoint {
                code_point,
                class,
                offset,
            });
        }
        // Step 5: the accepted input is the canonical string.
        Ok(CarrierId(s.to_owned()))
    }

    /// The canonical string, exactly as configured.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The UTF-8 bytes of the canonical string — the bytes that enter
    /// `Dc` (Identity §7a.4) and the bytes a carrier compares a proof's
    /// `carrier` field against (Delivery §5a.3).
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// Consume into the canonical string.
    pub fn into_string(self) -> String {
        self.0
    }

    /// Identity §7a.4 `Dc`: `digest_multibase` of the UTF-8 bytes of `C`
    /// — `u` + unpadded base64url of `0x12 0x20 ‖ sha2-256(C)`, always 47
    /// ASCII characters.
    pub fn digest(&self) -> String {
        digest_multibase(self.as_bytes())
    }
}

impl FromStr for CarrierId {
    type Err = CarrierIdError;

    /// Identity §7a.2 on a Rust string. Step 1 holds by construction (a
    /// `&str` is a sequence of Unicode scalar values, so an unpaired
    /// surrogate cannot reach here); steps 2–5 run as in
    /// [`CarrierId::from_bytes`].
    ///
    /// # Errors
    /// [`CarrierIdError::Length`] or [`CarrierIdError::ForbiddenCodePoint`].
    fn from_str(s: &str) -> Result<CarrierId, CarrierIdError> {
        CarrierId::validate_scalar_values(s)
    }
}

impl fmt::Display for CarrierId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CarrierId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CarrierId").field(&self.0).finish()
    }
}

impl AsRef<str> for CarrierId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Identity §7a.4 / §13: the three derivation families that share the
/// `prefix ‖ Dc ‖ Dn` form. The prefix is a closed set of literals — an
/// implementation must not invent its own (§7a.4 point 3), so it is
/// chosen by this enum rather than passed as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CarrierFamily {
    /// The control principal, [`CARRIER_RELATIONSHIP_PREFIX`] (§7a.4).
    Relationship,
    /// The adapter-scoped connection identity, [`CARRIER_CONNECTION_PREFIX`].
    Connection,
    /// The adapter-scoped egress identity, [`CARRIER_EGRESS_PREFIX`].
    Egress,
}

impl CarrierFamily {
    /// The literal ASCII prefix of this family's info string.
    pub const fn prefix(self) -> &'static str {
        match self {
            CarrierFamily::Relationship => CARRIER_RELATIONSHIP_PREFIX,
            CarrierFamily::Connection => CARRIER_CONNECTION_PREFIX,
            CarrierFamily::Egress => CARRIER_EGRESS_PREFIX,
        }
    }
}

/// Identity §7a.4: the HKDF info string `prefix ‖ Dc ‖ Dn`, where `Dc` is
/// [`CarrierId::digest`] and `Dn` is `digest_multibase` of the 32 raw
/// nonce bytes. Both digests are exactly 47 ASCII characters, no
/// separators, lengths or padding are inserted; the result is
/// `prefix.len() + 94` ASCII bytes.
pub fn derivation_info(family: CarrierFamily, c: &CarrierId, nonce: &[u8; 32]) -> String {
    let prefix = family.prefix();
    let dc = c.digest();
    let dn = digest_multibase(nonce);
    let mut info = String::with_capacity(prefix.len() + dc.len() + dn.len());
    info.push_str(prefix);
    info.push_str(&dc);
    info.push_str(&dn);
    info
}

/// Identity §7a.4: the 32-byte Ed25519 seed of one family,
/// `HKDF-SHA-256(ikm = root_ikm, salt = empty, info =`
/// [`derivation_info`]`, length = 32)`. This is the one home of the
/// derivation; [`carrier_seed`] and [`derive_identity`] call it.
///
/// `root_ikm` is the holder's root input keying material (Identity
/// §3, any length); `nonce` is the relationship's 32-byte carrier nonce
/// `N` (§7a.3). Deterministic: the same inputs re-derive the same seed
/// forever.
pub fn derive_seed(
    family: CarrierFamily,
    root_ikm: &[u8],
    c: &CarrierId,
    nonce: &[u8; 32],
) -> [u8; 32] {
    let info = derivation_info(family, c, nonce);
    let hk = Hkdf::<Sha256>::new(None, root_ikm);
    let mut seed = [0u8; 32];
    // HKDF-SHA-256 can expand up to 255 · 32 bytes (RFC 5869 §2.3); the
    // requested length is the constant 32, so this error cannot occur
    // for any input.
    hk.expand(info.as_bytes(), &mut seed)
        .expect("32 bytes is within HKDF-SHA-256's 8160-byte output bound");
    seed
}

/// Identity §7a.4: `carrierSeed(C, N)`, the Ed25519 seed of the control
/// principal for one (relationship × carrier) — [`derive_seed`] with
/// [`CarrierFamily::Relationship`].
pub fn carrier_seed(root_ikm: &[u8], c: &CarrierId, nonce: &[u8; 32]) -> [u8; 32] {
    derive_seed(CarrierFamily::Relationship, root_ikm, c, nonce)
}

/// Identity §7a.4 / §13: the Ed25519 signing key of one family and its
/// `did:key` (`did:key:z` over `0xed 0x01 ‖` the 32-byte public key).
/// No X25519 key exists for any of these families (§7a.1).
pub fn derive_identity(
    family: CarrierFamily,
    root_ikm: &[u8],
    c: &CarrierId,
    nonce: &[u8; 32],
) -> (SigningKey, DidKey) {
    let signing_key = SigningKey::from_bytes(&derive_seed(family, root_ikm, c, nonce));
    let did = DidKey::from_verifying_key(&signing_key.verifying_key());
    (signing_key, did)
}

/// Identity §7a.4: the control principal of one (relationship ×
/// carrier) — the signing key and `did:key` of [`carrier_seed`]. This is
/// the `principal` a carrier proof (Delivery §5a.3) is signed under.
pub fn control_principal(root_ikm: &[u8], c: &CarrierId, nonce: &[u8; 32]) -> (SigningKey, DidKey) {
    derive_identity(CarrierFamily::Relationship, root_ikm, c, nonce)
}

/// Identity §7a.3: why a `generation` lexeme was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenerationError {
    /// The lexeme is not canonical decimal: empty, a sign, a leading
    /// zero, a fraction, an exponent, or any non-digit character.
    #[error(
        "generation {lexeme:?} is not canonical decimal (no sign, no leading zero, no fraction, no exponent)"
    )]
    NotCanonical {
        /// The rejected lexeme, as received.
        lexeme: String,
    },
    /// The lexeme is canonical decimal but outside `[1, 2^53 − 1]`.
    /// Out-of-domain values are rejected, never clamped.
    #[error("generation {lexeme} is outside the domain [1, 9007199254740991]")]
    OutOfDomain {
        /// The rejected lexeme, as received.
        lexeme: String,
    },
}

/// Identity §7a.3: read a carrier-nonce `generation` from its **raw
/// lexeme** (the received bytes, not a parsed number — `1.0` and `1e0`
/// parse to the same number as `1`). Accepts exactly the canonical
/// decimal spellings (ASCII digits, no sign, no leading zero, no
/// fraction, no exponent) of the integers in
/// [[`GENERATION_MIN`], [`GENERATION_MAX`]].
///
/// # Errors
/// [`GenerationError::NotCanonical`] for a non-canonical spelling,
/// [`GenerationError::OutOfDomain`] for a canonical one outside the domain
/// (including `0` and every value of 2^53 or more).
pub fn parse_generation_lexeme(lexeme: &str) -> Result<u64, GenerationError> {
    // One home for the rule: §4.4's integer constants use the same reading.
    crate::constants::canonical_integer(lexeme).map_err(|fault| match fault {
        crate::constants::IntegerFault::OutOfRange => GenerationError::OutOfDomain {
            lexeme: lexeme.to_owned(),
        },
        _ => GenerationError::NotCanonical {
            lexeme: lexeme.to_owned(),
        },
    })
}

#[cfg(test)]
// In tests a panic is the failure report.
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn pinned_tables_are_sorted_and_disjoint() {
        for table in [unicode_pin::CC, unicode_pin::CF, unicode_pin::WHITE_SPACE] {
            for &(first, last) in table {
                assert!(first <= last, "{first:X}-{last:X}");
            }
            for pair in table.windows(2) {
                if let [(_, a_last), (b_first, _)] = pair {
                    assert!(a_last < b_first, "{a_last:X} !< {b_first:X}");
                }
            }
        }
    }

    #[test]
    fn classification_reports_cc_before_white_space() {
        assert_eq!(ForbiddenClass::of('\t'), Some(ForbiddenClass::Cc));
        assert_eq!(ForbiddenClass::of('\u{85}'), Some(ForbiddenClass::Cc));
        assert_eq!(ForbiddenClass::of(' '), Some(ForbiddenClass::WhiteSpace));
        assert_eq!(ForbiddenClass::of('\u{180E}'), Some(ForbiddenClass::Cf));
        assert_eq!(ForbiddenClass::of('\u{E007F}'), Some(ForbiddenClass::Cf));
        assert_eq!(ForbiddenClass::of('\u{E0080}'), None);
        assert_eq!(ForbiddenClass::of('a'), None);
        assert_eq!(ForbiddenClass::of('\u{10FFFF}'), None);
    }

    #[test]
    fn error_text_names_step_and_value() {
        let e = CarrierId::from_str("a\u{200D}b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "carrier identifier rejected at step 4 (no Cc, Cf or White_Space): U+200D (Cf) at byte offset 1"
        );
        assert_eq!(e.step(), 4);
        let e = CarrierId::from_bytes(b"ab\xC0\xAF").unwrap_err();
        assert_eq!(
            e.to_string(),
            "carrier identifier rejected at step 1 (unicode scalar values): invalid utf-8 at byte offset 2"
        );
        let e = CarrierId::from_str("").unwrap_err();
        assert_eq!(
            e.to_string(),
            "carrier identifier rejected at step 3 (length): 0 utf-8 bytes, allowed 1..=1024"
        );
    }

    #[test]
    fn generation_error_kinds() {
        assert!(matches!(
            parse_generation_lexeme("0"),
            Err(GenerationError::OutOfDomain { .. })
        ));
        assert!(matches!(
            parse_generation_lexeme("99999999999999999999999"),
            Err(GenerationError::OutOfDomain { .. })
        ));
        for bad in ["", "-1", "+1", "01", "00", "1.0", "1e0", " 1", "1 ", "١"] {
            assert!(
                matches!(
                    parse_generation_lexeme(bad),
                    Err(GenerationError::NotCanonical { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
