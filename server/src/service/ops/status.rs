//! `status` (§5a.8, §6.1): a deposit's sender status, answered once
//! everything the snapshot saw is durable.

use super::answer::{blocking, count, count_unavailable, unavailable, write};
use crate::service::Ctx;
use crate::service::metrics::Op;
use rltp_proofs::DepositId;
use rltp_proofs::multikey::Rkid;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response;

/// Answers the status of `deposit` in `rkid`'s queue.
pub(super) async fn serve<S: Store>(
    ctx: &Ctx<S>,
    rkid: Rkid,
    deposit: DepositId,
    send: &mut SendHalf,
) {
    let engine = ctx.engine.clone();
    match blocking(move || engine.status(&rkid, &deposit)).await {
        Some(Ok(status)) => {
            count(ctx, Op::Status, status.as_str());
            tracing::info!(op = "status", %status, "status");
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
