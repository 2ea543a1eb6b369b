//! `register` (§5a.3): r1–r3 inline (one Ed25519 verification), r4–r5 in
//! the writer, the verdict once durable.

use super::answer::{count, count_unavailable, log_unavailable, unavailable, write};
use crate::service::Ctx;
use crate::service::metrics::Op;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response;

/// Registers (or rebinds) under the proof in `body`.
pub(super) async fn serve<S: Store>(ctx: &Ctx<S>, body: Vec<u8>, send: &mut SendHalf) {
    let verdict = match ctx.engine.register_async(&body).await {
        Ok(verdict) => verdict,
        Err(e) => {
            count_unavailable(ctx, Op::Register);
            log_unavailable(Op::Register, &e);
            write(send, |out| unavailable(e).encode_frame_into(out)).await;
            return;
        }
    };
    // The guarantee-3 verification count makes "a replay costs no
    // verification" observable from outside the process.
    let verifications = ctx.engine.counters().verifications;
    count(ctx, Op::Register, verdict.as_str());
    tracing::info!(op = "register", %verdict, verifications, "register");
    write(send, |out| response::encode_verdict_into(verdict, out)).await;
}
