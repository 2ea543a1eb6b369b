//! `rltp-carrier declaration`: fetch the carrier's signed
//! `registry-declaration/0.1` (§4.4), verify its `eddsa-jcs-2022` proof
//! under its `issuer` and the seven constants against their §11 domains,
//! and print them (`PROTOCOL.md` §3). Transport failures are retried until
//! `--give-up-after` (default PT1M); exit status 0, 1 for a declaration
//! that does not verify, 3 when the carrier could not be reached.

use super::{CarrierArgs, Failure, exit};
use rltp_client::FetchedDeclaration;
use rltp_proofs::constants::CONSTANT_NAMES;
use rltp_proofs::multikey::DidKey;
use std::process::ExitCode;

/// `declaration`: fetch, verify and print.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// Also require this issuer (`did:key:…`, printed by `serve` as
    /// `declaration-issuer`): the declaration key bound to `C`.
    #[arg(long)]
    issuer: Option<String>,
    /// Print the served document (JCS) instead of the summary.
    #[arg(long)]
    json: bool,
}

/// The summary lines of a verified declaration: `issuer`, `recipient`,
/// `revision`, `issued-at`, then each constant as `name lexeme`.
///
/// # Errors
/// [`Failure::transport`] if the served bytes no longer parse (they
/// were verified by the caller, so this is unreachable in practice).
pub fn summary(fetched: &FetchedDeclaration) -> Result<Vec<String>, Failure> {
    let parsed = rltp_proofs::declaration::parse_declaration(&fetched.bytes)
        .map_err(|e| Failure::transport(format!("declaration: {e}")))?;
    let mut lines = vec![
        format!("issuer {}", parsed.issuer().to_did_key()),
        format!("recipient {}", parsed.recipient().to_did_key()),
        format!("revision {}", parsed.revision()),
        format!("issued-at {}", parsed.issued_at()),
    ];
    let constants = fetched.declaration.constants();
    for name in CONSTANT_NAMES {
        if let Some(c) = constants.get(name) {
            lines.push(format!("{name} {}", c.lexeme()));
        }
    }
    Ok(lines)
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    let expected = match &args.issuer {
        Some(text) => Some(
            DidKey::parse(text)
                .map_err(|e| Failure::usage(format!("--issuer {text:?} is not a did:key: {e}")))?,
        ),
        None => None,
    };
    // With --json, standard output is the document alone; progress goes
    // to standard error.
    let mut out = super::output::Output::new("declaration", false, tokio::time::Instant::now());
    if args.json {
        out = out.on_stderr();
    }
    let mut link = args.carrier.link()?;
    let mut schedule = args.carrier.request_schedule();
    let fetched = link
        .fetch_declaration(expected.as_ref(), &mut schedule, |e| {
            out.retry("declaration", &e);
        })
        .await;
    link.close().await;
    let fetched = match fetched? {
        rltp_client::Finished::Done(fetched) => fetched,
        rltp_client::Finished::GaveUp(reason) => {
            return Err(super::gave_up("declaration", reason));
        }
    };
    if args.json {
        println!("{}", String::from_utf8_lossy(&fetched.bytes));
    } else {
        for line in summary(&fetched)? {
            println!("{line}");
        }
        println!("signature verified (eddsa-jcs-2022, key of the issuer)");
        println!("constants verified (§11 domains)");
    }
    Ok(exit::OK)
}

/// Runs `declaration`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("declaration", execute(&args).await)
}
