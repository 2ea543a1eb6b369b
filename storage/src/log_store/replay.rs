//! Applying replayed log records (`recovery.rs`, step 4; the integrity
//! check's rebuild; redb's catch-up after a reopen): each operation to the
//! in-memory index, to redb, or both, by where it lies.

use super::index::Index;
use super::location;
use super::record::{self, tag};
use crate::cursor::Cursor;
use crate::failure::corrupt;
use crate::schema::{self as rs, BINDINGS, META};
use crate::{DeclarationRecord, Deposit, DepositId, StoreResult};
use redb::WriteTransaction;
use rltp_proofs::multikey::Rkid;

/// A log position: `(segment, offset)`.
type Pos = (u64, u64);

/// Where a replayed operation sits: its segment, where its record's body
/// starts, and whether the in-memory index is to hold it.
#[derive(Debug, Clone, Copy)]
struct Place {
    segment: u64,
    body_at: u64,
    memory: bool,
}

/// Applies replayed records: each operation to the index if it lies at or
/// past `memory_from`, to redb if at or past `redb_from`. Idempotent (the
/// log holds absolute values): a key the snapshot already holds in a later
/// state is set again and then changed by the later records the same way.
pub(super) struct Apply<'a> {
    pub(super) index: &'a mut Index,
    pub(super) txn: Option<&'a WriteTransaction>,
    pub(super) memory_from: Pos,
    pub(super) redb_from: Pos,
    /// redb's bindings and tombstones.
    pub(super) counts: &'a mut (u64, u64),
    pub(super) ops: u64,
}

impl Apply<'_> {
    pub(super) fn record(&mut self, segment: u64, rec: &record::Record) -> StoreResult<()> {
        let at = (segment, rec.at);
        let memory = at >= self.memory_from;
        let redb = at >= self.redb_from && self.txn.is_some();
        if !memory && !redb {
            return Ok(());
        }
        let mut c = Cursor::new(&rec.body);
        while !c.done() {
            let op = c.u8()?;
            self.ops += 1;
            let at = Place {
                segment,
                body_at: rec.body_at,
                memory,
            };
            if !self.index_op(op, &mut c, at)? && !self.redb_op(op, &mut c, memory, redb)? {
                return Err(corrupt(format!("log record: operation tag {op}")));
            }
        }
        // Each record is its own transaction of the index.
        self.index.commit(false, None)?;
        Ok(())
    }

    /// Applies `op` if it changes the in-memory index only (the queue
    /// data); returns whether it was one.
    fn index_op(&mut self, op: u8, c: &mut Cursor<'_>, at: Place) -> StoreResult<bool> {
        let Place {
            segment,
            body_at,
            memory,
        } = at;
        match op {
            tag::APPEND => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let seq = c.u64()?;
                let id = DepositId(c.arr32()?);
                let (admitted_at, give_up_at, len) = (c.u64()?, c.u64()?, c.u32()?);
                let offset = body_at + c.pos() as u64;
                c.take(len as usize)?;
                if memory {
                    let deposit = Deposit {
                        seq,
                        id,
                        len,
                        admitted_at,
                        give_up_at,
                    };
                    self.place(&rkid, &deposit, location(segment, offset)?)?;
                }
            }
            tag::REMOVE => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let seq = c.u64()?;
                if memory {
                    let ix = &mut *self.index;
                    if let Some(slot) = ix.queue(&rkid).and_then(|q| ix.find_seq(q, seq)) {
                        ix.remove_deposit(slot)?;
                    }
                }
            }
            tag::MOVE => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let seq = c.u64()?;
                let len = c.u32()?;
                let offset = body_at + c.pos() as u64;
                c.take(len as usize)?;
                if memory {
                    let (seg, off) = location(segment, offset)?;
                    let ix = &mut *self.index;
                    if let Some(slot) = ix.queue(&rkid).and_then(|q| ix.find_seq(q, seq)) {
                        ix.move_deposit(slot, seg, off);
                    }
                }
            }
            tag::PUT_DEPARTURE => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let id = DepositId(c.arr32()?);
                let record = rs::decode_departure(c.take(9)?)?;
                if memory {
                    self.index.put_departure(&rkid, &id, &record)?;
                }
            }
            tag::REMOVE_DEPARTURE => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let id = DepositId(c.arr32()?);
                if memory {
                    self.index.remove_departure(&rkid, &id)?;
                }
            }
            tag::SCHEDULE | tag::UNSCHEDULE => {
                let (at, due) = rs::decode_due(record::take_u8_len(c)?)?;
                if memory {
                    if op == tag::SCHEDULE {
                        self.index.schedule(at, &due)?;
                    } else {
                        self.index.unschedule(at, &due);
                    }
                }
            }
            tag::ELASTIC => {
                let value = c.u64()?;
                if memory {
                    self.index.occupancy_mut().elastic_bytes = value;
                }
            }
            tag::QUARANTINE => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let seq = c.u64()?;
                let len = c.u32()?;
                let value = c.take(len as usize)?.to_vec();
                if memory {
                    self.index.put_quarantine((rkid, seq), value);
                }
            }
            tag::NEXT_SEQ => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let next = c.u64()?;
                if memory {
                    self.index.raise_next_seq(&rkid, next)?;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Puts replayed deposit `deposit` of `rkid` at `(seg, off)`: added,
    /// or moved there if the index holds it elsewhere already.
    fn place(&mut self, rkid: &Rkid, deposit: &Deposit, (seg, off): (u32, u32)) -> StoreResult<()> {
        let ix = &mut *self.index;
        match ix.queue(rkid).and_then(|q| ix.find_seq(q, deposit.seq)) {
            Some(slot) => {
                let d = ix.deps.get(slot);
                if (d.seg, d.off) != (seg, off) {
                    ix.move_deposit(slot, seg, off);
                }
                Ok(())
            }
            None => ix.add_deposit(rkid, deposit, seg, off).map(drop),
        }
    }

    /// Applies `op` if it changes redb (bindings, tombstones, the
    /// declaration); returns whether it was one.
    fn redb_op(
        &mut self,
        op: u8,
        c: &mut Cursor<'_>,
        memory: bool,
        redb: bool,
    ) -> StoreResult<bool> {
        match op {
            tag::PUT_BINDING => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let value = c.take(57)?;
                rs::decode_binding(value)?;
                if memory {
                    self.index.set_bound(&rkid, true)?;
                }
                if let (true, Some(txn)) = (redb, self.txn)
                    && rs::put(txn, BINDINGS, rkid.as_bytes(), value)?.is_none()
                {
                    self.counts.0 += 1;
                }
            }
            tag::REMOVE_BINDING => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                if memory {
                    self.index.set_bound(&rkid, false)?;
                }
                if let (true, Some(txn)) = (redb, self.txn)
                    && rs::del(txn, BINDINGS, rkid.as_bytes())?.is_some()
                {
                    self.counts.0 = self.counts.0.saturating_sub(1);
                }
            }
            tag::PUT_TOMBSTONE => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                let tombstone = rs::decode_tombstone(c.take(16)?)?;
                if let (true, Some(txn)) = (redb, self.txn)
                    && rs::put_tombstone(txn, &rkid, &tombstone)?
                {
                    self.counts.1 += 1;
                }
            }
            tag::REMOVE_TOMBSTONE => {
                let rkid = Rkid::from_bytes(c.arr32()?);
                if let (true, Some(txn)) = (redb, self.txn)
                    && rs::remove_tombstone(txn, &rkid)?.is_some()
                {
                    self.counts.1 = self.counts.1.saturating_sub(1);
                }
            }
            tag::PUT_DECLARATION => {
                let len = c.u32()?;
                let value = c.take(len as usize)?;
                let record = DeclarationRecord {
                    revision: rs::u64_at(value, 0)?,
                    document: value.get(8..).unwrap_or_default().to_vec(),
                };
                if let (true, Some(txn)) = (redb, self.txn) {
                    let value = rs::cat(&[&record.revision.to_be_bytes(), &record.document]);
                    rs::put(txn, META, rs::META_DECLARATION, &value)?;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
