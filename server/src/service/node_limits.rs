//! `[limits] capacity-bytes` and `max-bindings` of a node on a shared
//! PostgreSQL database (`PROTOCOL.md` §13, "The capacity limits live in
//! the database"): s6 and r4 judge the database's one global occupancy, so
//! every node judges it against the database's two numbers
//! ([`rltp_storage::postgres::HeldLimits`]).
//!
//! - The first node of a database stores its own ([`claim`]); every later
//!   node whose configuration disagrees is refused at start, naming the
//!   key, its value and the database's ([`check_held_limits`]; `serve
//!   --check` says the same).
//! - `rltp-carrier migrate --config FILE --publish-limits` stores the
//!   file's values for every node; each running node adopts them within
//!   one `sweep-interval-ms` (`adopt_loop`), and a node started later
//!   must be configured with them.
//! - A reload (SIGHUP) does not change them on such a node
//!   (`Ctx::limits_in_database`).

use super::{Ctx, ServerError};
use crate::config::LimitsConfig;
use rltp_engine::Limits;
use rltp_storage::postgres::{HeldLimits, PgStore};
use std::sync::Arc;
use std::time::Duration;

/// The configuration keys (as [`crate::config::changes`] names them) the
/// database holds.
pub const HELD_KEYS: [&str; 2] = ["limits.capacity-bytes", "limits.max-bindings"];

/// The two limits of `configured`.
pub fn of(configured: &LimitsConfig) -> HeldLimits {
    HeldLimits {
        capacity_bytes: configured.capacity_bytes,
        max_bindings: configured.max_bindings,
    }
}

/// Refuses a configuration whose `capacity-bytes` or `max-bindings`
/// differs from what the database holds (`None`: it holds nothing yet, the
/// first node stores its own), naming the key and both values.
///
/// # Errors
/// [`ServerError::Config`] naming the first key that differs.
pub fn check_held_limits(
    held: Option<HeldLimits>,
    configured: &LimitsConfig,
) -> Result<(), ServerError> {
    let Some(held) = held else {
        return Ok(());
    };
    let mine = of(configured);
    for (key, node, database) in [
        ("capacity-bytes", mine.capacity_bytes, held.capacity_bytes),
        ("max-bindings", mine.max_bindings, held.max_bindings),
    ] {
        if node != database {
            return Err(ServerError::Config(format!(
                "[limits] {key} is {node} in this node's configuration but {database} in the \
                 database: every node of a carrier judges capacity against the database's value. \
                 Set {key} = {database}, or change it for every node with \
                 `rltp-carrier migrate --config FILE --publish-limits`"
            )));
        }
    }
    Ok(())
}

/// Stores the configured limits if the database holds none, then checks
/// the configuration against what it holds ([`check_held_limits`]);
/// `floor` (the carrier's `queue-floor`, bytes) settles the escrow pool.
///
/// # Errors
/// [`ServerError::Config`] for a configuration that differs;
/// [`ServerError::Store`] if the database cannot be read or written.
pub fn claim(store: &PgStore, configured: &LimitsConfig, floor: u64) -> Result<(), ServerError> {
    let held = store.claim_limits(of(configured), floor)?;
    check_held_limits(Some(held), configured)
}

/// Every `sweep-interval-ms` until shutdown: adopts the limits the
/// database holds when they differ from those in force (published by
/// `migrate --publish-limits`), logging both.
pub(super) async fn adopt_loop(ctx: Arc<Ctx<PgStore>>) {
    let mut shutdown = ctx.shutdown.clone();
    loop {
        let interval = Duration::from_millis(ctx.limits().sweep_interval_ms);
        tokio::select! {
            _ = super::until_shutdown(&mut shutdown) => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let store = Arc::clone(ctx.engine.store());
        match tokio::task::spawn_blocking(move || store.held_limits()).await {
            Ok(Ok(Some(held))) => adopt(&ctx, held),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "reading the capacity limits failed; retrying next interval");
            }
            Err(e) => tracing::error!(error = %e, "reading the capacity limits stopped"),
        }
    }
}

/// Puts `held` in force if it differs from the limits in force.
fn adopt(ctx: &Ctx<PgStore>, held: HeldLimits) {
    let in_force = ctx.engine.limits();
    if in_force.capacity_bytes == held.capacity_bytes && in_force.max_bindings == held.max_bindings
    {
        return;
    }
    ctx.engine.set_limits(Limits {
        capacity_bytes: held.capacity_bytes,
        max_bindings: held.max_bindings,
    });
    let set = |limits: &mut LimitsConfig| {
        limits.capacity_bytes = held.capacity_bytes;
        limits.max_bindings = held.max_bindings;
    };
    set(&mut ctx
        .limits
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner));
    set(&mut ctx
        .config
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .limits);
    tracing::info!(
        capacity_bytes = held.capacity_bytes,
        max_bindings = held.max_bindings,
        previous_capacity_bytes = in_force.capacity_bytes,
        previous_max_bindings = in_force.max_bindings,
        "adopted the capacity limits the database holds (published for every node)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_that_differs_is_refused_naming_key_and_both_values() {
        let configured = LimitsConfig::default();
        let same = of(&configured);
        assert!(check_held_limits(None, &configured).is_ok());
        assert!(check_held_limits(Some(same), &configured).is_ok());
        let held = HeldLimits {
            max_bindings: configured.max_bindings + 1,
            ..same
        };
        let refused = check_held_limits(Some(held), &configured)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refused.contains(&format!(
                "[limits] max-bindings is {} in this node's configuration but {} in the database",
                configured.max_bindings,
                configured.max_bindings + 1
            )),
            "{refused}"
        );
        assert!(refused.contains("--publish-limits"), "{refused}");
    }
}
