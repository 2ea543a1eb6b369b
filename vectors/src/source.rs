//! Where the shipped spec vectors come from: the one resolver.
//!
//! The vector files of RLTP Delivery Contract 0.80 are vendored in
//! `vectors/spec/` (source, commit and license in its `README.md`, digests
//! in `SHA256SUMS`) and compiled into this crate, so a binary that links it
//! (the `demo` and `conformance` subcommands) needs no file at run time
//! and nothing in it names the machine it was built on.
//!
//! [`SpecVectors::from_env`] is what every test, the runner and the CLI
//! use: the directory named by `RLTP_SPEC_VECTORS` when it is set
//! (absolute, or relative to the current directory), else the vendored
//! copy. A command's own `--vectors DIR` is [`SpecVectors::Dir`]. A missing
//! or unreadable file is an error naming its path, never a silent fallback
//! to another copy.

use std::borrow::Cow;
use std::path::PathBuf;

/// The environment variable that points every reader at another copy of
/// the vectors.
pub const ENV: &str = "RLTP_SPEC_VECTORS";

/// The vendored files, by name, as compiled in.
pub const VENDORED: [(&str, &[u8]); 5] = [
    (
        "carrier-proof.json",
        include_bytes!("../spec/carrier-proof.json"),
    ),
    (
        "delivery-ack.json",
        include_bytes!("../spec/delivery-ack.json"),
    ),
    (
        "encounter-cards.json",
        include_bytes!("../spec/encounter-cards.json"),
    ),
    (
        "identity-derivation.json",
        include_bytes!("../spec/identity-derivation.json"),
    ),
    ("seal.json", include_bytes!("../spec/seal.json")),
];

/// The vendored `SHA256SUMS` manifest, as compiled in.
pub const VENDORED_MANIFEST: &str = include_str!("../spec/SHA256SUMS");

/// A source of the shipped vector files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecVectors {
    /// The copy vendored in `vectors/spec/`, compiled in.
    Vendored,
    /// The files of a directory.
    Dir(PathBuf),
}

impl SpecVectors {
    /// `RLTP_SPEC_VECTORS` when set (a relative path is taken from the
    /// current directory), else [`SpecVectors::Vendored`].
    pub fn from_env() -> SpecVectors {
        match std::env::var_os(ENV) {
            Some(dir) if !dir.is_empty() => SpecVectors::Dir(PathBuf::from(dir)),
            _ => SpecVectors::Vendored,
        }
    }

    /// `dir` when given, else [`SpecVectors::from_env`] (a command's
    /// `--vectors DIR`).
    pub fn explicit_or_env(dir: Option<PathBuf>) -> SpecVectors {
        dir.map_or_else(SpecVectors::from_env, SpecVectors::Dir)
    }

    /// The raw bytes of `file` (e.g. `seal.json`).
    ///
    /// # Errors
    /// `cannot read PATH: …` for a directory without the file, and
    /// `no vendored vector file NAME` for a name the vendored copy lacks.
    pub fn bytes(&self, file: &str) -> Result<Cow<'static, [u8]>, String> {
        match self {
            SpecVectors::Vendored => VENDORED
                .iter()
                .find(|(name, _)| *name == file)
                .map(|(_, bytes)| Cow::Borrowed(*bytes))
                .ok_or_else(|| format!("no vendored vector file {file}")),
            SpecVectors::Dir(dir) => {
                let path = dir.join(file);
                std::fs::read(&path)
                    .map(Cow::Owned)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))
            }
        }
    }

    /// `file` as raw bytes and as a `serde_json::Value`.
    ///
    /// # Errors
    /// As [`SpecVectors::bytes`], or `NAME is not JSON: …`.
    pub fn load(&self, file: &str) -> Result<(Cow<'static, [u8]>, serde_json::Value), String> {
        let bytes = self.bytes(file)?;
        let value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not JSON: {e}", self.describe_file(file)))?;
        Ok((bytes, value))
    }

    /// `file` as a `serde_json::Value`.
    ///
    /// # Errors
    /// As [`SpecVectors::load`].
    pub fn json(&self, file: &str) -> Result<serde_json::Value, String> {
        self.load(file).map(|(_, value)| value)
    }

    /// For people: where the files come from.
    pub fn describe(&self) -> String {
        match self {
            SpecVectors::Vendored => "vendored copy (vectors/spec, Delivery Contract 0.80)".into(),
            SpecVectors::Dir(dir) => dir.display().to_string(),
        }
    }

    fn describe_file(&self, file: &str) -> String {
        match self {
            SpecVectors::Vendored => format!("vendored {file}"),
            SpecVectors::Dir(dir) => dir.join(file).display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendored_file_is_json_and_named_once() {
        let mut names: Vec<&str> = VENDORED.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VENDORED.len());
        for (name, _) in VENDORED {
            SpecVectors::Vendored.json(name).unwrap();
        }
    }

    #[test]
    fn a_directory_without_the_file_names_its_path() {
        let source = SpecVectors::Dir(PathBuf::from("no-such-dir"));
        let err = source.bytes("seal.json").unwrap_err();
        assert!(
            err.starts_with("cannot read no-such-dir/seal.json: "),
            "{err}"
        );
        assert_eq!(
            SpecVectors::Vendored.bytes("nope.json").unwrap_err(),
            "no vendored vector file nope.json"
        );
    }
}
