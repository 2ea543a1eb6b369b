//! `rltp-carrier demo`: the whole round trip on loopback, in seconds, with
//! the shipped vectors' documents, printing each step with its verdict.
//!
//! 1. load the documents: `inputs.document` of `seal.json` (the seal
//!    sample, digest `uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ`) and
//!    the signed ack of `delivery-ack.json` (`inputs.document` with its
//!    `proof`, the `{mac}` of `output.proof`);
//! 2. start an in-process carrier on an ephemeral loopback port over a
//!    temporary embedded store ([`rltp_server::service::Server::start`]);
//! 3. make recipient keys (a 0600 key file), fetch and verify the
//!    declaration, register;
//! 4. send both documents with the retrying sender (`accepted`), check
//!    their status;
//! 5. shut the carrier down and start it again on the same data dir (same
//!    fingerprint, same declaration);
//! 6. collect, open, verify both digests, conclude;
//! 7. collect again: nothing is redelivered; the status stays `accepted`;
//! 8. two parties: a credential delivery reaches `delivered`
//!    ([`super::demo_delivered`]).
//!
//! Vectors: `--vectors DIR`, else `RLTP_SPEC_VECTORS`, else the copy
//! vendored in `vectors/spec/` and compiled into the binary (one resolver:
//! [`rltp_vectors::SpecVectors`]), so the demo needs no file beside it.
//! Exit status 0 when every step gave the expected verdict, 1 at the first
//! that did not.

use super::collect::{Collector, Concluded, Disposition, Handled};
use super::keys::KeyFile;
use super::output::{Output, n};
use super::send::{Sealed, seal_value};
use super::{Failure, exit};
use rltp_client::{Client, ConnectOptions, RetryPolicy, Sender, SenderStatus};
use rltp_proofs::json::{self, Value};
use rltp_server::config::Config;
use rltp_server::service::Server;
use rltp_server::tls::{ServerTrust, SpkiFingerprint};
use rltp_vectors::SpecVectors;
use rltp_wire::verdict::{DepositStatus, Verdict};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The document digest of `seal.json`'s sample document (its
/// `output.documentDigest`).
pub const SEAL_SAMPLE_DIGEST: &str = "uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ";

/// `demo`: the round trip on loopback.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the shipped vectors (`seal.json`, `delivery-ack.json`) from
    /// this directory instead of the copy compiled in.
    #[arg(long, env = rltp_vectors::ENV)]
    vectors: Option<PathBuf>,
    /// Print one JSON object per line (`demo`, then one `step` per step:
    /// `step`, `name`, `ok`, `detail` lines or `reason`; then `done`).
    #[arg(long)]
    json: bool,
}

fn load(vectors: &SpecVectors, name: &str) -> Result<Value, String> {
    let bytes = vectors.bytes(name)?;
    json::parse(&bytes).map_err(|e| format!("{name} from {}: {e}", vectors.describe()))
}

fn at<'a>(value: &'a Value, path: &[&str]) -> Result<&'a Value, String> {
    path.iter().try_fold(value, |v, key| {
        v.as_object()
            .and_then(|o| o.get(key))
            .ok_or_else(|| format!("member {} is missing", path.join(".")))
    })
}

/// The two demo documents: the seal sample with its expected digest, and
/// the signed delivery ack.
///
/// # Errors
/// A missing or malformed vector file, named.
pub fn documents(vectors: &SpecVectors) -> Result<[(String, Value); 2], String> {
    let seal = load(vectors, "seal.json")?;
    let sample = at(&seal, &["inputs", "document"])?.clone();
    let expected = at(&seal, &["output", "documentDigest"])?
        .as_str()
        .unwrap_or_default();
    if expected != SEAL_SAMPLE_DIGEST {
        return Err(format!(
            "seal.json output.documentDigest is {expected:?}, not {SEAL_SAMPLE_DIGEST}"
        ));
    }
    let ack = load(vectors, "delivery-ack.json")?;
    let mut document = at(&ack, &["inputs", "document"])?
        .as_object()
        .cloned()
        .ok_or("delivery-ack.json inputs.document is not an object")?;
    document.insert("proof", at(&ack, &["output", "proof"])?.clone());
    Ok([
        ("seal.json sample".to_owned(), sample),
        ("delivery-ack.json ack".to_owned(), Value::Object(document)),
    ])
}

/// Prints numbered steps; stops the demo at the first deviation.
struct Steps {
    number: usize,
    out: Output,
}

impl Steps {
    fn record(&mut self, name: &str, result: Result<Vec<String>, String>) -> Result<(), Failure> {
        self.number += 1;
        let step = self.number;
        match result {
            Ok(lines) => {
                let detail = Value::Array(lines.iter().map(|l| Value::from(l.as_str())).collect());
                self.out.emit(
                    "step",
                    &[
                        ("step", n(step as u64)),
                        ("name", name.into()),
                        ("ok", Value::Bool(true)),
                        ("detail", detail),
                    ],
                    || {
                        let mut lines = lines.iter();
                        let first = lines.next().map_or("", String::as_str);
                        let mut text = format!("step {step:>2}  {name:<26} ok  {first}");
                        for line in lines {
                            text.push_str(&format!("\n{:36}{line}", ""));
                        }
                        text
                    },
                );
                Ok(())
            }
            Err(reason) => {
                self.out.emit(
                    "step",
                    &[
                        ("step", n(step as u64)),
                        ("name", name.into()),
                        ("ok", Value::Bool(false)),
                        ("reason", reason.as_str().into()),
                    ],
                    || format!("step {step:>2}  {name:<26} FAILED  {reason}"),
                );
                Err(Failure::refused(format!(
                    "step {step} ({name}) failed: {reason}"
                )))
            }
        }
    }
}

fn config(data_dir: &Path, listen: std::net::SocketAddr) -> Result<Config, String> {
    let mut config = Config::defaults().map_err(|e| e.to_string())?;
    config.listen = listen;
    config.data_dir = data_dir.to_owned();
    Ok(config)
}

async fn connect(server: &Server) -> Result<(ConnectOptions, Client), String> {
    let options = ConnectOptions::new(
        server.local_addr().to_string(),
        ServerTrust::Pin(server.fingerprint()),
    )
    .with_timeout(Duration::from_secs(10));
    let client = Client::connect(&options).await.map_err(|e| e.to_string())?;
    Ok((options, client))
}

async fn send(
    options: &ConnectOptions,
    client: &Client,
    keys: &KeyFile,
    policy: RetryPolicy,
    document: &Value,
) -> Result<(Sealed, Vec<String>), String> {
    let sealed = seal_value(document, &keys.rkid()).map_err(|e| e.to_string())?;
    let mut sender = Sender::with_client(options.clone(), client.clone());
    let mut events = Vec::new();
    let status = sender
        .send(&keys.rkid(), &sealed.envelope, policy, |event| {
            if let rltp_client::SendEvent::Verdict(v) = event {
                events.push(v.to_string());
            }
        })
        .await
        .map_err(|e| e.to_string())?;
    match status {
        SenderStatus::Accepted { deposit } if deposit == sealed.deposit => {
            let lines = vec![
                format!("verdict {} -> status {status}", events.join(", ")),
                format!("deposit {}", deposit.to_multibase()),
                format!("digest {}", sealed.document_digest),
            ];
            Ok((sealed, lines))
        }
        other => Err(format!("status {other} (verdicts {})", events.join(", "))),
    }
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    let mut steps = Steps {
        number: 0,
        out: Output::new("demo", args.json, tokio::time::Instant::now()),
    };
    const WHAT: &str =
        "one carrier on loopback, one sender, one recipient, one restart, two parties";
    steps.out.emit("demo", &[("what", WHAT.into())], || {
        format!("rltp-carrier demo: {WHAT}")
    });
    let vectors = SpecVectors::explicit_or_env(args.vectors.clone());
    let loaded = documents(&vectors);
    let docs: Vec<(String, Value)> = loaded.clone().map(Vec::from).unwrap_or_default();
    steps.record(
        "load vectors",
        loaded.map(|d| {
            d.iter()
                .map(|(name, _)| name.clone())
                .chain([format!("from the {}", vectors.describe())])
                .collect()
        }),
    )?;

    let temp =
        tempfile::tempdir().map_err(|e| Failure::usage(format!("temporary directory: {e}")))?;
    let data_dir = temp.path().join("carrier-data");
    let any_port: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let config = config(&data_dir, any_port).map_err(Failure::usage)?;
    let server = match Server::start(&config).await {
        Ok(server) => server,
        Err(e) => {
            steps.record("start carrier", Err(e.to_string()))?;
            return Ok(exit::REFUSED);
        }
    };
    let fingerprint = server.fingerprint();
    let declaration = server.declaration();
    steps.record(
        "start carrier",
        Ok(vec![
            format!("listening {} (temporary store)", server.local_addr()),
            format!("fingerprint {fingerprint}"),
            format!("carrier {}", config.carrier.as_str()),
        ]),
    )?;

    let keys = new_keys(&mut steps, temp.path(), &config)?;
    let (options, client) = connect(&server).await.map_err(Failure::transport)?;
    let policy = declaration_and_register(&mut steps, &server, &client, &keys).await?;
    let sent = send_documents(&mut steps, &options, &client, &keys, policy, &docs).await?;

    client.close().await;
    server.shutdown().await;
    let server = restart_carrier(&mut steps, &config, fingerprint, &declaration).await?;
    let (options, client) = connect(&server).await.map_err(Failure::transport)?;

    collect_and_conclude(&mut steps, &options, &client, &keys, &sent, temp.path()).await?;
    status_after_conclusion(&mut steps, &client, &keys, &sent).await?;
    let delivered =
        super::demo_delivered::round_trip(&server, &config, &options, &client, temp.path()).await;
    steps.record("delivered", delivered)?;
    client.close().await;
    server.shutdown().await;
    let total = steps.number;
    steps.out.emit("done", &[("steps", n(total as u64))], || {
        format!("demo: all {total} steps ok")
    });
    Ok(exit::OK)
}

/// Step 3: recipient keys in a 0600 key file under `dir`, saved and loaded
/// back.
fn new_keys(steps: &mut Steps, dir: &Path, config: &Config) -> Result<KeyFile, Failure> {
    let key_path = dir.join("recipient.keys.json");
    let keys = KeyFile::generate(config.carrier.clone());
    let saved = keys
        .save(&key_path, false)
        .map_err(|f| f.message)
        .and_then(|()| KeyFile::load(&key_path).map_err(|f| f.message));
    steps.record(
        "keys new",
        saved.map(|k| {
            vec![
                format!("rkid {}", k.rkid().to_multikey()),
                format!("principal {}", k.principal().to_did_key()),
                format!("generation {} (key file mode 0600)", k.generation()),
            ]
        }),
    )?;
    Ok(keys)
}

/// Step 3: fetch and verify the declaration, then register `keys`; yields
/// the retry policy of the declared constants.
async fn declaration_and_register(
    steps: &mut Steps,
    server: &Server,
    client: &Client,
    keys: &KeyFile,
) -> Result<RetryPolicy, Failure> {
    let declared = client.declaration_from(server.declaration_issuer()).await;
    let policy = declared
        .as_ref()
        .map(|d| RetryPolicy::from_constants(d.declaration.constants()))
        .map_err(|e| e.to_string());
    steps.record(
        "declaration",
        declared.map_err(|e| e.to_string()).map(|d| {
            vec![format!(
                "revision {}, issuer {}, signature and constants verified",
                d.declaration.revision(),
                d.declaration.issuer().to_did_key()
            )]
        }),
    )?;
    let policy = policy.map_err(Failure::transport)?;

    let outcome = super::register::register(client, keys, None).await;
    steps.record(
        "register",
        match outcome {
            Ok(o) if o.verdict() == Verdict::Registered => {
                Ok(vec![format!("verdict {}", o.verdict())])
            }
            Ok(o) => Err(format!("verdict {}", o.verdict())),
            Err(f) => Err(f.message),
        },
    )?;
    Ok(policy)
}

/// Step 4: send each document with the retrying sender, then check that
/// every deposit's status is `accepted`; yields what was sent.
async fn send_documents(
    steps: &mut Steps,
    options: &ConnectOptions,
    client: &Client,
    keys: &KeyFile,
    policy: RetryPolicy,
    docs: &[(String, Value)],
) -> Result<Vec<Sealed>, Failure> {
    let mut sent = Vec::new();
    for (name, document) in docs {
        let result = send(options, client, keys, policy, document).await;
        let result = result.and_then(|(sealed, lines)| {
            if name.starts_with("seal.json") && sealed.document_digest != SEAL_SAMPLE_DIGEST {
                return Err(format!(
                    "digest {} is not {SEAL_SAMPLE_DIGEST}",
                    sealed.document_digest
                ));
            }
            sent.push(sealed);
            Ok(lines)
        });
        steps.record(&format!("send {name}"), result)?;
    }

    let mut statuses = Vec::new();
    for sealed in &sent {
        statuses.push(client.status(&keys.rkid(), &sealed.deposit).await);
    }
    steps.record(
        "status",
        if statuses
            .iter()
            .all(|s| matches!(s, Ok(DepositStatus::Accepted)))
        {
            Ok(vec![format!("accepted x{}", statuses.len())])
        } else {
            Err(format!("{statuses:?}"))
        },
    )?;
    Ok(sent)
}

/// Step 5: start the carrier again on the same data dir; the same
/// fingerprint and the same declaration, byte for byte.
async fn restart_carrier(
    steps: &mut Steps,
    config: &Config,
    fingerprint: SpkiFingerprint,
    declaration: &[u8],
) -> Result<Server, Failure> {
    let server = Server::start(config).await;
    let restarted = match &server {
        Ok(s) if s.fingerprint() == fingerprint && s.declaration().as_slice() == declaration => {
            Ok(vec![
                format!(
                    "stopped, started again on the same data dir: listening {}",
                    s.local_addr()
                ),
                "fingerprint unchanged, declaration served byte for byte as before".to_owned(),
            ])
        }
        Ok(s) if s.fingerprint() != fingerprint => {
            Err(format!("fingerprint changed to {}", s.fingerprint()))
        }
        Ok(_) => Err("the declaration changed across the restart".to_owned()),
        Err(e) => Err(e.to_string()),
    };
    steps.record("restart carrier", restarted)?;
    let server = server.map_err(|e| Failure::transport(e.to_string()))?;
    Ok(server)
}

/// Steps 6 and 7: collect and open into an inbox under `dir` with the
/// collect command's own code, verify the digests, conclude, collect again.
async fn collect_and_conclude(
    steps: &mut Steps,
    options: &ConnectOptions,
    client: &Client,
    keys: &KeyFile,
    sent: &[Sealed],
    dir: &Path,
) -> Result<(), Failure> {
    let inbox = dir.join("inbox");
    std::fs::create_dir_all(&inbox)
        .map_err(|e| Failure::usage(format!("{}: {e}", inbox.display())))?;
    // The collect command's own code, over this connection, printing nothing.
    let link = rltp_client::Link::with_client(options.clone(), client.clone());
    let mut collector = Collector::new(
        keys,
        link,
        &inbox,
        false,
        Output::quiet("demo"),
        Duration::from_secs(10),
    );
    let handled = collect_and_verify(steps, &mut collector, sent).await?;
    conclude_and_collect_again(steps, collector, &handled, sent).await
}

/// Step 6: collect and open every deposit sent; each digest matches what
/// was sent, and one is the seal sample's.
async fn collect_and_verify(
    steps: &mut Steps,
    collector: &mut Collector<'_>,
    sent: &[Sealed],
) -> Result<Vec<Handled>, Failure> {
    let collected = collector.collect_all().await.map_err(|f| f.message);
    let refused = collector.summary.refused;
    let handled = collected.clone().unwrap_or_default();
    steps.record(
        "collect + open",
        collected.and_then(|handled| {
            if refused.is_some() || handled.len() != sent.len() {
                return Err(format!(
                    "{refused:?}, {} deposits (expected {})",
                    handled.len(),
                    sent.len()
                ));
            }
            Ok(handled.iter().map(ToString::to_string).collect())
        }),
    )?;

    let verified = sent
        .iter()
        .map(|sealed| {
            let h = handled
                .iter()
                .find(|h| h.id == sealed.deposit)
                .ok_or_else(|| {
                    format!("deposit {} not collected", sealed.deposit.to_multibase())
                })?;
            match (&h.digest, &h.disposition) {
                (Some(d), Disposition::Written(_)) if *d == sealed.document_digest => {
                    Ok(format!("digest {d} matches"))
                }
                _ => Err(format!("{h} (sent digest {})", sealed.document_digest)),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|lines| {
            if handled
                .iter()
                .any(|h| h.digest.as_deref() == Some(SEAL_SAMPLE_DIGEST))
            {
                Ok(lines)
            } else {
                Err(format!(
                    "no collected document has digest {SEAL_SAMPLE_DIGEST}"
                ))
            }
        });
    steps.record("verify digests", verified)?;
    Ok(handled)
}

/// Steps 6 and 7: conclude every terminal deposit, then collect again:
/// nothing is redelivered.
async fn conclude_and_collect_again(
    steps: &mut Steps,
    mut collector: Collector<'_>,
    handled: &[Handled],
    sent: &[Sealed],
) -> Result<(), Failure> {
    let terminal: Vec<rltp_proofs::DepositId> = handled
        .iter()
        .filter(|h| h.disposition.is_terminal())
        .map(|h| h.id)
        .collect();
    let concluded = collector.conclude_ids(&terminal).await;
    steps.record(
        "conclude",
        match concluded {
            Ok(Concluded::Served(n)) if n == sent.len() as u64 => {
                Ok(vec![format!("verdict served, concluded {n}")])
            }
            Ok(Concluded::Served(n)) => Err(format!("concluded {n} of {}", sent.len())),
            Ok(Concluded::Refused(v)) => Err(format!("verdict {v}")),
            Ok(Concluded::GaveUp(r)) => Err(format!("gave up, {r}")),
            Err(f) => Err(f.message),
        },
    )?;

    let again = collector.collect_all().await;
    let refused = collector.summary.refused;
    steps.record(
        "collect again",
        match again {
            Ok(h) if refused.is_none() && h.is_empty() => Ok(vec![
                "verdict served, 0 deposits: nothing is redelivered".to_owned(),
            ]),
            Ok(h) => Err(format!("{} deposits redelivered ({refused:?})", h.len())),
            Err(f) => Err(f.message),
        },
    )?;
    drop(collector);
    Ok(())
}

/// Step 7: the status of every deposit stays `accepted` after conclusion.
async fn status_after_conclusion(
    steps: &mut Steps,
    client: &Client,
    keys: &KeyFile,
    sent: &[Sealed],
) -> Result<(), Failure> {
    let mut statuses = Vec::new();
    for sealed in sent {
        statuses.push(client.status(&keys.rkid(), &sealed.deposit).await);
    }
    steps.record(
        "status after conclusion",
        if statuses
            .iter()
            .all(|s| matches!(s, Ok(DepositStatus::Accepted)))
        {
            Ok(vec![
                "accepted (a carrier never reveals a conclusion, §5a.8)".to_owned(),
            ])
        } else {
            Err(format!("{statuses:?}"))
        },
    )?;
    Ok(())
}

/// Runs `demo`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("demo", execute(&args).await)
}
