//! The wire profile over real loopback QUIC (`PROTOCOL.md` §5–§9): every
//! operation and frame type round-trips through the server and the client
//! library; malformed and oversize frames get closed errors while the
//! connection survives; pinning decides the handshake; a CA-issued
//! certificate verifies; the declaration is revised when the constants
//! change; shutdown drains.

// A test reads top to bottom: long test functions are legitimate here (issue 22 bounds production code).
#![allow(clippy::too_many_lines)]
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use rltp_client::tls::{ServerTrust, SpkiFingerprint};
use rltp_client::{Client, ConnectOptions, RecipientKeys, RegisterOutcome, WatchEvent};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_server::config::Config;
use rltp_server::service::Server;
use rltp_storage::DepositId;
use rltp_storage::mem::MemStore;
use rltp_wire::response::{ErrorCode, split_error};
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use rltp_wire::{self as wire, Request};
use std::sync::Arc;
use std::time::Duration;

fn config(dir: &std::path::Path) -> Config {
    let mut config = Config::defaults().unwrap();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = dir.to_owned();
    config
}

async fn mem_server(config: &Config) -> Server<MemStore> {
    Server::start_with_store(config, Arc::new(MemStore::new()))
        .await
        .unwrap()
}

async fn connect<S: rltp_storage::Store>(server: &Server<S>) -> Client {
    let options = ConnectOptions::new(
        server.local_addr().to_string(),
        ServerTrust::Pin(server.fingerprint()),
    )
    .with_timeout(Duration::from_secs(10))
    // The raw tests reach quinn's connection: QUIC only.
    .with_transport_choice(rltp_client::TransportChoice::Quic);
    Client::connect(&options).await.unwrap()
}

/// The fixture most tests start from: a temporary data dir, the default
/// configuration on port 0, an in-process carrier over the in-memory
/// store, and a client pinned to it. Fields are public so a test takes
/// what it needs (`server` by value to shut it down).
struct Fixture {
    dir: tempfile::TempDir,
    config: Config,
    server: Server<MemStore>,
    client: Client,
}

impl Fixture {
    /// The default fixture.
    async fn mem() -> Fixture {
        Fixture::mem_with(|_| {}).await
    }

    /// The fixture with `adjust` applied to the configuration first.
    async fn mem_with(adjust: impl FnOnce(&mut Config)) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        adjust(&mut config);
        let server = mem_server(&config).await;
        let client = connect(&server).await;
        Fixture {
            dir,
            config,
            server,
            client,
        }
    }
}

fn keys(config: &Config, rkid_secret: [u8; 32], generation: u64) -> RecipientKeys {
    let principal = SigningKey::generate(&mut rand::rng());
    RecipientKeys::new(config.carrier.clone(), principal, rkid_secret, generation)
}

fn envelope(rkid: &Rkid, text: &str) -> Vec<u8> {
    rltp_proofs::seal::seal(text.as_bytes(), rkid, &mut rand::rng())
        .unwrap()
        .to_bytes()
}

/// Writes raw bytes on a fresh stream, finishes it if asked, and reads the
/// first answer frame's header as JCS text.
async fn raw(client: &Client, bytes: &[u8], finish: bool) -> String {
    let (mut send, mut recv) = client.connection().unwrap().open_bi().await.unwrap();
    send.write_all(bytes).await.unwrap();
    if finish {
        send.finish().unwrap();
    }
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        let mut prefix = [0u8; 8];
        recv.read_exact(&mut prefix).await.unwrap();
        let (h, _) = wire::parse_prefix(prefix, wire::MAX_BODY_BYTES).unwrap();
        let mut header = vec![0u8; h];
        recv.read_exact(&mut header).await.unwrap();
        header
    })
    .await
    .expect("the server answers without waiting for the rest of the frame");
    String::from_utf8(answer).unwrap()
}

fn error_code(answer: &str) -> ErrorCode {
    split_error(answer.as_bytes()).unwrap().unwrap_err().code
}

#[tokio::test]
async fn every_operation_round_trips_over_loopback_quic() {
    let Fixture {
        dir: _dir,
        config,
        server,
        client,
    } = Fixture::mem().await;

    // declaration: fetched, verified, accepted; issuer = recipient = the declaration key.
    let fetched = client
        .declaration_from(server.declaration_issuer())
        .await
        .unwrap();
    assert_eq!(fetched.bytes, *server.declaration());
    assert_eq!(fetched.declaration.revision(), 1);
    assert_eq!(fetched.declaration.constants(), &config.constants);

    let alice = keys(&config, [11u8; 32], 1);
    let rkid = *alice.rkid();

    // submit before any binding: refused(no-such-queue), no deposit id.
    let first = envelope(&rkid, "{\"n\":0}");
    let answer = client.submit(&rkid, &first).await.unwrap();
    assert_eq!(answer.verdict, SubmitVerdict::NoSuchQueue);
    assert_eq!(answer.deposit, None);

    // challenge + register (sealed address challenge opened and checked).
    assert_eq!(
        client.register(&alice, Purpose::Register).await.unwrap(),
        RegisterOutcome::Verdict(Verdict::Registered)
    );
    assert_eq!(
        client.register(&alice, Purpose::Register).await.unwrap(),
        RegisterOutcome::Verdict(Verdict::RegisteredIdempotent)
    );
    // another principal at the same generation: stale, carrying the held g.
    let mallory = keys(&config, [11u8; 32], 1);
    let stale = client.register(&mallory, Purpose::Rebind).await.unwrap();
    assert_eq!(
        stale,
        RegisterOutcome::Verdict(Verdict::StaleGeneration { held: 1 })
    );
    assert_eq!(stale.winning_generation(), Some(2));

    // submit: admitted with the deposit id, then duplicate.
    let answer = client.submit(&rkid, &first).await.unwrap();
    assert_eq!(answer.verdict, SubmitVerdict::Admitted);
    assert_eq!(answer.deposit, Some(DepositId::of(&first)));
    assert_eq!(
        client.submit(&rkid, &first).await.unwrap().verdict,
        SubmitVerdict::Duplicate
    );
    assert_eq!(
        client
            .submit(&rkid, b"{\"not\":\"an envelope\"}")
            .await
            .unwrap()
            .verdict,
        SubmitVerdict::Bounds
    );

    // status
    assert_eq!(
        client.status(&rkid, &DepositId::of(&first)).await.unwrap(),
        DepositStatus::Accepted
    );
    assert_eq!(
        client
            .status(&rkid, &DepositId::of(b"never"))
            .await
            .unwrap(),
        DepositStatus::Unknown
    );

    // submit-stream: verdicts in order.
    let more: Vec<(Rkid, Vec<u8>)> = (1..=3)
        .map(|n| (rkid, envelope(&rkid, &format!("{{\"n\":{n}}}"))))
        .collect();
    let mut items = more.clone();
    items.push((
        Rkid::from_bytes([3u8; 32]),
        envelope(&Rkid::from_bytes([3u8; 32]), "{}"),
    ));
    let answers = client.submit_many(&items).await.unwrap();
    let verdicts: Vec<_> = answers.iter().map(|a| a.verdict).collect();
    assert_eq!(
        verdicts,
        [
            SubmitVerdict::Admitted,
            SubmitVerdict::Admitted,
            SubmitVerdict::Admitted,
            SubmitVerdict::NoSuchQueue
        ]
    );
    for (answer, (_, bytes)) in answers.iter().zip(&more) {
        assert_eq!(answer.deposit, Some(DepositId::of(bytes)));
    }

    // collect: admission order, paging.
    let page = client.collect(&alice, None, 2).await.unwrap();
    assert_eq!(page.verdict, Verdict::Served);
    assert!(page.more);
    assert_eq!(page.deposits.len(), 2);
    assert_eq!(page.deposits[0].envelope, first);
    assert_eq!(
        alice.open(&page.deposits[0].envelope).unwrap(),
        b"{\"n\":0}"
    );
    let rest = client
        .collect(&alice, Some(page.deposits[1].seq), 10)
        .await
        .unwrap();
    assert_eq!(
        (rest.verdict, rest.more, rest.deposits.len()),
        (Verdict::Served, false, 2)
    );
    assert_eq!(rest.deposits[1].envelope, more[2].1);

    // another principal's collect: refused(no-such-queue).
    let other = client.collect(&mallory, None, 10).await.unwrap();
    assert_eq!(
        (other.verdict, other.deposits.len()),
        (Verdict::NoSuchQueue, 0)
    );

    // conclude two; they are gone, their status stays accepted.
    let ids = [page.deposits[0].id, page.deposits[1].id];
    assert_eq!(
        client.conclude(&alice, &ids).await.unwrap(),
        (Verdict::Served, Some(2))
    );
    assert_eq!(
        client.conclude(&alice, &ids).await.unwrap(),
        (Verdict::Served, Some(0))
    );
    assert_eq!(
        client.status(&rkid, &ids[0]).await.unwrap(),
        DepositStatus::Accepted
    );
    let left = client.collect(&alice, None, 10).await.unwrap();
    assert_eq!(left.deposits.len(), 2);

    // watch: the page, its end, then a pushed deposit.
    let mut watch = client.watch(&alice, None).await.unwrap().unwrap();
    for expected in &left.deposits {
        match watch.next().await.unwrap() {
            Some(WatchEvent::Deposit(d)) => assert_eq!(&d.envelope, &expected.envelope),
            other => panic!("expected a deposit, got {other:?}"),
        }
    }
    assert_eq!(
        watch.next().await.unwrap(),
        Some(WatchEvent::PageEnd { more: false })
    );
    let pushed = envelope(&rkid, "{\"n\":\"pushed\"}");
    assert_eq!(
        client.submit(&rkid, &pushed).await.unwrap().verdict,
        SubmitVerdict::Admitted
    );
    let event = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .unwrap();
    match event {
        Some(WatchEvent::Deposit(d)) => assert_eq!(d.envelope, pushed),
        other => panic!("expected the pushed deposit, got {other:?}"),
    }

    // one authorization session, one principal: a second proof ends it.
    let proof = client
        .session_proof(&mallory, Purpose::Collect)
        .await
        .unwrap()
        .unwrap();
    watch.present_second_proof(&proof).await.unwrap();
    match watch.next().await {
        Err(rltp_client::ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::SecondProof)
        }
        other => panic!("expected second-proof, got {other:?}"),
    }

    // the connection still serves.
    assert_eq!(
        client.declaration().await.unwrap().declaration.revision(),
        1
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_frames_get_closed_errors_and_the_connection_survives() {
    let Fixture {
        dir: _dir,
        config: _,
        server,
        client,
    } = Fixture::mem().await;

    let frame = |header: &[u8], body: &[u8]| {
        let mut out = Vec::new();
        out.extend_from_slice(&(header.len() as u32).to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(header);
        out.extend_from_slice(body);
        out
    };
    let cases: [(Vec<u8>, ErrorCode); 6] = [
        (frame(b"{\"op\":\"nope\"}", b""), ErrorCode::UnknownOperation),
        (frame(b"[1]", b""), ErrorCode::MalformedFrame),
        (frame(b"{\"op\":\"declaration\",\"op\":\"declaration\"}", b""), ErrorCode::MalformedFrame),
        (frame(b"{\"op\":\"declaration\"}", b"x"), ErrorCode::FrameTooLarge),
        (frame(b"{\"op\":\"submit\",\"rkid\":\"z6LSqY3EWDm5RNaC14mGJSHYcQNXGSNymfTom7wSaGzKdWWU\",\"size\":3}", b"{}"), ErrorCode::MalformedFrame),
        (frame(b"{\"op\":\"declaration\"}", b"")[..12].to_vec(), ErrorCode::TruncatedFrame),
    ];
    for (bytes, code) in cases {
        let answer = raw(&client, &bytes, true).await;
        assert_eq!(error_code(&answer), code, "{answer}");
        // The same connection keeps serving.
        assert_eq!(
            client.declaration().await.unwrap().declaration.revision(),
            1
        );
    }
    // A malformed item ends a submit-stream after the verdicts before it.
    let rkid = Rkid::from_bytes([4u8; 32]);
    let mut bytes = wire::encode_frame(&Request::SubmitStream.to_header(), b"");
    bytes.extend(wire::encode_frame(
        &wire::stream_item_header(&rkid, 2),
        b"{}",
    ));
    bytes.extend(frame(b"nope!", b""));
    bytes.extend(wire::encode_frame(
        &wire::stream_item_header(&rkid, 2),
        b"{}",
    ));
    let (mut send, mut recv) = client.connection().unwrap().open_bi().await.unwrap();
    send.write_all(&bytes).await.unwrap();
    send.finish().unwrap();
    let answers = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 16))
        .await
        .unwrap()
        .unwrap();
    let mut headers = Vec::new();
    let mut rest = answers.as_slice();
    while !rest.is_empty() {
        let (h, b) =
            wire::parse_prefix(rest[..8].try_into().unwrap(), wire::MAX_BODY_BYTES).unwrap();
        headers.push(String::from_utf8(rest[8..8 + h].to_vec()).unwrap());
        rest = &rest[8 + h + b..];
    }
    assert_eq!(headers.len(), 2, "{headers:?}");
    assert_eq!(
        headers[0],
        "{\"retriable\":false,\"verdict\":\"refused(no-such-queue)\"}"
    );
    assert_eq!(error_code(&headers[1]), ErrorCode::MalformedFrame);
    assert_eq!(
        client.declaration().await.unwrap().declaration.revision(),
        1
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn oversize_prefixes_are_refused_before_the_body_is_read() {
    let Fixture {
        dir: _dir,
        config: _,
        server,
        client,
    } = Fixture::mem().await;

    // A header prefix over 16 384 bytes: answered from the prefix alone;
    // the stream stays open on our side and not one header byte is sent.
    let mut prefix = Vec::new();
    prefix.extend_from_slice(&16_385u32.to_be_bytes());
    prefix.extend_from_slice(&0u32.to_be_bytes());
    let answer = raw(&client, &prefix, false).await;
    assert_eq!(
        answer,
        "{\"detail\":\"frame too large: header of 16385 bytes exceeds 16384\",\"error\":\"frame-too-large\"}"
    );

    // A body over the whole-input bound: refused from the prefix.
    let mut prefix = Vec::new();
    prefix.extend_from_slice(&20u32.to_be_bytes());
    prefix.extend_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        error_code(&raw(&client, &prefix, false).await),
        ErrorCode::FrameTooLarge
    );

    // A submit whose body exceeds the envelope bound: decided after the
    // header, before any body byte (none is ever sent) — s1 first, so an
    // unknown queue is refused(no-such-queue); a held one gets
    // refused(bounds) (e2e wire::oversize_or_non_canonical_envelopes_are_refused_bounds).
    let header = wire::encode_frame(
        &Request::Submit {
            rkid: Rkid::from_bytes([4u8; 32]),
            size: 87_558,
        }
        .to_header(),
        b"",
    );
    let mut bytes = header[8..].to_vec();
    let mut frame = Vec::new();
    frame.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    frame.extend_from_slice(&87_558u32.to_be_bytes());
    frame.append(&mut bytes);
    let answer = raw(&client, &frame, false).await;
    assert_eq!(
        answer,
        "{\"retriable\":false,\"verdict\":\"refused(no-such-queue)\"}"
    );
    // A proof body over 4 096 bytes likewise.
    let header = wire::encode_frame(&Request::Register.to_header(), b"");
    let mut frame = Vec::new();
    frame.extend_from_slice(&((header.len() - 8) as u32).to_be_bytes());
    frame.extend_from_slice(&4_097u32.to_be_bytes());
    frame.extend_from_slice(&header[8..]);
    assert_eq!(
        error_code(&raw(&client, &frame, false).await),
        ErrorCode::FrameTooLarge
    );

    assert_eq!(
        client.declaration().await.unwrap().declaration.revision(),
        1
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_stalled_request_meets_the_read_deadline() {
    let Fixture {
        dir: _dir,
        config: _,
        server,
        client,
    } = Fixture::mem_with(|config| config.limits.stream_read_timeout_ms = 300).await;
    let answer = raw(&client, &[0, 0, 0], false).await;
    assert_eq!(error_code(&answer), ErrorCode::ReadTimeout);
    assert_eq!(
        client.declaration().await.unwrap().declaration.revision(),
        1
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn pinning_decides_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let server = mem_server(&config).await;
    let addr = server.local_addr().to_string();
    let mut wrong = server.fingerprint();
    wrong.0[0] ^= 1;
    let options = ConnectOptions::new(addr.clone(), ServerTrust::Pin(wrong))
        .with_timeout(Duration::from_secs(5));
    match Client::connect(&options).await {
        Err(e @ rltp_client::ClientError::Handshake(_)) => {
            assert!(!e.is_retriable() && !e.is_transport(), "never retried");
            assert!(e.to_string().contains("is not the pinned"), "{e}");
            let rltp_client::ClientError::Handshake(h) = &e else {
                unreachable!()
            };
            assert!(h.is_pin_mismatch(), "{e}");
        }
        other => panic!("a wrong pin must fail the handshake, got {other:?}"),
    }
    // The printed form of the right pin works.
    let pin: SpkiFingerprint = server.fingerprint().to_string().parse().unwrap();
    let options = ConnectOptions::new(addr, ServerTrust::Pin(pin));
    let client = Client::connect(&options).await.unwrap();
    client.declaration().await.unwrap();
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_ca_issued_certificate_verifies_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca_file = write("ca.pem", ca_cert.pem());
    let mut config = config(&dir.path().join("data"));
    config.tls.cert = Some(write("cert.pem", leaf.pem()));
    config.tls.key = Some(write("key.pem", leaf_key.serialize_pem()));
    let server = mem_server(&config).await;
    let addr = server.local_addr().to_string();

    let options = ConnectOptions::new(addr.clone(), ServerTrust::CaFile(ca_file.clone()))
        .with_server_name("localhost");
    let client = Client::connect(&options).await.unwrap();
    client.declaration().await.unwrap();
    client.close().await;
    // The certificate names localhost, not another host.
    let options = ConnectOptions::new(addr, ServerTrust::CaFile(ca_file))
        .with_server_name("carrier.example")
        .with_timeout(Duration::from_secs(5));
    assert!(Client::connect(&options).await.is_err());
    server.shutdown().await;
}

#[tokio::test]
async fn the_declaration_is_revised_when_the_constants_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    let first = Server::start(&config).await.unwrap();
    let fingerprint = first.fingerprint();
    let bytes = first.declaration();
    first.shutdown().await;

    // Same constants: the stored revision is served unchanged, same key and certificate.
    let again = Server::start(&config).await.unwrap();
    assert_eq!(again.declaration(), bytes);
    assert_eq!(again.fingerprint(), fingerprint);
    let issuer = *again.declaration_issuer();
    again.shutdown().await;

    // Changed constants: revision 2, applied to the engine.
    config = {
        let text = "[constants]\nstatus-horizon = \"PT10S\"\n";
        let mut changed = Config::from_toml(text).unwrap();
        changed.listen = config.listen;
        changed.data_dir = config.data_dir.clone();
        changed
    };
    let revised = Server::start(&config).await.unwrap();
    assert_eq!(revised.engine().constants().status_horizon_ms, 10_000);
    let client = connect(&revised).await;
    let fetched = client.declaration_from(&issuer).await.unwrap();
    assert_eq!(fetched.declaration.revision(), 2);
    assert_eq!(
        fetched
            .declaration
            .constants()
            .get("status-horizon")
            .unwrap()
            .lexeme(),
        "PT10S"
    );
    client.close().await;
    revised.shutdown().await;
}

#[tokio::test]
async fn the_sender_retries_retriable_refusals_and_reports_them() {
    use rltp_client::{AwaitingReason, RetryPolicy, SendEvent, Sender, SenderStatus};
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    // One submission per second per queue: the second is refused retriably.
    config.limits.meters.queue = rltp_server::config::RateConfig {
        per_second: 1,
        burst: 1,
    };
    let server = mem_server(&config).await;
    let client = connect(&server).await;
    let alice = keys(&config, [13u8; 32], 1);
    let rkid = *alice.rkid();
    assert_eq!(
        client
            .register(&alice, Purpose::Register)
            .await
            .unwrap()
            .verdict(),
        Verdict::Registered
    );
    let first = envelope(&rkid, "{\"n\":1}");
    assert_eq!(
        client.submit(&rkid, &first).await.unwrap().verdict,
        SubmitVerdict::Admitted
    );

    let second = envelope(&rkid, "{\"n\":2}");
    let options = ConnectOptions::new(
        server.local_addr().to_string(),
        ServerTrust::Pin(server.fingerprint()),
    );
    let mut sender = Sender::with_client(options, client.clone());
    let policy = RetryPolicy {
        give_up_horizon: Duration::from_secs(30),
        status_horizon: Duration::from_secs(5),
    };
    let mut events = Vec::new();
    let status = sender
        .send(&rkid, &second, policy, |e| events.push(e))
        .await
        .unwrap();
    assert_eq!(
        status,
        SenderStatus::Accepted {
            deposit: DepositId::of(&second)
        }
    );
    assert_eq!(events[0], SendEvent::Attempt { number: 1 });
    // The link says which binding its connection is on (PROTOCOL.md §5b).
    assert_eq!(
        events[1],
        SendEvent::Connected {
            server: server.local_addr().to_string(),
            binding: rltp_client::Binding::Quic
        }
    );
    assert_eq!(
        events[2],
        SendEvent::Verdict(SubmitVerdict::AdmissionResource)
    );
    assert_eq!(
        events[3],
        SendEvent::Report(SenderStatus::AwaitingTransport(
            AwaitingReason::CarrierRefusedRetriable
        ))
    );
    assert_eq!(events.last(), Some(&SendEvent::Report(status)));
    assert!(events.contains(&SendEvent::Verdict(SubmitVerdict::Admitted)));
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_drains_and_ends_watch_sessions() {
    let Fixture {
        dir: _dir,
        config,
        server,
        client,
    } = Fixture::mem().await;
    let alice = keys(&config, [12u8; 32], 1);
    assert_eq!(
        client
            .register(&alice, Purpose::Register)
            .await
            .unwrap()
            .verdict(),
        Verdict::Registered
    );
    let mut watch = client.watch(&alice, None).await.unwrap().unwrap();
    assert_eq!(
        watch.next().await.unwrap(),
        Some(WatchEvent::PageEnd { more: false })
    );
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .unwrap();
    // The session ended cleanly (or with the connection close).
    assert!(!matches!(watch.next().await, Ok(Some(_))));
}

#[tokio::test]
async fn shutdown_answers_only_durable_admissions_and_loses_none() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let server = Server::start(&config).await.unwrap();
    let client = connect(&server).await;
    let alice = keys(&config, [14u8; 32], 1);
    let rkid = *alice.rkid();
    assert_eq!(
        client
            .register(&alice, Purpose::Register)
            .await
            .unwrap()
            .verdict(),
        Verdict::Registered
    );

    // A busy pipelined sender, interrupted by a shutdown mid-stream.
    let (mut writer, mut reader) = client.submitter().await.unwrap().split();
    let envelopes: Vec<Vec<u8>> = (0..3000)
        .map(|n| envelope(&rkid, &format!("{{\"n\":{n}}}")))
        .collect();
    let write = {
        let envelopes = envelopes.clone();
        tokio::spawn(async move {
            for e in &envelopes {
                if writer.send(&rkid, e).await.is_err() {
                    break;
                }
            }
            writer.finish();
        })
    };
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let read = tokio::spawn(async move {
        let mut admitted = Vec::new();
        let mut seen_tx = Some(seen_tx);
        while let Ok(Some(answer)) = reader.recv().await {
            assert_eq!(answer.verdict, SubmitVerdict::Admitted);
            admitted.push(answer.deposit.unwrap());
            if admitted.len() == 50 {
                let _ = seen_tx.take().map(|tx| tx.send(()));
            }
        }
        admitted
    });
    seen_rx.await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), server.shutdown())
        .await
        .unwrap();
    let admitted = read.await.unwrap();
    write.await.unwrap();
    assert!(
        admitted.len() >= 50 && admitted.len() < envelopes.len(),
        "{}",
        admitted.len()
    );

    // Every admission answered before the shutdown is held after a restart.
    let server = Server::start(&config).await.unwrap();
    let client = connect(&server).await;
    let mut held = Vec::new();
    let mut after = None;
    loop {
        let page = client.collect(&alice, after, 1024).await.unwrap();
        held.extend(page.deposits.iter().map(|d| d.id));
        after = page.deposits.last().map(|d| d.seq);
        if !page.more {
            break;
        }
    }
    for id in &admitted {
        assert!(
            held.contains(id),
            "admitted deposit {} lost",
            id.to_multibase()
        );
    }
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn run_returns_ok_after_its_shutdown_future() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(rltp_server::service::run(config, async {
        let _ = rx.await;
    }));
    tokio::time::sleep(Duration::from_millis(200)).await;
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
