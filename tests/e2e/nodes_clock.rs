//! One clock for many nodes (`PROTOCOL.md` §13, "One clock"), through the
//! real binary: two `serve` nodes on one throwaway PostgreSQL cluster with
//! `give-up-horizon` P1D, one of them run under libfaketime (Debian's
//! `libfaketime`, installed by `test.sh`) three days ahead of the host, or
//! three days behind. Horizons are stamped and judged on the database's
//! clock, so the skewed node gives nothing up early and loses nothing
//! while it keeps sweeping; it is not ready (`/readyz` names both clocks,
//! the metrics say so) and refuses what depends on time, saying why.

use super::*;

/// Debian's libfaketime (package `libfaketime`).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The environment of a process whose clocks read `skew` (`+3d`, `-3d`)
/// from the host's.
fn faked(skew: &str) -> Vec<(String, String)> {
    assert!(
        Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: install Debian's libfaketime (test.sh does)"
    );
    vec![
        ("LD_PRELOAD".into(), LIBFAKETIME.into()),
        ("FAKETIME".into(), skew.into()),
    ]
}

/// A node's config on `cluster`, give-up-horizon P1D, sweeping every
/// 100 ms, its operator endpoint on `port`.
fn node_config(cluster: &rltp_pgtest::Cluster, port: u16) -> String {
    format!(
        "[constants]\ngive-up-horizon = \"P1D\"\n\n[limits]\nsweep-interval-ms = 100\n\n\
         [metrics]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [store]\nbackend = \"postgres\"\n\n[store.postgres]\nurl = \"{}\"\n",
        cluster.conninfo()
    )
}

/// Sends `n` documents to `rkid` through `node`; their deposit ids.
fn send_through(root: &Path, node: &Carrier, rkid: &str, tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let doc = document(
                root,
                &format!("{tag}{i}.json"),
                &format!("{{\"{tag}\":{i}}}"),
            );
            let sent = cli_to(root, node, &["send", "--to", rkid, doc.to_str().unwrap()]).expect(0);
            sent.value("deposit").to_owned()
        })
        .collect()
}

/// The value of the unlabelled metric `name` in a scrape of `port`.
fn metric(port: u16, name: &str) -> Option<f64> {
    let (code, body) = http_get(port, "/metrics");
    assert_eq!(code, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// The whole story with the second node's clock at `skew` (`direction`:
/// how `/readyz` words it).
fn a_skewed_node_gives_up_nothing_and_says_why(skew: &str, direction: &str) {
    let env = faked(skew);
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let (port_a, port_b) = (free_tcp_port(), free_tcp_port());
    let a_dir = root.join("a");
    let a = Carrier::start_with(&Spec::new(&a_dir, &node_config(&cluster, port_a)));
    let (key, rkid) = keys_new(root, "alice.json");
    cli_to(root, &a, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let mut ids = send_through(root, &a, &rkid, "before", 3);

    let b_dir = root.join("b");
    std::fs::create_dir_all(&b_dir).unwrap();
    std::fs::copy(a_dir.join("declaration.key"), b_dir.join("declaration.key")).unwrap();
    let mut spec = Spec::new(&b_dir, &node_config(&cluster, port_b));
    spec.env = env;
    let b = Carrier::start_with(&spec);

    // B says it is not ready, naming both clocks; A is ready.
    let (code, body) = http_get(port_b, "/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(body.starts_with("not ready\n"), "{body}");
    let clock_line = body
        .lines()
        .find(|l| l.starts_with("clock "))
        .unwrap_or_else(|| panic!("no clock line: {body}"));
    for part in [
        "NOT OK",
        "this node's clock reads",
        "the database's",
        direction,
        "max-clock-offset-ms 2000",
    ] {
        assert!(clock_line.contains(part), "{part:?} not in {clock_line}");
    }
    let (code, body) = http_get(port_a, "/readyz");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\nclock ok: "), "{body}");
    assert_eq!(
        metric(port_b, "rltp_carrier_clock_offset_exceeded"),
        Some(1.0)
    );
    let offset = metric(port_b, "rltp_carrier_clock_offset_ms").unwrap_or(0.0);
    assert!(
        offset.abs() > 2.0 * 86_400_000.0,
        "B's offset {offset} ms is not days"
    );
    assert_eq!(
        metric(port_a, "rltp_carrier_clock_offset_exceeded"),
        Some(0.0)
    );

    // B refuses what depends on time, saying why: a submission, a status.
    let doc = document(root, "through-b.json", "{\"through\":\"b\"}");
    let refused = cli_to(
        root,
        &b,
        &[
            "send",
            "--give-up-after",
            "PT2S",
            "--to",
            &rkid,
            doc.to_str().unwrap(),
        ],
    );
    assert_ne!(refused.code, 0, "{refused:?}");
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(
        said.contains("this carrier node is not ready") && said.contains(direction),
        "{refused:?}"
    );
    let status = cli_to(
        root,
        &b,
        &[
            "status",
            "--give-up-after",
            "PT2S",
            "--to",
            &rkid,
            "--deposit",
            &ids[0],
        ],
    );
    assert_ne!(status.code, 0, "{status:?}");
    assert!(
        format!("{}{}", status.stdout, status.stderr).contains("this carrier node is not ready"),
        "{status:?}"
    );

    // B keeps sweeping (its writer runs on the database's clock): wait
    // until it has committed a good number of batches, deposits admitted
    // through A meanwhile too.
    ids.extend(send_through(root, &a, &rkid, "during", 2));
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(port_b, "rltp_carrier_commit_seconds_count").unwrap_or(0.0) < 20.0 {
        assert!(Instant::now() < deadline, "B never swept");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Nothing was given up early, nothing lost: every deposit admitted is
    // `accepted` and collected.
    for id in &ids {
        let status = cli_to(root, &a, &["status", "--to", &rkid, "--deposit", id]).expect(0);
        assert_eq!(status.value("status"), "accepted", "{id}: {status:?}");
    }
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
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}

/// A node three days ahead: before the one clock, it gave up (and forgot)
/// deposits admitted through the other node within seconds.
#[test]
fn a_node_three_days_ahead_gives_up_nothing_and_is_not_ready() {
    a_skewed_node_gives_up_nothing_and_says_why("+3d", "ahead by");
}

/// A node three days behind: before the one clock, what it admitted was
/// stamped three days early, and the other node gave it up at once.
#[test]
fn a_node_three_days_behind_loses_nothing_and_is_not_ready() {
    a_skewed_node_gives_up_nothing_and_says_why("-3d", "behind by");
}
