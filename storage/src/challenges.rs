//! Live challenges held in memory (§5a.3): the embedded stores keep them
//! here, so a restart forgets every one of them — indistinguishable from
//! all of them expiring, and never a way to accept a consumed challenge
//! twice.

use crate::{Challenge, Ms};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

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

    /// Drops challenges that expired at or before `now`; returns how many.
    pub fn purge(&self, now: Ms) -> usize {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, c| c.expires_at > now);
        before - map.len()
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
