//! What an operator does to a running relay (issue 17): `serve --check`
//! without side effects, SIGHUP reloading the meters observably on the
//! wire (and refusing an invalid file whole), and lame-duck mode moving a
//! client to the next node (`PROTOCOL.md` §5, `deploy/OPERATIONS.md`).

use super::*;
use rltp_proofs::multikey::Rkid;
use rltp_server::config::Config;

/// Every file under `dir` with its length and modification time, sorted.
fn tree(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            }
            out.push((entry.path(), meta.len(), meta.modified().unwrap()));
        }
    }
    out.sort();
    out
}

/// `serve --check` on a data dir that does not exist: exit 0, nothing
/// made (not the data dir, not a file beside it), and the configuration in
/// force printed with every default filled in — as TOML that parses back
/// to the defaults key for key, and as one JSON object.
#[test]
fn check_of_a_missing_data_dir_creates_nothing_and_prints_every_default() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let run = cli(dir, &["serve", "--check", "--data-dir", "data"]).expect(0);
    assert_eq!(tree(dir), Vec::new(), "--check made something");
    assert_eq!(run.stderr, "");
    let comments: Vec<&str> = run.lines("# check ");
    assert_eq!(
        comments,
        [
            "# check data-dir: data does not exist: the first start makes it (mode 0700)",
            "# check tls: no certificate configured or generated yet: the first start generates one",
            "# check declaration-key: none yet: the first start makes one",
            "# check lineage: a fresh data dir: the first start makes it",
            "# check store: embedded, none yet: the first start makes it",
        ]
    );
    let printed = Config::from_toml(&run.stdout).unwrap();
    let mut defaults = Config::defaults().unwrap();
    defaults.data_dir = PathBuf::from("data");
    assert_eq!(printed.flattened(), defaults.flattened());
    // Every default is written out, not left implicit.
    for line in [
        "carrier = \"did:web:localhost\"",
        "listen = \"127.0.0.1:4433\"",
        "orphan-horizon = \"P30D\"",
        "max-binding-tombstones = \"1000000\"",
        "capacity-bytes = 4294967296",
        "max-connections = 1024",
        "drain-timeout-ms = 10000",
        "[limits.meters.shared-submission]",
        "per-second = 50000",
        "burst = 100000",
        "backend = \"embedded\"",
    ] {
        assert!(
            run.stdout.lines().any(|l| l == line),
            "{line}: {}",
            run.stdout
        );
    }
    assert_eq!(
        run.stdout.lines().filter(|l| !l.starts_with('#')).count(),
        printed_lines(&defaults),
        "{}",
        run.stdout
    );
    let json = cli(dir, &["serve", "--check", "--json", "--data-dir", "data"]).expect(0);
    assert_eq!(tree(dir), Vec::new());
    assert_eq!(json.stdout.lines().count(), 1, "one JSON object");
    let object: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        object["config"]["limits"]["meters"]["queue"]["burst"],
        10_000
    );
    assert_eq!(object["config"]["constants"]["status-horizon"], "PT30S");
    assert_eq!(object["config"]["store"]["backend"], "embedded");
    assert_eq!(object["config"]["data-dir"], "data");
    assert_eq!(
        object["checks"][4],
        serde_json::json!({"what": "store", "detail": "embedded, none yet: the first start makes it"})
    );
}

/// The lines of the TOML `serve --check` prints for `config` (keys,
/// section headers and the blank lines between sections).
fn printed_lines(config: &Config) -> usize {
    toml::to_string(&config.effective())
        .unwrap()
        .lines()
        .count()
}

/// `serve --check --data-dir DATA_DIR --config CONFIG`, run in `dir`.
fn check(dir: &Path, data_dir: &str, config: &Path) -> Run {
    cli(
        dir,
        &[
            "serve",
            "--check",
            "--data-dir",
            data_dir,
            "--config",
            config.to_str().unwrap(),
        ],
    )
}

/// A configuration `serve` would refuse is refused by `--check` the same
/// way: exit 2, the field (or the file) named, nothing made.
#[test]
fn check_refuses_what_serve_would_with_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let bad = document(
        dir,
        "bad.toml",
        "[limits.meters]\nqueue = { per-second = 0, burst = 1 }\n",
    );
    let run = check(dir, "data", &bad).expect(2);
    assert_eq!(
        run.stderr,
        "rltp-carrier serve: config field limits.meters.queue: per-second and burst must be at least 1\n"
    );
    assert_eq!(run.stdout, "");
    let tls = document(
        dir,
        "tls.toml",
        "[tls]\ncert = \"missing.pem\"\nkey = \"missing-key.pem\"\n",
    );
    let run = check(dir, "data", &tls).expect(2);
    assert!(
        run.stderr.starts_with("rltp-carrier serve: ") && run.stderr.contains("missing.pem"),
        "{}",
        run.stderr
    );
    assert!(!dir.join("data").exists());
}

/// `--check` on the data dir of a stopped carrier opens its store
/// read-only and names it; on a running one it reports the store held
/// open. Neither changes a byte or a timestamp of the data dir.
#[test]
fn check_reads_a_carriers_data_dir_without_touching_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let data = dir.join("data");
    let carrier = Carrier::start(&data, None);
    let pin = carrier.pin.clone();
    assert_eq!(carrier.terminate().code(), Some(0));
    let lineage = std::fs::read_to_string(data.join("lineage")).unwrap();
    let store_id = lineage
        .lines()
        .find_map(|l| l.strip_prefix("store-id "))
        .unwrap()
        .to_owned();
    let before = tree(&data);
    let args = ["serve", "--check", "--data-dir", data.to_str().unwrap()];
    let run = cli(dir, &args).expect(0);
    assert_eq!(
        run.lines("# check store: "),
        [format!(
            "# check store: embedded, opens read-only: store {store_id}, format 3 (the log store)"
        )
        .as_str()]
    );
    assert_eq!(
        run.lines("# check tls: "),
        [format!("# check tls: generated identity loads; fingerprint {pin}").as_str()]
    );
    assert_eq!(
        run.lines("# check lineage: "),
        [format!("# check lineage: every file accounted for (store {store_id})").as_str()]
    );
    assert_eq!(tree(&data), before, "--check changed the data dir");
    let carrier = Carrier::start(&data, None);
    let run = cli(dir, &args).expect(0);
    assert_eq!(
        run.lines("# check store: "),
        [
            "# check store: embedded, held open by a running carrier (not read; everything else was checked)"
        ]
    );
    assert_eq!(carrier.terminate().code(), Some(0));
}

/// A one-worker runtime for the client library beside the binary.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// One raw `submit` of `envelope` to `rkid`: the whole answer, bytes.
async fn submit_raw(client: &rltp_client::Client, rkid: &Rkid, envelope: &[u8]) -> Vec<u8> {
    let header = rltp_wire::Request::Submit {
        rkid: *rkid,
        size: u32::try_from(envelope.len()).unwrap(),
    }
    .to_header();
    let bytes = rltp_wire::encode_frame(&header, envelope);
    let (mut send, mut recv) = client.connection().unwrap().open_bi().await.unwrap();
    send.write_all(&bytes).await.unwrap();
    let _ = send.finish();
    tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 16))
        .await
        .unwrap()
        .unwrap()
}

/// The answer frame of a verdict without a deposit id.
fn refusal_frame(header: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&u32::try_from(header.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// The verdict of a raw answer (`admitted`, `refused(…)`).
fn verdict_of(answer: &[u8]) -> String {
    let (h, _) =
        rltp_wire::parse_prefix(answer[..8].try_into().unwrap(), rltp_wire::MAX_BODY_BYTES)
            .unwrap();
    let header = rltp_wire::parse_header(&answer[8..8 + h]).unwrap();
    rltp_wire::response::SubmitAnswer::from_header(&header)
        .unwrap()
        .verdict
        .to_string()
}

/// SIGHUP changes a meter observably on the wire: a queue meter of burst
/// 1 refuses the second deposit `refused(admission-resource)` (exact
/// bytes); a file that raises it but has another field wrong is refused
/// whole (the field logged, the meter still refusing); the corrected file
/// raises it, the change is logged key by key, and deposits are admitted.
#[test]
fn sighup_reloads_the_meters_and_refuses_an_invalid_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let low = "[limits.meters]\nqueue = { per-second = 1, burst = 1 }\n";
    let spec = Spec {
        log: Some("info".into()),
        ..Spec::new(&dir.join("data"), low)
    };
    let config_path = spec.config.clone().unwrap();
    let carrier = Carrier::start_with(&spec);
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let rkid = Rkid::parse(&rkid).unwrap();
    let rt = runtime();
    let client = rt.block_on(carrier.connect());
    let mut n = 0u32;
    let mut envelope = || {
        n += 1;
        rltp_cli::send::seal_document(format!(r#"{{"n":{n}}}"#).as_bytes(), &rkid)
            .unwrap()
            .envelope
    };
    let refused = refusal_frame(r#"{"retriable":true,"verdict":"refused(admission-resource)"}"#);
    let (first, second) = rt.block_on(async {
        (
            submit_raw(&client, &rkid, &envelope()).await,
            submit_raw(&client, &rkid, &envelope()).await,
        )
    });
    assert_eq!(verdict_of(&first), "admitted");
    assert_eq!(second, refused, "{}", String::from_utf8_lossy(&second));

    // Raises the meter, but max-bindings = 0 is invalid: nothing applies.
    std::fs::write(
        &config_path,
        "[limits]\nmax-bindings = 0\n[limits.meters]\nqueue = { per-second = 1000, burst = 1000 }\n",
    )
    .unwrap();
    carrier.signal("HUP");
    let refusal = carrier.log_events(rltp_server::service::reload::REFUSED, 1);
    assert_eq!(refusal.len(), 1, "{:?}", carrier.logs());
    assert_eq!(
        refusal[0]["error"],
        "config field limits.max-bindings: must be at least 1"
    );
    assert_eq!(
        carrier
            .log_events(rltp_server::service::reload::RELOADED, 0)
            .len(),
        0
    );
    let third = rt.block_on(submit_raw(&client, &rkid, &envelope()));
    assert_eq!(third, refused, "the old meter is still in force");

    // The corrected file: applied, each changed key logged.
    std::fs::write(
        &config_path,
        "[limits.meters]\nqueue = { per-second = 1000, burst = 1000 }\n",
    )
    .unwrap();
    carrier.signal("HUP");
    let reloaded = carrier.log_events(rltp_server::service::reload::RELOADED, 1);
    assert_eq!(reloaded.len(), 1, "{:?}", carrier.logs());
    assert_eq!(reloaded[0]["applied"], 2);
    assert_eq!(reloaded[0]["needs_restart"], 0);
    let applied: Vec<(String, String, String)> = carrier
        .log_events("config reload: applied", 2)
        .iter()
        .map(|f| {
            (
                f["key"].as_str().unwrap().to_owned(),
                f["old"].as_str().unwrap().to_owned(),
                f["new"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        applied,
        [
            (
                "limits.meters.queue.burst".into(),
                "1".into(),
                "1000".into()
            ),
            (
                "limits.meters.queue.per-second".into(),
                "1".into(),
                "1000".into()
            ),
        ]
    );
    let verdicts: Vec<String> = rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..5 {
            out.push(verdict_of(&submit_raw(&client, &rkid, &envelope()).await));
        }
        out
    });
    assert_eq!(verdicts, ["admitted"; 5]);

    // A restart-only key and a published constant: logged, not applied.
    std::fs::write(
        &config_path,
        "[constants]\nstatus-horizon = \"PT1M\"\n[limits]\nmax-connections = 7\n\
         [limits.meters]\nqueue = { per-second = 1000, burst = 1000 }\n",
    )
    .unwrap();
    carrier.signal("HUP");
    let reloaded = carrier.log_events(rltp_server::service::reload::RELOADED, 2);
    assert_eq!(reloaded.len(), 2, "{:?}", carrier.logs());
    assert_eq!(
        (
            &reloaded[1]["applied"],
            &reloaded[1]["needs_restart"],
            &reloaded[1]["constants"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!(1),
            &serde_json::json!(1)
        )
    );
    let restart = carrier.logged("config reload: needs a restart; the running value is kept");
    assert_eq!(restart.len(), 1);
    assert_eq!(restart[0]["fields"]["key"], "limits.max-connections");
    assert_eq!(restart[0]["fields"]["old"], "1024");
    assert_eq!(restart[0]["fields"]["new"], "7");
    let constant = carrier.logged(
        "config reload: a published constant is not reloaded; the next start publishes it as a new declaration revision",
    );
    assert_eq!(constant.len(), 1);
    assert_eq!(constant[0]["fields"]["key"], "constants.status-horizon");
    assert_eq!(constant[0]["fields"]["new"], "\"PT1M\"");
    // The log filter reloads: the per-deposit debug line appears.
    assert_eq!(carrier.logged("submit").len(), 0, "info has no submit line");
    std::fs::write(
        &config_path,
        "log-filter = \"info,rltp_server=debug\"\n\
         [limits.meters]\nqueue = { per-second = 1000, burst = 1000 }\n",
    )
    .unwrap();
    carrier.signal("HUP");
    assert_eq!(
        carrier
            .log_events(rltp_server::service::reload::RELOADED, 3)
            .len(),
        3
    );
    let filter = carrier.logged("config reload: applied");
    let filter = filter.last().unwrap();
    assert_eq!(filter["fields"]["key"], "log-filter");
    assert_eq!(filter["fields"]["old"], "\"info\"");
    assert_eq!(filter["fields"]["new"], "\"info,rltp_server=debug\"");
    let answer = rt.block_on(submit_raw(&client, &rkid, &envelope()));
    assert_eq!(verdict_of(&answer), "admitted");
    assert_eq!(carrier.log_events("submit", 1).len(), 1);
    rt.block_on(client.close());
    assert_eq!(carrier.terminate().code(), Some(0));
}

/// Lame duck through the control socket: node A turns new connections
/// away with `going-away` and its `/readyz` says 503, while a session
/// already open on it is still served; `send` given A then B moves to B at
/// once and is accepted there; once A's last connection closes, A drains
/// and exits 0 by itself.
#[test]
fn lame_duck_moves_a_client_to_the_next_node_and_exits_after_the_drain() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let port = free_tcp_port();
    let a = Carrier::start_with(&Spec {
        log: Some(DEBUG_LOG.into()),
        ..Spec::new(
            &dir.join("a"),
            &format!(
                "[limits]\ndrain-timeout-ms = 30000\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n"
            ),
        )
    });
    let b = Carrier::start(&dir.join("b"), None);
    let (key, rkid) = keys_new(dir, "alice.json");
    for node in [&a, &b] {
        cli_to(dir, node, &["register", "--key", key.to_str().unwrap()]).expect(0);
    }
    let rt = runtime();
    // A session open on A before the lame duck.
    let held = rt.block_on(a.connect());
    let (code, _) = http_get(port, "/readyz");
    assert_eq!(code, 200);
    let run = cli(
        dir,
        &[
            "admin",
            "lame-duck",
            "--data-dir",
            dir.join("a").to_str().unwrap(),
        ],
    )
    .expect(0);
    assert_eq!(run.stdout, "lame-duck entered\n");
    assert_eq!(a.log_events(rltp_server::service::LAME_DUCK, 1).len(), 1);
    let (code, body) = http_get(port, "/readyz");
    assert_eq!(code, 503, "{body}");
    assert_eq!(
        body,
        "not ready\nstore ok\ndeclaration ok (revision 1)\ndraining no\n\
         lame-duck yes (new connections are turned away: going-away)\nstore-damage none\n"
    );
    // The open session is still served.
    let revision = rt
        .block_on(held.declaration())
        .unwrap()
        .declaration
        .revision();
    assert_eq!(revision, 1);

    let doc = document(dir, "letter.json", r#"{"hello":"world"}"#);
    let send = cli(
        dir,
        &[
            "send",
            "--json",
            "--to",
            &rkid,
            doc.to_str().unwrap(),
            "--server",
            &a.addr,
            "--pin",
            &a.pin,
            "--server",
            &b.addr,
            "--pin",
            &b.pin,
        ],
    )
    .expect(0);
    let events: Vec<serde_json::Value> = send
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed = events
        .iter()
        .find(|e| e["event"] == "transport-failure")
        .unwrap();
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .ends_with("going-away (code 1)"),
        "{failed}"
    );
    let moved: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "moved").collect();
    assert_eq!(moved.len(), 1, "{}", send.stdout);
    assert_eq!(moved[0]["server"], b.addr.as_str());
    assert!(
        events.iter().all(|e| e["event"] != "backoff"),
        "moved at once: {}",
        send.stdout
    );
    let final_ = events.iter().find(|e| e["event"] == "final").unwrap();
    assert_eq!(final_["status"], "accepted");
    let digest = final_["deposit"].as_str().unwrap().to_owned();
    let admitted = b.log_events("submit", 1);
    assert_eq!(admitted.len(), 1);
    assert_eq!(admitted[0]["deposit"], digest.as_str());
    assert_eq!(admitted[0]["verdict"], "admitted");
    assert_eq!(a.log_events("submit", 0).len(), 0, "nothing reached A");

    // The last session on A closes: A drains and exits 0.
    rt.block_on(held.close());
    let logs = a.log_handle();
    assert_eq!(a.wait_exit().code(), Some(0));
    let over = logs
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "lame duck over: shutting down")
        .map(|v| v["fields"].clone())
        .collect::<Vec<_>>();
    assert_eq!(over.len(), 1);
    assert_eq!(over[0]["idle"], true);
    assert_eq!(over[0]["connections_left"], 0);
}

/// SIGUSR2 enters lame-duck mode too: a new connection is closed with
/// application code 1, reason `going-away` (exact), which the client
/// library names [`rltp_client::ClientError::is_going_away`]; with no
/// session left the carrier shuts down and exits 0.
#[test]
fn sigusr2_closes_new_connections_with_going_away() {
    let dir = tempfile::tempdir().unwrap();
    let carrier = Carrier::start_with(&Spec {
        log: Some("info".into()),
        ..Spec::new(
            &dir.path().join("data"),
            "[limits]\ndrain-timeout-ms = 30000\n",
        )
    });
    let rt = runtime();
    let held = rt.block_on(carrier.connect());
    carrier.signal("USR2");
    let entered = carrier.log_events(rltp_server::service::LAME_DUCK, 1);
    assert_eq!(entered.len(), 1);
    assert_eq!(entered[0]["by"], "SIGUSR2");
    let error = rt.block_on(async {
        rltp_client::tls::install_crypto_provider();
        let options = rltp_client::ConnectOptions::new(
            carrier.addr.clone(),
            rltp_client::tls::ServerTrust::Pin(carrier.pin.parse().unwrap()),
        )
        .with_transport_choice(rltp_client::TransportChoice::Quic);
        match rltp_client::Client::connect(&options).await {
            Ok(client) => client.declaration().await.map(|_| ()).unwrap_err(),
            Err(e) => e,
        }
    });
    assert!(error.is_going_away(), "{error:?}");
    let rltp_client::ClientError::Transport(transport) = &error else {
        panic!("{error:?}");
    };
    let close = match transport {
        rltp_client::TransportError::Connection(quinn::ConnectionError::ApplicationClosed(c)) => c,
        rltp_client::TransportError::Read(rltp_client::stream::StreamError::Quic(
            quinn::ReadError::ConnectionLost(quinn::ConnectionError::ApplicationClosed(c)),
        )) => c,
        rltp_client::TransportError::Write(rltp_client::stream::WriteError::Quic(
            quinn::WriteError::ConnectionLost(quinn::ConnectionError::ApplicationClosed(c)),
        )) => c,
        other => panic!("{other:?}"),
    };
    assert_eq!(close.error_code.into_inner(), 1);
    assert_eq!(&close.reason[..], b"going-away");
    rt.block_on(held.close());
    assert_eq!(carrier.wait_exit().code(), Some(0));
}

/// `serve --check` of a node on PostgreSQL connects and reads, never
/// migrates: a database without the carrier's schema is refused (exit 2,
/// naming `migrate`) as often as it is checked; after `migrate` it is
/// reported with the schema version and the store id `migrate` printed.
#[test]
fn check_of_a_postgres_node_reads_the_schema_and_migrates_nothing() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let config = document(
        dir,
        "node.toml",
        &format!(
            "[store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{}\"\n",
            cluster.conninfo()
        ),
    );
    for _ in 0..2 {
        let run = check(dir, "node", &config).expect(2);
        assert_eq!(
            run.stderr,
            "rltp-carrier serve: store: storage engine error: the database holds no carrier schema \
             (rltp_meta): run `rltp-carrier migrate --config FILE`\n"
        );
    }
    assert!(!dir.join("node").exists());
    let migrated = cli(dir, &["migrate", "--config", config.to_str().unwrap()]).expect(0);
    let store_id = migrated.value("store-id").to_owned();
    let run = check(dir, "node", &config).expect(0);
    assert_eq!(
        run.lines("# check store: "),
        [format!(
            "# check store: postgres, reachable: schema version 2 (this binary: 2), store {store_id}, \
             no declaration yet (the first node signs revision 1)"
        )
        .as_str()]
    );
    let printed = Config::from_toml(&run.stdout).unwrap();
    assert_eq!(
        printed.store.backend,
        rltp_server::config::Backend::Postgres
    );
    assert!(!dir.join("node").exists());
    // A first node signs revision 1; a fresh data dir without its key is
    // refused by --check as a start would refuse it; the node's own is not.
    let node = Carrier::start_with(&Spec {
        data_dir: dir.join("a"),
        config: Some(config.clone()),
        ..Spec::default()
    });
    let run = check(dir, "node", &config).expect(2);
    assert!(
        run.stderr.contains("its declaration key") && run.stderr.contains("is missing"),
        "{}",
        run.stderr
    );
    let run = check(dir, "a", &config).expect(0);
    assert_eq!(
        run.lines("# check store: "),
        [format!(
            "# check store: postgres, reachable: schema version 2 (this binary: 2), store {store_id}, \
             declaration revision 1 (this node's key and constants match it)"
        )
        .as_str()]
    );
    assert_eq!(node.terminate().code(), Some(0));
}
