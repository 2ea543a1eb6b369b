//! Group commit over a real store: concurrent producers share batches (fewer
//! commits than operations), and every reply comes after the commit of its
//! batch returned. Run over `MemStore` and `RedbStore`.

mod common;

use common::*;
use rltp_storage::committer::{Committer, DEFAULT_MAX_BATCH};
use rltp_storage::mem::MemStore;
use rltp_storage::{Challenge, Ms, ReadTxn, Store, StoreResult, WriteTxn};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A store that counts the commits that have returned.
struct Counting<S> {
    inner: S,
    commits: AtomicU64,
}

impl<S: Store> Store for Counting<S> {
    type Read<'a> = S::Read<'a>;
    type Write<'a> = S::Write<'a>;
    fn read(&self) -> StoreResult<S::Read<'_>> {
        self.inner.read()
    }
    fn begin_write(&self) -> StoreResult<S::Write<'_>> {
        self.inner.begin_write()
    }
    fn commit(&self, txn: S::Write<'_>) -> StoreResult<()> {
        self.inner.commit(txn)?;
        self.commits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn issue_challenge(&self, challenge: Challenge) -> StoreResult<()> {
        self.inner.issue_challenge(challenge)
    }
    fn take_challenge(&self, key: &[u8; 32]) -> StoreResult<Option<Challenge>> {
        self.inner.take_challenge(key)
    }
    fn purge_challenges(&self, now: Ms) -> StoreResult<usize> {
        self.inner.purge_challenges(now)
    }
    fn challenge_count(&self) -> usize {
        self.inner.challenge_count()
    }
}

const THREADS: u64 = 16;
const PER_THREAD: u64 = 40;

fn concurrent_appends<S: Store>(inner: S) -> StoreResult<()> {
    let store = Arc::new(Counting {
        inner,
        commits: AtomicU64::new(0),
    });
    let committer = Committer::start(
        Arc::clone(&store),
        Arc::new(|| 1_000),
        Arc::new(|_: &mut dyn WriteTxn, _| Ok(())),
        DEFAULT_MAX_BATCH,
    )?;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let committer = committer.clone();
            let store = Arc::clone(&store);
            std::thread::spawn(move || -> StoreResult<()> {
                let queue = rkid(t as u8);
                for i in 0..PER_THREAD {
                    let bytes = payload(t * 1000 + i, 50 + i as usize);
                    let counter = Arc::clone(&store);
                    let (deposit, commits_seen) = committer
                        .execute(move |txn, now| {
                            let seen = counter.commits.load(Ordering::SeqCst);
                            Ok((txn.append_deposit(&queue, &bytes, now, now + 1)?, seen))
                        })
                        .map_err(|e| rltp_storage::StoreError::Engine(e.to_string()))?;
                    // The commit of this operation's batch has returned…
                    assert!(store.commits.load(Ordering::SeqCst) > commits_seen);
                    // …so its effect is visible to a fresh snapshot.
                    assert_eq!(
                        store.read()?.deposit_by_id(&queue, &deposit.id)?,
                        Some(deposit)
                    );
                    assert_eq!(deposit.seq, i + 1);
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("producer thread")?;
    }
    let stats = committer.stats();
    let batches = stats.batches.load(Ordering::Relaxed);
    let operations = stats.operations.load(Ordering::Relaxed);
    assert_eq!(operations, THREADS * PER_THREAD);
    assert_eq!(stats.failed_batches.load(Ordering::Relaxed), 0);
    assert!(
        batches < operations,
        "{batches} batches for {operations} operations: no grouping"
    );
    assert_eq!(store.commits.load(Ordering::SeqCst), batches);
    assert_eq!(store.read()?.occupancy()?.deposits, THREADS * PER_THREAD);
    println!("{operations} operations in {batches} batches");
    Ok(())
}

#[test]
fn batches_group_concurrent_operations_mem() -> StoreResult<()> {
    concurrent_appends(MemStore::new())
}

#[test]
fn batches_group_concurrent_operations_redb() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    concurrent_appends(rltp_storage::redb_store::RedbStore::open_with(
        dir.path(),
        small_segments(),
    )?)?;
    let mut store = rltp_storage::redb_store::RedbStore::open(dir.path())?;
    let report = store.integrity_check()?;
    assert_eq!(report.deposits, THREADS * PER_THREAD);
    Ok(())
}
