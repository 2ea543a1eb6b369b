//! Transport rules of `PROTOCOL.md` §5 and §7 that need a configured
//! carrier: the idle bound between `submit-stream` items and what counts
//! as a keep-alive.

use super::*;
use rltp_client::net;
use rltp_client::tls::ServerTrust;
use rltp_client::{Client, ConnectOptions};
use rltp_proofs::multikey::Rkid;
use rltp_wire::{self as wire, Request};

/// The next answer frame on `recv` (bounded); `None` at the end.
async fn read(recv: &mut quinn::RecvStream) -> Option<(rltp_proofs::json::Object, Vec<u8>)> {
    tokio::time::timeout(Duration::from_secs(10), net::read_frame(recv, 0))
        .await
        .expect("the carrier answers within the bound")
        .unwrap()
}

fn options(carrier: &Carrier) -> ConnectOptions {
    rltp_client::tls::install_crypto_provider();
    ConnectOptions::new(
        carrier.addr.clone(),
        ServerTrust::Pin(carrier.pin.parse().unwrap()),
    )
    .with_timeout(Duration::from_secs(10))
    .with_transport_choice(rltp_client::TransportChoice::Quic)
}

/// An idle `submit-stream` does not hold its stream slot: once no item
/// has arrived for `stream-read-timeout-ms` after the last one, the
/// carrier answers `read-timeout` after the pending answers and ends the
/// stream (measured before this rule: one kept-alive connection held all
/// its slots for over 65 s).
#[tokio::test]
async fn an_idle_submit_stream_gives_its_slot_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = document(
        dir.path(),
        "carrier.toml",
        "[limits]\nstream-read-timeout-ms = 300\n",
    );
    let carrier = Carrier::start(&dir.path().join("data"), Some(&config));
    let client = Client::connect(&options(&carrier)).await.unwrap();
    let (mut send, mut recv) = client.connection().unwrap().open_bi().await.unwrap();
    let rkid = Rkid::from_bytes([5; 32]);
    let mut bytes = wire::encode_frame(&Request::SubmitStream.to_header(), b"");
    bytes.extend(wire::encode_frame(
        &wire::stream_item_header(&rkid, 5),
        b"hello",
    ));
    send.write_all(&bytes).await.unwrap();
    // The send side stays open and idle from here on.
    let (first, _) = read(&mut recv).await.unwrap();
    assert_eq!(
        first.get("verdict").and_then(|v| v.as_str()),
        Some("refused(no-such-queue)")
    );
    let (second, _) = read(&mut recv).await.unwrap();
    assert_eq!(
        second.get("error").and_then(|v| v.as_str()),
        Some("read-timeout")
    );
    assert_eq!(
        second.get("detail").and_then(|v| v.as_str()),
        Some("the next item did not arrive within the read deadline")
    );
    assert!(read(&mut recv).await.is_none(), "the stream ended");
    client.close().await;
}

/// The carrier closes a connection on which nothing arrived for
/// `idle-timeout-ms` (QUIC's idle timeout, the minimum of both ends'
/// `max_idle_timeout`); a client's QUIC PING — any ack-eliciting packet —
/// every so often keeps it open. A client that sends none is dropped
/// silently.
#[tokio::test]
async fn a_ping_keeps_an_idle_connection_and_none_loses_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = document(
        dir.path(),
        "carrier.toml",
        "[limits]\nidle-timeout-ms = 500\n",
    );
    let carrier = Carrier::start(&dir.path().join("data"), Some(&config));
    let pinging =
        Client::connect(&options(&carrier).with_keep_alive(Some(Duration::from_millis(100))))
            .await
            .unwrap();
    let silent = Client::connect(&options(&carrier).with_keep_alive(None))
        .await
        .unwrap();
    // The silent connection times out on its own (no fixed wait here: the
    // test waits for the transport's own event, bounded).
    let reason = tokio::time::timeout(
        Duration::from_secs(10),
        silent.connection().unwrap().closed(),
    )
    .await
    .expect("an idle connection without pings is closed");
    assert!(
        matches!(reason, quinn::ConnectionError::TimedOut),
        "{reason}"
    );
    // The pinging one, idle for just as long, still serves.
    assert_eq!(
        pinging.declaration().await.unwrap().declaration.revision(),
        1
    );
    pinging.close().await;
}

/// `[transport]` and [`ConnectOptions::transport`] reach quinn on each
/// end, independently: a carrier with an ACK frequency threshold asks its
/// client for fewer ACKs (the client receives ACK_FREQUENCY frames), a
/// client with one asks the carrier (it sends them), and the client's
/// MTU starts where it was told. A client left at the defaults (ACK
/// frequency off, `rltp_client::defaults::transport`) sends none.
#[tokio::test]
async fn transport_settings_reach_both_ends() {
    let dir = tempfile::tempdir().unwrap();
    let config = document(
        dir.path(),
        "carrier.toml",
        "[transport]\nack-eliciting-threshold = 8\nmtu-upper-bound = 65527\n",
    );
    let carrier = Carrier::start(&dir.path().join("data"), Some(&config));
    let tuned = rltp_client::transport::Tuning {
        ack_eliciting_threshold: 8,
        initial_mtu: 1_400,
        mtu_upper_bound: 65_527,
        ..Default::default()
    };
    for (tuning, sends) in [(tuned, true), (Default::default(), false)] {
        let client = Client::connect(&options(&carrier).with_transport(tuning))
            .await
            .unwrap();
        for _ in 0..3 {
            assert_eq!(
                client.declaration().await.unwrap().declaration.revision(),
                1
            );
        }
        let stats = client.connection().unwrap().stats();
        assert!(
            stats.frame_rx.ack_frequency >= 1,
            "the carrier asks for fewer ACKs: {:?}",
            stats.frame_rx
        );
        assert_eq!(
            stats.frame_tx.ack_frequency >= 1,
            sends,
            "{tuning:?}: {:?}",
            stats.frame_tx
        );
        assert!(
            stats.path.current_mtu >= tuning.initial_mtu,
            "{:?}",
            stats.path
        );
        client.close().await;
    }
}

/// The QUIC stateless-reset key is kept in the data dir
/// (`quic-reset.key`, `PROTOCOL.md` §5): a carrier restarted after a
/// SIGKILL answers the next packet of a connection to its previous life
/// with a stateless reset, so an always-on watch learns of the crash at
/// its next keep-alive (≤ 5 s) and is pushed again within seconds, not
/// after its 15 s idle timeout.
#[test]
fn a_crashed_carrier_resets_old_connections_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let spec = Spec::fixed(&dir.join("data"), "");
    let carrier = Carrier::start_with(&spec);
    let key_file = dir.join("data").join("quic-reset.key");
    let reset_key = std::fs::read(&key_file).unwrap();
    assert_eq!(reset_key.len(), 32);
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let watch = Running::start(
        dir,
        &carrier,
        &[
            "collect",
            "--transport",
            "quic",
            "--key",
            key.to_str().unwrap(),
            "--out",
            "inbox",
            "--watch",
            "--conclude",
        ],
    );
    assert!(watch.next("watching").starts_with("watching refresh-at "));
    carrier.crash();
    let restarted = Instant::now();
    let carrier = Carrier::start_with(&spec);
    assert_eq!(std::fs::read(&key_file).unwrap(), reset_key, "the same key");
    let text = r#"{"after":"sigkill"}"#;
    let doc = document(dir, "after.json", text);
    cli_to(
        dir,
        &carrier,
        &["send", "--to", &rkid, doc.to_str().unwrap()],
    )
    .expect(0);
    let pushed = watch.next("deposit ");
    let took = restarted.elapsed();
    assert!(
        pushed.contains(&format!(" digest {} written ", digest_of(text))),
        "{pushed}"
    );
    assert!(
        took < Duration::from_secs(9),
        "pushed {took:?} after the restart: the old connection was not reset"
    );
    assert_eq!(watch.interrupt(), Some(0));
}
