//! The shipped recipient keeps its promises under load (issue 12,
//! `PROTOCOL.md` §7, §9a, §10): its own collect/conclude traffic keeps pace
//! with its queue, retriable refusals are retried, conclusions still owed
//! are concluded by the next run, `--json` output, the `conclude`
//! command, and an always-on `collect --watch --conclude` that stays live
//! for 60 simulated days and reconnects after restarts and crashes.

use super::*;
use rltp_cli::keys::KeyFile;
use rltp_client::RecipientKeys;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_storage::DepositId;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A registered recipient: key file, its library keys and rkid.
struct Recipient {
    key: PathBuf,
    keys: RecipientKeys,
    rkid: Rkid,
}

fn recipient(dir: &Path, carrier: &Carrier, name: &str) -> Recipient {
    let (key, rkid) = keys_new(dir, name);
    cli_to(dir, carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let file = KeyFile::load(&key).unwrap();
    Recipient {
        key,
        keys: file.recipient_keys(),
        rkid: Rkid::parse(&rkid).unwrap(),
    }
}

/// Sealed envelopes of `count` distinct documents for `rkid`.
fn envelopes(rkid: &Rkid, tag: &str, count: usize) -> Vec<(Rkid, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let doc = format!(r#"{{"tag":"{tag}","n":{i}}}"#);
            let sealed = rltp_cli::send::seal_document(doc.as_bytes(), rkid).unwrap();
            (*rkid, sealed.envelope)
        })
        .collect()
}

fn lines_json(run: &Run) -> Vec<serde_json::Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Keeps the held-collection meter of `rkid` dry (issuing `purpose`
/// challenges for it from another connection) until `stop`; returns once
/// a challenge was refused (the meter is dry).
fn drain_challenges(
    carrier: &Carrier,
    rkid: Rkid,
    purpose: Purpose,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(carrier.connect());
    let (dry_tx, dry) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        rt.block_on(async {
            let mut issued = 0u64;
            while !stop.load(Ordering::SeqCst) {
                match client.challenge(&rkid, purpose).await.unwrap() {
                    rltp_wire::response::ChallengeAnswer::Refused(_) => {
                        let _ = dry_tx.send(());
                    }
                    _ => issued += 1,
                }
            }
            client.close().await;
            issued
        })
    });
    dry.recv_timeout(Duration::from_secs(20))
        .expect("the meter never ran dry");
    thread
}

/// Issue 12 §2, the meter: a recipient that concludes every deposit on
/// its own (a challenge and a conclude per deposit) keeps pace with its
/// queue at the default budgets. Before the fix its collect/conclude
/// traffic shared the 20/s, burst 100 `held-binding` budget and was
/// refused `refused(admission-resource)` after about 50 deposits.
#[test]
fn a_recipient_concluding_each_deposit_keeps_pace_with_its_queue() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let alice = recipient(dir, &carrier, "alice.json");
    let rt = runtime();
    rt.block_on(async {
        let client = carrier.connect().await;
        let items = envelopes(&alice.rkid, "pace", 300);
        let answers = client.submit_many(&items).await.unwrap();
        assert!(answers.iter().all(|a| a.verdict == SubmitVerdict::Admitted));
        let mut refused = 0;
        for (_, envelope) in &items {
            let id = DepositId::of(envelope);
            match client.conclude(&alice.keys, &[id]).await.unwrap() {
                (Verdict::Served, Some(1)) => {}
                (Verdict::AdmissionResource, _) => refused += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(refused, 0, "its own conclusions were metered down");
        let page = client.collect(&alice.keys, None, 10).await.unwrap();
        assert_eq!((page.verdict, page.deposits.len()), (Verdict::Served, 0));
        client.close().await;
    });
}

/// Issue 12 §2, the client: `collect --watch --conclude` while four
/// connections deposit 400 documents at once: every deposit is handed
/// out exactly once, written and concluded, nothing is refused, nothing is
/// left. (Before: 2 317 delivered, 100 concluded, 2 217
/// `conclude refused(admission-resource)`.)
#[test]
fn collect_watch_concludes_every_deposit_once_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let alice = recipient(dir, &carrier, "alice.json");
    let key = alice.key.to_str().unwrap();
    let watch = Running::start(
        dir,
        &carrier,
        &[
            "collect",
            "--json",
            "--key",
            key,
            "--out",
            "inbox",
            "--watch",
            "--conclude",
        ],
    );
    watch.next_event("watching");
    let rt = runtime();
    let sent: BTreeSet<DepositId> = rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for sender in 0..4 {
            let client = carrier.connect().await;
            let items = envelopes(&alice.rkid, &format!("load{sender}"), 100);
            tasks.spawn(async move {
                let answers = client.submit_many(&items).await.unwrap();
                client.close().await;
                assert!(answers.iter().all(|a| a.verdict == SubmitVerdict::Admitted));
                items
                    .iter()
                    .map(|(_, e)| DepositId::of(e))
                    .collect::<Vec<_>>()
            });
        }
        let mut all = BTreeSet::new();
        while let Some(ids) = tasks.join_next().await {
            all.extend(ids.unwrap());
        }
        all
    });
    assert_eq!(sent.len(), 400);
    let mut delivered: HashMap<String, u32> = HashMap::new();
    let mut concluded = 0;
    while concluded < 400 {
        let event = watch.next_event_of(&["deposit", "conclude", "verdict"]);
        match event["event"].as_str().unwrap() {
            "deposit" => {
                assert_eq!(event["disposition"], "written", "{event}");
                *delivered
                    .entry(event["deposit"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
            "conclude" => {
                assert_eq!(event["verdict"], "served", "{event}");
                concluded += event["concluded"].as_u64().unwrap();
            }
            _ => panic!("a refusal: {event}"),
        }
    }
    assert_eq!(concluded, 400);
    assert_eq!(delivered.len(), 400);
    assert!(
        delivered.values().all(|n| *n == 1),
        "offered more than once"
    );
    let ids: BTreeSet<DepositId> = delivered
        .keys()
        .map(|id| DepositId::parse(id).unwrap())
        .collect();
    assert_eq!(ids, sent);
    assert_eq!(watch.interrupt(), Some(0));
    let empty = cli_to(dir, &carrier, &["collect", "--key", key]).expect(0);
    assert_eq!(empty.value("collect"), "served deposits 0");
}

/// Retriable means retried: with another connection keeping the
/// binding's collect/conclude budget dry, `collect --conclude` is refused
/// `refused(admission-resource)`, retries with backoff, and — once the
/// budget refills — collects and concludes everything and exits 0.
#[test]
fn a_refused_collect_is_retried_until_served() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let config = document(
        dir,
        "carrier.toml",
        "[limits.meters]\nqueue = { per-second = 5, burst = 5 }\n",
    );
    let carrier = Carrier::start(&dir.join("data"), Some(&config));
    let alice = recipient(dir, &carrier, "alice.json");
    let rkid = alice.rkid.to_multikey();
    let doc = document(dir, "d.json", r#"{"n":1}"#);
    cli_to(
        dir,
        &carrier,
        &["send", "--to", &rkid, doc.to_str().unwrap()],
    )
    .expect(0);
    let stop = Arc::new(AtomicBool::new(false));
    let drain = drain_challenges(&carrier, alice.rkid, Purpose::Collect, Arc::clone(&stop));
    let collect = Running::start(
        dir,
        &carrier,
        &[
            "collect",
            "--json",
            "--key",
            alice.key.to_str().unwrap(),
            "--conclude",
        ],
    );
    let refused = collect.next_event("verdict");
    assert_eq!(refused["op"], "collect");
    assert_eq!(refused["verdict"], "refused(admission-resource)");
    assert_eq!(
        collect.next_event("status")["status"],
        "awaiting-transport(carrier-refused-retriable)"
    );
    stop.store(true, Ordering::SeqCst);
    assert!(drain.join().unwrap() > 0);
    let page = collect.next_event("collect");
    assert_eq!(page["verdict"], "served");
    assert_eq!(page["deposits"], 1);
    let conclude = collect.next_event("conclude");
    assert_eq!(
        (&conclude["verdict"], &conclude["concluded"]),
        (&"served".into(), &1.into())
    );
    let summary = collect.next_event("summary");
    assert_eq!(summary["owed"], 0);
    assert_eq!(collect.wait(), Some(0));
}

/// A conclusion refused retriably is retried; `concluding` is printed
/// before the request goes out, so a collector killed while it is owed
/// leaves a trace; the next run is handed the deposit again and concludes
/// what is still owed. (The binding's collect/conclude budget here is 2
/// at once, refilled 2/s: the collect takes both, so the conclusion that
/// follows at once is refused.)
#[test]
fn a_killed_collector_leaves_a_trace_and_the_next_run_concludes_what_is_owed() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let config = document(
        dir,
        "carrier.toml",
        "[limits.meters]\nqueue = { per-second = 1, burst = 1 }\n",
    );
    let carrier = Carrier::start(&dir.join("data"), Some(&config));
    let alice = recipient(dir, &carrier, "alice.json");
    let key = alice.key.to_str().unwrap();
    let doc = document(dir, "d.json", r#"{"owed":true}"#);
    let deposit = cli_to(
        dir,
        &carrier,
        &[
            "send",
            "--to",
            &alice.rkid.to_multikey(),
            doc.to_str().unwrap(),
        ],
    )
    .expect(0)
    .value("deposit")
    .to_owned();

    let first = Running::start(
        dir,
        &carrier,
        &["collect", "--json", "--key", key, "--conclude"],
    );
    let handled = first.next_event("deposit");
    assert_eq!(handled["deposit"], deposit.as_str());
    assert_eq!(handled["disposition"], "written");
    let concluding = first.next_event("concluding");
    assert_eq!(concluding["deposits"], serde_json::json!([deposit]));
    let refused = first.next_event("verdict");
    assert_eq!(refused["op"], "conclude");
    assert_eq!(refused["verdict"], "refused(admission-resource)");
    drop(first); // SIGKILL while the conclusion is owed

    let second = cli_to(dir, &carrier, &["collect", "--key", key, "--conclude"]).expect(0);
    let lines = second.lines("deposit ");
    assert_eq!(lines.len(), 1, "{second:?}");
    assert!(lines[0].starts_with(&format!("deposit {deposit} ")));
    assert!(lines[0].contains(" duplicate-known "), "{second:?}");
    assert_eq!(second.value("concluding"), "1");
    assert_eq!(second.value("conclude"), "served concluded 1");
    assert!(second.value("summary").ends_with(" concluded 1 owed 0"));
    let empty = cli_to(dir, &carrier, &["collect", "--key", key]).expect(0);
    assert_eq!(empty.value("collect"), "served deposits 0");
}

/// `collect --json`: one object per deposit and per conclude answer,
/// with the field names `PROTOCOL.md` §10 documents.
#[test]
fn collect_json_prints_one_object_per_deposit_and_conclude_answer() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let alice = recipient(dir, &carrier, "alice.json");
    let rkid = alice.rkid.to_multikey();
    let texts = [r#"{"n":1}"#, r#"{"n":2}"#];
    let mut deposits = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let path = document(dir, &format!("d{i}.json"), text);
        let sent = cli_to(
            dir,
            &carrier,
            &["send", "--to", &rkid, path.to_str().unwrap()],
        )
        .expect(0);
        deposits.push(sent.value("deposit").to_owned());
    }
    let run = cli_to(
        dir,
        &carrier,
        &[
            "collect",
            "--json",
            "--key",
            alice.key.to_str().unwrap(),
            "--out",
            "inbox",
            "--conclude",
        ],
    )
    .expect(0);
    let events = lines_json(&run);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "recipient",
            "attempt",
            "connected",
            "collect",
            "deposit",
            "deposit",
            "concluding",
            "attempt",
            "conclude",
            "summary"
        ]
    );
    assert_eq!(events[0]["rkid"], rkid.as_str());
    // Said once per connection: the conclude attempt reuses it.
    assert_eq!(events[3]["verdict"], "served");
    assert_eq!(events[3]["deposits"], 2);
    assert_eq!(events[3]["more"], false);
    for (event, (text, id)) in events[4..6].iter().zip(texts.iter().zip(&deposits)) {
        let digest = digest_of(text);
        assert_eq!(event["deposit"], id.as_str());
        assert_eq!(event["digest"], digest.as_str());
        assert_eq!(event["disposition"], "written");
        assert_eq!(event["detail"], format!("inbox/{digest}.json"));
        assert!(event["seq"].is_u64());
    }
    assert_eq!(events[6]["deposits"], serde_json::json!(deposits));
    assert_eq!(events[8]["verdict"], "served");
    assert_eq!(events[8]["concluded"], 2);
    assert_eq!(events[8]["deposits"], serde_json::json!(deposits));
    assert_eq!(events[9]["concluded"], 2);
    assert_eq!(events[9]["written"], 2);
    assert_eq!(events[9]["owed"], 0);
    assert!(events.iter().all(|e| e["elapsedMs"].is_u64()));
}

/// `conclude --key FILE ID…`: concludes exactly the named deposits;
/// naming one no longer held is fine (`concluded 0`); a malformed id is a
/// usage error; another principal's conclude is refused.
#[test]
fn conclude_concludes_the_named_deposits() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let carrier = Carrier::start(&dir.join("data"), None);
    let alice = recipient(dir, &carrier, "alice.json");
    let key = alice.key.to_str().unwrap();
    let rkid = alice.rkid.to_multikey();
    let mut ids = Vec::new();
    for i in 0..2 {
        let path = document(dir, &format!("d{i}.json"), &format!(r#"{{"n":{i}}}"#));
        let sent = cli_to(
            dir,
            &carrier,
            &["send", "--to", &rkid, path.to_str().unwrap()],
        )
        .expect(0);
        ids.push(sent.value("deposit").to_owned());
    }
    let run = cli_to(dir, &carrier, &["conclude", "--key", key, &ids[0]]).expect(0);
    assert_eq!(run.value("concluding"), "1");
    assert_eq!(run.value("conclude"), "served concluded 1");
    let again = cli_to(dir, &carrier, &["conclude", "--key", key, &ids[0]]).expect(0);
    assert_eq!(again.value("conclude"), "served concluded 0");
    let left = cli_to(dir, &carrier, &["collect", "--key", key]).expect(0);
    assert_eq!(left.value("collect"), "served deposits 1");
    assert!(left.lines("deposit ")[0].starts_with(&format!("deposit {} ", ids[1])));
    let bad = cli_to(dir, &carrier, &["conclude", "--key", key, "uEiNOTANID"]).expect(2);
    assert!(bad.stderr.contains("is not a deposit id"), "{bad:?}");
    let (mallory, _) = keys_new(dir, "mallory.json");
    let refused = cli_to(
        dir,
        &carrier,
        &["conclude", "--key", mallory.to_str().unwrap(), &ids[1]],
    )
    .expect(1);
    assert_eq!(refused.value("conclude"), "refused(no-such-queue)");
}

/// `collect --watch` after a crash of the carrier (SIGKILL, no goodbye):
/// the session ends, the watch reports it and reconnects with backoff
/// (`reconnecting …`, then retried attempts reporting
/// `awaiting-transport(…)` while the carrier is down), is watching again
/// once the carrier is back, and handles what arrives then.
#[test]
fn collect_watch_reconnects_after_the_carrier_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let spec = Spec::fixed(&dir.join("data"), "");
    let carrier = Carrier::start_with(&spec);
    let alice = recipient(dir, &carrier, "alice.json");
    let key = alice.key.to_str().unwrap();
    let watch = Running::start(
        dir,
        &carrier,
        &[
            "collect",
            "--json",
            "--key",
            key,
            "--out",
            "inbox",
            "--watch",
            "--conclude",
        ],
    );
    watch.next_event("watching");
    carrier.crash();
    let ended = watch.next_event_within("session-ended", Duration::from_secs(45));
    assert_eq!(ended["verdict"], serde_json::Value::Null, "{ended}");
    let reconnecting = watch.next_event("reconnecting");
    assert_eq!(reconnecting["attempt"], 1);
    assert!(reconnecting["ms"].as_u64().unwrap() <= 250);
    // While it is down: retried, and reported within the floor horizon.
    let report = watch.next_event("status");
    assert_eq!(
        report["status"],
        "awaiting-transport(transport-unreachable)"
    );
    let carrier = Carrier::start_with(&spec);
    watch.next_event_within("watching", Duration::from_secs(45));
    let doc = document(dir, "after.json", r#"{"after":"the crash"}"#);
    cli_to(
        dir,
        &carrier,
        &[
            "send",
            "--to",
            &alice.rkid.to_multikey(),
            doc.to_str().unwrap(),
        ],
    )
    .expect(0);
    let handled = watch.next_event("deposit");
    assert_eq!(handled["digest"], digest_of(r#"{"after":"the crash"}"#));
    assert_eq!(watch.next_event("conclude")["concluded"], 1);
    assert_eq!(watch.interrupt(), Some(0));
}

/// The simulated clock for [`always_on`]: the offset file both the
/// carrier and the client read (`PROTOCOL.md` §11, §10).
struct SimClock {
    file: PathBuf,
    offset_ms: u64,
}

impl SimClock {
    fn advance(&mut self, ms: u64) {
        self.offset_ms += ms;
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, format!("{}\n", self.offset_ms)).unwrap();
        std::fs::rename(&tmp, &self.file).unwrap();
    }

    /// What the client reads now.
    fn now_ms(&self) -> u64 {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        wall + self.offset_ms
    }
}

/// A running `collect --watch --json` and what it said about its refresh
/// schedule: every `watching` event read on the way updates it.
struct Watcher {
    run: Running,
    refresh_at: u64,
    refreshes: u32,
}

impl Watcher {
    /// The next `event`, noting `watching` and `refresh` events passed.
    fn next(&mut self, event: &str) -> serde_json::Value {
        loop {
            let e = self.run.next_event_of(&[event, "watching", "refresh"]);
            match e["event"].as_str().unwrap() {
                "watching" => self.refresh_at = e["refreshAtMs"].as_u64().unwrap(),
                "refresh" => {
                    assert!(e["clockMs"].as_u64().unwrap() >= self.refresh_at, "{e}");
                    self.refreshes += 1;
                }
                _ => {}
            }
            if e["event"] == event {
                return e;
            }
        }
    }

    /// Waits until the watch has re-authorized after `due` (its refresh
    /// instant at the time).
    fn refreshed_after(&mut self, due: u64) {
        while self.refresh_at <= due {
            self.next("watching");
        }
    }
}

const DAY_MS: u64 = 86_400_000;

/// Issue 12 §3–§4: an always-on recipient, `collect --watch --conclude`,
/// for 60 simulated days (the test clock hook moves carrier and client
/// together, half a day at a time) with `constants`: a deposit every day
/// for the first 14 days and the last 10, none for the 36 days between —
/// longer than any `orphan-horizon` — and a carrier restart on day 30.
/// Every deposit is handed out and concluded, and at the end the binding
/// is still `live`, never `closing`: the watch re-authorized itself on
/// schedule (`refresh`, every 42 h) and after the restart. (Before: a
/// recipient receiving a deposit every day went `closing` on day 7 and
/// was tombstoned on day 8 with `orphan-horizon = P7D`.)
fn always_on(constants: &str) {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut clock = SimClock {
        file: dir.join("clock-offset"),
        offset_ms: 0,
    };
    clock.advance(0);
    let config = format!("[constants]\n{constants}\n[limits]\nsweep-interval-ms = 50\n");
    let spec = Spec::fixed(&dir.join("data"), &config).with_clock(&clock.file);
    let mut carrier = Carrier::start_with(&spec);
    let alice = recipient(dir, &carrier, "alice.json");
    let key = alice.key.to_str().unwrap().to_owned();
    let mut watch = Watcher {
        run: Running::start_env(
            dir,
            &carrier.args(),
            &[
                "collect",
                "--json",
                "--key",
                &key,
                "--out",
                "inbox",
                "--watch",
                "--conclude",
            ],
            &spec.env,
        ),
        refresh_at: 0,
        refreshes: 0,
    };
    watch.next("watching");
    let rt = runtime();
    let mut client = rt.block_on(carrier.connect());
    let mut delivered = 0;
    for step in 1..=120u64 {
        clock.advance(DAY_MS / 2);
        let day = step / 2;
        if step == 60 {
            rt.block_on(client.clone().close());
            assert_eq!(carrier.terminate().code(), Some(0));
            watch.next("session-ended");
            watch.next("reconnecting");
            carrier = Carrier::start_with(&spec);
            // Re-authorized by the new session.
            watch.next("watching");
            client = rt.block_on(carrier.connect());
        }
        // A due refresh is waited for before time moves on.
        let due = watch.refresh_at;
        if clock.now_ms() >= due {
            watch.refreshed_after(due);
        }
        if step % 2 == 0 && (day <= 14 || day >= 51) {
            let items = envelopes(&alice.rkid, &format!("day{day}"), 1);
            let answer = rt
                .block_on(client.submit(&items[0].0, &items[0].1))
                .unwrap();
            assert_eq!(answer.verdict, SubmitVerdict::Admitted, "day {day}");
            let id = DepositId::of(&items[0].1).to_multibase();
            let handled = watch.next("deposit");
            assert_eq!(handled["deposit"], id.as_str(), "day {day}");
            assert_eq!(handled["disposition"], "written");
            let concluded = watch.next("conclude");
            assert_eq!(concluded["verdict"], "served", "day {day}: {concluded}");
            assert_eq!(concluded["deposits"], serde_json::json!([id]));
            delivered += 1;
        }
    }
    // A write applies every transition due at its instant: the carrier's
    // state below is as of day 60.
    let last = envelopes(&alice.rkid, "the end", 1);
    let answer = rt.block_on(client.submit(&last[0].0, &last[0].1)).unwrap();
    assert_eq!(answer.verdict, SubmitVerdict::Admitted);
    assert_eq!(watch.next("conclude")["concluded"], 1);
    let stats = cli(
        dir,
        &[
            "admin",
            "stats",
            "--data-dir",
            spec.data_dir.to_str().unwrap(),
        ],
    )
    .expect(0);
    assert_eq!(stats.value("bindings-live"), "1", "{stats:?}");
    assert_eq!(stats.value("bindings-closing"), "0");
    assert_eq!(stats.value("tombstones"), "0");
    assert_eq!(stats.value("deposits"), "0");
    assert_eq!(delivered, 14 + 10);
    // Refreshes every 42 h, each noticed at the first half-day step after
    // it is due (so one per 48 simulated hours), the restart's
    // re-authorization restarting the count once: 29 or 30 in 60 days.
    assert!(
        (28..=30).contains(&watch.refreshes),
        "{} refreshes",
        watch.refreshes
    );
    assert_eq!(watch.run.interrupt(), Some(0));
    rt.block_on(client.close());
}

/// [`always_on`] with the default horizons (`orphan-horizon` P30D,
/// `give-up-horizon` P14D).
#[test]
fn an_always_on_recipient_stays_live_for_60_days_through_a_restart() {
    always_on("");
}

/// [`always_on`] with the shortest horizons §11 allows (`orphan-horizon`
/// P7D, `give-up-horizon` P1D).
#[test]
fn an_always_on_recipient_stays_live_for_60_days_at_the_minimum_horizons() {
    always_on("orphan-horizon = \"P7D\"\ngive-up-horizon = \"P1D\"\n");
}
