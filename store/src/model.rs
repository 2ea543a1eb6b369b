//! The durable state of a carrier, as plain data (no storage engine types).
//!
//! Every time is milliseconds since the Unix epoch as read from the engine's
//! injected clock ([`Ms`]); every size is bytes.

use rltp_proofs::multikey::Rkid;

pub use rltp_proofs::deposit::{DepositId, Ms};

/// The phase of a held binding (§5a.3 state table: `live(g, P)` or
/// `closing(g, P)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `live(g, P)`.
    Live,
    /// `closing(g, P)` (§5a.9 wind-up) with its fixed deadline: the instant
    /// closing began + `give-up-horizon`. The deadline never moves.
    Closing {
        /// The wind-up deadline (ms).
        deadline: Ms,
    },
}

/// A held binding `rkid → (phase, g, P, last_collection_at)` (§5a.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    /// `live` or `closing`.
    pub phase: Phase,
    /// The recorded generation `g` (Identity §7a.3 domain `[1, 2^53−1]`).
    pub generation: u64,
    /// The bound control principal `P` (Ed25519 public key bytes).
    pub principal: [u8; 32],
    /// When the binding was last registered or collected (ms); the orphan
    /// horizon runs from here (§5a.9).
    pub last_collection_at: Ms,
}

/// A binding tombstone `released(t)` (§5a.3): the highest generation ever
/// accepted for an `rkid` whose binding was released.
///
/// Eviction order (§5a.3): longest-released first, i.e. ascending
/// `released_at`, ties by ascending `rkid` key bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tombstone {
    /// `t`: the highest generation ever accepted.
    pub generation: u64,
    /// The normative instant of the release (the wind-up deadline), ms.
    pub released_at: Ms,
}

/// One held deposit's metadata (the bytes are read separately).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deposit {
    /// Position in the queue's admission order (strictly increasing per queue).
    pub seq: u64,
    /// SHA-256 of the envelope bytes.
    pub id: DepositId,
    /// Envelope size in bytes.
    pub len: u32,
    /// When it was admitted (ms).
    pub admitted_at: Ms,
    /// Its own give-up instant: `admitted_at + give-up-horizon` (ms). While
    /// the binding is closing, the effective instant is
    /// `min(give_up_at, deadline)` (§5a.9).
    pub give_up_at: Ms,
}

/// What the sender status path remembers about a deposit that left the
/// queue (§5a.8, §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// Concluded by the recipient. Reported as `accepted` (a carrier never
    /// reveals a conclusion) until `forget_at`.
    Concluded,
    /// Given up at the give-up horizon or the wind-up deadline: reported as
    /// `given-up` until `forget_at`.
    GivenUp,
}

/// A remembered departure and when it is forgotten (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepartureRecord {
    /// How the deposit left.
    pub departure: Departure,
    /// When the record is dropped and the status becomes `unknown`.
    pub forget_at: Ms,
}

/// A horizon the due-time index drives (§5a.9, §5a.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Due {
    /// `last_collection_at + orphan-horizon` of a live binding.
    OrphanExpiry(Rkid),
    /// The wind-up deadline of a closing binding.
    Deadline(Rkid),
    /// A deposit's own give-up instant (`queue`, `seq`).
    GiveUp(Rkid, u64),
    /// The end of a departure record (`queue`, deposit id).
    Forget(Rkid, DepositId),
}

impl Due {
    /// The queue the entry is about.
    pub fn rkid(&self) -> &Rkid {
        match self {
            Due::OrphanExpiry(rkid)
            | Due::Deadline(rkid)
            | Due::GiveUp(rkid, _)
            | Due::Forget(rkid, _) => rkid,
        }
    }
}

/// Byte occupancy (s5, s6, guarantee 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Occupancy {
    /// Bytes held across all queues.
    pub total_bytes: u64,
    /// Held bindings (live + closing).
    pub bindings: u64,
    /// Held deposits.
    pub deposits: u64,
    /// Binding tombstones.
    pub tombstones: u64,
    /// Σ over queues of `max(0, queue_bytes − queue_floor)`, maintained by
    /// the engine through [`crate::WriteTxn::add_elastic_bytes`].
    pub elastic_bytes: u64,
}

/// What a decision needs from an escrowed budget ([`crate::WriteTxn::escrow`]):
/// bytes above the floors, and binding slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Need {
    /// Bytes (an arrival's floor, or a deposit's growth above its floor).
    pub bytes: u64,
    /// Binding slots (1 for an arrival).
    pub slots: u64,
}

/// What a write transaction may spend of an escrowed budget
/// ([`crate::WriteTxn::escrow`], `PROTOCOL.md` §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Escrow {
    /// Bytes.
    pub bytes: u64,
    /// Binding slots.
    pub slots: u64,
}

/// A published declaration revision (§4.4): the signed document bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclarationRecord {
    /// The `revision` (canonical decimal in the document; here its value).
    pub revision: u64,
    /// The signed `registry-declaration/0.1` document, JCS bytes.
    pub document: Vec<u8>,
}
