//! Many carrier nodes on one PostgreSQL database (`PROTOCOL.md` §13),
//! through the real binary: two `serve` processes on one throwaway
//! cluster are one carrier — one declaration, one set of queues, watch
//! pushes across nodes — and a node that does not belong is refused.

use super::*;

/// The config of a node on `cluster`.
fn node_config(cluster: &rltp_pgtest::Cluster) -> String {
    format!(
        "[store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{}\"\n",
        cluster.conninfo()
    )
}

/// A second node's data dir holding the carrier's declaration key, copied
/// from the first node's (as an operator does).
fn second_data_dir(root: &Path, first: &Path) -> PathBuf {
    let dir = root.join("b");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(first.join("declaration.key"), dir.join("declaration.key")).unwrap();
    dir
}

/// Node A registers and collects, node B takes the deposits; a watch on A
/// is pushed what B admits; both serve the same declaration bytes. B's data
/// dir starts with A's declaration key and TLS identity, copied as
/// `deploy/OPERATIONS.md` §12 says (one pin for both).
#[test]
fn two_nodes_on_one_database_are_one_carrier() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let config = node_config(&cluster);
    let a_dir = root.join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let b_dir = second_data_dir(root, &a_dir);
    std::fs::create_dir_all(b_dir.join("tls")).unwrap();
    for file in ["cert.der", "key.der"] {
        std::fs::copy(a_dir.join("tls").join(file), b_dir.join("tls").join(file)).unwrap();
    }
    let b = Carrier::start_with(&Spec::new(&b_dir, &config));
    assert_eq!(a.issuer, b.issuer, "one declaration key");
    assert_eq!(a.pin, b.pin, "one TLS identity");
    let decl_a = cli_to(root, &a, &["declaration", "--json"]).expect(0);
    let decl_b = cli_to(root, &b, &["declaration", "--json"]).expect(0);
    assert_eq!(
        decl_a.stdout, decl_b.stdout,
        "one declaration, byte for byte"
    );

    let (key, rkid) = keys_new(root, "alice.json");
    cli_to(root, &a, &["register", "--key", key.to_str().unwrap()]).expect(0);
    // Deposits through B land in the queue registered on A.
    let mut ids = Vec::new();
    for n in 0..3 {
        let doc = document(root, &format!("d{n}.json"), &format!("{{\"n\":{n}}}"));
        let sent = cli_to(root, &b, &["send", "--to", &rkid, doc.to_str().unwrap()]).expect(0);
        ids.push(sent.value("deposit").to_owned());
    }
    // The status of a deposit admitted through B, asked of A.
    let status = cli_to(root, &a, &["status", "--to", &rkid, "--deposit", &ids[0]]).expect(0);
    assert_eq!(status.value("status"), "accepted");
    let collected = cli_to(
        root,
        &a,
        &[
            "collect",
            "--key",
            key.to_str().unwrap(),
            "--out",
            "inbox",
            "--conclude",
        ],
    )
    .expect(0);
    for id in &ids {
        assert!(
            collected.stdout.contains(id.as_str()),
            "{id} not collected: {collected:?}"
        );
    }

    // A watch session on A is pushed a deposit admitted through B.
    watch_on_a_is_pushed_what_b_admits(root, &a, &b, &key, &rkid);
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}

/// A node whose declaration key is not the one that signed the database's
/// declaration, or whose constants differ, is refused at start — it would
/// otherwise sign a second declaration — and one whose data dir belongs to
/// another database is refused too; each message names the way back.
#[test]
fn a_node_that_does_not_belong_is_refused() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let config = node_config(&cluster);
    let a_dir = root.join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let serve = |dir: &Path, config: &str| {
        let path = dir.with_extension("toml");
        std::fs::write(&path, config).unwrap();
        cli(
            root,
            &[
                "serve",
                "--data-dir",
                dir.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--config",
                path.to_str().unwrap(),
            ],
        )
    };
    // Its own, fresh declaration key.
    let stranger = serve(&root.join("stranger"), &config).expect(2);
    assert!(
        stranger
            .stderr
            .contains("is missing, and the database's declaration is signed by"),
        "{stranger:?}"
    );
    assert!(
        stranger.stderr.contains("copy declaration.key from a node"),
        "{stranger:?}"
    );
    // The right key, other constants.
    let other = second_data_dir(root, &a_dir);
    let changed = serve(
        &other,
        &format!("{config}\n[constants]\norphan-horizon = \"P60D\"\n"),
    )
    .expect(2);
    assert!(
        changed
            .stderr
            .contains("its [constants] differ from those of the database's declaration revision 1"),
        "{changed:?}"
    );
    // A's data dir pointed at another database.
    assert!(a.terminate().success());
    let elsewhere = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let foreign = serve(&a_dir, &node_config(&elsewhere)).expect(2);
    assert!(
        foreign.stderr.contains("but the database holds store"),
        "{foreign:?}"
    );
}

/// `migrate --publish-constants` signs the configuration's constants as
/// the database's next declaration revision, and every running node
/// serves it — byte for byte the same — within a sweep interval; a node
/// started afterwards with the old constants is refused, one with the new
/// ones joins.
#[test]
fn published_constants_are_adopted_by_every_running_node() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let config = format!(
        "{}\n[limits]\nsweep-interval-ms = 100\n",
        node_config(&cluster)
    );
    let a_dir = root.join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let b_dir = second_data_dir(root, &a_dir);
    let b = Carrier::start_with(&Spec::new(&b_dir, &config));
    let before = cli_to(root, &a, &["declaration"]).expect(0);
    assert_eq!(before.value("revision"), "1");
    assert_eq!(before.value("orphan-horizon"), "P30D");

    let changed = format!("{config}\n[constants]\norphan-horizon = \"P60D\"\n");
    let changed_path = root.join("changed.toml");
    std::fs::write(&changed_path, &changed).unwrap();
    // Without the carrier's declaration key, nothing is published.
    let keyless = cli(
        root,
        &[
            "migrate",
            "--config",
            changed_path.to_str().unwrap(),
            "--data-dir",
            root.join("keyless").to_str().unwrap(),
            "--publish-constants",
        ],
    )
    .expect(2);
    assert!(
        keyless
            .stderr
            .contains("is missing, and the database's declaration is signed by"),
        "{keyless:?}"
    );
    let published = cli(
        root,
        &[
            "migrate",
            "--config",
            changed_path.to_str().unwrap(),
            "--data-dir",
            a_dir.to_str().unwrap(),
            "--publish-constants",
        ],
    )
    .expect(0);
    assert_eq!(published.value("declaration-revision"), "2");
    assert!(!published.value("store-id").is_empty());
    // `--json`: the same, as one object.
    let json = cli(
        root,
        &[
            "migrate",
            "--json",
            "--config",
            changed_path.to_str().unwrap(),
        ],
    )
    .expect(0);
    let object = only_object(&json.stdout, "migrate");
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        ["elapsedMs", "event", "schemaVersion", "storeId"]
    );
    assert_eq!(object["storeId"], published.value("store-id"));
    assert_eq!(
        object["schemaVersion"],
        u64::from(rltp_storage::postgres::schema::SCHEMA_VERSION)
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    let served = |node: &Carrier| loop {
        let now = cli_to(root, node, &["declaration"]).expect(0);
        if now.value("revision") == "2" {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the node still serves revision {}",
            now.value("revision")
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for node in [&a, &b] {
        let now = served(node);
        assert_eq!(now.value("orphan-horizon"), "P60D");
        assert_eq!(now.value("issuer"), before.value("issuer"));
    }
    let doc_a = cli_to(root, &a, &["declaration", "--json"]).expect(0);
    let doc_b = cli_to(root, &b, &["declaration", "--json"]).expect(0);
    assert_eq!(doc_a.stdout, doc_b.stdout, "one declaration, byte for byte");
    assert!(b.terminate().success());

    // A node restarted with the old constants no longer belongs ...
    let old_path = root.join("old.toml");
    std::fs::write(&old_path, &config).unwrap();
    let stale = cli(
        root,
        &[
            "serve",
            "--data-dir",
            b_dir.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--config",
            old_path.to_str().unwrap(),
        ],
    )
    .expect(2);
    assert!(
        stale
            .stderr
            .contains("its [constants] differ from those of the database's declaration revision 2"),
        "{stale:?}"
    );
    // ... and with the new ones it serves revision 2 as it is.
    let b = Carrier::start_with(&Spec::new(&b_dir, &changed));
    let again = cli_to(root, &b, &["declaration", "--json"]).expect(0);
    assert_eq!(again.stdout, doc_a.stdout);
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}

/// `migrate --after-restore` (the database restored from a backup, every
/// node stopped) raises the `seq` floor to now × 1024, and the next
/// deposit's `seq` is above it: no `seq` handed out after the backup is
/// handed out again (`PROTOCOL.md` §7).
#[test]
fn after_a_restore_migrate_raises_the_seq_floor_past_every_seq_handed_out() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let config = node_config(&cluster);
    let config_path = root.join("node.toml");
    std::fs::write(&config_path, &config).unwrap();
    let a_dir = root.join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let (key, rkid) = keys_new(root, "alice.json");
    cli_to(root, &a, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let doc = document(root, "d0.json", "{\"n\":0}");
    cli_to(root, &a, &["send", "--to", &rkid, doc.to_str().unwrap()]).expect(0);
    assert!(a.terminate().success());

    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let migrated = cli(
        root,
        &[
            "migrate",
            "--config",
            config_path.to_str().unwrap(),
            "--after-restore",
        ],
    )
    .expect(0);
    let floor: u64 = migrated.value("seq-floor").parse().unwrap();
    assert!(
        floor >= before * 1024,
        "floor {floor} below {before} ms × 1024"
    );

    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let doc = document(root, "d1.json", "{\"n\":1}");
    cli_to(root, &a, &["send", "--to", &rkid, doc.to_str().unwrap()]).expect(0);
    let collected = cli_to(
        root,
        &a,
        &[
            "collect",
            "--json",
            "--key",
            key.to_str().unwrap(),
            "--out",
            "inbox",
        ],
    )
    .expect(0);
    let seqs: Vec<u64> = collected
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["seq"].as_u64())
        .collect();
    assert_eq!(seqs.len(), 2, "{}", collected.stdout);
    assert!(seqs[0] < floor, "the deposit held before keeps its seq");
    assert_eq!(seqs[1], floor + 1, "the next seq is above the floor");
    assert!(a.terminate().success());
}

/// Starts `collect --watch` on `a`, sends a deposit through `b` and waits
/// (30 s at most) until the watch prints it.
fn watch_on_a_is_pushed_what_b_admits(
    root: &Path,
    a: &Carrier,
    b: &Carrier,
    key: &Path,
    rkid: &str,
) {
    let mut watch = Command::new(BIN)
        .args([
            "collect",
            "--key",
            key.to_str().unwrap(),
            "--out",
            "inbox-watch",
            "--watch",
        ])
        .args(a.args())
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = lines_of(watch.stdout.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the watch started");
        if line.starts_with("watching") {
            break;
        }
    }
    let doc = document(root, "late.json", &format!("{{\"late\":{}}}", wall_ms()));
    let sent = cli_to(root, b, &["send", "--to", rkid, doc.to_str().unwrap()]).expect(0);
    let late = sent.value("deposit").to_owned();
    let pushed = loop {
        let line = lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the deposit admitted through B was pushed to the watch on A");
        if line.starts_with("deposit ") {
            break line;
        }
    };
    assert!(pushed.contains(&late), "{pushed}");
    let _ = watch.kill();
    let _ = watch.wait();
}

/// With `notify = false` (a database without LISTEN/NOTIFY) a watch on A
/// still receives what B admits: it re-reads its queue every
/// `sweep-interval-ms`.
#[test]
fn without_notifications_a_watch_finds_other_nodes_deposits_by_re_reading() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let config = format!(
        "{}notify = false\n\n[limits]\nsweep-interval-ms = 200\n",
        node_config(&cluster)
    );
    let a_dir = root.join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let b = Carrier::start_with(&Spec::new(&second_data_dir(root, &a_dir), &config));
    let (key, rkid) = keys_new(root, "alice.json");
    cli_to(root, &a, &["register", "--key", key.to_str().unwrap()]).expect(0);
    watch_on_a_is_pushed_what_b_admits(root, &a, &b, &key, &rkid);
    let listening = cluster
        .psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'")
        .unwrap();
    assert_eq!(listening, "0", "no node listens");
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}

/// `[limits] capacity-bytes` and `max-bindings` live in the database
/// (`PROTOCOL.md` §13): the first node stores its own; a node configured
/// otherwise is refused at start, naming the key, its value and the
/// database's; `migrate --publish-limits` changes them for every node —
/// the running node adopts them within a sweep interval, the node that
/// was refused now joins, and one with the old values is refused.
#[test]
fn capacity_limits_live_in_the_database_and_a_node_that_disagrees_is_refused() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let port = free_tcp_port();
    let config = format!(
        "{}\n[limits]\nsweep-interval-ms = 100\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n",
        node_config(&cluster)
    );
    let a_dir = root.join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &config));
    let capacity = |port: u16| {
        let (code, body) = http_get(port, "/metrics");
        assert_eq!(code, 200, "{body}");
        body.lines()
            .find_map(|l| l.strip_prefix("rltp_carrier_capacity_bytes "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no rltp_carrier_capacity_bytes: {body}"))
    };
    let stored = capacity(port);
    let serve = |dir: &Path, config: &str| {
        let path = dir.with_extension("toml");
        std::fs::write(&path, config).unwrap();
        cli(
            root,
            &[
                "serve",
                "--data-dir",
                dir.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--config",
                path.to_str().unwrap(),
            ],
        )
    };
    let changed = format!(
        "{}\n[limits]\nsweep-interval-ms = 100\ncapacity-bytes = 2000000\n",
        node_config(&cluster)
    );
    let b_dir = second_data_dir(root, &a_dir);
    let refused = serve(&b_dir, &changed).expect(2);
    assert!(
        refused.stderr.contains(&format!(
            "[limits] capacity-bytes is 2000000 in this node's configuration but {stored} in the database"
        )),
        "{refused:?}"
    );
    assert!(refused.stderr.contains("--publish-limits"), "{refused:?}");

    let changed_path = root.join("changed.toml");
    std::fs::write(&changed_path, &changed).unwrap();
    let published = cli(
        root,
        &[
            "migrate",
            "--config",
            changed_path.to_str().unwrap(),
            "--publish-limits",
        ],
    )
    .expect(0);
    assert_eq!(published.value("capacity-bytes"), "2000000");
    // The running node adopts them within a sweep interval.
    let deadline = Instant::now() + Duration::from_secs(20);
    while capacity(port) != 2_000_000 {
        assert!(
            Instant::now() < deadline,
            "A never adopted the published limits"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The node that was refused joins; one with the old values is refused.
    let b = Carrier::start_with(&Spec::new(&b_dir, &changed));
    let c_dir = root.join("c");
    std::fs::create_dir_all(&c_dir).unwrap();
    std::fs::copy(a_dir.join("declaration.key"), c_dir.join("declaration.key")).unwrap();
    let stale = serve(&c_dir, &node_config(&cluster)).expect(2);
    assert!(
        stale.stderr.contains(&format!(
            "[limits] capacity-bytes is {stored} in this node's configuration but 2000000 in the database"
        )),
        "{stale:?}"
    );
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}
