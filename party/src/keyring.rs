//! The arrival tuples a receiver knows, by `rkid` (Delivery §5, §6.2 stage
//! 2; §4.4: "the tuple is selected by the arrival channel's `rkid`"): for
//! each relationship, its pair context and the counterpart's card; and the
//! tombstones — retired `rkid`s still "known" at stage 2, whose keys are
//! gone, so their envelopes fail at stage 3.

use std::collections::BTreeSet;

use rltp_proofs::context::PairContext;
use rltp_proofs::multikey::Rkid;

use crate::ack::TupleKeys;
use crate::card::ContactCard;
use crate::relationship::Relationship;

/// One arrival tuple: this party's pair context and the counterpart's card.
#[derive(Debug, Clone)]
pub struct Tuple {
    own: PairContext,
    counterpart: Option<ContactCard>,
}

impl Tuple {
    /// This party's pair context (its anchor is the tuple's own anchor).
    pub fn own(&self) -> &PairContext {
        &self.own
    }

    /// The counterpart's card, when held.
    pub fn counterpart(&self) -> Option<&ContactCard> {
        self.counterpart.as_ref()
    }

    /// The tuple's key material for acknowledgement proofs.
    pub fn keys(&self) -> TupleKeys<'_> {
        TupleKeys {
            own: &self.own,
            counterpart_key: self.counterpart.as_ref().map(ContactCard::key_agreement),
        }
    }
}

/// What stage 2 finds for an `rkid`.
#[derive(Debug, Clone, Copy)]
pub enum Known<'k> {
    /// A live key: its tuple.
    Live(&'k Tuple),
    /// A tombstone: known, no key.
    Tombstone,
}

/// Every `rkid` this party issued: live tuples and tombstones.
#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    tuples: Vec<Tuple>,
    tombstones: BTreeSet<Rkid>,
}

impl KeyRing {
    /// The key ring of `relationships`.
    pub fn new(relationships: &[Relationship]) -> KeyRing {
        let mut ring = KeyRing::default();
        for relationship in relationships {
            ring.tuples.push(Tuple {
                own: relationship.pair().clone(),
                counterpart: relationship.counterpart().cloned(),
            });
            ring.tombstones
                .extend(relationship.tombstones().iter().copied());
        }
        ring
    }

    /// Stage 2's "known": a live tuple, a tombstone, or `None` (an
    /// identifier this party never issued: `malformed`).
    pub fn find(&self, rkid: &Rkid) -> Option<Known<'_>> {
        if let Some(tuple) = self.tuples.iter().find(|t| &t.own.rkid() == rkid) {
            return Some(Known::Live(tuple));
        }
        self.tombstones.contains(rkid).then_some(Known::Tombstone)
    }
}
