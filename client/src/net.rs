//! Frame I/O over QUIC streams (`PROTOCOL.md` §6), shared by the server
//! and the client. The codec is [`rltp_wire`]; this module only moves
//! bytes, and always in this order:
//!
//! 1. the 8-byte prefix ([`read_prefix`]), checked by
//!    [`wire::parse_prefix`] **before** any header byte is read;
//! 2. the header ([`read_header`]), parsed by the strict reader;
//! 3. the body ([`read_body`]), whose length is checked against the
//!    operation's bound **before** any body byte is read.
//!
//! Deadlines are the caller's (`tokio::time::timeout` around a step).
//!
//! Every stream both sides open is read through a [`FrameReader`]: the
//! server's requests and `submit-stream` items, and the client's answers
//! (a single answer, a collect page, a watch session, the answers of a
//! `submit-stream`). One quinn read takes up to
//! [`crate::defaults::READ_CHUNK`] bytes of whatever has arrived, and
//! frames are parsed from that buffer in the same order and with the same
//! checks as above (a prefix is checked before the bytes it announces are
//! waited for; nothing is buffered beyond one chunk ahead). The frames a
//! client meets many of are read from their header bytes by the wire
//! codec's fast readers (`SubmitAnswer::from_header_bytes`,
//! `CollectFrame::from_header_bytes`: the carrier's spelling without a
//! JSON tree, anything else by the strict reader). The free functions
//! ([`read_prefix`], [`read_frame`], …) read one frame straight off a
//! stream, for raw conformance probes.

use rltp_proofs::json::Object;
use rltp_wire::{self as wire, FrameError, PREFIX_BYTES};

/// Why reading a frame stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The bytes are not a valid frame (answered with a closed error).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The stream was reset or the connection was lost.
    #[error("stream failed: {0}")]
    Stream(#[from] quinn::ReadError),
}

/// A frame's announced lengths (bytes), already checked against
/// [`wire::MAX_HEADER_BYTES`] and [`wire::MAX_BODY_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Header length, bytes.
    pub header_len: usize,
    /// Body length, bytes.
    pub body_len: usize,
}

/// Reads a frame prefix. `Ok(None)` if the stream ended cleanly before
/// its first byte (no more frames).
///
/// # Errors
/// [`FrameError::Truncated`] inside the prefix; [`FrameError::TooLarge`]
/// for lengths over the profile's absolute bounds (nothing more is read);
/// [`ReadError::Stream`].
pub async fn read_prefix(recv: &mut quinn::RecvStream) -> Result<Option<Prefix>, ReadError> {
    let mut prefix = [0u8; PREFIX_BYTES];
    match recv.read_exact(&mut prefix).await {
        Ok(()) => {
            let (header_len, body_len) = wire::parse_prefix(prefix, wire::MAX_BODY_BYTES)?;
            Ok(Some(Prefix {
                header_len,
                body_len,
            }))
        }
        // quinn tells how much arrived before the end: nothing is a clean
        // end of the frames, anything else a prefix cut short.
        Err(quinn::ReadExactError::FinishedEarly(0)) => Ok(None),
        Err(quinn::ReadExactError::FinishedEarly(_)) => Err(FrameError::Truncated.into()),
        Err(quinn::ReadExactError::ReadError(e)) => Err(e.into()),
    }
}

use crate::defaults::FIRST_RESERVE;

async fn read_growing(recv: &mut quinn::RecvStream, len: usize) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::with_capacity(len.min(FIRST_RESERVE));
    while buf.len() < len {
        match recv.read_chunk(len - buf.len(), true).await? {
            Some(chunk) => buf.extend_from_slice(&chunk.bytes),
            None => return Err(FrameError::Truncated.into()),
        }
    }
    Ok(buf)
}

/// Reads and parses the header announced by `prefix`.
///
/// # Errors
/// [`FrameError::Truncated`], [`FrameError::Json`], [`FrameError::Header`],
/// [`ReadError::Stream`].
pub async fn read_header(
    recv: &mut quinn::RecvStream,
    prefix: Prefix,
) -> Result<Object, ReadError> {
    let bytes = read_growing(recv, prefix.header_len).await?;
    Ok(wire::parse_header(&bytes)?)
}

/// Reads the body announced by `prefix` if it is at most `max_body`
/// bytes; a longer one is refused before any of it is read.
///
/// # Errors
/// [`FrameError::TooLarge`], [`FrameError::Truncated`], [`ReadError::Stream`].
pub async fn read_body(
    recv: &mut quinn::RecvStream,
    prefix: Prefix,
    max_body: usize,
) -> Result<Vec<u8>, ReadError> {
    if prefix.body_len > max_body {
        return Err(FrameError::TooLarge {
            what: "body",
            len: prefix.body_len,
            max: max_body,
        }
        .into());
    }
    read_growing(recv, prefix.body_len).await
}

/// Reads the body announced by `prefix` and drops it, a chunk at a time
/// (nothing of it is kept): a `submit-stream` item decided without its
/// body still has to be consumed for the next item to be found.
///
/// # Errors
/// [`FrameError::Truncated`], [`ReadError::Stream`].
pub async fn skip_body(recv: &mut quinn::RecvStream, prefix: Prefix) -> Result<(), ReadError> {
    let mut left = prefix.body_len;
    while left > 0 {
        match recv.read_chunk(left, true).await? {
            Some(chunk) => left = left.saturating_sub(chunk.bytes.len()),
            None => return Err(FrameError::Truncated.into()),
        }
    }
    Ok(())
}

/// Reads one whole frame whose body may be up to `max_body` bytes.
/// `Ok(None)` if the stream ended cleanly before it.
///
/// # Errors
/// As [`read_prefix`], [`read_header`], [`read_body`].
pub async fn read_frame(
    recv: &mut quinn::RecvStream,
    max_body: usize,
) -> Result<Option<(Object, Vec<u8>)>, ReadError> {
    let Some(prefix) = read_prefix(recv).await? else {
        return Ok(None);
    };
    let header = read_header(recv, prefix).await?;
    let body = read_body(recv, prefix, max_body).await?;
    Ok(Some((header, body)))
}

/// Writes one frame (header as JCS, then `body`).
///
/// # Errors
/// [`quinn::WriteError`] if the stream or connection failed.
pub async fn write_frame(
    send: &mut quinn::SendStream,
    header: &Object,
    body: &[u8],
) -> Result<(), quinn::WriteError> {
    send.write_all(&wire::encode_frame(header, body)).await
}

use crate::defaults::READ_CHUNK;

/// A stream's receive side read in large chunks, frames parsed from the
/// buffer (module docs).
#[derive(Debug)]
pub struct FrameReader {
    recv: quinn::RecvStream,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    /// The peer finished its send side (everything is in `buf`).
    ended: bool,
}

impl FrameReader {
    /// A reader over `recv`.
    pub fn new(recv: quinn::RecvStream) -> FrameReader {
        FrameReader {
            recv,
            buf: Vec::new(),
            pos: 0,
            ended: false,
        }
    }

    /// The stream itself (to `stop` it).
    pub fn stream(&mut self) -> &mut quinn::RecvStream {
        &mut self.recv
    }

    fn buffered(&self) -> &[u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// Waits until at least `want` bytes are buffered; `false` if the
    /// stream ended first. Cancel-safe (a chunk read is appended whole).
    ///
    /// # Errors
    /// [`ReadError::Stream`].
    pub async fn fill(&mut self, want: usize) -> Result<bool, ReadError> {
        while self.buffered().len() < want {
            if self.ended {
                return Ok(false);
            }
            if self.pos == self.buf.len() {
                self.buf.clear();
                self.pos = 0;
            } else if self.pos >= READ_CHUNK {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            match self.recv.read_chunk(READ_CHUNK, true).await? {
                Some(chunk) => self.buf.extend_from_slice(&chunk.bytes),
                None => self.ended = true,
            }
        }
        Ok(true)
    }

    /// Consumes `n` buffered bytes (after [`FrameReader::fill`]`(n)`).
    fn consume(&mut self, n: usize) -> &[u8] {
        let start = self.pos;
        self.pos = (start + n).min(self.buf.len());
        self.buf.get(start..self.pos).unwrap_or_default()
    }

    /// Reads `n` bytes; [`FrameError::Truncated`] if the stream ends first.
    async fn take(&mut self, n: usize) -> Result<&[u8], ReadError> {
        if !self.fill(n).await? {
            return Err(FrameError::Truncated.into());
        }
        Ok(self.consume(n))
    }

    /// As [`read_prefix`].
    ///
    /// # Errors
    /// As [`read_prefix`].
    pub async fn prefix(&mut self) -> Result<Option<Prefix>, ReadError> {
        if !self.fill(PREFIX_BYTES).await? {
            return match self.buffered().is_empty() {
                true => Ok(None),
                false => Err(FrameError::Truncated.into()),
            };
        }
        let mut prefix = [0u8; PREFIX_BYTES];
        prefix.copy_from_slice(self.consume(PREFIX_BYTES));
        let (header_len, body_len) = wire::parse_prefix(prefix, wire::MAX_BODY_BYTES)?;
        Ok(Some(Prefix {
            header_len,
            body_len,
        }))
    }

    /// The header bytes announced by `prefix` (borrowed from the buffer).
    ///
    /// # Errors
    /// [`FrameError::Truncated`], [`ReadError::Stream`].
    pub async fn header_bytes(&mut self, prefix: Prefix) -> Result<&[u8], ReadError> {
        self.take(prefix.header_len).await
    }

    /// As [`read_header`].
    ///
    /// # Errors
    /// As [`read_header`].
    pub async fn header(&mut self, prefix: Prefix) -> Result<Object, ReadError> {
        Ok(wire::parse_header(self.header_bytes(prefix).await?)?)
    }

    /// As [`read_body`]: a body above `max_body` is refused before any of
    /// it is waited for.
    ///
    /// # Errors
    /// As [`read_body`].
    pub async fn body(&mut self, prefix: Prefix, max_body: usize) -> Result<Vec<u8>, ReadError> {
        if prefix.body_len > max_body {
            return Err(FrameError::TooLarge {
                what: "body",
                len: prefix.body_len,
                max: max_body,
            }
            .into());
        }
        Ok(self.take(prefix.body_len).await?.to_vec())
    }

    /// As [`skip_body`]: what is not buffered yet is read and dropped a
    /// chunk at a time.
    ///
    /// # Errors
    /// As [`skip_body`].
    pub async fn skip(&mut self, prefix: Prefix) -> Result<(), ReadError> {
        let held = self.buffered().len().min(prefix.body_len);
        self.consume(held);
        skip_body(
            &mut self.recv,
            Prefix {
                header_len: 0,
                body_len: prefix.body_len - held,
            },
        )
        .await
    }

    /// The stream must end here: `Ok` at the peer's FIN, else
    /// [`FrameError::TrailingBytes`].
    ///
    /// # Errors
    /// [`FrameError::TrailingBytes`], [`ReadError::Stream`].
    pub async fn expect_end(&mut self) -> Result<(), ReadError> {
        match self.fill(1).await? {
            false => Ok(()),
            true => Err(FrameError::TrailingBytes.into()),
        }
    }

    /// Whether the buffer holds the next whole frame, or a prefix that
    /// reading will refuse: reading it then completes without waiting
    /// (a burst, taken together).
    pub fn frame_buffered(&self) -> bool {
        let Some((prefix, _)) = self.buffered().split_first_chunk::<{ PREFIX_BYTES }>() else {
            return false;
        };
        match wire::parse_prefix(*prefix, wire::MAX_BODY_BYTES) {
            Ok((header, body)) => self.buffered().len() >= PREFIX_BYTES + header + body,
            Err(_) => true,
        }
    }
}
