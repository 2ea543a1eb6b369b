//! The index checked against itself, and its canonical form (tests and
//! the integrity check compare it with a rebuilt one).
use super::*;

impl Index {
    /// Everything the index holds, in a canonical order (to compare two).
    pub(crate) fn canonical(&self) -> Canonical {
        let mut c = Canonical::default();
        for qid in 0..self.queues.high() {
            let Some(q) = self.queues.live_at(qid) else {
                continue;
            };
            let deposits = self
                .list(qid, None, usize::MAX)
                .into_iter()
                .map(|s| self.deps.get(s).image())
                .collect();
            c.queues
                .push((q.rkid(), q.next_seq, q.bytes(), q.bound(), deposits));
        }
        c.queues.sort_by_key(|q| q.0);
        for slot in 0..self.departs.high() {
            if let Some(d) = self.departs.live_at(slot) {
                c.departures
                    .push((self.queues.get(d.qid).rkid(), DepositId(d.id), d.record()));
            }
        }
        c.departures.sort_by_key(|d| (d.0, d.1));
        c.due = self.due_upto(Ms::MAX, usize::MAX);
        c.quarantine = self.quarantine.clone().into_iter().collect();
        c.occupancy = (
            self.occupancy.deposits,
            self.occupancy.total_bytes,
            self.occupancy.elastic_bytes,
        );
        c
    }

    /// Checks the index against itself: every hash entry names a live
    /// record and every live record is in its hash, every queue's list is
    /// in `seq` order and sums to its bytes, every counter equals what it
    /// counts, every due reference is valid and every flag has its entry.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming the first mismatch.
    pub(crate) fn check(&self) -> StoreResult<()> {
        let bad = bad::<()>;
        let (total, deposits, segs) = self.check_queues()?;
        let mut refs: HashMap<u32, u32> = HashMap::new();
        if deposits != self.by_id.len() as u64 || deposits != self.deps.count() {
            return bad(format!(
                "{deposits} deposits listed, {} hashed, {} allocated",
                self.by_id.len(),
                self.deps.count()
            ));
        }
        if total != self.occupancy.total_bytes || deposits != self.occupancy.deposits {
            return bad(format!(
                "occupancy {:?} vs {deposits} deposits of {total} bytes",
                self.occupancy
            ));
        }
        for (seg, stat) in &self.segs {
            if segs.get(seg).copied().unwrap_or_default() != *stat {
                return bad(format!("segment {seg:016x} counts {stat:?}"));
            }
        }
        for slot in 0..self.departs.high() {
            if let Some(d) = self.departs.live_at(slot) {
                if self.find_departure(d.qid, &d.id) != Some(slot) {
                    return bad("a departure is not in its hash".into());
                }
                *refs.entry(d.qid).or_default() += 1;
            }
        }
        self.check_due(&mut refs)?;
        for qid in 0..self.queues.high() {
            if let Some(q) = self.queues.live_at(qid)
                && q.refs() != refs.get(&qid).copied().unwrap_or(0)
            {
                return bad(format!("queue {} counts {} references", q.rkid(), q.refs()));
            }
        }
        Ok(())
    }

    /// Every queue in its hash, its list in `seq` order and summing to its
    /// bytes, every deposit in the identity hash; returns the bytes and
    /// deposits listed, and what each segment holds.
    fn check_queues(&self) -> StoreResult<(u64, u64, HashMap<u32, SegStat>)> {
        let mut total = 0u64;
        let mut deposits = 0u64;
        let mut segs: HashMap<u32, SegStat> = HashMap::new();
        for qid in 0..self.queues.high() {
            let Some(q) = self.queues.live_at(qid) else {
                continue;
            };
            if self.queue(&q.rkid()) != Some(qid) {
                return bad(format!("queue {} is not in its hash", q.rkid()));
            }
            let (mut bytes, mut last, mut at, mut n) = (0u64, 0u64, q.head, 0u64);
            while at != NIL {
                let Some(d) = self.deps.live_at(at) else {
                    return bad(format!("queue {} links a dead slot", q.rkid()));
                };
                if d.qid != qid || d.seq <= last || d.seq > q.next_seq {
                    return bad(format!(
                        "queue {} is out of order at seq {}",
                        q.rkid(),
                        d.seq
                    ));
                }
                if self.find_id(qid, &d.id) != Some(at) {
                    return bad(format!("deposit {} is not in the identity hash", d.seq));
                }
                last = d.seq;
                bytes += u64::from(d.len());
                n += 1;
                let s = segs.entry(d.seg).or_default();
                s.live += 1;
                s.bytes += u64::from(d.len());
                at = self.next_in_queue(at);
            }
            if bytes != q.bytes() {
                return bad(format!(
                    "queue {} counts {} bytes, holds {bytes}",
                    q.rkid(),
                    q.bytes()
                ));
            }
            total += bytes;
            deposits += n;
        }
        Ok((total, deposits, segs))
    }

    /// Every due reference valid, counted, and every flag with its entry;
    /// counts the references each queue has into `refs`.
    fn check_due(&self, refs: &mut HashMap<u32, u32>) -> StoreResult<()> {
        let mut entries = 0u64;
        let mut flagged = (0u64, 0u64);
        if !self.removed_flagged.is_empty() {
            return bad("removed deposits wait to be settled".into());
        }
        let mut spilled = 0usize;
        for (&at, bucket) in &self.due {
            for r in bucket.refs() {
                if kind_of(r) == SPILL {
                    spilled += 1;
                    if self.spill_index.get(&(at, self.spill.get(slot_of(r)).due))
                        != Some(&slot_of(r))
                    {
                        return bad(format!("spilled entry {r:#x} at {at} is not in its index"));
                    }
                }
                entries += 1;
                let slot = slot_of(r);
                let valid = match kind_of(r) {
                    GIVE_UP => {
                        flagged.0 += 1;
                        self.deps
                            .live_at(slot)
                            .is_some_and(|d| d.flagged() && d.give_up_at == at)
                    }
                    FORGET => {
                        flagged.1 += 1;
                        self.departs
                            .live_at(slot)
                            .is_some_and(|d| d.flagged() && d.forget_at == at)
                    }
                    ORPHAN | DEADLINE => {
                        *refs.entry(slot).or_default() += 1;
                        self.queues.live_at(slot).is_some()
                    }
                    _ => self.spill.live_at(slot).is_some(),
                };
                if !valid {
                    return bad(format!("due entry {r:#x} at {at} names nothing"));
                }
            }
        }
        if entries != self.due_len || spilled != self.spill_index.len() {
            return bad(format!(
                "{entries} due entries, {} counted; {spilled} spilled, {} indexed",
                self.due_len,
                self.spill_index.len()
            ));
        }
        let flags = (
            (0..self.deps.high())
                .filter(|&s| self.deps.live_at(s).is_some_and(DepRec::flagged))
                .count() as u64,
            (0..self.departs.high())
                .filter(|&s| self.departs.live_at(s).is_some_and(DepartRec::flagged))
                .count() as u64,
        );
        if flags != flagged {
            return bad(format!("flags {flags:?}, due references {flagged:?}"));
        }
        Ok(())
    }
}

/// [`Index::canonical`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Canonical {
    /// Per queue: rkid, next seq, bytes, bound, deposits.
    pub(crate) queues: Vec<(Rkid, u64, u64, bool, Vec<DepImage>)>,
    pub(crate) departures: Vec<(Rkid, DepositId, DepartureRecord)>,
    pub(crate) due: Vec<(Ms, Due)>,
    pub(crate) quarantine: Vec<((Rkid, u64), Vec<u8>)>,
    /// Deposits, bytes, elastic bytes.
    pub(crate) occupancy: (u64, u64, u64),
}

/// A mismatch of the in-memory index ([`StoreError::Corrupt`]).
fn bad<T>(what: String) -> StoreResult<T> {
    Err(StoreError::Corrupt(format!("in-memory index: {what}")))
}
