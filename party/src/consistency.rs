//! Delivery §6.2 stage 8 for the two credential-carrying types: the
//! outer/inner consistency rules (§4.1, §4.3) and the state-free pre-lock
//! checks 1–4 of a bundle (§4.1). Every failure is
//! `failed(validation-failed)` and earns no acknowledgement — "an
//! acknowledgement never goes to a party other than the credential's own
//! issuer" (§4.3): a credential wrapped by someone else (outer `issuer` ≠
//! `credential.issuer`) ends here.

use rltp_proofs::declaration::eddsa_jcs_2022_verify;
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::DidKey;

use crate::bundle::ENCOUNTER_SCAN;
use crate::card::{CardError, ContactCard};
use crate::document::Profiled;

/// Why a document fails its type's consistency rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Inconsistent {
    /// The payload lacks the credential (cannot pass stage 7).
    #[error("the payload carries no credential object")]
    NoCredential,
    /// `issuer` ≠ `credential.issuer` (or ≠ `card.anchor` for a bundle).
    #[error("issuer is not the credential's (and card's) issuer")]
    Issuer,
    /// `recipient` ≠ `credential.credentialSubject.id`.
    #[error("recipient is not the credential subject")]
    Subject,
    /// A present `ceremony.enactment` ≠ the credential's
    /// `enactmentBinding` (§3: where present it MUST recompute).
    #[error("ceremony.enactment does not recompute")]
    Enactment,
    /// A timestamp is not a calendar date (pre-lock check 1).
    #[error("{0} is not a calendar-valid timestamp")]
    Calendar(&'static str),
    /// A key of the credential does not decode (pre-lock check 1).
    #[error("{0} does not decode to an ed25519 did:key")]
    Key(&'static str),
    /// The card fails (check 2), or carries no sent challenge.
    #[error("card: {0}")]
    Card(String),
    /// The card's `sentTo` is not the recipient, or `boundTo` not the
    /// credential's bound challenge.
    #[error("the card's sentTo/boundTo do not match the document")]
    SentCard,
    /// The credential proof does not verify under its issuer (check 3).
    #[error("the credential proof does not verify under its issuer")]
    CredentialProof,
    /// `credentialSubject.ceremony` is not `encounter-scan@0.25` (check 5's
    /// state-free part).
    #[error("the credential names another ceremony than encounter-scan@0.25")]
    Ceremony,
}

fn text<'a>(object: &'a Object, path: &[&str]) -> Option<&'a str> {
    let (last, parents) = path.split_last()?;
    let mut at = object;
    for member in parents {
        at = at.get(member)?.as_object()?;
    }
    at.get(last)?.as_str()
}

fn credential_of(document: &Profiled) -> Result<&Object, Inconsistent> {
    document
        .payload
        .get("credential")
        .and_then(Value::as_object)
        .ok_or(Inconsistent::NoCredential)
}

/// §4.3 and the shared half of §4.1: `issuer` = `credential.issuer`,
/// `recipient` = `credentialSubject.id`, and a present `ceremony.enactment`
/// = `credentialSubject.enactmentBinding`.
fn outer_inner(document: &Profiled, credential: &Object) -> Result<(), Inconsistent> {
    if text(credential, &["issuer"]) != Some(document.issuer.to_did_key().as_str()) {
        return Err(Inconsistent::Issuer);
    }
    let subject = text(credential, &["credentialSubject", "id"]);
    if subject != Some(document.recipient.to_did_key().as_str()) {
        return Err(Inconsistent::Subject);
    }
    if let Some(enactment) = document.ceremony_enactment() {
        let binding = text(credential, &["credentialSubject", "enactmentBinding"]);
        if enactment.as_str().is_none() || enactment.as_str() != binding {
            return Err(Inconsistent::Enactment);
        }
    }
    Ok(())
}

/// §4.3: the consistency of an `encounter-credential-delivery/0.1`;
/// returns the credential to buffer.
///
/// # Errors
/// The first failing rule.
pub fn credential_delivery(document: &Profiled) -> Result<&Object, Inconsistent> {
    let credential = credential_of(document)?;
    outer_inner(document, credential)?;
    Ok(credential)
}

/// A bundle's verified parts (stage 8's state-free checks passed).
#[derive(Debug, Clone)]
pub struct BundleParts<'a> {
    /// The verified sent card.
    pub card: ContactCard,
    /// The verified credential.
    pub credential: &'a Object,
    /// `credentialSubject.challenge`.
    pub bound_challenge: &'a str,
    /// `credentialSubject.enactmentBinding`.
    pub enactment_binding: &'a str,
}

/// §4.1: outer/inner consistency and pre-lock checks 1–4 (check 1's
/// schemas ran at stages 5 and 7; here its calendar and key-decoding
/// parts), plus check 5's state-free ceremony equality.
///
/// # Errors
/// The first failing rule.
pub fn bundle(document: &Profiled) -> Result<BundleParts<'_>, Inconsistent> {
    let credential = credential_of(document)?;
    let card_value = document
        .payload
        .get("card")
        .ok_or(Inconsistent::Card("absent".into()))?;
    calendar_checks(document, credential, card_value)?;
    for (name, path) in [
        ("credential.issuer", &["issuer"][..]),
        ("credentialSubject.id", &["credentialSubject", "id"][..]),
    ] {
        let decodes = text(credential, path)
            .and_then(|s| DidKey::parse(s).ok())
            .is_some_and(|k| k.verifying_key().is_ok());
        if !decodes {
            return Err(Inconsistent::Key(name));
        }
    }
    let card = ContactCard::verify(card_value)
        .map_err(|e: CardError| Inconsistent::Card(e.to_string()))?;
    outer_inner(document, credential)?;
    if card.anchor() != &document.issuer {
        return Err(Inconsistent::Issuer);
    }
    let bound_challenge =
        text(credential, &["credentialSubject", "challenge"]).ok_or(Inconsistent::SentCard)?;
    let recipient = document.recipient.to_did_key();
    if card.challenge().is_none()
        || card.text("sentTo") != Some(recipient.as_str())
        || card.text("boundTo") != Some(bound_challenge)
    {
        return Err(Inconsistent::SentCard);
    }
    let signer = eddsa_jcs_2022_verify(credential).map_err(|_| Inconsistent::CredentialProof)?;
    if Some(signer.to_did_key().as_str()) != text(credential, &["issuer"]) {
        return Err(Inconsistent::CredentialProof);
    }
    if text(credential, &["credentialSubject", "ceremony"]) != Some(ENCOUNTER_SCAN) {
        return Err(Inconsistent::Ceremony);
    }
    let enactment_binding = text(credential, &["credentialSubject", "enactmentBinding"])
        .ok_or(Inconsistent::Enactment)?;
    Ok(BundleParts {
        card,
        credential,
        bound_challenge,
        enactment_binding,
    })
}

/// Pre-lock check 1, timestamps: every RFC 3339 value a bundle carries is a
/// calendar date (the schemas check only the shape).
fn calendar_checks(
    document: &Profiled,
    credential: &Object,
    card: &Value,
) -> Result<(), Inconsistent> {
    let card = card
        .as_object()
        .ok_or(Inconsistent::Card("not an object".into()))?;
    let stamps = [
        ("issuedAt", Some(document.issued_at.as_str())),
        ("card.proof.created", text(card, &["proof", "created"])),
        (
            "card.challenge.issuedAt",
            text(card, &["challenge", "issuedAt"]),
        ),
        ("credential.validFrom", text(credential, &["validFrom"])),
        (
            "credential.proof.created",
            text(credential, &["proof", "created"]),
        ),
    ];
    for (name, stamp) in stamps {
        if stamp.is_some_and(|s| !calendar_valid(s)) {
            return Err(Inconsistent::Calendar(name));
        }
    }
    Ok(())
}

/// Whether the date of an RFC 3339 `YYYY-MM-DDT…` value exists (the day
/// within its month, leap years counted). The shape is the schema's.
pub fn calendar_valid(stamp: &str) -> bool {
    let field = |range: std::ops::Range<usize>| {
        stamp
            .get(range)
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let (year, month, day) = (field(0..4), field(5..7), field(8..10));
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    (1..=days).contains(&day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_validity_counts_leap_years() {
        assert!(calendar_valid("2024-02-29T00:00:00Z"));
        assert!(!calendar_valid("2026-02-29T00:00:00Z"));
        assert!(!calendar_valid("1900-02-29T00:00:00Z"));
        assert!(calendar_valid("2000-02-29T00:00:00Z"));
        assert!(!calendar_valid("2026-04-31T00:00:00Z"));
        assert!(!calendar_valid("2026-13-01T00:00:00Z"));
        assert!(calendar_valid("2026-12-31T23:59:59.999Z"));
    }
}
