//! `rltp-carrier status`: what the carrier says about one deposit (§5a.8,
//! §6.1, `PROTOCOL.md` §7): `accepted` (held, or concluded — a carrier
//! never reveals a conclusion), `given-up` (the sender's status becomes
//! `failed(expired-by-adapter-policy)`), or `unknown`.
//!
//! Transport failures are retried with backoff until `--give-up-after`
//! (default PT1M). Exit status 0 for `accepted`, 1 for `given-up` or
//! `unknown`, 3 when it gave up while the carrier was unreachable.
//!
//! With `--party` it answers the **sender's** §6.1 status from the party's
//! sent-register: `accepted`, `delivered` (with how: `accepted->delivered`
//! or the late `failed->delivered`, which §6.1 requires to be surfaced) or
//! `failed(…)`; exit 0 for `accepted` and `delivered`, 1 for `failed(…)`.

use super::output::Output;
use super::{CarrierArgs, Failure, exit};
use rltp_party::sender::{SenderFailure, SenderStatus};
use rltp_party::store::PartyStore;
use rltp_proofs::DepositId;
use rltp_proofs::multikey::Rkid;
use rltp_wire::verdict::DepositStatus;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `status`: a deposit's status by id.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// The queue address the deposit was sent to (with `--party`: the one
    /// the sent-register holds).
    #[arg(long, required_unless_present = "party")]
    to: Option<String>,
    /// The deposit id `send` printed (`u…`, 47 characters).
    #[arg(long)]
    deposit: String,
    /// A party file: answer the sender's §6.1 status from its
    /// sent-register (`accepted`, `delivered`, `failed(…)`), asking the
    /// carrier only while it is `accepted` (a give-up there makes it
    /// `failed(expired-by-adapter-policy)`).
    #[arg(long)]
    party: Option<PathBuf>,
    /// Print one JSON object per line instead of `name value` lines
    /// (members: `README.md` "JSON output").
    #[arg(long)]
    json: bool,
}

/// Asks the carrier for `deposit`'s status in the queue of `rkid`.
async fn carrier_status(
    args: &Args,
    rkid: &Rkid,
    deposit: &DepositId,
    out: &Output,
) -> Result<DepositStatus, Failure> {
    let mut link = args.carrier.link()?;
    let mut schedule = args.carrier.request_schedule();
    let status = link
        .status(rkid, deposit, &mut schedule, |e| out.retry("status", &e))
        .await;
    link.close().await;
    match status? {
        rltp_client::Finished::Done(status) => Ok(status),
        rltp_client::Finished::GaveUp(reason) => Err(super::gave_up("status", reason)),
    }
}

/// `status --party`: the sender's status from the sent-register (§6.1).
async fn sender_status(
    args: &Args,
    path: &Path,
    deposit: &DepositId,
    out: &Output,
) -> Result<u8, Failure> {
    let store = super::party::open_store(path)?;
    let fault = |e: &dyn std::fmt::Display| Failure::usage(format!("{}: {e}", path.display()));
    let id = deposit.to_multibase();
    let sent = store
        .sent_deposits()
        .map_err(|e| fault(&e))?
        .into_iter()
        .find(|s| s.deposit.as_deref() == Some(id.as_str()))
        .ok_or_else(|| {
            Failure::refused(format!(
                "deposit {id} is not in the sent-register of {}",
                path.display()
            ))
        })?;
    let mut status = sent.entry.status.clone();
    if status == SenderStatus::Accepted
        && let Some(rkid) = sent.rkid.as_deref().and_then(|r| Rkid::parse(r).ok())
        && carrier_status(args, &rkid, deposit, out).await? == DepositStatus::GivenUp
    {
        let reason = SenderFailure::ExpiredByAdapterPolicy;
        status = store
            .give_up(&sent.entry.digest, reason)
            .map_err(|e| fault(&e))?
            .unwrap_or(status);
    }
    let mut lines = format!(
        "sender-status {status}\ndigest {}\nthread {}\n",
        sent.entry.digest, sent.entry.thread_id
    );
    if let Some(transition) = &sent.transition {
        lines.push_str(&format!("transition {transition}\n"));
    }
    out.record("sender-status", &lines);
    Ok(match status {
        SenderStatus::Failed(_) => exit::REFUSED,
        _ => exit::OK,
    })
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    let deposit = DepositId::parse(&args.deposit).map_err(|e| {
        Failure::usage(format!(
            "--deposit {:?} is not a deposit id: {e}",
            args.deposit
        ))
    })?;
    let out = Output::new("status", args.json, tokio::time::Instant::now());
    if let Some(path) = &args.party {
        return sender_status(args, path, &deposit, &out).await;
    }
    let to = args.to.as_deref().unwrap_or_default();
    let rkid = Rkid::parse(to)
        .map_err(|e| Failure::usage(format!("--to {to:?} is not an x25519 multikey: {e}")))?;
    let status = carrier_status(args, &rkid, &deposit, &out).await?;
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
