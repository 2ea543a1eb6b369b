//! Runners for the shipped spec vectors ([`crate::SpecVectors`]), one module
//! per file (the declaration rejects of `carrier-proof.json` have their own).

pub mod carrier_proof;
pub mod declaration;
pub mod identity;
pub mod seal;
