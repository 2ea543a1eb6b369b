//! `rltp-carrier conclude --key FILE ID…`: conclude the named deposits of
//! the key file's queue (§5a.8) — for a recipient that decided them
//! itself, or one whose `collect --conclude` was killed before the
//! conclusion was answered (its `deposit …` lines name the ids).
//!
//! A conclusion carries no reason; ids the carrier no longer holds are
//! fine (the answer counts how many it still held). The request is
//! retried with backoff over retriable refusals and transport failures
//! until `--give-up-after` (default PT1M), a batch of at most 256 ids at a
//! time.
//!
//! Output as `collect`'s (`concluding`, `conclude`, the retry events;
//! `--json` for one object per line). Exit status 0 when every batch was
//! `served`, 1 for a refusal, 2 for an id that is not a deposit id, 3 when
//! it gave up while the carrier was unreachable.

use super::collect::{CONCLUDE_BATCH, Collector, Concluded};
use super::keys::KeyFile;
use super::output::Output;
use super::{CarrierArgs, Failure, exit};
use rltp_proofs::DepositId;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio::time::Instant;

/// `conclude`: conclude deposits by id.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// The key file (`keys new`).
    #[arg(long)]
    key: PathBuf,
    /// One JSON object per line (for scripts) instead of progress lines.
    #[arg(long)]
    json: bool,
    /// The deposit ids (`u…`, 47 characters, as `send` and `collect` print them).
    #[arg(required = true)]
    ids: Vec<String>,
}

async fn execute(args: &Args, started: Instant) -> Result<u8, Failure> {
    let out = Output::new("conclude", args.json, started);
    let keys = KeyFile::load(&args.key)?;
    let ids = args
        .ids
        .iter()
        .map(|text| {
            DepositId::parse(text)
                .map_err(|e| Failure::usage(format!("{text:?} is not a deposit id: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let link = args.carrier.link()?;
    let give_up_after = args
        .carrier
        .give_up_after
        .unwrap_or(super::DEFAULT_GIVE_UP_AFTER);
    let nowhere = std::path::Path::new("");
    let mut collector = Collector::new(&keys, link, nowhere, true, out, give_up_after);
    let mut status = exit::OK;
    for batch in ids.chunks(CONCLUDE_BATCH) {
        match collector.conclude_ids(batch).await {
            Ok(Concluded::Served(_)) => {}
            Ok(Concluded::Refused(_)) => {
                status = exit::REFUSED;
                break;
            }
            Ok(Concluded::GaveUp(reason)) => {
                status = if reason.is_unreachable() {
                    exit::TRANSPORT
                } else {
                    exit::REFUSED
                };
                break;
            }
            Err(failure) => {
                collector.close().await;
                return Err(failure);
            }
        }
    }
    collector.close().await;
    Ok(status)
}

/// Runs `conclude`.
pub async fn run(args: Args) -> ExitCode {
    let started = Instant::now();
    super::finish("conclude", execute(&args, started).await)
}
