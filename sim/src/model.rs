//! What the simulated parties were told, and the invariants the carrier
//! must keep about it, checked after every step.
//!
//! The model records only what was **acknowledged** — an answer the
//! carrier gave after the batch's `fdatasync` returned — plus what was in
//! flight when the power was cut (which may or may not have happened). The
//! invariants, each named in a [`Violation`]:
//!
//! - [`LOST`]: nothing acknowledged is lost across a crash — an admitted
//!   deposit, a conclusion, a registration;
//! - [`REDELIVERED`]: nothing is delivered (or held again) after its
//!   conclusion (§5a.8);
//! - [`REMOVED`]: no deposit is removed but by conclusion, or by give-up
//!   at or after its effective horizon `min(admitted + give-up-horizon,
//!   wind-up deadline)` (§5a.8, §5a.9);
//! - [`G5`]: §4.4 guarantee 5 — a submission that stays within its
//!   queue's `queue-floor` is never refused for global occupancy (s6) or
//!   for the shared meter (s4); and s5 refuses only above
//!   `max-queue-bytes`;
//! - [`CAPACITY`]: capacity is never exceeded (guarantee 2's private
//!   limits, the s5 bound per queue) and the occupancy counters equal what
//!   is held;
//! - [`SEQ`]: a queue's `seq`, once handed to a durable deposit, is never
//!   handed to another;
//! - [`INVALID`]: a deposit s2 refuses is never admitted.

use crate::world::{self, World};
use rltp_engine::capacity;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::{DepositId, Ms};
use rltp_storage::{Departure, ReadTxn, Store, StoreResult};
use rltp_wire::SubmitVerdict;
use std::collections::{BTreeMap, BTreeSet};

/// Invariant: nothing acknowledged is lost across a crash.
pub const LOST: &str = "nothing acknowledged is lost across a crash";
/// Invariant: nothing is delivered after its conclusion.
pub const REDELIVERED: &str = "nothing is delivered after its conclusion";
/// Invariant: no removal but by conclusion or give-up at its horizon.
pub const REMOVED: &str = "no deposit is removed but by conclusion or give-up at its horizon";
/// Invariant: §4.4 guarantee 5 (and the s5 bound).
pub const G5: &str = "g5: a queue within its floor is beyond the reach of every other queue";
/// Invariant: capacity never exceeded, occupancy exact.
pub const CAPACITY: &str = "capacity is never exceeded";
/// Invariant: a queue's seq is never reused.
pub const SEQ: &str = "a queue's seq is never reused";
/// Invariant: an invalid deposit is never admitted.
pub const INVALID: &str = "an invalid deposit is never admitted";

/// A broken invariant: which, and what the simulation saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant (one of this module's constants).
    pub invariant: &'static str,
    /// What broke it.
    pub detail: String,
}

fn violation(invariant: &'static str, detail: String) -> Violation {
    Violation { invariant, detail }
}

/// A deposit the model holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// When it was admitted (ms).
    pub admitted_at: Ms,
    /// Whether its `admitted` was answered (else it was in flight at a
    /// crash and survived it).
    pub acknowledged: bool,
    /// Before this instant it may leave its queue only by conclusion
    /// ([`Model::admitted`]).
    pub removable_at: Ms,
}

/// An acknowledged registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// Its generation.
    pub generation: u64,
    /// A lower bound of the binding's `last_collection_at`: the last
    /// acknowledged registration, or collection while surely `live`.
    pub since: Ms,
}

/// What the parties were told, per party index.
#[derive(Debug, Default)]
pub struct Model {
    /// Deposits held, by (party, id).
    pub held: BTreeMap<(usize, DepositId), Held>,
    /// Acknowledged conclusions.
    pub concluded: BTreeSet<(usize, DepositId)>,
    /// Conclusions in flight at a crash.
    pub maybe_concluded: BTreeSet<(usize, DepositId)>,
    /// Acknowledged registrations, by party.
    pub bound: BTreeMap<usize, Bound>,
    /// Every durable `seq` seen, and the deposit it was handed to.
    seqs: BTreeMap<(usize, u64), DepositId>,
    /// Deposits seen leave by give-up at their horizon (a count).
    pub given_up: u64,
}

impl Model {
    /// A deposit of `party` admitted at `at`. Before `min(at + G,
    /// deadline)` it may leave its queue only by conclusion (§5a.8,
    /// §5a.9): the wind-up deadline in force then is at least `since + O +
    /// G` for the registration acknowledged so far (collections and
    /// returns only move it later) and, since the queue was held at
    /// admission, after `at`.
    pub fn admitted(&mut self, party: usize, id: DepositId, at: Ms, acknowledged: bool) {
        let c = world::constants();
        let deadline = self
            .bound
            .get(&party)
            .map_or(at, |b| b.since + c.orphan_horizon_ms + c.give_up_horizon_ms);
        let removable_at = (at + c.give_up_horizon_ms).min(deadline.max(at));
        self.held.insert(
            (party, id),
            Held {
                admitted_at: at,
                acknowledged,
                removable_at,
            },
        );
    }

    /// An acknowledged registration of `party` at `now`.
    pub fn registered(&mut self, party: usize, generation: u64, now: Ms) {
        self.bound.insert(
            party,
            Bound {
                generation,
                since: now,
            },
        );
    }

    /// An acknowledged collection of `party` at `now`: the binding's
    /// `last_collection_at` moved if it was surely still `live`.
    pub fn collected(&mut self, party: usize, now: Ms) {
        let orphan = world::constants().orphan_horizon_ms;
        if let Some(b) = self.bound.get_mut(&party)
            && now < b.since + orphan
        {
            b.since = now;
        }
    }

    /// Checks a collect page: nothing concluded is delivered, and every
    /// deposit's bytes are the ones its id names.
    ///
    /// # Errors
    /// The broken invariant.
    pub fn check_page(
        &self,
        party: usize,
        page: &[(u64, DepositId, Vec<u8>)],
    ) -> Result<(), Violation> {
        for (seq, id, bytes) in page {
            if self.concluded.contains(&(party, *id)) {
                return Err(violation(
                    REDELIVERED,
                    format!(
                        "party {party} collected seq {seq} ({}) after its conclusion was acknowledged",
                        id.to_multibase()
                    ),
                ));
            }
            if DepositId::of(bytes) != *id {
                return Err(violation(
                    LOST,
                    format!(
                        "party {party} collected seq {seq}: its bytes are not those of {}",
                        id.to_multibase()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// After every step: the store against the model (module docs).
    /// `crashed` says whether this step cut the power.
    ///
    /// # Errors
    /// The first broken invariant; a store error is one too.
    pub fn check_store(
        &mut self,
        world: &World,
        rkids: &[Rkid],
        crashed: bool,
    ) -> Result<(), Violation> {
        let store_error =
            |e: rltp_storage::StoreError| violation(LOST, format!("the store failed: {e}"));
        let store = world.store().map_err(store_error)?;
        let read = store.read().map_err(store_error)?;
        self.check_held(&read, rkids, world.now, crashed)
            .map_err(store_error)??;
        self.check_queues(&read, rkids, crashed)
            .map_err(store_error)??;
        self.check_bound(&read, rkids, world.now, crashed)
            .map_err(store_error)??;
        check_capacity(&read, rkids).map_err(store_error)?
    }

    /// Every held deposit is still held, or left by a conclusion, or by a
    /// give-up at or after its horizon.
    fn check_held<R: ReadTxn>(
        &mut self,
        read: &R,
        rkids: &[Rkid],
        now: Ms,
        crashed: bool,
    ) -> StoreResult<Result<(), Violation>> {
        let mut gone = Vec::new();
        for (&(party, id), held) in &self.held {
            let rkid = &rkids[party];
            if read.deposit_by_id(rkid, &id)?.is_some() {
                continue;
            }
            let departure = read.departure(rkid, &id)?.map(|r| r.departure);
            let maybe = self.maybe_concluded.contains(&(party, id));
            let by_time = now >= held.removable_at;
            let legal = match departure {
                Some(Departure::Concluded) => maybe,
                Some(Departure::GivenUp) | None => maybe || by_time,
            };
            if !legal {
                let (invariant, what) = if crashed && held.acknowledged {
                    (LOST, "its admission was acknowledged; the power was cut")
                } else {
                    (REMOVED, "nobody concluded it")
                };
                return Ok(Err(violation(
                    invariant,
                    format!(
                        "party {party}'s deposit {} (admitted at {}) is gone at {now} \
                         (departure {departure:?}, removable from {}): {what}",
                        id.to_multibase(),
                        held.admitted_at,
                        held.removable_at
                    ),
                )));
            }
            if !maybe && departure != Some(Departure::Concluded) {
                self.given_up += 1;
            }
            gone.push((party, id));
        }
        for key in gone {
            self.held.remove(&key);
        }
        Ok(Ok(()))
    }

    /// Every deposit held: not one whose conclusion was acknowledged (it
    /// would be delivered again), and on a `seq` never handed to another
    /// deposit of its queue. Deposits the model did not know (in flight at
    /// a crash, and survived) are adopted.
    fn check_queues<R: ReadTxn>(
        &mut self,
        read: &R,
        rkids: &[Rkid],
        crashed: bool,
    ) -> StoreResult<Result<(), Violation>> {
        for (party, rkid) in rkids.iter().enumerate() {
            for d in read.deposits(rkid, None, usize::MAX)? {
                if self.concluded.contains(&(party, d.id)) {
                    let invariant = if crashed { LOST } else { REDELIVERED };
                    return Ok(Err(violation(
                        invariant,
                        format!(
                            "party {party}'s deposit {} is held again (seq {}) after its \
                             conclusion was acknowledged",
                            d.id.to_multibase(),
                            d.seq
                        ),
                    )));
                }
                match self.seqs.insert((party, d.seq), d.id) {
                    Some(before) if before != d.id => {
                        return Ok(Err(violation(
                            SEQ,
                            format!(
                                "party {party}'s seq {} was handed to {} and now to {}",
                                d.seq,
                                before.to_multibase(),
                                d.id.to_multibase()
                            ),
                        )));
                    }
                    _ => {}
                }
                if !self.held.contains_key(&(party, d.id)) {
                    self.admitted(party, d.id, d.admitted_at, false);
                }
            }
        }
        Ok(Ok(()))
    }

    /// Every acknowledged registration is in force until its earliest
    /// possible wind-up deadline.
    fn check_bound<R: ReadTxn>(
        &self,
        read: &R,
        rkids: &[Rkid],
        now: Ms,
        crashed: bool,
    ) -> StoreResult<Result<(), Violation>> {
        let c = world::constants();
        for (&party, bound) in &self.bound {
            if now >= bound.since + c.orphan_horizon_ms + c.give_up_horizon_ms {
                continue;
            }
            let generation = read.binding(&rkids[party])?.map(|b| b.generation);
            if generation.is_none_or(|g| g < bound.generation) {
                let invariant = if crashed { LOST } else { REMOVED };
                return Ok(Err(violation(
                    invariant,
                    format!(
                        "party {party}'s acknowledged registration (generation {}, live since {}) \
                         is gone at {now}: the store holds generation {generation:?}",
                        bound.generation, bound.since
                    ),
                )));
            }
        }
        Ok(Ok(()))
    }
}

/// Capacity (§4.4 guarantees 2 and 5, §5a.5 s5): usage within
/// `capacity_bytes`, bindings within `max_bindings`, every queue within
/// `max-queue-bytes`, and the occupancy counters equal to what is held.
fn check_capacity<R: ReadTxn>(read: &R, rkids: &[Rkid]) -> StoreResult<Result<(), Violation>> {
    let (c, config) = (world::constants(), world::config());
    let occ = read.occupancy()?;
    let (mut total, mut deposits, mut elastic) = (0u64, 0u64, 0u64);
    for rkid in rkids {
        let held = read.deposits(rkid, None, usize::MAX)?;
        let bytes: u64 = held.iter().map(|d| u64::from(d.len)).sum();
        if bytes > c.max_queue_bytes || read.queue_bytes(rkid)? != bytes {
            return Ok(Err(violation(
                CAPACITY,
                format!(
                    "a queue holds {bytes} bytes, counts {}, bound {}",
                    read.queue_bytes(rkid)?,
                    c.max_queue_bytes
                ),
            )));
        }
        total += bytes;
        deposits += held.len() as u64;
        elastic += capacity::excess(bytes, c.queue_floor);
    }
    let usage = capacity::usage(&occ, c.queue_floor);
    let counted = (occ.total_bytes, occ.deposits, occ.elastic_bytes);
    if usage > config.capacity_bytes
        || occ.bindings > config.max_bindings
        || counted != (total, deposits, elastic)
    {
        return Ok(Err(violation(
            CAPACITY,
            format!(
                "usage {usage} of {}, bindings {} of {}; occupancy (bytes, deposits, elastic) \
                 {counted:?}, held {:?}",
                config.capacity_bytes,
                occ.bindings,
                config.max_bindings,
                (total, deposits, elastic)
            ),
        )));
    }
    Ok(Ok(()))
}

/// Checks one submission's answer: an invalid one is never admitted; a
/// valid one to a held queue is never refused for anything global while
/// it stays within the floor, nor refused as saturated below the bound.
///
/// # Errors
/// The broken invariant.
pub fn check_submitted(
    valid: bool,
    len: u64,
    verdict: SubmitVerdict,
    before: u64,
    held: bool,
) -> Result<(), Violation> {
    let c = world::constants();
    if !valid && verdict == SubmitVerdict::Admitted {
        return Err(violation(INVALID, format!("{len} bytes admitted")));
    }
    if !valid || !held {
        return Ok(());
    }
    let after = before + len;
    let global = matches!(
        verdict,
        SubmitVerdict::Capacity | SubmitVerdict::AdmissionResource
    );
    if global && after <= c.queue_floor {
        return Err(violation(
            G5,
            format!(
                "refused({verdict}) with {before} + {len} bytes within the floor {}",
                c.queue_floor
            ),
        ));
    }
    if verdict == SubmitVerdict::QueueSaturated && after <= c.max_queue_bytes {
        return Err(violation(
            G5,
            format!(
                "refused(queue-saturated) with {before} + {len} ≤ {} bytes",
                c.max_queue_bytes
            ),
        ));
    }
    Ok(())
}
