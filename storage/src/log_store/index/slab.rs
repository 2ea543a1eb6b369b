//! Chunked slabs of records with a free list (growing never copies).
use super::*;

/// Records in chunks of 4 096 (growing never copies), with a free list.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    pub(super) chunks: Vec<Box<[T]>>,
    pub(super) high: u32,
    pub(super) free: Vec<u32>,
    pub(super) live: u64,
}

impl<T: Slot> Slab<T> {
    pub(super) fn new() -> Self {
        Slab {
            chunks: Vec::new(),
            high: 0,
            free: Vec::new(),
            live: 0,
        }
    }
    pub(super) fn alloc(&mut self, value: T) -> StoreResult<u32> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                if self.high >= MAX_SLOTS {
                    return Err(StoreError::Corrupt(format!(
                        "the in-memory index holds {MAX_SLOTS} records of one kind, its limit"
                    )));
                }
                let slot = self.high;
                if slot as usize >= self.chunks.len() * CHUNK {
                    self.chunks
                        .push(vec![T::default(); CHUNK].into_boxed_slice());
                }
                self.high += 1;
                slot
            }
        };
        *self.get_mut(slot) = value;
        self.live += 1;
        Ok(slot)
    }
    /// Gives a slot back (its record must no longer be live).
    pub(super) fn release(&mut self, slot: u32) {
        *self.get_mut(slot) = T::default();
        self.free.push(slot);
        self.live -= 1;
    }
    pub(crate) fn get(&self, slot: u32) -> &T {
        &self.chunks[(slot >> CHUNK_BITS) as usize][slot as usize & (CHUNK - 1)]
    }
    pub(super) fn get_mut(&mut self, slot: u32) -> &mut T {
        &mut self.chunks[(slot >> CHUNK_BITS) as usize][slot as usize & (CHUNK - 1)]
    }
    /// Slots handed out so far (live or free): iterate `0..high()`.
    pub(crate) fn high(&self) -> u32 {
        self.high
    }
    /// The live record at `slot`, if any.
    pub(crate) fn live_at(&self, slot: u32) -> Option<&T> {
        (slot < self.high)
            .then(|| self.get(slot))
            .filter(|r| r.live())
    }
    /// Records allocated (live, or freed by the open transaction).
    pub(crate) fn count(&self) -> u64 {
        self.live
    }
    /// Bytes held (records, free list).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.len() * CHUNK * size_of::<T>() + self.free.capacity() * 4
    }
}
