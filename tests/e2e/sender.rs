//! `send` keeps §6.1 on the clock (issue 12, `PROTOCOL.md` §9–§10): from
//! the instant it starts, a report within the status horizon in force
//! whatever the transport does, and the give-up on its instant; retriable
//! refusals are retried and reported.
//!
//! Timing is read from the reports' own `elapsedMs` (the sender's
//! monotonic clock since it started), never from a sleep in the test; the
//! only wall-clock bound here is a generous one on the whole process.

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// `send --json` to `server` with `--give-up-after give_up`; returns the
/// run, its events and how long the process took.
fn send_unreachable(
    dir: &Path,
    server: &str,
    give_up: &str,
) -> (Run, Vec<serde_json::Value>, Duration) {
    let (_, rkid) = keys_new(dir, "alice.json");
    let path = document(dir, "d.json", r#"{"to":"nobody home"}"#);
    let pin = "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let started = Instant::now();
    let run = cli(
        dir,
        &[
            "send",
            "--json",
            "--server",
            server,
            "--pin",
            pin,
            "--give-up-after",
            give_up,
            "--to",
            &rkid,
            path.to_str().unwrap(),
        ],
    );
    let took = started.elapsed();
    let events = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (run, events, took)
}

/// The §6.1 checks on one unreachable run: the fallback horizon (PT5S)
/// is in force, the first report comes within it and every gap between
/// reports is within it, the last report is
/// `failed(expired-by-adapter-policy)` on the give-up instant (+100 ms),
/// and the exit status is 3 (unreachable).
fn assert_reports_on_the_clock(run: &Run, events: &[serde_json::Value], give_up_ms: u64) {
    assert_eq!(run.code, 3, "{run:#?}");
    let policy = &events[1];
    assert_eq!(policy["event"], "policy", "{events:?}");
    assert_eq!(policy["source"], "fallback");
    assert_eq!(policy["statusHorizonMs"], 5_000);
    assert_eq!(policy["giveUpHorizonMs"], give_up_ms);
    let horizon = 5_000u64;
    let reports: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["event"] == "status")
        .map(|e| {
            (
                e["elapsedMs"].as_u64().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    let (first_at, first) = reports[0];
    assert_eq!(first, "awaiting-transport(transport-unreachable)");
    assert!(
        first_at <= horizon,
        "first report at {first_at} ms: {reports:?}"
    );
    let mut previous = 0;
    for (at, _) in &reports {
        assert!(
            at - previous <= horizon,
            "a gap of {} ms: {reports:?}",
            at - previous
        );
        previous = *at;
    }
    let (last_at, last) = *reports.last().unwrap();
    assert_eq!(last, "failed(expired-by-adapter-policy)");
    assert!(
        (give_up_ms..=give_up_ms + 100).contains(&last_at),
        "gave up at {last_at} ms, bound {give_up_ms} ms"
    );
    assert!(
        reports[..reports.len() - 1]
            .iter()
            .all(|(_, s)| *s == "awaiting-transport(transport-unreachable)"),
        "{reports:?}"
    );
    let last_event = events.last().unwrap();
    assert_eq!(last_event["event"], "final");
    assert_eq!(last_event["status"], "failed(expired-by-adapter-policy)");
    assert!(
        run.stderr.is_empty(),
        "a give-up is a status, not an error: {run:#?}"
    );
}

/// Issue 12 §1, the blackhole: a UDP peer that reads every datagram and
/// never answers. Before the fix the first report came at +32.5 s (the
/// declaration fetch was bounded only by the 30 s `--timeout`) and
/// `--give-up-after PT10S` ended at +60 s. Now: a report within PT5S, no
/// gap above it, and the give-up at +10 s.
#[test]
fn a_blackholed_carrier_gets_reports_on_the_clock_and_a_give_up_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = hole.local_addr().unwrap().to_string();
    let heard = Arc::new(AtomicU64::new(0));
    {
        let heard = Arc::clone(&heard);
        let hole = hole.try_clone().unwrap();
        hole.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            // Reads (and drops) until the test's socket is gone.
            for _ in 0..600 {
                if hole.recv_from(&mut buf).is_ok() {
                    heard.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
    let (run, events, took) = send_unreachable(dir.path(), &addr, "PT10S");
    assert_reports_on_the_clock(&run, &events, 10_000);
    assert!(heard.load(Ordering::SeqCst) > 0, "the sender did send");
    // Raced (PROTOCOL.md §5b): TLS/TCP is refused at once (nothing listens
    // on the TCP port), QUIC gets its 1 s grace and no more, and the
    // attempt ends; the next one races again after a backoff.
    let failures: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "transport-failure")
        .map(|e| e["detail"].as_str().unwrap())
        .collect();
    assert!(failures.len() >= 2, "{events:?}");
    assert!(
        failures
            .iter()
            .all(|d| d.starts_with("transport: tls/tcp: Connection refused")),
        "{events:?}"
    );
    assert!(took < Duration::from_secs(25), "the process took {took:?}");
    drop(hole);
}

/// Issue 12 §1, the closed port: nothing is bound there. Same promises.
#[test]
fn a_closed_port_gets_reports_on_the_clock_and_a_give_up_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_udp_port());
    let (run, events, took) = send_unreachable(dir.path(), &addr, "PT6S");
    assert_reports_on_the_clock(&run, &events, 6_000);
    assert!(took < Duration::from_secs(20), "the process took {took:?}");
}

/// With `--timeout 1` the attempts fail fast: they are retried with
/// backoff, reports keep coming, the give-up is still on its instant.
#[test]
fn quick_transport_failures_are_retried_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let addr = format!("127.0.0.1:{}", free_udp_port());
    let (_, rkid) = keys_new(dir, "alice.json");
    let path = document(dir, "d.json", "{}");
    let run = cli(
        dir,
        &[
            "send",
            "--json",
            "--server",
            &addr,
            "--pin",
            "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            "--timeout",
            "1",
            "--give-up-after",
            "PT5S",
            "--to",
            &rkid,
            path.to_str().unwrap(),
        ],
    );
    let events: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_reports_on_the_clock(&run, &events, 5_000);
    let attempts = events.iter().filter(|e| e["event"] == "attempt").count();
    let backoffs: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "backoff")
        .map(|e| e["ms"].as_u64().unwrap())
        .collect();
    assert!(attempts >= 2, "{events:?}");
    // A backoff before each retry (and one cut short by the give-up when
    // the last attempt failed before it).
    assert!(
        backoffs.len() == attempts - 1 || backoffs.len() == attempts,
        "{events:?}"
    );
    for (n, ms) in backoffs.iter().enumerate() {
        assert!(*ms <= 250 << n, "backoff {n}: {ms} ms");
    }
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "transport-failure" && e["detail"] == "no answer within 1s"),
        "{events:?}"
    );
}

/// Keeps the queue meter of `rkid` dry from another connection,
/// submitting fresh deposits until `stop`; returns once the meter has
/// refused one (it is dry), with the thread that keeps it so.
pub fn hammer(
    carrier: &Carrier,
    rkid: &str,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let rkid = rltp_proofs::multikey::Rkid::parse(rkid).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(carrier.connect());
    let (dry_tx, dry) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        runtime.block_on(async {
            let mut refused = 0u64;
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let doc = format!(r#"{{"hammer":{n}}}"#);
                let envelope = rltp_cli::send::seal_document(doc.as_bytes(), &rkid)
                    .unwrap()
                    .envelope;
                let answer = client.submit(&rkid, &envelope).await.unwrap();
                if answer.verdict.retriable() {
                    refused += 1;
                    let _ = dry_tx.send(());
                }
            }
            client.close().await;
            refused
        })
    });
    dry.recv_timeout(Duration::from_secs(20))
        .expect("the queue meter never ran dry");
    thread
}

/// A retriable refusal (`refused(admission-resource)`: another connection
/// keeps the queue's own meter dry) is reported
/// `awaiting-transport(carrier-refused-retriable)` at once and retried
/// with backoff; once the meter refills the retry is admitted and `send`
/// exits 0.
#[test]
fn a_retriable_refusal_is_retried_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let config = document(
        dir,
        "carrier.toml",
        "[limits.meters]\nqueue = { per-second = 5, burst = 5 }\n",
    );
    let carrier = Carrier::start(&dir.join("data"), Some(&config));
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hammering = hammer(&carrier, &rkid, Arc::clone(&stop));
    let path = document(dir, "second.json", r#"{"n":2}"#);
    let send = Running::start(
        dir,
        &carrier,
        &["send", "--json", "--to", &rkid, path.to_str().unwrap()],
    );
    let refused = send.next_event("verdict");
    assert_eq!(refused["verdict"], "refused(admission-resource)");
    assert_eq!(refused["retriable"], true);
    let reported = send.next_event("status");
    assert_eq!(
        reported["status"],
        "awaiting-transport(carrier-refused-retriable)"
    );
    let lag = reported["elapsedMs"].as_u64().unwrap() - refused["elapsedMs"].as_u64().unwrap();
    assert!(lag <= 50, "reported at once, not {lag} ms later");
    assert!(send.next_event("backoff")["ms"].as_u64().unwrap() <= 250);
    stop.store(true, Ordering::SeqCst);
    assert!(hammering.join().unwrap() > 0);
    let admitted = loop {
        let verdict = send.next_event("verdict");
        if verdict["verdict"] != "refused(admission-resource)" {
            break verdict;
        }
    };
    assert_eq!(admitted["verdict"], "admitted");
    assert_eq!(send.next_event("status")["status"], "accepted");
    assert_eq!(send.next_event("final")["status"], "accepted");
    assert_eq!(send.wait(), Some(0));
}
