//! Delivery §4.2 / §4.4: the designated-verifier acknowledgement MAC, the
//! deniable `{ "mac": … }` proof form of a `delivery-ack/0.1` that
//! acknowledges a designated-verifier payload.
//!
//! ```text
//! ikm  = X25519(pairX_issuer, pairX_recipient)        -- all-zero rejected before derivation
//! k    = HKDF-SHA-256(ikm, salt empty,
//!                     info "rltp/v1/delivery/mac/ack/" ‖ issuerPairAnchor ‖ "/" ‖ recipientPairAnchor,
//!                     32 bytes)
//! mac  = "u" ‖ base64url(HMAC-SHA-256(k, JCS(ack without proof)))   -- 44 characters
//! ```
//!
//! Either party of the tuple can compute `k` (that is the deniability the
//! class rule asks for): the issuer from its own X25519 secret and the
//! recipient's public key, the recipient the other way round. The anchors
//! enter as their `did:key` strings, issuer first, so the two directions
//! of one tuple have two keys.

use hkdf::Hkdf;
use hkdf::hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroize;

use crate::encoding::{EncodingError, b64url_decode_array, multibase_u};
use crate::multikey::{DidKey, Rkid};

/// §4.2: the literal prefix of the ack key's HKDF info.
pub const ACK_MAC_INFO_PREFIX: &str = "rltp/v1/delivery/mac/ack/";

/// Why an ack key could not be derived or a MAC value not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AckMacError {
    /// The X25519 shared secret is all-zero (a low-order public key); §4.2
    /// requires rejecting it before derivation, as §5 does for seals.
    #[error("all-zero x25519 shared secret (non-contributory key agreement)")]
    NonContributory,
    /// The `mac` value is not `u` + canonical unpadded base64url of
    /// exactly 32 bytes.
    #[error("mac is not u + base64url of 32 bytes: {0}")]
    Encoding(EncodingError),
}

/// §4.2: the HKDF info of the ack key for an ack from `issuer` to
/// `recipient`: the prefix, the issuer's `did:key`, `/`, the recipient's.
pub fn ack_mac_info(issuer: &DidKey, recipient: &DidKey) -> String {
    format!(
        "{ACK_MAC_INFO_PREFIX}{}/{}",
        issuer.to_did_key(),
        recipient.to_did_key()
    )
}

/// §4.2: the 32-byte ack key of one tuple and direction. Wiped on drop;
/// never printed.
pub struct AckKey([u8; 32]);

impl AckKey {
    /// Derives the ack key from this side's X25519 secret and the other
    /// side's key-agreement public key (either side of the tuple gets the
    /// same key), for an ack whose `issuer` is `issuer` and whose
    /// `recipient` is `recipient`.
    ///
    /// # Errors
    /// [`AckMacError::NonContributory`] when the shared secret is all-zero.
    pub fn derive(
        own_x_secret: &[u8; 32],
        their_key_agreement: &Rkid,
        issuer: &DidKey,
        recipient: &DidKey,
    ) -> Result<AckKey, AckMacError> {
        let secret = StaticSecret::from(*own_x_secret);
        let shared = secret.diffie_hellman(&PublicKey::from(*their_key_agreement.as_bytes()));
        if !shared.was_contributory() {
            return Err(AckMacError::NonContributory);
        }
        let mut key = [0u8; 32];
        // 32 bytes lie within HKDF-SHA-256's output bound: cannot fail.
        Hkdf::<Sha256>::new(None, shared.as_bytes())
            .expand(ack_mac_info(issuer, recipient).as_bytes(), &mut key)
            .expect("32 bytes is within HKDF-SHA-256's output bound");
        Ok(AckKey(key))
    }

    fn hmac(&self, preimage: &[u8]) -> Hmac<Sha256> {
        // HMAC accepts keys of any length: this cannot fail.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("hmac takes a key of any length");
        mac.update(preimage);
        mac
    }

    /// §4.2: the `mac` value over `preimage` (the JCS of the ack without
    /// `proof`): `u` + 43 base64url characters.
    pub fn mac(&self, preimage: &[u8]) -> String {
        multibase_u(&self.hmac(preimage).finalize().into_bytes())
    }

    /// Whether `mac` is this key's MAC over `preimage` (compared in
    /// constant time).
    ///
    /// # Errors
    /// [`AckMacError::Encoding`] when `mac` is not the one spelling of 32
    /// bytes.
    pub fn verify(&self, preimage: &[u8], mac: &str) -> Result<bool, AckMacError> {
        let tag = mac
            .strip_prefix('u')
            .ok_or(AckMacError::Encoding(EncodingError::MultibasePrefix(
                mac.chars().next(),
            )))
            .and_then(|b64| b64url_decode_array::<32>(b64).map_err(AckMacError::Encoding))?;
        Ok(self.hmac(preimage).verify_slice(&tag).is_ok())
    }
}

impl Drop for AckKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for AckKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AckKey(..)")
    }
}
