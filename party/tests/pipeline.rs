//! The §6.2 pipeline end to end between two parties, and the rules a vector
//! file cannot show by itself: why a forged acknowledgement fails, a
//! transient store fault (nothing cached, re-evaluated in full), a bundle
//! whose state moves under a skipped pre-lock check (re-entry at stage 4),
//! the record key shared with the application's optical path, and expiry
//! after `key-retention` (a fresh evaluation with a freshly made ack).

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::sync::Mutex;

use common::{A, B, FixedRng, NOW, OpenChallenges, context, credential, document, jcs, seal};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rltp_party::bundle::{ENCOUNTER_SCAN, NoEncounterState, enactment_binding};
use rltp_party::document::{Document, profile};
use rltp_party::keyring::KeyRing;
use rltp_party::locks::{LockKey, LockTable};
use rltp_party::registry::{CREDENTIAL_DELIVERY, ENCOUNTER_BUNDLE, TypeRegistry};
use rltp_party::relationship::Relationship;
use rltp_party::sender::{SenderFailure, SentEntry};
use rltp_party::store::{MemStore, PartyStore, Retention};
use rltp_party::{Disposition, Pending, Receiver, Step};
use rltp_proofs::json::{Object, Value};

const CH: &str = "bOpenChallengeOfB_0000000000000000000000AA";

fn credential_delivery(from: &Relationship, to: &Relationship, thread: &str) -> Object {
    let binding = enactment_binding(ENCOUNTER_SCAN, CH, CH).unwrap();
    let mut payload = Object::new();
    payload.insert(
        "credential",
        credential(from.pair(), &to.anchor(), CH, &binding),
    );
    document(
        "00000000-0000-4000-8000-000000000001",
        CREDENTIAL_DELIVERY,
        &from.anchor(),
        &to.anchor(),
        thread,
        payload,
    )
}

#[test]
fn a_document_reaches_delivered_and_its_ack_is_terminal() {
    let mut rng = StdRng::seed_from_u64(7);
    let hints = [common::HINT.parse().unwrap()];
    let mut a = Relationship::create(&[9u8; 64], &mut rng, &hints, common::CARD_CREATED).unwrap();
    let mut b = Relationship::create(&[8u8; 64], &mut rng, &hints, common::CARD_CREATED).unwrap();
    a.set_counterpart(b.own_card().unwrap().clone());
    b.set_counterpart(a.own_card().unwrap().clone());
    let registry = TypeRegistry::standard();
    let (a_keys, b_keys) = (KeyRing::new(&[a.clone()]), KeyRing::new(&[b.clone()]));
    let (a_store, b_store) = (MemStore::new(), MemStore::new());
    let (a_locks, b_locks) = (LockTable::new(), LockTable::new());
    let at = |keys, store, locks| Receiver {
        keys,
        store,
        locks,
        registry: &registry,
        bundles: &NoEncounterState,
    };
    let (at_a, at_b) = (
        at(&a_keys, &a_store, &a_locks),
        at(&b_keys, &b_store, &b_locks),
    );

    // A sends D: sealed to B's card key, recorded in A's sent-register.
    let d = credential_delivery(&a, &b, "00000000-0000-4000-8000-0000000000d0");
    let doc = Document::from_value(Value::Object(d.clone())).unwrap();
    let entry = SentEntry::accepted(&profile(&doc).unwrap(), doc.digest(), NOW).unwrap();
    a_store.record_sent(entry).unwrap();
    let to_b = a.counterpart().unwrap().key_agreement();
    let envelope = rltp_proofs::seal::seal(doc.jcs(), to_b, &mut rng).unwrap();

    // B's collect: unique, with its ack addressed back to A's key.
    let at_b_outcome = at_b.receive(&envelope.to_bytes(), NOW, &mut rng).unwrap();
    assert_eq!(at_b_outcome.disposition, Disposition::Unique);
    let ack = at_b_outcome.ack.unwrap();
    assert_eq!(ack.seal_to, Some(a.rkid()));
    assert_eq!(b_store.effects().len(), 1);

    // A's collect: the ack moves D to delivered, and earns no ack itself.
    let back = rltp_proofs::seal::seal(&ack.document, &ack.seal_to.unwrap(), &mut rng).unwrap();
    let at_a_outcome = at_a.receive(&back.to_bytes(), NOW + 1, &mut rng).unwrap();
    assert_eq!(
        at_a_outcome.disposition,
        Disposition::Unique,
        "{}",
        at_a_outcome.detail
    );
    assert_eq!(at_a_outcome.ack, None);
    assert_eq!(
        at_a_outcome.transition.map(|t| t.as_str()),
        Some("accepted->delivered")
    );
    let status = a_store.sent(doc.digest()).unwrap().unwrap().status;
    assert_eq!(status.to_string(), "delivered");
    // A give-up after delivery changes nothing (§6.1).
    let after = a_store
        .give_up(doc.digest(), SenderFailure::ExpiredByAdapterPolicy)
        .unwrap();
    assert_eq!(after.map(|s| s.to_string()).as_deref(), Some("delivered"));
}

struct Two {
    b_keys: KeyRing,
    store: MemStore,
    locks: LockTable,
    registry: TypeRegistry,
}

fn b_side() -> Two {
    let mut b = common::relationship(B);
    b.set_counterpart(common::relationship(A).own_card().unwrap().clone());
    Two {
        b_keys: KeyRing::new(&[b]),
        store: MemStore::new(),
        locks: LockTable::new(),
        registry: TypeRegistry::standard(),
    }
}

fn delivery_to_b() -> (Object, String) {
    let (a, b) = (common::relationship(A), common::relationship(B));
    let d = credential_delivery(&a, &b, "00000000-0000-4000-8000-0000000000d1");
    let envelope = seal(&jcs(&d), &b.rkid(), 3);
    (d, envelope)
}

#[test]
fn a_store_fault_is_transient_caches_nothing_and_the_retry_is_evaluated_in_full() {
    let two = b_side();
    let receiver = Receiver {
        keys: &two.b_keys,
        store: &two.store,
        locks: &two.locks,
        registry: &two.registry,
        bundles: &NoEncounterState,
    };
    let (_, envelope) = delivery_to_b();
    two.store.fail_next_commit();
    let pending = receiver.receive(envelope.as_bytes(), NOW, &mut FixedRng::new(&[1; 16]));
    assert!(matches!(pending, Err(Pending::Store(_))));
    assert_eq!(two.store.completed_len(), 0);
    assert!(
        !two.locks
            .is_busy(&[LockKey::Digest(common::digest(&delivery_to_b().0))])
    );
    let outcome = receiver
        .receive(envelope.as_bytes(), NOW, &mut FixedRng::new(&[1; 16]))
        .unwrap();
    assert_eq!(outcome.disposition, Disposition::Unique);
    assert_eq!(two.store.effects().len(), 1);
}

#[test]
fn after_key_retention_a_redelivery_is_fresh_and_earns_a_fresh_ack() {
    let two = b_side();
    let receiver = Receiver {
        keys: &two.b_keys,
        store: &two.store,
        locks: &two.locks,
        registry: &two.registry,
        bundles: &NoEncounterState,
    };
    let (_, envelope) = delivery_to_b();
    let first = receiver
        .receive(envelope.as_bytes(), NOW, &mut FixedRng::new(&[1; 16]))
        .unwrap();
    let retention = Retention::new(0);
    let just_before = NOW + retention.ms() - 1;
    assert_eq!(two.store.expire(just_before, retention), Ok(0));
    let dup = receiver
        .receive(
            envelope.as_bytes(),
            just_before,
            &mut FixedRng::new(&[2; 16]),
        )
        .unwrap();
    assert_eq!(dup.disposition, Disposition::DuplicateKnown);
    assert_eq!(dup.ack, first.ack, "within the bound: the stored ack");
    assert_eq!(two.store.expire(NOW + retention.ms(), retention), Ok(1));
    let fresh = receiver
        .receive(
            envelope.as_bytes(),
            NOW + retention.ms(),
            &mut FixedRng::new(&[2; 16]),
        )
        .unwrap();
    assert_eq!(fresh.disposition, Disposition::Unique);
    assert_ne!(
        fresh.ack, first.ack,
        "after the bound: a freshly generated ack"
    );
}

#[test]
fn forged_acks_fail_for_the_reason_their_name_gives() {
    let scenario: common::Scenario = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../vectors/party/sender-acks.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let party = common::build_party(&scenario, "A");
    let receiver = common::receiver(&party);
    let reasons: Vec<(String, String)> = scenario
        .steps
        .iter()
        .filter(|s| s.name.starts_with("forgery-"))
        .map(|s| {
            let outcome = receiver
                .receive(s.envelopes[0].as_bytes(), NOW, &mut FixedRng::new(&[]))
                .unwrap();
            (s.name.clone(), outcome.detail)
        })
        .collect();
    let detail = |name: &str| reasons.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert!(
        detail("forgery-unsigned").contains("proof"),
        "{}",
        detail("forgery-unsigned")
    );
    assert!(detail("forgery-foreign-signed").contains("not by its issuer"));
    assert!(detail("forgery-wrong-thread").contains("threadId"));
    assert!(detail("forgery-ref-never-sent").contains("ref names no document"));
    assert!(detail("forgery-wrong-class-form").contains("class form"));
    assert_eq!(
        detail("forgery-wrong-direction"),
        context(B).anchor().to_did_key()
    );
}

/// A handler whose challenge becomes open between the pre-lock check and
/// the lock (the optical record arrived meanwhile, §4.1 check 5).
struct OpensLate {
    inner: OpenChallenges,
    calls: Mutex<u32>,
}

impl rltp_party::bundle::BundleHandler for OpensLate {
    fn pre_lock(
        &self,
        b: &rltp_party::bundle::Bundle<'_>,
        now: u64,
    ) -> rltp_party::bundle::PreLock {
        let verdict = self.inner.pre_lock(b, now);
        let mut calls = self.calls.lock().unwrap();
        *calls += 1;
        if *calls == 1 {
            self.inner.open.lock().unwrap().insert(CH.to_owned());
        }
        verdict
    }
    fn in_lock(
        &self,
        b: &rltp_party::bundle::Bundle<'_>,
        skipped: bool,
        now: u64,
    ) -> rltp_party::bundle::InLock {
        self.inner.in_lock(b, skipped, now)
    }
}

fn bundle_to_b() -> String {
    let (a, b) = (context(A), context(B));
    let binding = enactment_binding(
        ENCOUNTER_SCAN,
        "aSentChallengeOfA_000000000000000000000000AA",
        CH,
    )
    .unwrap();
    let mut payload = Object::new();
    payload.insert(
        "card",
        common::sent_card(
            &a,
            &b.anchor(),
            "aSentChallengeOfA_000000000000000000000000AA",
            CH,
        ),
    );
    payload.insert("credential", credential(&a, &b.anchor(), CH, &binding));
    let d = document(
        "00000000-0000-4000-8000-0000000000b7",
        ENCOUNTER_BUNDLE,
        &a.anchor(),
        &b.anchor(),
        "00000000-0000-4000-8000-0000000000b8",
        payload,
    );
    seal(&jcs(&d), &b.rkid(), 9)
}

#[test]
fn a_skipped_bundle_whose_state_moved_re_enters_at_stage_4_and_then_commits() {
    let two = b_side();
    let handler = OpensLate {
        inner: OpenChallenges {
            open: Mutex::new(BTreeSet::new()),
        },
        calls: Mutex::new(0),
    };
    let receiver = Receiver {
        keys: &two.b_keys,
        store: &two.store,
        locks: &two.locks,
        registry: &two.registry,
        bundles: &handler,
    };
    let envelope = bundle_to_b();
    let arrival = receiver.open(envelope.as_bytes()).unwrap();
    let Step::Critical(critical) = receiver.evaluate(&arrival, NOW) else {
        panic!("unknown pre-lock proceeds to stage 9");
    };
    let moved = critical.commit(NOW, &mut FixedRng::new(&[4; 16]));
    assert!(matches!(moved, Err(Pending::Reenter(ref keys)) if keys.len() == 2));
    assert!(
        two.store.effects().is_empty(),
        "nothing committed before re-entry"
    );
    let Step::Critical(critical) = receiver.evaluate(&arrival, NOW) else {
        panic!("re-entry at stage 4 reaches stage 9 again");
    };
    let outcome = critical.commit(NOW, &mut FixedRng::new(&[4; 16])).unwrap();
    assert_eq!(outcome.disposition, Disposition::Unique);
    assert!(outcome.ack.is_some());
}

#[test]
fn the_record_key_is_the_optical_paths_lock_too() {
    let two = b_side();
    let handler = OpenChallenges {
        open: Mutex::new([CH.to_owned()].into_iter().collect()),
    };
    let receiver = Receiver {
        keys: &two.b_keys,
        store: &two.store,
        locks: &two.locks,
        registry: &two.registry,
        bundles: &handler,
    };
    let envelope = bundle_to_b();
    let optical = two
        .locks
        .try_acquire(vec![LockKey::RecordKey(CH.to_owned())])
        .unwrap();
    let arrival = receiver.open(envelope.as_bytes()).unwrap();
    let Step::Pending(Pending::Reenter(set)) = receiver.evaluate(&arrival, NOW) else {
        panic!("the bundle waits for the record key, holding nothing");
    };
    assert!(
        !two.locks.is_busy(&[set[0].clone()]),
        "the digest is not held while waiting"
    );
    drop(optical);
    let outcome = receiver
        .receive(envelope.as_bytes(), NOW, &mut FixedRng::new(&[5; 16]))
        .unwrap();
    assert_eq!(outcome.disposition, Disposition::Unique);
    assert_eq!(two.store.effects().len(), 1);
    let again = receiver
        .receive(envelope.as_bytes(), NOW, &mut FixedRng::new(&[6; 16]))
        .unwrap();
    assert_eq!(again.disposition, Disposition::DuplicateKnown);
    assert_eq!(again.ack, outcome.ack);
}
