//! Queue records: found by rkid, created on first use, freed when nothing
//! refers to them; binding flag and `seq` counter.
use super::*;

impl Index {
    /// The queue of `rkid`, if it has a record.
    pub(crate) fn queue(&self, rkid: &Rkid) -> Option<u32> {
        let key = rkid.as_bytes();
        self.by_rkid
            .find(self.hash_rkid(key), |&s| self.queues.get(s).rkid == *key)
    }

    /// When the oldest held deposit was admitted: the earliest head of any
    /// queue (a queue is in admission order). O(queues).
    pub(crate) fn oldest_admitted_at(&self) -> Option<u64> {
        (0..self.queues.high())
            .filter_map(|qid| self.queues.live_at(qid))
            .filter(|q| q.head != NIL)
            .filter_map(|q| self.deps.live_at(q.head))
            .map(|d| d.admitted_at)
            .min()
    }

    pub(crate) fn queue_rec(&self, qid: u32) -> &QueueRec {
        self.queues.get(qid)
    }

    /// The queue of `rkid`, created if it has none.
    pub(super) fn queue_or_create(&mut self, rkid: &Rkid) -> StoreResult<u32> {
        if let Some(qid) = self.queue(rkid) {
            return Ok(qid);
        }
        let qid = self.queues.alloc(QueueRec {
            rkid: *rkid.as_bytes(),
            head: NIL,
            meta: LIVE,
            ..QueueRec::default()
        })?;
        let (h, qs) = (&self.hasher, &self.queues);
        self.by_rkid.insert(h.hash_one(rkid.as_bytes()), qid, |&s| {
            h.hash_one(qs.get(s).rkid)
        });
        self.undo_push(Undo::QueueCreated(qid));
        Ok(qid)
    }

    /// Changes a queue's counters, saving their before-image.
    pub(super) fn queue_update(&mut self, qid: u32, f: impl FnOnce(&mut QueueRec)) {
        let q = *self.queues.get(qid);
        self.undo_push(Undo::QueueFields {
            qid,
            next_seq: q.next_seq,
            bytes: q.bytes,
            meta: q.meta,
        });
        f(self.queues.get_mut(qid));
    }

    /// Frees a queue that holds nothing and was never numbered.
    pub(super) fn maybe_free_queue(&mut self, qid: u32) {
        let q = *self.queues.get(qid);
        if q.live() && !q.bound() && q.head == NIL && q.next_seq == 0 && q.refs() == 0 {
            let hash = self.hash_rkid(&q.rkid);
            self.by_rkid.remove(hash, qid);
            self.queues.get_mut(qid).meta &= !LIVE;
            self.deferred.push((K_QUEUE, qid));
            self.undo_push(Undo::QueueFreed(qid));
        }
    }

    pub(super) fn add_refs(&mut self, qid: u32, delta: i32) {
        self.queue_update(qid, |q| {
            let refs = q.refs().saturating_add_signed(delta);
            q.meta = (q.meta & !REFS_MASK) | (refs & REFS_MASK);
        });
    }

    /// Whether `rkid` holds a binding (the projection of redb's table).
    pub(crate) fn bound(&self, rkid: &Rkid) -> bool {
        self.queue(rkid).is_some_and(|q| self.queues.get(q).bound())
    }

    /// Records that `rkid` holds a binding, or no longer does.
    pub(crate) fn set_bound(&mut self, rkid: &Rkid, bound: bool) -> StoreResult<()> {
        if self.bound(rkid) == bound {
            return Ok(());
        }
        let qid = self.queue_or_create(rkid)?;
        self.queue_update(qid, |q| {
            if bound {
                q.meta |= BOUND;
            } else {
                q.meta &= !BOUND;
            }
        });
        self.maybe_free_queue(qid);
        Ok(())
    }

    /// Raises a queue's last `seq` to at least `seq`.
    pub(crate) fn raise_next_seq(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<()> {
        let qid = self.queue_or_create(rkid)?;
        if self.queues.get(qid).next_seq < seq {
            self.queue_update(qid, |q| q.next_seq = seq);
        }
        self.maybe_free_queue(qid);
        Ok(())
    }
}
