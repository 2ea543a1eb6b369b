//! Contact cards (Encounter 6, wire `rltp-card/0.25`): a party's pair
//! anchor, its `keyAgreement` (the `rkid` counterparts seal to, Identity
//! §5.2) and up to 8 delivery hints ([`crate::hint`]), signed
//! `eddsa-jcs-2022` under the anchor — the signature is what binds the
//! key-agreement key to the anchor (Identity §8.4).
//!
//! Verification order (`encounter-cards.json` fixes it): the schema
//! (`contact-card.schema.json`, offline by `$id`), the decoded keys, the
//! Layer-1 binding (the proof's verification method names the card's own
//! anchor — checked **before** any cryptography, Encounter 2.3), then the
//! signature.

use rltp_proofs::context::PairContext;
use rltp_proofs::declaration::{
    CryptosuiteError, did_key_verification_method, eddsa_jcs_2022_sign, eddsa_jcs_2022_verify,
};
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::{DidKey, Rkid};

use crate::document::to_serde;
use crate::hint::{DeliveryHint, MAX_HINTS};
use crate::schema::{self, CONTACT_CARD, SchemaError};

/// The card's wire version (Encounter wire 0.25).
pub const CARD_VERSION: &str = "rltp-card/0.25";

/// Why a card is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CardError {
    /// Not a JSON object with a JCS form.
    #[error("a card is a json object")]
    NotAnObject,
    /// The card schema refused it (e.g. a sent card without `boundTo`).
    #[error("card schema: {0}")]
    Schema(#[from] SchemaError),
    /// `anchor` does not decode to an Ed25519 key.
    #[error("card anchor does not decode to an ed25519 did:key")]
    Anchor,
    /// `keyAgreement` does not decode to an X25519 Multikey.
    #[error("card keyAgreement does not decode to an x25519 multikey")]
    KeyAgreement,
    /// The proof's verification method names another key than `anchor`
    /// (unbound material, Encounter 2.3): refused before cryptography.
    #[error("the card proof's verificationMethod does not name the card anchor")]
    Unbound,
    /// The `eddsa-jcs-2022` proof does not verify.
    #[error("card proof: {0}")]
    Proof(#[from] CryptosuiteError),
    /// More than [`MAX_HINTS`] hints, or a repeated one, offered for signing.
    #[error("a card carries at most 8 distinct delivery hints")]
    Hints,
}

/// A verified contact card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactCard {
    object: Object,
    anchor: DidKey,
    key_agreement: Rkid,
}

impl ContactCard {
    /// Verifies `card` (schema, keys, binding, signature — in that order).
    ///
    /// # Errors
    /// The first failing check as a [`CardError`].
    pub fn verify(card: &Value) -> Result<ContactCard, CardError> {
        let object = card.as_object().ok_or(CardError::NotAnObject)?;
        let instance = to_serde(card).ok_or(CardError::NotAnObject)?;
        schema::validate(CONTACT_CARD, &instance)?;
        let text = |member: &str| object.get(member).and_then(Value::as_str).unwrap_or("");
        let anchor = DidKey::parse(text("anchor"))
            .ok()
            .filter(|k| k.verifying_key().is_ok())
            .ok_or(CardError::Anchor)?;
        let key_agreement =
            Rkid::parse(text("keyAgreement")).map_err(|_| CardError::KeyAgreement)?;
        let method = object
            .get("proof")
            .and_then(Value::as_object)
            .and_then(|p| p.get("verificationMethod"))
            .and_then(Value::as_str);
        if method != Some(did_key_verification_method(&anchor).as_str()) {
            return Err(CardError::Unbound);
        }
        let signer = eddsa_jcs_2022_verify(object)?;
        if signer != anchor {
            return Err(CardError::Unbound);
        }
        Ok(ContactCard {
            object: object.clone(),
            anchor,
            key_agreement,
        })
    }

    /// Signs a **displayed** card of `context` (no challenge, no
    /// `sentTo`/`boundTo`) carrying `hints` in preference order, at
    /// `created` (RFC 3339 UTC, the caller's clock).
    ///
    /// # Errors
    /// [`CardError::Hints`] for more than 8 or repeated hints; the
    /// unreachable signing and verification failures otherwise.
    pub fn sign_displayed(
        context: &PairContext,
        hints: &[DeliveryHint],
        created: &str,
    ) -> Result<ContactCard, CardError> {
        let spelled: Vec<String> = hints.iter().map(ToString::to_string).collect();
        let mut distinct = spelled.clone();
        distinct.sort();
        distinct.dedup();
        if spelled.len() > MAX_HINTS || distinct.len() != spelled.len() {
            return Err(CardError::Hints);
        }
        let mut card = Object::new();
        card.insert("version", CARD_VERSION);
        card.insert("anchor", context.anchor().to_did_key());
        card.insert("keyAgreement", context.rkid().to_multikey());
        if !spelled.is_empty() {
            card.insert(
                "deliveryHints",
                spelled.into_iter().map(Value::from).collect::<Vec<_>>(),
            );
        }
        let signed = eddsa_jcs_2022_sign(&card, created, context.signing_key())?;
        ContactCard::verify(&Value::Object(signed))
    }

    /// The card's pair anchor.
    pub fn anchor(&self) -> &DidKey {
        &self.anchor
    }

    /// The key-agreement key: the `rkid` to seal to (Identity §5.2).
    pub fn key_agreement(&self) -> &Rkid {
        &self.key_agreement
    }

    /// The signed card as sent.
    pub fn object(&self) -> &Object {
        &self.object
    }

    /// A string member (`sentTo`, `boundTo`, `name`, …), if present.
    pub fn text(&self, member: &str) -> Option<&str> {
        self.object.get(member).and_then(Value::as_str)
    }

    /// `challenge.value`, if the card carries a challenge.
    pub fn challenge(&self) -> Option<&str> {
        self.object
            .get("challenge")
            .and_then(Value::as_object)
            .and_then(|c| c.get("value"))
            .and_then(Value::as_str)
    }

    /// The raw `deliveryHints`, in the card's order.
    pub fn hint_texts(&self) -> Vec<String> {
        self.object
            .get("deliveryHints")
            .and_then(Value::as_array)
            .unwrap_or_default()
            .iter()
            .filter_map(|h| h.as_str().map(str::to_owned))
            .collect()
    }

    /// The hints this implementation can use ([`crate::hint::usable`]).
    pub fn hints(&self) -> Vec<DeliveryHint> {
        crate::hint::usable(&self.hint_texts())
    }
}
