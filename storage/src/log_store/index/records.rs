//! The index's records: a held deposit, a queue, a departure record and a
//! spilled due entry, their packed fields, and the images readers get.
use super::*;

pub(crate) const NIL: u32 = u32::MAX;
pub(super) const CHUNK_BITS: u32 = 12;
pub(super) const CHUNK: usize = 1 << CHUNK_BITS;
/// Slots are referenced from the due index in 29 bits.
pub(super) const REF_BITS: u32 = 29;
pub(super) const REF_MASK: u32 = (1 << REF_BITS) - 1;
/// The most slots of one kind.
pub(crate) const MAX_SLOTS: u32 = REF_MASK;

pub(super) const LIVE: u32 = 1 << 31;
pub(super) const FLAG: u32 = 1 << 30;
pub(super) const LEN_MASK: u32 = FLAG - 1;
pub(super) const BOUND: u32 = 1 << 30;
pub(super) const REFS_MASK: u32 = BOUND - 1;
pub(super) const GIVEN_UP: u32 = 1;

/// A held deposit (80 B).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct DepRec {
    pub(crate) id: [u8; 32],
    pub(crate) seq: u64,
    pub(crate) admitted_at: u64,
    pub(crate) give_up_at: u64,
    pub(crate) seg: u32,
    pub(crate) off: u32,
    /// Length, [`LIVE`], and [`FLAG`]: its give-up entry at its own
    /// give-up instant is a reference to it in the due index.
    pub(super) len: u32,
    pub(crate) qid: u32,
    pub(super) prev: u32,
    pub(super) next: u32,
}

/// A queue (52 B; a queue holds at most 4 GiB, and a carrier's
/// `max-queue-bytes` is at most 1 GiB).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed(4))]
pub(crate) struct QueueRec {
    pub(crate) rkid: [u8; 32],
    /// The last `seq` handed out (0: none).
    pub(crate) next_seq: u64,
    pub(super) bytes: u32,
    pub(super) head: u32,
    /// [`LIVE`], [`BOUND`] (the rkid holds a binding: s1 reads this, never
    /// redb), and the references to it (due entries, departure records).
    pub(super) meta: u32,
}

/// A departure record (48 B).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct DepartRec {
    pub(crate) id: [u8; 32],
    pub(crate) forget_at: u64,
    pub(crate) qid: u32,
    /// [`LIVE`], [`FLAG`] (its forget entry at its own instant is a
    /// reference to it), [`GIVEN_UP`].
    pub(super) meta: u32,
}

/// A due entry that no record holds (rare: the engine schedules none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpillRec {
    pub(super) due: Due,
    pub(super) live: bool,
}

impl Default for SpillRec {
    fn default() -> Self {
        SpillRec {
            due: Due::OrphanExpiry(Rkid::from_bytes([0; 32])),
            live: false,
        }
    }
}

const _: () = assert!(size_of::<DepRec>() == 80);
const _: () = assert!(size_of::<QueueRec>() == 52);
const _: () = assert!(size_of::<DepartRec>() == 48);

pub(crate) trait Slot: Copy + Default {
    fn live(&self) -> bool;
}
impl Slot for DepRec {
    fn live(&self) -> bool {
        self.len & LIVE != 0
    }
}
impl Slot for QueueRec {
    fn live(&self) -> bool {
        self.meta & LIVE != 0
    }
}
impl Slot for DepartRec {
    fn live(&self) -> bool {
        self.meta & LIVE != 0
    }
}
impl Slot for SpillRec {
    fn live(&self) -> bool {
        self.live
    }
}

impl DepRec {
    pub(crate) fn len(&self) -> u32 {
        self.len & LEN_MASK
    }
    pub(super) fn flagged(&self) -> bool {
        self.len & FLAG != 0
    }
    pub(crate) fn deposit(&self) -> Deposit {
        Deposit {
            seq: self.seq,
            id: DepositId(self.id),
            len: self.len(),
            admitted_at: self.admitted_at,
            give_up_at: self.give_up_at,
        }
    }
    pub(crate) fn image(&self) -> DepImage {
        DepImage {
            deposit: self.deposit(),
            seg: self.seg,
            off: self.off,
        }
    }
}

impl QueueRec {
    pub(crate) fn bound(&self) -> bool {
        self.meta & BOUND != 0
    }
    pub(super) fn refs(&self) -> u32 {
        self.meta & REFS_MASK
    }
    pub(crate) fn rkid(&self) -> Rkid {
        Rkid::from_bytes(self.rkid)
    }
    /// Bytes the queue holds.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(self.bytes)
    }
    pub(super) fn image(&self) -> QueueImage {
        QueueImage {
            next_seq: self.next_seq,
            bytes: self.bytes(),
        }
    }
}

impl DepartRec {
    pub(crate) fn record(&self) -> DepartureRecord {
        DepartureRecord {
            departure: if self.meta & GIVEN_UP != 0 {
                crate::Departure::GivenUp
            } else {
                crate::Departure::Concluded
            },
            forget_at: self.forget_at,
        }
    }
    pub(super) fn flagged(&self) -> bool {
        self.meta & FLAG != 0
    }
}

/// The bytes queue `q` holds with a deposit of `len` more (a queue holds
/// at most 4 GiB).
pub(super) fn fits_queue(q: &QueueRec, len: u32) -> StoreResult<u32> {
    q.bytes.checked_add(len).ok_or_else(|| {
        StoreError::Corrupt(format!("queue {} would hold more than 4 GiB", q.rkid()))
    })
}

/// A held deposit as a reader sees it: its metadata and where its bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DepImage {
    pub(crate) deposit: Deposit,
    pub(crate) seg: u32,
    pub(crate) off: u32,
}

/// A queue's counters as a reader sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QueueImage {
    pub(crate) next_seq: u64,
    pub(crate) bytes: u64,
}
