//! Read snapshots: a `REPEATABLE READ READ ONLY` transaction on a pooled
//! connection, ended (and the connection returned) when the snapshot is
//! dropped.

use super::{PgStore, codec::pg_error, queries};
use crate::failure::Context;
use crate::{
    Binding, BindingPhases, DeclarationRecord, DepartureRecord, Deposit, DepositId, Due, Ms,
    Occupancy, ReadTxn, StoreError, StoreResult, Tombstone,
};
use rltp_proofs::multikey::Rkid;
use std::future::Future;
use std::sync::Arc;

/// A consistent read snapshot of a [`PgStore`].
pub struct PgRead<'a> {
    store: &'a PgStore,
    conn: Option<Arc<deadpool_postgres::Object>>,
}

impl std::fmt::Debug for PgRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRead").finish_non_exhaustive()
    }
}

impl<'a> PgRead<'a> {
    pub(super) fn begin(store: &'a PgStore) -> StoreResult<PgRead<'a>> {
        let pool = store.readers.clone();
        let within = store.round_trip();
        let conn = store.io.run_within(within, async move {
            let conn = pool
                .get()
                .await
                .map_err(|e| StoreError::Postgres(Context::new("postgres pool", e)))?;
            // The snapshot is taken by a transaction's first statement, not
            // by BEGIN: take it now.
            conn.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1")
                .await
                .map_err(|e| pg_error("begin snapshot", e))?;
            Ok(Arc::new(conn))
        })?;
        Ok(PgRead {
            store,
            conn: Some(conn),
        })
    }

    /// Runs one query of [`queries`] on the snapshot's connection.
    fn run<T, F, Fut>(&self, query: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<deadpool_postgres::Object>) -> Fut,
        Fut: Future<Output = StoreResult<T>> + Send + 'static,
    {
        let conn = self
            .conn
            .as_ref()
            .map(Arc::clone)
            .ok_or(StoreError::Closed)?;
        self.store
            .io
            .run_within(self.store.round_trip(), query(conn))
    }
}

impl Drop for PgRead<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // End the snapshot before the connection goes back to the pool.
            self.store.io.spawn(async move {
                if conn.batch_execute("ROLLBACK").await.is_err() {
                    // A connection that cannot end its transaction must not
                    // be reused.
                    if let Ok(object) = Arc::try_unwrap(conn) {
                        let _ = deadpool_postgres::Object::take(object);
                    }
                }
            });
        }
    }
}

impl ReadTxn for PgRead<'_> {
    fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        let rkid = *rkid;
        self.run(|c| async move { queries::binding(&c, &rkid).await })
    }
    fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        let rkid = *rkid;
        self.run(|c| async move { queries::tombstone(&c, &rkid).await })
    }
    fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
        self.run(|c| async move { queries::oldest_tombstone(&c).await })
    }
    fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> StoreResult<Vec<Deposit>> {
        let rkid = *rkid;
        self.run(|c| async move { queries::deposits(&c, &rkid, after, limit).await })
    }
    fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
        let (rkid, id) = (*rkid, *id);
        self.run(|c| async move { queries::deposit_by_id(&c, &rkid, &id).await })
    }
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        let (rkid, deposit) = (*rkid, *deposit);
        self.run(|c| async move { queries::deposit_bytes(&c, &rkid, &deposit).await })
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        let rkid = *rkid;
        self.run(|c| async move { Ok(queries::queue(&c, &rkid).await?.map_or(0, |q| q.1)) })
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        self.run(|c| async move { Ok(queries::occupancy(&c).await?.0) })
    }
    fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>> {
        let (rkid, id) = (*rkid, *id);
        self.run(|c| async move { queries::departure(&c, &rkid, &id).await })
    }
    fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
        self.run(|c| async move { queries::due(&c, upto, limit).await })
    }
    fn next_due(&self) -> StoreResult<Option<Ms>> {
        self.run(|c| async move { queries::next_due(&c).await })
    }
    fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
        self.run(|c| async move { queries::declaration(&c).await })
    }
    fn quarantined(&self) -> StoreResult<u64> {
        self.run(|c| async move { Ok(queries::occupancy(&c).await?.1) })
    }
    fn binding_phases(&self) -> StoreResult<BindingPhases> {
        self.run(|c| async move { queries::binding_phases(&c).await })
    }
}
