//! Row writes and reads both embedded stores share: a tombstone with its
//! eviction entry, held bindings by phase, quarantine records.

use super::*;

/// Installs a tombstone and its eviction entry (replacing an older one's);
/// returns whether the rkid had none.
pub(crate) fn put_tombstone(
    txn: &WriteTransaction,
    rkid: &Rkid,
    tombstone: &Tombstone,
) -> StoreResult<bool> {
    let fresh = match put(
        txn,
        TOMBSTONES,
        rkid.as_bytes(),
        &encode_tombstone(tombstone),
    )? {
        Some(old) => {
            let old = decode_tombstone(&old)?;
            del(txn, EVICTION, &eviction_key(old.released_at, rkid))?;
            false
        }
        None => true,
    };
    put(
        txn,
        EVICTION,
        &eviction_key(tombstone.released_at, rkid),
        &[],
    )?;
    Ok(fresh)
}

/// Removes a tombstone and its eviction entry.
pub(crate) fn remove_tombstone(
    txn: &WriteTransaction,
    rkid: &Rkid,
) -> StoreResult<Option<Tombstone>> {
    let Some(old) = del(txn, TOMBSTONES, rkid.as_bytes())? else {
        return Ok(None);
    };
    let old = decode_tombstone(&old)?;
    del(txn, EVICTION, &eviction_key(old.released_at, rkid))?;
    Ok(Some(old))
}

/// Held bindings by phase: one scan of `bindings`.
pub(crate) fn binding_phases(t: &impl Tables) -> StoreResult<BindingPhases> {
    let mut phases = BindingPhases::default();
    t.scan(BINDINGS, (Bound::Unbounded, Bound::Unbounded), |_, v| {
        match v.first() {
            Some(0) => phases.live += 1,
            Some(1) => phases.closing += 1,
            other => return Err(corrupt(format!("binding phase {other:?}"))),
        }
        Ok(true)
    })?;
    Ok(phases)
}

/// A quarantine record: id ‖ len ‖ admitted_at ‖ give_up_at ‖ detected_at
/// ‖ segment ‖ offset ‖ reason.
pub(crate) fn quarantine_value(
    deposit: &Deposit,
    at: Ms,
    segment: u64,
    offset: u64,
    reason: &str,
) -> Vec<u8> {
    cat(&[
        &deposit.id.0,
        &deposit.len.to_be_bytes(),
        &deposit.admitted_at.to_be_bytes(),
        &deposit.give_up_at.to_be_bytes(),
        &at.to_be_bytes(),
        &segment.to_be_bytes(),
        &offset.to_be_bytes(),
        reason.as_bytes(),
    ])
}

/// A `quarantine` row, named for the integrity report.
pub(crate) fn describe_quarantine(key: &[u8], v: &[u8]) -> StoreResult<String> {
    let len = v
        .get(32..36)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| corrupt("short quarantine record"))?;
    let reason = String::from_utf8_lossy(v.get(76..).unwrap_or_default());
    Ok(format!(
        "deposit seq {} ({len} bytes, segment {:016x} offset {}), quarantined at {} ms: {reason}",
        seq_of_key(key)?,
        u64_at(v, 60)?,
        u64_at(v, 68)?,
        u64_at(v, 52)?,
    ))
}
