//! Raw frames and hand-built proofs against a real carrier process, over
//! the client library: replayed and expired proofs, envelope bounds,
//! malformed frames, and one principal per authorization session.

use super::*;
use ed25519_dalek::SigningKey;
use rltp_client::tls::ServerTrust;
use rltp_client::{Client, ClientError, ConnectOptions, RecipientKeys, WatchEvent};
use rltp_proofs::encoding::b64url_encode;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::response::{ChallengeAnswer, ErrorCode, split_error};
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use rltp_wire::{self as wire, Request};

async fn connect(carrier: &Carrier) -> Client {
    rltp_client::tls::install_crypto_provider();
    let options = ConnectOptions::new(
        carrier.addr.clone(),
        ServerTrust::Pin(carrier.pin.parse().unwrap()),
    )
    .with_timeout(Duration::from_secs(10))
    .with_transport_choice(rltp_client::TransportChoice::Quic);
    Client::connect(&options).await.unwrap()
}

/// A principal (kept, to sign by hand) and recipient keys for `secret`.
fn principal(secret: [u8; 32]) -> (SigningKey, RecipientKeys) {
    let key = SigningKey::generate(&mut rand::rng());
    let carrier = CarrierId::from_bytes(CARRIER.as_bytes()).unwrap();
    (key.clone(), RecipientKeys::new(carrier, key, secret, 1))
}

/// A signed registration proof over a fresh challenge; also returns the
/// challenge's `expiresAt` (ms since the epoch).
async fn registration_proof(
    client: &Client,
    key: &SigningKey,
    secret: &[u8; 32],
    rkid: &Rkid,
) -> (Vec<u8>, u64) {
    let carrier = CarrierId::from_bytes(CARRIER.as_bytes()).unwrap();
    let ChallengeAnswer::Issued {
        principal_challenge,
        address_challenge: Some(sealed),
        expires_at,
    } = client.challenge(rkid, Purpose::Register).await.unwrap()
    else {
        panic!("no challenge issued");
    };
    let address =
        open_address_challenge(&sealed, secret, &carrier, rkid, Purpose::Register).unwrap();
    let proof = UnsignedProof::registration(
        Purpose::Register,
        carrier,
        *rkid,
        1,
        principal_challenge,
        address,
    )
    .unwrap()
    .sign(key)
    .unwrap();
    (proof, expires_at)
}

/// The `verifications` counter of each `register` log line, in order.
fn verifications(carrier: &Carrier, count: usize) -> Vec<(String, u64)> {
    carrier
        .log_events("register", count)
        .iter()
        .map(|f| {
            (
                f["verdict"].as_str().unwrap().to_owned(),
                f["verifications"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `challengeConsumption` (carrier-proof.json), against the real process:
/// the first response consumes the challenge and is verified (a junk
/// signature: `refused(possession-failed)`, 1 verification); the validly
/// signed proof over the same, consumed challenge and its byte-identical
/// replay are refused with no further verification; a fresh challenge buys
/// one verification (`registered`), whose replay again costs none. The
/// verification counter is read from the carrier's `register` log lines.
/// A replayed collect proof is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_proof_is_refused_and_costs_no_second_verification() {
    let dir = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(&dir.path().join("data"), None);
    let client = connect(&carrier).await;
    let secret = [21u8; 32];
    let (key, keys) = principal(secret);
    let rkid = *keys.rkid();

    let (proof, _) = registration_proof(&client, &key, &secret, &rkid).await;
    let mut junk: serde_json::Value = serde_json::from_slice(&proof).unwrap();
    junk["sig"] = rltp_proofs::encoding::multibase_z(&[7u8; 64]).into();
    let junk = serde_json::to_vec(&junk).unwrap();
    let mut verdicts = vec![
        client.register_proof(&junk).await.unwrap(),
        client.register_proof(&proof).await.unwrap(),
        client.register_proof(&proof).await.unwrap(),
    ];
    let (second, _) = registration_proof(&client, &key, &secret, &rkid).await;
    verdicts.push(client.register_proof(&second).await.unwrap());
    verdicts.push(client.register_proof(&second).await.unwrap());
    assert_eq!(
        verdicts,
        [
            Verdict::PossessionFailed,
            Verdict::PossessionFailed,
            Verdict::PossessionFailed,
            Verdict::Registered,
            Verdict::PossessionFailed,
        ]
    );
    let seen = verifications(&carrier, 5);
    let so_far: Vec<u64> = seen.iter().map(|(_, n)| *n).collect();
    // verificationsSoFar of the vector's steps 2, 3, 4, 6, then the replay.
    assert_eq!(so_far, [1, 1, 1, 2, 2], "{seen:?}");
    let issued = carrier.log_events("challenge", 2).len() as u64;
    assert!(
        so_far.iter().all(|&n| n <= issued),
        "more verifications than challenges"
    );

    // A collect proof: served once, refused on replay.
    let collect = client
        .session_proof(&keys, Purpose::Collect)
        .await
        .unwrap()
        .unwrap();
    let page = client.collect_proof(&collect, None, 10).await.unwrap();
    assert_eq!(page.verdict, Verdict::Served);
    let replay = client.collect_proof(&collect, None, 10).await.unwrap();
    assert_eq!(replay.verdict, Verdict::PossessionFailed);
    client.close().await;
}

/// A proof built on a challenge whose `challenge-lifetime` (PT5S, the
/// §11 minimum) has passed is `refused(possession-failed)` without a
/// signature verification. The one real wait of the suite (~5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proof_on_an_expired_challenge_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = document(
        dir.path(),
        "carrier.toml",
        "[constants]\nchallenge-lifetime = \"PT5S\"\n",
    );
    let carrier = Carrier::start(&dir.path().join("data"), Some(&config));
    let client = connect(&carrier).await;
    let secret = [22u8; 32];
    let (key, keys) = principal(secret);
    let rkid = *keys.rkid();

    // A fresh one is accepted (so the expired one is refused for its age).
    let (fresh, _) = registration_proof(&client, &key, &secret, &rkid).await;
    let (stale, expires_at) = registration_proof(&client, &key, &secret, &rkid).await;
    assert_eq!(
        client.register_proof(&fresh).await.unwrap(),
        Verdict::Registered
    );
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    let wait = expires_at.saturating_sub(now_ms()) + 50;
    assert!(wait <= 5_100, "lifetime is PT5S, wait {wait} ms");
    tokio::time::sleep(Duration::from_millis(wait)).await;
    assert!(now_ms() >= expires_at);
    assert_eq!(
        client.register_proof(&stale).await.unwrap(),
        Verdict::PossessionFailed
    );
    let seen = verifications(&carrier, 2);
    assert_eq!(seen[1].0, "refused(possession-failed)");
    assert_eq!(
        seen[1].1, seen[0].1,
        "an expired challenge cost a verification"
    );
    client.close().await;
}

/// §5a.5 s2 through the wire: an exactly maximal envelope (65 536-byte
/// plaintext, 87 557 bytes) is admitted; one byte more is refused from the
/// frame prefix (`frame-too-large`, `PROTOCOL.md` §6: the bound of s2 is
/// the frame bound, so no oversize body is ever read); a document too
/// large to seal is `failed(oversize)` at the sender with nothing sent;
/// non-canonical base64url, a foreign `rkid`, a tag-only ciphertext and
/// non-envelopes are `refused(bounds)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_or_non_canonical_envelopes_are_refused_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(&dir.path().join("data"), None);
    let client = connect(&carrier).await;
    let secret = [23u8; 32];
    let (_, keys) = principal(secret);
    let rkid = *keys.rkid();
    assert_eq!(
        client
            .register(&keys, Purpose::Register)
            .await
            .unwrap()
            .verdict(),
        Verdict::Registered
    );

    let maximal = rltp_proofs::seal::seal(&vec![b'7'; 65_536], &rkid, &mut rand::rng())
        .unwrap()
        .to_bytes();
    assert_eq!(maximal.len(), 87_557);
    assert_eq!(
        client.submit(&rkid, &maximal).await.unwrap().verdict,
        SubmitVerdict::Admitted
    );
    // One byte over the bound: refused(bounds), decided from the header
    // (the body is never read), which the sender sees as failed(oversize).
    let mut over = maximal.clone();
    over.insert(1, b' ');
    let answer = client.submit(&rkid, &over).await.unwrap();
    assert_eq!(answer.verdict, SubmitVerdict::Bounds);
    assert_eq!(answer.deposit, None);
    // A body over the frame bound (262 144) is a frame error, never read.
    match client.submit(&rkid, &vec![b'x'; 262_145]).await {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::FrameTooLarge);
            assert_eq!(
                e.detail,
                "frame too large: body of 262145 bytes exceeds 262144"
            );
        }
        other => panic!("expected frame-too-large, got {other:?}"),
    }

    let plaintext = format!("{{\"n\":\"{}\"}}", "x".repeat(300));
    let sealed = rltp_proofs::seal::seal(plaintext.as_bytes(), &rkid, &mut rand::rng()).unwrap();
    let valid = String::from_utf8(sealed.to_bytes()).unwrap();
    let epk = b64url_encode(&sealed.epk);
    let nonce = b64url_encode(&sealed.nonce);
    let ciphertext = b64url_encode(&sealed.ciphertext);
    let padded = format!("{epk}=");
    // 43 characters carry 258 bits for 256: the last character's two low
    // bits must be zero. Set one.
    let last = epk.chars().last().unwrap();
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let index = alphabet.find(last).unwrap();
    let dirty = alphabet.chars().nth(index ^ 1).unwrap();
    let trailing = format!("{}{dirty}", &epk[..epk.len() - 1]);
    let standard = ciphertext.replace('-', "+").replace('_', "/");
    let other = Rkid::from_bytes(
        x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from([24u8; 32])).to_bytes(),
    );
    let cases = [
        ("padded epk", valid.replace(&epk, &padded)),
        ("non-zero trailing bits", valid.replace(&epk, &trailing)),
        ("standard alphabet", valid.replace(&ciphertext, &standard)),
        ("short nonce", valid.replace(&nonce, &nonce[..15])),
        (
            "foreign rkid",
            valid.replace(&rkid.to_multikey(), &other.to_multikey()),
        ),
        (
            "tag-only ciphertext",
            valid.replace(&ciphertext, &b64url_encode(&[0u8; 16])),
        ),
        ("extra member", valid.replacen('{', "{\"x\":\"1\",", 1)),
        (
            "duplicate member",
            valid.replacen('{', &format!("{{\"epk\":\"{epk}\","), 1),
        ),
        ("not json", "not json".to_owned()),
        // The JCS spelling only (PROTOCOL.md §7): the same object spelled
        // otherwise is refused(bounds), so it can never be a second deposit.
        ("whitespace", valid.replacen("\":\"", "\": \"", 1)),
        (
            "members out of order",
            format!(
                "{{\"rkid\":\"{}\",\"epk\":\"{epk}\",\"nonce\":\"{nonce}\",\"ciphertext\":\"{ciphertext}\"}}",
                rkid.to_multikey()
            ),
        ),
    ];
    assert_ne!(standard, ciphertext, "the ciphertext has a - or _ to swap");
    for (name, bytes) in cases {
        assert_ne!(bytes, valid, "{name}: the case changed nothing");
        let answer = client.submit(&rkid, bytes.as_bytes()).await.unwrap();
        assert_eq!(answer.verdict, SubmitVerdict::Bounds, "{name}");
        assert_eq!(answer.deposit, None, "{name}");
    }
    // The valid (JCS) envelope itself is admitted.
    assert_eq!(
        client
            .submit(&rkid, valid.as_bytes())
            .await
            .unwrap()
            .verdict,
        SubmitVerdict::Admitted
    );
    client.close().await;

    // A document whose JCS exceeds 65 536 bytes: failed(oversize), nothing sent.
    let big = document(
        dir.path(),
        "big.json",
        &format!("{{\"x\":\"{}\"}}", "a".repeat(65_530)),
    );
    let before = carrier.log_events("submit", 0).len();
    let run = cli_to(
        dir.path(),
        &carrier,
        &["send", "--to", &rkid.to_multikey(), big.to_str().unwrap()],
    )
    .expect(1);
    assert_eq!(
        run.value("status"),
        "failed(oversize) (document jcs is 65538 bytes, above 65536; nothing was sent)"
    );
    assert_eq!(carrier.log_events("submit", 0).len(), before);
}

/// Malformed frames on a real carrier: each gets its closed error on its
/// own stream and the same connection keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_frame_gets_a_closed_error_and_the_connection_survives() {
    let dir = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(&dir.path().join("data"), None);
    let client = connect(&carrier).await;
    let frame = |header: &[u8], body: &[u8]| {
        let mut out = Vec::new();
        out.extend_from_slice(&(header.len() as u32).to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(header);
        out.extend_from_slice(body);
        out
    };
    let cases: [(&str, Vec<u8>, ErrorCode); 7] = [
        (
            "unknown op",
            frame(b"{\"op\":\"teleport\"}", b""),
            ErrorCode::UnknownOperation,
        ),
        (
            "not an object",
            frame(b"[1]", b""),
            ErrorCode::MalformedFrame,
        ),
        (
            "duplicate key",
            frame(b"{\"op\":\"declaration\",\"op\":\"declaration\"}", b""),
            ErrorCode::MalformedFrame,
        ),
        (
            "unknown member",
            frame(b"{\"op\":\"declaration\",\"x\":1}", b""),
            ErrorCode::MalformedFrame,
        ),
        (
            "body not allowed",
            frame(b"{\"op\":\"declaration\"}", b"x"),
            ErrorCode::FrameTooLarge,
        ),
        (
            "header too large",
            (20_000u32
                .to_be_bytes()
                .iter()
                .chain(&0u32.to_be_bytes())
                .copied()
                .collect()),
            ErrorCode::FrameTooLarge,
        ),
        (
            "truncated",
            frame(b"{\"op\":\"declaration\"}", b"")[..12].to_vec(),
            ErrorCode::TruncatedFrame,
        ),
    ];
    for (name, bytes, code) in cases {
        let (mut send, mut recv) = client.connection().unwrap().open_bi().await.unwrap();
        // The server may stop our side once it has answered: ignore that.
        let _ = send.write_all(&bytes).await;
        let _ = send.finish();
        let answer = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 16))
            .await
            .unwrap()
            .unwrap();
        let (h, b) =
            wire::parse_prefix(answer[..8].try_into().unwrap(), wire::MAX_BODY_BYTES).unwrap();
        assert_eq!(
            answer.len(),
            8 + h + b,
            "{name}: one answer frame, then the end"
        );
        let error = split_error(&answer[8..8 + h]).unwrap().unwrap_err();
        assert_eq!(error.code, code, "{name}: {}", error.detail);
        assert!(!error.detail.is_empty());
        // The connection survives.
        assert_eq!(
            client.declaration().await.unwrap().declaration.revision(),
            1,
            "{name}"
        );
    }
    // A submit whose size disagrees with its body.
    let rkid = Rkid::from_bytes([5u8; 32]);
    let header = Request::Submit { rkid, size: 3 }.to_header();
    let bytes = wire::encode_frame(&header, b"{}");
    let (mut send, mut recv) = client.connection().unwrap().open_bi().await.unwrap();
    send.write_all(&bytes).await.unwrap();
    let _ = send.finish();
    let answer = recv.read_to_end(1 << 16).await.unwrap();
    let (h, _) = wire::parse_prefix(answer[..8].try_into().unwrap(), wire::MAX_BODY_BYTES).unwrap();
    assert_eq!(
        split_error(&answer[8..8 + h]).unwrap().unwrap_err().code,
        ErrorCode::MalformedFrame
    );
    assert_eq!(
        client.declaration().await.unwrap().declaration.revision(),
        1
    );
    client.close().await;
}

/// One authorization session carries exactly one principal (§5a.3): a
/// second principal's proof on Alice's watch session is answered
/// `second-proof` and ends the session; on its own stream the same proof
/// is `refused(no-such-queue)`; Alice's next session is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_principals_cannot_share_one_authorization_session() {
    let dir = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(&dir.path().join("data"), None);
    let client = connect(&carrier).await;
    let secret = [25u8; 32];
    let (_, alice) = principal(secret);
    let (_, bob) = principal(secret);
    let rkid = *alice.rkid();
    assert_eq!(
        client
            .register(&alice, Purpose::Register)
            .await
            .unwrap()
            .verdict(),
        Verdict::Registered
    );
    let envelope = rltp_proofs::seal::seal(b"{\"n\":1}", &rkid, &mut rand::rng())
        .unwrap()
        .to_bytes();
    assert_eq!(
        client.submit(&rkid, &envelope).await.unwrap().verdict,
        SubmitVerdict::Admitted
    );

    let mut session = client.watch(&alice, None).await.unwrap().unwrap();
    match session.next().await.unwrap() {
        Some(WatchEvent::Deposit(d)) => assert_eq!(d.envelope, envelope),
        other => panic!("expected the deposit, got {other:?}"),
    }
    assert_eq!(
        session.next().await.unwrap(),
        Some(WatchEvent::PageEnd { more: false })
    );

    let bobs = client
        .session_proof(&bob, Purpose::Collect)
        .await
        .unwrap()
        .unwrap();
    session.present_second_proof(&bobs).await.unwrap();
    match session.next().await {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::SecondProof),
        other => panic!("expected second-proof, got {other:?}"),
    }
    // Bob's proof on its own stream was never consumed by the session…
    let page = client.collect_proof(&bobs, None, 10).await.unwrap();
    assert_eq!(page.verdict, Verdict::NoSuchQueue);
    assert!(page.deposits.is_empty());
    // …and Alice's own next session is served.
    let page = client.collect(&alice, None, 10).await.unwrap();
    assert_eq!((page.verdict, page.deposits.len()), (Verdict::Served, 1));
    client.close().await;
}
