//! The keys of the tests: the carrier the vectors name, control
//! principals and X25519 address keys, each labelled, derived like the
//! vectors or random.

use crate::vectors::{carrier_proof, hex, hex32, load, s};
use ed25519_dalek::SigningKey;
use rltp_proofs::identity::{CarrierId, control_principal};
use rltp_proofs::multikey::{DidKey, Rkid};

/// The carrier the vectors name.
pub const CARRIER: &str = "did:web:carrier.example";

/// [`CARRIER`] as an identifier.
pub fn carrier_id() -> CarrierId {
    CARRIER.parse().unwrap()
}

/// A control principal: its signing key and did:key.
#[derive(Clone)]
pub struct Principal {
    /// The Ed25519 signing key.
    pub key: SigningKey,
    /// Its did:key.
    pub did: DidKey,
}

impl Principal {
    /// The principal of an Ed25519 seed.
    pub fn from_seed(seed: [u8; 32]) -> Principal {
        let key = SigningKey::from_bytes(&seed);
        let did = DidKey::from_verifying_key(&key.verifying_key());
        Principal { key, did }
    }

    /// Identity §7a.4: the control principal of `nonce` at this carrier
    /// under the vectors' root IKM.
    pub fn derived(nonce: &[u8; 32]) -> Principal {
        let ikm = hex(s(&load("identity-derivation.json")["rootIkm"]));
        let (key, did) = control_principal(&ikm, &carrier_id(), nonce);
        Principal { key, did }
    }

    /// A fresh principal from a label (not tied to any vector).
    pub fn labelled(label: &str) -> Principal {
        Principal::from_seed(rltp_proofs::encoding::sha256(label.as_bytes()))
    }

    /// Its did:key text.
    pub fn did_string(&self) -> String {
        self.did.to_did_key()
    }
}

/// The three principals of the vectors: `keys.principal` (the canonical
/// nonce-1 principal), `keys.otherPrincipal` (nonce-2) and the rotation
/// principal (nonce-3), each derived and checked against its did:key.
pub struct VectorPrincipals {
    /// `keys.principal`.
    pub p: Principal,
    /// `keys.otherPrincipal`.
    pub other: Principal,
    /// The rotation principal of `equalGenerationTie`.
    pub rotation: Principal,
}

/// The vectors' principals, each checked against its did:key.
pub fn vector_principals() -> VectorPrincipals {
    let v = carrier_proof();
    let keys = &v["keys"];
    let p = Principal::from_seed(hex32(s(&keys["principalSeed"])));
    assert_eq!(p.did_string(), s(&keys["principal"]));
    let tie = &v["generationMonotonicity"]["equalGenerationTie"];
    let canonical = Principal::derived(&hex32(s(&tie["registerCanonicalNonce"])));
    assert_eq!(canonical.did_string(), s(&keys["principal"]));
    let other = Principal::derived(&hex32(s(&tie["registerSupersededNonce"])));
    assert_eq!(other.did_string(), s(&keys["otherPrincipal"]));
    let rotation = Principal::derived(&hex32(s(&tie["rotationNonce"])));
    assert_eq!(rotation.did_string(), s(&tie["rotationPrincipal"]));
    VectorPrincipals { p, other, rotation }
}

/// An X25519 address key: the secret (needed to open a sealed challenge)
/// and the public `rkid`.
#[derive(Clone)]
pub struct RkidKey {
    /// The X25519 secret.
    pub secret: [u8; 32],
    /// Its public key, the queue's address.
    pub rkid: Rkid,
}

impl RkidKey {
    /// The key of an X25519 secret.
    pub fn from_secret(secret: [u8; 32]) -> RkidKey {
        let public = x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(secret));
        RkidKey {
            secret,
            rkid: Rkid::from_bytes(public.to_bytes()),
        }
    }

    /// The documented sample keys: secret = sha2-256 of the ASCII label.
    pub fn labelled(label: &str) -> RkidKey {
        RkidKey::from_secret(rltp_proofs::encoding::sha256(label.as_bytes()))
    }

    /// A documented sample key, checked against its multikey in the vector.
    pub fn vector(label: &str, multikey: &str) -> RkidKey {
        let key = RkidKey::labelled(label);
        assert_eq!(key.rkid.to_multikey(), multikey, "{label}");
        key
    }

    /// A fresh random key.
    pub fn random() -> RkidKey {
        let mut secret = [0u8; 32];
        rand::Rng::fill_bytes(&mut rand::rng(), &mut secret);
        RkidKey::from_secret(secret)
    }
}

/// `keys.rkid` and `keys.otherRkid` of carrier-proof.json.
pub fn vector_rkids() -> (RkidKey, RkidKey) {
    let v = carrier_proof();
    (
        RkidKey::vector("rltp/vector/carrier-proof/rkid-1", s(&v["keys"]["rkid"])),
        RkidKey::vector(
            "rltp/vector/carrier-proof/rkid-2",
            s(&v["keys"]["otherRkid"]),
        ),
    )
}
