//! Capacity: the queue's own bound (§5a.5 s5), global occupancy (s6) and
//! registration capacity (§5a.3 r4), under guarantees 4 and 5 (§4.4) and
//! the return priority of §5a.9. One home for every byte-budget rule.
//!
//! ## The model (private, §4.4 guarantee 2)
//! Every held binding (`live` or `closing`) **reserves `queue-floor`
//! bytes** of the private `capacity_bytes`. Bytes a queue holds above its
//! floor are **elastic**: taken from the shared rest. The carrier's usage
//! is therefore
//!
//! ```text
//! usage = bindings × queue-floor + elastic,   elastic = Σ max(0, queue_bytes − queue-floor)
//! ```
//!
//! (`elastic` is maintained by the engine in the store, see
//! [`elastic_delta`]). A closing queue counts exactly like a live one: its
//! bytes are used and it holds its floor (§5a.9, `queueFloorAccounting`
//! "a closing queue … contributes used").
//!
//! - **s5**: `queue_bytes + len > max-queue-bytes` → `refused(queue-saturated)`.
//! - **s6**: only when `queue_bytes + len > queue-floor` (guarantee 5:
//!   growth within the floor is never refused for anything global, since
//!   the floor is already reserved): `usage + Δelastic > capacity_bytes` →
//!   `refused(capacity)`.
//! - **r4, an arrival** (the `rkid` is `unbound` or `released`, so the
//!   registration would create a binding): refused when
//!   `(bindings + 1) × floor + elastic > capacity_bytes` or
//!   `bindings + 1 > max_bindings`.
//! - **r4, a return** (the `rkid` is held `live`/`closing`): it needs no
//!   new room, so it is refused only when the carrier is **already over**
//!   its limits (`usage > capacity_bytes` or `bindings > max_bindings`).
//!   That state can never be produced by arrivals (each is admitted only
//!   within the limits), so unknown-address traffic cannot cause it
//!   (guarantee 4); it arises only when the operator lowers a private
//!   limit below the held state (`carrierEntryLossRecovery.perHeldState`,
//!   "atCapacity"). Whenever a return is refused every arrival is refused
//!   too, so a return outranks an arrival (§5a.9).

use crate::config::Limits;
use rltp_store::{Escrow, Need, Occupancy};

/// §4.4 guarantee 5: a queue's elastic bytes, `max(0, queue_bytes −
/// floor)` (bytes).
pub fn excess(queue_bytes: u64, floor: u64) -> u64 {
    queue_bytes.saturating_sub(floor)
}

/// §4.4 guarantee 5: the change of the global elastic bytes when a queue
/// goes from `before` to `after` bytes under `floor` (all bytes); signed,
/// saturating.
pub fn elastic_delta(before: u64, after: u64, floor: u64) -> i64 {
    let (b, a) = (excess(before, floor), excess(after, floor));
    if a >= b {
        i64::try_from(a - b).unwrap_or(i64::MAX)
    } else {
        i64::try_from(b - a).map_or(i64::MIN, |d| -d)
    }
}

/// The change of the global elastic bytes of a queue holding
/// `queue_bytes` bytes when the floor moves from `old_floor` to
/// `new_floor` (a declaration revision); signed.
pub fn floor_change_delta(queue_bytes: u64, old_floor: u64, new_floor: u64) -> i64 {
    let delta =
        i128::from(excess(queue_bytes, new_floor)) - i128::from(excess(queue_bytes, old_floor));
    i64::try_from(delta).unwrap_or(if delta < 0 { i64::MIN } else { i64::MAX })
}

/// §4.4 guarantees 2 and 5: the carrier's usage, bytes: `bindings × floor
/// + elastic` (saturating).
pub fn usage(occupancy: &Occupancy, floor: u64) -> u64 {
    occupancy
        .bindings
        .saturating_mul(floor)
        .saturating_add(occupancy.elastic_bytes)
}

/// §5a.5: the answer of the two occupancy checks of a submission, in
/// s-order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Both bounds hold.
    Fits,
    /// s5: over `max-queue-bytes`.
    QueueSaturated,
    /// s6: over the global budget (only above the floor).
    Capacity,
}

/// §5a.5 s5: whether a deposit of `len` bytes to a queue holding
/// `queue_bytes` bytes takes it over `max_queue_bytes` (all bytes).
pub fn queue_saturated(queue_bytes: u64, len: u64, max_queue_bytes: u64) -> bool {
    queue_bytes.saturating_add(len) > max_queue_bytes
}

/// §5a.5 s6: whether a deposit of `len` bytes to a queue holding
/// `queue_bytes` bytes is refused for global occupancy, judged on the
/// occupancy **after** the deposit (all sizes bytes; `limits` private,
/// §4.4 guarantee 2). Never within the floor (guarantee 5: the floor is
/// reserved, nothing global applies).
pub fn global_refused(
    occupancy: &Occupancy,
    queue_bytes: u64,
    len: u64,
    floor: u64,
    limits: Limits,
) -> bool {
    let Some(growth) = growth_above_floor(queue_bytes, len, floor) else {
        return false;
    };
    usage(occupancy, floor).saturating_add(growth) > limits.capacity_bytes
}

/// §4.4 guarantee 5: the growth of the carrier's elastic bytes when a
/// deposit of `len` bytes joins a queue holding `queue_bytes` bytes under
/// `floor` (bytes); `None` when the queue stays within its floor, where
/// nothing global is consulted (the one home of that rule for s6).
pub fn growth_above_floor(queue_bytes: u64, len: u64, floor: u64) -> Option<u64> {
    let after = queue_bytes.saturating_add(len);
    (after > floor).then(|| excess(after, floor).saturating_sub(excess(queue_bytes, floor)))
}

/// §5a.3 r4: what an arrival needs from an escrowed budget: its floor's
/// bytes and one binding slot.
pub fn arrival_need(floor: u64) -> Need {
    Need {
        bytes: floor,
        slots: 1,
    }
}

/// §5a.5 s6 under escrowed budgets (`PROTOCOL.md` §13): refused when the
/// deposit's `growth` above its floor is more than the transaction may
/// spend. Within the floor (`growth` 0) never.
pub fn escrow_refuses_growth(escrow: &Escrow, growth: u64) -> bool {
    growth > escrow.bytes
}

/// §5a.3 r4 for an arrival under escrowed budgets (`PROTOCOL.md` §13):
/// refused unless the transaction may spend a floor's bytes and a
/// binding slot.
pub fn escrow_refuses_arrival(escrow: &Escrow, floor: u64) -> bool {
    floor > escrow.bytes || escrow.slots == 0
}

/// §5a.5 s5 then s6 for a deposit of `len` bytes to a queue holding
/// `queue_bytes` bytes ([`queue_saturated`], then [`global_refused`]).
/// Never fails.
pub fn submission_room(
    occupancy: &Occupancy,
    queue_bytes: u64,
    len: u64,
    floor: u64,
    max_queue_bytes: u64,
    limits: Limits,
) -> Room {
    if queue_saturated(queue_bytes, len, max_queue_bytes) {
        Room::QueueSaturated
    } else if global_refused(occupancy, queue_bytes, len, floor, limits) {
        Room::Capacity
    } else {
        Room::Fits
    }
}

/// §5a.3 r4: whether a registration is refused
/// `registration-refused(capacity)`. `returning` is true when the `rkid` is
/// held `live`/`closing` (§4.4 guarantee 4, §5a.9 "a return outranks an
/// arrival"; see the module doc for why a return is refused only over the
/// limits). `floor` is bytes. Never fails.
pub fn registration_refused(
    occupancy: &Occupancy,
    floor: u64,
    limits: Limits,
    returning: bool,
) -> bool {
    let used = usage(occupancy, floor);
    if returning {
        used > limits.capacity_bytes || occupancy.bindings > limits.max_bindings
    } else {
        used.saturating_add(floor) > limits.capacity_bytes
            || occupancy.bindings.saturating_add(1) > limits.max_bindings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(bindings: u64, elastic_bytes: u64) -> Occupancy {
        Occupancy {
            bindings,
            elastic_bytes,
            ..Occupancy::default()
        }
    }

    const LIMITS: Limits = Limits {
        capacity_bytes: 300,
        max_bindings: 10,
    };

    #[test]
    fn elastic_moves_only_above_the_floor() {
        assert_eq!(elastic_delta(50, 90, 100), 0);
        assert_eq!(elastic_delta(90, 130, 100), 30);
        assert_eq!(elastic_delta(130, 20, 100), -30);
    }

    #[test]
    fn within_the_floor_nothing_global_applies() {
        // 3 bindings × 100 = 300 = capacity: the carrier is full, yet a
        // queue growing to its floor is admitted.
        assert_eq!(
            submission_room(&occ(3, 0), 40, 60, 100, 200, LIMITS),
            Room::Fits
        );
        assert_eq!(
            submission_room(&occ(3, 0), 40, 61, 100, 200, LIMITS),
            Room::Capacity
        );
        assert_eq!(
            submission_room(&occ(3, 0), 40, 161, 100, 200, LIMITS),
            Room::QueueSaturated
        );
    }

    #[test]
    fn a_return_outranks_an_arrival() {
        let full = occ(3, 0);
        assert!(registration_refused(&full, 100, LIMITS, false));
        assert!(!registration_refused(&full, 100, LIMITS, true));
        let over = occ(3, 1);
        assert!(registration_refused(&over, 100, LIMITS, true));
        assert!(!registration_refused(&occ(2, 0), 100, LIMITS, false));
    }
}
