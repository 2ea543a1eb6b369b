//! `rltp-vectors`: runs every shipped RLTP vector case the carrier touches
//! and prints a count per file and section. Exit status 1 on any failure.
//!
//! Usage: `rltp-vectors [DIR]` (default: `RLTP_SPEC_VECTORS`, else
//! `../shared/vectors` beside the workspace).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(rltp_vectors::spec_vectors_dir);
    println!("shipped vectors: {}", dir.display());
    let report = rltp_vectors::run_spec(&dir);
    println!("{report}");
    if report.failures() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
