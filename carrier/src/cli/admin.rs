//! `rltp-carrier admin stats --data-dir DIR`: counts only, from the store
//! (through the running carrier's control socket, or directly when it is
//! stopped): bindings by state, tombstones, deposits and bytes, and the
//! horizons due in the next 24 h.
//!
//! `rltp-carrier admin store --data-dir DIR`: the store's growth — bytes on
//! disk, log bytes and how many of them still hold deposits (the rest is
//! what compaction and reclaiming give back), segments, compaction's
//! backlog, snapshots, the in-memory index, and the oldest held deposit's
//! age ([`rltp_server::admin::counts::Counts::size_lines`]).
//!
//! `rltp-carrier admin renew --data-dir DIR --declaration-key |
//! --tls-identity | --clock`: replaces that file on purpose, with the
//! carrier stopped (the old one is moved aside, the data dir's lineage
//! updated: [`rltp_server::admin::renew`]). A carrier refuses to start when one
//! of them is missing or foreign; this is the deliberate way past it.
//!
//! `rltp-carrier admin lame-duck --data-dir DIR`: puts the running
//! carrier in lame-duck mode through its control socket (as SIGUSR2
//! does; `PROTOCOL.md` §5, `deploy/OPERATIONS.md`), and prints
//! `lame-duck entered` (or `lame-duck already`).
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
    /// Print one JSON object per line instead of `name value` lines
    /// (members: the line names in camelCase, `README.md` "JSON output").
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Counts from the store: bindings, tombstones, deposits, bytes, horizons due.
    Stats {
        /// The carrier's data directory.
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// The store's size: disk, log, live and dead bytes, segments,
    /// compaction backlog, snapshots, index memory, oldest deposit's age.
    Store {
        /// The carrier's data directory.
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Put the running carrier in lame-duck mode (as SIGUSR2 does): new
    /// connections are closed with `going-away`, `/readyz` answers 503,
    /// sessions in progress finish, then it shuts down and exits 0.
    LameDuck {
        /// The carrier's data directory (its control socket).
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Replace the declaration key, the TLS identity or the clock file on
    /// purpose (the carrier stopped; the old file is moved aside).
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(false)))]
    Renew {
        /// The carrier's data directory.
        #[arg(long)]
        data_dir: PathBuf,
        /// A new declaration key (the next start signs revision + 1 under it).
        #[arg(long, group = "what")]
        declaration_key: bool,
        /// A new self-signed TLS identity (a new pin).
        #[arg(long, group = "what")]
        tls_identity: bool,
        /// A new clock file, from the wall clock now.
        #[arg(long, group = "what")]
        clock: bool,
    },
}

fn execute(args: &Args) -> Result<u8, Failure> {
    let out = super::output::Output::new("admin", args.json, tokio::time::Instant::now());
    match &args.command {
        Command::Stats { data_dir } => {
            let text =
                rltp_server::admin::stats(data_dir).map_err(|e| Failure::usage(e.to_string()))?;
            out.record("stats", &text);
            Ok(exit::OK)
        }
        Command::Store { data_dir } => {
            let text =
                rltp_server::admin::store(data_dir).map_err(|e| Failure::usage(e.to_string()))?;
            out.record("store", &text);
            Ok(exit::OK)
        }
        Command::LameDuck { data_dir } => {
            use std::io::Read as _;
            let mut body = rltp_server::admin::ask(data_dir, rltp_server::admin::Request::LameDuck)
                .map_err(|e| Failure::usage(e.to_string()))?
                .ok_or_else(|| {
                    Failure::transport(format!(
                        "no carrier answers on the control socket of {}",
                        data_dir.display()
                    ))
                })?;
            let mut text = String::new();
            body.read_to_string(&mut text)
                .map_err(|e| Failure::transport(format!("reading the control answer: {e}")))?;
            print!("{text}");
            Ok(exit::OK)
        }
        Command::Renew {
            data_dir,
            declaration_key,
            tls_identity,
            clock: _,
        } => {
            let what = if *declaration_key {
                rltp_server::admin::Renew::DeclarationKey
            } else if *tls_identity {
                rltp_server::admin::Renew::TlsIdentity
            } else {
                rltp_server::admin::Renew::Clock
            };
            let text = rltp_server::admin::renew(data_dir, what)
                .map_err(|e| Failure::refused(e.to_string()))?;
            out.record("renew", &text);
            Ok(exit::OK)
        }
    }
}

/// Runs `admin`.
pub fn run(args: Args) -> ExitCode {
    super::finish("admin", execute(&args))
}
