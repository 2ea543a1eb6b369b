//! `--json` on every command that prints results (issue 17): one JSON
//! object per line, each with `event` and `elapsedMs`, members exactly as
//! `README.md` ("JSON output") documents them. (`send`, `declaration`,
//! `collect`, `conclude` and `conformance` are checked in their own
//! modules; `migrate --json` in `nodes.rs`.) Also: the completion script
//! names every subcommand and the manual pages render.

use super::*;

/// The JSON objects of a command's standard output, one per line.
pub fn objects(stdout: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    stdout
        .lines()
        .map(|l| match serde_json::from_str(l) {
            Ok(serde_json::Value::Object(o)) => o,
            other => panic!("not a JSON object line: {l:?} ({other:?})"),
        })
        .collect()
}

/// The one object of `stdout`, whose event must be `event`.
pub fn only_object(stdout: &str, event: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut all = objects(stdout);
    assert_eq!(all.len(), 1, "{stdout}");
    let object = all.remove(0);
    assert_eq!(object["event"], event, "{stdout}");
    assert!(object["elapsedMs"].is_u64(), "{stdout}");
    object
}

fn keys_of(object: &serde_json::Map<String, serde_json::Value>) -> Vec<&str> {
    object.keys().map(String::as_str).collect()
}

const BACKUP_FIELDS: [&str; 13] = [
    "archiveBytes",
    "bindings",
    "declarationRevision",
    "depositBytes",
    "deposits",
    "keyFiles",
    "producer",
    "segmentBytes",
    "segments",
    "takenAt",
    "takenAtMs",
    "tombstones",
    "event",
];

fn with(fields: &[&str], more: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = fields
        .iter()
        .chain(more)
        .chain(&["elapsedMs"])
        .map(|s| (*s).to_owned())
        .collect();
    all.sort();
    all
}

#[test]
fn every_result_printing_command_speaks_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let carrier = Carrier::start(&data, None);

    // keys new / show / rotate
    let new = cli(
        dir,
        &[
            "keys",
            "new",
            "--json",
            "--carrier",
            CARRIER,
            "--out",
            "a.json",
        ],
    )
    .expect(0);
    let key = only_object(&new.stdout, "keys");
    assert_eq!(
        keys_of(&key),
        [
            "carrier",
            "elapsedMs",
            "event",
            "generation",
            "keyFile",
            "principal",
            "rkid"
        ]
    );
    assert_eq!(key["carrier"], CARRIER);
    assert_eq!(key["generation"], 1);
    assert_eq!(key["keyFile"], "a.json");
    let rkid = key["rkid"].as_str().unwrap().to_owned();
    let show = cli(dir, &["keys", "show", "--key", "a.json", "--json"]).expect(0);
    let shown = only_object(&show.stdout, "keys");
    assert_eq!(shown["rkid"], rkid.as_str());
    assert_eq!(shown["principal"], key["principal"]);

    // register: the key, the attempts, the verdict
    let register = cli_to(dir, &carrier, &["register", "--key", "a.json", "--json"]).expect(0);
    let events = objects(&register.stdout);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["key", "attempt", "connected", "verdict"],
        "{}",
        register.stdout
    );
    assert_eq!(
        keys_of(&events[2]),
        ["elapsedMs", "event", "server", "transport"]
    );
    assert_eq!(
        keys_of(&events[0]),
        ["elapsedMs", "event", "generation", "principal", "rkid"]
    );
    assert_eq!(events[0]["rkid"], rkid.as_str());
    // On loopback QUIC wins the race (§5b), unless its handshake took
    // longer than the 250 ms head start.
    assert!(["quic", "tcp"].contains(&events[2]["transport"].as_str().unwrap()));
    assert_eq!(keys_of(&events[3]), ["elapsedMs", "event", "verdict"]);
    assert_eq!(events[3]["verdict"], "registered");

    // a rotation and a stale rebind: the verdict carries the generations
    let rotate = cli(dir, &["keys", "rotate", "--key", "a.json", "--json"]).expect(0);
    assert_eq!(only_object(&rotate.stdout, "keys")["generation"], 2);

    // status of a sent deposit
    let doc = document(dir, "doc.json", r#"{"n":1}"#);
    let sent = cli_to(
        dir,
        &carrier,
        &["send", "--to", &rkid, doc.to_str().unwrap()],
    )
    .expect(0);
    let deposit = sent.value("deposit").to_owned();
    let status = cli_to(
        dir,
        &carrier,
        &["status", "--json", "--to", &rkid, "--deposit", &deposit],
    )
    .expect(0);
    let events = objects(&status.stdout);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "deposit-status", "{}", status.stdout);
    assert_eq!(keys_of(last), ["elapsedMs", "event", "status"]);
    assert_eq!(last["status"], "accepted");

    // admin stats, through the running carrier
    let stats = cli(
        dir,
        &[
            "admin",
            "stats",
            "--json",
            "--data-dir",
            data.to_str().unwrap(),
        ],
    )
    .expect(0);
    let stats = only_object(&stats.stdout, "stats");
    assert_eq!(
        keys_of(&stats),
        [
            "at",
            "bindingsClosing",
            "bindingsLive",
            "declarationRevision",
            "depositBytes",
            "deposits",
            "due24hEvictions",
            "due24hGiveUps",
            "due24hReleases",
            "due24hWindUps",
            "elapsedMs",
            "elasticBytes",
            "event",
            "maxBindingTombstones",
            "quarantinedDeposits",
            "tombstones",
            "usedBytes",
        ]
    );
    assert_eq!(stats["bindingsLive"], 1);
    assert_eq!(stats["deposits"], 1);
    assert_eq!(stats["declarationRevision"], 1);

    // backup (online), restore --verify, restore into another data dir
    let archive = dir.join("backup.rltp");
    let backup = cli(
        dir,
        &[
            "backup",
            "--json",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            archive.to_str().unwrap(),
        ],
    )
    .expect(0);
    let backup = only_object(&backup.stdout, "backup");
    assert_eq!(keys_of(&backup), with(&BACKUP_FIELDS, &["online", "out"]));
    assert_eq!(backup["online"], "yes");
    assert_eq!(backup["deposits"], 1);
    assert_eq!(backup["bindings"], 1);
    assert_eq!(backup["declarationRevision"], 1);
    let verify = cli(
        dir,
        &[
            "restore",
            "--json",
            "--verify",
            "--from",
            archive.to_str().unwrap(),
        ],
    )
    .expect(0);
    let verify = only_object(&verify.stdout, "restore");
    assert_eq!(
        keys_of(&verify),
        with(&BACKUP_FIELDS, &["integrity", "note"])
    );
    assert_eq!(verify["integrity"], "ok");
    assert_eq!(verify["takenAtMs"], backup["takenAtMs"]);
    assert!(carrier.terminate().success());
    let elsewhere = dir.join("elsewhere");
    let restore = cli(
        dir,
        &[
            "restore",
            "--json",
            "--from",
            archive.to_str().unwrap(),
            "--data-dir",
            elsewhere.to_str().unwrap(),
        ],
    )
    .expect(0);
    let restore = only_object(&restore.stdout, "restore");
    assert_eq!(
        keys_of(&restore),
        with(
            &BACKUP_FIELDS,
            &["integrity", "note", "restored", "seqFloor"]
        )
    );
    assert_eq!(restore["restored"], elsewhere.to_str().unwrap());
    assert!(restore["seqFloor"].is_u64());

    // admin renew, the carrier stopped
    let renew = cli(
        dir,
        &[
            "admin",
            "renew",
            "--json",
            "--clock",
            "--data-dir",
            data.to_str().unwrap(),
        ],
    )
    .expect(0);
    let renew = only_object(&renew.stdout, "renew");
    assert_eq!(
        keys_of(&renew),
        ["clock", "elapsedMs", "event", "lineage", "movedAside"]
    );
    assert_eq!(renew["lineage"], "updated");
    assert!(renew["clock"].is_u64());
}

/// The subcommands `rltp-carrier --help` lists.
fn subcommands(dir: &Path) -> Vec<String> {
    let help = cli(dir, &["--help"]).expect(0);
    help.stdout
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn completions_name_every_subcommand_and_the_manual_renders() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let commands = subcommands(dir);
    assert_eq!(
        commands,
        [
            "serve",
            "keys",
            "party",
            "declaration",
            "register",
            "send",
            "status",
            "collect",
            "conclude",
            "demo",
            "conformance",
            "migrate",
            "backup",
            "restore",
            "admin",
            "completions",
            "man",
        ]
    );
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = cli(dir, &["completions", shell]).expect(0).stdout;
        for command in &commands {
            assert!(
                script.contains(command.as_str()),
                "{shell} completions lack {command}"
            );
        }
    }
    let bash = cli(dir, &["completions", "bash"]).expect(0).stdout;
    let listed = bash
        .lines()
        .find_map(|l| l.trim().strip_prefix("opts=\"-h -V --help --version "))
        .unwrap_or_else(|| panic!("no top-level opts line in {bash}"));
    assert_eq!(listed, format!("{} help\"", commands.join(" ")));
    assert!(bash.contains("cmd=\"rltp__carrier__subcmd__admin__subcmd__stats\""));
    cli(dir, &["completions", "tcsh"]).expect(2);

    // The pages: rltp-carrier.1 and one per (sub)command, rendered by
    // groff (Debian's groff-base, installed by test.sh) without warnings.
    let pages = dir.join("man1");
    std::fs::create_dir(&pages).unwrap();
    cli(dir, &["man", "--out-dir", pages.to_str().unwrap()]).expect(0);
    let printed = cli(dir, &["man"]).expect(0).stdout;
    assert_eq!(
        printed,
        std::fs::read_to_string(pages.join("rltp-carrier.1")).unwrap()
    );
    let mut expected: Vec<String> = commands
        .iter()
        .map(|c| format!("rltp-carrier-{c}.1"))
        .chain(
            [
                "admin-lame-duck",
                "admin-renew",
                "admin-stats",
                "admin-store",
                "keys-new",
                "keys-rotate",
                "keys-show",
                "party-card",
                "party-credential",
                "party-new",
                "party-show",
                "party-trust",
            ]
            .map(|c| format!("rltp-carrier-{c}.1")),
        )
        .chain(["rltp-carrier.1".to_owned()])
        .collect();
    expected.sort();
    let mut written: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    assert_eq!(written, expected);
    let groff = Command::new("groff")
        .args(["-man", "-Tascii", "-ww", "-rLL=200n", "-P-cbou"])
        .arg(pages.join("rltp-carrier.1"))
        .output()
        .unwrap_or_else(|e| {
            panic!("groff (Debian package groff-base; ./test.sh installs it): {e}")
        });
    assert!(groff.status.success(), "{groff:?}");
    assert_eq!(String::from_utf8_lossy(&groff.stderr), "", "groff warnings");
    let text = String::from_utf8(groff.stdout).unwrap();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("NAME rltp-carrier - "), "{text}");
    assert!(
        text.contains("The RLTP carrier: a key-blind relay"),
        "{text}"
    );
    for command in &commands {
        assert!(
            text.contains(&format!("rltp-carrier-{command}(1)")),
            "the page lacks {command}"
        );
    }
}

/// `demo --json`: a `demo` object, one `step` object per step with its
/// exact fields, then `done`; `serve --json`: its four start-up lines as
/// one `serving` object, and SIGTERM still stops it with exit 0.
#[test]
fn demo_and_serve_speak_json_too() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let demo = cli(dir, &["demo", "--json"]).expect(0);
    let all = objects(&demo.stdout);
    assert_eq!(all.len(), 17, "{}", demo.stdout);
    assert_eq!(all[0]["event"], "demo");
    for (i, step) in all[1..16].iter().enumerate() {
        assert_eq!(
            keys_of(step),
            ["detail", "elapsedMs", "event", "name", "ok", "step"],
            "{step:?}"
        );
        assert_eq!(step["step"], i as u64 + 1);
        assert_eq!(step["ok"], true);
        assert!(step["detail"].as_array().is_some_and(|d| !d.is_empty()));
    }
    assert_eq!(all[1]["name"], "load vectors");
    assert_eq!(all[15]["name"], "delivered");
    assert_eq!(all[16]["event"], "done");
    assert_eq!(all[16]["steps"], 15);

    let mut serve = Command::new(BIN)
        .args(["serve", "--json", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let serving = only_object(&line, "serving");
    assert_eq!(
        keys_of(&serving),
        [
            "carrier",
            "declarationIssuer",
            "elapsedMs",
            "event",
            "fingerprint",
            "listening",
            "tcpListening"
        ]
    );
    assert_eq!(serving["carrier"], CARRIER);
    assert!(
        serving["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256/")
    );
    assert!(
        serving["declarationIssuer"]
            .as_str()
            .unwrap()
            .starts_with("did:key:z6Mk")
    );
    send_signal(serve.id(), "TERM");
    assert_eq!(serve.wait().unwrap().code(), Some(0));
}
