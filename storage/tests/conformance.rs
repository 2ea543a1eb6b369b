//! The `Store` contract, one body per rule, run against every store:
//! `MemStore` (the reference), the log store (tiny segments and snapshot
//! intervals, so rotation, snapshots and reclaiming happen), `RedbStore`
//! with segments (tiny segments, so rotation and reclamation happen),
//! `RedbStore` with inline bytes, and `PgStore` on a throwaway PostgreSQL
//! cluster. Every durable store's run ends with its `integrity_check`
//! (counters = Σ actual bytes; for the log store also the index rebuilt
//! from its files equal to the one in memory).

mod common;

use common::*;
use rltp_proofs::proof::Purpose;
use rltp_storage::{
    Challenge, DeclarationRecord, Departure, DepartureRecord, DepositId, Due, Occupancy, ReadTxn,
    Store, StoreError, StoreResult, WriteTxn,
};

fn bindings_and_tombstones<S: Store>(store: &S) -> StoreResult<()> {
    let (a, b) = (rkid(1), rkid(2));
    write(store, |t| {
        t.put_binding(&a, &live(3, 10))?;
        t.put_binding(&b, &closing(4, 99))?;
        // Replacing is not a second binding.
        t.put_binding(&a, &live(5, 11))
    })?;
    let r = store.read()?;
    assert_eq!(r.binding(&a)?, Some(live(5, 11)));
    assert_eq!(r.binding(&b)?, Some(closing(4, 99)));
    assert_eq!(r.binding(&rkid(3))?, None);
    assert_eq!(r.occupancy()?.bindings, 2);
    drop(r);

    let removed = write(store, |t| {
        let removed = t.remove_binding(&b)?;
        t.put_tombstone(&b, &tomb(4, 99))?;
        assert_eq!(t.remove_binding(&b)?, None);
        Ok(removed)
    })?;
    assert_eq!(removed, Some(closing(4, 99)));
    let r = store.read()?;
    assert_eq!(r.binding(&b)?, None);
    assert_eq!(r.tombstone(&b)?, Some(tomb(4, 99)));
    assert_eq!(r.tombstone(&a)?, None);
    assert_eq!(
        r.occupancy()?,
        Occupancy {
            bindings: 1,
            tombstones: 1,
            ..Occupancy::default()
        }
    );
    drop(r);

    let consumed = write(store, |t| t.remove_tombstone(&b))?;
    assert_eq!(consumed, Some(tomb(4, 99)));
    let r = store.read()?;
    assert_eq!(r.tombstone(&b)?, None);
    assert_eq!(r.oldest_tombstone()?, None);
    assert_eq!(r.occupancy()?.tombstones, 0);
    Ok(())
}

/// §5a.3 eviction order: ascending `released_at`, ties by ascending rkid
/// key bytes — including rkids that differ only in their last byte.
fn eviction_order<S: Store>(store: &S) -> StoreResult<()> {
    let rkids = [
        (rkid2(9, 0), 20),
        (rkid2(1, 2), 10),
        (rkid2(1, 1), 10),
        (rkid2(0, 255), 30),
        (rkid2(200, 0), 5),
        (rkid2(1, 0), 10),
    ];
    write(store, |t| {
        for (i, (r, at)) in rkids.iter().enumerate() {
            t.put_tombstone(r, &tomb(i as u64 + 1, *at))?;
        }
        // Re-releasing moves a tombstone in the order.
        t.put_tombstone(&rkid2(200, 0), &tomb(7, 25))
    })?;
    let expected = [
        rkid2(1, 0),
        rkid2(1, 1),
        rkid2(1, 2),
        rkid2(9, 0),
        rkid2(200, 0),
        rkid2(0, 255),
    ];
    assert_eq!(store.read()?.occupancy()?.tombstones, 6);
    let mut evicted = Vec::new();
    loop {
        let oldest = store.read()?.oldest_tombstone()?;
        let Some((r, t)) = oldest else { break };
        assert_eq!(store.read()?.tombstone(&r)?, Some(t));
        evicted.push(r);
        write(store, |w| w.remove_tombstone(&r))?;
    }
    assert_eq!(evicted, expected);
    assert_eq!(store.read()?.occupancy()?.tombstones, 0);
    Ok(())
}

fn deposits_in_admission_order_with_paging<S: Store>(store: &S) -> StoreResult<()> {
    let (a, b) = (rkid(1), rkid(2));
    let bytes: Vec<Vec<u8>> = (0..7).map(|i| payload(i, 100 + 37 * i as usize)).collect();
    write(store, |t| {
        for (i, x) in bytes.iter().enumerate().take(4) {
            let queue = if i % 2 == 0 { &a } else { &b };
            t.append_deposit(queue, x, 1000 + i as u64, 5000 + i as u64)?;
        }
        Ok(())
    })?;
    let appended = write(store, |t| {
        let d4 = t.append_deposit(&a, &bytes[4], 1004, 5004)?;
        let d5 = t.append_deposit(&a, &bytes[5], 1005, 5005)?;
        Ok((d4, d5))
    })?;
    assert_eq!((appended.0.seq, appended.1.seq), (3, 4));
    assert_eq!(appended.0.id, DepositId::of(&bytes[4]));
    assert_eq!(appended.0.len, bytes[4].len() as u32);

    let r = store.read()?;
    let held = r.deposits(&a, None, 100)?;
    let seqs: Vec<u64> = held.iter().map(|d| d.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    let ids: Vec<DepositId> = held.iter().map(|d| d.id).collect();
    let expected_ids: Vec<DepositId> = [0, 2, 4, 5]
        .iter()
        .map(|&i| DepositId::of(&bytes[i]))
        .collect();
    assert_eq!(ids, expected_ids);
    assert_eq!(
        (held[0].admitted_at, held[0].give_up_at, held[3].admitted_at),
        (1000, 5000, 1005)
    );
    for (d, i) in held.iter().zip([0, 2, 4, 5]) {
        assert_eq!(r.deposit_bytes(&a, d)?, bytes[i]);
    }
    let page = |after, limit| -> StoreResult<Vec<u64>> {
        Ok(r.deposits(&a, after, limit)?
            .iter()
            .map(|d| d.seq)
            .collect())
    };
    assert_eq!(page(None, 2)?, [1, 2]);
    assert_eq!(page(Some(2), 2)?, [3, 4]);
    assert_eq!(page(Some(4), 2)?, Vec::<u64>::new());
    assert_eq!(page(Some(0), 0)?, Vec::<u64>::new());
    let b_held: Vec<u64> = r.deposits(&b, None, 100)?.iter().map(|d| d.seq).collect();
    assert_eq!(b_held, [1, 2]);
    assert!(r.deposits(&rkid(3), None, 100)?.is_empty());
    drop(r);

    // Removal leaves a gap; sequence numbers are never reused.
    let removed = write(store, |t| {
        let gone = t.remove_deposit(&a, 2)?;
        assert_eq!(t.remove_deposit(&a, 2)?, None);
        assert_eq!(t.remove_deposit(&a, 99)?, None);
        let next = t.append_deposit(&a, &bytes[6], 1006, 5006)?;
        assert_eq!(next.seq, 5);
        Ok(gone)
    })?;
    assert_eq!(removed.map(|d| d.id), Some(DepositId::of(&bytes[2])));
    let r = store.read()?;
    let seqs: Vec<u64> = r.deposits(&a, None, 100)?.iter().map(|d| d.seq).collect();
    assert_eq!(seqs, [1, 3, 4, 5]);
    assert_eq!(r.deposits(&a, Some(1), 1)?.first().map(|d| d.seq), Some(3));
    Ok(())
}

fn identity_index<S: Store>(store: &S) -> StoreResult<()> {
    let (a, b) = (rkid(1), rkid(2));
    let x = payload(1, 300);
    let id = DepositId::of(&x);
    let first = write(store, |t| {
        let d = t.append_deposit(&a, &x, 1, 2)?;
        // The same bytes in another queue are another deposit.
        t.append_deposit(&b, &x, 1, 2)?;
        assert_eq!(t.deposit_by_id(&a, &id)?, Some(d));
        Ok(d)
    })?;
    let r = store.read()?;
    assert_eq!(r.deposit_by_id(&a, &id)?, Some(first));
    assert_eq!(r.deposit_by_id(&b, &id)?.map(|d| d.seq), Some(1));
    assert_eq!(r.deposit_by_id(&a, &DepositId::of(b"other"))?, None);
    assert_eq!(r.deposit_by_id(&rkid(3), &id)?, None);
    drop(r);
    write(store, |t| t.remove_deposit(&a, first.seq))?;
    assert_eq!(store.read()?.deposit_by_id(&a, &id)?, None);
    assert!(store.read()?.deposit_by_id(&b, &id)?.is_some());
    // After removal the same bytes are a new deposit with a new seq.
    let again = write(store, |t| t.append_deposit(&a, &x, 7, 8))?;
    assert_eq!((again.seq, again.id, again.admitted_at), (2, id, 7));
    assert_eq!(store.read()?.deposit_by_id(&a, &id)?, Some(again));
    Ok(())
}

fn occupancy_accounting<S: Store>(store: &S) -> StoreResult<()> {
    let (a, b) = (rkid(1), rkid(2));
    write(store, |t| {
        t.append_deposit(&a, &payload(1, 1000), 0, 0)?;
        t.append_deposit(&a, &payload(2, 24), 0, 0)?;
        t.append_deposit(&b, &payload(3, 500), 0, 0)?;
        t.add_elastic_bytes(700)?;
        assert_eq!(t.queue_bytes(&a)?, 1024);
        assert_eq!(t.occupancy()?.total_bytes, 1524);
        Ok(())
    })?;
    let r = store.read()?;
    assert_eq!(r.queue_bytes(&a)?, 1024);
    assert_eq!(r.queue_bytes(&b)?, 500);
    assert_eq!(r.queue_bytes(&rkid(9))?, 0);
    assert_eq!(
        r.occupancy()?,
        Occupancy {
            total_bytes: 1524,
            deposits: 3,
            elastic_bytes: 700,
            ..Occupancy::default()
        }
    );
    drop(r);
    write(store, |t| {
        t.remove_deposit(&a, 1)?;
        t.add_elastic_bytes(-300)
    })?;
    let r = store.read()?;
    assert_eq!(r.queue_bytes(&a)?, 24);
    let o = r.occupancy()?;
    assert_eq!((o.total_bytes, o.deposits, o.elastic_bytes), (524, 2, 400));
    drop(r);
    // Elastic bytes saturate at zero instead of wrapping.
    write(store, |t| t.add_elastic_bytes(-10_000))?;
    assert_eq!(store.read()?.occupancy()?.elastic_bytes, 0);
    write(store, |t| {
        t.remove_deposit(&a, 2)?;
        t.remove_deposit(&b, 1)
    })?;
    let r = store.read()?;
    assert_eq!(r.occupancy()?, Occupancy::default());
    assert_eq!((r.queue_bytes(&a)?, r.queue_bytes(&b)?), (0, 0));
    Ok(())
}

fn departures<S: Store>(store: &S) -> StoreResult<()> {
    let a = rkid(1);
    let (x, y) = (DepositId([1; 32]), DepositId([2; 32]));
    let concluded = DepartureRecord {
        departure: Departure::Concluded,
        forget_at: 50,
    };
    let given_up = DepartureRecord {
        departure: Departure::GivenUp,
        forget_at: 60,
    };
    write(store, |t| {
        t.put_departure(&a, &x, &concluded)?;
        t.put_departure(&a, &y, &concluded)?;
        t.put_departure(&a, &y, &given_up)
    })?;
    let r = store.read()?;
    assert_eq!(r.departure(&a, &x)?, Some(concluded));
    assert_eq!(r.departure(&a, &y)?, Some(given_up));
    assert_eq!(r.departure(&rkid(2), &x)?, None);
    drop(r);
    write(store, |t| {
        t.remove_departure(&a, &x)?;
        t.remove_departure(&a, &DepositId([3; 32]))
    })?;
    assert_eq!(store.read()?.departure(&a, &x)?, None);
    assert_eq!(store.read()?.departure(&a, &y)?, Some(given_up));
    Ok(())
}

fn due_index_ordering<S: Store>(store: &S) -> StoreResult<()> {
    let (a, b) = (rkid2(1, 0), rkid2(0, 9));
    let entries = [
        (300, Due::Forget(a, DepositId([7; 32]))),
        (100, Due::GiveUp(a, 2)),
        (100, Due::GiveUp(a, 256)),
        (100, Due::OrphanExpiry(a)),
        (100, Due::Deadline(b)),
        (100, Due::OrphanExpiry(b)),
        (u64::MAX, Due::Deadline(a)),
        (99, Due::Forget(b, DepositId([0; 32]))),
        (101, Due::GiveUp(b, 1)),
    ];
    write(store, |t| {
        for (at, due) in &entries {
            t.schedule(*at, due)?;
        }
        // Scheduling twice is one entry.
        t.schedule(100, &Due::GiveUp(a, 2))
    })?;
    let expected = vec![
        (99, Due::Forget(b, DepositId([0; 32]))),
        (100, Due::OrphanExpiry(b)),
        (100, Due::OrphanExpiry(a)),
        (100, Due::Deadline(b)),
        (100, Due::GiveUp(a, 2)),
        (100, Due::GiveUp(a, 256)),
        (101, Due::GiveUp(b, 1)),
        (300, Due::Forget(a, DepositId([7; 32]))),
        (u64::MAX, Due::Deadline(a)),
    ];
    let r = store.read()?;
    assert_eq!(r.due(u64::MAX, usize::MAX)?, expected);
    assert_eq!(r.due(100, usize::MAX)?, expected[..6]);
    assert_eq!(r.due(100, 3)?, expected[..3]);
    assert_eq!(r.due(98, 10)?, []);
    assert_eq!(r.due(1000, 0)?, []);
    assert_eq!(r.next_due()?, Some(99));
    drop(r);
    write(store, |t| {
        t.unschedule(99, &Due::Forget(b, DepositId([0; 32])))?;
        t.unschedule(100, &Due::OrphanExpiry(a))?;
        // Absent entries are a no-op.
        t.unschedule(100, &Due::Deadline(a))
    })?;
    let r = store.read()?;
    assert_eq!(r.next_due()?, Some(100));
    let left: Vec<_> = expected
        .iter()
        .filter(|(at, d)| *at != 99 && *d != Due::OrphanExpiry(a))
        .copied()
        .collect();
    assert_eq!(r.due(u64::MAX, usize::MAX)?, left);
    Ok(())
}

fn declaration<S: Store>(store: &S) -> StoreResult<()> {
    assert_eq!(store.read()?.declaration()?, None);
    let first = DeclarationRecord {
        revision: 1,
        document: b"{\"revision\":\"1\"}".to_vec(),
    };
    let second = DeclarationRecord {
        revision: 2,
        document: b"{\"revision\":\"2\",\"x\":1}".to_vec(),
    };
    write(store, |t| t.put_declaration(&first))?;
    assert_eq!(store.read()?.declaration()?, Some(first));
    write(store, |t| t.put_declaration(&second))?;
    assert_eq!(store.read()?.declaration()?, Some(second));
    Ok(())
}

/// A transaction dropped without commit leaves nothing behind (and does
/// not consume sequence numbers).
fn abort_discards<S: Store>(store: &S) -> StoreResult<()> {
    let a = rkid(1);
    write(store, |t| {
        t.append_deposit(&a, &payload(1, 64), 1, 2).map(drop)
    })?;
    let before = dump(&store.read()?, &[a], &[])?;
    {
        let mut t = store.begin_write()?;
        t.append_deposit(&a, &payload(2, 3000), 1, 2)?;
        t.put_binding(&a, &live(1, 1))?;
        t.remove_deposit(&a, 1)?;
        t.schedule(5, &Due::Deadline(a))?;
        t.add_elastic_bytes(5)?;
    }
    assert_eq!(dump(&store.read()?, &[a], &[])?, before);
    let next = write(store, |t| t.append_deposit(&a, &payload(3, 10), 1, 2))?;
    assert_eq!(next.seq, 2);
    assert_eq!(
        store.read()?.deposit_bytes(&a, &next)?,
        payload(3, 10),
        "bytes appended after an aborted transaction"
    );
    Ok(())
}

/// A write transaction reads its own writes, bytes included.
fn reads_own_writes<S: Store>(store: &S) -> StoreResult<()> {
    let a = rkid(1);
    let mut t = store.begin_write()?;
    let d = t.append_deposit(&a, &payload(9, 777), 3, 4)?;
    assert_eq!(t.deposit_bytes(&a, &d)?, payload(9, 777));
    assert_eq!(t.deposit_by_id(&a, &d.id)?, Some(d));
    assert_eq!(t.deposits(&a, None, 10)?, [d]);
    assert_eq!(t.queue_bytes(&a)?, 777);
    assert_eq!(t.occupancy()?.deposits, 1);
    t.put_tombstone(&a, &tomb(2, 3))?;
    assert_eq!(t.oldest_tombstone()?, Some((a, tomb(2, 3))));
    // Not visible to a snapshot before commit.
    assert!(store.read()?.deposits(&a, None, 10)?.is_empty());
    store.commit(t)?;
    assert_eq!(store.read()?.deposits(&a, None, 10)?, [d]);
    Ok(())
}

/// A read snapshot keeps seeing (and reading the bytes of) deposits that
/// later commits removed — even when their segment has been drained.
fn snapshot_isolation<S: Store>(store: &S) -> StoreResult<()> {
    let a = rkid(1);
    let held = write(store, |t| {
        (0..8)
            .map(|i| t.append_deposit(&a, &payload(i, 1500), i, i))
            .collect::<StoreResult<Vec<_>>>()
    })?;
    let snapshot = store.read()?;
    for d in &held {
        write(store, |t| t.remove_deposit(&a, d.seq))?;
        // New traffic rotates segments in the redb store.
        write(store, |t| {
            let x = t.append_deposit(&a, &payload(100 + d.seq, 1500), 0, 0)?;
            t.remove_deposit(&a, x.seq).map(drop)
        })?;
    }
    assert!(store.read()?.deposits(&a, None, 100)?.is_empty());
    assert_eq!(snapshot.deposits(&a, None, 100)?, held);
    for (i, d) in held.iter().enumerate() {
        assert_eq!(snapshot.deposit_bytes(&a, d)?, payload(i as u64, 1500));
    }
    drop(snapshot);
    // The next write reclaims what the snapshot pinned.
    write(store, |t| t.add_elastic_bytes(0))?;
    Ok(())
}

fn deposit_bytes_of_unknown_deposit_is_an_error<S: Store>(store: &S) -> StoreResult<()> {
    let a = rkid(1);
    let d = write(store, |t| t.append_deposit(&a, b"abc", 0, 0))?;
    write(store, |t| t.remove_deposit(&a, d.seq))?;
    let result = store.read()?.deposit_bytes(&a, &d);
    assert!(
        matches!(result, Err(StoreError::Corrupt(_))),
        "expected Corrupt, got {result:?}"
    );
    Ok(())
}

fn challenges<S: Store>(store: &S) -> StoreResult<()> {
    let challenge = |n: u8, expires_at| Challenge {
        rkid: rkid(n),
        purpose: Purpose::Register,
        principal_challenge: [n; 32],
        address_challenge: Some([n ^ 0xff; 32]),
        expires_at,
    };
    store.issue_challenge(challenge(1, 100))?;
    store.issue_challenge(challenge(2, 200))?;
    store.issue_challenge(challenge(3, 300))?;
    assert_eq!(store.challenge_count(), 3);
    // Taken once, expired or not; never again.
    assert_eq!(store.take_challenge(&[1; 32])?, Some(challenge(1, 100)));
    assert_eq!(store.take_challenge(&[1; 32])?, None);
    assert_eq!(store.purge_challenges(200)?, 1);
    assert_eq!(store.take_challenge(&[2; 32])?, None);
    assert_eq!(store.challenge_count(), 1);
    assert_eq!(store.take_challenge(&[3; 32])?, Some(challenge(3, 300)));
    assert_eq!(store.challenge_count(), 0);
    Ok(())
}

/// Emits one `#[test]` per body for each store.
macro_rules! conformance {
    ($($body:ident),* $(,)?) => {
        mod mem {
            $(
                #[test]
                fn $body() -> rltp_storage::StoreResult<()> {
                    super::$body(&rltp_storage::mem::MemStore::new())
                }
            )*
        }
        mod redb_segments {
            $(
                #[test]
                fn $body() -> rltp_storage::StoreResult<()> {
                    let (_dir, mut store) = super::redb(super::small_segments());
                    super::$body(&store)?;
                    store.integrity_check().map(|r| assert!(r.damaged.is_empty() && r.quarantined.is_empty(), "{r:?}"))
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $body() -> rltp_storage::StoreResult<()> {
                    let (_cluster, store) = super::postgres();
                    super::$body(&store)?;
                    let report = store.integrity_check()?;
                    assert!(report.problems.is_empty(), "{report:?}");
                    Ok(())
                }
            )*
        }
        mod log_store {
            $(
                #[test]
                fn $body() -> rltp_storage::StoreResult<()> {
                    let (_dir, mut store) = super::log(super::small_log());
                    super::$body(&store)?;
                    store.integrity_check().map(|r| assert!(r.damaged.is_empty() && r.quarantined.is_empty(), "{r:?}"))
                }
            )*
        }
        mod redb_inline {
            $(
                #[test]
                fn $body() -> rltp_storage::StoreResult<()> {
                    let (_dir, mut store) = super::redb(super::inline());
                    super::$body(&store)?;
                    store.integrity_check().map(|r| assert!(r.damaged.is_empty() && r.quarantined.is_empty(), "{r:?}"))
                }
            )*
        }
    };
}

conformance!(
    bindings_and_tombstones,
    eviction_order,
    deposits_in_admission_order_with_paging,
    identity_index,
    occupancy_accounting,
    departures,
    due_index_ordering,
    declaration,
    abort_discards,
    reads_own_writes,
    snapshot_isolation,
    deposit_bytes_of_unknown_deposit_is_an_error,
    challenges,
);
