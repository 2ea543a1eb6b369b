//! Escrowed budgets and per-queue locks: how many nodes share one
//! database's capacity without a global lock (`PROTOCOL.md` §13
//! "Per-queue locks" and "Escrowed budgets"; issue 23).
//!
//! ## Per-queue locks
//! Every write transaction touching a queue's binding, tombstone,
//! deposits, departures or due entries holds the queue's lock: a
//! transaction-level advisory lock keyed by the first 8 bytes of its
//! `rkid` ([`queue_key`]; two `rkid`s sharing them share a lock, which
//! costs concurrency, never correctness). A batch takes its queues' locks
//! first, in key order, without waiting ([`try_lock_queues`]): the
//! operations on a queue another node's transaction holds go into the
//! writer's next batch. After a few such rounds the batch waits for them
//! instead ([`lock_queues`], still in key order, so two nodes never
//! deadlock). A queue met later in the transaction (a horizon due, the
//! oldest tombstone) is taken without waiting or left alone.
//!
//! ## Escrowed budgets
//! Capacity (§4.4 guarantees 2, 4, 5) is conserved, at every commit, as
//!
//! ```text
//! capacity-bytes = pool.bytes + Σ lane.bytes + Σ reserved floors + elastic
//! max-bindings   = pool.slots + Σ lane.slots + bindings
//! ```
//!
//! `rltp_pool` holds what no node holds; each node's writer holds a
//! **lane** (`rltp_lanes`): a budget of bytes and binding slots it spends
//! in the same transaction as the admission it pays for (an arrival: its
//! floor and a slot; a deposit: its growth above its floor), and into
//! which conclusions, give-ups and releases pay back. A lane short of a
//! decision's need takes it from the pool in that transaction (and a
//! target's worth more, so that the pool's row is seldom locked); a lane
//! holding over twice its target gives the surplus back at commit, if the
//! pool's row is free. Floors are reserved at registration, outside every
//! lane: within its floor a queue consults no budget, so no node's death
//! can cost a queue its floor (g5).
//!
//! **A lane lives as long as its node's writer session**: the session
//! holds a session-level advisory lock on the lane ([`claim`]) from before
//! its row exists. A lane whose lock is free belongs to a session that is
//! gone (the node crashed, or its connection was cut): a node short of
//! budget takes such a lane's row (the lock proves nobody else can), moves
//! its balance to the pool and bumps its epoch ([`reclaim_dead`]). Every
//! write transaction locks its own lane's row first and checks its epoch,
//! so a node whose lane was reclaimed commits nothing more through it.
//! Safety needs no clock: no lease, no timeout.
//!
//! The counters that are only reported (bytes, deposits, bindings,
//! elastic bytes, quarantined) are sharded the same way: each lane row
//! holds what its node added, `rltp_occupancy` the rest; a read sums them.
//! The tombstone count stays exact in `rltp_occupancy`, whose row lock is
//! the **tombstone gate**, taken only by transactions that create, consume
//! or evict a tombstone (the eviction order is global, §5a.3).

use super::codec::pg_error;
use crate::{StoreError, StoreResult};
use rltp_proofs::multikey::Rkid;
use tokio_postgres::Client;
use tokio_postgres::types::Type;

/// The class of the lanes' advisory locks (two-key form: `'rltp'`), apart
/// from the queues' (one-key form).
const LANE_CLASS: i32 = 0x726c_7470;

/// A queue's advisory lock key: the first 8 bytes of its `rkid`.
pub(super) fn queue_key(rkid: &Rkid) -> i64 {
    let mut key = [0u8; 8];
    key.copy_from_slice(&rkid.as_bytes()[..8]);
    i64::from_be_bytes(key)
}

/// Takes, without waiting, the queue locks `keys` (in the order given:
/// ascending); returns those taken.
///
/// # Errors
/// [`StoreError::Postgres`].
pub(super) async fn try_lock_queues(client: &Client, keys: Vec<i64>) -> StoreResult<Vec<i64>> {
    Ok(client
        .query_typed(
            "SELECT k FROM unnest($1::int8[]) AS k WHERE pg_try_advisory_xact_lock(k)",
            &[(&keys, Type::INT8_ARRAY)],
        )
        .await
        .map_err(|e| pg_error("lock queues", e))?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

/// Takes the queue locks `keys`, waiting for each, in the order given
/// (ascending: two transactions that wait never wait for each other).
///
/// # Errors
/// [`StoreError::Postgres`] (a lock not had within the session's
/// `lock_timeout` among them).
pub(super) async fn lock_queues(client: &Client, keys: Vec<i64>) -> StoreResult<()> {
    client
        .query_typed(
            "SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::int8[]) AS k",
            &[(&keys, Type::INT8_ARRAY)],
        )
        .await
        .map(drop)
        .map_err(|e| pg_error("wait for queue locks", e))
}

/// A node's lane: its id and the epoch it holds it at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lane {
    pub(super) id: i32,
    pub(super) epoch: i64,
}

/// Bytes and binding slots (a budget, a balance; negative is a debt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Budget {
    pub(super) bytes: i64,
    pub(super) slots: i64,
}

impl Budget {
    pub(super) fn add(self, other: Budget) -> Budget {
        Budget {
            bytes: self.bytes.saturating_add(other.bytes),
            slots: self.slots.saturating_add(other.slots),
        }
    }
    pub(super) fn sub(self, other: Budget) -> Budget {
        Budget {
            bytes: self.bytes.saturating_sub(other.bytes),
            slots: self.slots.saturating_sub(other.slots),
        }
    }
}

/// A lane's target: what a refill aims to leave in it, and half of what it
/// may keep before giving back (`PROTOCOL.md` §13: 1/256 of each limit,
/// at least one slot).
pub(super) fn target(capacity_bytes: u64, max_bindings: u64) -> Budget {
    Budget {
        bytes: i64::try_from(capacity_bytes / 256).unwrap_or(i64::MAX),
        slots: i64::try_from((max_bindings / 256).max(1)).unwrap_or(i64::MAX),
    }
}

/// Claims a new lane for the writer's session `client` (autocommit): the
/// session's advisory lock on a fresh id first, then its row (epoch 1, an
/// empty budget, zero counters), so that no other node ever sees the row
/// without its lock held.
///
/// # Errors
/// [`StoreError::Postgres`] if the database cannot be reached.
pub(super) async fn claim(client: &Client) -> StoreResult<Lane> {
    for _ in 0..64 {
        let row = client
            .query_one(
                "SELECT id, pg_try_advisory_lock($1, id) FROM \
                 (SELECT (floor(random() * 2147483646))::int + 1 AS id) r",
                &[&LANE_CLASS],
            )
            .await
            .map_err(|e| pg_error("claim a lane", e))?;
        let (id, locked): (i32, bool) = (row.get(0), row.get(1));
        if !locked {
            continue;
        }
        let inserted = client
            .query_opt(
                "INSERT INTO rltp_lanes (lane, epoch, bytes, slots, total_bytes, deposits, bindings, \
                 elastic_bytes, quarantined) VALUES ($1, 1, 0, 0, 0, 0, 0, 0, 0) \
                 ON CONFLICT (lane) DO NOTHING RETURNING epoch",
                &[&id],
            )
            .await
            .map_err(|e| pg_error("claim a lane", e))?;
        if let Some(row) = inserted {
            return Ok(Lane {
                id,
                epoch: row.get(0),
            });
        }
        // The id names an old lane: leave it to its reclaimer.
        client
            .execute("SELECT pg_advisory_unlock($1, $2)", &[&LANE_CLASS, &id])
            .await
            .map_err(|e| pg_error("claim a lane", e))?;
    }
    Err(StoreError::Corrupt(
        "rltp_lanes: no free lane id in 64 draws".into(),
    ))
}

/// The lane of a new writer session `client`: `lane` again if this
/// session can lock it and it still holds its epoch (the previous
/// session's end did not lead to its reclaim), else a new one.
///
/// # Errors
/// [`StoreError::Postgres`] if the database cannot be reached.
pub(super) async fn resume(client: &Client, lane: Option<Lane>) -> StoreResult<Lane> {
    if let Some(lane) = lane {
        let row = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, $2), \
                 (SELECT epoch FROM rltp_lanes WHERE lane = $2)",
                &[&LANE_CLASS, &lane.id],
            )
            .await
            .map_err(|e| pg_error("resume the lane", e))?;
        let (locked, epoch): (bool, Option<i64>) = (row.get(0), row.get(1));
        if locked && epoch == Some(lane.epoch) {
            return Ok(lane);
        }
        if locked {
            client
                .execute(
                    "SELECT pg_advisory_unlock($1, $2)",
                    &[&LANE_CLASS, &lane.id],
                )
                .await
                .map_err(|e| pg_error("resume the lane", e))?;
        }
    }
    claim(client).await
}

/// Locks this transaction's own lane row and reads its budget; `None` if
/// the lane is no longer held at `lane.epoch` (reclaimed: the node must
/// take a new one).
///
/// # Errors
/// [`StoreError::Postgres`].
pub(super) async fn lock_own(client: &Client, lane: Lane) -> StoreResult<Option<Budget>> {
    let row = client
        .query_typed(
            "SELECT epoch, bytes, slots FROM rltp_lanes WHERE lane = $1 FOR UPDATE",
            &[(&lane.id, Type::INT4)],
        )
        .await
        .map_err(|e| pg_error("lock the lane", e))?
        .into_iter()
        .next();
    Ok(row
        .filter(|r| r.get::<_, i64>(0) == lane.epoch)
        .map(|r| Budget {
            bytes: r.get(1),
            slots: r.get(2),
        }))
}

/// Locks the pool's row and reads it.
///
/// # Errors
/// [`StoreError::Postgres`]; [`StoreError::Corrupt`] without the row.
pub(super) async fn lock_pool(client: &Client) -> StoreResult<Budget> {
    let row = client
        .query_opt(
            "SELECT bytes, slots FROM rltp_pool WHERE id = 1 FOR UPDATE",
            &[],
        )
        .await
        .map_err(|e| pg_error("lock the pool", e))?
        .ok_or_else(|| StoreError::Corrupt("rltp_pool has no row".into()))?;
    Ok(Budget {
        bytes: row.get(0),
        slots: row.get(1),
    })
}

/// Takes the rows of the lanes whose sessions are gone (their advisory
/// lock free: taken here for the rest of the transaction, so their node,
/// were it to come back, cannot resume them) and still hold a balance;
/// zeroes them, bumps their epochs, and returns what they held. A lane
/// another transaction has locked is left alone (`SKIP LOCKED`).
///
/// # Errors
/// [`StoreError::Postgres`].
pub(super) async fn reclaim_dead(client: &Client, own: Lane) -> StoreResult<Budget> {
    let candidates: Vec<i32> = client
        .query(
            "SELECT lane FROM rltp_lanes WHERE lane <> $1 AND (bytes <> 0 OR slots <> 0) ORDER BY lane",
            &[&own.id],
        )
        .await
        .map_err(|e| pg_error("find dead lanes", e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if candidates.is_empty() {
        return Ok(Budget::default());
    }
    let row = client
        .query_one(
            "WITH dead AS (SELECT lane FROM unnest($2::int4[]) AS lane \
                           WHERE pg_try_advisory_xact_lock($1, lane)), \
                  held AS (SELECT l.lane, l.bytes, l.slots FROM rltp_lanes l JOIN dead USING (lane) \
                           FOR UPDATE OF l SKIP LOCKED), \
                  done AS (UPDATE rltp_lanes l SET epoch = l.epoch + 1, bytes = 0, slots = 0 \
                           FROM held WHERE l.lane = held.lane RETURNING held.bytes, held.slots) \
             SELECT coalesce(sum(bytes), 0)::int8, coalesce(sum(slots), 0)::int8 FROM done",
            &[&LANE_CLASS, &candidates],
        )
        .await
        .map_err(|e| pg_error("reclaim dead lanes", e))?;
    let reclaimed = Budget {
        bytes: row.get(0),
        slots: row.get(1),
    };
    if reclaimed != Budget::default() {
        tracing::info!(
            bytes = reclaimed.bytes,
            slots = reclaimed.slots,
            "reclaimed the budget of lanes whose node is gone"
        );
    }
    Ok(reclaimed)
}

/// What a lane holds after a refill toward `need` (and `target` beyond it)
/// from `pool`, and the pool after it: `(lane, pool)`.
pub(super) fn refill(lane: Budget, pool: Budget, need: Budget, target: Budget) -> (Budget, Budget) {
    let take = |have: i64, need: i64, target: i64, pool: i64| -> i64 {
        if have >= need {
            return 0;
        }
        let want = need.max(target).saturating_sub(have);
        want.min(pool.max(0))
    };
    let moved = Budget {
        bytes: take(lane.bytes, need.bytes, target.bytes, pool.bytes),
        slots: take(lane.slots, need.slots, target.slots, pool.slots),
    };
    (lane.add(moved), pool.sub(moved))
}

/// What a lane holding `lane` gives back at commit: down to `target`, when
/// it holds over twice that.
pub(super) fn surplus(lane: Budget, target: Budget) -> Budget {
    let give = |have: i64, target: i64| {
        if have > target.saturating_mul(2) {
            have - target
        } else {
            0
        }
    };
    Budget {
        bytes: give(lane.bytes, target.bytes),
        slots: give(lane.slots, target.slots),
    }
}

/// Whether the carrier is over its limits: the pool and every lane
/// together below zero, in bytes or in slots (r4 for a return).
///
/// # Errors
/// [`StoreError::Postgres`].
pub(super) async fn over_limits(client: &Client) -> StoreResult<bool> {
    let row = client
        .query_one(
            "SELECT p.bytes + coalesce(sum(l.bytes), 0) < 0 OR p.slots + coalesce(sum(l.slots), 0) < 0 \
             FROM rltp_pool p LEFT JOIN rltp_lanes l ON true WHERE p.id = 1 GROUP BY p.bytes, p.slots",
            &[],
        )
        .await
        .map_err(|e| pg_error("read the budgets", e))?;
    Ok(row.get(0))
}

/// Recomputes the pool from what is held (stop the world, briefly), in
/// one transaction on `client`: every lane's row locked first (so no write
/// transaction runs, and the counters read after are exact), then the
/// pool's; the lanes of nodes that are gone are emptied (their epochs
/// bumped); then `pool = limits − usage − Σ lanes` (the conservation of
/// the module docs). Run when the limits are stored or changed, and at a
/// node's start. `floor` is the carrier's `queue-floor`.
///
/// # Errors
/// [`StoreError::Postgres`]; [`StoreError::Corrupt`] without the rows.
pub(super) async fn rebalance(
    client: &Client,
    capacity_bytes: u64,
    max_bindings: u64,
    floor: u64,
) -> StoreResult<Budget> {
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let fail = |e| pg_error("rebalance the pool", e);
    let updated = async {
        client
            .batch_execute(
                "BEGIN ISOLATION LEVEL READ COMMITTED; \
                 SELECT lane FROM rltp_lanes ORDER BY lane FOR UPDATE; \
                 SELECT id FROM rltp_pool WHERE id = 1 FOR UPDATE",
            )
            .await?;
        // The lanes of nodes that are gone give their budgets back (into
        // the pool recomputed below).
        client
            .execute(
                "UPDATE rltp_lanes SET epoch = epoch + 1, bytes = 0, slots = 0 \
                 WHERE (bytes <> 0 OR slots <> 0) AND pg_try_advisory_xact_lock($1, lane)",
                &[&LANE_CLASS],
            )
            .await?;
        client
            .query_opt(
                "UPDATE rltp_pool SET \
                     bytes = (($1::int8)::numeric - h.bindings * ($3::int8)::numeric - h.elastic - l.bytes)::int8, \
                     slots = (($2::int8)::numeric - h.bindings - l.slots)::int8 \
                 FROM (SELECT coalesce(sum(bytes), 0) AS bytes, coalesce(sum(slots), 0) AS slots FROM rltp_lanes) l, \
                      (SELECT o.bindings + coalesce((SELECT sum(bindings) FROM rltp_lanes), 0) AS bindings, \
                              o.elastic_bytes + coalesce((SELECT sum(elastic_bytes) FROM rltp_lanes), 0) AS elastic \
                       FROM rltp_occupancy o WHERE o.id = 1) h \
                 WHERE rltp_pool.id = 1 RETURNING rltp_pool.bytes, rltp_pool.slots",
                &[&to_i64(capacity_bytes), &to_i64(max_bindings), &to_i64(floor)],
            )
            .await
    }
    .await;
    // Ended either way: the connection goes back to its pool idle.
    let end = if matches!(updated, Ok(Some(_))) {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    client.batch_execute(end).await.map_err(fail)?;
    let row = updated
        .map_err(fail)?
        .ok_or_else(|| StoreError::Corrupt("rltp_pool has no row".into()))?;
    Ok(Budget {
        bytes: row.get(0),
        slots: row.get(1),
    })
}

/// The audit of the conservation (module docs), for tests and the
/// integrity check: `(bytes, slots)` each `limit − (pool + Σ lanes +
/// usage)`, both 0 when every byte and slot is accounted for. Exact only
/// while no write transaction runs.
///
/// # Errors
/// [`StoreError::Postgres`].
pub(super) async fn audit(
    client: &Client,
    capacity_bytes: u64,
    max_bindings: u64,
    floor: u64,
) -> StoreResult<(i64, i64)> {
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let row = client
        .query_one(
            "SELECT (($1::int8)::numeric - p.bytes - l.bytes - h.bindings * ($3::int8)::numeric - h.elastic)::int8, \
                    (($2::int8)::numeric - p.slots - l.slots - h.bindings)::int8 \
             FROM rltp_pool p, \
                  (SELECT coalesce(sum(bytes), 0) AS bytes, coalesce(sum(slots), 0) AS slots FROM rltp_lanes) l, \
                  (SELECT o.bindings + coalesce((SELECT sum(bindings) FROM rltp_lanes), 0) AS bindings, \
                          o.elastic_bytes + coalesce((SELECT sum(elastic_bytes) FROM rltp_lanes), 0) AS elastic \
                   FROM rltp_occupancy o WHERE o.id = 1) h \
             WHERE p.id = 1",
            &[&to_i64(capacity_bytes), &to_i64(max_bindings), &to_i64(floor)],
        )
        .await
        .map_err(|e| pg_error("audit the budgets", e))?;
    Ok((row.get(0), row.get(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Budget = Budget {
        bytes: 100,
        slots: 2,
    };

    #[test]
    fn a_refill_takes_what_the_need_lacks_and_a_target_beyond_it() {
        let pool = Budget {
            bytes: 1_000,
            slots: 10,
        };
        // Enough already: nothing moves.
        let lane = Budget {
            bytes: 50,
            slots: 1,
        };
        assert_eq!(
            refill(
                lane,
                pool,
                Budget {
                    bytes: 50,
                    slots: 1
                },
                TARGET
            ),
            (lane, pool)
        );
        // Short: up to the larger of need and target.
        assert_eq!(
            refill(
                lane,
                pool,
                Budget {
                    bytes: 300,
                    slots: 2
                },
                TARGET
            ),
            (
                Budget {
                    bytes: 300,
                    slots: 2
                },
                Budget {
                    bytes: 750,
                    slots: 9
                }
            )
        );
        assert_eq!(
            refill(
                lane,
                pool,
                Budget {
                    bytes: 60,
                    slots: 1
                },
                TARGET
            )
            .0,
            Budget {
                bytes: 100,
                slots: 1
            }
        );
        // A pool that cannot cover it gives what it has; a debt gives nothing.
        let poor = Budget {
            bytes: 20,
            slots: -3,
        };
        assert_eq!(
            refill(
                lane,
                poor,
                Budget {
                    bytes: 300,
                    slots: 5
                },
                TARGET
            ),
            (
                Budget {
                    bytes: 70,
                    slots: 1
                },
                Budget {
                    bytes: 0,
                    slots: -3
                }
            )
        );
    }

    #[test]
    fn a_lane_gives_back_down_to_its_target_only_over_twice_it() {
        assert_eq!(
            surplus(
                Budget {
                    bytes: 200,
                    slots: 4
                },
                TARGET
            ),
            Budget::default()
        );
        assert_eq!(
            surplus(
                Budget {
                    bytes: 201,
                    slots: 5
                },
                TARGET
            ),
            Budget {
                bytes: 101,
                slots: 3
            }
        );
        assert_eq!(
            surplus(
                Budget {
                    bytes: -5,
                    slots: 0
                },
                TARGET
            ),
            Budget::default()
        );
        assert_eq!(
            target(25_600, 10),
            Budget {
                bytes: 100,
                slots: 1
            }
        );
    }

    #[test]
    fn a_queue_key_is_its_rkid_prefix() {
        let mut bytes = [0u8; 32];
        bytes[7] = 1;
        bytes[8] = 0xff;
        assert_eq!(queue_key(&Rkid::from_bytes(bytes)), 1);
        bytes[0] = 0x80;
        assert!(queue_key(&Rkid::from_bytes(bytes)) < 0);
    }
}
