//! Crash torture (issue 6): the real `serve` binary, SIGKILLed at random
//! instants under mixed load, restarted on the same data directory, and
//! checked against a journal of every verdict the clients received.
//!
//! ## Load
//! Twelve queues, each registered by its own recipient. Three sender tasks
//! submit unique envelopes (single submits and pipelined `submit-stream`
//! batches) to every queue and to unknown rkids; one recipient task
//! collects and concludes the *kept* queues and now and then rebinds one at
//! `generation + 1`, sometimes under a rotated principal. The two
//! *abandoned* queues are never collected: their orphan horizon passes,
//! they wind up, are released with a tombstone, and are registered again
//! at `t + 1` — over and over. Time passes through the test clock hook
//! (`RLTP_TEST_CLOCK_FILE`, `PROTOCOL.md` §11): between rounds, while no
//! request is in flight, the offset grows by 6–60 hours, so the declared
//! minimum horizons (orphan P7D, give-up P1D) pass within the run.
//!
//! ## Kills
//! Each round starts the carrier, verifies, lets time pass, runs the load
//! and SIGKILLs the carrier 50–1 200 ms into it. Requests in flight at the
//! kill are journalled as in flight: the carrier may or may not have
//! committed them.
//!
//! ## What is checked (every server instant is bracketed by the wall
//! clock before and after the request, plus the hook's offset)
//! After every kill, with the carrier dead, the store is opened directly:
//! - redb's integrity check and the store's counter checks pass
//!   (occupancy = Σ deposit lengths, counts, per-queue and per-segment
//!   counters, every deposit's SHA-256);
//! - the elastic occupancy equals Σ max(0, queue bytes − queue-floor);
//! - no rkid holds both a binding and a tombstone;
//! - each rkid's generation (binding or tombstone) never goes down and is
//!   at least the last acknowledged one;
//! - every deposit held is one the journal knows, held once.
//!
//! After every restart, through the client:
//! - **lost**: a deposit answered `admitted` that is not offered by
//!   `collect` (kept queues) or not `accepted` by `status` (abandoned
//!   queues) while neither its conclusion nor its give-up instant (nor the
//!   earliest possible wind-up deadline) can have passed; a held binding
//!   that stopped serving;
//! - **resurrected**: a concluded deposit offered again (also checked on
//!   every collect during the load), or a deposit offered again after it
//!   was observed gone; a binding serving after it must have been released;
//! - **duplicated effects**: a deposit offered twice, an in-flight
//!   submission that, resubmitted, is held twice or answered `admitted`
//!   although it landed (or `duplicate` although it did not), a conclusion
//!   counting more deposits than it named, an unknown deposit;
//! - a deposit still offered after its give-up instant surely passed
//!   (**late**).
//!
//! ## Many nodes (`PROTOCOL.md` §13)
//! The same run on three `serve` nodes of one carrier sharing one
//! throwaway PostgreSQL cluster: the nodes of the fresh database start at
//! once (the first declaration is decided among them), the senders and
//! the recipient use different nodes, each node is SIGKILLed at its own
//! instant while the others serve on, and the database is checked
//! directly (its own check: counters against rows, queue bytes, every
//! deposit's SHA-256 in the database; then the same journal checks) while
//! every node is down.
//!
//! `RLTP_TORTURE_KILLS` sets the number of kills (10 by default, 200 on
//! demand), `RLTP_TORTURE_NODE_KILLS` the rounds of the node run (6);
//! `RLTP_TORTURE_SEED` repeats a run.

use super::harness::*;
use rltp_client::{Client, ClientError, RecipientKeys, RegisterOutcome};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_server::service::clock::TEST_CLOCK_ENV;
use rltp_storage::log_store::LogStore;
use rltp_storage::{DepositId, ReadTxn, Store};
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const QUEUES: usize = 12;
/// Queues `0..ABANDONED` are never collected.
const ABANDONED: usize = 2;
const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;
/// `orphan-horizon` P7D.
const ORPHAN: u64 = 7 * DAY;
/// `give-up-horizon` P1D.
const GIVE_UP: u64 = DAY;
/// `queue-floor`.
const FLOOR: u64 = 65_536;
/// Slack around every bracketed server instant (ms).
const SLACK: u64 = 250;

const CONFIG: &str = r#"
[constants]
orphan-horizon = "P7D"
give-up-horizon = "P1D"
challenge-lifetime = "PT5M"
queue-floor = "65536"
max-queue-bytes = "4194304"

[limits]
sweep-interval-ms = 40
max-streams-per-connection = 512
stream-read-timeout-ms = 5000

[limits.meters]
unknown-address = { per-second = 1000000, burst = 1000000 }
held-binding = { per-second = 1000000, burst = 1000000 }
queue = { per-second = 1000000, burst = 1000000 }
shared-submission = { per-second = 1000000, burst = 1000000 }
"#;

/// A server instant known to lie in `[lo, hi]` (ms).
#[derive(Debug, Clone, Copy)]
struct Bracket {
    lo: u64,
    hi: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conclusion {
    None,
    InFlight,
    Acked,
}

#[derive(Debug)]
struct Dep {
    queue: usize,
    /// The envelope, kept while its admission is unresolved.
    bytes: Option<Vec<u8>>,
    admitted: Bracket,
    acked: bool,
    /// The earliest instant a wind-up deadline can remove it (ms).
    deadline_lo: u64,
    conclusion: Conclusion,
    /// Observed gone (concluded or given up): must never come back.
    gone: bool,
}

impl Dep {
    /// Before this instant nothing but a conclusion may remove it.
    fn removable_from(&self) -> u64 {
        (self.admitted.lo + GIVE_UP).min(self.deadline_lo)
    }
    /// From this instant its own give-up has surely passed.
    fn surely_given_up_at(&self) -> u64 {
        self.admitted.hi.saturating_add(GIVE_UP)
    }
}

struct Queue {
    secret: [u8; 32],
    rkid: Rkid,
    principal: [u8; 32],
    generation: u64,
    /// A registration whose answer never came: (principal, generation).
    pending: Option<([u8; 32], u64)>,
    /// `last_collection_at` lies in `[lc_lo, lc_hi]`.
    lc_lo: u64,
    lc_hi: u64,
    /// A collect or registration in flight (its commit may land until the kill).
    lc_in_flight: bool,
    abandoned: bool,
    /// Highest generation the store showed (binding or tombstone).
    store_generation: u64,
}

impl Queue {
    fn keys(&self) -> RecipientKeys {
        recipient(self.secret, self.principal, self.generation)
    }
    /// From this instant the binding is surely released (abandoned only).
    fn surely_released_at(&self) -> u64 {
        self.lc_hi + ORPHAN + GIVE_UP
    }
    fn deadline_lo(&self) -> u64 {
        self.lc_lo + ORPHAN + GIVE_UP
    }
}

#[derive(Debug, Default)]
struct Counts {
    kills: u64,
    acked_admissions: u64,
    presence_checks: u64,
    concluded_acked: u64,
    concluded_never_offered_checks: u64,
    adopted_in_flight: u64,
    dropped_in_flight: u64,
    resubmissions: u64,
    registrations: u64,
    releases_seen: u64,
    generation_checks: u64,
    integrity_checks: u64,
    held_at_checks: u64,
    bytes_at_checks: u64,
    lost: u64,
    resurrected: u64,
    duplicated: u64,
    late: u64,
    failures: Vec<String>,
}

struct Journal {
    queues: Vec<Queue>,
    deps: HashMap<DepositId, Dep>,
    offset: u64,
    counts: Counts,
}

impl Journal {
    fn now(&self) -> u64 {
        wall_ms() + self.offset
    }

    fn fail(&mut self, kind: &str, what: String) {
        match kind {
            "lost" => self.counts.lost += 1,
            "resurrected" => self.counts.resurrected += 1,
            "duplicated" => self.counts.duplicated += 1,
            "late" => self.counts.late += 1,
            _ => {}
        }
        eprintln!("torture FAILURE {kind}: {what}");
        self.counts.failures.push(format!("{kind}: {what}"));
    }
}

type Shared = Arc<Mutex<Journal>>;

fn lock(j: &Shared) -> MutexGuard<'_, Journal> {
    j.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write_offset(path: &Path, offset: u64) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{offset}\n")).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

// ---------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------

/// One sender: single or pipelined submissions until the carrier dies.
async fn sender(client: Client, journal: Shared, mut rng: Rng) {
    let unknown = Rkid::from_bytes(rng.bytes32());
    loop {
        let q = rng.range(0, QUEUES as u64) as usize;
        let batch = if rng.chance(30) { rng.range(2, 12) } else { 1 } as usize;
        let mut items = Vec::new();
        {
            let mut j = lock(&journal);
            let now = j.now();
            for _ in 0..batch {
                let (rkid, deadline_lo) = match j.queues.get(q) {
                    Some(queue) => (queue.rkid, queue.deadline_lo()),
                    None => (unknown, 0),
                };
                let bytes = envelope(&rkid, rng.range(17, 1_500) as usize, &mut rng);
                let id = DepositId::of(&bytes);
                if q < QUEUES {
                    j.deps.insert(
                        id,
                        Dep {
                            queue: q,
                            bytes: Some(bytes.clone()),
                            admitted: Bracket {
                                lo: now.saturating_sub(SLACK),
                                hi: u64::MAX,
                            },
                            acked: false,
                            deadline_lo,
                            conclusion: Conclusion::None,
                            gone: false,
                        },
                    );
                }
                items.push((rkid, bytes));
            }
        }
        let answers = if items.len() == 1 {
            client
                .submit(&items[0].0, &items[0].1)
                .await
                .map(|a| vec![a])
        } else {
            client.submit_many(&items).await
        };
        let Ok(answers) = answers else { return };
        let mut j = lock(&journal);
        let now = j.now() + SLACK;
        for ((rkid, bytes), answer) in items.iter().zip(answers) {
            let id = DepositId::of(bytes);
            if q == QUEUES {
                if answer.verdict != SubmitVerdict::NoSuchQueue {
                    j.fail(
                        "duplicated",
                        format!("unknown rkid {rkid} answered {}", answer.verdict),
                    );
                }
                continue;
            }
            match answer.verdict {
                SubmitVerdict::Admitted => {
                    j.counts.acked_admissions += 1;
                    if let Some(dep) = j.deps.get_mut(&id) {
                        dep.acked = true;
                        dep.bytes = None;
                        dep.admitted.hi = now;
                    }
                }
                SubmitVerdict::NoSuchQueue => {
                    j.deps.remove(&id);
                }
                other => {
                    j.deps.remove(&id);
                    j.fail("duplicated", format!("a fresh envelope answered {other}"));
                }
            }
        }
    }
}

/// The recipient: collects and concludes the kept queues, and rebinds.
async fn recipient_task(client: Client, journal: Shared, mut rng: Rng) {
    loop {
        let q = rng.range(ABANDONED as u64, QUEUES as u64 - 1) as usize;
        if rng.chance(4) {
            if rebind(&client, &journal, q, &mut rng).await.is_err() {
                return;
            }
            continue;
        }
        let Ok(ids) = collect_all(&client, &journal, q, 64, false).await else {
            return;
        };
        let chosen: Vec<DepositId> = ids.into_iter().filter(|_| rng.chance(60)).collect();
        if !chosen.is_empty() && conclude(&client, &journal, q, &chosen).await.is_err() {
            return;
        }
    }
}

/// Rebinds queue `q` at `generation + 1`, sometimes under a new principal.
async fn rebind(
    client: &Client,
    journal: &Shared,
    q: usize,
    rng: &mut Rng,
) -> Result<(), ClientError> {
    let (keys, principal, generation) = {
        let mut j = lock(journal);
        let queue = &mut j.queues[q];
        let principal = if rng.chance(50) {
            rng.bytes32()
        } else {
            queue.principal
        };
        let generation = queue.generation + 1;
        queue.pending = Some((principal, generation));
        queue.lc_in_flight = true;
        (
            recipient(queue.secret, principal, generation),
            principal,
            generation,
        )
    };
    let sent = lock(journal).now();
    let outcome = client.register(&keys, Purpose::Rebind).await?;
    let mut j = lock(journal);
    let now = j.now();
    match outcome.verdict() {
        Verdict::Rebound | Verdict::Registered => {
            j.counts.registrations += 1;
            let queue = &mut j.queues[q];
            queue.principal = principal;
            queue.generation = generation;
            queue.pending = None;
            queue.lc_in_flight = false;
            queue.lc_lo = queue.lc_lo.max(sent.saturating_sub(SLACK));
            queue.lc_hi = queue.lc_hi.max(now + SLACK);
        }
        other => {
            j.queues[q].pending = None;
            j.queues[q].lc_in_flight = false;
            j.fail(
                "duplicated",
                format!("queue {q}: rebind at {generation} answered {other}"),
            );
        }
    }
    Ok(())
}

/// Collects every page of queue `q` (pages of `limit`); checks each
/// offered deposit against the journal and returns the ids offered.
/// `verify`: adopt in-flight deposits (the carrier has just restarted).
async fn collect_all(
    client: &Client,
    journal: &Shared,
    q: usize,
    limit: u32,
    verify: bool,
) -> Result<Vec<DepositId>, ClientError> {
    let keys = {
        let mut j = lock(journal);
        j.queues[q].lc_in_flight = true;
        j.queues[q].keys()
    };
    let mut ids = Vec::new();
    let mut seen = BTreeSet::new();
    let mut after = None;
    loop {
        let sent = lock(journal).now();
        let page = client.collect(&keys, after, limit).await?;
        let mut j = lock(journal);
        let now = j.now();
        if page.verdict != Verdict::Served {
            j.queues[q].lc_in_flight = false;
            let what = format!("queue {q}: collect answered {}", page.verdict);
            j.fail("lost", what);
            return Ok(ids);
        }
        {
            let queue = &mut j.queues[q];
            queue.lc_lo = queue.lc_lo.max(sent.saturating_sub(SLACK));
            queue.lc_hi = queue.lc_hi.max(now + SLACK);
        }
        for delivered in &page.deposits {
            let id = delivered.id;
            if !seen.insert(id) {
                j.fail(
                    "duplicated",
                    format!("queue {q}: {} offered twice", id.to_multibase()),
                );
                continue;
            }
            let Some(dep) = j.deps.get(&id) else {
                j.fail(
                    "duplicated",
                    format!("queue {q}: unknown deposit {}", id.to_multibase()),
                );
                continue;
            };
            let (queue, conclusion, gone, acked, late_at) = (
                dep.queue,
                dep.conclusion,
                dep.gone,
                dep.acked,
                dep.surely_given_up_at(),
            );
            if queue != q {
                j.fail(
                    "duplicated",
                    format!("deposit of queue {queue} offered by queue {q}"),
                );
            }
            j.counts.concluded_never_offered_checks += 1;
            if conclusion == Conclusion::Acked {
                j.fail(
                    "resurrected",
                    format!("queue {q}: concluded {} offered again", id.to_multibase()),
                );
            }
            if gone {
                j.fail(
                    "resurrected",
                    format!("queue {q}: {} offered after it was gone", id.to_multibase()),
                );
            }
            if sent > late_at.saturating_add(SLACK) {
                j.fail(
                    "late",
                    format!(
                        "queue {q}: {} offered after its give-up instant",
                        id.to_multibase()
                    ),
                );
            }
            if !acked && verify {
                j.counts.adopted_in_flight += 1;
                if let Some(dep) = j.deps.get_mut(&id) {
                    dep.acked = true;
                }
            }
            ids.push(id);
        }
        after = page.deposits.last().map(|d| d.seq).or(after);
        if !page.more {
            j.queues[q].lc_in_flight = false;
            return Ok(ids);
        }
    }
}

/// Concludes `ids` of queue `q`.
async fn conclude(
    client: &Client,
    journal: &Shared,
    q: usize,
    ids: &[DepositId],
) -> Result<(), ClientError> {
    let keys = {
        let mut j = lock(journal);
        for id in ids {
            if let Some(dep) = j.deps.get_mut(id)
                && dep.conclusion != Conclusion::Acked
            {
                dep.conclusion = Conclusion::InFlight;
            }
        }
        j.queues[q].keys()
    };
    let (verdict, removed) = client.conclude(&keys, ids).await?;
    let mut j = lock(journal);
    if verdict != Verdict::Served {
        let what = format!("queue {q}: conclude answered {verdict}");
        j.fail("lost", what);
        return Ok(());
    }
    if removed.unwrap_or(0) > ids.len() as u64 {
        j.fail(
            "duplicated",
            format!("queue {q}: conclude of {} removed {removed:?}", ids.len()),
        );
    }
    for id in ids {
        if let Some(dep) = j.deps.get_mut(id) {
            dep.conclusion = Conclusion::Acked;
            dep.gone = true;
            dep.bytes = None;
        }
        j.counts.concluded_acked += 1;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------

/// Where the carrier keeps its store: the embedded one in its data dir, or
/// one PostgreSQL database its nodes share (`PROTOCOL.md` §13).
enum Deployment {
    /// One `serve` process over its embedded store.
    Embedded { spec: Spec, store_dir: PathBuf },
    /// Several `serve` processes, one carrier, on one throwaway cluster.
    Nodes {
        cluster: rltp_pgtest::Cluster,
        specs: Vec<Spec>,
    },
}

impl Deployment {
    /// Every process, started (the nodes of a fresh database at once: the
    /// first declaration is decided among them).
    fn start(&self) -> Vec<Carrier> {
        match self {
            Deployment::Embedded { spec, .. } => vec![Carrier::start_with(spec)],
            Deployment::Nodes { specs, .. } => std::thread::scope(|scope| {
                let started: Vec<_> = specs
                    .iter()
                    .map(|spec| scope.spawn(move || Carrier::start_with(spec)))
                    .collect();
                started
                    .into_iter()
                    .map(|node| node.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect()
            }),
        }
    }
}

/// With every process dead: the store, opened directly — its own checks,
/// then the rows against the journal.
fn offline_check(deployment: &Deployment, journal: &Shared) {
    match deployment {
        Deployment::Embedded { store_dir, .. } => {
            let mut store = LogStore::open(store_dir)
                .unwrap_or_else(|e| panic!("the store does not open after a kill: {e}"));
            let report = match store.integrity_check() {
                Ok(report) => report,
                Err(e) => {
                    lock(journal).fail("integrity", format!("integrity check failed: {e}"));
                    return;
                }
            };
            let mut problems = report.damaged.clone();
            problems.extend(report.quarantined.iter().cloned());
            if report.binding_and_tombstone != 0 {
                problems.push(format!(
                    "{} rkids hold a binding and a tombstone",
                    report.binding_and_tombstone
                ));
            }
            check_rows(&store, journal, (report.deposits, report.bytes), &problems);
        }
        Deployment::Nodes { cluster, .. } => {
            let options = rltp_storage::postgres::PgOptions::new(cluster.conninfo());
            let store = rltp_storage::postgres::PgStore::open(options)
                .unwrap_or_else(|e| panic!("the database does not open after the kills: {e}"));
            match store.integrity_check() {
                Ok(report) => {
                    let mut problems = report.problems.clone();
                    if report.binding_and_tombstone != 0 {
                        problems.push(format!(
                            "{} rkids hold a binding and a tombstone",
                            report.binding_and_tombstone
                        ));
                    }
                    check_rows(&store, journal, (report.deposits, report.bytes), &problems);
                }
                Err(e) => lock(journal).fail("integrity", format!("integrity check failed: {e}")),
            }
            // The escrowed budgets (PROTOCOL.md §13): after the kills every
            // byte and slot is still in the pool, a lane, or held.
            match store.audit_budgets(FLOOR) {
                Ok(Some((0, 0))) => {}
                Ok(other) => lock(journal).fail(
                    "budgets",
                    format!(
                        "the escrowed budgets after the kills: {other:?} (bytes, slots) unaccounted"
                    ),
                ),
                Err(e) => lock(journal).fail("budgets", format!("the budget audit failed: {e}")),
            }
        }
    }
}

/// The store's rows against the journal, after its own check found
/// `problems` and counted `(deposits, bytes)`.
fn check_rows<S: Store>(store: &S, journal: &Shared, counted: (u64, u64), problems: &[String]) {
    let mut j = lock(journal);
    if !problems.is_empty() {
        j.fail("integrity", format!("the store's own check: {problems:?}"));
        return;
    }
    j.counts.integrity_checks += 1;
    j.counts.held_at_checks += counted.0;
    j.counts.bytes_at_checks += counted.1;
    let read = store.read().unwrap();
    let mut elastic = 0u64;
    let mut held = 0u64;
    for q in 0..QUEUES {
        let rkid = j.queues[q].rkid;
        let binding = read.binding(&rkid).unwrap();
        let tombstone = read.tombstone(&rkid).unwrap();
        let generation = binding
            .map(|b| b.generation)
            .or(tombstone.map(|t| t.generation))
            .unwrap_or(0);
        j.counts.generation_checks += 1;
        let queue = &j.queues[q];
        let acked = queue.generation;
        let previous = queue.store_generation;
        if generation < previous || generation < acked {
            j.fail(
                "generation",
                format!(
                    "queue {q}: generation {generation} after {previous} (acknowledged {acked})"
                ),
            );
        }
        j.queues[q].store_generation = generation.max(previous);
        let deposits = read.deposits(&rkid, None, usize::MAX).unwrap();
        let mut bytes = 0u64;
        let mut ids = BTreeSet::new();
        for d in &deposits {
            bytes += u64::from(d.len);
            if !ids.insert(d.id) {
                j.fail(
                    "duplicated",
                    format!("queue {q}: {} held twice", d.id.to_multibase()),
                );
            }
            match j.deps.get(&d.id) {
                None => j.fail("duplicated", format!("queue {q}: unknown deposit held")),
                Some(dep) if dep.conclusion == Conclusion::Acked => {
                    j.fail("resurrected", format!("queue {q}: concluded deposit held"));
                }
                Some(_) => {}
            }
        }
        assert_eq!(bytes, read.queue_bytes(&rkid).unwrap());
        held += deposits.len() as u64;
        elastic += bytes.saturating_sub(FLOOR);
    }
    let occupancy = read.occupancy().unwrap();
    if occupancy.elastic_bytes != elastic || occupancy.deposits != held {
        j.fail(
            "integrity",
            format!("occupancy {occupancy:?}: elastic should be {elastic}, deposits {held}"),
        );
    }
}

/// After a restart: resolve what was in flight, check every queue.
async fn verify(client: &Client, journal: &Shared, rng: &mut Rng) {
    // Registrations whose answers never came: present them again.
    for q in 0..QUEUES {
        let pending = lock(journal).queues[q].pending;
        if let Some((principal, generation)) = pending {
            let keys = {
                let j = lock(journal);
                recipient(j.queues[q].secret, principal, generation)
            };
            let sent = lock(journal).now();
            let outcome = client.register(&keys, Purpose::Rebind).await.unwrap();
            let mut j = lock(journal);
            let now = j.now();
            match outcome {
                RegisterOutcome::Verdict(
                    Verdict::Rebound | Verdict::Registered | Verdict::RegisteredIdempotent,
                ) => {
                    let queue = &mut j.queues[q];
                    queue.principal = principal;
                    queue.generation = generation;
                    queue.lc_lo = queue.lc_lo.max(sent.saturating_sub(SLACK));
                    queue.lc_hi = queue.lc_hi.max(now + SLACK);
                }
                other => j.fail(
                    "generation",
                    format!("queue {q}: re-presented registration at {generation}: {other:?}"),
                ),
            }
            j.queues[q].pending = None;
        }
    }
    for q in 0..QUEUES {
        if lock(journal).queues[q].abandoned {
            verify_abandoned(client, journal, q).await;
        } else {
            verify_kept(client, journal, q, rng).await;
        }
    }
}

/// Marks every acknowledged deposit of `q` not in `held` gone (or lost),
/// and drops in-flight ones that did not land.
fn account(j: &mut Journal, q: usize, held: &BTreeSet<DepositId>, at: Bracket) {
    let mut lost = Vec::new();
    let mut dropped = Vec::new();
    for (id, dep) in j.deps.iter_mut().filter(|(_, d)| d.queue == q && !d.gone) {
        if held.contains(id) {
            continue;
        }
        if !dep.acked {
            dropped.push(*id);
            continue;
        }
        if dep.conclusion == Conclusion::None && at.hi < dep.removable_from() {
            lost.push(*id);
        }
        dep.gone = true;
    }
    j.counts.dropped_in_flight += dropped.len() as u64;
    for id in dropped {
        j.deps.remove(&id);
    }
    for id in lost {
        j.fail(
            "lost",
            format!(
                "queue {q}: admitted {} is gone before its horizon",
                id.to_multibase()
            ),
        );
    }
}

async fn verify_kept(client: &Client, journal: &Shared, q: usize, rng: &mut Rng) {
    let sent = lock(journal).now();
    let ids = collect_all(client, journal, q, 256, true).await.unwrap();
    let held: BTreeSet<DepositId> = ids.iter().copied().collect();
    {
        let mut j = lock(journal);
        let now = j.now();
        j.counts.presence_checks += j
            .deps
            .values()
            .filter(|d| d.queue == q && d.acked && !d.gone)
            .count() as u64;
        let at = Bracket { lo: sent, hi: now };
        account(&mut j, q, &held, at);
    }
    // Conclusions in flight at the kill: conclude again what is still held.
    let again: Vec<DepositId> = {
        let j = lock(journal);
        ids.iter()
            .copied()
            .filter(|id| {
                j.deps
                    .get(id)
                    .is_some_and(|d| d.conclusion == Conclusion::InFlight)
            })
            .collect()
    };
    if !again.is_empty() {
        conclude(client, journal, q, &again).await.unwrap();
    }
    resubmit(client, journal, q, &held, rng).await;
}

/// Resubmits some adopted in-flight envelopes (must be `duplicate`: the
/// first attempt landed) — the exactly-once half of the duplicate rule.
async fn resubmit(
    client: &Client,
    journal: &Shared,
    q: usize,
    held: &BTreeSet<DepositId>,
    rng: &mut Rng,
) {
    let again: Vec<(DepositId, Vec<u8>)> = {
        let mut j = lock(journal);
        j.deps
            .iter_mut()
            .filter(|(id, d)| d.queue == q && held.contains(id) && d.bytes.is_some())
            .filter_map(|(id, d)| d.bytes.take().map(|b| (*id, b)))
            .filter(|_| rng.chance(50))
            .collect()
    };
    let rkid = lock(journal).queues[q].rkid;
    for (_, bytes) in again {
        let answer = client.submit(&rkid, &bytes).await.unwrap();
        let mut j = lock(journal);
        j.counts.resubmissions += 1;
        if answer.verdict != SubmitVerdict::Duplicate {
            j.fail(
                "duplicated",
                format!(
                    "queue {q}: a landed submission resubmitted answered {}",
                    answer.verdict
                ),
            );
        }
    }
}

async fn verify_abandoned(client: &Client, journal: &Shared, q: usize) {
    let (rkid, released_at) = {
        let j = lock(journal);
        (j.queues[q].rkid, j.queues[q].surely_released_at())
    };
    let checked: Vec<DepositId> = {
        let j = lock(journal);
        let mut ids: Vec<DepositId> = j
            .deps
            .iter()
            .filter(|(_, d)| d.queue == q && !d.gone)
            .map(|(id, _)| *id)
            .collect();
        ids.sort();
        ids
    };
    let sent = lock(journal).now();
    let mut statuses = Vec::new();
    for id in &checked {
        statuses.push(client.status(&rkid, id).await.unwrap());
    }
    let registration = {
        let mut j = lock(journal);
        account_statuses(&mut j, q, &checked, statuses, sent, released_at)
    };
    if let Some((keys, generation)) = registration {
        let verdict = register_recorded(client, journal, q, &keys).await;
        let mut j = lock(journal);
        let queue = &mut j.queues[q];
        queue.pending = None;
        queue.generation = generation;
        if verdict != Verdict::Registered {
            j.fail(
                "resurrected",
                format!(
                    "queue {q}: after its release a registration at {generation} answered {verdict}"
                ),
            );
        }
    }
}

/// The statuses of an abandoned queue's deposits, checked and accounted;
/// returns the registration to present if the binding is surely released.
fn account_statuses(
    j: &mut Journal,
    q: usize,
    checked: &[DepositId],
    statuses: Vec<DepositStatus>,
    sent: u64,
    released_at: u64,
) -> Option<(RecipientKeys, u64)> {
    let now = j.now();
    let at = Bracket { lo: sent, hi: now };
    let mut held = BTreeSet::new();
    for (id, status) in checked.iter().zip(statuses) {
        let Some(dep) = j.deps.get(id) else { continue };
        let (acked, late_at) = (dep.acked, dep.surely_given_up_at());
        if status == DepositStatus::Accepted {
            held.insert(*id);
            if at.lo > late_at.saturating_add(SLACK) {
                j.fail(
                    "late",
                    format!(
                        "queue {q}: {} accepted after its give-up instant",
                        id.to_multibase()
                    ),
                );
            }
            if !acked {
                j.counts.adopted_in_flight += 1;
                if let Some(dep) = j.deps.get_mut(id) {
                    dep.acked = true;
                    dep.bytes = None;
                }
            }
        }
    }
    j.counts.presence_checks += checked.len() as u64;
    account(j, q, &held, at);
    if at.lo <= released_at {
        return None;
    }
    // Surely released: a fresh registration at t + 1 is an arrival.
    j.counts.releases_seen += 1;
    let queue = &mut j.queues[q];
    let generation = queue.generation + 1;
    let principal = queue.principal;
    queue.pending = Some((principal, generation));
    Some((recipient(queue.secret, principal, generation), generation))
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

fn journal(rng: &mut Rng) -> Journal {
    let queues = (0..QUEUES)
        .map(|q| {
            let secret = rng.bytes32();
            Queue {
                secret,
                rkid: *recipient(secret, [1; 32], 1).rkid(),
                principal: rng.bytes32(),
                generation: 1,
                pending: None,
                lc_lo: 0,
                lc_hi: 0,
                lc_in_flight: false,
                abandoned: q < ABANDONED,
                store_generation: 0,
            }
        })
        .collect();
    Journal {
        queues,
        deps: HashMap::new(),
        offset: 0,
        counts: Counts::default(),
    }
}

/// Registers every queue at generation 1.
async fn register_all(client: &Client, journal: &Shared) {
    for q in 0..QUEUES {
        let keys = lock(journal).queues[q].keys();
        let verdict = register_recorded(client, journal, q, &keys).await;
        assert_eq!(verdict, Verdict::Registered, "queue {q}");
    }
}

/// Presents `keys`' registration for queue `q`, counts it, and brackets
/// the queue's last collection by the round trip (a registration is a
/// collection instant for the orphan horizon).
async fn register_recorded(
    client: &Client,
    journal: &Shared,
    q: usize,
    keys: &RecipientKeys,
) -> Verdict {
    let sent = lock(journal).now();
    let verdict = client
        .register(keys, Purpose::Register)
        .await
        .unwrap()
        .verdict();
    let mut j = lock(journal);
    let now = j.now();
    j.counts.registrations += 1;
    j.queues[q].lc_lo = sent.saturating_sub(SLACK);
    j.queues[q].lc_hi = now + SLACK;
    verdict
}

/// The whole torture run, on the embedded store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_mixed_load_loses_nothing() {
    let kills: u64 = knob("RLTP_TORTURE_KILLS", 10);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let offset_file = dir.path().join("clock-offset");
    let deployment = Deployment::Embedded {
        spec: clocked(Spec::new(&data, CONFIG), &offset_file),
        store_dir: data.join("store"),
    };
    torture(&deployment, &offset_file, kills, "crash torture").await;
}

/// The torture run on three carrier nodes sharing one PostgreSQL database
/// (`PROTOCOL.md` §13): clients spread over the nodes, each node SIGKILLed
/// at its own instant (the others serve on until theirs), all restarted;
/// the database checked directly while every node is down. The nodes of
/// the fresh database start at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_nodes_on_one_database_loses_nothing() {
    let kills: u64 = knob("RLTP_TORTURE_NODE_KILLS", 6);
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let offset_file = dir.path().join("clock-offset");
    let config = format!(
        "{CONFIG}\n[store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{}\"\n",
        cluster.conninfo()
    );
    // One declaration key in every node's data dir, as an operator copies it.
    let seed = Rng::new(wall_ms()).bytes32();
    let specs = ["a", "b", "c"]
        .iter()
        .map(|name| {
            let data = dir.path().join(name);
            std::fs::create_dir_all(&data).unwrap();
            write_key(&data.join("declaration.key"), &seed);
            clocked(Spec::new(&data, &config), &offset_file)
        })
        .collect();
    let deployment = Deployment::Nodes { cluster, specs };
    torture(&deployment, &offset_file, kills, "node torture").await;
}

/// `spec` with the test clock hook reading `offset_file`.
fn clocked(mut spec: Spec, offset_file: &Path) -> Spec {
    spec.env
        .push((TEST_CLOCK_ENV.to_owned(), offset_file.display().to_string()));
    spec
}

/// A declaration key file (mode 0600).
fn write_key(path: &Path, seed: &[u8; 32]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    file.write_all(seed).unwrap();
}

/// Kills every process of `carriers`, each at its own instant within
/// `span` ms (the others serve on meanwhile).
async fn kill_each(carriers: Vec<Carrier>, rng: &mut Rng, span: u64) {
    let mut at: Vec<(u64, Carrier)> = carriers
        .into_iter()
        .map(|c| (rng.range(50, span), c))
        .collect();
    at.sort_by_key(|(ms, _)| *ms);
    let begun = Instant::now();
    for (ms, carrier) in at {
        let due = begun + Duration::from_millis(ms);
        tokio::time::sleep(due.saturating_duration_since(Instant::now())).await;
        carrier.kill();
    }
}

/// Registers, then `kills` rounds of restart, verify, time passing, load
/// and SIGKILL; a last restart, verification and graceful stop. Every
/// offline check runs with every process dead.
async fn torture(deployment: &Deployment, offset_file: &Path, kills: u64, what: &str) {
    let mut rng = Rng::from_env(what);
    write_offset(offset_file, 0);
    let journal: Shared = Arc::new(Mutex::new(journal(&mut rng)));
    let started = Instant::now();

    let carriers = deployment.start();
    let client = carriers[0].connect_within(Duration::from_secs(10)).await;
    register_all(&client, &journal).await;
    client.close().await;
    for carrier in carriers {
        carrier.kill();
    }

    for round in 0..kills {
        let carriers = deployment.start();
        let n = carriers.len();
        let first = round as usize % n;
        let client = carriers[first]
            .connect_within(Duration::from_secs(10))
            .await;
        verify(&client, &journal, &mut rng).await;
        // Time passes while nothing is in flight.
        {
            let mut j = lock(&journal);
            j.offset += rng.range(6 * HOUR, 60 * HOUR);
            write_offset(offset_file, j.offset);
        }
        let mut tasks = Vec::new();
        for s in 0..3 {
            let client = carriers[(first + 1 + s as usize) % n]
                .connect_within(Duration::from_secs(10))
                .await;
            tasks.push(tokio::spawn(sender(
                client,
                Arc::clone(&journal),
                Rng::new(rng.next() ^ s),
            )));
        }
        tasks.push(tokio::spawn(recipient_task(
            client.clone(),
            Arc::clone(&journal),
            Rng::new(rng.next()),
        )));
        kill_each(carriers, &mut rng, 1_200).await;
        let killed_at = lock(&journal).now() + SLACK;
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            if let Err(e) = task.await
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
        {
            let mut j = lock(&journal);
            j.counts.kills += 1;
            for dep in j.deps.values_mut() {
                dep.admitted.hi = dep.admitted.hi.min(killed_at);
            }
            for queue in &mut j.queues {
                if queue.lc_in_flight {
                    queue.lc_hi = queue.lc_hi.max(killed_at);
                    queue.lc_in_flight = false;
                }
            }
        }
        tokio::task::block_in_place(|| offline_check(deployment, &journal));
        let j = lock(&journal);
        println!(
            "round {round}: killed; {} acknowledged admissions so far, {} held, {} failures",
            j.counts.acked_admissions,
            j.deps.values().filter(|d| !d.gone).count(),
            j.counts.failures.len()
        );
    }

    // A last restart, a last verification, a graceful stop, a last check.
    let carriers = deployment.start();
    let client = carriers[0].connect_within(Duration::from_secs(10)).await;
    verify(&client, &journal, &mut rng).await;
    client.close().await;
    for carrier in carriers {
        assert_eq!(carrier.terminate().code(), Some(0));
    }
    tokio::task::block_in_place(|| offline_check(deployment, &journal));

    let j = lock(&journal);
    let c = &j.counts;
    println!(
        "{what}: {} kills survived in {:.1} s; checked {} acknowledged admissions ({} in-flight adopted, {} in-flight never landed, {} resubmitted → duplicate), \
         {} presence checks, {} offers checked against {} acknowledged conclusions, {} registrations ({} releases re-registered), \
         {} integrity checks ({} deposits / {} bytes held at checks), {} generation checks",
        c.kills,
        started.elapsed().as_secs_f64(),
        c.acked_admissions,
        c.adopted_in_flight,
        c.dropped_in_flight,
        c.resubmissions,
        c.presence_checks,
        c.concluded_never_offered_checks,
        c.concluded_acked,
        c.registrations,
        c.releases_seen,
        c.integrity_checks,
        c.held_at_checks,
        c.bytes_at_checks,
        c.generation_checks,
    );
    println!(
        "{what}: lost = {}, resurrected = {}, duplicated-effects = {}, late = {}",
        c.lost, c.resurrected, c.duplicated, c.late
    );
    assert!(
        c.failures.is_empty(),
        "{} failures: {:#?}",
        c.failures.len(),
        c.failures
    );
    assert!(c.kills == kills && c.integrity_checks == kills + 1);
    assert!(c.acked_admissions > 0 && c.concluded_acked > 0);
}
