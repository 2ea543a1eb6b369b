//! Live challenges held in memory (§5a.3): every backend keeps them here
//! (its [`crate::Store::challenges`]), so a restart forgets every one of
//! them — indistinguishable from all of them expiring, and never a way to
//! accept a consumed challenge twice.
//!
//! The table is keyed by what strangers ask for, so its memory follows
//! what is live: every purge gives back the capacity a flood left
//! ([`release_capacity`]), so the carrier's memory returns to its baseline
//! once a flood's challenges have expired (issue 13: a flood of 10⁶
//! challenges kept 300 MiB resident after every one had expired).

use crate::Ms;
use rltp_proofs::multikey::Rkid;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Below this many slots a table keeps its allocation (not worth giving back).
const KEEP_SLOTS: usize = 1024;

/// Gives back the capacity of a map keyed by untrusted input once it holds
/// less than a quarter of it: shrinks to twice what it holds (so that
/// ordinary churn does not reallocate at every call), never below
/// `KEEP_SLOTS`.
pub fn release_capacity<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > KEEP_SLOTS && map.len() < map.capacity() / 4 {
        map.shrink_to((map.len() * 2).max(KEEP_SLOTS));
    }
}

/// A live challenge (§5a.3): 32 random bytes bound to an `rkid` and a
/// purpose, valid until `expires_at`. For `register`/`rebind` it also holds
/// the address challenge that was sealed to the `rkid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Challenge {
    /// The queue the challenge was issued for.
    pub rkid: Rkid,
    /// The purpose it was issued for.
    pub purpose: rltp_proofs::proof::Purpose,
    /// The principal challenge (the lookup key).
    pub principal_challenge: [u8; 32],
    /// The address challenge sealed to `rkid` (register/rebind only).
    pub address_challenge: Option<[u8; 32]>,
    /// Expiry instant: issue time + `challenge-lifetime` (ms).
    pub expires_at: Ms,
}

/// Live challenges keyed by their principal challenge.
#[derive(Debug, Default)]
pub struct ChallengeTable(Mutex<HashMap<[u8; 32], Challenge>>);

impl ChallengeTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 32], Challenge>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a live challenge.
    pub fn issue(&self, challenge: Challenge) {
        self.lock().insert(challenge.principal_challenge, challenge);
    }

    /// Removes and returns the challenge (consumption, before any check).
    pub fn take(&self, principal_challenge: &[u8; 32]) -> Option<Challenge> {
        self.lock().remove(principal_challenge)
    }

    /// Drops challenges that expired at or before `now`, then gives back
    /// capacity the live ones no longer need; returns how many expired.
    pub fn purge(&self, now: Ms) -> usize {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, c| c.expires_at > now);
        release_capacity(&mut map);
        before - map.len()
    }

    /// Slots allocated (for the no-leak checks).
    pub fn capacity(&self) -> usize {
        self.lock().capacity()
    }

    /// How many are live.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is live.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}
