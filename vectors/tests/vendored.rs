//! The vendored vector files (`vectors/spec/`) are the shipped ones: each
//! matches its `SHA256SUMS` line, the manifest names exactly the vendored
//! files, and — where the workplace's `../shared/vectors` sits beside the
//! checkout — every file there is byte-identical to the vendored copy.

use rltp_vectors::{VENDORED, VENDORED_MANIFEST};
use sha2::{Digest, Sha256};
use std::path::Path;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_vendored_file_matches_its_manifest_line() {
    let mut manifest: Vec<(&str, &str)> = VENDORED_MANIFEST
        .lines()
        .map(|line| {
            let (digest, name) = line.split_once("  ").expect("sha256sum format");
            (name, digest)
        })
        .collect();
    manifest.sort_unstable();
    let mut vendored: Vec<(&str, String)> = VENDORED
        .iter()
        .map(|(name, bytes)| (*name, hex(&Sha256::digest(bytes))))
        .collect();
    vendored.sort_unstable();
    assert_eq!(
        manifest,
        vendored
            .iter()
            .map(|(name, digest)| (*name, digest.as_str()))
            .collect::<Vec<_>>()
    );
    // The compiled-in bytes are the files in the tree.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("spec");
    for (name, bytes) in VENDORED {
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
}

#[test]
fn the_vendored_copy_equals_the_shared_vectors_where_they_exist() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/vectors");
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
    let mut vendored: Vec<&str> = VENDORED.iter().map(|(n, _)| *n).collect();
    vendored.sort_unstable();
    assert_eq!(
        names, vendored,
        "the shared folder and the vendored copy list different files"
    );
    for (name, bytes) in VENDORED {
        let shared_bytes = std::fs::read(shared.join(name)).unwrap();
        assert!(
            shared_bytes == bytes,
            "vectors/spec/{name} differs from {}: re-vendor it (vectors/spec/README.md)",
            shared.join(name).display()
        );
    }
}
