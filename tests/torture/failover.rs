//! A database failover under load (`PROTOCOL.md` §13): two carrier nodes
//! on a primary with a synchronous standby, both configured with both
//! hosts (`target_session_attrs=read-write`). Senders submit through both
//! nodes while the primary is SIGKILLed and the standby promoted; the
//! nodes are not restarted. Every deposit answered `admitted` (or
//! `duplicate` to a resubmission after an answer that never came or was
//! `unavailable`) is collected once afterwards, and nothing else is.

use super::harness::*;
use rltp_client::{Client, ClientError};
use rltp_proofs::multikey::Rkid;
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

/// What the senders learnt.
#[derive(Default)]
struct Ledger {
    /// Every envelope sent, by id.
    sent: BTreeSet<DepositId>,
    /// Answered `admitted`, or `duplicate` after an unknown outcome.
    acked: BTreeSet<DepositId>,
    /// Answers per kind, for the report.
    answers: HashMap<&'static str, u64>,
    /// Acknowledgements before the kill and after the promotion.
    acked_before_kill: u64,
    acked_after_promotion: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Before,
    Outage,
    After,
}

/// Submits fresh envelopes through `client`; one whose answer is unknown
/// (transport error, timeout, `unavailable`) is resubmitted until it is
/// answered, then the next one is made. Stops when `stop` is set and
/// nothing is unresolved.
async fn sender(
    client: Client,
    rkid: Rkid,
    ledger: Arc<Mutex<Ledger>>,
    phase: Arc<Mutex<Phase>>,
    stop: Arc<AtomicBool>,
    mut rng: Rng,
) {
    let mut pending: Option<Vec<u8>> = None;
    loop {
        let bytes = match pending.take() {
            Some(bytes) => bytes,
            None if stop.load(Ordering::SeqCst) => return,
            None => {
                let bytes = envelope(&rkid, rng.range(17, 900) as usize, &mut rng);
                ledger.lock().unwrap().sent.insert(DepositId::of(&bytes));
                bytes
            }
        };
        let id = DepositId::of(&bytes);
        let answer = client.submit(&rkid, &bytes).await;
        let unknown = match &answer {
            Ok(_) => false,
            Err(ClientError::Server(e)) => e.code == ErrorCode::Unavailable,
            Err(ClientError::Timeout(_) | ClientError::Transport(_)) => true,
            Err(_) => false,
        };
        {
            let mut l = ledger.lock().unwrap();
            let kind = match answer {
                Ok(a) if a.verdict.held() => {
                    if l.acked.insert(id) {
                        match *phase.lock().unwrap() {
                            Phase::Before => l.acked_before_kill += 1,
                            Phase::After => l.acked_after_promotion += 1,
                            Phase::Outage => {}
                        }
                    }
                    if a.verdict == SubmitVerdict::Admitted {
                        "admitted"
                    } else {
                        "duplicate"
                    }
                }
                Ok(a) => panic!("a fresh envelope answered {}", a.verdict),
                Err(_) if unknown => "unavailable or no answer",
                Err(e) => panic!("submit failed: {e}"),
            };
            *l.answers.entry(kind).or_default() += 1;
        }
        if unknown {
            pending = Some(bytes);
        }
        if pending.is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_failover_under_load_loses_no_admitted_deposit() {
    let mut rng = Rng::from_env("failover torture");
    let mut primary = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let standby = primary.standby("s1").unwrap_or_else(|e| panic!("{e}"));
    primary.set("synchronous_standby_names", "'s1'").unwrap();
    let url = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=postgres \
         target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    let config = format!(
        "{CONFIG}\n[store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{url}\"\n\
         connect-timeout-ms = 2000\ncommit-timeout-ms = 3000\nlock-timeout-ms = 3000\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let a_dir = dir.path().join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let b_dir = dir.path().join("b");
    std::fs::create_dir_all(&b_dir).unwrap();
    std::fs::copy(a_dir.join("declaration.key"), b_dir.join("declaration.key")).unwrap();
    let b = Carrier::start_with(&Spec::new(&b_dir, &config));

    let keys = recipient(rng.bytes32(), rng.bytes32(), 1);
    let rkid = *keys.rkid();
    let client_a = a.connect_within(Duration::from_secs(10)).await;
    let registered = client_a.register(&keys, Purpose::Register).await.unwrap();
    assert_eq!(registered.verdict(), Verdict::Registered);

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let phase = Arc::new(Mutex::new(Phase::Before));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (n, node) in [&a, &b, &a, &b].into_iter().enumerate() {
        let client = node.connect_within(Duration::from_secs(10)).await;
        tasks.push(tokio::spawn(sender(
            client,
            rkid,
            Arc::clone(&ledger),
            Arc::clone(&phase),
            Arc::clone(&stop),
            Rng::new(rng.next() ^ n as u64),
        )));
    }
    tokio::time::sleep(Duration::from_millis(rng.range(400, 1_200))).await;
    *phase.lock().unwrap() = Phase::Outage;
    tokio::task::block_in_place(|| primary.kill()).unwrap();
    tokio::time::sleep(Duration::from_millis(rng.range(100, 800))).await;
    tokio::task::block_in_place(|| standby.promote()).unwrap();
    // Load goes on until both nodes have been answering `admitted` for a
    // while on the new primary.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        *phase.lock().unwrap() = Phase::After;
        if ledger.lock().unwrap().acked_after_promotion >= 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes did not admit again after the failover"
        );
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("every unresolved submission was answered")
            .unwrap();
    }

    // Every acknowledged deposit is collected once, through the other node.
    let client_b = b.connect_within(Duration::from_secs(10)).await;
    let mut collected = Vec::new();
    let mut after = None;
    loop {
        let page = client_b.collect(&keys, after, 1_000).await.unwrap();
        assert_eq!(page.verdict, Verdict::Served);
        collected.extend(page.deposits.iter().map(|d| d.id));
        after = page.deposits.last().map(|d| d.seq).or(after);
        if !page.more {
            break;
        }
    }
    client_a.close().await;
    client_b.close().await;
    let l = ledger.lock().unwrap();
    let held: BTreeSet<DepositId> = collected.iter().copied().collect();
    assert_eq!(held.len(), collected.len(), "a deposit offered twice");
    let lost: Vec<_> = l.acked.difference(&held).collect();
    let unknown: Vec<_> = held.difference(&l.sent).collect();
    println!(
        "failover torture: {} acknowledged ({} before the kill, {} after the promotion), answers {:?}, {} held after",
        l.acked.len(),
        l.acked_before_kill,
        l.acked_after_promotion,
        l.answers,
        held.len()
    );
    println!(
        "failover torture: lost = {}, unknown = {}",
        lost.len(),
        unknown.len()
    );
    assert!(lost.is_empty(), "acknowledged deposits lost: {lost:?}");
    assert!(unknown.is_empty(), "deposits nobody sent: {unknown:?}");
    // Nothing unresolved was left: every held deposit was acknowledged.
    assert_eq!(held, l.acked);
    assert!(l.acked_before_kill > 0);
    drop(l);
    assert!(a.terminate().success());
    assert!(b.terminate().success());
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
