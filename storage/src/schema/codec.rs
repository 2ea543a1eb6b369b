//! The byte encodings of the redb tables' keys and values (big-endian,
//! so that redb's key order is the numeric order: [`super`] docs).

use super::*;

/// The segment number that marks a deposit stored inline in redb.
pub(crate) const INLINE: u64 = u64::MAX;
/// Length of the fixed part of a `deposits` value.
pub(crate) const DEPOSIT_HEADER: usize = 68;

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> StoreResult<u64> {
    bytes
        .get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| corrupt(format!("short record: {} bytes", bytes.len())))
}

pub(crate) fn arr32_at(bytes: &[u8], at: usize) -> StoreResult<[u8; 32]> {
    bytes
        .get(at..at + 32)
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| corrupt(format!("short record: {} bytes", bytes.len())))
}

pub(crate) fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

pub(crate) fn key_seq(rkid: &Rkid, seq: u64) -> Vec<u8> {
    cat(&[rkid.as_bytes(), &seq.to_be_bytes()])
}

pub(crate) fn key_id(rkid: &Rkid, id: &DepositId) -> Vec<u8> {
    cat(&[rkid.as_bytes(), &id.0])
}

pub(crate) fn encode_binding(b: &Binding) -> Vec<u8> {
    let (phase, deadline) = match b.phase {
        Phase::Live => (0u8, 0u64),
        Phase::Closing { deadline } => (1, deadline),
    };
    cat(&[
        &[phase],
        &deadline.to_be_bytes(),
        &b.generation.to_be_bytes(),
        &b.principal,
        &b.last_collection_at.to_be_bytes(),
    ])
}

pub(crate) fn decode_binding(v: &[u8]) -> StoreResult<Binding> {
    let phase = match v.first() {
        Some(0) => Phase::Live,
        Some(1) => Phase::Closing {
            deadline: u64_at(v, 1)?,
        },
        other => return Err(corrupt(format!("binding phase {other:?}"))),
    };
    Ok(Binding {
        phase,
        generation: u64_at(v, 9)?,
        principal: arr32_at(v, 17)?,
        last_collection_at: u64_at(v, 49)?,
    })
}

pub(crate) fn encode_tombstone(t: &Tombstone) -> Vec<u8> {
    cat(&[&t.generation.to_be_bytes(), &t.released_at.to_be_bytes()])
}

pub(crate) fn decode_tombstone(v: &[u8]) -> StoreResult<Tombstone> {
    Ok(Tombstone {
        generation: u64_at(v, 0)?,
        released_at: u64_at(v, 8)?,
    })
}

pub(crate) fn eviction_key(released_at: Ms, rkid: &Rkid) -> Vec<u8> {
    cat(&[&released_at.to_be_bytes(), rkid.as_bytes()])
}

/// A `deposits` value: metadata plus where the bytes are.
pub(crate) struct Stored {
    pub(crate) deposit: Deposit,
    pub(crate) segment: u64,
    pub(crate) offset: u64,
}

pub(crate) fn encode_deposit(d: &Deposit, segment: u64, offset: u64, inline: &[u8]) -> Vec<u8> {
    cat(&[
        &segment.to_be_bytes(),
        &offset.to_be_bytes(),
        &d.len.to_be_bytes(),
        &d.id.0,
        &d.admitted_at.to_be_bytes(),
        &d.give_up_at.to_be_bytes(),
        inline,
    ])
}

pub(crate) fn decode_deposit(seq: u64, v: &[u8]) -> StoreResult<Stored> {
    let len = v
        .get(16..20)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| corrupt("short deposit record"))?;
    Ok(Stored {
        deposit: Deposit {
            seq,
            id: DepositId(arr32_at(v, 20)?),
            len,
            admitted_at: u64_at(v, 52)?,
            give_up_at: u64_at(v, 60)?,
        },
        segment: u64_at(v, 0)?,
        offset: u64_at(v, 8)?,
    })
}

pub(crate) fn seq_of_key(k: &[u8]) -> StoreResult<u64> {
    u64_at(k, 32)
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueueMeta {
    pub(crate) next_seq: u64,
    pub(crate) bytes: u64,
}

pub(crate) fn encode_queue(q: &QueueMeta) -> Vec<u8> {
    cat(&[&q.next_seq.to_be_bytes(), &q.bytes.to_be_bytes()])
}

pub(crate) fn decode_queue(v: &[u8]) -> StoreResult<QueueMeta> {
    Ok(QueueMeta {
        next_seq: u64_at(v, 0)?,
        bytes: u64_at(v, 8)?,
    })
}

pub(crate) fn encode_departure(r: &DepartureRecord) -> Vec<u8> {
    let kind = match r.departure {
        Departure::Concluded => 0u8,
        Departure::GivenUp => 1,
    };
    cat(&[&[kind], &r.forget_at.to_be_bytes()])
}

pub(crate) fn decode_departure(v: &[u8]) -> StoreResult<DepartureRecord> {
    let departure = match v.first() {
        Some(0) => Departure::Concluded,
        Some(1) => Departure::GivenUp,
        other => return Err(corrupt(format!("departure kind {other:?}"))),
    };
    Ok(DepartureRecord {
        departure,
        forget_at: u64_at(v, 1)?,
    })
}

pub(crate) fn due_key(at: Ms, due: &Due) -> Vec<u8> {
    let at = at.to_be_bytes();
    match due {
        Due::OrphanExpiry(rkid) => cat(&[&at, &[0], rkid.as_bytes()]),
        Due::Deadline(rkid) => cat(&[&at, &[1], rkid.as_bytes()]),
        Due::GiveUp(rkid, seq) => cat(&[&at, &[2], rkid.as_bytes(), &seq.to_be_bytes()]),
        Due::Forget(rkid, id) => cat(&[&at, &[3], rkid.as_bytes(), &id.0]),
    }
}

pub(crate) fn decode_due(k: &[u8]) -> StoreResult<(Ms, Due)> {
    let at = u64_at(k, 0)?;
    let rkid = Rkid::from_bytes(arr32_at(k, 9)?);
    let due = match (k.get(8), k.len()) {
        (Some(0), 41) => Due::OrphanExpiry(rkid),
        (Some(1), 41) => Due::Deadline(rkid),
        (Some(2), 49) => Due::GiveUp(rkid, u64_at(k, 41)?),
        (Some(3), 73) => Due::Forget(rkid, DepositId(arr32_at(k, 41)?)),
        (tag, len) => return Err(corrupt(format!("due entry tag {tag:?}, {len} bytes"))),
    };
    Ok((at, due))
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SegStat {
    pub(crate) live: u64,
    pub(crate) bytes: u64,
    pub(crate) end: u64,
}

pub(crate) fn encode_seg(s: &SegStat) -> Vec<u8> {
    cat(&[
        &s.live.to_be_bytes(),
        &s.bytes.to_be_bytes(),
        &s.end.to_be_bytes(),
    ])
}

pub(crate) fn decode_seg(v: &[u8]) -> StoreResult<SegStat> {
    Ok(SegStat {
        live: u64_at(v, 0)?,
        bytes: u64_at(v, 8)?,
        end: u64_at(v, 16)?,
    })
}

pub(crate) fn encode_occupancy(o: &Occupancy) -> Vec<u8> {
    cat(&[
        &o.total_bytes.to_be_bytes(),
        &o.bindings.to_be_bytes(),
        &o.deposits.to_be_bytes(),
        &o.tombstones.to_be_bytes(),
        &o.elastic_bytes.to_be_bytes(),
    ])
}

pub(crate) fn decode_occupancy(v: &[u8]) -> StoreResult<Occupancy> {
    Ok(Occupancy {
        total_bytes: u64_at(v, 0)?,
        bindings: u64_at(v, 8)?,
        deposits: u64_at(v, 16)?,
        tombstones: u64_at(v, 24)?,
        elastic_bytes: u64_at(v, 32)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;

    fn rkid(n: u8) -> Rkid {
        Rkid::from_bytes([n; 32])
    }

    #[test]
    fn due_keys_sort_like_the_model() {
        let dues = [
            (5, Due::Forget(rkid(0), DepositId([9; 32]))),
            (5, Due::OrphanExpiry(rkid(7))),
            (5, Due::GiveUp(rkid(1), 2)),
            (5, Due::GiveUp(rkid(1), 256)),
            (5, Due::Deadline(rkid(0))),
            (4, Due::Forget(rkid(255), DepositId([0; 32]))),
            (256, Due::OrphanExpiry(rkid(0))),
        ];
        let mut by_model = dues.to_vec();
        by_model.sort();
        let mut by_key = dues.to_vec();
        by_key.sort_by_key(|(at, due)| due_key(*at, due));
        assert_eq!(by_model, by_key);
        for (at, due) in dues {
            assert_eq!(decode_due(&due_key(at, &due)).ok(), Some((at, due)));
        }
    }

    #[test]
    fn records_round_trip() -> StoreResult<()> {
        let binding = Binding {
            phase: Phase::Closing { deadline: 77 },
            generation: (1 << 53) - 1,
            principal: [3; 32],
            last_collection_at: 12,
        };
        assert_eq!(encode_binding(&binding).len(), 57);
        assert_eq!(decode_binding(&encode_binding(&binding))?, binding);
        let deposit = Deposit {
            seq: 9,
            id: DepositId([4; 32]),
            len: 1024,
            admitted_at: 5,
            give_up_at: 6,
        };
        let value = encode_deposit(&deposit, 3, 16, &[]);
        assert_eq!(value.len(), DEPOSIT_HEADER);
        let stored = decode_deposit(9, &value)?;
        assert_eq!(
            (stored.deposit, stored.segment, stored.offset),
            (deposit, 3, 16)
        );
        assert!(matches!(
            decode_binding(&[2; 57]),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            decode_deposit(1, &[0; 10]),
            Err(StoreError::Corrupt(_))
        ));
        Ok(())
    }
}
