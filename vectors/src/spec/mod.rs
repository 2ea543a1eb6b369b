//! Runners for the shipped spec vectors (`RLTP_SPEC_VECTORS`), one module
//! per file.

pub mod carrier_proof;
pub mod identity;
pub mod seal;
