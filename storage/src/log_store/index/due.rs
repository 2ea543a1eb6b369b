//! The due index: per instant, a bucket of compact references to the
//! records whose horizon falls then (a deposit's give-up, a queue's
//! orphan expiry or deadline, a departure's forget), spilled entries for
//! anything else.
use super::*;

pub(super) const GIVE_UP: u32 = 0;
pub(super) const ORPHAN: u32 = 1;
pub(super) const DEADLINE: u32 = 2;
pub(super) const FORGET: u32 = 3;
pub(super) const SPILL: u32 = 4;

pub(super) fn mkref(kind: u32, slot: u32) -> u32 {
    (kind << REF_BITS) | slot
}
pub(super) fn kind_of(r: u32) -> u32 {
    r >> REF_BITS
}
pub(super) fn slot_of(r: u32) -> u32 {
    r & REF_MASK
}

/// The references due at one instant: a vector while small, a hash set
/// past [`BIG_BUCKET`] (a mass of entries at one instant stays O(1) each).
#[derive(Debug)]
pub(super) enum Bucket {
    /// Up to [`INLINE`] references, without a heap allocation (most
    /// instants hold a few).
    Inline(u8, [u32; INLINE]),
    Small(Vec<u32>),
    Big(Box<HashTable<u32>>),
}

pub(super) const INLINE: usize = 6;
pub(super) const BIG_BUCKET: usize = 64;
const _: () = assert!(size_of::<Bucket>() == 32);

pub(super) fn ref_hash(r: u32) -> u64 {
    u64::from(r)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(29)
}

impl Bucket {
    pub(super) fn one(r: u32) -> Bucket {
        Bucket::Inline(1, [r, 0, 0, 0, 0, 0])
    }
    pub(super) fn contains(&self, r: u32) -> bool {
        match self {
            Bucket::Inline(n, a) => a[..usize::from(*n)].contains(&r),
            Bucket::Small(v) => v.contains(&r),
            Bucket::Big(t) => t.find(ref_hash(r), |&x| x == r).is_some(),
        }
    }
    pub(super) fn push(&mut self, r: u32) {
        match self {
            Bucket::Inline(n, a) if usize::from(*n) < INLINE => {
                a[usize::from(*n)] = r;
                *n += 1;
            }
            Bucket::Inline(n, a) => {
                let mut v = a[..usize::from(*n)].to_vec();
                v.push(r);
                *self = Bucket::Small(v);
            }
            Bucket::Small(v) if v.len() < BIG_BUCKET => v.push(r),
            Bucket::Small(v) => {
                let mut t = HashTable::with_capacity(v.len() * 2);
                for &x in v.iter().chain(std::iter::once(&r)) {
                    t.insert_unique(ref_hash(x), x, |&y| ref_hash(y));
                }
                *self = Bucket::Big(Box::new(t));
            }
            Bucket::Big(t) => {
                t.insert_unique(ref_hash(r), r, |&y| ref_hash(y));
            }
        }
    }
    pub(super) fn remove(&mut self, r: u32) -> bool {
        match self {
            Bucket::Inline(n, a) => match a[..usize::from(*n)].iter().position(|&x| x == r) {
                Some(i) => {
                    *n -= 1;
                    a[i] = a[usize::from(*n)];
                    true
                }
                None => false,
            },
            Bucket::Small(v) => match v.iter().position(|&x| x == r) {
                Some(i) => {
                    v.swap_remove(i);
                    true
                }
                None => false,
            },
            Bucket::Big(t) => match t.find_entry(ref_hash(r), |&x| x == r) {
                Ok(entry) => {
                    entry.remove();
                    true
                }
                Err(_) => false,
            },
        }
    }
    pub(super) fn len(&self) -> usize {
        match self {
            Bucket::Inline(n, _) => usize::from(*n),
            Bucket::Small(v) => v.len(),
            Bucket::Big(t) => t.len(),
        }
    }
    pub(super) fn refs(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Bucket::Inline(n, a) => Box::new(a[..usize::from(*n)].iter().copied()),
            Bucket::Small(v) => Box::new(v.iter().copied()),
            Bucket::Big(t) => Box::new(t.iter().copied()),
        }
    }
    /// Bytes, with its share of the tree's node (about 1.5 × key and value).
    pub(super) fn heap_bytes(&self) -> usize {
        48 + match self {
            Bucket::Inline(..) => 0,
            Bucket::Small(v) => v.capacity() * 4,
            Bucket::Big(t) => t.capacity() * 5,
        }
    }
}

/// A due entry no record carries, with its queue's slot when it has one.
pub(crate) type LooseDue = (Ms, Due, Option<u32>);

impl Index {
    /// The entry a reference stands for.
    pub(super) fn due_of(&self, r: u32) -> Due {
        let slot = slot_of(r);
        match kind_of(r) {
            GIVE_UP => {
                let d = self.deps.get(slot);
                Due::GiveUp(self.queues.get(d.qid).rkid(), d.seq)
            }
            ORPHAN => Due::OrphanExpiry(self.queues.get(slot).rkid()),
            DEADLINE => Due::Deadline(self.queues.get(slot).rkid()),
            FORGET => {
                let d = self.departs.get(slot);
                Due::Forget(self.queues.get(d.qid).rkid(), DepositId(d.id))
            }
            _ => self.spill.get(slot).due,
        }
    }

    /// The compact reference `(at, due)` would have, if a record can hold it.
    pub(super) fn compact_ref(&self, at: Ms, due: &Due) -> Option<u32> {
        match *due {
            Due::GiveUp(rkid, seq) => self
                .queue(&rkid)
                .and_then(|q| {
                    self.find_seq(q, seq)
                        .or_else(|| self.removed_flagged.get(&(q, seq)).copied())
                })
                .filter(|&s| self.deps.get(s).give_up_at == at)
                .map(|s| mkref(GIVE_UP, s)),
            Due::Forget(rkid, id) => self
                .queue(&rkid)
                .and_then(|q| self.find_departure(q, &id.0))
                .filter(|&s| self.departs.get(s).forget_at == at)
                .map(|s| mkref(FORGET, s)),
            Due::OrphanExpiry(rkid) => self.queue(&rkid).map(|q| mkref(ORPHAN, q)),
            Due::Deadline(rkid) => self.queue(&rkid).map(|q| mkref(DEADLINE, q)),
        }
    }

    /// The reference `(at, due)` is held by: its compact one, or a spilled
    /// entry equal to it.
    pub(super) fn due_find(&self, at: Ms, due: &Due, compact: Option<u32>) -> Option<u32> {
        let bucket = self.due.get(&at)?;
        if let Some(r) = compact.filter(|&r| bucket.contains(r)) {
            return Some(r);
        }
        self.spill_index
            .get(&(at, *due))
            .map(|&slot| mkref(SPILL, slot))
    }

    pub(super) fn due_push(&mut self, at: Ms, r: u32) {
        self.due_len += 1;
        if kind_of(r) == SPILL {
            let slot = slot_of(r);
            self.spill_index
                .insert((at, self.spill.get(slot).due), slot);
        }
        if self.loading {
            self.staged.push((at, r));
            return;
        }
        match self.due.entry(at) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Bucket::one(r));
            }
            std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().push(r),
        }
    }

    /// Takes reference `r` out of the bucket of `at` (nothing else).
    pub(super) fn due_take(&mut self, at: Ms, r: u32) {
        if let Some(bucket) = self.due.get_mut(&at)
            && bucket.remove(r)
        {
            if bucket.len() == 0 {
                self.due.remove(&at);
            }
            self.due_len -= 1;
            if kind_of(r) == SPILL {
                let due = self.spill.get(slot_of(r)).due;
                self.spill_index.remove(&(at, due));
            }
        }
    }

    /// Drops reference `r` from the bucket of `at`, undoing what it stood
    /// for (the record's flag, the queue's reference count).
    pub(super) fn due_remove_ref(&mut self, at: Ms, r: u32) {
        self.due_take(at, r);
        let slot = slot_of(r);
        match kind_of(r) {
            GIVE_UP => {
                let d = self.deps.get_mut(slot);
                d.len &= !FLAG;
                let key = (d.qid, d.seq);
                self.removed_flagged.remove(&key);
            }
            FORGET => self.departs.get_mut(slot).meta &= !FLAG,
            ORPHAN | DEADLINE => {
                self.add_refs(slot, -1);
            }
            _ => {
                self.spill.get_mut(slot).live = false;
                self.deferred.push((K_SPILL, slot));
            }
        }
        self.undo_push(Undo::DueRemoved { at, r });
        if matches!(kind_of(r), ORPHAN | DEADLINE) {
            self.maybe_free_queue(slot);
        }
    }

    pub(super) fn due_add_spill(&mut self, at: Ms, due: Due) -> StoreResult<()> {
        let slot = self.spill.alloc(SpillRec { due, live: true })?;
        let r = mkref(SPILL, slot);
        self.due_push(at, r);
        self.undo_push(Undo::DueAdded { at, r });
        Ok(())
    }

    /// Adds `(at, due)` (a set: adding it twice is one entry).
    pub(crate) fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let compact = self.compact_ref(at, due);
        let held = compact.is_some_and(|r| match kind_of(r) {
            GIVE_UP => self.deps.get(slot_of(r)).flagged(),
            FORGET => self.departs.get(slot_of(r)).flagged(),
            _ => false,
        });
        if held || self.due_find(at, due, compact).is_some() {
            return Ok(());
        }
        let r = match *due {
            Due::GiveUp(..) | Due::Forget(..) => compact,
            Due::OrphanExpiry(rkid) | Due::Deadline(rkid) => {
                let qid = self.queue_or_create(&rkid)?;
                let kind = if matches!(due, Due::Deadline(_)) {
                    DEADLINE
                } else {
                    ORPHAN
                };
                Some(mkref(kind, qid))
            }
        };
        let Some(r) = r else {
            return self.due_add_spill(at, *due);
        };
        match kind_of(r) {
            GIVE_UP => self.deps.get_mut(slot_of(r)).len |= FLAG,
            FORGET => self.departs.get_mut(slot_of(r)).meta |= FLAG,
            _ => self.add_refs(slot_of(r), 1),
        }
        self.due_push(at, r);
        self.undo_push(Undo::DueAdded { at, r });
        Ok(())
    }

    /// Removes `(at, due)` if present.
    pub(crate) fn unschedule(&mut self, at: Ms, due: &Due) {
        let compact = self.compact_ref(at, due);
        if let Some(r) = self.due_find(at, due, compact) {
            self.due_remove_ref(at, r);
        }
    }

    /// Whether deposit `slot`'s give-up entry is its compact reference.
    pub(crate) fn give_up_flagged(&self, slot: u32) -> bool {
        self.deps.get(slot).flagged()
    }

    /// Whether departure `slot`'s forget entry is its compact reference.
    pub(crate) fn forget_flagged(&self, slot: u32) -> bool {
        self.departs.get(slot).flagged()
    }

    /// Due entries with instant ≤ `upto`, earliest first (ties in the
    /// order of [`Due`]), at most `limit` — whole instants at a time, so
    /// the caller may need to cut.
    pub(crate) fn due_upto(&self, upto: Ms, limit: usize) -> Vec<(Ms, Due)> {
        let mut out = Vec::new();
        for (&at, bucket) in self.due.range(..=upto) {
            if out.len() >= limit {
                break;
            }
            let start = out.len();
            out.extend(bucket.refs().map(|r| {
                if kind_of(r) == GIVE_UP {
                    self.set_finger(self.deps.get(slot_of(r)).qid, slot_of(r));
                }
                (at, self.due_of(r))
            }));
            out[start..].sort_unstable();
        }
        out
    }

    pub(crate) fn next_due(&self) -> Option<Ms> {
        self.due.keys().next().copied()
    }

    /// The due entries from instant `from` on that no deposit or departure
    /// record carries (those travel with their record in a snapshot), at
    /// most about `limit` (whole instants): `(entries, next instant)`.
    /// … with, for an orphan expiry or deadline, the slot of its queue (a
    /// hint for the loader).
    pub(crate) fn due_loose_chunk(&self, from: Ms, limit: usize) -> (Vec<LooseDue>, Option<Ms>) {
        let mut out = Vec::new();
        let mut seen = 0usize;
        for (&at, bucket) in self.due.range(from..) {
            if seen >= limit {
                return (out, Some(at));
            }
            seen += bucket.len();
            out.extend(
                bucket
                    .refs()
                    .filter(|&r| !matches!(kind_of(r), GIVE_UP | FORGET))
                    .map(|r| {
                        let hint = matches!(kind_of(r), ORPHAN | DEADLINE).then(|| slot_of(r));
                        (at, self.due_of(r), hint)
                    }),
            );
        }
        (out, None)
    }
}
