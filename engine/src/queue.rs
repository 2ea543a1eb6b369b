//! A queue's deposits (§5a.5, §5a.8): how one enters and how one leaves.
//! There is no other way for a deposit to leave a queue than [`depart`]:
//! concluded by the recipient, or given up — at its horizon (§5a.8), or
//! at once when its stored bytes are found damaged ([`quarantine`]: the
//! carrier can no longer deliver it, and giving it up is how it concludes
//! it toward the sender path, which §5a.8 requires before any storage is
//! released).

use crate::capacity::elastic_delta;
use crate::config::EngineConstants;
use crate::events::{Event, Tally};
use rltp_proofs::multikey::Rkid;
use rltp_store::{
    Departure, DepartureRecord, Deposit, DepositId, Due, Ms, ReadTxn, StoreResult, WriteTxn,
};

/// Appends `bytes` (content address `id`) to the queue of `rkid`, admitted
/// at `now` with its own give-up instant `now + give-up-horizon` scheduled;
/// keeps the elastic occupancy in step (§4.4 guarantee 5). The caller has
/// run s1–s6.
pub(crate) fn admit(
    txn: &mut dyn WriteTxn,
    rkid: &Rkid,
    bytes: &[u8],
    id: &DepositId,
    now: Ms,
    c: &EngineConstants,
) -> StoreResult<Deposit> {
    let before = txn.queue_bytes(rkid)?;
    let give_up_at = now.saturating_add(c.give_up_horizon_ms);
    let deposit = txn.append_identified(rkid, bytes, id, now, give_up_at)?;
    let after = before.saturating_add(u64::from(deposit.len));
    txn.add_elastic_bytes(elastic_delta(before, after, c.queue_floor))?;
    txn.schedule(give_up_at, &Due::GiveUp(*rkid, deposit.seq))?;
    Ok(deposit)
}

/// The held deposit of `rkid` with sequence number `seq`, if any.
pub(crate) fn by_seq(txn: &dyn ReadTxn, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>> {
    Ok(txn
        .deposits(rkid, seq.checked_sub(1), 1)?
        .into_iter()
        .next()
        .filter(|d| d.seq == seq))
}

/// Removes a held deposit as `how` at instant `at` (ms) and records the
/// departure for the sender status path (§5a.8, §6.1). Returns whether a
/// deposit was removed.
///
/// - `GivenUp`: the status answers `given-up` until `at + give-up-horizon`.
/// - `Concluded`: the status keeps answering `accepted` until the
///   deposit's own admission horizon (`admitted_at + give-up-horizon`), so
///   that `accepted → unknown` never reveals a conclusion earlier than a
///   give-up would have become visible (a carrier never reveals that a
///   recipient concluded, §5a.8).
pub(crate) fn depart(
    txn: &mut dyn WriteTxn,
    rkid: &Rkid,
    deposit: &Deposit,
    how: Departure,
    at: Ms,
    c: &EngineConstants,
    events: &mut Tally,
) -> StoreResult<bool> {
    let before = txn.queue_bytes(rkid)?;
    if txn.remove_deposit(rkid, deposit.seq)?.is_none() {
        return Ok(false);
    }
    events.record(match how {
        Departure::GivenUp => Event::GiveUp,
        Departure::Concluded => Event::Concluded,
    });
    let after = before.saturating_sub(u64::from(deposit.len));
    txn.add_elastic_bytes(elastic_delta(before, after, c.queue_floor))?;
    txn.unschedule(deposit.give_up_at, &Due::GiveUp(*rkid, deposit.seq))?;
    let forget_at = match how {
        Departure::GivenUp => at.saturating_add(c.give_up_horizon_ms),
        Departure::Concluded => deposit.give_up_at,
    };
    txn.put_departure(
        rkid,
        &deposit.id,
        &DepartureRecord {
            departure: how,
            forget_at,
        },
    )?;
    txn.schedule(forget_at, &Due::Forget(*rkid, deposit.id))?;
    Ok(true)
}

/// Quarantines held deposit `deposit` of `rkid`, whose stored bytes failed
/// their check (`reason`) at `at`: writes its quarantine record (the
/// operator's integrity check and metrics name it) and gives it up at once
/// — its sender's status answers `given-up` (`failed(expired-by-adapter-policy)`,
/// §6.1), a byte-identical resubmission is admitted afresh, and the rest of
/// the queue is served. Logged at error level: it means the disk or the
/// file system damaged data (`deploy/OPERATIONS.md`, "Damaged data dir").
pub(crate) fn quarantine(
    txn: &mut dyn WriteTxn,
    rkid: &Rkid,
    deposit: &Deposit,
    at: Ms,
    c: &EngineConstants,
    reason: &str,
    events: &mut Tally,
) -> StoreResult<()> {
    txn.quarantine(rkid, deposit, at, reason)?;
    events.record(Event::Quarantined);
    tracing::error!(
        deposit = %deposit.id.to_multibase(),
        seq = deposit.seq,
        reason,
        "a stored deposit failed its check: quarantined and given up (its sender's status answers given-up)"
    );
    depart(txn, rkid, deposit, Departure::GivenUp, at, c, events).map(drop)
}

/// Gives up every deposit `rkid` still holds, at instant `at` (the wind-up
/// deadline, §5a.9).
pub(crate) fn give_up_all(
    txn: &mut dyn WriteTxn,
    rkid: &Rkid,
    at: Ms,
    c: &EngineConstants,
    events: &mut Tally,
) -> StoreResult<()> {
    loop {
        let page = txn.deposits(rkid, None, crate::EngineConfig::DEFAULT_MAX_COLLECT)?;
        if page.is_empty() {
            return Ok(());
        }
        let mut progressed = false;
        for deposit in &page {
            progressed |= depart(txn, rkid, deposit, Departure::GivenUp, at, c, events)?;
        }
        if !progressed {
            // A listed deposit that cannot be removed: report instead of
            // looping forever.
            return Err(rltp_store::StoreError::Corrupt(format!(
                "queue {rkid} lists deposits that cannot be removed"
            )));
        }
    }
}
