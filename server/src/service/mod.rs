//! The carrier's QUIC service (`rltp-carrier serve`, `PROTOCOL.md` §5–§9).
//!
//! - [`run`] is the main job: start, serve until `shutdown` resolves, then
//!   drain and return `Ok(())`.
//! - [`Server::start`] / [`Server::start_with_store`] start a carrier and
//!   hand back a [`Server`] handle (bound address, certificate
//!   fingerprint, declaration, engine) for tests and the in-process demo;
//!   [`Server::shutdown`] drains it.
//!
//! ## Start-up
//! 1. the data directory (mode 0700) and the TLS identity
//!    ([`crate::tls::load_or_generate`] or the configured CA-issued PEM
//!    files); the SPKI fingerprint is logged;
//! 2. the embedded store (`<data-dir>/store`) and the declaration key
//!    (`<data-dir>/declaration.key`), both made on first start;
//! 3. the engine, started with the constants of the stored declaration
//!    revision, then the configured constants are published
//!    ([`declaration::publish`]): unchanged constants reuse the stored
//!    revision, changed ones become revision + 1, applied prospectively;
//! 4. the QUIC endpoint (ALPN `rltp-carrier/1`), the accept loop and the
//!    sweeper;
//! 5. when configured, the operator's HTTP endpoint (`http.rs`: `/metrics`,
//!    `/healthz`, `/readyz`, `/status`), and, on the embedded store, the
//!    control socket `<data-dir>/control.sock` ([`crate::admin`]: online
//!    backup, counts).
//!
//! ## Hygiene
//! Connections are bounded (`limits.max-connections`; more handshakes are
//! refused), each connection's concurrent bidirectional streams are
//! bounded by QUIC flow control (`limits.max-streams-per-connection`), an
//! idle connection is closed after `limits.idle-timeout-ms`, and the first
//! frame of a stream (and each later frame once its prefix has arrived)
//! must arrive within `limits.stream-read-timeout-ms`. None of this is an
//! admission input (§5a.5): verdicts come from the engine alone.
//!
//! ## Shutdown
//! On `shutdown`: stop accepting connections and streams, end watch
//! sessions, let in-flight operations finish (each is answered only after
//! its commit is durable), close connections, stop the sweeper, and drop
//! the engine, whose writer drains its queue and exits. The HTTP endpoint
//! answers throughout (with `/readyz` saying `draining`) and stops last,
//! after the control socket has finished a backup in progress.
//!
//! ## Lame duck
//! [`Server::lame_duck`] (SIGUSR2, or `lame-duck` on the control socket):
//! every new connection is closed after its handshake with application
//! code 1 `going-away` ([`rltp_wire::CloseCode`], `PROTOCOL.md` §5),
//! `/readyz` answers 503, and connections already open are served on.
//! [`Server::lame_duck_over`] resolves once none is left or
//! `limits.drain-timeout-ms` has passed; `serve` then shuts down as below.
//!
//! **One bound for all of it** (`PROTOCOL.md` §5, decided here):
//! `limits.drain-timeout-ms` is the total. One deadline is fixed when
//! shutdown begins ([`Server::shutdown`], or the serve task noticing the
//! signal), and every wait — connections draining, the endpoint closing,
//! the sweeper, the HTTP endpoint, a backup in progress — is bounded by
//! the time left to it; whatever is still running at the deadline is
//! aborted and logged. Only the writer's last group commit runs past it:
//! an operation already handed to the writer is committed (or not) whole,
//! never cut, so nothing acknowledged is lost and nothing half-written is
//! left.
//!
//! ## Layout
//! One concern per file:
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Server`], its context, [`run`], shutdown and its one deadline |
//! | `start.rs` | start-up (above), on the embedded store or PostgreSQL |
//! | `endpoint.rs` | the QUIC endpoint and its accept loop |
//! | `tcp.rs` | the TLS/TCP (HTTP/2) listener, its accept loop and connections (`PROTOCOL.md` §5b) |
//! | `stream.rs` | one QUIC connection, its streams; reading each request of either binding (over `rltp_wire`'s decoder) |
//! | `ops/` | the operations, one file each; `ops/mod.rs` only routes |
//! | `watch.rs` | the watch sessions waiting on a queue |
//! | `lame_duck.rs`, `sweeper.rs`, `logging.rs` | lame-duck mode, the §5a.9 sweeper, the log subscriber |
//! | `declaration.rs`, `lineage.rs`, `clock.rs`, `check.rs`, `reload.rs` | the declaration key and revisions, the data dir's lineage, the server clock, `serve --check`, reloads |
//! | `http.rs`, `metrics.rs`, `status_page.rs`, `control.rs` | the operator's HTTP endpoint, its metrics and page, the control socket |

pub mod check;
pub mod clock;
mod control;
pub mod db_clock;
pub mod declaration;
mod http;
pub mod lineage;
pub mod metrics;
pub mod node_limits;
mod ops;
pub mod reload;
pub mod status_page;
mod watch;

mod endpoint;
mod lame_duck;
mod logging;
mod start;
mod stream;
mod sweeper;
mod tcp;

pub use lame_duck::LAME_DUCK;
pub use logging::{init_tracing, set_log_filter};
pub use start::{check_held_declaration, check_node_declaration};

use crate::config::Config;
use crate::driver::Driver;
use crate::meter::GovernorMeter;
use crate::tls::{SpkiFingerprint, TlsError};
use rltp_engine::EngineError;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::DidKey;
use rltp_storage::log_store::LogStore;
use rltp_storage::{Store, StoreError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch as signal;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// TLS material could not be made or loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The store could not be opened.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The engine could not start.
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    /// The declaration could not be made or published.
    #[error(transparent)]
    Declaration(#[from] declaration::DeclarationError),
    /// The data dir is damaged: a file is missing, foreign or inconsistent
    /// ([`lineage`]); nothing was changed.
    #[error(transparent)]
    Lineage(#[from] lineage::LineageError),
    /// The configuration cannot be used (it names the field).
    #[error("{0}")]
    Config(String),
    /// The data directory or the UDP socket failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What every stream handler shares.
struct Ctx<S: Store> {
    engine: Driver<S>,
    carrier: CarrierId,
    declaration: RwLock<Arc<Vec<u8>>>,
    watchers: Arc<watch::Watchers>,
    /// The limits in force; a reload replaces the reloadable ones
    /// ([`crate::config::RELOAD`]).
    limits: RwLock<crate::config::LimitsConfig>,
    /// The configuration in force (the start's, with what reloads applied).
    config: std::sync::Mutex<Config>,
    /// The engine's meter, whose quotas a reload replaces.
    meter: Arc<GovernorMeter>,
    shutdown: signal::Receiver<bool>,
    /// Lame-duck mode ([`Server::lame_duck`]): new connections are closed
    /// with [`rltp_wire::CloseCode::GoingAway`].
    lame_duck: signal::Sender<bool>,
    /// Connections being served on both bindings (not counting those
    /// turned away): [`ConnectionCount`].
    open_connections: signal::Sender<usize>,
    /// The bindings served, for the status page
    /// ([`status_page::StatusData::listeners`]).
    listeners: String,
    /// `limits.max-connections`: one pool of slots for both bindings, a
    /// slot taken before the TLS handshake (`PROTOCOL.md` §5, §5b).
    connection_slots: Arc<tokio::sync::Semaphore>,
    /// The engine's clock (`PROTOCOL.md` §11); the sweeper records its high-water mark.
    clock: Arc<clock::ServerClock>,
    /// This node's clock against the shared database's (`PROTOCOL.md`
    /// §13, "One clock"); the sweeper compares them.
    clock_check: Arc<db_clock::ClockCheck>,
    /// `capacity-bytes` and `max-bindings` are the shared database's
    /// ([`node_limits`]): a reload does not change them.
    limits_in_database: std::sync::atomic::AtomicBool,
    /// Present when the HTTP endpoint is configured.
    metrics: Option<Arc<metrics::Metrics>>,
    /// The instant the whole shutdown must be done by, fixed once when it
    /// begins ([`drain_deadline`]).
    drain_deadline: std::sync::OnceLock<tokio::time::Instant>,
    /// Something was aborted at the drain deadline.
    abandoned: std::sync::atomic::AtomicBool,
}

impl<S: Store> Ctx<S> {
    /// The limits in force.
    fn limits(&self) -> crate::config::LimitsConfig {
        *self
            .limits
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A connection being served (on either binding): counted in
/// `open_connections` while it lives (lame-duck mode waits for none).
struct ConnectionCount<S: Store>(Arc<Ctx<S>>);

impl<S: Store> ConnectionCount<S> {
    fn open(ctx: &Arc<Ctx<S>>) -> ConnectionCount<S> {
        ctx.open_connections.send_modify(|n| *n += 1);
        ConnectionCount(Arc::clone(ctx))
    }
}

impl<S: Store> Drop for ConnectionCount<S> {
    fn drop(&mut self) {
        self.0
            .open_connections
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The shutdown deadline: fixed by the first caller, `drain-timeout-ms`
/// after that call; every later call returns the same instant.
fn drain_deadline<S: Store>(ctx: &Ctx<S>) -> tokio::time::Instant {
    *ctx.drain_deadline.get_or_init(|| {
        tokio::time::Instant::now() + Duration::from_millis(ctx.limits().drain_timeout_ms)
    })
}

/// A running carrier. Dropping it without [`Server::shutdown`] signals
/// shutdown but does not wait for the drain.
pub struct Server<S: Store = LogStore> {
    local_addr: SocketAddr,
    tcp_addr: Option<SocketAddr>,
    fingerprint: SpkiFingerprint,
    issuer: DidKey,
    ctx: Arc<Ctx<S>>,
    shutdown: signal::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Ends the HTTP endpoint and the control socket once drained.
    stopped: signal::Sender<bool>,
    aux: Vec<tokio::task::JoinHandle<()>>,
    metrics_addr: Option<SocketAddr>,
}

impl<S: Store> std::fmt::Debug for Server<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("fingerprint", &self.fingerprint)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl<S: Store> Server<S> {
    /// The bound address of the operator's HTTP endpoint, when configured
    /// (useful with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The bound UDP address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound TLS/TCP address (`PROTOCOL.md` §5b), unless
    /// `[transport] tcp-listen` is off.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// The SHA-256 SPKI fingerprint clients pin.
    pub fn fingerprint(&self) -> SpkiFingerprint {
        self.fingerprint
    }

    /// The carrier identifier `C` every proof names (Identity §7a.2).
    pub fn carrier(&self) -> &CarrierId {
        &self.ctx.carrier
    }

    /// The declaration key's `did:key` (the declaration's issuer).
    pub fn declaration_issuer(&self) -> &DidKey {
        &self.issuer
    }

    /// The signed declaration being served (JCS bytes).
    pub fn declaration(&self) -> Arc<Vec<u8>> {
        current_declaration(&self.ctx)
    }

    /// The engine (counters, constants; tests).
    pub fn engine(&self) -> &Driver<S> {
        &self.ctx.engine
    }

    /// Graceful shutdown: stop accepting, drain in-flight operations,
    /// close connections, stop the writer after its last commit; all of it
    /// within `limits.drain-timeout-ms` of this call (one deadline, see the
    /// module docs).
    ///
    /// Returns `false` when something had to be abandoned at the deadline
    /// (a connection still draining, a backup a client stopped reading):
    /// a blocking thread may still be stuck in it, so a process should exit
    /// rather than wait for its runtime to join that thread.
    pub async fn shutdown(mut self) -> bool {
        let deadline = drain_deadline(&self.ctx);
        tracing::info!(
            drain_timeout_ms = self.ctx.limits().drain_timeout_ms,
            "shutdown: draining"
        );
        let _ = self.shutdown.send(true);
        let mut complete = true;
        if let Some(task) = self.task.take() {
            // The service's own steps each end at the deadline (what is
            // left aborted and said so); this bound is the backstop for a
            // service that does not stop there.
            complete &= bounded(
                "the QUIC service",
                task,
                deadline + crate::defaults::DRAIN_BACKSTOP,
            )
            .await;
        }
        complete &= !self.ctx.abandoned.load(std::sync::atomic::Ordering::SeqCst);
        let _ = self.stopped.send(true);
        for task in std::mem::take(&mut self.aux) {
            complete &= bounded("the operator endpoint or control socket", task, deadline).await;
        }
        let ctx = Arc::clone(&self.ctx);
        drop(self);
        // The last engine handle joins the writer thread: not on a runtime thread.
        let _ = tokio::task::spawn_blocking(move || drop(ctx)).await;
        tracing::info!(complete, "carrier stopped");
        complete
    }
}

impl<S: Store> Drop for Server<S> {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        let _ = self.stopped.send(true);
    }
}

fn current_declaration<S: Store>(ctx: &Ctx<S>) -> Arc<Vec<u8>> {
    Arc::clone(
        &ctx.declaration
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// Awaits `task` until `deadline`; past it, aborts the task and says so.
/// Returns whether it finished in time.
async fn bounded(
    what: &str,
    mut task: tokio::task::JoinHandle<()>,
    deadline: tokio::time::Instant,
) -> bool {
    if tokio::time::timeout_at(deadline, &mut task).await.is_ok() {
        return true;
    }
    tracing::warn!("drain timeout: aborting {what}");
    task.abort();
    let _ = task.await;
    false
}

/// Resolves once shutdown has been signalled (at once if it already was).
async fn until_shutdown(rx: &mut signal::Receiver<bool>) {
    // The guard `wait_for` returns is dropped here, never held across an await.
    let _ = rx.wait_for(|stop| *stop).await.map(|_| ());
}

/// Runs a carrier until `shutdown` resolves, then drains and returns.
///
/// # Errors
/// [`ServerError`] if it cannot start.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
    let server = Server::start(&config).await?;
    shutdown.await;
    server.shutdown().await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM (on non-Unix: Ctrl-C). The handlers are
/// installed by this call, not by the first poll, so a signal that comes
/// before the future is awaited is not met by its default action.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        );
        async move {
            match handlers {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::select! {
                        _ = int.recv() => {},
                        _ = term.recv() => {},
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
