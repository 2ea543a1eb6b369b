//! The store's promises, across a reopen (what a restarted process sees).

#![allow(clippy::unwrap_used)]

use super::*;
use rltp_party::registry::AckClass;
use rltp_party::store::KEY_RETENTION_FLOOR_MS;
use rltp_proofs::multikey::DidKey;

fn ack(digest: &str) -> StoredAck {
    StoredAck {
        document: b"{\"id\":\"k\"}".to_vec(),
        digest: digest.to_owned(),
        seal_to: Some(Rkid::from_bytes([7; 32])),
    }
}

fn commit(digest: &str, effect: Effect, ack: Option<StoredAck>) -> Commit {
    Commit {
        entry: CompletedEntry {
            digest: digest.to_owned(),
            type_uri: "t".to_owned(),
            committed_at: 10,
            ack,
        },
        effect,
    }
}

fn sent(digest: &str) -> SentEntry {
    SentEntry {
        digest: digest.to_owned(),
        thread_id: "th".to_owned(),
        issuer: DidKey::from_bytes([1; 32]),
        recipient: DidKey::from_bytes([2; 32]),
        type_uri: "t".to_owned(),
        class: AckClass::Signature,
        status: SenderStatus::Accepted,
        sent_at: 5,
    }
}

#[test]
fn effect_cache_entry_and_outbox_item_commit_together_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("party.redb");
    let buffered = Effect::Buffered {
        credential: b"{\"c\":1}".to_vec(),
    };
    {
        let store = RedbStore::open(&path).unwrap();
        let first = commit("d", buffered.clone(), Some(ack("k")));
        assert_eq!(
            store.commit(first.clone()),
            Ok(Committed::Fresh { transition: None })
        );
        assert_eq!(
            store.commit(first.clone()),
            Ok(Committed::AlreadyCompleted(first.entry.clone()))
        );
    }
    let store = RedbStore::open(&path).unwrap();
    assert_eq!(store.completed("d").unwrap().unwrap().ack, Some(ack("k")));
    assert_eq!(store.outbox().unwrap(), vec![ack("k")]);
    assert_eq!(
        store.effect_json("d").unwrap().unwrap(),
        serde_json::json!({"effect": "buffered", "credential": "{\"c\":1}"})
    );
    store.outbox_done("k").unwrap();
    assert_eq!(store.outbox().unwrap(), vec![]);
    // A duplicate-known puts the stored bytes back, once.
    let kept = store.completed("d").unwrap().unwrap().ack.unwrap();
    store.requeue(&kept).unwrap();
    store.requeue(&kept).unwrap();
    assert_eq!(store.outbox().unwrap(), vec![ack("k")]);
    // Retention drops the entry and its effect together, never earlier.
    let floor = Retention::new(0);
    assert_eq!(store.expire(10 + KEY_RETENTION_FLOOR_MS - 1, floor), Ok(0));
    assert_eq!(store.expire(10 + KEY_RETENTION_FLOOR_MS, floor), Ok(1));
    assert_eq!(store.completed("d"), Ok(None));
    assert_eq!(store.effect_json("d").unwrap(), None);
}

#[test]
fn an_acknowledgement_moves_the_sent_register_in_its_own_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("party.redb")).unwrap();
    let rkid = Rkid::from_bytes([3; 32]);
    store.record_deposit(&sent("s"), "uDEPOSIT", &rkid).unwrap();
    store.record_deposit(&sent("late"), "uLATE", &rkid).unwrap();
    assert_eq!(
        store.give_up("late", SenderFailure::ExpiredByAdapterPolicy),
        Ok(Some(SenderStatus::Failed(
            SenderFailure::ExpiredByAdapterPolicy
        )))
    );
    let status = |acked: &str, ack_digest: &str| {
        let effect = Effect::SenderStatus {
            acked: acked.to_owned(),
        };
        store.commit(commit(ack_digest, effect, None)).unwrap()
    };
    assert_eq!(
        status("s", "k1"),
        Committed::Fresh {
            transition: Some(Transition::Delivered)
        }
    );
    assert_eq!(
        status("late", "k2"),
        Committed::Fresh {
            transition: Some(Transition::LateDelivered)
        }
    );
    let all = store.sent_deposits().unwrap();
    let view: Vec<(&str, String, Option<&str>, Option<&str>)> = all
        .iter()
        .map(|s| {
            (
                s.entry.digest.as_str(),
                s.entry.status.to_string(),
                s.deposit.as_deref(),
                s.transition.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            (
                "late",
                "delivered".to_owned(),
                Some("uLATE"),
                Some("failed->delivered")
            ),
            (
                "s",
                "delivered".to_owned(),
                Some("uDEPOSIT"),
                Some("accepted->delivered")
            ),
        ]
    );
    // The acknowledgement is terminal: nothing went to the outbox.
    assert_eq!(store.outbox().unwrap(), vec![]);
    assert_eq!(
        store.sent("s").unwrap().unwrap().status,
        SenderStatus::Delivered
    );
}
