//! The queries of [`crate::ReadTxn`] over the stored tables.

use super::*;

pub(crate) fn binding(t: &impl Tables, rkid: &Rkid) -> StoreResult<Option<Binding>> {
    t.get_with(BINDINGS, rkid.as_bytes(), decode_binding)
}
pub(crate) fn tombstone(t: &impl Tables, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
    t.get_with(TOMBSTONES, rkid.as_bytes(), decode_tombstone)
}
pub(crate) fn oldest_tombstone(t: &impl Tables) -> StoreResult<Option<(Rkid, Tombstone)>> {
    let Some(key) = first_key(t, EVICTION, (Bound::Unbounded, Bound::Unbounded))? else {
        return Ok(None);
    };
    let rkid = Rkid::from_bytes(arr32_at(&key, 8)?);
    match tombstone(t, &rkid)? {
        Some(found) => Ok(Some((rkid, found))),
        None => Err(corrupt("eviction entry without tombstone")),
    }
}
pub(crate) fn stored(t: &impl Tables, rkid: &Rkid, seq: u64) -> StoreResult<Option<Stored>> {
    t.get_with(DEPOSITS, &key_seq(rkid, seq), |v| decode_deposit(seq, v))
}
pub(crate) fn deposits(
    t: &impl Tables,
    rkid: &Rkid,
    after: Option<u64>,
    limit: usize,
) -> StoreResult<Vec<Deposit>> {
    let start = key_seq(rkid, after.map_or(0, |a| a.saturating_add(1)));
    let stop = key_seq(rkid, u64::MAX);
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    t.scan(
        DEPOSITS,
        (Bound::Included(&start), Bound::Included(&stop)),
        |k, v| {
            out.push(decode_deposit(seq_of_key(k)?, v)?.deposit);
            Ok(out.len() < limit)
        },
    )?;
    Ok(out)
}
pub(crate) fn deposit_by_id(
    t: &impl Tables,
    rkid: &Rkid,
    id: &DepositId,
) -> StoreResult<Option<Deposit>> {
    match get_u64(t, IDENTITY, &key_id(rkid, id))? {
        Some(seq) => Ok(stored(t, rkid, seq)?.map(|s| s.deposit)),
        None => Ok(None),
    }
}
pub(crate) fn queue(t: &impl Tables, rkid: &Rkid) -> StoreResult<QueueMeta> {
    Ok(t.get_with(QUEUES, rkid.as_bytes(), decode_queue)?
        .unwrap_or_default())
}
pub(crate) fn occupancy(t: &impl Tables) -> StoreResult<Occupancy> {
    Ok(t.get_with(META, META_OCCUPANCY, decode_occupancy)?
        .unwrap_or_default())
}
pub(crate) fn departure(
    t: &impl Tables,
    rkid: &Rkid,
    id: &DepositId,
) -> StoreResult<Option<DepartureRecord>> {
    t.get_with(DEPARTURES, &key_id(rkid, id), decode_departure)
}
pub(crate) fn due(t: &impl Tables, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let stop = upto.checked_add(1).map(u64::to_be_bytes);
    let end = match &stop {
        Some(stop) => Bound::Excluded(&stop[..]),
        None => Bound::Unbounded,
    };
    t.scan(DUE, (Bound::Unbounded, end), |k, _| {
        out.push(decode_due(k)?);
        Ok(out.len() < limit)
    })?;
    Ok(out)
}
pub(crate) fn next_due(t: &impl Tables) -> StoreResult<Option<Ms>> {
    match first_key(t, DUE, (Bound::Unbounded, Bound::Unbounded))? {
        Some(key) => u64_at(&key, 0).map(Some),
        None => Ok(None),
    }
}
pub(crate) fn declaration(t: &impl Tables) -> StoreResult<Option<DeclarationRecord>> {
    t.get_with(META, META_DECLARATION, |v| {
        Ok(DeclarationRecord {
            revision: u64_at(v, 0)?,
            document: v.get(8..).unwrap_or_default().to_vec(),
        })
    })
}
pub(crate) fn seg_stat(t: &impl Tables, segment: u64) -> StoreResult<Option<SegStat>> {
    t.get_with(SEGMENTS, &segment.to_be_bytes(), decode_seg)
}
