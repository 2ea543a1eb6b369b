//! Counts of the transitions the engine makes (§5a.8, §5a.9): wind-ups
//! begun, releases at the wind-up deadline, tombstone evictions, deposits
//! given up, concluded and quarantined. For metrics and the operator page: counts only,
//! never which `rkid` or principal.
//!
//! A transition is counted where it is realized (`record`), into a tally
//! local to the thread that runs it. Every state change runs on the
//! engine's group-commit writer thread, inside a batch; as the batch ends
//! the committer's stage hook takes the tally (`take`) and, once the batch
//! is durable, publishes it into the engine's [`EventCounters`]
//! (`EventCounters::add`); when it failed the tally is dropped. So a
//! counter never counts a transition that did not become durable, and a
//! caller answered after its batch sees its batch counted.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// One realized transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
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

/// Transitions of one batch, by kind.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally([u64; 6]);

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

thread_local! {
    /// Transitions realized by the batch running on this thread, not yet
    /// known durable.
    static PENDING: Cell<Tally> = const { Cell::new(Tally([0; 6])) };
}

/// Counts `event` for the batch running on this thread.
pub(crate) fn record(event: Event) {
    PENDING.with(|pending| {
        let mut tally = pending.get();
        tally.0[event.index()] += 1;
        pending.set(tally);
    });
}

/// Takes the tally of the batch that just ended on this thread (the
/// writer thread), leaving it empty for the next batch.
pub(crate) fn take() -> Tally {
    PENDING.with(|pending| pending.replace(Tally::default()))
}

/// Counters of durable transitions, monotonic since the engine started.
#[derive(Debug, Default)]
pub struct EventCounters([AtomicU64; 6]);

impl EventCounters {
    /// Publishes (when `committed`) or drops the tally of the batch that
    /// just ended on this thread (the writer thread).
    #[cfg(test)]
    pub(crate) fn settle(&self, committed: bool) {
        let tally = take();
        if committed {
            self.add(tally);
        }
    }

    /// Adds a batch's tally (taken with [`take`]) once it is durable.
    pub(crate) fn add(&self, tally: Tally) {
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
        record(Event::GiveUp);
        record(Event::GiveUp);
        record(Event::Release);
        counters.settle(false);
        assert_eq!(counters.snapshot(), EventSnapshot::default());
        record(Event::WindUp);
        record(Event::Concluded);
        record(Event::Eviction);
        counters.settle(true);
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
