//! A party's `collect`: the §6.2 pipeline on every collected envelope
//! ([`rltp_party`]), committed in the party store, and the acknowledgement
//! outbox deposited at the sender's carrier (Delivery §4.2, §5a.4, §5a.8,
//! §6.2; `PROTOCOL.md` §14).
//!
//! **Order at the recipient: commit → conclude → outbox.**
//! 1. Stage 9 commits the effect, the cache entry, the kept
//!    acknowledgement and its outbox item in one redb transaction
//!    ([`rltp_party_store::RedbStore`]).
//! 2. The collector concludes the terminal deposits (§5a.8) — every
//!    disposition, acknowledgements received included; a transient one
//!    (store fault, busy lock set) is not concluded and is redelivered.
//! 3. Then the outbox is deposited ([`PartyReceiver::deliver_outbox`]):
//!    each kept acknowledgement is sealed afresh to the `rkid` it is kept
//!    with and submitted, principal-free, to the carrier the counterpart's
//!    card names in its first `rltp+quic` delivery hint, with the ordinary
//!    §6.1 sender machinery; an admitted one leaves the outbox, any other
//!    outcome leaves it there for the next run.
//!
//! A crash after 1 leaves the deposit unconcluded and the acknowledgement
//! in the outbox: the next run sees the redelivered document as
//! `duplicate-known`, puts the **stored** acknowledgement back (the same
//! outbox key, so it is deposited once), concludes, and deposits it — the
//! same bytes. A `duplicate-known` in a later run re-sends the stored
//! acknowledgement byte for byte (§4.2). An acknowledgement received is
//! terminal: its stage 9 moves the sent-register status and nothing is
//! queued (§4.2 "Terminal").
//!
//! Opening the receiver drops what is older than `key-retention` (§7),
//! each cache entry together with its kept acknowledgement.
//!
//! The outbox is drained inline: a `collect --watch` handles no pushed
//! deposit while a submission to an unreachable sender carrier waits out
//! `--give-up-after` (once per carrier per drain).
//!
//! **Fault point** (tests): with `RLTP_PARTY_FAULT=after-commit` the
//! process aborts right after the first `unique` commit, before anything
//! is concluded or deposited.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rltp_client::clock::WallClock;
use rltp_client::tls::{ServerTrust, SpkiFingerprint};
use rltp_client::{ConnectOptions, Delivered, Link, RetryPolicy, Schedule, Sender, SenderStatus};
use rltp_party::bundle::NoEncounterState;
use rltp_party::hint::{DeliveryHint, Transport};
use rltp_party::keyring::KeyRing;
use rltp_party::locks::LockTable;
use rltp_party::registry::TypeRegistry;
use rltp_party::relationship::Relationship;
use rltp_party::store::{PartyStore, Retention, StoredAck};
use rltp_party::{Disposition as PartyDisposition, Outcome, Pending, Receiver};
use rltp_party_store::RedbStore;
use rltp_proofs::json::Value;
use rltp_proofs::multikey::Rkid;
use tokio::time::Instant;

use super::Failure;
use super::collect::{Disposition, Handled};
use super::output::{Output, n};
use super::party::{PartyFile, open_store};

/// The environment variable of the test fault point.
pub const FAULT_ENV: &str = "RLTP_PARTY_FAULT";

/// Where one acknowledgement is deposited.
struct Route {
    rkid: Rkid,
    hint: DeliveryHint,
    pin: [u8; 32],
}

impl Route {
    fn address(&self) -> String {
        self.hint.address()
    }
}

/// What the pipeline decided for one envelope (a terminal disposition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluated {
    /// The §6.2 disposition, as the contract spells it.
    pub disposition: PartyDisposition,
    /// The stage that decided (1–9).
    pub stage: u8,
    /// The digest of the acknowledgement this outcome (re-)sends.
    pub ack: Option<String>,
    /// For an acknowledgement received: the §6.1 transition it made.
    pub transition: Option<&'static str>,
    /// Why, for people.
    pub detail: String,
}

impl Evaluated {
    fn of(outcome: &Outcome) -> Evaluated {
        Evaluated {
            disposition: outcome.disposition,
            stage: outcome.stage.number(),
            ack: outcome.ack.as_ref().map(|a| a.digest.clone()),
            transition: outcome.transition.map(|t| t.as_str()),
            detail: outcome.detail.clone(),
        }
    }

    /// The extra members of its `deposit` line.
    pub fn fields(&self) -> Vec<(&'static str, Value)> {
        let text = |v: Option<&str>| v.map_or(Value::Null, Value::from);
        vec![
            ("stage", n(u64::from(self.stage))),
            ("ack", text(self.ack.as_deref())),
            ("transition", text(self.transition)),
        ]
    }
}

impl std::fmt::Display for Evaluated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} stage {}", self.disposition, self.stage)?;
        if let Some(ack) = &self.ack {
            write!(f, " ack {ack}")?;
        }
        if let Some(transition) = self.transition {
            write!(f, " sender-status {transition}")?;
        }
        Ok(())
    }
}

/// A party receiving: its relationship, key ring, store, lock table and
/// type registry.
pub struct PartyReceiver {
    relationship: Relationship,
    keys: KeyRing,
    store: RedbStore,
    locks: LockTable,
    registry: TypeRegistry,
    abort_after_commit: bool,
}

impl PartyReceiver {
    /// Opens the party file at `path` and its store.
    ///
    /// # Errors
    /// [`Failure::usage`] naming the file or the store.
    pub fn open(path: &Path) -> Result<PartyReceiver, Failure> {
        let party = PartyFile::load(path)?;
        let store = open_store(path)?;
        // §7 key-retention = max(P90D, the longest give-up horizon of any
        // adapter): this party's only adapter is a carrier, whose
        // give-up-horizon is at most P90D (§11), so the floor is the bound.
        // Entries older than it go (each cache entry with its kept ack).
        store
            .expire(WallClock::from_env().now_ms(), Retention::new(0))
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        Ok(PartyReceiver {
            keys: KeyRing::new(std::slice::from_ref(&party.relationship)),
            relationship: party.relationship,
            store,
            locks: LockTable::new(),
            registry: TypeRegistry::standard(),
            abort_after_commit: std::env::var(FAULT_ENV).is_ok_and(|v| v == "after-commit"),
        })
    }

    /// §6.2 stages 1–9 on one delivered envelope. A `duplicate-known`
    /// puts its stored acknowledgement back in the outbox; a store fault
    /// or a busy lock set is transient (not concluded).
    pub fn handle(&self, delivered: &Delivered) -> Handled {
        let receiver = Receiver {
            keys: &self.keys,
            store: &self.store,
            locks: &self.locks,
            registry: &self.registry,
            bundles: &NoEncounterState,
        };
        let now = WallClock::from_env().now_ms();
        let transient = |detail: String| Handled {
            id: delivered.id,
            digest: None,
            disposition: Disposition::Transient(detail),
        };
        let outcome = match receiver.receive(&delivered.envelope, now, &mut rand::rng()) {
            Ok(outcome) => outcome,
            Err(Pending::Store(e)) => return transient(e.to_string()),
            Err(Pending::Reenter(_)) => return transient("the stage-9 lock set is busy".into()),
        };
        if outcome.disposition == PartyDisposition::Unique && self.abort_after_commit {
            eprintln!("rltp-carrier collect: {FAULT_ENV}=after-commit: aborting after the commit");
            std::process::abort();
        }
        if outcome.disposition == PartyDisposition::DuplicateKnown
            && let Some(ack) = &outcome.ack
            && let Err(e) = self.store.requeue(ack)
        {
            return transient(e.to_string());
        }
        Handled {
            id: delivered.id,
            digest: outcome.digest.clone(),
            disposition: Disposition::Evaluated(Evaluated::of(&outcome)),
        }
    }

    /// Deposits every kept acknowledgement in the outbox (see the module
    /// docs), one `ack` line each; returns how many are left.
    pub async fn deliver_outbox(&self, out: &Output, give_up_after: Duration) -> usize {
        let items = match self.store.outbox() {
            Ok(items) => items,
            Err(e) => {
                out.emit("ack", &[("error", e.to_string().into())], || {
                    format!("ack outbox unreadable: {e}")
                });
                return 1;
            }
        };
        let mut left = 0;
        // A carrier that failed once in this drain is not tried again for
        // the next items (each would wait out --give-up-after).
        let mut failed: HashSet<String> = HashSet::new();
        for ack in &items {
            let result = match self.route(ack) {
                Ok(route) if failed.contains(&route.address()) => Err(format!(
                    "kept: the carrier at {} failed earlier in this run",
                    route.address()
                )),
                Ok(route) => {
                    let result = self.deliver(ack, &route, give_up_after).await;
                    if result.is_err() {
                        failed.insert(route.address());
                    }
                    result
                }
                Err(reason) => Err(reason.to_owned()),
            };
            let (status, deposit) = match &result {
                Ok(deposit) => ("admitted".to_owned(), Value::from(deposit.as_str())),
                Err(reason) => (reason.clone(), Value::Null),
            };
            if result.is_err() {
                left += 1;
            }
            out.emit(
                "ack",
                &[
                    ("ack", ack.digest.as_str().into()),
                    ("deposit", deposit.clone()),
                    ("status", status.as_str().into()),
                ],
                || {
                    format!(
                        "ack {} {status} deposit {}",
                        ack.digest,
                        deposit.as_str().unwrap_or("-")
                    )
                },
            );
        }
        left
    }

    /// Where a kept acknowledgement goes: the first pinned `rltp+quic`
    /// hint of the counterpart card whose `keyAgreement` it is kept for.
    fn route(&self, ack: &StoredAck) -> Result<Route, &'static str> {
        let rkid = ack.seal_to.ok_or("kept without an rkid to seal to")?;
        let card = self
            .relationship
            .counterpart()
            .filter(|c| c.key_agreement() == &rkid)
            .ok_or("no counterpart card names the rkid it is kept for")?;
        let (hint, pin) = card
            .hints()
            .into_iter()
            .filter(|h| h.transport == Transport::Quic)
            .find_map(|h| h.pin.map(|pin| (h, pin)))
            .ok_or("the counterpart's card names no pinned rltp+quic hint")?;
        Ok(Route { rkid, hint, pin })
    }

    /// Seals one kept acknowledgement and submits it along `route`; on
    /// `admitted` it leaves the outbox.
    async fn deliver(
        &self,
        ack: &StoredAck,
        route: &Route,
        give_up_after: Duration,
    ) -> Result<String, String> {
        let Route { rkid, hint, pin } = route;
        let sealed = super::send::seal_document(&ack.document, rkid).map_err(|e| e.to_string())?;
        rltp_client::tls::install_crypto_provider();
        let options = ConnectOptions::new(hint.address(), ServerTrust::Pin(SpkiFingerprint(*pin)));
        let mut sender = Sender::over(Link::new(options));
        let mut schedule =
            Schedule::new(Instant::now(), RetryPolicy::FALLBACK, Some(give_up_after)).learning();
        let status = sender
            .send_on(rkid, &sealed.envelope, &mut schedule, |_| {})
            .await;
        sender.close().await;
        match status.map_err(|e| e.to_string())? {
            SenderStatus::Accepted { deposit } => {
                self.store
                    .outbox_done(&ack.digest)
                    .map_err(|e| e.to_string())?;
                Ok(deposit.to_multibase())
            }
            other => Err(other.to_string()),
        }
    }
}
