//! §5a.5 submission: s1 to s6 as named functions, evaluated in that order
//! with early returns ([`Engine::submit`]):
//!
//! | step | function | refusal |
//! |---|---|---|
//! | s1 the queue lookup | [`s1_queue_lookup`] | `refused(no-such-queue)` |
//! | s2 shape and size | [`s2_shape_and_size`] (checked on the caller's thread by [`Engine::screen`]) | `refused(bounds)` |
//! | s3 byte identity | [`s3_byte_identity`] | `duplicate` (answered after s4's charge) |
//! | s4 metering | [`s4_metering`] | `refused(admission-resource)` |
//! | s5 the queue's bound | [`s5_queue_bound`] | `refused(queue-saturated)` |
//! | s6 global occupancy | [`s6_global_capacity`] | `refused(capacity)` |
//!
//! Then the deposit is appended (`queue`); `admitted` is answered
//! by the caller only after the transaction is durable.

use crate::capacity;
use crate::events::Tally;
use crate::meter;
use crate::queue;
use crate::state::Engine;
use rltp_proofs::envelope::passes_shape;
use rltp_proofs::multikey::{Rkid, RkidText};
use rltp_proofs::{DepositId, Ms};
use rltp_store::{Need, StoreError, StoreResult, WriteTxn};
use rltp_wire::SubmitVerdict;

/// A submission as the caller's thread prepared it ([`Engine::screen`]):
/// the envelope bytes, their content address and the s2 verdict, so that
/// neither hashing nor parsing runs inside the (serial) writer.
#[derive(Debug, Clone)]
pub struct Submission {
    rkid: Rkid,
    bytes: Vec<u8>,
    id: DepositId,
    shape_ok: bool,
}

impl Submission {
    /// The queue.
    pub fn rkid(&self) -> &Rkid {
        &self.rkid
    }

    /// The deposit id ([`DepositId::of`] the bytes).
    pub fn id(&self) -> DepositId {
        self.id
    }
}

/// What s3 found for a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// No held deposit has these bytes' id: a new deposit.
    New,
    /// A held deposit has exactly these bytes.
    Duplicate,
    /// A held deposit has this id but other bytes (a SHA-256 collision):
    /// the identity index cannot hold both.
    Collision,
}

/// §5a.5 s1, the queue lookup: the `rkid` names a binding held now (`live`
/// or `closing`); a released `rkid` and one never bound alike are
/// `refused(no-such-queue)`.
///
/// # Errors
/// A [`rltp_store::StoreError`] from the read.
pub fn s1_queue_lookup(txn: &dyn WriteTxn, rkid: &Rkid) -> StoreResult<Result<(), SubmitVerdict>> {
    Ok(match txn.holds_binding(rkid)? {
        true => Ok(()),
        false => Err(SubmitVerdict::NoSuchQueue),
    })
}

/// §5a.5 s2, shape and size: the envelope is a §5 sealed envelope to this
/// `rkid` in its one JCS spelling, at most `bound` bytes (size checked
/// before parsing). Else `refused(bounds)`. The envelope's `rkid` is
/// compared with the queue's text, not decoded, and the one valid spelling
/// is recognised by a scan that allocates nothing; anything else goes to
/// the strict checker, whose answer is the verdict
/// ([`rltp_proofs::envelope::passes_shape`]).
pub fn s2_shape_and_size(
    bytes: &[u8],
    queue: &RkidText,
    bound: usize,
) -> Result<(), SubmitVerdict> {
    if passes_shape(bytes, queue.rkid(), queue, bound) {
        Ok(())
    } else {
        Err(SubmitVerdict::Bounds)
    }
}

/// §5a.5 s3, byte identity against the deposits held now. A held copy
/// whose stored bytes fail their check is quarantined at `now` (given up,
/// `queue`) and this submission is judged as a new deposit.
///
/// # Errors
/// A [`rltp_store::StoreError`] other than damaged bytes.
pub fn s3_byte_identity(
    engine: &Engine,
    txn: &mut dyn WriteTxn,
    submission: &Submission,
    now: Ms,
    events: &mut Tally,
) -> StoreResult<Identity> {
    let rkid = &submission.rkid;
    let Some(held) = txn.deposit_by_id(rkid, &submission.id)? else {
        return Ok(Identity::New);
    };
    match txn.deposit_bytes(rkid, &held) {
        Ok(bytes) if bytes == submission.bytes => Ok(Identity::Duplicate),
        Ok(_) => Ok(Identity::Collision),
        Err(StoreError::Corrupt(reason)) => {
            let c = engine.constants();
            queue::quarantine(txn, rkid, &held, now, &c, &reason, events)?;
            Ok(Identity::New)
        }
        Err(e) => Err(e),
    }
}

/// §5a.5 s4, metering at `now`: the queue's own key always, the shared key
/// only when the queue's occupancy after the deposit is above
/// `queue-floor` (§4.4 guarantee 5, [`meter::submission_keys`]). Charged
/// like an admission even for a duplicate. `Err` is
/// `refused(admission-resource)`, retriable.
///
/// # Errors
/// A [`rltp_store::StoreError`] from the occupancy read.
pub fn s4_metering(
    engine: &Engine,
    txn: &dyn WriteTxn,
    submission: &Submission,
    now: Ms,
) -> StoreResult<Result<(), SubmitVerdict>> {
    let rkid = submission.rkid;
    let after = txn
        .queue_bytes(&rkid)?
        .saturating_add(submission.bytes.len() as u64);
    let keys = meter::submission_keys(rkid, after, engine.constants().queue_floor);
    Ok(if meter::charge_all(&**engine.meter(), &keys, now) {
        Ok(())
    } else {
        Err(SubmitVerdict::AdmissionResource)
    })
}

/// §5a.5 s5, the queue's own bound: the queue's bytes after the deposit
/// within `max-queue-bytes`. Else `refused(queue-saturated)`, retriable.
///
/// # Errors
/// A [`rltp_store::StoreError`] from the read.
pub fn s5_queue_bound(
    engine: &Engine,
    txn: &dyn WriteTxn,
    submission: &Submission,
) -> StoreResult<Result<(), SubmitVerdict>> {
    let queue_bytes = txn.queue_bytes(&submission.rkid)?;
    let len = submission.bytes.len() as u64;
    Ok(
        if capacity::queue_saturated(queue_bytes, len, engine.constants().max_queue_bytes) {
            Err(SubmitVerdict::QueueSaturated)
        } else {
            Ok(())
        },
    )
}

/// §5a.5 s6, global occupancy: judged only above the queue's floor (§4.4
/// guarantee 5: growth within the floor is never refused for anything
/// global), on the occupancy after the deposit against the private
/// capacity (§4.4 guarantee 2). Else `refused(capacity)`, retriable.
///
/// # Errors
/// A [`rltp_store::StoreError`] from the reads.
pub fn s6_global_capacity(
    engine: &Engine,
    txn: &dyn WriteTxn,
    submission: &Submission,
) -> StoreResult<Result<(), SubmitVerdict>> {
    let queue_bytes = txn.queue_bytes(&submission.rkid)?;
    let len = submission.bytes.len() as u64;
    let floor = engine.constants().queue_floor;
    let Some(growth) = capacity::growth_above_floor(queue_bytes, len, floor) else {
        // Guarantee 5: within the floor nothing global is consulted.
        return Ok(Ok(()));
    };
    let need = Need {
        bytes: growth,
        slots: 0,
    };
    let refused = match txn.escrow(need)? {
        Some(escrow) => capacity::escrow_refuses_growth(&escrow, growth),
        None => {
            capacity::global_refused(&txn.occupancy()?, queue_bytes, len, floor, engine.limits())
        }
    };
    Ok(if refused {
        Err(SubmitVerdict::Capacity)
    } else {
        Ok(())
    })
}

impl Engine {
    /// The caller's-thread half of a submission of `bytes` to the queue
    /// `queue` (its `rkid` as received, or [`RkidText::of`] it): the
    /// content address ([`DepositId::of`]) and the s2 check
    /// ([`s2_shape_and_size`] under [`Engine::envelope_bound`]).
    pub fn screen(&self, queue: &RkidText, bytes: Vec<u8>) -> Submission {
        let shape_ok = s2_shape_and_size(&bytes, queue, self.envelope_bound()).is_ok();
        Submission {
            id: DepositId::of(&bytes),
            rkid: *queue.rkid(),
            bytes,
            shape_ok,
        }
    }

    /// §5a.5 submit at `now`, in the write transaction: s1 → s2 → s3 → s4
    /// → s5 → s6 → append. A deposit admitted while the binding is closing
    /// inherits the wind-up deadline. The caller answers `admitted` only
    /// after the transaction is durable.
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`]: nothing was admitted, and it is not
    /// a verdict (the caller answers `unavailable`, never
    /// `refused(capacity)`).
    pub fn submit(
        &self,
        txn: &mut dyn WriteTxn,
        submission: &Submission,
        now: Ms,
        events: &mut Tally,
    ) -> StoreResult<SubmitVerdict> {
        let rkid = submission.rkid;
        if let Err(verdict) = s1_queue_lookup(txn, &rkid)? {
            return Ok(verdict);
        }
        if !submission.shape_ok {
            return Ok(SubmitVerdict::Bounds);
        }
        let identity = s3_byte_identity(self, txn, submission, now, events)?;
        let metered = s4_metering(self, txn, submission, now)?;
        match identity {
            Identity::Duplicate => return Ok(SubmitVerdict::Duplicate),
            _ if metered.is_err() => return Ok(SubmitVerdict::AdmissionResource),
            Identity::Collision => {
                // The identity index cannot hold both: refuse retriably,
                // store nothing.
                tracing::error!(%rkid, "deposit id collision with different bytes");
                return Ok(SubmitVerdict::Capacity);
            }
            Identity::New => {}
        }
        if let Err(verdict) = s5_queue_bound(self, txn, submission)? {
            return Ok(verdict);
        }
        if let Err(verdict) = s6_global_capacity(self, txn, submission)? {
            return Ok(verdict);
        }
        let c = self.constants();
        queue::admit(txn, &rkid, &submission.bytes, &submission.id, now, &c)?;
        Ok(SubmitVerdict::Admitted)
    }

    /// §5a.5 for a submission whose announced size is above
    /// [`Engine::envelope_bound`], decided before its body is read: s1
    /// (`refused(no-such-queue)`) first, else s2 (`refused(bounds)`).
    /// Linearized with every other decision (it runs in the write
    /// transaction) and changes nothing.
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`] from the read.
    pub fn submit_unread(&self, txn: &dyn WriteTxn, rkid: &Rkid) -> StoreResult<SubmitVerdict> {
        Ok(match s1_queue_lookup(txn, rkid)? {
            Err(verdict) => verdict,
            Ok(()) => SubmitVerdict::Bounds,
        })
    }
}
