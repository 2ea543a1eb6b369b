//! Shared test harness for the shell's tests of the engine's `Driver`
//! (the writer, the clocks, the meter): real keys, real signed proofs,
//! exact-size envelopes and a driver over any `Store` read from a manual
//! clock. The engine's own rule tests run without the shell, on the
//! thread-free harness in `engine/tests/common/mod.rs`.

#![allow(dead_code, clippy::unwrap_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use rltp_engine::table::State;
use rltp_engine::{
    BudgetMeter, Collected, Concluded, EngineConfig, EngineConstants, Meter, SessionError,
};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_proofs::seal::SealedEnvelope;
use rltp_server::clock::ManualClock;
use rltp_server::driver::Driver;
use rltp_storage::{Binding, DepositId, ReadTxn, Store, Tombstone};
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use serde_json::Value;
use std::sync::Arc;

// ---------------------------------------------------------------------------
// Vectors
// ---------------------------------------------------------------------------

/// Loads a shipped vector file through the one resolver
/// (`RLTP_SPEC_VECTORS`, else the vendored copy); a missing file fails the
/// test.
pub fn load(name: &str) -> Value {
    rltp_vectors::SpecVectors::from_env()
        .json(name)
        .unwrap_or_else(|e| panic!("vector file {name}: {e}"))
}

pub fn carrier_proof() -> Value {
    load("carrier-proof.json")
}

pub fn s(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

// ---------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------

/// The carrier the vectors name.
pub const CARRIER: &str = "did:web:carrier.example";

pub fn carrier_id() -> CarrierId {
    CARRIER.parse().unwrap()
}

/// A control principal: its signing key and did:key.
#[derive(Clone)]
pub struct Principal {
    pub key: SigningKey,
    pub did: DidKey,
}

impl Principal {
    pub fn from_seed(seed: [u8; 32]) -> Principal {
        let key = SigningKey::from_bytes(&seed);
        let did = DidKey::from_verifying_key(&key.verifying_key());
        Principal { key, did }
    }

    /// A fresh principal from a label (not tied to any vector).
    pub fn labelled(label: &str) -> Principal {
        Principal::from_seed(rltp_proofs::encoding::sha256(label.as_bytes()))
    }

    pub fn did_string(&self) -> String {
        self.did.to_did_key()
    }
}

/// An X25519 address key: the secret (needed to open a sealed challenge)
/// and the public `rkid`.
#[derive(Clone)]
pub struct RkidKey {
    pub secret: [u8; 32],
    pub rkid: Rkid,
}

impl RkidKey {
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

    /// A fresh random key.
    pub fn random() -> RkidKey {
        let mut secret = [0u8; 32];
        rand::Rng::fill_bytes(&mut rand::rng(), &mut secret);
        RkidKey::from_secret(secret)
    }
}

// ---------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------

/// Bytes of a JCS envelope that are not the ciphertext's base64url.
pub const ENVELOPE_OVERHEAD: usize = 154;
fn ct_len_for(size: usize) -> Option<usize> {
    let c = size.checked_sub(ENVELOPE_OVERHEAD)?;
    let n = match c % 4 {
        0 => c / 4 * 3,
        2 => c / 4 * 3 + 1,
        3 => c / 4 * 3 + 2,
        _ => return None,
    };
    (17..=65_552).contains(&n).then_some(n)
}

/// A shape-valid sealed envelope for `rkid` of exactly `size` bytes; its
/// bytes are a function of `salt`.
pub fn envelope(rkid: &Rkid, size: usize, salt: &str) -> Vec<u8> {
    let n = ct_len_for(size).unwrap_or_else(|| panic!("no envelope of {size} bytes"));
    let seed = rltp_proofs::encoding::sha256(salt.as_bytes());
    let mut ciphertext = Vec::with_capacity(n);
    let mut block = seed;
    while ciphertext.len() < n {
        block = rltp_proofs::encoding::sha256(&block);
        ciphertext.extend_from_slice(&block);
    }
    ciphertext.truncate(n);
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&seed[..12]);
    let bytes = SealedEnvelope {
        rkid: *rkid,
        epk: seed,
        nonce,
        ciphertext,
    }
    .to_bytes();
    assert_eq!(bytes.len(), size);
    bytes
}

// ---------------------------------------------------------------------------
// Stores
// ---------------------------------------------------------------------------

pub fn mem_store() -> Arc<rltp_storage::mem::MemStore> {
    Arc::new(rltp_storage::mem::MemStore::new())
}

/// Makes fresh, empty stores of one kind.
pub trait StoreFactory {
    type S: Store;
    fn make(&self) -> Arc<Self::S>;
}

/// In-memory reference stores.
pub struct MemFactory;

impl StoreFactory for MemFactory {
    type S = rltp_storage::mem::MemStore;
    fn make(&self) -> Arc<Self::S> {
        mem_store()
    }
}

/// Real redb stores, each in its own temporary directory (removed when
/// the factory is dropped, after the test body).
#[derive(Default)]
pub struct RedbFactory {
    dirs: std::sync::Mutex<Vec<tempfile::TempDir>>,
}

impl StoreFactory for RedbFactory {
    type S = rltp_storage::redb_store::RedbStore;
    fn make(&self) -> Arc<Self::S> {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(rltp_storage::redb_store::RedbStore::open(dir.path()).unwrap());
        self.dirs.lock().unwrap().push(dir);
        store
    }
}

/// The log store (the embedded default), each in its own temporary
/// directory (removed when the factory is dropped, after the test body).
#[derive(Default)]
pub struct LogFactory {
    dirs: std::sync::Mutex<Vec<tempfile::TempDir>>,
}

impl StoreFactory for LogFactory {
    type S = rltp_storage::log_store::LogStore;
    fn make(&self) -> Arc<Self::S> {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(rltp_storage::log_store::LogStore::open(dir.path()).unwrap());
        self.dirs.lock().unwrap().push(dir);
        store
    }
}

/// Generates `mem`, `log` and `redb` tests for each generic test function
/// `fn name<F: StoreFactory>(stores: &F)`.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn mem() {
                    super::$name(&super::common::MemFactory);
                }
                #[test]
                fn log() {
                    super::$name(&super::common::LogFactory::default());
                }
                #[test]
                fn redb() {
                    super::$name(&super::common::RedbFactory::default());
                }
            }
        )*
    };
}

// ---------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------

/// The instant every harness clock starts at (ms).
pub const T0: u64 = 1_000_000;

/// Test constants: horizons in ms, sizes in bytes.
pub fn constants() -> EngineConstants {
    EngineConstants {
        orphan_horizon_ms: 10_000,
        give_up_horizon_ms: 100_000,
        challenge_lifetime_ms: 60_000,
        queue_floor: 65_536,
        max_queue_bytes: 131_072,
        max_binding_tombstones: 1_000,
        status_horizon_ms: 30_000,
    }
}

pub struct Harness<S: Store> {
    pub engine: Driver<S>,
    pub clock: Arc<ManualClock>,
    pub meter: Arc<BudgetMeter>,
}

/// Private limits that never bind.
pub fn unlimited() -> EngineConfig {
    EngineConfig::new(u64::MAX / 4, 1 << 40)
}

impl<S: Store> Harness<S> {
    pub fn new(store: Arc<S>) -> Harness<S> {
        Harness::with(store, constants(), unlimited())
    }

    pub fn with(store: Arc<S>, constants: EngineConstants, config: EngineConfig) -> Harness<S> {
        let meter = Arc::new(BudgetMeter::new());
        let mut h = Harness::with_meter(store, constants, config, meter.clone());
        h.meter = meter;
        h
    }

    /// An engine metered by `meter` (`self.meter` is then a detached
    /// budget meter the engine does not use).
    pub fn with_meter(
        store: Arc<S>,
        constants: EngineConstants,
        config: EngineConfig,
        meter: Arc<dyn Meter>,
    ) -> Harness<S> {
        let clock = Arc::new(ManualClock::new(T0));
        let engine =
            Driver::start(store, clock.clone(), carrier_id(), constants, config, meter).unwrap();
        Harness {
            engine,
            clock,
            meter: Arc::new(BudgetMeter::new()),
        }
    }

    pub fn now(&self) -> u64 {
        self.engine.now()
    }

    pub fn set(&self, t: u64) {
        self.clock.set(t);
    }

    pub fn advance(&self, ms: u64) {
        self.clock.advance(ms);
    }

    /// A signed register/rebind proof over a freshly issued challenge
    /// (the sealed address challenge opened with the rkid secret).
    pub fn registration_proof(
        &self,
        purpose: Purpose,
        key: &RkidKey,
        principal: &Principal,
        generation: u64,
    ) -> Result<Vec<u8>, SessionError> {
        let issued = self.engine.challenge(&key.rkid, purpose)?;
        let sealed = issued.sealed_address_challenge.as_ref().unwrap();
        let address =
            open_address_challenge(sealed, &key.secret, &carrier_id(), &key.rkid, purpose).unwrap();
        Ok(UnsignedProof::registration(
            purpose,
            carrier_id(),
            key.rkid,
            generation,
            issued.principal_challenge,
            address,
        )
        .unwrap()
        .sign(&principal.key)
        .unwrap())
    }

    /// A signed collect/conclude proof over a freshly issued challenge.
    pub fn session_proof(
        &self,
        purpose: Purpose,
        rkid: &Rkid,
        principal: &Principal,
    ) -> Result<Vec<u8>, SessionError> {
        let issued = self.engine.challenge(rkid, purpose)?;
        assert!(issued.sealed_address_challenge.is_none());
        Ok(
            UnsignedProof::session(purpose, carrier_id(), *rkid, issued.principal_challenge)
                .unwrap()
                .sign(&principal.key)
                .unwrap(),
        )
    }

    /// The whole exchange: challenge, open, sign, register.
    pub fn register(&self, key: &RkidKey, principal: &Principal, generation: u64) -> Verdict {
        self.present(Purpose::Register, key, principal, generation)
    }

    pub fn present(
        &self,
        purpose: Purpose,
        key: &RkidKey,
        principal: &Principal,
        generation: u64,
    ) -> Verdict {
        match self.registration_proof(purpose, key, principal, generation) {
            Ok(proof) => self.engine.register(&proof).unwrap(),
            Err(e) => e.verdict().unwrap(),
        }
    }

    pub fn collect(&self, rkid: &Rkid, principal: &Principal) -> Result<Collected, SessionError> {
        let proof = self.session_proof(Purpose::Collect, rkid, principal)?;
        self.engine.collect(&proof, None, usize::MAX)
    }

    pub fn conclude(
        &self,
        rkid: &Rkid,
        principal: &Principal,
        ids: &[DepositId],
    ) -> Result<Concluded, SessionError> {
        let proof = self.session_proof(Purpose::Conclude, rkid, principal)?;
        self.engine.conclude(&proof, ids)
    }

    pub fn submit(&self, rkid: &Rkid, bytes: &[u8]) -> SubmitVerdict {
        self.engine.submit(rkid, bytes).unwrap()
    }

    pub fn binding(&self, rkid: &Rkid) -> Option<Binding> {
        self.engine.store().read().unwrap().binding(rkid).unwrap()
    }

    pub fn tombstone(&self, rkid: &Rkid) -> Option<Tombstone> {
        self.engine.store().read().unwrap().tombstone(rkid).unwrap()
    }

    /// The stored state (after a sweep, the state at now).
    pub fn state(&self, rkid: &Rkid) -> State {
        let binding = self.binding(rkid);
        let tombstone = self.tombstone(rkid);
        assert!(
            binding.is_none() || tombstone.is_none(),
            "{rkid} holds a binding and a tombstone"
        );
        match (binding, tombstone) {
            (Some(b), _) => match b.phase {
                rltp_storage::Phase::Live => State::Live,
                rltp_storage::Phase::Closing { .. } => State::Closing,
            },
            (None, Some(_)) => State::Released,
            (None, None) => State::Unbound,
        }
    }

    pub fn held_ids(&self, rkid: &Rkid) -> Vec<DepositId> {
        self.engine
            .store()
            .read()
            .unwrap()
            .deposits(rkid, None, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|d| d.id)
            .collect()
    }

    pub fn sweep(&self) {
        self.engine.sweep().unwrap();
    }
}

/// The verdict spelling of a register/collect/conclude outcome.
pub fn spelling<T>(r: &Result<T, SessionError>) -> String {
    match r {
        Ok(_) => "served".to_owned(),
        Err(e) => e.to_string(),
    }
}
