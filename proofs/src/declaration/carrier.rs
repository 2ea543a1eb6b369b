//! The carrier role (§4.4): accepting a verified declaration as the
//! carrier's ([`accept_carrier_declaration`]: `role` byte-equal to
//! [`CARRIER_ROLE`], the seven constants in their §11 domains) and signing
//! one ([`sign_carrier_declaration`]).

// The names the docs link to (every item is re-exported from the parent).
use super::document::{
    DeclarationBuildError, DeclarationHeader, VerifiedDeclaration, sign_declaration,
};
#[allow(unused_imports)]
use super::*;
use crate::constants::{CARRIER_ROLE, CarrierConstants, ConstantError};
use crate::multikey::DidKey;
use ed25519_dalek::SigningKey;

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
