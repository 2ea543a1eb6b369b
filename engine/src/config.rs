//! What the engine is configured with: the seven published constants as
//! plain numbers ([`EngineConstants`], §4.4 guarantee 1) and the carrier's
//! private limits ([`EngineConfig`], §4.4 guarantee 2 — never published,
//! reaching the port line only as retriable refusals).
//!
//! The engine is configured separately from declaration validation:
//! [`EngineConstants`] accepts values outside the §11 domains, as the
//! shipped vectors use them (e.g. `max-queue-bytes` 131 072 in
//! `queueFloorAccounting`). A running carrier builds them with
//! `EngineConstants::from(&CarrierConstants)` from the declaration it
//! publishes, so it never enforces a value other than the published one.

use rltp_proofs::Ms;
use rltp_proofs::constants::CarrierConstants;

/// The seven constants a carrier publishes (§4.4 guarantee 1), as the
/// engine reads them for every decision. Durations are milliseconds,
/// sizes are bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConstants {
    /// `orphan-horizon` (§5a.9), ms: a live binding with no registration
    /// or collection for this long begins its wind-up.
    pub orphan_horizon_ms: Ms,
    /// `give-up-horizon` (§5a.8, §5a.9), ms: how long a deposit lives, and
    /// the length of a wind-up (deadline = closing start + this).
    pub give_up_horizon_ms: Ms,
    /// `challenge-lifetime` (§5a.3), ms: how long an issued challenge is
    /// good for.
    pub challenge_lifetime_ms: Ms,
    /// `queue-floor` (§4.4 guarantee 5), bytes: below it after admission a
    /// queue is beyond the reach of every other queue.
    pub queue_floor: u64,
    /// `max-queue-bytes` (§4.4 guarantee 5, §5a.5 s5), bytes: the queue's
    /// own bound.
    pub max_queue_bytes: u64,
    /// `max-binding-tombstones` (§5a.3), a count: tombstones retained
    /// before the longest-released is evicted.
    pub max_binding_tombstones: u64,
    /// `status-horizon` (§4.4), ms: carried for the adapter's status
    /// duty; the engine answers every status synchronously, well within it.
    pub status_horizon_ms: Ms,
}

impl From<&CarrierConstants> for EngineConstants {
    /// The engine's view of a validated declaration (§4.4, §11): the same
    /// values, so the carrier enforces exactly what it published.
    fn from(c: &CarrierConstants) -> EngineConstants {
        EngineConstants {
            orphan_horizon_ms: c.orphan_horizon_ms(),
            give_up_horizon_ms: c.give_up_horizon_ms(),
            challenge_lifetime_ms: c.challenge_lifetime_ms(),
            queue_floor: c.queue_floor_bytes(),
            max_queue_bytes: c.max_queue_bytes(),
            max_binding_tombstones: c.max_binding_tombstones(),
            status_horizon_ms: c.status_horizon_ms(),
        }
    }
}

/// The carrier's private limits (§4.4 guarantee 2: "every other limit a
/// carrier keeps is unpublished by design"). They surface only as
/// `registration-refused(capacity)` and `refused(capacity)`, both
/// retriable. See [`crate::capacity`] for how they are applied
/// under guarantees 4 and 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Global byte budget, bytes: every held binding reserves
    /// `queue-floor`, and bytes above a queue's floor are shared elastic
    /// room out of the rest.
    pub capacity_bytes: u64,
    /// Most held bindings (live + closing), a count.
    pub max_bindings: u64,
    /// Most deposits one `collect` returns, a count (a page; the caller
    /// pages on with the last `seq`).
    pub max_collect: usize,
}

impl EngineConfig {
    /// A configuration with `capacity_bytes` bytes and `max_bindings`
    /// bindings and the default collect page size
    /// ([`EngineConfig::DEFAULT_MAX_COLLECT`]).
    pub fn new(capacity_bytes: u64, max_bindings: u64) -> EngineConfig {
        EngineConfig {
            capacity_bytes,
            max_bindings,
            max_collect: EngineConfig::DEFAULT_MAX_COLLECT,
        }
    }

    /// The default collect page, a count: 256 deposits, a quarter of the
    /// wire's `limit` ceiling (`rltp_wire::MAX_COLLECT_LIMIT`, 1 024), so a
    /// page of maximal envelopes (about 88 KiB each, §5) stays near 22 MiB;
    /// it equals `rltp_wire::MAX_CONCLUDE_IDS`, so one conclude settles one
    /// page.
    pub const DEFAULT_MAX_COLLECT: usize = rltp_wire::MAX_CONCLUDE_IDS;

    /// The same configuration with a different collect page size (≥ 1).
    pub fn with_max_collect(mut self, max_collect: usize) -> EngineConfig {
        self.max_collect = max_collect.max(1);
        self
    }
}

/// The private limits that may change at run time (an operator resizing
/// the carrier), read by r4 and s6 at each decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// See [`EngineConfig::capacity_bytes`], bytes.
    pub capacity_bytes: u64,
    /// See [`EngineConfig::max_bindings`], a count.
    pub max_bindings: u64,
}
