//! # rltp-vectors: the conformance vector runner
//!
//! Executes every case of the shipped RLTP vector files that the carrier
//! touches (§11 "Shipped vectors") against `rltp-proofs`, and reports a
//! count per file and section. A case passes only on the exact expected
//! verdict or the exact expected bytes.
//!
//! The shipped vectors come from the one resolver, [`SpecVectors`]: the
//! copy vendored in `vectors/spec/` and compiled in, or the directory named
//! by `RLTP_SPEC_VECTORS`. A missing or unreadable file is a **failure** of
//! every section that needs it, never a skip.
//!
//! What this crate does **not** do: it runs no carrier (the engine's
//! sections of `carrier-proof.json` run in `engine/tests/engine_vectors.rs`
//! through this resolver, and the wire-observable ones in the shell's
//! `conformance` runner), and no other crate resolves the vector
//! directory: this is the one resolver.

use std::fmt;

mod source;
pub mod spec;

pub use source::{ENV, SpecVectors, VENDORED, VENDORED_MANIFEST};

/// One section of one vector file: how many cases ran and which failed.
#[derive(Debug, Clone)]
pub struct Section {
    /// The vector file (e.g. `carrier-proof.json`).
    pub file: &'static str,
    /// The section path inside it (e.g. `encodingAcceptanceSurface`).
    pub name: &'static str,
    /// Cases that passed.
    pub passed: usize,
    /// Failed cases, each as `case: reason`.
    pub failures: Vec<String>,
}

impl Section {
    /// An empty section.
    pub fn new(file: &'static str, name: &'static str) -> Section {
        Section {
            file,
            name,
            passed: 0,
            failures: Vec::new(),
        }
    }

    /// Records one case: `Ok` passes, `Err(reason)` fails.
    pub fn case(&mut self, case: impl fmt::Display, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.passed += 1,
            Err(reason) => self.failures.push(format!("{case}: {reason}")),
        }
    }

    /// Cases run (passed + failed).
    pub fn total(&self) -> usize {
        self.passed + self.failures.len()
    }
}

/// The result of a run: every section in order.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Sections in execution order.
    pub sections: Vec<Section>,
}

impl Report {
    /// Total failed cases.
    pub fn failures(&self) -> usize {
        self.sections.iter().map(|s| s.failures.len()).sum()
    }

    /// Total cases run.
    pub fn total(&self) -> usize {
        self.sections.iter().map(Section::total).sum()
    }

    /// The section `file`/`name`, if it ran.
    pub fn section(&self, file: &str, name: &str) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.file == file && s.name == name)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<26} {:<56} {:>6} {:>6}",
            "file", "section", "passed", "failed"
        )?;
        for s in &self.sections {
            writeln!(
                f,
                "{:<26} {:<56} {:>6} {:>6}",
                s.file,
                s.name,
                s.passed,
                s.failures.len()
            )?;
            for failure in &s.failures {
                writeln!(f, "    FAIL {failure}")?;
            }
        }
        write!(
            f,
            "{} passed, {} failed",
            self.total() - self.failures(),
            self.failures()
        )
    }
}

/// Runs every shipped-vector section of `vectors`.
pub fn run_spec(vectors: &SpecVectors) -> Report {
    let mut report = Report::default();
    spec::seal::run(vectors, &mut report);
    spec::carrier_proof::run(vectors, &mut report);
    spec::identity::run(vectors, &mut report);
    report
}

/// Records a load failure as a failed case in each named section.
pub fn missing(report: &mut Report, file: &'static str, sections: &[&'static str], why: &str) {
    for name in sections {
        let mut section = Section::new(file, name);
        section.case("load", Err(why.to_owned()));
        report.sections.push(section);
    }
}

/// Compares two values, describing a mismatch.
///
/// # Errors
/// `expected … got …` when they differ.
pub fn expect_eq<T: PartialEq + fmt::Debug>(what: &str, got: T, expected: T) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("{what}: expected {expected:?}, got {got:?}"))
    }
}

/// Reads a string member at a JSON pointer.
///
/// # Errors
/// A message naming the pointer if absent or not a string.
pub fn str_at<'a>(v: &'a serde_json::Value, pointer: &str) -> Result<&'a str, String> {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("vector has no string at {pointer}"))
}

/// Reads an array at a JSON pointer.
///
/// # Errors
/// A message naming the pointer if absent or not an array.
pub fn array_at<'a>(
    v: &'a serde_json::Value,
    pointer: &str,
) -> Result<&'a Vec<serde_json::Value>, String> {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| format!("vector has no array at {pointer}"))
}

/// Decodes a hex string from a vector.
///
/// # Errors
/// A message if `s` is not even-length lowercase/uppercase hex.
pub fn hex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("odd-length hex {s:?}"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("bad hex {s:?}"))
        })
        .collect()
}

/// Decodes a 32-byte hex value.
///
/// # Errors
/// As [`hex`], plus a length mismatch.
pub fn hex32(s: &str) -> Result<[u8; 32], String> {
    hex(s)?
        .try_into()
        .map_err(|_| format!("{s:?} is not 32 bytes"))
}
