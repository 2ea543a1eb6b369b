//! Lame-duck mode (module docs of [`super`], "Lame duck"): new
//! connections are closed with `going-away`, connections in progress are
//! served on.

use super::{Ctx, Server};
use rltp_storage::Store;
use std::time::Duration;

/// The log message of entering lame-duck mode; tests wait for it.
pub const LAME_DUCK: &str = "lame duck: new connections are turned away (going-away); \
     sessions in progress finish, then the carrier shuts down";

impl<S: Store> Server<S> {
    /// Enters lame-duck mode (SIGUSR2, `rltp-carrier admin lame-duck`):
    /// new connections are closed with `going-away`, `/readyz` answers
    /// 503, and connections in progress are served on; once they have all
    /// closed, or `limits.drain-timeout-ms` after this call,
    /// [`Server::lame_duck_over`] resolves and the caller shuts the
    /// carrier down (the ordinary drain). Returns `false` if it was
    /// already in lame-duck mode.
    pub fn lame_duck(&self, by: &str) -> bool {
        enter_lame_duck(&self.ctx, by)
    }

    /// Resolves once lame-duck mode has been entered and is over (see
    /// [`Server::lame_duck`]); never otherwise.
    pub async fn lame_duck_over(&self) {
        let mut lame = self.ctx.lame_duck.subscribe();
        let _ = lame.wait_for(|on| *on).await;
        let window = Duration::from_millis(self.ctx.limits().drain_timeout_ms);
        let mut open = self.ctx.open_connections.subscribe();
        let idle = tokio::time::timeout(window, open.wait_for(|n| *n == 0))
            .await
            .is_ok();
        tracing::info!(
            connections_left = *open.borrow(),
            idle,
            "lame duck over: shutting down"
        );
    }
}

/// [`Server::lame_duck`] on the shared context (the control socket's way in).
pub(super) fn enter_lame_duck<S: Store>(ctx: &Ctx<S>, by: &str) -> bool {
    let entered = ctx
        .lame_duck
        .send_if_modified(|on| !std::mem::replace(on, true));
    if entered {
        tracing::warn!(
            by,
            connections = *ctx.open_connections.borrow(),
            window_ms = ctx.limits().drain_timeout_ms,
            "{LAME_DUCK}"
        );
    }
    entered
}
