//! `capacity-bytes` and `max-bindings` held in the database
//! (`PROTOCOL.md` §13, "The capacity limits live in the database"): s6 and
//! r4 judge the database's global occupancy, so every node must judge it
//! against the same two numbers. They are rows of `rltp_meta`
//! (`capacity_bytes`, `max_bindings`: 8 bytes, big-endian, as `seq_floor`),
//! stored by the first node ([`PgStore::claim_limits`]) and changed for
//! every node by `rltp-carrier migrate --publish-limits`
//! ([`PgStore::publish_limits`]).

use super::codec::{self, pg_error};
use super::{PgStore, escrow};
use crate::failure::Context;
use crate::{StoreError, StoreResult};
use tokio_postgres::Client;
use tokio_postgres::types::Type;

/// The two capacity limits of a carrier (its private `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLimits {
    /// `capacity-bytes`.
    pub capacity_bytes: u64,
    /// `max-bindings`.
    pub max_bindings: u64,
}

/// The names of the two rows.
const CAPACITY: &str = "capacity_bytes";
const BINDINGS: &str = "max_bindings";

/// Both rows in one statement: `(capacity_bytes, max_bindings)`.
const UPSERT: &str = "INSERT INTO rltp_meta (name, value) VALUES ($1, $2), ($3, $4) \
     ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value";
const INSERT_ABSENT: &str = "INSERT INTO rltp_meta (name, value) VALUES ($1, $2), ($3, $4) \
     ON CONFLICT (name) DO NOTHING";

/// The limits the database holds, if it holds both.
///
/// # Errors
/// [`StoreError::Postgres`] if the read fails; [`StoreError::Corrupt`] for
/// a row of another length or only one of the two rows.
pub(super) async fn read(client: &Client) -> StoreResult<Option<HeldLimits>> {
    let rows = client
        .query_typed(
            "SELECT name, value FROM rltp_meta WHERE name = $1 OR name = $2",
            &[(&CAPACITY, Type::TEXT), (&BINDINGS, Type::TEXT)],
        )
        .await
        .map_err(|e| pg_error("read the capacity limits", e))?;
    let (mut capacity, mut bindings) = (None, None);
    for row in rows {
        let name: &str = row.get(0);
        let value = codec::meta_u64(row.get(1), name)?;
        match name {
            CAPACITY => capacity = Some(value),
            _ => bindings = Some(value),
        }
    }
    match (capacity, bindings) {
        (Some(capacity_bytes), Some(max_bindings)) => Ok(Some(HeldLimits {
            capacity_bytes,
            max_bindings,
        })),
        (None, None) => Ok(None),
        _ => Err(StoreError::Corrupt(
            "rltp_meta holds only one of capacity_bytes and max_bindings".into(),
        )),
    }
}

/// `INSERT_ABSENT` or `UPSERT` of `limits`.
async fn write(client: &Client, sql: &str, limits: HeldLimits) -> StoreResult<()> {
    let capacity = limits.capacity_bytes.to_be_bytes().to_vec();
    let bindings = limits.max_bindings.to_be_bytes().to_vec();
    client
        .query_typed(
            sql,
            &[
                (&CAPACITY, Type::TEXT),
                (&capacity, Type::BYTEA),
                (&BINDINGS, Type::TEXT),
                (&bindings, Type::BYTEA),
            ],
        )
        .await
        .map(drop)
        .map_err(|e| pg_error("write the capacity limits", e))
}

impl PgStore {
    /// The limits the database holds, storing `proposed` first if it holds
    /// none (the first node of a database; of two first nodes racing, one
    /// stores both rows and the other reads them); then the pool is
    /// recomputed from what is held (`escrow.rs`, the rebalance: a node's start
    /// also settles what a lowered `queue-floor` or a restore moved).
    /// `floor` is the carrier's `queue-floor` (bytes).
    ///
    /// # Errors
    /// [`StoreError`] if the database cannot be read or written.
    pub fn claim_limits(&self, proposed: HeldLimits, floor: u64) -> StoreResult<HeldLimits> {
        let pool = self.readers.clone();
        let held = self.io.run(async move {
            let client = pooled(&pool).await?;
            write(&client, INSERT_ABSENT, proposed).await?;
            let held = read(&client).await?.ok_or_else(|| {
                StoreError::Corrupt("rltp_meta: the capacity limits vanished".into())
            })?;
            escrow::rebalance(&client, held.capacity_bytes, held.max_bindings, floor).await?;
            Ok(held)
        })?;
        *super::lock(&self.limits) = Some(held);
        Ok(held)
    }

    /// The limits the database holds, if any.
    ///
    /// # Errors
    /// [`StoreError`] if the database cannot be read.
    pub fn held_limits(&self) -> StoreResult<Option<HeldLimits>> {
        let pool = self.readers.clone();
        let held = self
            .io
            .run(async move { read(&*pooled(&pool).await?).await })?;
        if held.is_some() {
            *super::lock(&self.limits) = held;
        }
        Ok(held)
    }

    /// Replaces the limits every node judges capacity against (running
    /// nodes adopt them within one `sweep-interval-ms`), and recomputes the
    /// pool under them (`escrow.rs`, the rebalance: a lowered limit below what
    /// is held leaves the pool in debt, so no lane refills and a return is
    /// refused). `floor` is the carrier's `queue-floor` (bytes).
    ///
    /// # Errors
    /// [`StoreError`] if the database cannot be written.
    pub fn publish_limits(&self, limits: HeldLimits, floor: u64) -> StoreResult<()> {
        let pool = self.readers.clone();
        self.io.run(async move {
            let client = pooled(&pool).await?;
            write(&client, UPSERT, limits).await?;
            escrow::rebalance(&client, limits.capacity_bytes, limits.max_bindings, floor)
                .await
                .map(drop)
        })?;
        *super::lock(&self.limits) = Some(limits);
        Ok(())
    }

    /// The audit of the escrowed budgets (`escrow.rs`): `(bytes, slots)`
    /// not accounted for by the pool, the lanes and what is held under the
    /// limits the database holds (both 0 when conserved; `None` without
    /// limits). Exact only while no write transaction runs (tests, after
    /// every node stopped or between batches).
    ///
    /// # Errors
    /// [`StoreError`] if the database cannot be read.
    pub fn audit_budgets(&self, floor: u64) -> StoreResult<Option<(i64, i64)>> {
        let pool = self.readers.clone();
        self.io.run(async move {
            let client = pooled(&pool).await?;
            match read(&client).await? {
                Some(l) => escrow::audit(&client, l.capacity_bytes, l.max_bindings, floor)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        })
    }
}

/// A connection of the pool (autocommit: never the writer's, which may be
/// inside a write transaction).
async fn pooled(pool: &deadpool_postgres::Pool) -> StoreResult<deadpool_postgres::Object> {
    pool.get()
        .await
        .map_err(|e| StoreError::Postgres(Context::new("postgres pool", e)))
}
