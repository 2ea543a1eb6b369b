//! Shared by the integration tests: where the shipped spec vectors are.
//!
//! `RLTP_SPEC_VECTORS` names the directory; a relative path is taken from
//! the **workspace root** (the README's test command sets
//! `RLTP_SPEC_VECTORS=../shared/vectors` from there, while each test runs
//! in its crate's directory). Without it: `<workspace>/../shared/vectors`.
//! A missing file is a test failure, never a skip.

#![allow(dead_code, clippy::panic)]

use std::path::{Path, PathBuf};

/// The shipped-vector directory.
pub fn vectors_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    match std::env::var_os("RLTP_SPEC_VECTORS") {
        Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
        Some(dir) => workspace.join(dir),
        None => workspace.join("../shared/vectors"),
    }
}

/// A shipped vector file as JSON; panics (fails the test) if it is missing.
pub fn shipped(name: &str) -> serde_json::Value {
    let path = vectors_dir().join(name);
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("shipped vector {} is missing: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}
