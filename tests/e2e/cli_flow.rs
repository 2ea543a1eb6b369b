//! The CLI subcommands against a real carrier process: the full flow,
//! restarts, conclusion, another principal, an unknown rkid, the demo and
//! a refused configuration.

use super::*;

fn send_doc(dir: &Path, carrier: &Carrier, rkid: &str, path: &Path) -> Run {
    cli_to(
        dir,
        carrier,
        &["send", "--to", rkid, path.to_str().unwrap()],
    )
}

fn collect(dir: &Path, carrier: &Carrier, key: &Path, conclude: bool) -> Run {
    let mut args = vec!["collect", "--key", key.to_str().unwrap(), "--out", "inbox"];
    if conclude {
        args.push("--conclude");
    }
    cli_to(dir, carrier, &args)
}

/// keys → declaration → register → send (human and `--json`) → status →
/// collect, open, write, conclude → nothing left → SIGTERM drains, exit 0.
#[test]
fn full_flow_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);

    let declaration =
        cli_to(dir, &carrier, &["declaration", "--issuer", &carrier.issuer]).expect(0);
    assert_eq!(declaration.value("issuer"), carrier.issuer);
    assert_eq!(declaration.value("recipient"), carrier.issuer);
    assert_eq!(declaration.value("revision"), "1");
    assert_eq!(declaration.value("challenge-lifetime"), "PT1M");
    assert_eq!(declaration.value("status-horizon"), "PT30S");
    assert_eq!(
        declaration.value("signature"),
        "verified (eddsa-jcs-2022, key of the issuer)"
    );
    // A foreign issuer is refused.
    let foreign = cli_to(
        dir,
        &carrier,
        &[
            "declaration",
            "--issuer",
            "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
        ],
    )
    .expect(1);
    assert!(
        foreign.stderr.contains(
            "is not the configured did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
        ),
        "{foreign:?}"
    );

    // serve prints C on stdout (PROTOCOL.md §5): the value keys new takes.
    assert_eq!(carrier.carrier, CARRIER);
    let (key, rkid) = keys_new(dir, "alice.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let again = cli(
        dir,
        &["keys", "new", "--carrier", CARRIER, "--out", "alice.json"],
    )
    .expect(2);
    assert!(
        again.stderr.contains("refusing to overwrite key material"),
        "{again:?}"
    );

    let register = cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    assert_eq!(register.value("verdict"), "registered");
    assert_eq!(register.value("rkid"), rkid);
    let register = cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    assert_eq!(register.value("verdict"), "registered(idempotent)");

    let first_text = r#"{"type":"note","n":1,"text":"héllo"}"#;
    let first = document(dir, "first.json", first_text);
    let sent = send_doc(dir, &carrier, &rkid, &first).expect(0);
    assert_eq!(sent.value("document-digest"), digest_of(first_text));
    assert_eq!(sent.value("verdict"), "admitted");
    assert_eq!(sent.value("status"), "accepted");
    let first_deposit = sent.value("deposit").to_owned();
    assert_eq!(first_deposit.len(), 47);

    let second_text = r#"{"n":2}"#;
    let second = document(dir, "second.json", second_text);
    let json = cli_to(
        dir,
        &carrier,
        &["send", "--json", "--to", &rkid, second.to_str().unwrap()],
    )
    .expect(0);
    let events: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "sealed",
            "policy",
            "attempt",
            "policy",
            "connected",
            "verdict",
            "status",
            "final"
        ]
    );
    assert_eq!(events[0]["digest"], digest_of(second_text));
    // The §11 floors until the declaration is read, then the declared ones.
    assert_eq!(events[1]["source"], "fallback");
    assert_eq!(events[1]["statusHorizonMs"], 5_000);
    assert_eq!(events[3]["source"], "declared");
    assert_eq!(events[3]["statusHorizonMs"], 30_000);
    assert_eq!(events[3]["giveUpHorizonMs"], 14 * 86_400_000u64);
    assert!(["quic", "tcp"].contains(&events[4]["transport"].as_str().unwrap()));
    assert_eq!(events[5]["verdict"], "admitted");
    assert_eq!(events[6]["status"], "accepted");
    assert_eq!(events[7]["deposit"], events[0]["deposit"]);
    assert!(events.iter().all(|e| e["elapsedMs"].is_u64()), "{events:?}");

    let status = cli_to(
        dir,
        &carrier,
        &["status", "--to", &rkid, "--deposit", &first_deposit],
    )
    .expect(0);
    assert_eq!(status.value("status"), "accepted");

    let collected = collect(dir, &carrier, &key, true).expect(0);
    assert_eq!(collected.value("collect"), "served deposits 2");
    let deposits = collected.lines("deposit ");
    assert_eq!(deposits.len(), 2, "{collected:?}");
    for (line, text) in deposits.iter().zip([first_text, second_text]) {
        let digest = digest_of(text);
        assert!(
            line.ends_with(&format!("digest {digest} written inbox/{digest}.json")),
            "{line}"
        );
        let written = std::fs::read(dir.join("inbox").join(format!("{digest}.json"))).unwrap();
        let jcs =
            rltp_proofs::jcs::canonicalize(&rltp_proofs::json::parse(text.as_bytes()).unwrap())
                .unwrap();
        assert_eq!(written, jcs);
    }
    assert!(deposits[0].starts_with(&format!("deposit {first_deposit} ")));
    assert_eq!(collected.value("conclude"), "served concluded 2");

    let empty = collect(dir, &carrier, &key, true).expect(0);
    assert_eq!(empty.value("collect"), "served deposits 0");

    assert_eq!(carrier.terminate().code(), Some(0));
}

/// Three admitted deposits survive a SIGKILL of the carrier: after a
/// restart on the same data dir (same certificate) all three are collected.
#[test]
fn a_restart_between_submit_and_collect_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let carrier = Carrier::start(&data, None);
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let texts = [r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#];
    for (i, text) in texts.iter().enumerate() {
        let path = document(dir, &format!("d{i}.json"), text);
        send_doc(dir, &carrier, &rkid, &path).expect(0);
    }
    let pin = carrier.pin.clone();
    carrier.crash();

    let carrier = Carrier::start(&data, None);
    assert_eq!(carrier.pin, pin, "the certificate is kept in the data dir");
    let collected = collect(dir, &carrier, &key, true).expect(0);
    let deposits = collected.lines("deposit ");
    assert_eq!(deposits.len(), 3, "{collected:?}");
    for (line, text) in deposits.iter().zip(texts) {
        assert!(
            line.contains(&format!(" digest {} written ", digest_of(text))),
            "{line}"
        );
    }
    assert_eq!(collected.value("conclude"), "served concluded 3");
}

/// A concluded deposit never comes back: not on the next collect, not
/// after a graceful restart; its status stays `accepted` (§5a.8).
#[test]
fn a_concluded_deposit_never_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let carrier = Carrier::start(&data, None);
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let path = document(dir, "d.json", r#"{"kept":false}"#);
    let deposit = send_doc(dir, &carrier, &rkid, &path)
        .expect(0)
        .value("deposit")
        .to_owned();
    let path = document(dir, "e.json", r#"{"kept":true}"#);
    send_doc(dir, &carrier, &rkid, &path).expect(0);

    // Collect without concluding: everything is redelivered.
    let first = collect(dir, &carrier, &key, false).expect(0);
    assert_eq!(first.value("collect"), "served deposits 2");
    let again = collect(dir, &carrier, &key, false).expect(0);
    assert_eq!(again.value("collect"), "served deposits 2");
    assert_eq!(
        again.lines("deposit ")[0].split(' ').next_back(),
        Some(format!("inbox/{}.json", digest_of(r#"{"kept":false}"#)).as_str())
    );
    assert!(again.lines("deposit ")[0].contains(" duplicate-known "));

    // Conclude: gone now and after a restart.
    let concluded = collect(dir, &carrier, &key, true).expect(0);
    assert_eq!(concluded.value("conclude"), "served concluded 2");
    assert_eq!(
        collect(dir, &carrier, &key, false)
            .expect(0)
            .value("collect"),
        "served deposits 0"
    );
    assert_eq!(carrier.terminate().code(), Some(0));
    let carrier = Carrier::start(&data, None);
    assert_eq!(
        collect(dir, &carrier, &key, true)
            .expect(0)
            .value("collect"),
        "served deposits 0"
    );
    let status = cli_to(
        dir,
        &carrier,
        &["status", "--to", &rkid, "--deposit", &deposit],
    )
    .expect(0);
    assert_eq!(status.value("status"), "accepted");
}

/// Another principal presenting a valid proof for Alice's rkid: its
/// collect is `refused(no-such-queue)`, its registration at the held
/// generation is `refused(stale-generation)` naming the generation that
/// would win; Alice still collects. After `keys rotate` to that
/// generation it rebinds (§5a.3), and then Alice's collect is refused.
#[test]
fn another_principals_collect_is_refused_no_such_queue() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let (alice, rkid) = keys_new(dir, "alice.json");
    cli_to(
        dir,
        &carrier,
        &["register", "--key", alice.to_str().unwrap()],
    )
    .expect(0);
    let path = document(dir, "d.json", r#"{"for":"alice"}"#);
    send_doc(dir, &carrier, &rkid, &path).expect(0);

    // Mallory: own root and nonce (another principal), Alice's rkid key.
    let (mallory, _) = keys_new(dir, "mallory.json");
    let alice_file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&alice).unwrap()).unwrap();
    let mut mallory_file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&mallory).unwrap()).unwrap();
    mallory_file["rkidSecret"] = alice_file["rkidSecret"].clone();
    mallory_file["rkid"] = alice_file["rkid"].clone();
    std::fs::write(&mallory, serde_json::to_vec(&mallory_file).unwrap()).unwrap();

    let refused = collect(dir, &carrier, &mallory, true).expect(1);
    assert_eq!(
        refused.value("collect"),
        "refused(no-such-queue) deposits 0"
    );
    let stale = cli_to(
        dir,
        &carrier,
        &["register", "--key", mallory.to_str().unwrap()],
    )
    .expect(1);
    assert_eq!(stale.value("verdict"), "refused(stale-generation)");
    assert_eq!(stale.value("held-generation"), "1");
    assert_eq!(stale.value("winning-generation"), "2");

    let served = collect(dir, &carrier, &alice, false).expect(0);
    assert_eq!(served.value("collect"), "served deposits 1");

    let rotated = cli(dir, &["keys", "rotate", "--key", mallory.to_str().unwrap()]).expect(0);
    assert_eq!(rotated.value("generation"), "2");
    assert_eq!(rotated.value("rkid"), rkid);
    let rebound = cli_to(
        dir,
        &carrier,
        &["register", "--key", mallory.to_str().unwrap()],
    )
    .expect(0);
    assert_eq!(rebound.value("verdict"), "rebound");
    let refused = collect(dir, &carrier, &alice, false).expect(1);
    assert_eq!(
        refused.value("collect"),
        "refused(no-such-queue) deposits 0"
    );
}

/// A submission to an rkid nobody registered: `refused(no-such-queue)`,
/// which the sender reports as `failed(unroutable)` and exits 1.
#[test]
fn an_unknown_rkid_is_refused_no_such_queue() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let (_, rkid) = keys_new(dir, "nobody.json");
    let path = document(dir, "d.json", r#"{"to":"nobody"}"#);
    let run = cli_to(
        dir,
        &carrier,
        &["send", "--json", "--to", &rkid, path.to_str().unwrap()],
    )
    .expect(1);
    let events: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdict = events.iter().find(|e| e["event"] == "verdict").unwrap();
    assert_eq!(verdict["verdict"], "refused(no-such-queue)");
    assert_eq!(verdict["retriable"], false);
    assert_eq!(events.last().unwrap()["status"], "failed(unroutable)");
    let human = send_doc(dir, &carrier, &rkid, &path).expect(1);
    assert_eq!(human.value("verdict"), "refused(no-such-queue)");
    assert_eq!(human.value("status"), "failed(unroutable)");
}

/// `demo` runs the whole round trip on its own loopback carrier and exits 0.
#[test]
fn demo_exits_0_and_prints_the_expected_digest() {
    let dir = tempfile::tempdir().unwrap();
    let run = cli(dir.path(), &["demo"]).expect(0);
    assert!(
        run.stdout
            .contains(&format!("digest {SEAL_SAMPLE_DIGEST}\n")),
        "{run:?}"
    );
    // The delivery-ack document with its {mac} proof, digest computed independently.
    assert!(
        run.stdout
            .contains("digest uEiCWFlHC8X3PLWFmjQM8a-s3NIH8dQujYmw4kFUxI1kGTg\n")
    );
    assert!(
        run.stdout
            .contains(&format!("digest {SEAL_SAMPLE_DIGEST} matches"))
    );
    assert!(run.stdout.contains("verdict served, concluded 2"));
    assert!(
        run.stdout
            .contains("verdict served, 0 deposits: nothing is redelivered")
    );
    assert!(
        run.stdout
            .contains("alice: sender-status delivered (accepted->delivered)\n"),
        "{run:?}"
    );
    assert!(run.stdout.ends_with("demo: all 15 steps ok\n"), "{run:?}");
    assert!(!run.stdout.contains("FAILED"));
    // A vectors dir without the files is a failing step, not a skip.
    let missing = cli(dir.path(), &["demo", "--vectors", "no-such-dir"]).expect(1);
    assert!(
        missing.stdout.starts_with("rltp-carrier demo"),
        "{missing:?}"
    );
    assert!(
        missing.stdout.contains(
            "step  1  load vectors               FAILED  cannot read no-such-dir/seal.json"
        )
    );
}

/// A configuration outside a §11 domain is refused at start, naming the
/// field and its domain; nothing is created.
#[test]
fn bad_config_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = document(
        dir.path(),
        "carrier.toml",
        "[constants]\nchallenge-lifetime = \"PT4S\"\n",
    );
    let data = dir.path().join("data");
    let run = cli(
        dir.path(),
        &[
            "serve".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
            "--data-dir".as_ref(),
            data.as_os_str(),
        ],
    )
    .expect(2);
    assert_eq!(
        run.stderr.trim_end(),
        "rltp-carrier serve: config field constants: challenge-lifetime \"PT4S\" is outside its domain [PT5S, PT5M]"
    );
    assert!(!data.exists());
}

/// `collect --watch --conclude`: the held deposit, then a deposit pushed
/// while the session is open, each written and concluded; Ctrl-C ends it
/// with exit 0 and nothing is left to collect.
#[test]
fn collect_watch_handles_pushed_deposits() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let held = document(dir, "held.json", r#"{"when":"before"}"#);
    send_doc(dir, &carrier, &rkid, &held).expect(0);

    let watch = Running::start(
        dir,
        &carrier,
        &[
            "collect",
            "--key",
            key.to_str().unwrap(),
            "--out",
            "inbox",
            "--watch",
            "--conclude",
        ],
    );
    let first = watch.next("deposit ");
    assert!(
        first.contains(&format!(
            " digest {} written ",
            digest_of(r#"{"when":"before"}"#)
        )),
        "{first}"
    );
    assert!(watch.next("watching").starts_with("watching refresh-at "));
    assert_eq!(watch.next("conclude "), "conclude served concluded 1");

    let pushed = document(dir, "pushed.json", r#"{"when":"during"}"#);
    send_doc(dir, &carrier, &rkid, &pushed).expect(0);
    let second = watch.next("deposit ");
    assert!(
        second.contains(&format!(
            " digest {} written ",
            digest_of(r#"{"when":"during"}"#)
        )),
        "{second}"
    );
    assert_eq!(watch.next("conclude "), "conclude served concluded 1");
    assert_eq!(watch.interrupt(), Some(0));

    let empty = collect(dir, &carrier, &key, false).expect(0);
    assert_eq!(empty.value("collect"), "served deposits 0");
}

/// A wrong pin fails the first handshake (on QUIC, and on TLS/TCP raced
/// beside it: `PROTOCOL.md` §5b): `send` stops at once with exit 3 naming
/// the pin mismatch, instead of retrying as if the carrier were
/// unreachable.
#[test]
fn a_wrong_pin_fails_fast() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let (_, rkid) = keys_new(dir, "alice.json");
    let path = document(dir, "d.json", "{}");
    let wrong = "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let started = Instant::now();
    let run = cli(
        dir,
        &[
            "send",
            "--server",
            &carrier.addr,
            "--pin",
            wrong,
            "--to",
            &rkid,
            path.to_str().unwrap(),
        ],
    )
    .expect(3);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        run.stderr.contains("pin mismatch: the carrier at "),
        "{run:?}"
    );
    assert_eq!(run.lines("attempt"), ["attempt 1"], "{run:?}");
    assert!(run.lines("status").is_empty(), "no retry: {run:?}");
}
