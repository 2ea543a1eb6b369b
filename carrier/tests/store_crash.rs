//! Crash consistency (issue 3): a child process runs the group-commit writer
//! over an embedded store — the log store (`serve`'s) and the redb store in
//! turn — appends, removals, binding releases and returns from
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
//!
//! It runs against both embedded stores. Against the log store (tiny
//! segments and snapshot intervals, its background thread zero-filling
//! segments, taking snapshots and reclaiming), every other child also arms
//! one of its **kill points** (`rltp_storage::log_store::KILL_POINTS`, one
//! in each file-writing step: mid-snapshot, snapshot durable, mid
//! zero-fill, new segment header, mid-reclaim, compaction copy logged,
//! record written, recovery's new segment), in turn, at a random pass
//! through it: the child aborts there, as a SIGKILL would. (The last one,
//! `upgrade-log`, runs only while a redb-layout store is upgraded, which
//! these children never do: `storage/tests/log_store.rs` cuts upgrades.)

// A test reads top to bottom: long test functions are legitimate here (issue 22 bounds production code).
#![allow(clippy::too_many_lines)]
// The journal checks live in helper functions, where a failed check is a
// panic just as in the test body.
#![allow(clippy::panic)]

#[path = "../../tests/support/journal.rs"]
mod journal;
#[path = "../../storage/tests/common/mod.rs"]
mod store;

use journal::{Counts, xorshift};
use rltp_server::clock::SystemClock;
use rltp_server::defaults::MAX_BATCH;
use rltp_server::writer::Writer;
use rltp_storage::log_store::{KILL_POINTS, LogOptions, LogStore, arm_kill_point};
use rltp_storage::redb_store::{IntegrityReport, RedbOptions, RedbStore};
use rltp_storage::{Store, StoreResult};
use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIR_ENV: &str = "RLTP_CRASH_DIR";
const RUN_ENV: &str = "RLTP_CRASH_RUN";
const STORE_ENV: &str = "RLTP_CRASH_STORE";
const KILL_ENV: &str = "RLTP_CRASH_KILL_POINT";
const WORKERS: usize = 6;

fn options() -> RedbOptions {
    RedbOptions {
        segment_bytes: 16 * 1024,
        compact_below_percent: 50,
        ..RedbOptions::default()
    }
}

fn log_options() -> LogOptions {
    LogOptions {
        segment_bytes: 16 * 1024,
        snapshot_log_bytes: 32 * 1024,
        redb_checkpoint_ops: 48,
        compact_below_percent: 50,
        ..LogOptions::default()
    }
}

/// The store under test, opened on `dir`.
trait Backend: Store + Sized {
    fn open(dir: &std::path::Path) -> StoreResult<Self>;
    fn compact(&self) -> StoreResult<()>;
    fn check(&mut self) -> StoreResult<IntegrityReport>;
}

impl Backend for RedbStore {
    fn open(dir: &std::path::Path) -> StoreResult<Self> {
        Ok(RedbStore::open_with(dir, options())?)
    }
    fn compact(&self) -> StoreResult<()> {
        self.compact_step(16).map(drop)
    }
    fn check(&mut self) -> StoreResult<IntegrityReport> {
        self.integrity_check()
    }
}

impl Backend for LogStore {
    fn open(dir: &std::path::Path) -> StoreResult<Self> {
        Ok(LogStore::open_with(dir, log_options())?)
    }
    fn compact(&self) -> StoreResult<()> {
        self.compact_step(16).map(drop)
    }
    fn check(&mut self) -> StoreResult<IntegrityReport> {
        self.integrity_check()
    }
}

// ---------------------------------------------------------------------------
// Child
// ---------------------------------------------------------------------------

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
    if let Some((point, nth)) = std::env::var(KILL_ENV)
        .ok()
        .as_deref()
        .and_then(|v| v.split_once(':'))
    {
        arm_kill_point(point, nth.parse().unwrap_or(1));
    }
    match std::env::var(STORE_ENV).as_deref() {
        Ok("log") => child::<LogStore>(&dir, run),
        _ => child::<RedbStore>(&dir, run),
    }
}

fn child<S: Backend>(dir: &str, run: u64) {
    let store = Arc::new(S::open(std::path::Path::new(dir)).unwrap_or_else(|e| fail(e)));
    say("open".into());
    let committer = Writer::start(Arc::clone(&store), Arc::new(SystemClock), None, MAX_BATCH)
        .unwrap_or_else(|e| fail(e));
    for w in 0..WORKERS {
        let committer = committer.clone();
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let result = journal::worker(&committer, &*store, run + 1, w, WORKERS, &say, &|| true);
            if let Err(e) = result {
                fail(e);
            }
        });
    }
    let compactor = Arc::clone(&store);
    std::thread::spawn(move || {
        loop {
            compactor.compact().unwrap_or_else(|e| fail(e));
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

/// What the parent counted besides the journal checks.
#[derive(Debug, Default)]
struct Kills {
    kills: u64,
    killed_before_open: u64,
    deposits_at_end: u64,
    segments_at_end: u64,
}

#[test]
fn sigkill_at_random_instants() -> StoreResult<()> {
    run::<RedbStore>("redb", false)
}

#[test]
fn sigkill_at_random_instants_and_kill_points_log_store() -> StoreResult<()> {
    run::<LogStore>("log", true)
}

fn run<S: Backend>(name: &str, kill_points: bool) -> StoreResult<()> {
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
    let mut model = journal::model();
    let mut counts = Counts::default();
    let mut tally = Kills::default();
    let started = Instant::now();
    let mut points_reached = std::collections::BTreeMap::new();
    for run in 0..kills {
        // Every other child of the log store dies at a kill point, in turn.
        let point = (kill_points && run % 2 == 1)
            .then(|| KILL_POINTS[(run / 2) as usize % (KILL_POINTS.len() - 1)])
            .map(|p| {
                // Recovery's step runs once per life.
                let nth = if p == "open-new-segment" {
                    1
                } else {
                    1 + xorshift(&mut rng) % 3
                };
                format!("{p}:{nth}")
            });
        let mut command = Command::new(&exe);
        command
            .args(["crash_child", "--exact", "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(DIR_ENV, dir.path())
            .env(RUN_ENV, run.to_string())
            .env(STORE_ENV, name);
        if let Some(point) = &point {
            command.env(KILL_ENV, point);
        }
        let mut child = command
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
        // A kill point gets longer to be reached.
        let delay = if point.is_some() {
            50 + xorshift(&mut rng) % 400
        } else {
            5 + xorshift(&mut rng) % 196
        };
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let output = child.wait_with_output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reached = stderr.contains("kill point");
        if reached {
            // Aborted there (or killed by the timer while aborting).
            assert!(
                matches!(output.status.signal(), Some(6 | 9)),
                "run {run}: {stderr}"
            );
            if let Some(point) = &point {
                *points_reached
                    .entry(point.split(':').next().unwrap_or("").to_owned())
                    .or_insert(0u64) += 1;
            }
        } else {
            assert_eq!(
                output.status.signal(),
                Some(9),
                "run {run}: the child ended on its own: {stderr}"
            );
        }
        let lines = reader.join().expect("journal reader");
        tally.kills += 1;
        if lines.first().map(String::as_str) != Some("open") {
            tally.killed_before_open += 1;
        }
        journal::apply_journal(&mut model, &lines, &mut counts);

        let mut store = S::open(dir.path())?;
        let held = journal::check(&store.read()?, &mut model, &mut counts)?;
        let report = store.check()?;
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(report.deposits, held, "run {run}");
        tally.deposits_at_end = held;
        tally.segments_at_end = report.segments;
    }
    if kill_points {
        println!("crash test ({name}): kill points reached {points_reached:?}");
    }
    println!(
        "crash test ({name}): {} kills ({} before the store was open) in {:.1} s; acknowledged: {} appends, {} removals, {} binding changes; verified: {} acknowledged appends present with identical bytes, {} acknowledged removals absent, {} in-flight outcomes adopted; {} deposits in {} segments held at the end; lost 0",
        tally.kills,
        tally.killed_before_open,
        started.elapsed().as_secs_f64(),
        counts.acknowledged_appends,
        counts.acknowledged_removals,
        counts.acknowledged_bindings,
        counts.appends_verified,
        counts.removals_verified,
        counts.in_flight_resolved,
        tally.deposits_at_end,
        tally.segments_at_end,
    );
    assert!(
        counts.acknowledged_appends >= kills,
        "the children did too little work to test anything"
    );
    Ok(())
}
