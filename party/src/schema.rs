//! Delivery §3, the offline schema rule: every schema of the contract is
//! pre-registered **by its `$id`**, and no `$ref` is ever resolved over the
//! network. The vendored `vectors/spec/schemas/` directory is the complete
//! closure (provenance in `vectors/spec/README.md`); this module compiles
//! it in, so a binary needs no file at run time.
//!
//! Validation is the `jsonschema` crate (draft 2020-12) with its network
//! and file resolvers compiled out (`default-features = false`), the
//! retriever set to offline, and the linear-time `regex` engine for
//! `pattern`. A reference that the registry cannot resolve fails at
//! construction; §3 makes every document validated against such a
//! registry `malformed`, and so does [`Schemas::validate`] when
//! [`schemas`] could not be built.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use jsonschema::{PatternOptions, Registry, Validator};
use serde_json::Value;

/// The vendored schema files, by file name, as compiled in: the one list.
pub const VENDORED_SCHEMAS: [(&str, &str); 11] = [
    (
        "carrier-proof.schema.json",
        include_str!("../../vectors/spec/schemas/carrier-proof.schema.json"),
    ),
    (
        "contact-card-0.25.schema.json",
        include_str!("../../vectors/spec/schemas/contact-card-0.25.schema.json"),
    ),
    (
        "contact-card.schema.json",
        include_str!("../../vectors/spec/schemas/contact-card.schema.json"),
    ),
    (
        "encounter-credential-0.25.schema.json",
        include_str!("../../vectors/spec/schemas/encounter-credential-0.25.schema.json"),
    ),
    (
        "encounter-credential.schema.json",
        include_str!("../../vectors/spec/schemas/encounter-credential.schema.json"),
    ),
    (
        "payload-delivery-ack.schema.json",
        include_str!("../../vectors/spec/schemas/payload-delivery-ack.schema.json"),
    ),
    (
        "payload-encounter-bundle.schema.json",
        include_str!("../../vectors/spec/schemas/payload-encounter-bundle.schema.json"),
    ),
    (
        "payload-encounter-credential-delivery.schema.json",
        include_str!(
            "../../vectors/spec/schemas/payload-encounter-credential-delivery.schema.json"
        ),
    ),
    (
        "payload-registry-declaration.schema.json",
        include_str!("../../vectors/spec/schemas/payload-registry-declaration.schema.json"),
    ),
    (
        "rltp-delivery-document.schema.json",
        include_str!("../../vectors/spec/schemas/rltp-delivery-document.schema.json"),
    ),
    (
        "sealed-envelope.schema.json",
        include_str!("../../vectors/spec/schemas/sealed-envelope.schema.json"),
    ),
];

/// The vendored `schemas/SHA256SUMS` manifest, as compiled in.
pub const VENDORED_SCHEMAS_MANIFEST: &str = include_str!("../../vectors/spec/schemas/SHA256SUMS");

/// `$id` of the document profile (§3).
pub const DOCUMENT_PROFILE: &str =
    "https://real-life.org/rltp/v1/schemas/rltp-delivery-document.schema.json";
/// `$id` of the contact card (Encounter 6, wire 0.25) the bundle references.
pub const CONTACT_CARD: &str = "https://real-life.org/rltp/v1/schemas/contact-card.schema.json";
/// `$id` of the encounter credential (Encounter 7.2, wire 0.25) the payload
/// schemas reference.
pub const ENCOUNTER_CREDENTIAL: &str =
    "https://real-life.org/rltp/v1/schemas/encounter-credential.schema.json";

/// Why a value was not validated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// No schema with this `$id` is registered (§3: treated as `malformed`).
    #[error("no schema is registered under $id {0}")]
    Unregistered(String),
    /// The vendored closure could not be compiled (a `$ref` it cannot
    /// resolve offline, say); §3 makes every document `malformed` then.
    #[error("the vendored schemas do not compile offline: {0}")]
    Closure(String),
    /// The value does not conform; the first error, with its location.
    #[error("{at}: {message}")]
    Invalid {
        /// JSON pointer of the failing instance location.
        at: String,
        /// The validator's message.
        message: String,
    },
}

/// The compiled closure: one validator per `$id`.
pub struct Schemas {
    validators: BTreeMap<String, Validator>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.validators.keys()).finish()
    }
}

impl Schemas {
    /// Compiles the vendored closure offline: every file registered under
    /// its own `$id`, then one validator per file.
    ///
    /// # Errors
    /// [`SchemaError::Closure`] naming the file or reference that failed.
    pub fn compile() -> Result<Schemas, SchemaError> {
        let closure = |e: String| SchemaError::Closure(e);
        let mut documents = Vec::with_capacity(VENDORED_SCHEMAS.len());
        for (name, text) in VENDORED_SCHEMAS {
            let value: Value =
                serde_json::from_str(text).map_err(|e| closure(format!("{name}: {e}")))?;
            let id = value
                .get("$id")
                .and_then(Value::as_str)
                .ok_or_else(|| closure(format!("{name} has no $id")))?
                .to_owned();
            documents.push((id, value));
        }
        let registry = Registry::new()
            .extend(documents.iter().map(|(id, v)| (id.as_str(), v)))
            .and_then(|builder| builder.prepare())
            .map_err(|e| closure(e.to_string()))?;
        let mut validators = BTreeMap::new();
        for (id, value) in &documents {
            let validator = jsonschema::options()
                .offline()
                .with_registry(&registry)
                .with_pattern_options(PatternOptions::regex())
                .build(value)
                .map_err(|e| closure(format!("{id}: {e}")))?;
            validators.insert(id.clone(), validator);
        }
        Ok(Schemas { validators })
    }

    /// Every registered `$id`.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.validators.keys().map(String::as_str)
    }

    /// Validates `value` against the schema registered under `id`.
    ///
    /// # Errors
    /// [`SchemaError::Unregistered`] or the first [`SchemaError::Invalid`].
    pub fn validate(&self, id: &str, value: &Value) -> Result<(), SchemaError> {
        let validator = self
            .validators
            .get(id)
            .ok_or_else(|| SchemaError::Unregistered(id.to_owned()))?;
        validator.validate(value).map_err(|e| SchemaError::Invalid {
            at: e.instance_path().to_string(),
            message: e.to_string(),
        })
    }
}

/// The process-wide compiled closure (compiled on first use).
///
/// # Errors
/// [`SchemaError::Closure`] if the vendored files do not compile; every
/// caller then treats what it validates as `malformed` (§3).
pub fn schemas() -> Result<&'static Schemas, SchemaError> {
    static SCHEMAS: OnceLock<Result<Schemas, SchemaError>> = OnceLock::new();
    SCHEMAS
        .get_or_init(Schemas::compile)
        .as_ref()
        .map_err(Clone::clone)
}

/// Validates `value` against the schema registered under `id` in the
/// process-wide closure ([`schemas`]).
///
/// # Errors
/// As [`schemas`] and [`Schemas::validate`].
pub fn validate(id: &str, value: &Value) -> Result<(), SchemaError> {
    schemas()?.validate(id, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_closure_compiles_offline_and_registers_every_file_by_its_id() {
        let schemas = schemas().unwrap();
        assert_eq!(schemas.ids().count(), VENDORED_SCHEMAS.len());
        assert!(schemas.ids().any(|id| id == DOCUMENT_PROFILE));
        assert!(schemas.ids().any(|id| id == CONTACT_CARD));
        assert!(schemas.ids().any(|id| id == ENCOUNTER_CREDENTIAL));
    }

    #[test]
    fn an_unregistered_id_and_a_foreign_reference_are_refused() {
        assert_eq!(
            validate("https://example.invalid/x", &json!({})),
            Err(SchemaError::Unregistered(
                "https://example.invalid/x".into()
            ))
        );
        // A schema whose $ref is not in the closure does not compile: no
        // retrieval is ever attempted.
        let registry = Registry::new()
            .add(CONTACT_CARD, json!({"type": "object"}))
            .and_then(|b| b.prepare())
            .unwrap();
        let foreign = json!({"$ref": "https://example.invalid/remote.schema.json"});
        assert!(
            jsonschema::options()
                .offline()
                .with_registry(&registry)
                .build(&foreign)
                .is_err()
        );
    }

    #[test]
    fn the_ack_payload_is_closed_and_its_meaning_is_one_value() {
        let ack = "https://real-life.org/trust-tasks/delivery-ack/0.1";
        let good = json!({"ref": "uEiByzW6EIsQH-20JhpDxEwt97X7C9_Xh0wvZ1SHwFTY3kw", "meaning": "received"});
        assert_eq!(validate(ack, &good), Ok(()));
        let accepted = json!({"ref": "uEiByzW6EIsQH-20JhpDxEwt97X7C9_Xh0wvZ1SHwFTY3kw", "meaning": "accepted"});
        assert!(matches!(
            validate(ack, &accepted),
            Err(SchemaError::Invalid { .. })
        ));
        let extra = json!({"ref": "uEiByzW6EIsQH-20JhpDxEwt97X7C9_Xh0wvZ1SHwFTY3kw", "meaning": "received", "note": "x"});
        assert!(matches!(
            validate(ack, &extra),
            Err(SchemaError::Invalid { .. })
        ));
    }
}
