//! Runners for the shipped spec vectors (`RLTP_SPEC_VECTORS`), one module
//! per file (the declaration rejects of `carrier-proof.json` have their own).

pub mod carrier_proof;
pub mod declaration;
pub mod identity;
pub mod seal;
