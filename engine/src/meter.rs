//! The carrier's own admission metering (§5a.3 r2, §5a.5 s4), keyed per
//! queue and globally — **never per sender, IP or connection** (§5a.5: "at
//! a metering scale of per submission or per queue — never per person").
//!
//! Which key a request is charged to is decided in one place
//! ([`MeterKey::for_request`], [`submission_keys`]) so that guarantees 4
//! and 5 hold by construction:
//!
//! - **Guarantee 4** (registration side, r2): a request naming an `rkid`
//!   the carrier holds a `live`/`closing` binding for is charged only to
//!   that binding's own keys; every request naming any other `rkid` is
//!   charged to the one shared [`MeterKey::UnknownAddress`] key.
//!   Unknown-address traffic therefore cannot drain anything a held
//!   binding is metered by; the binding's own traffic still can (DO-6).
//! - **A held binding's own traffic, by purpose** (`PROTOCOL.md` §9a,
//!   decided here): `register`/`rebind` challenges and proofs are charged
//!   to [`MeterKey::HeldBinding`] (the `held-binding` budget: succession
//!   changes, each costing a seal and two verifications); `collect` and
//!   `conclude` challenges and proofs to [`MeterKey::HeldCollection`],
//!   whose budget is **twice the queue's own admission budget**
//!   ([`Rate::doubled`] of `queue`): one challenge and one proof for every
//!   deposit the queue meter may admit, so a recipient that drains its
//!   queue — even one concluding each deposit alone — keeps pace with the
//!   queue filling at its full admission rate, and collecting can never
//!   starve a rebind (or the reverse).
//! - **Guarantee 5** (submission side, s4): a submission is charged to its
//!   queue's own key ([`MeterKey::Queue`]) always, and to the shared
//!   [`MeterKey::SharedSubmission`] key only when the queue's occupancy
//!   after the deposit is above `queue-floor` (`crossTrafficMeter`).
//!
//! Meters are in memory and never persisted; keyed state exists only for
//! keys that were charged (held bindings and held queues — an unknown
//! `rkid` never gets a key of its own), and [`Meter::retain_recent`] drops
//! state indistinguishable from fresh, so nothing per key leaks.

use rltp_proofs::Ms;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;

/// What a request is metered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeterKey {
    /// Registration-side requests (challenge, register, rebind, collect,
    /// conclude) naming an `rkid` with no held binding — "unknown-address
    /// traffic" (§4.4 guarantee 4). One shared key.
    UnknownAddress,
    /// `register`/`rebind` challenges and proofs naming this held
    /// (`live`/`closing`) binding: its own budget (§4.4 guarantee 4, DO-6).
    HeldBinding(Rkid),
    /// `collect`/`conclude` challenges and proofs naming this held
    /// binding: its own budget, twice the queue's (`PROTOCOL.md` §9a).
    HeldCollection(Rkid),
    /// Submissions to this queue: the queue's own budget (§5a.5 s4, DO-6).
    Queue(Rkid),
    /// Submissions whose queue is above `queue-floor` after the deposit:
    /// the honestly shared budget (§4.4 guarantee 5).
    SharedSubmission,
}

impl MeterKey {
    /// The key a registration-side request (a challenge, or a proof
    /// presented to register, collect or conclude) for `rkid` with
    /// `purpose` is charged to: if the carrier holds a binding for `rkid`
    /// at the decision instant, that binding's own key for the purpose
    /// ([`MeterKey::HeldBinding`] for `register`/`rebind`,
    /// [`MeterKey::HeldCollection`] for `collect`/`conclude`), else the
    /// shared [`MeterKey::UnknownAddress`] (§4.4 guarantee 4).
    pub fn for_request(rkid: Rkid, held: bool, purpose: Purpose) -> MeterKey {
        match (held, purpose.changes_succession()) {
            (false, _) => MeterKey::UnknownAddress,
            (true, true) => MeterKey::HeldBinding(rkid),
            (true, false) => MeterKey::HeldCollection(rkid),
        }
    }
}

/// The keys a submission to `rkid` is charged to, in order: the queue's
/// own key, then — only when `bytes_after` (the queue's occupancy after
/// the deposit, bytes) is above `queue_floor` (bytes) — the shared key
/// (§4.4 guarantee 5, `crossTrafficMeter`).
pub fn submission_keys(rkid: Rkid, bytes_after: u64, queue_floor: u64) -> Vec<MeterKey> {
    let mut keys = vec![MeterKey::Queue(rkid)];
    if bytes_after > queue_floor {
        keys.push(MeterKey::SharedSubmission);
    }
    keys
}

/// §5a.3 r2 / §5a.5 s4: an admission meter. `check` charges one unit to
/// `key` at the decision instant `now` and answers whether the request may
/// proceed (`false` is `refused(admission-resource)`, retriable).
/// Implementations must be cheap, non-blocking and must never panic.
///
/// The engine passes its decision instant and reads no clock; a meter
/// that refills by time takes its time from these instants alone (the
/// `now` of [`Meter::check`] and [`Meter::retain_recent`]), so one
/// injected clock drives the engine and its meter alike, and a test
/// moves both by moving that clock. The serving carrier's rate meter
/// (`rltp_server::meter`) refills on them; a deterministic meter under
/// test ([`BudgetMeter`]) does not refill.
pub trait Meter: Send + Sync + 'static {
    /// Charges one unit to `key` at `now` (ms); `true` if within budget.
    fn check(&self, key: &MeterKey, now: Ms) -> bool;
    /// Drops per-key state that is indistinguishable from fresh at `now`
    /// (ms; called by every sweep with its instant, so per-key state never
    /// leaks).
    fn retain_recent(&self, now: Ms) {
        let _ = now;
    }
    /// Keyed entries currently held (for the no-leak checks).
    fn keyed_entries(&self) -> usize {
        0
    }
}

/// §5a.5 s4: charges `keys` in order at `now`, stopping at the first
/// refusal; `true` if every key admitted the request.
pub fn charge_all(meter: &dyn Meter, keys: &[MeterKey], now: Ms) -> bool {
    keys.iter().all(|key| meter.check(key, now))
}

/// A rate: `burst` units at once, refilled at `per_second` units/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Sustained units per second (≥ 1).
    pub per_second: NonZeroU32,
    /// Largest burst, units (≥ 1).
    pub burst: NonZeroU32,
}

impl Rate {
    /// `per_second` units/s with a burst of `burst`; zeros are raised to 1.
    pub const fn new(per_second: u32, burst: u32) -> Rate {
        const fn at_least_one(n: u32) -> NonZeroU32 {
            match NonZeroU32::new(n) {
                Some(n) => n,
                None => NonZeroU32::MIN,
            }
        }
        Rate {
            per_second: at_least_one(per_second),
            burst: at_least_one(burst),
        }
    }

    /// Twice this rate and burst (saturating): the held-collection budget
    /// derived from the queue's (`PROTOCOL.md` §9a).
    pub fn doubled(self) -> Rate {
        const TWO: NonZeroU32 = NonZeroU32::MIN.saturating_add(1);
        Rate {
            per_second: self.per_second.saturating_mul(TWO),
            burst: self.burst.saturating_mul(TWO),
        }
    }
}

/// The private quotas of a rate meter (§4.4 guarantee 2: the carrier's own
/// budgets, never published), one [`Rate`] per kind of [`MeterKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterQuotas {
    /// [`MeterKey::UnknownAddress`]: all unknown-address registration-side
    /// traffic together.
    pub unknown_address: Rate,
    /// [`MeterKey::HeldBinding`]: `register`/`rebind` traffic per held
    /// binding.
    pub held_binding: Rate,
    /// [`MeterKey::Queue`]: submissions per queue. Also sets
    /// [`MeterKey::HeldCollection`]: twice this, per held binding.
    pub queue: Rate,
    /// [`MeterKey::SharedSubmission`]: above-floor submissions together.
    pub shared_submission: Rate,
}

/// A deterministic meter with explicit budgets, for tests and for
/// reproducing the vectors: each key has a remaining budget (unlimited
/// unless set) that every charge decrements; at zero, charges are refused.
/// It also counts every charge per key (`resourceCharged`).
#[derive(Debug, Default)]
pub struct BudgetMeter {
    state: Mutex<BudgetState>,
}

#[derive(Debug, Default)]
struct BudgetState {
    remaining: HashMap<MeterKey, u64>,
    charges: HashMap<MeterKey, u64>,
}

impl BudgetMeter {
    /// A meter with every budget unlimited.
    pub fn new() -> BudgetMeter {
        BudgetMeter::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the remaining budget of `key` to `units`.
    pub fn set_budget(&self, key: MeterKey, units: u64) {
        self.state().remaining.insert(key, units);
    }

    /// Makes the budget of `key` unlimited again.
    pub fn unlimit(&self, key: &MeterKey) {
        self.state().remaining.remove(key);
    }

    /// The remaining budget of `key` (`None` = unlimited).
    pub fn remaining(&self, key: &MeterKey) -> Option<u64> {
        self.state().remaining.get(key).copied()
    }

    /// How many charges `key` has received (admitted or refused).
    pub fn charges(&self, key: &MeterKey) -> u64 {
        self.state().charges.get(key).copied().unwrap_or(0)
    }
}

impl Meter for BudgetMeter {
    /// Budgets do not refill: `now` is not consulted.
    fn check(&self, key: &MeterKey, _now: Ms) -> bool {
        let mut state = self.state();
        *state.charges.entry(*key).or_insert(0) += 1;
        match state.remaining.get_mut(key) {
            None => true,
            Some(0) => false,
            Some(units) => {
                *units -= 1;
                true
            }
        }
    }

    fn keyed_entries(&self) -> usize {
        self.state()
            .remaining
            .keys()
            .filter(|k| {
                matches!(
                    k,
                    MeterKey::HeldBinding(_) | MeterKey::HeldCollection(_) | MeterKey::Queue(_)
                )
            })
            .count()
    }
}

/// A meter that admits everything (for benchmarks of the store path).
#[derive(Debug, Default, Clone, Copy)]
pub struct Unmetered;

impl Meter for Unmetered {
    fn check(&self, _key: &MeterKey, _now: Ms) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rkid(b: u8) -> Rkid {
        Rkid::from_bytes([b; 32])
    }

    #[test]
    fn held_and_unknown_keys_are_disjoint() {
        for purpose in [Purpose::Register, Purpose::Rebind] {
            assert_eq!(
                MeterKey::for_request(rkid(1), true, purpose),
                MeterKey::HeldBinding(rkid(1))
            );
        }
        for purpose in [Purpose::Collect, Purpose::Conclude] {
            assert_eq!(
                MeterKey::for_request(rkid(1), true, purpose),
                MeterKey::HeldCollection(rkid(1))
            );
        }
        for purpose in [
            Purpose::Register,
            Purpose::Rebind,
            Purpose::Collect,
            Purpose::Conclude,
        ] {
            assert_eq!(
                MeterKey::for_request(rkid(1), false, purpose),
                MeterKey::UnknownAddress
            );
        }
    }

    #[test]
    fn shared_key_only_above_the_floor() {
        assert_eq!(
            submission_keys(rkid(1), 100, 100),
            [MeterKey::Queue(rkid(1))]
        );
        assert_eq!(
            submission_keys(rkid(1), 101, 100),
            [MeterKey::Queue(rkid(1)), MeterKey::SharedSubmission]
        );
    }

    #[test]
    fn budget_meter_drains_and_counts() {
        let meter = BudgetMeter::new();
        meter.set_budget(MeterKey::UnknownAddress, 1);
        assert!(meter.check(&MeterKey::UnknownAddress, 0));
        assert!(!meter.check(&MeterKey::UnknownAddress, 0));
        assert!(meter.check(&MeterKey::HeldBinding(rkid(2)), 0));
        assert_eq!(meter.charges(&MeterKey::UnknownAddress), 2);
    }
}
