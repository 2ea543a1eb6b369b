//! Recipient-side work: registration with real proofs (scenario 4 and
//! every queue the other scenarios use), and the drain (scenario 3) on
//! the carrier and on the peer.

use crate::carrier::{CarrierProc, Recipients, close};
use crate::load::Targets;
use crate::procfs;
use crate::redis::{RedisProc, Reply, Resp, xreadgroup_ids};
use crate::stats::{Percentiles, micros};
use anyhow::{Context as _, bail};
use rltp_client::{Client, RegisterOutcome};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_wire::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Scenario 4's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrationResult {
    /// Registrations completed (`registered`).
    pub registered: u64,
    /// Connections used.
    pub connections: usize,
    /// Round trips (challenge → register) in flight.
    pub concurrency: usize,
    /// Wall time, s.
    pub seconds: f64,
    /// Registrations per second.
    pub per_s: f64,
    /// One challenge → register round trip (including the client's key
    /// derivation, sealed-challenge opening and signing), ms.
    pub round_trip_ms: Percentiles,
    /// Retriable refusals that were retried.
    pub retried: u64,
    /// The carrier's CPU during the run, cores.
    pub server_cpu_cores: f64,
    /// This harness's CPU during the run (key derivation, opening the
    /// sealed challenge, signing, QUIC), cores.
    pub client_cpu_cores: f64,
}

/// Registers recipients `from..to` of `recipients` with `concurrency`
/// round trips in flight over `connections` connections. Returns the
/// figures and the rkids in index order.
///
/// # Errors
/// Connection failures and any final refusal (the benchmark's limits
/// admit every registration).
pub async fn register(
    carrier: &CarrierProc,
    recipients: Recipients,
    from: u64,
    to: u64,
    connections: usize,
    concurrency: usize,
    progress: bool,
) -> anyhow::Result<(RegistrationResult, Vec<Rkid>)> {
    let clients = Arc::new(carrier.connect_many(connections.max(1)).await?);
    let next = Arc::new(AtomicU64::new(from));
    let retried = Arc::new(AtomicU64::new(0));
    let (server0, client0) = (
        procfs::cpu_seconds(carrier.pid()).unwrap_or(0.0),
        procfs::cpu_seconds(std::process::id()).unwrap_or(0.0),
    );
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency.max(1) {
        let clients = Arc::clone(&clients);
        let next = Arc::clone(&next);
        let retried = Arc::clone(&retried);
        tasks.push(tokio::spawn(async move {
            let client = clients
                .get(t % clients.len())
                .context("no connection")?
                .clone();
            let mut done: Vec<(u64, Rkid)> = Vec::new();
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to {
                    break;
                }
                let keys = recipients.keys(i)?;
                let t0 = Instant::now();
                loop {
                    let outcome = client.register(&keys, Purpose::Register).await?;
                    match outcome {
                        RegisterOutcome::Verdict(Verdict::Registered) => break,
                        o if matches!(
                            o.verdict(),
                            Verdict::RegistrationCapacity | Verdict::AdmissionResource
                        ) =>
                        {
                            retried.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        o => bail!("registration {i} refused: {}", o.verdict()),
                    }
                }
                latencies.push(micros(t0.elapsed()));
                done.push((i, *keys.rkid()));
                if progress && i.is_multiple_of(50_000) && i > from {
                    eprintln!(
                        "  registered {} of {} ({:.0}/s)",
                        i - from,
                        to - from,
                        (i - from) as f64 / start.elapsed().as_secs_f64()
                    );
                }
            }
            Ok::<_, anyhow::Error>((done, latencies))
        }));
    }
    let mut all = Vec::with_capacity(usize::try_from(to - from)?);
    let mut latencies = Vec::new();
    for t in tasks {
        let (done, lat) = t.await??;
        all.extend(done);
        latencies.extend(lat);
    }
    let seconds = start.elapsed().as_secs_f64();
    let server_cpu = procfs::cpu_seconds(carrier.pid()).unwrap_or(0.0) - server0;
    let client_cpu = procfs::cpu_seconds(std::process::id()).unwrap_or(0.0) - client0;
    if let Ok(clients) = Arc::try_unwrap(clients) {
        clients.into_iter().for_each(close);
    }
    all.sort_unstable_by_key(|(i, _)| *i);
    let registered = all.len() as u64;
    Ok((
        RegistrationResult {
            registered,
            connections,
            concurrency,
            seconds,
            per_s: registered as f64 / seconds,
            round_trip_ms: Percentiles::of_micros(&mut latencies),
            retried: retried.load(Ordering::Relaxed),
            server_cpu_cores: server_cpu / seconds,
            client_cpu_cores: client_cpu / seconds,
        },
        all.into_iter().map(|(_, r)| r).collect(),
    ))
}

/// Scenario 3's figures for one system.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrainResult {
    /// `rltp-carrier` or `redis`.
    pub system: String,
    /// Recipients draining at once (one connection each).
    pub recipients: usize,
    /// Deposits admitted to those queues before the drain.
    pub expected: u64,
    /// Deposits concluded (removed).
    pub concluded: u64,
    /// Wall time, s.
    pub seconds: f64,
    /// Concluded per second.
    pub per_s: f64,
    /// Collect (or XREADGROUP) pages read, the final empty ones included.
    pub pages: u64,
    /// Every queue was seen empty at the end and nothing was lost.
    pub verified_empty: bool,
}

/// The carrier's drain: each recipient, on its own connection (one
/// principal per authorization session), collects a page (with a fresh
/// challenge and proof), concludes it (another), and repeats until a
/// collect is empty. At most [`DRAIN_CONNECTIONS`] recipients drain at
/// once (scenario 5 drains 10,000 queues; the carrier's `max-connections`
/// would refuse them all at once).
///
/// # Errors
/// Connection failures and refusals.
pub async fn drain_ours(
    carrier: &CarrierProc,
    recipients: Recipients,
    targets: &Targets,
) -> anyhow::Result<DrainResult> {
    let n = targets.queues.len();
    let expected = targets.total_admitted();
    let slots = Arc::new(tokio::sync::Semaphore::new(DRAIN_CONNECTIONS));
    // The first wave connects before the clock starts, as before.
    let mut ready: Vec<Option<Client>> = Vec::with_capacity(n);
    for i in 0..n {
        ready.push(if i < DRAIN_CONNECTIONS {
            Some(carrier.connect().await?)
        } else {
            None
        });
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, client) in ready.into_iter().enumerate() {
        let slot = Arc::clone(&slots).acquire_owned().await?;
        let client = match client {
            Some(client) => client,
            None => carrier.connect().await?,
        };
        tasks.push(tokio::spawn(async move {
            let _slot = slot;
            let keys = recipients.keys(i as u64)?;
            let (mut concluded, mut pages) = (0u64, 0u64);
            loop {
                let page = client.collect(&keys, None, 256).await?;
                pages += 1;
                if page.verdict != Verdict::Served {
                    bail!("collect for recipient {i}: {}", page.verdict);
                }
                if page.deposits.is_empty() {
                    close(client);
                    return Ok((concluded, pages, !page.more));
                }
                let ids: Vec<_> = page.deposits.iter().map(|d| d.id).collect();
                let (verdict, removed) = client.conclude(&keys, &ids).await?;
                if verdict != Verdict::Served {
                    bail!("conclude for recipient {i}: {verdict}");
                }
                concluded += removed.unwrap_or(0);
            }
        }));
    }
    let (mut concluded, mut pages, mut empty) = (0, 0, true);
    for t in tasks {
        let (c, p, e) = t.await??;
        concluded += c;
        pages += p;
        empty &= e;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(DrainResult {
        system: "rltp-carrier".into(),
        recipients: n,
        expected,
        concluded,
        seconds,
        per_s: concluded as f64 / seconds,
        pages,
        verified_empty: empty && concluded == expected,
    })
}

/// Recipients that drain at once ([`drain_ours`]).
pub const DRAIN_CONNECTIONS: usize = 512;

/// The peer's drain: one consumer per stream, `XREADGROUP … COUNT 256`,
/// then `XACK` and `XDEL` of the page in one round trip, until a read
/// is empty; then `XLEN` must be 0.
///
/// # Errors
/// Connection failures and error replies.
pub async fn drain_peer(redis: &RedisProc, targets: &Targets) -> anyhow::Result<DrainResult> {
    let n = targets.queues.len();
    let expected = targets.total_admitted();
    let mut conns = Vec::with_capacity(n);
    for q in targets.queues.iter() {
        let mut c = Resp::connect(&redis.addr).await?;
        match c
            .call(&[b"XGROUP", b"CREATE", &q.key, b"g", b"0", b"MKSTREAM"])
            .await?
        {
            Reply::Simple(_) => {}
            Reply::Error(e) if e.starts_with("BUSYGROUP") => {}
            other => bail!("XGROUP CREATE: {other:?}"),
        }
        conns.push((c, q.key.clone()));
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (mut c, key) in conns {
        tasks.push(tokio::spawn(async move {
            let (mut concluded, mut pages) = (0u64, 0u64);
            loop {
                let reply = c
                    .call(&[
                        b"XREADGROUP",
                        b"GROUP",
                        b"g",
                        b"c",
                        b"COUNT",
                        b"256",
                        b"STREAMS",
                        &key,
                        b">",
                    ])
                    .await?;
                pages += 1;
                let ids = xreadgroup_ids(reply)?;
                if ids.is_empty() {
                    break;
                }
                let mut ack: Vec<&[u8]> = vec![b"XACK", &key, b"g"];
                let mut del: Vec<&[u8]> = vec![b"XDEL", &key];
                for id in &ids {
                    ack.push(id);
                    del.push(id);
                }
                c.writer.send(&ack).await?;
                c.writer.send(&del).await?;
                c.writer.flush().await?;
                match c.reader.read().await? {
                    Reply::Int(_) => {}
                    other => bail!("XACK: {other:?}"),
                }
                match c.reader.read().await? {
                    Reply::Int(k) => concluded += u64::try_from(k)?,
                    other => bail!("XDEL: {other:?}"),
                }
            }
            let empty = matches!(c.call(&[b"XLEN", &key]).await?, Reply::Int(0));
            Ok::<_, anyhow::Error>((concluded, pages, empty))
        }));
    }
    let (mut concluded, mut pages, mut empty) = (0, 0, true);
    for t in tasks {
        let (c, p, e) = t.await??;
        concluded += c;
        pages += p;
        empty &= e;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(DrainResult {
        system: "redis".into(),
        recipients: n,
        expected,
        concluded,
        seconds,
        per_s: concluded as f64 / seconds,
        pages,
        verified_empty: empty && concluded == expected,
    })
}
