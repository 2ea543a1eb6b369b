//! The upgrade from the redb store's layout (`meta` format 1 or 2:
//! `carrier.redb` with every index, envelope bytes in `segments/`) to the
//! log store's (`storage/README.md`, "Upgrading a data dir").
//!
//! 1. The redb store is opened as it is (its own recovery: it replays its
//!    operation log and checkpoints).
//! 2. Whatever `log/` and `snap/` hold is removed: with the format still
//!    2, it can only be an upgrade that was cut short.
//! 3. Its state is written as a log from the store's first segment on:
//!    every binding (`put binding`, so that the index knows it), every
//!    queue's last `seq`, every held deposit with its bytes and its `seq`,
//!    every departure record, due entry and quarantine record, the elastic
//!    bytes. Envelope bytes are copied as they are: a damaged one stays
//!    damaged, and is quarantined when met, as before. Each segment is
//!    `fdatasync`ed and named durably.
//! 4. One durable redb transaction switches the store: the tables the log
//!    store keeps in memory are deleted, `format` becomes 3, `applied`
//!    names the end of that log, and `legacy_segments` asks the next open
//!    to delete `segments/`. Before this commit the directory is the redb
//!    store's (an older binary still opens it); after it, the log store's
//!    (an older binary refuses format 3).
//! 5. The open that follows replays that log once (O(data), once) and
//!    takes a snapshot soon after.

use super::record::{self, SEGMENT_HEADER, SegmentHeader, tag};
use super::{FORMAT, LogOptions};
use crate::failure::{corrupt, db_error};
use crate::fs::{Open, StoreFile, StoreFs};
use crate::redb_store::{RedbOptions, RedbStore};
use crate::schema::{
    self as rs, DEPARTURES, DEPOSITS, DUE, IDENTITY, META, META_ACTIVE, META_APPLIED, META_FORMAT,
    META_NEXT_SEGMENT, META_OCCUPANCY, QUARANTINE, QUEUES, SEGMENT_GC, SEGMENTS,
};
use crate::schema::{META_COUNTS, META_LEGACY};
use crate::{Occupancy, ReadTxn as _, StoreResult};
use redb::Durability;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Records are cut at about this size.
const RECORD_BYTES: usize = 1 << 20;

pub(super) fn upgrade(dir: &Path, options: &LogOptions) -> StoreResult<()> {
    let fs = &*options.fs;
    let log_dir = dir.join("log");
    let snap_dir = dir.join("snap");
    let old = RedbStore::open_with(
        dir,
        RedbOptions {
            fs: Arc::clone(&options.fs),
            expect_store_id: options.expect_store_id,
            ..RedbOptions::default()
        },
    )?;
    let store_id = old.store_id();
    let first = clear_leftovers(fs, &log_dir, &snap_dir)?;
    let mut log = Writer::new(fs, &log_dir, store_id.0, first, options.segment_bytes)?;
    let snapshot = old.snapshot()?;
    let occupancy = snapshot.read().occupancy()?;
    let mut segment_files: HashMap<u64, Arc<dyn StoreFile>> = HashMap::new();
    let mut failure = None;
    snapshot
        .for_each_row(|table, key, value| {
            let op: Vec<u8> = match table {
                "bindings" => rs::cat(&[&[tag::PUT_BINDING], key, value]),
                "queues" => {
                    let queue = rs::decode_queue(value)?;
                    rs::cat(&[&[tag::NEXT_SEQ], key, &queue.next_seq.to_be_bytes()])
                }
                "deposits" => {
                    let seq = rs::u64_at(key, 32)?;
                    let stored = rs::decode_deposit(seq, value)?;
                    let d = stored.deposit;
                    let bytes = if stored.segment == rs::INLINE {
                        value.get(rs::DEPOSIT_HEADER..).unwrap_or_default().to_vec()
                    } else {
                        let file = match segment_files.get(&stored.segment) {
                            Some(file) => Arc::clone(file),
                            None => {
                                let file = snapshot.segment_file(stored.segment)?;
                                segment_files.insert(stored.segment, Arc::clone(&file));
                                file
                            }
                        };
                        raw_bytes(&*file, stored.offset, d.len)
                    };
                    rs::cat(&[
                        &[tag::APPEND],
                        &key[..32],
                        &seq.to_be_bytes(),
                        &d.id.0,
                        &d.admitted_at.to_be_bytes(),
                        &d.give_up_at.to_be_bytes(),
                        &d.len.to_be_bytes(),
                        &bytes,
                    ])
                }
                "departures" => rs::cat(&[&[tag::PUT_DEPARTURE], key, value]),
                "due" => rs::cat(&[&[tag::SCHEDULE, key.len() as u8], key]),
                "quarantine" => rs::cat(&[
                    &[tag::QUARANTINE],
                    key,
                    &(value.len() as u32).to_be_bytes(),
                    value,
                ]),
                _ => return Ok(()),
            };
            if let Err(e) = log.op(&op) {
                failure = Some(e);
                return Err(corrupt("the upgrade's log could not be written"));
            }
            Ok(())
        })
        .map_err(|e| failure.take().unwrap_or(e))?;
    log.op(&rs::cat(&[
        &[tag::ELASTIC],
        &occupancy.elastic_bytes.to_be_bytes(),
    ]))?;
    let end = log.finish()?;
    drop(snapshot);
    drop(old);
    switch(dir, options, end, &occupancy)?;
    tracing::warn!(
        dir = %dir.display(),
        deposits = occupancy.deposits,
        bindings = occupancy.bindings,
        "upgraded the store to the log store's layout"
    );
    Ok(())
}

/// Removes what an upgrade cut short left in `log/` and `snap/` (nothing
/// else writes there); returns the first segment id free for the log.
fn clear_leftovers(fs: &dyn StoreFs, log_dir: &Path, snap_dir: &Path) -> StoreResult<u64> {
    let mut first = 1;
    for name in fs.list(log_dir)? {
        if let Some(id) = record::parse_segment_name(&name) {
            first = first.max(id + 1);
        }
        fs.remove_file(&log_dir.join(name))?;
    }
    for name in fs.list(snap_dir)? {
        fs.remove_file(&snap_dir.join(name))?;
    }
    fs.sync_dir(log_dir)?;
    fs.sync_dir(snap_dir)?;
    Ok(first)
}

/// The switch to the log store's layout, in one durable transaction: the
/// redb store's tables dropped, `meta` naming the log (format, `applied`
/// at the log's `end`, the counts) and the legacy segments to delete.
fn switch(
    dir: &Path,
    options: &LogOptions,
    end: (u64, u64),
    occupancy: &Occupancy,
) -> StoreResult<()> {
    let fs = &*options.fs;
    let db = rs::open_db(
        fs,
        &dir.join(crate::store_id::INDEX_FILE),
        options.cache_bytes,
    )?;
    let mut txn = rs::begin(&db, true)?;
    for def in [
        DEPOSITS, IDENTITY, QUEUES, DEPARTURES, DUE, SEGMENTS, SEGMENT_GC, QUARANTINE,
    ] {
        txn.delete_table(def).map_err(db_error)?;
    }
    for key in [META_OCCUPANCY, META_ACTIVE, META_NEXT_SEGMENT] {
        rs::del(&txn, META, key)?;
    }
    rs::put(&txn, META, META_FORMAT, &FORMAT.to_be_bytes())?;
    rs::put(
        &txn,
        META,
        META_APPLIED,
        &rs::cat(&[&end.0.to_be_bytes(), &end.1.to_be_bytes()]),
    )?;
    rs::put(
        &txn,
        META,
        META_COUNTS,
        &rs::cat(&[
            &occupancy.bindings.to_be_bytes(),
            &occupancy.tombstones.to_be_bytes(),
        ]),
    )?;
    rs::put(&txn, META, META_LEGACY, &[1])?;
    txn.set_durability(Durability::Immediate)
        .map_err(db_error)?;
    txn.commit().map_err(db_error)?;
    Ok(())
}

/// The bytes at `offset`, as they are (a short read is filled with zeros:
/// the log store then finds them damaged, as the redb store would have).
fn raw_bytes(file: &dyn StoreFile, offset: u64, len: u32) -> Vec<u8> {
    let mut bytes = vec![0u8; len as usize];
    if file.read_exact_at(&mut bytes, offset).is_err() {
        let available = file
            .len()
            .unwrap_or(0)
            .saturating_sub(offset)
            .min(u64::from(len));
        bytes.fill(0);
        let _ = file.read_exact_at(&mut bytes[..available as usize], offset);
    }
    bytes
}

/// Deletes the redb store's segment files after an upgrade.
pub(super) fn remove_legacy(fs: &dyn StoreFs, dir: &Path) -> StoreResult<()> {
    let legacy = dir.join("segments");
    match fs.list(&legacy) {
        Ok(names) => {
            for name in names {
                fs.remove_file(&legacy.join(name))?;
            }
            fs.sync_dir(&legacy)?;
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Writes records into a chain of new segments.
struct Writer<'a> {
    fs: &'a dyn StoreFs,
    dir: &'a Path,
    store_id: [u8; 16],
    segment_bytes: u64,
    id: u64,
    file: Arc<dyn StoreFile>,
    at: u64,
    body: Vec<u8>,
}

impl<'a> Writer<'a> {
    fn new(
        fs: &'a dyn StoreFs,
        dir: &'a Path,
        store_id: [u8; 16],
        id: u64,
        segment_bytes: u64,
    ) -> StoreResult<Writer<'a>> {
        let header = SegmentHeader {
            id,
            store_id,
            prev: (0, 0),
        };
        let file = fs.open(&dir.join(record::segment_name(id)), Open::CreateNew)?;
        file.write_all_at(&header.encode(), 0)?;
        Ok(Writer {
            fs,
            dir,
            store_id,
            segment_bytes,
            id,
            file,
            at: SEGMENT_HEADER,
            body: Vec::new(),
        })
    }

    fn op(&mut self, op: &[u8]) -> StoreResult<()> {
        self.body.extend_from_slice(op);
        if self.body.len() >= RECORD_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the record being built (a segment holds at least one).
    fn flush(&mut self) -> StoreResult<()> {
        if self.body.is_empty() {
            return Ok(());
        }
        if self.at > SEGMENT_HEADER && self.at + self.body.len() as u64 > self.segment_bytes {
            self.file.sync_data()?;
            let prev = (self.id, self.at);
            self.id += 1;
            let header = SegmentHeader {
                id: self.id,
                store_id: self.store_id,
                prev,
            };
            self.file = self.fs.open(
                &self.dir.join(record::segment_name(self.id)),
                Open::CreateNew,
            )?;
            self.file.write_all_at(&header.encode(), 0)?;
            self.at = SEGMENT_HEADER;
        }
        let len = u32::try_from(self.body.len()).map_err(|_| corrupt("a record over 4 GiB"))?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.body);
        let header = record::batch_header(self.id, self.at, len, &crc);
        self.file.write_all_at(&header, self.at)?;
        self.file
            .write_all_at(&self.body, self.at + header.len() as u64)?;
        self.at += (header.len() + self.body.len()) as u64;
        self.body.clear();
        super::kill_point("upgrade-log");
        Ok(())
    }

    /// Writes the rest and makes it all durable; returns where it ends.
    fn finish(mut self) -> StoreResult<(u64, u64)> {
        self.flush()?;
        self.file.sync_data()?;
        self.fs.sync_dir(self.dir)?;
        Ok((self.id, self.at))
    }
}
