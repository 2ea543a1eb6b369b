//! The serving carrier's admission meter (§5a.3 r2, §5a.5 s4): GCRA rate
//! limiters from `governor`, one per kind of [`MeterKey`], with the keys
//! the engine decides ([`rltp_engine::meter`]: per queue and globally,
//! never per sender, IP or connection, §5a.5).
//!
//! Its limiters read no clock of their own: their time is the engine's
//! decision instants ([`DecisionClock`]), the `now` the engine passes to
//! every charge and sweep, read once per decision from the carrier's
//! injected clock ([`crate::clock`]; a [`crate::clock::ManualClock`] in
//! tests). A budget therefore refills in whole milliseconds; its
//! long-run rate is exact wherever its burst is at least a millisecond's
//! refill (`burst ≥ per-second / 1 000`, true of every default in
//! [`crate::defaults::meters`]).

use crate::config::{MeterConfig, RateConfig};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed, keyed::DashMapStateStore};
use rltp_engine::meter::{Meter, MeterKey, MeterQuotas, Rate};
use rltp_proofs::Ms;
use rltp_proofs::multikey::Rkid;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// The quotas of `[limits.meters]`.
pub fn quotas(config: &MeterConfig) -> MeterQuotas {
    let rate = |r: RateConfig| Rate::new(r.per_second, r.burst);
    MeterQuotas {
        unknown_address: rate(config.unknown_address),
        held_binding: rate(config.held_binding),
        queue: rate(config.queue),
        shared_submission: rate(config.shared_submission),
    }
}

fn quota(rate: Rate) -> governor::Quota {
    governor::Quota::per_second(rate.per_second).allow_burst(rate.burst)
}

/// The limiters' time: the latest decision instant the meter was charged
/// or swept at (ms since the epoch, as governor's nanoseconds). Instants
/// only move it forward, so the limiters see a monotonic clock even when
/// concurrent decisions arrive out of order (a later one's charge may see
/// the earlier one's instant or the later: never a step back).
#[derive(Debug, Clone, Default)]
pub struct DecisionClock(Arc<AtomicU64>);

impl DecisionClock {
    /// Moves the clock to `now` (ms), unless it already reads later.
    fn observe(&self, now: Ms) {
        self.0.fetch_max(now, Ordering::AcqRel);
    }
}

impl governor::clock::Clock for DecisionClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.0.load(Ordering::Acquire).saturating_mul(1_000_000))
    }
}

type Direct = governor::RateLimiter<NotKeyed, InMemoryState, DecisionClock, NoOpMiddleware<Nanos>>;
type Keyed =
    governor::RateLimiter<Rkid, DashMapStateStore<Rkid>, DecisionClock, NoOpMiddleware<Nanos>>;

/// The limiters of one set of quotas.
struct Limiters {
    quotas: MeterQuotas,
    unknown_address: Direct,
    held_binding: Keyed,
    held_collection: Keyed,
    queue: Keyed,
    shared_submission: Direct,
}

/// The production meter: GCRA rate limiters from `governor`, two shared
/// ([`MeterKey::UnknownAddress`], [`MeterKey::SharedSubmission`]) and three
/// keyed by `rkid` ([`MeterKey::HeldBinding`], [`MeterKey::HeldCollection`],
/// [`MeterKey::Queue`]).
///
/// Its quotas can be replaced while it serves ([`GovernorMeter::set_quotas`],
/// SIGHUP): the limiters sit behind one read-write lock, read (never
/// written) by every charge, so a check sees either the old set or the
/// new one, never a mix.
pub struct GovernorMeter {
    clock: DecisionClock,
    limiters: RwLock<Limiters>,
}

impl std::fmt::Debug for GovernorMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = self.read();
        f.debug_struct("GovernorMeter")
            .field("held_binding_keys", &l.held_binding.len())
            .field("held_collection_keys", &l.held_collection.len())
            .field("queue_keys", &l.queue.len())
            .finish_non_exhaustive()
    }
}

impl Limiters {
    fn new(quotas: MeterQuotas, clock: &DecisionClock) -> Limiters {
        let direct = |rate| Direct::direct_with_clock(quota(rate), clock.clone());
        let keyed = |rate| Keyed::dashmap_with_clock(quota(rate), clock.clone());
        Limiters {
            quotas,
            unknown_address: direct(quotas.unknown_address),
            held_binding: keyed(quotas.held_binding),
            held_collection: keyed(quotas.queue.doubled()),
            queue: keyed(quotas.queue),
            shared_submission: direct(quotas.shared_submission),
        }
    }
}

impl GovernorMeter {
    /// A meter with `quotas`; the held-collection budget is
    /// `quotas.queue` [`Rate::doubled`].
    pub fn new(quotas: MeterQuotas) -> GovernorMeter {
        let clock = DecisionClock::default();
        GovernorMeter {
            limiters: RwLock::new(Limiters::new(quotas, &clock)),
            clock,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Limiters> {
        self.limiters.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The quotas in force.
    pub fn quotas(&self) -> MeterQuotas {
        self.read().quotas
    }

    /// Replaces the quotas (a reload of `[limits.meters]`). A budget whose
    /// quota changed starts afresh (full) under the new quota; the others
    /// keep their state.
    pub fn set_quotas(&self, quotas: MeterQuotas) {
        let mut l = self
            .limiters
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let fresh = Limiters::new(quotas, &self.clock);
        let old = l.quotas;
        if old.unknown_address != quotas.unknown_address {
            l.unknown_address = fresh.unknown_address;
        }
        if old.held_binding != quotas.held_binding {
            l.held_binding = fresh.held_binding;
        }
        if old.queue != quotas.queue {
            l.queue = fresh.queue;
            l.held_collection = fresh.held_collection;
        }
        if old.shared_submission != quotas.shared_submission {
            l.shared_submission = fresh.shared_submission;
        }
        l.quotas = quotas;
    }
}

impl Meter for GovernorMeter {
    /// Charges at the decision instant `now` ([`DecisionClock`]).
    fn check(&self, key: &MeterKey, now: Ms) -> bool {
        self.clock.observe(now);
        let l = self.read();
        match key {
            MeterKey::UnknownAddress => l.unknown_address.check().is_ok(),
            MeterKey::HeldBinding(rkid) => l.held_binding.check_key(rkid).is_ok(),
            MeterKey::HeldCollection(rkid) => l.held_collection.check_key(rkid).is_ok(),
            MeterKey::Queue(rkid) => l.queue.check_key(rkid).is_ok(),
            MeterKey::SharedSubmission => l.shared_submission.check().is_ok(),
        }
    }

    fn retain_recent(&self, now: Ms) {
        self.clock.observe(now);
        let l = self.read();
        l.held_binding.retain_recent();
        l.held_collection.retain_recent();
        l.queue.retain_recent();
        l.held_binding.shrink_to_fit();
        l.held_collection.shrink_to_fit();
        l.queue.shrink_to_fit();
    }

    fn keyed_entries(&self) -> usize {
        let l = self.read();
        l.held_binding.len() + l.held_collection.len() + l.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rkid(b: u8) -> Rkid {
        Rkid::from_bytes([b; 32])
    }

    /// `PROTOCOL.md` §9a: with the default budgets, a recipient may spend
    /// a challenge and a proof on every deposit its queue admits, at the
    /// queue's full rate and burst.
    #[test]
    fn a_held_binding_can_conclude_each_deposit_its_queue_admits() {
        let quotas = quotas(&MeterConfig::default());
        let meter = GovernorMeter::new(quotas);
        let own = MeterKey::HeldCollection(rkid(5));
        let queue = MeterKey::Queue(rkid(5));
        let burst = quotas.queue.burst.get();
        for n in 0..burst {
            assert!(meter.check(&queue, 0), "deposit {n}");
            assert!(meter.check(&own, 0), "challenge {n}");
            assert!(meter.check(&own, 0), "conclude {n}");
        }
        assert_eq!(quotas.queue.doubled(), Rate::new(4_000, 20_000));
        // Collecting does not spend what a rebind needs.
        assert!(meter.check(&MeterKey::HeldBinding(rkid(5)), 0));
        assert_eq!(
            Rate::new(u32::MAX, 3).doubled(),
            Rate::new(u32::MAX, 6),
            "saturating"
        );
    }

    #[test]
    fn governor_meter_refuses_past_the_burst_and_forgets_keys() {
        let meter = GovernorMeter::new(MeterQuotas {
            unknown_address: Rate::new(1, 2),
            held_binding: Rate::new(1, 1),
            queue: Rate::new(1, 1),
            shared_submission: Rate::new(1, 1),
        });
        assert!(meter.check(&MeterKey::UnknownAddress, 0));
        assert!(meter.check(&MeterKey::UnknownAddress, 0));
        assert!(!meter.check(&MeterKey::UnknownAddress, 0));
        // A drained unknown-address door leaves a held binding untouched.
        assert!(meter.check(&MeterKey::HeldBinding(rkid(3)), 0));
        assert!(!meter.check(&MeterKey::HeldBinding(rkid(3)), 0));
        assert!(meter.check(&MeterKey::HeldBinding(rkid(4)), 0));
        // Its collection budget is its own (twice the queue's burst of 1).
        assert!(meter.check(&MeterKey::HeldCollection(rkid(3)), 0));
        assert!(meter.check(&MeterKey::HeldCollection(rkid(3)), 0));
        assert!(!meter.check(&MeterKey::HeldCollection(rkid(3)), 0));
        assert_eq!(meter.keyed_entries(), 3);
    }

    /// A budget refills on the decision instants it is charged at, and an
    /// instant earlier than one already seen does not move it back.
    #[test]
    fn budgets_refill_on_the_engines_instants() {
        let meter = GovernorMeter::new(MeterQuotas {
            unknown_address: Rate::new(1_000, 1),
            held_binding: Rate::new(1, 1),
            queue: Rate::new(500, 2),
            shared_submission: Rate::new(1, 1),
        });
        let t0 = 1_800_000_000_000;
        assert!(meter.check(&MeterKey::UnknownAddress, t0));
        assert!(!meter.check(&MeterKey::UnknownAddress, t0));
        // 1 000/s: one unit a millisecond.
        assert!(meter.check(&MeterKey::UnknownAddress, t0 + 1));
        assert!(!meter.check(&MeterKey::UnknownAddress, t0 + 1));
        // A late decision at an earlier instant is charged at the latest.
        assert!(!meter.check(&MeterKey::UnknownAddress, t0));
        assert!(meter.check(&MeterKey::UnknownAddress, t0 + 2));
        // 500/s, burst 2 (the meter's time is now t0 + 2; charged at t1):
        // drained at t1, one unit back 2 ms later, and the key dropped
        // once its budget is full (6 ms after that charge, one period
        // past its theoretical arrival time).
        let t1 = t0 + 10;
        let queue = MeterKey::Queue(rkid(9));
        assert!(meter.check(&queue, t1));
        assert!(meter.check(&queue, t1));
        assert!(!meter.check(&queue, t1 + 1));
        assert!(meter.check(&queue, t1 + 2));
        meter.retain_recent(t1 + 7);
        assert_eq!(meter.keyed_entries(), 1);
        meter.retain_recent(t1 + 8);
        assert_eq!(meter.keyed_entries(), 0);
    }

    /// A reload replaces a changed budget (fresh, under its new quota) and
    /// leaves an unchanged one as it was.
    #[test]
    fn set_quotas_replaces_changed_budgets_and_keeps_the_others() {
        let one = MeterQuotas {
            unknown_address: Rate::new(1, 1),
            held_binding: Rate::new(1, 1),
            queue: Rate::new(1, 1),
            shared_submission: Rate::new(1, 1),
        };
        let meter = GovernorMeter::new(one);
        let queue = MeterKey::Queue(rkid(1));
        assert!(meter.check(&queue, 0));
        assert!(!meter.check(&queue, 0));
        assert!(meter.check(&MeterKey::UnknownAddress, 0));
        assert!(!meter.check(&MeterKey::UnknownAddress, 0));
        let raised = MeterQuotas {
            queue: Rate::new(1, 3),
            ..one
        };
        meter.set_quotas(raised);
        assert_eq!(meter.quotas(), raised);
        for n in 0..3 {
            assert!(meter.check(&queue, 0), "deposit {n} under the raised burst");
        }
        assert!(!meter.check(&queue, 0));
        // Unchanged: still drained.
        assert!(!meter.check(&MeterKey::UnknownAddress, 0));
    }
}
