//! Engine rules beyond the shipped vector cases: horizons noticed late,
//! the committer prelude, sender status, collect paging, conclusion,
//! challenge checks, store failures and declaration revisions, each
//! operation one step of the thread-free harness (`common::Carrier`). Run
//! against the in-memory, the log and the redb store. (The governor
//! meter's key hygiene is the shell's: `carrier/tests/driver.rs`.)

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use rltp_engine::table::State;
use rltp_engine::{EngineError, SessionError};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_storage::{
    DeclarationRecord, Departure, DepositId, Due, Phase, ReadTxn, Store, StoreError, StoreResult,
};
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn status<S: Store>(h: &Harness<S>, rkid: &Rkid, id: &DepositId) -> DepositStatus {
    h.carrier.status(rkid, id).unwrap()
}

/// An orphan expiry noticed only after its deadline has passed: the
/// prelude of an unrelated operation applies both transitions at their
/// normative instants, in one batch, before that operation.
fn late_notice_applies_normative_instants<F: StoreFactory>(f: &F) {
    let h = Harness::new(f.make());
    let c = h.carrier.constants();
    let p = Principal::labelled("p");
    let key = RkidKey::random();
    assert_eq!(h.register(&key, &p, 3), Verdict::Registered);
    let early = envelope(&key.rkid, 400, "early");
    h.advance(100);
    assert_eq!(h.submit(&key.rkid, &early), SubmitVerdict::Admitted);
    let orphan = T0 + c.orphan_horizon_ms;
    let deadline = orphan + c.give_up_horizon_ms;
    // Nothing runs until long after the deadline; then a submission
    // arrives: the prelude releases first, so it meets released(t).
    h.set(deadline + 12_345);
    assert_eq!(
        h.submit(&key.rkid, &envelope(&key.rkid, 400, "late")),
        SubmitVerdict::NoSuchQueue
    );
    assert_eq!(h.state(&key.rkid), State::Released);
    let t = h.tombstone(&key.rkid).unwrap();
    assert_eq!((t.generation, t.released_at), (3, deadline));
    // The early deposit reached its own horizon (admitted + G) before
    // the deadline: given up there, remembered for G after.
    let id = DepositId::of(&early);
    let record = h
        .carrier
        .store()
        .read()
        .unwrap()
        .departure(&key.rkid, &id)
        .unwrap()
        .unwrap();
    assert_eq!(record.departure, Departure::GivenUp);
    assert_eq!(record.forget_at, T0 + 100 + 2 * c.give_up_horizon_ms);
    assert!(
        h.due_for(&key.rkid)
            .iter()
            .all(|(_, d)| matches!(d, Due::Forget(..)))
    );
}

/// `sweep` applies due transitions with no traffic at all, and reports
/// the next due instant.
fn sweep_without_traffic<F: StoreFactory>(f: &F) {
    let h = Harness::new(f.make());
    let c = h.carrier.constants();
    let p = Principal::labelled("p");
    let key = RkidKey::random();
    assert_eq!(h.register(&key, &p, 1), Verdict::Registered);
    assert_eq!(h.carrier.sweep().unwrap(), Some(T0 + c.orphan_horizon_ms));
    h.set(T0 + c.orphan_horizon_ms);
    assert_eq!(
        h.carrier.sweep().unwrap(),
        Some(T0 + c.orphan_horizon_ms + c.give_up_horizon_ms)
    );
    assert_eq!(h.state(&key.rkid), State::Closing);
    h.set(T0 + c.orphan_horizon_ms + c.give_up_horizon_ms);
    assert_eq!(h.carrier.sweep().unwrap(), None);
    assert_eq!(h.state(&key.rkid), State::Released);
}

/// Sender status: accepted while held; accepted after conclusion until
/// the deposit's own admission horizon, then unknown; given-up for G after
/// a give-up, then unknown; unknown for what was never admitted. A late
/// sweep is never visible: the status before and after sweeping agree.
fn sender_status<F: StoreFactory>(f: &F) {
    let h = Harness::new(f.make());
    let c = h.carrier.constants();
    let g = c.give_up_horizon_ms;
    let p = Principal::labelled("p");
    let key = RkidKey::random();
    assert_eq!(h.register(&key, &p, 1), Verdict::Registered);
    let concluded = envelope(&key.rkid, 400, "concluded");
    let abandoned = envelope(&key.rkid, 400, "abandoned");
    let (cid, aid) = (DepositId::of(&concluded), DepositId::of(&abandoned));
    assert_eq!(status(&h, &key.rkid, &cid), DepositStatus::Unknown);
    assert_eq!(h.submit(&key.rkid, &concluded), SubmitVerdict::Admitted);
    assert_eq!(h.submit(&key.rkid, &abandoned), SubmitVerdict::Admitted);
    assert_eq!(status(&h, &key.rkid, &cid), DepositStatus::Accepted);
    // Keep the binding live throughout by collecting.
    h.advance(5_000);
    assert_eq!(h.collect(&key.rkid, &p).unwrap().deposits.len(), 2);
    assert_eq!(h.conclude(&key.rkid, &p, &[cid]).unwrap().removed, 1);
    assert_eq!(
        status(&h, &key.rkid, &cid),
        DepositStatus::Accepted,
        "never reveals a conclusion"
    );
    let mut checkpoints = vec![T0 + g - 1, T0 + g, T0 + 2 * g - 1, T0 + 2 * g];
    checkpoints.sort_unstable();
    let expected = [
        (DepositStatus::Accepted, DepositStatus::Accepted),
        (DepositStatus::Unknown, DepositStatus::GivenUp),
        (DepositStatus::Unknown, DepositStatus::GivenUp),
        (DepositStatus::Unknown, DepositStatus::Unknown),
    ];
    for (at, (want_c, want_a)) in checkpoints.into_iter().zip(expected) {
        // keep the binding live: collect every orphan-horizon / 2
        while h.binding(&key.rkid).unwrap().last_collection_at + c.orphan_horizon_ms / 2 < at {
            let next = h.binding(&key.rkid).unwrap().last_collection_at + c.orphan_horizon_ms / 2;
            h.set(next);
            h.collect(&key.rkid, &p).unwrap();
        }
        h.set(at);
        let before = (status(&h, &key.rkid, &cid), status(&h, &key.rkid, &aid));
        h.sweep();
        let after = (status(&h, &key.rkid, &cid), status(&h, &key.rkid, &aid));
        assert_eq!(before, after, "a late sweep is not visible at {at}");
        assert_eq!(after, (want_c, want_a), "at {at}");
    }
    // After departure, the same bytes are a new deposit.
    assert_eq!(h.submit(&key.rkid, &abandoned), SubmitVerdict::Admitted);
    assert_eq!(status(&h, &key.rkid, &aid), DepositStatus::Accepted);
}

/// Collect: admission order, ids, paging; last_collection_at moves at
/// collect, at a served conclude (and registration); another principal's
/// valid proof is refused(no-such-queue); a concluded deposit is never
/// offered again; conclusion is idempotent.
fn collect_and_conclude<F: StoreFactory>(f: &F) {
    let h = Harness::with(f.make(), constants(), unlimited().with_max_collect(3));
    let (p, q) = (Principal::labelled("p"), Principal::labelled("q"));
    let key = RkidKey::random();
    assert_eq!(h.register(&key, &p, 1), Verdict::Registered);
    let deposits: Vec<Vec<u8>> = (0..5)
        .map(|i| envelope(&key.rkid, 300 + 4 * i, &format!("d{i}")))
        .collect();
    for d in &deposits {
        assert_eq!(h.submit(&key.rkid, d), SubmitVerdict::Admitted);
    }
    h.advance(1_000);
    let proof = h.session_proof(Purpose::Collect, &key.rkid, &p).unwrap();
    let page1 = h.carrier.collect(&proof, None, 100).unwrap();
    assert_eq!(page1.deposits.len(), 3, "capped by the configured page");
    assert!(page1.more);
    for (got, want) in page1.deposits.iter().zip(&deposits) {
        assert_eq!(&got.bytes, want);
        assert_eq!(got.id, DepositId::of(want));
    }
    assert_eq!(h.binding(&key.rkid).unwrap().last_collection_at, T0 + 1_000);
    let proof = h.session_proof(Purpose::Collect, &key.rkid, &p).unwrap();
    let page2 = h
        .carrier
        .collect(&proof, Some(page1.deposits[2].seq), 100)
        .unwrap();
    assert_eq!(page2.deposits.len(), 2);
    assert!(!page2.more);
    assert_eq!(page2.deposits[1].bytes, deposits[4]);
    // Another principal: no queue under it.
    assert_eq!(
        h.collect(&key.rkid, &q).unwrap_err().verdict(),
        Some(Verdict::NoSuchQueue)
    );
    h.advance(1_000);
    let ids: Vec<DepositId> = deposits[..2].iter().map(|d| DepositId::of(d)).collect();
    let stranger = DepositId::of(b"never admitted");
    assert_eq!(
        h.conclude(&key.rkid, &p, &[ids[0], ids[1], stranger])
            .unwrap()
            .removed,
        2
    );
    assert_eq!(
        h.conclude(&key.rkid, &p, &ids).unwrap().removed,
        0,
        "idempotent"
    );
    assert_eq!(
        h.binding(&key.rkid).unwrap().last_collection_at,
        T0 + 2_000,
        "a served conclude counts as collection (PROTOCOL.md §7)"
    );
    assert_eq!(
        h.carrier.sweep().unwrap(),
        Some(T0 + 2_000 + h.carrier.constants().orphan_horizon_ms),
        "the orphan expiry moved with it"
    );
    h.advance(500);
    // Another principal's conclude is refused and moves nothing.
    assert_eq!(
        h.conclude(&key.rkid, &q, &ids).unwrap_err().verdict(),
        Some(Verdict::NoSuchQueue)
    );
    assert_eq!(h.binding(&key.rkid).unwrap().last_collection_at, T0 + 2_000);
    let rest = h.collect(&key.rkid, &p).unwrap();
    assert_eq!(rest.deposits.len(), 3);
    assert!(rest.deposits.iter().all(|d| !ids.contains(&d.id)));
    assert_eq!(h.binding(&key.rkid).unwrap().last_collection_at, T0 + 2_500);
    // A conclude proof is not a collect proof, and vice versa.
    let conclude_proof = h.session_proof(Purpose::Conclude, &key.rkid, &p).unwrap();
    assert_eq!(
        h.carrier
            .collect(&conclude_proof, None, 10)
            .unwrap_err()
            .verdict(),
        Some(Verdict::Malformed)
    );
    assert_eq!(
        h.carrier.register(&conclude_proof).unwrap(),
        Verdict::Malformed
    );
}

/// r3: a challenge is consumed by the first response whatever its fate;
/// expired, other-rkid, other-purpose and wrong-address responses fail.
fn challenge_checks<F: StoreFactory>(f: &F) {
    let h = Harness::new(f.make());
    let c = h.carrier.constants();
    let p = Principal::labelled("p");
    let key = RkidKey::random();
    let other = RkidKey::random();
    let register = |address: [u8; 32], rkid: Rkid, issued: &rltp_engine::IssuedChallenge| {
        UnsignedProof::registration(
            Purpose::Register,
            carrier_id(),
            rkid,
            1,
            issued.principal_challenge,
            address,
        )
        .unwrap()
        .sign(&p.key)
        .unwrap()
    };
    let open = |issued: &rltp_engine::IssuedChallenge, key: &RkidKey| {
        rltp_wire::address_challenge::open_address_challenge(
            issued.sealed_address_challenge.as_ref().unwrap(),
            &key.secret,
            &carrier_id(),
            &key.rkid,
            issued.purpose,
        )
        .unwrap()
    };
    // Expired: valid until expires_at − 1.
    let issued = h.carrier.challenge(&key.rkid, Purpose::Register).unwrap();
    assert_eq!(issued.expires_at, T0 + c.challenge_lifetime_ms);
    h.set(issued.expires_at);
    assert_eq!(
        h.carrier
            .register(&register(open(&issued, &key), key.rkid, &issued))
            .unwrap(),
        Verdict::PossessionFailed
    );
    assert_eq!(h.challenges_live(), 0, "consumed");
    // Issued for one rkid, used for another.
    let issued = h.carrier.challenge(&key.rkid, Purpose::Register).unwrap();
    assert_eq!(
        h.carrier
            .register(&register(open(&issued, &key), other.rkid, &issued))
            .unwrap(),
        Verdict::PossessionFailed
    );
    // Wrong address challenge (the registrant could not open it).
    let issued = h.carrier.challenge(&key.rkid, Purpose::Register).unwrap();
    assert_eq!(
        h.carrier
            .register(&register([9; 32], key.rkid, &issued))
            .unwrap(),
        Verdict::PossessionFailed
    );
    // Issued for collect, used for register.
    let issued = h.carrier.challenge(&key.rkid, Purpose::Collect).unwrap();
    assert!(issued.sealed_address_challenge.is_none());
    assert_eq!(
        h.carrier
            .register(&register([0; 32], key.rkid, &issued))
            .unwrap(),
        Verdict::PossessionFailed
    );
    // The opened value is the only thing a registrant can use.
    let issued = h.carrier.challenge(&key.rkid, Purpose::Register).unwrap();
    assert!(
        rltp_wire::address_challenge::open_address_challenge(
            issued.sealed_address_challenge.as_ref().unwrap(),
            &other.secret,
            &carrier_id(),
            &key.rkid,
            Purpose::Register,
        )
        .is_err(),
        "only the rkid's private key opens the challenge"
    );
    assert_eq!(
        h.carrier
            .register(&register(open(&issued, &key), key.rkid, &issued))
            .unwrap(),
        Verdict::Registered
    );
    assert_eq!(
        h.carrier.counters().verifications,
        1,
        "only the good response was verified"
    );
    // Expired challenges are purged by the sweep.
    h.carrier.challenge(&key.rkid, Purpose::Collect).unwrap();
    assert_eq!(h.challenges_live(), 1);
    h.advance(c.challenge_lifetime_ms);
    h.sweep();
    assert_eq!(h.challenges_live(), 0);
    // A low-order rkid cannot be sealed to: refused, no panic.
    let low = Rkid::from_bytes([0; 32]);
    assert_eq!(
        h.carrier
            .challenge(&low, Purpose::Register)
            .unwrap_err()
            .verdict(),
        Some(Verdict::PossessionFailed)
    );
}

/// A deposit's own give-up with the binding live, and the return from
/// closing reverting deposits to their own horizons (already in the
/// vectors) — here: the give-up frees its bytes and its meter state.
fn give_up_frees_bytes<F: StoreFactory>(f: &F) {
    let h = Harness::new(f.make());
    let c = h.carrier.constants();
    let p = Principal::labelled("p");
    let key = RkidKey::random();
    assert_eq!(h.register(&key, &p, 1), Verdict::Registered);
    let ids = h.fill(&key.rkid, c.queue_floor as usize + 2_000, "big");
    assert_eq!(h.occupancy().elastic_bytes, 2_000);
    for step in 1..=20 {
        h.set(T0 + step * c.give_up_horizon_ms / 20);
        h.collect(&key.rkid, &p).unwrap();
    }
    h.sweep();
    assert_eq!(h.queue_bytes(&key.rkid), 0);
    let occ = h.occupancy();
    assert_eq!(
        (occ.total_bytes, occ.deposits, occ.elastic_bytes),
        (0, 0, 0)
    );
    for id in &ids {
        assert_eq!(status(&h, &key.rkid, id), DepositStatus::GivenUp);
    }
    assert_eq!(h.state(&key.rkid), State::Live);
}

/// A store that can be made to fail its commits.
struct Flaky<S> {
    inner: Arc<S>,
    fail: AtomicBool,
}

impl<S: Store> Store for Flaky<S> {
    type Read<'a> = S::Read<'a>;
    type Write<'a> = S::Write<'a>;
    fn read(&self) -> StoreResult<Self::Read<'_>> {
        self.inner.read()
    }
    fn begin_write(&self) -> StoreResult<Self::Write<'_>> {
        self.inner.begin_write()
    }
    fn commit(&self, txn: Self::Write<'_>) -> StoreResult<()> {
        if self.fail.load(Ordering::SeqCst) {
            drop(txn);
            return Err(StoreError::Io(std::io::Error::other("disk full")));
        }
        self.inner.commit(txn)
    }
    fn challenges(&self) -> &rltp_storage::ChallengeTable {
        self.inner.challenges()
    }
}

/// A store failure changes nothing and is answered with the operation's
/// retriable resource verdict (or Unavailable for sessions).
fn a_store_failure_is_unavailable_never_a_capacity_refusal<F: StoreFactory>(f: &F) {
    let store = Arc::new(Flaky {
        inner: f.make(),
        fail: AtomicBool::new(false),
    });
    let h = Harness::new(Arc::clone(&store));
    let p = Principal::labelled("p");
    let key = RkidKey::random();
    assert_eq!(h.register(&key, &p, 1), Verdict::Registered);
    let newcomer = RkidKey::random();
    let proof = h
        .registration_proof(Purpose::Register, &newcomer, &p, 1)
        .unwrap();
    let collect = h.session_proof(Purpose::Collect, &key.rkid, &p).unwrap();
    store.fail.store(true, Ordering::SeqCst);
    let bytes = envelope(&key.rkid, 400, "x");
    // Not a verdict about the request, and never a capacity refusal (the
    // queue is far below its floor: §4.4 guarantee 5).
    assert!(matches!(
        h.carrier.submit(&key.rkid, &bytes),
        Err(EngineError::Unavailable(_))
    ));
    assert!(matches!(
        h.carrier.register(&proof),
        Err(EngineError::Unavailable(_))
    ));
    assert!(matches!(
        h.carrier.collect(&collect, None, 10),
        Err(SessionError::Unavailable(_))
    ));
    assert!(h.carrier.sweep().is_err());
    store.fail.store(false, Ordering::SeqCst);
    assert_eq!(h.state(&newcomer.rkid), State::Unbound);
    assert_eq!(h.occupancy().deposits, 0);
    assert_eq!(
        h.submit(&key.rkid, &bytes),
        SubmitVerdict::Admitted,
        "the writer survives"
    );
}

/// Revisions: a raised floor re-derives elastic bytes; a changed orphan
/// horizon re-measures live bindings from their last collection (never
/// before the revision instant); records follow the revision rule.
fn declaration_revisions<F: StoreFactory>(f: &F) {
    let h = Harness::new(f.make());
    let mut c = h.carrier.constants();
    let p = Principal::labelled("p");
    let (a, b) = (RkidKey::random(), RkidKey::random());
    assert_eq!(h.register(&a, &p, 1), Verdict::Registered);
    assert_eq!(h.register(&b, &p, 1), Verdict::Registered);
    h.fill(&a.rkid, c.queue_floor as usize + 5_000, "a");
    h.fill(&b.rkid, 20_000, "b");
    assert_eq!(h.occupancy().elastic_bytes, 5_000);
    c.queue_floor = 10_000;
    let record = |revision: u64, doc: &[u8]| DeclarationRecord {
        revision,
        document: doc.to_vec(),
    };
    h.carrier
        .apply_constants(c, Some(record(2, b"two")))
        .unwrap();
    assert_eq!(
        h.occupancy().elastic_bytes,
        (h.queue_bytes(&a.rkid) - 10_000) + (20_000 - 10_000)
    );
    // Rollback and equivocation are refused; state kept.
    assert!(
        h.carrier
            .apply_constants(c, Some(record(1, b"one")))
            .is_err()
    );
    assert!(
        h.carrier
            .apply_constants(c, Some(record(2, b"other")))
            .is_err()
    );
    assert_eq!(h.carrier.constants().queue_floor, 10_000);
    // Orphan horizon shortened so that `a` is already past it: it winds
    // up at the revision instant, not retroactively.
    h.advance(3_000);
    h.collect(&b.rkid, &p).unwrap();
    c.orphan_horizon_ms = 2_000;
    h.carrier
        .apply_constants(c, Some(record(3, b"three")))
        .unwrap();
    assert_eq!(
        h.binding(&a.rkid).unwrap().phase,
        Phase::Closing {
            deadline: T0 + 3_000 + c.give_up_horizon_ms
        }
    );
    assert_eq!(h.state(&b.rkid), State::Live);
    h.set(T0 + 3_000 + 2_000);
    h.sweep();
    assert_eq!(
        h.state(&b.rkid),
        State::Closing,
        "re-measured from its collection"
    );
}

on_both_stores!(thread_free:
    late_notice_applies_normative_instants,
    sweep_without_traffic,
    sender_status,
    collect_and_conclude,
    challenge_checks,
    give_up_frees_bytes,
    a_store_failure_is_unavailable_never_a_capacity_refusal,
    declaration_revisions,
);
