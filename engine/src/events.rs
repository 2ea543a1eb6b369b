//! Counts of the transitions the engine makes (§5a.8, §5a.9): wind-ups
//! begun, releases at the wind-up deadline, tombstone evictions, deposits
//! given up, concluded and quarantined. For metrics and the operator page: counts only,
//! never which `rkid` or principal.
//!
//! Events are data: every operation that changes state takes the caller's
//! [`Tally`] and records each transition it realizes into it
//! ([`Tally::record`]), beside its verdict. The caller owns the tally of a
//! transaction: once the transaction is durable it adds the tally to its
//! [`EventCounters`] ([`EventCounters::add`]); when the transaction failed
//! (or is run again) it drops the tally. So a counter never counts a
//! transition that did not become durable, and a caller answered after its
//! transaction sees it counted.

use std::sync::atomic::{AtomicU64, Ordering};

/// One realized transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `live → closing` at the orphan horizon (§5a.9).
    WindUp,
    /// `closing → released` at the wind-up deadline (§5a.9).
    Release,
    /// `released → unbound` by eviction (§5a.3, `max-binding-tombstones`).
    Eviction,
    /// A deposit given up at its horizon or the wind-up deadline (§5a.8).
    GiveUp,
    /// A deposit concluded by its recipient (§5a.8).
    Concluded,
    /// A deposit whose stored bytes failed their check, quarantined and
    /// given up (also counted as a give-up).
    Quarantined,
}

/// Transitions realized by one transaction, not yet known durable, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "a tally is published once its transaction is durable"]
pub struct Tally([u64; 6]);

impl Tally {
    /// Counts `event`.
    pub fn record(&mut self, event: Event) {
        self.0[event.index()] += 1;
    }

    /// How many `event`s this tally holds.
    pub fn count(&self, event: Event) -> u64 {
        self.0[event.index()]
    }

    /// Adds `other` (another transaction's tally) to this one.
    pub fn merge(&mut self, other: Tally) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += theirs;
        }
    }
}

impl Event {
    fn index(self) -> usize {
        match self {
            Event::WindUp => 0,
            Event::Release => 1,
            Event::Eviction => 2,
            Event::GiveUp => 3,
            Event::Concluded => 4,
            Event::Quarantined => 5,
        }
    }
}

/// Counters of durable transitions, monotonic since the engine started.
#[derive(Debug, Default)]
pub struct EventCounters([AtomicU64; 6]);

impl EventCounters {
    /// Adds a transaction's tally once it is durable.
    pub fn add(&self, tally: Tally) {
        for (counter, n) in self.0.iter().zip(tally.0) {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The current values.
    pub fn snapshot(&self) -> EventSnapshot {
        let get = |e: Event| self.0[e.index()].load(Ordering::Relaxed);
        EventSnapshot {
            wind_ups: get(Event::WindUp),
            releases: get(Event::Release),
            evictions: get(Event::Eviction),
            given_up: get(Event::GiveUp),
            concluded: get(Event::Concluded),
            quarantined: get(Event::Quarantined),
        }
    }
}

/// A point-in-time copy of [`EventCounters`] (counts since start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventSnapshot {
    /// Bindings that began their wind-up (`live → closing`).
    pub wind_ups: u64,
    /// Bindings released at their wind-up deadline (`closing → released`).
    pub releases: u64,
    /// Tombstones evicted (`released → unbound`).
    pub evictions: u64,
    /// Deposits given up (own horizon or wind-up deadline).
    pub given_up: u64,
    /// Deposits concluded by their recipient.
    pub concluded: u64,
    /// Deposits whose stored bytes failed their check, quarantined and
    /// given up (each also counted in `given_up`).
    pub quarantined: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_committed_batches_count() {
        let counters = EventCounters::default();
        let mut failed = Tally::default();
        failed.record(Event::GiveUp);
        failed.record(Event::GiveUp);
        failed.record(Event::Release);
        assert_eq!(failed.count(Event::GiveUp), 2);
        drop(failed);
        assert_eq!(counters.snapshot(), EventSnapshot::default());
        let mut durable = Tally::default();
        durable.record(Event::WindUp);
        durable.record(Event::Concluded);
        let mut more = Tally::default();
        more.record(Event::Eviction);
        durable.merge(more);
        counters.add(durable);
        assert_eq!(
            counters.snapshot(),
            EventSnapshot {
                wind_ups: 1,
                releases: 0,
                evictions: 1,
                given_up: 0,
                concluded: 1,
                quarantined: 0,
            }
        );
    }
}
