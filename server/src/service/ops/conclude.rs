//! `conclude` (§5a.8): r1–r3, then the named deposits concluded in the
//! writer; `served` with the count removed once durable, or the refusal.

use super::answer::{blocking, count, count_unavailable, unavailable, write};
use crate::service::Ctx;
use crate::service::metrics::Op;
use rltp_engine::{Concluded, SessionError};
use rltp_proofs::DepositId;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response;
use rltp_wire::verdict::Verdict;

/// Concludes `deposits` under the proof in `body`.
pub(super) async fn serve<S: Store>(
    ctx: &Ctx<S>,
    body: Vec<u8>,
    deposits: Vec<DepositId>,
    send: &mut SendHalf,
) {
    let answer = match concluded(ctx, body, deposits).await {
        Some(Ok(done)) => {
            count(ctx, Op::Conclude, Verdict::Served.as_str());
            tracing::info!(
                op = "conclude",
                verdict = "served",
                removed = done.removed,
                "conclude"
            );
            Ok((Verdict::Served, Some(done.removed as u64)))
        }
        Some(Err(SessionError::Refused(v))) => {
            count(ctx, Op::Conclude, v.as_str());
            tracing::info!(op = "conclude", verdict = %v, "conclude");
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

/// r1–r3 on the blocking pool; the conclusion then awaited without holding
/// a thread through its fsync. `None` if the blocking task failed.
async fn concluded<S: Store>(
    ctx: &Ctx<S>,
    body: Vec<u8>,
    deposits: Vec<DepositId>,
) -> Option<Result<Concluded, SessionError>> {
    let engine = ctx.engine.clone();
    let ticket = match blocking(move || engine.conclude_queued(&body, &deposits)).await? {
        Ok(ticket) => ticket,
        Err(e) => return Some(Err(e)),
    };
    Some(match ticket.answer().await {
        Ok(outcome) => outcome.map_err(SessionError::Refused),
        Err(e) => Err(e.into()),
    })
}
