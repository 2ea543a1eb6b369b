//! What a write transaction holds besides its rows ([`super::super::escrow`]):
//! the queues' locks, the tombstone gate, its lane's budget (refilled from
//! the pool, written back at commit with the counters' deltas).

use super::{Inner, PgWrite, Statement};
use crate::postgres::codec::pg_error;
use crate::postgres::escrow::{self, Budget, Lane, queue_key};
use crate::postgres::{clock, queries};
use crate::{DepositId, Occupancy, StoreError, StoreResult};
use rltp_proofs::multikey::Rkid;
use std::collections::{BTreeSet, HashSet};
use tokio_postgres::types::Type;

/// Where the counters of a transaction start: each is kept as this base
/// plus what the transaction changed, so a decrease below what this node
/// knows is still counted (the commit writes the deltas into its lane,
/// [`super::escrow`]).
pub(super) const COUNTER_BASE: u64 = 1 << 62;

/// A counter's change since [`COUNTER_BASE`].
pub(super) fn delta(counter: u64) -> i64 {
    i64::try_from(i128::from(counter) - i128::from(COUNTER_BASE)).unwrap_or(i64::MAX)
}

/// The lane's row at commit: its budget, and its counters moved by this
/// transaction's deltas ([`escrow`]: the reported counters are sharded).
const WRITE_LANE: &str = "UPDATE rltp_lanes SET bytes = $3, slots = $4, \
     total_bytes = total_bytes + $5, deposits = deposits + $6, bindings = bindings + $7, \
     elastic_bytes = elastic_bytes + $8, quarantined = quarantined + $9 \
     WHERE lane = $1 AND epoch = $2";

/// [`WRITE_LANE`] giving the surplus `($10, $11)` back to the pool, if its
/// row is free (`SKIP LOCKED`: a commit never waits for it).
const WRITE_LANE_GIVING_BACK: &str = "WITH p AS (SELECT id FROM rltp_pool WHERE id = 1 FOR UPDATE SKIP LOCKED), \
     g AS (UPDATE rltp_pool SET bytes = rltp_pool.bytes + $10, slots = rltp_pool.slots + $11 \
           FROM p WHERE rltp_pool.id = p.id RETURNING 1) \
     UPDATE rltp_lanes SET bytes = $3 - CASE WHEN EXISTS (SELECT 1 FROM g) THEN $10 ELSE 0 END, \
     slots = $4 - CASE WHEN EXISTS (SELECT 1 FROM g) THEN $11 ELSE 0 END, \
     total_bytes = total_bytes + $5, deposits = deposits + $6, bindings = bindings + $7, \
     elastic_bytes = elastic_bytes + $8, quarantined = quarantined + $9 \
     WHERE lane = $1 AND epoch = $2";

impl PgWrite<'_> {
    /// Takes the locks of the queues `keys` name ([`escrow`]), in key
    /// order: without waiting (returning the queues another node's
    /// transaction holds), or, with `wait`, waiting for each.
    pub(super) fn lock_queues(
        &mut self,
        keys: &[(Rkid, Option<DepositId>)],
        wait: bool,
    ) -> StoreResult<Vec<Rkid>> {
        let wanted: Vec<i64> = {
            let locked = &self.inner.get_mut().locked;
            let set: BTreeSet<i64> = keys
                .iter()
                .map(|(rkid, _)| queue_key(rkid))
                .filter(|k| !locked.contains(k))
                .collect();
            set.into_iter().collect()
        };
        let request = self.read_request(keys);
        if wanted.is_empty() && request.is_empty() {
            return Ok(Vec::new());
        }
        // One round trip, in this order: the locks; the database's clock
        // again, once they are held (the batch's instant follows every
        // commit it waited for or read: `PROTOCOL.md` §13 "One clock");
        // the rows the batch will read (fresh for every queue locked; those
        // of a queue another node holds are dropped below).
        let to_lock = wanted;
        let asked = request.clone();
        let (taken, now, found) = self.run(move |c| async move {
            let lock = async {
                if to_lock.is_empty() {
                    Ok(to_lock)
                } else if wait {
                    escrow::lock_queues(&c, to_lock.clone())
                        .await
                        .map(|()| to_lock)
                } else {
                    escrow::try_lock_queues(&c, to_lock).await
                }
            };
            let read = async {
                if asked.is_empty() {
                    Ok(None)
                } else {
                    asked.read(&c).await.map(Some)
                }
            };
            let (taken, now, found) = tokio::join!(lock, clock::read(&c), read);
            Ok((taken?, now?, found?))
        })?;
        self.now = self.now.max(now);
        let inner = self.inner.get_mut();
        inner.locked.extend(taken.iter().copied());
        let mut busy: Vec<Rkid> = keys
            .iter()
            .map(|(rkid, _)| *rkid)
            .filter(|rkid| !inner.locked.contains(&queue_key(rkid)))
            .collect();
        busy.sort_unstable();
        busy.dedup();
        if let Some(found) = found {
            self.read_apply(&request, found, &busy);
        }
        Ok(busy)
    }

    /// Takes, without waiting, the locks of the queues `rkids` this
    /// transaction does not hold yet; returns every key it holds after.
    pub(super) fn hold_all(&self, rkids: impl Iterator<Item = Rkid>) -> StoreResult<HashSet<i64>> {
        let wanted: Vec<i64> = {
            let inner = self.inner.borrow();
            let set: BTreeSet<i64> = rkids
                .map(|rkid| queue_key(&rkid))
                .filter(|k| !inner.locked.contains(k))
                .collect();
            set.into_iter().collect()
        };
        if !wanted.is_empty() {
            let taken =
                self.run(move |c| async move { escrow::try_lock_queues(&c, wanted).await })?;
            self.inner.borrow_mut().locked.extend(taken);
        }
        Ok(self.inner.borrow().locked.clone())
    }

    /// Holds the lock of `rkid`'s queue ([`escrow`]): taken now, without
    /// waiting, unless this transaction holds it already. Held by another
    /// node's transaction: a [`StoreError::Conflict`] (the batch runs
    /// again).
    pub(super) fn hold(&self, rkid: &Rkid) -> StoreResult<()> {
        let key = queue_key(rkid);
        if self.inner.borrow().locked.contains(&key) {
            return Ok(());
        }
        let got = self.run(move |c| async move { escrow::try_lock_queues(&c, vec![key]).await })?;
        if got.is_empty() {
            return Err(StoreError::Conflict(
                format!("the queue of {rkid} is held by another node's transaction").into(),
            ));
        }
        self.inner.borrow_mut().locked.insert(key);
        Ok(())
    }

    /// Holds the tombstone gate ([`escrow`]: the row lock of
    /// `rltp_occupancy`), taken now unless held already.
    pub(super) fn gate(&self) -> StoreResult<()> {
        if self.inner.borrow().gate {
            return Ok(());
        }
        self.run(|c| async move {
            c.query_typed(
                "SELECT tombstones FROM rltp_occupancy WHERE id = 1 FOR UPDATE",
                &[],
            )
            .await
            .map(drop)
            .map_err(|e| pg_error("take the tombstone gate", e))
        })?;
        self.inner.borrow_mut().gate = true;
        Ok(())
    }

    /// Moves into the lane what `need` lacks (and a target's worth more)
    /// from the pool, whose row this transaction then holds; still short,
    /// takes back first the budgets of lanes whose node is gone.
    pub(super) fn refill(&self, need: Budget) -> StoreResult<()> {
        let (target, lane) = (self.store.target(), self.lane);
        let held_pool = self.inner.borrow().pool;
        let pool = match held_pool {
            Some(pool) => pool,
            None => self.run(|c| async move { escrow::lock_pool(&c).await })?,
        };
        let budget = self.inner.borrow().budget;
        let (mut budget, mut pool) = escrow::refill(budget, pool, need, target);
        if budget.bytes < need.bytes || budget.slots < need.slots {
            let reclaimed =
                self.run(move |c| async move { escrow::reclaim_dead(&c, lane).await })?;
            (budget, pool) = escrow::refill(budget, pool.add(reclaimed), need, target);
        }
        let mut inner = self.inner.borrow_mut();
        inner.budget = budget;
        inner.pool = Some(pool);
        Ok(())
    }

    /// The global counters with this transaction's own changes, and the
    /// quarantined count likewise.
    pub(super) fn counters(&self) -> StoreResult<(Occupancy, u64)> {
        let (global, quarantined) = self.run(|c| async move { queries::occupancy(&c).await })?;
        let inner = self.inner.borrow();
        let own = inner.occupancy;
        let plus = |v: u64, d: i64| v.saturating_add_signed(d);
        Ok((
            Occupancy {
                total_bytes: plus(global.total_bytes, delta(own.total_bytes)),
                bindings: plus(global.bindings, delta(own.bindings)),
                deposits: plus(global.deposits, delta(own.deposits)),
                tombstones: plus(global.tombstones, delta(own.tombstones)),
                elastic_bytes: plus(global.elastic_bytes, delta(own.elastic_bytes)),
            },
            plus(quarantined, delta(inner.quarantined)),
        ))
    }
}

impl Inner {
    /// The commit's writes of budgets and counters ([`escrow`]): the
    /// tombstone count under the gate, the pool if this transaction
    /// refilled from it, the lane's row; a lane over twice its `target`
    /// gives the surplus back.
    pub(super) fn budget_statements(
        &mut self,
        lane: Lane,
        target: Budget,
    ) -> StoreResult<Vec<Statement>> {
        let o = self.occupancy;
        let mut out = Vec::new();
        let tombstones = delta(o.tombstones);
        if self.gate {
            out.push(
                Statement::new(
                    "write the tombstone count",
                    "UPDATE rltp_occupancy SET tombstones = tombstones + $1 WHERE id = 1",
                )
                .param(tombstones, Type::INT8),
            );
        } else if tombstones != 0 {
            return Err(StoreError::Corrupt(
                "the tombstone count changed without the tombstone gate".into(),
            ));
        }
        let mut give = escrow::surplus(self.budget, target);
        if let Some(pool) = self.pool {
            // The pool's row is this transaction's: give back directly.
            let pool = pool.add(give);
            self.budget = self.budget.sub(give);
            give = Budget::default();
            out.push(
                Statement::new(
                    "write the pool",
                    "UPDATE rltp_pool SET bytes = $1, slots = $2 WHERE id = 1",
                )
                .param(pool.bytes, Type::INT8)
                .param(pool.slots, Type::INT8),
            );
        }
        let giving = give != Budget::default();
        let sql = if giving {
            WRITE_LANE_GIVING_BACK
        } else {
            WRITE_LANE
        };
        let mut statement = Statement::new("write the lane", sql)
            .param(lane.id, Type::INT4)
            .param(lane.epoch, Type::INT8)
            .param(self.budget.bytes, Type::INT8)
            .param(self.budget.slots, Type::INT8)
            .param(delta(o.total_bytes), Type::INT8)
            .param(delta(o.deposits), Type::INT8)
            .param(delta(o.bindings), Type::INT8)
            .param(delta(o.elastic_bytes), Type::INT8)
            .param(delta(self.quarantined), Type::INT8);
        if giving {
            statement = statement
                .param(give.bytes, Type::INT8)
                .param(give.slots, Type::INT8);
        }
        out.push(statement);
        Ok(out)
    }
}
