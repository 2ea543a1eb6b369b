//! §5a.7/§5a.8 collect and conclude, under the state table's
//! `collect / conclude` cells, and the watch page a session pushes.
//!
//! Both run r1–r3 first ([`Engine::authorize`]); the halves here run in
//! the write transaction. A served collect or conclude **counts as
//! collection** (`PROTOCOL.md` §7): `last_collection_at` moves to now.

use crate::binding;
use crate::events::Tally;
use crate::horizon;
use crate::outcome::{CollectPage, CollectedDeposit, Concluded};
use crate::queue;
use crate::register::{Authorized, Operation, presenter_verdict};
use crate::state::Engine;
use crate::table::{self, Outcome, State};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::{DepositId, Ms};
use rltp_store::{Binding, Departure, ReadTxn, StoreError, StoreResult, WriteTxn};
use rltp_wire::Verdict;
use std::collections::BTreeSet;

/// What a watch session reads next ([`Engine::watch_page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchPage {
    /// The binding is still held by the session's principal: deposits to
    /// push (possibly none), and the seqs of held deposits whose stored
    /// bytes failed their check (to quarantine in the writer,
    /// [`Engine::quarantine_if_damaged`]).
    Deposits {
        /// Held deposits after the session's last seq, before their own
        /// give-up instant, in admission order.
        deposits: Vec<CollectedDeposit>,
        /// Damaged deposits met on the way.
        damaged: Vec<u64>,
    },
    /// The binding is no longer held by the session's principal.
    Gone,
}

impl Engine {
    /// The table's `collect / conclude` cell for `authorized` (which must
    /// have been authorized for `operation`), then `served` under the
    /// bound principal; any other outcome is its presenter verdict.
    fn session<R>(
        &self,
        txn: &mut dyn WriteTxn,
        authorized: &Authorized,
        operation: Operation,
        served: impl FnOnce(&mut dyn WriteTxn, &Rkid, &Binding) -> StoreResult<R>,
    ) -> StoreResult<Result<R, Verdict>> {
        if authorized.operation() != operation {
            return Ok(Err(Verdict::Malformed));
        }
        let rkid = *authorized.rkid();
        let principal = authorized.principal();
        let held = binding::held(txn, &rkid)?;
        let bound = held.binding.filter(|b| b.principal == principal);
        let (outcome, _) = table::collect_conclude(held.state, bound.is_some());
        match (outcome, bound) {
            (Outcome::Served, Some(binding)) => served(txn, &rkid, &binding).map(Ok),
            _ => {
                Ok(Err(presenter_verdict(outcome, held.held_generation())
                    .unwrap_or(Verdict::NoSuchQueue)))
            }
        }
    }

    /// §5a.7/§5a.8 collect at `now`, in the write transaction: under the
    /// bound principal, the held deposits with `seq > after`, in admission
    /// order, at most `limit` (at least 1, capped by
    /// [`Engine::max_collect`]), with their ids; `last_collection_at`
    /// moves to now (a live binding's orphan horizon restarts; a closing
    /// binding stays closing). The page's bytes are read after, outside the
    /// writer ([`CollectPage`]: the log store hands out where they are).
    /// Another principal's valid proof is `refused(no-such-queue)`.
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`] (answered `unavailable`).
    pub fn collect(
        &self,
        txn: &mut dyn WriteTxn,
        authorized: &Authorized,
        after: Option<u64>,
        limit: usize,
        now: Ms,
    ) -> StoreResult<Result<CollectPage, Verdict>> {
        let limit = limit.clamp(1, self.max_collect());
        let c = self.constants();
        self.session(txn, authorized, Operation::Collect, |txn, rkid, binding| {
            let mut page = txn.deposits(rkid, after, limit.saturating_add(1))?;
            let more = page.len() > limit;
            page.truncate(limit);
            let deposits = page
                .into_iter()
                .map(|d| {
                    let bytes = txn.deposit_bytes_deferred(rkid, &d);
                    (d, bytes)
                })
                .collect();
            binding::collected(txn, rkid, binding, now, &c)?;
            Ok(CollectPage { deposits, more })
        })
    }

    /// §5a.8 conclude at `now`, in the write transaction: under the bound
    /// principal, removes every named deposit still held; ids not held are
    /// fine (idempotent). Carries no reason. A concluded deposit is never
    /// offered again, and its sender status stays `accepted` (§5a.8).
    ///
    /// A served conclude **counts as collection** (`PROTOCOL.md` §7,
    /// decided here): `last_collection_at` moves to now exactly as for
    /// [`Engine::collect`] (a closing binding stays closing). §5a.3's table
    /// has one input, `collect / conclude`, and §5a.9's orphan is a binding
    /// "nobody will ever present again": a conclude is a fresh proof of
    /// possession under the bound principal, which is that presentation.
    ///
    /// # Errors
    /// As [`Engine::collect`].
    pub fn conclude(
        &self,
        txn: &mut dyn WriteTxn,
        authorized: &Authorized,
        ids: &BTreeSet<DepositId>,
        now: Ms,
        events: &mut Tally,
    ) -> StoreResult<Result<Concluded, Verdict>> {
        let c = self.constants();
        self.session(
            txn,
            authorized,
            Operation::Conclude,
            |txn, rkid, binding| {
                let mut removed = 0;
                for id in ids {
                    if let Some(deposit) = txn.deposit_by_id(rkid, id)?
                        && queue::depart(
                            txn,
                            rkid,
                            &deposit,
                            Departure::Concluded,
                            now,
                            &c,
                            events,
                        )?
                    {
                        removed += 1;
                    }
                }
                binding::collected(txn, rkid, binding, now, &c)?;
                Ok(Concluded { removed })
            },
        )
    }

    /// The next page of a watch session at `now`, from a read snapshot:
    /// the deposits after `after` (at most `limit`) if `rkid` is still held
    /// (`live` or `closing` at `now`, §5a.9) by `principal` — the same
    /// judgement as the table's `collect` cell. Deposits past their own
    /// give-up instant are left to the sweep. The caller pushes nothing
    /// before everything the snapshot sees is durable.
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`] other than damaged bytes.
    pub fn watch_page<R: ReadTxn + ?Sized>(
        &self,
        read: &R,
        rkid: &Rkid,
        principal: &[u8; 32],
        after: Option<u64>,
        limit: usize,
        now: Ms,
    ) -> StoreResult<WatchPage> {
        let binding = read.binding(rkid)?;
        let held = matches!(
            horizon::state_at(binding.as_ref(), None, now, &self.constants()),
            State::Live | State::Closing
        );
        if !held || binding.is_none_or(|b| &b.principal != principal) {
            return Ok(WatchPage::Gone);
        }
        let mut deposits = Vec::new();
        let mut damaged = Vec::new();
        for d in read.deposits(rkid, after, limit)? {
            if d.give_up_at > now {
                match read.deposit_bytes(rkid, &d) {
                    Ok(bytes) => deposits.push(CollectedDeposit {
                        seq: d.seq,
                        id: d.id,
                        bytes,
                        admitted_at: d.admitted_at,
                    }),
                    Err(StoreError::Corrupt(_)) => damaged.push(d.seq),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(WatchPage::Deposits { deposits, damaged })
    }

    /// Quarantines held deposit `seq` of `rkid` at `now` if its stored
    /// bytes fail their check (a watch push met them outside the writer);
    /// returns whether it did. Runs in the write transaction, so it judges
    /// the bytes again.
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`] other than damaged bytes.
    pub fn quarantine_if_damaged(
        &self,
        txn: &mut dyn WriteTxn,
        rkid: &Rkid,
        seq: u64,
        now: Ms,
        events: &mut Tally,
    ) -> StoreResult<bool> {
        let Some(deposit) = queue::by_seq(txn, rkid, seq)? else {
            return Ok(false);
        };
        match txn.deposit_bytes(rkid, &deposit) {
            Ok(_) => Ok(false),
            Err(StoreError::Corrupt(reason)) => {
                let c = self.constants();
                queue::quarantine(txn, rkid, &deposit, now, &c, &reason, events)?;
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// §5a.8/§6.1 sender status of deposit `id` in the queue of `rkid` at
    /// `now`, from a read snapshot: `accepted` (held, or concluded — the
    /// carrier never reveals a conclusion), `given-up` (for
    /// `give-up-horizon` after the give-up), else `unknown`; evaluated at
    /// `now`, so a late sweep is never visible (`horizon::status`). The
    /// caller answers only once everything the snapshot can see is durable
    /// (`accepted` must never name a deposit a crash could take back).
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`] from the read.
    pub fn status<R: ReadTxn + ?Sized>(
        &self,
        read: &R,
        rkid: &Rkid,
        id: &DepositId,
        now: Ms,
    ) -> StoreResult<rltp_wire::DepositStatus> {
        horizon::status(read, rkid, id, now, &self.constants())
    }
}
