//! Canonical encodings: unpadded base64url, base58btc, multibase `u`/`z`,
//! the sha2-256 multihash and the document digest.
//!
//! Every decoder here accepts exactly one spelling per byte string
//! (Encounter 2.3: "a shortened or non-canonical rendering is not a
//! signature"; §5: canonical base64url for envelope fields):
//! - base64url: URL-safe alphabet, no padding, length mod 4 ≠ 1, zero
//!   trailing bits, so decode-then-encode round-trips;
//! - base58btc: Bitcoin alphabet; canonical by construction (leading `1`s
//!   are leading zero bytes), checked by re-encoding.
//!
//! The document digest (§2) is the multibase multihash over `JCS(document)`:
//! emitted as `u` (47 characters), accepted as `u` or `z`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};

/// Multihash code of sha2-256 followed by its digest length (32).
pub const SHA256_MULTIHASH_PREFIX: [u8; 2] = [0x12, 0x20];
/// Length of a `u`-multibase sha2-256 multihash: 1 + 46 characters.
pub const DIGEST_MULTIBASE_LEN: usize = 47;

/// Why an encoded value was refused. Every variant is a refusal of the
/// spelling, never a repair.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodingError {
    /// Not canonical unpadded base64url (bad alphabet, padding, length mod 4
    /// = 1, or non-zero trailing bits).
    #[error("not canonical unpadded base64url")]
    Base64Url,
    /// Not canonical base58btc (character outside the alphabet, or empty).
    #[error("not canonical base58btc")]
    Base58Btc,
    /// The multibase prefix is not one this profile accepts here.
    #[error("unsupported multibase prefix {0:?}")]
    MultibasePrefix(Option<char>),
    /// The decoded value has the wrong length.
    #[error("decoded length {actual} bytes, expected {expected}")]
    Length {
        /// Bytes required.
        expected: usize,
        /// Bytes decoded.
        actual: usize,
    },
    /// The decoded multicodec / multihash prefix is wrong.
    #[error("decoded prefix {actual:02x?}, expected {expected:02x?}")]
    Prefix {
        /// Prefix required.
        expected: [u8; 2],
        /// Prefix decoded (first two bytes, zero-filled if shorter).
        actual: [u8; 2],
    },
    /// A `did:key` without the `did:key:` scheme prefix.
    #[error("not a did:key identifier")]
    NotDidKey,
    /// The 32 bytes are not a valid Ed25519 public key (not a curve point).
    #[error("not a valid ed25519 public key")]
    InvalidEd25519Key,
}

/// Unpadded base64url (RFC 4648 §5) of `bytes`.
pub fn b64url_encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes canonical unpadded base64url.
///
/// # Errors
/// [`EncodingError::Base64Url`] for padding, a character outside the URL-safe
/// alphabet, a length ≡ 1 (mod 4), or non-zero trailing bits; the
/// re-encoding of the result always equals `s`.
pub fn b64url_decode(s: &str) -> Result<Vec<u8>, EncodingError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| EncodingError::Base64Url)?;
    // The engine already rejects non-canonical trailing bits; the round trip
    // makes canonicity a checked property rather than an engine setting.
    if URL_SAFE_NO_PAD.encode(&bytes) != s {
        return Err(EncodingError::Base64Url);
    }
    Ok(bytes)
}

/// Decodes canonical unpadded base64url of exactly `N` bytes.
///
/// # Errors
/// As [`b64url_decode`], plus [`EncodingError::Length`].
pub fn b64url_decode_array<const N: usize>(s: &str) -> Result<[u8; N], EncodingError> {
    let bytes = b64url_decode(s)?;
    to_array(&bytes)
}

fn to_array<const N: usize>(bytes: &[u8]) -> Result<[u8; N], EncodingError> {
    bytes.try_into().map_err(|_| EncodingError::Length {
        expected: N,
        actual: bytes.len(),
    })
}

/// base58btc (Bitcoin alphabet) of `bytes`.
pub fn base58btc_encode(bytes: &[u8]) -> String {
    bs58::encode(bytes).into_string()
}

/// Decodes canonical base58btc (non-empty).
///
/// base58btc has exactly one spelling per byte string (leading `1`s are
/// exactly the leading zero bytes, the rest is the minimal big-endian
/// number), so every string over the alphabet is canonical and no
/// re-encoding check is needed; `tests::base58btc_spellings_are_unique`
/// keeps that true.
///
/// # Errors
/// [`EncodingError::Base58Btc`] for an empty string or a character outside
/// the alphabet.
pub fn base58btc_decode(s: &str) -> Result<Vec<u8>, EncodingError> {
    if s.is_empty() {
        return Err(EncodingError::Base58Btc);
    }
    bs58::decode(s)
        .into_vec()
        .map_err(|_| EncodingError::Base58Btc)
}

/// `u` + unpadded base64url of `bytes` (multibase).
pub fn multibase_u(bytes: &[u8]) -> String {
    format!("u{}", b64url_encode(bytes))
}

/// `z` + base58btc of `bytes` (multibase).
pub fn multibase_z(bytes: &[u8]) -> String {
    format!("z{}", base58btc_encode(bytes))
}

/// Decodes a `u` (base64url) or `z` (base58btc) multibase string.
///
/// # Errors
/// [`EncodingError::MultibasePrefix`] for any other prefix; otherwise as the
/// canonical decoders.
pub fn multibase_decode(s: &str) -> Result<Vec<u8>, EncodingError> {
    match s.chars().next() {
        Some('u') => b64url_decode(&s[1..]),
        Some('z') => base58btc_decode(&s[1..]),
        other => Err(EncodingError::MultibasePrefix(other)),
    }
}

/// Decodes a `z`-multibase string (base58btc only).
///
/// # Errors
/// [`EncodingError::MultibasePrefix`] unless `s` starts with `z`.
pub fn multibase_z_decode(s: &str) -> Result<Vec<u8>, EncodingError> {
    match s.strip_prefix('z') {
        Some(rest) => base58btc_decode(rest),
        None => Err(EncodingError::MultibasePrefix(s.chars().next())),
    }
}

/// Decodes an Ed25519 signature as the stack carries it: `z` + canonical
/// base58btc of **exactly 64** bytes (§5a.3 `sig`, Encounter 2.3,
/// `eddsa-jcs-2022` `proofValue`).
///
/// # Errors
/// Prefix, alphabet/canonicity, or [`EncodingError::Length`].
pub fn signature_from_z(s: &str) -> Result<[u8; 64], EncodingError> {
    to_array(&multibase_z_decode(s)?)
}

/// SHA-256 of `data` (32 bytes).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// The sha2-256 multihash of `data`: `0x12 0x20` ‖ SHA-256 (34 bytes).
pub fn sha256_multihash(data: &[u8]) -> [u8; 34] {
    let mut out = [0u8; 34];
    out[..2].copy_from_slice(&SHA256_MULTIHASH_PREFIX);
    out[2..].copy_from_slice(&sha256(data));
    out
}

/// `u`-multibase of the sha2-256 multihash of `data`: always exactly
/// [`DIGEST_MULTIBASE_LEN`] (47) ASCII characters (§2, Identity 6.1).
pub fn digest_multibase(data: &[u8]) -> String {
    multibase_u(&sha256_multihash(data))
}

/// Parses a sha2-256 multihash digest in `u` or `z` multibase (§2: "emit
/// `u`, accept `u`/`z`") and returns the 32 digest bytes.
///
/// # Errors
/// Encoding errors, [`EncodingError::Length`] unless 34 bytes decode,
/// [`EncodingError::Prefix`] unless they start `0x12 0x20`.
pub fn parse_digest_multibase(s: &str) -> Result<[u8; 32], EncodingError> {
    let bytes = multibase_decode(s)?;
    let multihash: [u8; 34] = to_array(&bytes)?;
    check_prefix(&multihash, SHA256_MULTIHASH_PREFIX)?;
    to_array(&multihash[2..])
}

/// Checks the first two bytes of `bytes` against `expected`.
pub(crate) fn check_prefix(bytes: &[u8], expected: [u8; 2]) -> Result<(), EncodingError> {
    let actual = [
        bytes.first().copied().unwrap_or(0),
        bytes.get(1).copied().unwrap_or(0),
    ];
    if actual == expected {
        Ok(())
    } else {
        Err(EncodingError::Prefix { expected, actual })
    }
}

/// The document digest (§2): [`digest_multibase`] over `JCS(document)` of the
/// plaintext document, `u`-form, 47 characters.
///
/// # Errors
/// [`crate::jcs::JcsError`] if the document has no canonical form.
pub fn document_digest(document: &crate::json::Value) -> Result<String, crate::jcs::JcsError> {
    Ok(digest_multibase(&crate::jcs::canonicalize(document)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Every string over the base58btc alphabet (leading `1`s
        /// included) decodes to bytes that encode back to that same
        /// string: the decoder needs no canonical-spelling check.
        #[test]
        fn base58btc_spellings_are_unique(s in "[1-9A-HJ-NP-Za-km-z]{1,60}") {
            let bytes = base58btc_decode(&s).unwrap();
            proptest::prop_assert_eq!(base58btc_encode(&bytes), s);
        }

        /// And every byte string round-trips through its one spelling.
        #[test]
        fn base58btc_round_trips(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..48)) {
            proptest::prop_assert_eq!(base58btc_decode(&base58btc_encode(&bytes)).unwrap(), bytes);
        }
    }

    #[test]
    fn base64url_is_canonical() {
        assert_eq!(b64url_decode("AQ").unwrap(), [1]);
        assert_eq!(b64url_decode("").unwrap(), Vec::<u8>::new());
        // Non-zero trailing bits: "AR" would also decode to [1] in a lax decoder.
        assert_eq!(b64url_decode("AR"), Err(EncodingError::Base64Url));
        assert_eq!(b64url_decode("AQ=="), Err(EncodingError::Base64Url));
        assert_eq!(b64url_decode("A"), Err(EncodingError::Base64Url));
        assert_eq!(b64url_decode("AAAAA"), Err(EncodingError::Base64Url));
        assert_eq!(b64url_decode("+/8"), Err(EncodingError::Base64Url));
        assert_eq!(b64url_decode("-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(b64url_decode("AQ\n"), Err(EncodingError::Base64Url));
        assert_eq!(
            b64url_decode_array::<2>("AQ"),
            Err(EncodingError::Length {
                expected: 2,
                actual: 1
            })
        );
    }

    #[test]
    fn base58btc_is_canonical() {
        assert_eq!(base58btc_decode("1").unwrap(), [0]);
        assert_eq!(base58btc_decode("11").unwrap(), [0, 0]);
        assert_eq!(base58btc_decode(""), Err(EncodingError::Base58Btc));
        assert_eq!(base58btc_decode("0"), Err(EncodingError::Base58Btc));
        assert_eq!(base58btc_decode("O"), Err(EncodingError::Base58Btc));
        assert_eq!(base58btc_decode("l"), Err(EncodingError::Base58Btc));
        assert_eq!(base58btc_encode(&[0, 0, 1]), "112");
    }

    #[test]
    fn multibase_prefixes() {
        assert_eq!(multibase_decode("uAQ").unwrap(), [1]);
        assert_eq!(multibase_decode("z2").unwrap(), [1]);
        assert_eq!(
            multibase_decode("fAQ"),
            Err(EncodingError::MultibasePrefix(Some('f')))
        );
        assert_eq!(
            multibase_decode(""),
            Err(EncodingError::MultibasePrefix(None))
        );
        assert_eq!(
            multibase_z_decode("uAQ"),
            Err(EncodingError::MultibasePrefix(Some('u')))
        );
    }

    /// Identity vectors: `genesisDigestSample` and its `z` form name the same digest.
    #[test]
    fn digest_accepts_u_and_z() {
        let u = "uEiDYLnFbXqm2cwuJWuk9yNzRmlzWDpCTH6yA_4aP_1z_RA";
        let z = "zQmctXr3tRbmrD5JGXvfdimQkJ9tKvJQ7VrtyGGdEvsEVu5";
        assert_eq!(
            parse_digest_multibase(u).unwrap(),
            parse_digest_multibase(z).unwrap()
        );
        let digest = parse_digest_multibase(u).unwrap();
        let mut multihash = SHA256_MULTIHASH_PREFIX.to_vec();
        multihash.extend_from_slice(&digest);
        assert_eq!(multibase_u(&multihash), u);
        assert_eq!(digest_multibase(b"").len(), DIGEST_MULTIBASE_LEN);
        // sha2-256("") multihash, a fixed published value.
        assert_eq!(
            digest_multibase(b""),
            "uEiDjsMRCmPwcFJr79MiZb7kkJ65B5GSbk0yklZkbeFK4VQ"
        );
        assert!(matches!(
            parse_digest_multibase(&multibase_u(&[0x13, 0x20, 0, 0])),
            Err(EncodingError::Length { .. })
        ));
    }

    #[test]
    fn signature_length_is_exact() {
        let sig = [7u8; 64];
        assert_eq!(signature_from_z(&multibase_z(&sig)).unwrap(), sig);
        assert_eq!(
            signature_from_z(&multibase_z(&[7u8; 63])),
            Err(EncodingError::Length {
                expected: 64,
                actual: 63
            })
        );
        // Leading zero bytes encode as '1': still 64 bytes, still accepted.
        let mut zeros = [9u8; 64];
        zeros[..3].copy_from_slice(&[0, 0, 0]);
        assert_eq!(signature_from_z(&multibase_z(&zeros)).unwrap(), zeros);
    }

    proptest::proptest! {
        #[test]
        fn round_trips(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            proptest::prop_assert_eq!(b64url_decode(&b64url_encode(&bytes)).unwrap(), bytes.clone());
            if !bytes.is_empty() {
                proptest::prop_assert_eq!(base58btc_decode(&base58btc_encode(&bytes)).unwrap(), bytes);
            }
        }
    }
}
