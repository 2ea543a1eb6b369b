//! Backup archives of the embedded stores (`rltp-backup/1`), the log store
//! and the redb store alike: a restore reproduces the observable state exactly and passes the integrity check
//! (a restored store is always the log store: a redb store's archive is
//! upgraded as it is restored); only the referenced prefix of each segment
//! is copied; a damaged archive or restored store is refused; the phase
//! counts. (An online snapshot taken while the group-commit writer keeps
//! appending is tested beside the writer, `carrier/tests/writer.rs`.)

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use rltp_storage::backup::{self, BackupError, BackupSource, ExtraFile};
use rltp_storage::log_store::LogStore;
use rltp_storage::redb_store::RedbStore;
use rltp_storage::{
    BindingPhases, DeclarationRecord, Departure, DepartureRecord, DepositId, Due, ReadTxn, Store,
    WriteTxn,
};
use std::path::Path;

/// An embedded store under test.
trait Kind: Store + BackupSource + Sized {
    /// Tiny segments (rotation and reclaiming in small tests).
    fn small(dir: &Path) -> Self;
    /// The redb store's referenced segments `(id, extent)`, to check
    /// that only those are copied (the log store copies what its
    /// `LogBackup` names).
    fn referenced(&self) -> Option<Vec<(u64, u64)>>;
    /// Where its files are under the data dir.
    const FILES: &'static str;
}

impl Kind for RedbStore {
    fn small(dir: &Path) -> Self {
        RedbStore::open_with(dir, small_segments()).unwrap()
    }
    fn referenced(&self) -> Option<Vec<(u64, u64)>> {
        Some(self.snapshot().unwrap().segments().unwrap())
    }
    const FILES: &'static str = "store/segments";
}

impl Kind for LogStore {
    fn small(dir: &Path) -> Self {
        LogStore::open_with(dir, small_log()).unwrap()
    }
    fn referenced(&self) -> Option<Vec<(u64, u64)>> {
        None
    }
    const FILES: &'static str = "store/log";
}

/// A store with bindings in both phases, tombstones, deposits over many
/// 4 KiB segments (some of them drained and reclaimed), departures, due
/// entries, elastic bytes and a declaration.
fn populated<K: Kind>(dir: &Path) -> (K, Vec<rltp_proofs::multikey::Rkid>, Vec<DepositId>) {
    let store = K::small(dir);
    let rkids = vec![rkid(1), rkid(2), rkid(3), rkid(4)];
    let mut ids = Vec::new();
    write(&store, |t| {
        t.put_binding(&rkids[0], &live(3, 40))?;
        t.put_binding(&rkids[1], &closing(7, 77))?;
        t.schedule(77, &Due::Deadline(rkids[1]))?;
        t.schedule(1040, &Due::OrphanExpiry(rkids[0]))?;
        t.put_tombstone(&rkids[2], &tomb(9, 33))?;
        t.put_tombstone(&rkids[3], &tomb(2, 31))?;
        t.add_elastic_bytes(4321)?;
        t.put_declaration(&DeclarationRecord {
            revision: 4,
            document: b"{\"signed\":true}".to_vec(),
        })
    })
    .unwrap();
    for i in 0..40u64 {
        let r = rkids[(i % 2) as usize];
        let bytes = payload(i, 700 + i as usize);
        ids.push(DepositId::of(&bytes));
        write(&store, |t| {
            let d = t.append_deposit(&r, &bytes, i, 1000 + i)?;
            t.schedule(d.give_up_at, &Due::GiveUp(r, d.seq))
        })
        .unwrap();
    }
    // Drain the first segments: their files are reclaimed.
    write(&store, |t| {
        for seq in 1..=6 {
            t.remove_deposit(&rkids[0], seq)?;
        }
        t.put_departure(
            &rkids[0],
            &ids[0],
            &DepartureRecord {
                departure: Departure::Concluded,
                forget_at: 999,
            },
        )
    })
    .unwrap();
    (store, rkids, ids)
}

fn extra() -> Vec<ExtraFile> {
    vec![ExtraFile {
        path: "tls/key.der".into(),
        mode: 0o600,
        bytes: b"secret".to_vec(),
    }]
}

fn a_restore_reproduces_the_observable_state_and_passes_the_integrity_check<K: Kind>() {
    let dir = tempfile::tempdir().unwrap();
    let (store, rkids, ids) = populated::<K>(&dir.path().join("store"));
    let before = dump(&store.read().unwrap(), &rkids, &ids).unwrap();
    let mut archive = Vec::new();
    let written = backup::write_backup(&store, &|| 1234, "test 1", &extra(), &mut archive).unwrap();
    assert_eq!(written.archive_bytes, archive.len() as u64);
    assert_eq!(written.manifest.taken_at, 1234);
    assert_eq!(written.manifest.declaration_revision, Some(4));
    assert_eq!(written.manifest.occupancy.bindings, 2);
    assert_eq!(written.manifest.occupancy.tombstones, 2);
    assert_eq!(written.manifest.occupancy.deposits, 34);

    // Only the segments the snapshot references are in the archive, each
    // up to its committed extent.
    if let Some(referenced) = store.referenced() {
        assert_eq!(written.manifest.segments, referenced.len() as u64);
        let on_disk: u64 = std::fs::read_dir(dir.path().join(K::FILES))
            .unwrap()
            .count() as u64;
        assert_eq!(
            on_disk,
            referenced.len() as u64,
            "drained segments were reclaimed"
        );
        assert_eq!(
            written.manifest.segment_bytes,
            referenced.iter().map(|(_, end)| end).sum::<u64>()
        );
    }
    drop(store);

    let restored = dir.path().join("restored");
    let read = backup::unpack(&archive[..], &restored).unwrap();
    assert_eq!(read.manifest, written.manifest);
    assert_eq!((read.rows, read.files), (written.rows, written.files));
    assert_eq!(read.extra_files, vec!["tls/key.der".to_owned()]);
    assert_eq!(
        std::fs::read(restored.join("tls/key.der")).unwrap(),
        b"secret"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(restored.join("tls/key.der"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let report = backup::check_unpacked(&restored, &read.manifest).unwrap();
    assert_eq!(
        (report.bindings, report.tombstones, report.deposits),
        (2, 2, 34)
    );
    let store = LogStore::open(restored.join("store")).unwrap();
    assert_eq!(dump(&store.read().unwrap(), &rkids, &ids).unwrap(), before);
    assert_eq!(
        store.read().unwrap().binding_phases().unwrap(),
        BindingPhases {
            live: 1,
            closing: 1
        }
    );
}

fn a_damaged_archive_or_store_is_refused<K: Kind>() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = populated::<K>(&dir.path().join("store"));
    let mut archive = Vec::new();
    backup::write_backup(&store, &|| 1, "t", &extra(), &mut archive).unwrap();
    drop(store);
    let fresh = |name: &str| dir.path().join(name);

    let mut flipped = archive.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    let error = backup::unpack(&flipped[..], &fresh("a")).unwrap_err();
    assert!(
        matches!(error, BackupError::Format(_) | BackupError::Store(_)),
        "{error}"
    );

    let error = backup::unpack(&archive[..archive.len() - 1], &fresh("b")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "not a valid rltp-backup/1 archive: truncated (no end record)"
    );
    let mut longer = archive.clone();
    longer.push(0);
    let error = backup::unpack(&longer[..], &fresh("c")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "not a valid rltp-backup/1 archive: bytes after the end record"
    );
    let error = backup::unpack(&b"RLTPBAK0"[..], &fresh("d")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "not a valid rltp-backup/1 archive: wrong magic (not an rltp backup)"
    );

    // An intact archive whose unpacked segment is then damaged: the
    // integrity check names the deposit, and nothing is served from it.
    let read = backup::unpack(&archive[..], &fresh("e")).unwrap();
    let segments = fresh("e").join(K::FILES);
    let mut names: Vec<_> = std::fs::read_dir(&segments)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let victim = &names[0];
    let mut bytes = std::fs::read(victim).unwrap();
    // Every byte after the segment header: the log records and the
    // envelope bytes inside them.
    for byte in &mut bytes[64..] {
        *byte ^= 1;
    }
    std::fs::write(victim, bytes).unwrap();
    let error = backup::check_unpacked(&fresh("e"), &read.manifest).unwrap_err();
    // The redb store's segment holds the deposits the index names; the
    // log store's first segment is its log, which now ends early.
    assert!(
        error.to_string().contains("do not match their id")
            || error.to_string().contains("is damaged"),
        "{error}"
    );
}

/// Emits one test per store for each generic test.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod log_store {
            $(
                #[test]
                fn $name() {
                    super::$name::<rltp_storage::log_store::LogStore>();
                }
            )*
        }
        mod redb_store {
            $(
                #[test]
                fn $name() {
                    super::$name::<rltp_storage::redb_store::RedbStore>();
                }
            )*
        }
    };
}

on_both_stores!(
    a_restore_reproduces_the_observable_state_and_passes_the_integrity_check,
    a_damaged_archive_or_store_is_refused,
);

#[test]
fn an_open_store_is_in_use_and_a_closed_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    assert!(!rltp_storage::redb_store::store_in_use(&path));
    let store = RedbStore::open(&path).unwrap();
    assert!(rltp_storage::redb_store::store_in_use(&path));
    drop(store);
    assert!(!rltp_storage::redb_store::store_in_use(&path));
    let mut archive = Vec::new();
    let store = RedbStore::open(&path).unwrap();
    let written = backup::write_backup(&store, &|| 5, "t", &[], &mut archive).unwrap();
    let scanned = backup::scan(&archive[..]).unwrap();
    assert_eq!(scanned, written);
    assert!(backup::scan(&archive[..archive.len() - 3]).is_err());
}
