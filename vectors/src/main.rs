//! `rltp-vectors`: runs every shipped RLTP vector case the carrier touches
//! and prints a count per file and section. Exit status 1 on any failure.
//!
//! Usage: `rltp-vectors [DIR]` (default: `RLTP_SPEC_VECTORS`, else the
//! vendored copy compiled in).

use rltp_vectors::SpecVectors;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let vectors = SpecVectors::explicit_or_env(std::env::args_os().nth(1).map(PathBuf::from));
    println!("shipped vectors: {}", vectors.describe());
    let report = rltp_vectors::run_spec(&vectors);
    println!("{report}");
    if report.failures() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
