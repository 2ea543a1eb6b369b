//! The sharded hash tables over slab slots (by rkid, by `(queue, id)`),
//! and the identity hash a load builds on a helper thread.

use super::*;

/// An identity hash built apart ([`Index::identity_builder`]).
pub(crate) struct IdentityBuilder {
    pub(super) table: Table,
    /// Every slot's hash, for growing the table.
    pub(super) hashes: Vec<u64>,
}

impl IdentityBuilder {
    pub(crate) fn add(&mut self, work: &[(u64, u32)]) {
        for &(hash, slot) in work {
            let at = slot as usize;
            if self.hashes.len() <= at {
                self.hashes.resize(at + 1, 0);
            }
            self.hashes[at] = hash;
            let hashes = &self.hashes;
            self.table.insert(hash, slot, |&s| hashes[s as usize]);
        }
    }
}

/// Hash indexes are split in shards, so that growing one rehashes a
/// 64th of its entries (a pause of well under a millisecond at 10⁶).
pub(super) const SHARDS: usize = 64;

#[derive(Debug)]
pub(super) struct Table {
    pub(super) shards: Vec<HashTable<u32>>,
}

pub(super) fn shard(hash: u64) -> usize {
    // Neither the low bits (the bucket) nor the top 7 (hashbrown's tag).
    (hash >> 40) as usize % SHARDS
}

impl Table {
    pub(super) fn new() -> Table {
        Table {
            shards: (0..SHARDS).map(|_| HashTable::new()).collect(),
        }
    }
    pub(super) fn find(&self, hash: u64, eq: impl FnMut(&u32) -> bool) -> Option<u32> {
        self.shards[shard(hash)].find(hash, eq).copied()
    }
    pub(super) fn insert(&mut self, hash: u64, slot: u32, rehash: impl Fn(&u32) -> u64) {
        self.shards[shard(hash)].insert_unique(hash, slot, rehash);
    }
    pub(super) fn remove(&mut self, hash: u64, slot: u32) {
        if let Ok(entry) = self.shards[shard(hash)].find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
    }
    pub(super) fn reserve(&mut self, total: usize, rehash: impl Fn(&u32) -> u64) {
        for table in &mut self.shards {
            table.reserve(total / SHARDS + 1, &rehash);
        }
    }
    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }
    pub(super) fn heap_bytes(&self) -> usize {
        self.shards.iter().map(|t| t.capacity() * 5).sum()
    }
}
