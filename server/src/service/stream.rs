//! One connection, its streams, and reading each stream's request
//! (`PROTOCOL.md` §6): every stream carries one operation (or one
//! pipelined `submit-stream`). A stream is read in large chunks
//! ([`FrameReader`], over `rltp_wire`'s sans-IO decoder) and frames are
//! parsed from the buffer: prefix first, header second, body last, each
//! bound checked before the bytes it bounds are waited for; a malformed
//! frame is answered with a closed `{"error", "detail"}` and the stream is
//! finished, while the connection and its other streams go on. The whole
//! request goes to its operation ([`super::ops::dispatch`]).

use super::Ctx;
use super::ops::{self, encode_submit, write};
use rltp_proofs::multikey::Rkid;
use rltp_quic::net::{FrameReader, Prefix, ReadError};
use rltp_quic::stream::{RecvHalf, SendHalf};
use rltp_storage::Store;
use rltp_wire::response::{ErrorAnswer, ErrorCode};
use rltp_wire::{FrameError, Request};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;

/// Serves one connection until it closes or the server shuts down.
pub(super) async fn connection<S: Store>(
    incoming: quinn::Incoming,
    ctx: Arc<Ctx<S>>,
    _slot: OwnedSemaphorePermit,
) {
    let connection = match incoming.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "handshake failed");
            return;
        }
    };
    tracing::debug!(remote = %connection.remote_address(), "connection open");
    let _counted = super::ConnectionCount::open(&ctx);
    let _open = ctx
        .metrics
        .as_ref()
        .map(|m| m.connection_opened(rltp_quic::stream::Binding::Quic));
    let mut streams = JoinSet::new();
    let mut shutdown = ctx.shutdown.clone();
    loop {
        tokio::select! {
            _ = super::until_shutdown(&mut shutdown) => break,
            stream = connection.accept_bi() => match stream {
                Ok((send, recv)) => {
                    streams.spawn(stream_task(
                        Arc::clone(&ctx),
                        SendHalf::Quic(send),
                        RecvHalf::Quic(recv),
                    ));
                }
                Err(e) => {
                    tracing::debug!(reason = %e, "connection closed");
                    break;
                }
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
    // In-flight operations finish (watch sessions end on shutdown).
    while streams.join_next().await.is_some() {}
    let (code, reason) = super::endpoint::close_code(&ctx);
    connection.close(code, reason);
}

pub(super) fn deadline<S: Store>(ctx: &Ctx<S>) -> Duration {
    Duration::from_millis(ctx.limits().stream_read_timeout_ms)
}

/// Serves one operation's stream, on either binding (`PROTOCOL.md` §5,
/// §5b): the one seam where both listeners hand a stream to dispatch.
pub(super) async fn stream_task<S: Store>(ctx: Arc<Ctx<S>>, mut send: SendHalf, recv: RecvHalf) {
    let mut recv = FrameReader::new(recv);
    let _open = ctx.metrics.as_ref().map(|m| m.stream_opened());
    let bound = ctx.engine.envelope_bound();
    let request = tokio::time::timeout(deadline(&ctx), read_request(&mut recv, bound)).await;
    match request {
        Err(_elapsed) => {
            let answer = ErrorAnswer {
                code: ErrorCode::ReadTimeout,
                detail: "the request frame and the end of its stream did not arrive within the read deadline".into(),
            };
            refuse(&mut send, &mut recv, &answer).await;
        }
        Ok(Err(ReadError::Frame(e))) => {
            tracing::debug!(error = %e, "malformed request frame");
            refuse(&mut send, &mut recv, &ErrorAnswer::of(&e)).await;
        }
        // A reset stream or a lost connection (ReadError is non-exhaustive).
        Ok(Err(e)) => tracing::debug!(error = %e, "stream failed"),
        Ok(Ok(Read::Empty)) => {
            send.finish();
        }
        Ok(Ok(Read::Unread { rkid, size })) => {
            let answer = ops::submit::submit_unread(&ctx, rkid, size).await;
            write(&mut send, |out| encode_submit(&answer, out)).await;
            // The body is never read: the sender stops sending it.
            recv.stop();
            finish(&mut send).await;
        }
        Ok(Ok(Read::Whole(request, body))) => {
            ops::dispatch(&ctx, request, body, &mut send, &mut recv).await;
            finish(&mut send).await;
        }
    }
}

/// What [`read_request`] read.
enum Read {
    /// The stream ended before its first byte.
    Empty,
    /// A whole request: its frame, then the end of the stream (for
    /// `submit-stream`: its first frame; the items follow).
    Whole(Request, Vec<u8>),
    /// A `submit` announcing more than the s2 bound: decided without its
    /// body (`PROTOCOL.md` §7).
    Unread {
        /// The queue named in the header.
        rkid: Rkid,
        /// The announced size (bytes).
        size: u32,
    },
}

/// Reads the request: prefix, header, then the body under the
/// operation's own bound (a `submit` body must be `size` bytes, and one
/// above `envelope_bound` is left unread), then the end of the stream: a
/// request is one frame and nothing after it (`PROTOCOL.md` §6), except
/// for `submit-stream` and a watch session.
async fn read_request(recv: &mut FrameReader, envelope_bound: usize) -> Result<Read, ReadError> {
    let Some(prefix) = recv.prefix().await? else {
        return Ok(Read::Empty);
    };
    let header = recv.header(prefix).await?;
    let request = Request::from_header(&header)?;
    if let Request::Submit { rkid, size } = request {
        check_announced(size, prefix)?;
        if size as usize > envelope_bound {
            return Ok(Read::Unread { rkid, size });
        }
    }
    let body = recv.body(prefix, request.max_body()).await?;
    // A `submit-stream`'s items follow its first frame, and the client's
    // side of a watch session stays open: whatever it sends there is a
    // second proof, answered `second-proof` (§5a.3, [`watch_session`]).
    if !matches!(
        request,
        Request::SubmitStream | Request::Collect { watch: true, .. }
    ) {
        recv.expect_end().await?;
    }
    Ok(Read::Whole(request, body))
}

/// A `submit` header's `size` must equal the prefix's body length.
pub(super) fn check_announced(size: u32, prefix: Prefix) -> Result<(), FrameError> {
    if size as usize == prefix.body_len {
        Ok(())
    } else {
        Err(FrameError::Header(format!(
            "size {size} does not match the body length {}",
            prefix.body_len
        )))
    }
}

/// Answers with a closed error, finishes the stream, and asks the peer to
/// stop sending (the rest of its frame is never read).
pub(super) async fn refuse(send: &mut SendHalf, recv: &mut FrameReader, answer: &ErrorAnswer) {
    write(send, |out| answer.encode_frame_into(out)).await;
    recv.stop();
    finish(send).await;
}

/// Finishes the send side and waits (bounded) until the peer has the data,
/// so a draining shutdown never cuts an answer.
async fn finish(send: &mut SendHalf) {
    if send.finish() {
        send.flushed(Duration::from_secs(5)).await;
    }
}
