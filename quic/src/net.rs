//! Frame I/O over an operation's stream (`PROTOCOL.md` §6), shared by the
//! server and the client, on either binding ([`crate::stream`]: a quinn
//! stream, or an HTTP/2 stream over TLS/TCP, §5b): the thin async adapter
//! between the stream and the
//! sans-IO [`FrameDecoder`] of `rltp_wire`, which holds the buffer, the
//! order (prefix, header, body) and every check. This module only moves
//! bytes: one read takes up to [`READ_CHUNK`] bytes of whatever has
//! arrived into the decoder, until the step the caller asked for has its
//! bytes (a prefix is checked before the bytes it announces are waited
//! for). Deadlines are the caller's (`tokio::time::timeout` around a step).
//!
//! Every stream both sides open is read through a [`FrameReader`]: the
//! server's requests and `submit-stream` items, and the client's answers
//! (a single answer, a collect page, a watch session, the answers of a
//! `submit-stream`). The frames a client meets many of are read from their
//! header bytes by the wire codec's fast readers
//! (`SubmitAnswer::from_header_bytes`, `CollectFrame::from_header_bytes`:
//! the carrier's spelling without a JSON tree, anything else by the strict
//! reader). The free functions ([`read_prefix`], [`read_frame`], …) read
//! one frame straight off a stream, for raw conformance probes.

use crate::stream::{RecvHalf, SendHalf, StreamError, WriteError};
use rltp_proofs::json::Object;
pub use rltp_wire::Prefix;
use rltp_wire::decoder::READ_CHUNK;
use rltp_wire::{self as wire, FrameDecoder, FrameError, PREFIX_BYTES};

/// Why reading a frame stopped (exhaustive: both ends match on it).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bytes are not a valid frame (answered with a closed error).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The stream was reset or the connection was lost.
    #[error("stream failed: {0}")]
    Stream(#[from] StreamError),
}

impl From<quinn::ReadError> for ReadError {
    fn from(e: quinn::ReadError) -> ReadError {
        ReadError::Stream(e.into())
    }
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
        Ok(()) => Ok(Some(Prefix::parse(prefix)?)),
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
    prefix.check_body(max_body)?;
    read_growing(recv, prefix.body_len).await
}

/// Reads the body announced by `prefix` and drops it, a chunk at a time
/// (nothing of it is kept): a `submit-stream` item decided without its
/// body still has to be consumed for the next item to be found.
///
/// # Errors
/// [`FrameError::Truncated`], [`ReadError::Stream`].
pub async fn skip_body(recv: &mut quinn::RecvStream, prefix: Prefix) -> Result<(), ReadError> {
    drop_bytes(recv, prefix.body_len).await
}

/// Reads `len` bytes and drops them, a chunk at a time.
async fn drop_bytes(recv: &mut quinn::RecvStream, len: usize) -> Result<(), ReadError> {
    let mut left = len;
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

/// Writes one frame (header as JCS, then `body`) on either binding.
///
/// # Errors
/// [`WriteError`] if the stream or connection failed.
pub async fn write_frame(
    send: &mut SendHalf,
    header: &Object,
    body: &[u8],
) -> Result<(), WriteError> {
    send.write_all(&wire::encode_frame(header, body)).await
}

/// A stream's receive side read in large chunks into a [`FrameDecoder`],
/// frames parsed from its buffer (module docs).
#[derive(Debug)]
pub struct FrameReader {
    recv: RecvHalf,
    decoder: FrameDecoder,
}

impl FrameReader {
    /// A reader over `recv` (a quinn stream, or an HTTP/2 body: §5b).
    pub fn new(recv: impl Into<RecvHalf>) -> FrameReader {
        FrameReader {
            recv: recv.into(),
            decoder: FrameDecoder::new(),
        }
    }

    /// Asks the peer to stop sending ([`RecvHalf::stop`]): the rest of
    /// its side is never read.
    pub fn stop(&mut self) {
        self.recv.stop();
    }

    /// Waits until at least `want` bytes are buffered; `false` if the
    /// stream ended first. Cancel-safe (a chunk read is pushed whole).
    ///
    /// # Errors
    /// [`ReadError::Stream`].
    pub async fn fill(&mut self, want: usize) -> Result<bool, ReadError> {
        while self.decoder.wants(want) {
            match self.recv.read_chunk(READ_CHUNK).await? {
                Some(chunk) => self.decoder.push(&chunk),
                None => self.decoder.end(),
            }
        }
        Ok(self.decoder.buffered().len() >= want)
    }

    /// As [`read_prefix`].
    ///
    /// # Errors
    /// As [`read_prefix`].
    pub async fn prefix(&mut self) -> Result<Option<Prefix>, ReadError> {
        self.fill(PREFIX_BYTES).await?;
        Ok(self.decoder.prefix()?)
    }

    /// The header bytes announced by `prefix` (borrowed from the buffer).
    ///
    /// # Errors
    /// [`FrameError::Truncated`], [`ReadError::Stream`].
    pub async fn header_bytes(&mut self, prefix: Prefix) -> Result<&[u8], ReadError> {
        self.fill(prefix.header_len).await?;
        Ok(self.decoder.header_bytes(prefix)?)
    }

    /// As [`read_header`].
    ///
    /// # Errors
    /// As [`read_header`].
    pub async fn header(&mut self, prefix: Prefix) -> Result<Object, ReadError> {
        self.fill(prefix.header_len).await?;
        Ok(self.decoder.header(prefix)?)
    }

    /// As [`read_body`]: a body above `max_body` is refused before any of
    /// it is waited for.
    ///
    /// # Errors
    /// As [`read_body`].
    pub async fn body(&mut self, prefix: Prefix, max_body: usize) -> Result<Vec<u8>, ReadError> {
        prefix.check_body(max_body)?;
        self.fill(prefix.body_len).await?;
        Ok(self.decoder.body(prefix, max_body)?)
    }

    /// As [`skip_body`]: what is not buffered yet is read and dropped a
    /// chunk at a time.
    ///
    /// # Errors
    /// As [`skip_body`].
    pub async fn skip(&mut self, prefix: Prefix) -> Result<(), ReadError> {
        let mut left = self.decoder.skip(prefix.body_len);
        while left > 0 {
            match self.recv.read_chunk(left).await? {
                Some(chunk) => left = left.saturating_sub(chunk.len()),
                None => return Err(FrameError::Truncated.into()),
            }
        }
        Ok(())
    }

    /// The stream must end here: `Ok` at the peer's FIN, else
    /// [`FrameError::TrailingBytes`].
    ///
    /// # Errors
    /// [`FrameError::TrailingBytes`], [`ReadError::Stream`].
    pub async fn expect_end(&mut self) -> Result<(), ReadError> {
        self.fill(1).await?;
        Ok(self.decoder.expect_end()?)
    }

    /// Whether the buffer holds the next whole frame, or a prefix that
    /// reading will refuse: reading it then completes without waiting
    /// (a burst, taken together).
    pub fn frame_buffered(&self) -> bool {
        self.decoder.frame_buffered()
    }
}
