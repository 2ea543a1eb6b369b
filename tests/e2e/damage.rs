//! A damaged data dir, through the real binary (issue 13): a missing or
//! empty index, a missing store, declaration key, TLS identity or clock
//! file is refused at start, naming what is missing and the way back, with
//! every file left as it was; a deliberate replacement goes through
//! `admin renew`; no declaration revision is ever signed twice; `seq` is
//! never reused after a restore; a failed restore leaves nothing behind.

use super::*;
use rltp_client::tls::ServerTrust;
use rltp_client::{Client, ConnectOptions, RecipientKeys};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::proof::Purpose;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::collections::BTreeMap;

/// `serve` on `data` must refuse to start: exit 2, and its message.
fn refused(dir: &Path, data: &Path) -> String {
    let run = cli(
        dir,
        &[
            "serve",
            "--data-dir",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(run.code, 2, "serve should refuse to start: {run:#?}");
    assert!(run.stdout.is_empty(), "{run:#?}");
    run.stderr
}

/// `backup --data-dir DATA --out OUT` (must succeed).
fn backup(dir: &Path, data: &Path, out: &Path) -> Run {
    cli(
        dir,
        &[
            "backup",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .expect(0)
}

/// `restore --from ARCHIVE --data-dir DATA` (its run, any exit code).
fn restore(dir: &Path, archive: &Path, data: &Path) -> Run {
    cli(
        dir,
        &[
            "restore",
            "--from",
            archive.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ],
    )
}

/// A carrier that started once and stopped, and a backup of it.
fn started_once_and_backed_up(dir: &Path, data: &Path) -> PathBuf {
    let carrier = Carrier::start(data, None);
    assert!(carrier.terminate().success());
    let archive = dir.join("backup.rltpbak");
    backup(dir, data, &archive);
    archive
}

/// Every file under `dir` with its length (a directory listing to compare).
fn tree(dir: &Path) -> BTreeMap<String, u64> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, u64>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(name, entry.metadata().unwrap().len());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The store's log and snapshots (the log store's layout).
fn segments(data: &Path) -> BTreeMap<String, u64> {
    let mut files = tree(&data.join("store/log"));
    files.extend(tree(&data.join("store/snap")));
    files
}

/// A carrier that admitted two deposits for Alice, stopped cleanly: the
/// key file and the two deposit ids.
fn populated(dir: &Path, data: &Path) -> (PathBuf, Vec<String>) {
    let carrier = Carrier::start(data, None);
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let mut ids = Vec::new();
    for n in 0..2 {
        let doc = document(
            dir,
            &format!("d{n}.json"),
            &format!("{{\"type\":\"note\",\"n\":{n}}}"),
        );
        let sent = cli_to(
            dir,
            &carrier,
            &["send", "--to", &rkid, doc.to_str().unwrap()],
        )
        .expect(0);
        ids.push(sent.value("deposit").to_owned());
    }
    assert!(carrier.terminate().success());
    (key, ids)
}

fn declaration_of(dir: &Path, carrier: &Carrier) -> (String, String) {
    let run = cli_to(dir, carrier, &["declaration", "--json"]).expect(0);
    let value: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    (value["id"].as_str().unwrap().to_owned(), run.stdout)
}

/// The failure of issue 13: a carrier whose index was deleted or truncated
/// (or whose whole store was deleted) started as a fresh store, reused
/// segment id 1, truncated the existing segment, answered
/// `refused(no-such-queue)` and `unknown` for admitted deposits, and signed
/// its declaration again as revision 1 with a new id. Now every variant
/// is refused, nothing is touched, and putting the index back serves
/// everything as before.
#[test]
fn a_missing_or_empty_index_is_refused_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let (key, ids) = populated(dir, &data);
    let index = data.join("store/carrier.redb");
    let saved = std::fs::read(&index).unwrap();
    let log = segments(&data);
    assert!(!log.is_empty());

    std::fs::remove_file(&index).unwrap();
    let message = refused(dir, &data);
    assert!(
        message.contains("store/carrier.redb") && message.contains("is missing or empty"),
        "{message}"
    );
    assert!(message.contains("rltp-carrier restore --from"), "{message}");
    assert!(!index.exists(), "no fresh index was made");
    assert_eq!(segments(&data), log, "no segment was truncated or reused");

    std::fs::write(&index, b"").unwrap();
    let message = refused(dir, &data);
    assert!(message.contains("is missing or empty"), "{message}");
    assert_eq!(std::fs::metadata(&index).unwrap().len(), 0);
    assert_eq!(segments(&data), log);

    // The whole store gone: refused too (the key, identity and clock remain).
    std::fs::rename(data.join("store"), dir.join("store-aside")).unwrap();
    let message = refused(dir, &data);
    assert!(message.contains("is missing or empty"), "{message}");
    assert!(!data.join("store/carrier.redb").exists());
    std::fs::remove_dir_all(data.join("store")).ok();
    std::fs::rename(dir.join("store-aside"), data.join("store")).unwrap();

    // Damaged pages in the index (the first byte of every page after
    // redb's header pages): a clear refusal, not redb's panic.
    let mut damaged = saved.clone();
    for page in (2 * 4096..damaged.len()).step_by(4096) {
        damaged[page] = 0xff;
    }
    std::fs::write(&index, &damaged).unwrap();
    let message = refused(dir, &data);
    assert!(
        message.contains("the storage engine stopped on damaged data")
            && message.contains("rltp-carrier restore --from")
            && !message.contains("panicked"),
        "{message}"
    );

    // The index back: everything is there, the declaration unchanged.
    std::fs::write(&index, &saved).unwrap();
    let carrier = Carrier::start(&data, None);
    let (id, _) = declaration_of(dir, &carrier);
    let rkid = cli(dir, &["keys", "show", "--key", key.to_str().unwrap()])
        .expect(0)
        .value("rkid")
        .to_owned();
    for deposit in &ids {
        let status = cli_to(
            dir,
            &carrier,
            &["status", "--to", &rkid, "--deposit", deposit],
        )
        .expect(0);
        assert_eq!(status.value("status"), "accepted");
    }
    let collected = cli_to(
        dir,
        &carrier,
        &["collect", "--key", key.to_str().unwrap(), "--out", "inbox"],
    )
    .expect(0);
    assert_eq!(collected.lines("deposit ").len(), 2, "{collected:#?}");
    let again = cli_to(dir, &carrier, &["declaration"]).expect(0);
    assert_eq!(again.value("revision"), "1");
    assert_eq!(declaration_of(dir, &carrier).0, id);
    assert!(carrier.terminate().success());
}

/// A missing declaration key, TLS identity or clock file is refused
/// (a new one would re-sign the declaration under another issuer, lock
/// out pinned clients, or drop the backward-step guard); `admin renew`
/// replaces one on purpose, and a new declaration key then signs
/// revision 2 — never revision 1 again.
#[test]
fn missing_keys_identity_or_clock_are_refused_and_renewed_only_on_purpose() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let carrier = Carrier::start(&data, None);
    let (issuer, pin) = (carrier.issuer.clone(), carrier.pin.clone());
    let (first_id, _) = declaration_of(dir, &carrier);
    assert!(carrier.terminate().success());
    let lineage = std::fs::read_to_string(data.join("lineage")).unwrap();
    assert!(
        lineage.contains(&format!("declaration-issuer {issuer}")),
        "{lineage}"
    );
    assert!(
        lineage.contains(&format!("tls-identity {pin}")),
        "{lineage}"
    );

    for (name, what, flag) in [
        ("declaration.key", "declaration key", "--declaration-key"),
        ("tls", "TLS identity", "--tls-identity"),
        ("clock", "clock file", "--clock"),
    ] {
        let path = data.join(name);
        let aside = dir.join(format!("{name}.aside"));
        std::fs::rename(&path, &aside).unwrap();
        let before = tree(&data);
        let message = refused(dir, &data);
        assert!(
            message.contains(what) && message.contains("is missing"),
            "{name}: {message}"
        );
        assert!(
            message.contains(&format!(
                "rltp-carrier admin renew --data-dir {} {flag}",
                data.display()
            )),
            "{name}: {message}"
        );
        assert_eq!(tree(&data), before, "{name}: nothing was made");
        std::fs::rename(&aside, &path).unwrap();
    }
    // Another carrier's key is refused too.
    let own = std::fs::read(data.join("declaration.key")).unwrap();
    std::fs::write(data.join("declaration.key"), [9u8; 32]).unwrap();
    let message = refused(dir, &data);
    assert!(
        message.contains("is not this carrier's declaration key"),
        "{message}"
    );
    std::fs::write(data.join("declaration.key"), &own).unwrap();

    // On purpose: a new declaration key.
    let renewed = cli(
        dir,
        &[
            "admin",
            "renew",
            "--data-dir",
            data.to_str().unwrap(),
            "--declaration-key",
        ],
    )
    .expect(0);
    let new_issuer = renewed.value("declaration-issuer").to_owned();
    assert_ne!(new_issuer, issuer);
    assert!(
        renewed
            .value("moved-aside")
            .contains("declaration.key.replaced-")
    );
    let carrier = Carrier::start(&data, None);
    assert_eq!(carrier.issuer, new_issuer);
    assert_eq!(carrier.pin, pin);
    let declaration = cli_to(dir, &carrier, &["declaration", "--issuer", &new_issuer]).expect(0);
    assert_eq!(declaration.value("revision"), "2");
    assert_ne!(declaration_of(dir, &carrier).0, first_id);
    assert!(carrier.terminate().success());
}

/// A backup taken at revision 1; the constants change (revision 2); the
/// backup is restored: the restored store holds revision 1 only, and the
/// carrier — configured with the changed constants — serves the very bytes
/// of revision 2 it signed before, instead of signing revision 2 again.
#[test]
fn a_restore_never_makes_a_revision_be_signed_twice() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let archive = started_once_and_backed_up(dir, &data);
    let config = document(
        dir,
        "changed.toml",
        "[constants]\nstatus-horizon = \"PT20S\"\n",
    );
    let carrier = Carrier::start(&data, Some(&config));
    let (_, second) = declaration_of(dir, &carrier);
    let shown = cli_to(dir, &carrier, &["declaration"]).expect(0);
    assert_eq!(shown.value("revision"), "2");
    assert!(carrier.terminate().success());

    let restored = restore(dir, &archive, &data).expect(0);
    assert!(restored.value("replaced").contains("replaced-"));
    let carrier = Carrier::start(&data, Some(&config));
    let (_, served) = declaration_of(dir, &carrier);
    assert_eq!(
        served, second,
        "revision 2 is served byte for byte as first signed"
    );
    assert!(carrier.terminate().success());
}

async fn connect(carrier: &Carrier) -> Client {
    rltp_client::tls::install_crypto_provider();
    let options = ConnectOptions::new(
        carrier.addr.clone(),
        ServerTrust::Pin(carrier.pin.parse().unwrap()),
    )
    .with_timeout(Duration::from_secs(10));
    Client::connect(&options).await.unwrap()
}

async fn submit(client: &Client, keys: &RecipientKeys, n: u32) {
    let envelope = rltp_proofs::seal::seal(
        format!("{{\"n\":{n}}}").as_bytes(),
        keys.rkid(),
        &mut rand::rng(),
    )
    .unwrap()
    .to_bytes();
    let answer = client.submit(keys.rkid(), &envelope).await.unwrap();
    assert_eq!(answer.verdict, SubmitVerdict::Admitted);
}

async fn seqs(client: &Client, keys: &RecipientKeys) -> Vec<u64> {
    let page = client.collect(keys, None, 100).await.unwrap();
    assert_eq!(page.verdict, Verdict::Served);
    page.deposits.iter().map(|d| d.seq).collect()
}

/// The failure of issue 13: after a restore of a backup taken at seq 4,
/// new deposits got seq 5 and 6 again with different ids, so a recipient
/// holding `after = 6` never saw them. Now the restored store's seqs
/// start above every seq the carrier handed out before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seq_is_never_reused_after_a_restore() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let carrier = Carrier::start(&data, None);
    let client = connect(&carrier).await;
    let carrier_id = CarrierId::from_bytes(CARRIER.as_bytes()).unwrap();
    let keys = RecipientKeys::new(
        carrier_id,
        ed25519_dalek::SigningKey::generate(&mut rand::rng()),
        [31u8; 32],
        1,
    );
    let registered = client.register(&keys, Purpose::Register).await.unwrap();
    assert_eq!(registered.verdict(), Verdict::Registered);
    for n in 0..4 {
        submit(&client, &keys, n).await;
    }
    assert_eq!(seqs(&client, &keys).await, [1, 2, 3, 4]);
    let archive = dir.join("at-4.rltpbak");
    assert_eq!(backup(dir, &data, &archive).value("online"), "yes");
    for n in 4..6 {
        submit(&client, &keys, n).await;
    }
    let before = seqs(&client, &keys).await;
    assert_eq!(before, [1, 2, 3, 4, 5, 6]);
    client.close().await;
    assert!(carrier.terminate().success());

    let restored = restore(dir, &archive, &data).expect(0);
    let floor: u64 = restored.value("seq-floor").parse().unwrap();
    assert!(floor > 6, "{restored:#?}");
    let carrier = Carrier::start(&data, None);
    let client = connect(&carrier).await;
    assert_eq!(seqs(&client, &keys).await, [1, 2, 3, 4]);
    for n in 10..12 {
        submit(&client, &keys, n).await;
    }
    let after = seqs(&client, &keys).await;
    assert_eq!(after[..4], [1, 2, 3, 4]);
    assert!(after[4] > 6 && after[5] == after[4] + 1, "{after:?}");
    // A recipient that collected up to 6 before the restore sees them.
    let page = client.collect(&keys, Some(6), 100).await.unwrap();
    assert_eq!(page.deposits.len(), 2);
    client.close().await;
    assert!(carrier.terminate().success());
}

/// A restore into a new directory that fails (a damaged archive) leaves
/// no directory behind.
#[test]
fn a_failed_restore_into_a_new_directory_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let archive = started_once_and_backed_up(dir, &data);
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&archive, bytes).unwrap();
    let new = dir.join("new");
    let run = restore(dir, &archive, &new).expect(1);
    assert!(
        run.stderr.contains("not a valid rltp-backup/1 archive"),
        "{run:#?}"
    );
    assert!(!new.exists(), "{new:?} was left behind");
}

/// A free TCP port on loopback (for the operator endpoint).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn metric(port: u16, name: &str) -> f64 {
    let (_, text) = http_get(port, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn sealed(keys: &RecipientKeys, n: u32) -> Vec<u8> {
    rltp_proofs::seal::seal(
        format!("{{\"n\":{n}}}").as_bytes(),
        keys.rkid(),
        &mut rand::rng(),
    )
    .unwrap()
    .to_bytes()
}

/// Flips one base64 character inside the ciphertext of `envelope` where
/// the store keeps it (in a segment file of `data`); returns the file.
fn flip_stored(data: &Path, envelope: &[u8]) -> PathBuf {
    let at_ciphertext = envelope
        .windows(14)
        .position(|w| w == b"\"ciphertext\":\"")
        .unwrap()
        + 20;
    for (name, _) in tree(&data.join("store/log")) {
        let path = data.join("store/log").join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        if let Some(start) = bytes.windows(envelope.len()).position(|w| w == envelope) {
            let c = &mut bytes[start + at_ciphertext];
            *c = if *c == b'A' { b'B' } else { b'A' };
            std::fs::write(&path, bytes).unwrap();
            return path;
        }
    }
    panic!("the envelope is in no segment file");
}

/// The failure of issue 13: one corrupt stored deposit made every collect
/// of its queue fail (`unavailable … bytes do not match their id`), each
/// failing its whole group-commit batch, so that a submission to another
/// queue far below its floor was answered `refused(capacity)`, and
/// `/readyz` said nothing. Now the damaged deposit is quarantined: given
/// up (its sender's status says so), the rest of its queue served in the
/// same page, other queues untouched, `/readyz` and the metrics report
/// it, the integrity check names it, and the same bytes submitted again
/// are admitted afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_deposit_is_quarantined_and_nothing_else_suffers() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let port = free_port();
    let config = document(
        dir,
        "carrier.toml",
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    let carrier_id = CarrierId::from_bytes(CARRIER.as_bytes()).unwrap();
    let recipient = |secret: u8| {
        RecipientKeys::new(
            carrier_id.clone(),
            ed25519_dalek::SigningKey::generate(&mut rand::rng()),
            [secret; 32],
            1,
        )
    };
    let (alice, bob) = (recipient(41), recipient(42));
    let carrier = Carrier::start(&data, Some(&config));
    let client = connect(&carrier).await;
    for keys in [&alice, &bob] {
        let answer = client.register(keys, Purpose::Register).await.unwrap();
        assert_eq!(answer.verdict(), Verdict::Registered);
    }
    let envelopes: Vec<Vec<u8>> = (0..3).map(|n| sealed(&alice, n)).collect();
    for envelope in &envelopes {
        let answer = client.submit(alice.rkid(), envelope).await.unwrap();
        assert_eq!(answer.verdict, SubmitVerdict::Admitted);
    }
    client.close().await;
    assert!(carrier.terminate().success());
    flip_stored(&data, &envelopes[1]);
    let damaged_id = rltp_storage::DepositId::of(&envelopes[1]);

    let carrier = Carrier::start(&data, Some(&config));
    let client = Arc::new(connect(&carrier).await);
    // Collects of Alice's queue race submissions to Bob's (far below its
    // floor): every one of Bob's is admitted.
    let mut tasks = Vec::new();
    for n in 0..40u32 {
        let (client, rkid, envelope) = (Arc::clone(&client), *bob.rkid(), sealed(&bob, 100 + n));
        tasks.push(tokio::spawn(async move {
            client.submit(&rkid, &envelope).await.unwrap().verdict
        }));
    }
    let page = client.collect(&alice, None, 100).await.unwrap();
    assert_eq!(page.verdict, Verdict::Served, "the queue is served");
    let served: Vec<&[u8]> = page.deposits.iter().map(|d| &d.envelope[..]).collect();
    assert_eq!(served, [&envelopes[0][..], &envelopes[2][..]]);
    for task in tasks {
        assert_eq!(task.await.unwrap(), SubmitVerdict::Admitted);
    }
    // The sender sees it given up.
    let status = cli_to(
        dir,
        &carrier,
        &[
            "status",
            "--to",
            &alice.rkid().to_multikey(),
            "--deposit",
            &damaged_id.to_multibase(),
        ],
    );
    assert_eq!(status.value("status"), "given-up", "{status:#?}");
    assert_eq!(
        status.value("sender-status"),
        "failed(expired-by-adapter-policy)"
    );
    // Reported, and still ready: everything else is served.
    let (code, body) = http_get(port, "/readyz");
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("store-damage 1 quarantined deposit(s)"),
        "{body}"
    );
    assert_eq!(metric(port, "rltp_carrier_quarantined_deposits"), 1.0);
    assert_eq!(metric(port, "rltp_carrier_quarantined_deposits_total"), 1.0);
    assert_eq!(
        metric(
            port,
            "rltp_carrier_unavailable_total{operation=\"collect\"}"
        ),
        0.0
    );
    let events = carrier.log_events(
        "a stored deposit failed its check: quarantined and given up (its sender's status answers given-up)",
        1,
    );
    assert_eq!(events.len(), 1, "{:?}", carrier.logs());
    // The same bytes again: a new deposit, admitted and collectable.
    let again = client.submit(alice.rkid(), &envelopes[1]).await.unwrap();
    assert_eq!(again.verdict, SubmitVerdict::Admitted);
    let page = client
        .collect(&alice, page.deposits.last().map(|d| d.seq), 100)
        .await
        .unwrap();
    assert_eq!(page.deposits.len(), 1);
    assert_eq!(page.deposits[0].envelope, envelopes[1]);
    Arc::try_unwrap(client).ok().unwrap().close().await;
    assert!(carrier.terminate().success());
    // The integrity check names it.
    let mut store = rltp_storage::log_store::LogStore::open(data.join("store")).unwrap();
    let report = store.integrity_check().unwrap();
    assert!(report.damaged.is_empty(), "{report:?}");
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    assert!(
        report.quarantined[0].contains("bytes do not match their id"),
        "{report:?}"
    );
}

/// `rltp-carrier declaration | head -5` panicked with a backtrace when
/// `head` closed the pipe. Now a closed standard output ends any command
/// quietly (status 0). The pipe is closed before the command writes
/// anything, so every line hits it.
#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(&dir.path().join("data"), None);
    let mut child = Command::new(BIN)
        .arg("declaration")
        .args(carrier.args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}
