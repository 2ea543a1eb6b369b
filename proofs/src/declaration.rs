//! `registry-declaration/0.1` (Delivery §3, §4.4): the transferably signed
//! per-party declaration of a role's operational constants, its
//! `eddsa-jcs-2022` proof, the carrier role's acceptance, and the generic
//! revision rule.
//!
//! Three steps, three functions, three error enums (parse ≠ verify ≠ accept):
//!
//! 1. [`parse_declaration`] — bytes → [`ParsedDeclaration`]: strict JSON,
//!    the §3 document profile and the payload schema as closed member sets,
//!    every `did:key` decoded. No signature work. Errors:
//!    [`DeclarationParseError`].
//! 2. [`verify_declaration`] — [`ParsedDeclaration`] →
//!    [`VerifiedDeclaration`]: the proof's key is the document `issuer`
//!    (§4.4 "verifying under the document issuer"), then the
//!    `eddsa-jcs-2022` signature under `verify_strict`. Errors:
//!    [`DeclarationVerifyError`].
//! 3. [`accept_carrier_declaration`] — [`VerifiedDeclaration`] →
//!    [`CarrierDeclaration`]: `role` byte-equal to [`CARRIER_ROLE`], and
//!    the seven constants in their §11 domains. Errors:
//!    [`CarrierDeclarationError`].
//!
//! Recording is the caller's: [`revision_rule`] decides what a verified,
//! accepted declaration does to the one held per (issuer, role).
//!
//! The cryptosuite itself ([`eddsa_jcs_2022_proof_config`],
//! [`eddsa_jcs_2022_hash_data`], [`eddsa_jcs_2022_sign`],
//! [`eddsa_jcs_2022_verify`]) is generic over JSON documents (W3C
//! vc-di-eddsa §3.3), so the W3C test vector — which has `@context` — runs
//! through the same code as RLTP documents, which have none.

use crate::constants::{CARRIER_ROLE, CarrierConstants, ConstantError};
use crate::encoding::{EncodingError, sha256, signature_from_z};
use crate::jcs::{JcsError, canonicalize};
use crate::json::{JsonError, Object, Value};
use crate::multikey::{DID_KEY_PREFIX, DidKey};
use ed25519_dalek::{Signature, Signer as _, SigningKey};

/// The type URI of this document type (§4.4), also the `$id` of its payload
/// schema (§3).
pub const REGISTRY_DECLARATION_TYPE: &str =
    "https://real-life.org/trust-tasks/registry-declaration/0.1";

/// The four task types this contract registers itself (§4.1–§4.4).
/// Companion-registered types are known only through a receiver's registry
/// (§4.4), which lives outside this crate.
pub const OWN_DOCUMENT_TYPES: [&str; 4] = [
    "https://real-life.org/trust-tasks/encounter-bundle/0.1",
    "https://real-life.org/trust-tasks/delivery-ack/0.1",
    "https://real-life.org/trust-tasks/encounter-credential-delivery/0.1",
    REGISTRY_DECLARATION_TYPE,
];

/// Whether `t` is a document `type` this contract registers itself (§3,
/// §4.1–§4.4), compared byte-exact. [`CARRIER_ROLE`] is **not** one: it
/// names a role, and used as a document `type` it is `failed(unknown-type)`
/// (§4.4, §11). A `false` here means "not one of ours"; whether a
/// companion-registered type is known is the receiver registry's answer.
pub fn is_known_document_type(t: &str) -> bool {
    OWN_DOCUMENT_TYPES.contains(&t)
}

/// `proof.type` of a Data Integrity proof (W3C VC Data Integrity).
pub const DATA_INTEGRITY_PROOF: &str = "DataIntegrityProof";
/// `proof.cryptosuite` (W3C vc-di-eddsa §3.3).
pub const EDDSA_JCS_2022: &str = "eddsa-jcs-2022";
/// `proof.proofPurpose` of every proof this crate makes or accepts.
pub const ASSERTION_METHOD: &str = "assertionMethod";

// ---------------------------------------------------------------------------
// eddsa-jcs-2022, generic over documents (W3C vc-di-eddsa §3.3)
// ---------------------------------------------------------------------------

/// Why an `eddsa-jcs-2022` proof could not be made or does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CryptosuiteError {
    /// The document has no `proof` member, or it is not a single object.
    #[error("the document has no proof object")]
    NoProof,
    /// [`eddsa_jcs_2022_sign`] was given a document that already has `proof`
    /// (proof sets are not supported).
    #[error("the document already carries a proof")]
    AlreadySigned,
    /// A proof member outside {type, cryptosuite, created,
    /// verificationMethod, proofPurpose, proofValue, @context}.
    #[error("proof member {member:?} is not admitted")]
    UnknownProofMember {
        /// The member name as received.
        member: String,
    },
    /// A required proof member is missing or is not a string.
    #[error("proof member {member} is missing or not a string")]
    ProofMember {
        /// The member.
        member: &'static str,
    },
    /// `type`, `cryptosuite` or `proofPurpose` has the wrong value.
    #[error("proof {member} is {found:?}, expected {expected:?}")]
    ProofConstant {
        /// The member.
        member: &'static str,
        /// The value received.
        found: String,
        /// The value required.
        expected: &'static str,
    },
    /// `verificationMethod` is not `did:key:<mk>#<mk>` with both halves equal
    /// and an Ed25519 key that decodes.
    #[error("verificationMethod {value:?} is not did:key:<multikey>#<same multikey>")]
    VerificationMethod {
        /// The value received.
        value: String,
    },
    /// `proofValue` is not `z` + canonical base58btc of exactly 64 bytes.
    #[error("proofValue is not a z-base58btc 64-byte signature: {0}")]
    ProofValue(EncodingError),
    /// The proof's `@context` is not a prefix of the document's (W3C
    /// vc-di-eddsa §3.3.2 step 4), or the document has none.
    #[error("proof @context is not a prefix of the document @context")]
    Context,
    /// The key bytes are not an Ed25519 point.
    #[error("verification key: {0}")]
    Key(EncodingError),
    /// The document or proof configuration has no JCS form.
    #[error("canonicalization: {0}")]
    Jcs(#[from] JcsError),
    /// The signature does not verify (`verify_strict`) over the hash data.
    #[error("the eddsa-jcs-2022 signature does not verify")]
    BadSignature,
}

/// The proof configuration for signing `unsecured` (W3C vc-di-eddsa §3.3.5):
/// `{type: DataIntegrityProof, cryptosuite: eddsa-jcs-2022, created,
/// verificationMethod, proofPurpose: assertionMethod}` plus `@context` copied
/// from the document **only if the document has one** (RLTP documents do
/// not). Member order is W3C's example order; it is irrelevant after JCS.
pub fn eddsa_jcs_2022_proof_config(
    unsecured: &Object,
    created: &str,
    verification_method: &str,
) -> Object {
    let mut config = Object::new();
    config.insert("type", DATA_INTEGRITY_PROOF);
    config.insert("cryptosuite", EDDSA_JCS_2022);
    config.insert("created", created);
    config.insert("verificationMethod", verification_method);
    config.insert("proofPurpose", ASSERTION_METHOD);
    if let Some(context) = unsecured.get("@context") {
        config.insert("@context", context.clone());
    }
    config
}

/// The `eddsa-jcs-2022` hash data (W3C vc-di-eddsa §3.3.4), 64 bytes:
/// `SHA-256(JCS(proof_config)) ‖ SHA-256(JCS(unsecured))`, where
/// `proof_config` is the proof without `proofValue` and `unsecured` the
/// document without `proof`.
///
/// # Errors
/// [`JcsError`] if either has no canonical form.
pub fn eddsa_jcs_2022_hash_data(
    proof_config: &Object,
    unsecured: &Object,
) -> Result<[u8; 64], JcsError> {
    let config_hash = sha256(&canonicalize(&Value::Object(proof_config.clone()))?);
    let document_hash = sha256(&canonicalize(&Value::Object(unsecured.clone()))?);
    let mut out = [0u8; 64];
    let (head, tail) = out.split_at_mut(32);
    head.copy_from_slice(&config_hash);
    tail.copy_from_slice(&document_hash);
    Ok(out)
}

/// The `did:key` verification method of `key`: `did:key:<mk>#<mk>`, the
/// form every proof in this stack names.
pub fn did_key_verification_method(key: &DidKey) -> String {
    format!("{}#{}", key.to_did_key(), key.multikey())
}

/// Signs `unsecured` with `eddsa-jcs-2022` (W3C vc-di-eddsa §3.3.1) and
/// returns the secured document: `unsecured` plus
/// `proof = proof config ‖ proofValue`, where `proofValue` is `z` +
/// base58btc of the 64-byte Ed25519 signature over the hash data and the
/// verification method is the signer's [`did_key_verification_method`].
/// Deterministic (Ed25519); `created` is the caller's (no clock here).
///
/// # Errors
/// [`CryptosuiteError::AlreadySigned`] if `unsecured` has a `proof`;
/// [`CryptosuiteError::Jcs`] if it has no canonical form.
pub fn eddsa_jcs_2022_sign(
    unsecured: &Object,
    created: &str,
    key: &SigningKey,
) -> Result<Object, CryptosuiteError> {
    if unsecured.contains_key("proof") {
        return Err(CryptosuiteError::AlreadySigned);
    }
    let signer = DidKey::from_verifying_key(&key.verifying_key());
    let mut proof =
        eddsa_jcs_2022_proof_config(unsecured, created, &did_key_verification_method(&signer));
    let hash_data = eddsa_jcs_2022_hash_data(&proof, unsecured)?;
    let signature = key.sign(&hash_data);
    proof.insert(
        "proofValue",
        crate::encoding::multibase_z(&signature.to_bytes()),
    );
    let mut secured = unsecured.clone();
    secured.insert("proof", proof);
    Ok(secured)
}

/// The members a proof may carry here; anything else is refused rather
/// than silently ignored (no `expires`, `domain`, `challenge`, proof sets).
const PROOF_MEMBERS: [&str; 7] = [
    "type",
    "cryptosuite",
    "created",
    "verificationMethod",
    "proofPurpose",
    "proofValue",
    "@context",
];

/// Verifies the `eddsa-jcs-2022` proof of `secured` (W3C vc-di-eddsa
/// §3.3.2) and returns the signer's key. The proof must be a single object
/// with members among `type`, `cryptosuite`, `created`,
/// `verificationMethod`, `proofPurpose`, `proofValue` (all required) and
/// `@context` (optional) — any other member is refused, never ignored —
/// `type`/`cryptosuite`/`proofPurpose` equal to [`DATA_INTEGRITY_PROOF`] /
/// [`EDDSA_JCS_2022`] / [`ASSERTION_METHOD`], `created` a string, and a
/// `did:key:<mk>#<mk>` verification method. A proof `@context` must be a
/// prefix of the document's and then stands for it in the hash. The
/// signature is checked with `verify_strict`.
///
/// This checks the signature only; whether the signer is the right party
/// is the caller's question (for declarations: [`verify_declaration`]).
///
/// # Errors
/// Any [`CryptosuiteError`] except `AlreadySigned`.
pub fn eddsa_jcs_2022_verify(secured: &Object) -> Result<DidKey, CryptosuiteError> {
    let proof = secured
        .get("proof")
        .and_then(Value::as_object)
        .ok_or(CryptosuiteError::NoProof)?;
    let (signer, signature) = proof_form(proof)?;

    let mut config = proof.clone();
    config.remove("proofValue");
    let mut unsecured = secured.clone();
    unsecured.remove("proof");
    if let Some(proof_context) = config.get("@context") {
        let document_context = unsecured.get("@context").ok_or(CryptosuiteError::Context)?;
        if !context_is_prefix(proof_context, document_context) {
            return Err(CryptosuiteError::Context);
        }
        unsecured.insert("@context", proof_context.clone());
    }
    let hash_data = eddsa_jcs_2022_hash_data(&config, &unsecured)?;
    let key = signer.verifying_key().map_err(CryptosuiteError::Key)?;
    key.verify_strict(&hash_data, &Signature::from_bytes(&signature))
        .map_err(|_| CryptosuiteError::BadSignature)?;
    Ok(signer)
}

/// The one home of the `DataIntegrityProof` form this profile accepts:
/// member set within [`PROOF_MEMBERS`], `type` / `cryptosuite` /
/// `proofPurpose` constants, `created` a string, a `did:key:<mk>#<mk>`
/// verification method and a `z` base58btc 64-byte `proofValue`. Returns
/// the verification method's key and the signature bytes.
fn proof_form(proof: &Object) -> Result<(DidKey, [u8; 64]), CryptosuiteError> {
    if let Some(member) = proof.keys().find(|k| !PROOF_MEMBERS.contains(k)) {
        return Err(CryptosuiteError::UnknownProofMember {
            member: member.to_owned(),
        });
    }
    let text = |member: &'static str| {
        proof
            .get(member)
            .and_then(Value::as_str)
            .ok_or(CryptosuiteError::ProofMember { member })
    };
    for (member, expected) in [
        ("type", DATA_INTEGRITY_PROOF),
        ("cryptosuite", EDDSA_JCS_2022),
        ("proofPurpose", ASSERTION_METHOD),
    ] {
        let found = text(member)?;
        if found != expected {
            return Err(CryptosuiteError::ProofConstant {
                member,
                found: found.to_owned(),
                expected,
            });
        }
    }
    text("created")?;
    let method = text("verificationMethod")?;
    let signer =
        parse_verification_method(method).ok_or_else(|| CryptosuiteError::VerificationMethod {
            value: method.to_owned(),
        })?;
    let signature = signature_from_z(text("proofValue")?).map_err(CryptosuiteError::ProofValue)?;
    Ok((signer, signature))
}

/// `did:key:<mk>#<mk>` with both halves equal → the key; anything else → `None`.
fn parse_verification_method(method: &str) -> Option<DidKey> {
    let (did, fragment) = method.split_once('#')?;
    if did.strip_prefix(DID_KEY_PREFIX) != Some(fragment) {
        return None;
    }
    DidKey::parse(did).ok()
}

/// W3C vc-di-eddsa §3.3.2 step 4: the document `@context` starts with all
/// values of the proof `@context`, in order (a string is a one-item list).
fn context_is_prefix(proof: &Value, document: &Value) -> bool {
    let as_list = |v: &Value| match v {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    let (proof, document) = (as_list(proof), as_list(document));
    proof.len() <= document.len() && proof.iter().zip(document.iter()).all(|(a, b)| a == b)
}

// ---------------------------------------------------------------------------
// registry-declaration/0.1: parse
// ---------------------------------------------------------------------------

/// Why bytes are not a well-formed `registry-declaration/0.1` document
/// (§3 document profile, `schemas/rltp-delivery-document.schema.json`,
/// `schemas/payload-registry-declaration.schema.json`). `at` names the
/// object: `document`, `payload`, `declaration`, `constants`, `proof`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeclarationParseError {
    /// Not strict JSON (seed 003 reader).
    #[error("not strict json: {0}")]
    Json(#[from] JsonError),
    /// The value at `at` is not a JSON object.
    #[error("{at} is not a json object")]
    NotAnObject {
        /// Which object.
        at: &'static str,
    },
    /// A required member is absent.
    #[error("{at} has no member {member}")]
    MissingMember {
        /// Which object.
        at: &'static str,
        /// The member.
        member: &'static str,
    },
    /// A member outside the closed set (e.g. `expiresAt`, which §3 says
    /// MUST be absent).
    #[error("{at} member {member:?} is not admitted")]
    UnknownMember {
        /// Which object.
        at: &'static str,
        /// The member as received.
        member: String,
    },
    /// A member that must be a string is not.
    #[error("{at} member {member} is not a string")]
    NotAString {
        /// Which object.
        at: &'static str,
        /// The member.
        member: &'static str,
    },
    /// `type` is not `registry-declaration/0.1`.
    #[error("type {found:?} is not {REGISTRY_DECLARATION_TYPE}")]
    NotADeclaration {
        /// The `type` received.
        found: String,
    },
    /// `id` or `threadId` is not a lower-case UUID v4.
    #[error("{member} {value:?} is not a lower-case uuid v4")]
    Uuid {
        /// `id` or `threadId`.
        member: &'static str,
        /// The value received.
        value: String,
    },
    /// `issuedAt` or `proof.created` is not RFC 3339 UTC (`…Z`, at most 3
    /// fractional digits).
    #[error("{member} {value:?} is not an rfc3339 utc timestamp")]
    Timestamp {
        /// `issuedAt` or `created`.
        member: &'static str,
        /// The value received.
        value: String,
    },
    /// `issuer` or `recipient` does not decode as an Ed25519 `did:key`.
    #[error("{member} {value:?} is not an ed25519 did:key: {source}")]
    DidKey {
        /// `issuer` or `recipient`.
        member: &'static str,
        /// The value received.
        value: String,
        /// Why it does not decode.
        source: EncodingError,
    },
    /// `role` does not match `^https://real-life\.org/trust-tasks/[a-z0-9-]+/[0-9]+\.[0-9]+$`.
    #[error("role {value:?} is not a trust-task type uri")]
    Role {
        /// The value received.
        value: String,
    },
    /// `revision` is not a canonical int-string `^[1-9][0-9]{0,17}$`.
    #[error("revision {value:?} is not a canonical int-string >= 1 of at most 18 digits")]
    Revision {
        /// The value received.
        value: String,
    },
    /// `constants` has fewer than 1 or more than 16 members.
    #[error("constants has {count} members, expected 1 to 16")]
    ConstantCount {
        /// Members received.
        count: usize,
    },
    /// A constant name outside `^[a-z][a-z0-9-]{0,31}$`.
    #[error("constant name {name:?} is not admitted by the payload schema")]
    ConstantName {
        /// The name received.
        name: String,
    },
    /// A constant value that is not a string of at most 64 characters.
    #[error("constant {name:?} is not a value string of at most 64 characters")]
    ConstantValue {
        /// The constant.
        name: String,
    },
    /// The proof is not the §3 `DataIntegrityProof` form.
    #[error("proof: {0}")]
    Proof(CryptosuiteError),
    /// The payload has no canonical form (cannot happen for a payload that
    /// passed the checks above; kept so nothing panics).
    #[error("payload canonicalization: {0}")]
    Jcs(JcsError),
}

/// A `registry-declaration/0.1` document that passed [`parse_declaration`]:
/// well-formed, **not yet verified**.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDeclaration {
    document: Object,
    id: String,
    issuer: DidKey,
    recipient: DidKey,
    thread_id: String,
    issued_at: String,
    role: String,
    revision: u64,
    constants: Object,
    payload_jcs: Vec<u8>,
    proof_key: DidKey,
}

impl ParsedDeclaration {
    /// The whole document as received, `proof` included.
    pub fn document(&self) -> &Object {
        &self.document
    }
    /// `id` (UUID v4).
    pub fn id(&self) -> &str {
        &self.id
    }
    /// `issuer`: the declaring party.
    pub fn issuer(&self) -> &DidKey {
        &self.issuer
    }
    /// `recipient`: a consumer MUST reject a document whose recipient is
    /// not its own anchor (§3) — that comparison is the caller's.
    pub fn recipient(&self) -> &DidKey {
        &self.recipient
    }
    /// `threadId` (UUID v4; fresh on a declaration).
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }
    /// `issuedAt` as received.
    pub fn issued_at(&self) -> &str {
        &self.issued_at
    }
    /// `payload.declaration.role`.
    pub fn role(&self) -> &str {
        &self.role
    }
    /// `payload.declaration.revision` as a number (§4.4 revision rule).
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// `payload.declaration.constants`, names and value strings as received.
    pub fn constants(&self) -> &Object {
        &self.constants
    }
    /// JCS of `payload`: the bytes [`revision_rule`] compares.
    pub fn payload_jcs(&self) -> &[u8] {
        &self.payload_jcs
    }
}

const DOCUMENT_MEMBERS: [&str; 9] = [
    "id",
    "type",
    "issuer",
    "recipient",
    "threadId",
    "ceremony",
    "issuedAt",
    "payload",
    "proof",
];
const DOCUMENT_REQUIRED: [&str; 8] = [
    "id",
    "type",
    "issuer",
    "recipient",
    "threadId",
    "issuedAt",
    "payload",
    "proof",
];
const DECLARATION_MEMBERS: [&str; 3] = ["role", "revision", "constants"];
/// The §3 proof form for this type: `@context` is not admitted (RLTP
/// documents carry none).
const DECLARATION_PROOF_MEMBERS: [&str; 6] = [
    "type",
    "cryptosuite",
    "created",
    "verificationMethod",
    "proofPurpose",
    "proofValue",
];

/// Checks `object` has exactly the `allowed` members (all of `required`).
/// Unknown members are reported first, in received order.
fn closed_members(
    object: &Object,
    at: &'static str,
    allowed: &[&'static str],
    required: &[&'static str],
) -> Result<(), DeclarationParseError> {
    if let Some(member) = object.keys().find(|k| !allowed.contains(k)) {
        return Err(DeclarationParseError::UnknownMember {
            at,
            member: member.to_owned(),
        });
    }
    match required.iter().find(|m| !object.contains_key(m)) {
        Some(member) => Err(DeclarationParseError::MissingMember { at, member }),
        None => Ok(()),
    }
}

fn object_at<'a>(value: &'a Value, at: &'static str) -> Result<&'a Object, DeclarationParseError> {
    value
        .as_object()
        .ok_or(DeclarationParseError::NotAnObject { at })
}

fn string_at<'a>(
    object: &'a Object,
    at: &'static str,
    member: &'static str,
) -> Result<&'a str, DeclarationParseError> {
    match object.get(member) {
        None => Err(DeclarationParseError::MissingMember { at, member }),
        Some(value) => value
            .as_str()
            .ok_or(DeclarationParseError::NotAString { at, member }),
    }
}

/// `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`
/// (the document schema's `uuid`).
fn is_uuid_v4(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            14 => *c == b'4',
            19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
            _ => matches!(c, b'0'..=b'9' | b'a'..=b'f'),
        })
}

/// The document schema's `rfc3339utc`: `YYYY-MM-DDTHH:MM:SS[.f{1,3}]Z` with
/// month 01–12, day 01–31, hour 00–23, minute and second 00–59.
fn is_rfc3339_utc(s: &str) -> bool {
    let b = s.as_bytes();
    let number = |from: usize, to: usize| -> Option<u32> {
        let digits = b.get(from..to)?;
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    let fields_ok = number(0, 4).is_some()
        && number(5, 7).is_some_and(|m| (1..=12).contains(&m))
        && number(8, 10).is_some_and(|d| (1..=31).contains(&d))
        && number(11, 13).is_some_and(|h| h <= 23)
        && number(14, 16).is_some_and(|m| m <= 59)
        && number(17, 19).is_some_and(|s| s <= 59)
        && separators.iter().all(|(i, c)| b.get(*i) == Some(c));
    let tail_ok = match b.get(19..) {
        Some(b"Z") => true,
        Some([b'.', rest @ ..]) => match rest.split_last() {
            Some((b'Z', fraction)) => {
                (1..=3).contains(&fraction.len()) && fraction.iter().all(u8::is_ascii_digit)
            }
            _ => false,
        },
        _ => false,
    };
    fields_ok && tail_ok
}

/// The payload schema's `role` pattern:
/// `^https://real-life\.org/trust-tasks/[a-z0-9-]+/[0-9]+\.[0-9]+$`.
fn is_task_type_uri(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://real-life.org/trust-tasks/") else {
        return false;
    };
    let Some((slug, version)) = rest.split_once('/') else {
        return false;
    };
    let Some((major, minor)) = version.split_once('.') else {
        return false;
    };
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit());
    !slug.is_empty()
        && slug
            .bytes()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'-'))
        && digits(major)
        && digits(minor)
}

/// The payload schema's `revision`: `^[1-9][0-9]{0,17}$` → its value.
fn parse_revision(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let first = *b.first()?;
    if !(b'1'..=b'9').contains(&first) || b.len() > 18 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 18 digits: below 10^18 < 2^63, no overflow.
    Some(b.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

/// The payload schema's constant name pattern `^[a-z][a-z0-9-]{0,31}$`.
fn is_constant_name(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_lowercase)
        && b.len() <= 32
        && b.iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

fn did_key_at(object: &Object, member: &'static str) -> Result<DidKey, DeclarationParseError> {
    let value = string_at(object, "document", member)?;
    DidKey::parse(value).map_err(|source| DeclarationParseError::DidKey {
        member,
        value: value.to_owned(),
        source,
    })
}

/// Step 1: parses `bytes` as a `registry-declaration/0.1` document (§3,
/// §4.4) — strict JSON, then the closed shapes of the document profile
/// (members `id`, `type`, `issuer`, `recipient`, `threadId`, `issuedAt`,
/// `payload`, `proof`, optional `ceremony` passed through uninterpreted; no
/// `expiresAt`), the payload schema (`declaration` with exactly `role`,
/// `revision`, `constants`), and the §3 proof form (a `DataIntegrityProof`,
/// `eddsa-jcs-2022`, `assertionMethod`, `did:key:<mk>#<mk>`, no `@context`).
/// Every `did:key` is decoded. Works for **any** role; the carrier role is
/// decided in [`accept_carrier_declaration`]. No signature is checked.
///
/// Checks run in document order: top-level members, `type`, `id`,
/// `issuer`, `recipient`, `threadId`, `issuedAt`, `payload`, `proof`.
///
/// # Errors
/// [`DeclarationParseError`], naming the first violation.
pub fn parse_declaration(bytes: &[u8]) -> Result<ParsedDeclaration, DeclarationParseError> {
    let value = crate::json::parse(bytes)?;
    let document = object_at(&value, "document")?;
    closed_members(document, "document", &DOCUMENT_MEMBERS, &DOCUMENT_REQUIRED)?;

    let doc_type = string_at(document, "document", "type")?;
    if doc_type != REGISTRY_DECLARATION_TYPE {
        return Err(DeclarationParseError::NotADeclaration {
            found: doc_type.to_owned(),
        });
    }
    let uuid = |member: &'static str| {
        let value = string_at(document, "document", member)?;
        if is_uuid_v4(value) {
            Ok(value.to_owned())
        } else {
            Err(DeclarationParseError::Uuid {
                member,
                value: value.to_owned(),
            })
        }
    };
    let id = uuid("id")?;
    let issuer = did_key_at(document, "issuer")?;
    let recipient = did_key_at(document, "recipient")?;
    let thread_id = uuid("threadId")?;
    let issued_at = string_at(document, "document", "issuedAt")?;
    if !is_rfc3339_utc(issued_at) {
        return Err(DeclarationParseError::Timestamp {
            member: "issuedAt",
            value: issued_at.to_owned(),
        });
    }
    if let Some(ceremony) = document.get("ceremony") {
        object_at(ceremony, "ceremony")?;
    }

    let payload_value = document
        .get("payload")
        .ok_or(DeclarationParseError::MissingMember {
            at: "document",
            member: "payload",
        })?;
    let payload = object_at(payload_value, "payload")?;
    closed_members(payload, "payload", &["declaration"], &["declaration"])?;
    let declaration = payload
        .get("declaration")
        .ok_or(DeclarationParseError::MissingMember {
            at: "payload",
            member: "declaration",
        })
        .and_then(|v| object_at(v, "declaration"))?;
    closed_members(
        declaration,
        "declaration",
        &DECLARATION_MEMBERS,
        &DECLARATION_MEMBERS,
    )?;
    let role = string_at(declaration, "declaration", "role")?;
    if !is_task_type_uri(role) {
        return Err(DeclarationParseError::Role {
            value: role.to_owned(),
        });
    }
    let revision_lexeme = string_at(declaration, "declaration", "revision")?;
    let revision =
        parse_revision(revision_lexeme).ok_or_else(|| DeclarationParseError::Revision {
            value: revision_lexeme.to_owned(),
        })?;
    let constants = declaration
        .get("constants")
        .ok_or(DeclarationParseError::MissingMember {
            at: "declaration",
            member: "constants",
        })
        .and_then(|v| object_at(v, "constants"))?;
    check_constants_shape(constants)?;

    let proof_value = document
        .get("proof")
        .ok_or(DeclarationParseError::MissingMember {
            at: "document",
            member: "proof",
        })?;
    let proof = object_at(proof_value, "proof")?;
    closed_members(
        proof,
        "proof",
        &DECLARATION_PROOF_MEMBERS,
        &DECLARATION_PROOF_MEMBERS,
    )?;
    let proof_key = parse_proof_shape(proof)?;

    let payload_jcs = canonicalize(payload_value).map_err(DeclarationParseError::Jcs)?;
    Ok(ParsedDeclaration {
        document: document.clone(),
        id,
        issuer,
        recipient,
        thread_id,
        issued_at: issued_at.to_owned(),
        role: role.to_owned(),
        revision,
        constants: constants.clone(),
        payload_jcs,
        proof_key,
    })
}

/// The payload schema's `constants`: 1–16 members, names per
/// [`is_constant_name`], values strings of at most 64 characters.
fn check_constants_shape(constants: &Object) -> Result<(), DeclarationParseError> {
    if !(1..=16).contains(&constants.len()) {
        return Err(DeclarationParseError::ConstantCount {
            count: constants.len(),
        });
    }
    for (name, value) in constants.iter() {
        if !is_constant_name(name) {
            return Err(DeclarationParseError::ConstantName {
                name: name.to_owned(),
            });
        }
        if value.as_str().is_none_or(|s| s.chars().count() > 64) {
            return Err(DeclarationParseError::ConstantValue {
                name: name.to_owned(),
            });
        }
    }
    Ok(())
}

/// The §3 proof form (member set already checked): constants, `created`
/// timestamp, `did:key` verification method, decodable `proofValue`.
/// Returns the verification method's key.
fn parse_proof_shape(proof: &Object) -> Result<DidKey, DeclarationParseError> {
    let (key, _) = proof_form(proof).map_err(DeclarationParseError::Proof)?;
    let created = string_at(proof, "proof", "created")?;
    if !is_rfc3339_utc(created) {
        return Err(DeclarationParseError::Timestamp {
            member: "created",
            value: created.to_owned(),
        });
    }
    Ok(key)
}

// ---------------------------------------------------------------------------
// registry-declaration/0.1: verify
// ---------------------------------------------------------------------------

/// Why a parsed declaration does not verify (§4.4: `proof` REQUIRED,
/// verifying under the document `issuer`; §11: unsigned or foreign-signed
/// → discarded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeclarationVerifyError {
    /// The proof names a key other than the document `issuer`.
    #[error("proof is by {signer}, not by the issuer {issuer}")]
    ForeignSigner {
        /// The document `issuer`.
        issuer: DidKey,
        /// The key the proof's verificationMethod names.
        signer: DidKey,
    },
    /// The `eddsa-jcs-2022` signature does not verify.
    #[error("proof does not verify: {0}")]
    Signature(#[from] CryptosuiteError),
}

/// A declaration whose proof verified under its `issuer`. Not yet accepted
/// for any role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedDeclaration(ParsedDeclaration);

impl VerifiedDeclaration {
    /// The verified declaration's fields (same accessors as parsing).
    pub fn declaration(&self) -> &ParsedDeclaration {
        &self.0
    }
}

/// Step 2: verifies `parsed` (§4.4): the proof's key must be the document
/// `issuer` — checked first, before any asymmetric operation — and the
/// `eddsa-jcs-2022` signature must verify (`verify_strict`).
///
/// # Errors
/// [`DeclarationVerifyError::ForeignSigner`],
/// [`DeclarationVerifyError::Signature`].
pub fn verify_declaration(
    parsed: ParsedDeclaration,
) -> Result<VerifiedDeclaration, DeclarationVerifyError> {
    let foreign = |signer: DidKey| DeclarationVerifyError::ForeignSigner {
        issuer: parsed.issuer,
        signer,
    };
    if parsed.proof_key != parsed.issuer {
        return Err(foreign(parsed.proof_key));
    }
    let signer = eddsa_jcs_2022_verify(&parsed.document)?;
    if signer != parsed.issuer {
        return Err(foreign(signer));
    }
    Ok(VerifiedDeclaration(parsed))
}

// ---------------------------------------------------------------------------
// The carrier role: accept
// ---------------------------------------------------------------------------

/// Why a verified declaration is not an acceptable carrier declaration
/// (§4.4 carrier role, §11 domains).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CarrierDeclarationError {
    /// `role` is not byte-equal to [`CARRIER_ROLE`]: constants declared
    /// under any other role URI are not a carrier declaration.
    #[error("role {role:?} is not the carrier role {CARRIER_ROLE}")]
    NotCarrierRole {
        /// The role received.
        role: String,
    },
    /// The constants fail [`CarrierConstants::from_declared`].
    #[error("{0}")]
    Constants(#[from] ConstantError),
}

/// A carrier's accepted declaration: who declared, which revision, the
/// seven constants, and the payload JCS the revision rule compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarrierDeclaration {
    issuer: DidKey,
    revision: u64,
    constants: CarrierConstants,
    payload_jcs: Vec<u8>,
}

impl CarrierDeclaration {
    /// The carrier (document `issuer`).
    pub fn issuer(&self) -> &DidKey {
        &self.issuer
    }
    /// The declaration's revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// The seven declared constants.
    pub fn constants(&self) -> &CarrierConstants {
        &self.constants
    }
    /// JCS of the payload, for [`revision_rule`].
    pub fn payload_jcs(&self) -> &[u8] {
        &self.payload_jcs
    }
}

/// Step 3: accepts `verified` as a carrier declaration (§4.4): `role`
/// byte-equal to [`CARRIER_ROLE`], then [`CarrierConstants::from_declared`]
/// (all seven, no others, value strings in grammar and §11 domain).
///
/// # Errors
/// [`CarrierDeclarationError::NotCarrierRole`],
/// [`CarrierDeclarationError::Constants`].
pub fn accept_carrier_declaration(
    verified: &VerifiedDeclaration,
) -> Result<CarrierDeclaration, CarrierDeclarationError> {
    let parsed = verified.declaration();
    if parsed.role != CARRIER_ROLE {
        return Err(CarrierDeclarationError::NotCarrierRole {
            role: parsed.role.clone(),
        });
    }
    Ok(CarrierDeclaration {
        issuer: parsed.issuer,
        revision: parsed.revision,
        constants: CarrierConstants::from_declared(&parsed.constants)?,
        payload_jcs: parsed.payload_jcs.clone(),
    })
}

// ---------------------------------------------------------------------------
// Build and sign
// ---------------------------------------------------------------------------

/// The document header fields of a declaration the caller supplies (no
/// clock, no RNG here): `id` and `threadId` fresh lower-case UUID v4s,
/// `issuedAt` and `created` RFC 3339 UTC, `revision` ≥ 1 (at most 18 digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclarationHeader<'a> {
    /// Document `id`.
    pub id: &'a str,
    /// Document `threadId` (fresh: a declaration opens its thread).
    pub thread_id: &'a str,
    /// Document `issuedAt`.
    pub issued_at: &'a str,
    /// `proof.created`.
    pub created: &'a str,
    /// `payload.declaration.revision`.
    pub revision: u64,
}

/// Why a declaration could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeclarationBuildError {
    /// Signing failed (no canonical form).
    #[error("signing: {0}")]
    Sign(#[from] CryptosuiteError),
    /// The built document would not pass [`parse_declaration`] (a header
    /// field, role or constants outside the schema). Nothing is emitted
    /// that this crate would itself refuse.
    #[error("the built declaration would not parse: {0}")]
    WouldNotParse(#[from] DeclarationParseError),
}

/// Builds and signs a `registry-declaration/0.1` for any `role` (§4.4) and
/// returns its wire bytes: JCS of the signed document. The issuer is
/// `key`'s `did:key`; the proof is `eddsa-jcs-2022` by that key. The
/// result is checked by [`parse_declaration`] before it is returned.
///
/// # Errors
/// [`DeclarationBuildError::WouldNotParse`] naming the offending field;
/// [`DeclarationBuildError::Sign`].
pub fn sign_declaration(
    key: &SigningKey,
    recipient: &DidKey,
    header: &DeclarationHeader<'_>,
    role: &str,
    constants: &Object,
) -> Result<Vec<u8>, DeclarationBuildError> {
    let issuer = DidKey::from_verifying_key(&key.verifying_key());
    let mut declaration = Object::new();
    declaration.insert("role", role);
    declaration.insert("revision", header.revision.to_string());
    declaration.insert("constants", constants.clone());
    let mut payload = Object::new();
    payload.insert("declaration", declaration);

    let mut document = Object::new();
    document.insert("id", header.id);
    document.insert("type", REGISTRY_DECLARATION_TYPE);
    document.insert("issuer", issuer.to_did_key());
    document.insert("recipient", recipient.to_did_key());
    document.insert("threadId", header.thread_id);
    document.insert("issuedAt", header.issued_at);
    document.insert("payload", payload);

    let signed = eddsa_jcs_2022_sign(&document, header.created, key)?;
    let bytes = canonicalize(&Value::Object(signed)).map_err(CryptosuiteError::Jcs)?;
    parse_declaration(&bytes)?;
    Ok(bytes)
}

/// Builds and signs a carrier's declaration (§4.4 guarantee 1): role
/// [`CARRIER_ROLE`], the seven constants as declared lexemes. Returns the
/// JCS wire bytes.
///
/// # Errors
/// As [`sign_declaration`].
pub fn sign_carrier_declaration(
    key: &SigningKey,
    recipient: &DidKey,
    header: &DeclarationHeader<'_>,
    constants: &CarrierConstants,
) -> Result<Vec<u8>, DeclarationBuildError> {
    sign_declaration(
        key,
        recipient,
        header,
        CARRIER_ROLE,
        &constants.to_declared(),
    )
}

// ---------------------------------------------------------------------------
// The generic revision rule
// ---------------------------------------------------------------------------

/// What the generic revision rule (§4.4, the pattern of Visibility §6.4)
/// does with an incoming declaration for one (issuer, role).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionOutcome {
    /// Nothing held: record it.
    Install,
    /// A higher revision than the held one: it replaces it (prospectively,
    /// never retroactively for a running act).
    Supersedes,
    /// The same revision with a JCS-identical payload: nothing changes.
    Idempotent,
    /// The same revision with a different payload: an equivocation error —
    /// reject, keep state.
    Equivocation,
    /// A lower revision: rejected, so a delayed or redelivered older
    /// declaration never rolls a value back.
    Rollback,
}

impl RevisionOutcome {
    /// Whether the incoming declaration becomes the recorded one.
    pub fn records(self) -> bool {
        matches!(self, RevisionOutcome::Install | RevisionOutcome::Supersedes)
    }

    /// Whether the incoming declaration is rejected (equivocation or rollback).
    pub fn is_rejection(self) -> bool {
        matches!(
            self,
            RevisionOutcome::Equivocation | RevisionOutcome::Rollback
        )
    }
}

/// The generic revision rule (§4.4): `held` is the recorded
/// (revision, JCS of payload) for this (issuer, role), if any; `incoming`
/// the new one. Higher wins; equal and JCS-identical is idempotent; equal
/// and different is an equivocation; lower is a rollback.
pub fn revision_rule(held: Option<(u64, &[u8])>, incoming: (u64, &[u8])) -> RevisionOutcome {
    let Some((held_revision, held_payload)) = held else {
        return RevisionOutcome::Install;
    };
    let (revision, payload) = incoming;
    match revision.cmp(&held_revision) {
        std::cmp::Ordering::Greater => RevisionOutcome::Supersedes,
        std::cmp::Ordering::Less => RevisionOutcome::Rollback,
        std::cmp::Ordering::Equal if payload == held_payload => RevisionOutcome::Idempotent,
        std::cmp::Ordering::Equal => RevisionOutcome::Equivocation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_and_timestamp_shapes() {
        assert!(is_uuid_v4("7b1c9c1e-4d5a-4a4a-9d5e-000000000001"));
        assert!(!is_uuid_v4("7B1C9C1E-4D5A-4A4A-9D5E-000000000001"));
        assert!(!is_uuid_v4("7b1c9c1e-4d5a-3a4a-9d5e-000000000001"));
        assert!(!is_uuid_v4("7b1c9c1e-4d5a-4a4a-7d5e-000000000001"));
        assert!(!is_uuid_v4("7b1c9c1e-4d5a-4a4a-9d5e-00000000001"));
        assert!(is_rfc3339_utc("2026-08-31T12:00:00Z"));
        assert!(is_rfc3339_utc("2026-08-31T23:59:59.123Z"));
        for bad in [
            "2026-08-31T12:00:00",
            "2026-08-31T12:00:00+00:00",
            "2026-13-31T12:00:00Z",
            "2026-08-00T12:00:00Z",
            "2026-08-31T24:00:00Z",
            "2026-08-31T12:60:00Z",
            "2026-08-31T12:00:60Z",
            "2026-08-31T12:00:00.Z",
            "2026-08-31T12:00:00.1234Z",
            "2026-08-31t12:00:00Z",
            "2026-08-31T12:00:00z",
            "",
        ] {
            assert!(!is_rfc3339_utc(bad), "{bad}");
        }
    }

    #[test]
    fn schema_patterns() {
        assert!(is_task_type_uri(CARRIER_ROLE));
        assert!(!is_task_type_uri(
            "https://real-life.org/trust-tasks/Carrier/0.1"
        ));
        assert!(!is_task_type_uri("https://real-life.org/trust-tasks/x/0"));
        assert!(!is_task_type_uri("https://real-life.org/trust-tasks//0.1"));
        assert!(!is_task_type_uri(
            "https://real-life.org/trust-tasks/x/0.1/"
        ));
        assert_eq!(parse_revision("1"), Some(1));
        assert_eq!(
            parse_revision("999999999999999999"),
            Some(999_999_999_999_999_999)
        );
        for bad in ["0", "01", "", "+1", "1.0", "1000000000000000000"] {
            assert_eq!(parse_revision(bad), None, "{bad}");
        }
        assert!(is_constant_name("a"));
        assert!(is_constant_name(&format!("a{}", "-".repeat(31))));
        assert!(!is_constant_name(&format!("a{}", "-".repeat(32))));
        assert!(!is_constant_name("1a"));
        assert!(!is_constant_name("A"));
        assert!(!is_constant_name(""));
    }
}
