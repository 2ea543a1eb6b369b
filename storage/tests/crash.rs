//! Crash consistency (issue 3): a child process runs the group-commit writer
//! over a `RedbStore` — appends, removals, binding releases and returns from
//! six threads, plus background compaction — and prints a journal line
//! before each operation (intent) and after its commit (acknowledgement).
//! The parent SIGKILLs it at a random instant (5–200 ms), reopens the store
//! and checks, for every queue:
//! - every acknowledged append is present with identical bytes, unless its
//!   acknowledged removal followed (or its removal was in flight);
//! - every acknowledged removal is absent;
//! - nothing else is present except the one operation in flight;
//! - the binding state is the acknowledged one or the in-flight one, and no
//!   rkid holds both a binding and a tombstone;
//! - `integrity_check` passes: occupancy, queue and segment counters equal
//!   the bytes actually held, every deposit's SHA-256 matches its id.
//!
//! The same store directory is reused across kills, so recovery runs on
//! recovered state again and again. The child is this test binary itself,
//! re-invoked with `--ignored --exact crash_child`.

// The journal checks live in helper functions, where a failed check is a
// panic just as in the test body.
#![allow(clippy::panic)]

mod common;

use common::*;
use rltp_proofs::multikey::Rkid;
use rltp_storage::committer::{Committer, DEFAULT_MAX_BATCH};
use rltp_storage::redb_store::{RedbOptions, RedbStore};
use rltp_storage::{Binding, DepositId, ReadTxn, Store, StoreResult, WriteTxn};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIR_ENV: &str = "RLTP_CRASH_DIR";
const RUN_ENV: &str = "RLTP_CRASH_RUN";
const WORKERS: usize = 6;
const QUEUES: usize = 12;

fn queue(i: usize) -> Rkid {
    rkid2((i as u8).wrapping_mul(37), i as u8)
}

fn options() -> RedbOptions {
    RedbOptions {
        segment_bytes: 16 * 1024,
        compact_below_percent: 50,
        ..RedbOptions::default()
    }
}

/// The envelope bytes of journal seed `seed` (1–1200 bytes).
fn envelope(seed: u64) -> Vec<u8> {
    let len = 1 + (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize % 1200;
    payload(seed, len)
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

// ---------------------------------------------------------------------------
// Child
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bind {
    Unbound,
    Bound(u64),
    Released(u64),
}

fn bind_state(r: &impl ReadTxn, rkid: &Rkid) -> StoreResult<(Bind, bool)> {
    let binding = r.binding(rkid)?;
    let tombstone = r.tombstone(rkid)?;
    let state = match (binding, tombstone) {
        (Some(b), _) => Bind::Bound(b.generation),
        (None, Some(t)) => Bind::Released(t.generation),
        (None, None) => Bind::Unbound,
    };
    Ok((state, binding.is_some() && tombstone.is_some()))
}

fn say(line: String) {
    use std::io::Write;
    // One write per line: a pipe write of < PIPE_BUF bytes is atomic, so a
    // kill never tears a journal line.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(format!("J {line}\n").as_bytes());
    let _ = out.flush();
}

fn fail(what: impl std::fmt::Display) -> ! {
    eprintln!("crash child: {what}");
    std::process::exit(3);
}

fn worker(committer: &Committer, store: &RedbStore, run: u64, w: usize) {
    let mut rng = (run + 1).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (w as u64 + 1);
    let mine: Vec<usize> = (0..QUEUES).filter(|q| q % WORKERS == w).collect();
    let mut held: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut binds: BTreeMap<usize, Bind> = BTreeMap::new();
    {
        let r = store.read().unwrap_or_else(|e| fail(e));
        for &q in &mine {
            let deposits = r
                .deposits(&queue(q), None, usize::MAX)
                .unwrap_or_else(|e| fail(e));
            held.insert(q, deposits.iter().map(|d| d.seq).collect());
            binds.insert(q, bind_state(&r, &queue(q)).unwrap_or_else(|e| fail(e)).0);
        }
    }
    let mut counter = 0u64;
    loop {
        let q = mine[xorshift(&mut rng) as usize % mine.len()];
        let rkid = queue(q);
        let roll = xorshift(&mut rng) % 100;
        let seqs = held.entry(q).or_default();
        if roll < 50 || (roll < 85 && seqs.is_empty()) {
            counter += 1;
            let seed = (run << 32) | ((w as u64) << 24) | counter;
            say(format!("ia {q} {seed}"));
            let d = committer
                .execute(move |t: &mut dyn WriteTxn, now| {
                    t.append_deposit(&rkid, &envelope(seed), now, now + 1)
                })
                .unwrap_or_else(|e| fail(e));
            seqs.push(d.seq);
            say(format!("a {q} {} {seed}", d.seq));
        } else if roll < 85 {
            let seq = seqs.remove(xorshift(&mut rng) as usize % seqs.len());
            say(format!("ir {q} {seq}"));
            let gone = committer
                .execute(move |t: &mut dyn WriteTxn, _| t.remove_deposit(&rkid, seq))
                .unwrap_or_else(|e| fail(e));
            if gone.is_none() {
                fail(format!("deposit {q}/{seq} was not held"));
            }
            say(format!("r {q} {seq}"));
        } else {
            let state = binds.get(&q).copied().unwrap_or(Bind::Unbound);
            let next = match state {
                Bind::Bound(g) => {
                    say(format!("it {q} {g}"));
                    committer
                        .execute(move |t: &mut dyn WriteTxn, now| {
                            t.remove_binding(&rkid)?;
                            t.put_tombstone(&rkid, &tomb(g, now))
                        })
                        .unwrap_or_else(|e| fail(e));
                    say(format!("t {q} {g}"));
                    Bind::Released(g)
                }
                Bind::Unbound | Bind::Released(_) => {
                    let g = match state {
                        Bind::Released(t) => t + 1,
                        _ => 1,
                    };
                    say(format!("ib {q} {g}"));
                    committer
                        .execute(move |t: &mut dyn WriteTxn, now| {
                            t.remove_tombstone(&rkid)?;
                            t.put_binding(&rkid, &live(g, now))
                        })
                        .unwrap_or_else(|e| fail(e));
                    say(format!("b {q} {g}"));
                    Bind::Bound(g)
                }
            };
            binds.insert(q, next);
        }
    }
}

#[test]
#[ignore = "entry point of the child process of `sigkill_at_random_instants`"]
fn crash_child() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let run: u64 = std::env::var(RUN_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // libtest printed "test crash_child ... " without a newline: end it so
    // that every journal line starts a line.
    println!();
    let store = Arc::new(RedbStore::open_with(&dir, options()).unwrap_or_else(|e| fail(e)));
    say("open".into());
    let clock = Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    });
    let committer = Committer::start(
        Arc::clone(&store),
        clock,
        Arc::new(|_: &mut dyn WriteTxn, _| Ok(())),
        DEFAULT_MAX_BATCH,
    )
    .unwrap_or_else(|e| fail(e));
    for w in 0..WORKERS {
        let committer = committer.clone();
        let store = Arc::clone(&store);
        std::thread::spawn(move || worker(&committer, &store, run, w));
    }
    let compactor = Arc::clone(&store);
    std::thread::spawn(move || {
        loop {
            compactor.compact_step(16).unwrap_or_else(|e| fail(e));
            std::thread::sleep(Duration::from_millis(3));
        }
    });
    // The parent kills us long before this.
    std::thread::sleep(Duration::from_secs(60));
    fail("not killed within 60 s");
}

// ---------------------------------------------------------------------------
// Parent
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    Append(u64),
    Remove(u64),
    Bind(Bind),
}

#[derive(Debug, Default)]
struct Queue {
    /// Held deposits: seq → journal seed.
    deposits: BTreeMap<u64, u64>,
    bind: Option<Bind>,
    in_flight: Option<InFlight>,
    removed: Vec<u64>,
}

#[derive(Debug, Default)]
struct Counts {
    kills: u64,
    killed_before_open: u64,
    acknowledged_appends: u64,
    acknowledged_removals: u64,
    acknowledged_bindings: u64,
    appends_verified: u64,
    removals_verified: u64,
    in_flight_resolved: u64,
    deposits_at_end: u64,
    segments_at_end: u64,
}

fn apply_journal(model: &mut [Queue], lines: &[String], counts: &mut Counts) {
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| -> u64 {
            f.get(i)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("bad journal line {line:?}"))
        };
        if f.first() == Some(&"open") {
            continue;
        }
        let q = &mut model[num(1) as usize];
        match f.first().copied() {
            Some("ia") => q.in_flight = Some(InFlight::Append(num(2))),
            Some("a") => {
                assert_eq!(q.in_flight, Some(InFlight::Append(num(3))), "{line}");
                assert!(q.deposits.insert(num(2), num(3)).is_none(), "{line}");
                q.in_flight = None;
                counts.acknowledged_appends += 1;
            }
            Some("ir") => q.in_flight = Some(InFlight::Remove(num(2))),
            Some("r") => {
                assert!(q.deposits.remove(&num(2)).is_some(), "{line}");
                q.removed.push(num(2));
                q.in_flight = None;
                counts.acknowledged_removals += 1;
            }
            Some("ib") => q.in_flight = Some(InFlight::Bind(Bind::Bound(num(2)))),
            Some("it") => q.in_flight = Some(InFlight::Bind(Bind::Released(num(2)))),
            Some("b") => {
                q.bind = Some(Bind::Bound(num(2)));
                q.in_flight = None;
                counts.acknowledged_bindings += 1;
            }
            Some("t") => {
                q.bind = Some(Bind::Released(num(2)));
                q.in_flight = None;
                counts.acknowledged_bindings += 1;
            }
            _ => panic!("bad journal line {line:?}"),
        }
    }
}

/// Checks the recovered store against the journal and adopts what it holds
/// (the outcome of the operations that were in flight) as the new model.
fn check(store: &RedbStore, model: &mut [Queue], counts: &mut Counts) -> StoreResult<()> {
    let r = store.read()?;
    for (i, q) in model.iter_mut().enumerate() {
        let rkid = queue(i);
        let held = r.deposits(&rkid, None, usize::MAX)?;
        let mut actual = BTreeMap::new();
        for d in &held {
            let bytes = r.deposit_bytes(&rkid, d)?;
            assert_eq!(DepositId::of(&bytes), d.id, "queue {i} seq {}", d.seq);
            actual.insert(d.seq, bytes);
        }
        for (seq, seed) in &q.deposits {
            match actual.get(seq) {
                Some(bytes) => {
                    assert_eq!(*bytes, envelope(*seed), "queue {i} seq {seq}: bytes differ");
                    counts.appends_verified += 1;
                }
                None => assert_eq!(
                    q.in_flight,
                    Some(InFlight::Remove(*seq)),
                    "queue {i}: acknowledged deposit {seq} (seed {seed}) LOST"
                ),
            }
        }
        for seq in q.removed.drain(..) {
            assert!(
                !actual.contains_key(&seq),
                "queue {i}: acknowledged removal of {seq} came back"
            );
            counts.removals_verified += 1;
        }
        let max_acknowledged = q.deposits.keys().next_back().copied().unwrap_or(0);
        let mut adopted = BTreeMap::new();
        for (seq, bytes) in &actual {
            let seed = match q.deposits.get(seq) {
                Some(seed) => *seed,
                None => match q.in_flight {
                    Some(InFlight::Append(seed)) if *bytes == envelope(seed) => {
                        assert!(*seq > max_acknowledged, "queue {i}: seq {seq} reused");
                        counts.in_flight_resolved += 1;
                        seed
                    }
                    other => panic!("queue {i}: phantom deposit {seq} (in flight: {other:?})"),
                },
            };
            adopted.insert(*seq, seed);
        }
        if matches!(q.in_flight, Some(InFlight::Remove(seq)) if !actual.contains_key(&seq)) {
            counts.in_flight_resolved += 1;
        }
        q.deposits = adopted;

        let (state, both) = bind_state(&r, &rkid)?;
        assert!(!both, "queue {i}: binding AND tombstone");
        let acknowledged = q.bind.unwrap_or(Bind::Unbound);
        let in_flight = match q.in_flight {
            Some(InFlight::Bind(b)) => Some(b),
            _ => None,
        };
        assert!(
            state == acknowledged || Some(state) == in_flight,
            "queue {i}: binding state {state:?}, acknowledged {acknowledged:?}, in flight {in_flight:?}"
        );
        if state != acknowledged {
            counts.in_flight_resolved += 1;
        }
        if let Bind::Bound(g) = state {
            let b: Option<Binding> = r.binding(&rkid)?;
            assert_eq!(b.map(|b| b.generation), Some(g));
        }
        q.bind = Some(state);
        q.in_flight = None;
    }
    Ok(())
}

#[test]
fn sigkill_at_random_instants() -> StoreResult<()> {
    let kills: u64 = std::env::var("RLTP_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    println!("crash test seed {seed}");
    let mut rng = seed;
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let mut model: Vec<Queue> = (0..QUEUES).map(|_| Queue::default()).collect();
    let mut counts = Counts::default();
    let started = Instant::now();
    for run in 0..kills {
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(DIR_ENV, dir.path())
            .env(RUN_ENV, run.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().expect("child stdout");
        let reader = std::thread::spawn(move || {
            // Only complete lines: a line cut by the kill has no newline.
            let mut lines = Vec::new();
            let mut input = std::io::BufReader::new(stdout);
            let mut line = String::new();
            while input.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(entry) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("J ")) {
                    lines.push(entry.to_owned());
                }
                line.clear();
            }
            lines
        });
        let delay = 5 + xorshift(&mut rng) % 196;
        std::thread::sleep(Duration::from_millis(delay));
        child.kill()?;
        let output = child.wait_with_output()?;
        assert_eq!(
            output.status.signal(),
            Some(9),
            "run {run}: the child ended on its own: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let lines = reader.join().expect("journal reader");
        counts.kills += 1;
        if lines.first().map(String::as_str) != Some("open") {
            counts.killed_before_open += 1;
        }
        apply_journal(&mut model, &lines, &mut counts);

        let mut store = RedbStore::open_with(dir.path(), options())?;
        check(&store, &mut model, &mut counts)?;
        let report = store.integrity_check()?;
        assert_eq!(report.binding_and_tombstone, 0);
        let held: u64 = model.iter().map(|q| q.deposits.len() as u64).sum();
        assert_eq!(report.deposits, held, "run {run}");
        counts.deposits_at_end = held;
        counts.segments_at_end = report.segments;
    }
    println!(
        "crash test: {} kills ({} before the store was open) in {:.1} s; acknowledged: {} appends, {} removals, {} binding changes; verified: {} acknowledged appends present with identical bytes, {} acknowledged removals absent, {} in-flight outcomes adopted; {} deposits in {} segments held at the end; lost 0",
        counts.kills,
        counts.killed_before_open,
        started.elapsed().as_secs_f64(),
        counts.acknowledged_appends,
        counts.acknowledged_removals,
        counts.acknowledged_bindings,
        counts.appends_verified,
        counts.removals_verified,
        counts.in_flight_resolved,
        counts.deposits_at_end,
        counts.segments_at_end,
    );
    assert!(
        counts.acknowledged_appends >= kills,
        "the children did too little work to test anything"
    );
    Ok(())
}
