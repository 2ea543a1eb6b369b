//! `rltp-carrier collect`: collect the key file's queue, open each deposit,
//! recompute its document digest, write it, and — with `--conclude` —
//! conclude exactly the deposits that reached a **terminal** outcome
//! (§5a.8).
//!
//! Each deposit runs the first stages of the §6.2 receiver order, and the
//! first failing stage names its disposition:
//!
//! | stage | check | failure (terminal) |
//! |---|---|---|
//! | 1 | envelope size (§5) | `failed(oversize)` |
//! | 2 | envelope shape, canonical base64url, own `rkid` | `failed(malformed)` |
//! | 3 | decryption (all-zero check, tag) | `failed(decryption-failed)` |
//! | 4 | strict JSON parse, JCS, document digest | `failed(malformed)` |
//!
//! A document that passes is written to `<DIR>/<digest>.json` (its JCS
//! bytes; written to a temporary file, fsync'd, renamed, directory
//! fsync'd): `written`, or `duplicate-known` when that file already holds
//! the same bytes. Both are terminal. A write that fails is **transient**
//! (`transient(…)`): never concluded, so the carrier redelivers it (§5a.8:
//! a local fault never becomes a silent loss). This command stores
//! documents; it does not run the type-specific stages 5–9, which belong
//! to the application that reads `DIR`.
//!
//! Exit status 0 when every page was `served` and no deposit was left
//! transient; 1 otherwise.

use super::keys::KeyFile;
use super::{CarrierArgs, Failure, exit};
use crate::client::{Client, Delivered, WatchEvent};
use crate::engine::verdict::Verdict;
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, ShapeError, check_shape};
use rltp_proofs::json::{self, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::{self, SealError};
use rltp_storage::DepositId;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Deposits asked for per collect page (the carrier's page bound).
pub const PAGE: u32 = 256;

/// `collect`: collect, open, write, conclude.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// The key file (`keys new`).
    #[arg(long)]
    key: PathBuf,
    /// Where documents are written, as `<digest>.json` (created if missing).
    #[arg(long, default_value = "inbox")]
    out: PathBuf,
    /// Conclude every deposit that reached a terminal outcome (§5a.8).
    #[arg(long)]
    conclude: bool,
    /// Keep the session open and handle new deposits as they arrive
    /// (one authorization session, `PROTOCOL.md` §7); ends on Ctrl-C.
    #[arg(long)]
    watch: bool,
}

/// A document that passed stages 1–4.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    /// The document.
    pub document: Value,
    /// Its JCS bytes (what is written).
    pub jcs: Vec<u8>,
    /// Its document digest (§2).
    pub digest: String,
}

/// What became of one collected deposit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Written to this file (terminal).
    Written(PathBuf),
    /// This file already held the same document (terminal).
    DuplicateKnown(PathBuf),
    /// A terminal failure disposition of §6.2 stages 1–4: `oversize`,
    /// `malformed` or `decryption-failed`.
    Failed(&'static str),
    /// A local fault (the write failed): not terminal, not concluded.
    Transient(String),
}

impl Disposition {
    /// Whether repetition cannot change it (§5a.8): everything but
    /// [`Disposition::Transient`].
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Disposition::Transient(_))
    }
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disposition::Written(p) => write!(f, "written {}", p.display()),
            Disposition::DuplicateKnown(p) => write!(f, "duplicate-known {}", p.display()),
            Disposition::Failed(reason) => write!(f, "failed({reason})"),
            Disposition::Transient(detail) => write!(f, "transient({detail})"),
        }
    }
}

/// One handled deposit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    /// The deposit id.
    pub id: DepositId,
    /// The document digest, when stage 4 was reached.
    pub digest: Option<String>,
    /// The outcome.
    pub disposition: Disposition,
}

impl fmt::Display for Handled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deposit {} digest {} {}",
            self.id.to_multibase(),
            self.digest.as_deref().unwrap_or("-"),
            self.disposition
        )
    }
}

/// §6.2 stages 1–4 over one envelope: shape (with the own `rkid`),
/// decryption with `secret`, strict parse, JCS, digest.
///
/// # Errors
/// The terminal failure reason: `oversize`, `malformed` or
/// `decryption-failed`.
pub fn open_deposit(
    envelope: &[u8],
    rkid: &Rkid,
    secret: &[u8; 32],
) -> Result<Opened, &'static str> {
    let sealed = check_shape(envelope, rkid, MAX_ENVELOPE_BYTES).map_err(|e| match e {
        ShapeError::TooLarge { .. } | ShapeError::CiphertextTooLarge { .. } => "oversize",
        _ => "malformed",
    })?;
    let plaintext = seal::open(&sealed, secret).map_err(|e| match e {
        SealError::CiphertextTooLarge { .. } => "oversize",
        SealError::CiphertextTooShort { .. } => "malformed",
        _ => "decryption-failed",
    })?;
    let document = json::parse(&plaintext).map_err(|_| "malformed")?;
    let jcs = rltp_proofs::jcs::canonicalize(&document).map_err(|_| "malformed")?;
    let digest = rltp_proofs::encoding::document_digest(&document).map_err(|_| "malformed")?;
    Ok(Opened {
        document,
        jcs,
        digest,
    })
}

/// Writes `opened` to `<dir>/<digest>.json` durably (temporary file,
/// fsync, rename, directory fsync); an existing file with the same bytes
/// is `duplicate-known`.
pub fn store(dir: &Path, opened: &Opened) -> Disposition {
    let path = dir.join(format!("{}.json", opened.digest));
    match std::fs::read(&path) {
        Ok(existing) if existing == opened.jcs => return Disposition::DuplicateKnown(path),
        Ok(_) => {
            return Disposition::Transient(format!("{} exists with other bytes", path.display()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Disposition::Transient(format!("{}: {e}", path.display())),
    }
    let temporary = dir.join(format!(
        ".{}.json.tmp-{}",
        opened.digest,
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&opened.jcs)?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)?;
        #[cfg(unix)]
        std::fs::File::open(dir)?.sync_all()?;
        Ok(())
    };
    match write() {
        Ok(()) => Disposition::Written(path),
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            Disposition::Transient(format!("writing {}: {e}", path.display()))
        }
    }
}

/// Runs stages 1–4 and the write for one delivered deposit.
pub fn handle(delivered: &Delivered, keys: &KeyFile, dir: &Path) -> Handled {
    match open_deposit(&delivered.envelope, &keys.rkid(), keys.rkid_secret()) {
        Ok(opened) => Handled {
            id: delivered.id,
            digest: Some(opened.digest.clone()),
            disposition: store(dir, &opened),
        },
        Err(reason) => Handled {
            id: delivered.id,
            digest: None,
            disposition: Disposition::Failed(reason),
        },
    }
}

/// What one collect run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Every handled deposit, in admission order.
    pub handled: Vec<Handled>,
    /// Deposits concluded (the carrier's `concluded` counts).
    pub concluded: u64,
    /// The first non-`served` verdict, if any.
    pub refused: Option<Verdict>,
}

impl Summary {
    /// Whether no deposit was left transient and nothing was refused.
    pub fn clean(&self) -> bool {
        self.refused.is_none() && self.handled.iter().all(|h| h.disposition.is_terminal())
    }
}

/// Concludes the terminal deposits among `handled` (§5a.8); returns the
/// count the carrier still held, or the refusal.
///
/// # Errors
/// Transport faults.
pub async fn conclude_terminal(
    client: &Client,
    keys: &KeyFile,
    handled: &[Handled],
) -> Result<Result<u64, Verdict>, Failure> {
    let ids: Vec<DepositId> = handled
        .iter()
        .filter(|h| h.disposition.is_terminal())
        .map(|h| h.id)
        .collect();
    if ids.is_empty() {
        return Ok(Ok(0));
    }
    let (verdict, concluded) = client.conclude(&keys.recipient_keys(), &ids).await?;
    Ok(match verdict {
        Verdict::Served => Ok(concluded.unwrap_or(0)),
        v => Err(v),
    })
}

/// Collects every page of the queue, handling each deposit into `dir`
/// and, with `conclude`, concluding each page's terminal deposits before
/// the next page; `report` sees each line as it happens.
///
/// # Errors
/// Transport faults.
pub async fn collect_all(
    client: &Client,
    keys: &KeyFile,
    dir: &Path,
    conclude: bool,
    mut report: impl FnMut(&str),
) -> Result<Summary, Failure> {
    let recipient = keys.recipient_keys();
    let mut summary = Summary::default();
    let mut after = None;
    loop {
        let page = client.collect(&recipient, after, PAGE).await?;
        report(&format!(
            "collect {} deposits {}",
            page.verdict,
            page.deposits.len()
        ));
        if page.verdict != Verdict::Served {
            summary.refused = Some(page.verdict);
            return Ok(summary);
        }
        let handled: Vec<Handled> = page.deposits.iter().map(|d| handle(d, keys, dir)).collect();
        for h in &handled {
            report(&h.to_string());
        }
        if conclude {
            match conclude_terminal(client, keys, &handled).await? {
                Ok(n) => {
                    summary.concluded += n;
                    if handled.iter().any(|h| h.disposition.is_terminal()) {
                        report(&format!("conclude served concluded {n}"));
                    }
                }
                Err(v) => {
                    report(&format!("conclude {v}"));
                    summary.refused = Some(v);
                }
            }
        }
        summary.handled.extend(handled);
        match page.deposits.last() {
            Some(last) if page.more => after = Some(last.seq),
            _ => return Ok(summary),
        }
    }
}

async fn watch(args: &Args, client: &Client, keys: &KeyFile) -> Result<Summary, Failure> {
    let mut summary = Summary::default();
    let mut session = match client.watch(&keys.recipient_keys(), None).await? {
        Ok(session) => session,
        Err(v) => {
            println!("collect {v}");
            summary.refused = Some(v);
            return Ok(summary);
        }
    };
    let mut pending: Vec<Handled> = Vec::new();
    let mut in_first_page = true;
    let stop = crate::server::shutdown_signal();
    tokio::pin!(stop);
    loop {
        let event = tokio::select! {
            _ = &mut stop => {
                println!("watch stopped");
                break;
            }
            event = session.next() => event?,
        };
        let ended = matches!(event, Some(WatchEvent::Ended(_)) | None);
        let flush = match event {
            Some(WatchEvent::Deposit(d)) => {
                let handled = handle(&d, keys, &args.out);
                println!("{handled}");
                pending.push(handled);
                !in_first_page
            }
            Some(WatchEvent::PageEnd { more }) => {
                println!("collect served deposits {} more {more}", pending.len());
                in_first_page = false;
                println!("watching");
                true
            }
            Some(WatchEvent::Ended(v)) => {
                println!("session-ended {v}");
                if v != Verdict::Served {
                    summary.refused = Some(v);
                }
                true
            }
            None => {
                println!("session-ended by the carrier");
                true
            }
        };
        if flush && args.conclude && !pending.is_empty() {
            match conclude_terminal(client, keys, &pending).await? {
                Ok(n) => {
                    summary.concluded += n;
                    println!("conclude served concluded {n}");
                }
                Err(v) => {
                    println!("conclude {v}");
                    summary.refused = Some(v);
                }
            }
        }
        if flush {
            summary.handled.append(&mut pending);
        }
        if ended {
            break;
        }
    }
    summary.handled.append(&mut pending);
    session.stop();
    Ok(summary)
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    let keys = KeyFile::load(&args.key)?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::usage(format!("--out {}: {e}", args.out.display())))?;
    println!("rkid {}", keys.rkid().to_multikey());
    println!("principal {}", keys.principal().to_did_key());
    let client = args.carrier.connect().await?;
    let summary = if args.watch {
        watch(args, &client, &keys).await
    } else {
        collect_all(&client, &keys, &args.out, args.conclude, |line| {
            println!("{line}");
        })
        .await
    };
    client.close().await;
    let summary = summary?;
    let count =
        |p: fn(&Disposition) -> bool| summary.handled.iter().filter(|h| p(&h.disposition)).count();
    println!(
        "summary collected {} written {} duplicate-known {} failed {} transient {} concluded {}",
        summary.handled.len(),
        count(|d| matches!(d, Disposition::Written(_))),
        count(|d| matches!(d, Disposition::DuplicateKnown(_))),
        count(|d| matches!(d, Disposition::Failed(_))),
        count(|d| matches!(d, Disposition::Transient(_))),
        summary.concluded
    );
    Ok(if summary.clean() {
        exit::OK
    } else {
        exit::REFUSED
    })
}

/// Runs `collect`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("collect", execute(&args).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rltp_proofs::identity::CarrierId;

    fn keys() -> KeyFile {
        KeyFile::from_parts(
            CarrierId::from_bytes(b"did:web:localhost").unwrap(),
            [1; 32],
            [2; 32],
            1,
            [3; 32],
        )
    }

    fn delivered(envelope: Vec<u8>) -> Delivered {
        Delivered {
            id: DepositId::of(&envelope),
            seq: 1,
            envelope,
        }
    }

    #[test]
    fn stages_one_to_four_name_terminal_dispositions() {
        let keys = keys();
        let dir = tempfile::tempdir().unwrap();
        let rkid = keys.rkid();
        let good = super::super::send::seal_document(b"{\"b\":1,\"a\":\"x\"}", &rkid).unwrap();
        let handled = handle(&delivered(good.envelope.clone()), &keys, dir.path());
        let path = dir.path().join(format!("{}.json", good.document_digest));
        assert_eq!(handled.disposition, Disposition::Written(path.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":\"x\",\"b\":1}");
        assert_eq!(
            handled.digest.as_deref(),
            Some(good.document_digest.as_str())
        );
        // The same document again (a fresh seal): duplicate-known.
        let again = super::super::send::seal_document(b"{\"a\":\"x\",\"b\":1}", &rkid).unwrap();
        assert_eq!(
            handle(&delivered(again.envelope), &keys, dir.path()).disposition,
            Disposition::DuplicateKnown(path)
        );
        // Sealed to someone else's key, relabelled with our rkid: stage 3.
        let other = Rkid::from_bytes(
            x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from([4u8; 32])).to_bytes(),
        );
        let mut foreign = rltp_proofs::seal::seal(b"{}", &other, &mut rand::rng()).unwrap();
        foreign.rkid = rkid;
        assert_eq!(
            handle(&delivered(foreign.to_bytes()), &keys, dir.path()).disposition,
            Disposition::Failed("decryption-failed")
        );
        // Not an envelope: stage 2. Sealed non-JSON: stage 4.
        assert_eq!(
            handle(&delivered(b"{}".to_vec()), &keys, dir.path()).disposition,
            Disposition::Failed("malformed")
        );
        let junk = rltp_proofs::seal::seal(b"not json", &rkid, &mut rand::rng()).unwrap();
        let handled = handle(&delivered(junk.to_bytes()), &keys, dir.path());
        assert_eq!(handled.disposition, Disposition::Failed("malformed"));
        assert!(handled.disposition.is_terminal());
        assert!(handled.to_string().ends_with(" digest - failed(malformed)"));
    }

    #[test]
    fn a_failed_write_is_transient_and_never_terminal() {
        let keys = keys();
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir");
        let sealed = super::super::send::seal_document(b"{\"a\":1}", &keys.rkid()).unwrap();
        let handled = handle(&delivered(sealed.envelope), &keys, &missing);
        assert!(matches!(handled.disposition, Disposition::Transient(_)));
        assert!(!handled.disposition.is_terminal());
        assert!(handled.to_string().contains(" transient(writing "));
    }
}
