//! The store's reads as SQL, one function each, shared by read snapshots
//! and write transactions. Every statement is sent with its parameter types
//! (`query_typed`): one round trip, no prepare step.

use super::codec::{self, big, big_clamped, pg_error};
use crate::{
    Binding, BindingPhases, DeclarationRecord, DepartureRecord, Deposit, DepositId, Due, Ms,
    Occupancy, StoreError, StoreResult, Tombstone,
};
use rltp_proofs::multikey::Rkid;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Row};

async fn rows(
    client: &Client,
    what: &str,
    sql: &str,
    params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
) -> StoreResult<Vec<Row>> {
    client
        .query_typed(sql, params)
        .await
        .map_err(|e| pg_error(what, e))
}

async fn one(
    client: &Client,
    what: &str,
    sql: &str,
    params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
) -> StoreResult<Option<Row>> {
    Ok(rows(client, what, sql, params).await?.into_iter().next())
}

pub(super) async fn binding(client: &Client, rkid: &Rkid) -> StoreResult<Option<Binding>> {
    let key = rkid.as_bytes().as_slice();
    one(
        client,
        "read binding",
        "SELECT closing_deadline, generation, principal, last_collection_at \
         FROM rltp_bindings WHERE rkid = $1",
        &[(&key, Type::BYTEA)],
    )
    .await?
    .map(|r| codec::binding(&r))
    .transpose()
}

pub(super) async fn tombstone(client: &Client, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
    let key = rkid.as_bytes().as_slice();
    one(
        client,
        "read tombstone",
        "SELECT generation, released_at FROM rltp_tombstones WHERE rkid = $1",
        &[(&key, Type::BYTEA)],
    )
    .await?
    .map(|r| codec::tombstone(&r))
    .transpose()
}

pub(super) async fn oldest_tombstone(client: &Client) -> StoreResult<Option<(Rkid, Tombstone)>> {
    one(
        client,
        "read eviction order",
        "SELECT rkid, generation, released_at FROM rltp_tombstones \
         ORDER BY released_at, rkid LIMIT 1",
        &[],
    )
    .await?
    .map(|r| {
        Ok((
            codec::rkid(r.get::<_, &[u8]>("rkid"))?,
            codec::tombstone(&r)?,
        ))
    })
    .transpose()
}

pub(super) async fn deposits(
    client: &Client,
    rkid: &Rkid,
    after: Option<u64>,
    limit: usize,
) -> StoreResult<Vec<Deposit>> {
    let key = rkid.as_bytes().as_slice();
    let after = after.map_or(0, big_clamped);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    rows(
        client,
        "read deposits",
        "SELECT seq, id, len, admitted_at, give_up_at FROM rltp_deposits \
         WHERE rkid = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        &[
            (&key, Type::BYTEA),
            (&after, Type::INT8),
            (&limit, Type::INT8),
        ],
    )
    .await?
    .iter()
    .map(codec::deposit)
    .collect()
}

pub(super) async fn deposit_by_id(
    client: &Client,
    rkid: &Rkid,
    id: &DepositId,
) -> StoreResult<Option<Deposit>> {
    let (key, id) = (rkid.as_bytes().as_slice(), id.0.as_slice());
    one(
        client,
        "read deposit identity",
        "SELECT seq, id, len, admitted_at, give_up_at FROM rltp_deposits \
         WHERE rkid = $1 AND id = $2",
        &[(&key, Type::BYTEA), (&id, Type::BYTEA)],
    )
    .await?
    .map(|r| codec::deposit(&r))
    .transpose()
}

pub(super) async fn deposit_by_seq(
    client: &Client,
    rkid: &Rkid,
    seq: u64,
) -> StoreResult<Option<Deposit>> {
    let key = rkid.as_bytes().as_slice();
    let seq = big(seq)?;
    one(
        client,
        "read deposit",
        "SELECT seq, id, len, admitted_at, give_up_at FROM rltp_deposits \
         WHERE rkid = $1 AND seq = $2",
        &[(&key, Type::BYTEA), (&seq, Type::INT8)],
    )
    .await?
    .map(|r| codec::deposit(&r))
    .transpose()
}

/// The deposits at `(rkid, seq)` keys (those held), in one statement.
pub(super) async fn deposits_by_seq(
    client: &Client,
    rkids: Vec<Vec<u8>>,
    seqs: Vec<i64>,
) -> StoreResult<Vec<(Rkid, Deposit)>> {
    rows(
        client,
        "read deposits by seq",
        "SELECT d.rkid, d.seq, d.id, d.len, d.admitted_at, d.give_up_at FROM rltp_deposits d \
         JOIN unnest($1::bytea[], $2::int8[]) AS k(rkid, seq) ON d.rkid = k.rkid AND d.seq = k.seq",
        &[(&rkids, Type::BYTEA_ARRAY), (&seqs, Type::INT8_ARRAY)],
    )
    .await?
    .iter()
    .map(|r| Ok((codec::rkid(r.get::<_, &[u8]>("rkid"))?, codec::deposit(r)?)))
    .collect()
}

/// The bytes of a held deposit, checked against its id: a mismatch is
/// [`StoreError::Corrupt`] (quarantined by the engine), never wrong bytes.
pub(super) async fn deposit_bytes(
    client: &Client,
    rkid: &Rkid,
    deposit: &Deposit,
) -> StoreResult<Vec<u8>> {
    let key = rkid.as_bytes().as_slice();
    let seq = big(deposit.seq)?;
    let row = one(
        client,
        "read deposit bytes",
        "SELECT bytes FROM rltp_deposits WHERE rkid = $1 AND seq = $2",
        &[(&key, Type::BYTEA), (&seq, Type::INT8)],
    )
    .await?
    .ok_or_else(|| StoreError::Corrupt(format!("no bytes for deposit {}", deposit.seq)))?;
    checked(row.get::<_, Vec<u8>>(0), deposit)
}

/// `bytes` if they are the deposit's (length and id).
pub(super) fn checked(bytes: Vec<u8>, deposit: &Deposit) -> StoreResult<Vec<u8>> {
    if bytes.len() != deposit.len as usize || DepositId::of(&bytes) != deposit.id {
        return Err(StoreError::Corrupt(format!(
            "deposit {} bytes do not match their id",
            deposit.seq
        )));
    }
    Ok(bytes)
}

/// A queue's counters: (the highest `seq` ever handed out, bytes held).
pub(super) async fn queue(client: &Client, rkid: &Rkid) -> StoreResult<Option<(u64, u64)>> {
    let key = rkid.as_bytes().as_slice();
    one(
        client,
        "read queue",
        "SELECT last_seq, bytes FROM rltp_queues WHERE rkid = $1",
        &[(&key, Type::BYTEA)],
    )
    .await?
    .map(|r| {
        Ok((
            codec::unsigned(r.get(0), "last_seq")?,
            codec::unsigned(r.get(1), "queue bytes")?,
        ))
    })
    .transpose()
}

/// The global counters: `rltp_occupancy`'s plus every lane's share
/// ([`super::escrow`]: the counters are sharded), and the quarantined
/// count likewise. The elastic bytes read never below 0 (as every
/// backend's bookkeeping keeps them).
pub(super) async fn occupancy(client: &Client) -> StoreResult<(Occupancy, u64)> {
    let sql = "SELECT o.total_bytes + l.total_bytes, o.bindings + l.bindings, \
                      o.deposits + l.deposits, o.tombstones, \
                      greatest(o.elastic_bytes + l.elastic_bytes, 0), o.quarantined + l.quarantined \
               FROM rltp_occupancy o, \
                    (SELECT coalesce(sum(total_bytes), 0)::int8 AS total_bytes, \
                            coalesce(sum(bindings), 0)::int8 AS bindings, \
                            coalesce(sum(deposits), 0)::int8 AS deposits, \
                            coalesce(sum(elastic_bytes), 0)::int8 AS elastic_bytes, \
                            coalesce(sum(quarantined), 0)::int8 AS quarantined \
                     FROM rltp_lanes) l \
               WHERE o.id = 1";
    let row = one(client, "read occupancy", sql, &[])
        .await?
        .ok_or_else(|| StoreError::Corrupt("rltp_occupancy has no row".into()))?;
    let u = |i: usize, what: &str| codec::unsigned(row.get(i), what);
    Ok((
        Occupancy {
            total_bytes: u(0, "total_bytes")?,
            bindings: u(1, "bindings")?,
            deposits: u(2, "deposits")?,
            tombstones: u(3, "tombstones")?,
            elastic_bytes: u(4, "elastic_bytes")?,
        },
        u(5, "quarantined")?,
    ))
}

pub(super) async fn departure(
    client: &Client,
    rkid: &Rkid,
    id: &DepositId,
) -> StoreResult<Option<DepartureRecord>> {
    let (key, id) = (rkid.as_bytes().as_slice(), id.0.as_slice());
    one(
        client,
        "read departure",
        "SELECT concluded, forget_at FROM rltp_departures WHERE rkid = $1 AND id = $2",
        &[(&key, Type::BYTEA), (&id, Type::BYTEA)],
    )
    .await?
    .map(|r| codec::departure(&r))
    .transpose()
}

pub(super) async fn due(client: &Client, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
    let upto = codec::due_at(upto);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    rows(
        client,
        "read due index",
        "SELECT at, tag, rkid, seq, id FROM rltp_due WHERE at <= $1 \
         ORDER BY at, tag, rkid, seq, id LIMIT $2",
        &[(&upto, Type::INT8), (&limit, Type::INT8)],
    )
    .await?
    .iter()
    .map(codec::due)
    .collect()
}

pub(super) async fn next_due(client: &Client) -> StoreResult<Option<Ms>> {
    one(
        client,
        "read next due",
        "SELECT at FROM rltp_due ORDER BY at LIMIT 1",
        &[],
    )
    .await?
    .map(|r| Ok(codec::due_at_of(r.get(0))))
    .transpose()
}

/// A `u64` of `rltp_meta` (absent: 0).
pub(super) async fn meta_u64(client: &Client, name: &str) -> StoreResult<u64> {
    match one(
        client,
        "read meta",
        "SELECT value FROM rltp_meta WHERE name = $1",
        &[(&name, Type::TEXT)],
    )
    .await?
    {
        Some(row) => codec::meta_u64(row.get(0), name),
        None => Ok(0),
    }
}

pub(super) async fn declaration(client: &Client) -> StoreResult<Option<DeclarationRecord>> {
    let Some(row) = one(
        client,
        "read declaration",
        "SELECT value FROM rltp_meta WHERE name = 'declaration'",
        &[],
    )
    .await?
    else {
        return Ok(None);
    };
    let value: &[u8] = row.get(0);
    let (revision, document) = value
        .split_first_chunk::<8>()
        .ok_or_else(|| StoreError::Corrupt("meta declaration shorter than 8 bytes".into()))?;
    Ok(Some(DeclarationRecord {
        revision: u64::from_be_bytes(*revision),
        document: document.to_vec(),
    }))
}

pub(super) async fn binding_phases(client: &Client) -> StoreResult<BindingPhases> {
    let row = one(
        client,
        "count bindings",
        "SELECT count(*) FILTER (WHERE closing_deadline IS NULL), \
                count(*) FILTER (WHERE closing_deadline IS NOT NULL) FROM rltp_bindings",
        &[],
    )
    .await?
    .ok_or_else(|| StoreError::Postgres("count bindings: no row".into()))?;
    Ok(BindingPhases {
        live: codec::unsigned(row.get(0), "live count")?,
        closing: codec::unsigned(row.get(1), "closing count")?,
    })
}

/// What a batch's operations will read, for many queues at once: their
/// bindings, tombstones and counters, and the deposits named by id.
#[derive(Debug, Default)]
pub(super) struct Prefetched {
    pub(super) bindings: Vec<(Rkid, Binding)>,
    pub(super) tombstones: Vec<(Rkid, Tombstone)>,
    pub(super) queues: Vec<(Rkid, (u64, u64))>,
    pub(super) deposits: Vec<(Rkid, Deposit)>,
}

/// Reads, in three pipelined statements, the rows [`Prefetched`] holds.
pub(super) async fn prefetch(
    client: &Client,
    rkids: Vec<Vec<u8>>,
    id_rkids: Vec<Vec<u8>>,
    ids: Vec<Vec<u8>>,
) -> StoreResult<Prefetched> {
    let by_rkid = [(
        &rkids as &(dyn tokio_postgres::types::ToSql + Sync),
        Type::BYTEA_ARRAY,
    )];
    let by_id = [
        (
            &id_rkids as &(dyn tokio_postgres::types::ToSql + Sync),
            Type::BYTEA_ARRAY,
        ),
        (
            &ids as &(dyn tokio_postgres::types::ToSql + Sync),
            Type::BYTEA_ARRAY,
        ),
    ];
    let bindings = rows(
        client,
        "prefetch bindings",
        "SELECT rkid, closing_deadline, generation, principal, last_collection_at \
         FROM rltp_bindings WHERE rkid = ANY($1)",
        &by_rkid,
    );
    let tombstones = rows(
        client,
        "prefetch tombstones",
        "SELECT rkid, generation, released_at FROM rltp_tombstones WHERE rkid = ANY($1)",
        &by_rkid,
    );
    let queues = rows(
        client,
        "prefetch queues",
        "SELECT rkid, last_seq, bytes FROM rltp_queues WHERE rkid = ANY($1)",
        &by_rkid,
    );
    let deposits = rows(
        client,
        "prefetch deposits",
        "SELECT d.rkid, d.seq, d.id, d.len, d.admitted_at, d.give_up_at FROM rltp_deposits d \
         JOIN unnest($1::bytea[], $2::bytea[]) AS k(rkid, id) ON d.rkid = k.rkid AND d.id = k.id",
        &by_id,
    );
    let (bindings, tombstones, queues, deposits) =
        futures_util::future::try_join4(bindings, tombstones, queues, deposits).await?;
    let key = |r: &Row| codec::rkid(r.get::<_, &[u8]>("rkid"));
    Ok(Prefetched {
        bindings: bindings
            .iter()
            .map(|r| Ok((key(r)?, codec::binding(r)?)))
            .collect::<StoreResult<_>>()?,
        tombstones: tombstones
            .iter()
            .map(|r| Ok((key(r)?, codec::tombstone(r)?)))
            .collect::<StoreResult<_>>()?,
        queues: queues
            .iter()
            .map(|r| {
                Ok((
                    key(r)?,
                    (
                        codec::unsigned(r.get("last_seq"), "last_seq")?,
                        codec::unsigned(r.get("bytes"), "queue bytes")?,
                    ),
                ))
            })
            .collect::<StoreResult<_>>()?,
        deposits: deposits
            .iter()
            .map(|r| Ok((key(r)?, codec::deposit(r)?)))
            .collect::<StoreResult<_>>()?,
    })
}
