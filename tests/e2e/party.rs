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

/// One carrier, the directory the parties live in, and the environment
/// every command runs with (the test clock hook, when the carrier has one).
struct World {
    dir: PathBuf,
    carrier: Carrier,
    env: Vec<(String, String)>,
}

/// Two parties with each other's cards, both registered.
struct Parties {
    alice: PathBuf,
    bob: PathBuf,
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Alice with her queue on `a`'s carrier, Bob with his on `b`'s (one
/// directory), each holding the other's card, and Alice's credential
/// delivery to Bob in `d.json`.
fn parties_on(a: &World, b: &World) -> Parties {
    let alice = a.party("alice");
    let bob = b.party("bob");
    for (file, card) in [(&alice, "bob.card.json"), (&bob, "alice.card.json")] {
        a.cli(&["party", "trust", "--party", path(file), "--card", card])
            .expect(0);
    }
    let made = a
        .cli(&[
            "party",
            "credential",
            "--party",
            path(&alice),
            "--out",
            "d.json",
        ])
        .expect(0);
    assert_eq!(made.value("document"), "d.json");
    Parties { alice, bob }
}

impl World {
    fn start(dir: &Path) -> World {
        World::start_named(dir, "data")
    }

    /// A carrier over `dir/<data>`.
    fn start_named(dir: &Path, data: &str) -> World {
        World {
            dir: dir.to_owned(),
            carrier: Carrier::start(&dir.join(data), None),
            env: Vec::new(),
        }
    }

    fn cli(&self, args: &[&str]) -> Run {
        cli_env(&self.dir, args, &self.env)
    }

    fn cli_to(&self, args: &[&str]) -> Run {
        let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        all.extend(self.carrier.args());
        cli_env(&self.dir, &all, &self.env)
    }

    fn party(&self, name: &str) -> PathBuf {
        let hint = format!("rltp+quic://{}#{}", self.carrier.addr, self.carrier.pin);
        let file = format!("{name}.party.json");
        let made = self
            .cli(&[
                "party",
                "new",
                "--carrier",
                CARRIER,
                "--hint",
                &hint,
                "--out",
                &file,
            ])
            .expect(0);
        assert_eq!(made.value("store"), format!("{name}.party.redb"));
        let card = format!("{name}.card.json");
        self.cli(&["party", "card", "--party", &file, "--out", &card])
            .expect(0);
        let registered = self.cli_to(&["register", "--key", &file]).expect(0);
        assert_eq!(registered.value("verdict"), "registered");
        self.dir.join(file)
    }

    /// Alice and Bob on this carrier, each holding the other's card, and
    /// Alice's credential delivery to Bob in `d.json`.
    fn parties(&self) -> Parties {
        parties_on(self, self)
    }

    /// `send --json --party alice d.json`: the deposit id.
    fn send(&self, alice: &Path) -> String {
        let run = self
            .cli_to(&["send", "--json", "--party", path(alice), "d.json"])
            .expect(0);
        let events = objects(&run.stdout);
        let last = events.last().unwrap();
        assert_eq!(last["event"], "sent-register", "{}", run.stdout);
        assert_eq!(last["senderStatus"], "accepted");
        let fin = &events[events.len() - 2];
        assert_eq!(fin["status"], "accepted");
        fin["deposit"].as_str().unwrap().to_owned()
    }

    /// `collect --json --conclude` of a party: its `deposit` and `ack` events.
    fn collect(&self, who: &Path) -> (Vec<Object>, Vec<Object>) {
        let run = self
            .cli_to(&["collect", "--json", "--conclude", "--key", path(who)])
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

    /// `status --json --party alice --deposit ID`: the exit code and the
    /// sender-status object.
    fn sender_status(&self, alice: &Path, deposit: &str) -> (i32, Object) {
        let run = self.cli_to(&[
            "status",
            "--json",
            "--party",
            path(alice),
            "--deposit",
            deposit,
        ]);
        // While `accepted` the carrier is asked too (its retry events first).
        let mut events = objects(&run.stdout);
        let last = events.pop().unwrap();
        assert_eq!(last["event"], "sender-status", "{run:?}");
        (run.code, last)
    }

    /// Bob's collect, killed right after its stage-9 commit.
    fn crash_after_commit(&self, bob: &Path) {
        let mut env = self.env.clone();
        env.push(("RLTP_PARTY_FAULT".into(), "after-commit".into()));
        let crashed = Running::start_env(
            &self.dir,
            &self.carrier.args(),
            &["collect", "--json", "--conclude", "--key", path(bob)],
            &env,
        );
        assert_eq!(crashed.wait(), None, "killed by SIGABRT, no exit code");
    }
}

#[test]
fn a_credential_delivery_reaches_delivered_and_a_duplicate_re_sends_the_stored_ack() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::start(dir.path());
    let Parties { alice, bob } = w.parties();
    let digest = digest_of(&std::fs::read_to_string(w.dir.join("d.json")).unwrap());

    let deposit = w.send(&alice);
    let (code, status) = w.sender_status(&alice, &deposit);
    assert_eq!((code, &status["senderStatus"]), (0, &"accepted".into()));
    assert_eq!(status["digest"], digest.as_str());

    // Bob: stage 9 commits, concludes, deposits the acknowledgement.
    let (deposits, acks) = w.collect(&bob);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["digest"], digest.as_str());
    assert_eq!(deposits[0]["disposition"], "unique");
    assert_eq!(deposits[0]["stage"], 9);
    let ack = deposits[0]["ack"].as_str().unwrap().to_owned();
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["ack"], ack.as_str());
    assert_eq!(acks[0]["status"], "admitted");

    // Alice: the acknowledgement passes §4.2 against her sent-register.
    let (deposits, acks) = w.collect(&alice);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["digest"], ack.as_str());
    assert_eq!(deposits[0]["disposition"], "unique");
    assert_eq!(deposits[0]["transition"], "accepted->delivered");
    assert_eq!(deposits[0]["ack"], serde_json::Value::Null);
    assert!(acks.is_empty(), "an acknowledgement is terminal");
    let (code, status) = w.sender_status(&alice, &deposit);
    assert_eq!((code, &status["senderStatus"]), (0, &"delivered".into()));
    assert_eq!(status["transition"], "accepted->delivered");

    // The same document again (sealed afresh): Bob answers duplicate-known
    // and re-sends the stored acknowledgement — the same digest, so the
    // same JCS bytes.
    let again = w.send(&alice);
    assert_ne!(again, deposit);
    let (deposits, acks) = w.collect(&bob);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["disposition"], "duplicate-known");
    assert_eq!(deposits[0]["stage"], 4);
    assert_eq!(deposits[0]["ack"], ack.as_str());
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["ack"], ack.as_str());
    assert_eq!(acks[0]["status"], "admitted");
    // Alice: the re-sent acknowledgement is duplicate-known, and nothing
    // answers it (no ack of an ack): Bob's queue stays empty.
    let (deposits, acks) = w.collect(&alice);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["digest"], ack.as_str());
    assert_eq!(deposits[0]["disposition"], "duplicate-known");
    assert_eq!(deposits[0]["ack"], serde_json::Value::Null);
    assert!(acks.is_empty());
    let (deposits, acks) = w.collect(&bob);
    assert!(deposits.is_empty() && acks.is_empty());
    let (_, status) = w.sender_status(&alice, &again);
    assert_eq!(status["senderStatus"], "delivered");
}

#[test]
fn a_crash_between_commit_and_outbox_deposits_the_kept_ack_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::start(dir.path());
    let Parties { alice, bob } = w.parties();
    let deposit = w.send(&alice);

    // Bob dies right after the stage-9 commit: nothing concluded, nothing
    // deposited.
    w.crash_after_commit(&bob);
    let (deposits, _) = w.collect(&alice);
    assert!(
        deposits.is_empty(),
        "no acknowledgement left before the crash"
    );

    // The next run: the redelivered document is duplicate-known, the kept
    // acknowledgement is deposited once.
    let (deposits, acks) = w.collect(&bob);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["disposition"], "duplicate-known");
    let ack = deposits[0]["ack"].as_str().unwrap().to_owned();
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["ack"], ack.as_str());
    assert_eq!(acks[0]["status"], "admitted");

    let (deposits, _) = w.collect(&alice);
    assert_eq!(deposits.len(), 1, "exactly one acknowledgement arrived");
    assert_eq!(deposits[0]["digest"], ack.as_str());
    assert_eq!(deposits[0]["transition"], "accepted->delivered");
    let (_, status) = w.sender_status(&alice, &deposit);
    assert_eq!(status["senderStatus"], "delivered");
    // Nothing is left: the outbox is empty, the queue concluded.
    let (deposits, acks) = w.collect(&bob);
    assert!(deposits.is_empty() && acks.is_empty());
}

/// §6.1: the carrier gives the document up while Bob is down after his
/// commit (Alice's status: `failed(expired-by-adapter-policy)`); Bob's
/// next run deposits the kept acknowledgement, and Alice's status moves
/// `failed->delivered`, surfaced in JSON and text.
#[test]
fn a_late_ack_after_give_up_moves_failed_to_delivered_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let clock = dir.join("clock-offset");
    std::fs::write(&clock, "0\n").unwrap();
    let config = "[constants]\ngive-up-horizon = \"P1D\"\n[limits]\nsweep-interval-ms = 50\n";
    let spec = Spec::new(&dir.join("data"), config).with_clock(&clock);
    let w = World {
        dir: dir.to_owned(),
        carrier: Carrier::start_with(&spec),
        env: spec.env.clone(),
    };
    let Parties { alice, bob } = w.parties();
    let deposit = w.send(&alice);
    w.crash_after_commit(&bob);

    // A day and a half passes (carrier and parties alike): past the
    // give-up instant, within the horizon the carrier still answers
    // `given-up` for.
    std::fs::write(&clock, "129600000\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = loop {
        let (code, status) = w.sender_status(&alice, &deposit);
        if code == 1 {
            break status;
        }
        assert!(Instant::now() < deadline, "never given up: {status:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(failed["senderStatus"], "failed(expired-by-adapter-policy)");

    // Bob's next run: the document is gone from his queue, the kept
    // acknowledgement still goes out.
    let (deposits, acks) = w.collect(&bob);
    assert!(deposits.is_empty());
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["status"], "admitted");
    let (deposits, _) = w.collect(&alice);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["transition"], "failed->delivered");
    let (code, status) = w.sender_status(&alice, &deposit);
    assert_eq!((code, &status["senderStatus"]), (0, &"delivered".into()));
    assert_eq!(status["transition"], "failed->delivered");
    let text = w
        .cli_to(&["status", "--party", path(&alice), "--deposit", &deposit])
        .expect(0);
    assert_eq!(text.value("sender-status"), "delivered");
    assert_eq!(text.value("transition"), "failed->delivered");
}

/// `collect --watch --conclude`: the always-on recipient acknowledges as
/// documents arrive (commit → conclude → outbox within the session).
#[test]
fn a_watching_recipient_acknowledges_as_documents_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::start(dir.path());
    let Parties { alice, bob } = w.parties();
    let watch = Running::start_env(
        &w.dir,
        &w.carrier.args(),
        &[
            "collect",
            "--json",
            "--watch",
            "--conclude",
            "--key",
            path(&bob),
        ],
        &w.env,
    );
    watch.next_event("watching");
    let deposit = w.send(&alice);
    let taken = watch.next_event("deposit");
    assert_eq!(taken["disposition"], "unique");
    let concluded = watch.next_event("conclude");
    assert_eq!(concluded["verdict"], "served");
    let ack = watch.next_event("ack");
    assert_eq!(ack["status"], "admitted");
    assert_eq!(ack["ack"], taken["ack"]);
    let (deposits, _) = w.collect(&alice);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["transition"], "accepted->delivered");
    let (_, status) = w.sender_status(&alice, &deposit);
    assert_eq!(status["senderStatus"], "delivered");
    assert_eq!(watch.interrupt(), Some(0));
}

/// Two carriers: Alice's queue on X, Bob's on Y. Alice deposits at Y; Bob's
/// acknowledgement goes to X, found from Alice's card's delivery hint —
/// Bob has no account at X and shows it no identity (§5a.4).
#[test]
fn across_two_carriers_the_ack_finds_the_senders_carrier_from_her_card() {
    let dir = tempfile::tempdir().unwrap();
    let x = World::start_named(dir.path(), "x");
    let y = World::start_named(dir.path(), "y");
    let Parties { alice, bob } = parties_on(&x, &y);
    let deposit = y.send(&alice);
    let (deposits, acks) = y.collect(&bob);
    assert_eq!(deposits[0]["disposition"], "unique");
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["status"], "admitted");
    // Nothing came back to Bob's own carrier.
    let (deposits, _) = y.collect(&bob);
    assert!(deposits.is_empty());
    let (deposits, _) = x.collect(&alice);
    assert_eq!(deposits.len(), 1);
    assert_eq!(deposits[0]["digest"], acks[0]["ack"]);
    assert_eq!(deposits[0]["transition"], "accepted->delivered");
    let (code, status) = y.sender_status(&alice, &deposit);
    assert_eq!((code, &status["senderStatus"]), (0, &"delivered".into()));
}

/// The sender's carrier is down when Bob acknowledges: Bob's collect
/// concludes, keeps the acknowledgement in the outbox and exits 1 (not
/// clean) within its `--give-up-after`; once the carrier is back, Bob's
/// next run deposits it and Alice reaches `delivered`.
#[test]
fn an_ack_for_an_unreachable_carrier_stays_in_the_outbox_until_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let x_spec = Spec::fixed(&dir.join("x"), "");
    let x = World {
        dir: dir.to_owned(),
        carrier: Carrier::start_with(&x_spec),
        env: Vec::new(),
    };
    let y = World::start_named(dir, "y");
    let Parties { alice, bob } = parties_on(&x, &y);
    let deposit = y.send(&alice);
    let World { carrier, .. } = x;
    assert!(carrier.terminate().success());

    let run = y.cli_to(&[
        "collect",
        "--json",
        "--conclude",
        "--give-up-after",
        "PT2S",
        "--key",
        path(&bob),
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    let events = objects(&run.stdout);
    let of = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!((of("deposit"), of("conclude"), of("ack")), (1, 1, 1));
    let ack = events.iter().find(|e| e["event"] == "ack").unwrap();
    assert_eq!(ack["deposit"], serde_json::Value::Null);
    assert_eq!(ack["status"], "failed(expired-by-adapter-policy)");

    let x = World {
        dir: dir.to_owned(),
        carrier: Carrier::start_with(&x_spec),
        env: Vec::new(),
    };
    let (deposits, acks) = y.collect(&bob);
    assert!(deposits.is_empty(), "the document was concluded");
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["status"], "admitted");
    let (deposits, _) = x.collect(&alice);
    assert_eq!(deposits[0]["transition"], "accepted->delivered");
    let (_, status) = y.sender_status(&alice, &deposit);
    assert_eq!(status["senderStatus"], "delivered");
}

/// The party store is held by one process: while Alice's own watch runs,
/// `send --party` stops before anything leaves (exit 2, naming the store)
/// — never a document whose acknowledgement the register could not match.
#[test]
fn a_send_while_the_party_store_is_held_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::start(dir.path());
    let Parties { alice, bob } = w.parties();
    let watch = Running::start_env(
        &w.dir,
        &w.carrier.args(),
        &["collect", "--json", "--watch", "--key", path(&alice)],
        &w.env,
    );
    watch.next_event("watching");
    let refused = w
        .cli_to(&["send", "--party", path(&alice), "d.json"])
        .expect(2);
    assert!(
        refused.stderr.starts_with(&format!(
            "rltp-carrier send: {}: party store: ",
            w.dir.join("alice.party.redb").display()
        )),
        "{refused:?}"
    );
    assert!(refused.lines("deposit").len() == 1 && refused.lines("final").is_empty());
    let (deposits, _) = w.collect(&bob);
    assert!(deposits.is_empty(), "nothing was sent");
    assert_eq!(watch.interrupt(), Some(0));
}

/// A key file keeps working; `party new --from-key` migrates it: the same
/// principal (it registers the new rkid beside the old one), a new rkid,
/// and a message saying so.
#[test]
fn a_key_file_migrates_to_a_party_file_keeping_its_principal() {
    let dir = tempfile::tempdir().unwrap();
    let w = World::start(dir.path());
    let (key, rkid) = keys_new(&w.dir, "old.keys.json");
    let old = w.cli_to(&["register", "--key", path(&key)]).expect(0);
    assert_eq!(old.value("verdict"), "registered");
    let hint = format!("rltp+quic://{}#{}", w.carrier.addr, w.carrier.pin);
    let made = w
        .cli(&[
            "party",
            "new",
            "--carrier",
            CARRIER,
            "--hint",
            &hint,
            "--from-key",
            path(&key),
            "--out",
            "new.party.json",
        ])
        .expect(0);
    assert!(
        made.stderr
            .contains("the principal is kept, the rkid is new"),
        "{made:?}"
    );
    let shown = w.cli(&["keys", "show", "--key", path(&key)]).expect(0);
    assert_eq!(made.value("principal"), shown.value("principal"));
    assert_ne!(made.value("rkid"), rkid);
    let new = w.cli_to(&["register", "--key", "new.party.json"]).expect(0);
    assert_eq!(new.value("verdict"), "registered");
    assert_eq!(new.value("principal"), shown.value("principal"));
    // keys rotate never rewrites a party file.
    let refused = w
        .cli(&["keys", "rotate", "--key", "new.party.json"])
        .expect(2);
    assert!(refused.stderr.contains("is a party file"), "{refused:?}");
}
