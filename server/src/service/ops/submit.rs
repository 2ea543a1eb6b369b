//! `submit` (§5a.5): one envelope, screened now (s2, the deposit id) and
//! decided in the writer (s1–s6), answered once durable; and a submission
//! announcing more than the s2 bound, decided before its body is read.
//! A storage failure is answered `unavailable` (retriable, not a verdict:
//! `PROTOCOL.md` §6), never `refused(capacity)`.

use super::answer::{
    clock_refusal, count, count_unavailable, encode_submit, log_unavailable, unavailable, write,
};
use crate::service::Ctx;
use crate::service::metrics::Op;
use rltp_proofs::multikey::{Rkid, RkidText};
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response::{ErrorAnswer, SubmitAnswer};
use rltp_wire::verdict::SubmitVerdict;

/// Answers one `submit` with its envelope `body`.
pub(super) async fn serve<S: Store>(ctx: &Ctx<S>, rkid: Rkid, body: Vec<u8>, send: &mut SendHalf) {
    let answer = submit(ctx, rkid, body).await;
    write(send, |out| encode_submit(&answer, out)).await;
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

/// The answer to one decided submission: counted, logged, and watch
/// sessions of the queue woken on admission.
pub(super) fn answered<S: Store>(
    ctx: &Ctx<S>,
    rkid: &Rkid,
    verdict: Result<SubmitVerdict, rltp_engine::EngineError>,
    id: rltp_proofs::DepositId,
) -> Result<SubmitAnswer, ErrorAnswer> {
    let verdict = match verdict {
        Ok(verdict) => verdict,
        Err(e) => {
            count_unavailable(ctx, Op::Submit);
            log_unavailable(Op::Submit, &e);
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
pub(in crate::service) async fn submit_unread<S: Store>(
    ctx: &Ctx<S>,
    rkid: Rkid,
    size: u32,
) -> Result<SubmitAnswer, ErrorAnswer> {
    if let Some(refusal) = clock_refusal(ctx, Op::Submit) {
        return Err(refusal);
    }
    let verdict = match ctx.engine.submit_unread_async(&rkid).await {
        Ok(verdict) => verdict,
        Err(e) => {
            count_unavailable(ctx, Op::Submit);
            log_unavailable(Op::Submit, &e);
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
