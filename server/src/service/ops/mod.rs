//! The operations (`PROTOCOL.md` §6–§7), one file each, in the manner of
//! mini-redis's `cmd/`: each parses what its request carries beyond the
//! header, calls the engine through the [`crate::driver::Driver`] (which
//! hands the writer a typed job), and writes its answer. [`dispatch`] only
//! routes a request to its operation; the shared answer plumbing (one
//! write per answer, counting, `unavailable`) is [`answer`].
//!
//! Every answer is encoded by `rltp_wire::response`'s direct encoders
//! (`encode_*_into`: the JCS bytes of the `*_header` functions, `PROTOCOL.md`
//! §6, without a JSON tree or a JCS pass) — `submit`, `submit-stream`,
//! `status`, `register`, a challenge refusal, `conclude`, the closed errors,
//! and every frame of `collect` and of a watch session; only the
//! `declaration` answer and an issued challenge (nested documents) take
//! the JCS path.
//!
//! | operation | file |
//! |---|---|
//! | `declaration` | [`declaration`] |
//! | `submit` (and one announcing more than the s2 bound) | [`submit`] |
//! | `submit-stream` | [`submit_stream`] |
//! | `status` | [`status`] |
//! | `challenge` | [`challenge`] |
//! | `register` | [`register`] |
//! | `collect` (and its watch session) | [`collect`] |
//! | `conclude` | [`conclude`] |

mod answer;
mod challenge;
mod collect;
mod conclude;
mod declaration;
mod register;
mod status;
pub(super) mod submit;
mod submit_stream;

pub(super) use answer::{encode_submit, write};

use super::Ctx;
use rltp_quic::net::FrameReader;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::Request;
use std::sync::Arc;

/// Routes a whole request to its operation.
pub(super) async fn dispatch<S: Store>(
    ctx: &Arc<Ctx<S>>,
    request: Request,
    body: Vec<u8>,
    send: &mut SendHalf,
    recv: &mut FrameReader,
) {
    if !matches!(request, Request::Declaration)
        && let Some(refusal) = answer::clock_refusal(ctx, request.op())
    {
        write(send, |out| refusal.encode_frame_into(out)).await;
        return;
    }
    match request {
        Request::Declaration => declaration::serve(ctx, send).await,
        Request::Submit { rkid, .. } => submit::serve(ctx, rkid, body, send).await,
        Request::SubmitStream => submit_stream::serve(ctx, send, recv).await,
        Request::Status { rkid, deposit } => status::serve(ctx, rkid, deposit, send).await,
        Request::Challenge { rkid, purpose } => challenge::serve(ctx, rkid, purpose, send).await,
        Request::Register => register::serve(ctx, body, send).await,
        Request::Collect {
            after,
            limit,
            watch,
        } => collect::serve(ctx, body, after, limit, watch, send, recv).await,
        Request::Conclude { deposits } => conclude::serve(ctx, body, deposits, send).await,
    }
}
