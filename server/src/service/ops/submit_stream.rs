//! `submit-stream` (§5a.5, `PROTOCOL.md` §7): pipelined submissions on
//! one stream. The items that arrived together (a burst: every whole item
//! in the buffer) go to the writer as one job, and their answers are
//! written with one write.

use super::answer::{encode_submit, unavailable};
use super::submit::{answered, submit_unread};
use crate::defaults::PIPELINE_DEPTH;
use crate::driver::BurstAnswers;
use crate::service::stream::{check_announced, deadline};
use crate::service::{Ctx, until_shutdown};
use rltp_proofs::multikey::{Rkid, RkidText, RkidTexts};
use rltp_quic::net::{FrameReader, ReadError};
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response::{ErrorAnswer, ErrorCode, SubmitAnswer};
use rltp_wire::{self as wire};
use std::sync::Arc;

/// The items of a burst, handed to the writer as one job (in order)
/// before this returns; its answers are read by [`Pending::encode`].
fn submit_burst<S: Store>(ctx: &Ctx<S>, items: Vec<(RkidText, Vec<u8>)>) -> Pending {
    let rkids: Vec<Rkid> = items.iter().map(|(rkid, _)| *rkid.rkid()).collect();
    Pending::Burst(rkids, ctx.engine.submit_burst(items))
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
pub(super) async fn serve<S: Store>(
    ctx: &Arc<Ctx<S>>,
    send: &mut SendHalf,
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
                _ = until_shutdown(&mut shutdown) => break,
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
    recv.stop();
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
