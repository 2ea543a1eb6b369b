//! The §5a.3 state of one `rkid` in the store, and how a next state the
//! table ([`crate::table`]) decided is realized there.
//!
//! The table decides **what** happens (outcome, next state); this module
//! only makes the store hold that next state ([`realize`]) — installing a
//! binding, beginning a wind-up, the one-transaction deadline release, or
//! an eviction. No rule of the table is restated here.

use crate::config::EngineConstants;
use crate::events::{Event, Tally};
use crate::queue;
use crate::table::{self, Guard, Input, State};
use rltp_proofs::multikey::Rkid;
use rltp_store::{Binding, Due, Ms, Phase, ReadTxn, StoreResult, Tombstone, WriteTxn};

/// What the store holds for one `rkid`: its table state and the record
/// behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// The table state.
    pub state: State,
    /// The binding, in `live`/`closing`.
    pub binding: Option<Binding>,
    /// The tombstone, in `released`.
    pub tombstone: Option<Tombstone>,
}

impl Held {
    /// The recorded generation and principal the registration guard
    /// compares against: `(g, P)` of a binding, `(t, none)` of a tombstone.
    pub fn record(&self) -> Option<(u64, Option<&[u8; 32]>)> {
        match (&self.binding, &self.tombstone) {
            (Some(b), _) => Some((b.generation, Some(&b.principal))),
            (None, Some(t)) => Some((t.generation, None)),
            (None, None) => None,
        }
    }

    /// The generation `refused(stale-generation)` carries: `g` or `t`.
    pub fn held_generation(&self) -> u64 {
        self.record().map_or(0, |(g, _)| g)
    }
}

/// The table state (§5a.3) of a stored record (no due-ness applied).
pub fn state_of(binding: Option<&Binding>, tombstone: Option<&Tombstone>) -> State {
    match (binding, tombstone) {
        (Some(b), _) => match b.phase {
            Phase::Live => State::Live,
            Phase::Closing { .. } => State::Closing,
        },
        (None, Some(_)) => State::Released,
        (None, None) => State::Unbound,
    }
}

/// Reads what the store holds for `rkid`.
pub(crate) fn held(txn: &dyn ReadTxn, rkid: &Rkid) -> StoreResult<Held> {
    let binding = txn.binding(rkid)?;
    let tombstone = txn.tombstone(rkid)?;
    Ok(Held {
        state: state_of(binding.as_ref(), tombstone.as_ref()),
        binding,
        tombstone,
    })
}

/// The orphan-expiry instant of a binding: `last_collection_at +
/// orphan-horizon` (§5a.9), ms.
pub(crate) fn orphan_instant(binding: &Binding, c: &EngineConstants) -> Ms {
    binding
        .last_collection_at
        .saturating_add(c.orphan_horizon_ms)
}

/// What a registration that the table accepted installs: `live(g′, P′)`
/// registered or collected at `now`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Install {
    /// `g′`.
    pub generation: u64,
    /// `P′`.
    pub principal: [u8; 32],
    /// The linearization instant (ms).
    pub now: Ms,
}

/// Makes the store hold `next` for `rkid`, coming from `held`:
///
/// - `→ live` (registered, rebound, registered(idempotent)): consumes a
///   tombstone, or voids a wind-up deadline (§5a.9 "the return ends the
///   wind-up", deposits keep their own give-up entries and so revert to
///   their own horizons), installs `live(g′, P′)` with
///   `last_collection_at = now` and schedules the orphan expiry;
/// - `live → closing` at instant `at` (wind-up begins): deadline
///   `at + give-up-horizon`, fixed;
/// - `closing → released` at the deadline `at`: gives up every held
///   deposit, releases queue and binding, writes tombstone `t := g`
///   (released at `at`) and evicts over the bound — one transaction;
/// - `released → unbound`: eviction.
///
/// Any other pair changes nothing.
#[allow(clippy::too_many_arguments)] // one argument per fact of the transition
pub(crate) fn realize(
    txn: &mut dyn WriteTxn,
    rkid: &Rkid,
    held: &Held,
    next: State,
    at: Ms,
    install: Option<Install>,
    c: &EngineConstants,
    events: &mut Tally,
) -> StoreResult<()> {
    match (held.state, next, held.binding, install) {
        (_, State::Live, _, Some(new)) => install_live(txn, rkid, held, new, c),
        (State::Live, State::Closing, Some(binding), _) => {
            events.record(Event::WindUp);
            let deadline = at.saturating_add(c.give_up_horizon_ms);
            txn.put_binding(
                rkid,
                &Binding {
                    phase: Phase::Closing { deadline },
                    ..binding
                },
            )?;
            txn.schedule(deadline, &Due::Deadline(*rkid))
        }
        (State::Closing, State::Released, Some(binding), _) => {
            events.record(Event::Release);
            queue::give_up_all(txn, rkid, at, c, events)?;
            txn.remove_binding(rkid)?;
            txn.add_reserved_bytes(-reserve(c.queue_floor))?;
            txn.put_tombstone(
                rkid,
                &Tombstone {
                    generation: binding.generation,
                    released_at: at,
                },
            )?;
            evict_over_bound(txn, c, events)
        }
        (State::Released, State::Unbound, _, _) => {
            events.record(Event::Eviction);
            txn.remove_tombstone(rkid).map(drop)
        }
        _ => Ok(()),
    }
}

fn install_live(
    txn: &mut dyn WriteTxn,
    rkid: &Rkid,
    held: &Held,
    new: Install,
    c: &EngineConstants,
) -> StoreResult<()> {
    if held.tombstone.is_some() {
        // Consumed: an rkid never holds both a binding and a tombstone.
        txn.remove_tombstone(rkid)?;
    }
    if let Some(old) = &held.binding {
        match old.phase {
            Phase::Live => txn.unschedule(orphan_instant(old, c), &Due::OrphanExpiry(*rkid))?,
            Phase::Closing { deadline } => txn.unschedule(deadline, &Due::Deadline(*rkid))?,
        }
    }
    let binding = Binding {
        phase: Phase::Live,
        generation: new.generation,
        principal: new.principal,
        last_collection_at: new.now,
    };
    txn.put_binding(rkid, &binding)?;
    if held.binding.is_none() {
        // An arrival: its floor is now held in reserve (guarantee 5).
        txn.add_reserved_bytes(reserve(c.queue_floor))?;
    }
    txn.schedule(orphan_instant(&binding, c), &Due::OrphanExpiry(*rkid))
}

/// A floor of `floor` bytes as a signed reserve change (saturating).
fn reserve(floor: u64) -> i64 {
    i64::try_from(floor).unwrap_or(i64::MAX)
}

/// A collection at `now` (§5a.9): `last_collection_at` moves, and a live
/// binding's orphan expiry moves with it. (A closing binding stays closing:
/// only a registration returns it, §5a.3.)
pub(crate) fn collected(
    txn: &mut dyn WriteTxn,
    rkid: &Rkid,
    binding: &Binding,
    now: Ms,
    c: &EngineConstants,
) -> StoreResult<()> {
    let moved = Binding {
        last_collection_at: now,
        ..*binding
    };
    if binding.phase == Phase::Live {
        txn.unschedule(orphan_instant(binding, c), &Due::OrphanExpiry(*rkid))?;
        txn.schedule(orphan_instant(&moved, c), &Due::OrphanExpiry(*rkid))?;
    }
    txn.put_binding(rkid, &moved)
}

/// Evicts tombstones while the store holds more than
/// `max-binding-tombstones`: the
/// longest-released first, ties by ascending `rkid` key bytes (the store's
/// [`ReadTxn::oldest_tombstone`] order, §5a.3), each through the table's
/// `released × eviction` cell.
pub(crate) fn evict_over_bound(
    txn: &mut dyn WriteTxn,
    c: &EngineConstants,
    events: &mut Tally,
) -> StoreResult<()> {
    while txn.occupancy()?.tombstones > c.max_binding_tombstones {
        let Some((rkid, _)) = txn.oldest_tombstone()? else {
            return Ok(());
        };
        let held = held(txn, &rkid)?;
        let (_, next) = table::transition(held.state, Input::Eviction, Guard::Any);
        if next != State::Unbound {
            return Err(rltp_store::StoreError::Corrupt(format!(
                "tombstoned rkid {rkid} also holds a binding"
            )));
        }
        realize(txn, &rkid, &held, next, 0, None, c, events)?;
    }
    Ok(())
}
