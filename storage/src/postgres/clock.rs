//! The one clock of a carrier with many nodes (`PROTOCOL.md` §13, "One
//! clock"): the database's. Every write transaction reads it in the
//! pipelined burst of its `BEGIN` and again in the burst that takes its
//! queues' locks ([`super::PgWrite`]: no round trip of its own), and the
//! writer stamps and judges every horizon of that transaction on it
//! ([`crate::WriteTxn::store_now`]). Because the reading follows the
//! locks, the transactions of all nodes on one queue read it in their
//! serial order: a transaction never reads an instant earlier than one a
//! transaction before it on that queue read, unless the database's own clock stepped back (each
//! node's writer then keeps its last instant: `PROTOCOL.md` §11).
//!
//! A node also reads it on its own ([`PgStore::database_clock`]) to compare
//! its own clock with it, at start and every `sweep-interval-ms`.

use super::PgStore;
use super::codec::pg_error;
use crate::failure::Context;
use crate::{Ms, StoreError, StoreResult};
use tokio_postgres::Client;

/// The database's clock as ms since the Unix epoch: `clock_timestamp()`
/// (the time the statement runs, not the transaction's start), truncated
/// to the millisecond.
const NOW_MS: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";

/// The database's clock now, read on `client` (in a transaction: after
/// the statements sent before it on that connection ran).
///
/// # Errors
/// [`StoreError::Postgres`] if the query fails; [`StoreError::Corrupt`] for
/// an instant before the Unix epoch.
pub(super) async fn read(client: &Client) -> StoreResult<Ms> {
    let row = client
        .query_typed(NOW_MS, &[])
        .await
        .map_err(|e| pg_error("read the database's clock", e))?;
    let ms: i64 = row
        .first()
        .ok_or_else(|| StoreError::Postgres("the database's clock: no row".into()))?
        .get(0);
    u64::try_from(ms)
        .map_err(|_| StoreError::Corrupt(format!("the database's clock reads {ms} ms")))
}

impl PgStore {
    /// The database's clock now (ms since the Unix epoch), read on a
    /// reader connection.
    ///
    /// # Errors
    /// [`StoreError::Postgres`] if the database cannot be reached.
    pub fn database_clock(&self) -> StoreResult<Ms> {
        let pool = self.readers.clone();
        self.io.run(async move {
            let c = pool
                .get()
                .await
                .map_err(|e| StoreError::Postgres(Context::new("postgres pool", e)))?;
            read(&c).await
        })
    }
}
