//! `rltp-carrier status`: what the carrier says about one deposit (§5a.8,
//! §6.1, `PROTOCOL.md` §7): `accepted` (held, or concluded — a carrier
//! never reveals a conclusion), `given-up` (the sender's status becomes
//! `failed(expired-by-adapter-policy)`), or `unknown`.
//!
//! Transport failures are retried with backoff until `--give-up-after`
//! (default PT1M). Exit status 0 for `accepted`, 1 for `given-up` or
//! `unknown`, 3 when it gave up while the carrier was unreachable.

use super::{CarrierArgs, Failure, exit};
use rltp_proofs::DepositId;
use rltp_proofs::multikey::Rkid;
use rltp_wire::verdict::DepositStatus;
use std::process::ExitCode;

/// `status`: a deposit's status by id.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// The queue address the deposit was sent to.
    #[arg(long)]
    to: String,
    /// The deposit id `send` printed (`u…`, 47 characters).
    #[arg(long)]
    deposit: String,
    /// Print one JSON object per line instead of `name value` lines
    /// (members: `README.md` "JSON output").
    #[arg(long)]
    json: bool,
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    let rkid = Rkid::parse(&args.to).map_err(|e| {
        Failure::usage(format!("--to {:?} is not an x25519 multikey: {e}", args.to))
    })?;
    let deposit = DepositId::parse(&args.deposit).map_err(|e| {
        Failure::usage(format!(
            "--deposit {:?} is not a deposit id: {e}",
            args.deposit
        ))
    })?;
    let out = super::output::Output::new("status", args.json, tokio::time::Instant::now());
    let mut link = args.carrier.link()?;
    let mut schedule = args.carrier.request_schedule();
    let status = link
        .status(&rkid, &deposit, &mut schedule, |e| out.retry("status", &e))
        .await;
    link.close().await;
    let status = match status? {
        rltp_client::Finished::Done(status) => status,
        rltp_client::Finished::GaveUp(reason) => return Err(super::gave_up("status", reason)),
    };
    let mut lines = format!("status {status}\n");
    if status == DepositStatus::GivenUp {
        lines.push_str("sender-status failed(expired-by-adapter-policy)\n");
    }
    out.record("deposit-status", &lines);
    Ok(if status == DepositStatus::Accepted {
        exit::OK
    } else {
        exit::REFUSED
    })
}

/// Runs `status`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("status", execute(&args).await)
}
