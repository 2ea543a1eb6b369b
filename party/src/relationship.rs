//! The relationship model (Identity §5.1–§5.2, §6.1, §7a): what one party
//! holds about one relationship, and the serialisable record it is kept as.
//!
//! - The **pair context** comes from the party's own 32-byte pair nonce
//!   (§6.1 `pair/<digest>`), drawn fresh at relationship creation and never
//!   on the wire; from it derive the pair anchor (Ed25519, the documents'
//!   `issuer`/`recipient`) and the `rkid` (X25519, the card's
//!   `keyAgreement`) (§5.1–§5.2, [`rltp_proofs::context`]).
//! - The **carrier nonces** are a separate register (§7a.3): entries
//!   `{nonce, generation}`, never derived from the pair nonce, superseded
//!   and never deleted; the canonical one (highest generation, ties to the
//!   bytewise-smallest nonce) derives the control principal per carrier
//!   (§7a.4). One nonce serves every carrier of the relationship.
//! - The **own card** is signed under the pair anchor; the
//!   **counterpart's card** is what this party seals to and acknowledges
//!   toward.
//! - **Tombstones** are retired `rkid`s whose keys are destroyed (Delivery
//!   §5): still "known" at stage 2, so an envelope sealed to one fails at
//!   stage 3 as `decryption-failed`.

use ed25519_dalek::SigningKey;
use rltp_proofs::context::PairContext;
use rltp_proofs::encoding::{b64url_decode, b64url_decode_array, b64url_encode};
use rltp_proofs::identity::{CarrierId, GENERATION_MAX, GENERATION_MIN, control_principal};
use rltp_proofs::json::{self, Value};
use rltp_proofs::multikey::{DidKey, Rkid};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::card::{CardError, ContactCard};
use crate::hint::DeliveryHint;

/// The record's version tag.
pub const RECORD_VERSION: &str = "rltp-party-relationship/1";
/// The shortest root IKM accepted (the key file's 32 random bytes).
pub const ROOT_IKM_MIN: usize = 32;
/// The longest root IKM accepted (Identity §4: the 64-byte BIP-39 seed).
pub const ROOT_IKM_MAX: usize = 64;

/// Why a relationship record is refused. A refused record changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelationshipError {
    /// `v` is not [`RECORD_VERSION`].
    #[error("relationship record version {0:?}, expected {RECORD_VERSION:?}")]
    Version(String),
    /// A byte field is not canonical base64url of the right length.
    #[error("{0} is not canonical base64url of the right length")]
    Bytes(&'static str),
    /// A carrier nonce's generation lies outside `[1, 2^53 − 1]` (§7a.3).
    #[error("carrier nonce generation {0} outside [1, 2^53 - 1]")]
    Generation(u64),
    /// A carrier nonce equals the pair nonce (§7a.3: a sibling, never the same value).
    #[error("a carrier nonce equals the pair nonce (Identity 7a.3)")]
    NonceReuse,
    /// The own card does not verify, or names another anchor or key than
    /// the pair context derives.
    #[error("own card: {0}")]
    OwnCard(String),
    /// The counterpart's card does not verify.
    #[error("counterpart card: {0}")]
    CounterpartCard(CardError),
    /// A tombstone is not an X25519 Multikey.
    #[error("tombstone {0:?} is not an x25519 multikey")]
    Tombstone(String),
}

/// Identity §7a.3: one carrier-nonce register entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CarrierNonce {
    /// The 32-byte nonce `N`.
    pub nonce: [u8; 32],
    /// Its generation, `[1, 2^53 − 1]`.
    pub generation: u64,
}

/// The record as serialised (JSON, camelCase). Byte fields are canonical
/// unpadded base64url; cards are the signed card objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RelationshipRecord {
    /// [`RECORD_VERSION`].
    pub v: String,
    /// The holder's root IKM (Identity §4), 32–64 bytes.
    pub root_ikm: String,
    /// The pair nonce of the active pair context (§6.1), 32 bytes.
    pub pair_nonce: String,
    /// The carrier-nonce register (§7a.3), superseded entries included.
    pub carrier_nonces: Vec<CarrierNonceRecord>,
    /// The own signed card.
    pub own_card: Option<serde_json::Value>,
    /// The counterpart's signed card, once held.
    pub counterpart_card: Option<serde_json::Value>,
    /// Retired `rkid`s (Multikeys) whose private keys are destroyed.
    pub tombstones: Vec<String>,
}

/// One serialised carrier-nonce entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CarrierNonceRecord {
    /// `N`, 32 bytes, base64url.
    pub nonce: String,
    /// The generation.
    pub generation: u64,
}

/// One relationship, validated: every derived value is re-derived from the
/// root and the nonces, never trusted from storage.
#[derive(Clone)]
pub struct Relationship {
    root_ikm: Zeroizing<Vec<u8>>,
    pair_nonce: Zeroizing<[u8; 32]>,
    pair: PairContext,
    carrier_nonces: Vec<CarrierNonce>,
    own_card: Option<ContactCard>,
    counterpart: Option<ContactCard>,
    tombstones: Vec<Rkid>,
}

impl std::fmt::Debug for Relationship {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relationship")
            .field("pair", &self.pair)
            .field(
                "counterpart",
                &self.counterpart.as_ref().map(|c| c.anchor().to_did_key()),
            )
            .finish_non_exhaustive()
    }
}

fn check_generation(generation: u64) -> Result<u64, RelationshipError> {
    if (GENERATION_MIN..=GENERATION_MAX).contains(&generation) {
        Ok(generation)
    } else {
        Err(RelationshipError::Generation(generation))
    }
}

impl Relationship {
    /// Creates a relationship: draws the pair nonce and the first carrier
    /// nonce (generation 1) from `rng`, derives the pair context, and signs
    /// the own displayed card with `hints` at `created`.
    ///
    /// # Errors
    /// [`RelationshipError::Bytes`] for a root IKM outside 32–64 bytes,
    /// [`RelationshipError::OwnCard`] for unusable hints.
    pub fn create<R: rand::CryptoRng + ?Sized>(
        root_ikm: &[u8],
        rng: &mut R,
        hints: &[DeliveryHint],
        created: &str,
    ) -> Result<Relationship, RelationshipError> {
        let mut pair_nonce = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(pair_nonce.as_mut());
        let mut carrier = [0u8; 32];
        rng.fill_bytes(&mut carrier);
        let mut relationship = Relationship::derive(root_ikm, *pair_nonce)?;
        relationship.add_carrier_nonce(CarrierNonce {
            nonce: carrier,
            generation: GENERATION_MIN,
        })?;
        let card = ContactCard::sign_displayed(&relationship.pair, hints, created)
            .map_err(|e| RelationshipError::OwnCard(e.to_string()))?;
        relationship.own_card = Some(card);
        Ok(relationship)
    }

    /// The relationship of `root_ikm` and `pair_nonce`, with no carrier
    /// nonce, card or tombstone yet.
    ///
    /// # Errors
    /// [`RelationshipError::Bytes`] for a root IKM outside 32–64 bytes.
    pub fn derive(
        root_ikm: &[u8],
        pair_nonce: [u8; 32],
    ) -> Result<Relationship, RelationshipError> {
        if !(ROOT_IKM_MIN..=ROOT_IKM_MAX).contains(&root_ikm.len()) {
            return Err(RelationshipError::Bytes("rootIkm"));
        }
        Ok(Relationship {
            pair: PairContext::from_nonce(root_ikm, &pair_nonce),
            root_ikm: Zeroizing::new(root_ikm.to_vec()),
            pair_nonce: Zeroizing::new(pair_nonce),
            carrier_nonces: Vec::new(),
            own_card: None,
            counterpart: None,
            tombstones: Vec::new(),
        })
    }

    /// Reads a record, re-deriving and checking everything.
    ///
    /// # Errors
    /// The first [`RelationshipError`].
    pub fn from_record(record: &RelationshipRecord) -> Result<Relationship, RelationshipError> {
        if record.v != RECORD_VERSION {
            return Err(RelationshipError::Version(record.v.clone()));
        }
        let root = Zeroizing::new(
            b64url_decode(&record.root_ikm).map_err(|_| RelationshipError::Bytes("rootIkm"))?,
        );
        let pair_nonce = b64url_decode_array::<32>(&record.pair_nonce)
            .map_err(|_| RelationshipError::Bytes("pairNonce"))?;
        let mut relationship = Relationship::derive(&root, pair_nonce)?;
        for entry in &record.carrier_nonces {
            let nonce = b64url_decode_array::<32>(&entry.nonce)
                .map_err(|_| RelationshipError::Bytes("carrierNonces.nonce"))?;
            relationship.add_carrier_nonce(CarrierNonce {
                nonce,
                generation: entry.generation,
            })?;
        }
        if let Some(card) = &record.own_card {
            relationship.own_card = Some(relationship.check_own_card(card)?);
        }
        if let Some(card) = &record.counterpart_card {
            let card = ContactCard::verify(&json::from_serde(card))
                .map_err(RelationshipError::CounterpartCard)?;
            relationship.counterpart = Some(card);
        }
        for rkid in &record.tombstones {
            let parsed =
                Rkid::parse(rkid).map_err(|_| RelationshipError::Tombstone(rkid.clone()))?;
            relationship.tombstones.push(parsed);
        }
        Ok(relationship)
    }

    fn check_own_card(&self, card: &serde_json::Value) -> Result<ContactCard, RelationshipError> {
        let card = ContactCard::verify(&json::from_serde(card))
            .map_err(|e| RelationshipError::OwnCard(e.to_string()))?;
        if card.anchor() != &self.anchor() || card.key_agreement() != &self.rkid() {
            return Err(RelationshipError::OwnCard(
                "the card names another anchor or key than the pair context derives".into(),
            ));
        }
        Ok(card)
    }

    /// The record to keep.
    pub fn to_record(&self) -> RelationshipRecord {
        let card = |c: &Option<ContactCard>| {
            c.as_ref()
                .and_then(|c| crate::document::to_serde(&Value::Object(c.object().clone())))
        };
        RelationshipRecord {
            v: RECORD_VERSION.to_owned(),
            root_ikm: b64url_encode(&self.root_ikm),
            pair_nonce: b64url_encode(self.pair_nonce.as_ref()),
            carrier_nonces: self
                .carrier_nonces
                .iter()
                .map(|n| CarrierNonceRecord {
                    nonce: b64url_encode(&n.nonce),
                    generation: n.generation,
                })
                .collect(),
            own_card: card(&self.own_card),
            counterpart_card: card(&self.counterpart),
            tombstones: self.tombstones.iter().map(Rkid::to_multikey).collect(),
        }
    }

    /// The active pair context.
    pub fn pair(&self) -> &PairContext {
        &self.pair
    }

    /// The pair anchor (Identity §5.1, §8.1).
    pub fn anchor(&self) -> DidKey {
        self.pair.anchor()
    }

    /// The `rkid` of the pair context (Identity §5.2).
    pub fn rkid(&self) -> Rkid {
        self.pair.rkid()
    }

    /// The own signed card, if one was made.
    pub fn own_card(&self) -> Option<&ContactCard> {
        self.own_card.as_ref()
    }

    /// The counterpart's card, once held.
    pub fn counterpart(&self) -> Option<&ContactCard> {
        self.counterpart.as_ref()
    }

    /// Records the counterpart's (verified) card.
    pub fn set_counterpart(&mut self, card: ContactCard) {
        self.counterpart = Some(card);
    }

    /// Retired `rkid`s, still known at stage 2 (Delivery §5).
    pub fn tombstones(&self) -> &[Rkid] {
        &self.tombstones
    }

    /// Adds a carrier-nonce entry (§7a.3: entries are superseded, never
    /// deleted; an entry already held changes nothing).
    ///
    /// # Errors
    /// [`RelationshipError::Generation`] outside the domain,
    /// [`RelationshipError::NonceReuse`] for the pair nonce.
    pub fn add_carrier_nonce(&mut self, entry: CarrierNonce) -> Result<(), RelationshipError> {
        check_generation(entry.generation)?;
        if entry.nonce == *self.pair_nonce {
            return Err(RelationshipError::NonceReuse);
        }
        if !self.carrier_nonces.contains(&entry) {
            self.carrier_nonces.push(entry);
        }
        Ok(())
    }

    /// Every carrier-nonce entry held, superseded ones included.
    pub fn carrier_nonces(&self) -> &[CarrierNonce] {
        &self.carrier_nonces
    }

    /// Identity §7a.3: the canonical entry — the highest generation, and
    /// among equal generations the bytewise-smallest nonce.
    pub fn canonical_carrier_nonce(&self) -> Option<&CarrierNonce> {
        self.carrier_nonces.iter().min_by(|a, b| {
            b.generation
                .cmp(&a.generation)
                .then_with(|| a.nonce.cmp(&b.nonce))
        })
    }

    /// Identity §7a.4: the control principal at carrier `c`, from the
    /// canonical carrier nonce (`None` before any carrier nonce exists).
    pub fn principal(&self, c: &CarrierId) -> Option<(SigningKey, DidKey)> {
        self.canonical_carrier_nonce()
            .map(|n| control_principal(&self.root_ikm, c, &n.nonce))
    }
}
