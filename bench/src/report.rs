//! The JSON report (`--out`), its shape check (`--check-report`), the
//! issue's targets, and the human table.

use crate::disk::DiskProbe;
use crate::load::RunResult;
use crate::recipient::{DrainResult, RegistrationResult};
use crate::stats::median;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The report's schema tag.
pub const SCHEMA: &str = "carrier-bench/1";

/// The whole report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// `quick` or `full`.
    pub mode: String,
    /// Start, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// Total wall time, s.
    pub wall_s: f64,
    /// Where it ran.
    pub machine: Machine,
    /// What ran.
    pub versions: Versions,
    /// How it ran.
    pub settings: Settings,
    /// Scenario 7: the disk's durable limits.
    pub disk: DiskProbe,
    /// Scenario 4: registration.
    pub registration: RegistrationResult,
    /// Scenario 1: deposit throughput cells.
    pub deposit: Vec<Cell>,
    /// The chart's sweep over operations in flight.
    pub sweep: Vec<Cell>,
    /// Scenario 2: latency at 50% of peak.
    pub latency: LatencyResult,
    /// Scenario 3: drain.
    pub drain: DrainPair,
    /// Scenario 6: envelope sizes.
    pub sizes: Vec<Cell>,
    /// Scenario 5: scale (absent when skipped).
    pub scale: Option<ScaleResult>,
    /// The targets against what was measured.
    pub targets: Vec<TargetCheck>,
    /// Remarks (what was capped or skipped, and why).
    pub notes: Vec<String>,
}

/// The machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// CPU model.
    pub cpu_model: String,
    /// Memory, KiB.
    pub mem_total_kib: u64,
    /// Kernel release.
    pub kernel: String,
    /// Load averages (1, 5, 15 min) at the start.
    pub load_before: [f64; 3],
    /// Load averages at the end.
    pub load_after: [f64; 3],
}

/// Versions of what ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Versions {
    /// `rltp-carrier --version`.
    pub carrier: String,
    /// This harness.
    pub harness: String,
    /// `redis-server --version` (empty without the peer).
    pub redis: String,
    /// `git rev-parse --short HEAD` of the tree, if known.
    pub commit: String,
}

/// The run's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Warm-up before each window, s.
    pub warmup_s: f64,
    /// Scenario 1 window, s.
    pub measure_s: f64,
    /// Sweep and size windows, s.
    pub short_measure_s: f64,
    /// Pairs per cell.
    pub repetitions: usize,
    /// Operations in flight in scenario 1.
    pub in_flight: usize,
    /// Connections of scenario 1.
    pub connections: Vec<usize>,
    /// Queue counts of scenario 1.
    pub queue_sets: Vec<usize>,
    /// `RUST_LOG` of the carrier.
    pub carrier_log: String,
    /// The carrier's configuration file.
    pub carrier_config: String,
    /// The peer's command-line settings.
    pub redis_args: String,
}

/// Ours and the peer, one after the other.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    /// The carrier's run.
    pub ours: RunResult,
    /// The peer's run right after it.
    pub peer: Option<RunResult>,
    /// ours / peer, admitted per second.
    pub ratio: Option<f64>,
}

impl Pair {
    /// A pair and its ratio.
    pub fn new(ours: RunResult, peer: Option<RunResult>) -> Pair {
        let ratio = peer
            .as_ref()
            .filter(|p| p.ops_per_s > 0.0)
            .map(|p| ours.ops_per_s / p.ops_per_s);
        Pair { ours, peer, ratio }
    }
}

/// One load configuration, repeated pair by pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// Queues deposited to.
    pub queues: usize,
    /// Connections.
    pub connections: usize,
    /// Operations in flight.
    pub in_flight: usize,
    /// Envelope size, bytes.
    pub envelope_bytes: usize,
    /// A B pairs in run order.
    pub pairs: Vec<Pair>,
    /// Median of ours, admitted/s.
    pub ours_per_s: f64,
    /// Median of ours, MiB/s.
    pub ours_mib_s: f64,
    /// Median of ours' p99 latency, ms.
    pub ours_p99_ms: f64,
    /// Median of the peer, admitted/s.
    pub peer_per_s: Option<f64>,
    /// Median of the per-pair ratios.
    pub ratio: Option<f64>,
    /// Ours' MiB/s over the probe's O_DSYNC append bandwidth.
    pub fraction_of_disk_bandwidth: f64,
}

impl Cell {
    /// Summarizes `pairs` (all with the same configuration).
    pub fn new(pairs: Vec<Pair>, disk: &DiskProbe) -> Cell {
        let first = pairs.first().map(|p| &p.ours);
        let per = |f: fn(&Pair) -> Option<f64>| -> Option<f64> {
            let v: Vec<f64> = pairs.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| median(&v))
        };
        let ours_mib_s = per(|p| Some(p.ours.mib_per_s)).unwrap_or(0.0);
        Cell {
            queues: first.map_or(0, |r| r.queues),
            connections: first.map_or(0, |r| r.connections),
            in_flight: first.map_or(0, |r| r.in_flight),
            envelope_bytes: first.map_or(0, |r| r.envelope_bytes),
            ours_per_s: per(|p| Some(p.ours.ops_per_s)).unwrap_or(0.0),
            ours_mib_s,
            ours_p99_ms: per(|p| Some(p.ours.latency_ms.p99)).unwrap_or(0.0),
            peer_per_s: per(|p| p.peer.as_ref().map(|r| r.ops_per_s)),
            ratio: per(|p| p.ratio),
            fraction_of_disk_bandwidth: if disk.dsync_append_mib_s > 0.0 {
                ours_mib_s / disk.dsync_append_mib_s
            } else {
                0.0
            },
            pairs,
        }
    }
}

/// Scenario 2.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyResult {
    /// The peak it is half of: ours, admitted/s.
    pub ours_peak_per_s: f64,
    /// Open loop at half of it.
    pub ours: RunResult,
    /// The peer's peak.
    pub peer_peak_per_s: Option<f64>,
    /// The peer, open loop at half of its own peak.
    pub peer: Option<RunResult>,
}

/// Scenario 3.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrainPair {
    /// The carrier.
    pub ours: DrainResult,
    /// The peer, right after.
    pub peer: Option<DrainResult>,
    /// ours / peer, concluded per second.
    pub ratio: Option<f64>,
}

/// Scenario 5.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleResult {
    /// Bindings registered.
    pub bindings: u64,
    /// Deposits held at the end of the fill.
    pub deposits_held: u64,
    /// The size (1M / 1M) was reduced to fit the run (see notes).
    pub reduced: bool,
    /// Registering every binding.
    pub register: RegistrationResult,
    /// The deposit fill (one per binding, round robin).
    pub fill: RunResult,
    /// Throughput on the empty store (the same queues, before the fill).
    pub empty: RunResult,
    /// Throughput at scale (the same queues, after the fill).
    pub at_scale: RunResult,
    /// at_scale / empty, admitted/s.
    pub throughput_vs_empty: f64,
    /// Carrier resident set idle after the fill, KiB.
    pub rss_idle_kib: u64,
    /// Largest resident set under load at scale, KiB.
    pub rss_under_load_kib: u64,
    /// Resident set idle after a restart, KiB.
    pub rss_idle_after_restart_kib: u64,
    /// Store on disk: allocated bytes.
    pub store_allocated_bytes: u64,
    /// Store on disk: apparent bytes.
    pub store_apparent_bytes: u64,
    /// Restart at scale: spawn → listening.
    pub restart_to_listening_s: f64,
    /// Restart at scale: spawn → first answered request.
    pub restart_to_first_request_s: f64,
    /// Restart at scale after a SIGKILL under load: spawn → listening
    /// (absent in reports made before it was measured).
    #[serde(default)]
    pub kill_restart_to_listening_s: Option<f64>,
    /// Restart at scale after a SIGKILL under load: spawn → first
    /// answered request.
    #[serde(default)]
    pub kill_restart_to_first_request_s: Option<f64>,
    /// First start on an empty data dir: spawn → first answered request.
    pub empty_start_to_first_request_s: f64,
    /// What the idle resident set after the fill is made of (absent in
    /// reports made before it was measured).
    #[serde(default)]
    pub memory: Option<MemoryBreakdown>,
}

/// The idle resident set at scale, by kind (`/proc/<pid>/status`) and the
/// store's own estimate of its in-memory index (`admin store`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryBreakdown {
    /// Anonymous memory (the heap: the index, buffers, allocator slack,
    /// thread stacks), KiB.
    pub rss_anon_kib: u64,
    /// File-backed pages (the binary and its libraries, mapped files), KiB.
    pub rss_file_kib: u64,
    /// The log store's in-memory index (queues, deposits, departures, due
    /// entries and their hash tables), bytes, as `admin store` reports it.
    pub index_bytes: Option<u64>,
}

/// One target of the issue.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetCheck {
    /// What.
    pub name: String,
    /// The goal as the issue states it.
    pub goal: String,
    /// What was measured (unit in `name`).
    pub measured: f64,
    /// Whether the goal was met (never a pass/fail of the run).
    pub met: bool,
}

impl Report {
    /// Computes [`Report::targets`] from the figures.
    pub fn evaluate_targets(&mut self, small_queues: usize) {
        let mut t = Vec::new();
        let mut add = |name: &str, goal: &str, measured: f64, met: bool| {
            t.push(TargetCheck {
                name: name.into(),
                goal: goal.into(),
                measured,
                met,
            });
        };
        // Issue 15's targets.
        if let Some(cell) = self
            .deposit
            .iter()
            .find(|c| c.connections == 64 && c.queues == small_queues)
        {
            add(
                "deposit, 64 senders, admitted/s",
                ">= 50000",
                cell.ours_per_s,
                cell.ours_per_s >= 50_000.0,
            );
        }
        for cell in &self.deposit {
            if let Some(r) = cell.ratio {
                add(
                    &format!(
                        "deposit, {} senders x {} in flight over {} queues, ratio to redis",
                        cell.connections,
                        cell.in_flight / cell.connections.max(1),
                        cell.queues
                    ),
                    ">= 1.5",
                    r,
                    r >= 1.5,
                );
            }
        }
        let p99 = self.latency.ours.latency_ms.p99;
        add("p99 at 50% of peak, ms", "<= 10", p99, p99 <= 10.0);
        if let Some(peer) = &self.latency.peer {
            let theirs = peer.latency_ms.p99;
            add(
                "p99 at 50% of peak, ms, no worse than redis's",
                &format!("<= {theirs:.2}"),
                p99,
                p99 <= theirs,
            );
        }
        let d = self.drain.ours.per_s;
        add("drain, concluded/s", ">= 100000", d, d >= 100_000.0);
        let r = self.registration.per_s;
        add("registration, /s", ">= 5000", r, r >= 5_000.0);
        if let Some(s) = &self.scale {
            let rss_mb = s.rss_idle_kib.max(s.rss_under_load_kib) as f64 * 1024.0 / 1e6;
            add(
                "scale: RSS (max of idle, under load), MB",
                "<= 200",
                rss_mb,
                rss_mb <= 200.0,
            );
            let st = s.restart_to_first_request_s;
            add(
                "scale: restart after SIGTERM to first served request, s",
                "<= 1",
                st,
                st <= 1.0,
            );
            if let Some(k) = s.kill_restart_to_first_request_s {
                add(
                    "scale: restart after SIGKILL to first served request, s",
                    "<= 1",
                    k,
                    k <= 1.0,
                );
            }
            let f = s.throughput_vs_empty;
            add("scale: throughput vs empty store", ">= 0.9", f, f >= 0.9);
        }
        self.targets = t;
    }

    /// Checks that the report is well-formed: the schema, every scenario
    /// present with finite non-negative figures, and the drain verified.
    /// Speed is never checked.
    ///
    /// # Errors
    /// A list of what is wrong.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        let mut finite = |what: &str, v: f64| {
            if !v.is_finite() || v < 0.0 {
                errors.push(format!("{what} is {v}"));
            }
        };
        let runs = self
            .deposit
            .iter()
            .chain(&self.sweep)
            .chain(&self.sizes)
            .flat_map(|c| &c.pairs)
            .flat_map(|p| std::iter::once(&p.ours).chain(p.peer.as_ref()))
            .chain([&self.latency.ours])
            .chain(self.latency.peer.as_ref())
            .chain(
                self.scale
                    .iter()
                    .flat_map(|s| [&s.fill, &s.empty, &s.at_scale]),
            );
        for r in runs {
            let what = format!(
                "{} {}x{} {} B",
                r.system, r.connections, r.in_flight, r.envelope_bytes
            );
            finite(&format!("{what} ops_per_s"), r.ops_per_s);
            finite(&format!("{what} latency p99"), r.latency_ms.p99);
            finite(&format!("{what} window"), r.window_s);
        }
        finite("disk fsync_per_s", self.disk.fsync_per_s);
        finite("disk dsync_append_mib_s", self.disk.dsync_append_mib_s);
        finite("registration per_s", self.registration.per_s);
        finite("drain per_s", self.drain.ours.per_s);
        for (name, v) in [("ratio", self.drain.ratio)] {
            if let Some(v) = v {
                finite(name, v);
            }
        }
        for c in self.deposit.iter().chain(&self.sweep).chain(&self.sizes) {
            finite("cell ours_per_s", c.ours_per_s);
            if let Some(r) = c.ratio {
                finite("cell ratio", r);
            }
        }
        if self.schema != SCHEMA {
            errors.push(format!("schema is {:?}, not {SCHEMA:?}", self.schema));
        }
        if self.mode != "quick" && self.mode != "full" {
            errors.push(format!("mode is {:?}", self.mode));
        }
        for (name, empty) in [
            ("deposit", self.deposit.is_empty()),
            ("sweep", self.sweep.is_empty()),
            ("sizes", self.sizes.is_empty()),
            ("targets", self.targets.is_empty()),
        ] {
            if empty {
                errors.push(format!("{name} has no entries"));
            }
        }
        if self.deposit.iter().any(|c| c.pairs.is_empty()) {
            errors.push("a deposit cell has no runs".into());
        }
        if self.registration.registered == 0 {
            errors.push("nothing was registered".into());
        }
        for d in std::iter::once(&self.drain.ours).chain(self.drain.peer.as_ref()) {
            if !d.verified_empty {
                errors.push(format!(
                    "{} drain: {} concluded of {} expected, queues not verified empty",
                    d.system, d.concluded, d.expected
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The results as Markdown tables (for `BENCHMARKS.md`).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let f0 = |v: f64| {
            let v = v.round() as i64;
            let digits = v.abs().to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i).is_multiple_of(3) {
                    out.push(',');
                }
                out.push(c);
            }
            if v < 0 { format!("-{out}") } else { out }
        };
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("–".to_owned(), f);
        let ratio = |v: f64| format!("{v:.2}×");
        let pairs_list =
            |c: &Cell, f: &dyn Fn(&Pair) -> Option<f64>, fmt: &dyn Fn(f64) -> String| {
                c.pairs
                    .iter()
                    .map(|p| f(p).map_or("–".to_owned(), fmt))
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
        let cells = |s: &mut String, cells: &[Cell]| {
            let _ = writeln!(
                s,
                "| queues | senders × in flight | envelope | ours admitted/s | MiB/s | p50 / p99 / p99.9 ms | carrier CPU (writer) | disk B/deposit | of disk bandwidth | Redis admitted/s | ours ÷ Redis, per pair | median ratio | others' CPU, max |"
            );
            let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
            for c in cells {
                let med =
                    |f: &dyn Fn(&Pair) -> f64| median(&c.pairs.iter().map(f).collect::<Vec<_>>());
                let _ = writeln!(
                    s,
                    "| {} | {} × {} | {} B | **{}** ({}) | {:.1} | {:.1} / {:.1} / {:.1} | {:.2} ({:.2}) | {} | {:.1} % | {} | {} | **{}** | {:.2} |",
                    f0(c.queues as f64),
                    c.connections,
                    c.in_flight / c.connections.max(1),
                    f0(c.envelope_bytes as f64),
                    f0(c.ours_per_s),
                    pairs_list(c, &|p| Some(p.ours.ops_per_s), &|v| f0(v)),
                    c.ours_mib_s,
                    med(&|p| p.ours.latency_ms.p50),
                    c.ours_p99_ms,
                    med(&|p| p.ours.latency_ms.p999),
                    med(&|p| p.ours.server_cpu_cores),
                    med(&|p| p
                        .ours
                        .server_threads_cores
                        .get("rltp-writer")
                        .copied()
                        .unwrap_or(0.0)),
                    f0(med(&|p| p.ours.server_disk_bytes_per_op)),
                    100.0 * c.fraction_of_disk_bandwidth,
                    opt(c.peer_per_s, &|v| f0(v)),
                    pairs_list(c, &|p| p.ratio, &|v| format!("{v:.2}")),
                    opt(c.ratio, &ratio),
                    c.pairs
                        .iter()
                        .flat_map(|p| std::iter::once(&p.ours).chain(p.peer.as_ref()))
                        .map(|r| r.foreign_cpu_cores)
                        .fold(0.0, f64::max),
                );
            }
        };
        let d = &self.disk;
        let _ = writeln!(s, "### 7. Disk limit (probe, same run, same file system)\n");
        let _ = writeln!(
            s,
            "| 4 KiB pwrite + fdatasync | p50 / p99 | O_DSYNC append, 256 KiB writes | as 1 KiB records |\n|---|---|---|---|\n| {}/s | {:.2} / {:.2} ms | {:.0} MiB/s | {}/s |\n",
            f0(d.fsync_per_s),
            d.fsync_ms.p50,
            d.fsync_ms.p99,
            d.dsync_append_mib_s,
            f0(d.dsync_append_1k_records_per_s)
        );
        let _ = writeln!(
            s,
            "### 1. Deposit throughput (1 KiB sealed envelopes, closed loop)\n"
        );
        cells(&mut s, &self.deposit);
        let l = &self.latency;
        let _ = writeln!(
            s,
            "\n### 2. Latency at 50 % of peak (open loop, {} senders)\n",
            l.ours.connections
        );
        let _ = writeln!(
            s,
            "| system | peak (scenario 1) | offered | admitted/s | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---|---|---|---|---|---|---|"
        );
        for (r, peak) in std::iter::once((&l.ours, Some(l.ours_peak_per_s)))
            .chain(l.peer.as_ref().map(|p| (p, l.peer_peak_per_s)))
        {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.2} | **{:.2}** | {:.2} | {:.2} |",
                r.system,
                opt(peak, &|v| f0(v)),
                opt(r.offered_per_s, &|v| f0(v)),
                f0(r.ops_per_s),
                r.latency_ms.p50,
                r.latency_ms.p99,
                r.latency_ms.p999,
                r.latency_ms.max
            );
        }
        let _ = writeln!(
            s,
            "\n### 3. Drain ({} recipients, collect + conclude)\n",
            self.drain.ours.recipients
        );
        let _ = writeln!(
            s,
            "| system | deposits | concluded | seconds | concluded/s | pages | every queue empty, nothing lost |\n|---|---|---|---|---|---|---|"
        );
        for r in std::iter::once(&self.drain.ours).chain(self.drain.peer.as_ref()) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} | **{}** | {} | {} |",
                r.system,
                f0(r.expected as f64),
                f0(r.concluded as f64),
                r.seconds,
                f0(r.per_s),
                f0(r.pages as f64),
                if r.verified_empty { "yes" } else { "**no**" }
            );
        }
        if let Some(r) = self.drain.ratio {
            let _ = writeln!(s, "\nours ÷ Redis: **{}**", ratio(r));
        }
        let r = &self.registration;
        let _ = writeln!(
            s,
            "\n### 4. Registration (challenge → register, fresh rkids, real proofs)\n"
        );
        let _ = writeln!(
            s,
            "| registered | connections × in flight | seconds | registrations/s | round trip p50 / p99 ms | carrier CPU | harness CPU | retried |\n|---|---|---|---|---|---|---|---|\n| {} | {} × {} | {:.2} | **{}** | {:.2} / {:.2} | {:.2} | {:.2} | {} |",
            f0(r.registered as f64),
            r.connections,
            r.concurrency / r.connections.max(1),
            r.seconds,
            f0(r.per_s),
            r.round_trip_ms.p50,
            r.round_trip_ms.p99,
            r.server_cpu_cores,
            r.client_cpu_cores,
            r.retried
        );
        if let Some(sc) = &self.scale {
            let _ = writeln!(s, "\n### 5. Scale\n");
            let mib = |kib: u64| kib as f64 / 1024.0;
            let _ = writeln!(
                s,
                "| | value |\n|---|---|\n| bindings registered | {} ({}/s, p99 {:.1} ms) |\n| deposits held | {} (fill {}/s over all bindings) |\n| RSS idle after the fill | {:.1} MiB |\n| RSS under load (64 senders) | {:.1} MiB |\n| RSS idle after a restart | {:.1} MiB |\n| store on disk (allocated / apparent) | {:.0} / {:.0} MiB |\n| restart: spawn → listening | {:.3} s |\n| restart: spawn → first served request | **{:.3} s** |\n| restart after SIGKILL under load: spawn → listening / first served request | {} / **{}** |\n| empty store: spawn → first served request | {:.3} s |\n| deposit throughput, empty store (same {} queues, 64 × 4) | {}/s |\n| deposit throughput at scale (same queues) | {}/s |\n| at scale ÷ empty | **{:.2}** |{}",
                f0(sc.bindings as f64),
                f0(sc.register.per_s),
                sc.register.round_trip_ms.p99,
                f0(sc.deposits_held as f64),
                f0(sc.fill.ops_per_s),
                mib(sc.rss_idle_kib),
                mib(sc.rss_under_load_kib),
                mib(sc.rss_idle_after_restart_kib),
                sc.store_allocated_bytes as f64 / 1048576.0,
                sc.store_apparent_bytes as f64 / 1048576.0,
                sc.restart_to_listening_s,
                sc.restart_to_first_request_s,
                sc.kill_restart_to_listening_s
                    .map_or_else(|| "—".to_owned(), |v| format!("{v:.3} s")),
                sc.kill_restart_to_first_request_s
                    .map_or_else(|| "—".to_owned(), |v| format!("{v:.3} s")),
                sc.empty_start_to_first_request_s,
                f0(sc.empty.queues as f64),
                f0(sc.empty.ops_per_s),
                f0(sc.at_scale.ops_per_s),
                sc.throughput_vs_empty,
                sc.memory.as_ref().map_or_else(String::new, |m| format!(
                    "\n| idle RSS by kind: anonymous / file-backed | {:.1} / {:.1} MiB |\n| of it, the store's in-memory index (`admin store`) | {} |",
                    mib(m.rss_anon_kib),
                    mib(m.rss_file_kib),
                    m.index_bytes.map_or_else(
                        || "—".to_owned(),
                        |b| format!("{:.1} MiB", b as f64 / 1048576.0)
                    )
                ))
            );
        }
        let _ = writeln!(s, "\n### 6. Envelope sizes\n");
        cells(&mut s, &self.sizes);
        let _ = writeln!(s, "\n### Chart data: throughput vs operations in flight\n");
        cells(&mut s, &self.sweep);
        let _ = writeln!(
            s,
            "\n### Targets\n\n| target | goal | measured | |\n|---|---|---|---|"
        );
        for t in &self.targets {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {} |",
                t.name,
                t.goal,
                t.measured,
                if t.met { "met" } else { "**not met**" }
            );
        }
        s
    }

    /// The human table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let ratio = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{r:.2}x"));
        let peer = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{r:.0}"));
        let _ = writeln!(
            s,
            "carrier-bench {} ({}), {} CPUs {}, load {:.2} -> {:.2}, {:.0} s",
            self.mode,
            self.versions.carrier,
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.load_before[0],
            self.machine.load_after[0],
            self.wall_s
        );
        let _ = writeln!(
            s,
            "\n[7] disk: fsync {:.0}/s (p50 {:.2} ms), O_DSYNC append {:.0} MiB/s = {:.0} x 1 KiB/s",
            self.disk.fsync_per_s,
            self.disk.fsync_ms.p50,
            self.disk.dsync_append_mib_s,
            self.disk.dsync_append_1k_records_per_s
        );
        let _ = writeln!(
            s,
            "[4] registration: {:.0}/s ({} in {:.1} s, {} conns x {} in flight, p50 {:.2} ms, p99 {:.2} ms)",
            self.registration.per_s,
            self.registration.registered,
            self.registration.seconds,
            self.registration.connections,
            self.registration.concurrency,
            self.registration.round_trip_ms.p50,
            self.registration.round_trip_ms.p99
        );
        let cells = |s: &mut String, title: &str, cells: &[Cell]| {
            let _ = writeln!(s, "\n{title}");
            let _ = writeln!(
                s,
                "{:>7} {:>5} {:>6} {:>6} | {:>9} {:>8} {:>8} {:>8} {:>9} {:>7} | {:>9} {:>7} | {:>6}",
                "queues",
                "conns",
                "flight",
                "bytes",
                "ours/s",
                "MiB/s",
                "p50 ms",
                "p99 ms",
                "p99.9 ms",
                "disk%",
                "redis/s",
                "ratio",
                "pairs"
            );
            for c in cells {
                let p50: Vec<f64> = c.pairs.iter().map(|p| p.ours.latency_ms.p50).collect();
                let p999: Vec<f64> = c.pairs.iter().map(|p| p.ours.latency_ms.p999).collect();
                let _ = writeln!(
                    s,
                    "{:>7} {:>5} {:>6} {:>6} | {:>9.0} {:>8.1} {:>8.2} {:>8.2} {:>9.2} {:>6.1}% | {:>9} {:>7} | {:>6}",
                    c.queues,
                    c.connections,
                    c.in_flight,
                    c.envelope_bytes,
                    c.ours_per_s,
                    c.ours_mib_s,
                    median(&p50),
                    c.ours_p99_ms,
                    median(&p999),
                    100.0 * c.fraction_of_disk_bandwidth,
                    peer(c.peer_per_s),
                    ratio(c.ratio),
                    c.pairs.len()
                );
            }
        };
        cells(
            &mut s,
            "[1] deposit throughput (1 KiB, medians of A/B pairs)",
            &self.deposit,
        );
        let l = &self.latency;
        let _ = writeln!(
            s,
            "\n[2] latency at 50% of peak, open loop, {} conns: ours {:.0}/s offered -> p50 {:.2} ms p99 {:.2} ms p99.9 {:.2} ms",
            l.ours.connections,
            l.ours.offered_per_s.unwrap_or(0.0),
            l.ours.latency_ms.p50,
            l.ours.latency_ms.p99,
            l.ours.latency_ms.p999
        );
        if let Some(p) = &l.peer {
            let _ = writeln!(
                s,
                "    redis {:.0}/s offered -> p50 {:.2} ms p99 {:.2} ms p99.9 {:.2} ms",
                p.offered_per_s.unwrap_or(0.0),
                p.latency_ms.p50,
                p.latency_ms.p99,
                p.latency_ms.p999
            );
        }
        let d = &self.drain;
        let _ = writeln!(
            s,
            "\n[3] drain, {} recipients: ours {:.0} concluded/s ({} in {:.1} s, empty: {}); redis {}; ratio {}",
            d.ours.recipients,
            d.ours.per_s,
            d.ours.concluded,
            d.ours.seconds,
            d.ours.verified_empty,
            d.peer.as_ref().map_or("-".to_owned(), |p| format!(
                "{:.0}/s ({} in {:.1} s, empty: {})",
                p.per_s, p.concluded, p.seconds, p.verified_empty
            )),
            ratio(d.ratio)
        );
        cells(&mut s, "[6] envelope sizes", &self.sizes);
        cells(
            &mut s,
            "sweep (chart): throughput vs operations in flight",
            &self.sweep,
        );
        if let Some(sc) = &self.scale {
            let _ = writeln!(
                s,
                "\n[5] scale: {} bindings, {} deposits held{}\n    registration {:.0}/s, fill {:.0}/s\n    RSS idle {:.1} MiB, under load {:.1} MiB, after restart {:.1} MiB; store {:.1} MiB on disk ({:.1} MiB apparent)\n    restart: listening {:.3} s, first request {:.3} s (empty start {:.3} s)\n    throughput {:.0}/s at scale vs {:.0}/s empty = {:.2}",
                sc.bindings,
                sc.deposits_held,
                if sc.reduced {
                    " (reduced, see notes)"
                } else {
                    ""
                },
                sc.register.per_s,
                sc.fill.ops_per_s,
                sc.rss_idle_kib as f64 / 1024.0,
                sc.rss_under_load_kib as f64 / 1024.0,
                sc.rss_idle_after_restart_kib as f64 / 1024.0,
                sc.store_allocated_bytes as f64 / 1048576.0,
                sc.store_apparent_bytes as f64 / 1048576.0,
                sc.restart_to_listening_s,
                sc.restart_to_first_request_s,
                sc.empty_start_to_first_request_s,
                sc.at_scale.ops_per_s,
                sc.empty.ops_per_s,
                sc.throughput_vs_empty
            );
        }
        let _ = writeln!(s, "\ntargets (goals for the report, never pass/fail):");
        for t in &self.targets {
            let _ = writeln!(
                s,
                "  {:<48} {:>12.2}  goal {:<8} {}",
                t.name,
                t.measured,
                t.goal,
                if t.met { "met" } else { "not met" }
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Percentiles;

    fn run(system: &str, per_s: f64) -> RunResult {
        RunResult {
            system: system.into(),
            connections: 64,
            in_flight: 256,
            queues: 100,
            envelope_bytes: 1024,
            offered_per_s: None,
            ops_per_s: per_s,
            mib_per_s: per_s / 1024.0,
            admitted: (per_s * 2.0) as u64,
            refused: Default::default(),
            latency_ms: Percentiles {
                n: 10,
                p50: 1.0,
                p99: 2.0,
                p999: 3.0,
                max: 4.0,
            },
            server_cpu_cores: 1.0,
            server_threads_cores: Default::default(),
            client_cpu_cores: 0.5,
            foreign_cpu_cores: 0.0,
            server_disk_bytes_per_op: 1100.0,
            server_rss_max_kib: 1000,
            window_s: 2.0,
        }
    }

    fn drain(system: &str, verified: bool) -> DrainResult {
        DrainResult {
            system: system.into(),
            recipients: 100,
            expected: 10,
            concluded: 10,
            seconds: 1.0,
            per_s: 10.0,
            pages: 200,
            verified_empty: verified,
        }
    }

    fn disk() -> DiskProbe {
        DiskProbe {
            fsync_per_s: 2000.0,
            fsync_ms: Percentiles::default(),
            dsync_append_mib_s: 400.0,
            dsync_append_1k_records_per_s: 409_600.0,
            seconds_each: 1.0,
        }
    }

    fn sample() -> Report {
        let cell = Cell::new(
            vec![
                Pair::new(run("rltp-carrier", 20_000.0), Some(run("redis", 40_000.0))),
                Pair::new(run("rltp-carrier", 30_000.0), Some(run("redis", 30_000.0))),
            ],
            &disk(),
        );
        let mut report = Report {
            schema: SCHEMA.into(),
            mode: "quick".into(),
            started_unix_s: 0,
            wall_s: 60.0,
            machine: Machine {
                cpus: 2,
                cpu_model: "test".into(),
                mem_total_kib: 1,
                kernel: "test".into(),
                load_before: [0.0; 3],
                load_after: [0.0; 3],
            },
            versions: Versions {
                carrier: "rltp-carrier 0.1.0".into(),
                harness: "carrier-bench 0.1.0".into(),
                redis: String::new(),
                commit: String::new(),
            },
            settings: Settings {
                warmup_s: 0.3,
                measure_s: 1.5,
                short_measure_s: 1.0,
                repetitions: 2,
                in_flight: 256,
                connections: vec![64],
                queue_sets: vec![100],
                carrier_log: "info".into(),
                carrier_config: String::new(),
                redis_args: String::new(),
            },
            disk: disk(),
            registration: RegistrationResult {
                registered: 100,
                connections: 8,
                concurrency: 64,
                seconds: 0.1,
                per_s: 1000.0,
                round_trip_ms: Percentiles::default(),
                retried: 0,
                server_cpu_cores: 1.0,
                client_cpu_cores: 0.5,
            },
            deposit: vec![cell.clone()],
            sweep: vec![cell.clone()],
            latency: LatencyResult {
                ours_peak_per_s: 25_000.0,
                ours: run("rltp-carrier", 12_500.0),
                peer_peak_per_s: None,
                peer: None,
            },
            drain: DrainPair {
                ours: drain("rltp-carrier", true),
                peer: Some(drain("redis", true)),
                ratio: Some(1.0),
            },
            sizes: vec![cell],
            scale: None,
            targets: Vec::new(),
            notes: Vec::new(),
        };
        report.evaluate_targets(100);
        report
    }

    #[test]
    fn cells_take_medians_and_ratios_pair_by_pair() {
        let report = sample();
        let cell = &report.deposit[0];
        assert_eq!(cell.ours_per_s, 25_000.0);
        assert_eq!(cell.peer_per_s, Some(35_000.0));
        // Pairs 0.5 and 1.0: the median ratio, not the ratio of medians.
        assert_eq!(cell.ratio, Some(0.75));
        assert_eq!(cell.ours_p99_ms, 2.0);
        assert!((cell.fraction_of_disk_bandwidth - 25_000.0 / 1024.0 / 400.0).abs() < 1e-12);
    }

    #[test]
    fn targets_are_reported_never_enforced() {
        let report = sample();
        let names: Vec<(&str, bool)> = report
            .targets
            .iter()
            .map(|t| (t.name.as_str(), t.met))
            .collect();
        assert_eq!(
            names,
            vec![
                ("deposit, 64 senders, admitted/s", false),
                (
                    "deposit, 64 senders x 4 in flight over 100 queues, ratio to redis",
                    false,
                ),
                ("p99 at 50% of peak, ms", true),
                ("drain, concluded/s", false),
                ("registration, /s", false),
            ]
        );
        assert_eq!(report.check(), Ok(()), "unmet targets are well-formed");
    }

    #[test]
    fn the_shape_check_survives_a_json_round_trip_and_finds_defects() {
        let report = sample();
        let text = serde_json::to_string_pretty(&report).expect("serialize");
        let back: Report = serde_json::from_str(&text).expect("parse");
        assert_eq!(back.check(), Ok(()));

        let mut bad = back.clone();
        bad.drain.peer = Some(drain("redis", false));
        bad.deposit[0].pairs[0].ours.ops_per_s = f64::NAN;
        bad.schema = "other".into();
        let errors = bad.check().expect_err("defects");
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("ops_per_s is NaN"), "{errors:?}");
        assert!(errors[1].contains("schema"), "{errors:?}");
        assert!(
            errors[2].starts_with("redis drain: 10 concluded of 10 expected"),
            "{errors:?}"
        );

        let markdown = report.markdown();
        assert!(
            markdown.contains("| 100 | 64 × 4 | 1,024 B | **25,000** (20,000 / 30,000) |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| 0.50 / 1.00 | **0.75×** |"),
            "{markdown}"
        );

        let unknown = text.replacen("\"schema\"", "\"extra\": 1, \"schema\"", 1);
        assert!(
            serde_json::from_str::<Report>(&unknown).is_err(),
            "unknown members are refused"
        );
    }
}
