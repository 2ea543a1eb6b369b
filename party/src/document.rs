//! Delivery §3, the RLTP document profile: a parsed document with its JCS
//! and digest (§6.2 stage 4), the profiled view of one that passed the
//! document-profile schema (stage 5), and the builder every document this
//! crate issues goes through.

use rltp_proofs::encoding::document_digest;
use rltp_proofs::jcs::canonicalize;
use rltp_proofs::json::{self, Object, Value};
use rltp_proofs::multikey::DidKey;

use crate::schema::{self, DOCUMENT_PROFILE, SchemaError};

/// The Trust Task type namespace (§3): `https://real-life.org/trust-tasks/<slug>/<MAJOR.MINOR>`.
pub const TYPE_NAMESPACE: &str = "https://real-life.org/trust-tasks/";

/// A document that passed §6.2 stage 4: strict JSON, its JCS and its
/// digest (`u`-multibase sha2-256 over the JCS, §2/§5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    value: Value,
    jcs: Vec<u8>,
    digest: String,
}

impl Document {
    /// §6.2 stage 4: parses `plaintext` with the strict reader and computes
    /// the JCS and the digest. `None` is `failed(malformed)`.
    pub fn parse(plaintext: &[u8]) -> Option<Document> {
        Document::from_value(json::parse(plaintext).ok()?)
    }

    /// A document from a value (the builder's path): `None` if the value
    /// has no JCS form.
    pub fn from_value(value: Value) -> Option<Document> {
        let jcs = canonicalize(&value).ok()?;
        let digest = document_digest(&value).ok()?;
        Some(Document { value, jcs, digest })
    }

    /// The parsed value.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The JCS bytes: the plaintext §5 seals and the bytes a kept
    /// acknowledgement is stored as.
    pub fn jcs(&self) -> &[u8] {
        &self.jcs
    }

    /// The document digest (§2), 47 characters.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

/// The `serde_json` form of a value, for schema validation. `None` only for
/// a value without a JCS form (which never passes stage 4).
pub fn to_serde(value: &Value) -> Option<serde_json::Value> {
    serde_json::from_slice(&canonicalize(value).ok()?).ok()
}

/// Why a document failed stage 5.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The document-profile schema refused it (`failed(malformed)`).
    #[error("document profile: {0}")]
    Schema(#[from] SchemaError),
    /// `issuer` or `recipient` matches the schema's pattern but does not
    /// decode to an Ed25519 key (Identity §7a.4: the decoded bytes are the
    /// check, the text shape is not; `failed(malformed)`).
    #[error("{member} does not decode to an ed25519 did:key")]
    Key {
        /// `issuer` or `recipient`.
        member: &'static str,
    },
}

/// A document that passed the §3 document-profile schema: typed access to
/// its outer members. `expiresAt` cannot occur (the profile is closed), and
/// `proof` presence per type is the schema's `if`/`then` (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profiled {
    /// The whole document as an object.
    pub object: Object,
    /// `id`, a UUID v4.
    pub id: String,
    /// `type`, the full Type URI.
    pub type_uri: String,
    /// `issuer`, decoded.
    pub issuer: DidKey,
    /// `recipient`, decoded.
    pub recipient: DidKey,
    /// `threadId`.
    pub thread_id: String,
    /// `issuedAt`.
    pub issued_at: String,
    /// `payload`.
    pub payload: Object,
    /// `proof`, when present.
    pub proof: Option<Object>,
    /// `ceremony`, when present (unconstrained, TT §4.11.1).
    pub ceremony: Option<Value>,
}

impl Profiled {
    /// The document without `proof`: what an `eddsa-jcs-2022` proof or an
    /// ack MAC is computed over (§4.2).
    pub fn unsecured(&self) -> Object {
        let mut object = self.object.clone();
        object.remove("proof");
        object
    }

    /// `ceremony.enactment`, when the member is present and carries one as
    /// a string (§3: where present it MUST recompute).
    pub fn ceremony_enactment(&self) -> Option<&Value> {
        self.ceremony
            .as_ref()
            .and_then(Value::as_object)
            .and_then(|c| c.get("enactment"))
    }
}

/// §6.2 stage 5, first half: the document-profile schema and the decoded
/// anchors. (The second half, `recipient` = own anchor, is the pipeline's:
/// it needs the arrival tuple.)
///
/// # Errors
/// [`ProfileError`], every one `failed(malformed)`.
pub fn profile(document: &Document) -> Result<Profiled, ProfileError> {
    let instance =
        to_serde(document.value()).ok_or(ProfileError::Schema(SchemaError::Invalid {
            at: String::new(),
            message: "no JCS form".into(),
        }))?;
    schema::validate(DOCUMENT_PROFILE, &instance)?;
    // The schema guarantees an object with these string members.
    let object = document.value().as_object().cloned().unwrap_or_default();
    let text = |member: &str| {
        object
            .get(member)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let key = |member: &'static str| {
        DidKey::parse(&text(member))
            .ok()
            .filter(|k| k.verifying_key().is_ok())
            .ok_or(ProfileError::Key { member })
    };
    Ok(Profiled {
        id: text("id"),
        type_uri: text("type"),
        issuer: key("issuer")?,
        recipient: key("recipient")?,
        thread_id: text("threadId"),
        issued_at: text("issuedAt"),
        payload: object
            .get("payload")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        proof: object.get("proof").and_then(Value::as_object).cloned(),
        ceremony: object.get("ceremony").cloned(),
        object,
    })
}

/// The outer members of a document this party issues (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// `id`: a fresh UUID v4 (the caller's CSPRNG).
    pub id: String,
    /// `type`: the full Type URI.
    pub type_uri: String,
    /// `issuer`: the issuing pair anchor.
    pub issuer: DidKey,
    /// `recipient`: the addressee's pair anchor.
    pub recipient: DidKey,
    /// `threadId`: fresh on thread-opening documents, else the answered one's.
    pub thread_id: String,
    /// `issuedAt`: RFC 3339 UTC (the caller's clock).
    pub issued_at: String,
}

impl Header {
    /// The unsecured document: the header's members and `payload`.
    pub fn with_payload(&self, payload: Object) -> Object {
        let mut object = Object::new();
        object.insert("id", self.id.as_str());
        object.insert("type", self.type_uri.as_str());
        object.insert("issuer", self.issuer.to_did_key());
        object.insert("recipient", self.recipient.to_did_key());
        object.insert("threadId", self.thread_id.as_str());
        object.insert("issuedAt", self.issued_at.as_str());
        object.insert("payload", payload);
        object
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_4_takes_strict_json_only_and_digests_the_jcs() {
        assert!(Document::parse(b"{\"a\":1,\"a\":2}").is_none());
        assert!(Document::parse(b"not json").is_none());
        let spaced = Document::parse(b"{ \"b\": 1, \"a\": \"x\" }").unwrap();
        let canonical = Document::parse(b"{\"a\":\"x\",\"b\":1}").unwrap();
        assert_eq!(spaced.jcs(), b"{\"a\":\"x\",\"b\":1}");
        assert_eq!(spaced.digest(), canonical.digest());
        assert_eq!(spaced.digest().len(), 47);
    }

    #[test]
    fn the_profile_refuses_expires_at_and_undecodable_anchors() {
        let base = |extra: &str, issuer: &str| {
            format!(
                "{{\"id\":\"7b1c9c1e-4d5a-4a4a-9d5e-000000000001\",\"type\":\"https://real-life.org/trust-tasks/encounter-credential-delivery/0.1\",\"issuer\":\"{issuer}\",\"recipient\":\"did:key:z6MkmfMx4BUcwhRUfxSziDk1929UY2vCwRvrg9rEzH7x6uo5\",\"threadId\":\"7b1c9c1e-4d5a-4a4a-9d5e-000000000002\",\"issuedAt\":\"2026-08-31T12:00:00Z\",\"payload\":{{}}{extra}}}"
            )
        };
        let good = "did:key:z6Mkvg1qv5JoEuw9W1qZ5sAtpkZCWEjZLrHxpqvNvTSj3zTy";
        let doc = Document::parse(base("", good).as_bytes()).unwrap();
        assert_eq!(profile(&doc).unwrap().issuer.to_did_key(), good);
        let expiring = base(",\"expiresAt\":\"2026-09-01T00:00:00Z\"", good);
        let doc = Document::parse(expiring.as_bytes()).unwrap();
        assert!(matches!(profile(&doc), Err(ProfileError::Schema(_))));
        // Shape of a did:key, decoded prefix 0xec 0xfe (Identity §7a.4).
        let shaped = format!("did:key:z6Mk{}", "1".repeat(44));
        let doc = Document::parse(base("", &shaped).as_bytes()).unwrap();
        assert_eq!(profile(&doc), Err(ProfileError::Key { member: "issuer" }));
    }
}
