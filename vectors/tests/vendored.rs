//! The vendored spec tree (`vectors/spec/`) is the shipped one, for both
//! of its manifests: the vector files (`SHA256SUMS`, compiled in by this
//! crate) and the schema closure (`schemas/SHA256SUMS`, compiled in by
//! `rltp-party`). Each compiled-in file matches its manifest line and its
//! file in the tree, the manifest names exactly the compiled-in files,
//! and — where the workplace's `../shared/vectors` and `../shared/schemas`
//! sit beside the checkout — every file there is byte-identical to the
//! vendored copy.

#![allow(clippy::unwrap_used)]

use rltp_party::schema::{VENDORED_SCHEMAS, VENDORED_SCHEMAS_MANIFEST};
use rltp_vectors::{VENDORED, VENDORED_MANIFEST};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `path` below this crate's directory.
fn here(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The manifest (`sha256sum` format) names exactly `files`, each with its
/// digest, and each compiled-in file is the file of that name in `dir`.
fn matches_manifest_and_tree(manifest: &str, files: &[(&str, &[u8])], dir: &Path) {
    let mut listed: Vec<(&str, &str)> = manifest
        .lines()
        .map(|line| {
            let (digest, name) = line.split_once("  ").expect("sha256sum format");
            (name, digest)
        })
        .collect();
    listed.sort_unstable();
    let mut compiled: Vec<(&str, String)> = files
        .iter()
        .map(|(name, bytes)| (*name, hex(&Sha256::digest(bytes))))
        .collect();
    compiled.sort_unstable();
    assert_eq!(
        listed,
        compiled
            .iter()
            .map(|(name, digest)| (*name, digest.as_str()))
            .collect::<Vec<_>>()
    );
    for (name, bytes) in files {
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), *bytes, "{name}");
    }
}

/// Where `shared` exists: it lists exactly the vendored `.json` files, and
/// each is byte-identical to the vendored copy in `vendored_dir`.
fn equals_shared_where_it_exists(files: &[(&str, &[u8])], shared: &Path, vendored_dir: &str) {
    if !shared.is_dir() {
        println!(
            "{} is absent: only the manifest check applies",
            shared.display()
        );
        return;
    }
    let mut names: Vec<String> = std::fs::read_dir(shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let mut vendored: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
    vendored.sort_unstable();
    assert_eq!(
        names, vendored,
        "the shared folder and the vendored copy list different files"
    );
    for (name, bytes) in files {
        let shared_bytes = std::fs::read(shared.join(name)).unwrap();
        assert!(
            shared_bytes == *bytes,
            "{vendored_dir}/{name} differs from {}: re-vendor it (vectors/spec/README.md)",
            shared.join(name).display()
        );
    }
}

/// The schema closure as bytes.
fn schemas() -> Vec<(&'static str, &'static [u8])> {
    VENDORED_SCHEMAS
        .iter()
        .map(|(name, text)| (*name, text.as_bytes()))
        .collect()
}

#[test]
fn every_vendored_file_matches_its_manifest_line() {
    matches_manifest_and_tree(VENDORED_MANIFEST, &VENDORED, &here("spec"));
}

#[test]
fn every_vendored_schema_matches_its_manifest_line_and_the_tree() {
    matches_manifest_and_tree(VENDORED_SCHEMAS_MANIFEST, &schemas(), &here("spec/schemas"));
}

#[test]
fn the_vendored_copy_equals_the_shared_vectors_where_they_exist() {
    equals_shared_where_it_exists(&VENDORED, &here("../../shared/vectors"), "vectors/spec");
}

#[test]
fn the_vendored_schemas_equal_the_shared_ones_where_they_exist() {
    equals_shared_where_it_exists(
        &schemas(),
        &here("../../shared/schemas"),
        "vectors/spec/schemas",
    );
}
