//! `collect` (§5a.7, §5a.8): r1–r3, the page decided in the writer, its
//! bytes read outside it, then the deposit frames and the trailer; with
//! `watch`, the stream stays open as one authorization session (§5a.3)
//! that pushes each newly admitted deposit. A collect page (its deposit
//! frames and its trailer) and a watch push are encoded into one buffer
//! and written with one write per [`WRITE_CHUNK`] (a page is bounded by
//! its limit × the envelope bound).

use super::answer::{
    blocking, clock_refusal, count, count_collected, count_unavailable, unavailable, write,
};
use crate::defaults::{WATCH_PAGE, WRITE_CHUNK};
use crate::service::metrics::Op;
use crate::service::stream::refuse;
use crate::service::{Ctx, until_shutdown};
use rltp_engine::{Collected, CollectedDeposit, SessionError, WatchPage};
use rltp_proofs::multikey::Rkid;
use rltp_quic::net::FrameReader;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response::{self, ErrorAnswer, ErrorCode};
use rltp_wire::verdict::Verdict;
use std::sync::Arc;
use std::time::Duration;

/// `collect` (§5a.7, §5a.8): the page, then the trailer; with `watch`,
/// the stream stays open as one authorization session (§5a.3).
pub(super) async fn serve<S: Store>(
    ctx: &Arc<Ctx<S>>,
    proof: Vec<u8>,
    after: Option<u64>,
    limit: u32,
    watch: bool,
    send: &mut SendHalf,
    recv: &mut FrameReader,
) {
    let result = collect_page(ctx, proof, after, limit as usize).await;
    let (rkid, principal, collected) = match result {
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
    // The session is the principal r1–r3 authorized (the proof parsed once).
    let last = collected.deposits.last().map(|d| d.seq).or(after);
    watch_session(ctx, rkid, principal, last, limit, send, recv).await;
}

/// r1–r3 on the blocking pool; the page then awaited without holding a
/// thread through its fsync; its bytes read on the blocking pool. Returns
/// the session (the proof's `rkid` and principal) with the page; `None`
/// if a blocking task failed.
async fn collect_page<S: Store>(
    ctx: &Ctx<S>,
    proof: Vec<u8>,
    after: Option<u64>,
    limit: usize,
) -> Option<Result<(Rkid, [u8; 32], Collected), SessionError>> {
    let engine = ctx.engine.clone();
    let queued = match blocking(move || engine.collect_queued(&proof, after, limit)).await? {
        Ok(queued) => queued,
        Err(e) => return Some(Err(e)),
    };
    let (rkid, principal) = (queued.rkid, queued.principal);
    let page = match queued.page().await {
        Ok(page) => page,
        Err(e) => return Some(Err(e)),
    };
    let engine = ctx.engine.clone();
    let collected = blocking(move || engine.read_page(&rkid, page)).await?;
    Some(collected.map(|c| (rkid, principal, c)))
}

/// Writes `deposits` as deposit frames, then the trailer `end` (a collect
/// page's: `{"verdict", "retriable", "more"?}`, §5a.7), encoded into one
/// buffer that is written whenever it reaches [`WRITE_CHUNK`] and at the
/// end: one write for a page of small envelopes.
async fn write_page(
    send: &mut SendHalf,
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
    send: &mut SendHalf,
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
        if let Some(refusal) = clock_refusal(ctx, Op::Collect) {
            write(send, |out| refusal.encode_frame_into(out)).await;
            return;
        }
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
            _ = until_shutdown(&mut shutdown) => return,
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

fn second_proof() -> ErrorAnswer {
    ErrorAnswer {
        code: ErrorCode::SecondProof,
        detail: "a watch stream is one authorization session for one principal (§5a.3); \
                 open a new stream for another proof"
            .into(),
    }
}
