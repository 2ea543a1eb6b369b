//! One operation's stream over either binding (`PROTOCOL.md` §5 QUIC,
//! §5b TLS/TCP with HTTP/2): the two halves every operation reads and
//! writes, whatever carried them. On QUIC a half is a quinn stream; on
//! HTTP/2 the receive half is the peer's message body
//! ([`hyper::body::Incoming`]: the request body at the carrier, the
//! response body at a client) and the send half feeds this end's message
//! body ([`ChannelBody`]) through a channel of one chunk, so hyper pulls
//! the next chunk only once HTTP/2 flow control has room for it.
//!
//! The frames, their order and their limits are the same on both: this
//! module only moves bytes ([`crate::net::FrameReader`] reads a
//! [`RecvHalf`] through `rltp_wire`'s decoder).
//!
//! | QUIC | HTTP/2 (§5b) |
//! |---|---|
//! | `finish` (FIN) | the message body ends (`END_STREAM`) |
//! | `stop` (STOP_SENDING) | the body is dropped: the carrier's answer ends the stream (`RST_STREAM(NO_ERROR)` after it) |
//! | `stopped` (the peer's STOP_SENDING or reset) | the peer's end of the body is gone (reset, or the connection) |

use hyper::body::{Body, Bytes, Frame, Incoming};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// The ALPN protocol of the TLS/TCP binding (`PROTOCOL.md` §5b): HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";

/// The one path of the TLS/TCP binding (`PROTOCOL.md` §5b): every
/// operation is one `POST` to it, its body the request frames, the
/// response body the answer frames.
pub const H2_PATH: &str = "/rltp-carrier/1";

/// The transport under an operation's stream (`PROTOCOL.md` §5, §5b).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// QUIC (§5), ALPN `rltp-carrier/1`.
    Quic,
    /// TLS 1.3 over TCP with HTTP/2 (§5b), ALPN `h2`.
    Tcp,
}

impl Binding {
    /// The name metrics, logs and reports use: `quic` or `tcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::Quic => "quic",
            Binding::Tcp => "tcp",
        }
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The HTTP/2 message body this end sends: the chunks its [`SendHalf`]
/// writes, in order; it ends when the half finishes or is dropped.
#[derive(Debug)]
pub struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// A send half and the body it feeds (HTTP/2).
pub fn h2_channel() -> (SendHalf, ChannelBody) {
    // One chunk in the channel: hyper takes the next only after handing
    // the last to HTTP/2, which waits for flow-control credit, so what a
    // slow reader costs this end is bounded by one write.
    let (tx, rx) = mpsc::channel(1);
    (SendHalf::H2(Some(tx)), ChannelBody { rx })
}

/// Why a write did not go out.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The QUIC stream failed (`quinn::WriteError::Stopped`: the peer
    /// stopped reading).
    #[error(transparent)]
    Quic(#[from] quinn::WriteError),
    /// The HTTP/2 body is gone: the peer reset the stream, the connection
    /// was lost, or this half had finished.
    #[error("the http/2 stream is closed")]
    H2Closed,
}

impl WriteError {
    /// Whether the peer asked this end to stop sending (QUIC
    /// STOP_SENDING; on HTTP/2 the body's end is gone, which also follows
    /// a carrier's answer that ended the stream before reading it all):
    /// the answer, if any, is still to be read.
    pub fn is_stopped(&self) -> bool {
        matches!(
            self,
            WriteError::Quic(quinn::WriteError::Stopped(_)) | WriteError::H2Closed
        )
    }
}

/// The half of an operation's stream this end writes (module docs).
#[derive(Debug)]
pub enum SendHalf {
    /// A quinn send stream.
    Quic(quinn::SendStream),
    /// The channel into this end's HTTP/2 message body; `None` once
    /// finished.
    H2(Option<mpsc::Sender<Bytes>>),
}

impl SendHalf {
    /// Writes all of `bytes`.
    ///
    /// # Errors
    /// [`WriteError`].
    pub async fn write_all(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        match self {
            SendHalf::Quic(send) => Ok(send.write_all(bytes).await?),
            SendHalf::H2(tx) => match tx {
                Some(tx) => tx
                    .send(Bytes::copy_from_slice(bytes))
                    .await
                    .map_err(|_| WriteError::H2Closed),
                None => Err(WriteError::H2Closed),
            },
        }
    }

    /// Ends this end's side of the stream (QUIC FIN; the HTTP/2 body's
    /// end). Returns whether it was still open.
    pub fn finish(&mut self) -> bool {
        match self {
            SendHalf::Quic(send) => send.finish().is_ok(),
            SendHalf::H2(tx) => tx.take().is_some(),
        }
    }

    /// Resolves once the peer no longer reads this half: QUIC
    /// STOP_SENDING or a reset, the HTTP/2 stream reset or its connection
    /// gone. Never resolves on a finished HTTP/2 half.
    pub async fn stopped(&mut self) {
        match self {
            SendHalf::Quic(send) => {
                let _ = send.stopped().await;
            }
            SendHalf::H2(Some(tx)) => tx.closed().await,
            SendHalf::H2(None) => std::future::pending().await,
        }
    }

    /// After [`SendHalf::finish`]: waits (up to `bound`) until the peer
    /// has what was written, so a draining shutdown never cuts an answer.
    /// On HTTP/2 the connection's graceful close does that wait.
    pub async fn flushed(&mut self, bound: std::time::Duration) {
        if let SendHalf::Quic(send) = self {
            let _ = tokio::time::timeout(bound, send.stopped()).await;
        }
    }
}

/// Why a read of a stream failed (not a frame error: the transport's).
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The QUIC stream was reset or the connection lost.
    #[error(transparent)]
    Quic(#[from] quinn::ReadError),
    /// The HTTP/2 stream was reset or its connection lost.
    #[error("http/2: {0}")]
    H2(#[source] hyper::Error),
}

impl StreamError {
    /// Whether the peer sent HTTP/2 GOAWAY before this stream was served
    /// (the carrier turns connections away so in lame-duck mode: §5b).
    pub fn is_h2_go_away(&self) -> bool {
        match self {
            StreamError::H2(e) => is_go_away(e),
            StreamError::Quic(_) => false,
        }
    }
}

/// Whether `e` is (or is caused by) an HTTP/2 GOAWAY from the peer.
pub fn is_go_away(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(error) = cause {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            return h2.is_go_away() && h2.is_remote();
        }
        cause = error.source();
    }
    false
}

/// The half of an operation's stream this end reads (module docs).
#[derive(Debug)]
pub enum RecvHalf {
    /// A quinn receive stream.
    Quic(quinn::RecvStream),
    /// The peer's HTTP/2 message body (`None` once stopped), and what is
    /// left of the last DATA frame beyond the last read's `max`.
    H2(Option<Incoming>, Bytes),
}

impl RecvHalf {
    /// The peer's HTTP/2 message body.
    pub fn h2(body: Incoming) -> RecvHalf {
        RecvHalf::H2(Some(body), Bytes::new())
    }

    /// The next chunk of at most `max` bytes (`max` > 0) of what has
    /// arrived; `Ok(None)` at the peer's end of the stream (or once
    /// stopped). Cancel-safe.
    ///
    /// # Errors
    /// [`StreamError`].
    pub async fn read_chunk(&mut self, max: usize) -> Result<Option<Bytes>, StreamError> {
        match self {
            RecvHalf::Quic(recv) => Ok(recv.read_chunk(max, true).await?.map(|c| c.bytes)),
            RecvHalf::H2(body, rest) => {
                if rest.is_empty() {
                    let Some(body) = body else { return Ok(None) };
                    match next_data(body).await? {
                        Some(data) => *rest = data,
                        None => return Ok(None),
                    }
                }
                let take = rest.len().min(max);
                Ok(Some(rest.split_to(take)))
            }
        }
    }

    /// Asks the peer to stop sending; nothing more is read (QUIC
    /// STOP_SENDING with `no-error`; the HTTP/2 body is dropped).
    pub fn stop(&mut self) {
        match self {
            RecvHalf::Quic(recv) => {
                let _ = recv.stop(quinn::VarInt::from_u32(
                    rltp_wire::CloseCode::NoError.code(),
                ));
            }
            RecvHalf::H2(body, rest) => {
                *body = None;
                *rest = Bytes::new();
            }
        }
    }
}

/// The next non-empty DATA frame of `body`; `None` at its end (trailers
/// are not part of this profile and are skipped).
async fn next_data(body: &mut Incoming) -> Result<Option<Bytes>, StreamError> {
    loop {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await;
        match frame {
            None => return Ok(None),
            Some(Err(e)) => return Err(StreamError::H2(e)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data()
                    && !data.is_empty()
                {
                    return Ok(Some(data));
                }
            }
        }
    }
}
