//! The vendored schema closure (`vectors/spec/schemas/`) is the shipped
//! one: each file matches its `SHA256SUMS` line, the manifest names exactly
//! the compiled-in files, each file's `$id` is registered once, and — where
//! the workplace's `../shared/schemas` sits beside the checkout — every
//! file there is byte-identical to the vendored copy.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use rltp_party::schema::{VENDORED_SCHEMAS, VENDORED_SCHEMAS_MANIFEST, schemas};
use sha2::{Digest, Sha256};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_vendored_schema_matches_its_manifest_line_and_the_tree() {
    let mut manifest: Vec<(&str, &str)> = VENDORED_SCHEMAS_MANIFEST
        .lines()
        .map(|line| {
            let (digest, name) = line.split_once("  ").unwrap();
            (name, digest)
        })
        .collect();
    manifest.sort_unstable();
    let mut compiled: Vec<(&str, String)> = VENDORED_SCHEMAS
        .iter()
        .map(|(name, text)| (*name, hex(&Sha256::digest(text.as_bytes()))))
        .collect();
    compiled.sort_unstable();
    let compiled: Vec<(&str, &str)> = compiled.iter().map(|(n, d)| (*n, d.as_str())).collect();
    assert_eq!(manifest, compiled);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors/spec/schemas");
    for (name, text) in VENDORED_SCHEMAS {
        assert_eq!(
            std::fs::read_to_string(dir.join(name)).unwrap(),
            text,
            "{name}"
        );
    }
    assert_eq!(schemas().unwrap().ids().count(), VENDORED_SCHEMAS.len());
}

#[test]
fn the_vendored_schemas_equal_the_shared_ones_where_they_exist() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/schemas");
    if !shared.is_dir() {
        println!(
            "{} is absent: only the manifest check applies",
            shared.display()
        );
        return;
    }
    let mut names: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let mut vendored: Vec<&str> = VENDORED_SCHEMAS.iter().map(|(n, _)| *n).collect();
    vendored.sort_unstable();
    assert_eq!(names, vendored);
    for (name, text) in VENDORED_SCHEMAS {
        let held = std::fs::read_to_string(shared.join(name)).unwrap();
        assert!(
            held == text,
            "vectors/spec/schemas/{name} differs from the shared copy: re-vendor it"
        );
    }
}
