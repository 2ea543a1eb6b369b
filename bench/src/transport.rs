//! `carrier-bench --transport-study` (issue 15): which QUIC per-packet
//! settings (`[transport]`, [`Tuning`]) the carrier and its clients
//! should ship with, measured rather than assumed.
//!
//! Each candidate is a carrier of its own (fresh data dir, the benchmark's
//! open private limits, the candidate as its `[transport]`), whose every
//! harness connection carries the same settings (ACK frequency is asked of
//! the peer, so both ends must set it to cut the ACKs both ways). Each
//! round runs scenario 1's three cells on 100 queues (1 × 256, 8 × 32,
//! 64 × 4; 1 KiB envelopes): Redis (`appendfsync always`) first, then
//! every candidate, in an order rotated from round to round so that a
//! drift of the machine lands on each candidate alike. Ratios are against
//! the Redis figure of the same cell and round; the carrier's CPU per
//! admitted deposit is the figure least moved by other load on the cores.

use crate::carrier::CarrierProc;
use crate::load::{self, LoadSpec, System, Targets};
use crate::recipient;
use crate::redis::RedisProc;
use crate::stats::median;
use rltp_client::transport::Tuning;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Queues deposited to (scenario 1's first set).
const QUEUES: u64 = 100;
/// Deposits in flight in all (scenario 1).
const IN_FLIGHT: usize = 256;
/// Senders of each cell (scenario 1).
const CONNECTIONS: [usize; 3] = [1, 8, 64];

/// One set of settings tried.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// Short name.
    pub name: String,
    /// What it tries.
    pub why: String,
    /// The settings, both ends.
    pub tuning: Tuning,
}

/// The candidates: quinn's defaults, ACK frequency at two thresholds, a
/// larger MTU discovery bound, and ACK frequency with it.
pub fn candidates() -> Vec<Candidate> {
    // quinn's own settings, spelled out: the baseline whatever is shipped.
    let quinn = Tuning {
        ack_eliciting_threshold: 0,
        max_ack_delay_ms: 25,
        initial_mtu: 1_200,
        mtu_discovery: true,
        mtu_upper_bound: 1_452,
    };
    let ack = Tuning {
        ack_eliciting_threshold: 8,
        ..quinn
    };
    let ack32 = Tuning {
        ack_eliciting_threshold: 32,
        ..quinn
    };
    let mtu = Tuning {
        mtu_upper_bound: 65_527,
        ..quinn
    };
    let both = Tuning {
        ack_eliciting_threshold: 8,
        mtu_upper_bound: 65_527,
        ..quinn
    };
    [
        ("quinn", "quinn's own settings (shipped)", quinn),
        (
            "ack-8",
            "ACK frequency: the peer acknowledges every 9th ack-eliciting packet (max delay 25 ms)",
            ack,
        ),
        (
            "ack-32",
            "ACK frequency: every 33rd ack-eliciting packet (max delay 25 ms)",
            ack32,
        ),
        (
            "mtu-64k",
            "MTU discovery up to 65527 bytes (loopback carries it; a real path stops lower)",
            mtu,
        ),
        ("ack-8+mtu-64k", "both", both),
    ]
    .into_iter()
    .map(|(name, why, tuning)| Candidate {
        name: name.into(),
        why: why.into(),
        tuning,
    })
    .collect()
}

/// One measurement of one candidate (or Redis) in one cell and round.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    /// Round (0-based).
    pub round: usize,
    /// Admitted deposits per second.
    pub ops_per_s: f64,
    /// p50 send → verdict, ms.
    pub p50_ms: f64,
    /// p99 send → verdict, ms.
    pub p99_ms: f64,
    /// Server CPU per admitted deposit, µs.
    pub server_cpu_us_per_op: f64,
    /// Harness CPU per admitted deposit, µs (the client library's side).
    pub client_cpu_us_per_op: f64,
    /// Against Redis in the same cell and round (`None` for Redis).
    pub ratio: Option<f64>,
}

impl Sample {
    fn of(round: usize, r: &load::RunResult, redis: Option<f64>) -> Sample {
        let per = |cores: f64| {
            if r.ops_per_s > 0.0 {
                cores * 1e6 / r.ops_per_s
            } else {
                0.0
            }
        };
        Sample {
            round,
            ops_per_s: r.ops_per_s,
            p50_ms: r.latency_ms.p50,
            p99_ms: r.latency_ms.p99,
            server_cpu_us_per_op: per(r.server_cpu_cores),
            client_cpu_us_per_op: per(r.client_cpu_cores),
            ratio: redis.filter(|p| *p > 0.0).map(|p| r.ops_per_s / p),
        }
    }
}

/// One cell: Redis and every candidate, each round.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyCell {
    /// Senders.
    pub connections: usize,
    /// In flight in all.
    pub in_flight: usize,
    /// Redis, each round.
    pub redis: Vec<Sample>,
    /// Per candidate (in [`TransportReport::candidates`] order), each round.
    pub candidates: Vec<Vec<Sample>>,
}

/// The study's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransportReport {
    /// `quick` or `full`.
    pub mode: String,
    /// Rounds.
    pub rounds: usize,
    /// Measurement window, s.
    pub measure_s: f64,
    /// What was tried.
    pub candidates: Vec<Candidate>,
    /// The cells.
    pub cells: Vec<StudyCell>,
}

/// Runs the study (module docs).
///
/// # Errors
/// A carrier or Redis that cannot be started or driven.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    bin: &Path,
    redis_bin: &Path,
    work: &Path,
    log: &str,
    rounds: usize,
    warmup: Duration,
    measure: Duration,
    mode: &str,
) -> anyhow::Result<TransportReport> {
    let candidates = candidates();
    let mut carriers = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        let dir = work.join(format!("transport-{i}"));
        std::fs::create_dir_all(&dir)?;
        let (proc, _) = CarrierProc::start_tuned(bin, &dir, QUEUES + 16, log, c.tuning).await?;
        let (_, rkids) = recipient::register(
            &proc,
            crate::carrier::Recipients::fresh(),
            0,
            QUEUES,
            8,
            64,
            false,
        )
        .await?;
        let targets = Targets::of_rkids(&rkids);
        eprintln!("[transport] {} started: {:?}", c.name, c.tuning);
        carriers.push((proc, targets));
    }
    let redis = RedisProc::start(redis_bin, &work.join("redis")).await?;
    let redis_targets = carriers
        .first()
        .map(|(_, t)| t.fresh_counts())
        .ok_or_else(|| anyhow::anyhow!("no candidates"))?;
    let mut cells: Vec<StudyCell> = CONNECTIONS
        .iter()
        .map(|&connections| StudyCell {
            connections,
            in_flight: IN_FLIGHT,
            redis: Vec::new(),
            candidates: vec![Vec::new(); candidates.len()],
        })
        .collect();
    for round in 0..rounds {
        for cell in &mut cells {
            let spec = LoadSpec {
                connections: cell.connections,
                in_flight: IN_FLIGHT,
                envelope_bytes: 1024,
                warmup,
                measure,
                rate: None,
                limit: None,
            };
            let _ = redis.wait_background(Duration::from_secs(300)).await?;
            let peer = load::run(System::Peer(&redis), &spec, &redis_targets).await?;
            let peer_per_s = peer.ops_per_s;
            cell.redis.push(Sample::of(round, &peer, None));
            for k in 0..candidates.len() {
                let i = (k + round) % candidates.len();
                let (proc, targets) = &carriers[i];
                let _ = redis.wait_background(Duration::from_secs(300)).await?;
                let ours = load::run(System::Ours(proc), &spec, targets).await?;
                let sample = Sample::of(round, &ours, Some(peer_per_s));
                eprintln!(
                    "  [transport] #{} {:>2}x{:<3} {:<14} {:>7.0}/s ({:.2}x redis {:.0}/s) p99 {:>6.2} ms, {:.1} µs server + {:.1} µs client CPU per deposit",
                    round + 1,
                    cell.connections,
                    IN_FLIGHT / cell.connections,
                    candidates[i].name,
                    sample.ops_per_s,
                    sample.ratio.unwrap_or(0.0),
                    peer_per_s,
                    sample.p99_ms,
                    sample.server_cpu_us_per_op,
                    sample.client_cpu_us_per_op,
                );
                cell.candidates[i].push(sample);
            }
        }
    }
    for (proc, _) in carriers {
        proc.stop().await?;
    }
    Ok(TransportReport {
        mode: mode.into(),
        rounds,
        measure_s: measure.as_secs_f64(),
        candidates,
        cells,
    })
}

/// The report as Markdown: per cell, each candidate's medians over the
/// rounds.
pub fn markdown(r: &TransportReport) -> String {
    let mut out = format!(
        "{} run, {} rounds of {:.1} s per cell; medians over the rounds; \
         ratios against Redis (`appendfsync always`) in the same cell and round.\n\n",
        r.mode, r.rounds, r.measure_s
    );
    out.push_str("| candidate | what |\n|---|---|\n");
    for c in &r.candidates {
        out.push_str(&format!("| `{}` | {} |\n", c.name, c.why));
    }
    for cell in &r.cells {
        let conns = cell.connections;
        let per = cell.in_flight / conns.max(1);
        out.push_str(&format!(
            "\n**{conns} × {per}** (Redis {:.0}/s, p99 {:.2} ms)\n\n\
             | candidate | admitted/s | × Redis | p50 ms | p99 ms | server µs/deposit | client µs/deposit |\n\
             |---|---:|---:|---:|---:|---:|---:|\n",
            med(&cell.redis, |s| s.ops_per_s),
            med(&cell.redis, |s| s.p99_ms),
        ));
        for (c, samples) in r.candidates.iter().zip(&cell.candidates) {
            out.push_str(&format!(
                "| `{}` | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |\n",
                c.name,
                med(samples, |s| s.ops_per_s),
                med(samples, |s| s.ratio.unwrap_or(0.0)),
                med(samples, |s| s.p50_ms),
                med(samples, |s| s.p99_ms),
                med(samples, |s| s.server_cpu_us_per_op),
                med(samples, |s| s.client_cpu_us_per_op),
            ));
        }
    }
    out
}

fn med(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    median(&samples.iter().map(f).collect::<Vec<_>>())
}
