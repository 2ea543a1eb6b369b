//! `challenge` (§5a.3): a fresh principal challenge and the sealed
//! address challenge of §8, or the refusal.

use super::answer::{count, count_unavailable, unavailable, write};
use crate::service::Ctx;
use crate::service::metrics::Op;
use rltp_engine::SessionError;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response::ChallengeAnswer;

/// Issues a challenge for `rkid` and `purpose`.
pub(super) async fn serve<S: Store>(
    ctx: &Ctx<S>,
    rkid: Rkid,
    purpose: Purpose,
    send: &mut SendHalf,
) {
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
            tracing::debug!(op = "challenge", %purpose, verdict, "challenge");
            write(send, |out| answer.encode_frame_into(out)).await;
        }
        Err(e) => {
            count_unavailable(ctx, Op::Challenge);
            write(send, |out| e.encode_frame_into(out)).await;
        }
    }
}
