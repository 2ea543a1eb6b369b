//! `carrier-bench --scale-out` (issue 16): carrier nodes on one PostgreSQL
//! database — 1, 2 and 3 nodes — against PostgreSQL's own ceiling for the
//! same rows and the embedded store, in one run, round after round.
//!
//! - **The database**: a throwaway cluster (`rltp-pgtest`: `initdb` and
//!   `pg_ctl` from Debian's `postgresql`, loopback, `fsync` and
//!   `synchronous_commit` on), with the production settings of
//!   `deploy/OPERATIONS.md` ("Many nodes") that matter for throughput:
//!   `shared_buffers` 256 MB, `max_wal_size` 2 GB.
//! - **Ours**: N `serve` nodes (`[store] backend = "postgres"`, the
//!   benchmark's open private limits), 100 queues registered through the
//!   first, then scenario 1's closed loop (64 senders, each one pipelined
//!   `submit-stream`, 256 deposits of 1 KiB in flight in all) spread round
//!   robin over the nodes. Each cell starts on an empty schema. The mean
//!   group commit (deposits per transaction) is read from every node's
//!   `rltp_carrier_batch_operations` histogram.
//! - **The ceiling**: `pgbench` with a custom script writing what one
//!   group commit of the store writes — the global lock row
//!   (`SELECT … FOR UPDATE`), one multi-row `INSERT` of `batch` deposits
//!   (1 KiB `bytea`, the real table and indexes), their `rltp_due` rows,
//!   the queue rows' upsert and the counters' `UPDATE` — with `batch` the
//!   mean group commit our one node reached, 8 clients: the database's
//!   rate for the same rows in the same serial order. A second script
//!   without the lock and counters shows what the rows cost when nothing
//!   serializes them (the deposit and due rows alone: the shared queue
//!   and counter rows would serialize them again).
//! - **Embedded**: one node on its embedded store, the same load.
//!
//! Everything shares the 2 cores: the nodes, PostgreSQL and this harness.

use crate::carrier::CarrierProc;
use crate::load::{self, LoadSpec, System, Targets};
use crate::recipient;
use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::time::Duration;

/// Senders of every cell.
const CONNECTIONS: usize = 64;
/// Queues deposited to.
const QUEUES: u64 = 100;
/// pgbench clients.
const PGBENCH_CLIENTS: usize = 8;

/// The settings the benchmark's cluster adds to the test base settings.
const CLUSTER_SETTINGS: &[(&str, &str)] = &[
    ("shared_buffers", "'256MB'"),
    ("max_wal_size", "'2GB'"),
    ("max_connections", "300"),
];

/// One cell of ours.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRun {
    /// `postgres` or `embedded`.
    pub store: String,
    /// Carrier nodes.
    pub nodes: usize,
    /// The round (1-based).
    pub round: usize,
    /// Admitted deposits per second.
    pub admitted_per_s: f64,
    /// Send → verdict, p50 and p99, ms.
    pub p50_ms: f64,
    /// p99, ms.
    pub p99_ms: f64,
    /// Mean deposits per group commit, all nodes.
    pub mean_batch: f64,
    /// Refusals in the window.
    pub refused: u64,
    /// CPU of everything but the first node and this harness (the other
    /// nodes and PostgreSQL included), cores.
    pub foreign_cpu_cores: f64,
    /// The nodes' database sessions found waiting for a lock (PostgreSQL's
    /// `wait_event_type = 'Lock'`: a queue's, the pool's, the tombstone
    /// gate), as a share of those found running a statement, sampled every
    /// 100 ms through the window (0 for the embedded store).
    #[serde(default)]
    pub lock_wait_share: f64,
    /// The waits of [`NodeRun::lock_wait_share`] by `pg_locks.locktype`
    /// (`advisory`: a queue's lock; `transactionid`/`tuple`: a row another
    /// transaction changed, e.g. the pool's), each as a share of the active
    /// sessions sampled.
    #[serde(default)]
    pub lock_waits_by_kind: std::collections::BTreeMap<String, f64>,
}

/// One pgbench run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CeilingRun {
    /// `serial` (with the global lock and counters) or `unserialized`.
    pub variant: String,
    /// The round (1-based).
    pub round: usize,
    /// Deposits per transaction.
    pub batch: usize,
    /// pgbench clients.
    pub clients: usize,
    /// Transactions per second.
    pub tps: f64,
    /// Deposit rows per second (`tps × batch`).
    pub rows_per_s: f64,
}

/// The section's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleOutReport {
    /// `quick` or `full`.
    pub mode: String,
    /// PostgreSQL's `server_version`.
    pub postgres: String,
    /// Measurement window per cell, s.
    pub measure_s: f64,
    /// Every cell of ours, in run order.
    pub runs: Vec<NodeRun>,
    /// Every pgbench run, in run order.
    pub ceiling: Vec<CeilingRun>,
}

/// Runs the section: `rounds` rounds of embedded, 1, 2, 3 nodes, then the
/// two ceilings.
///
/// # Errors
/// A process that does not start, a failed load, pgbench failing.
pub async fn run(
    bin: &Path,
    work: &Path,
    log_level: &str,
    rounds: usize,
    warmup: Duration,
    measure: Duration,
    mode: &str,
) -> anyhow::Result<ScaleOutReport> {
    let cluster =
        tokio::task::spawn_blocking(|| rltp_pgtest::Cluster::start_with(CLUSTER_SETTINGS))
            .await?
            .context("starting the benchmark's PostgreSQL cluster")?;
    let postgres = cluster.psql("SHOW server_version")?;
    let spec = LoadSpec {
        connections: CONNECTIONS,
        in_flight: 256,
        envelope_bytes: 1024,
        warmup,
        measure,
        rate: None,
        limit: None,
    };
    let mut report = ScaleOutReport {
        mode: mode.to_owned(),
        postgres,
        measure_s: measure.as_secs_f64(),
        runs: Vec::new(),
        ceiling: Vec::new(),
    };
    for round in 1..=rounds {
        for (store, nodes) in [
            ("embedded", 1),
            ("postgres", 1),
            ("postgres", 2),
            ("postgres", 3),
        ] {
            let dir = work.join(format!("r{round}-{store}-{nodes}"));
            let run = cell(bin, &dir, log_level, &cluster, store, nodes, &spec, round).await?;
            eprintln!(
                "[scale-out] round {round} {store} x{nodes}: {:.0}/s p99 {:.2} ms, {:.1} per commit, others {:.2} cores",
                run.admitted_per_s, run.p99_ms, run.mean_batch, run.foreign_cpu_cores
            );
            report.runs.push(run);
        }
        let batch = report
            .runs
            .iter()
            .filter(|r| r.store == "postgres" && r.nodes == 1 && r.round == round)
            .map(|r| r.mean_batch.round().max(1.0) as usize)
            .next()
            .unwrap_or(16);
        for variant in ["serial", "unserialized"] {
            let c = ceiling(&cluster, variant, batch, measure, round).await?;
            eprintln!(
                "[scale-out] round {round} pgbench {variant}: {:.0} tps x {batch} = {:.0} rows/s",
                c.tps, c.rows_per_s
            );
            report.ceiling.push(c);
        }
    }
    Ok(report)
}

/// One cell: `nodes` fresh nodes (or one embedded), 100 queues, the load.
#[allow(clippy::too_many_arguments)]
async fn cell(
    bin: &Path,
    dir: &Path,
    log_level: &str,
    cluster: &rltp_pgtest::Cluster,
    store: &str,
    nodes: usize,
    spec: &LoadSpec,
    round: usize,
) -> anyhow::Result<NodeRun> {
    if store == "postgres" {
        cluster.psql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")?;
    }
    let mut procs: Vec<CarrierProc> = Vec::new();
    let mut ports = Vec::new();
    for n in 0..nodes {
        let port = free_port()?;
        ports.push(port);
        let mut extra = format!("\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
        if store == "postgres" {
            extra.push_str(&format!(
                "\n[store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{}\"\n",
                cluster.conninfo()
            ));
        }
        let node_dir = dir.join(format!("node{n}"));
        std::fs::create_dir_all(&node_dir)?;
        let (proc, _) = CarrierProc::start_node(
            bin,
            &node_dir,
            QUEUES + 16,
            log_level,
            &extra,
            procs.first(),
            rltp_client::transport::Tuning::default(),
        )
        .await?;
        procs.push(proc);
    }
    let (_, rkids) = recipient::register(
        &procs[0],
        crate::carrier::Recipients::fresh(),
        0,
        QUEUES,
        8,
        64,
        false,
    )
    .await?;
    let targets = Targets::of_rkids(&rkids);
    let before = batches(&ports)?;
    let sampler = (store == "postgres").then(|| LockSampler::start(cluster.conninfo()));
    let result = load::run(System::Nodes(&procs), spec, &targets).await?;
    let (lock_wait_share, lock_waits_by_kind) =
        sampler.map_or((0.0, Default::default()), LockSampler::stop);
    let after = batches(&ports)?;
    for proc in procs {
        proc.stop().await?;
    }
    let (ops, commits) = (after.0 - before.0, after.1 - before.1);
    Ok(NodeRun {
        store: store.to_owned(),
        nodes,
        round,
        admitted_per_s: result.ops_per_s,
        p50_ms: result.latency_ms.p50,
        p99_ms: result.latency_ms.p99,
        mean_batch: if commits > 0.0 { ops / commits } else { 0.0 },
        refused: result.refused.values().sum(),
        foreign_cpu_cores: result.foreign_cpu_cores,
        lock_wait_share,
        lock_waits_by_kind,
    })
}

/// Samples, every 100 ms on a thread of its own, how many of the nodes'
/// sessions (`application_name` `rltp-carrier`) run a statement and how
/// many of those wait for a lock.
struct LockSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Sampled>,
}

/// What the sampler counted: active sessions, waiting ones, waits by kind.
#[derive(Default)]
struct Sampled {
    active: u64,
    waiting: u64,
    by_kind: std::collections::BTreeMap<String, u64>,
}

impl LockSampler {
    fn start(conninfo: String) -> LockSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut sampled = Sampled::default();
            let Ok(mut client) = postgres_sampler(&conninfo) else {
                return sampled;
            };
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = sample(&mut client, &mut sampled);
                std::thread::sleep(Duration::from_millis(100));
            }
            sampled
        });
        LockSampler { stop, thread }
    }

    /// Stops sampling: the share of active sessions found waiting, and
    /// by kind.
    fn stop(self) -> (f64, std::collections::BTreeMap<String, f64>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match self.thread.join() {
            Ok(s) if s.active > 0 => {
                let share = |n: u64| n as f64 / s.active as f64;
                let by_kind = s
                    .by_kind
                    .iter()
                    .map(|(k, n)| (k.clone(), share(*n)))
                    .collect();
                (share(s.waiting), by_kind)
            }
            _ => (0.0, Default::default()),
        }
    }
}

/// A `psql` kept open on the cluster, fed one query per sample.
struct PsqlSession {
    child: std::process::Child,
    lines: std::io::BufReader<std::process::ChildStdout>,
}

fn postgres_sampler(conninfo: &str) -> anyhow::Result<PsqlSession> {
    let mut child = std::process::Command::new("psql")
        .args(["-X", "-A", "-t", "-q", conninfo])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting psql for the lock sampler")?;
    let out = child.stdout.take().context("psql's stdout")?;
    Ok(PsqlSession {
        child,
        lines: std::io::BufReader::new(out),
    })
}

/// One sample into `into`: active sessions, those waiting for a lock, and
/// the ungranted locks by kind.
fn sample(session: &mut PsqlSession, into: &mut Sampled) -> anyhow::Result<()> {
    use std::io::BufRead as _;
    let stdin = session.child.stdin.as_mut().context("psql's stdin")?;
    stdin.write_all(
        b"SELECT (SELECT count(*) FILTER (WHERE state = 'active') || '|' || \
                  count(*) FILTER (WHERE state = 'active' AND wait_event_type = 'Lock') \
                  FROM pg_stat_activity WHERE application_name = 'rltp-carrier') || '|' || \
          coalesce((SELECT string_agg(locktype || ':' || n, ',') FROM \
            (SELECT l.locktype, count(*) AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
             WHERE NOT l.granted AND a.application_name = 'rltp-carrier' GROUP BY 1) k), '');\n",
    )?;
    stdin.flush()?;
    let mut line = String::new();
    session.lines.read_line(&mut line)?;
    let mut parts = line.trim().splitn(3, '|');
    let active: u64 = parts.next().context("a sample")?.parse()?;
    let waiting: u64 = parts.next().context("a sample")?.parse()?;
    into.active += active;
    into.waiting += waiting;
    for kind in parts
        .next()
        .unwrap_or("")
        .split(',')
        .filter(|k| !k.is_empty())
    {
        let (name, n) = kind.split_once(':').context("a lock kind")?;
        *into.by_kind.entry(name.to_owned()).or_default() += n.parse::<u64>()?;
    }
    Ok(())
}

impl Drop for PsqlSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Σ over the nodes of the group-commit histogram's sum and count
/// (operations, commits), from their `/metrics`.
fn batches(ports: &[u16]) -> anyhow::Result<(f64, f64)> {
    let mut total = (0.0, 0.0);
    for port in ports {
        let text = scrape(*port)?;
        let value = |name: &str| -> anyhow::Result<f64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
                .with_context(|| format!("{name} missing from /metrics on port {port}"))
        };
        total.0 += value("rltp_carrier_batch_operations_sum")?;
        total.1 += value("rltp_carrier_batch_operations_count")?;
    }
    Ok(total)
}

/// `GET /metrics` on a loopback port.
fn scrape(port: u16) -> anyhow::Result<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text)
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// The schema of the ceiling runs: the store's own tables and indexes.
fn ceiling_schema() -> String {
    format!(
        "DROP SCHEMA IF EXISTS ceiling CASCADE; CREATE SCHEMA ceiling; SET search_path TO ceiling; {} \
         CREATE SEQUENCE ceiling_seq;",
        rltp_storage::postgres::schema::MIGRATIONS[0]
    )
}

/// What one group commit of `batch` deposits writes: the lock row, the
/// deposits, their due entries, the queue rows, the counters (`serial`);
/// or the deposit and due rows alone, which no two transactions share
/// (`unserialized`: the shared queue and counter rows would serialize
/// them again through their row locks).
fn ceiling_script(variant: &str) -> String {
    let deposits = "WITH d AS (INSERT INTO rltp_deposits (rkid, seq, id, len, admitted_at, give_up_at, bytes) \
         SELECT decode(lpad(to_hex((:q + g) % 100), 64, '0'), 'hex'), nextval('ceiling_seq'), \
         decode(md5(random()::text) || md5(random()::text), 'hex'), 1024, 0, 0, \
         decode(repeat(md5(random()::text), 64), 'hex') FROM generate_series(1, :batch) g \
         RETURNING rkid, seq) \
         INSERT INTO rltp_due (at, tag, rkid, seq, id) SELECT 0, 2, rkid, seq, '\\x'::bytea FROM d;\n";
    let queues = "INSERT INTO rltp_queues (rkid, last_seq, bytes) \
         SELECT decode(lpad(to_hex(g % 100), 64, '0'), 'hex'), :q, 0 \
         FROM generate_series(:q, :q + least(:batch, 100) - 1) g \
         ON CONFLICT (rkid) DO UPDATE SET last_seq = EXCLUDED.last_seq, bytes = rltp_queues.bytes + 1024;\n";
    let lock = "SELECT total_bytes FROM rltp_occupancy WHERE id = 1 FOR UPDATE;\n";
    let counters = "UPDATE rltp_occupancy SET total_bytes = total_bytes + 1024 * :batch, \
                    deposits = deposits + :batch WHERE id = 1;\n";
    if variant == "serial" {
        format!("\\set q random(0, 99)\nBEGIN;\n{lock}{deposits}{queues}{counters}COMMIT;\n")
    } else {
        format!("\\set q random(0, 99)\nBEGIN;\n{deposits}COMMIT;\n")
    }
}

/// One pgbench run of `variant`.
async fn ceiling(
    cluster: &rltp_pgtest::Cluster,
    variant: &str,
    batch: usize,
    measure: Duration,
    round: usize,
) -> anyhow::Result<CeilingRun> {
    cluster.psql(&ceiling_schema())?;
    let conninfo = "dbname=postgres options='-c search_path=ceiling'";
    let script = ceiling_script(variant);
    let secs = measure.as_secs().max(2).to_string();
    let clients = PGBENCH_CLIENTS.to_string();
    let batch_arg = format!("batch={batch}");
    let out = cluster.pgbench(
        conninfo,
        &script,
        &[
            "-c", &clients, "-j", "2", "-T", &secs, "-M", "prepared", "-D", &batch_arg,
        ],
    )?;
    let tps = out
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("tps = ")?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .with_context(|| format!("no tps line in pgbench's output: {out}"))?;
    if tps <= 0.0 {
        bail!("pgbench ran no transaction: {out}");
    }
    Ok(CeilingRun {
        variant: variant.to_owned(),
        round,
        batch,
        clients: PGBENCH_CLIENTS,
        tps,
        rows_per_s: tps * batch as f64,
    })
}

/// The waits by kind of `runs`, their mean share each ("-" without any).
fn kinds(runs: &[&NodeRun]) -> String {
    let mut sum: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for r in runs {
        for (k, v) in &r.lock_waits_by_kind {
            *sum.entry(k).or_default() += v / runs.len() as f64;
        }
    }
    if sum.is_empty() {
        return "-".into();
    }
    sum.iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The section as Markdown: per round and configuration, ours next to
/// the ceilings, and the medians.
pub fn markdown(r: &ScaleOutReport) -> String {
    let median = |mut v: Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        if v.is_empty() { 0.0 } else { v[v.len() / 2] }
    };
    let ceiling_of = |variant: &str, round: usize| {
        r.ceiling
            .iter()
            .find(|c| c.variant == variant && c.round == round)
            .map_or(0.0, |c| c.rows_per_s)
    };
    let mut out = format!(
        "PostgreSQL {}, {} s windows, 64 senders x 4 in flight, 1 KiB envelopes, 100 queues.\n\n\
         | store | nodes | admitted/s (median) | of one node | of serial ceiling | p50 ms | p99 ms | deposits per commit | lock-wait share | waits by kind |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        r.postgres, r.measure_s
    );
    for (store, nodes) in [
        ("embedded", 1),
        ("postgres", 1),
        ("postgres", 2),
        ("postgres", 3),
    ] {
        let runs: Vec<&NodeRun> = r
            .runs
            .iter()
            .filter(|x| x.store == store && x.nodes == nodes)
            .collect();
        let ratio: Vec<f64> = runs
            .iter()
            .map(|x| x.admitted_per_s / ceiling_of("serial", x.round).max(1.0))
            .collect();
        // Against one node of the same round (pairs, not medians of
        // different runs: the machine is noisy).
        let of_one: Vec<f64> = runs
            .iter()
            .filter_map(|x| {
                let one = r
                    .runs
                    .iter()
                    .find(|o| o.store == "postgres" && o.nodes == 1 && o.round == x.round)?;
                Some(x.admitted_per_s / one.admitted_per_s.max(1.0))
            })
            .collect();
        out.push_str(&format!(
            "| {store} | {nodes} | {:.0} | {} | {} | {:.2} | {:.2} | {:.1} | {:.2} | {} |\n",
            median(runs.iter().map(|x| x.admitted_per_s).collect()),
            if store == "postgres" {
                format!("{:.2}x", median(of_one))
            } else {
                "-".into()
            },
            if store == "postgres" {
                format!("{:.2}x", median(ratio))
            } else {
                "-".into()
            },
            median(runs.iter().map(|x| x.p50_ms).collect()),
            median(runs.iter().map(|x| x.p99_ms).collect()),
            median(runs.iter().map(|x| x.mean_batch).collect()),
            median(runs.iter().map(|x| x.lock_wait_share).collect()),
            kinds(&runs),
        ));
    }
    out.push_str(
        "\n| pgbench | deposits per transaction | clients | rows/s (median) |\n|---|---|---|---|\n",
    );
    for variant in ["serial", "unserialized"] {
        let runs: Vec<&CeilingRun> = r.ceiling.iter().filter(|c| c.variant == variant).collect();
        out.push_str(&format!(
            "| {variant} | {} | {} | {:.0} |\n",
            runs.first().map_or(0, |c| c.batch),
            PGBENCH_CLIENTS,
            median(runs.iter().map(|c| c.rows_per_s).collect())
        ));
    }
    out
}
