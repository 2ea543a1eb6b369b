//! Time (§5a.8, §5a.9): every transition at its **normative instant**,
//! even when noticed late.
//!
//! The due-time index holds one entry per pending horizon. [`apply_due`]
//! is the writer's batch prelude ([`crate::Engine::prelude`]: every
//! operation first applies what is due at its `now`) and the body of the
//! sweeper: it takes the earliest
//! entry with instant ≤ `now`, applies it **at its own instant** (never at
//! `now`), and repeats — one at a time, because applying one entry may
//! schedule another that is also due (an orphan expiry noticed after its
//! deadline has passed releases the binding in the same prelude).
//!
//! | entry | at | effect |
//! |---|---|---|
//! | orphan expiry | `last_collection_at + orphan-horizon` | table `live × orphan-expiry` → `closing`, deadline = that instant + `give-up-horizon` |
//! | deadline | the fixed wind-up deadline | table `closing × deadline` → give up all, release, tombstone `t := g`, evict over the bound: one transaction |
//! | give-up | `admitted_at + give-up-horizon` | the deposit is given up (§5a.8) |
//! | forget | end of a departure record | the sender status becomes `unknown` |
//!
//! Reads outside the writer ([`state_at`], `status`) evaluate the same
//! instants against their own `now`, so a late sweep is never visible.

use crate::binding::{self, orphan_instant};
use crate::config::EngineConstants;
use crate::events::Tally;
use crate::queue;
use crate::table::{self, Guard, Input, State};
use rltp_proofs::multikey::Rkid;
use rltp_store::{
    Binding, Departure, DepositId, Due, Ms, Phase, ReadTxn, StoreResult, Tombstone, WriteTxn,
};
use rltp_wire::DepositStatus;

/// Applies every transition due at or before `now`, each at its own
/// instant, in instant order (the batch prelude and the sweep), recording
/// each into `events`.
///
/// # Errors
/// A [`rltp_store::StoreError`]; the whole batch is then dropped.
pub fn apply_due(
    txn: &mut dyn WriteTxn,
    now: Ms,
    c: &EngineConstants,
    events: &mut Tally,
) -> StoreResult<()> {
    while let Some((at, due)) = txn.due(now, 1)?.into_iter().next() {
        txn.unschedule(at, &due)?;
        match due {
            Due::OrphanExpiry(rkid) => {
                let held = binding::held(txn, &rkid)?;
                // A stale entry (the binding was collected or re-registered
                // since) is not due: its instant precedes the current one.
                let current = held
                    .binding
                    .is_some_and(|b| b.phase == Phase::Live && at >= orphan_instant(&b, c));
                if current {
                    let (_, next) = table::transition(held.state, Input::OrphanExpiry, Guard::Any);
                    binding::realize(txn, &rkid, &held, next, at, None, c, events)?;
                }
            }
            Due::Deadline(rkid) => {
                let held = binding::held(txn, &rkid)?;
                let current = held
                    .binding
                    .is_some_and(|b| b.phase == Phase::Closing { deadline: at });
                if current {
                    let (_, next) = table::transition(held.state, Input::Deadline, Guard::Any);
                    binding::realize(txn, &rkid, &held, next, at, None, c, events)?;
                }
            }
            Due::GiveUp(rkid, seq) => {
                if let Some(deposit) = queue::by_seq(txn, &rkid, seq)?
                    && deposit.give_up_at == at
                {
                    queue::depart(txn, &rkid, &deposit, Departure::GivenUp, at, c, events)?;
                }
            }
            Due::Forget(rkid, id) => {
                if txn
                    .departure(&rkid, &id)?
                    .is_some_and(|r| r.forget_at == at)
                {
                    txn.remove_departure(&rkid, &id)?;
                }
            }
        }
    }
    Ok(())
}

/// The wind-up deadline a binding has, or would have if its overdue
/// orphan expiry were applied now: `closing` → its fixed deadline; `live`
/// → `last_collection_at + orphan-horizon + give-up-horizon` (ms).
fn deadline_of(binding: &Binding, c: &EngineConstants) -> Ms {
    match binding.phase {
        Phase::Closing { deadline } => deadline,
        Phase::Live => orphan_instant(binding, c).saturating_add(c.give_up_horizon_ms),
    }
}

/// The §5a.3 state of a stored record **as of `now`** (§5a.9): a binding
/// whose orphan instant has passed is `closing`, one whose deadline has
/// passed is `released`, whether or not a sweep has applied it yet.
/// (A tombstone pending eviction still reads `released`; eviction is
/// applied in the same transaction that exceeds the bound.)
pub fn state_at(
    binding: Option<&Binding>,
    tombstone: Option<&Tombstone>,
    now: Ms,
    c: &EngineConstants,
) -> State {
    match binding {
        Some(b) if deadline_of(b, c) <= now => State::Released,
        Some(b) if b.phase == Phase::Live && orphan_instant(b, c) <= now => State::Closing,
        _ => binding::state_of(binding, tombstone),
    }
}

/// Whether `rkid` is held (`live`/`closing`) at `now` (§4.4 guarantee 4).
///
/// # Errors
/// A [`rltp_store::StoreError`] from the read.
pub(crate) fn held_at<R: ReadTxn + ?Sized>(
    read: &R,
    rkid: &Rkid,
    now: Ms,
    c: &EngineConstants,
) -> StoreResult<bool> {
    let binding = read.binding(rkid)?;
    Ok(matches!(
        state_at(binding.as_ref(), None, now, c),
        State::Live | State::Closing
    ))
}

/// The sender status of deposit `id` in the queue of `rkid` at `now`
/// (§5a.8, §6.1):
///
/// - held, before its effective give-up instant (`min(own, deadline)`) →
///   `accepted`;
/// - held past it (a sweep has not run yet) → `given-up`, then `unknown`
///   once `give-up-horizon` more has passed;
/// - departed as concluded → `accepted` until its own admission horizon,
///   then `unknown` (the carrier never reveals a conclusion);
/// - departed as given up → `given-up` until `given-up instant +
///   give-up-horizon`, then `unknown`;
/// - otherwise `unknown`.
///
/// # Errors
/// A [`rltp_store::StoreError`] from the read.
pub(crate) fn status<R: ReadTxn + ?Sized>(
    read: &R,
    rkid: &Rkid,
    id: &DepositId,
    now: Ms,
    c: &EngineConstants,
) -> StoreResult<DepositStatus> {
    if let Some(deposit) = read.deposit_by_id(rkid, id)? {
        let deadline = read.binding(rkid)?.map_or(Ms::MAX, |b| deadline_of(&b, c));
        let effective = deposit.give_up_at.min(deadline);
        return Ok(if now < effective {
            DepositStatus::Accepted
        } else if now < effective.saturating_add(c.give_up_horizon_ms) {
            DepositStatus::GivenUp
        } else {
            DepositStatus::Unknown
        });
    }
    Ok(match read.departure(rkid, id)? {
        Some(record) if now < record.forget_at => match record.departure {
            Departure::Concluded => DepositStatus::Accepted,
            Departure::GivenUp => DepositStatus::GivenUp,
        },
        _ => DepositStatus::Unknown,
    })
}
