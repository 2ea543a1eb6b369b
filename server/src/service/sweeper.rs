//! The sweeper (§5a.9): due horizons applied every
//! `limits.sweep-interval-ms` with no other traffic, one bounded store
//! maintenance step, and a declaration revision another node stored
//! adopted (`PROTOCOL.md` §13).

use super::{Ctx, clock, current_declaration, db_clock, declaration, until_shutdown};
use crate::driver::Driver;
use rltp_engine::{EngineConstants, EngineError};
use rltp_storage::Store;
use std::sync::Arc;
use std::time::Duration;

/// Failed sweeps and maintenance steps, logged once a minute at most (a
/// full disk fails every one for as long as it lasts: issue 27);
/// `suppressed` says how many more failed since the last line.
static SWEEP_FAILED: rltp_storage::LogThrottle =
    rltp_storage::LogThrottle::new(Duration::from_secs(60));
static MAINTENANCE_FAILED: rltp_storage::LogThrottle =
    rltp_storage::LogThrottle::new(Duration::from_secs(60));

/// Applies due horizons every `limits.sweep-interval-ms` (§5a.9), then one
/// bounded store maintenance step.
pub(super) async fn sweeper<S: Store>(ctx: Arc<Ctx<S>>) {
    let mut shutdown = ctx.shutdown.clone();
    loop {
        // Read each round: a reload may change it.
        let interval = Duration::from_millis(ctx.limits().sweep_interval_ms);
        tokio::select! {
            _ = until_shutdown(&mut shutdown) => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let engine = ctx.engine.clone();
        let clock = Arc::clone(&ctx.clock);
        let swept = tokio::task::spawn_blocking(move || {
            let swept = engine.sweep();
            clock.persist();
            // Reclaim space between batches (one bounded step per interval).
            if let Err(e) = engine.store().maintenance_step()
                && let Some(suppressed) = MAINTENANCE_FAILED.admit(std::time::Instant::now())
            {
                tracing::warn!(error = %e, suppressed, "store maintenance step failed");
            }
            swept
        });
        match swept.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                if let Some(suppressed) = SWEEP_FAILED.admit(std::time::Instant::now()) {
                    tracing::warn!(error = %e, suppressed, "sweep failed; retrying next interval");
                }
            }
            Err(e) => tracing::error!(error = %e, "sweep task failed"),
        }
        let adopting = Arc::clone(&ctx);
        if let Ok(Err(e)) =
            tokio::task::spawn_blocking(move || adopt_stored_declaration(&adopting)).await
        {
            tracing::warn!(error = %e, "reading the stored declaration failed; retrying next interval");
        }
        compare_clocks(&ctx.engine, &ctx.clock, &ctx.clock_check).await;
    }
}

/// Compares this node's clock with the store's ([`db_clock::ClockCheck`]:
/// at start and every sweep interval); a failed read keeps the last
/// comparison and is logged.
pub(super) async fn compare_clocks<S: Store>(
    engine: &Driver<S>,
    clock: &Arc<clock::ServerClock>,
    check: &Arc<db_clock::ClockCheck>,
) {
    let (store, clock, check) = (
        Arc::clone(engine.store()),
        Arc::clone(clock),
        Arc::clone(check),
    );
    let compared = tokio::task::spawn_blocking(move || {
        check.compare(&*store, &*clock as &dyn crate::clock::Clock)
    })
    .await;
    if let Ok(Err(e)) = compared {
        tracing::warn!(error = %e, "reading the database's clock failed; retrying next interval");
    }
}

/// Adopts a declaration revision newer than the one this node serves,
/// stored by another node of the same database or by `rltp-carrier migrate
/// --publish-constants` (`PROTOCOL.md` §13): its constants govern this
/// node's decisions from its next batch on and its bytes are served.
/// Nothing to do on a store only this node writes.
fn adopt_stored_declaration<S: Store>(ctx: &Ctx<S>) -> Result<(), EngineError> {
    let stored = rltp_storage::ReadTxn::declaration(&ctx.engine.store().read()?)?;
    let Some(record) = stored else {
        return Ok(());
    };
    let served = current_declaration(ctx);
    if record.document == *served {
        return Ok(());
    }
    let served_revision = rltp_proofs::declaration::parse_declaration(&served)
        .map(|p| p.revision())
        .unwrap_or(0);
    if record.revision <= served_revision {
        return Ok(());
    }
    let Some((issuer, constants)) = declaration::held_declaration(&record) else {
        tracing::error!(
            revision = record.revision,
            "the stored declaration does not verify; still serving the previous one"
        );
        return Ok(());
    };
    ctx.engine
        .adopt_constants(EngineConstants::from(&constants))?;
    *ctx.declaration
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(record.document);
    tracing::info!(
        revision = record.revision,
        issuer = %issuer.to_did_key(),
        "adopted a declaration revision stored by another node"
    );
    Ok(())
}
