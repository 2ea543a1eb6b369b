//! The shipped vector files, read through the one resolver
//! ([`rltp_vectors::SpecVectors`]: `RLTP_SPEC_VECTORS`, else the vendored
//! copy), and the accessors the tests read them with.

use serde_json::Value;

/// Loads a shipped vector file; a missing or unreadable file fails the
/// test, naming the file.
pub fn load(name: &str) -> Value {
    rltp_vectors::SpecVectors::from_env()
        .json(name)
        .unwrap_or_else(|e| panic!("vector file {name}: {e}"))
}

/// `carrier-proof.json`.
pub fn carrier_proof() -> Value {
    load("carrier-proof.json")
}

/// `v` as a string.
pub fn s(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

/// `v` as an unsigned integer.
pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected an integer, got {v}"))
}

/// `v` as an array.
pub fn arr(v: &Value) -> &Vec<Value> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {v}"))
}

/// The bytes of a lowercase or uppercase hex string.
pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The 32 bytes of a 64-digit hex string.
pub fn hex32(s: &str) -> [u8; 32] {
    hex(s).try_into().unwrap()
}
