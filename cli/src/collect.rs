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
//! ## Conclusions owed (`PROTOCOL.md` §10)
//! A terminal deposit is **owed** a conclusion until the carrier has
//! answered `served` for it. Each page's owed deposits are concluded
//! before the next page is asked for (`concluding …` is printed before the
//! request goes out, the answer when it comes, so a killed collector leaves
//! a trace of how far it got); a conclusion refused retriably or lost in
//! transport is retried with backoff ([`rltp_client::retry`]) and stays
//! owed if it gives up — the next conclusion request of the run carries it
//! again, and a later run concludes it when the carrier redelivers it.
//!
//! ## `--watch`: an always-on recipient (`PROTOCOL.md` §10)
//! One watch session (one authorization session, `PROTOCOL.md` §7) at a
//! time, kept up for as long as the command runs:
//! - **live:** the session is re-authorized — a fresh proof on a new
//!   `collect` with `watch` — every [`REFRESH_EVERY_MS`] (42 h, a quarter
//!   of the shortest `orphan-horizon` any carrier may declare) by the wall
//!   clock, so the binding never goes `closing` however long the recipient
//!   runs, whatever the declared horizon (pushes do not count as
//!   collection, `PROTOCOL.md` §7);
//! - **reconnecting:** when the session ends (`session-ended …`: the
//!   carrier restarted or shut down, the network went away, a retriable
//!   refusal) it opens a new one after a full-jitter backoff (`reconnecting
//!   …`), for ever; only `refused(no-such-queue)` (the binding is no longer
//!   this principal's) or Ctrl-C ends it;
//! - deposits pushed in a burst are concluded together, at most
//!   [`CONCLUDE_BATCH`] per request, once the stream has been quiet for
//!   [`CONCLUDE_QUIET_MS`]; a new session redelivers whatever is still
//!   held, and what was already handled in this run is not written again.
//!
//! ## Output
//! Progress lines, or with `--json` one object per line (with `event` and
//! `elapsedMs`): `collect` (a page: `verdict`, `deposits`, `more`),
//! `deposit` (`deposit`, `seq`, `digest`, `disposition`, `detail`),
//! `concluding` (`deposits`), `conclude` (`verdict`, `concluded`,
//! `deposits`), the retry events (`attempt`, `verdict`,
//! `transport-failure`, `status`, `backoff`), with `--watch` also
//! `watching`, `refresh`, `session-ended`, `reconnecting`, and finally
//! `summary`.
//!
//! Exit status 0 when every page was `served`, nothing was left transient,
//! nothing is still owed and (a party file) no acknowledgement stayed in
//! the outbox; 3 when a request gave up while the carrier was unreachable;
//! 1 otherwise.

use super::keys::KeyFile;
use super::output::{Output, n};
use super::{CarrierArgs, Failure, exit};
use rltp_client::clock::WallClock;
use rltp_client::{
    AwaitingReason, Backoff, Delivered, Finished, Link, RecipientKeys, Schedule, WatchEvent,
};
use rltp_proofs::DepositId;
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, ShapeError, check_shape};
use rltp_proofs::json::{self, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::{self, SealError};
use rltp_wire::verdict::Verdict;
use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tokio::time::Instant;

/// Deposits asked for per collect page (the carrier's default page,
/// `rltp_engine::EngineConfig::DEFAULT_MAX_COLLECT`: the wire's conclude
/// bound, so one conclude settles one page).
pub const PAGE: u32 = rltp_wire::MAX_CONCLUDE_IDS as u32;
/// Most deposits one conclusion request names (the wire profile's bound).
pub const CONCLUDE_BATCH: usize = rltp_wire::MAX_CONCLUDE_IDS;
/// A watch concludes what it holds once the stream has been quiet this long.
pub const CONCLUDE_QUIET_MS: u64 = 20;
/// How often `collect --watch` re-authorizes its session: 42 h, a quarter
/// of P7D, the shortest `orphan-horizon` (§11), so a binding is refreshed
/// four times within any carrier's horizon (`PROTOCOL.md` §10).
pub const REFRESH_EVERY_MS: u64 = 7 * 86_400_000 / 4;

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
    /// Keep a session open and handle new deposits as they arrive; keep the
    /// binding live and reconnect after losses; ends on Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// One JSON object per line (for scripts) instead of progress lines.
    #[arg(long)]
    json: bool,
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
    /// A party file's collect: the §6.2 pipeline's terminal disposition
    /// ([`super::receive`]).
    Evaluated(super::receive::Evaluated),
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
            Disposition::Evaluated(evaluated) => write!(f, "{evaluated}"),
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
    /// Deposits handled, by disposition.
    pub collected: u64,
    /// `written`.
    pub written: u64,
    /// `duplicate-known`.
    pub duplicate_known: u64,
    /// `failed(…)`.
    pub failed: u64,
    /// `transient(…)` (not concluded; redelivered).
    pub transient: u64,
    /// Deposits concluded (the carrier's `concluded` counts).
    pub concluded: u64,
    /// Terminal deposits still owed a conclusion at the end.
    pub owed: u64,
    /// The first non-`served`, non-retriable verdict, if any.
    pub refused: Option<Verdict>,
    /// A request gave up, in this state.
    pub gave_up: Option<AwaitingReason>,
    /// Acknowledgements left in the party's outbox by the last drain
    /// (`PROTOCOL.md` §14); kept for the next run.
    pub acks_kept: u64,
}

impl Summary {
    fn count(&mut self, handled: &Handled) {
        self.collected += 1;
        match &handled.disposition {
            Disposition::Written(_) => self.written += 1,
            Disposition::DuplicateKnown(_) => self.duplicate_known += 1,
            Disposition::Failed(_) => self.failed += 1,
            Disposition::Transient(_) => self.transient += 1,
            // `unique` is counted as written: its effect is durably recorded.
            Disposition::Evaluated(e) => match e.disposition {
                rltp_party::Disposition::Unique => self.written += 1,
                rltp_party::Disposition::DuplicateKnown => self.duplicate_known += 1,
                rltp_party::Disposition::Failed(_) => self.failed += 1,
            },
        }
    }

    /// Whether every page was served, nothing was left transient, nothing
    /// is still owed and no acknowledgement stayed in the outbox.
    pub fn clean(&self) -> bool {
        self.refused.is_none()
            && self.gave_up.is_none()
            && self.transient == 0
            && self.owed == 0
            && self.acks_kept == 0
    }

    /// The exit status: 0 clean, 3 gave up while unreachable, else 1.
    pub fn exit_status(&self) -> u8 {
        if self.clean() {
            exit::OK
        } else if self.gave_up.is_some_and(AwaitingReason::is_unreachable) {
            exit::TRANSPORT
        } else {
            exit::REFUSED
        }
    }

    fn print(&self, out: &Output) {
        out.emit(
            "summary",
            &[
                ("collected", n(self.collected)),
                ("written", n(self.written)),
                ("duplicateKnown", n(self.duplicate_known)),
                ("failed", n(self.failed)),
                ("transient", n(self.transient)),
                ("concluded", n(self.concluded)),
                ("owed", n(self.owed)),
            ],
            || {
                format!(
                    "summary collected {} written {} duplicate-known {} failed {} transient {} concluded {} owed {}",
                    self.collected,
                    self.written,
                    self.duplicate_known,
                    self.failed,
                    self.transient,
                    self.concluded,
                    self.owed
                )
            },
        );
    }
}

impl Handled {
    fn print(&self, out: &Output, seq: u64) {
        let (kind, detail) = match &self.disposition {
            Disposition::Written(p) => ("written".to_owned(), p.display().to_string()),
            Disposition::DuplicateKnown(p) => {
                ("duplicate-known".to_owned(), p.display().to_string())
            }
            Disposition::Failed(reason) => ("failed".to_owned(), (*reason).to_owned()),
            Disposition::Transient(detail) => ("transient".to_owned(), detail.clone()),
            Disposition::Evaluated(e) => (e.disposition.to_string(), e.detail.clone()),
        };
        let mut fields = vec![
            ("deposit", self.id.to_multibase().into()),
            ("seq", n(seq)),
            (
                "digest",
                self.digest.clone().map_or(Value::Null, Value::from),
            ),
            ("disposition", kind.into()),
            ("detail", detail.into()),
        ];
        if let Disposition::Evaluated(e) = &self.disposition {
            fields.extend(e.fields());
        }
        out.emit("deposit", &fields, || self.to_string());
    }
}

/// The conclusions a run owes: terminal deposits not yet answered
/// `served`, in the order they were handled, each once.
#[derive(Debug, Default)]
pub struct Owed {
    ids: Vec<DepositId>,
    set: HashSet<DepositId>,
}

impl Owed {
    /// Owes `id` (once).
    pub fn push(&mut self, id: DepositId) {
        if self.set.insert(id) {
            self.ids.push(id);
        }
    }

    /// How many are owed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing is owed.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The next request's ids: the oldest [`CONCLUDE_BATCH`].
    pub fn batch(&self) -> &[DepositId] {
        &self.ids[..self.ids.len().min(CONCLUDE_BATCH)]
    }

    /// Settles the first `count` (their conclusion was served).
    pub fn settle(&mut self, count: usize) {
        for id in self.ids.drain(..count.min(self.ids.len())) {
            self.set.remove(&id);
        }
    }
}

/// One collecting recipient: its keys, its link to the carrier, where it
/// writes, what it owes.
pub struct Collector<'a> {
    keys: &'a KeyFile,
    recipient: RecipientKeys,
    dir: &'a Path,
    conclude: bool,
    out: Output,
    link: Link,
    give_up_after: Duration,
    /// What this run has done.
    pub summary: Summary,
    owed: Owed,
    party: Option<&'a super::receive::PartyReceiver>,
}

/// How one conclusion request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concluded {
    /// `served`: the carrier still held this many of them.
    Served(u64),
    /// A final refusal (the ids stay owed).
    Refused(Verdict),
    /// Gave up in this state (the ids stay owed).
    GaveUp(AwaitingReason),
}

impl<'a> Collector<'a> {
    /// A collector for `keys` over `link`, writing into `dir`, concluding
    /// terminal deposits when `conclude`; each request gives up after
    /// `give_up_after`.
    pub fn new(
        keys: &'a KeyFile,
        link: Link,
        dir: &'a Path,
        conclude: bool,
        out: Output,
        give_up_after: Duration,
    ) -> Collector<'a> {
        Collector {
            keys,
            recipient: keys.recipient_keys(),
            dir,
            conclude,
            out,
            link,
            give_up_after,
            summary: Summary::default(),
            owed: Owed::default(),
            party: None,
        }
    }

    /// Runs the §6.2 pipeline of `party` on every deposit instead of
    /// writing documents, and deposits its acknowledgement outbox after
    /// each conclusion ([`super::receive`]: commit → conclude → outbox).
    pub fn with_party(mut self, party: &'a super::receive::PartyReceiver) -> Collector<'a> {
        self.party = Some(party);
        self
    }

    /// Deposits the party's acknowledgement outbox (after concluding).
    async fn deliver_outbox(&mut self) {
        if let Some(party) = self.party {
            let kept = party.deliver_outbox(&self.out, self.give_up_after).await;
            self.summary.acks_kept = kept as u64;
        }
    }

    /// Closes the link.
    pub async fn close(mut self) -> Summary {
        self.summary.owed = self.owed.len() as u64;
        self.link.close().await;
        self.summary
    }

    fn schedule(&self) -> Schedule {
        Schedule::for_at_most(Instant::now(), self.give_up_after)
    }

    /// Handles one delivered deposit: stages 1–4, the write, the line; a
    /// terminal one becomes owed when concluding.
    fn take(&mut self, delivered: &Delivered) -> Handled {
        let handled = match self.party {
            Some(party) => party.handle(delivered),
            None => handle(delivered, self.keys, self.dir),
        };
        handled.print(&self.out, delivered.seq);
        self.summary.count(&handled);
        if self.conclude && handled.disposition.is_terminal() {
            self.owed.push(handled.id);
        }
        handled
    }

    /// Concludes `ids` now (retried until served, refused or given up),
    /// printing `concluding` before and `conclude` after.
    ///
    /// # Errors
    /// Faults retrying cannot cure.
    pub async fn conclude_ids(&mut self, ids: &[DepositId]) -> Result<Concluded, Failure> {
        let listed: Vec<Value> = ids.iter().map(|id| id.to_multibase().into()).collect();
        self.out.emit(
            "concluding",
            &[("deposits", Value::Array(listed.clone()))],
            || format!("concluding {}", ids.len()),
        );
        let mut schedule = self.schedule();
        let out = self.out;
        let finished = self
            .link
            .conclude(&self.recipient, ids, &mut schedule, |e| {
                out.retry("conclude", &e)
            })
            .await?;
        let concluded = match finished {
            Finished::Done((Verdict::Served, count)) => Concluded::Served(count.unwrap_or(0)),
            Finished::Done((verdict, _)) => Concluded::Refused(verdict),
            Finished::GaveUp(reason) => Concluded::GaveUp(reason),
        };
        match concluded {
            Concluded::Served(count) => {
                self.summary.concluded += count;
                out.emit(
                    "conclude",
                    &[
                        ("verdict", Verdict::Served.as_str().into()),
                        ("concluded", n(count)),
                        ("deposits", Value::Array(listed)),
                    ],
                    || format!("conclude served concluded {count}"),
                );
            }
            Concluded::Refused(verdict) => {
                self.summary.refused.get_or_insert(verdict);
                out.emit(
                    "conclude",
                    &[
                        ("verdict", verdict.as_str().into()),
                        ("deposits", Value::Array(listed)),
                    ],
                    || format!("conclude {verdict}"),
                );
            }
            Concluded::GaveUp(reason) => {
                self.summary.gave_up = Some(reason);
                out.emit(
                    "conclude",
                    &[
                        ("verdict", Value::Null),
                        ("gaveUp", reason.to_string().into()),
                        ("deposits", Value::Array(listed)),
                    ],
                    || format!("conclude gave-up {reason}"),
                );
            }
        }
        Ok(concluded)
    }

    /// Concludes everything owed, a batch at a time; stops at the first
    /// batch that is not served (it stays owed). Returns that outcome.
    ///
    /// # Errors
    /// Faults retrying cannot cure.
    pub async fn conclude_owed(&mut self) -> Result<Concluded, Failure> {
        let mut last = Concluded::Served(0);
        while !self.owed.is_empty() {
            let batch = self.owed.batch().to_vec();
            last = self.conclude_ids(&batch).await?;
            match last {
                Concluded::Served(_) => self.owed.settle(batch.len()),
                _ => break,
            }
        }
        Ok(last)
    }

    /// Collects every page once (handling each deposit and, when
    /// concluding, concluding what each page leaves owed before asking for
    /// the next); returns every deposit handled.
    ///
    /// # Errors
    /// Faults retrying cannot cure.
    pub async fn collect_all(&mut self) -> Result<Vec<Handled>, Failure> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let mut schedule = self.schedule();
            let out = self.out;
            let page = self
                .link
                .collect(&self.recipient, after, PAGE, &mut schedule, |e| {
                    out.retry("collect", &e);
                })
                .await?;
            let page = match page {
                Finished::Done(page) => page,
                Finished::GaveUp(reason) => {
                    self.summary.gave_up = Some(reason);
                    out.emit(
                        "collect",
                        &[
                            ("verdict", Value::Null),
                            ("gaveUp", reason.to_string().into()),
                        ],
                        || format!("collect gave-up {reason}"),
                    );
                    return Ok(all);
                }
            };
            out.emit(
                "collect",
                &[
                    ("verdict", page.verdict.as_str().into()),
                    ("deposits", n(page.deposits.len() as u64)),
                    ("more", Value::Bool(page.more)),
                ],
                || format!("collect {} deposits {}", page.verdict, page.deposits.len()),
            );
            if page.verdict != Verdict::Served {
                self.summary.refused.get_or_insert(page.verdict);
                return Ok(all);
            }
            for delivered in &page.deposits {
                all.push(self.take(delivered));
            }
            if self.conclude && !matches!(self.conclude_owed().await?, Concluded::Served(_)) {
                return Ok(all);
            }
            self.deliver_outbox().await;
            match page.deposits.last() {
                Some(last) if page.more => after = Some(last.seq),
                _ => return Ok(all),
            }
        }
    }

    /// `--watch`: see the module docs. Runs until `stop` resolves or the
    /// binding is no longer this principal's.
    ///
    /// # Errors
    /// Faults retrying cannot cure.
    pub async fn watch(
        &mut self,
        clock: &WallClock,
        stop: impl Future<Output = ()>,
    ) -> Result<(), Failure> {
        tokio::pin!(stop);
        let out = self.out;
        let mut backoff = Backoff::new();
        // Terminal deposits handled in this run and still held: a new
        // session redelivers them; they are not handled twice.
        let mut known: HashSet<DepositId> = HashSet::new();
        let mut reconnects = 0u32;
        loop {
            // Open a session: retried for as long as it takes.
            let mut schedule = Schedule::for_at_most(Instant::now(), FOREVER);
            let opened = tokio::select! {
                () = &mut stop => None,
                opened = self.link.watch(&self.recipient, None, &mut schedule, |e| out.retry("watch", &e)) => Some(opened?),
            };
            let Some(opened) = opened else {
                return self.stopped().await;
            };
            let session = match opened {
                Finished::Done(Ok(session)) => session,
                Finished::Done(Err(verdict)) => {
                    self.summary.refused.get_or_insert(verdict);
                    out.emit("collect", &[("verdict", verdict.as_str().into())], || {
                        format!("collect {verdict}")
                    });
                    return Ok(());
                }
                Finished::GaveUp(reason) => {
                    self.summary.gave_up = Some(reason);
                    return Ok(());
                }
            };
            let authorized_at = clock.now_ms();
            let refresh_at = authorized_at.saturating_add(REFRESH_EVERY_MS);
            let (events, reader) = spawn_reader(session);
            let ended = self
                .session(events, clock, refresh_at, &mut known, &mut stop)
                .await;
            reader.abort();
            let ended = ended?;
            match ended {
                SessionEnd::Stopped => return self.stopped().await,
                SessionEnd::Gone(verdict) => {
                    self.summary.refused.get_or_insert(verdict);
                    return Ok(());
                }
                SessionEnd::Refresh => {
                    backoff.reset();
                    reconnects = 0;
                    out.emit("refresh", &[("clockMs", n(clock.now_ms()))], || {
                        format!("refresh clock {}", clock.now_ms())
                    });
                }
                SessionEnd::Lost { served } => {
                    // A fresh connection for the next session: the carrier
                    // may have closed this one (shutdown) or lost it.
                    self.link.forget();
                    if served {
                        backoff.reset();
                        reconnects = 0;
                    }
                    reconnects = reconnects.saturating_add(1);
                    let delay = backoff.next_delay(&mut rand::rng());
                    out.emit(
                        "reconnecting",
                        &[
                            ("attempt", n(u64::from(reconnects))),
                            ("ms", n(super::output::ms(delay))),
                        ],
                        || {
                            format!(
                                "reconnecting attempt {reconnects} in {} ms",
                                super::output::ms(delay)
                            )
                        },
                    );
                    tokio::select! {
                        () = &mut stop => return self.stopped().await,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// One open session until it ends, is refreshed or is stopped.
    async fn session(
        &mut self,
        mut events: tokio::sync::mpsc::Receiver<Result<Option<WatchEvent>, String>>,
        clock: &WallClock,
        refresh_at: u64,
        known: &mut HashSet<DepositId>,
        stop: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<SessionEnd, Failure> {
        let out = self.out;
        // What earlier sessions handled: this one redelivers whatever of it
        // is still held, and only that stays known (so `known` never holds
        // more than the queue does).
        let mut previous = std::mem::take(known);
        let mut served = false;
        let mut page = 0u64;
        let mut in_first_page = true;
        let mut flush_at: Option<Instant> = None;
        let poll = clock.poll_interval();
        loop {
            let due = flush_at;
            let flush = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = stop.as_mut() => return Ok(SessionEnd::Stopped),
                // Before new events, so a full batch is concluded even
                // while pushes keep coming.
                () = flush => {
                    flush_at = None;
                    if self.conclude && !self.owed.is_empty() {
                        let batch = self.owed.batch().to_vec();
                        match self.conclude_ids(&batch).await? {
                            Concluded::Served(_) => {
                                self.owed.settle(batch.len());
                                for id in &batch {
                                    known.remove(id);
                                }
                                if !self.owed.is_empty() {
                                    flush_at = Some(Instant::now());
                                }
                            }
                            Concluded::Refused(verdict) => return Ok(SessionEnd::Gone(verdict)),
                            // Still owed; the watch itself does not give
                            // up: a new session redelivers them.
                            Concluded::GaveUp(_) => {
                                self.summary.gave_up = None;
                                return Ok(SessionEnd::Lost { served });
                            }
                        }
                    }
                    // Commit → conclude → outbox (`receive`).
                    if self.owed.is_empty() {
                        self.deliver_outbox().await;
                    }
                }
                event = events.recv() => match event {
                    Some(Ok(Some(WatchEvent::Deposit(delivered)))) => {
                        page += 1;
                        self.watched_deposit(&delivered, &mut previous, known);
                        if self.owed.len() >= CONCLUDE_BATCH {
                            flush_at = Some(Instant::now());
                        } else if !in_first_page {
                            flush_at = Some(Instant::now() + Duration::from_millis(CONCLUDE_QUIET_MS));
                        }
                    }
                    Some(Ok(Some(WatchEvent::PageEnd { more }))) => {
                        served = true;
                        in_first_page = false;
                        emit_watch_page(out, page, more, clock, refresh_at);
                        flush_at = Some(Instant::now());
                    }
                    Some(Ok(Some(WatchEvent::Ended(verdict)))) => {
                        out.emit("session-ended", &[("verdict", verdict.as_str().into())], || {
                            format!("session-ended {verdict}")
                        });
                        if verdict.retriable() {
                            return Ok(SessionEnd::Lost { served });
                        }
                        return Ok(SessionEnd::Gone(verdict));
                    }
                    Some(Ok(None)) | None => {
                        out.emit("session-ended", &[("verdict", Value::Null), ("by", "carrier".into())], || {
                            "session-ended by-the-carrier".to_owned()
                        });
                        return Ok(SessionEnd::Lost { served });
                    }
                    Some(Err(detail)) => {
                        out.emit("session-ended", &[("verdict", Value::Null), ("detail", detail.clone().into())], || {
                            format!("session-ended transport {detail}")
                        });
                        return Ok(SessionEnd::Lost { served });
                    }
                },
                () = tokio::time::sleep(poll) => {
                    if clock.now_ms() >= refresh_at {
                        return Ok(SessionEnd::Refresh);
                    }
                }
            }
        }
    }

    /// One deposit pushed in a watch session: one an earlier session
    /// handled (in `previous`) stays known and owed again when concluding;
    /// a new one is taken, and known once terminal.
    fn watched_deposit(
        &mut self,
        delivered: &Delivered,
        previous: &mut HashSet<DepositId>,
        known: &mut HashSet<DepositId>,
    ) {
        if previous.remove(&delivered.id) {
            known.insert(delivered.id);
            if self.conclude {
                self.owed.push(delivered.id);
            }
        } else {
            let handled = self.take(delivered);
            if handled.disposition.is_terminal() {
                known.insert(handled.id);
            }
        }
    }

    /// Ctrl-C: one last attempt at what is owed, then stop.
    /// Ctrl-C: one last attempt, of at most [`LAST_ATTEMPT`], at what is
    /// owed, then stop (what is left is redelivered to the next run).
    async fn stopped(&mut self) -> Result<(), Failure> {
        self.out
            .emit("watch-stopped", &[], || "watch stopped".to_owned());
        if self.conclude && !self.owed.is_empty() {
            self.give_up_after = self.give_up_after.min(LAST_ATTEMPT);
            self.conclude_owed().await?;
        }
        Ok(())
    }
}

/// The end of a watch session's page of `page` deposits: the `collect`
/// line, then `watching` until `refresh_at`.
fn emit_watch_page(out: Output, page: u64, more: bool, clock: &WallClock, refresh_at: u64) {
    out.emit(
        "collect",
        &[
            ("verdict", Verdict::Served.as_str().into()),
            ("deposits", n(page)),
            ("more", Value::Bool(more)),
            ("watch", Value::Bool(true)),
        ],
        || format!("collect served deposits {page} more {more}"),
    );
    out.emit(
        "watching",
        &[
            ("clockMs", n(clock.now_ms())),
            ("refreshAtMs", n(refresh_at)),
        ],
        || format!("watching refresh-at {refresh_at}"),
    );
}

/// How long a stopped watch keeps trying to conclude what it owes.
const LAST_ATTEMPT: Duration = Duration::from_secs(5);

/// "Never" for a watch's own retries: ten years.
const FOREVER: Duration = Duration::from_secs(10 * 365 * 86_400);

/// How a watch session ended.
enum SessionEnd {
    /// Ctrl-C.
    Stopped,
    /// Time to re-authorize.
    Refresh,
    /// The binding is no longer this principal's (or another final refusal).
    Gone(Verdict),
    /// The carrier went away or refused retriably; `served` if the session
    /// had been open.
    Lost { served: bool },
}

/// Reads the session's frames in a task of their own (a frame read must
/// never be cancelled half-way), handing each event over a channel; an
/// error ends the reader.
fn spawn_reader(
    mut session: rltp_client::Watch,
) -> (
    tokio::sync::mpsc::Receiver<Result<Option<WatchEvent>, String>>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(CONCLUDE_BATCH);
    let task = tokio::spawn(async move {
        loop {
            let event = session.next().await.map_err(|e| e.to_string());
            let last = !matches!(
                event,
                Ok(Some(WatchEvent::Deposit(_) | WatchEvent::PageEnd { .. }))
            );
            if tx.send(event).await.is_err() || last {
                break;
            }
        }
        session.stop();
    });
    (rx, task)
}

async fn execute(args: &Args, started: Instant) -> Result<u8, Failure> {
    let out = Output::new("collect", args.json, started);
    let keys = KeyFile::load(&args.key)?;
    let party = if super::party::is_party_file(&super::read_file(&args.key)?) {
        Some(super::receive::PartyReceiver::open(&args.key)?)
    } else {
        None
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::usage(format!("--out {}: {e}", args.out.display())))?;
    out.emit(
        "recipient",
        &[
            ("rkid", keys.rkid().to_multikey().into()),
            ("principal", keys.principal().to_did_key().into()),
        ],
        || {
            format!(
                "rkid {}\nprincipal {}",
                keys.rkid().to_multikey(),
                keys.principal().to_did_key()
            )
        },
    );
    let link = args.carrier.link()?;
    let give_up_after = args
        .carrier
        .give_up_after
        .unwrap_or(super::DEFAULT_GIVE_UP_AFTER);
    let mut collector = Collector::new(&keys, link, &args.out, args.conclude, out, give_up_after);
    if let Some(party) = &party {
        collector = collector.with_party(party);
    }
    let result = if args.watch {
        let clock = WallClock::from_env();
        collector
            .watch(&clock, rltp_server::service::shutdown_signal())
            .await
    } else {
        collector.collect_all().await.map(drop)
    };
    let summary = collector.close().await;
    result?;
    summary.print(&out);
    Ok(summary.exit_status())
}

/// Runs `collect`.
pub async fn run(args: Args) -> ExitCode {
    let started = Instant::now();
    super::finish("collect", execute(&args, started).await)
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
        let mut foreign = seal::seal(b"{}", &other, &mut rand::rng()).unwrap();
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
        let junk = seal::seal(b"not json", &rkid, &mut rand::rng()).unwrap();
        let handled = handle(&delivered(junk.to_bytes()), &keys, dir.path());
        assert_eq!(handled.disposition, Disposition::Failed("malformed"));
        assert!(handled.disposition.is_terminal());
        assert!(handled.to_string().ends_with(" digest - failed(malformed)"));
    }

    #[test]
    fn owed_conclusions_are_kept_once_in_order_and_settled_in_batches() {
        let ids: Vec<DepositId> = (0..300u32)
            .map(|i| DepositId::of(&i.to_be_bytes()))
            .collect();
        let mut owed = Owed::default();
        for id in ids.iter().chain(&ids[..10]) {
            owed.push(*id);
        }
        assert_eq!(owed.len(), 300, "each once");
        assert_eq!(owed.batch(), &ids[..CONCLUDE_BATCH]);
        owed.settle(CONCLUDE_BATCH);
        assert_eq!(owed.batch(), &ids[CONCLUDE_BATCH..]);
        owed.push(ids[0]);
        assert_eq!(owed.len(), 45, "a settled id can be owed again");
        owed.settle(1_000);
        assert!(owed.is_empty());
    }

    #[test]
    fn exit_statuses_follow_the_summary() {
        let clean = Summary::default();
        assert_eq!(clean.exit_status(), exit::OK);
        let owed = Summary {
            owed: 1,
            ..Summary::default()
        };
        assert_eq!(owed.exit_status(), exit::REFUSED);
        let unreachable = Summary {
            gave_up: Some(AwaitingReason::TransportUnreachable),
            ..Summary::default()
        };
        assert_eq!(unreachable.exit_status(), exit::TRANSPORT);
        let refused_retriably = Summary {
            gave_up: Some(AwaitingReason::CarrierRefusedRetriable),
            ..Summary::default()
        };
        assert_eq!(refused_retriably.exit_status(), exit::REFUSED);
        // Four refreshes fit in the shortest orphan-horizon (§11: P7D).
        assert_eq!(REFRESH_EVERY_MS * 4, 7 * 86_400_000);
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
