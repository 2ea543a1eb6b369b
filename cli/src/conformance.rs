//! `rltp-carrier conformance`: the black-box conformance runner
//! ([`rltp_conformance`]) against any carrier that speaks the wire
//! profile, one line per contract section.
//!
//! ```text
//! rltp-carrier conformance --server HOST:PORT --pin sha256/… --carrier did:web:…
//! ```
//!
//! Exit status: [`exit::OK`] when no check failed (sections that are not
//! observable from the wire do not fail), [`exit::REFUSED`] when one did,
//! [`exit::USAGE`] for bad arguments, [`exit::TRANSPORT`] when the carrier
//! cannot be reached at all.

use super::{CarrierArgs, Failure, exit};
use rltp_conformance::{self as conformance, RunError, Target};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::DidKey;
use std::process::ExitCode;
use std::time::Duration;

/// `conformance`: check a carrier from the wire.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// The carrier identifier `C` its proofs name (`serve` prints it as
    /// `carrier …`).
    #[arg(long = "carrier", value_name = "C", default_value = rltp_server::config::DEFAULT_CARRIER)]
    carrier_id: String,
    /// The declaration key bound to `C` (`did:key:…`, `serve` prints it as
    /// `declaration-issuer`); without it the issuer binding is not checked.
    #[arg(long)]
    issuer: Option<String>,
    /// Longest wait for a time-bound rule, seconds (a challenge's expiry
    /// needs `challenge-lifetime` + 2 s); longer rules are reported not
    /// observable.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3600))]
    patience: u64,
    /// One JSON object per section and line instead of the table.
    #[arg(long)]
    json: bool,
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    let carrier = CarrierId::from_bytes(args.carrier_id.as_bytes())
        .map_err(|e| Failure::usage(format!("--carrier {:?}: {e}", args.carrier_id)))?;
    let issuer = match &args.issuer {
        Some(text) => Some(
            DidKey::parse(text)
                .map_err(|e| Failure::usage(format!("--issuer {text:?} is not a did:key: {e}")))?,
        ),
        None => None,
    };
    let target = Target {
        options: args.carrier.options()?,
        carrier,
        issuer,
        patience: Duration::from_secs(args.patience),
    };
    if !args.json {
        println!(
            "rltp-carrier conformance: {} as {}",
            args.carrier.first_server(),
            args.carrier_id
        );
    }
    let report = conformance::run(&target)
        .await
        .map_err(|e: RunError| Failure::transport(e.to_string()))?;
    if args.json {
        print!("{}", report.to_json_lines());
    } else {
        print!("{}", report.to_text());
    }
    Ok(if report.failures() == 0 {
        exit::OK
    } else {
        exit::REFUSED
    })
}

/// Runs `conformance`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("conformance", execute(&args).await)
}
