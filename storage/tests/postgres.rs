//! The PostgreSQL store as many nodes see it, on real throwaway clusters:
//! two stores on one database are two carrier nodes. Their write
//! transactions on one queue serialize (its lock), a queue one holds is
//! put off by the other, each sees the other's commits,
//! admissions reach the other node's watchers (LISTEN/NOTIFY), a commit a
//! synchronous standby never confirms is an unknown outcome, a failover to
//! a promoted standby loses nothing committed, and a schema from a newer
//! binary is refused by name.

#![allow(clippy::panic)]

mod common;

use common::*;
use rltp_storage::postgres::{PgOptions, PgStore};
use rltp_storage::{ReadTxn, Store, WriteTxn};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn cluster() -> rltp_pgtest::Cluster {
    rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"))
}

fn open(options: PgOptions) -> PgStore {
    PgStore::open(options).unwrap_or_else(|e| panic!("open the postgres store: {e}"))
}

/// The doorbell is rung after `COMMIT`, from a session of its own, never
/// inside the write transaction (PostgreSQL serializes the commits of
/// every transaction that issued `NOTIFY`): the notification a listener
/// receives comes from the backend of the doorbell session
/// (`application_name` `rltp-carrier-doorbell`), not from the writer's;
/// and one transaction admitting to three queues rings once, naming all
/// three.
#[test]
fn the_doorbell_rings_once_per_commit_from_a_session_of_its_own() {
    use futures_util::StreamExt as _;
    let pg = cluster();
    let a = open(PgOptions::new(pg.conninfo()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config: tokio_postgres::Config = pg.conninfo().parse().unwrap();
    let (client, mut connection) = runtime
        .block_on(config.connect(tokio_postgres::NoTls))
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = message {
                let _ = tx.send((n.process_id(), n.payload().to_owned()));
            }
        }
    });
    runtime
        .block_on(client.batch_execute("LISTEN rltp_deposits"))
        .unwrap();
    let queues = [rkid(1), rkid(2), rkid(3)];
    write(&a, |t| {
        for (n, q) in queues.iter().enumerate() {
            t.append_deposit(q, &payload(n as u64, 100), 1, 2)?;
        }
        Ok(())
    })
    .unwrap();
    let (pid, payload) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let hex = |r: &rltp_proofs::multikey::Rkid| -> String {
        r.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    };
    let named: Vec<&str> = payload.split(' ').collect();
    assert_eq!(named, queues.iter().map(hex).collect::<Vec<_>>());
    let ringer: String = runtime
        .block_on(client.query_one(
            "SELECT application_name FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        ))
        .unwrap()
        .get(0);
    assert_eq!(ringer, rltp_storage::postgres::doorbell::APPLICATION_NAME);
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "one commit, one doorbell"
    );
}

/// A write transaction's instant is the database's clock, read once it
/// holds its queues' locks (`PROTOCOL.md` §13 "One clock"): a transaction
/// that waited for another node's transaction on the same queue reads an
/// instant after that one's commit.
#[test]
fn a_write_transaction_reads_the_database_clock_once_it_holds_its_queues() {
    let pg = cluster();
    let a = open(PgOptions::new(pg.conninfo()));
    let b = Arc::new(open(PgOptions::new(pg.conninfo())));
    let q = rkid(3);
    let mut first = a.begin_write().unwrap();
    assert_eq!(first.prefetch(&[(q, None)], false).unwrap(), vec![]);
    let at_a = first.store_now().expect("the database's clock");
    let host = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(at_a.abs_diff(host) < 60_000, "{at_a} vs this host's {host}");
    let waiting = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || {
            let mut txn = b.begin_write().unwrap();
            assert_eq!(txn.prefetch(&[(q, None)], true).unwrap(), vec![]);
            let at = txn.store_now();
            b.commit(txn).unwrap();
            at
        })
    };
    // Hold the queue a while, then commit.
    std::thread::sleep(Duration::from_millis(500));
    let committed_at = a.database_clock().unwrap();
    a.commit(first).unwrap();
    let at_b = waiting.join().unwrap().expect("the database's clock");
    assert!(
        at_b >= committed_at,
        "B read {at_b}, before A committed at {committed_at}"
    );
    assert!(at_b >= at_a + 500, "B read {at_b}, A {at_a}");
}

/// Per-queue locks (`PROTOCOL.md` §13): while one node's transaction holds
/// a queue, another node's prefetch reports that queue busy (its
/// operations go to the writer's next batch) and takes the others at
/// once; touching the busy queue anyway is a retriable conflict, never a
/// wait. Once the first commits, the queue is free.
#[test]
fn a_queue_another_node_holds_is_put_off_and_the_others_are_not() {
    let pg = cluster();
    let a = open(PgOptions::new(pg.conninfo()));
    let b = open(PgOptions::new(pg.conninfo()));
    let (held, free) = (rkid(1), rkid(2));
    let mut first = a.begin_write().unwrap();
    assert_eq!(first.prefetch(&[(held, None)], false).unwrap(), vec![]);
    first.put_binding(&held, &live(1, 0)).unwrap();
    let mut second = b.begin_write().unwrap();
    assert_eq!(
        second
            .prefetch(&[(held, None), (free, None)], false)
            .unwrap(),
        vec![held]
    );
    second.put_binding(&free, &live(1, 0)).unwrap();
    assert!(matches!(
        second.binding(&held),
        Err(rltp_storage::StoreError::Conflict(_))
    ));
    drop(second);
    a.commit(first).unwrap();
    let mut third = b.begin_write().unwrap();
    assert_eq!(third.prefetch(&[(held, None)], false).unwrap(), vec![]);
    assert_eq!(third.binding(&held).unwrap(), Some(live(1, 0)));
    drop(third);
}

/// Two nodes bump one binding's generation 200 times each, read-modify-
/// write, concurrently: every bump survives (the transactions of both
/// nodes on one queue are one serial order under its lock), and each node
/// reads the other's.
#[test]
fn two_nodes_serialize_their_write_transactions_on_one_queue() {
    let pg = cluster();
    let a = Arc::new(open(PgOptions::new(pg.conninfo())));
    let b = Arc::new(open(PgOptions::new(pg.conninfo())));
    assert_eq!(a.store_id(), b.store_id(), "one database, one store");
    let r = rkid(7);
    write(&*a, |t| t.put_binding(&r, &live(1, 0))).unwrap();
    let bump = |store: Arc<PgStore>| {
        std::thread::spawn(move || {
            for _ in 0..200 {
                write(&*store, |t| {
                    t.prefetch(&[(r, None)], true)?;
                    let b = t.binding(&r)?.expect("the binding");
                    t.put_binding(&r, &live(b.generation + 1, 0))
                })
                .unwrap();
            }
        })
    };
    let (ta, tb) = (bump(Arc::clone(&a)), bump(Arc::clone(&b)));
    ta.join().unwrap();
    tb.join().unwrap();
    assert_eq!(
        a.read().unwrap().binding(&r).unwrap().unwrap().generation,
        401
    );
    assert_eq!(
        b.read().unwrap().binding(&r).unwrap().unwrap().generation,
        401
    );
    assert_eq!(b.read().unwrap().occupancy().unwrap().bindings, 1);
    let report = a.integrity_check().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// A listener that comes back after a gap (its connection cut) tells the
/// node "any queue" as soon as it listens again, so every local watch
/// session re-reads at once: a deposit another node admitted in the gap
/// rang nobody, and would otherwise wait for the sessions' own re-read
/// (`sweep-interval-ms`).
#[test]
fn a_listener_that_comes_back_wakes_every_watch_session() {
    let pg = cluster();
    let a = open(PgOptions::new(pg.conninfo()));
    let heard: Arc<Mutex<Vec<Option<rltp_proofs::multikey::Rkid>>>> = Arc::default();
    {
        let heard = Arc::clone(&heard);
        a.on_remote_admission(Arc::new(move |r| heard.lock().unwrap().push(r.copied())));
    }
    let listener =
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'rltp-carrier-listener'";
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        let pid = pg.psql(listener).unwrap();
        if !pid.is_empty() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the node never listened");
        std::thread::sleep(Duration::from_millis(50));
    };
    heard.lock().unwrap().clear();
    pg.psql(&format!("SELECT pg_terminate_backend({pid})"))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !heard.lock().unwrap().contains(&None) {
        assert!(
            Instant::now() < deadline,
            "the listener came back and woke nobody"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_ne!(pg.psql(listener).unwrap(), pid, "a new listener session");
}

/// A deposit admitted through one node reaches the other node's watchers:
/// once the admitting transaction committed, its node rings
/// `rltp_deposits`, and the other node's listener hears it; an aborted
/// transaction rings nobody.
#[test]
fn the_other_node_hears_of_an_admission_once_it_commits() {
    let pg = cluster();
    let a = open(PgOptions::new(pg.conninfo()));
    let b = open(PgOptions::new(pg.conninfo()));
    let heard: Arc<Mutex<Vec<rltp_proofs::multikey::Rkid>>> = Arc::default();
    {
        let heard = Arc::clone(&heard);
        b.on_remote_admission(Arc::new(move |r| {
            if let Some(r) = r {
                heard.lock().unwrap().push(*r);
            }
        }));
    }
    // The listener connects in the background: retry until it hears.
    let (q, deadline) = (rkid(3), Instant::now() + Duration::from_secs(20));
    let mut n = 0;
    while heard.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the other node never heard");
        write(&a, |t| {
            t.append_deposit(&q, &payload(n, 100), 1, 2).map(drop)
        })
        .unwrap();
        n += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(heard.lock().unwrap().iter().all(|r| *r == q));
    // An aborted transaction notifies nobody.
    let before = heard.lock().unwrap().len();
    {
        let mut txn = a.begin_write().unwrap();
        txn.append_deposit(&rkid(4), &payload(99, 100), 1, 2)
            .unwrap();
        drop(txn);
    }
    write(&a, |t| {
        t.append_deposit(&q, &payload(1000, 100), 1, 2).map(drop)
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while heard.lock().unwrap().len() == before {
        assert!(
            Instant::now() < deadline,
            "the commit after the abort was not heard"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!heard.lock().unwrap().contains(&rkid(4)));
}

/// With `synchronous_standby_names` naming a standby that does not exist,
/// PostgreSQL waits for it forever: the store gives up at its commit
/// timeout and reports an unknown outcome (the carrier answers
/// `unavailable`), the commit is kept locally (so a retry is a duplicate,
/// never a second deposit), and once the operator removes the standby
/// from the setting, commits succeed again.
#[test]
fn a_commit_no_standby_confirms_is_an_unknown_outcome() {
    let pg = cluster();
    let mut options = PgOptions::new(pg.conninfo());
    options.commit_timeout = Duration::from_millis(500);
    let store = open(options);
    let q = rkid(5);
    write(&store, |t| t.put_binding(&q, &live(1, 0))).unwrap();
    pg.set("synchronous_standby_names", "'gone'").unwrap();
    let started = Instant::now();
    let result = write(&store, |t| {
        t.append_deposit(&q, &payload(1, 300), 1, 2).map(drop)
    });
    let err = result.expect_err("a commit without its standby must not succeed");
    assert!(err.to_string().contains("outcome unknown"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // Committed locally: visible to a reader.
    assert_eq!(
        store.read().unwrap().deposits(&q, None, 10).unwrap().len(),
        1
    );
    pg.set("synchronous_standby_names", "''").unwrap();
    write(&store, |t| {
        t.append_deposit(&q, &payload(2, 300), 1, 2).map(drop)
    })
    .unwrap();
    assert_eq!(
        store.read().unwrap().deposits(&q, None, 10).unwrap().len(),
        2
    );
}

/// A primary with a synchronous standby dies; the standby is promoted; the
/// store, configured with both hosts (`target_session_attrs=read-write`),
/// reconnects to the new primary and finds every committed transaction.
#[test]
fn a_failover_to_the_promoted_standby_loses_nothing_committed() {
    let mut primary = cluster();
    let standby = primary.standby("s1").unwrap();
    primary.set("synchronous_standby_names", "'s1'").unwrap();
    let url = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=postgres \
         target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    let mut options = PgOptions::new(url);
    options.connect_timeout = Duration::from_secs(2);
    let store = open(options);
    let q = rkid(6);
    write(&store, |t| t.put_binding(&q, &live(1, 0))).unwrap();
    let mut held = Vec::new();
    for i in 0..20 {
        held.push(write(&store, |t| t.append_deposit(&q, &payload(i, 200), 1, 2)).unwrap());
    }
    primary.kill().unwrap();
    // The next transaction fails (its connection died with the primary).
    assert!(write(&store, |t| t.add_elastic_bytes(0)).is_err());
    store.after_failure();
    standby.promote().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let appended = loop {
        match write(&store, |t| t.append_deposit(&q, &payload(100, 200), 1, 2)) {
            Ok(d) => break d,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "no reconnection to the new primary: {e}"
                );
                store.after_failure();
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    assert_eq!(appended.seq, 21, "the per-queue sequence went on");
    let r = store.read().unwrap();
    let after = r.deposits(&q, None, 100).unwrap();
    assert_eq!(after.len(), 21);
    assert_eq!(&after[..20], held.as_slice());
    assert_eq!(r.binding(&q).unwrap(), Some(live(1, 0)));
    drop(r);
    let report = store.integrity_check().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// A database migrated by a newer binary is refused by name, and nothing
/// is written to it.
#[test]
fn a_newer_schema_is_refused_by_name() {
    let pg = cluster();
    drop(open(PgOptions::new(pg.conninfo())));
    pg.psql("UPDATE rltp_meta SET value = '\\x00000063' WHERE name = 'schema_version'")
        .unwrap();
    let err = PgStore::open(PgOptions::new(pg.conninfo())).expect_err("a newer schema");
    assert!(
        err.to_string().contains(&format!(
            "the database has rltp schema version 99, newer than this binary's {}",
            rltp_storage::postgres::schema::SCHEMA_VERSION
        )),
        "{err}"
    );
    assert_eq!(
        pg.psql("SELECT encode(value, 'hex') FROM rltp_meta WHERE name = 'schema_version'")
            .unwrap(),
        "00000063"
    );
}

/// A database that could lose a committed transaction is refused at open,
/// naming the setting.
#[test]
fn a_database_without_fsync_is_refused() {
    let pg =
        rltp_pgtest::Cluster::start_with(&[("fsync", "off")]).unwrap_or_else(|e| panic!("{e}"));
    let err = PgStore::open(PgOptions::new(pg.conninfo())).expect_err("fsync = off");
    assert!(
        err.to_string()
            .contains("the database runs with fsync = off"),
        "{err}"
    );
}
