//! Reachable where UDP is not (issue 24, `PROTOCOL.md` §5b): the same
//! frames over TLS 1.3/TCP with HTTP/2, raced against QUIC by every
//! client command (`--transport auto`, the default).
//!
//! UDP to the carrier's port is dropped by an nftables table of the test's
//! own (an input-hook rule; Debian `nftables`, installed by `test.sh`; the
//! tests run as root), removed when the test ends, also on failure.

use super::*;

/// Drops every UDP datagram to a loopback port while it lives: an
/// nftables table of its own, deleted on drop (a panicking test too).
struct UdpDropped {
    table: String,
}

impl UdpDropped {
    /// Starts dropping UDP to `port`.
    fn on(port: u16) -> UdpDropped {
        let table = format!("rltp_e2e_udp_drop_{port}");
        let script = format!(
            "table inet {table} {{\n  chain input {{\n    type filter hook input priority -300; policy accept;\n    udp dport {port} drop\n  }}\n}}\n"
        );
        nft(&["-f", "-"], Some(&script));
        UdpDropped { table }
    }
}

impl Drop for UdpDropped {
    fn drop(&mut self) {
        nft(&["delete", "table", "inet", &self.table], None);
    }
}

/// Runs `nft ARGS` (with `stdin`), which must succeed; a missing `nft`
/// names its package.
fn nft(args: &[&str], stdin: Option<&str>) {
    use std::io::Write;
    let mut child = Command::new("nft")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("nft (Debian package nftables, installed by ./test.sh; run as root) is required: {e}")
        });
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "nft {args:?} failed (the tests run as root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// With UDP to the carrier's port silently dropped: `register` and
/// `send` connect over TLS/TCP (and say so), `send` is `admitted` within
/// 2 s of its start, and `collect --watch --conclude` receives the
/// deposit, concludes it and receives the next one pushed.
#[test]
fn where_udp_is_dropped_send_and_watch_go_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    // One `host:port` names both bindings (§5b), or `--tcp-port` the
    // TLS/TCP one where port 0 gave it another number (`Carrier::args`).
    let _dropped = UdpDropped::on(port_of(&carrier.addr));

    let (key, rkid) = keys_new(dir, "alice.json");
    let register = cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    assert!(
        register
            .stdout
            .contains(&format!("connected {} tcp", carrier.addr)),
        "{register:?}"
    );

    let held = document(dir, "held.json", r#"{"over":"tcp"}"#);
    let started = Instant::now();
    let send = cli_to(
        dir,
        &carrier,
        &["send", "--to", &rkid, held.to_str().unwrap()],
    )
    .expect(0);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "send took {took:?}: {send:?}"
    );
    assert_eq!(
        send.lines("connected"),
        [format!("connected {} tcp", carrier.addr)],
        "{send:?}"
    );
    assert_eq!(send.lines("verdict"), ["verdict admitted"], "{send:?}");
    // No `awaiting-transport(transport-unreachable)` report: the one
    // status is the final one.
    assert_eq!(send.lines("status"), ["status accepted"], "{send:?}");

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
    // Every line up to the first deposit: the connection is said first.
    let mut before = Vec::new();
    let first = loop {
        let line = watch.next("");
        if line.starts_with("deposit ") {
            break line;
        }
        before.push(line);
    };
    assert!(
        before.contains(&format!("connected {} tcp", carrier.addr)),
        "{before:?}"
    );
    assert!(
        first.contains(&format!(
            " digest {} written ",
            digest_of(r#"{"over":"tcp"}"#)
        )),
        "{first}"
    );
    assert_eq!(watch.next("conclude "), "conclude served concluded 1");
    let pushed = document(dir, "pushed.json", r#"{"pushed":"tcp"}"#);
    cli_to(
        dir,
        &carrier,
        &["send", "--to", &rkid, pushed.to_str().unwrap()],
    )
    .expect(0);
    let second = watch.next("deposit ");
    assert!(
        second.contains(&format!(
            " digest {} written ",
            digest_of(r#"{"pushed":"tcp"}"#)
        )),
        "{second}"
    );
    assert_eq!(watch.next("conclude "), "conclude served concluded 1");
    assert_eq!(watch.interrupt(), Some(0));
}

/// `--transport quic` and `--transport tcp` each use their binding only:
/// QUIC where UDP passes, TLS/TCP always; `quic` where UDP is dropped is
/// unreachable (exit 3).
#[test]
fn each_transport_can_be_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    for (transport, n) in [("quic", 1), ("tcp", 2)] {
        let doc = document(dir, &format!("{transport}.json"), &format!("{{\"n\":{n}}}"));
        let send = cli_to(
            dir,
            &carrier,
            &[
                "send",
                "--transport",
                transport,
                "--to",
                &rkid,
                doc.to_str().unwrap(),
            ],
        )
        .expect(0);
        assert_eq!(
            send.lines("connected"),
            [format!("connected {} {transport}", carrier.addr)],
            "{send:?}"
        );
    }
    let _dropped = UdpDropped::on(port_of(&carrier.addr));
    let doc = document(dir, "late.json", "{\"n\":3}");
    cli_to(
        dir,
        &carrier,
        &[
            "send",
            "--transport",
            "quic",
            "--timeout",
            "1",
            "--give-up-after",
            "PT2S",
            "--to",
            &rkid,
            doc.to_str().unwrap(),
        ],
    )
    .expect(3);
}

/// A TLS server with another key where the carrier should be (a
/// TLS-intercepting middlebox, here another carrier's listener) fails the
/// pin on TLS/TCP as on QUIC: exit 3 naming the pin mismatch, nothing
/// sent.
#[test]
fn another_key_on_tcp_is_a_pin_mismatch_and_nothing_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let middlebox = Carrier::start(&dir.join("other"), None);
    let (_, rkid) = keys_new(dir, "alice.json");
    let doc = document(dir, "d.json", "{}");
    let run = cli(
        dir,
        &[
            "send",
            "--transport",
            "tcp",
            "--server",
            &middlebox.addr,
            "--pin",
            &carrier.pin,
            "--to",
            &rkid,
            doc.to_str().unwrap(),
        ],
    )
    .expect(3);
    assert!(run.stderr.contains("pin mismatch"), "{run:?}");
    assert!(
        run.stderr.contains("not trusted, nothing was sent"),
        "{run:?}"
    );
    assert!(run.lines("verdict").is_empty(), "{run:?}");
    assert!(
        middlebox.logged("submit").is_empty(),
        "the middlebox saw no submission"
    );
}

/// Lame duck on TLS/TCP (§5b): a node in lame-duck mode answers a new
/// TLS/TCP connection with GOAWAY (no stream served), and a client on
/// TLS/TCP moves to the next `--server` at once, as on QUIC.
#[test]
fn a_client_on_tcp_moves_to_the_next_node_at_goaway() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let a = Carrier::start_with(&Spec::fixed(
        &dir.join("a"),
        "[limits]\ndrain-timeout-ms = 30000\n",
    ));
    let b = Carrier::start_with(&Spec::fixed(&dir.join("b"), ""));
    let (key, rkid) = keys_new(dir, "alice.json");
    for node in [&a, &b] {
        assert_eq!(node.tcp_addr, node.addr);
        cli_to(dir, node, &["register", "--key", key.to_str().unwrap()]).expect(0);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // A session open on A keeps it in lame-duck mode (not yet drained).
    let held = rt.block_on(a.connect());
    cli(
        dir,
        &[
            "admin",
            "lame-duck",
            "--data-dir",
            dir.join("a").to_str().unwrap(),
        ],
    )
    .expect(0);
    let doc = document(dir, "letter.json", r#"{"goaway":"tcp"}"#);
    let send = cli(
        dir,
        &[
            "send",
            "--json",
            "--transport",
            "tcp",
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
    let of = |kind: &str| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["event"] == kind).collect()
    };
    assert_eq!(of("transport-failure").len(), 1, "{}", send.stdout);
    assert_eq!(
        of("transport-failure")[0]["detail"],
        "transport: http/2: going-away (GOAWAY)",
        "{}",
        send.stdout
    );
    let moved = of("moved");
    assert_eq!(moved.len(), 1, "{}", send.stdout);
    assert_eq!(moved[0]["server"], b.addr.as_str());
    assert!(of("backoff").is_empty(), "moved at once: {}", send.stdout);
    let connected = of("connected");
    assert_eq!(connected.last().unwrap()["server"], b.addr.as_str());
    assert!(
        connected.iter().all(|c| c["transport"] == "tcp"),
        "{}",
        send.stdout
    );
    assert_eq!(of("final")[0]["status"], "accepted");
    assert_eq!(b.log_events("submit", 1).len(), 1);
    assert_eq!(a.log_events("submit", 0).len(), 0, "nothing reached A");
    rt.block_on(held.close());
}

/// Where UDP is dropped, an always-on `collect --watch --conclude` on
/// TLS/TCP survives its carrier's restart (an orderly one, then a crash):
/// it reconnects over TLS/TCP within seconds (a TCP connection ends at
/// once with its process; the QUIC attempt raced beside it does not hold
/// the reconnection up: `RACE_GRACE`) and is pushed what is sent
/// afterwards.
#[test]
fn a_watch_over_tcp_survives_carrier_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let spec = Spec::fixed(&dir.join("data"), "");
    let carrier = Carrier::start_with(&spec);
    assert_eq!(carrier.tcp_addr, carrier.addr);
    let _dropped = UdpDropped::on(port_of(&carrier.addr));
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
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
    assert!(watch.next("watching").starts_with("watching refresh-at "));
    let mut carrier = carrier;
    for (n, restart) in ["terminate", "crash"].into_iter().enumerate() {
        match restart {
            "terminate" => assert!(carrier.terminate().success()),
            _ => carrier.crash(),
        }
        carrier = Carrier::start_with(&spec);
        let text = format!("{{\"after\":\"{restart}\"}}");
        let doc = document(dir, &format!("after-{n}.json"), &text);
        let started = Instant::now();
        cli_to(
            dir,
            &carrier,
            &["send", "--to", &rkid, doc.to_str().unwrap()],
        )
        .expect(0);
        assert!(started.elapsed() < Duration::from_secs(2), "{restart}");
        let pushed = watch.next("deposit ");
        // Reconnected within seconds, not at an idle timeout.
        assert!(started.elapsed() < Duration::from_secs(5), "{restart}");
        assert!(
            pushed.contains(&format!(" digest {} written ", digest_of(&text))),
            "{restart}: {pushed}"
        );
        assert_eq!(watch.next("conclude "), "conclude served concluded 1");
    }
    assert_eq!(watch.interrupt(), Some(0));
}

/// Slow and idle TLS/TCP clients are bounded exactly like QUIC ones
/// (§5b): TCP connections that never start TLS hold a `max-connections`
/// slot (one pool for both bindings) only until the handshake deadline
/// and the rest are refused at accept; HTTP/2 streams that send a frame
/// prefix and stall are answered `read-timeout`; afterwards the carrier
/// serves QUIC and TLS/TCP clients as before.
#[test]
fn slow_and_idle_tcp_clients_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let port = free_tcp_port();
    let carrier = Carrier::start_with(&Spec::fixed(
        &dir.join("data"),
        &format!(
            "[limits]\nmax-connections = 32\nstream-read-timeout-ms = 1000\n\
             [metrics]\nlisten = \"127.0.0.1:{port}\"\n"
        ),
    ));
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);

    // 100 TCP connections that never say a word: 32 slots at most.
    let idle: Vec<std::net::TcpStream> = (0..100)
        .map(|_| std::net::TcpStream::connect(&carrier.tcp_addr).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let (_, metrics) = http_get(port, "/metrics");
        let refused = metrics
            .lines()
            .find_map(|l| l.strip_prefix("rltp_carrier_tcp_connections_refused_total "))
            .map(|v| v.parse::<f64>().unwrap())
            .unwrap();
        if refused >= 68.0 || Instant::now() > deadline {
            break refused;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(refused >= 68.0, "{refused}");

    // Stalled HTTP/2 streams, once the idle ones have met the deadline.
    std::thread::sleep(Duration::from_millis(1_500));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let answers = rt.block_on(async {
        rltp_client::tls::install_crypto_provider();
        let options = rltp_client::ConnectOptions::new(
            carrier.addr.clone(),
            rltp_client::tls::ServerTrust::Pin(carrier.pin.parse().unwrap()),
        )
        .with_timeout(Duration::from_secs(10))
        .with_transport_choice(rltp_client::TransportChoice::Tcp);
        let client = rltp_client::Client::connect(&options).await.unwrap();
        let mut streams = Vec::new();
        for _ in 0..8 {
            let (mut send, recv) = client.open_raw().await.unwrap();
            // Half a prefix, then nothing (the stream stays open).
            send.write_all(&[0, 0, 0, 40]).await.unwrap();
            streams.push((send, recv));
        }
        let mut codes = Vec::new();
        for (_send, mut recv) in streams {
            let prefix = recv.prefix().await.unwrap().unwrap();
            let header = recv.header_bytes(prefix).await.unwrap().to_vec();
            let error = rltp_wire::response::split_error(&header)
                .unwrap()
                .unwrap_err();
            codes.push(error.code.as_str());
        }
        codes
    });
    assert_eq!(answers, ["read-timeout"; 8]);
    drop(idle);

    for transport in ["quic", "tcp"] {
        let doc = document(
            dir,
            &format!("{transport}.json"),
            &format!("{{\"t\":\"{transport}\"}}"),
        );
        let send = cli_to(
            dir,
            &carrier,
            &[
                "send",
                "--transport",
                transport,
                "--to",
                &rkid,
                doc.to_str().unwrap(),
            ],
        )
        .expect(0);
        assert_eq!(send.lines("verdict"), ["verdict admitted"], "{send:?}");
    }
}
