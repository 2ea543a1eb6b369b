//! `rltp-carrier register`: bind the key file's `rkid` to its control
//! principal (§5a.3, `PROTOCOL.md` §8) — request a challenge, open the
//! sealed address challenge with the rkid secret (checking `v`, `carrier`,
//! `rkid`, `purpose`), sign both challenges with the principal at the key
//! file's generation, present the proof, print the verdict.
//!
//! On `refused(stale-generation)` it prints the generation the carrier
//! holds and the smallest one that would win (held + 1), with the
//! `keys rotate` command that gets there.
//!
//! A retriable refusal (of the challenge or of the proof) and a transport
//! failure are retried with backoff on a fresh challenge until
//! `--give-up-after` (default PT1M), reporting as it goes. Exit status 0
//! when the binding is held, 1 for a refusal, 3 when it gave up while the
//! carrier was unreachable.

use super::keys::KeyFile;
use super::output::Output;
use super::{CarrierArgs, Failure, exit};
use rltp_client::{Client, ClientError, Finished, Link, RegisterOutcome, Schedule};
use rltp_proofs::proof::Purpose;
use rltp_wire::verdict::Verdict;
use std::path::PathBuf;
use std::process::ExitCode;

/// `register`: register or rebind.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// The key file (`keys new`).
    #[arg(long)]
    key: PathBuf,
    /// `register` or `rebind` (default: `register` at generation 1,
    /// `rebind` above; the carrier treats both alike, §5a.3).
    #[arg(long, value_parser = ["register", "rebind"])]
    purpose: Option<String>,
    /// Print one JSON object per line instead of `name value` lines
    /// (members: `README.md` "JSON output").
    #[arg(long)]
    json: bool,
}

fn default_purpose(keys: &KeyFile, purpose: Option<Purpose>) -> Purpose {
    purpose.unwrap_or(if keys.generation() == 1 {
        Purpose::Register
    } else {
        Purpose::Rebind
    })
}

fn failure(keys: &KeyFile, e: ClientError) -> Failure {
    match e {
        ClientError::AddressChallenge(inner) => Failure::refused(format!(
            "{inner} (the key file is for carrier {:?}; is the carrier configured with that identifier?)",
            keys.carrier().as_str()
        )),
        e => Failure::from(e),
    }
}

/// Registers `keys` over `client` with `purpose` (default by generation),
/// once.
///
/// # Errors
/// [`Failure`] for transport faults or an address challenge that is not
/// the one asked for (the carrier's `C` differs from the key file's).
pub async fn register(
    client: &Client,
    keys: &KeyFile,
    purpose: Option<Purpose>,
) -> Result<RegisterOutcome, Failure> {
    client
        .register(&keys.recipient_keys(), default_purpose(keys, purpose))
        .await
        .map_err(|e| failure(keys, e))
}

/// Registers `keys` over `link`, retried on `schedule` ([`Link::register`]).
///
/// # Errors
/// As [`register`]; a give-up is [`super::gave_up`].
pub async fn register_retrying(
    link: &mut Link,
    keys: &KeyFile,
    purpose: Option<Purpose>,
    schedule: &mut Schedule,
    out: &Output,
) -> Result<RegisterOutcome, Failure> {
    let finished = link
        .register(
            &keys.recipient_keys(),
            default_purpose(keys, purpose),
            schedule,
            |e| out.retry("register", &e),
        )
        .await
        .map_err(|e| failure(keys, e))?;
    match finished {
        Finished::Done(outcome) => Ok(outcome),
        Finished::GaveUp(reason) => Err(super::gave_up("register", reason)),
    }
}

/// Whether a registration verdict holds the binding.
pub fn holds(verdict: Verdict) -> bool {
    matches!(
        verdict,
        Verdict::Registered | Verdict::RegisteredIdempotent | Verdict::Rebound
    )
}

async fn execute(args: &Args, started: tokio::time::Instant) -> Result<u8, Failure> {
    let out = Output::new("register", args.json, started);
    let keys = KeyFile::load(&args.key)?;
    let purpose = args.purpose.as_deref().and_then(Purpose::from_wire);
    out.record(
        "key",
        &format!(
            "rkid {}\nprincipal {}\ngeneration {}\n",
            keys.rkid().to_multikey(),
            keys.principal().to_did_key(),
            keys.generation()
        ),
    );
    let mut link = args.carrier.link()?;
    let mut schedule = args.carrier.request_schedule();
    let outcome = register_retrying(&mut link, &keys, purpose, &mut schedule, &out).await;
    link.close().await;
    let outcome = outcome?;
    let mut lines = String::new();
    if let RegisterOutcome::ChallengeRefused(v) = outcome {
        lines.push_str(&format!("challenge {v}\n"));
    }
    let verdict = outcome.verdict();
    lines.push_str(&format!("verdict {verdict}\n"));
    if let Verdict::StaleGeneration { held } = verdict {
        lines.push_str(&format!("held-generation {held}\n"));
        match outcome.winning_generation() {
            Some(winning) => lines.push_str(&format!(
                "winning-generation {winning}\n\
                 hint: rltp-carrier keys rotate --key {} --generation {winning}, then register again\n",
                args.key.display()
            )),
            None => lines.push_str(
                "winning-generation none (the held generation is the top of the domain)\n",
            ),
        }
    }
    if verdict.retriable() {
        lines.push_str("retriable true\n");
    }
    out.record("verdict", &lines);
    Ok(if holds(verdict) {
        exit::OK
    } else {
        exit::REFUSED
    })
}

/// Runs `register`.
pub async fn run(args: Args) -> ExitCode {
    let started = tokio::time::Instant::now();
    super::finish("register", execute(&args, started).await)
}
