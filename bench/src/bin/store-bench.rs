//! Store-alone benchmark for issue 3: where should envelope bytes live?
//!
//! Runs, in one process, the redb store with 1 KiB envelopes **inline** in
//! redb against redb + **segments** (key–value separation), each through the
//! group-commit writer (`rltp_carrier::writer::Writer`, no engine prelude) with durable commits (fsync), N operations in
//! flight (spread over up to 4 producer threads), over 1024 queues, for a
//! fixed duration per run, interleaved design by design (A B A B …) at each
//! in-flight level. Each operation does what a submission does in the
//! store: s1 binding lookup, s3 identity lookup, append, schedule its
//! give-up. Prints one row per run and a summary.
//!
//! ```text
//! cargo run --release -p carrier-bench --bin store-bench -- \
//!     [--secs 5] [--rounds 2] [--inflight 1,64,256] \
//!     [--designs inline,segments,segments-full-repair] [--dir PATH]
//! ```
//! `disk B/dep` = bytes of all store files (allocated blocks) / deposits
//! held; `dev B/op` = bytes the block device wrote per append during the run
//! (`/proc/diskstats`, whole machine: noisy when other work runs).

use rltp_carrier::clock::SystemClock;
use rltp_carrier::defaults::MAX_BATCH;
use rltp_carrier::writer::{CommitError, Writer};
use rltp_proofs::multikey::Rkid;
use rltp_storage::redb_store::{Placement, RedbOptions, RedbStore};
use rltp_storage::{Binding, DepositId, Due, Phase, Store, StoreError, WriteTxn};
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
            "inline" => Some(Design::Inline),
            "segments" => Some(Design::Segments),
            "segments-full-repair" => Some(Design::SegmentsFullRepair),
            "every-commit-durable" => Some(Design::SegmentsEveryCommitDurable),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
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
            Design::Segments => {}
            Design::SegmentsFullRepair => options.quick_repair = false,
            Design::SegmentsEveryCommitDurable => options.checkpoint_ops = 1,
        }
        options
    }
}

struct Config {
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
        secs: 5.0,
        rounds: 2,
        inflight: vec![1, 64, 256],
        designs: vec![Design::Inline, Design::Segments],
        dir: std::env::temp_dir().join(format!("rltp-store-bench-{}", std::process::id())),
        checkpoint_ops: None,
        cache_mib: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
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

fn run(
    design: Design,
    inflight: usize,
    config: &Config,
    dir: &Path,
) -> Result<Outcome, StoreError> {
    let secs = config.secs;
    let _ = std::fs::remove_dir_all(dir);
    let mut options = design.options();
    if let Some(ops) = config.checkpoint_ops {
        options.checkpoint_ops = ops;
    }
    if let Some(mib) = config.cache_mib {
        options.cache_bytes = mib << 20;
    }
    let store = Arc::new(RedbStore::open_with(dir, options)?);
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
    let committer = Writer::start(Arc::clone(&store), Arc::new(SystemClock), None, MAX_BATCH)?;
    let producers = inflight.clamp(1, 4);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for p in 0..producers {
        let quota = inflight / producers + usize::from(p < inflight % producers);
        let committer = committer.clone();
        let (measuring, stop) = (Arc::clone(&measuring), Arc::clone(&stop));
        handles.push(std::thread::spawn(move || {
            produce(p as u64, quota, &committer, &measuring, &stop)
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

type Pending = (
    Instant,
    bool,
    tokio::sync::oneshot::Receiver<Result<(), CommitError>>,
);

/// Keeps `quota` submissions in flight until `stop`; returns the latencies
/// of the operations submitted while `measuring`, and the failures.
fn produce(
    producer: u64,
    quota: usize,
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
            counter += 1;
            let rkid = rkid_of(rng % QUEUES);
            let mut bytes = vec![0x5a_u8; PAYLOAD];
            bytes[..8].copy_from_slice(&producer.to_be_bytes());
            bytes[8..16].copy_from_slice(&counter.to_be_bytes());
            let receiver = committer.submit(move |txn: &mut dyn WriteTxn, now, _| {
                // s1 and s3 as the engine does them, then the append.
                if txn.binding(&rkid)?.is_none() {
                    return Err(StoreError::Closed);
                }
                if txn.deposit_by_id(&rkid, &DepositId::of(&bytes))?.is_some() {
                    return Ok(());
                }
                let deposit = txn.append_deposit(&rkid, &bytes, now, now + 86_400_000)?;
                txn.schedule(deposit.give_up_at, &Due::GiveUp(rkid, deposit.seq))
            });
            pending.push_back((Instant::now(), measuring.load(Ordering::Relaxed), receiver));
        }
        let Some((started, measured, receiver)) = pending.pop_front() else {
            break;
        };
        match receiver.blocking_recv() {
            Ok(Ok(())) if measured => latencies.push(started.elapsed()),
            Ok(Ok(())) => {}
            _ => failures += 1,
        }
    }
    (latencies, failures)
}

fn main() {
    let config = match parse_args() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("store-bench: {error}");
            std::process::exit(2);
        }
    };
    println!(
        "store-bench: {QUEUES} queues, {PAYLOAD} B envelopes, {} s per run after {} ms warm-up, {} round(s), dir {}",
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
    println!("\nsummary (mean over rounds):");
    println!("| design | in flight | appends/s | disk B/dep |");
    println!("|---|---|---|---|");
    for (design, inflight, rates, disks) in summary {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        println!(
            "| {} | {inflight} | {:.0} | {:.0} |",
            design.name(),
            mean(&rates),
            mean(&disks)
        );
    }
}
