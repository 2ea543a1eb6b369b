//! Shared by the integration tests: the shipped spec vectors, through the
//! one resolver (`rltp_vectors::SpecVectors`: `RLTP_SPEC_VECTORS` when set,
//! else the vendored copy). A missing file is a test failure, never a skip.

#![allow(dead_code, clippy::panic)]

/// A shipped vector file as JSON; panics (fails the test) if it is missing.
pub fn shipped(name: &str) -> serde_json::Value {
    rltp_vectors::SpecVectors::from_env()
        .json(name)
        .unwrap_or_else(|e| panic!("shipped vector {name}: {e}"))
}
