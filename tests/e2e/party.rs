//! Issue 25 phase 2: senders reach `delivered` through the real binary on
//! one loopback carrier (Delivery §4.2, §5a.8, §6.1, §6.2; `PROTOCOL.md`
//! §14). Two parties, Alice and Bob, each with a party file and a party
//! store, their queues on the same carrier; each holds the other's card.
//! Alice sends Bob an `encounter-credential-delivery/0.1`; Bob's collect
//! runs §6.2, commits effect + cache entry + acknowledgement, concludes,
//! then deposits the acknowledgement into Alice's queue (found from her
//! card's delivery hint); Alice's collect verifies it against her
//! sent-register, and her status reads `delivered`.

use super::*;

type Object = serde_json::Map<String, serde_json::Value>;

/// Two parties with each other's cards, both registered.
struct Parties {
    alice: PathBuf,
    bob: PathBuf,
}

fn party(dir: &Path, carrier: &Carrier, name: &str) -> PathBuf {
    let hint = format!("rltp+quic://{}#{}", carrier.addr, carrier.pin);
    let file = format!("{name}.party.json");
    let made = cli(
        dir,
        &[
            "party",
            "new",
            "--carrier",
            CARRIER,
            "--hint",
            &hint,
            "--out",
            &file,
        ],
    )
    .expect(0);
    assert_eq!(made.value("store"), format!("{name}.party.redb"));
    let card = format!("{name}.card.json");
    cli(dir, &["party", "card", "--party", &file, "--out", &card]).expect(0);
    let registered = cli_to(dir, carrier, &["register", "--key", &file]).expect(0);
    assert_eq!(registered.value("verdict"), "registered");
    dir.join(file)
}

fn parties(dir: &Path, carrier: &Carrier) -> Parties {
    let alice = party(dir, carrier, "alice");
    let bob = party(dir, carrier, "bob");
    for (file, card) in [(&alice, "bob.card.json"), (&bob, "alice.card.json")] {
        let path = file.to_str().unwrap();
        cli(dir, &["party", "trust", "--party", path, "--card", card]).expect(0);
    }
    Parties { alice, bob }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `send --json --party alice DOC`: the deposit id.
fn send(dir: &Path, carrier: &Carrier, alice: &Path, document: &str) -> String {
    let run = cli_to(
        dir,
        carrier,
        &["send", "--json", "--party", path(alice), document],
    )
    .expect(0);
    let events = objects(&run.stdout);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "sent-register", "{}", run.stdout);
    assert_eq!(last["senderStatus"], "accepted");
    let fin = &events[events.len() - 2];
    assert_eq!(fin["status"], "accepted");
    fin["deposit"].as_str().unwrap().to_owned()
}

/// `collect --json --conclude` of a party: the `deposit` and `ack` events.
fn collect(dir: &Path, carrier: &Carrier, who: &Path) -> (Vec<Object>, Vec<Object>) {
    let run = cli_to(
        dir,
        carrier,
        &["collect", "--json", "--conclude", "--key", path(who)],
    )
    .expect(0);
    let events = objects(&run.stdout);
    let of = |kind: &str| -> Vec<Object> {
        events
            .iter()
            .filter(|e| e["event"] == kind)
            .cloned()
            .collect()
    };
    (of("deposit"), of("ack"))
}

/// `status --json --party alice --deposit ID`: the sender-status object.
fn sender_status(dir: &Path, carrier: &Carrier, alice: &Path, deposit: &str) -> Object {
    let run = cli_to(
        dir,
        carrier,
        &[
            "status",
            "--json",
            "--party",
            path(alice),
            "--deposit",
            deposit,
        ],
    )
    .expect(0);
    // While `accepted` the carrier is asked too (its retry events first).
    let mut events = objects(&run.stdout);
    let last = events.pop().unwrap();
    assert_eq!(last["event"], "sender-status", "{}", run.stdout);
    last
}

#[test]
fn a_credential_delivery_reaches_delivered_and_a_duplicate_re_sends_the_stored_ack() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let Parties { alice, bob } = parties(dir, &carrier);
    let made = cli(
        dir,
        &[
            "party",
            "credential",
            "--party",
            path(&alice),
            "--out",
            "d.json",
        ],
    )
    .expect(0);
    assert_eq!(made.value("document"), "d.json");
    let digest = digest_of(&std::fs::read_to_string(dir.join("d.json")).unwrap());

    let deposit = send(dir, &carrier, &alice, "d.json");
    let status = sender_status(dir, &carrier, &alice, &deposit);
    assert_eq!(status["senderStatus"], "accepted");
    assert_eq!(status["digest"], digest.as_str());

    // Bob: stage 9 commits, concludes, deposits the acknowledgement.
    let (deposits, acks) = collect(dir, &carrier, &bob);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["digest"], digest.as_str());
    assert_eq!(deposits[0]["disposition"], "unique");
    assert_eq!(deposits[0]["stage"], 9);
    let ack = deposits[0]["ack"].as_str().unwrap().to_owned();
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["ack"], ack.as_str());
    assert_eq!(acks[0]["status"], "admitted");

    // Alice: the acknowledgement passes §4.2 against her sent-register.
    let (deposits, acks) = collect(dir, &carrier, &alice);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["digest"], ack.as_str());
    assert_eq!(deposits[0]["disposition"], "unique");
    assert_eq!(deposits[0]["transition"], "accepted->delivered");
    assert_eq!(deposits[0]["ack"], serde_json::Value::Null);
    assert!(acks.is_empty(), "an acknowledgement is terminal");
    let status = sender_status(dir, &carrier, &alice, &deposit);
    assert_eq!(status["senderStatus"], "delivered");
    assert_eq!(status["transition"], "accepted->delivered");

    // The same document again (sealed afresh): Bob answers duplicate-known
    // and re-sends the stored acknowledgement — the same digest, so the
    // same JCS bytes.
    let again = send(dir, &carrier, &alice, "d.json");
    assert_ne!(again, deposit);
    let (deposits, acks) = collect(dir, &carrier, &bob);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["disposition"], "duplicate-known");
    assert_eq!(deposits[0]["stage"], 4);
    assert_eq!(deposits[0]["ack"], ack.as_str());
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["ack"], ack.as_str());
    assert_eq!(acks[0]["status"], "admitted");
    // Alice: the re-sent acknowledgement is duplicate-known, and nothing
    // answers it (no ack of an ack): Bob's queue stays empty.
    let (deposits, acks) = collect(dir, &carrier, &alice);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["digest"], ack.as_str());
    assert_eq!(deposits[0]["disposition"], "duplicate-known");
    assert_eq!(deposits[0]["ack"], serde_json::Value::Null);
    assert!(acks.is_empty());
    let (deposits, acks) = collect(dir, &carrier, &bob);
    assert!(deposits.is_empty() && acks.is_empty());
    let status = sender_status(dir, &carrier, &alice, &again);
    assert_eq!(status["senderStatus"], "delivered");
}

#[test]
fn a_crash_between_commit_and_outbox_deposits_the_kept_ack_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let Parties { alice, bob } = parties(dir, &carrier);
    cli(
        dir,
        &[
            "party",
            "credential",
            "--party",
            path(&alice),
            "--out",
            "d.json",
        ],
    )
    .expect(0);
    let deposit = send(dir, &carrier, &alice, "d.json");

    // Bob dies right after the stage-9 commit: nothing concluded, nothing
    // deposited.
    let crashed = Running::start_env(
        dir,
        &carrier.args(),
        &["collect", "--json", "--conclude", "--key", path(&bob)],
        &[("RLTP_PARTY_FAULT".into(), "after-commit".into())],
    );
    assert_eq!(crashed.wait(), None, "killed by SIGABRT, no exit code");
    let (deposits, _) = collect(dir, &carrier, &alice);
    assert!(
        deposits.is_empty(),
        "no acknowledgement left before the crash"
    );

    // The next run: the redelivered document is duplicate-known, the kept
    // acknowledgement is deposited once.
    let (deposits, acks) = collect(dir, &carrier, &bob);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["disposition"], "duplicate-known");
    let ack = deposits[0]["ack"].as_str().unwrap().to_owned();
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["ack"], ack.as_str());
    assert_eq!(acks[0]["status"], "admitted");

    let (deposits, _) = collect(dir, &carrier, &alice);
    assert_eq!(deposits.len(), 1, "exactly one acknowledgement arrived");
    assert_eq!(deposits[0]["digest"], ack.as_str());
    assert_eq!(deposits[0]["transition"], "accepted->delivered");
    let status = sender_status(dir, &carrier, &alice, &deposit);
    assert_eq!(status["senderStatus"], "delivered");
    // Nothing is left: the outbox is empty, the queue concluded.
    let (deposits, acks) = collect(dir, &carrier, &bob);
    assert!(deposits.is_empty() && acks.is_empty());
}
