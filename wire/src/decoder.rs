//! The frame decoder both ends use (`PROTOCOL.md` §6), sans-IO: bytes go
//! in from whatever the caller read ([`FrameDecoder::push`], then
//! [`FrameDecoder::end`] at the peer's end of stream), frames come out of
//! the buffer, in this order and with these checks:
//!
//! 1. the 8-byte prefix ([`FrameDecoder::prefix`]), checked by
//!    [`parse_prefix`] under the frozen limits **before** any header byte
//!    is waited for;
//! 2. the header ([`FrameDecoder::header`]), parsed by the strict reader;
//! 3. the body ([`FrameDecoder::body`]), whose length is checked against
//!    the operation's bound **before** any body byte is waited for.
//!
//! The decoder never waits: each step takes its bytes from the buffer and
//! answers [`FrameError::Truncated`] if they are not all there. An I/O
//! adapter (the QUIC one is `rltp-quic`'s `net::FrameReader`) asks
//! [`FrameDecoder::wants`] how many bytes a step needs, reads chunks of
//! up to [`READ_CHUNK`] bytes into the buffer until they are there or the
//! stream ended, then calls the step. Nothing is buffered beyond one chunk
//! ahead of the frame being parsed.

use crate::frame::{FrameError, MAX_BODY_BYTES, PREFIX_BYTES, parse_header, parse_prefix};
use rltp_proofs::json::Object;

/// Most bytes one read of a stream should ask for (64 KiB): an adapter
/// takes whatever has arrived up to this, so a pipelined burst of ~1 KiB
/// submissions is one read, not three per item, and what the decoder
/// holds ahead of the frame being parsed stays bounded. It is also how far
/// consumed bytes may pile up at the buffer's front before they are
/// dropped.
pub const READ_CHUNK: usize = 65_536;

/// A frame's announced lengths (bytes), already checked against
/// [`crate::MAX_HEADER_BYTES`] and [`MAX_BODY_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Header length, bytes.
    pub header_len: usize,
    /// Body length, bytes.
    pub body_len: usize,
}

impl Prefix {
    /// Parses an 8-byte prefix under the frozen limits.
    ///
    /// # Errors
    /// [`FrameError::TooLarge`].
    pub fn parse(bytes: [u8; PREFIX_BYTES]) -> Result<Prefix, FrameError> {
        let (header_len, body_len) = parse_prefix(bytes, MAX_BODY_BYTES)?;
        Ok(Prefix {
            header_len,
            body_len,
        })
    }

    /// Refuses a body above `max_body` (the operation's own bound) before
    /// any of it is read.
    ///
    /// # Errors
    /// [`FrameError::TooLarge`].
    pub fn check_body(self, max_body: usize) -> Result<(), FrameError> {
        if self.body_len > max_body {
            return Err(FrameError::TooLarge {
                what: "body",
                len: self.body_len,
                max: max_body,
            });
        }
        Ok(())
    }
}

/// A receive buffer and the frames parsed from it (module docs).
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    /// The peer finished its send side (everything is in `buf`).
    ended: bool,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// The bytes received and not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// Whether the peer ended its stream ([`FrameDecoder::end`]).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Whether a step that needs `want` buffered bytes must wait for more:
    /// fewer are buffered and the stream has not ended.
    pub fn wants(&self, want: usize) -> bool {
        self.buffered().len() < want && !self.ended
    }

    /// Appends a chunk the adapter read. Consumed bytes are dropped first
    /// once they are all there is, or once they reach [`READ_CHUNK`].
    pub fn push(&mut self, chunk: &[u8]) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos >= READ_CHUNK {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The peer ended its stream: nothing more will be pushed.
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// Consumes up to `n` buffered bytes and returns them.
    fn consume(&mut self, n: usize) -> &[u8] {
        let start = self.pos;
        self.pos = (start + n).min(self.buf.len());
        self.buf.get(start..self.pos).unwrap_or_default()
    }

    /// Takes `n` bytes; [`FrameError::Truncated`] if fewer are buffered
    /// (nothing is consumed then).
    fn take(&mut self, n: usize) -> Result<&[u8], FrameError> {
        if self.buffered().len() < n {
            return Err(FrameError::Truncated);
        }
        Ok(self.consume(n))
    }

    /// The next frame's prefix (wait while [`FrameDecoder::wants`]`(`
    /// [`PREFIX_BYTES`]`)`). `Ok(None)` if the stream ended cleanly before
    /// its first byte (no more frames).
    ///
    /// # Errors
    /// [`FrameError::Truncated`] inside the prefix; [`FrameError::TooLarge`]
    /// for lengths over the profile's absolute bounds.
    pub fn prefix(&mut self) -> Result<Option<Prefix>, FrameError> {
        if self.buffered().is_empty() && self.ended {
            return Ok(None);
        }
        let bytes = self.take(PREFIX_BYTES)?;
        let mut prefix = [0u8; PREFIX_BYTES];
        prefix.copy_from_slice(bytes);
        Prefix::parse(prefix).map(Some)
    }

    /// The header bytes announced by `prefix`, borrowed from the buffer
    /// (wait while [`FrameDecoder::wants`]`(prefix.header_len)`).
    ///
    /// # Errors
    /// [`FrameError::Truncated`].
    pub fn header_bytes(&mut self, prefix: Prefix) -> Result<&[u8], FrameError> {
        self.take(prefix.header_len)
    }

    /// The header announced by `prefix`, parsed by the strict reader.
    ///
    /// # Errors
    /// [`FrameError::Truncated`], [`FrameError::Json`], [`FrameError::Header`].
    pub fn header(&mut self, prefix: Prefix) -> Result<Object, FrameError> {
        parse_header(self.header_bytes(prefix)?)
    }

    /// The body announced by `prefix` if it is at most `max_body` bytes
    /// (check with [`Prefix::check_body`] before waiting for it).
    ///
    /// # Errors
    /// [`FrameError::TooLarge`], [`FrameError::Truncated`].
    pub fn body(&mut self, prefix: Prefix, max_body: usize) -> Result<Vec<u8>, FrameError> {
        prefix.check_body(max_body)?;
        Ok(self.take(prefix.body_len)?.to_vec())
    }

    /// Drops what is buffered of a body of `len` bytes that is not kept;
    /// returns how many of its bytes are still to come (the adapter reads
    /// and drops them a chunk at a time).
    pub fn skip(&mut self, len: usize) -> usize {
        let held = self.buffered().len().min(len);
        self.consume(held);
        len - held
    }

    /// The stream must end here (wait while [`FrameDecoder::wants`]`(1)`):
    /// `Ok` at the peer's end with nothing left.
    ///
    /// # Errors
    /// [`FrameError::TrailingBytes`].
    pub fn expect_end(&self) -> Result<(), FrameError> {
        match self.buffered().is_empty() {
            true => Ok(()),
            false => Err(FrameError::TrailingBytes),
        }
    }

    /// Whether the buffer holds the next whole frame, or a prefix that
    /// reading will refuse: reading it then completes without waiting
    /// (a burst, taken together).
    pub fn frame_buffered(&self) -> bool {
        let Some((prefix, _)) = self.buffered().split_first_chunk::<{ PREFIX_BYTES }>() else {
            return false;
        };
        match Prefix::parse(*prefix) {
            Ok(p) => self.buffered().len() >= PREFIX_BYTES + p.header_len + p.body_len,
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode_frame;
    use rltp_proofs::json::Value;

    fn header(op: &str) -> Object {
        let mut h = Object::new();
        h.insert("op", Value::String(op.to_owned()));
        h
    }

    #[test]
    fn frames_come_out_whole_from_any_split_of_the_bytes() {
        let mut bytes = encode_frame(&header("status"), b"");
        bytes.extend(encode_frame(&header("submit"), b"abc"));
        for cut in 0..=bytes.len() {
            let mut dec = FrameDecoder::new();
            dec.push(&bytes[..cut]);
            let ready = dec.frame_buffered();
            if cut < 8 {
                assert!(dec.wants(8) && !ready, "cut {cut}");
            }
            dec.push(&bytes[cut..]);
            dec.end();
            assert!(dec.frame_buffered());
            let p = dec.prefix().unwrap().unwrap();
            assert_eq!(dec.header(p).unwrap(), header("status"));
            assert_eq!(dec.body(p, 0).unwrap(), b"");
            let p = dec.prefix().unwrap().unwrap();
            assert_eq!((p.header_len, p.body_len), (15, 3));
            assert_eq!(dec.header(p).unwrap(), header("submit"));
            assert_eq!(dec.body(p, 3).unwrap(), b"abc");
            assert_eq!(dec.prefix().unwrap(), None);
            assert_eq!(dec.expect_end(), Ok(()));
        }
    }

    #[test]
    fn a_short_frame_is_truncated_and_a_large_one_refused_from_its_prefix() {
        let bytes = encode_frame(&header("submit"), b"abcd");
        let mut dec = FrameDecoder::new();
        dec.push(&bytes[..5]);
        dec.end();
        assert!(!dec.wants(8));
        assert_eq!(dec.prefix(), Err(FrameError::Truncated));

        let mut dec = FrameDecoder::new();
        dec.push(&bytes[..bytes.len() - 1]);
        dec.end();
        let p = dec.prefix().unwrap().unwrap();
        dec.header(p).unwrap();
        assert!(matches!(
            dec.body(p, 3),
            Err(FrameError::TooLarge { len: 4, max: 3, .. })
        ));
        assert_eq!(dec.body(p, 4), Err(FrameError::Truncated));

        let mut dec = FrameDecoder::new();
        dec.push(&[0xff; 8]);
        assert!(matches!(
            dec.prefix(),
            Err(FrameError::TooLarge { what: "header", .. })
        ));
        let mut dec = FrameDecoder::new();
        dec.push(&[0xff; 8]);
        assert!(dec.frame_buffered(), "a refused prefix is read at once");
    }

    #[test]
    fn skip_and_trailing_bytes() {
        let mut dec = FrameDecoder::new();
        dec.push(b"abcdef");
        assert_eq!(dec.skip(4), 0);
        assert_eq!(dec.buffered(), b"ef");
        assert_eq!(dec.expect_end(), Err(FrameError::TrailingBytes));
        assert_eq!(dec.skip(10), 8);
        assert_eq!(dec.expect_end(), Ok(()));
        assert!(dec.wants(1) && !dec.ended());
    }

    #[test]
    fn consumed_bytes_are_dropped_once_a_chunk_of_them_piles_up() {
        let mut dec = FrameDecoder::new();
        dec.push(&vec![7; READ_CHUNK + 10]);
        assert_eq!(dec.skip(READ_CHUNK), 0);
        dec.push(b"x");
        assert_eq!(dec.buf.len(), 11, "the consumed chunk was dropped");
        assert_eq!(dec.buffered().len(), 11);
        assert_eq!(dec.skip(11), 0);
        dec.push(b"y");
        assert_eq!(dec.buf, b"y", "an emptied buffer starts over");
    }
}
