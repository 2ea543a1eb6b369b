//! Exit statuses, as the README states them, for every client command
//! (issue 12 §5): 0 the positive outcome, 1 a refusal or `failed(…)`, 2
//! bad arguments or files, 3 the carrier unreachable.

use super::*;

/// A pin nobody has.
const NO_PIN: &str = "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
/// A deposit id nothing holds.
const NO_DEPOSIT: &str = "uEiApGmTZifyEelM7kKlaKh66GKpzqA6vFCpa6iAt7bN_Eg";

/// Every client command's arguments, with `key`, `rkid` and `doc`.
fn commands<'a>(key: &'a str, rkid: &'a str, doc: &'a str) -> Vec<Vec<&'a str>> {
    vec![
        vec!["declaration"],
        vec!["register", "--key", key],
        vec!["send", "--to", rkid, doc],
        vec!["status", "--to", rkid, "--deposit", NO_DEPOSIT],
        vec!["collect", "--key", key],
        vec!["conclude", "--key", key, NO_DEPOSIT],
    ]
}

/// 3: nothing answers on the port. Every command retries (reporting
/// `awaiting-transport(transport-unreachable)`) until `--give-up-after`,
/// then exits 3 saying why. (`send` used to exit 1.)
#[test]
fn every_client_command_exits_3_when_the_carrier_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (key, rkid) = keys_new(dir, "alice.json");
    let doc = document(dir, "d.json", "{}");
    let server = format!("127.0.0.1:{}", free_udp_port());
    let (key, doc) = (key.to_str().unwrap(), doc.to_str().unwrap());
    // All at once: each waits out its own give-up bound.
    std::thread::scope(|scope| {
        for command in commands(key, &rkid, doc) {
            let server = &server;
            scope.spawn(move || {
                let mut args = command.clone();
                args.extend([
                    "--server",
                    server,
                    "--pin",
                    NO_PIN,
                    "--timeout",
                    "1",
                    "--give-up-after",
                    "PT3S",
                ]);
                let run = cli(dir, &args);
                assert_eq!(run.code, 3, "{command:?}: {run:#?}");
                let said = format!("{}{}", run.stdout, run.stderr);
                assert!(
                    said.contains("awaiting-transport(transport-unreachable)"),
                    "{command:?} reported nothing: {run:#?}"
                );
                assert!(
                    run.lines("attempt").len() >= 2,
                    "{command:?} retried: {run:#?}"
                );
            });
        }
    });
}

/// 2: bad arguments or files, before anything is sent.
#[test]
fn every_client_command_exits_2_for_bad_arguments_or_files() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (_, rkid) = keys_new(dir, "alice.json");
    let doc = document(dir, "d.json", "{}");
    let server = format!("127.0.0.1:{}", free_udp_port());
    let doc = doc.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["declaration", "--issuer", "not-a-did"],
        vec!["register", "--key", "missing.json"],
        vec!["send", "--to", "z6LSnot", doc],
        vec!["send", "--to", &rkid, "missing.json"],
        vec!["status", "--to", &rkid, "--deposit", "u-nope"],
        vec!["collect", "--key", "missing.json"],
        vec!["conclude", "--key", "alice.json", "u-nope"],
        vec!["send", "--to", &rkid, doc, "--give-up-after", "ten seconds"],
    ];
    for command in cases {
        let mut args = command.clone();
        args.extend(["--server", &server, "--pin", NO_PIN]);
        let run = cli(dir, &args);
        assert_eq!(run.code, 2, "{command:?}: {run:#?}");
        assert!(
            run.lines("attempt").is_empty(),
            "{command:?} sent: {run:#?}"
        );
    }
}

/// 1: a refusal or `failed(…)` — here the carrier holds no binding of
/// this principal's for the rkid, and nobody sent the deposit.
#[test]
fn every_client_command_exits_1_for_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let (alice, rkid) = keys_new(dir, "alice.json");
    let doc = document(dir, "d.json", "{}");
    let (alice, doc) = (alice.to_str().unwrap(), doc.to_str().unwrap());
    let foreign = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK";
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["declaration", "--issuer", foreign], "", ""),
        (
            vec!["send", "--to", &rkid, doc],
            "status",
            "failed(unroutable)",
        ),
        (
            vec!["status", "--to", &rkid, "--deposit", NO_DEPOSIT],
            "status",
            "unknown",
        ),
        (
            vec!["collect", "--key", alice],
            "collect",
            "refused(no-such-queue) deposits 0",
        ),
        (
            vec!["conclude", "--key", alice, NO_DEPOSIT],
            "conclude",
            "refused(no-such-queue)",
        ),
    ];
    for (command, key, value) in cases {
        let run = cli_to(dir, &carrier, &command).expect(1);
        if !key.is_empty() {
            assert_eq!(run.value(key), value, "{command:?}");
        }
    }
    // register: another principal at the held generation.
    cli_to(dir, &carrier, &["register", "--key", alice]).expect(0);
    let (mallory, _) = keys_new(dir, "mallory.json");
    let alice_file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(alice).unwrap()).unwrap();
    let mut file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&mallory).unwrap()).unwrap();
    file["rkidSecret"] = alice_file["rkidSecret"].clone();
    file["rkid"] = alice_file["rkid"].clone();
    std::fs::write(&mallory, serde_json::to_vec(&file).unwrap()).unwrap();
    let run = cli_to(
        dir,
        &carrier,
        &["register", "--key", mallory.to_str().unwrap()],
    )
    .expect(1);
    assert_eq!(run.value("verdict"), "refused(stale-generation)");
}

/// 0: each command's positive outcome.
#[test]
fn every_client_command_exits_0_on_its_positive_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let (key, rkid) = keys_new(dir, "alice.json");
    let key = key.to_str().unwrap();
    let doc = document(dir, "d.json", r#"{"ok":true}"#);
    cli_to(dir, &carrier, &["declaration", "--issuer", &carrier.issuer]).expect(0);
    cli_to(dir, &carrier, &["register", "--key", key]).expect(0);
    let sent = cli_to(
        dir,
        &carrier,
        &["send", "--to", &rkid, doc.to_str().unwrap()],
    )
    .expect(0);
    let deposit = sent.value("deposit").to_owned();
    cli_to(
        dir,
        &carrier,
        &["status", "--to", &rkid, "--deposit", &deposit],
    )
    .expect(0);
    cli_to(dir, &carrier, &["collect", "--key", key]).expect(0);
    let concluded = cli_to(dir, &carrier, &["conclude", "--key", key, &deposit]).expect(0);
    assert_eq!(concluded.value("conclude"), "served concluded 1");
}
