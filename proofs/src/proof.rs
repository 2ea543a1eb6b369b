//! `rltp-carrier-proof/0.3` (Delivery §5a.3, §11,
//! `schemas/carrier-proof.schema.json`): the object a recipient signs to
//! register, rebind, collect or conclude at a carrier.
//!
//! Three separate steps, never merged (parse ≠ verify ≠ admit):
//!
//! 1. [`parse`] is §5a.3 **r1** — syntax and canonical encodings. Every
//!    failure is the one verdict `refused(malformed)` ([`Malformed`]).
//! 2. [`CarrierProof::verify`] is the principal half of **r3** — Ed25519
//!    `verify_strict` under `principal` over the JCS bytes of the received
//!    object with `sig` omitted ([`PossessionFailed`]). It is run only
//!    after the carrier's own admission decision (r2), because it is
//!    asymmetric work (§4.4 guarantee 3).
//! 3. Everything that needs carrier state — whether the carrier issued
//!    `principalChallenge`, whether `addressChallenge` is the value it
//!    sealed to this `rkid`, capacity (r4), the state table (r5) — is the
//!    carrier engine's, not this module's.
//!
//! The client side builds proofs with [`UnsignedProof`] and
//! [`UnsignedProof::sign`].

use std::fmt;

use ed25519_dalek::{Signature, Signer as _, SigningKey};

use crate::encoding::{
    EncodingError, b64url_decode_array, b64url_encode, multibase_z, signature_from_z,
};
use crate::identity::{
    CarrierId, GENERATION_MAX, GENERATION_MIN, GenerationError, parse_generation_lexeme,
};
use crate::jcs::{self, JcsError};
use crate::json::{self, JsonError, Number, Object, Value};
use crate::multikey::{DidKey, Rkid};

/// §5a.3: the domain tag, the `v` constant inside the signed bytes.
/// A proof whose `v` is not byte-equal to it is `refused(malformed)`.
pub const PROOF_V: &str = "rltp-carrier-proof/0.3";

/// §5a.3: the `type` constant of every carrier proof.
pub const PROOF_TYPE: &str = "carrier-registration-proof";

/// The member names of a carrier proof, as they appear on the wire.
pub mod field {
    /// `v`, the domain tag ([`super::PROOF_V`]).
    pub const V: &str = "v";
    /// `type` ([`super::PROOF_TYPE`]).
    pub const TYPE: &str = "type";
    /// `purpose` ([`super::Purpose`]).
    pub const PURPOSE: &str = "purpose";
    /// `carrier`, the carrier controller identifier `C` (Identity §7a.2).
    pub const CARRIER: &str = "carrier";
    /// `principal`, the control principal's Ed25519 `did:key`.
    pub const PRINCIPAL: &str = "principal";
    /// `rkid`, the X25519 Multikey naming the queue.
    pub const RKID: &str = "rkid";
    /// `generation`, the carrier-nonce generation (Identity §7a.3).
    pub const GENERATION: &str = "generation";
    /// `principalChallenge`, 32 bytes, canonical unpadded base64url.
    pub const PRINCIPAL_CHALLENGE: &str = "principalChallenge";
    /// `addressChallenge`, 32 bytes, canonical unpadded base64url.
    pub const ADDRESS_CHALLENGE: &str = "addressChallenge";
    /// `sig`, Ed25519, `z` + canonical base58btc of 64 bytes.
    pub const SIG: &str = "sig";

    /// The closed member set (`additionalProperties: false`).
    pub const ALL: [&str; 10] = [
        V,
        TYPE,
        PURPOSE,
        CARRIER,
        PRINCIPAL,
        RKID,
        GENERATION,
        PRINCIPAL_CHALLENGE,
        ADDRESS_CHALLENGE,
        SIG,
    ];
}

/// §5a.3 `purpose`: a closed set, inside the signed bytes, so a proof made
/// for one purpose is not a proof for another.
///
/// `register` and `rebind` carry `generation` and `addressChallenge`
/// (REQUIRED); `collect` and `conclude` MUST NOT carry either. Every
/// purpose carries `rkid`. `register` and `rebind` are equivalent in
/// effect: the state table is entered by the held state, not by purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// `register`.
    Register,
    /// `rebind`.
    Rebind,
    /// `collect` (5a.7).
    Collect,
    /// `conclude` (5a.8).
    Conclude,
}

impl Purpose {
    /// Every purpose, in the order §5a.3 lists them.
    pub const ALL: [Purpose; 4] = [
        Purpose::Register,
        Purpose::Rebind,
        Purpose::Collect,
        Purpose::Conclude,
    ];

    /// The wire spelling, byte-exact.
    pub const fn as_str(self) -> &'static str {
        match self {
            Purpose::Register => "register",
            Purpose::Rebind => "rebind",
            Purpose::Collect => "collect",
            Purpose::Conclude => "conclude",
        }
    }

    /// The purpose spelled byte-exactly `s`, or `None`.
    pub fn from_wire(s: &str) -> Option<Purpose> {
        Purpose::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Whether this purpose moves the succession: `true` for `register`
    /// and `rebind` (`generation` and `addressChallenge` REQUIRED),
    /// `false` for `collect` and `conclude` (both FORBIDDEN).
    pub const fn changes_succession(self) -> bool {
        matches!(self, Purpose::Register | Purpose::Rebind)
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// §5a.3 r1: why a received proof is `refused(malformed)`.
///
/// **Every variant is the one verdict `refused(malformed)`**
/// ([`Malformed::VERDICT`]); the variants only say, for logs and tests,
/// which check of r1 failed. Nothing about the variant may reach the
/// presenter beyond that verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// r1.1: the bytes are not one strict JSON text (invalid UTF-8,
    /// duplicate key, trailing bytes, a number such as `01` or `+1`, a
    /// structural limit).
    #[error("proof is not strict json: {0}")]
    Json(#[from] JsonError),
    /// r1.2: the top-level value is not an object.
    #[error("proof is a json {found}, not an object")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// A member REQUIRED for every purpose, or for this purpose, is absent.
    #[error("proof lacks required member {field}")]
    MissingField {
        /// The absent member.
        field: &'static str,
    },
    /// A member has the wrong JSON type.
    #[error("proof member {field} is a json {found}")]
    WrongType {
        /// The member.
        field: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// r1.3: `principal` is not `did:key:z` over `0xed 0x01 ‖` 32 bytes
    /// (checked on the decoded bytes, §11).
    #[error("principal {value:?} does not decode to an ed25519 did:key: {source}")]
    Principal {
        /// The received value.
        value: String,
        /// The decoding failure.
        source: EncodingError,
    },
    /// r1.3: `rkid` is not `z` over `0xec 0x01 ‖` 32 bytes (§11).
    #[error("rkid {value:?} does not decode to an x25519 multikey: {source}")]
    Rkid {
        /// The received value.
        value: String,
        /// The decoding failure.
        source: EncodingError,
    },
    /// r1.3: `sig` is not `z` + canonical base58btc of exactly 64 bytes
    /// (§11, Encounter §2.3).
    #[error("sig {value:?} is not z-base58btc of exactly 64 bytes: {source}")]
    Sig {
        /// The received value.
        value: String,
        /// The decoding failure.
        source: EncodingError,
    },
    /// r1.4: a member outside the closed set of [`field::ALL`].
    #[error("proof carries unknown member {field:?}")]
    UnknownField {
        /// The unknown member name.
        field: String,
    },
    /// r1.5: `purpose` is not one of `register`, `rebind`, `collect`,
    /// `conclude`.
    #[error("purpose {value:?} is not register, rebind, collect or conclude")]
    UnknownPurpose {
        /// The received value.
        value: String,
    },
    /// r1.6: `generation` or `addressChallenge` on a `collect` or
    /// `conclude` proof.
    #[error("member {field} is forbidden for purpose {purpose}")]
    ForbiddenField {
        /// The forbidden member.
        field: &'static str,
        /// The proof's purpose.
        purpose: Purpose,
    },
    /// r1.7: `v` is not byte-equal to [`PROOF_V`].
    #[error("v {value:?} is not {PROOF_V:?}")]
    Version {
        /// The received value.
        value: String,
    },
    /// r1.7: `type` is not byte-equal to [`PROOF_TYPE`].
    #[error("type {value:?} is not {PROOF_TYPE:?}")]
    Type {
        /// The received value.
        value: String,
    },
    /// r1.8: `carrier` is not byte-equal to the carrier's configured
    /// identifier (Identity §7a.2).
    #[error("carrier {value:?} is not this carrier's configured identifier")]
    WrongCarrier {
        /// The received value.
        value: String,
    },
    /// r1.9: a challenge is not canonical unpadded base64url of exactly
    /// 32 bytes (43 characters).
    #[error("{field} {value:?} is not canonical base64url of 32 bytes: {source}")]
    Challenge {
        /// `principalChallenge` or `addressChallenge`.
        field: &'static str,
        /// The received value.
        value: String,
        /// The decoding failure.
        source: EncodingError,
    },
    /// r1.10: the received `generation` lexeme is not canonical decimal in
    /// `[1, 2^53 − 1]` (Identity §7a.3) — `1.0` and `1e0` end here.
    #[error("{0}")]
    Generation(#[from] GenerationError),
    /// r1.11: the received object has no JCS form (not reachable once the
    /// checks above passed; kept so that no path panics).
    #[error("proof has no canonical form: {0}")]
    Canonicalization(#[from] JcsError),
}

impl Malformed {
    /// The verdict every variant stands for (§5a.3).
    pub const VERDICT: &'static str = "refused(malformed)";
}

/// §5a.3 r3 (principal half): the signature does not prove possession of
/// the principal's key. Every variant is the one verdict
/// `refused(possession-failed)` ([`PossessionFailed::VERDICT`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PossessionFailed {
    /// The principal's 32 key bytes are not a usable Ed25519 public key
    /// (not a curve point). The encoding was already accepted at r1; this
    /// is decided here because point decompression is asymmetric work.
    #[error("principal {principal} is not a valid ed25519 public key: {source}")]
    PrincipalKey {
        /// The principal, as a `did:key`.
        principal: String,
        /// Why the key was refused.
        source: EncodingError,
    },
    /// Ed25519 `verify_strict` failed over the signing input.
    #[error("signature does not verify under principal {principal}")]
    Signature {
        /// The principal, as a `did:key`.
        principal: String,
    },
}

impl PossessionFailed {
    /// The verdict every variant stands for (§5a.3).
    pub const VERDICT: &'static str = "refused(possession-failed)";
}

/// A carrier proof that passed §5a.3 r1 — typed fields plus the exact
/// signing input. **Not verified**: call [`CarrierProof::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarrierProof {
    purpose: Purpose,
    carrier: String,
    principal: DidKey,
    rkid: Rkid,
    generation: Option<u64>,
    principal_challenge: [u8; 32],
    address_challenge: Option<[u8; 32]>,
    sig: [u8; 64],
    signing_input: Vec<u8>,
}

/// §5a.3 r1: parse received proof bytes, refusing `malformed` on any
/// syntactic or encoding fault. `configured_carrier` is this carrier's own
/// configured identifier `C` (Identity §7a.2), compared byte for byte.
///
/// The checks run in this order; the first failing one is reported (all
/// are the one verdict `refused(malformed)`):
///
/// 1. strict JSON ([`crate::json::parse`]): UTF-8, no duplicate key, no
///    trailing bytes, RFC 8259 numbers only (`01`, `+1` die here);
/// 2. the top-level value is an object;
/// 3. **decode the three base58btc identifiers before any other check**
///    (§11): `principal` (`did:key:z` over `0xed 0x01 ‖` 32 bytes),
///    `rkid` (`z` over `0xec 0x01 ‖` 32 bytes), `sig` (`z` over exactly 64
///    bytes) — each present, a string, and decoding;
/// 4. no member outside the closed set [`field::ALL`];
/// 5. `purpose` present, a string, in the closed set;
/// 6. the purpose matrix: `v`, `type`, `carrier`, `principalChallenge`
///    REQUIRED for all; `generation` and `addressChallenge` REQUIRED for
///    `register`/`rebind` and FORBIDDEN for `collect`/`conclude`;
/// 7. `v` byte-equal to [`PROOF_V`], `type` byte-equal to [`PROOF_TYPE`];
/// 8. `carrier` byte-equal to `configured_carrier`;
/// 9. `principalChallenge`, then `addressChallenge`: canonical unpadded
///    base64url of exactly 32 bytes (43 characters);
/// 10. `generation`: a JSON number whose **received lexeme** is canonical
///     decimal in `[1, 2^53 − 1]` ([`parse_generation_lexeme`]) — `1.0`
///     and `1e0` parse as JSON and are refused here;
/// 11. the signing input: JCS (RFC 8785) of the received object with
///     `sig` removed.
///
/// # Errors
/// [`Malformed`], naming the failed check.
pub fn parse(bytes: &[u8], configured_carrier: &str) -> Result<CarrierProof, Malformed> {
    // 1. strict JSON.
    let value = json::parse(bytes)?;
    // 2. top-level object.
    let Value::Object(mut object) = value else {
        return Err(Malformed::NotAnObject {
            found: value.kind(),
        });
    };

    // 3. the three base58btc identifiers, decoded before anything else.
    let principal = string_member(&object, field::PRINCIPAL)?;
    let principal = DidKey::parse(principal).map_err(|source| Malformed::Principal {
        value: principal.to_owned(),
        source,
    })?;
    let rkid = string_member(&object, field::RKID)?;
    let rkid = Rkid::parse(rkid).map_err(|source| Malformed::Rkid {
        value: rkid.to_owned(),
        source,
    })?;
    let sig = string_member(&object, field::SIG)?;
    let sig = signature_from_z(sig).map_err(|source| Malformed::Sig {
        value: sig.to_owned(),
        source,
    })?;

    // 4. closed member set.
    if let Some(unknown) = object.keys().find(|k| !field::ALL.contains(k)) {
        return Err(Malformed::UnknownField {
            field: unknown.to_owned(),
        });
    }

    // 5. purpose.
    let purpose_str = string_member(&object, field::PURPOSE)?;
    let purpose = Purpose::from_wire(purpose_str).ok_or_else(|| Malformed::UnknownPurpose {
        value: purpose_str.to_owned(),
    })?;

    // 6. purpose matrix (presence only; types are checked where read).
    for required in [
        field::V,
        field::TYPE,
        field::CARRIER,
        field::PRINCIPAL_CHALLENGE,
    ] {
        require(&object, required)?;
    }
    for succession_field in [field::GENERATION, field::ADDRESS_CHALLENGE] {
        match (
            purpose.changes_succession(),
            object.contains_key(succession_field),
        ) {
            (true, false) => {
                return Err(Malformed::MissingField {
                    field: succession_field,
                });
            }
            (false, true) => {
                return Err(Malformed::ForbiddenField {
                    field: succession_field,
                    purpose,
                });
            }
            _ => {}
        }
    }

    // 7. domain tag and type, byte-exact.
    let v = string_member(&object, field::V)?;
    if v != PROOF_V {
        return Err(Malformed::Version {
            value: v.to_owned(),
        });
    }
    let ty = string_member(&object, field::TYPE)?;
    if ty != PROOF_TYPE {
        return Err(Malformed::Type {
            value: ty.to_owned(),
        });
    }

    // 8. carrier, byte-equal to the configured identifier.
    let carrier = string_member(&object, field::CARRIER)?;
    if carrier.as_bytes() != configured_carrier.as_bytes() {
        return Err(Malformed::WrongCarrier {
            value: carrier.to_owned(),
        });
    }
    let carrier = carrier.to_owned();

    // 9. challenges.
    let principal_challenge = challenge_member(&object, field::PRINCIPAL_CHALLENGE)?;
    let address_challenge = if purpose.changes_succession() {
        Some(challenge_member(&object, field::ADDRESS_CHALLENGE)?)
    } else {
        None
    };

    // 10. generation, on the received lexeme.
    let generation = if purpose.changes_succession() {
        Some(generation_member(&object)?)
    } else {
        None
    };

    // 11. the signing input: JCS of the received object without `sig`.
    object.remove(field::SIG);
    let signing_input = jcs::canonicalize(&Value::Object(object))?;

    Ok(CarrierProof {
        purpose,
        carrier,
        principal,
        rkid,
        generation,
        principal_challenge,
        address_challenge,
        sig,
        signing_input,
    })
}

/// Member `name`, which must be present.
fn require<'a>(object: &'a Object, name: &'static str) -> Result<&'a Value, Malformed> {
    object
        .get(name)
        .ok_or(Malformed::MissingField { field: name })
}

/// Member `name`, which must be present and a string.
fn string_member<'a>(object: &'a Object, name: &'static str) -> Result<&'a str, Malformed> {
    match require(object, name)? {
        Value::String(s) => Ok(s),
        other => Err(Malformed::WrongType {
            field: name,
            found: other.kind(),
        }),
    }
}

/// Challenge member `name`: canonical unpadded base64url of 32 bytes.
fn challenge_member(object: &Object, name: &'static str) -> Result<[u8; 32], Malformed> {
    let s = string_member(object, name)?;
    b64url_decode_array::<32>(s).map_err(|source| Malformed::Challenge {
        field: name,
        value: s.to_owned(),
        source,
    })
}

/// The `generation` member: a JSON number with a canonical in-domain lexeme.
fn generation_member(object: &Object) -> Result<u64, Malformed> {
    match require(object, field::GENERATION)? {
        Value::Number(n) => Ok(parse_generation_lexeme(n.lexeme())?),
        other => Err(Malformed::WrongType {
            field: field::GENERATION,
            found: other.kind(),
        }),
    }
}

impl CarrierProof {
    /// §5a.3 r3, principal half: Ed25519 `verify_strict` of `sig` under
    /// `principal` over [`CarrierProof::signing_input`]. This is the only
    /// asymmetric operation here; run it after r2 (admission).
    ///
    /// It does **not** decide the other possession half (that
    /// `addressChallenge` is the value the carrier sealed to `rkid`) nor
    /// that the carrier issued `principalChallenge`: both need carrier
    /// state.
    ///
    /// # Errors
    /// [`PossessionFailed`] — the verdict `refused(possession-failed)`.
    pub fn verify(&self) -> Result<(), PossessionFailed> {
        let key =
            self.principal
                .verifying_key()
                .map_err(|source| PossessionFailed::PrincipalKey {
                    principal: self.principal.to_did_key(),
                    source,
                })?;
        key.verify_strict(&self.signing_input, &Signature::from_bytes(&self.sig))
            .map_err(|_| PossessionFailed::Signature {
                principal: self.principal.to_did_key(),
            })
    }

    /// `purpose`.
    pub fn purpose(&self) -> Purpose {
        self.purpose
    }

    /// `carrier`, byte-equal to the configured identifier it was parsed
    /// against.
    pub fn carrier(&self) -> &str {
        &self.carrier
    }

    /// `principal`, decoded (Ed25519 public key).
    pub fn principal(&self) -> &DidKey {
        &self.principal
    }

    /// `rkid`, decoded (X25519 public key): the queue this proof acts on.
    pub fn rkid(&self) -> &Rkid {
        &self.rkid
    }

    /// `generation` in `[1, 2^53 − 1]`: `Some` for `register`/`rebind`,
    /// `None` for `collect`/`conclude`.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// `principalChallenge`, the 32 decoded bytes.
    pub fn principal_challenge(&self) -> &[u8; 32] {
        &self.principal_challenge
    }

    /// `addressChallenge`, the 32 decoded bytes: `Some` for
    /// `register`/`rebind`, `None` for `collect`/`conclude`.
    pub fn address_challenge(&self) -> Option<&[u8; 32]> {
        self.address_challenge.as_ref()
    }

    /// `sig`, the 64 decoded Ed25519 signature bytes.
    pub fn signature(&self) -> &[u8; 64] {
        &self.sig
    }

    /// The exact bytes `sig` is over: JCS (RFC 8785) of the received object
    /// with `sig` removed.
    pub fn signing_input(&self) -> &[u8] {
        &self.signing_input
    }
}

/// Why an [`UnsignedProof`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// [`UnsignedProof::registration`] was given `collect`/`conclude`, or
    /// [`UnsignedProof::session`] `register`/`rebind` (§5a.3 purpose
    /// matrix).
    #[error("purpose {purpose} does not take this field set")]
    PurposeMismatch {
        /// The purpose given.
        purpose: Purpose,
    },
    /// `generation` outside `[1, 2^53 − 1]` (Identity §7a.3).
    #[error("generation {generation} is outside the domain [1, 9007199254740991]")]
    GenerationOutOfDomain {
        /// The value given.
        generation: u64,
    },
}

/// Client side of §5a.3: a carrier proof before signing. The `principal`
/// is not a field: it is always the public key of the key that signs, so a
/// built proof cannot name a principal other than its signer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedProof {
    purpose: Purpose,
    carrier: CarrierId,
    rkid: Rkid,
    generation: Option<u64>,
    principal_challenge: [u8; 32],
    address_challenge: Option<[u8; 32]>,
}

impl UnsignedProof {
    /// A `register` or `rebind` proof: every field REQUIRED.
    ///
    /// # Errors
    /// [`BuildError::PurposeMismatch`] for `collect`/`conclude`;
    /// [`BuildError::GenerationOutOfDomain`] outside `[1, 2^53 − 1]`.
    pub fn registration(
        purpose: Purpose,
        carrier: CarrierId,
        rkid: Rkid,
        generation: u64,
        principal_challenge: [u8; 32],
        address_challenge: [u8; 32],
    ) -> Result<UnsignedProof, BuildError> {
        if !purpose.changes_succession() {
            return Err(BuildError::PurposeMismatch { purpose });
        }
        if !(GENERATION_MIN..=GENERATION_MAX).contains(&generation) {
            return Err(BuildError::GenerationOutOfDomain { generation });
        }
        Ok(UnsignedProof {
            purpose,
            carrier,
            rkid,
            generation: Some(generation),
            principal_challenge,
            address_challenge: Some(address_challenge),
        })
    }

    /// A `collect` or `conclude` proof: `rkid` present, `generation` and
    /// `addressChallenge` absent.
    ///
    /// # Errors
    /// [`BuildError::PurposeMismatch`] for `register`/`rebind`.
    pub fn session(
        purpose: Purpose,
        carrier: CarrierId,
        rkid: Rkid,
        principal_challenge: [u8; 32],
    ) -> Result<UnsignedProof, BuildError> {
        if purpose.changes_succession() {
            return Err(BuildError::PurposeMismatch { purpose });
        }
        Ok(UnsignedProof {
            purpose,
            carrier,
            rkid,
            generation: None,
            principal_challenge,
            address_challenge: None,
        })
    }

    /// The proof object without `sig`, for `principal`.
    pub fn to_object(&self, principal: &DidKey) -> Object {
        let mut object = Object::new();
        object.insert(field::V, PROOF_V);
        object.insert(field::TYPE, PROOF_TYPE);
        object.insert(field::PURPOSE, self.purpose.as_str());
        object.insert(field::CARRIER, self.carrier.as_str());
        object.insert(field::PRINCIPAL, principal.to_did_key());
        object.insert(field::RKID, self.rkid.to_multikey());
        if let Some(generation) = self.generation {
            object.insert(field::GENERATION, Number::from_u64(generation));
        }
        object.insert(
            field::PRINCIPAL_CHALLENGE,
            b64url_encode(&self.principal_challenge),
        );
        if let Some(address_challenge) = &self.address_challenge {
            object.insert(field::ADDRESS_CHALLENGE, b64url_encode(address_challenge));
        }
        object
    }

    /// The signing input for `principal`: JCS of [`UnsignedProof::to_object`].
    ///
    /// # Errors
    /// [`JcsError`] — not reachable for the values a builder holds.
    pub fn signing_input(&self, principal: &DidKey) -> Result<Vec<u8>, JcsError> {
        jcs::canonicalize(&Value::Object(self.to_object(principal)))
    }

    /// Sign under `key` (whose `did:key` becomes `principal`) and return
    /// the wire bytes: JCS of the full object including `sig` (`z` +
    /// base58btc of the 64-byte Ed25519 signature). Deterministic.
    ///
    /// # Errors
    /// [`JcsError`] — not reachable for the values a builder holds.
    pub fn sign(&self, key: &SigningKey) -> Result<Vec<u8>, JcsError> {
        let principal = DidKey::from_verifying_key(&key.verifying_key());
        let mut object = self.to_object(&principal);
        let signing_input = jcs::canonicalize(&Value::Object(object.clone()))?;
        let sig = key.sign(&signing_input);
        object.insert(field::SIG, multibase_z(&sig.to_bytes()));
        jcs::canonicalize(&Value::Object(object))
    }
}
