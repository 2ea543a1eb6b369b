//! The engine with no thread, no clock and no writer: every call is given
//! its store transaction and its instant, so sixty days of §5a.8/§5a.9
//! horizons pass in a loop (microseconds), and a seeded CSPRNG makes
//! challenges reproducible. Each transaction is committed by the test
//! itself; the events each one returned are summed as the shell's writer
//! would publish them.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rltp_engine::{BudgetMeter, Engine, EngineConfig, EngineConstants, Event, Operation, Tally};
use rltp_proofs::Ms;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_store::mem::MemStore;
use rltp_store::{ReadTxn, Store, WriteTxn};
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::{DepositStatus, SubmitVerdict, Verdict};
use std::sync::Arc;

const DAY: Ms = 86_400_000;
const T0: Ms = 1_800_000_000_000;

fn carrier() -> CarrierId {
    "did:web:carrier.example".parse().unwrap()
}

fn constants() -> EngineConstants {
    EngineConstants {
        orphan_horizon_ms: 30 * DAY,
        give_up_horizon_ms: 14 * DAY,
        challenge_lifetime_ms: 60_000,
        queue_floor: 262_144,
        max_queue_bytes: 67_108_864,
        max_binding_tombstones: 1_000,
        status_horizon_ms: 30_000,
    }
}

fn engine() -> Engine {
    Engine::new(
        carrier(),
        constants(),
        EngineConfig::new(1 << 30, 100),
        Arc::new(BudgetMeter::new()),
    )
}

/// One write transaction at `now`: the prelude, then `op`, committed; the
/// events of both added to `events`.
fn write<R>(
    engine: &Engine,
    store: &MemStore,
    now: Ms,
    events: &mut Tally,
    op: impl FnOnce(&mut dyn WriteTxn, &mut Tally) -> R,
) -> R {
    let mut txn = store.begin_write().unwrap();
    let mut tally = Tally::default();
    engine.prelude(&mut txn, now, &mut tally).unwrap();
    let out = op(&mut txn, &mut tally);
    store.commit(txn).unwrap();
    events.merge(tally);
    out
}

struct Recipient {
    secret: [u8; 32],
    rkid: Rkid,
    principal: SigningKey,
}

fn recipient() -> Recipient {
    let secret = [7u8; 32];
    let rkid = Rkid::from_bytes(
        x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(secret)).to_bytes(),
    );
    Recipient {
        secret,
        rkid,
        principal: SigningKey::from_bytes(&[9u8; 32]),
    }
}

/// challenge → open → sign → r1–r3 → r4–r5, all at `now`.
fn register(
    engine: &Engine,
    store: &MemStore,
    who: &Recipient,
    now: Ms,
    rng: &mut StdRng,
    events: &mut Tally,
) -> Verdict {
    let issued = engine
        .challenge(store, &who.rkid, Purpose::Register, now, rng)
        .unwrap();
    let sealed = issued.sealed_address_challenge.as_ref().unwrap();
    let address = open_address_challenge(
        sealed,
        &who.secret,
        &carrier(),
        &who.rkid,
        Purpose::Register,
    )
    .unwrap();
    let proof = UnsignedProof::registration(
        Purpose::Register,
        carrier(),
        who.rkid,
        1,
        issued.principal_challenge,
        address,
    )
    .unwrap()
    .sign(&who.principal)
    .unwrap();
    let authorized = engine
        .authorize(store, &proof, Operation::Register, now)
        .unwrap();
    write(engine, store, now, events, |txn, tally| {
        engine.register(txn, &authorized, now, tally).unwrap()
    })
}

fn submit(
    engine: &Engine,
    store: &MemStore,
    rkid: &Rkid,
    bytes: &[u8],
    now: Ms,
    events: &mut Tally,
) -> SubmitVerdict {
    let submission = engine.screen(&rltp_proofs::multikey::RkidText::of(rkid), bytes.to_vec());
    write(engine, store, now, events, |txn, tally| {
        engine.submit(txn, &submission, now, tally).unwrap()
    })
}

fn status(engine: &Engine, store: &MemStore, rkid: &Rkid, bytes: &[u8], now: Ms) -> DepositStatus {
    let id = rltp_proofs::DepositId::of(bytes);
    engine
        .status(&store.read().unwrap(), rkid, &id, now)
        .unwrap()
}

/// §5a.8/§5a.9 over sixty simulated days, one prelude per hour: the
/// deposit is given up at its own horizon (day 14) and forgotten 14 days
/// later, the binding nobody collects winds up at the orphan horizon (day
/// 30) and is released at its deadline (day 44), after which its queue is
/// `refused(no-such-queue)`; each transition is counted once.
#[test]
fn sixty_days_of_horizons_pass_with_no_thread_and_no_clock() {
    let (engine, store) = (engine(), MemStore::new());
    let who = recipient();
    let mut rng = StdRng::seed_from_u64(1);
    let mut events = Tally::default();
    assert_eq!(
        register(&engine, &store, &who, T0, &mut rng, &mut events),
        Verdict::Registered
    );
    let document = br#"{"type":"note","text":"hello"}"#;
    let envelope = rltp_proofs::seal::seal(document, &who.rkid, &mut rng)
        .unwrap()
        .to_bytes();
    assert_eq!(
        submit(&engine, &store, &who.rkid, &envelope, T0 + 1, &mut events),
        SubmitVerdict::Admitted
    );
    let mut seen = Vec::new();
    for hour in 1..=60 * 24 {
        let now = T0 + hour * 3_600_000;
        write(&engine, &store, now, &mut events, |_, _| ());
        let st = status(&engine, &store, &who.rkid, &envelope, now);
        if seen.last().map(|(_, s)| *s) != Some(st) {
            seen.push((hour / 24, st));
        }
    }
    assert_eq!(
        seen,
        [
            (0, DepositStatus::Accepted),
            (14, DepositStatus::GivenUp),
            (28, DepositStatus::Unknown),
        ]
    );
    assert_eq!(events.count(Event::GiveUp), 1);
    assert_eq!(events.count(Event::WindUp), 1);
    assert_eq!(events.count(Event::Release), 1);
    assert_eq!(events.count(Event::Concluded), 0);
    let read = store.read().unwrap();
    assert!(read.binding(&who.rkid).unwrap().is_none());
    let tombstone = read.tombstone(&who.rkid).unwrap().unwrap();
    assert_eq!(
        (tombstone.generation, tombstone.released_at),
        (1, T0 + 30 * DAY + 14 * DAY),
        "released at the deadline's own instant"
    );
    drop(read);
    assert_eq!(
        submit(
            &engine,
            &store,
            &who.rkid,
            &envelope,
            T0 + 60 * DAY,
            &mut events
        ),
        SubmitVerdict::NoSuchQueue
    );
}

/// The engine draws only from the CSPRNG it is given: the same seed gives
/// the same challenge, and every draw is counted (§4.4 guarantee 3: a
/// register challenge draws twice and seals once).
#[test]
fn challenges_draw_from_the_given_rng_and_count_every_draw() {
    let who = recipient();
    let issue = |seed: u64| {
        let (engine, store) = (engine(), MemStore::new());
        let mut rng = StdRng::seed_from_u64(seed);
        let issued = engine
            .challenge(&store, &who.rkid, Purpose::Register, T0, &mut rng)
            .unwrap();
        (issued.principal_challenge, engine.counters())
    };
    let (a, counters) = issue(42);
    assert_eq!(a, issue(42).0);
    assert_ne!(a, issue(43).0);
    assert_eq!(
        counters.random_draws, 4,
        "two 32-byte draws, the seal's key and nonce"
    );
    assert_eq!(counters.asymmetric_ops, 1);
    assert_eq!(counters.verifications, 0);
}
