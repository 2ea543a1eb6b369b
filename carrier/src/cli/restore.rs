//! `rltp-carrier restore --from FILE --data-dir DIR` and
//! `rltp-carrier restore --from FILE --verify`.
//!
//! A restore checks the archive completely — its digest and bounds, then
//! redb's check, every counter, index and deposit SHA-256 of the store it
//! holds, and the counts against its manifest — in a staging directory,
//! and only then swaps it into `DIR` (what `DIR` held is moved to
//! `DIR/replaced-<ms>/`). It refuses while a carrier serves `DIR`.
//!
//! **A restore is for disasters.** The restored carrier holds the
//! snapshot: deposits admitted after its `taken-at` are lost to that copy,
//! though their senders were told `admitted` ([`rltp_server::admin::backup`]).
//! `--verify` performs the same checks in a temporary directory and only
//! reports what the archive holds and when it was taken.

use super::{Failure, exit};
use rltp_server::admin::backup;
use std::path::PathBuf;
use std::process::ExitCode;

/// `restore`: check an archive and install it, or only check it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The archive `backup` wrote.
    #[arg(long)]
    from: PathBuf,
    /// The data directory to restore into (the carrier must be stopped).
    #[arg(long, required_unless_present = "verify")]
    data_dir: Option<PathBuf>,
    /// Only check the archive and report what it holds; change nothing.
    #[arg(long, conflicts_with = "data_dir")]
    verify: bool,
    /// Print one JSON object per line instead of `name value` lines
    /// (members: the line names in camelCase, `README.md` "JSON output").
    #[arg(long)]
    json: bool,
}

fn execute(args: &Args) -> Result<u8, Failure> {
    let refused = |e: rltp_server::admin::AdminError| Failure::refused(e.to_string());
    let mut lines = String::new();
    let checked = match &args.data_dir {
        Some(dir) if !args.verify => {
            let restored = backup::restore(&args.from, dir).map_err(refused)?;
            if let Some(replaced) = &restored.replaced {
                lines.push_str(&format!("replaced {}\n", replaced.display()));
            }
            lines.push_str(&format!(
                "restored {}\nseq-floor {}\n",
                dir.display(),
                restored.seq_floor
            ));
            restored.checked
        }
        _ => backup::verify(&args.from).map_err(refused)?,
    };
    lines.push_str(&backup::describe(&checked.summary));
    lines.push_str(
        "integrity ok\n\
         note deposits admitted after taken-at are not in this archive: a restore is for disasters\n",
    );
    super::output::Output::new("restore", args.json, tokio::time::Instant::now())
        .record("restore", &lines);
    Ok(exit::OK)
}

/// Runs `restore`.
pub fn run(args: Args) -> ExitCode {
    super::finish("restore", execute(&args))
}
