//! Write transactions: one database transaction on the node's writer
//! connection, holding its lane's row and the locks of the queues it
//! touches from the moment it first touches each to its `COMMIT`
//! ([`super::escrow`]; see the module docs of [`super`]).
//!
//! Point reads are cached for the transaction (exact under the queue's
//! lock, taken before the first read);
//! mutations are buffered as the final state of each row they touch and
//! written as one multi-row statement per table, pipelined, before any
//! range read and at commit.

use super::codec::{self, DueKey, big, pg_error};
use super::escrow::{self, Budget, Lane, queue_key};
use super::{Connector, PgStore, clock, queries};
use crate::{
    Binding, DeclarationRecord, Departure, DepartureRecord, Deposit, DepositId, Due, Escrow, Ms,
    Need, Occupancy, ReadTxn, StoreError, StoreResult, Tombstone, WriteTxn,
};
use budget::COUNTER_BASE;
use rltp_proofs::multikey::Rkid;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;
use tokio_postgres::Client;
use tokio_postgres::types::{ToSql, Type};

mod budget;
mod columns;

use columns::{BindingColumns, DepositColumns, DueColumns};

/// A queue's counters: the highest `seq` handed out, and bytes held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct QueueRow {
    last_seq: u64,
    bytes: u64,
}

/// A write transaction of a [`PgStore`].
pub struct PgWrite<'a> {
    store: &'a PgStore,
    client: Arc<Client>,
    _gate: MutexGuard<'a, ()>,
    open: bool,
    /// This node's lane, its row locked as the transaction began.
    lane: Lane,
    /// The database's clock, read once the lane was held ([`super::clock`]).
    now: Ms,
    /// The transaction's caches and buffers (reads take `&self` and fill
    /// caches or flush buffers: only the writer thread uses a write
    /// transaction, so a `RefCell` is enough).
    inner: RefCell<Inner>,
}

/// A write transaction's own state.
#[derive(Default)]
struct Inner {
    /// The counters as [`COUNTER_BASE`] plus this transaction's changes.
    occupancy: Occupancy,
    quarantined: u64,
    seq_floor: u64,
    /// The queue locks held (keys, [`queue_key`]).
    locked: HashSet<i64>,
    /// The lane's budget as this transaction leaves it so far.
    budget: Budget,
    /// The pool, once this transaction locked its row (a refill).
    pool: Option<Budget>,
    /// Whether this transaction holds the tombstone gate.
    gate: bool,
    // Point caches: the row's state in this transaction (None: no row).
    bindings: HashMap<Rkid, Option<Binding>>,
    tombstones: HashMap<Rkid, Option<Tombstone>>,
    queues: HashMap<Rkid, QueueRow>,
    identity: HashMap<(Rkid, DepositId), Option<Deposit>>,
    departures: HashMap<(Rkid, DepositId), Option<DepartureRecord>>,
    // What the database does not have yet.
    dirty_bindings: BTreeSet<Rkid>,
    dirty_tombstones: BTreeSet<Rkid>,
    dirty_queues: BTreeSet<Rkid>,
    dirty_departures: BTreeSet<(Rkid, DepositId)>,
    appended: BTreeMap<(Rkid, u64), (Deposit, Vec<u8>)>,
    removed: BTreeSet<(Rkid, u64)>,
    due: BTreeMap<DueKey, bool>,
    /// The due entries at or before an instant, as this transaction sees
    /// them ([`DueWindow`]).
    due_window: Option<DueWindow>,
    /// Deposits read by `seq` in this transaction (rows of the database
    /// not removed since), so that removing one needs no second read.
    by_seq: HashMap<(Rkid, u64), Deposit>,
    quarantine: Vec<(Rkid, Deposit, Ms, String)>,
    declaration: Option<DeclarationRecord>,
    admitted: BTreeSet<Rkid>,
}

/// What a read-ahead asks for ([`PgWrite::prefetch`]).
#[derive(Debug, Clone, Default)]
struct ReadRequest {
    rkids: BTreeSet<Rkid>,
    by_id: BTreeSet<(Rkid, DepositId)>,
}

impl ReadRequest {
    fn is_empty(&self) -> bool {
        self.rkids.is_empty() && self.by_id.is_empty()
    }

    /// Reads the rows asked for (pipelined statements).
    async fn read(self, client: &Client) -> StoreResult<queries::Prefetched> {
        let rkids = self.rkids.iter().map(|r| r.as_bytes().to_vec()).collect();
        let id_rkids = self
            .by_id
            .iter()
            .map(|(r, _)| r.as_bytes().to_vec())
            .collect();
        let ids = self.by_id.iter().map(|(_, i)| i.0.to_vec()).collect();
        queries::prefetch(client, rkids, id_rkids, ids).await
    }
}

/// Due entries fetched from the database in one read, kept exact by the
/// transaction's own `schedule`/`unschedule` (only its entries of queues
/// this transaction holds are kept, and no other writer changes those): the batch prelude and the sweep take entries one at
/// a time, and each is answered here without a round trip.
struct DueWindow {
    /// The instant (biased, [`codec::due_at`]) the window was read up to.
    upto: i64,
    /// `None`: every row at or before `upto` was read; `Some(k)`: the read
    /// stopped at its limit, and only keys up to `k` are known.
    bound: Option<DueKey>,
    /// The entries known, in due order.
    entries: BTreeMap<DueKey, (Ms, Due)>,
}

impl DueWindow {
    /// Whether `key` lies in the part of the index the window knows.
    fn covers(&self, key: &DueKey) -> bool {
        key.0 <= self.upto && self.bound.as_ref().is_none_or(|b| key <= b)
    }
}

impl std::fmt::Debug for PgWrite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWrite")
            .field("appended", &self.inner.borrow().appended.len())
            .finish_non_exhaustive()
    }
}

/// A statement to send: SQL, its typed parameters (owned, so the future
/// that sends it is `'static`).
struct Statement {
    what: &'static str,
    sql: &'static str,
    params: Vec<(Box<dyn ToSql + Sync + Send>, Type)>,
}

impl Statement {
    fn new(what: &'static str, sql: &'static str) -> Statement {
        Statement {
            what,
            sql,
            params: Vec::new(),
        }
    }

    fn param(mut self, value: impl ToSql + Sync + Send + 'static, ty: Type) -> Statement {
        self.params.push((Box::new(value), ty));
        self
    }
}

type Pending = Pin<Box<dyn Future<Output = StoreResult<()>> + Send>>;

/// Sends `statements` in order on `client` without waiting between them
/// (pipelined), then waits for all.
fn pipeline(client: Arc<Client>, statements: Vec<Statement>) -> Pending {
    Box::pin(async move {
        let futures = statements.into_iter().map(|s| {
            let client = Arc::clone(&client);
            async move {
                let params: Vec<(&(dyn ToSql + Sync), Type)> = s
                    .params
                    .iter()
                    .map(|(v, t)| (v.as_ref() as &(dyn ToSql + Sync), t.clone()))
                    .collect();
                client
                    .query_typed(s.sql, &params)
                    .await
                    .map(drop)
                    .map_err(|e| pg_error(s.what, e))
            }
        });
        futures_util::future::try_join_all(futures).await.map(drop)
    })
}

impl<'a> PgWrite<'a> {
    /// `BEGIN`, this node's lane row (its budget; a lane reclaimed since
    /// is a [`StoreError::Conflict`] and the store takes a new one), the
    /// seq floor, the database's clock.
    pub(super) fn begin(
        store: &'a PgStore,
        client: Arc<Client>,
        lane: Lane,
        gate: MutexGuard<'a, ()>,
    ) -> StoreResult<PgWrite<'a>> {
        let c = Arc::clone(&client);
        let within = store.round_trip();
        let (budget, seq_floor, now) = store.io.run_within(within, async move {
            let begin = c.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED");
            let lock = escrow::lock_own(&c, lane);
            let floor = queries::meta_u64(&c, "seq_floor");
            // Sent after the lane's lock, so read once it is held.
            let now = clock::read(&c);
            let (begin, lock, floor, now) = tokio::join!(begin, lock, floor, now);
            begin.map_err(|e| pg_error("begin", e))?;
            Ok((lock?, floor?, now?))
        })?;
        let txn = PgWrite {
            store,
            client,
            _gate: gate,
            open: true,
            lane,
            now,
            inner: RefCell::new(Inner {
                occupancy: Occupancy {
                    total_bytes: COUNTER_BASE,
                    bindings: COUNTER_BASE,
                    deposits: COUNTER_BASE,
                    tombstones: COUNTER_BASE,
                    elastic_bytes: COUNTER_BASE,
                },
                quarantined: COUNTER_BASE,
                seq_floor,
                budget: budget.unwrap_or_default(),
                ..Inner::default()
            }),
        };
        if budget.is_none() {
            // Dropped: rolled back. The store takes a new lane.
            return Err(StoreError::Conflict(
                format!(
                    "lane {} was reclaimed (its session ended): taking a new one",
                    lane.id
                )
                .into(),
            ));
        }
        Ok(txn)
    }

    /// Runs `query` on the writer's connection.
    fn run<T, F, Fut>(&self, query: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut,
        Fut: Future<Output = StoreResult<T>> + Send + 'static,
    {
        let within = self.store.round_trip();
        self.store
            .io
            .run_within(within, query(Arc::clone(&self.client)))
    }

    /// Writes every buffered mutation, so that a range read that follows
    /// sees this transaction's own writes.
    fn flush(&self) -> StoreResult<()> {
        let statements = self.inner.borrow_mut().drain()?;
        if statements.is_empty() {
            return Ok(());
        }
        let within = self.store.round_trip();
        let statements = pipeline(Arc::clone(&self.client), statements);
        self.store.io.run_within(within, statements)
    }

    /// Writes everything and the counters, and commits; `Ok` only once
    /// `COMMIT` returned within the commit timeout. Only then are the
    /// other nodes rung for the queues it admitted to ([`super::doorbell`]:
    /// no `NOTIFY` is ever part of the write transaction).
    pub(super) fn commit(mut self) -> StoreResult<()> {
        let (mut statements, admitted) = {
            let mut inner = self.inner.borrow_mut();
            let statements = inner.drain()?;
            let admitted = std::mem::take(&mut inner.admitted);
            (statements, admitted)
        };
        statements.extend(
            self.inner
                .get_mut()
                .budget_statements(self.lane, self.store.target())?,
        );
        let client = Arc::clone(&self.client);
        let timeout = self.store.options.commit_timeout;
        let connector = self.store.connector.clone();
        // From here the transaction is the server's to end (or to keep).
        self.open = false;
        let within = self.store.round_trip();
        let committed = self.store.io.run_within(within, async move {
            pipeline(Arc::clone(&client), statements).await?;
            let commit = client.batch_execute("COMMIT");
            tokio::pin!(commit);
            match tokio::time::timeout(timeout, &mut commit).await {
                Ok(done) => done.map_err(|e| pg_error("commit", e)),
                Err(_) => {
                    // No confirmation in time (a synchronous standby that is
                    // gone): cancel the wait. PostgreSQL keeps the commit
                    // locally, so its outcome is unknown to the sender: the
                    // carrier answers `unavailable` and the retry meets s3.
                    cancel(&client, &connector).await;
                    let _ = tokio::time::timeout(Duration::from_secs(5), commit).await;
                    Err(StoreError::Postgres(
                        format!(
                            "postgres commit: not confirmed within {timeout:?} (outcome unknown)"
                        )
                        .into(),
                    ))
                }
            }
        });
        // The doorbells, now that the commit returned (never inside it).
        if committed.is_ok()
            && let Some(doorbell) = &self.store.doorbell
        {
            doorbell.ring(admitted);
        }
        committed
    }

    /// Reads, in one statement, the deposits the give-up entries of a due
    /// window name (those not read yet), so that applying each needs no
    /// round trip of its own ([`ReadTxn::deposits`] answers a one-deposit
    /// page at a known `seq` from them).
    fn read_given_up(&self, entries: &BTreeMap<DueKey, (Ms, Due)>) -> StoreResult<()> {
        let (rkids, seqs) = {
            let inner = self.inner.borrow();
            let mut rkids = Vec::new();
            let mut seqs = Vec::new();
            for (_, due) in entries.values() {
                if let Due::GiveUp(rkid, seq) = due {
                    let key = (*rkid, *seq);
                    if !inner.by_seq.contains_key(&key)
                        && !inner.removed.contains(&key)
                        && !inner.appended.contains_key(&key)
                    {
                        rkids.push(rkid.as_bytes().to_vec());
                        seqs.push(big(*seq)?);
                    }
                }
            }
            (rkids, seqs)
        };
        if rkids.is_empty() {
            return Ok(());
        }
        let found =
            self.run(move |c| async move { queries::deposits_by_seq(&c, rkids, seqs).await })?;
        let mut inner = self.inner.borrow_mut();
        for (rkid, d) in found {
            inner.by_seq.insert((rkid, d.seq), d);
        }
        Ok(())
    }

    /// What a read-ahead of `keys` asks for: the queues' rows and the
    /// deposits by id this transaction has not read yet (its own state
    /// wins).
    fn read_request(&mut self, keys: &[(Rkid, Option<DepositId>)]) -> ReadRequest {
        let inner = self.inner.get_mut();
        let mut request = ReadRequest::default();
        for (rkid, id) in keys {
            if !inner.bindings.contains_key(rkid)
                || !inner.tombstones.contains_key(rkid)
                || !inner.queues.contains_key(rkid)
            {
                request.rkids.insert(*rkid);
            }
            if let Some(id) = id
                && !inner.identity.contains_key(&(*rkid, *id))
            {
                request.by_id.insert((*rkid, *id));
            }
        }
        request
    }

    /// Caches what the read-ahead `request` found, but for the queues in
    /// `busy` (another node's transaction holds them: their rows may change
    /// before this transaction reads them again, under their lock).
    fn read_apply(&mut self, request: &ReadRequest, found: queries::Prefetched, busy: &[Rkid]) {
        let inner = self.inner.get_mut();
        let held = |rkid: &Rkid| !busy.contains(rkid);
        // Every key asked for gets an answer: absent rows are None.
        for rkid in request.rkids.iter().filter(|r| held(r)) {
            inner.bindings.entry(*rkid).or_insert(None);
            inner.tombstones.entry(*rkid).or_insert(None);
            inner.queues.entry(*rkid).or_default();
        }
        for key in request.by_id.iter().filter(|(r, _)| held(r)) {
            inner.identity.entry(*key).or_insert(None);
        }
        for (rkid, b) in found.bindings.into_iter().filter(|(r, _)| held(r)) {
            inner.bindings.insert(rkid, Some(b));
        }
        for (rkid, t) in found.tombstones.into_iter().filter(|(r, _)| held(r)) {
            inner.tombstones.insert(rkid, Some(t));
        }
        for (rkid, (last_seq, bytes)) in found.queues.into_iter().filter(|(r, _)| held(r)) {
            inner.queues.insert(rkid, QueueRow { last_seq, bytes });
        }
        for (rkid, d) in found.deposits.into_iter().filter(|(r, _)| held(r)) {
            if !inner.removed.contains(&(rkid, d.seq)) {
                inner.identity.insert((rkid, d.id), Some(d));
            }
        }
    }

    fn binding_cached(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        self.hold(rkid)?;
        if let Some(b) = self.inner.borrow().bindings.get(rkid) {
            return Ok(*b);
        }
        let r = *rkid;
        let b = self.run(|c| async move { queries::binding(&c, &r).await })?;
        self.inner.borrow_mut().bindings.insert(*rkid, b);
        Ok(b)
    }

    fn tombstone_cached(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        self.hold(rkid)?;
        if let Some(t) = self.inner.borrow().tombstones.get(rkid) {
            return Ok(*t);
        }
        let r = *rkid;
        let t = self.run(|c| async move { queries::tombstone(&c, &r).await })?;
        self.inner.borrow_mut().tombstones.insert(*rkid, t);
        Ok(t)
    }

    fn queue_cached(&self, rkid: &Rkid) -> StoreResult<QueueRow> {
        self.hold(rkid)?;
        if let Some(q) = self.inner.borrow().queues.get(rkid) {
            return Ok(*q);
        }
        let r = *rkid;
        let q = self
            .run(|c| async move { queries::queue(&c, &r).await })?
            .map_or(QueueRow::default(), |(last_seq, bytes)| QueueRow {
                last_seq,
                bytes,
            });
        self.inner.borrow_mut().queues.insert(*rkid, q);
        Ok(q)
    }
}

impl Inner {
    /// The buffered mutations as statements (and forgets them).
    fn drain(&mut self) -> StoreResult<Vec<Statement>> {
        let mut out = Vec::new();
        self.drain_bindings(&mut out)?;
        self.drain_tombstones(&mut out)?;
        self.drain_queues(&mut out)?;
        self.drain_deposits(&mut out)?;
        self.drain_departures(&mut out)?;
        self.drain_due(&mut out)?;
        self.drain_quarantine(&mut out)?;
        Ok(out)
    }

    /// Pushes onto `out` the statements for the bindings written or deleted.
    fn drain_bindings(&mut self, out: &mut Vec<Statement>) -> StoreResult<()> {
        let (mut up, mut gone) = (BindingColumns::default(), Vec::new());
        for rkid in std::mem::take(&mut self.dirty_bindings) {
            match self.bindings.get(&rkid).copied().flatten() {
                Some(b) => up.push(&rkid, &b)?,
                None => gone.push(rkid.as_bytes().to_vec()),
            }
        }
        if !gone.is_empty() {
            out.push(
                Statement::new(
                    "delete bindings",
                    "DELETE FROM rltp_bindings WHERE rkid = ANY($1)",
                )
                .param(gone, Type::BYTEA_ARRAY),
            );
        }
        if !up.rkid.is_empty() {
            out.push(up.statement());
        }
        Ok(())
    }

    /// Pushes onto `out` the statements for the tombstones written or deleted.
    fn drain_tombstones(&mut self, out: &mut Vec<Statement>) -> StoreResult<()> {
        let (mut rkids, mut generations, mut released, mut gone) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for rkid in std::mem::take(&mut self.dirty_tombstones) {
            match self.tombstones.get(&rkid).copied().flatten() {
                Some(t) => {
                    rkids.push(rkid.as_bytes().to_vec());
                    generations.push(big(t.generation)?);
                    released.push(big(t.released_at)?);
                }
                None => gone.push(rkid.as_bytes().to_vec()),
            }
        }
        if !gone.is_empty() {
            out.push(
                Statement::new(
                    "delete tombstones",
                    "DELETE FROM rltp_tombstones WHERE rkid = ANY($1)",
                )
                .param(gone, Type::BYTEA_ARRAY),
            );
        }
        if !rkids.is_empty() {
            out.push(
                Statement::new(
                    "write tombstones",
                    "INSERT INTO rltp_tombstones (rkid, generation, released_at) \
                     SELECT * FROM unnest($1::bytea[], $2::int8[], $3::int8[]) \
                     ON CONFLICT (rkid) DO UPDATE SET generation = EXCLUDED.generation, \
                     released_at = EXCLUDED.released_at",
                )
                .param(rkids, Type::BYTEA_ARRAY)
                .param(generations, Type::INT8_ARRAY)
                .param(released, Type::INT8_ARRAY),
            );
        }
        Ok(())
    }

    /// Pushes onto `out` the statements for the queue counters.
    fn drain_queues(&mut self, out: &mut Vec<Statement>) -> StoreResult<()> {
        let (mut rkids, mut last, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
        for rkid in std::mem::take(&mut self.dirty_queues) {
            let q = self.queues.get(&rkid).copied().unwrap_or_default();
            rkids.push(rkid.as_bytes().to_vec());
            last.push(big(q.last_seq)?);
            bytes.push(big(q.bytes)?);
        }
        if !rkids.is_empty() {
            out.push(
                Statement::new(
                    "write queues",
                    "INSERT INTO rltp_queues (rkid, last_seq, bytes) \
                     SELECT * FROM unnest($1::bytea[], $2::int8[], $3::int8[]) \
                     ON CONFLICT (rkid) DO UPDATE SET last_seq = EXCLUDED.last_seq, \
                     bytes = EXCLUDED.bytes",
                )
                .param(rkids, Type::BYTEA_ARRAY)
                .param(last, Type::INT8_ARRAY)
                .param(bytes, Type::INT8_ARRAY),
            );
        }
        Ok(())
    }

    /// Pushes onto `out` the statements for the deposits removed and appended.
    fn drain_deposits(&mut self, out: &mut Vec<Statement>) -> StoreResult<()> {
        let removed = std::mem::take(&mut self.removed);
        if !removed.is_empty() {
            let mut rkids = Vec::with_capacity(removed.len());
            let mut seqs = Vec::with_capacity(removed.len());
            for (rkid, seq) in removed {
                rkids.push(rkid.as_bytes().to_vec());
                seqs.push(big(seq)?);
            }
            out.push(
                Statement::new(
                    "delete deposits",
                    "DELETE FROM rltp_deposits d USING unnest($1::bytea[], $2::int8[]) AS k(rkid, seq) \
                     WHERE d.rkid = k.rkid AND d.seq = k.seq",
                )
                .param(rkids, Type::BYTEA_ARRAY)
                .param(seqs, Type::INT8_ARRAY),
            );
        }
        let appended = std::mem::take(&mut self.appended);
        if !appended.is_empty() {
            let mut c = DepositColumns::default();
            for ((rkid, _), (deposit, bytes)) in appended {
                c.push(&rkid, &deposit, bytes)?;
            }
            out.push(c.statement());
        }
        Ok(())
    }

    /// Pushes onto `out` the statements for the departure records written or deleted.
    fn drain_departures(&mut self, out: &mut Vec<Statement>) -> StoreResult<()> {
        let (mut rkids, mut ids, mut concluded, mut forget) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut gone_rkids, mut gone_ids) = (Vec::new(), Vec::new());
        for key in std::mem::take(&mut self.dirty_departures) {
            match self.departures.get(&key).copied().flatten() {
                Some(d) => {
                    rkids.push(key.0.as_bytes().to_vec());
                    ids.push(key.1.0.to_vec());
                    concluded.push(d.departure == Departure::Concluded);
                    forget.push(big(d.forget_at)?);
                }
                None => {
                    gone_rkids.push(key.0.as_bytes().to_vec());
                    gone_ids.push(key.1.0.to_vec());
                }
            }
        }
        if !gone_rkids.is_empty() {
            out.push(
                Statement::new(
                    "delete departures",
                    "DELETE FROM rltp_departures d USING unnest($1::bytea[], $2::bytea[]) AS k(rkid, id) \
                     WHERE d.rkid = k.rkid AND d.id = k.id",
                )
                .param(gone_rkids, Type::BYTEA_ARRAY)
                .param(gone_ids, Type::BYTEA_ARRAY),
            );
        }
        if !rkids.is_empty() {
            out.push(
                Statement::new(
                    "write departures",
                    "INSERT INTO rltp_departures (rkid, id, concluded, forget_at) \
                     SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bool[], $4::int8[]) \
                     ON CONFLICT (rkid, id) DO UPDATE SET concluded = EXCLUDED.concluded, \
                     forget_at = EXCLUDED.forget_at",
                )
                .param(rkids, Type::BYTEA_ARRAY)
                .param(ids, Type::BYTEA_ARRAY)
                .param(concluded, Type::BOOL_ARRAY)
                .param(forget, Type::INT8_ARRAY),
            );
        }
        Ok(())
    }

    /// Pushes onto `out` the statements for the due entries added and removed.
    fn drain_due(&mut self, out: &mut Vec<Statement>) -> StoreResult<()> {
        let (mut add, mut del) = (DueColumns::default(), DueColumns::default());
        for (key, present) in std::mem::take(&mut self.due) {
            if present {
                add.push(key);
            } else {
                del.push(key);
            }
        }
        if !del.at.is_empty() {
            out.push(del.statement(
                "unschedule",
                "DELETE FROM rltp_due d USING unnest($1::int8[], $2::int2[], $3::bytea[], $4::int8[], $5::bytea[]) \
                 AS k(at, tag, rkid, seq, id) \
                 WHERE d.at = k.at AND d.tag = k.tag AND d.rkid = k.rkid AND d.seq = k.seq AND d.id = k.id",
            ));
        }
        if !add.at.is_empty() {
            out.push(add.statement(
                "schedule",
                "INSERT INTO rltp_due (at, tag, rkid, seq, id) \
                 SELECT * FROM unnest($1::int8[], $2::int2[], $3::bytea[], $4::int8[], $5::bytea[]) \
                 ON CONFLICT DO NOTHING",
            ));
        }
        Ok(())
    }

    /// Pushes onto `out` the statements for the quarantine records and the declaration.
    fn drain_quarantine(&mut self, out: &mut Vec<Statement>) -> StoreResult<()> {
        for (rkid, d, at, reason) in std::mem::take(&mut self.quarantine) {
            out.push(
                Statement::new(
                    "quarantine",
                    "INSERT INTO rltp_quarantine (rkid, seq, id, len, admitted_at, give_up_at, at, reason) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
                )
                .param(rkid.as_bytes().to_vec(), Type::BYTEA)
                .param(big(d.seq)?, Type::INT8)
                .param(d.id.0.to_vec(), Type::BYTEA)
                .param(codec::len(&d)?, Type::INT4)
                .param(big(d.admitted_at)?, Type::INT8)
                .param(big(d.give_up_at)?, Type::INT8)
                .param(big(at)?, Type::INT8)
                .param(reason, Type::TEXT),
            );
        }
        if let Some(record) = self.declaration.take() {
            let mut value = record.revision.to_be_bytes().to_vec();
            value.extend_from_slice(&record.document);
            out.push(
                Statement::new(
                    "write declaration",
                    "INSERT INTO rltp_meta (name, value) VALUES ('declaration', $1) \
                     ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                )
                .param(value, Type::BYTEA),
            );
        }
        Ok(())
    }
}

/// Asks the server to cancel what `client` is running.
async fn cancel(client: &Client, connector: &Connector) {
    let token = client.cancel_token();
    let _ = match connector {
        Connector::Plain => token.cancel_query(tokio_postgres::NoTls).await,
        Connector::Tls(tls) => token.cancel_query(tls.clone()).await,
    };
}

impl Drop for PgWrite<'_> {
    fn drop(&mut self) {
        if self.open {
            // Aborted: nothing of it is kept (the lock goes with it).
            let client = Arc::clone(&self.client);
            let within = self.store.options.connect_timeout;
            let rolled_back = self.store.io.run_within(within, async move {
                client
                    .batch_execute("ROLLBACK")
                    .await
                    .map_err(|e| pg_error("rollback", e))
            });
            if rolled_back.is_err() {
                self.store.drop_writer();
            }
        }
    }
}

impl ReadTxn for PgWrite<'_> {
    fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        self.binding_cached(rkid)
    }
    fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        self.tombstone_cached(rkid)
    }
    fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
        self.gate()?;
        self.flush()?;
        self.run(|c| async move { queries::oldest_tombstone(&c).await })
    }
    fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> StoreResult<Vec<Deposit>> {
        // The database's rows merged with this transaction's buffered
        // appends and removals (no flush): read as many more rows as the
        // transaction removed from this part of the queue.
        self.hold(rkid)?;
        let from = after.map_or(0, |a| a.saturating_add(1));
        if limit == 1 && after.is_some() {
            // The deposit at exactly `from`, if the transaction knows it
            // is held, is the page (no `seq` lies between).
            let inner = self.inner.borrow();
            if let Some((d, _)) = inner.appended.get(&(*rkid, from)) {
                return Ok(vec![*d]);
            }
            if let Some(d) = inner.by_seq.get(&(*rkid, from)) {
                return Ok(vec![*d]);
            }
        }
        let removed = {
            let inner = self.inner.borrow();
            inner
                .removed
                .range((*rkid, from)..=(*rkid, u64::MAX))
                .count()
        };
        let r = *rkid;
        let want = limit.saturating_add(removed);
        let rows = self.run(|c| async move { queries::deposits(&c, &r, after, want).await })?;
        let mut inner = self.inner.borrow_mut();
        let mut out: Vec<Deposit> = rows
            .into_iter()
            .filter(|d| !inner.removed.contains(&(*rkid, d.seq)))
            .collect();
        for d in &out {
            inner.by_seq.insert((*rkid, d.seq), *d);
        }
        out.extend(
            inner
                .appended
                .range((*rkid, from)..=(*rkid, u64::MAX))
                .map(|(_, (d, _))| *d),
        );
        out.sort_by_key(|d| d.seq);
        out.truncate(limit);
        Ok(out)
    }
    fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
        self.hold(rkid)?;
        if let Some(d) = self.inner.borrow().identity.get(&(*rkid, *id)) {
            return Ok(*d);
        }
        let (r, i) = (*rkid, *id);
        let found = self.run(|c| async move { queries::deposit_by_id(&c, &r, &i).await })?;
        let mut inner = self.inner.borrow_mut();
        // A row this transaction already deleted is gone.
        let found = found.filter(|d| !inner.removed.contains(&(*rkid, d.seq)));
        inner.identity.insert((*rkid, *id), found);
        Ok(found)
    }
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        if let Some((_, bytes)) = self.inner.borrow().appended.get(&(*rkid, deposit.seq)) {
            return queries::checked(bytes.clone(), deposit);
        }
        let (r, d) = (*rkid, *deposit);
        self.run(|c| async move { queries::deposit_bytes(&c, &r, &d).await })
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        Ok(self.queue_cached(rkid)?.bytes)
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        // The tombstone count is exact under the gate (the eviction bound).
        self.gate()?;
        Ok(self.counters()?.0)
    }
    fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>> {
        self.hold(rkid)?;
        if let Some(d) = self.inner.borrow().departures.get(&(*rkid, *id)) {
            return Ok(*d);
        }
        let (r, i) = (*rkid, *id);
        let found = self.run(|c| async move { queries::departure(&c, &r, &i).await })?;
        self.inner
            .borrow_mut()
            .departures
            .insert((*rkid, *id), found);
        Ok(found)
    }
    fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
        let biased = codec::due_at(upto);
        {
            let inner = self.inner.borrow();
            if let Some(w) = &inner.due_window
                && w.upto == biased
            {
                let known: Vec<(Ms, Due)> = w.entries.values().take(limit).copied().collect();
                if known.len() == limit || w.bound.is_none() {
                    return Ok(known);
                }
            }
        }
        // (Re)read the window: this transaction's writes first.
        self.flush()?;
        let fetch = limit.max(self.store.options.due_read_ahead).max(1);
        let rows = self.run(|c| async move { queries::due(&c, upto, fetch).await })?;
        let mut entries = BTreeMap::new();
        for (at, due) in rows {
            entries.insert(codec::due_key(at, &due)?, (at, due));
        }
        let bound = if entries.len() < fetch {
            None
        } else {
            entries.keys().next_back().cloned()
        };
        // Only the entries of queues this transaction holds, or can take
        // now: those of queues another node's transaction holds stay due
        // (`ReadTxn::due`).
        let held = self.hold_all(entries.values().map(|(_, due)| *due.rkid()))?;
        let before = entries.len();
        entries.retain(|_, (_, due)| held.contains(&queue_key(due.rkid())));
        if limit == usize::MAX && entries.len() < before {
            return Err(StoreError::Conflict(
                "a queue of the due index is held by another node's transaction".into(),
            ));
        }
        let known: Vec<(Ms, Due)> = entries.values().take(limit).copied().collect();
        self.read_given_up(&entries)?;
        self.inner.borrow_mut().due_window = Some(DueWindow {
            upto: biased,
            bound,
            entries,
        });
        Ok(known)
    }
    fn next_due(&self) -> StoreResult<Option<Ms>> {
        self.flush()?;
        self.run(|c| async move { queries::next_due(&c).await })
    }
    fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
        if let Some(record) = &self.inner.borrow().declaration {
            return Ok(Some(record.clone()));
        }
        self.run(|c| async move { queries::declaration(&c).await })
    }
    fn quarantined(&self) -> StoreResult<u64> {
        Ok(self.counters()?.1)
    }
}

impl WriteTxn for PgWrite<'_> {
    fn put_binding(&mut self, rkid: &Rkid, binding: &Binding) -> StoreResult<()> {
        let existed = self.binding_cached(rkid)?.is_some();
        let inner = self.inner.get_mut();
        if !existed {
            inner.occupancy.binding_added();
            inner.budget.slots -= 1;
        }
        inner.bindings.insert(*rkid, Some(*binding));
        inner.dirty_bindings.insert(*rkid);
        Ok(())
    }
    fn remove_binding(&mut self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        let removed = self.binding_cached(rkid)?;
        if removed.is_some() {
            let inner = self.inner.get_mut();
            inner.occupancy.binding_removed();
            inner.budget.slots += 1;
            inner.bindings.insert(*rkid, None);
            inner.dirty_bindings.insert(*rkid);
        }
        Ok(removed)
    }
    fn put_tombstone(&mut self, rkid: &Rkid, tombstone: &Tombstone) -> StoreResult<()> {
        self.gate()?;
        let existed = self.tombstone_cached(rkid)?.is_some();
        let inner = self.inner.get_mut();
        if !existed {
            inner.occupancy.tombstone_added();
        }
        inner.tombstones.insert(*rkid, Some(*tombstone));
        inner.dirty_tombstones.insert(*rkid);
        Ok(())
    }
    fn remove_tombstone(&mut self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        self.gate()?;
        let removed = self.tombstone_cached(rkid)?;
        if removed.is_some() {
            let inner = self.inner.get_mut();
            inner.occupancy.tombstone_removed();
            inner.tombstones.insert(*rkid, None);
            inner.dirty_tombstones.insert(*rkid);
        }
        Ok(removed)
    }
    fn append_identified(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit> {
        let len = crate::deposit_len(bytes)?;
        let mut queue = self.queue_cached(rkid)?;
        let inner = self.inner.get_mut();
        queue.last_seq = crate::next_seq(queue.last_seq, inner.seq_floor);
        queue.bytes += u64::from(len);
        inner.queues.insert(*rkid, queue);
        inner.dirty_queues.insert(*rkid);
        let deposit = Deposit {
            seq: queue.last_seq,
            id: *id,
            len,
            admitted_at,
            give_up_at,
        };
        inner
            .appended
            .insert((*rkid, deposit.seq), (deposit, bytes.to_vec()));
        inner.identity.insert((*rkid, *id), Some(deposit));
        inner.occupancy.deposit_added(len);
        inner.admitted.insert(*rkid);
        Ok(deposit)
    }
    fn remove_deposit(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>> {
        self.hold(rkid)?;
        let (from_buffer, already_removed) = {
            let inner = self.inner.get_mut();
            (
                inner.appended.remove(&(*rkid, seq)).map(|(d, _)| d),
                inner.removed.contains(&(*rkid, seq)),
            )
        };
        let known = self.inner.get_mut().by_seq.remove(&(*rkid, seq));
        let deposit = match from_buffer {
            Some(d) => Some(d),
            None if already_removed => None,
            None if known.is_some() => {
                self.inner.get_mut().removed.insert((*rkid, seq));
                known
            }
            None => {
                let r = *rkid;
                let found =
                    self.run(|c| async move { queries::deposit_by_seq(&c, &r, seq).await })?;
                if found.is_some() {
                    self.inner.get_mut().removed.insert((*rkid, seq));
                }
                found
            }
        };
        let Some(deposit) = deposit else {
            return Ok(None);
        };
        let mut queue = self.queue_cached(rkid)?;
        let inner = self.inner.get_mut();
        inner.identity.insert((*rkid, deposit.id), None);
        queue.bytes = queue.bytes.saturating_sub(u64::from(deposit.len));
        inner.queues.insert(*rkid, queue);
        inner.dirty_queues.insert(*rkid);
        inner.occupancy.deposit_removed(deposit.len);
        Ok(Some(deposit))
    }
    fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        self.hold(rkid)?;
        let inner = self.inner.get_mut();
        inner.departures.insert((*rkid, *id), Some(*record));
        inner.dirty_departures.insert((*rkid, *id));
        Ok(())
    }
    fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        self.hold(rkid)?;
        let inner = self.inner.get_mut();
        inner.departures.insert((*rkid, *id), None);
        inner.dirty_departures.insert((*rkid, *id));
        Ok(())
    }
    fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        self.hold(due.rkid())?;
        let key = codec::due_key(at, due)?;
        let inner = self.inner.get_mut();
        if let Some(w) = &mut inner.due_window
            && w.covers(&key)
        {
            w.entries.insert(key.clone(), (at, *due));
        }
        inner.due.insert(key, true);
        Ok(())
    }
    fn unschedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        self.hold(due.rkid())?;
        let key = codec::due_key(at, due)?;
        let inner = self.inner.get_mut();
        if let Some(w) = &mut inner.due_window {
            w.entries.remove(&key);
        }
        inner.due.insert(key, false);
        Ok(())
    }
    fn add_elastic_bytes(&mut self, delta: i64) -> StoreResult<()> {
        let inner = self.inner.get_mut();
        inner.occupancy.add_elastic(delta);
        inner.budget.bytes = inner.budget.bytes.saturating_sub(delta);
        Ok(())
    }
    fn add_reserved_bytes(&mut self, delta: i64) -> StoreResult<()> {
        let inner = self.inner.get_mut();
        inner.budget.bytes = inner.budget.bytes.saturating_sub(delta);
        Ok(())
    }
    fn escrow(&self, need: Need) -> StoreResult<Option<Escrow>> {
        let need = Budget {
            bytes: i64::try_from(need.bytes).unwrap_or(i64::MAX),
            slots: i64::try_from(need.slots).unwrap_or(i64::MAX),
        };
        let budget = self.inner.borrow().budget;
        if budget.bytes < need.bytes || budget.slots < need.slots {
            self.refill(need)?;
        }
        let budget = self.inner.borrow().budget;
        Ok(Some(Escrow {
            bytes: u64::try_from(budget.bytes).unwrap_or(0),
            slots: u64::try_from(budget.slots).unwrap_or(0),
        }))
    }
    fn over_limits(&self) -> StoreResult<Option<bool>> {
        self.run(|c| async move { escrow::over_limits(&c).await })
            .map(Some)
    }
    fn put_declaration(&mut self, record: &DeclarationRecord) -> StoreResult<()> {
        self.inner.get_mut().declaration = Some(record.clone());
        Ok(())
    }
    fn prefetch(
        &mut self,
        keys: &[(Rkid, Option<DepositId>)],
        wait: bool,
    ) -> StoreResult<Vec<Rkid>> {
        self.lock_queues(keys, wait)
    }
    fn quarantine(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        at: Ms,
        reason: &str,
    ) -> StoreResult<()> {
        self.hold(rkid)?;
        let inner = self.inner.get_mut();
        inner
            .quarantine
            .push((*rkid, *deposit, at, reason.to_owned()));
        inner.quarantined += 1;
        Ok(())
    }
    fn store_now(&self) -> Option<Ms> {
        Some(self.now)
    }
}
