//! The `registry-declaration/0.1` document (Delivery §3, §4.4): its types,
//! its grammar ([`parse_declaration`]: strict JSON, the §3 profile and the
//! payload schema as closed member sets), verification under the document
//! issuer ([`verify_declaration`]), and building and signing one
//! ([`sign_declaration`]), with the generators of its `id` and `issuedAt`
//! beside their validators.

// The names the docs link to (every item is re-exported from the parent).
use super::cryptosuite::{
    CryptosuiteError, eddsa_jcs_2022_sign, eddsa_jcs_2022_verify, proof_form,
};
#[allow(unused_imports)]
use super::*;
use crate::encoding::EncodingError;
use crate::jcs::{JcsError, canonicalize};
use crate::json::{JsonError, Object, Value};
use crate::multikey::DidKey;
use ed25519_dalek::SigningKey;

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
/// §4.1–§4.4), compared byte-exact. [`CARRIER_ROLE`](crate::constants::CARRIER_ROLE) is **not** one: it
/// names a role, and used as a document `type` it is `failed(unknown-type)`
/// (§4.4, §11). A `false` here means "not one of ours"; whether a
/// companion-registered type is known is the receiver registry's answer.
pub fn is_known_document_type(t: &str) -> bool {
    OWN_DOCUMENT_TYPES.contains(&t)
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
    pub(super) issuer: DidKey,
    recipient: DidKey,
    thread_id: String,
    issued_at: String,
    pub(super) role: String,
    pub(super) revision: u64,
    pub(super) constants: Object,
    pub(super) payload_jcs: Vec<u8>,
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

/// A fresh lower-case UUID v4 (RFC 9562 §5.4) from 16 bytes of the
/// caller's CSPRNG: a declaration's `id` or `threadId` (`is_uuid_v4`
/// accepts exactly this shape). The `uuid` crate sets the version and
/// variant bits.
pub fn uuid_v4<R: rand::CryptoRng + ?Sized>(rng: &mut R) -> String {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// `ms` since the Unix epoch as RFC 3339 UTC with second precision
/// (`2026-08-31T12:00:00Z`): a declaration's `issuedAt`/`created`
/// (`is_rfc3339_utc` accepts it). Formatting only (the `humantime`
/// crate); the instant is the caller's, no clock is read.
pub fn rfc3339_utc(ms: crate::Ms) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
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

    let proof_key = parse_declaration_proof(document)?;

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

/// The document's `proof` member: present, an object with exactly the
/// declaration proof members, and of the proof shape; yields the signing key.
fn parse_declaration_proof(document: &Object) -> Result<DidKey, DeclarationParseError> {
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
    parse_proof_shape(proof)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::CARRIER_ROLE;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_788_177_600_999), "2026-08-31T12:00:00Z");
        assert_eq!(rfc3339_utc(4_102_444_799_000), "2099-12-31T23:59:59Z");
        assert!(is_rfc3339_utc(&rfc3339_utc(1_788_177_600_999)));
    }

    #[test]
    fn uuids_are_v4_lowercase() {
        let u = uuid_v4(&mut rand::rng());
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
        assert!(
            u.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
        assert!(is_uuid_v4(&u));
    }

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
