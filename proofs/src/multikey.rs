//! Multikeys and `did:key`, decoded before any other check.
//!
//! §11 ("Schema validity is not acceptance") and Identity §7a.4: a carrier
//! decodes the base58btc identifiers first and refuses unless
//! - an Ed25519 `did:key` is `did:key:z` over `0xed 0x01` ‖ exactly 32 bytes;
//! - an X25519 Multikey (`rkid`) is `z` over `0xec 0x01` ‖ exactly 32 bytes.
//!
//! The text leads `z6Mk` / `z6LS` are consequences of those bytes, never a
//! check on them (base58btc is not positional).

use crate::encoding::{EncodingError, check_prefix, multibase_z, multibase_z_decode};
use std::fmt;

/// Multicodec prefix of an Ed25519 public key (`ed25519-pub`, varint 0xed).
pub const ED25519_PREFIX: [u8; 2] = [0xed, 0x01];
/// Multicodec prefix of an X25519 public key (`x25519-pub`, varint 0xec).
pub const X25519_PREFIX: [u8; 2] = [0xec, 0x01];
/// The `did:key` scheme prefix.
pub const DID_KEY_PREFIX: &str = "did:key:";

fn decode_multikey(s: &str, prefix: [u8; 2]) -> Result<[u8; 32], EncodingError> {
    let bytes = multibase_z_decode(s)?;
    if bytes.len() != 34 {
        return Err(EncodingError::Length {
            expected: 34,
            actual: bytes.len(),
        });
    }
    check_prefix(&bytes, prefix)?;
    let mut key = [0u8; 32];
    key.copy_from_slice(&bytes[2..]);
    Ok(key)
}

fn encode_multikey(key: &[u8; 32], prefix: [u8; 2]) -> String {
    let mut bytes = [0u8; 34];
    bytes[..2].copy_from_slice(&prefix);
    bytes[2..].copy_from_slice(key);
    multibase_z(&bytes)
}

/// Decodes a bare Ed25519 Multikey (`z6Mk…`) to its 32 key bytes.
///
/// # Errors
/// Encoding, [`EncodingError::Length`] (decoded ≠ 34 bytes) or
/// [`EncodingError::Prefix`] (not `0xed 0x01`).
pub fn ed25519_multikey_decode(s: &str) -> Result<[u8; 32], EncodingError> {
    decode_multikey(s, ED25519_PREFIX)
}

/// An `rkid`: the recipient's X25519 key-agreement public key (§5, §5a.1),
/// 32 bytes, written as the Multikey `z` + base58btc(`0xec 0x01` ‖ key).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rkid([u8; 32]);

impl Rkid {
    /// Decodes an `rkid` Multikey (§11: decoded prefix and length checked).
    ///
    /// # Errors
    /// Encoding, length (decoded ≠ 34 bytes) or prefix (not `0xec 0x01`).
    pub fn parse(s: &str) -> Result<Rkid, EncodingError> {
        decode_multikey(s, X25519_PREFIX).map(Rkid)
    }

    /// An `rkid` from raw X25519 public key bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Rkid {
        Rkid(bytes)
    }

    /// The raw 32 key bytes (the eviction order of §5a.3 sorts on these).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The Multikey spelling (`z6LS…`, 48 characters).
    pub fn to_multikey(&self) -> String {
        encode_multikey(&self.0, X25519_PREFIX)
    }
}

/// Characters of an `rkid` Multikey: always 48 (`z6LS` + 44).
pub const RKID_CHARS: usize = 48;

/// The Multikey text of an `rkid`, known to be its one spelling (base58btc
/// has exactly one per byte string): made by decoding received text once
/// ([`RkidText::parse`]) or by encoding an [`Rkid`] ([`RkidText::of`]).
/// Comparing two such texts decides what decoding both would, so the
/// envelope's `rkid` is compared with the queue's as bytes (§5a.5 s2,
/// `envelope::fast_shape`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RkidText {
    rkid: Rkid,
    text: [u8; RKID_CHARS],
}

impl RkidText {
    /// Decodes received text (one base58btc decode) and keeps it.
    ///
    /// # Errors
    /// As [`Rkid::parse`].
    pub fn parse(s: &str) -> Result<RkidText, EncodingError> {
        let rkid = Rkid::parse(s)?;
        let text =
            <[u8; RKID_CHARS]>::try_from(s.as_bytes()).map_err(|_| EncodingError::Length {
                expected: RKID_CHARS,
                actual: s.len(),
            })?;
        Ok(RkidText { rkid, text })
    }

    /// The text of `rkid` (one base58btc encode).
    pub fn of(rkid: &Rkid) -> RkidText {
        let mut text = [b'1'; RKID_CHARS];
        let encoded = rkid.to_multikey();
        // Always 48 characters (the 0xec prefix fixes the magnitude).
        for (slot, b) in text.iter_mut().zip(encoded.bytes()) {
            *slot = b;
        }
        RkidText { rkid: *rkid, text }
    }

    /// The `rkid`.
    pub fn rkid(&self) -> &Rkid {
        &self.rkid
    }

    /// The Multikey text.
    pub fn as_str(&self) -> &str {
        // Built from a `&str` or from base58btc output: always ASCII.
        std::str::from_utf8(&self.text).unwrap_or_default()
    }
}

/// `rkid` texts already decoded, by their bytes: a stream that names the
/// same queues again and again decodes each text once, and a byte
/// comparison decides the rest (a text that decoded once always decodes
/// to the same `rkid`; only texts that decoded are kept). Direct-mapped,
/// [`RkidTexts::SLOTS`] slots of 80 bytes, made on first use: a miss
/// replaces its slot, so what a peer can make it hold is bounded.
#[derive(Debug, Default)]
pub struct RkidTexts {
    slots: Vec<Option<RkidText>>,
}

impl RkidTexts {
    /// Slots: 128 (10 KiB), more than the queues one sender usually
    /// names, less than a stream's read buffer.
    pub const SLOTS: usize = 128;

    /// As [`RkidText::parse`] of `text`, from the slot when it holds
    /// exactly these bytes.
    ///
    /// # Errors
    /// As [`RkidText::parse`]; text that is not UTF-8 as
    /// [`EncodingError::Length`] of its bytes (base58btc is ASCII).
    pub fn parse(&mut self, text: &[u8]) -> Result<RkidText, EncodingError> {
        // The characters after the fixed `z6LS` prefix are base58 of key
        // bytes: spread enough to pick a slot.
        let slot = text.get(4..12).map_or(0, |b| {
            b.iter()
                .fold(0usize, |h, &c| h.wrapping_mul(31) ^ usize::from(c))
        }) % Self::SLOTS;
        if let Some(Some(known)) = self.slots.get(slot)
            && known.text.as_slice() == text
        {
            return Ok(*known);
        }
        let parsed =
            RkidText::parse(
                std::str::from_utf8(text).map_err(|_| EncodingError::Length {
                    expected: RKID_CHARS,
                    actual: text.len(),
                })?,
            )?;
        if self.slots.is_empty() {
            self.slots = vec![None; Self::SLOTS];
        }
        if let Some(entry) = self.slots.get_mut(slot) {
            *entry = Some(parsed);
        }
        Ok(parsed)
    }
}

impl fmt::Debug for RkidText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Rkid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_multikey())
    }
}

impl fmt::Debug for Rkid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rkid({})", self.to_multikey())
    }
}

/// An Ed25519 public key as a `did:key` (control principals, Identity §7a;
/// declaration issuers, §4.4): `did:key:z` + base58btc(`0xed 0x01` ‖ key).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DidKey([u8; 32]);

impl DidKey {
    /// Decodes a `did:key` (§11, Identity §7a.4: decoded prefix and length).
    ///
    /// # Errors
    /// [`EncodingError::NotDidKey`] without the `did:key:` prefix; otherwise
    /// as [`ed25519_multikey_decode`].
    pub fn parse(s: &str) -> Result<DidKey, EncodingError> {
        let multikey = s
            .strip_prefix(DID_KEY_PREFIX)
            .ok_or(EncodingError::NotDidKey)?;
        ed25519_multikey_decode(multikey).map(DidKey)
    }

    /// A `did:key` from raw Ed25519 public key bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> DidKey {
        DidKey(bytes)
    }

    /// The `did:key` of an Ed25519 verifying key.
    pub fn from_verifying_key(key: &ed25519_dalek::VerifyingKey) -> DidKey {
        DidKey(key.to_bytes())
    }

    /// The raw 32 key bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The Multikey spelling without the scheme (`z6Mk…`).
    pub fn multikey(&self) -> String {
        encode_multikey(&self.0, ED25519_PREFIX)
    }

    /// The full `did:key:z6Mk…` spelling.
    pub fn to_did_key(&self) -> String {
        format!("{DID_KEY_PREFIX}{}", self.multikey())
    }

    /// The Ed25519 verifying key.
    ///
    /// # Errors
    /// [`EncodingError::InvalidEd25519Key`] if the bytes are not a point.
    pub fn verifying_key(&self) -> Result<ed25519_dalek::VerifyingKey, EncodingError> {
        ed25519_dalek::VerifyingKey::from_bytes(&self.0)
            .map_err(|_| EncodingError::InvalidEd25519Key)
    }
}

impl fmt::Display for DidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_did_key())
    }
}

impl fmt::Debug for DidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DidKey({})", self.to_did_key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lookup answers what one decoding would, hits and misses,
    /// texts sharing a slot, and text that does not decode (never kept).
    #[test]
    fn known_rkid_texts_answer_as_decoding_does() {
        let mut known = RkidTexts::default();
        let texts: Vec<String> = (0..=255u8)
            .map(|i| Rkid::from_bytes([i; 32]).to_multikey())
            .collect();
        for _ in 0..3 {
            for text in &texts {
                let got = known.parse(text.as_bytes()).unwrap();
                assert_eq!(got, RkidText::parse(text).unwrap());
                assert_eq!(got.as_str(), text);
            }
        }
        // A text one character off the first: the same slot, a different
        // (or no) key.
        let mut other = texts[0].clone().into_bytes();
        other[40] = if other[40] == b'2' { b'3' } else { b'2' };
        let other = String::from_utf8(other).unwrap();
        assert_eq!(
            known.parse(other.as_bytes()).ok(),
            RkidText::parse(&other).ok()
        );
        for bad in [
            "",
            "z6LS",
            "z6LSnot-base58-at-all-0OIl-xxxxxxxxxxxxxxxxxxxxxx",
        ] {
            assert_eq!(
                known.parse(bad.as_bytes()).map_err(|e| e.to_string()),
                RkidText::parse(bad).map_err(|e| e.to_string()),
                "{bad:?}"
            );
        }
        assert!(known.parse(&[0xff; RKID_CHARS]).is_err());
    }

    #[test]
    fn round_trip_shipped_identifiers() {
        let rkid = "z6LStLK2kxribiLHz6U4vpGfzMtmgc4q5WjR4mvhS6KG1W16";
        assert_eq!(Rkid::parse(rkid).unwrap().to_multikey(), rkid);
        let did = "did:key:z6MksbsC5mWfC3yPwQCayCqtQFGFkxge8FBqdXYgbxxWMqPF";
        let parsed = DidKey::parse(did).unwrap();
        assert_eq!(parsed.to_did_key(), did);
        assert!(parsed.verifying_key().is_ok());
    }

    #[test]
    fn decodes_before_trusting_text_leads() {
        assert_eq!(
            Rkid::parse("z6LS11111111111111111111111111111111111111111111"),
            Err(EncodingError::Prefix {
                expected: X25519_PREFIX,
                actual: [0xeb, 0xfe]
            })
        );
        assert_eq!(
            DidKey::parse("did:key:z6Mkzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"),
            Err(EncodingError::Prefix {
                expected: ED25519_PREFIX,
                actual: [0xed, 0x02]
            })
        );
        // An Ed25519 key is not an rkid and vice versa.
        let ed = DidKey::parse("did:key:z6MksbsC5mWfC3yPwQCayCqtQFGFkxge8FBqdXYgbxxWMqPF").unwrap();
        assert!(Rkid::parse(&ed.multikey()).is_err());
        assert_eq!(DidKey::parse(&ed.multikey()), Err(EncodingError::NotDidKey));
        assert!(matches!(
            Rkid::parse(&multibase_z(&[0xec, 0x01, 1, 2])),
            Err(EncodingError::Length {
                expected: 34,
                actual: 4
            })
        ));
    }
}
