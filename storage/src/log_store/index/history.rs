//! MVCC for read snapshots: a committed transaction's before-images
//! ([`History`]) and a reader's [`View`] of the state at its version.
use super::*;

/// What a key held before a transaction changed it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    Dep(Rkid, u64),
    Queue(Rkid),
    Depart(Rkid, DepositId),
    Due(Ms, Due),
    Quarantine(Rkid, u64),
    Occupancy,
}

/// A before-image (see [`Key`]).
#[derive(Debug, Clone)]
pub(crate) enum Before {
    Dep(Option<DepImage>),
    Queue(QueueImage),
    Depart(Option<DepartureRecord>),
    Due(bool),
    Quarantine(Option<Vec<u8>>),
    Occupancy(Occupancy),
}

/// The before-images of one committed transaction, first per key.
pub(crate) type History = BTreeMap<Key, Before>;

impl Index {
    /// The before-images of an undo log, first per key (the records it
    /// names are all still allocated: frees wait for the commit).
    pub(super) fn images(&self, undo: &[Undo]) -> History {
        let mut out = History::new();
        for u in undo {
            let (key, before) = match u {
                Undo::DepAdded(slot) => {
                    let d = self.deps.get(*slot);
                    (
                        Key::Dep(self.queues.get(d.qid).rkid(), d.seq),
                        Before::Dep(None),
                    )
                }
                Undo::DepRemoved(slot) => {
                    let d = self.deps.get(*slot);
                    (
                        Key::Dep(self.queues.get(d.qid).rkid(), d.seq),
                        Before::Dep(Some(d.image())),
                    )
                }
                Undo::DepMoved { slot, seg, off } => {
                    let d = self.deps.get(*slot);
                    let mut image = d.image();
                    image.seg = *seg;
                    image.off = *off;
                    (
                        Key::Dep(self.queues.get(d.qid).rkid(), d.seq),
                        Before::Dep(Some(image)),
                    )
                }
                Undo::QueueCreated(qid) => (
                    Key::Queue(self.queues.get(*qid).rkid()),
                    Before::Queue(QueueImage::default()),
                ),
                Undo::QueueFields {
                    qid,
                    next_seq,
                    bytes,
                    ..
                } => (
                    Key::Queue(self.queues.get(*qid).rkid()),
                    Before::Queue(QueueImage {
                        next_seq: *next_seq,
                        bytes: u64::from(*bytes),
                    }),
                ),
                Undo::QueueFreed(_) => continue,
                Undo::DueAdded { at, r } => (Key::Due(*at, self.due_of(*r)), Before::Due(false)),
                Undo::DueRemoved { at, r } => (Key::Due(*at, self.due_of(*r)), Before::Due(true)),
                Undo::DepartAdded(slot) => {
                    let d = self.departs.get(*slot);
                    (
                        Key::Depart(self.queues.get(d.qid).rkid(), DepositId(d.id)),
                        Before::Depart(None),
                    )
                }
                Undo::DepartRemoved(slot) => {
                    let d = self.departs.get(*slot);
                    (
                        Key::Depart(self.queues.get(d.qid).rkid(), DepositId(d.id)),
                        Before::Depart(Some(d.record())),
                    )
                }
                Undo::DepartChanged { slot, before } => {
                    let d = self.departs.get(*slot);
                    (
                        Key::Depart(self.queues.get(d.qid).rkid(), DepositId(d.id)),
                        Before::Depart(Some(before.record())),
                    )
                }
                Undo::Occupancy(o) => (Key::Occupancy, Before::Occupancy(*o)),
                Undo::Quarantine { key, before } => (
                    Key::Quarantine(key.0, key.1),
                    Before::Quarantine(before.clone()),
                ),
            };
            out.entry(key).or_insert(before);
        }
        out
    }

    /// What a snapshot at `version` overlays on the current state: the
    /// before-images of later commits (oldest first) and of the open
    /// transaction.
    pub(crate) fn view(&self, version: u64) -> View<'_> {
        let layers = self
            .history
            .iter()
            .filter(|(v, _)| *v > version)
            .map(|(_, h)| std::sync::Arc::clone(h))
            .collect::<Vec<_>>();
        let open = (!self.open.is_empty()).then(|| self.images(&self.open));
        View {
            ix: self,
            layers,
            open,
        }
    }
}

/// A snapshot's view: the current state with later changes taken back.
pub(crate) struct View<'a> {
    pub(crate) ix: &'a Index,
    pub(super) layers: Vec<std::sync::Arc<History>>,
    pub(super) open: Option<History>,
}

impl View<'_> {
    pub(super) fn layers(&self) -> impl Iterator<Item = &History> {
        self.layers.iter().map(|h| &**h).chain(self.open.iter())
    }

    /// Whether the view differs from the current state at all.
    pub(super) fn overlaid(&self) -> bool {
        !self.layers.is_empty() || self.open.is_some()
    }

    /// The before-image of `key` (the value the snapshot sees), if a later
    /// change touched it.
    pub(crate) fn before(&self, key: &Key) -> Option<&Before> {
        self.layers().find_map(|h| h.get(key))
    }

    /// The before-images of keys in `range`, first per key.
    pub(super) fn range(&self, from: Key, to: Key) -> BTreeMap<Key, Before> {
        let mut out = BTreeMap::new();
        for h in self.layers() {
            for (k, b) in h.range(from.clone()..=to.clone()) {
                out.entry(k.clone()).or_insert_with(|| b.clone());
            }
        }
        out
    }

    pub(super) fn dep_range(&self, rkid: &Rkid) -> BTreeMap<u64, Option<DepImage>> {
        if !self.overlaid() {
            return BTreeMap::new();
        }
        self.range(Key::Dep(*rkid, 0), Key::Dep(*rkid, u64::MAX))
            .into_iter()
            .filter_map(|(k, b)| match (k, b) {
                (Key::Dep(_, seq), Before::Dep(image)) => Some((seq, image)),
                _ => None,
            })
            .collect()
    }

    /// Up to `limit` deposits of `rkid` after `after`, as the snapshot sees them.
    pub(crate) fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> Vec<DepImage> {
        let overlay = self.dep_range(rkid);
        let from = after.map_or(0, |a| a.saturating_add(1));
        let mut over = overlay.range(from..).peekable();
        let mut current = self
            .ix
            .queue(rkid)
            .map_or(NIL, |q| self.ix.first_after(q, after));
        let mut out = Vec::new();
        while out.len() < limit {
            let cur_seq = (current != NIL).then(|| self.ix.deps.get(current).seq);
            let ov_seq = over.peek().map(|(s, _)| **s);
            let take_current = match (cur_seq, ov_seq) {
                (None, None) => break,
                (Some(c), Some(o)) => c < o,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if take_current {
                out.push(self.ix.deps.get(current).image());
                current = self.ix.next_in_queue(current);
            } else if let Some((&seq, image)) = over.next() {
                // The snapshot's own image of this seq (none: not there yet).
                out.extend(*image);
                if cur_seq == Some(seq) {
                    current = self.ix.next_in_queue(current);
                }
            }
        }
        out
    }

    /// The deposit of `rkid` with this id, as the snapshot sees it.
    pub(crate) fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> Option<DepImage> {
        let overlay = self.dep_range(rkid);
        if let Some(image) = overlay
            .values()
            .flatten()
            .find(|image| image.deposit.id == *id)
        {
            return Some(*image);
        }
        let qid = self.ix.queue(rkid)?;
        let slot = self.ix.find_id(qid, &id.0)?;
        let d = self.ix.deps.get(slot);
        if overlay.contains_key(&d.seq) {
            // Not there yet for this snapshot, or changed (found above).
            return None;
        }
        Some(d.image())
    }

    /// The deposit `seq` of `rkid`, as the snapshot sees it.
    pub(crate) fn deposit(&self, rkid: &Rkid, seq: u64) -> Option<DepImage> {
        if let Some(Before::Dep(image)) = self.before(&Key::Dep(*rkid, seq)) {
            return *image;
        }
        let qid = self.ix.queue(rkid)?;
        self.ix
            .find_seq(qid, seq)
            .map(|s| self.ix.deps.get(s).image())
    }

    pub(crate) fn queue(&self, rkid: &Rkid) -> QueueImage {
        if let Some(Before::Queue(image)) = self.before(&Key::Queue(*rkid)) {
            return *image;
        }
        self.ix
            .queue(rkid)
            .map(|q| self.ix.queues.get(q).image())
            .unwrap_or_default()
    }

    pub(crate) fn occupancy(&self) -> Occupancy {
        match self.before(&Key::Occupancy) {
            Some(Before::Occupancy(o)) => *o,
            _ => self.ix.occupancy,
        }
    }

    pub(crate) fn departure(&self, rkid: &Rkid, id: &DepositId) -> Option<DepartureRecord> {
        match self.before(&Key::Depart(*rkid, *id)) {
            Some(Before::Depart(record)) => *record,
            _ => self.ix.departure(rkid, id),
        }
    }

    pub(crate) fn due(&self, upto: Ms, limit: usize) -> Vec<(Ms, Due)> {
        let overlay: Vec<((Ms, Due), bool)> = if self.overlaid() {
            self.range(
                Key::Due(0, Due::OrphanExpiry(Rkid::from_bytes([0; 32]))),
                Key::Due(
                    upto,
                    Due::Forget(Rkid::from_bytes([255; 32]), DepositId([255; 32])),
                ),
            )
            .into_iter()
            .filter_map(|(k, b)| match (k, b) {
                (Key::Due(at, due), Before::Due(present)) => Some(((at, due), present)),
                _ => None,
            })
            .collect()
        } else {
            Vec::new()
        };
        // The current entries, enough of them to fill `limit` after the
        // ones the snapshot does not see are taken out.
        let mut current = self.ix.due_upto(upto, limit.saturating_add(overlay.len()));
        current.retain(|e| !overlay.iter().any(|(k, _)| k == e));
        current.extend(overlay.into_iter().filter(|(_, p)| *p).map(|(k, _)| k));
        current.sort_unstable();
        current.truncate(limit);
        current
    }

    pub(crate) fn quarantined(&self) -> u64 {
        let mut count = self.ix.quarantine.len() as i64;
        if self.overlaid() {
            for (key, before) in self.range(
                Key::Quarantine(Rkid::from_bytes([0; 32]), 0),
                Key::Quarantine(Rkid::from_bytes([255; 32]), u64::MAX),
            ) {
                if let (Key::Quarantine(r, s), Before::Quarantine(b)) = (key, before) {
                    let now = self.ix.quarantine.contains_key(&(r, s));
                    count += i64::from(b.is_some()) - i64::from(now);
                }
            }
        }
        count.max(0) as u64
    }
}
