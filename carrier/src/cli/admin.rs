//! `rltp-carrier admin stats --data-dir DIR`: counts only, from the store
//! (through the running carrier's control socket, or directly when it is
//! stopped): bindings by state, tombstones, deposits and bytes, and the
//! horizons due in the next 24 h.
//!
//! There is deliberately no admin command that lists the `rkid`s of a
//! principal or the principal of an `rkid` (§5a.1).

use super::{Failure, exit};
use std::path::PathBuf;
use std::process::ExitCode;

/// `admin`: operator queries (counts only).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Counts from the store: bindings, tombstones, deposits, bytes, horizons due.
    Stats {
        /// The carrier's data directory.
        #[arg(long)]
        data_dir: PathBuf,
    },
}

fn execute(args: &Args) -> Result<u8, Failure> {
    match &args.command {
        Command::Stats { data_dir } => {
            let text = crate::admin::stats(data_dir).map_err(|e| Failure::usage(e.to_string()))?;
            print!("{text}");
            Ok(exit::OK)
        }
    }
}

/// Runs `admin`.
pub fn run(args: Args) -> ExitCode {
    super::finish("admin", execute(&args))
}
