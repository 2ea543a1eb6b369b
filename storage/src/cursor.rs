//! A cursor over a log record's body, for decoding its operations (both
//! embedded stores' record formats: the legacy `oplog` and the log store's
//! `log_store::record`).

use crate::{StoreError, StoreResult};

/// A cursor over a record body, for decoding operations.
pub(crate) struct Cursor<'a> {
    body: &'a [u8],
    pos: usize,
}

pub(crate) fn short() -> StoreError {
    StoreError::Corrupt("log record: operation cut short".into())
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(body: &'a [u8]) -> Cursor<'a> {
        Cursor { body, pos: 0 }
    }
    /// Position of the next byte in the body.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
    pub(crate) fn done(&self) -> bool {
        self.pos >= self.body.len()
    }
    pub(crate) fn take(&mut self, n: usize) -> StoreResult<&'a [u8]> {
        let stop = self.pos.checked_add(n).ok_or_else(short)?;
        let bytes = self.body.get(self.pos..stop).ok_or_else(short)?;
        self.pos = stop;
        Ok(bytes)
    }
    pub(crate) fn u8(&mut self) -> StoreResult<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> StoreResult<u32> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().map_err(|_| short())?,
        ))
    }
    pub(crate) fn u64(&mut self) -> StoreResult<u64> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().map_err(|_| short())?,
        ))
    }
    pub(crate) fn arr32(&mut self) -> StoreResult<[u8; 32]> {
        self.take(32)?.try_into().map_err(|_| short())
    }
}
