//! The counters every backend keeps the same way: the occupancy counters
//! ([`Occupancy`], s5, s6, guarantee 5) and the seq floor ([`SeqFloor`],
//! `PROTOCOL.md` §7 "seq is never reused"). One home, so that the log
//! store, the legacy redb store, the PostgreSQL store and [`crate::mem`]
//! count alike.

use crate::{Occupancy, StoreError, StoreResult};
use std::sync::atomic::{AtomicU64, Ordering};

impl Occupancy {
    /// A deposit of `len` bytes was admitted (s5, s6).
    pub fn deposit_added(&mut self, len: u32) {
        self.total_bytes += u64::from(len);
        self.deposits += 1;
    }

    /// A held deposit of `len` bytes left (conclusion or give-up).
    pub fn deposit_removed(&mut self, len: u32) {
        self.total_bytes = self.total_bytes.saturating_sub(u64::from(len));
        self.deposits = self.deposits.saturating_sub(1);
    }

    /// A binding was installed where none was held.
    pub fn binding_added(&mut self) {
        self.bindings += 1;
    }

    /// A held binding was removed.
    pub fn binding_removed(&mut self) {
        self.bindings = self.bindings.saturating_sub(1);
    }

    /// A tombstone was installed where none was.
    pub fn tombstone_added(&mut self) {
        self.tombstones += 1;
    }

    /// A tombstone was removed (consumed or evicted).
    pub fn tombstone_removed(&mut self) {
        self.tombstones = self.tombstones.saturating_sub(1);
    }

    /// The engine's elastic occupancy moved by `delta` (guarantee 5,
    /// [`crate::WriteTxn::add_elastic_bytes`]); never below 0.
    pub fn add_elastic(&mut self, delta: i64) {
        self.elastic_bytes = self.elastic_bytes.saturating_add_signed(delta);
    }
}

/// A deposit's length as stored (`u32`): an envelope of 4 GiB or more is
/// refused ([`StoreError::Corrupt`]) before anything is written.
///
/// # Errors
/// [`StoreError::Corrupt`] for `bytes` of 4 GiB or more.
pub fn deposit_len(bytes: &[u8]) -> StoreResult<u32> {
    u32::try_from(bytes.len())
        .map_err(|_| StoreError::Corrupt(format!("deposit of {} bytes", bytes.len())))
}

/// The seq a queue's next deposit gets: one above both the queue's last
/// seq and the store's floor (`PROTOCOL.md` §7: a seq is never reused,
/// not even after a restore that lost the queue's last ones).
pub fn next_seq(last: u64, floor: u64) -> u64 {
    last.max(floor) + 1
}

/// A store's seq floor: every queue's next seq is above it
/// ([`next_seq`]). 0 unless a restore raised it (the restored copy does
/// not know the seqs handed out after its snapshot, and a client holding
/// `after = n` from those would never see new deposits numbered `≤ n`).
#[derive(Debug, Default)]
pub struct SeqFloor(AtomicU64);

impl SeqFloor {
    /// A floor at `floor` (as read from the store at open).
    pub fn new(floor: u64) -> SeqFloor {
        SeqFloor(AtomicU64::new(floor))
    }

    /// The floor now.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// What raising the floor to `floor` gives: never lower than now.
    /// Store it with [`SeqFloor::set`] once the raise is durable.
    pub fn raised(&self, floor: u64) -> u64 {
        floor.max(self.get())
    }

    /// Installs a durable floor (from [`SeqFloor::raised`]).
    pub fn set(&self, floor: u64) {
        self.0.store(floor, Ordering::SeqCst);
    }

    /// The seq after `last` in a queue of this store ([`next_seq`]).
    pub fn next_after(&self, last: u64) -> u64 {
        next_seq(last, self.get())
    }
}
