//! `rltp-carrier conformance`: the black-box conformance runner
//! ([`rltp_conformance`]) against any carrier that speaks the wire
//! profile, one line per contract section; by default over both bindings
//! (QUIC and TLS/TCP, `PROTOCOL.md` §5b), side by side.
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
use rltp_client::TransportChoice;
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
    let options = args.carrier.options()?;
    // `auto` (the default): every check over each binding, side by side
    // (`PROTOCOL.md` §5b); `quic` or `tcp`: that one.
    let choices = match args.carrier.transport {
        TransportChoice::Auto => vec![TransportChoice::Quic, TransportChoice::Tcp],
        one => vec![one],
    };
    if !args.json {
        println!(
            "rltp-carrier conformance: {} as {} over {}",
            args.carrier.first_server(),
            args.carrier_id,
            choices
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(" and ")
        );
    }
    let mut reports = Vec::new();
    for choice in &choices {
        let target = Target {
            options: options.clone().with_transport_choice(*choice),
            carrier: carrier.clone(),
            issuer,
            patience: Duration::from_secs(args.patience),
        };
        let report = conformance::run(&target)
            .await
            .map_err(|e: RunError| Failure::transport(format!("over {choice}: {e}")))?;
        reports.push((choice.as_str(), report));
    }
    if args.json {
        for (transport, report) in &reports {
            print!("{}", report.to_json_lines_on(Some(transport)));
        }
    } else {
        let side: Vec<(&str, &conformance::Report)> =
            reports.iter().map(|(t, r)| (*t, r)).collect();
        print!("{}", conformance::side_by_side(&side));
    }
    Ok(if reports.iter().all(|(_, r)| r.failures() == 0) {
        exit::OK
    } else {
        exit::REFUSED
    })
}

/// Runs `conformance`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("conformance", execute(&args).await)
}
