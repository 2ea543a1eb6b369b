//! Store-alone benchmark (issues 3 and 15): the embedded stores against
//! each other.
//!
//! Runs, in one process, each design through the group-commit
//! group-commit writer (`rltp_server::writer::Writer`, no engine prelude) with durable commits (fsync), N operations in flight
//! (spread over up to 4 producer threads), over 1024 queues, for a fixed
//! duration per run, interleaved design by design (A B A B …) at each
//! in-flight level. Designs: `log` (the log store, the default of `serve`),
//! `segments` (the redb store with its operation log, the previous
//! default), `inline`, `segments-full-repair`, `every-commit-durable`.
//!
//! Workloads (`--workload`):
//! - `submit`: what a submission does in the store: s1 binding lookup,
//!   s3 identity lookup, append, schedule its give-up;
//! - `conclude`: what a conclusion does: the identity lookup, the removal,
//!   unscheduling its give-up, its departure record and forget entry —
//!   over a store filled beforehand with one deposit per operation.
//!
//! Prints one row per run and a summary with the ratio of each design to
//! the first one named.
//!
//! ```text
//! cargo run --release -p carrier-bench --bin store-bench -- \
//!     [--secs 5] [--rounds 2] [--inflight 1,64,256] [--workload submit|conclude] \
//!     [--designs log,segments] [--dir PATH]
//! cargo run --release -p carrier-bench --bin store-bench -- scale \
//!     [--bindings 1000000] [--deposits 1000000] [--dir PATH]
//! ```
//! `scale` fills a log store to that size in a child process, reads its
//! resident memory idle and while deposits go on, SIGKILLs it, and times
//! the open after the kill up to the first answered read.
//! `disk B/dep` = bytes of all store files (allocated blocks) / deposits
//! held; `dev B/op` = bytes the block device wrote per append during the run
//! (`/proc/diskstats`, whole machine: noisy when other work runs).

use rltp_proofs::multikey::Rkid;
use rltp_server::clock::SystemClock;
use rltp_server::defaults::MAX_BATCH;
use rltp_server::writer::{Job, Ticket, Writer};
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::redb_store::{Placement, RedbOptions, RedbStore};
use rltp_storage::{
    Binding, Departure, DepartureRecord, DepositId, Due, Phase, ReadTxn as _, Store, StoreError,
    WriteTxn,
};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const QUEUES: u64 = 1024;
const PAYLOAD: usize = 1024;
const WARM_UP: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug)]
enum Design {
    /// The log store.
    Log,
    /// The log store without zero-filling segments ahead of use.
    LogNoPrealloc,
    Inline,
    Segments,
    SegmentsFullRepair,
    /// The operation log written, and every redb commit durable too (what
    /// the store did before the log: `checkpoint_ops` 1).
    SegmentsEveryCommitDurable,
}

impl Design {
    fn parse(s: &str) -> Option<Design> {
        match s {
            "log" => Some(Design::Log),
            "log-no-prealloc" => Some(Design::LogNoPrealloc),
            "inline" => Some(Design::Inline),
            "segments" => Some(Design::Segments),
            "segments-full-repair" => Some(Design::SegmentsFullRepair),
            "every-commit-durable" => Some(Design::SegmentsEveryCommitDurable),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Design::Log => "log",
            Design::LogNoPrealloc => "log-no-prealloc",
            Design::Inline => "inline",
            Design::Segments => "segments",
            Design::SegmentsFullRepair => "segments-full-repair",
            Design::SegmentsEveryCommitDurable => "every-commit-durable",
        }
    }
    fn options(self) -> RedbOptions {
        let mut options = RedbOptions::default();
        match self {
            Design::Inline => options.placement = Placement::Inline,
            Design::Log | Design::LogNoPrealloc | Design::Segments => {}
            Design::SegmentsFullRepair => options.quick_repair = false,
            Design::SegmentsEveryCommitDurable => options.checkpoint_ops = 1,
        }
        options
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Submit,
    Conclude,
}

struct Config {
    workload: Workload,
    secs: f64,
    rounds: usize,
    inflight: Vec<usize>,
    designs: Vec<Design>,
    dir: PathBuf,
    /// Overrides `RedbOptions::checkpoint_ops` of every design.
    checkpoint_ops: Option<u64>,
    /// Overrides `RedbOptions::cache_bytes` (MiB) of every design.
    cache_mib: Option<usize>,
}

fn parse_args() -> Result<Config, String> {
    let mut config = Config {
        workload: Workload::Submit,
        secs: 5.0,
        rounds: 2,
        inflight: vec![1, 64, 256],
        designs: vec![Design::Log, Design::Segments],
        dir: std::env::temp_dir().join(format!("rltp-store-bench-{}", std::process::id())),
        checkpoint_ops: None,
        cache_mib: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--" {
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--workload" => {
                config.workload = match value.as_str() {
                    "submit" => Workload::Submit,
                    "conclude" => Workload::Conclude,
                    other => return Err(format!("unknown workload {other}")),
                }
            }
            "--secs" => config.secs = value.parse().map_err(|_| "bad --secs")?,
            "--rounds" => config.rounds = value.parse().map_err(|_| "bad --rounds")?,
            "--inflight" => {
                config.inflight = value
                    .split(',')
                    .map(|v| v.parse().map_err(|_| format!("bad in-flight {v}")))
                    .collect::<Result<_, _>>()?;
            }
            "--designs" => {
                config.designs = value
                    .split(',')
                    .map(|v| Design::parse(v).ok_or(format!("unknown design {v}")))
                    .collect::<Result<_, _>>()?;
            }
            "--dir" => config.dir = PathBuf::from(value),
            "--checkpoint-ops" => {
                config.checkpoint_ops = Some(value.parse().map_err(|_| "bad --checkpoint-ops")?);
            }
            "--cache-mib" => {
                config.cache_mib = Some(value.parse().map_err(|_| "bad --cache-mib")?);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(config)
}

struct Outcome {
    appends: u64,
    secs: f64,
    batches: u64,
    p50_ms: f64,
    p99_ms: f64,
    cpu: f64,
    disk_per_deposit: f64,
    device_per_append: f64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn rkid_of(queue: u64) -> Rkid {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&queue.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    bytes[24..].copy_from_slice(&queue.to_be_bytes());
    Rkid::from_bytes(bytes)
}

/// Whole-disk sectors written, summed over vd*/sd*/nvme*n* devices.
fn device_bytes_written() -> u64 {
    let Ok(stats) = std::fs::read_to_string("/proc/diskstats") else {
        return 0;
    };
    stats
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = *fields.get(2)?;
            let whole = (name.starts_with("vd") || name.starts_with("sd"))
                && !name.ends_with(|c: char| c.is_ascii_digit())
                || (name.starts_with("nvme") && !name.contains('p'));
            if !whole {
                return None;
            }
            fields.get(9)?.parse::<u64>().ok().map(|s| s * 512)
        })
        .sum()
}

/// CPU seconds used by this process so far (user + system).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let after = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    ticks as f64 / 100.0
}

fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}

/// The store of a design, behind the trait.
fn run(
    design: Design,
    inflight: usize,
    config: &Config,
    dir: &Path,
) -> Result<Outcome, StoreError> {
    let _ = std::fs::remove_dir_all(dir);
    match design {
        Design::Log | Design::LogNoPrealloc => {
            let options = LogOptions {
                preallocate: matches!(design, Design::Log),
                ..LogOptions::default()
            };
            let store = LogStore::open_with(dir, options)?;
            run_on(Arc::new(store), inflight, config, dir)
        }
        _ => {
            let mut options = design.options();
            if let Some(ops) = config.checkpoint_ops {
                options.checkpoint_ops = ops;
            }
            if let Some(mib) = config.cache_mib {
                options.cache_bytes = mib << 20;
            }
            run_on(
                Arc::new(RedbStore::open_with(dir, options)?),
                inflight,
                config,
                dir,
            )
        }
    }
}

/// The bytes of deposit `n` of producer `p` (1 KiB).
fn envelope(producer: u64, n: u64) -> Vec<u8> {
    let mut bytes = vec![0x5a_u8; PAYLOAD];
    bytes[..8].copy_from_slice(&producer.to_be_bytes());
    bytes[8..16].copy_from_slice(&n.to_be_bytes());
    bytes
}

/// Deposits filled per producer before a conclude run.
const CONCLUDE_FILL: u64 = 400_000;

fn run_on<S: Store>(
    store: Arc<S>,
    inflight: usize,
    config: &Config,
    dir: &Path,
) -> Result<Outcome, StoreError> {
    let secs = config.secs;
    let producers = inflight.clamp(1, 4);
    {
        let mut txn = store.begin_write()?;
        for q in 0..QUEUES {
            txn.put_binding(
                &rkid_of(q),
                &Binding {
                    phase: Phase::Live,
                    generation: 1,
                    principal: [7; 32],
                    last_collection_at: now_ms(),
                },
            )?;
        }
        store.commit(txn)?;
    }
    if config.workload == Workload::Conclude {
        // What the conclusions remove: producer p's deposit n in queue n % QUEUES.
        let fill = CONCLUDE_FILL / producers as u64;
        for p in 0..producers as u64 {
            for chunk in (0..fill).collect::<Vec<_>>().chunks(4096) {
                let mut txn = store.begin_write()?;
                for &n in chunk {
                    let rkid = rkid_of(n % QUEUES);
                    let d = txn.append_deposit(&rkid, &envelope(p, n), 1, 86_400_000)?;
                    txn.schedule(d.give_up_at, &Due::GiveUp(rkid, d.seq))?;
                }
                store.commit(txn)?;
            }
        }
    }
    let committer = Writer::start(Arc::clone(&store), Arc::new(SystemClock), None, MAX_BATCH)?;
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    let workload = config.workload;
    for p in 0..producers {
        let quota = inflight / producers + usize::from(p < inflight % producers);
        let committer = committer.clone();
        let (measuring, stop) = (Arc::clone(&measuring), Arc::clone(&stop));
        let fill = CONCLUDE_FILL / producers as u64;
        handles.push(std::thread::spawn(move || {
            produce(
                p as u64, quota, workload, fill, &committer, &measuring, &stop,
            )
        }));
    }
    std::thread::sleep(WARM_UP);
    let batches_before = committer.stats().batches.load(Ordering::Relaxed);
    let device_before = device_bytes_written();
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs_f64(secs));
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let batches = committer.stats().batches.load(Ordering::Relaxed) - batches_before;
    let device = device_bytes_written().saturating_sub(device_before);
    let cpu = (cpu_seconds() - cpu_before) / elapsed;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    let mut failures = 0;
    for handle in handles {
        if let Ok((mut l, f)) = handle.join() {
            latencies.append(&mut l);
            failures += f;
        }
    }
    if failures > 0 {
        eprintln!("{failures} operations failed");
    }
    drop(committer);
    let held = store
        .read()
        .and_then(|r| rltp_storage::ReadTxn::occupancy(&r))?;
    drop(store);
    let disk = allocated_bytes(dir);
    let _ = std::fs::remove_dir_all(dir);
    latencies.sort_unstable();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d: &Duration| d.as_secs_f64() * 1e3)
    };
    let appends = latencies.len() as u64;
    Ok(Outcome {
        appends,
        secs: elapsed,
        batches,
        p50_ms: pick(0.5),
        p99_ms: pick(0.99),
        cpu,
        disk_per_deposit: disk as f64 / held.deposits.max(1) as f64,
        device_per_append: device as f64 / appends.max(1) as f64,
    })
}

type Pending = (Instant, bool, Ticket<()>);

/// Keeps `quota` operations in flight until `stop`; returns the
/// latencies of the operations submitted while `measuring`, and the
/// failures.
fn produce(
    producer: u64,
    quota: usize,
    workload: Workload,
    fill: u64,
    committer: &Writer,
    measuring: &AtomicBool,
    stop: &AtomicBool,
) -> (Vec<Duration>, u64) {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ (producer + 1).wrapping_mul(0x9e37_79b9);
    let mut counter = 0u64;
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut latencies = Vec::new();
    let mut failures = 0;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        while !stopping && pending.len() < quota {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let receiver = match workload {
                Workload::Submit => {
                    counter += 1;
                    let rkid = rkid_of(rng % QUEUES);
                    // Far above what a conclude fill used.
                    let bytes = envelope(producer, (1 << 40) + counter);
                    committer.submit(Job::harness(move |txn: &mut dyn WriteTxn, now, _| {
                        // s1 and s3 as the engine does them, then the append.
                        if !txn.holds_binding(&rkid)? {
                            return Err(StoreError::Closed);
                        }
                        if txn.deposit_by_id(&rkid, &DepositId::of(&bytes))?.is_some() {
                            return Ok(());
                        }
                        let deposit = txn.append_deposit(&rkid, &bytes, now, now + 86_400_000)?;
                        txn.schedule(deposit.give_up_at, &Due::GiveUp(rkid, deposit.seq))
                    }))
                }
                Workload::Conclude => {
                    if counter >= fill {
                        break;
                    }
                    let n = counter;
                    counter += 1;
                    let rkid = rkid_of(n % QUEUES);
                    let id = DepositId::of(&envelope(producer, n));
                    committer.submit(Job::harness(move |txn: &mut dyn WriteTxn, _, _| {
                        let Some(d) = txn.deposit_by_id(&rkid, &id)? else {
                            return Ok(());
                        };
                        txn.remove_deposit(&rkid, d.seq)?;
                        txn.unschedule(d.give_up_at, &Due::GiveUp(rkid, d.seq))?;
                        let record = DepartureRecord {
                            departure: Departure::Concluded,
                            forget_at: d.give_up_at,
                        };
                        txn.put_departure(&rkid, &id, &record)?;
                        txn.schedule(record.forget_at, &Due::Forget(rkid, id))
                    }))
                }
            };
            pending.push_back((Instant::now(), measuring.load(Ordering::Relaxed), receiver));
        }
        let Some((started, measured, receiver)) = pending.pop_front() else {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        match receiver.wait() {
            Ok(()) if measured => latencies.push(started.elapsed()),
            Ok(()) => {}
            _ => failures += 1,
        }
    }
    (latencies, failures)
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    match args.peek().map(String::as_str) {
        Some("scale") => return scale::main(args.skip(1).collect()),
        Some("scale-child") => return scale::child(args.skip(1).collect()),
        Some("reopen") => return scale::reopen(args.skip(1).collect()),
        _ => {}
    }
    let config = match parse_args() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("store-bench: {error}");
            std::process::exit(2);
        }
    };
    println!(
        "store-bench: {:?}, {QUEUES} queues, {PAYLOAD} B envelopes, {} s per run after {} ms warm-up, {} round(s), dir {}",
        config.workload,
        config.secs,
        WARM_UP.as_millis(),
        config.rounds,
        config.dir.display()
    );
    println!(
        "| design | in flight | round | appends/s | mean batch | p50 ms | p99 ms | CPU cores | disk B/dep | dev B/op |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut summary: Vec<(Design, usize, Vec<f64>, Vec<f64>)> = Vec::new();
    for &inflight in &config.inflight {
        for round in 0..config.rounds {
            for &design in &config.designs {
                match run(design, inflight, &config, &config.dir) {
                    Ok(o) => {
                        let rate = o.appends as f64 / o.secs;
                        println!(
                            "| {} | {inflight} | {round} | {rate:.0} | {:.1} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} |",
                            design.name(),
                            o.appends as f64 / o.batches.max(1) as f64,
                            o.p50_ms,
                            o.p99_ms,
                            o.cpu,
                            o.disk_per_deposit,
                            o.device_per_append,
                        );
                        match summary
                            .iter_mut()
                            .find(|(d, n, _, _)| d.name() == design.name() && *n == inflight)
                        {
                            Some((_, _, rates, disks)) => {
                                rates.push(rate);
                                disks.push(o.disk_per_deposit);
                            }
                            None => summary.push((
                                design,
                                inflight,
                                vec![rate],
                                vec![o.disk_per_deposit],
                            )),
                        }
                    }
                    Err(error) => eprintln!("{} x{inflight}: {error}", design.name()),
                }
            }
        }
    }
    println!("\nsummary (mean over rounds; ratio: this design ÷ the first one named):");
    println!("| design | in flight | ops/s | ratio | disk B/dep |");
    println!("|---|---|---|---|---|");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    for (design, inflight, rates, disks) in &summary {
        let first = summary
            .iter()
            .find(|(_, n, _, _)| n == inflight)
            .map_or(1.0, |(_, _, r, _)| mean(r));
        println!(
            "| {} | {inflight} | {:.0} | {:.2} | {:.0} |",
            design.name(),
            mean(rates),
            mean(rates) / first.max(1e-9),
            mean(disks)
        );
    }
}

/// `scale`: a log store at 10⁶ bindings and 10⁶ deposits (module docs).
mod scale {
    use super::*;
    use std::io::{BufRead, Write};
    use std::process::{Command, Stdio};

    fn status_kib(pid: u32, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    fn rss_kib(pid: u32) -> u64 {
        status_kib(pid, "VmRSS:")
    }

    fn flag(args: &[String], name: &str, default: u64) -> u64 {
        args.windows(2)
            .find(|w| w[0] == name)
            .and_then(|w| w[1].parse().ok())
            .unwrap_or(default)
    }

    fn dir(args: &[String]) -> PathBuf {
        args.windows(2)
            .find(|w| w[0] == "--dir")
            .map(|w| PathBuf::from(&w[1]))
            .unwrap_or_else(|| std::env::temp_dir().join("rltp-store-bench-scale"))
    }

    fn scale_rkid(n: u64) -> Rkid {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&n.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
        bytes[8..16].copy_from_slice(&n.to_be_bytes());
        Rkid::from_bytes(bytes)
    }

    /// The child: fills, reports, runs deposits until killed.
    pub(super) fn child(args: Vec<String>) {
        let (bindings, deposits) = (
            flag(&args, "--bindings", 1_000_000),
            flag(&args, "--deposits", 1_000_000),
        );
        let dir = dir(&args);
        let say = |line: String| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        };
        let started = Instant::now();
        let store = Arc::new(LogStore::open(&dir).expect("open"));
        let now = now_ms();
        const CHUNK: u64 = 8192;
        for start in (0..bindings).step_by(CHUNK as usize) {
            let mut txn = store.begin_write().expect("begin");
            for n in start..(start + CHUNK).min(bindings) {
                let rkid = scale_rkid(n);
                txn.put_binding(
                    &rkid,
                    &Binding {
                        phase: Phase::Live,
                        generation: 1,
                        principal: [7; 32],
                        last_collection_at: now,
                    },
                )
                .expect("binding");
                // Registered over time: 5 000 a second.
                txn.schedule(now + n / 5 + 30 * 86_400_000, &Due::OrphanExpiry(rkid))
                    .expect("orphan");
            }
            store.commit(txn).expect("commit");
        }
        say(format!(
            "bindings {bindings} in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        let started = Instant::now();
        for start in (0..deposits).step_by(CHUNK as usize) {
            let mut txn = store.begin_write().expect("begin");
            for n in start..(start + CHUNK).min(deposits) {
                let rkid = scale_rkid(n % bindings.max(1));
                // Admitted over time: 50 000 a second.
                let at = now + n / 50;
                let d = txn
                    .append_deposit(&rkid, &envelope(9, n), at, at + 14 * 86_400_000)
                    .expect("append");
                txn.schedule(d.give_up_at, &Due::GiveUp(rkid, d.seq))
                    .expect("give up");
            }
            store.commit(txn).expect("commit");
        }
        say(format!(
            "deposits {deposits} in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        // Let the snapshot the fill triggered finish, then idle.
        std::thread::sleep(Duration::from_secs(3));
        say(format!("index {}", store.index_bytes()));
        say("filled".into());
        // Deposits go on (a submission each, 64 in flight) until the parent
        // kills us; it reads our memory meanwhile.
        let committer = Writer::start(Arc::clone(&store), Arc::new(SystemClock), None, MAX_BATCH)
            .expect("committer");
        let counted = Arc::new(std::sync::atomic::AtomicU64::new(0));
        for p in 0..4u64 {
            let (committer, counted) = (committer.clone(), Arc::clone(&counted));
            std::thread::spawn(move || {
                let mut pending = VecDeque::new();
                let mut n = 0u64;
                loop {
                    while pending.len() < 16 {
                        n += 1;
                        let rkid = scale_rkid((p * 7_919 + n * 104_729) % bindings.max(1));
                        let bytes = envelope(100 + p, n);
                        pending.push_back(committer.submit(Job::harness(
                            move |txn: &mut dyn WriteTxn, now, _| {
                                if !txn.holds_binding(&rkid)? {
                                    return Err(StoreError::Closed);
                                }
                                let d = txn.append_deposit(&rkid, &bytes, now, now + 1_000_000)?;
                                txn.schedule(d.give_up_at, &Due::GiveUp(rkid, d.seq))
                            },
                        )));
                    }
                    if let Some(r) = pending.pop_front() {
                        let _ = r.wait();
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let mut last = 0;
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let now = counted.load(Ordering::Relaxed);
            say(format!("rate {}", now - last));
            last = now;
        }
    }

    /// The parent: runs the child, reads its memory, kills it, times the
    /// recovery.
    pub(super) fn main(args: Vec<String>) {
        let dir = dir(&args);
        let _ = std::fs::remove_dir_all(&dir);
        let exe = std::env::current_exe().expect("exe");
        let mut child = Command::new(exe)
            .arg("scale-child")
            .args(&args)
            .args(["--dir".to_owned(), dir.display().to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("child");
        let pid = child.id();
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut rates = Vec::new();
        let mut peak = 0;
        while let Some(Ok(line)) = lines.next() {
            println!("child: {line}");
            if line == "filled" {
                let idle = rss_kib(pid);
                println!(
                    "RSS idle at scale: {idle} KiB ({:.1} MB; anonymous {} KiB, file {} KiB)",
                    idle as f64 * 1024.0 / 1e6,
                    status_kib(pid, "RssAnon:"),
                    status_kib(pid, "RssFile:")
                );
            }
            if let Some(rate) = line.strip_prefix("rate ") {
                rates.push(rate.parse::<u64>().unwrap_or(0));
                peak = peak.max(rss_kib(pid));
                if rates.len() >= 5 {
                    break;
                }
            }
        }
        println!(
            "RSS under load (5 s of deposits, {} /s): peak {peak} KiB ({:.1} MB)",
            rates.iter().skip(1).sum::<u64>() / 4,
            peak as f64 * 1024.0 / 1e6
        );
        // SIGKILL: no close, no snapshot at close.
        let _ = child.kill();
        let _ = child.wait();
        let started = Instant::now();
        let store = LogStore::open(&dir).expect("open after the kill");
        let opened = started.elapsed();
        let first = store
            .read()
            .and_then(|r| r.deposits(&scale_rkid(7), None, 16))
            .expect("first read");
        let served = started.elapsed();
        let report = store.opened();
        println!(
            "restart after SIGKILL: open {:.3} s, first read answered at {:.3} s ({} deposits in it); \
             snapshot {:?} of {} bytes, replayed {} records / {} bytes in {:.3} s",
            opened.as_secs_f64(),
            served.as_secs_f64(),
            first.len(),
            report.snapshot,
            report.snapshot_bytes,
            report.records,
            report.replayed_bytes,
            report.replay_micros as f64 / 1e6
        );
        println!(
            "RSS after the restart (this process): {} KiB",
            rss_kib(std::process::id())
        );
        drop(store);
        if !args.iter().any(|a| a == "--keep") {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// `reopen --dir D`: times an open of an existing store (a copy made
    /// first, so that the original is opened the same way every time).
    pub(super) fn reopen(args: Vec<String>) {
        let dir = dir(&args);
        let started = Instant::now();
        let store = LogStore::open_with(
            &dir,
            LogOptions {
                background: false,
                snapshot_at_close: false,
                ..LogOptions::default()
            },
        )
        .expect("open");
        let report = store.opened();
        println!(
            "open {:.3} s: snapshot {} bytes, replayed {} records / {} bytes in {:.3} s; RSS {} KiB",
            started.elapsed().as_secs_f64(),
            report.snapshot_bytes,
            report.records,
            report.replayed_bytes,
            report.replay_micros as f64 / 1e6,
            rss_kib(std::process::id())
        );
    }
}
