//! SIGHUP: reload the configuration a carrier was started with
//! (`deploy/OPERATIONS.md`, "Reloading the configuration").
//!
//! The caller re-reads and validates the whole file first
//! ([`crate::config::Config::load`]); a file that does not validate
//! changes nothing. [`Server::reload`] then compares it key by key with
//! the configuration in force ([`crate::config::changes`]), applies the
//! [`Reload::Live`] keys — the engine's limits, the meter's quotas, the
//! shell's timers and the log filter — and logs every changed key with its
//! old and new value: applied, needs a restart, or (the seven constants,
//! §4.4 guarantee 1) published, so not reloaded: the next start publishes
//! them as a new declaration revision.

use super::Server;
use crate::config::{self, Change, Config, Reload};
use rltp_engine::Limits;
use rltp_storage::Store;

/// The log message of a finished reload; tests wait for it.
pub const RELOADED: &str = "configuration reloaded";
/// The log message of a refused reload.
pub const REFUSED: &str = "configuration reload refused: the running configuration is kept";

impl<S: Store> Server<S> {
    /// Applies the reloadable parts of `new` (already validated) and logs
    /// every change; returns them. Keys that need a restart keep their
    /// running values, and are logged again by every later reload until
    /// the restart.
    pub fn reload(&self, new: &Config) -> Vec<Change> {
        let ctx = &self.ctx;
        let mut in_force = ctx
            .config
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changes = config::changes(&in_force, new);
        let mut next = in_force.with_reloaded(new);
        let held = ctx
            .limits_in_database
            .load(std::sync::atomic::Ordering::SeqCst);
        if held {
            // The shared database's, for every node (node_limits).
            next.limits.capacity_bytes = in_force.limits.capacity_bytes;
            next.limits.max_bindings = in_force.limits.max_bindings;
        }
        *ctx.limits
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next.limits;
        ctx.engine.set_limits(Limits {
            capacity_bytes: next.limits.capacity_bytes,
            max_bindings: next.limits.max_bindings,
        });
        ctx.meter
            .set_quotas(crate::meter::quotas(&next.limits.meters));
        if next.log_filter != in_force.log_filter {
            super::set_log_filter(&next.effective_log_filter());
        }
        for change in &changes {
            let (key, old, new) = (&change.key, &change.old, &change.new);
            match change.reload {
                Reload::Live if held && super::node_limits::HELD_KEYS.contains(&key.as_str()) => {
                    tracing::warn!(
                        key,
                        old,
                        new,
                        "config reload: held in the database for every node; publish it with \
                         `rltp-carrier migrate --config FILE --publish-limits`; the running value \
                         is kept"
                    );
                }
                Reload::Live => tracing::info!(key, old, new, "config reload: applied"),
                Reload::Restart => tracing::warn!(
                    key,
                    old,
                    new,
                    "config reload: needs a restart; the running value is kept"
                ),
                Reload::Declaration => tracing::warn!(
                    key,
                    old,
                    new,
                    "config reload: a published constant is not reloaded; the next start \
                     publishes it as a new declaration revision"
                ),
            }
        }
        let count = |r: Reload| changes.iter().filter(|c| c.reload == r).count();
        tracing::info!(
            applied = count(Reload::Live),
            needs_restart = count(Reload::Restart),
            constants = count(Reload::Declaration),
            "{RELOADED}"
        );
        *in_force = next;
        changes
    }

    /// Logs a reload refused because the file did not validate (`error`
    /// names the field).
    pub fn reload_refused(&self, error: &str) {
        tracing::error!(error, "{REFUSED}");
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.ctx
            .config
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
