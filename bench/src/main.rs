//! `carrier-bench`: the benchmark harness of issue 5.
//!
//! It starts a release `rltp-carrier serve` on loopback with a fresh
//! embedded store in a temp dir, drives it from this process over real
//! QUIC with the client library, runs the Redis peer (`appendonly yes`,
//! `appendfsync always`) with the same work, pair by pair, and writes a
//! JSON report (`--out`), an SVG chart and a human table.
//!
//! ```text
//! carrier-bench --quick --out /tmp/bench-quick.json   # < 2 min, CI smoke
//! carrier-bench --out report.json                     # full run
//! carrier-bench --check-report report.json            # shape check only
//! ```
//!
//! Order of the run (numbers as in the issue): 7 disk probe,
//! 4 registration, 1 deposit throughput on 100 queues, 3 drain of what 1
//! deposited, the chart's in-flight sweep, 2 latency at 50% of peak, 1
//! again on many queues, 6 envelope sizes, 5 scale (its own carrier).

// A benchmark reads top to bottom like a test: its long scenario and report functions are not
// split yet (issue 22 bounds the product crates; the bench is not shipped).
#![allow(clippy::too_many_lines)]

mod carrier;
mod chart;
mod disk;
mod envelope;
mod load;
mod procfs;
mod recipient;
mod redis;
mod report;
mod scaleout;
mod stats;
mod transport;

use anyhow::{Context as _, bail};
use carrier::{CarrierProc, Recipients};
use clap::Parser;
use disk::DiskProbe;
use load::{LoadSpec, Queue, System, Targets};
use redis::RedisProc;
use report::{
    Cell, DrainPair, LatencyResult, Machine, Pair, Report, ScaleResult, Settings, Versions,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The benchmark harness of issue 5.
#[derive(Debug, Parser)]
#[command(name = "carrier-bench", version, about)]
struct Cli {
    /// CI smoke mode: small counts, one repetition, under 2 minutes.
    #[arg(long)]
    quick: bool,
    /// Where to write the JSON report.
    #[arg(long, default_value = "carrier-bench-report.json")]
    out: PathBuf,
    /// Also write the results as Markdown tables to this file (with
    /// `--check-report`: those of the checked report).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Where to write the SVG chart (default: the report path with `.svg`).
    #[arg(long)]
    chart: Option<PathBuf>,
    /// The carrier binary (default: `rltp-carrier` next to this executable).
    #[arg(long)]
    carrier_bin: Option<PathBuf>,
    /// The Redis server binary (default: `redis-server` on PATH; install
    /// it with `bench/setup.sh`).
    #[arg(long)]
    redis_bin: Option<PathBuf>,
    /// Run without the Redis peer.
    #[arg(long)]
    no_peer: bool,
    /// Where the temp dirs go (default: the system temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Scenario 5: bindings to register (full default 1000000).
    #[arg(long)]
    scale_bindings: Option<u64>,
    /// Scenario 5: deposits to hold, exactly (full default 1000000).
    #[arg(long)]
    scale_deposits: Option<u64>,
    /// Skip scenario 5.
    #[arg(long)]
    no_scale: bool,
    /// Run only scenario 5 and print its figures as JSON (no report).
    #[arg(long, conflicts_with = "no_scale")]
    only_scale: bool,
    /// A/B pairs per scenario-1 cell (quick 1, full 3).
    #[arg(long)]
    reps: Option<usize>,
    /// Scenario-1 measurement window, seconds (quick 1.5, full 6).
    #[arg(long)]
    measure_secs: Option<f64>,
    /// Queues of scenario 1's second set (quick 1000, full 10000).
    #[arg(long)]
    many_queues: Option<usize>,
    /// `RUST_LOG` for the carrier (default `info`, as shipped).
    #[arg(long, default_value = "info")]
    carrier_log: String,
    /// Profile instead of benchmarking: run one deposit cell (few queues,
    /// `--profile-connections` x 256 in flight) against the carrier with
    /// `perf record --call-graph dwarf` attached to it, writing FILE, then
    /// again with `perf trace -s` (FILE.syscalls); no report.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Connections of the `--profile` cell.
    #[arg(long, default_value_t = 64)]
    profile_connections: usize,
    /// What `--profile` drives: `deposit` (the cell above) or `register`
    /// (fresh registrations, 8 connections x 64 in flight).
    #[arg(long, default_value = "deposit", value_parser = ["deposit", "register"])]
    profile_op: String,
    /// Run only the scale-out section (issue 16): 1, 2 and 3 carrier nodes
    /// on one throwaway PostgreSQL cluster, pgbench's ceiling for the same
    /// rows and the embedded store, `--reps` rounds (quick 1, full 3);
    /// writes its JSON to `--out` and its tables to `--markdown`.
    #[arg(long)]
    scale_out: bool,
    /// Run only the transport study (issue 15): quinn's defaults, ACK
    /// frequency, a larger MTU discovery bound and both, each on its own
    /// carrier with the same settings on every harness connection, in
    /// scenario 1's three cells against Redis, `--reps` rounds (quick 1,
    /// full 3); writes its JSON to `--out` and its tables to `--markdown`.
    #[arg(long, conflicts_with = "scale_out")]
    transport_study: bool,
    /// Only check that FILE is a well-formed report, then exit.
    #[arg(long, value_name = "FILE")]
    check_report: Option<PathBuf>,
}

/// What one mode runs.
#[derive(Debug, Clone)]
struct Plan {
    mode: &'static str,
    warmup: Duration,
    measure: Duration,
    short_warmup: Duration,
    short_measure: Duration,
    latency_measure: Duration,
    reps: usize,
    size_reps: usize,
    connections: Vec<usize>,
    in_flight: usize,
    few_queues: usize,
    many_queues: usize,
    sweep: Vec<usize>,
    sweep_connections: usize,
    sizes: Vec<usize>,
    size_connections: usize,
    disk_each: Duration,
    reg_connections: usize,
    reg_concurrency: usize,
    scale: Option<(u64, u64)>,
}

impl Plan {
    fn of(cli: &Cli) -> Plan {
        let secs = Duration::from_secs_f64;
        let mut plan = if cli.quick {
            Plan {
                mode: "quick",
                warmup: secs(0.3),
                measure: secs(1.5),
                short_warmup: secs(0.2),
                short_measure: secs(1.0),
                latency_measure: secs(2.0),
                reps: 1,
                size_reps: 1,
                connections: vec![1, 8, 64],
                in_flight: 256,
                few_queues: 100,
                many_queues: 1_000,
                sweep: vec![1, 16, 256],
                sweep_connections: 8,
                sizes: vec![256, 4096, 65_536],
                size_connections: 8,
                disk_each: secs(0.5),
                reg_connections: 8,
                reg_concurrency: 64,
                scale: Some((2_000, 20_000)),
            }
        } else {
            Plan {
                mode: "full",
                warmup: secs(1.5),
                measure: secs(6.0),
                short_warmup: secs(1.0),
                short_measure: secs(4.0),
                latency_measure: secs(10.0),
                reps: 3,
                size_reps: 2,
                connections: vec![1, 8, 64],
                in_flight: 256,
                few_queues: 100,
                many_queues: 10_000,
                sweep: vec![1, 4, 16, 64, 256, 1024],
                sweep_connections: 8,
                sizes: vec![256, 4096, 65_536],
                size_connections: 8,
                disk_each: secs(3.0),
                reg_connections: 8,
                reg_concurrency: 64,
                scale: Some((1_000_000, 1_000_000)),
            }
        };
        if let Some(r) = cli.reps {
            plan.reps = r.max(1);
        }
        if let Some(m) = cli.measure_secs {
            plan.measure = secs(m.max(0.1));
        }
        if let Some(q) = cli.many_queues {
            plan.many_queues = q.max(1);
        }
        if let Some((b, d)) = plan.scale {
            plan.scale = Some((
                cli.scale_bindings.unwrap_or(b).max(1),
                cli.scale_deposits.unwrap_or(d),
            ));
        }
        if cli.no_scale {
            plan.scale = None;
        }
        plan
    }

    fn spec(&self, connections: usize, in_flight: usize, bytes: usize, short: bool) -> LoadSpec {
        LoadSpec {
            connections,
            in_flight,
            envelope_bytes: bytes,
            warmup: if short {
                self.short_warmup
            } else {
                self.warmup
            },
            measure: if short {
                self.short_measure
            } else {
                self.measure
            },
            rate: None,
            limit: None,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(path) = &cli.check_report {
        return check_report(path, cli.markdown.as_deref());
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("carrier-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("carrier-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--check-report FILE [--markdown OUT]`.
fn check_report(path: &Path, markdown: Option<&Path>) -> ExitCode {
    let parsed = std::fs::read_to_string(path)
        .map_err(|e| vec![format!("cannot read {}: {e}", path.display())])
        .and_then(|text| {
            serde_json::from_str::<Report>(&text).map_err(|e| vec![format!("not a report: {e}")])
        })
        .and_then(|r| r.check().map(|()| r));
    match parsed {
        Ok(r) => {
            if let Some(out) = markdown
                && let Err(e) = std::fs::write(out, r.markdown())
            {
                eprintln!("{}: {e}", out.display());
                return ExitCode::FAILURE;
            }
            println!(
                "{}: well-formed {} report ({} deposit cells, {} targets)",
                path.display(),
                r.mode,
                r.deposit.len(),
                r.targets.len()
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in errors {
                eprintln!("{}: {e}", path.display());
            }
            ExitCode::FAILURE
        }
    }
}

fn locate_carrier(cli: &Cli) -> anyhow::Result<PathBuf> {
    let path = match &cli.carrier_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the harness has no directory")?
            .join("rltp-carrier"),
    };
    if !path.is_file() {
        bail!(
            "no carrier binary at {} (build it with `cargo build --release -p rltp-carrier`, or pass --carrier-bin)",
            path.display()
        );
    }
    Ok(path)
}

fn locate_redis(cli: &Cli) -> anyhow::Result<PathBuf> {
    if let Some(p) = &cli.redis_bin {
        return Ok(p.clone());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .context("redis-server is not on PATH: run bench/setup.sh (or pass --no-peer)")
}

fn command_line(program: &Path, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// A temp dir for one run's stores, in `--work-dir` or the system's.
fn scratch(cli: &Cli) -> anyhow::Result<tempfile::TempDir> {
    let base = cli.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base)?;
    Ok(tempfile::Builder::new()
        .prefix("carrier-bench-")
        .tempdir_in(&base)?)
}

/// Writes a section run's report (`--out`) and tables (`--markdown`, and
/// stdout).
fn section(cli: &Cli, report: &impl serde::Serialize, tables: &str) -> anyhow::Result<ExitCode> {
    std::fs::write(&cli.out, serde_json::to_string_pretty(report)?)?;
    if let Some(md) = &cli.markdown {
        std::fs::write(md, tables)?;
    }
    println!("{tables}");
    Ok(ExitCode::SUCCESS)
}

/// Runs one cell: `reps` pairs, ours then the peer.
#[allow(clippy::too_many_arguments)]
async fn cell(
    label: &str,
    ours: &CarrierProc,
    peer: Option<&RedisProc>,
    spec: &LoadSpec,
    reps: usize,
    t_ours: &Targets,
    t_peer: &Targets,
    disk: &DiskProbe,
) -> anyhow::Result<Cell> {
    let mut pairs = Vec::with_capacity(reps);
    for rep in 0..reps {
        settle(peer).await?;
        let a = load::run(System::Ours(ours), spec, t_ours).await?;
        let b = match peer {
            Some(r) => Some(load::run(System::Peer(r), spec, t_peer).await?),
            None => None,
        };
        let pair = Pair::new(a, b);
        eprintln!(
            "  {label} {:>5} q {:>2}x{:<4} {:>5} B #{}: ours {:>7.0}/s p99 {:>6.2} ms cpu {:.2}+{:.2} (others {:.2}){}{}",
            spec_queues(t_ours),
            spec.connections,
            spec.in_flight,
            spec.envelope_bytes,
            rep + 1,
            pair.ours.ops_per_s,
            pair.ours.latency_ms.p99,
            pair.ours.server_cpu_cores,
            pair.ours.client_cpu_cores,
            pair.ours.foreign_cpu_cores,
            pair.peer.as_ref().map_or(String::new(), |p| format!(
                " | redis {:>7.0}/s p99 {:>6.2} ms cpu {:.2}+{:.2} (others {:.2})",
                p.ops_per_s,
                p.latency_ms.p99,
                p.server_cpu_cores,
                p.client_cpu_cores,
                p.foreign_cpu_cores
            )),
            pair.ratio.map_or(String::new(), |r| format!(" | {r:.2}x")),
        );
        eprintln!(
            "    carrier threads (cores): {}",
            threads(&pair.ours.server_threads_cores)
        );
        if !pair.ours.refused.is_empty() {
            eprintln!("    ours refused: {:?}", pair.ours.refused);
        }
        pairs.push(pair);
    }
    Ok(Cell::new(pairs, disk))
}

/// Lets Redis finish a background AOF rewrite before the next run starts
/// (its rewrite is Redis's own cost and must not land in the carrier's
/// window); the time waited is reported when it is noticeable.
async fn settle(peer: Option<&RedisProc>) -> anyhow::Result<()> {
    if let Some(r) = peer {
        let waited = r.wait_background(Duration::from_secs(300)).await?;
        if waited > Duration::from_millis(200) {
            eprintln!(
                "    (waited {:.1} s for a Redis AOF rewrite)",
                waited.as_secs_f64()
            );
        }
    }
    Ok(())
}

fn threads(t: &std::collections::BTreeMap<String, f64>) -> String {
    t.iter()
        .filter(|(_, v)| **v >= 0.01)
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn spec_queues(t: &Targets) -> usize {
    t.queues.len()
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let plan = Plan::of(&cli);
    let carrier_bin = locate_carrier(&cli)?;
    if let Some(out) = &cli.profile {
        profile(&cli, &plan, &carrier_bin, out).await?;
        return Ok(ExitCode::SUCCESS);
    }
    if cli.scale_out {
        let work = scratch(&cli)?;
        let report = scaleout::run(
            &carrier_bin,
            work.path(),
            &cli.carrier_log,
            plan.reps,
            plan.warmup,
            plan.measure,
            plan.mode,
        )
        .await?;
        return section(&cli, &report, &scaleout::markdown(&report));
    }
    if cli.transport_study {
        let work = scratch(&cli)?;
        let report = transport::run(
            &carrier_bin,
            &locate_redis(&cli)?,
            work.path(),
            &cli.carrier_log,
            plan.reps,
            plan.warmup,
            plan.measure,
            plan.mode,
        )
        .await?;
        return section(&cli, &report, &transport::markdown(&report));
    }
    if cli.only_scale {
        let (bindings, deposits) = plan.scale.context("no scale size")?;
        let work = scratch(&cli)?;
        let s = scale(
            &plan,
            &carrier_bin,
            work.path(),
            &cli.carrier_log,
            bindings,
            deposits,
        )
        .await?;
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    let redis_bin = if cli.no_peer {
        None
    } else {
        Some(locate_redis(&cli)?)
    };
    let work = scratch(&cli)?;
    let started = Instant::now();
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let load_before = procfs::loadavg();
    let mut notes = Vec::new();
    eprintln!(
        "carrier-bench {}: carrier {}, work dir {}, load {:.2}",
        plan.mode,
        carrier_bin.display(),
        work.path().display(),
        load_before[0]
    );
    if plan.mode == "quick" {
        notes.push(
            "quick mode: smoke-test sizes and short windows (CI); the figures are indicative only"
                .into(),
        );
    }

    // 7. The disk's durable limits, on the file system of the stores.
    let disk = {
        let dir = work.path().to_path_buf();
        let each = plan.disk_each;
        tokio::task::spawn_blocking(move || disk::probe(&dir, each)).await??
    };
    eprintln!(
        "[7] disk: fsync {:.0}/s, O_DSYNC append {:.0} MiB/s",
        disk.fsync_per_s, disk.dsync_append_mib_s
    );

    let few = plan.few_queues;
    let all_queues = (few + plan.many_queues) as u64;
    let main_dir = work.path().join("main");
    std::fs::create_dir_all(&main_dir)?;
    let (ours, _) =
        CarrierProc::start(&carrier_bin, &main_dir, all_queues + 16, &cli.carrier_log).await?;
    let peer = match &redis_bin {
        Some(bin) => Some(RedisProc::start(bin, &work.path().join("redis")).await?),
        None => {
            notes.push("run without the Redis peer (--no-peer): no ratios".into());
            None
        }
    };

    // 4. Registration: every queue used below, fresh rkids, real proofs.
    let recipients = Recipients::fresh();
    let (registration, rkids) = recipient::register(
        &ours,
        recipients,
        0,
        all_queues,
        plan.reg_connections,
        plan.reg_concurrency,
        false,
    )
    .await?;
    eprintln!(
        "[4] registration: {:.0}/s ({} in {:.1} s)",
        registration.per_s, registration.registered, registration.seconds
    );
    let queues: Vec<Queue> = rkids
        .iter()
        .enumerate()
        .map(|(i, r)| Queue::new(*r, i as u64))
        .collect();
    let few_ours = Targets::new(queues.iter().take(few).cloned().collect());
    let few_peer = few_ours.fresh_counts();
    let many_ours = Targets::new(queues.iter().skip(few).cloned().collect());
    let many_peer = many_ours.fresh_counts();
    drop(queues);

    // 1. Deposit throughput, few queues.
    let mut deposit = Vec::new();
    for &c in &plan.connections {
        let spec = plan.spec(c, plan.in_flight, 1024, false);
        deposit.push(
            cell(
                "[1]",
                &ours,
                peer.as_ref(),
                &spec,
                plan.reps,
                &few_ours,
                &few_peer,
                &disk,
            )
            .await?,
        );
    }

    // 3. Drain everything scenario 1 deposited in the few queues.
    settle(peer.as_ref()).await?;
    let ours_drain = recipient::drain_ours(&ours, recipients, &few_ours).await?;
    let peer_drain = match &peer {
        Some(r) => Some(recipient::drain_peer(r, &few_peer).await?),
        None => None,
    };
    let drain_ratio = peer_drain
        .as_ref()
        .filter(|p| p.per_s > 0.0)
        .map(|p| ours_drain.per_s / p.per_s);
    eprintln!(
        "[3] drain: ours {:.0}/s ({} of {}, empty {}){}",
        ours_drain.per_s,
        ours_drain.concluded,
        ours_drain.expected,
        ours_drain.verified_empty,
        peer_drain.as_ref().map_or(String::new(), |p| format!(
            "; redis {:.0}/s ({} of {}, empty {})",
            p.per_s, p.concluded, p.expected, p.verified_empty
        ))
    );
    let drain = DrainPair {
        ours: ours_drain,
        peer: peer_drain,
        ratio: drain_ratio,
    };

    // The chart: throughput vs operations in flight.
    let mut sweep = Vec::new();
    for &f in &plan.sweep {
        let spec = plan.spec(f.min(plan.sweep_connections), f, 1024, true);
        sweep.push(
            cell(
                "[chart]",
                &ours,
                peer.as_ref(),
                &spec,
                1,
                &few_ours,
                &few_peer,
                &disk,
            )
            .await?,
        );
    }

    // 2. Latency at 50% of the peak, open loop, 64 senders.
    let peak = deposit
        .iter()
        .find(|c| c.connections == 64)
        .or(deposit.last())
        .context("no deposit cell")?;
    let (ours_peak, peer_peak) = (peak.ours_per_s, peak.peer_per_s);
    let open = |rate: f64| LoadSpec {
        rate: Some(rate * 0.5),
        measure: plan.latency_measure,
        ..plan.spec(64, 0, 1024, false)
    };
    settle(peer.as_ref()).await?;
    let ours_latency = load::run(System::Ours(&ours), &open(ours_peak), &few_ours).await?;
    let peer_latency = match (&peer, peer_peak) {
        (Some(r), Some(p)) => Some(load::run(System::Peer(r), &open(p), &few_peer).await?),
        _ => None,
    };
    eprintln!(
        "[2] latency at 50% of peak: ours {:.0}/s -> p99 {:.2} ms{}",
        ours_latency.ops_per_s,
        ours_latency.latency_ms.p99,
        peer_latency.as_ref().map_or(String::new(), |p| format!(
            "; redis {:.0}/s -> p99 {:.2} ms",
            p.ops_per_s, p.latency_ms.p99
        ))
    );
    let latency = LatencyResult {
        ours_peak_per_s: ours_peak,
        ours: ours_latency,
        peer_peak_per_s: peer_peak,
        peer: peer_latency,
    };

    // 1. Deposit throughput, many queues.
    for &c in &plan.connections {
        let spec = plan.spec(c, plan.in_flight, 1024, false);
        deposit.push(
            cell(
                "[1]",
                &ours,
                peer.as_ref(),
                &spec,
                plan.reps,
                &many_ours,
                &many_peer,
                &disk,
            )
            .await?,
        );
    }

    // 6. Envelope sizes.
    let mut sizes = Vec::new();
    for &bytes in &plan.sizes {
        let spec = plan.spec(
            plan.size_connections,
            plan.in_flight,
            envelope::fit_size(bytes),
            true,
        );
        sizes.push(
            cell(
                "[6]",
                &ours,
                peer.as_ref(),
                &spec,
                plan.size_reps,
                &many_ours,
                &many_peer,
                &disk,
            )
            .await?,
        );
    }

    ours.stop().await?;
    drop(peer);
    let _ = std::fs::remove_dir_all(&main_dir);
    let _ = std::fs::remove_dir_all(work.path().join("redis"));
    // Let the kernel finish freeing and writing back the deleted stores
    // before scenario 5 measures anything.
    let _ = tokio::task::spawn_blocking(|| std::process::Command::new("sync").status()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // 5. Scale, on its own carrier.
    let scale = match plan.scale {
        Some((bindings, deposits)) => {
            let s = scale(
                &plan,
                &carrier_bin,
                work.path(),
                &cli.carrier_log,
                bindings,
                deposits,
            )
            .await?;
            if s.reduced {
                notes.push(format!(
                    "scenario 5 ran at {} bindings / {} deposits, not the issue's 1,000,000 / 1,000,000 (size flags --scale-bindings/--scale-deposits)",
                    s.bindings, s.deposits_held
                ));
            }
            Some(s)
        }
        None => {
            notes.push("scenario 5 (scale) skipped (--no-scale)".into());
            None
        }
    };

    let chart_path = cli
        .chart
        .clone()
        .unwrap_or_else(|| cli.out.with_extension("svg"));
    let mut report = Report {
        schema: report::SCHEMA.into(),
        mode: plan.mode.into(),
        started_unix_s,
        wall_s: started.elapsed().as_secs_f64(),
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model: procfs::cpu_model(),
            mem_total_kib: procfs::mem_total_kib(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            load_before,
            load_after: procfs::loadavg(),
        },
        versions: Versions {
            carrier: command_line(&carrier_bin, &["--version"]),
            harness: format!("carrier-bench {}", env!("CARGO_PKG_VERSION")),
            redis: redis_bin.as_deref().map(redis::version).unwrap_or_default(),
            commit: command_line(Path::new("git"), &["rev-parse", "--short", "HEAD"]),
        },
        settings: Settings {
            warmup_s: plan.warmup.as_secs_f64(),
            measure_s: plan.measure.as_secs_f64(),
            short_measure_s: plan.short_measure.as_secs_f64(),
            repetitions: plan.reps,
            in_flight: plan.in_flight,
            connections: plan.connections.clone(),
            queue_sets: vec![plan.few_queues, plan.many_queues],
            carrier_log: cli.carrier_log.clone(),
            carrier_config: carrier::config_toml(Path::new("<tmp>/carrier"), all_queues + 16),
            redis_args: redis::ARGS.join(" "),
        },
        disk,
        registration,
        deposit,
        sweep,
        latency,
        drain,
        sizes,
        scale,
        targets: Vec::new(),
        notes,
    };
    report.evaluate_targets(plan.few_queues);
    std::fs::write(&cli.out, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", cli.out.display()))?;
    chart::draw(
        &chart_path,
        &report.sweep,
        &format!(
            "1 KiB deposits, fsync before answer: throughput vs in flight ({} connections max)",
            plan.sweep_connections
        ),
    )?;
    if let Some(path) = &cli.markdown {
        std::fs::write(path, report.markdown())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!("{}", report.table());
    println!(
        "report {}, chart {}",
        cli.out.display(),
        chart_path.display()
    );
    match report.check() {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(errors) => {
            for e in errors {
                eprintln!("carrier-bench: {e}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Scenario 5 on a fresh carrier: the empty-store figure, the fill, idle
/// and loaded RSS, the store's size, a restart, the figure at scale.
async fn scale(
    plan: &Plan,
    bin: &Path,
    work: &Path,
    log: &str,
    bindings: u64,
    deposits: u64,
) -> anyhow::Result<ScaleResult> {
    let dir = work.join("scale");
    std::fs::create_dir_all(&dir)?;
    let (carrier, first_start) = CarrierProc::start(bin, &dir, bindings + 16, log).await?;
    let recipients = Recipients::fresh();
    // The queues of the empty-vs-scale comparison: a tenth of the bindings,
    // at most the many-queue count of scenario 1.
    let base = (bindings / 10).clamp(1, plan.many_queues as u64);
    let (reg_base, rk_base) = recipient::register(
        &carrier,
        recipients,
        0,
        base,
        plan.reg_connections,
        plan.reg_concurrency,
        false,
    )
    .await?;
    let base_targets = Targets::of_rkids(&rk_base);
    let spec64 = plan.spec(64, plan.in_flight, 1024, false);
    let empty = load::run(System::Ours(&carrier), &spec64, &base_targets).await?;
    eprintln!(
        "[5] empty store: {:.0}/s at 64x{}",
        empty.ops_per_s, plan.in_flight
    );

    eprintln!("[5] registering {} more bindings", bindings - base);
    let (reg_fill, rk_fill) = recipient::register(
        &carrier,
        recipients,
        base,
        bindings,
        plan.reg_connections,
        plan.reg_concurrency,
        true,
    )
    .await?;
    let register = if reg_fill.registered > 0 {
        reg_fill
    } else {
        reg_base
    };
    eprintln!("[5] registration {:.0}/s", register.per_s);
    let all = Targets::of_rkids(rk_base.iter().chain(&rk_fill));
    drop((rk_base, rk_fill));
    // The empty-store measurement ran for its window, not to a count: drain
    // what it deposited, so the store then holds exactly `deposits`.
    let drained = recipient::drain_ours(&carrier, recipients, &base_targets).await?;
    anyhow::ensure!(
        drained.verified_empty,
        "[5] the empty-store deposits did not drain ({} of {})",
        drained.concluded,
        drained.expected
    );
    let fill_spec = LoadSpec {
        warmup: Duration::ZERO,
        limit: Some(deposits),
        ..plan.spec(8, plan.in_flight, 1024, false)
    };
    eprintln!("[5] depositing {deposits}");
    let fill = load::run(System::Ours(&carrier), &fill_spec, &all).await?;
    let deposits_held = all.total_admitted();
    eprintln!(
        "[5] fill {:.0}/s; {} deposits held",
        fill.ops_per_s, deposits_held
    );
    drop(all);

    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_idle_kib = procfs::status_kib(carrier.pid(), "VmRSS").unwrap_or(0);
    let memory = report::MemoryBreakdown {
        rss_anon_kib: procfs::status_kib(carrier.pid(), "RssAnon").unwrap_or(0),
        rss_file_kib: procfs::status_kib(carrier.pid(), "RssFile").unwrap_or(0),
        index_bytes: index_bytes(bin, &carrier.data_dir),
    };
    eprintln!("[5] idle memory: {memory:?}");
    let (store_allocated_bytes, store_apparent_bytes) = procfs::dir_size(&carrier.store_dir());
    let at_scale = load::run(System::Ours(&carrier), &spec64, &base_targets).await?;
    eprintln!("[5] at scale: {:.0}/s", at_scale.ops_per_s);
    let (carrier, restart) = carrier.restart().await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_idle_after_restart_kib = procfs::status_kib(carrier.pid(), "VmRSS").unwrap_or(0);
    eprintln!(
        "[5] restart: first request after {:.3} s; RSS idle {} KiB, after restart {} KiB",
        restart.to_first_request_s, rss_idle_kib, rss_idle_after_restart_kib
    );
    // The crash restart: deposits under load (64 × 4) until a SIGKILL
    // mid-run, so the log holds what a crash leaves to replay.
    let pid = carrier.pid();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        std::process::Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status()
    });
    // The run fails once the carrier is gone; only the kill matters here.
    let _ = tokio::time::timeout(
        Duration::from_secs(60),
        load::run(System::Ours(&carrier), &spec64, &base_targets),
    )
    .await;
    killer.await??;
    let (carrier, killed) = carrier.kill_and_restart().await?;
    eprintln!(
        "[5] restart after SIGKILL under load: listening after {:.3} s, first request after {:.3} s",
        killed.to_listening_s, killed.to_first_request_s
    );
    carrier.stop().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ScaleResult {
        kill_restart_to_listening_s: Some(killed.to_listening_s),
        kill_restart_to_first_request_s: Some(killed.to_first_request_s),
        bindings,
        deposits_held,
        reduced: bindings < 1_000_000 || deposits < 1_000_000,
        register,
        rss_under_load_kib: at_scale.server_rss_max_kib,
        throughput_vs_empty: if empty.ops_per_s > 0.0 {
            at_scale.ops_per_s / empty.ops_per_s
        } else {
            0.0
        },
        fill,
        empty,
        at_scale,
        rss_idle_kib,
        rss_idle_after_restart_kib,
        store_allocated_bytes,
        store_apparent_bytes,
        restart_to_listening_s: restart.to_listening_s,
        restart_to_first_request_s: restart.to_first_request_s,
        empty_start_to_first_request_s: first_start.to_first_request_s,
        memory: Some(memory),
    })
}

/// The store's in-memory index estimate of a running carrier, bytes
/// (`rltp-carrier admin store --json`, member `indexBytes`).
fn index_bytes(bin: &Path, data_dir: &Path) -> Option<u64> {
    let out = std::process::Command::new(bin)
        .args(["admin", "store", "--json", "--data-dir"])
        .arg(data_dir)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            let n = v.get("indexBytes")?;
            n.as_u64().or_else(|| n.as_str()?.parse().ok())
        })
}

/// `--profile`: one deposit cell with `perf record` (DWARF call graphs) on the carrier
/// (FILE), then the same cell again with `perf trace -s` (FILE.syscalls,
/// the time its threads spend in each system call).
async fn profile(cli: &Cli, plan: &Plan, bin: &Path, out: &Path) -> anyhow::Result<()> {
    let work = scratch(cli)?;
    let queues = plan.few_queues as u64;
    let registering = cli.profile_op == "register";
    // Enough fresh recipients for two windows of registrations.
    let fresh = 40_000u64;
    let (carrier, _) =
        CarrierProc::start(bin, work.path(), queues + 2 * fresh + 16, &cli.carrier_log).await?;
    let recipients = Recipients::fresh();
    let (_, rkids) = recipient::register(&carrier, recipients, 0, queues, 8, 64, false).await?;
    let targets = Targets::of_rkids(&rkids);
    let spec = plan.spec(cli.profile_connections, plan.in_flight, 1024, false);
    let pid = carrier.pid().to_string();
    let secs = format!("{:.1}", spec.measure.as_secs_f64());
    let trace_out = {
        let mut name = out.as_os_str().to_owned();
        name.push(".syscalls");
        PathBuf::from(name)
    };
    let record: Vec<String> = [
        "record",
        "-F",
        "299",
        "--call-graph",
        "dwarf,32768",
        "-p",
        &pid,
        "-o",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.to_string_lossy().into_owned()])
    .collect();
    let trace: Vec<String> = ["trace", "-s", "-p", &pid, "-o"]
        .iter()
        .map(|s| s.to_string())
        .chain([trace_out.to_string_lossy().into_owned()])
        .collect();
    for (round, args) in [record, trace].into_iter().enumerate() {
        let warmup = if registering {
            Duration::from_millis(500)
        } else {
            spec.warmup
        };
        let secs = secs.clone();
        let perf = tokio::spawn(async move {
            tokio::time::sleep(warmup).await;
            tokio::task::spawn_blocking(move || {
                std::process::Command::new("perf")
                    .args(&args)
                    .args(["--", "sleep", &secs])
                    .status()
            })
            .await
        });
        if registering {
            let from = queues + round as u64 * fresh;
            let (r, _) =
                recipient::register(&carrier, recipients, from, from + fresh, 8, 64, false).await?;
            let status = perf.await???;
            eprintln!(
                "profiled registration: {:.0}/s, carrier cpu {:.2} cores, harness {:.2}; perf exit {status}",
                r.per_s, r.server_cpu_cores, r.client_cpu_cores
            );
            continue;
        }
        let result = load::run(System::Ours(&carrier), &spec, &targets).await?;
        let status = perf.await???;
        eprintln!(
            "profiled {}x{}: {:.0}/s, carrier cpu {:.2} cores ({}), harness {:.2}; perf exit {status}",
            spec.connections,
            spec.in_flight,
            result.ops_per_s,
            result.server_cpu_cores,
            threads(&result.server_threads_cores),
            result.client_cpu_cores
        );
    }
    eprintln!(
        "perf data {}, syscall summary {}",
        out.display(),
        trace_out.display()
    );
    carrier.stop().await?;
    Ok(())
}
