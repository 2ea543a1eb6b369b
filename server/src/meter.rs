//! The serving carrier's admission meter (§5a.3 r2, §5a.5 s4): GCRA rate
//! limiters from `governor`, one per kind of [`MeterKey`], with the keys
//! the engine decides ([`rltp_engine::meter`]: per queue and globally,
//! never per sender, IP or connection, §5a.5).
//!
//! It lives in the shell because it reads a clock: governor's monotonic
//! nanosecond clock, which the engine's millisecond `now` could not
//! replace for budgets of tens of thousands of units per second. The
//! engine only sees the [`Meter`] trait.

use crate::config::{MeterConfig, RateConfig};
use rltp_engine::meter::{Meter, MeterKey, MeterQuotas, Rate};
use rltp_proofs::Ms;
use rltp_proofs::multikey::Rkid;
use std::sync::{PoisonError, RwLock};

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

type Direct = governor::DefaultDirectRateLimiter;
type Keyed = governor::DefaultKeyedRateLimiter<Rkid>;

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
    fn new(quotas: MeterQuotas) -> Limiters {
        Limiters {
            quotas,
            unknown_address: governor::RateLimiter::direct(quota(quotas.unknown_address)),
            held_binding: governor::RateLimiter::keyed(quota(quotas.held_binding)),
            held_collection: governor::RateLimiter::keyed(quota(quotas.queue.doubled())),
            queue: governor::RateLimiter::keyed(quota(quotas.queue)),
            shared_submission: governor::RateLimiter::direct(quota(quotas.shared_submission)),
        }
    }
}

impl GovernorMeter {
    /// A meter with `quotas`; the held-collection budget is
    /// `quotas.queue` [`Rate::doubled`].
    pub fn new(quotas: MeterQuotas) -> GovernorMeter {
        GovernorMeter {
            limiters: RwLock::new(Limiters::new(quotas)),
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
        let fresh = Limiters::new(quotas);
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
    /// Charges on the limiter's own monotonic clock (nanoseconds), not on
    /// `now`: see [`Meter`].
    fn check(&self, key: &MeterKey, _now: Ms) -> bool {
        let l = self.read();
        match key {
            MeterKey::UnknownAddress => l.unknown_address.check().is_ok(),
            MeterKey::HeldBinding(rkid) => l.held_binding.check_key(rkid).is_ok(),
            MeterKey::HeldCollection(rkid) => l.held_collection.check_key(rkid).is_ok(),
            MeterKey::Queue(rkid) => l.queue.check_key(rkid).is_ok(),
            MeterKey::SharedSubmission => l.shared_submission.check().is_ok(),
        }
    }

    fn retain_recent(&self) {
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
