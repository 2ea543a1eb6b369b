//! Resource faults (issue 6): the disk fills up under the real carrier.
//!
//! The carrier's data directory lives on a small tmpfs mounted inside the
//! test (`mount -t tmpfs -o size=…`, root only; elsewhere the test says
//! clearly that it skipped and why). A ballast file fills the filesystem;
//! then every submission must get the retriable `unavailable` (a storage
//! fault is not a verdict, and never `refused(capacity)` for this queue far
//! below its floor: `PROTOCOL.md` §12), nothing held may be lost or
//! corrupted, and the process must keep answering. Once the
//! ballast is removed the carrier must admit again — a single I/O error
//! must never wedge it for good. Then the disk fills again and the carrier
//! is stopped on it (issue 27): it starts again, without room (never
//! refused as damaged) and with room, holding every admitted deposit. At
//! the end the store, opened directly, passes its integrity check and holds
//! exactly the admitted deposits.

use super::harness::*;
use rltp_client::{Client, ClientError, RecipientKeys};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_storage::log_store::LogStore;
use rltp_storage::{DepositId, ReadTxn, Store};
use rltp_wire::response::ErrorCode;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A tmpfs mounted for the test's lifetime (unmounted on drop).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if out.status.success() {
            Ok(Tmpfs(at.to_owned()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Writes zeros to `path` until the filesystem refuses (ENOSPC).
fn fill_up(path: &Path) -> u64 {
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("ballast: {e}"),
        }
    }
    // Small writes fill the last partial pages.
    while file.write(&[0u8; 512]).is_ok_and(|n| n > 0) {
        written += 512;
    }
    let _ = file.sync_all();
    written
}

fn tally(t: &mut BTreeMap<String, u64>, v: impl std::fmt::Display) {
    *t.entry(v.to_string()).or_default() += 1;
}

/// What the carrier answered: a verdict's spelling, or `unavailable`.
fn outcome<T>(answer: Result<T, ClientError>, verdict: impl FnOnce(T) -> String) -> String {
    match answer {
        Ok(answer) => verdict(answer),
        Err(ClientError::Server(e)) if e.code == ErrorCode::Unavailable => "unavailable".into(),
        Err(e) => panic!("not an answer: {e}"),
    }
}

async fn submit_one(
    client: &Client,
    rkid: &Rkid,
    rng: &mut Rng,
    admitted: &mut BTreeSet<DepositId>,
) -> String {
    let bytes = envelope(rkid, 3_000, rng);
    let answer = client.submit(rkid, &bytes).await;
    if matches!(&answer, Ok(a) if a.verdict == SubmitVerdict::Admitted) {
        admitted.insert(DepositId::of(&bytes));
    }
    outcome(answer, |a| a.verdict.to_string())
}

/// Every deposit of `keys`'s queue, collected: exactly `admitted`, each once.
async fn assert_held_once(client: &Client, keys: &RecipientKeys, admitted: &BTreeSet<DepositId>) {
    let mut held = Vec::new();
    let mut after_seq = None;
    loop {
        let page = client.collect(keys, after_seq, 1_000).await.unwrap();
        assert_eq!(page.verdict, Verdict::Served);
        held.extend(page.deposits.iter().map(|d| d.id));
        after_seq = page.deposits.last().map(|d| d.seq).or(after_seq);
        if !page.more {
            break;
        }
    }
    let held_set: BTreeSet<DepositId> = held.iter().copied().collect();
    assert_eq!(held.len(), held_set.len(), "a deposit is held twice");
    assert_eq!(
        &held_set, admitted,
        "held deposits differ from the admitted ones"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_answered_unavailable_and_the_carrier_recovers() {
    let mut rng = Rng::from_env("disk full");
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small-fs");
    // A missing prerequisite is a failure that names it, never a skip.
    let _fs = Tmpfs::mount(&mount, "48m").unwrap_or_else(|e| {
        panic!("cannot mount a tmpfs here ({e}): this test needs root (CAP_SYS_ADMIN)")
    });
    let data = mount.join("data");
    let spec = Spec::new(&data, "[limits]\nsweep-interval-ms = 50\n");
    // The config file sits beside the data dir, on the small filesystem too.
    let mut carrier = Carrier::start_with(&spec);
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
    let mut admitted = BTreeSet::new();
    for _ in 0..20 {
        assert_eq!(
            submit_one(&client, &rkid, &mut rng, &mut admitted).await,
            "admitted"
        );
    }

    // The disk fills up.
    let ballast = mount.join("ballast");
    let ballast_bytes = fill_up(&ballast);
    let mut full = BTreeMap::new();
    for _ in 0..60 {
        let answer = submit_one(&client, &rkid, &mut rng, &mut admitted).await;
        assert!(
            answer == "admitted" || answer == "unavailable",
            "a full disk answered {answer} to a queue far below its floor"
        );
        tally(&mut full, answer);
    }
    assert!(
        full.contains_key("unavailable"),
        "the disk never filled: {full:?}"
    );
    // The process keeps answering: reads, and the other operations'
    // retriable answers.
    let page = client.collect(&keys, None, 1_000).await;
    let collect_while_full = match &page {
        Ok(page) => page.verdict.to_string(),
        Err(e) => e.to_string(),
    };
    if let Ok(page) = &page {
        assert_eq!(page.verdict, Verdict::Served);
    } else {
        assert!(
            page.as_ref().unwrap_err().is_retriable(),
            "{collect_while_full}"
        );
    }
    // Registrations while full, until the metadata store itself runs out
    // of room (redb then fails a write: the I/O error this test is about).
    let mut registrations_while_full = BTreeMap::new();
    for _ in 0..2_000 {
        let other = recipient(rng.bytes32(), rng.bytes32(), 1);
        let answer = outcome(client.register(&other, Purpose::Register).await, |a| {
            a.verdict().to_string()
        });
        assert!(
            answer == "registered" || answer == "unavailable",
            "a full disk answered {answer} to a registration"
        );
        let stop = answer == "unavailable";
        tally(&mut registrations_while_full, answer);
        if stop {
            break;
        }
    }
    assert!(carrier.alive(), "the carrier died on a full disk");

    // Space returns: the carrier admits again.
    std::fs::remove_file(&ballast).unwrap();
    let mut after = BTreeMap::new();
    let mut first_admission_after = None;
    for attempt in 0..200 {
        let answer = submit_one(&client, &rkid, &mut rng, &mut admitted).await;
        let ok = answer == "admitted";
        tally(&mut after, answer);
        if ok {
            first_admission_after.get_or_insert(attempt);
            if after.get("admitted").copied().unwrap_or(0) >= 20 {
                break;
            }
        }
    }
    println!(
        "disk full: {} MiB ballast; submissions while full {full:?}; collect while full: {collect_while_full}; \
         registrations while full {registrations_while_full:?}; after the space returned {after:?} \
         (first admitted at attempt {first_admission_after:?})",
        ballast_bytes >> 20
    );
    assert!(
        after.get("admitted").copied().unwrap_or(0) >= 20,
        "the carrier did not recover once space returned: {after:?}"
    );
    // The metadata store itself hit the full disk (redb latches that
    // error) and was reopened.
    assert_eq!(
        registrations_while_full.get("unavailable"),
        Some(&1),
        "the full disk never reached the metadata store: {registrations_while_full:?}"
    );
    assert!(
        !carrier
            .log_events("the database was reopened after a failed batch", 0)
            .is_empty(),
        "no reopen after the metadata store's i/o error"
    );

    // Everything admitted is held, once.
    assert_held_once(&client, &keys, &admitted).await;

    // Issue 27: the disk fills again and the carrier is stopped on it; it
    // starts again — without room (never refused as damaged) and with
    // room — holding every deposit admitted.
    let ballast = mount.join("ballast-2");
    fill_up(&ballast);
    let mut second = BTreeMap::new();
    for _ in 0..60 {
        let answer = submit_one(&client, &rkid, &mut rng, &mut admitted).await;
        let full = answer == "unavailable";
        tally(&mut second, answer);
        if full && second.get("unavailable").copied().unwrap_or(0) >= 5 {
            break;
        }
    }
    assert!(
        second.contains_key("unavailable"),
        "the disk never filled again: {second:?}"
    );
    client.close().await;
    assert_eq!(carrier.terminate().code(), Some(0));
    let without_room =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Carrier::start_with(&spec)));
    match without_room {
        Ok(carrier) => {
            let client = carrier.connect_within(Duration::from_secs(30)).await;
            assert_held_once(&client, &keys, &admitted).await;
            client.close().await;
            assert_eq!(carrier.terminate().code(), Some(0));
        }
        Err(refusal) => {
            let said = refusal
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default();
            assert!(
                !said.contains("damaged") && !said.contains("restore"),
                "a start without room was refused as damage: {said}"
            );
        }
    }
    std::fs::remove_file(&ballast).unwrap();
    let carrier = Carrier::start_with(&spec);
    let client = carrier.connect_within(Duration::from_secs(30)).await;
    assert_held_once(&client, &keys, &admitted).await;
    assert_eq!(
        submit_one(&client, &rkid, &mut rng, &mut admitted).await,
        "admitted"
    );
    client.close().await;
    assert_eq!(carrier.terminate().code(), Some(0));
    println!("disk full again: submissions {second:?}; started again holding every deposit");
    let mut store = LogStore::open(data.join("store")).unwrap();
    let report = store.integrity_check().unwrap();
    assert_eq!(report.deposits, admitted.len() as u64);
    assert!(report.is_clean(), "{report:?}");
    let read = store.read().unwrap();
    assert_eq!(
        read.deposits(&rkid, None, usize::MAX).unwrap().len(),
        admitted.len()
    );
    println!(
        "disk full: {} deposits admitted in all, all held once; integrity check passed ({} bytes)",
        admitted.len(),
        report.bytes
    );
}
