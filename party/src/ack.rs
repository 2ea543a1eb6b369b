//! Delivery §4.2 / §4.4: the `delivery-ack/0.1` document — made by the
//! receiver inside its stage-9 transaction, and its proof checked by the
//! sender — in both proof classes:
//!
//! - **signature class**: `eddsa-jcs-2022` under the ack's `issuer` (the
//!   acknowledging pair anchor); unsigned or foreign-signed is invalid;
//! - **designated-verifier class**: `{ "mac": … }`, HMAC-SHA-256 over the
//!   JCS of the ack without `proof`, under the arrival tuple's ack key
//!   ([`rltp_proofs::ack_mac`]); an all-zero shared secret is refused.
//!
//! The class rule: the form follows the class of the **acknowledged**
//! payload, never stronger, never the other one — a wrong form for the
//! class is invalid even when its proof verifies.

use rltp_proofs::ack_mac::{AckKey, AckMacError};
use rltp_proofs::context::PairContext;
use rltp_proofs::declaration::{CryptosuiteError, eddsa_jcs_2022_sign, eddsa_jcs_2022_verify};
use rltp_proofs::jcs::canonicalize;
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::{DidKey, Rkid};

use crate::document::{Document, Header, Profiled};
use crate::registry::{AckClass, DELIVERY_ACK};

/// §4.2: the one `meaning` of this version.
pub const MEANING_RECEIVED: &str = "received";

/// Why an acknowledgement could not be made, or why its proof is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AckProofError {
    /// The ack carries no `proof` (the document profile already refuses it).
    #[error("the acknowledgement carries no proof")]
    Missing,
    /// The proof's form is not the one the acknowledged payload's class
    /// selects (a signature for a designated-verifier payload, or a MAC for
    /// a signature payload): invalid even when it verifies (§4.4).
    #[error("the proof form is not the {expected} class form")]
    WrongClassForm {
        /// The class the acknowledged document's type selects.
        expected: &'static str,
    },
    /// The `eddsa-jcs-2022` proof does not verify.
    #[error("signature: {0}")]
    Signature(#[from] CryptosuiteError),
    /// The signature verifies, but under another key than the ack's
    /// `issuer` (foreign-signed).
    #[error("the acknowledgement is signed by {signer}, not by its issuer")]
    ForeignSigned {
        /// The key that signed.
        signer: String,
    },
    /// No counterpart key-agreement key is held for the arrival tuple, so
    /// no ack key exists.
    #[error("no counterpart key-agreement key is held for the arrival tuple")]
    NoTupleKey,
    /// The ack key cannot be derived (all-zero shared secret) or the MAC
    /// value is not `u` + base64url of 32 bytes.
    #[error("mac: {0}")]
    Mac(#[from] AckMacError),
    /// The MAC does not verify under the arrival tuple's ack key.
    #[error("the mac does not verify under the arrival tuple's ack key")]
    BadMac,
    /// The unsecured ack has no JCS form (cannot occur for a profiled
    /// document).
    #[error("the acknowledgement has no jcs form")]
    Jcs,
}

/// The key material of the arrival tuple an acknowledgement concerns
/// (§4.4: the tuple is selected by the `rkid` the document arrived on).
#[derive(Debug, Clone, Copy)]
pub struct TupleKeys<'a> {
    /// This party's pair context of the tuple.
    pub own: &'a PairContext,
    /// The counterpart's key-agreement key (its card's `keyAgreement`),
    /// when held; required for the designated-verifier class.
    pub counterpart_key: Option<&'a Rkid>,
}

/// §4.2: adds the proof of `class` to the unsecured ack `unsecured`,
/// issued by `keys.own` (whose anchor must be the ack's `issuer`), at
/// `created` (the ack's `issuedAt`).
///
/// # Errors
/// [`AckProofError::NoTupleKey`] for the MAC form without a counterpart
/// key, [`AckProofError::Mac`] for an all-zero shared secret, or the
/// unreachable signing and JCS failures.
pub fn prove(
    unsecured: &Object,
    class: AckClass,
    keys: TupleKeys<'_>,
    created: &str,
) -> Result<Object, AckProofError> {
    match class {
        AckClass::Signature => Ok(eddsa_jcs_2022_sign(
            unsecured,
            created,
            keys.own.signing_key(),
        )?),
        AckClass::DesignatedVerifier => {
            let recipient = recipient_of(unsecured).ok_or(AckProofError::Jcs)?;
            let key = ack_key(keys, &keys.own.anchor(), &recipient)?;
            let preimage =
                canonicalize(&Value::Object(unsecured.clone())).map_err(|_| AckProofError::Jcs)?;
            let mut proof = Object::new();
            proof.insert("mac", key.mac(&preimage));
            let mut secured = unsecured.clone();
            secured.insert("proof", proof);
            Ok(secured)
        }
    }
}

fn recipient_of(unsecured: &Object) -> Option<DidKey> {
    unsecured
        .get("recipient")
        .and_then(Value::as_str)
        .and_then(|r| DidKey::parse(r).ok())
}

/// The ack key of the tuple for an ack from `issuer` to `recipient`
/// (either side derives the same key).
fn ack_key(
    keys: TupleKeys<'_>,
    issuer: &DidKey,
    recipient: &DidKey,
) -> Result<AckKey, AckProofError> {
    let theirs = keys.counterpart_key.ok_or(AckProofError::NoTupleKey)?;
    Ok(AckKey::derive(
        &keys.own.x_secret(),
        theirs,
        issuer,
        recipient,
    )?)
}

/// §4.2: makes the acknowledgement of `acked` (digest `acked_digest`) that
/// `keys.own` issues — `issuer` = the acknowledged document's `recipient`,
/// `recipient` = its `issuer`, the same `threadId`, `payload` =
/// `{ref, meaning: received}` — with the proof its `class` selects.
///
/// # Errors
/// As [`prove`].
pub fn make_ack(
    acked: &Profiled,
    acked_digest: &str,
    class: AckClass,
    keys: TupleKeys<'_>,
    id: String,
    issued_at: &str,
) -> Result<Document, AckProofError> {
    let header = Header {
        id,
        type_uri: DELIVERY_ACK.to_owned(),
        issuer: keys.own.anchor(),
        recipient: acked.issuer,
        thread_id: acked.thread_id.clone(),
        issued_at: issued_at.to_owned(),
    };
    let mut payload = Object::new();
    payload.insert("ref", acked_digest);
    payload.insert("meaning", MEANING_RECEIVED);
    let secured = prove(&header.with_payload(payload), class, keys, issued_at)?;
    Document::from_value(Value::Object(secured)).ok_or(AckProofError::Jcs)
}

/// §4.2 "proof verifies under `issuer` (signature form) or under the
/// arrival tuple's ack key (MAC form)", with the §4.4 class rule first: the
/// form must be the one `class` (the acknowledged document's class)
/// selects.
///
/// # Errors
/// The first [`AckProofError`].
pub fn verify_proof(
    ack: &Profiled,
    class: AckClass,
    keys: TupleKeys<'_>,
) -> Result<(), AckProofError> {
    let proof = ack.proof.as_ref().ok_or(AckProofError::Missing)?;
    let mac_form = proof.contains_key("mac");
    match (class, mac_form) {
        (AckClass::Signature, false) => {
            let signer = eddsa_jcs_2022_verify(&ack.object)?;
            if signer != ack.issuer {
                return Err(AckProofError::ForeignSigned {
                    signer: signer.to_did_key(),
                });
            }
            Ok(())
        }
        (AckClass::DesignatedVerifier, true) => {
            let mac = proof.get("mac").and_then(Value::as_str).unwrap_or_default();
            let key = ack_key(keys, &ack.issuer, &ack.recipient)?;
            let preimage =
                canonicalize(&Value::Object(ack.unsecured())).map_err(|_| AckProofError::Jcs)?;
            if key.verify(&preimage, mac)? {
                Ok(())
            } else {
                Err(AckProofError::BadMac)
            }
        }
        (class, _) => Err(AckProofError::WrongClassForm {
            expected: class.as_str(),
        }),
    }
}
