//! Rows ↔ the store's model. Integers are `bigint`: a `u64` above
//! `i64::MAX` is refused ([`StoreError::Corrupt`]), never wrapped, and a
//! negative stored value is damage.

use crate::{
    Binding, Departure, DepartureRecord, Deposit, DepositId, Due, Ms, Phase, StoreError,
    StoreResult, Tombstone,
};
use rltp_proofs::multikey::Rkid;
use tokio_postgres::Row;

/// `v` as a `bigint`.
pub(super) fn big(v: u64) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{v} does not fit a bigint")))
}

/// `v` as a `bigint`, clamped (for range bounds such as `due(Ms::MAX, …)`).
pub(super) fn big_clamped(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A stored `bigint` as `u64`.
pub(super) fn unsigned(v: i64, what: &str) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {what} {v}")))
}

fn bytes32(bytes: &[u8], what: &str) -> StoreResult<[u8; 32]> {
    <[u8; 32]>::try_from(bytes)
        .map_err(|_| StoreError::Corrupt(format!("{what} of {} bytes", bytes.len())))
}

/// A stored `rkid`.
pub(super) fn rkid(bytes: &[u8]) -> StoreResult<Rkid> {
    bytes32(bytes, "rkid").map(Rkid::from_bytes)
}

/// A stored deposit id.
pub(super) fn deposit_id(bytes: &[u8]) -> StoreResult<DepositId> {
    bytes32(bytes, "deposit id").map(DepositId)
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, column: &str) -> StoreResult<T> {
    row.try_get(column)
        .map_err(|e| StoreError::Corrupt(format!("column {column}: {e}")))
}

/// A `rltp_bindings` row.
pub(super) fn binding(row: &Row) -> StoreResult<Binding> {
    let deadline: Option<i64> = get(row, "closing_deadline")?;
    Ok(Binding {
        phase: match deadline {
            None => Phase::Live,
            Some(d) => Phase::Closing {
                deadline: unsigned(d, "deadline")?,
            },
        },
        generation: unsigned(get(row, "generation")?, "generation")?,
        principal: bytes32(get::<&[u8]>(row, "principal")?, "principal")?,
        last_collection_at: unsigned(get(row, "last_collection_at")?, "last_collection_at")?,
    })
}

/// A binding's `closing_deadline` column.
pub(super) fn closing_deadline(binding: &Binding) -> StoreResult<Option<i64>> {
    match binding.phase {
        Phase::Live => Ok(None),
        Phase::Closing { deadline } => big(deadline).map(Some),
    }
}

/// A `rltp_tombstones` row.
pub(super) fn tombstone(row: &Row) -> StoreResult<Tombstone> {
    Ok(Tombstone {
        generation: unsigned(get(row, "generation")?, "generation")?,
        released_at: unsigned(get(row, "released_at")?, "released_at")?,
    })
}

/// A `rltp_deposits` row (without its bytes).
pub(super) fn deposit(row: &Row) -> StoreResult<Deposit> {
    let len: i32 = get(row, "len")?;
    Ok(Deposit {
        seq: unsigned(get(row, "seq")?, "seq")?,
        id: deposit_id(get::<&[u8]>(row, "id")?)?,
        len: u32::try_from(len).map_err(|_| StoreError::Corrupt(format!("deposit len {len}")))?,
        admitted_at: unsigned(get(row, "admitted_at")?, "admitted_at")?,
        give_up_at: unsigned(get(row, "give_up_at")?, "give_up_at")?,
    })
}

/// A deposit's `len` column.
pub(super) fn len(deposit: &Deposit) -> StoreResult<i32> {
    i32::try_from(deposit.len)
        .map_err(|_| StoreError::Corrupt(format!("deposit of {} bytes", deposit.len)))
}

/// A `rltp_departures` row.
pub(super) fn departure(row: &Row) -> StoreResult<DepartureRecord> {
    let concluded: bool = get(row, "concluded")?;
    Ok(DepartureRecord {
        departure: if concluded {
            Departure::Concluded
        } else {
            Departure::GivenUp
        },
        forget_at: unsigned(get(row, "forget_at")?, "forget_at")?,
    })
}

/// The key columns of a due entry: `(at, tag, rkid, seq, id)`, ordered
/// exactly like `(Ms, Due)` (`at` biased by [`due_at`]; variant order,
/// then the variant's fields; absent fields are 0 and the empty string,
/// which sort first).
pub(super) type DueKey = (i64, i16, Vec<u8>, i64, Vec<u8>);

/// A due instant as a `bigint` that sorts as the `u64` does (the full
/// range, `Ms::MAX` included): the value minus 2^63.
pub(super) fn due_at(at: Ms) -> i64 {
    i64::from_ne_bytes((at ^ (1 << 63)).to_ne_bytes())
}

/// The inverse of [`due_at`].
pub(super) fn due_at_of(v: i64) -> Ms {
    u64::from_ne_bytes(v.to_ne_bytes()) ^ (1 << 63)
}

/// The key of `(at, due)`.
pub(super) fn due_key(at: Ms, due: &Due) -> StoreResult<DueKey> {
    let at = due_at(at);
    Ok(match due {
        Due::OrphanExpiry(r) => (at, 0, r.as_bytes().to_vec(), 0, Vec::new()),
        Due::Deadline(r) => (at, 1, r.as_bytes().to_vec(), 0, Vec::new()),
        Due::GiveUp(r, seq) => (at, 2, r.as_bytes().to_vec(), big(*seq)?, Vec::new()),
        Due::Forget(r, id) => (at, 3, r.as_bytes().to_vec(), 0, id.0.to_vec()),
    })
}

/// A `rltp_due` row.
pub(super) fn due(row: &Row) -> StoreResult<(Ms, Due)> {
    let at = due_at_of(get(row, "at")?);
    let tag: i16 = get(row, "tag")?;
    let r = rkid(get::<&[u8]>(row, "rkid")?)?;
    let due = match tag {
        0 => Due::OrphanExpiry(r),
        1 => Due::Deadline(r),
        2 => Due::GiveUp(r, unsigned(get(row, "seq")?, "seq")?),
        3 => Due::Forget(r, deposit_id(get::<&[u8]>(row, "id")?)?),
        other => return Err(StoreError::Corrupt(format!("due tag {other}"))),
    };
    Ok((at, due))
}

/// A `u64` meta value.
pub(super) fn meta_u64(bytes: &[u8], what: &str) -> StoreResult<u64> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| StoreError::Corrupt(format!("meta {what} of {} bytes", bytes.len())))
}

/// A PostgreSQL error and the statement (or step) it failed, with its
/// SQLSTATE when the server sent one: the message reads
/// `postgres <what>: <error> (SQLSTATE <code>)`, the error stays the source.
#[derive(Debug)]
pub(super) struct PgFailure {
    what: String,
    source: tokio_postgres::Error,
}

impl std::fmt::Display for PgFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "postgres {}: {}", self.what, self.source)?;
        match self.source.code() {
            Some(code) => write!(f, " (SQLSTATE {})", code.code()),
            None => Ok(()),
        }
    }
}

impl std::error::Error for PgFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Maps a PostgreSQL error to a store error (an engine fault: answered
/// `unavailable`, PROTOCOL.md §12), naming the SQLSTATE when there is one;
/// a serialization failure or a deadlock is a [`StoreError::Conflict`]
/// (the writer runs the batch again).
pub(super) fn pg_error(what: &str, e: tokio_postgres::Error) -> StoreError {
    use tokio_postgres::error::SqlState;
    let conflict = e.code().is_some_and(|code| {
        *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
    });
    let failure = Box::new(PgFailure {
        what: what.to_owned(),
        source: e,
    });
    if conflict {
        StoreError::Conflict(failure)
    } else {
        StoreError::Postgres(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_keys_sort_like_the_model() {
        let r1 = Rkid::from_bytes([1; 32]);
        let r2 = Rkid::from_bytes([2; 32]);
        let mut model = [
            (5, Due::Forget(r1, DepositId([9; 32]))),
            (5, Due::GiveUp(r1, 3)),
            (5, Due::GiveUp(r1, 2)),
            (5, Due::Deadline(r2)),
            (5, Due::OrphanExpiry(r2)),
            (5, Due::OrphanExpiry(r1)),
            (4, Due::Forget(r2, DepositId([0; 32]))),
        ];
        let mut keys: Vec<DueKey> = model
            .iter()
            .map(|(at, d)| due_key(*at, d).unwrap())
            .collect();
        model.sort();
        keys.sort();
        let expected: Vec<DueKey> = model
            .iter()
            .map(|(at, d)| due_key(*at, d).unwrap())
            .collect();
        assert_eq!(keys, expected);
        assert!(big(u64::MAX).is_err());
        for at in [
            0,
            1,
            99,
            1 << 62,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(due_at_of(due_at(at)), at);
        }
        assert!(due_at(0) < due_at(1) && due_at((1 << 63) - 1) < due_at(1 << 63));
        assert!(due_at(u64::MAX - 1) < due_at(u64::MAX));
        assert_eq!(big_clamped(u64::MAX), i64::MAX);
        assert!(unsigned(-1, "x").is_err());
    }
}
