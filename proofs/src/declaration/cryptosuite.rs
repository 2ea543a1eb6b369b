//! The `eddsa-jcs-2022` cryptosuite (W3C vc-di-eddsa §3.3), generic over
//! JSON documents: the proof configuration, the hash data, signing and
//! verification. The W3C test vector (which has `@context`) runs through the
//! same code as RLTP documents (which have none).

// The names the docs link to (every item is re-exported from the parent).
#[allow(unused_imports)]
use super::*;
use crate::encoding::{EncodingError, sha256, signature_from_z};
use crate::jcs::{JcsError, canonicalize};
use crate::json::{Object, Value};
use crate::multikey::{DID_KEY_PREFIX, DidKey};
use ed25519_dalek::{Signature, Signer as _, SigningKey};

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
pub(super) fn proof_form(proof: &Object) -> Result<(DidKey, [u8; 64]), CryptosuiteError> {
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
