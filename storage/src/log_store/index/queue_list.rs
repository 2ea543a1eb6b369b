//! Each queue's deposits as a circular doubly linked list in `seq` order,
//! and the per-queue finger that makes the engine's lookups O(1).
use super::*;

impl Index {
    pub(super) fn finger(&self, qid: u32) -> Option<u32> {
        let f = self.fingers[qid as usize % FINGERS].load(Ordering::Relaxed);
        let (fq, slot) = ((f >> 32) as u32, f as u32);
        (fq == qid)
            .then_some(slot)
            .filter(|&s| self.deps.live_at(s).is_some_and(|d| d.qid == qid))
    }

    pub(super) fn set_finger(&self, qid: u32, slot: u32) {
        self.fingers[qid as usize % FINGERS]
            .store((u64::from(qid) << 32) | u64::from(slot), Ordering::Relaxed);
    }

    /// The first deposit of queue `qid` with `seq > after` (`None`: from
    /// the head), found from the finger.
    pub(crate) fn first_after(&self, qid: u32, after: Option<u64>) -> u32 {
        let head = self.queues.get(qid).head;
        let Some(after) = after else { return head };
        if head == NIL {
            return NIL;
        }
        let tail = self.deps.get(head).prev;
        if self.deps.get(tail).seq <= after {
            return NIL;
        }
        let mut at = self.finger(qid).unwrap_or(head);
        if self.deps.get(at).seq > after {
            // Walk back to the first one above `after`.
            while at != head {
                let prev = self.deps.get(at).prev;
                if self.deps.get(prev).seq <= after {
                    break;
                }
                at = prev;
            }
        } else {
            while self.deps.get(at).seq <= after {
                at = self.deps.get(at).next;
            }
        }
        self.set_finger(qid, at);
        at
    }

    /// The next deposit after `slot` in its queue (`NIL` at the tail).
    pub(crate) fn next_in_queue(&self, slot: u32) -> u32 {
        let d = self.deps.get(slot);
        let next = d.next;
        if next == self.queues.get(d.qid).head {
            NIL
        } else {
            next
        }
    }

    /// The held deposit `seq` of queue `qid`.
    pub(crate) fn find_seq(&self, qid: u32, seq: u64) -> Option<u32> {
        let at = self.first_after(qid, seq.checked_sub(1));
        (at != NIL && self.deps.get(at).seq == seq).then_some(at)
    }

    /// The held deposit of queue `qid` with this id.
    pub(crate) fn find_id(&self, qid: u32, id: &[u8; 32]) -> Option<u32> {
        let found = self.by_id.find(self.hash_qid(qid, id), |&s| {
            let d = self.deps.get(s);
            d.qid == qid && d.id == *id
        });
        if let Some(slot) = found {
            self.set_finger(qid, slot);
        }
        found
    }

    /// Up to `limit` deposits of `qid` after `after`, in order.
    pub(crate) fn list(&self, qid: u32, after: Option<u64>, limit: usize) -> Vec<u32> {
        let mut out = Vec::new();
        if limit == 0 {
            return out;
        }
        let mut at = self.first_after(qid, after);
        while at != NIL && out.len() < limit {
            out.push(at);
            at = self.next_in_queue(at);
        }
        if let Some(&last) = out.last() {
            self.set_finger(qid, last);
        }
        out
    }

    /// Links `slot` into its queue in `seq` order (at the tail, unless a
    /// replay re-inserts an older one).
    pub(super) fn link(&mut self, qid: u32, slot: u32) {
        let seq = self.deps.get(slot).seq;
        let head = self.queues.get(qid).head;
        if head == NIL {
            let d = self.deps.get_mut(slot);
            d.prev = slot;
            d.next = slot;
            self.queues.get_mut(qid).head = slot;
            return;
        }
        // The first deposit above `seq` (NIL: goes last).
        let before = self.first_after(qid, Some(seq));
        let next = if before == NIL { head } else { before };
        let prev = self.deps.get(next).prev;
        {
            let d = self.deps.get_mut(slot);
            d.prev = prev;
            d.next = next;
        }
        self.deps.get_mut(prev).next = slot;
        self.deps.get_mut(next).prev = slot;
        if before == head {
            self.queues.get_mut(qid).head = slot;
        }
    }

    pub(super) fn unlink(&mut self, slot: u32) {
        let d = *self.deps.get(slot);
        let q = self.queues.get_mut(d.qid);
        if d.next == slot {
            q.head = NIL;
        } else {
            if q.head == slot {
                q.head = d.next;
            }
            self.deps.get_mut(d.prev).next = d.next;
            self.deps.get_mut(d.next).prev = d.prev;
        }
    }
}
