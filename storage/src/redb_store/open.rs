//! Opening the legacy store: every file accounted for first, then redb's
//! recovery and the replay of the log (module docs, "Recovery").

use super::*;

/// Checks the segment files present (`files`: id, length) against the
/// index: every recorded segment must exist, and every file must be
/// recorded, pending deletion, or the empty orphan at `next_segment`
/// (module docs, "A store knows its own files").
pub(super) fn account_for_segments(
    txn: &WriteTransaction,
    files: &[(u64, u64)],
    segments_dir: &Path,
) -> OpenResult<()> {
    let next = get_u64(txn, META, META_NEXT_SEGMENT)?.unwrap_or(1);
    let mut known = HashSet::new();
    txn.scan(SEGMENT_GC, (Bound::Unbounded, Bound::Unbounded), |k, _| {
        known.insert(u64_at(k, 0)?);
        Ok(true)
    })?;
    let present: HashMap<u64, u64> = files.iter().copied().collect();
    let mut missing = Vec::new();
    txn.scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
        let id = u64_at(k, 0)?;
        known.insert(id);
        let stat = decode_seg(v)?;
        match present.get(&id) {
            None => missing.push(format!(
                "{id:016x} ({} deposits, {} bytes)",
                stat.live, stat.bytes
            )),
            Some(&len) if len < stat.end => tracing::error!(
                segment = format!("{id:016x}"),
                length = len,
                extent = stat.end,
                "a segment file is shorter than its committed extent: the deposits past its end are damaged and will be quarantined when read"
            ),
            Some(_) => {}
        }
        Ok(true)
    })?;
    if !missing.is_empty() {
        return Err(damaged(format!(
            "segment file(s) recorded in the index are missing from {}: {}",
            segments_dir.display(),
            missing.join(", ")
        )));
    }
    let unknown: Vec<String> = files
        .iter()
        .filter(|(id, len)| !(known.contains(id) || *id >= next && *len <= segment::HEADER_LEN))
        .map(|(id, len)| format!("{id:016x} ({len} bytes)"))
        .collect();
    if !unknown.is_empty() {
        return Err(damaged(format!(
            "segment file(s) in {} are not known to the index (the index is older than its log, \
             or they belong to another store): {}",
            segments_dir.display(),
            unknown.join(", ")
        )));
    }
    Ok(())
}

impl RedbStore {
    /// Opens (or creates) the store in `dir` with default options.
    ///
    /// # Errors
    /// [`StoreError`] on I/O or database errors, or a database of another
    /// format version ([`StoreError::Corrupt`]).
    pub fn open(dir: impl AsRef<Path>) -> OpenResult<RedbStore> {
        RedbStore::open_with(dir, RedbOptions::default())
    }

    /// Opens the store in `dir`, or creates one in a directory that holds
    /// none. Does work independent of the amount of data held (see the
    /// module docs, "Recovery"), plus one listing of the segment files.
    ///
    /// **Every file is accounted for first** (module docs, "A store knows
    /// its own files"): an index (`carrier.redb`) that is missing, empty or
    /// unformatted while the log holds records, a segment file the index
    /// does not know (an index older than its log), a segment the index
    /// records but that is gone, or a store of another id than
    /// [`RedbOptions::expect_store_id`] is refused with
    /// [`crate::OpenError::Damaged`], and nothing is written. A fresh store
    /// never truncates or reuses a segment file: its numbering starts after
    /// the highest id present. A panic of the storage engine on damaged
    /// pages is contained and reported the same way.
    ///
    /// # Errors
    /// As [`RedbStore::open`].
    pub fn open_with(dir: impl AsRef<Path>, options: RedbOptions) -> OpenResult<RedbStore> {
        let dir = dir.as_ref();
        crate::contain::contain(&format!("opening the store in {}", dir.display()), || {
            RedbStore::open_inner(dir, options)
        })
    }

    fn open_inner(dir: &Path, options: RedbOptions) -> OpenResult<RedbStore> {
        let fs = Arc::clone(&options.fs);
        let segments_dir = segment::segments_dir(dir);
        fs.create_dir_all(&segments_dir)?;
        let db_path = dir.join(INDEX_FILE);
        let (files, with_records) = survey(&*fs, &segments_dir, &db_path, &options)?;
        let db = open_db(&*fs, &db_path, options.cache_bytes)?;
        // The index's own name is durable before anything depends on it.
        fs.sync_dir(dir)?;
        let txn = begin(&db, options.quick_repair)?;
        for def in ALL_TABLES {
            txn.open_table(def).map_err(db_error)?;
        }
        let format = txn.get_with(META, META_FORMAT, |v| {
            Ok(v.try_into().map(u32::from_be_bytes).ok())
        })?;
        let fresh = format.is_none();
        if fresh && (!with_records.is_empty() || options.expect_store_id.is_some()) {
            // A redb file with no store in it (never committed, or reset).
            return Err(missing_index(
                &db_path,
                true,
                &with_records,
                options.expect_store_id,
            ));
        }
        match format {
            None | Some(Some(1)) => {
                put(&txn, META, META_FORMAT, &REDB_FORMAT.to_be_bytes())?;
            }
            Some(Some(REDB_FORMAT)) => {}
            Some(other) => {
                return Err(corrupt(format!("store format {other:?}, expected 1 or 2")).into());
            }
        }
        let store_id = settle_store_id(&txn, &db_path, options.expect_store_id)?;
        let seq_floor = get_u64(&txn, META, META_SEQ_FLOOR)?.unwrap_or(0);
        let gc = segments_to_reclaim(&txn, &files, fresh, &segments_dir)?;
        let previous = get_u64(&txn, META, META_ACTIVE)?;
        let active = match previous {
            // The log resumes in the previous active segment, after the
            // records redb already holds (or, for a format-1 store, after
            // its committed extent: nothing to replay).
            Some(id) => {
                let at = match applied(&txn)? {
                    Some((segment, at)) if segment == id => at,
                    _ => query::seg_stat(&txn, id)?.map_or(segment::HEADER_LEN, |s| s.end),
                };
                ActiveSegment::reopen(&*fs, &segments_dir, id, at)?
            }
            None => {
                let next = get_u64(&txn, META, META_NEXT_SEGMENT)?.unwrap_or(1);
                // The file first: if the transaction below never commits,
                // the orphan (a header only) sits at `next`, which the next
                // open or rotation adopts.
                let active = ActiveSegment::create(&*fs, &segments_dir, next)?;
                record_active(&txn, next)?;
                active
            }
        };
        txn.commit().map_err(db_error)?;
        for &id in &gc {
            segment::remove(&*fs, &segments_dir, id)?;
        }
        fs.sync_dir(&segments_dir)?;
        let files = HashMap::from([(active.id, Arc::clone(&active.file))]);
        // What the reopened segment holds up to `at` was synced by `reopen`.
        let through = (active.id, active.end());
        let store = RedbStore {
            db: RwLock::new(Some(Arc::new(db))),
            db_path,
            db_failed: AtomicBool::new(false),
            segments_dir,
            options,
            writer: Mutex::new(WriterState {
                active,
                deferred: Vec::new(),
                unlinked: gc,
                compaction_cursor: None,
                drained_undurable: Vec::new(),
                unchecked_ops: 0,
                unchecked_bytes: 0,
                void_pending: None,
            }),
            files: Mutex::new(files),
            store_id,
            seq_floor: SeqFloor::new(seq_floor),
            readers: Mutex::new(Readers::default()),
            challenges: ChallengeTable::default(),
            last_replay: Mutex::new(ReplayReport::default()),
            log: LogSync::new(through),
        };
        if previous.is_some() {
            // Replay what the log holds beyond redb's state, then seal the
            // segment and start the next one (every open does).
            let mut state = store.replay(lock(&store.writer))?;
            store.rotate(&mut state)?;
            // No snapshot exists yet: an empty previous segment goes now.
            store.collect_garbage(&mut state);
        }
        Ok(store)
    }
}

/// The segment files present `(id, length)` and those holding a record;
/// refuses a stray file, and a missing or empty index where the log holds
/// records or a store is expected.
fn survey(
    fs: &dyn StoreFs,
    segments_dir: &Path,
    db_path: &Path,
    options: &RedbOptions,
) -> OpenResult<SegmentFiles> {
    let index_len = fs.file_len(db_path)?;
    let (files, strays) = segment::scan(fs, segments_dir)?;
    if let Some(name) = strays.first() {
        return Err(damaged(format!(
            "{} holds {name:?}, which is not a segment file",
            segments_dir.display()
        )));
    }
    let with_records: Vec<u64> = files
        .iter()
        .filter(|(_, len)| *len > segment::HEADER_LEN)
        .map(|(id, _)| *id)
        .collect();
    let absent = index_len.is_none_or(|len| len == 0);
    if absent && (!with_records.is_empty() || options.expect_store_id.is_some()) {
        return Err(missing_index(
            db_path,
            index_len.is_some(),
            &with_records,
            options.expect_store_id,
        ));
    }
    Ok((files, with_records))
}

/// The store's id: the one it holds, checked against the one `expected`;
/// a fresh id for a store that holds none and none expected.
fn settle_store_id(
    txn: &WriteTransaction,
    db_path: &Path,
    expected: Option<StoreId>,
) -> OpenResult<StoreId> {
    let held_id = txn.get_with(META, META_STORE_ID, |v| {
        Ok(<[u8; 16]>::try_from(v).ok().map(StoreId))
    })?;
    let store_id = match (held_id.flatten(), expected) {
        (Some(held), Some(expected)) if held != expected => {
            return Err(damaged(format!(
                "{} holds store {held}, but this data dir's store is {expected} \
             (a store from another data dir, or one restored from another carrier's backup)",
                db_path.display()
            )));
        }
        (None, Some(expected)) => {
            return Err(damaged(format!(
                "{} holds a store without an id, but this data dir's store is {expected}",
                db_path.display()
            )));
        }
        (Some(held), _) => held,
        (None, None) => {
            // A fresh store, or one made before stores had ids.
            let id = StoreId::random();
            put(txn, META, META_STORE_ID, &id.0)?;
            id
        }
    };
    Ok(store_id)
}

/// The segment files present `(id, length)`, and the ids of those holding
/// a record.
type SegmentFiles = (Vec<(u64, u64)>, Vec<u64>);

/// The segments to unlink: those `segment_gc` lists and, for a fresh
/// store, every file present (headers only: nothing of a fresh store's may
/// collide with what is there, its log starts after the highest id
/// present). An existing store's files are accounted for instead.
fn segments_to_reclaim(
    txn: &WriteTransaction,
    files: &[(u64, u64)],
    fresh: bool,
    segments_dir: &Path,
) -> OpenResult<Vec<u64>> {
    let mut gc = Vec::new();
    txn.scan(SEGMENT_GC, (Bound::Unbounded, Bound::Unbounded), |k, _| {
        gc.push(u64_at(k, 0)?);
        Ok(true)
    })?;
    if fresh {
        // Nothing of a fresh store's may collide with what is there:
        // its log starts after the highest id present, and the files
        // present (headers only, checked above) are reclaimed.
        let next = files.last().map_or(1, |(id, _)| id + 1);
        put(txn, META, META_NEXT_SEGMENT, &next.to_be_bytes())?;
        for (id, _) in files {
            put(txn, SEGMENT_GC, &id.to_be_bytes(), &[])?;
            gc.push(*id);
        }
    } else {
        account_for_segments(txn, files, segments_dir)?;
    }
    Ok(gc)
}
