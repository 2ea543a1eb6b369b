//! One connection, its streams, and the operations (`PROTOCOL.md` §6–§7).
//!
//! Every stream carries one operation (or one pipelined `submit-stream`).
//! A stream is read in large chunks ([`net::FrameReader`]) and frames are
//! parsed from the buffer: prefix first, header second, body last, each
//! bound checked before the bytes it bounds are waited for; a malformed frame
//! is answered with a closed `{"error", "detail"}` and the stream is
//! finished, while the connection and its other streams go on.
//! Blocking engine calls run on the blocking pool; a submission awaits the
//! group commit without blocking. The items of a `submit-stream` that
//! arrived together (a burst: every whole item in the buffer) go to the
//! writer as one job, and their answers are written with one write.
//!
//! Every answer is encoded by `rltp_wire::response`'s direct encoders
//! (`encode_*_into`: the JCS bytes of the `*_header` functions, `PROTOCOL.md`
//! §6, without a JSON tree or a JCS pass) — `submit`, `submit-stream`,
//! `status`, `register`, a challenge refusal, `conclude`, the closed errors,
//! and every frame of `collect` and of a watch session; only the
//! `declaration` answer and an issued challenge (nested documents) take
//! the JCS path. A collect page (its deposit frames and its trailer) and
//! a watch push are encoded into one buffer and written with one write per
//! [`WRITE_CHUNK`] (a page is bounded by its limit × the envelope bound).

use super::metrics::Op;
use super::{Ctx, current_declaration};
use crate::driver::BurstAnswers;
use rltp_engine::{CollectedDeposit, SessionError, WatchPage};
use rltp_proofs::multikey::{Rkid, RkidText, RkidTexts};
use rltp_quic::net::{self, FrameReader, ReadError};
use rltp_storage::Store;
use rltp_wire::response::{self, ChallengeAnswer, ErrorAnswer, ErrorCode, SubmitAnswer};
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use rltp_wire::{self as wire, FrameError, Request};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;

use crate::defaults::{PIPELINE_DEPTH, WATCH_PAGE, WRITE_CHUNK};

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
    let _open = ctx.metrics.as_ref().map(|m| m.connection_opened());
    let mut streams = JoinSet::new();
    let mut shutdown = ctx.shutdown.clone();
    loop {
        tokio::select! {
            _ = super::until_shutdown(&mut shutdown) => break,
            stream = connection.accept_bi() => match stream {
                Ok((send, recv)) => {
                    streams.spawn(stream_task(Arc::clone(&ctx), send, recv));
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
    let (code, reason) = super::close_code(&ctx);
    connection.close(code, reason);
}

fn deadline<S: Store>(ctx: &Ctx<S>) -> Duration {
    Duration::from_millis(ctx.limits().stream_read_timeout_ms)
}

async fn stream_task<S: Store>(
    ctx: Arc<Ctx<S>>,
    mut send: quinn::SendStream,
    recv: quinn::RecvStream,
) {
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
            let _ = send.finish();
        }
        Ok(Ok(Read::Unread { rkid, size })) => {
            let answer = submit_unread(&ctx, rkid, size).await;
            write(&mut send, |out| encode_submit(&answer, out)).await;
            // The body is never read: the sender stops sending it.
            let _ = recv.stream().stop(quinn::VarInt::from_u32(
                rltp_wire::CloseCode::NoError.code(),
            ));
            finish(&mut send).await;
        }
        Ok(Ok(Read::Whole(request, body))) => {
            dispatch(&ctx, request, body, &mut send, &mut recv).await;
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
fn check_announced(size: u32, prefix: net::Prefix) -> Result<(), FrameError> {
    if size as usize == prefix.body_len {
        Ok(())
    } else {
        Err(FrameError::Header(format!(
            "size {size} does not match the body length {}",
            prefix.body_len
        )))
    }
}

fn second_proof() -> ErrorAnswer {
    ErrorAnswer {
        code: ErrorCode::SecondProof,
        detail: "a watch stream is one authorization session for one principal (§5a.3); \
                 open a new stream for another proof"
            .into(),
    }
}

/// Answers with a closed error, finishes the stream, and asks the peer to
/// stop sending (the rest of its frame is never read).
async fn refuse(send: &mut quinn::SendStream, recv: &mut FrameReader, answer: &ErrorAnswer) {
    write(send, |out| answer.encode_frame_into(out)).await;
    let _ = recv.stream().stop(quinn::VarInt::from_u32(
        rltp_wire::CloseCode::NoError.code(),
    ));
    finish(send).await;
}

/// Finishes the send side and waits (bounded) until the peer has the data,
/// so a draining shutdown never cuts an answer.
async fn finish(send: &mut quinn::SendStream) {
    if send.finish().is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(5), send.stopped()).await;
    }
}

/// Writes the frames `encode` appends to a buffer, with one write.
async fn write(send: &mut quinn::SendStream, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
    let mut out = Vec::new();
    encode(&mut out);
    send.write_all(&out).await.is_ok()
}

/// Appends the frame of a submission's answer.
fn encode_submit(answer: &Result<SubmitAnswer, ErrorAnswer>, out: &mut Vec<u8>) {
    match answer {
        Ok(answer) => answer.encode_frame_into(out),
        Err(error) => error.encode_frame_into(out),
    }
}

fn unavailable(detail: impl std::fmt::Display) -> ErrorAnswer {
    let detail = detail.to_string();
    const PREFIX: &str = "carrier storage unavailable";
    ErrorAnswer {
        code: ErrorCode::Unavailable,
        detail: match detail.strip_prefix(PREFIX) {
            // The engine's errors name the condition already.
            Some(rest) => format!("{PREFIX}{rest}"),
            None => format!("{PREFIX}, retry: {detail}"),
        },
    }
}

/// Counts an answer of `op` for the metrics (if the endpoint is on).
fn count<S: Store>(ctx: &Ctx<S>, op: Op, verdict: &str) {
    if let Some(m) = &ctx.metrics {
        m.verdict(op, verdict, ctx.engine.now());
    }
}

/// Counts an `unavailable` answer of `op` for the metrics.
fn count_unavailable<S: Store>(ctx: &Ctx<S>, op: Op) {
    if let Some(m) = &ctx.metrics {
        m.unavailable(op);
    }
}

/// Counts deposits delivered to a recipient for the metrics.
fn count_collected<S: Store>(ctx: &Ctx<S>, n: usize) {
    if let Some(m) = &ctx.metrics {
        m.collected(n);
    }
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!(error = %e, "engine task failed");
            None
        }
    }
}

async fn dispatch<S: Store>(
    ctx: &Arc<Ctx<S>>,
    request: Request,
    body: Vec<u8>,
    send: &mut quinn::SendStream,
    recv: &mut FrameReader,
) {
    let op = request.op().as_str();
    match request {
        Request::Declaration => {
            let document = current_declaration(ctx);
            let _ = net::write_frame(send, &response::declaration_header(), &document).await;
            count(ctx, Op::Declaration, "ok");
            tracing::debug!(op, "served");
        }
        Request::Submit { rkid, .. } => {
            let answer = submit(ctx, rkid, body).await;
            write(send, |out| encode_submit(&answer, out)).await;
        }
        Request::SubmitStream => submit_stream(ctx, send, recv).await,
        Request::Status { rkid, deposit } => {
            let engine = ctx.engine.clone();
            match blocking(move || engine.status(&rkid, &deposit)).await {
                Some(Ok(status)) => {
                    count(ctx, Op::Status, status.as_str());
                    tracing::info!(op, %status, "status");
                    write(send, |out| response::encode_status_into(status, out)).await;
                }
                Some(Err(e)) => {
                    count_unavailable(ctx, Op::Status);
                    write(send, |out| unavailable(&e).encode_frame_into(out)).await;
                }
                None => {
                    count_unavailable(ctx, Op::Status);
                    write(send, |out| unavailable("internal").encode_frame_into(out)).await;
                }
            }
        }
        Request::Challenge { rkid, purpose } => {
            // Inline: one snapshot read and one seal (two X25519 scalar
            // multiplications, tens of µs) cost less than a hop to the
            // blocking pool and back.
            let answer = match ctx.engine.challenge(&rkid, purpose) {
                Ok(issued) => Ok(ChallengeAnswer::Issued {
                    principal_challenge: issued.principal_challenge,
                    address_challenge: issued.sealed_address_challenge,
                    expires_at: issued.expires_at,
                }),
                Err(SessionError::Refused(v)) => Ok(ChallengeAnswer::Refused(v)),
                Err(e) => Err(unavailable(e)),
            };
            match answer {
                Ok(answer) => {
                    let verdict = match &answer {
                        ChallengeAnswer::Issued { .. } => "issued",
                        ChallengeAnswer::Refused(v) => v.as_str(),
                    };
                    count(ctx, Op::Challenge, verdict);
                    tracing::debug!(op, %purpose, verdict, "challenge");
                    write(send, |out| answer.encode_frame_into(out)).await;
                }
                Err(e) => {
                    count_unavailable(ctx, Op::Challenge);
                    write(send, |out| e.encode_frame_into(out)).await;
                }
            }
        }
        Request::Register => {
            // r1–r3 inline (one Ed25519 verification), the commit awaited.
            let verdict = match ctx.engine.register_async(&body).await {
                Ok(verdict) => verdict,
                Err(e) => {
                    count_unavailable(ctx, Op::Register);
                    tracing::warn!(op, error = %e, "register answered unavailable");
                    write(send, |out| unavailable(e).encode_frame_into(out)).await;
                    return;
                }
            };
            // The guarantee-3 verification count makes "a replay costs no
            // verification" observable from outside the process.
            let verifications = ctx.engine.counters().verifications;
            count(ctx, Op::Register, verdict.as_str());
            tracing::info!(op, %verdict, verifications, "register");
            write(send, |out| response::encode_verdict_into(verdict, out)).await;
        }
        Request::Collect {
            after,
            limit,
            watch,
        } => {
            collect(ctx, body, after, limit, watch, send, recv).await;
        }
        Request::Conclude { deposits } => {
            let engine = ctx.engine.clone();
            let answer = match blocking(move || engine.conclude(&body, &deposits)).await {
                Some(Ok(done)) => {
                    count(ctx, Op::Conclude, Verdict::Served.as_str());
                    tracing::info!(op, verdict = "served", removed = done.removed, "conclude");
                    Ok((Verdict::Served, Some(done.removed as u64)))
                }
                Some(Err(SessionError::Refused(v))) => {
                    count(ctx, Op::Conclude, v.as_str());
                    tracing::info!(op, verdict = %v, "conclude");
                    Ok((v, None))
                }
                Some(Err(e)) => {
                    count_unavailable(ctx, Op::Conclude);
                    Err(unavailable(e))
                }
                None => {
                    count_unavailable(ctx, Op::Conclude);
                    Err(unavailable("internal"))
                }
            };
            write(send, |out| match answer {
                Ok((verdict, concluded)) => response::encode_conclude_into(verdict, concluded, out),
                Err(e) => e.encode_frame_into(out),
            })
            .await;
        }
    }
}

/// One submission (§5a.5); wakes watch sessions of the queue on admission.
/// A storage failure is answered `unavailable` (retriable, not a verdict:
/// `PROTOCOL.md` §6), never `refused(capacity)`.
async fn submit<S: Store>(
    ctx: &Ctx<S>,
    rkid: Rkid,
    body: Vec<u8>,
) -> Result<SubmitAnswer, ErrorAnswer> {
    let (verdict, id) = ctx.engine.submit_async(&RkidText::of(&rkid), body).await;
    answered(ctx, &rkid, verdict, id)
}

/// The items of a burst, handed to the writer as one job (in order)
/// before this returns; its answers are read by [`Pending::encode`].
fn submit_burst<S: Store>(ctx: &Ctx<S>, items: Vec<(RkidText, Vec<u8>)>) -> Pending {
    let rkids: Vec<Rkid> = items.iter().map(|(rkid, _)| *rkid.rkid()).collect();
    Pending::Burst(rkids, ctx.engine.submit_burst(items))
}

/// The answer to one decided submission: counted, logged, and watch
/// sessions of the queue woken on admission.
fn answered<S: Store>(
    ctx: &Ctx<S>,
    rkid: &Rkid,
    verdict: Result<SubmitVerdict, rltp_engine::EngineError>,
    id: rltp_proofs::DepositId,
) -> Result<SubmitAnswer, ErrorAnswer> {
    let verdict = match verdict {
        Ok(verdict) => verdict,
        Err(e) => {
            count_unavailable(ctx, Op::Submit);
            tracing::warn!(op = "submit", error = %e, "submit answered unavailable");
            return Err(unavailable(e));
        }
    };
    if verdict == SubmitVerdict::Admitted {
        ctx.watchers.admitted(rkid);
    }
    count(ctx, Op::Submit, verdict.as_str());
    // One line per deposit is an access log: `debug`, so that the default
    // `info` costs nothing per deposit (every verdict is counted in the
    // metrics either way).
    tracing::debug!(op = "submit", %verdict, deposit = %id.to_multibase(), "submit");
    Ok(SubmitAnswer::new(verdict, id))
}

/// A submission announcing more than the s2 bound, decided before its
/// body is read (§5a.5 s1, then s2: `refused(bounds)`).
async fn submit_unread<S: Store>(
    ctx: &Ctx<S>,
    rkid: Rkid,
    size: u32,
) -> Result<SubmitAnswer, ErrorAnswer> {
    let verdict = match ctx.engine.submit_unread_async(&rkid).await {
        Ok(verdict) => verdict,
        Err(e) => {
            count_unavailable(ctx, Op::Submit);
            tracing::warn!(op = "submit", error = %e, "submit answered unavailable");
            return Err(unavailable(e));
        }
    };
    count(ctx, Op::Submit, verdict.as_str());
    tracing::debug!(op = "submit", %verdict, size, "submit unread");
    Ok(SubmitAnswer {
        verdict,
        deposit: None,
    })
}

enum Pending {
    /// A burst of whole items (their queues): one answer each, in order.
    Burst(Vec<Rkid>, BurstAnswers),
    Verdict(tokio::task::JoinHandle<Result<SubmitAnswer, ErrorAnswer>>),
    Error(ErrorAnswer),
}

impl Pending {
    /// Whether its answers are ready (awaiting it will not wait).
    fn is_ready(&self) -> bool {
        match self {
            Pending::Burst(_, answers) => answers.is_ready(),
            Pending::Verdict(handle) => handle.is_finished(),
            Pending::Error(_) => true,
        }
    }

    /// Appends its answer frames to `out`; `true` if the stream ends after
    /// them (an error answer), else the number of answers is added to
    /// `count`.
    async fn encode<S: Store>(self, ctx: &Ctx<S>, out: &mut Vec<u8>, count: &mut u64) -> bool {
        let answers = match self {
            Pending::Burst(rkids, answers) => rkids
                .iter()
                .zip(answers.answers().await)
                .map(|(rkid, (verdict, id))| answered(ctx, rkid, verdict, id))
                .collect(),
            Pending::Verdict(handle) => {
                vec![
                    handle
                        .await
                        .unwrap_or_else(|_| Err(unavailable("internal"))),
                ]
            }
            Pending::Error(e) => vec![Err(e)],
        };
        for answer in answers {
            encode_submit(&answer, out);
            if answer.is_err() {
                return true;
            }
            *count += 1;
        }
        false
    }
}

/// The pipelined `submit-stream`: items are read and submitted as they
/// arrive (many in flight share group commits; the whole items that
/// arrived together go to the writer as one job); verdicts are written in
/// item order, all that are ready with one write. A malformed item is
/// answered with a closed error after the verdicts before it, and ends
/// the stream; so is an item the storage could not complete
/// (`unavailable`; the items after it that were already read may have
/// been admitted: a resubmission is answered `duplicate`).
async fn submit_stream<S: Store>(
    ctx: &Arc<Ctx<S>>,
    send: &mut quinn::SendStream,
    recv: &mut FrameReader,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Pending>(PIPELINE_DEPTH);
    let bound = ctx.engine.envelope_bound();
    let reader = async {
        let mut shutdown = ctx.shutdown.clone();
        // Each queue's `rkid` text is decoded once per stream.
        let mut known = RkidTexts::default();
        'read: loop {
            // At shutdown no further item is read; those read are answered.
            // Each item (its prefix included) must arrive within the read
            // deadline of the previous one: an idle stream gives its slot
            // back (`PROTOCOL.md` §7).
            let item = tokio::select! {
                _ = super::until_shutdown(&mut shutdown) => break,
                item = tokio::time::timeout(deadline(ctx), read_item(recv, bound, &mut known)) => item,
            };
            let mut burst = Vec::new();
            let mut item = Some(item);
            // The first item, then every whole item already buffered:
            // reading those does not wait.
            while let Some(next) = item.take() {
                let pending = match next {
                    Ok(Ok(Some(Item::Whole(rkid, body)))) => {
                        burst.push((rkid, body));
                        if burst.len() < PIPELINE_DEPTH && recv.frame_buffered() {
                            item = Some(Ok(read_item(recv, bound, &mut known).await));
                        }
                        continue;
                    }
                    Ok(Ok(None)) => None,
                    Ok(Ok(Some(Item::Unread(rkid, size)))) => {
                        let ctx = Arc::clone(ctx);
                        Some(Pending::Verdict(tokio::spawn(async move {
                            submit_unread(&ctx, *rkid.rkid(), size).await
                        })))
                    }
                    Ok(Err(ReadError::Frame(e))) => Some(Pending::Error(ErrorAnswer::of(&e))),
                    Ok(Err(_stream_failed)) => None,
                    Err(_elapsed) => Some(Pending::Error(ErrorAnswer {
                        code: ErrorCode::ReadTimeout,
                        detail: "the next item did not arrive within the read deadline".into(),
                    })),
                };
                if !burst.is_empty() {
                    let pending = submit_burst(ctx, std::mem::take(&mut burst));
                    if tx.send(pending).await.is_err() {
                        break 'read;
                    }
                }
                let Some(pending) = pending else {
                    break 'read;
                };
                let last = matches!(pending, Pending::Error(_));
                if tx.send(pending).await.is_err() || last {
                    break 'read;
                }
            }
            if !burst.is_empty() && tx.send(submit_burst(ctx, burst)).await.is_err() {
                break;
            }
        }
        drop(tx);
    };
    let writer = async {
        let mut count = 0u64;
        let mut out = Vec::new();
        let mut next = None;
        loop {
            let pending = match next.take() {
                Some(pending) => pending,
                None => match rx.recv().await {
                    Some(pending) => pending,
                    None => break,
                },
            };
            out.clear();
            let mut last = pending.encode(ctx, &mut out, &mut count).await;
            // Whatever else is answered already goes in the same write.
            while !last {
                match rx.try_recv() {
                    Ok(more) if more.is_ready() => {
                        last = more.encode(ctx, &mut out, &mut count).await;
                    }
                    Ok(more) => {
                        next = Some(more);
                        break;
                    }
                    Err(_) => break,
                }
            }
            if send.write_all(&out).await.is_err() || last {
                break;
            }
        }
        tracing::debug!(items = count, "submit-stream ended");
    };
    tokio::join!(reader, writer);
    let _ = recv.stream().stop(quinn::VarInt::from_u32(
        rltp_wire::CloseCode::NoError.code(),
    ));
}

/// One item of a `submit-stream`, as read.
enum Item {
    /// `{rkid, size}` and its envelope.
    Whole(RkidText, Vec<u8>),
    /// An item announcing more than the s2 bound: its body was skipped
    /// unread, and it is decided without it.
    Unread(RkidText, u32),
}

/// Reads the next item; `Ok(None)` when the client has finished.
async fn read_item(
    recv: &mut FrameReader,
    envelope_bound: usize,
    known: &mut RkidTexts,
) -> Result<Option<Item>, ReadError> {
    let Some(prefix) = recv.prefix().await? else {
        return Ok(None);
    };
    let (rkid, size) = wire::parse_stream_item_bytes_with(recv.header_bytes(prefix).await?, known)?;
    check_announced(size, prefix)?;
    if size as usize > envelope_bound {
        recv.skip(prefix).await?;
        return Ok(Some(Item::Unread(rkid, size)));
    }
    let body = recv.body(prefix, wire::MAX_BODY_BYTES).await?;
    Ok(Some(Item::Whole(rkid, body)))
}

/// Writes `deposits` as deposit frames, then the trailer `end` (a collect
/// page's: `{"verdict", "retriable", "more"?}`, §5a.7), encoded into one
/// buffer that is written whenever it reaches [`WRITE_CHUNK`] and at the
/// end: one write for a page of small envelopes.
async fn write_page(
    send: &mut quinn::SendStream,
    deposits: &[CollectedDeposit],
    end: Option<(Verdict, Option<bool>)>,
) -> bool {
    /// More than a deposit frame's prefix and header take (~92 bytes).
    const FRAME_OVERHEAD: usize = 128;
    let total: usize = deposits
        .iter()
        .map(|d| d.bytes.len() + FRAME_OVERHEAD)
        .sum();
    let mut out = Vec::with_capacity(total.min(WRITE_CHUNK) + FRAME_OVERHEAD);
    for d in deposits {
        response::encode_deposit_frame_into(&d.id, d.seq, &d.bytes, &mut out);
        if out.len() >= WRITE_CHUNK {
            if send.write_all(&out).await.is_err() {
                return false;
            }
            out.clear();
        }
    }
    if let Some((verdict, more)) = end {
        response::encode_collect_end_into(verdict, more, &mut out);
    }
    out.is_empty() || send.write_all(&out).await.is_ok()
}

/// `collect` (§5a.7, §5a.8): the page, then the trailer; with `watch`,
/// the stream stays open as one authorization session (§5a.3).
async fn collect<S: Store>(
    ctx: &Arc<Ctx<S>>,
    proof: Vec<u8>,
    after: Option<u64>,
    limit: u32,
    watch: bool,
    send: &mut quinn::SendStream,
    recv: &mut FrameReader,
) {
    let engine = ctx.engine.clone();
    let result = {
        let proof = proof.clone();
        blocking(move || engine.collect(&proof, after, limit as usize)).await
    };
    let collected = match result {
        Some(Ok(c)) => c,
        Some(Err(SessionError::Refused(v))) => {
            count(ctx, Op::Collect, v.as_str());
            tracing::info!(op = "collect", verdict = %v, "collect");
            write_page(send, &[], Some((v, None))).await;
            return;
        }
        Some(Err(e)) => {
            count_unavailable(ctx, Op::Collect);
            write(send, |out| unavailable(e).encode_frame_into(out)).await;
            return;
        }
        None => {
            count_unavailable(ctx, Op::Collect);
            write(send, |out| unavailable("internal").encode_frame_into(out)).await;
            return;
        }
    };
    count(ctx, Op::Collect, Verdict::Served.as_str());
    count_collected(ctx, collected.deposits.len());
    tracing::info!(
        op = "collect",
        verdict = "served",
        deposits = collected.deposits.len(),
        watch,
        "collect"
    );
    let end = Some((Verdict::Served, Some(collected.more)));
    if !write_page(send, &collected.deposits, end).await {
        return;
    }
    if !watch {
        return;
    }
    // The proof was verified by the engine; its principal scopes the session.
    let Ok(parsed) = rltp_proofs::proof::parse(&proof, ctx.carrier.as_str()) else {
        return;
    };
    let last = collected.deposits.last().map(|d| d.seq).or(after);
    watch_session(
        ctx,
        *parsed.rkid(),
        *parsed.principal().as_bytes(),
        last,
        limit,
        send,
        recv,
    )
    .await;
}

/// The rest of a watch session: push each newly admitted deposit of the
/// queue as a deposit frame. Ends with `refused(no-such-queue)` when the
/// binding leaves the principal, with `second-proof` if the client sends
/// anything on the stream (one authorization session, one principal:
/// §5a.3), or silently at shutdown or when the client goes away.
async fn watch_session<S: Store>(
    ctx: &Arc<Ctx<S>>,
    rkid: Rkid,
    principal: [u8; 32],
    mut after: Option<u64>,
    limit: u32,
    send: &mut quinn::SendStream,
    recv: &mut FrameReader,
) {
    let page = (limit as usize).min(WATCH_PAGE);
    let mut client_open = true;
    let subscription = ctx.watchers.subscribe(rkid);
    let mut shutdown = ctx.shutdown.clone();
    let recheck = Duration::from_millis(ctx.limits().sweep_interval_ms);
    loop {
        let notified = subscription.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let engine = ctx.engine.clone();
        let read = blocking(move || engine.watch_page(&rkid, &principal, after, page)).await;
        match read {
            Some(Ok(WatchPage::Deposits { deposits, .. })) => {
                if !write_page(send, &deposits, None).await {
                    return;
                }
                if let Some(last) = deposits.last() {
                    after = Some(last.seq);
                    count_collected(ctx, deposits.len());
                    tracing::debug!(pushed = deposits.len(), "watch push");
                    continue;
                }
            }
            Some(Ok(WatchPage::Gone)) => {
                write_page(send, &[], Some((Verdict::NoSuchQueue, None))).await;
                return;
            }
            Some(Err(e)) => {
                write(send, |out| unavailable(e).encode_frame_into(out)).await;
                return;
            }
            None => {
                write(send, |out| unavailable("internal").encode_frame_into(out)).await;
                return;
            }
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(recheck) => {}
            _ = super::until_shutdown(&mut shutdown) => return,
            _ = send.stopped() => return,
            read = recv.fill(1), if client_open => match read {
                Ok(false) => client_open = false,
                Ok(true) => {
                    tracing::info!(op = "collect", "second proof on a watch session refused");
                    refuse(send, recv, &second_proof()).await;
                    return;
                }
                Err(_) => return,
            },
        }
    }
}
