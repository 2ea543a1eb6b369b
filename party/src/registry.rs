//! Delivery §4 / §4.4: the receiver's type registry — one entry per type,
//! each carrying the Type URI, the payload schema reference (by `$id`,
//! resolved offline, §3), the proof declaration and the acknowledgement
//! class of its payload — and the §4.4 acknowledgement class rule.
//!
//! A type absent from the registry is `failed(unknown-type)` at stage 6
//! (§3: a document that would have an effect is never silently ignored).
//! No registered type's effect writes replicated state (§4.4's global rule):
//! the effects here are durable buffering, the sender-status update, and
//! the application's bundle effect, which is local by construction.

use crate::document::TYPE_NAMESPACE;

/// `delivery-ack/0.1` (§4.2).
pub const DELIVERY_ACK: &str = "https://real-life.org/trust-tasks/delivery-ack/0.1";
/// `encounter-bundle/0.1` (§4.1).
pub const ENCOUNTER_BUNDLE: &str = "https://real-life.org/trust-tasks/encounter-bundle/0.1";
/// `encounter-credential-delivery/0.1` (§4.3).
pub const CREDENTIAL_DELIVERY: &str =
    "https://real-life.org/trust-tasks/encounter-credential-delivery/0.1";
/// `registry-declaration/0.1` (§4.4): signature class, not registered for
/// receipt by a party of this crate.
pub const REGISTRY_DECLARATION: &str = "https://real-life.org/trust-tasks/registry-declaration/0.1";

/// §4.4: the companion-registered types whose payload authenticity is
/// designated-verifier — the trust-act family and the continuity pair.
/// Their acknowledgements take the MAC form of §4.2.
pub const DESIGNATED_VERIFIER_TYPES: [&str; 6] = [
    "https://real-life.org/trust-tasks/star/0.1",
    "https://real-life.org/trust-tasks/group-star/0.1",
    "https://real-life.org/trust-tasks/grade-declaration/0.1",
    "https://real-life.org/trust-tasks/anchor-mapping/0.2",
    "https://real-life.org/trust-tasks/continuity-probe/0.1",
    "https://real-life.org/trust-tasks/continuity-mapping/0.1",
];

/// §4.4: the audience class of a payload, which selects its
/// acknowledgement's proof form (the class rule: an acknowledgement is
/// never more provable than what it acknowledges).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckClass {
    /// Payload authenticity is a transferable signature: the ack carries an
    /// `eddsa-jcs-2022` proof under its `issuer`.
    Signature,
    /// Payload authenticity is designated-verifier: the ack carries the
    /// `{ "mac" }` proof under the arrival tuple's ack key.
    DesignatedVerifier,
}

impl AckClass {
    /// The class of `type_uri` as an acknowledged document: `None` for
    /// `delivery-ack` itself (terminal, §4.2) and for types this contract
    /// does not classify.
    pub fn of_type(type_uri: &str) -> Option<AckClass> {
        if DESIGNATED_VERIFIER_TYPES.contains(&type_uri) {
            Some(AckClass::DesignatedVerifier)
        } else if [ENCOUNTER_BUNDLE, CREDENTIAL_DELIVERY, REGISTRY_DECLARATION].contains(&type_uri)
        {
            Some(AckClass::Signature)
        } else {
            None
        }
    }

    /// A short spelling for records and vectors: `signature` or
    /// `designated-verifier`.
    pub const fn as_str(self) -> &'static str {
        match self {
            AckClass::Signature => "signature",
            AckClass::DesignatedVerifier => "designated-verifier",
        }
    }
}

/// What a registered type's stage 8 and stage 9 do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TypeKind {
    /// §4.2: stage 8 runs the sender's consistency checks against the
    /// sent-register; stage 9 updates the sender status. Terminal: no ack.
    DeliveryAck,
    /// §4.3: stage 8 the outer/inner consistency; stage 9 durably buffers
    /// the credential and keeps the acknowledgement.
    CredentialDelivery,
    /// §4.1: stage 8 the consistency and pre-lock checks 1–4 here, 5–6 at
    /// the application's seam; stage 9 the application's effect.
    Bundle,
}

/// §4.4: one registry entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeEntry {
    /// The Type URI.
    pub type_uri: &'static str,
    /// The payload schema's `$id` (for own types, the Type URI, §3).
    pub payload_schema: &'static str,
    /// Whether the document carries `proof` (the document-profile schema
    /// enforces it per type; kept here as the entry's declaration).
    pub proof_present: bool,
    /// The class of its payload, when the type earns an acknowledgement;
    /// `None` for a terminal type.
    pub ack_class: Option<AckClass>,
    /// Its stage-8/9 behaviour.
    pub kind: TypeKind,
}

/// The registry a party receives with.
#[derive(Debug, Clone)]
pub struct TypeRegistry {
    entries: Vec<TypeEntry>,
}

impl TypeRegistry {
    /// The three types this crate receives: `delivery-ack/0.1`,
    /// `encounter-credential-delivery/0.1` and `encounter-bundle/0.1`.
    pub fn standard() -> TypeRegistry {
        TypeRegistry {
            entries: vec![
                TypeEntry {
                    type_uri: DELIVERY_ACK,
                    payload_schema: DELIVERY_ACK,
                    proof_present: true,
                    ack_class: None,
                    kind: TypeKind::DeliveryAck,
                },
                TypeEntry {
                    type_uri: CREDENTIAL_DELIVERY,
                    payload_schema: CREDENTIAL_DELIVERY,
                    proof_present: false,
                    ack_class: Some(AckClass::Signature),
                    kind: TypeKind::CredentialDelivery,
                },
                TypeEntry {
                    type_uri: ENCOUNTER_BUNDLE,
                    payload_schema: ENCOUNTER_BUNDLE,
                    proof_present: false,
                    ack_class: Some(AckClass::Signature),
                    kind: TypeKind::Bundle,
                },
            ],
        }
    }

    /// The entry for `type_uri` (stage 6), if registered.
    pub fn get(&self, type_uri: &str) -> Option<&TypeEntry> {
        if !type_uri.starts_with(TYPE_NAMESPACE) {
            return None;
        }
        self.entries.iter().find(|e| e.type_uri == type_uri)
    }
}

impl Default for TypeRegistry {
    fn default() -> Self {
        TypeRegistry::standard()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_knows_three_types_and_the_class_rule_covers_the_dv_family() {
        let registry = TypeRegistry::standard();
        assert_eq!(registry.get(DELIVERY_ACK).map(|e| e.ack_class), Some(None));
        assert_eq!(
            registry.get(CREDENTIAL_DELIVERY).and_then(|e| e.ack_class),
            Some(AckClass::Signature)
        );
        assert!(registry.get(REGISTRY_DECLARATION).is_none());
        assert!(
            registry
                .get("https://real-life.org/trust-tasks/delivery-carrier/0.1")
                .is_none()
        );
        assert_eq!(
            AckClass::of_type("https://real-life.org/trust-tasks/star/0.1"),
            Some(AckClass::DesignatedVerifier)
        );
        assert_eq!(
            AckClass::of_type(ENCOUNTER_BUNDLE),
            Some(AckClass::Signature)
        );
        assert_eq!(AckClass::of_type(DELIVERY_ACK), None);
    }
}
