//! Database failover under load (`PROTOCOL.md` §13, `deploy/OPERATIONS.md`
//! §12): two carrier nodes on a Patroni-managed primary and synchronous
//! standby (`rltp_pgtest::Patroni`), both given the multi-host connection
//! string (`target_session_attrs=read-write`). Senders deposit into several
//! queues through both nodes while collectors collect and conclude through
//! both; the primary's host dies (SIGKILL) or freezes (SIGSTOP, then
//! SIGCONT) and Patroni promotes the standby — the test only waits. The
//! nodes are never restarted. Afterwards every deposit answered `admitted`
//! (or `duplicate` to a resubmission after an answer that never came or was
//! `unavailable`) is held exactly once or was concluded after an
//! acknowledged `conclude`, no deposit is held at two `seq`s, and nothing
//! else is held.
//!
//! `RLTP_TORTURE_FAILOVER_ACKS` sets how many acknowledgements each phase
//! waits for (default 150; the long form, e.g. 5000, keeps the load on for
//! minutes after each fault).

use super::harness::*;
use rltp_client::{Client, ClientError, RecipientKeys};
use rltp_pgtest::{Patroni, Role};
use rltp_proofs::proof::Purpose;
use rltp_storage::DepositId;
use rltp_wire::response::ErrorCode;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
[limits.meters]
unknown-address = { per-second = 1000000, burst = 1000000 }
held-binding = { per-second = 1000000, burst = 1000000 }
queue = { per-second = 1000000, burst = 1000000 }
shared-submission = { per-second = 1000000, burst = 1000000 }
"#;

/// The nodes' `[store.postgres] commit-timeout-ms`: a commit no standby
/// confirmed within it is answered `unavailable`. The SIGSTOP test freezes
/// the primary for longer than this.
const COMMIT_TIMEOUT: Duration = Duration::from_millis(3_000);

/// Queues the load spreads over.
const QUEUES: usize = 3;

/// How long one phase may take to collect its acknowledgements.
const PHASE_WITHIN: Duration = Duration::from_secs(60);

/// What the senders and collectors learnt.
#[derive(Default)]
struct Ledger {
    /// Every envelope sent, by id.
    sent: BTreeSet<DepositId>,
    /// Answered `admitted`, or `duplicate` after an unknown outcome.
    acked: BTreeSet<DepositId>,
    /// Answers per kind, for the report.
    answers: HashMap<&'static str, u64>,
    /// Acknowledgements per phase.
    acked_in: HashMap<Phase, u64>,
    /// Every deposit a collect served, with its queue and `seq`.
    seen: HashMap<DepositId, (usize, u64)>,
    /// Deposits an acknowledged `conclude` named.
    concluded: BTreeSet<DepositId>,
}

impl Ledger {
    /// Records that a collect served `id` at `seq` of queue `q`: the same
    /// deposit at another place is a duplicate admission.
    fn saw(&mut self, q: usize, seq: u64, id: DepositId) {
        assert!(self.sent.contains(&id), "a deposit nobody sent: {id:?}");
        let at = *self.seen.entry(id).or_insert((q, seq));
        assert_eq!(at, (q, seq), "{id:?} held twice");
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Phase {
    /// Before the fault.
    Before,
    /// From the fault until the new leader accepts writes.
    Outage,
    /// After Patroni promoted the standby.
    Promoted,
    /// After the old primary's host woke (the SIGSTOP test).
    Woken,
}

/// What an error that leaves the outcome unknown (the operation may have
/// been applied: retry it) was, for the report; `None` for any other.
fn unknown(e: &ClientError) -> Option<&'static str> {
    match e {
        ClientError::Server(e) if e.code == ErrorCode::Unavailable => Some("unavailable"),
        ClientError::Timeout(_) => Some("no answer in time"),
        ClientError::Transport(_) => Some("transport error"),
        _ => None,
    }
}

/// Shared state of one run's tasks.
#[derive(Clone)]
struct Shared {
    ledger: Arc<Mutex<Ledger>>,
    phase: Arc<Mutex<Phase>>,
    stop: Arc<AtomicBool>,
    keys: Arc<Vec<RecipientKeys>>,
}

/// Submits fresh envelopes through `client` to random queues; one whose
/// answer is unknown (transport error, timeout, `unavailable`) is
/// resubmitted until it is answered, then the next one is made. Stops
/// when told and nothing is unresolved.
async fn sender(client: Client, shared: Shared, mut rng: Rng) {
    let mut pending: Option<(usize, Vec<u8>)> = None;
    loop {
        let (q, bytes) = match pending.take() {
            Some(p) => p,
            None if shared.stop.load(Ordering::SeqCst) => return,
            None => {
                let q = rng.range(0, QUEUES as u64 - 1) as usize;
                let rkid = *shared.keys[q].rkid();
                let bytes = envelope(&rkid, rng.range(17, 900) as usize, &mut rng);
                shared
                    .ledger
                    .lock()
                    .unwrap()
                    .sent
                    .insert(DepositId::of(&bytes));
                (q, bytes)
            }
        };
        let id = DepositId::of(&bytes);
        let answer = client.submit(shared.keys[q].rkid(), &bytes).await;
        {
            let mut l = shared.ledger.lock().unwrap();
            let kind = match &answer {
                Ok(a) if a.verdict.held() => {
                    if l.acked.insert(id) {
                        *l.acked_in.entry(*shared.phase.lock().unwrap()).or_default() += 1;
                    }
                    if a.verdict == SubmitVerdict::Admitted {
                        "admitted"
                    } else {
                        "duplicate"
                    }
                }
                Ok(a) => panic!("a fresh envelope answered {}", a.verdict),
                Err(e) => unknown(e).unwrap_or_else(|| panic!("submit failed: {e}")),
            };
            *l.answers.entry(kind).or_default() += 1;
        }
        if answer.is_err() {
            pending = Some((q, bytes));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Collects queue `q` through `client` from its own cursor and, on about
/// every other page, concludes the acknowledged deposits it served
/// (retrying an unknown outcome until answered: conclude is idempotent).
/// Checks every page against the ledger. Stops when told.
async fn collector(client: Client, shared: Shared, q: usize, mut rng: Rng) {
    let keys = &shared.keys[q];
    let mut after = None;
    while !shared.stop.load(Ordering::SeqCst) {
        let page = match client.collect(keys, after, 50).await {
            Ok(page) => page,
            Err(e) if unknown(&e).is_some() => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => panic!("collect failed: {e}"),
        };
        assert_eq!(page.verdict, Verdict::Served);
        {
            let mut l = shared.ledger.lock().unwrap();
            for d in &page.deposits {
                assert!(after.is_none_or(|a| d.seq > a), "seq went back");
                l.saw(q, d.seq, d.id);
            }
            *l.answers.entry("collected page").or_default() += 1;
        }
        after = page.deposits.last().map(|d| d.seq).or(after);
        // Only acknowledged deposits: a sender still retrying one would
        // have its retry admitted anew once it was concluded (the spec's
        // s3 compares with held deposits only).
        let ids: Vec<DepositId> = {
            let l = shared.ledger.lock().unwrap();
            page.deposits
                .iter()
                .map(|d| d.id)
                .filter(|id| l.acked.contains(id))
                .collect()
        };
        if !ids.is_empty() && rng.chance(50) {
            loop {
                match client.conclude(keys, &ids).await {
                    Ok((Verdict::Served, _)) => break,
                    Ok((v, _)) => panic!("conclude answered {v}"),
                    Err(e) if unknown(&e).is_some() => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => panic!("conclude failed: {e}"),
                }
            }
            shared.ledger.lock().unwrap().concluded.extend(ids);
        }
        tokio::time::sleep(Duration::from_millis(rng.range(20, 120))).await;
    }
}

/// Two carrier nodes on `conninfo`, sharing one declaration key.
struct Nodes {
    a: Carrier,
    b: Carrier,
    _dir: tempfile::TempDir,
}

impl Nodes {
    fn start(conninfo: &str) -> Nodes {
        let config = format!(
            "{CONFIG}\n[store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{conninfo}\"\n\
             connect-timeout-ms = 2000\ncommit-timeout-ms = {}\nlock-timeout-ms = 3000\n",
            COMMIT_TIMEOUT.as_millis()
        );
        let dir = tempfile::tempdir().unwrap();
        let a_dir = dir.path().join("a");
        let a = Carrier::start_with(&Spec::new(&a_dir, &config));
        let b_dir = dir.path().join("b");
        std::fs::create_dir_all(&b_dir).unwrap();
        std::fs::copy(a_dir.join("declaration.key"), b_dir.join("declaration.key")).unwrap();
        let b = Carrier::start_with(&Spec::new(&b_dir, &config));
        Nodes { a, b, _dir: dir }
    }
}

/// A run: the queues, the tasks, what they learnt.
struct Load {
    shared: Shared,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Registers the queues through node a and starts four senders and a
    /// collector per queue, alternating between the nodes.
    async fn start(nodes: &Nodes, rng: &mut Rng) -> Load {
        let keys: Vec<RecipientKeys> = (0..QUEUES)
            .map(|_| recipient(rng.bytes32(), rng.bytes32(), 1))
            .collect();
        let client = nodes.a.connect_within(Duration::from_secs(10)).await;
        for k in &keys {
            let registered = client.register(k, Purpose::Register).await.unwrap();
            assert_eq!(registered.verdict(), Verdict::Registered);
        }
        client.close().await;
        let shared = Shared {
            ledger: Arc::new(Mutex::new(Ledger::default())),
            phase: Arc::new(Mutex::new(Phase::Before)),
            stop: Arc::new(AtomicBool::new(false)),
            keys: Arc::new(keys),
        };
        let mut tasks = Vec::new();
        for (n, node) in [&nodes.a, &nodes.b, &nodes.a, &nodes.b]
            .into_iter()
            .enumerate()
        {
            let client = node.connect_within(Duration::from_secs(10)).await;
            let rng = Rng::new(rng.next() ^ n as u64);
            tasks.push(tokio::spawn(sender(client, shared.clone(), rng)));
        }
        for q in 0..QUEUES {
            let node = if q % 2 == 0 { &nodes.b } else { &nodes.a };
            let client = node.connect_within(Duration::from_secs(10)).await;
            let rng = Rng::new(rng.next() ^ (q as u64) << 8);
            tasks.push(tokio::spawn(collector(client, shared.clone(), q, rng)));
        }
        Load { shared, tasks }
    }

    fn enter(&self, phase: Phase) {
        *self.shared.phase.lock().unwrap() = phase;
    }

    /// Waits until `count` deposits were acknowledged in the current phase.
    async fn acked_in_phase(&self, count: u64) {
        let phase = *self.shared.phase.lock().unwrap();
        let deadline = Instant::now() + PHASE_WITHIN;
        loop {
            let (got, answers) = {
                let l = self.shared.ledger.lock().unwrap();
                let got = l.acked_in.get(&phase).copied().unwrap_or(0);
                (got, format!("{:?}", l.answers))
            };
            if got >= count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{got} of {count} acknowledgements in phase {phase:?} after {PHASE_WITHIN:?}; \
                 answers {answers}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the load (every unresolved submission answered), collects
    /// every queue through node b, and checks the ledger.
    async fn finish(self, nodes: &Nodes, what: &str) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("every unresolved operation was answered")
                .unwrap();
        }
        let client = nodes.b.connect_within(Duration::from_secs(10)).await;
        let mut held = BTreeSet::new();
        for (q, keys) in self.shared.keys.iter().enumerate() {
            let mut after = None;
            loop {
                let page = client.collect(keys, after, 1_000).await.unwrap();
                assert_eq!(page.verdict, Verdict::Served);
                let mut l = self.shared.ledger.lock().unwrap();
                for d in &page.deposits {
                    l.saw(q, d.seq, d.id);
                    assert!(held.insert(d.id), "{:?} offered twice", d.id);
                }
                drop(l);
                after = page.deposits.last().map(|d| d.seq).or(after);
                if !page.more {
                    break;
                }
            }
        }
        client.close().await;
        let l = self.shared.ledger.lock().unwrap();
        let lost: Vec<_> = l
            .acked
            .iter()
            .filter(|id| !held.contains(id) && !l.concluded.contains(id))
            .collect();
        let unacknowledged: Vec<_> = held.difference(&l.acked).collect();
        let concluded_held: Vec<_> = held.intersection(&l.concluded).collect();
        println!(
            "{what}: {} acknowledged (by phase {:?}), {} concluded, {} held after; answers {:?}",
            l.acked.len(),
            l.acked_in,
            l.concluded.len(),
            held.len(),
            l.answers
        );
        assert!(lost.is_empty(), "acknowledged deposits lost: {lost:?}");
        // Every unknown outcome was resolved by a retry, so whatever is
        // held was acknowledged.
        assert!(
            unacknowledged.is_empty(),
            "held but never acknowledged: {unacknowledged:?}"
        );
        assert!(
            concluded_held.is_empty(),
            "held after an acknowledged conclude: {concluded_held:?}"
        );
        assert!(l.acked_in.get(&Phase::Before).copied().unwrap_or(0) > 0);
    }
}

/// Starts the Patroni pair, failing (never skipping) without it.
fn patroni() -> Patroni {
    tokio::task::block_in_place(Patroni::start).unwrap_or_else(|e| panic!("{e}"))
}

fn acks() -> u64 {
    knob("RLTP_TORTURE_FAILOVER_ACKS", 150)
}

/// The primary's host dies under load: Patroni promotes the synchronous
/// standby, the nodes reconnect to it by themselves, and nothing
/// acknowledged is lost or held twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_primary_is_replaced_by_patroni_and_nothing_acknowledged_is_lost() {
    let mut rng = Rng::from_env("patroni failover, SIGKILL");
    let mut pair = patroni();
    let nodes = Nodes::start(&pair.conninfo());
    let (pid_a, pid_b) = (nodes.a.pid(), nodes.b.pid());
    let load = Load::start(&nodes, &mut rng).await;
    load.acked_in_phase(acks()).await;

    load.enter(Phase::Outage);
    let old = tokio::task::block_in_place(|| pair.kill_leader()).unwrap();
    assert_eq!(old, 0, "the first host of the nodes' string died");
    let (new, took) = tokio::task::block_in_place(|| pair.wait_for_new_leader(old, PHASE_WITHIN))
        .unwrap_or_else(|e| panic!("{e}"));
    load.enter(Phase::Promoted);
    println!(
        "patroni failover, SIGKILL: {} killed, {} leads after {took:?}",
        pair.name(old),
        pair.name(new)
    );
    load.acked_in_phase(acks()).await;
    load.finish(&nodes, "patroni failover, SIGKILL").await;
    assert_eq!((nodes.a.pid(), nodes.b.pid()), (pid_a, pid_b));
    let Nodes { a, b, _dir } = nodes;
    assert!(a.terminate().success(), "node a ran through");
    assert!(b.terminate().success(), "node b ran through");
}

/// The primary's host freezes (SIGSTOP) for longer than the nodes'
/// commit timeout: Patroni promotes the standby while it is frozen and
/// the nodes admit through it while the old one is still frozen (each
/// reconnection gets past the frozen first host within the connect
/// timeout); on SIGCONT Patroni demotes the old primary, which comes back
/// as the new leader's synchronous standby and never leads again (with
/// Patroni 3.0.2's etcd3 section it took the leader key back and the
/// promoted standby's commits were rewound away: `pgtest`'s module docs).
/// Nothing acknowledged is lost or held twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_primary_is_replaced_by_patroni_and_rejoins_as_its_standby() {
    let mut rng = Rng::from_env("patroni failover, SIGSTOP");
    let mut pair = patroni();
    let nodes = Nodes::start(&pair.conninfo());
    let (pid_a, pid_b) = (nodes.a.pid(), nodes.b.pid());
    let load = Load::start(&nodes, &mut rng).await;
    load.acked_in_phase(acks()).await;

    load.enter(Phase::Outage);
    let old = tokio::task::block_in_place(|| pair.stop_leader()).unwrap();
    assert_eq!(old, 0, "the first host of the nodes' string froze");
    let stopped = Instant::now();
    let (new, took) = tokio::task::block_in_place(|| pair.wait_for_new_leader(old, PHASE_WITHIN))
        .unwrap_or_else(|e| panic!("{e}"));
    load.enter(Phase::Promoted);
    println!(
        "patroni failover, SIGSTOP: {} stopped, {} leads after {took:?}",
        pair.name(old),
        pair.name(new)
    );
    load.acked_in_phase(acks()).await;
    let frozen = stopped.elapsed();
    assert!(
        frozen > COMMIT_TIMEOUT * 2,
        "frozen for {frozen:?}, not past the commit timeout"
    );
    tokio::task::block_in_place(|| pair.cont_leader()).unwrap();
    load.enter(Phase::Woken);
    let rejoined =
        tokio::task::block_in_place(|| pair.wait_for_role(old, Role::SyncStandby, PHASE_WITHIN))
            .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "patroni failover, SIGSTOP: frozen {frozen:?}; {} back as sync standby {rejoined:?} after SIGCONT",
        pair.name(old)
    );
    assert_eq!(
        pair.leader(),
        Some(new),
        "the woken primary did not take over"
    );
    load.acked_in_phase(acks()).await;
    load.finish(&nodes, "patroni failover, SIGSTOP").await;
    assert_eq!((nodes.a.pid(), nodes.b.pid()), (pid_a, pid_b));
    let Nodes { a, b, _dir } = nodes;
    assert!(a.terminate().success(), "node a ran through");
    assert!(b.terminate().success(), "node b ran through");
}

/// The synchronous standby dies: a deposit's commit is never confirmed, so
/// the node answers `unavailable` within its `commit-timeout-ms` (never
/// `admitted`), and once the operator stops waiting for the standby the
/// resubmission meets s3 — `duplicate`, held once: PostgreSQL kept the
/// commit locally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_synchronous_standby_is_answered_unavailable_never_admitted() {
    let mut rng = Rng::from_env("standby lost");
    let primary = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let mut standby = primary.standby("s1").unwrap_or_else(|e| panic!("{e}"));
    primary.set("synchronous_standby_names", "'s1'").unwrap();
    let config = format!(
        "{CONFIG}\n[store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{}\"\n\
         commit-timeout-ms = 1000\n",
        primary.conninfo()
    );
    let dir = tempfile::tempdir().unwrap();
    let node = Carrier::start_with(&Spec::new(&dir.path().join("a"), &config));
    let client = node.connect_within(Duration::from_secs(10)).await;
    let keys = recipient(rng.bytes32(), rng.bytes32(), 1);
    let rkid = *keys.rkid();
    let registered = client.register(&keys, Purpose::Register).await.unwrap();
    assert_eq!(registered.verdict(), Verdict::Registered);
    let before = envelope(&rkid, 300, &mut rng);
    let answer = client.submit(&rkid, &before).await.unwrap();
    assert_eq!(answer.verdict, SubmitVerdict::Admitted);

    tokio::task::block_in_place(|| standby.kill()).unwrap();
    let bytes = envelope(&rkid, 300, &mut rng);
    let sent = Instant::now();
    match client.submit(&rkid, &bytes).await {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::Unavailable),
        other => panic!("a commit no standby confirmed was answered {other:?}"),
    }
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(10),
        "answered after {waited:?}"
    );

    // The operator stops waiting for the standby.
    primary.set("synchronous_standby_names", "''").unwrap();
    let again = client.submit(&rkid, &bytes).await.unwrap();
    assert_eq!(
        again.verdict,
        SubmitVerdict::Duplicate,
        "the commit was kept"
    );
    let page = client.collect(&keys, None, 10).await.unwrap();
    let ids: Vec<DepositId> = page.deposits.iter().map(|d| d.id).collect();
    assert_eq!(ids, vec![DepositId::of(&before), DepositId::of(&bytes)]);
    client.close().await;
    assert!(node.terminate().success());
}

/// A node cut from the database mid-batch (`PROTOCOL.md` §13): every
/// session of the nodes is ended by the database (`pg_terminate_backend`)
/// three times under load, whatever it was doing, a commit in flight
/// included. The nodes answer `unavailable` (never `admitted` for a commit
/// whose outcome they did not see), reconnect by themselves, take new
/// lanes, and a resubmission whose first commit had landed is answered
/// `duplicate`; nothing acknowledged is lost or held twice, and the
/// escrowed budgets still account for every byte and slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_from_the_database_mid_batch_answers_unavailable_and_loses_nothing() {
    let mut rng = Rng::from_env("nodes cut from the database");
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let nodes = Nodes::start(&cluster.conninfo());
    let load = Load::start(&nodes, &mut rng).await;
    load.acked_in_phase(acks()).await;
    load.enter(Phase::Outage);
    for _ in 0..3 {
        let ended = tokio::task::block_in_place(|| {
            cluster.psql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name LIKE 'rltp-carrier%'",
            )
        })
        .unwrap();
        assert_ne!(ended, "0", "the nodes' sessions were found");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    load.enter(Phase::Promoted);
    load.acked_in_phase(acks()).await;
    load.finish(&nodes, "nodes cut from the database").await;
    let Nodes { a, b, _dir } = nodes;
    assert!(a.terminate().success(), "node a ran through");
    assert!(b.terminate().success(), "node b ran through");
    let store = rltp_storage::postgres::PgStore::open(rltp_storage::postgres::PgOptions::new(
        cluster.conninfo(),
    ))
    .unwrap();
    assert_eq!(
        // The default `queue-floor` (these nodes' configuration sets none).
        store.audit_budgets(262_144).unwrap(),
        Some((0, 0)),
        "the escrowed budgets after the cuts"
    );
}
