//! The multi-row statements a write transaction's buffered rows become
//! (one `unnest` of column arrays per table).

use super::Statement;
use crate::postgres::codec::{self, DueKey, big};
use crate::{Binding, Deposit, StoreResult};
use rltp_proofs::multikey::Rkid;
use tokio_postgres::types::Type;

/// Bindings to upsert, by column.
#[derive(Default)]
pub(super) struct BindingColumns {
    pub(super) rkid: Vec<Vec<u8>>,
    deadline: Vec<Option<i64>>,
    generation: Vec<i64>,
    principal: Vec<Vec<u8>>,
    last: Vec<i64>,
}

impl BindingColumns {
    pub(super) fn push(&mut self, rkid: &Rkid, b: &Binding) -> StoreResult<()> {
        self.rkid.push(rkid.as_bytes().to_vec());
        self.deadline.push(codec::closing_deadline(b)?);
        self.generation.push(big(b.generation)?);
        self.principal.push(b.principal.to_vec());
        self.last.push(big(b.last_collection_at)?);
        Ok(())
    }

    pub(super) fn statement(self) -> Statement {
        Statement::new(
            "write bindings",
            "INSERT INTO rltp_bindings (rkid, closing_deadline, generation, principal, last_collection_at) \
             SELECT * FROM unnest($1::bytea[], $2::int8[], $3::int8[], $4::bytea[], $5::int8[]) \
             ON CONFLICT (rkid) DO UPDATE SET closing_deadline = EXCLUDED.closing_deadline, \
             generation = EXCLUDED.generation, principal = EXCLUDED.principal, \
             last_collection_at = EXCLUDED.last_collection_at",
        )
        .param(self.rkid, Type::BYTEA_ARRAY)
        .param(self.deadline, Type::INT8_ARRAY)
        .param(self.generation, Type::INT8_ARRAY)
        .param(self.principal, Type::BYTEA_ARRAY)
        .param(self.last, Type::INT8_ARRAY)
    }
}

/// Deposits to insert, by column.
#[derive(Default)]
pub(super) struct DepositColumns {
    rkid: Vec<Vec<u8>>,
    seq: Vec<i64>,
    id: Vec<Vec<u8>>,
    len: Vec<i32>,
    admitted: Vec<i64>,
    give_up: Vec<i64>,
    bytes: Vec<Vec<u8>>,
}

impl DepositColumns {
    pub(super) fn push(&mut self, rkid: &Rkid, d: &Deposit, bytes: Vec<u8>) -> StoreResult<()> {
        self.rkid.push(rkid.as_bytes().to_vec());
        self.seq.push(big(d.seq)?);
        self.id.push(d.id.0.to_vec());
        self.len.push(codec::len(d)?);
        self.admitted.push(big(d.admitted_at)?);
        self.give_up.push(big(d.give_up_at)?);
        self.bytes.push(bytes);
        Ok(())
    }

    pub(super) fn statement(self) -> Statement {
        Statement::new(
            "append deposits",
            "INSERT INTO rltp_deposits (rkid, seq, id, len, admitted_at, give_up_at, bytes) \
             SELECT * FROM unnest($1::bytea[], $2::int8[], $3::bytea[], $4::int4[], $5::int8[], \
             $6::int8[], $7::bytea[])",
        )
        .param(self.rkid, Type::BYTEA_ARRAY)
        .param(self.seq, Type::INT8_ARRAY)
        .param(self.id, Type::BYTEA_ARRAY)
        .param(self.len, Type::INT4_ARRAY)
        .param(self.admitted, Type::INT8_ARRAY)
        .param(self.give_up, Type::INT8_ARRAY)
        .param(self.bytes, Type::BYTEA_ARRAY)
    }
}

/// Due entries to insert or delete, by column.
#[derive(Default)]
pub(super) struct DueColumns {
    pub(super) at: Vec<i64>,
    tag: Vec<i16>,
    rkid: Vec<Vec<u8>>,
    seq: Vec<i64>,
    id: Vec<Vec<u8>>,
}

impl DueColumns {
    pub(super) fn push(&mut self, (at, tag, rkid, seq, id): DueKey) {
        self.at.push(at);
        self.tag.push(tag);
        self.rkid.push(rkid);
        self.seq.push(seq);
        self.id.push(id);
    }

    pub(super) fn statement(self, what: &'static str, sql: &'static str) -> Statement {
        Statement::new(what, sql)
            .param(self.at, Type::INT8_ARRAY)
            .param(self.tag, Type::INT2_ARRAY)
            .param(self.rkid, Type::BYTEA_ARRAY)
            .param(self.seq, Type::INT8_ARRAY)
            .param(self.id, Type::BYTEA_ARRAY)
    }
}
