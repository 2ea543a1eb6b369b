//! Applying a replayed operation-log record (`oplog.rs`) to a write
//! transaction: each logged operation through the same method that logged it.

use super::*;

impl RedbWrite<'_> {
    /// Applies the operations of a replayed batch record; returns how many.
    pub(super) fn apply_record(&mut self, record: &oplog::Record) -> StoreResult<u64> {
        let mut c = Cursor::new(&record.body);
        let mut ops = 0;
        while !c.done() {
            let op = c.u8()?;
            match op {
                tag::PUT_BINDING => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.put_binding(&rkid, &decode_binding(c.take(57)?)?)?;
                }
                tag::REMOVE_BINDING => {
                    self.remove_binding(&Rkid::from_bytes(c.arr32()?))?;
                }
                tag::PUT_TOMBSTONE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.put_tombstone(&rkid, &decode_tombstone(c.take(16)?)?)?;
                }
                tag::REMOVE_TOMBSTONE => {
                    self.remove_tombstone(&Rkid::from_bytes(c.arr32()?))?;
                }
                tag::APPEND_DEPOSIT => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let (admitted_at, give_up_at, len) = (c.u64()?, c.u64()?, c.u32()?);
                    let offset = record.body_at + c.pos() as u64;
                    let bytes = c.take(len as usize)?;
                    let id = DepositId::of(bytes);
                    self.index_deposit(&rkid, bytes, &id, admitted_at, give_up_at, offset)?;
                }
                tag::REMOVE_DEPOSIT => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.remove_deposit(&rkid, c.u64()?)?;
                }
                tag::PUT_DEPARTURE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let id = DepositId(c.arr32()?);
                    self.put_departure(&rkid, &id, &decode_departure(c.take(9)?)?)?;
                }
                tag::REMOVE_DEPARTURE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.remove_departure(&rkid, &DepositId(c.arr32()?))?;
                }
                tag::SCHEDULE | tag::UNSCHEDULE => {
                    let len = c.u8()?;
                    let (at, due) = decode_due(c.take(len.into())?)?;
                    if op == tag::SCHEDULE {
                        self.schedule(at, &due)?;
                    } else {
                        self.unschedule(at, &due)?;
                    }
                }
                tag::ADD_ELASTIC => {
                    self.add_elastic_bytes(c.u64()?.cast_signed())?;
                }
                tag::PUT_DECLARATION => {
                    let len = c.u32()?;
                    let value = c.take(len as usize)?;
                    self.put_declaration(&DeclarationRecord {
                        revision: u64_at(value, 0)?,
                        document: value.get(8..).unwrap_or_default().to_vec(),
                    })?;
                }
                tag::MOVE_DEPOSIT => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let (seq, len) = (c.u64()?, c.u32()?);
                    let offset = record.body_at + c.pos() as u64;
                    c.take(len as usize)?;
                    self.move_deposit(&rkid, seq, offset)?;
                }
                tag::QUARANTINE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let seq = c.u64()?;
                    let len = c.u32()?;
                    let value = c.take(len as usize)?;
                    put(self.txn()?, QUARANTINE, &key_seq(&rkid, seq), value)?;
                }
                other => return Err(corrupt(format!("log record: operation tag {other}"))),
            }
            ops += 1;
        }
        Ok(ops)
    }
}
