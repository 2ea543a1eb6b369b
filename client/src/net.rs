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
