//! Store growth is visible (issue 17 item 6): `/metrics` and `admin store`
//! say what the store takes on disk, how much of its log still holds
//! deposits, and how old its oldest deposit is — the same figures through
//! the running carrier and, once it is stopped, read offline.

use super::*;

fn gauge(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[test]
fn store_size_and_the_oldest_deposit_are_visible_online_and_offline() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let port = free_tcp_port();
    let clock = dir.join("clock-offset");
    std::fs::write(&clock, "0\n").unwrap();
    let spec = Spec::fixed(
        &dir.join("data"),
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
    )
    .with_clock(&clock);
    let carrier = Carrier::start_with(&spec);
    let (_, text) = http_get(port, "/metrics");
    assert_eq!(gauge(&text, "rltp_carrier_store_live_bytes"), 0);
    assert_eq!(gauge(&text, "rltp_carrier_oldest_deposit_age_seconds"), 0);

    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    for n in 0..3 {
        let doc = document(dir, &format!("d{n}.json"), &format!("{{\"n\":{n}}}"));
        cli_to(
            dir,
            &carrier,
            &["send", "--to", &rkid, doc.to_str().unwrap()],
        )
        .expect(0);
    }
    // A day passes on the carrier's clock.
    std::fs::write(&clock, "86400000\n").unwrap();
    let (_, text) = http_get(port, "/metrics");
    let held = gauge(&text, "rltp_carrier_deposit_bytes");
    assert!(held > 0);
    // The log's live bytes are exactly the held envelopes' bytes.
    assert_eq!(gauge(&text, "rltp_carrier_store_live_bytes"), held);
    let log = gauge(&text, "rltp_carrier_store_log_bytes");
    assert!(log > held, "log {log} holds the deposits and more");
    assert!(gauge(&text, "rltp_carrier_store_segments") >= 1);
    assert!(gauge(&text, "rltp_carrier_store_disk_bytes") >= log);
    assert!(gauge(&text, "rltp_carrier_store_index_bytes") > 0);
    let age = gauge(&text, "rltp_carrier_oldest_deposit_age_seconds");
    assert!(
        (86_400..86_400 + 120).contains(&age),
        "the oldest deposit is a day old, not {age} s"
    );

    let data = dir.join("data");
    let online = cli(
        dir,
        &["admin", "store", "--data-dir", data.to_str().unwrap()],
    )
    .expect(0);
    assert_eq!(online.value("live-bytes"), held.to_string());
    assert_eq!(
        online.value("dead-bytes").parse::<u64>().unwrap(),
        log - held
    );
    let online_age: u64 = online.value("oldest-deposit-age-seconds").parse().unwrap();
    assert!((86_400..86_400 + 120).contains(&online_age), "{online:?}");
    assert!(carrier.terminate().success());

    // Offline, through the store itself (the carrier's clock offset does
    // not apply: the wall clock reads the deposits as new).
    let offline = cli(
        dir,
        &[
            "admin",
            "store",
            "--json",
            "--data-dir",
            data.to_str().unwrap(),
        ],
    )
    .expect(0);
    let record: serde_json::Value = serde_json::from_str(offline.stdout.trim()).unwrap();
    assert_eq!(record["liveBytes"], held, "{record}");
    assert_eq!(record["compactableSegments"], 0, "{record}");
    assert_ne!(record["oldestDepositAdmittedAt"], "none", "{record}");
}
