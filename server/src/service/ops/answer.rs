//! The answer plumbing every operation shares: one write per answer,
//! the metrics' counts, the retriable `unavailable` of a store failure
//! (`PROTOCOL.md` §6), and the hop to the blocking pool.

use crate::service::Ctx;
use crate::service::metrics::Op;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response::{ErrorAnswer, ErrorCode, SubmitAnswer};

/// Writes the frames `encode` appends to a buffer, with one write.
pub(in crate::service) async fn write(
    send: &mut SendHalf,
    encode: impl FnOnce(&mut Vec<u8>),
) -> bool {
    let mut out = Vec::new();
    encode(&mut out);
    send.write_all(&out).await.is_ok()
}

/// Appends the frame of a submission's answer.
pub(in crate::service) fn encode_submit(
    answer: &Result<SubmitAnswer, ErrorAnswer>,
    out: &mut Vec<u8>,
) {
    match answer {
        Ok(answer) => answer.encode_frame_into(out),
        Err(error) => error.encode_frame_into(out),
    }
}

/// The retriable `unavailable` answer of a store failure (`PROTOCOL.md`
/// §6): not a verdict.
pub(super) fn unavailable(detail: impl std::fmt::Display) -> ErrorAnswer {
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
pub(super) fn count<S: Store>(ctx: &Ctx<S>, op: Op, verdict: &str) {
    if let Some(m) = &ctx.metrics {
        m.verdict(op, verdict, ctx.engine.now());
    }
}

/// The `unavailable` answer of every operation that depends on time while
/// this node's clock is beyond `max-clock-offset-ms` of the database's
/// (`PROTOCOL.md` §13, "One clock"; [`crate::service::db_clock`]), counted;
/// `None` while it is within.
pub(super) fn clock_refusal<S: Store>(ctx: &Ctx<S>, op: Op) -> Option<ErrorAnswer> {
    let detail = ctx.clock_check.refusal()?;
    count_unavailable(ctx, op);
    tracing::debug!(
        op = op.as_str(),
        "answered unavailable: the node's clock is not ready"
    );
    Some(ErrorAnswer {
        code: ErrorCode::Unavailable,
        detail,
    })
}

/// Logs that `op` was answered `unavailable` because of `error`: one line
/// per 10 s at most (a full disk fails every request for as long as it
/// lasts: issue 27), saying how many more were answered so meanwhile.
pub(super) fn log_unavailable(op: Op, error: &dyn std::fmt::Display) {
    static LOGGED: rltp_storage::LogThrottle =
        rltp_storage::LogThrottle::new(std::time::Duration::from_secs(10));
    if let Some(suppressed) = LOGGED.admit(std::time::Instant::now()) {
        tracing::warn!(
            op = op.as_str(),
            %error,
            suppressed,
            "answered unavailable (a storage failure; `suppressed` more were answered so since the last line)"
        );
    }
}

/// Counts an `unavailable` answer of `op` for the metrics.
pub(super) fn count_unavailable<S: Store>(ctx: &Ctx<S>, op: Op) {
    if let Some(m) = &ctx.metrics {
        m.unavailable(op);
    }
}

/// Counts deposits delivered to a recipient for the metrics.
pub(super) fn count_collected<S: Store>(ctx: &Ctx<S>, n: usize) {
    if let Some(m) = &ctx.metrics {
        m.collected(n);
    }
}

/// Runs `f` on the blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!(error = %e, "engine task failed");
            None
        }
    }
}
