//! §4.4 declaration revisions, applied prospectively in one linearized
//! transition ([`Engine::apply_constants`]).

use crate::binding;
use crate::capacity;
use crate::config::EngineConstants;
use crate::events::Tally;
use crate::horizon;
use crate::outcome::EngineError;
use crate::state::Engine;
use rltp_proofs::Ms;
use rltp_proofs::multikey::Rkid;
use rltp_store::{DeclarationRecord, Due, Phase, StoreResult, WriteTxn};
use std::collections::BTreeSet;

impl Engine {
    /// §4.4: applies a declaration revision at `now`, in the write
    /// transaction: the new constants govern every later decision (they
    /// are put in force at once, for the rest of the batch; a caller whose
    /// transaction then fails puts the previous ones back with
    /// [`Engine::set_constants`]); a lowered `max-binding-tombstones` trims
    /// the store at once in eviction order (`boundRevision`); a changed
    /// `queue-floor` re-derives the elastic occupancy; a changed
    /// `orphan-horizon` re-measures every live binding's expiry from its
    /// last collection (never earlier than the revision instant).
    /// Deadlines, deposit give-up instants and challenge expiries already
    /// fixed keep their instants. If `record` is given it is stored in the
    /// same transaction, under the generic revision rule
    /// ([`rltp_proofs::declaration::revision_rule`], comparing the stored
    /// document bytes).
    ///
    /// Returns `Ok(Err(EngineError::Revision))` for an equivocation or a
    /// rollback (state kept, constants unchanged).
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`].
    pub fn apply_constants(
        &self,
        txn: &mut dyn WriteTxn,
        constants: EngineConstants,
        record: Option<&DeclarationRecord>,
        now: Ms,
        events: &mut Tally,
    ) -> StoreResult<Result<(), EngineError>> {
        if let Some(record) = record {
            let held = txn.declaration()?;
            let rule = rltp_proofs::declaration::revision_rule(
                held.as_ref().map(|h| (h.revision, h.document.as_slice())),
                (record.revision, &record.document),
            );
            if rule.is_rejection() {
                return Ok(Err(EngineError::Revision {
                    held: held.map_or(0, |h| h.revision),
                    offered: record.revision,
                }));
            }
            if !rule.records() {
                return Ok(Ok(()));
            }
            txn.put_declaration(record)?;
        }
        let old = self.constants();
        if old.queue_floor != constants.queue_floor
            || old.orphan_horizon_ms != constants.orphan_horizon_ms
        {
            renormalize(txn, now, &old, &constants)?;
        }
        binding::evict_over_bound(txn, &constants, events)?;
        self.set_constants(constants);
        horizon::apply_due(txn, now, &constants, events)?;
        Ok(Ok(()))
    }
}

/// Re-derives what depends on `queue-floor` and `orphan-horizon` for every
/// held binding after a revision changed them (one transaction). The held
/// bindings are found through the due index: every live binding has its
/// orphan-expiry entry and every closing binding its deadline entry.
fn renormalize(
    txn: &mut dyn WriteTxn,
    now: Ms,
    old: &EngineConstants,
    new: &EngineConstants,
) -> StoreResult<()> {
    let held: BTreeSet<Rkid> = txn
        .due(Ms::MAX, usize::MAX)?
        .into_iter()
        .filter_map(|(_, due)| match due {
            Due::OrphanExpiry(r) | Due::Deadline(r) => Some(r),
            _ => None,
        })
        .collect();
    let mut elastic: i64 = 0;
    let mut bindings: i64 = 0;
    for rkid in &held {
        let Some(b) = txn.binding(rkid)? else {
            continue;
        };
        bindings = bindings.saturating_add(1);
        let queue_bytes = txn.queue_bytes(rkid)?;
        elastic = elastic.saturating_add(capacity::floor_change_delta(
            queue_bytes,
            old.queue_floor,
            new.queue_floor,
        ));
        if b.phase == Phase::Live && old.orphan_horizon_ms != new.orphan_horizon_ms {
            let due = Due::OrphanExpiry(*rkid);
            txn.unschedule(binding::orphan_instant(&b, old), &due)?;
            txn.schedule(binding::orphan_instant(&b, new).max(now), &due)?;
        }
    }
    // Every held binding's reserve moves with the floor.
    let floor_delta = i128::from(new.queue_floor) - i128::from(old.queue_floor);
    let reserved = i128::from(bindings).saturating_mul(floor_delta);
    txn.add_reserved_bytes(i64::try_from(reserved).unwrap_or(if reserved < 0 {
        i64::MIN
    } else {
        i64::MAX
    }))?;
    txn.add_elastic_bytes(elastic)
}
