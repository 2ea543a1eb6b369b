//! Simulated power loss (issue 13): the store runs on a simulated disk
//! ([`FaultFs`]) under mixed load — admissions, conclusions (removal and
//! departure record), registrations and releases from four workers through
//! the group-commit writer, background maintenance (compaction,
//! checkpoints) beside them, tiny segments so that rotations happen — and
//! at a random instant the disk is cut: every write not yet covered by a
//! completed `fsync` is dropped, torn or kept, every name not yet made
//! durable by a directory sync may vanish or come back
//! (`rltp_storage::fault_fs`). The crash image is reopened and checked
//! against the journal (`common/journal.rs`): every acknowledged
//! admission present with its bytes, every acknowledged conclusion absent
//! with its departure recorded, every acknowledged registration and
//! release in force, nothing else but the outcome of an operation in
//! flight, no seq handed out twice, and the backend's full integrity check
//! clean (on a copy of the image). The next life runs on that image, so recovery runs on recovered
//! state again and again; one life in ten is cut at once after its open,
//! during the recovery's own writes.
//!
//! **Every embedded store backend runs this.** A backend implements
//! [`Backend`] (open on a [`FaultFs`], its full integrity check, one step of
//! its background maintenance) and gets a `#[test]` calling
//! [`run::<ThatBackend>`]; it must do all its I/O through
//! [`rltp_storage::fs::StoreFs`].
//!
//! `RLTP_POWER_LOSS_INSTANTS` sets the number of crashes (the CI short
//! form: 250; the long form: 1000), `RLTP_POWER_LOSS_SEED` repeats a run,
//! `RLTP_POWER_LOSS_VERBOSE` prints a line per life.
//! The figures it prints are in `tests/README.md`.

#[path = "../../tests/support/journal.rs"]
mod journal;
#[path = "../../storage/tests/common/mod.rs"]
mod store;

use journal::Counts;
use rltp_server::clock::ManualClock;
use rltp_server::defaults::MAX_BATCH;
use rltp_server::writer::Writer;
use rltp_storage::fault_fs::{CrashReport, FaultFs, Rng};
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::redb_store::{RedbOptions, RedbStore};
use rltp_storage::{Store, StoreResult};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A store backend the harness can run.
trait Backend {
    /// The store.
    type S: Store;
    /// Its name in the figures.
    const NAME: &'static str;
    /// Opens (or creates) the store at `dir` of the simulated disk `fs`.
    fn open(fs: &FaultFs, dir: &Path) -> StoreResult<Self::S>;
    /// The backend's full integrity check: `Ok` only if every counter,
    /// index and byte is consistent; returns the deposits it holds.
    fn integrity(store: Self::S) -> StoreResult<u64>;
    /// One step of background maintenance (compaction, checkpoints).
    fn maintenance(store: &Self::S) -> StoreResult<()>;
}

/// The embedded redb + segments store, on tiny segments with frequent
/// checkpoints, so that rotations, replays and checkpoints all happen in
/// short lives.
struct Redb;

impl Backend for Redb {
    type S = RedbStore;
    const NAME: &'static str = "redb + segments";
    fn open(fs: &FaultFs, dir: &Path) -> StoreResult<RedbStore> {
        Ok(RedbStore::open_with(
            dir,
            RedbOptions {
                segment_bytes: 16 * 1024,
                compact_below_percent: 50,
                checkpoint_ops: 48,
                cache_bytes: 4 << 20,
                fs: Arc::new(fs.clone()),
                ..RedbOptions::default()
            },
        )?)
    }
    fn integrity(mut store: RedbStore) -> StoreResult<u64> {
        let report = store.integrity_check()?;
        assert!(report.is_clean(), "{report:?}");
        Ok(report.deposits)
    }
    fn maintenance(store: &RedbStore) -> StoreResult<()> {
        store.compact_step(16)?;
        store.maintenance_step()
    }
}

/// The log store (the default), on tiny segments with frequent snapshots
/// and redb checkpoints, its background thread running (zero-filling the
/// next segment, snapshots, reclaiming), so that rotations, preallocation,
/// snapshots, compaction and reclaiming are all cut into.
struct Log;

impl Backend for Log {
    type S = LogStore;
    const NAME: &'static str = "log store";
    fn open(fs: &FaultFs, dir: &Path) -> StoreResult<LogStore> {
        Ok(LogStore::open_with(
            dir,
            LogOptions {
                segment_bytes: 16 * 1024,
                snapshot_log_bytes: 32 * 1024,
                redb_checkpoint_ops: 48,
                compact_below_percent: 50,
                cache_bytes: 4 << 20,
                // No life here ends in a clean close: each is cut, and the
                // store is then dropped on a disk nobody looks at again.
                snapshot_at_close: false,
                fs: Arc::new(fs.clone()),
                ..LogOptions::default()
            },
        )?)
    }
    fn integrity(mut store: LogStore) -> StoreResult<u64> {
        let report = store.integrity_check()?;
        assert!(report.is_clean(), "{report:?}");
        Ok(report.deposits)
    }
    fn maintenance(store: &LogStore) -> StoreResult<()> {
        store.compact_step(16)?;
        store.maintenance_step()
    }
}

const WORKERS: usize = 4;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Recovers a copy of the crash image `disk` and checks it against the
/// journal and with the backend's full integrity check; returns the
/// deposits held.
fn verify<B: Backend>(
    disk: &FaultFs,
    dir: &Path,
    model: &mut [journal::Queue],
    counts: &mut Counts,
) -> StoreResult<u64> {
    let store = B::open(&disk.copy(), dir)?;
    let held = journal::check(&store.read()?, model, counts)?;
    assert_eq!(B::integrity(store)?, held);
    Ok(held)
}

/// One life on the crash image `disk`: recover, run the load, cut the
/// power at a random instant; applies the journal up to the cut and
/// returns the crash image.
/// What the run has learnt so far.
#[derive(Default)]
struct Tally {
    model: Vec<journal::Queue>,
    counts: Counts,
    cuts: CrashReport,
    cuts_in_writes: u64,
}

fn life<B: Backend>(
    disk: &FaultFs,
    dir: &Path,
    rng: &mut Rng,
    life: u64,
    tally: &mut Tally,
) -> StoreResult<FaultFs> {
    let store = Arc::new(B::open(disk, dir)?);
    let journal: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(vec!["open".into()]));
    // How many journal lines were complete: read at the instant of a cut.
    let written = Arc::new(AtomicU64::new(1));
    let running = Arc::new(AtomicBool::new(true));
    let committer = Writer::start(
        Arc::clone(&store),
        Arc::new(ManualClock::new(1_000 + life)),
        None,
        MAX_BATCH,
    )?;
    let mut threads = Vec::new();
    for w in 0..WORKERS {
        let (committer, store, journal, written, running) = (
            committer.clone(),
            Arc::clone(&store),
            Arc::clone(&journal),
            Arc::clone(&written),
            Arc::clone(&running),
        );
        threads.push(std::thread::spawn(move || {
            let say = |line: String| {
                if let Ok(mut j) = journal.lock() {
                    j.push(line);
                    written.store(j.len() as u64, Ordering::SeqCst);
                }
            };
            journal::worker(&committer, &*store, life + 1, w, WORKERS, &say, &|| {
                running.load(Ordering::Relaxed)
            })
        }));
    }
    {
        let (store, running) = (Arc::clone(&store), Arc::clone(&running));
        threads.push(std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                B::maintenance(&store).map_err(|e| e.to_string())?;
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        }));
    }
    // The instant. Half the lives: inside a random write among the next
    // 400 (mid-commit, mid-checkpoint, mid-rotation). The others: at once
    // (during recovery's own writes) one in five, else after 1–40 ms.
    // Acknowledgements are journaled after their commit returned, so every
    // one journaled before the cut was durable before it.
    let armed = rng.below(2) == 0;
    if armed {
        let written = Arc::clone(&written);
        disk.arm_crash(
            1 + rng.below(400),
            Rng::new(rng.next_u64()),
            Box::new(move || written.load(Ordering::SeqCst)),
        );
    } else if rng.below(5) != 0 {
        std::thread::sleep(Duration::from_micros(1_000 + rng.below(39_000)));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let cut = loop {
        if !armed || Instant::now() > deadline {
            break None;
        }
        if let Some(cut) = disk.take_cut() {
            break Some(cut);
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    let (image, lines) = match cut {
        Some((image, report, mark)) => {
            tally.cuts += report;
            tally.cuts_in_writes += 1;
            let lines = journal
                .lock()
                .map_err(|_| rltp_storage::StoreError::Closed)?;
            (image, lines[..mark as usize].to_vec())
        }
        None => {
            disk.disarm();
            let lines = journal
                .lock()
                .map_err(|_| rltp_storage::StoreError::Closed)?;
            let (image, report) = disk.crash(rng);
            tally.cuts += report;
            (image, lines.clone())
        }
    };
    running.store(false, Ordering::Relaxed);
    drop(committer);
    for thread in threads {
        if let Err(e) = thread.join().unwrap_or_else(|_| Err("panicked".into())) {
            return Err(rltp_storage::StoreError::Io(std::io::Error::other(
                format!("life {life}: a worker failed before the cut: {e}"),
            )));
        }
    }
    // The old disk carries on without us; its store is closed on it.
    drop(store);
    journal::apply_journal(&mut tally.model, &lines, &mut tally.counts);
    Ok(image)
}

fn run<B: Backend>() -> StoreResult<()> {
    let instants = knob("RLTP_POWER_LOSS_INSTANTS", 250);
    let seed = knob(
        "RLTP_POWER_LOSS_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    );
    println!("power loss ({}): seed {seed}", B::NAME);
    let mut rng = Rng::new(seed);
    let dir = Path::new("/data/store");
    let mut disk = FaultFs::new();
    let mut tally = Tally {
        model: journal::model(),
        ..Tally::default()
    };
    let started = Instant::now();
    let mut held = 0;
    for n in 0..instants {
        disk = life::<B>(&disk, dir, &mut rng, n, &mut tally)?;
        held = verify::<B>(&disk, dir, &mut tally.model, &mut tally.counts)?;
        if std::env::var("RLTP_POWER_LOSS_VERBOSE").is_ok() {
            let (files, bytes) = disk.usage();
            eprintln!(
                "life {n}: {:.2} s, {held} deposits held, {files} files of {bytes} bytes",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let (counts, cuts) = (&tally.counts, &tally.cuts);
    println!(
        "power loss ({}): {instants} instants ({} inside a write) in {:.1} s; acknowledged {} admissions, {} conclusions, \
         {} registrations and releases; at the cuts {} writes not covered by an fsync ({} dropped, \
         {} torn, {} kept) and {} names not yet durable; verified {} admissions present with their \
         bytes, {} conclusions absent with their departure, {} binding states; {} in-flight outcomes \
         adopted; {held} deposits held at the end; lost 0, resurrected 0, integrity clean",
        B::NAME,
        tally.cuts_in_writes,
        started.elapsed().as_secs_f64(),
        counts.acknowledged_appends,
        counts.acknowledged_removals,
        counts.acknowledged_bindings,
        cuts.pending,
        cuts.dropped,
        cuts.torn,
        cuts.kept,
        cuts.undecided_names,
        counts.appends_verified,
        counts.removals_verified,
        counts.bindings_verified,
        counts.in_flight_resolved,
    );
    assert!(
        counts.acknowledged_appends >= instants,
        "the load did too little to test anything"
    );
    assert!(cuts.torn > 0 && cuts.dropped > 0, "{cuts:?}");
    assert!(tally.cuts_in_writes > 0);
    Ok(())
}

#[test]
fn power_loss_at_random_instants_loses_nothing_acknowledged() -> StoreResult<()> {
    run::<Redb>()
}

#[test]
fn power_loss_at_random_instants_loses_nothing_acknowledged_log_store() -> StoreResult<()> {
    run::<Log>()
}
