//! Identity §5.1–§5.2 and §6.1 for the one label form a party needs to be
//! addressable: the **pair context** `pair/<digest>` of one
//! relationship-creation act.
//!
//! ```text
//! label     = "pair/" ‖ digest_multibase(nonce)            -- §6.1, 47-character digest
//! edSeed(L) = HKDF-SHA-256(root IKM, salt empty, "rltp/anchor/ed/" ‖ L, 32)   -- §5.1
//! xSeed(L)  = HKDF-SHA-256(root IKM, salt empty, "rltp/anchor/x/"  ‖ L, 32)   -- §5.1
//! anchor    = did:key of the Ed25519 key of edSeed(L)                          -- §8.1
//! rkid      = X25519(xSeed(L), 9) as the `z6LS…` Multikey                      -- §5.2
//! ```
//!
//! The pair nonce is the holder's, drawn fresh from a CSPRNG at
//! relationship creation and never on the wire (§6.1); the carrier nonce
//! of §7a.3 is a different value and never derived from it
//! ([`crate::identity`]). `group/…` and `persona/…` labels are not
//! parsed here: no party role of this project derives them.

use std::fmt;
use std::str::FromStr;

use ed25519_dalek::SigningKey;
use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};

use crate::encoding::{EncodingError, digest_multibase, parse_digest_multibase};
use crate::multikey::{DidKey, Rkid};

/// Identity §5.1: the info prefix of the anchor (Ed25519) seed.
pub const ED_SEED_PREFIX: &str = "rltp/anchor/ed/";
/// Identity §5.1: the info prefix of the key-agreement (X25519) seed.
pub const X_SEED_PREFIX: &str = "rltp/anchor/x/";
/// Identity §6.1: the label form of a relationship-creation act.
pub const PAIR_PREFIX: &str = "pair/";

/// Identity §6.1: why a string is not a `pair/<digest>` label. A rejected
/// label derives nothing (fail closed, no repair).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PairLabelError {
    /// The string does not start with `pair/`.
    #[error("not a pair label: it does not start with \"pair/\"")]
    Prefix,
    /// The digest component is not `u` + canonical unpadded base64url of a
    /// sha2-256 multihash (47 characters; padding, non-zero trailing bits
    /// and any non-canonical spelling rejected).
    #[error("pair label digest: {0}")]
    Digest(EncodingError),
    /// The digest decodes but is not spelled in its one canonical `u` form
    /// (a `z` spelling, for instance).
    #[error("pair label digest is not the canonical u-multibase form")]
    NotCanonical,
}

/// Identity §6.1: a validated `pair/<digest>` label, where `<digest>` is
/// the sha2-256 multihash of the 32 relationship-nonce bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PairLabel(String);

impl PairLabel {
    /// The label of the pair context created with `nonce` (§6.1: the
    /// digest is over the 32 nonce bytes themselves).
    pub fn from_nonce(nonce: &[u8; 32]) -> PairLabel {
        PairLabel(format!("{PAIR_PREFIX}{}", digest_multibase(nonce)))
    }

    /// The canonical label string (its bytes are the derivation input).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for PairLabel {
    type Err = PairLabelError;

    /// Identity §6.1: validates `pair/<digest>` — multihash structure,
    /// no padding, zero trailing bits, and canonical re-encoding equal to
    /// the input.
    fn from_str(s: &str) -> Result<PairLabel, PairLabelError> {
        let digest = s.strip_prefix(PAIR_PREFIX).ok_or(PairLabelError::Prefix)?;
        if !digest.starts_with('u') {
            return Err(PairLabelError::NotCanonical);
        }
        let bytes = parse_digest_multibase(digest).map_err(PairLabelError::Digest)?;
        let mut multihash = [0u8; 34];
        multihash[..2].copy_from_slice(&crate::encoding::SHA256_MULTIHASH_PREFIX);
        multihash[2..].copy_from_slice(&bytes);
        if crate::encoding::multibase_u(&multihash) != digest {
            return Err(PairLabelError::NotCanonical);
        }
        Ok(PairLabel(s.to_owned()))
    }
}

impl fmt::Display for PairLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PairLabel {
    // A label is sensitive (Identity §6.3): debug output names only its kind.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PairLabel(..)")
    }
}

/// Identity §5.1: `HKDF-SHA-256(root IKM, salt empty, prefix ‖ label, 32)`.
fn labelled_seed(root_ikm: &[u8], prefix: &str, label: &PairLabel) -> [u8; 32] {
    let mut info = Vec::with_capacity(prefix.len() + label.0.len());
    info.extend_from_slice(prefix.as_bytes());
    info.extend_from_slice(label.0.as_bytes());
    let mut seed = [0u8; 32];
    // 32 bytes lie far inside HKDF-SHA-256's 8160-byte output bound, so
    // the expansion cannot fail for any input.
    Hkdf::<Sha256>::new(None, root_ikm)
        .expand(&info, &mut seed)
        .expect("32 bytes is within HKDF-SHA-256's output bound");
    seed
}

/// Identity §5.1 `edSeed(L)`: the Ed25519 seed of the context's anchor.
pub fn ed_seed(root_ikm: &[u8], label: &PairLabel) -> [u8; 32] {
    labelled_seed(root_ikm, ED_SEED_PREFIX, label)
}

/// Identity §5.1 `xSeed(L)`: the raw X25519 secret of the context's
/// key-agreement key (clamping is the X25519 function's, §5.2).
pub fn x_seed(root_ikm: &[u8], label: &PairLabel) -> [u8; 32] {
    labelled_seed(root_ikm, X_SEED_PREFIX, label)
}

/// Identity §5.1–§5.2: one derived pair context — the anchor's signing key
/// and the key-agreement secret, with their public forms. Secret material
/// zeroizes on drop (the dalek types do) and is never printed.
#[derive(Clone)]
pub struct PairContext {
    label: PairLabel,
    signing_key: SigningKey,
    x_secret: StaticSecret,
}

impl PairContext {
    /// Derives the pair context of `label` from `root_ikm`.
    pub fn derive(root_ikm: &[u8], label: PairLabel) -> PairContext {
        let signing_key = SigningKey::from_bytes(&ed_seed(root_ikm, &label));
        let x_secret = StaticSecret::from(x_seed(root_ikm, &label));
        PairContext {
            label,
            signing_key,
            x_secret,
        }
    }

    /// Derives the pair context created with the relationship nonce `nonce`.
    pub fn from_nonce(root_ikm: &[u8], nonce: &[u8; 32]) -> PairContext {
        PairContext::derive(root_ikm, PairLabel::from_nonce(nonce))
    }

    /// The context's label.
    pub fn label(&self) -> &PairLabel {
        &self.label
    }

    /// The pair anchor's Ed25519 signing key (the document `issuer` signs
    /// with it).
    pub fn signing_key(&self) -> &SigningKey {
        &self.signing_key
    }

    /// The pair anchor (§8.1): the `did:key` of the signing key.
    pub fn anchor(&self) -> DidKey {
        DidKey::from_verifying_key(&self.signing_key.verifying_key())
    }

    /// The raw X25519 secret (`xSeed(L)`), for opening envelopes sealed to
    /// [`PairContext::rkid`] and for the §4.2 ack key.
    pub fn x_secret(&self) -> [u8; 32] {
        self.x_secret.to_bytes()
    }

    /// The key-agreement public key as an `rkid` (§5.2: `X25519(xSeed, 9)`,
    /// the card's `keyAgreement`).
    pub fn rkid(&self) -> Rkid {
        Rkid::from_bytes(PublicKey::from(&self.x_secret).to_bytes())
    }
}

impl fmt::Debug for PairContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PairContext")
            .field("anchor", &self.anchor().to_did_key())
            .field("rkid", &self.rkid().to_multikey())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_round_trips_and_rejects_non_canonical_digests() {
        let label = PairLabel::from_nonce(&[7u8; 32]);
        assert_eq!(label.as_str().len(), 5 + 47);
        assert_eq!(label.as_str().parse::<PairLabel>(), Ok(label.clone()));
        assert!("pair/x".parse::<PairLabel>().is_err());
        assert_eq!(
            "group/uEiBjDc0pZsQzZpESVEi7sltP9BKknHMtssirwbhYG9cQ3Q".parse::<PairLabel>(),
            Err(PairLabelError::Prefix)
        );
        // Padding, and the z spelling of the same digest: not canonical.
        assert!(format!("{label}=").parse::<PairLabel>().is_err());
        let z = crate::encoding::multibase_z(&crate::encoding::sha256_multihash(&[7u8; 32]));
        assert_eq!(
            format!("pair/{z}").parse::<PairLabel>(),
            Err(PairLabelError::NotCanonical)
        );
    }
}
