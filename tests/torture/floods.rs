//! Floods that test the guarantees of §4.4 against the real `serve`
//! binary over loopback QUIC (issue 6), each with its verdict counts.
//!
//! - **Guarantee 3** — challenge and registration requests for unknown
//!   rkids far past the unknown-address meter: once it is dry, the
//!   asymmetric-operation, random-draw and verification counters
//!   (`/metrics`) grow by exactly the cost of the few requests the meter's
//!   refill admits, and by nothing for the thousands it refuses.
//! - **Guarantee 4** — the same flood keeps the unknown-address meter dry
//!   while a held binding's challenge, collect, conclude and rebind are
//!   served, and its deposits keep arriving.
//! - **Guarantee 5** — with global capacity filled through two queues, a
//!   third queue below `queue-floor` is still admitted; a flood into one
//!   queue (shared meter and its own meter dry) refuses no deposit of two
//!   other queues below their floor.
//!
//! `RLTP_FLOOD_REQUESTS` scales the floods (default 3 000 per phase).

use super::harness::*;
use rltp_client::{Client, RecipientKeys};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_storage::DepositId;
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::response::ChallengeAnswer;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Verdict spellings → counts.
type Tally = BTreeMap<String, u64>;

fn add(tally: &mut Tally, verdict: impl std::fmt::Display) {
    *tally.entry(verdict.to_string()).or_default() += 1;
}

fn merge(into: &mut Tally, from: Tally) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

/// A carrier config: metrics on `port`, `limits` and `meters` lines added
/// to their tables.
fn config(port: u16, limits: &str, meters: &str) -> String {
    format!(
        r#"
[constants]
queue-floor = "65536"
max-queue-bytes = "1048576"

[limits]
max-streams-per-connection = 1000
{limits}

[limits.meters]
{meters}

[metrics]
listen = "127.0.0.1:{port}"
"#
    )
}

fn requests() -> u64 {
    knob("RLTP_FLOOD_REQUESTS", 3_000)
}

/// Signed registration proofs naming unknown rkids over challenges the
/// carrier never issued (r1-valid; r2 decides them, r3 would find nothing).
fn junk_registrations(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let key = ed25519_dalek::SigningKey::from_bytes(&rng.bytes32());
            UnsignedProof::registration(
                Purpose::Register,
                carrier_id(),
                Rkid::from_bytes(rng.bytes32()),
                1,
                rng.bytes32(),
                rng.bytes32(),
            )
            .unwrap()
            .sign(&key)
            .unwrap()
        })
        .collect()
}

/// One flood worker: `n` requests, alternating three challenge requests
/// for fresh unknown rkids (register purpose: a granted one costs a seal)
/// and one junk registration. Stops early when `stop` is set.
async fn flood_worker(client: Client, n: u64, seed: u64, stop: Arc<AtomicBool>) -> (Tally, Tally) {
    let mut rng = Rng::new(seed);
    let junk = junk_registrations(&mut rng, 8);
    let (mut challenges, mut registrations) = (Tally::new(), Tally::new());
    for i in 0..n {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if i % 4 == 3 {
            let proof = &junk[(i / 4) as usize % junk.len()];
            add(
                &mut registrations,
                client.register_proof(proof).await.unwrap(),
            );
        } else {
            let rkid = Rkid::from_bytes(rng.bytes32());
            match client.challenge(&rkid, Purpose::Register).await.unwrap() {
                ChallengeAnswer::Issued { .. } => add(&mut challenges, "issued"),
                ChallengeAnswer::Refused(v) => add(&mut challenges, v),
            }
        }
    }
    (challenges, registrations)
}

/// `workers` concurrent flood workers over `connections` connections.
async fn flood(
    carrier: &Carrier,
    total: u64,
    rng: &mut Rng,
    stop: Arc<AtomicBool>,
) -> (Tally, Tally) {
    let workers = 8;
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(carrier.connect_within(Duration::from_secs(30)).await);
    }
    let mut set = tokio::task::JoinSet::new();
    for w in 0..workers {
        let client = clients[w % clients.len()].clone();
        set.spawn(flood_worker(
            client,
            total / workers as u64,
            rng.next(),
            Arc::clone(&stop),
        ));
    }
    let (mut challenges, mut registrations) = (Tally::new(), Tally::new());
    while let Some(done) = set.join_next().await {
        let (c, r) = done.unwrap();
        merge(&mut challenges, c);
        merge(&mut registrations, r);
    }
    (challenges, registrations)
}

fn count(tally: &Tally, verdict: &str) -> u64 {
    tally.get(verdict).copied().unwrap_or(0)
}

/// A real registration proof for a fresh unknown rkid whose secret we
/// hold, over a challenge the carrier issued (not yet presented).
async fn prepared_registration(client: &Client, rng: &mut Rng) -> Vec<u8> {
    let secret = rng.bytes32();
    let key = ed25519_dalek::SigningKey::from_bytes(&rng.bytes32());
    let keys = RecipientKeys::new(carrier_id(), key.clone(), secret, 1);
    let ChallengeAnswer::Issued {
        principal_challenge,
        address_challenge: Some(sealed),
        ..
    } = client
        .challenge(keys.rkid(), Purpose::Register)
        .await
        .unwrap()
    else {
        panic!("the meter refused a preparation challenge");
    };
    let address = open_address_challenge(
        &sealed,
        &secret,
        &carrier_id(),
        keys.rkid(),
        Purpose::Register,
    )
    .unwrap();
    UnsignedProof::registration(
        Purpose::Register,
        carrier_id(),
        *keys.rkid(),
        1,
        principal_challenge,
        address,
    )
    .unwrap()
    .sign(&key)
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarantee_3_no_asymmetric_work_past_the_meter() {
    let mut rng = Rng::from_env("guarantee 3 flood");
    let dir = tempfile::tempdir().unwrap();
    let port = free_tcp_port();
    let spec = Spec::new(
        &dir.path().join("data"),
        &config(
            port,
            "",
            "unknown-address = { per-second = 1, burst = 100 }",
        ),
    );
    let carrier = Carrier::start_with(&spec);
    let client = carrier.connect_within(Duration::from_secs(30)).await;
    let w0 = work(port);
    assert_eq!(w0, (0, 0, 0), "a fresh carrier has done no request work");

    // Ten real challenges, their proofs kept for later: the cost of one
    // granted register challenge.
    let mut prepared = Vec::new();
    for _ in 0..10 {
        prepared.push(prepared_registration(&client, &mut rng).await);
    }
    let w1 = work(port);
    assert_eq!(w1.0, 10, "one seal per granted register challenge");
    assert_eq!(w1.2, 0);
    assert_eq!(w1.1 % 10, 0);
    let draws_per_challenge = w1.1 / 10;
    assert!(draws_per_challenge >= 2);

    // Flood A drains the meter.
    let n = requests();
    let stop = Arc::new(AtomicBool::new(false));
    let (a_challenges, a_registrations) = flood(&carrier, n, &mut rng, Arc::clone(&stop)).await;
    assert!(
        count(&a_challenges, "refused(admission-resource)") > 0,
        "{a_challenges:?}"
    );

    // Flood B, the meter dry from its first request: every request it
    // admits (refill: 1/s) is counted; the refused ones must cost nothing.
    let w2 = work(port);
    let started = std::time::Instant::now();
    let (b_challenges, mut b_registrations) = flood(&carrier, n, &mut rng, stop).await;
    for proof in &prepared {
        add(
            &mut b_registrations,
            client.register_proof(proof).await.unwrap(),
        );
    }
    let w3 = work(port);
    let issued = count(&b_challenges, "issued");
    let registered = count(&b_registrations, "registered");
    let verified = registered + count(&b_registrations, "refused(possession-failed)");
    let refused = count(&b_challenges, "refused(admission-resource)")
        + count(&b_registrations, "refused(admission-resource)");
    let total_b = b_challenges.values().sum::<u64>() + b_registrations.values().sum::<u64>();
    println!(
        "g3 flood A (draining): challenges {a_challenges:?}, registrations {a_registrations:?}"
    );
    println!(
        "g3 flood B (meter dry, {:.1} s): challenges {b_challenges:?}, registrations {b_registrations:?}",
        started.elapsed().as_secs_f64()
    );
    println!(
        "g3 work during flood B: asymmetric ops +{}, random draws +{}, verifications +{}; \
         {total_b} requests, {refused} refused at r2 costing 0, {issued} challenges and {registered} proofs admitted by the refill",
        w3.0 - w2.0,
        w3.1 - w2.1,
        w3.2 - w2.2
    );
    // Junk proofs name no issued challenge: never verified, whether refused
    // at r2 or at r3.
    assert_eq!(
        w3.2 - w2.2,
        registered,
        "verifications only for admitted real proofs"
    );
    assert!(verified <= registered + count(&b_registrations, "refused(possession-failed)"));
    assert_eq!(
        w3.0 - w2.0,
        issued + registered,
        "asymmetric work only for admitted requests"
    );
    assert_eq!(
        w3.1 - w2.1,
        issued * draws_per_challenge,
        "random draws only for admitted requests"
    );
    assert!(
        refused * 100 >= total_b * 95,
        "the meter stayed dry: {refused} of {total_b} refused"
    );
    client.close().await;
    assert_eq!(carrier.terminate().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarantee_4_a_held_binding_is_served_through_an_unknown_address_flood() {
    let mut rng = Rng::from_env("guarantee 4 flood");
    let dir = tempfile::tempdir().unwrap();
    let port = free_tcp_port();
    let spec = Spec::new(
        &dir.path().join("data"),
        &config(port, "", "unknown-address = { per-second = 1, burst = 20 }"),
    );
    let carrier = Carrier::start_with(&spec);
    let client = carrier.connect_within(Duration::from_secs(30)).await;
    let keys = recipient(rng.bytes32(), rng.bytes32(), 1);
    let rkid = *keys.rkid();
    assert_eq!(
        client
            .register(&keys, Purpose::Register)
            .await
            .unwrap()
            .verdict(),
        Verdict::Registered
    );

    // The flood runs until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = {
        let stop = Arc::clone(&stop);
        let mut flood_rng = Rng::new(rng.next());
        let flood_client = carrier.connect_within(Duration::from_secs(30)).await;
        let second = carrier.connect_within(Duration::from_secs(30)).await;
        tokio::spawn(async move {
            let mut set = tokio::task::JoinSet::new();
            for w in 0..8u64 {
                let c = if w % 2 == 0 {
                    flood_client.clone()
                } else {
                    second.clone()
                };
                set.spawn(flood_worker(
                    c,
                    u64::MAX,
                    flood_rng.next(),
                    Arc::clone(&stop),
                ));
            }
            let (mut challenges, mut registrations) = (Tally::new(), Tally::new());
            while let Some(done) = set.join_next().await {
                let (c, r) = done.unwrap();
                merge(&mut challenges, c);
                merge(&mut registrations, r);
            }
            (challenges, registrations)
        })
    };
    // Until every meter unknown traffic can reach is dry.
    let mut probes = 0;
    loop {
        probes += 1;
        let probe = Rkid::from_bytes(rng.bytes32());
        if client.challenge(&probe, Purpose::Register).await.unwrap()
            == ChallengeAnswer::Refused(Verdict::AdmissionResource)
        {
            break;
        }
        assert!(probes < 10_000, "the unknown-address meter never ran dry");
    }

    // The held binding, during the flood.
    let mut held = Tally::new();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let bytes = envelope(&rkid, 500, &mut rng);
        ids.push(DepositId::of(&bytes));
        add(
            &mut held,
            client.submit(&rkid, &bytes).await.unwrap().verdict,
        );
    }
    match client.challenge(&rkid, Purpose::Collect).await.unwrap() {
        ChallengeAnswer::Issued { .. } => add(&mut held, "challenge issued"),
        ChallengeAnswer::Refused(v) => add(&mut held, format!("challenge {v}")),
    }
    let page = client.collect(&keys, None, 100).await.unwrap();
    assert_eq!(page.deposits.iter().map(|d| d.id).collect::<Vec<_>>(), ids);
    add(&mut held, format!("collect {}", page.verdict));
    let (verdict, concluded) = client.conclude(&keys, &ids[..2]).await.unwrap();
    assert_eq!(concluded, Some(2));
    add(&mut held, format!("conclude {verdict}"));
    let keys = keys.with_generation(2);
    add(
        &mut held,
        format!(
            "rebind {}",
            client
                .register(&keys, Purpose::Rebind)
                .await
                .unwrap()
                .verdict()
        ),
    );
    let page = client.collect(&keys, None, 100).await.unwrap();
    assert_eq!(
        page.deposits.iter().map(|d| d.id).collect::<Vec<_>>(),
        ids[2..]
    );
    add(&mut held, format!("collect {}", page.verdict));
    // Still dry after all that.
    let probe = Rkid::from_bytes(rng.bytes32());
    let still_dry = client.challenge(&probe, Purpose::Register).await.unwrap();

    stop.store(true, Ordering::SeqCst);
    let (challenges, registrations) = flooding.await.unwrap();
    println!(
        "g4 flood: unknown-address challenges {challenges:?}, registrations {registrations:?} (dry after {probes} probes)"
    );
    println!("g4 held binding during the flood: {held:?}");
    assert_eq!(
        still_dry,
        ChallengeAnswer::Refused(Verdict::AdmissionResource)
    );
    let expected: Tally = [
        ("admitted", 3),
        ("challenge issued", 1),
        ("collect served", 2),
        ("conclude served", 1),
        ("rebind rebound", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(held, expected);
    assert!(count(&challenges, "refused(admission-resource)") > 0);
    client.close().await;
    assert_eq!(carrier.terminate().code(), Some(0));
}

/// Submits envelopes of about `size` bytes to `rkid` until `stop_at` is
/// answered or `max` submissions are made; returns the tally.
async fn fill(
    client: &Client,
    rkid: &Rkid,
    ciphertext: usize,
    max: usize,
    stop_at: SubmitVerdict,
    rng: &mut Rng,
) -> Tally {
    let mut tally = Tally::new();
    for _ in 0..max {
        let bytes = envelope(rkid, ciphertext, rng);
        let verdict = client.submit(rkid, &bytes).await.unwrap().verdict;
        add(&mut tally, verdict);
        if verdict == stop_at {
            break;
        }
    }
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarantee_5_a_queue_below_its_floor_is_beyond_other_queues_reach() {
    let mut rng = Rng::from_env("guarantee 5 flood");
    let dir = tempfile::tempdir().unwrap();
    let port = free_tcp_port();
    // Five bindings reserve 5 × 64 KiB; 1.5 MB of capacity leaves about
    // 1.17 MB of shared room above the floors.
    let spec = Spec::new(
        &dir.path().join("data"),
        &config(
            port,
            "capacity-bytes = 1500000",
            "queue = { per-second = 5, burst = 60 }\nshared-submission = { per-second = 1, burst = 40 }",
        ),
    );
    let carrier = Carrier::start_with(&spec);
    let client = carrier.connect_within(Duration::from_secs(30)).await;
    let mut queues = Vec::new();
    for _ in 0..5 {
        let keys = recipient(rng.bytes32(), rng.bytes32(), 1);
        assert_eq!(
            client
                .register(&keys, Purpose::Register)
                .await
                .unwrap()
                .verdict(),
            Verdict::Registered
        );
        queues.push(*keys.rkid());
    }
    let [a, b, c, d, e] = [queues[0], queues[1], queues[2], queues[3], queues[4]];

    // Fill the global capacity through A and B with ~60 KB deposits.
    let fill_a = fill(
        &client,
        &a,
        45_000,
        40,
        SubmitVerdict::QueueSaturated,
        &mut rng,
    )
    .await;
    // B fills the rest, down to less than the smallest envelope (177 B).
    let mut fill_b = Tally::new();
    for ciphertext in [45_000, 4_000, 300, 17] {
        merge(
            &mut fill_b,
            fill(
                &client,
                &b,
                ciphertext,
                60,
                SubmitVerdict::Capacity,
                &mut rng,
            )
            .await,
        );
    }
    println!("g5 filling: queue A {fill_a:?}, queue B {fill_b:?}");
    assert_eq!(
        count(&fill_b, "refused(capacity)"),
        4,
        "B ran into the global capacity"
    );
    assert_eq!(
        count(&fill_a, "refused(queue-saturated)"),
        1,
        "A ran into max-queue-bytes"
    );

    // C, below its floor, is admitted although the carrier is full.
    let c_below = fill(&client, &c, 15_000, 3, SubmitVerdict::Capacity, &mut rng).await;
    let c_over = fill(&client, &c, 15_000, 1, SubmitVerdict::Capacity, &mut rng).await;
    println!("g5 full carrier: queue C below its floor {c_below:?}, crossing it {c_over:?}");
    assert_eq!(
        c_below,
        [("admitted".to_owned(), 3)].into_iter().collect::<Tally>()
    );
    assert_eq!(
        c_over,
        [("refused(capacity)".to_owned(), 1)]
            .into_iter()
            .collect::<Tally>()
    );

    // A flood into B (its own meter and the shared meter run dry), while D
    // and E, below their floors, keep depositing.
    let stop = Arc::new(AtomicBool::new(false));
    let flood_b = {
        let stop = Arc::clone(&stop);
        let flood_client = carrier.connect_within(Duration::from_secs(30)).await;
        let mut flood_rng = Rng::new(rng.next());
        tokio::spawn(async move {
            let mut tally = Tally::new();
            let batch: Vec<(Rkid, Vec<u8>)> = (0..50)
                .map(|_| (b, envelope(&b, 100, &mut flood_rng)))
                .collect();
            while !stop.load(Ordering::SeqCst) {
                for answer in flood_client.submit_many(&batch).await.unwrap() {
                    add(&mut tally, answer.verdict);
                }
            }
            tally
        })
    };
    // B's meters are dry once a deposit of ours to B is refused by them.
    let mut probes = 0;
    loop {
        probes += 1;
        let bytes = envelope(&b, 100, &mut rng);
        if client.submit(&b, &bytes).await.unwrap().verdict == SubmitVerdict::AdmissionResource {
            break;
        }
        assert!(probes < 10_000, "the flood never drained B's meters");
    }
    let mut below = Tally::new();
    for _ in 0..12 {
        for rkid in [d, e] {
            let bytes = envelope(&rkid, 3_000, &mut rng);
            add(
                &mut below,
                client.submit(&rkid, &bytes).await.unwrap().verdict,
            );
        }
    }
    stop.store(true, Ordering::SeqCst);
    let flooded = flood_b.await.unwrap();
    println!("g5 flood into queue B: {flooded:?}");
    println!("g5 queues D and E below their floors during the flood: {below:?}");
    assert_eq!(
        below,
        [("admitted".to_owned(), 24)].into_iter().collect::<Tally>()
    );
    assert!(
        count(&flooded, "refused(admission-resource)") > 0,
        "the flood drained B's meters"
    );
    client.close().await;
    assert_eq!(carrier.terminate().code(), Some(0));
}
