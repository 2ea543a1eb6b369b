//! Doorbells: telling the other nodes which queues were admitted to
//! (`PROTOCOL.md` §13, "Watch pushes cross nodes"), **after** `COMMIT`
//! returned and from a session of their own — never inside the write
//! transaction. PostgreSQL serializes the commits of every transaction
//! that issued `NOTIFY` (a cluster-wide lock from pre-commit until the
//! commit's WAL flush), so a `NOTIFY` in the write transaction would make
//! every node's commits wait on each other's flushes.
//!
//! The write transaction hands the `rkid`s it admitted to
//! `Doorbell::ring` once its commit returned; one task rings them on the
//! doorbell connection (`application_name` `rltp-carrier-doorbell`,
//! `synchronous_commit = off`: a lost doorbell costs a delay, never a
//! deposit), coalescing everything queued meanwhile: one statement per
//! round, each `rkid` once, as few payloads as fit (space-separated hex,
//! each under PostgreSQL's 8000-byte payload limit). A doorbell that
//! cannot be rung (the connection is down) is dropped: watch sessions
//! re-read their queue every `sweep-interval-ms`, which is the safety net.

use super::codec::pg_error;
use super::{ADMISSIONS_CHANNEL, Connector, Io};
use crate::StoreResult;
use rltp_proofs::multikey::Rkid;
use std::collections::BTreeSet;
use tokio::sync::mpsc;
use tokio_postgres::Client;
use tokio_postgres::types::Type;

/// The `application_name` of the doorbell connection (unless the URL
/// names one).
pub const APPLICATION_NAME: &str = "rltp-carrier-doorbell";

/// Longest payload rung (PostgreSQL refuses 8000 bytes or more).
const MAX_PAYLOAD: usize = 7_900;

/// The sending side of a node's doorbells.
#[derive(Debug)]
pub(super) struct Doorbell {
    queue: mpsc::UnboundedSender<BTreeSet<Rkid>>,
}

impl Doorbell {
    /// Starts the task that rings on a connection of its own to `config`.
    pub(super) fn start(io: &Io, config: tokio_postgres::Config, connector: Connector) -> Doorbell {
        let (queue, rounds) = mpsc::unbounded_channel();
        io.spawn(ringer(rounds, config, connector));
        Doorbell { queue }
    }

    /// Rings for `rkids` (admitted by a transaction whose `COMMIT`
    /// returned); does not wait.
    pub(super) fn ring(&self, rkids: BTreeSet<Rkid>) {
        if !rkids.is_empty() {
            let _ = self.queue.send(rkids);
        }
    }
}

/// Rings every round queued, coalesced, until the store is dropped.
async fn ringer(
    mut rounds: mpsc::UnboundedReceiver<BTreeSet<Rkid>>,
    config: tokio_postgres::Config,
    connector: Connector,
) {
    let mut client: Option<Client> = None;
    while let Some(mut rkids) = rounds.recv().await {
        while let Ok(more) = rounds.try_recv() {
            rkids.extend(more);
        }
        let connection = match client.take().filter(|c| !c.is_closed()) {
            Some(c) => Ok(c),
            None => connect(&config, &connector).await,
        };
        match connection {
            Ok(c) => match ring(&c, &rkids).await {
                Ok(()) => client = Some(c),
                Err(e) => tracing::debug!(error = %e, "doorbell not rung (watch sessions re-read)"),
            },
            Err(e) => tracing::debug!(error = %e, "doorbell not rung (watch sessions re-read)"),
        }
    }
}

async fn connect(config: &tokio_postgres::Config, connector: &Connector) -> StoreResult<Client> {
    let client = connector.connect(config).await?;
    client
        .batch_execute("SET synchronous_commit = off")
        .await
        .map_err(|e| pg_error("doorbell session settings", e))?;
    Ok(client)
}

/// One statement: a `NOTIFY` on [`ADMISSIONS_CHANNEL`] per payload.
async fn ring(client: &Client, rkids: &BTreeSet<Rkid>) -> StoreResult<()> {
    let payloads = payloads(rkids);
    client
        .query_typed(
            "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p",
            &[
                (&ADMISSIONS_CHANNEL, Type::TEXT),
                (&payloads, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map(drop)
        .map_err(|e| pg_error("doorbell", e))
}

/// The payloads naming `rkids`: lower-case hex, separated by spaces, each
/// at most [`MAX_PAYLOAD`] bytes.
pub(super) fn payloads(rkids: &BTreeSet<Rkid>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for rkid in rkids {
        let hex: String = rkid.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        match out.last_mut() {
            Some(last) if last.len() + 1 + hex.len() <= MAX_PAYLOAD => {
                last.push(' ');
                last.push_str(&hex);
            }
            _ => out.push(hex),
        }
    }
    out
}

/// The `rkid`s a payload names (what is not one is skipped: a doorbell
/// only wakes sessions, which then read the queue themselves).
pub(super) fn rkids_of(payload: &str) -> impl Iterator<Item = Rkid> + '_ {
    payload.split(' ').filter_map(|hex| {
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect();
        bytes
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .map(Rkid::from_bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_each_rkid_once_and_stay_under_the_limit() {
        let rkids: BTreeSet<Rkid> = (0..300u16)
            .map(|i| {
                let mut b = [0u8; 32];
                b[..2].copy_from_slice(&i.to_be_bytes());
                Rkid::from_bytes(b)
            })
            .collect();
        let rung = payloads(&rkids);
        // 65 bytes per rkid: 121 fit in one payload, so 300 need three.
        assert_eq!(rung.len(), 3);
        assert!(rung.iter().all(|p| p.len() <= MAX_PAYLOAD));
        let back: BTreeSet<Rkid> = rung.iter().flat_map(|p| rkids_of(p)).collect();
        assert_eq!(back, rkids);
        // A payload of the earlier format (one rkid) still reads.
        let one = payloads(&rkids.iter().take(1).copied().collect());
        assert_eq!(one[0].len(), 64);
        assert_eq!(rkids_of(&one[0]).count(), 1);
        assert_eq!(rkids_of("not hex").count(), 0);
    }
}
