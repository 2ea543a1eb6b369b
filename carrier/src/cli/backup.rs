//! `rltp-carrier backup --data-dir DIR --out FILE`: a consistent snapshot
//! of a carrier's store, taken **online** while `serve` runs (through the
//! control socket, [`rltp_server::admin`]) or directly when the carrier is
//! stopped. See [`rltp_server::admin::backup`] for what the archive holds — it
//! includes the declaration key and the generated TLS key: protect it.
//!
//! Prints `name value` lines describing the archive (`taken-at` first:
//! deposits admitted after it are not in this copy).

use super::{Failure, exit};
use rltp_server::admin::backup;
use std::path::PathBuf;
use std::process::ExitCode;

/// `backup`: write a backup archive.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The carrier's data directory (as given to `serve`).
    #[arg(long)]
    data_dir: PathBuf,
    /// Where to write the archive (must not exist; written with mode 0600).
    #[arg(long)]
    out: PathBuf,
    /// Print one JSON object per line instead of `name value` lines
    /// (members: the line names in camelCase, `README.md` "JSON output").
    #[arg(long)]
    json: bool,
}

fn execute(args: &Args) -> Result<u8, Failure> {
    let done =
        backup::backup(&args.data_dir, &args.out).map_err(|e| Failure::usage(e.to_string()))?;
    let lines = format!(
        "{}online {}\nout {}\n",
        backup::describe(&done.summary),
        if done.online { "yes" } else { "no" },
        args.out.display()
    );
    super::output::Output::new("backup", args.json, tokio::time::Instant::now())
        .record("backup", &lines);
    Ok(exit::OK)
}

/// Runs `backup`.
pub fn run(args: Args) -> ExitCode {
    super::finish("backup", execute(&args))
}
