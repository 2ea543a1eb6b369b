//! The engine's test harness, with no thread and no shell: the shipped
//! vectors, real keys derived like the vectors, real signed proofs,
//! exact-size envelopes, and [`Carrier`] — the engine over any `Store`
//! with a manual clock, each operation one step (one write transaction,
//! committed before the call returns), in the manner of quinn-proto's
//! `tests/util.rs` `Pair`/`step`.

#![allow(dead_code, clippy::unwrap_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rltp_engine::table::State;
use rltp_engine::{
    BudgetMeter, Collected, CollectedDeposit, Concluded, CounterSnapshot, Engine, EngineConfig,
    EngineConstants, EngineError, EventCounters, EventSnapshot, IssuedChallenge, Limits, Meter,
    Operation, SessionError, Tally,
};
use rltp_proofs::Ms;
use rltp_proofs::identity::{CarrierId, control_principal};
use rltp_proofs::multikey::{DidKey, Rkid, RkidText};
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_proofs::seal::SealedEnvelope;
use rltp_storage::{
    Binding, DeclarationRecord, DepositId, ReadTxn, Store, StoreError, StoreResult, Tombstone,
    WriteTxn,
};
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
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

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected an integer, got {v}"))
}

pub fn arr(v: &Value) -> &Vec<Value> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {v}"))
}

pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub fn hex32(s: &str) -> [u8; 32] {
    hex(s).try_into().unwrap()
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

    pub fn did_string(&self) -> String {
        self.did.to_did_key()
    }
}

/// The three principals of the vectors: `keys.principal` (the canonical
/// nonce-1 principal), `keys.otherPrincipal` (nonce-2) and the rotation
/// principal (nonce-3), each derived and checked against its did:key.
pub struct VectorPrincipals {
    pub p: Principal,
    pub other: Principal,
    pub rotation: Principal,
}

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

// ---------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------

/// Bytes of a JCS envelope that are not the ciphertext's base64url.
pub const ENVELOPE_OVERHEAD: usize = 154;
/// The smallest valid envelope (17-byte ciphertext), bytes.
pub const MIN_ENVELOPE: usize = 177;

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

/// Whether an envelope of exactly `size` bytes exists.
pub fn envelope_size_ok(size: usize) -> bool {
    ct_len_for(size).is_some()
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

/// Envelope sizes, each at most `max_piece` bytes, summing to exactly
/// `total` bytes.
pub fn sizes_summing_to(total: usize, max_piece: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut rest = total;
    while rest > 0 {
        let piece = (MIN_ENVELOPE..=rest.min(max_piece))
            .rev()
            .find(|&p| envelope_size_ok(p) && (rest - p == 0 || rest - p >= 2 * MIN_ENVELOPE + 4))
            .unwrap_or_else(|| panic!("cannot split {rest} bytes"));
        sizes.push(piece);
        rest -= piece;
    }
    sizes
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
/// directory, with no background thread (removed when the factory is dropped, after the test body).
#[derive(Default)]
pub struct LogFactory {
    dirs: std::sync::Mutex<Vec<tempfile::TempDir>>,
}

impl StoreFactory for LogFactory {
    type S = rltp_storage::log_store::LogStore;
    fn make(&self) -> Arc<Self::S> {
        let dir = tempfile::tempdir().unwrap();
        let options = rltp_storage::log_store::LogOptions {
            background: false,
            ..rltp_storage::log_store::LogOptions::default()
        };
        let store =
            Arc::new(rltp_storage::log_store::LogStore::open_with(dir.path(), options).unwrap());
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
// The carrier, one step at a time
// ---------------------------------------------------------------------------

/// The engine, its store, its clock and its CSPRNG, with no thread: the
/// calls of the shell's `Driver` (`server/src/driver.rs`), each one
/// **step** — the work outside the writer (r1–r3, the s2 check,
/// challenges, status) at [`Carrier::now`], then at most one write
/// transaction (the batch prelude at `now`, then the operation), committed
/// before the call returns. The events of a committed step are counted, as
/// the shell's writer publishes them once durable; a failed step changes
/// nothing and puts back the constants in force before it.
pub struct Carrier<S: Store> {
    store: Arc<S>,
    engine: Engine,
    now: Cell<Ms>,
    rng: RefCell<StdRng>,
    events: EventCounters,
}

impl<S: Store> Carrier<S> {
    /// An engine over `store` at [`T0`], challenges drawn from a generator
    /// seeded with 0.
    pub fn new(
        store: Arc<S>,
        constants: EngineConstants,
        config: EngineConfig,
        meter: Arc<dyn Meter>,
    ) -> Carrier<S> {
        Carrier {
            store,
            engine: Engine::new(carrier_id(), constants, config, meter),
            now: Cell::new(T0),
            rng: RefCell::new(StdRng::seed_from_u64(0)),
            events: EventCounters::default(),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The manual clock's reading (ms).
    pub fn now(&self) -> Ms {
        self.now.get()
    }

    pub fn set_now(&self, now: Ms) {
        self.now.set(now);
    }

    pub fn constants(&self) -> EngineConstants {
        self.engine.constants()
    }

    pub fn set_limits(&self, limits: Limits) {
        self.engine.set_limits(limits);
    }

    pub fn counters(&self) -> CounterSnapshot {
        self.engine.counters()
    }

    /// Counts of the transitions of every committed step.
    pub fn events(&self) -> EventSnapshot {
        self.events.snapshot()
    }

    /// One write transaction at `now`: the prelude (the horizons due),
    /// then `op`, then the commit; its events are counted once committed.
    /// On any failure the transaction is dropped and the constants in
    /// force before it are put back (a revision is state of its
    /// transaction).
    pub fn step<R>(
        &self,
        op: impl FnOnce(&Engine, &mut dyn WriteTxn, Ms, &mut Tally) -> StoreResult<R>,
    ) -> StoreResult<R> {
        let in_force = self.engine.constants();
        let now = self.now();
        let mut tally = Tally::default();
        let outcome = self.store.begin_write().and_then(|mut txn| {
            self.engine.prelude(&mut txn, now, &mut tally)?;
            let out = op(&self.engine, &mut txn, now, &mut tally)?;
            self.store.commit(txn)?;
            Ok(out)
        });
        match outcome {
            Ok(out) => {
                self.events.add(tally);
                Ok(out)
            }
            Err(e) => {
                self.engine.set_constants(in_force);
                Err(e)
            }
        }
    }

    /// §5a.3 challenge at `now`, drawing from the seeded generator.
    pub fn challenge(
        &self,
        rkid: &Rkid,
        purpose: Purpose,
    ) -> Result<IssuedChallenge, SessionError> {
        let mut rng = self.rng.borrow_mut();
        self.engine
            .challenge(&*self.store, rkid, purpose, self.now(), &mut *rng)
    }

    /// r1–r3 at `now`.
    pub fn authorize(
        &self,
        proof: &[u8],
        operation: Operation,
    ) -> Result<rltp_engine::Authorized, SessionError> {
        self.engine
            .authorize(&*self.store, proof, operation, self.now())
    }

    /// §5a.3 register or rebind: r1–r3, then r4–r5 in one step.
    pub fn register(&self, proof: &[u8]) -> Result<Verdict, EngineError> {
        Ok(self.register_together(&[proof])?[0])
    }

    /// Registrations that arrived together: r1–r3 for each, then every
    /// authorized one decided in **one** step, in order, each against the
    /// state the ones before it left (the shell's writer batches
    /// registrations that race exactly so).
    pub fn register_together(&self, proofs: &[&[u8]]) -> Result<Vec<Verdict>, EngineError> {
        let mut decided = Vec::with_capacity(proofs.len());
        for proof in proofs {
            decided.push(match self.authorize(proof, Operation::Register) {
                Ok(authorized) => Ok(authorized),
                Err(SessionError::Unavailable(e)) => return Err(EngineError::Unavailable(e)),
                Err(denied) => Err(denied.verdict().unwrap_or(Verdict::Malformed)),
            });
        }
        if decided.iter().all(Result::is_err) {
            // Refused before the writer: no step runs.
            return Ok(decided.into_iter().filter_map(Result::err).collect());
        }
        Ok(self.step(|engine, txn, now, events| {
            decided
                .iter()
                .map(|d| match d {
                    Ok(authorized) => engine.register(txn, authorized, now, events),
                    Err(verdict) => Ok(*verdict),
                })
                .collect::<StoreResult<Vec<_>>>()
        })?)
    }

    /// §5a.7/§5a.8 collect: r1–r3, the page decided in one step, then its
    /// bytes read and checked after the commit (a damaged deposit is
    /// quarantined in a step of its own; the rest of the page is served).
    pub fn collect(
        &self,
        proof: &[u8],
        after: Option<u64>,
        limit: usize,
    ) -> Result<Collected, SessionError> {
        let authorized = self.authorize(proof, Operation::Collect)?;
        let rkid = *authorized.rkid();
        let page = self
            .step(|engine, txn, now, _| engine.collect(txn, &authorized, after, limit, now))?
            .map_err(SessionError::Refused)?;
        let mut deposits = Vec::with_capacity(page.deposits.len());
        for (d, bytes) in page.deposits {
            match bytes.read() {
                Ok(bytes) => deposits.push(CollectedDeposit {
                    seq: d.seq,
                    id: d.id,
                    bytes,
                    admitted_at: d.admitted_at,
                }),
                Err(StoreError::Corrupt(_)) => {
                    self.step(|engine, txn, now, events| {
                        engine.quarantine_if_damaged(txn, &rkid, d.seq, now, events)
                    })?;
                }
                Err(e) => return Err(SessionError::from(e)),
            }
        }
        Ok(Collected {
            deposits,
            more: page.more,
        })
    }

    /// §5a.8 conclude: r1–r3, then one step.
    pub fn conclude(&self, proof: &[u8], ids: &[DepositId]) -> Result<Concluded, SessionError> {
        let authorized = self.authorize(proof, Operation::Conclude)?;
        let ids: BTreeSet<DepositId> = ids.iter().copied().collect();
        self.step(|engine, txn, now, events| engine.conclude(txn, &authorized, &ids, now, events))?
            .map_err(SessionError::Refused)
    }

    /// §5a.5 submit: the s2 screen, then s1–s6 in one step.
    pub fn submit(&self, rkid: &Rkid, bytes: &[u8]) -> Result<SubmitVerdict, EngineError> {
        Ok(self.submit_together(&[(*rkid, bytes)])?[0])
    }

    /// Submissions that arrived together (a burst, or a race the writer
    /// batched): screened, then decided in **one** step, in order.
    pub fn submit_together(
        &self,
        items: &[(Rkid, &[u8])],
    ) -> Result<Vec<SubmitVerdict>, EngineError> {
        let submissions: Vec<_> = items
            .iter()
            .map(|(rkid, bytes)| self.engine.screen(&RkidText::of(rkid), bytes.to_vec()))
            .collect();
        Ok(self.step(|engine, txn, now, events| {
            submissions
                .iter()
                .map(|s| engine.submit(txn, s, now, events))
                .collect::<StoreResult<Vec<_>>>()
        })?)
    }

    /// §5a.8/§6.1 sender status at `now`.
    pub fn status(&self, rkid: &Rkid, id: &DepositId) -> Result<DepositStatus, EngineError> {
        let read = self.store.read()?;
        Ok(self.engine.status(&read, rkid, id, self.now())?)
    }

    /// The sweeper (§5a.9): a step that is only its prelude, then the
    /// housekeeping; returns the next due instant.
    pub fn sweep(&self) -> Result<Option<Ms>, EngineError> {
        let next = self.step(|_, txn, _, _| txn.next_due())?;
        self.engine.housekeeping(&*self.store, self.now())?;
        Ok(next)
    }

    /// §4.4: a declaration revision in one step.
    pub fn apply_constants(
        &self,
        constants: EngineConstants,
        record: Option<DeclarationRecord>,
    ) -> Result<(), EngineError> {
        self.step(|engine, txn, now, events| {
            engine.apply_constants(txn, constants, record.as_ref(), now, events)
        })?
    }
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
    pub carrier: Carrier<S>,
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
        Harness {
            carrier: Carrier::new(store, constants, config, meter.clone()),
            meter,
        }
    }

    pub fn now(&self) -> u64 {
        self.carrier.now()
    }

    pub fn set(&self, t: u64) {
        self.carrier.set_now(t);
    }

    pub fn advance(&self, ms: u64) {
        self.carrier.set_now(self.carrier.now() + ms);
    }

    pub fn set_limits(&self, capacity_bytes: u64, max_bindings: u64) {
        self.carrier.set_limits(Limits {
            capacity_bytes,
            max_bindings,
        });
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
        let issued = self.carrier.challenge(&key.rkid, purpose)?;
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
        let issued = self.carrier.challenge(rkid, purpose)?;
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

    pub fn rebind(&self, key: &RkidKey, principal: &Principal, generation: u64) -> Verdict {
        self.present(Purpose::Rebind, key, principal, generation)
    }

    pub fn present(
        &self,
        purpose: Purpose,
        key: &RkidKey,
        principal: &Principal,
        generation: u64,
    ) -> Verdict {
        match self.registration_proof(purpose, key, principal, generation) {
            Ok(proof) => self.carrier.register(&proof).unwrap(),
            Err(e) => e.verdict().unwrap(),
        }
    }

    pub fn collect(&self, rkid: &Rkid, principal: &Principal) -> Result<Collected, SessionError> {
        let proof = self.session_proof(Purpose::Collect, rkid, principal)?;
        self.carrier.collect(&proof, None, usize::MAX)
    }

    pub fn conclude(
        &self,
        rkid: &Rkid,
        principal: &Principal,
        ids: &[DepositId],
    ) -> Result<Concluded, SessionError> {
        let proof = self.session_proof(Purpose::Conclude, rkid, principal)?;
        self.carrier.conclude(&proof, ids)
    }

    pub fn submit(&self, rkid: &Rkid, bytes: &[u8]) -> SubmitVerdict {
        self.carrier.submit(rkid, bytes).unwrap()
    }

    /// Submits envelopes summing to exactly `total` bytes; all admitted.
    pub fn fill(&self, rkid: &Rkid, total: usize, salt: &str) -> Vec<DepositId> {
        let max = rltp_proofs::envelope::MAX_ENVELOPE_BYTES
            .min(usize::try_from(self.carrier.constants().max_queue_bytes).unwrap());
        sizes_summing_to(total, max)
            .into_iter()
            .enumerate()
            .map(|(i, size)| {
                let bytes = envelope(rkid, size, &format!("{salt}/{i}"));
                assert_eq!(self.submit(rkid, &bytes), SubmitVerdict::Admitted);
                DepositId::of(&bytes)
            })
            .collect()
    }

    pub fn binding(&self, rkid: &Rkid) -> Option<Binding> {
        self.carrier.store().read().unwrap().binding(rkid).unwrap()
    }

    pub fn tombstone(&self, rkid: &Rkid) -> Option<Tombstone> {
        self.carrier
            .store()
            .read()
            .unwrap()
            .tombstone(rkid)
            .unwrap()
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

    pub fn queue_bytes(&self, rkid: &Rkid) -> u64 {
        self.carrier
            .store()
            .read()
            .unwrap()
            .queue_bytes(rkid)
            .unwrap()
    }

    pub fn held_ids(&self, rkid: &Rkid) -> Vec<DepositId> {
        self.carrier
            .store()
            .read()
            .unwrap()
            .deposits(rkid, None, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|d| d.id)
            .collect()
    }

    pub fn occupancy(&self) -> rltp_storage::Occupancy {
        self.carrier.store().read().unwrap().occupancy().unwrap()
    }

    /// Due-index entries naming `rkid`.
    pub fn due_for(&self, rkid: &Rkid) -> Vec<(u64, rltp_storage::Due)> {
        use rltp_storage::Due;
        self.carrier
            .store()
            .read()
            .unwrap()
            .due(u64::MAX, usize::MAX)
            .unwrap()
            .into_iter()
            .filter(|(_, d)| match d {
                Due::OrphanExpiry(r) | Due::Deadline(r) | Due::GiveUp(r, _) | Due::Forget(r, _) => {
                    r == rkid
                }
            })
            .collect()
    }

    pub fn challenges_live(&self) -> usize {
        self.carrier.store().challenge_count()
    }

    pub fn sweep(&self) {
        self.carrier.sweep().unwrap();
    }

    /// Drives `rkid` (bound under `principal` at `generation`) to
    /// `closing` by letting its orphan horizon pass; returns the deadline.
    pub fn wind_up(&self, rkid: &Rkid) -> u64 {
        let b = self.binding(rkid).unwrap();
        let c = self.carrier.constants();
        self.set(b.last_collection_at + c.orphan_horizon_ms);
        self.sweep();
        match self.binding(rkid).unwrap().phase {
            rltp_storage::Phase::Closing { deadline } => deadline,
            rltp_storage::Phase::Live => panic!("{rkid} did not enter closing"),
        }
    }

    /// Drives a closing `rkid` through its deadline to `released`.
    pub fn release(&self, rkid: &Rkid) {
        let deadline = match self.binding(rkid).map(|b| b.phase) {
            Some(rltp_storage::Phase::Closing { deadline }) => deadline,
            _ => self.wind_up(rkid),
        };
        if self.now() < deadline {
            self.set(deadline);
        }
        self.sweep();
        assert_eq!(self.state(rkid), State::Released);
    }
}

/// The verdict spelling of a register/collect/conclude outcome.
pub fn spelling<T>(r: &Result<T, SessionError>) -> String {
    match r {
        Ok(_) => "served".to_owned(),
        Err(e) => e.to_string(),
    }
}
