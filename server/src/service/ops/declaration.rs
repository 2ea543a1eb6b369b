//! `declaration` (`PROTOCOL.md` §7, §4.4): the signed declaration being
//! served, as its body.

use super::answer::count;
use crate::service::metrics::Op;
use crate::service::{Ctx, current_declaration};
use rltp_quic::net;
use rltp_quic::stream::SendHalf;
use rltp_storage::Store;
use rltp_wire::response;

/// Answers with the declaration in force.
pub(super) async fn serve<S: Store>(ctx: &Ctx<S>, send: &mut SendHalf) {
    let document = current_declaration(ctx);
    let _ = net::write_frame(send, &response::declaration_header(), &document).await;
    count(ctx, Op::Declaration, "ok");
    tracing::debug!(op = "declaration", "served");
}
