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
//!    [`CarrierDeclaration`]: `role` byte-equal to
//!    [`CARRIER_ROLE`](crate::constants::CARRIER_ROLE), and
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

//!
//! | module | concern |
//! |---|---|
//! | [`cryptosuite`] | `eddsa-jcs-2022`, generic over documents |
//! | [`document`] | the document's types, grammar, verification and signing |
//! | [`carrier`] | the carrier role's acceptance and signing |
//! | [`revision`] | the generic revision rule |
//!
//! Every item is re-exported here, so `rltp_proofs::declaration::X` names it.

pub mod carrier;
pub mod cryptosuite;
pub mod document;
pub mod revision;

pub use carrier::*;
pub use cryptosuite::*;
pub use document::*;
pub use revision::*;
