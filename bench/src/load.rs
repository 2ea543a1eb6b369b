//! The deposit load: N connections, each one pipelined stream (the
//! carrier's `submit-stream`, or a Redis connection sending `XADD`), with
//! a writer task and a reader task per connection.
//!
//! - **Closed loop** (throughput): each connection keeps up to
//!   `in_flight / connections` operations outstanding; a new one is sent
//!   as soon as an answer frees a slot. Latency is send → verdict.
//! - **Open loop** (latency under load): operations are sent on a fixed
//!   schedule whatever the answers do; latency is measured from the
//!   *scheduled* instant, so a stall is charged to every operation it
//!   delays (no coordinated omission).
//!
//! Only answers that arrive inside the measurement window (after the
//! warm-up) count; every admitted deposit is also counted per queue for
//! the drain's check.

use crate::carrier::{CarrierProc, close};
use crate::envelope::EnvelopeMaker;
use crate::procfs::{self, Sample};
use crate::redis::{RedisProc, Reply, Resp, RespReader, RespWriter};
use crate::stats::{Percentiles, micros};
use anyhow::{Context as _, bail};
use rltp_client::{SubmitReader, SubmitWriter};
use rltp_proofs::multikey::Rkid;
use rltp_wire::verdict::SubmitVerdict;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

/// One recipient queue, addressed both ways.
#[derive(Debug, Clone)]
pub struct Queue {
    /// The rkid (the carrier's queue address).
    pub rkid: Rkid,
    /// Its Multikey, as the envelope's `rkid` member.
    pub multikey: String,
    /// The peer's stream key, `q:<index>`.
    pub key: Vec<u8>,
}

impl Queue {
    /// The queue of `rkid`, recipient number `index`.
    pub fn new(rkid: Rkid, index: u64) -> Queue {
        Queue {
            rkid,
            multikey: rkid.to_multikey(),
            key: format!("q:{index}").into_bytes(),
        }
    }
}

/// A set of queues with a per-queue count of admitted deposits.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The queues, deposited to round robin.
    pub queues: Arc<Vec<Queue>>,
    /// Admitted deposits per queue, by the system under load.
    pub admitted: Arc<Vec<AtomicU64>>,
}

impl Targets {
    /// Targets over `queues`, counts at zero.
    pub fn new(queues: Vec<Queue>) -> Targets {
        let admitted = (0..queues.len()).map(|_| AtomicU64::new(0)).collect();
        Targets {
            queues: Arc::new(queues),
            admitted: Arc::new(admitted),
        }
    }

    /// The queues of `rkids`, recipient numbers in order, counts at zero.
    pub fn of_rkids<'a>(rkids: impl IntoIterator<Item = &'a Rkid>) -> Targets {
        Targets::new(
            rkids
                .into_iter()
                .enumerate()
                .map(|(i, r)| Queue::new(*r, i as u64))
                .collect(),
        )
    }

    /// The same queues with fresh counts (for the other system).
    pub fn fresh_counts(&self) -> Targets {
        Targets {
            queues: Arc::clone(&self.queues),
            admitted: Arc::new((0..self.queues.len()).map(|_| AtomicU64::new(0)).collect()),
        }
    }

    /// Admitted deposits in total.
    pub fn total_admitted(&self) -> u64 {
        self.admitted
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .sum()
    }
}

/// The system a load runs against.
#[derive(Debug, Clone, Copy)]
pub enum System<'a> {
    /// The carrier.
    Ours(&'a CarrierProc),
    /// The Redis peer.
    Peer(&'a RedisProc),
    /// Carrier nodes of one carrier on a shared database: connection `i`
    /// goes to node `i mod n`; the process figures are the first node's
    /// (the others and the database count as foreign CPU).
    Nodes(&'a [CarrierProc]),
}

impl System<'_> {
    /// The report's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            System::Ours(_) | System::Nodes(_) => "rltp-carrier",
            System::Peer(_) => "redis",
        }
    }

    fn pid(&self) -> u32 {
        match self {
            System::Ours(c) => c.pid(),
            System::Nodes(nodes) => nodes.first().map_or(0, CarrierProc::pid),
            System::Peer(r) => r.pid(),
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct LoadSpec {
    /// Connections (senders).
    pub connections: usize,
    /// Operations in flight in total (closed loop), split evenly.
    pub in_flight: usize,
    /// Envelope size, bytes.
    pub envelope_bytes: usize,
    /// Warm-up before the window.
    pub warmup: Duration,
    /// The measurement window.
    pub measure: Duration,
    /// Open loop: this many operations per second in total.
    pub rate: Option<f64>,
    /// Stop after this many operations instead of at the window's end
    /// (the window is then the whole run, and no warm-up is excluded).
    pub limit: Option<u64>,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunResult {
    /// `rltp-carrier` or `redis`.
    pub system: String,
    /// Connections.
    pub connections: usize,
    /// Operations in flight (closed loop) or the open-loop cap.
    pub in_flight: usize,
    /// Queues deposited to.
    pub queues: usize,
    /// Envelope size, bytes.
    pub envelope_bytes: usize,
    /// Open loop: the offered rate, operations/s.
    pub offered_per_s: Option<f64>,
    /// Admitted (stored) per second in the window.
    pub ops_per_s: f64,
    /// Envelope bytes admitted per second, MiB/s.
    pub mib_per_s: f64,
    /// Admitted in the window.
    pub admitted: u64,
    /// Refusals in the window, by verdict or error text.
    pub refused: BTreeMap<String, u64>,
    /// Send → verdict, ms (open loop: scheduled instant → verdict).
    pub latency_ms: Percentiles,
    /// The server process's CPU in the window, cores (1.0 = one core).
    pub server_cpu_cores: f64,
    /// The server's CPU in the window per thread group, cores (e.g.
    /// `rltp-writer`: the carrier's group-commit writer;
    /// `tokio-runtime-w`: its async workers; `redis-server`: Redis's
    /// main thread).
    pub server_threads_cores: BTreeMap<String, f64>,
    /// This harness's CPU in the window, cores.
    pub client_cpu_cores: f64,
    /// CPU used by everything else on the machine in the window, cores
    /// (other processes: the noise indicator of this run).
    pub foreign_cpu_cores: f64,
    /// Bytes the server wrote to storage per admitted deposit.
    pub server_disk_bytes_per_op: f64,
    /// The server's largest resident set seen in the window, KiB.
    pub server_rss_max_kib: u64,
    /// Window length, s.
    pub window_s: f64,
}

enum Tx {
    Quic(SubmitWriter),
    Redis(RespWriter),
}

enum Rx {
    Quic(SubmitReader),
    Redis(RespReader),
}

enum Outcome {
    Admitted,
    Refused(String),
}

impl Tx {
    async fn send(&mut self, queue: &Queue, envelope: &[u8]) -> anyhow::Result<()> {
        match self {
            Tx::Quic(w) => Ok(w.send(&queue.rkid, envelope).await?),
            Tx::Redis(w) => w.send(&[b"XADD", &queue.key, b"*", b"e", envelope]).await,
        }
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        match self {
            Tx::Quic(_) => Ok(()),
            Tx::Redis(w) => w.flush().await,
        }
    }

    fn finish(&mut self) {
        if let Tx::Quic(w) = self {
            w.finish();
        }
    }
}

impl Rx {
    async fn recv(&mut self) -> anyhow::Result<Outcome> {
        match self {
            Rx::Quic(r) => match r.recv().await? {
                Some(answer) if answer.verdict == SubmitVerdict::Admitted => Ok(Outcome::Admitted),
                Some(answer) => Ok(Outcome::Refused(answer.verdict.as_str().to_owned())),
                None => bail!("submit-stream ended early"),
            },
            Rx::Redis(r) => match r.read().await? {
                Reply::Bulk(Some(_)) => Ok(Outcome::Admitted),
                Reply::Error(e) => Ok(Outcome::Refused(e)),
                other => bail!("XADD: unexpected {other:?}"),
            },
        }
    }
}

/// What a connection's reader saw.
#[derive(Default)]
struct Seen {
    admitted: u64,
    refused: BTreeMap<String, u64>,
    latencies: Vec<u32>,
    error: Option<String>,
}

/// Opens `n` pipelined connections to `system`, keeping whatever must
/// stay alive while they are used.
async fn open(
    system: System<'_>,
    n: usize,
) -> anyhow::Result<(Vec<(Tx, Rx)>, Vec<rltp_client::Client>)> {
    let mut pipes = Vec::with_capacity(n);
    let mut keep = Vec::new();
    for i in 0..n {
        let node = match system {
            System::Ours(carrier) => Some(carrier),
            System::Nodes(nodes) => nodes.get(i % nodes.len().max(1)),
            System::Peer(_) => None,
        };
        match (system, node) {
            (System::Ours(_) | System::Nodes(_), Some(carrier)) => {
                let client = carrier.connect().await?;
                let (w, r) = client.submitter().await?.split();
                pipes.push((Tx::Quic(w), Rx::Quic(r)));
                keep.push(client);
            }
            (System::Peer(redis), _) => {
                let Resp { writer, reader } = Resp::connect(&redis.addr).await?;
                pipes.push((Tx::Redis(writer), Rx::Redis(reader)));
            }
            (_, None) => bail!("no carrier node to connect to"),
        }
    }
    Ok((pipes, keep))
}

/// Runs one load against `system` on `targets`.
///
/// # Errors
/// Connection failures, or a connection failing during the run.
pub async fn run(
    system: System<'_>,
    spec: &LoadSpec,
    targets: &Targets,
) -> anyhow::Result<RunResult> {
    let maker = Arc::new(EnvelopeMaker::new(spec.envelope_bytes)?);
    let conns = spec.connections.max(1);
    let per_conn = (spec.in_flight / conns).max(1);
    let (pipes, keep) = open(system, conns)
        .await
        .context("opening the load connections")?;
    let counter = Arc::new(AtomicU64::new(rand::random::<u32>() as u64));
    let sent = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let (t_start, t_end) = match spec.limit {
        Some(_) => (t0, t0 + Duration::from_secs(86_400)),
        None => (t0 + spec.warmup, t0 + spec.warmup + spec.measure),
    };

    let monitor = tokio::spawn(monitor(system.pid(), t_start, t_end, Arc::clone(&finished)));
    let mut readers = Vec::with_capacity(conns);
    let mut writers = Vec::with_capacity(conns);
    for (c, (mut tx, mut rx)) in pipes.into_iter().enumerate() {
        let sem = Arc::new(Semaphore::new(per_conn));
        let (ts_tx, mut ts_rx) = mpsc::unbounded_channel::<(Instant, usize)>();
        let queues = Arc::clone(&targets.queues);
        let counter = Arc::clone(&counter);
        let maker = Arc::clone(&maker);
        let writer_sem = Arc::clone(&sem);
        let rate = spec.rate;
        let limit = spec.limit;
        let sent = Arc::clone(&sent);
        writers.push(tokio::spawn(async move {
            let pick = |queues: &[Queue]| -> Option<(usize, Vec<u8>)> {
                if limit.is_some_and(|l| sent.fetch_add(1, Ordering::Relaxed) >= l) {
                    return None;
                }
                let i = (counter.fetch_add(1, Ordering::Relaxed) as usize) % queues.len().max(1);
                queues.get(i).map(|q| (i, maker.make(&q.multikey)))
            };
            let result: anyhow::Result<()> = async {
                match rate {
                    None => loop {
                        if Instant::now() >= t_end {
                            break;
                        }
                        let permit = match writer_sem.try_acquire() {
                            Ok(p) => p,
                            Err(_) => {
                                tx.flush().await?;
                                match writer_sem.acquire().await {
                                    Ok(p) => p,
                                    Err(_) => break, // the reader stopped
                                }
                            }
                        };
                        permit.forget();
                        let Some((i, envelope)) = pick(&queues) else {
                            break;
                        };
                        let sent = Instant::now();
                        tx.send(&queues[i], &envelope).await?;
                        if ts_tx.send((sent, i)).is_err() {
                            break;
                        }
                    },
                    Some(rate) => {
                        let interval = Duration::from_secs_f64(conns as f64 / rate.max(1.0));
                        let mut next = t0 + interval.mul_f64(c as f64 / conns as f64);
                        while next < t_end {
                            if next > Instant::now() {
                                tx.flush().await?;
                                tokio::time::sleep_until(next).await;
                            }
                            let Some((i, envelope)) = pick(&queues) else {
                                break;
                            };
                            tx.send(&queues[i], &envelope).await?;
                            if ts_tx.send((next, i)).is_err() {
                                break;
                            }
                            next += interval;
                        }
                    }
                }
                tx.flush().await?;
                Ok(())
            }
            .await;
            tx.finish();
            result
        }));
        let admitted = Arc::clone(&targets.admitted);
        readers.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            while let Some((sent, i)) = ts_rx.recv().await {
                let outcome = rx.recv().await;
                let done = Instant::now();
                sem.add_permits(1);
                let in_window = done >= t_start && done < t_end;
                match outcome {
                    Ok(Outcome::Admitted) => {
                        if let Some(a) = admitted.get(i) {
                            a.fetch_add(1, Ordering::Relaxed);
                        }
                        if in_window {
                            seen.admitted += 1;
                            seen.latencies.push(micros(done - sent));
                        }
                    }
                    Ok(Outcome::Refused(why)) => {
                        if in_window {
                            *seen.refused.entry(why).or_default() += 1;
                        }
                    }
                    Err(e) => {
                        seen.error = Some(format!("{e:#}"));
                        sem.close();
                        break;
                    }
                }
            }
            seen
        }));
    }

    let mut error = None;
    for w in writers {
        if let Err(e) = w.await? {
            error.get_or_insert(format!("{e:#}"));
        }
    }
    let mut total = Seen::default();
    for r in readers {
        let seen = r.await?;
        total.admitted += seen.admitted;
        for (k, v) in seen.refused {
            *total.refused.entry(k).or_default() += v;
        }
        total.latencies.extend(seen.latencies);
        if let Some(e) = seen.error {
            error.get_or_insert(e);
        }
    }
    let elapsed = t_start.elapsed();
    finished.store(true, Ordering::Relaxed);
    let watched = monitor.await?;
    for client in keep {
        close(client);
    }
    if let Some(e) = error {
        bail!("{} load failed: {e}", system.name());
    }
    let window = match spec.limit {
        Some(_) => elapsed.as_secs_f64(),
        None => spec.measure.as_secs_f64(),
    };
    let ops_per_s = total.admitted as f64 / window;
    Ok(RunResult {
        system: system.name().to_owned(),
        connections: conns,
        in_flight: if spec.rate.is_some() {
            0
        } else {
            per_conn * conns
        },
        queues: targets.queues.len(),
        envelope_bytes: spec.envelope_bytes,
        offered_per_s: spec.rate,
        ops_per_s,
        mib_per_s: ops_per_s * spec.envelope_bytes as f64 / (1024.0 * 1024.0),
        admitted: total.admitted,
        refused: total.refused,
        latency_ms: Percentiles::of_micros(&mut total.latencies),
        server_cpu_cores: watched.server_cpu / window,
        server_threads_cores: watched
            .server_threads
            .into_iter()
            .map(|(k, v)| (k, v / window))
            .collect(),
        client_cpu_cores: watched.client_cpu / window,
        foreign_cpu_cores: watched.foreign_cpu / window,
        server_disk_bytes_per_op: if total.admitted > 0 {
            watched.written as f64 / total.admitted as f64
        } else {
            0.0
        },
        server_rss_max_kib: watched.rss_max,
        window_s: window,
    })
}

/// What the monitor saw in the window.
struct Watched {
    foreign_cpu: f64,
    server_cpu: f64,
    server_threads: BTreeMap<String, f64>,
    client_cpu: f64,
    written: u64,
    rss_max: u64,
}

/// Samples the server and this process at the window's edges, and the
/// server's resident set every 250 ms inside it.
async fn monitor(pid: u32, t_start: Instant, t_end: Instant, finished: Arc<AtomicBool>) -> Watched {
    let me = std::process::id();
    tokio::time::sleep_until(t_start).await;
    let (s0, c0, m0) = (
        Sample::of(pid),
        Sample::of(me),
        procfs::system_busy_seconds(),
    );
    let mut rss_max = 0;
    while Instant::now() < t_end && !finished.load(Ordering::Relaxed) {
        rss_max = rss_max.max(procfs::status_kib(pid, "VmRSS").unwrap_or(0));
        let next = (Instant::now() + Duration::from_millis(250)).min(t_end);
        tokio::time::sleep_until(next).await;
    }
    let (s1, c1, m1) = (
        Sample::of(pid),
        Sample::of(me),
        procfs::system_busy_seconds(),
    );
    Watched {
        foreign_cpu: ((m1 - m0) - (s1.cpu - s0.cpu) - (c1.cpu - c0.cpu)).max(0.0),
        server_cpu: s1.cpu - s0.cpu,
        server_threads: s1.threads_since(&s0),
        client_cpu: c1.cpu - c0.cpu,
        written: s1.written.saturating_sub(s0.written),
        rss_max,
    }
}
