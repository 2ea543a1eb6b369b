//! Delivery §6.2 stage 9: the lock set and its protocol.
//!
//! The lock set is the document digest; for bundles additionally the
//! credential's bound challenge (the **record key**, shared with the
//! optical input of Encounter 5.8); for chunked star documents additionally
//! the assembly key. The rules, normatively: the full set is acquired
//! **atomically, as one acquisition** — never one key after the other; an
//! evaluation whose set overlaps a held set **holds nothing while waiting**;
//! and when the way is free it does not resume — it **re-enters at stage 4**.
//! [`LockTable::try_acquire`] is that one acquisition: all keys or none,
//! and a refusal leaves the caller holding nothing.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// One key of a lock set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockKey {
    /// The document digest.
    Digest(String),
    /// A bundle's bound challenge: the record key (§4.1, Encounter 5.8).
    /// The application's optical path takes the same key.
    RecordKey(String),
}

/// The held lock sets of one party (shared by every evaluation and by the
/// application's optical path).
#[derive(Debug, Default)]
pub struct LockTable {
    held: Mutex<BTreeSet<LockKey>>,
}

/// A held lock set; dropping it releases every key at once.
#[derive(Debug)]
pub struct LockGuard<'t> {
    table: &'t LockTable,
    keys: Vec<LockKey>,
}

impl LockTable {
    /// An empty table.
    pub fn new() -> LockTable {
        LockTable::default()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, BTreeSet<LockKey>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// §6.2 stage 9: takes every key of `set` in one acquisition, or none
    /// when any is held (`None`: the caller holds nothing and re-enters at
    /// stage 4 once the way is free).
    pub fn try_acquire(&self, set: Vec<LockKey>) -> Option<LockGuard<'_>> {
        let mut held = self.held();
        if set.iter().any(|key| held.contains(key)) {
            return None;
        }
        held.extend(set.iter().cloned());
        Some(LockGuard {
            table: self,
            keys: set,
        })
    }

    /// Whether any key of `set` is held now (for a shell deciding when to
    /// re-enter a waiting evaluation).
    pub fn is_busy(&self, set: &[LockKey]) -> bool {
        let held = self.held();
        set.iter().any(|key| held.contains(key))
    }
}

impl LockGuard<'_> {
    /// The keys held.
    pub fn keys(&self) -> &[LockKey] {
        &self.keys
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.table.held();
        for key in &self.keys {
            held.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_taken_whole_or_not_at_all_and_released_whole() {
        let table = LockTable::new();
        let d = LockKey::Digest("d".into());
        let c = LockKey::RecordKey("c".into());
        let first = table.try_acquire(vec![d.clone(), c.clone()]).unwrap();
        // Overlapping on one key: refused, and nothing of it is held.
        assert!(
            table
                .try_acquire(vec![LockKey::Digest("e".into()), c.clone()])
                .is_none()
        );
        assert!(!table.is_busy(&[LockKey::Digest("e".into())]));
        assert!(table.is_busy(std::slice::from_ref(&c)));
        drop(first);
        assert!(!table.is_busy(&[d.clone(), c.clone()]));
        assert!(table.try_acquire(vec![d, c]).is_some());
    }
}
