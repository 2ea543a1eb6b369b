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

pub mod check;
pub mod clock;
mod control;
pub mod declaration;
mod http;
pub mod lineage;
pub mod metrics;
mod ops;
pub mod reload;
pub mod status_page;
mod watch;

use crate::config::{Config, LogFormat};
use crate::driver::Driver;
use crate::meter::GovernorMeter;
use crate::tls::{self, SpkiFingerprint, TlsError};
use rltp_engine::{EngineConfig, EngineConstants, EngineError};
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::DidKey;
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::postgres::PgStore;
use rltp_storage::redb_store::StoreId;
use rltp_storage::{Store, StoreError};
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch as signal;
use tokio::task::JoinSet;

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
    /// Connections being served (not counting those turned away).
    open_connections: signal::Sender<usize>,
    /// The engine's clock (`PROTOCOL.md` §11); the sweeper records its high-water mark.
    clock: Arc<clock::ServerClock>,
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

impl Server<LogStore> {
    /// Starts a carrier on the embedded store (the log store,
    /// `rltp_storage::log_store`; a data dir in the redb store's layout is
    /// upgraded as it opens) in `<data-dir>/store`, after
    /// accounting for every file of the data dir against its lineage
    /// ([`lineage`]): a damaged data dir is refused, naming what is
    /// missing and the way back, and nothing in it is made anew.
    ///
    /// # Errors
    /// [`ServerError`]; [`ServerError::Lineage`] for a damaged data dir.
    pub async fn start(config: &Config) -> Result<Server<LogStore>, ServerError> {
        prepare_data_dir(config)?;
        let data_dir = config.data_dir.clone();
        let generated_tls = config.tls.cert.is_none();
        let life = lineage::account(&data_dir, generated_tls)?;
        let options = LogOptions {
            expect_store_id: match &life {
                lineage::Life::Known(l) => Some(l.store_id),
                _ => None,
            },
            ..LogOptions::default()
        };
        let dir = crate::data_dir::store(&data_dir);
        let store = tokio::task::spawn_blocking(move || LogStore::open_with(dir, options))
            .await
            .map_err(|e| ServerError::Io {
                what: "opening the store".into(),
                source: std::io::Error::other(e),
            })?
            .map_err(|e| match e {
                StoreError::Damaged(what) => ServerError::Lineage(lineage::LineageError::Damaged {
                    dir: data_dir.clone(),
                    what,
                    way_back: lineage::RESTORE.into(),
                }),
                other => ServerError::Store(other),
            })?;
        let store_id = store.store_id();
        if life == lineage::Life::Adopt {
            let key_path = data_dir.join(declaration::KEY_FILE);
            let declared = rltp_storage::ReadTxn::declaration(&store.read()?)?;
            if let Some(record) = declared.filter(|_| !key_path.exists()) {
                return Err(lineage::LineageError::Damaged {
                    dir: data_dir.clone(),
                    what: format!(
                        "its declaration key {} is missing, but its store holds declaration revision {}: \
                         a new key would re-sign it under another issuer",
                        key_path.display(),
                        record.revision
                    ),
                    way_back: "restore the key from a backup of this data dir".into(),
                }
                .into());
            }
        }
        if !matches!(life, lineage::Life::Known(_)) {
            lineage::stamp_clock(&data_dir, store_id, crate::admin::now_ms())?;
        }
        let mut server = Server::start_with_store(config, Arc::new(store)).await?;
        let refresh = match &life {
            lineage::Life::Known(known) => {
                known.tls_identity.is_none()
                    && lineage::generated_fingerprint(&config.tls_dir()).is_some()
            }
            _ => true,
        };
        if refresh {
            // The data dir is complete: record what it is made of.
            let mut made = lineage::describe(&data_dir, store_id, crate::admin::now_ms())?;
            if let lineage::Life::Known(known) = &life {
                made.created_at = known.created_at;
            }
            made.write(&data_dir)?;
        }
        if let Some(listener) = control::bind(&config.data_dir) {
            let ctx = Arc::downgrade(&server.ctx);
            let lame_duck: control::LameDuck = Arc::new(move || {
                ctx.upgrade()
                    .is_some_and(|ctx| enter_lame_duck(&ctx, "the control socket"))
            });
            server.aux.push(tokio::spawn(control::serve(
                listener,
                server.ctx.engine.clone(),
                config.data_dir.clone(),
                lame_duck,
                server.stopped.subscribe(),
            )));
        }
        Ok(server)
    }
}

impl Server<PgStore> {
    /// Starts a node on the shared PostgreSQL database (`[store.postgres]`,
    /// `PROTOCOL.md` §13), after accounting for the node's data dir (its
    /// declaration key, TLS identity, clock and lineage; the store lives in
    /// the database) and for what the database already holds: a data dir
    /// of another database's carrier, a declaration key other than the one
    /// that signed the database's declaration, or constants other than the
    /// declared ones are refused, naming the way back. The first node of a
    /// fresh database signs revision 1; every later node serves that one.
    ///
    /// # Errors
    /// [`ServerError`]; [`ServerError::Lineage`] for a data dir or database
    /// this node may not serve.
    pub async fn start_postgres(config: &Config) -> Result<Server<PgStore>, ServerError> {
        prepare_data_dir(config)?;
        let options = config
            .store
            .postgres
            .as_ref()
            .ok_or_else(|| ServerError::Config("store.postgres is required".into()))?
            .options()
            .map_err(|e| ServerError::Config(e.to_string()))?;
        let data_dir = config.data_dir.clone();
        let generated_tls = config.tls.cert.is_none();
        let life = lineage::account_for(&data_dir, generated_tls, lineage::StoreHome::External)?;
        let store = tokio::task::spawn_blocking(move || PgStore::open(options))
            .await
            .map_err(|e| ServerError::Io {
                what: "opening the database".into(),
                source: std::io::Error::other(e),
            })??;
        let store_id = StoreId(store.store_id());
        let refuse = |what: String, way_back: &str| {
            ServerError::Lineage(lineage::LineageError::Damaged {
                dir: data_dir.clone(),
                what,
                way_back: way_back.to_owned(),
            })
        };
        if let lineage::Life::Known(known) = &life
            && known.store_id != store_id
        {
            return Err(refuse(
                format!(
                    "it belongs to the carrier of store {}, but the database holds store {store_id}",
                    known.store_id
                ),
                "point [store.postgres] url at this node's database, or give the node a new, empty data dir",
            ));
        }
        check_node_declaration(&store, &data_dir, Some(&config.constants))?;
        if !matches!(life, lineage::Life::Known(_)) {
            lineage::stamp_clock(&data_dir, store_id, crate::admin::now_ms())?;
        }
        let server = Server::start_with_store(config, Arc::new(store)).await?;
        // Deposits admitted through other nodes wake this node's watchers.
        {
            let watchers = Arc::clone(&server.ctx.watchers);
            server
                .ctx
                .engine
                .store()
                .on_remote_admission(Arc::new(move |rkid| watchers.admitted(rkid)));
        }
        if !matches!(life, lineage::Life::Known(_)) {
            lineage::describe(&data_dir, store_id, crate::admin::now_ms())?.write(&data_dir)?;
        }
        // No control socket: its backup is the embedded store's; the
        // database is backed up with PostgreSQL's own tools
        // (deploy/OPERATIONS.md, "Many nodes").
        Ok(server)
    }
}

/// What a node's data dir must hold for the database's declaration: the
/// key that signed it (every node signs as one issuer), and — when
/// `configured` is given — constants equal to the declared ones (every
/// node serves one declaration). A database without a declaration asks
/// nothing: its first node signs revision 1.
///
/// # Errors
/// [`ServerError::Lineage`] naming what differs and the way back.
pub fn check_node_declaration(
    store: &PgStore,
    data_dir: &Path,
    configured: Option<&CarrierConstants>,
) -> Result<(), ServerError> {
    let held = rltp_storage::ReadTxn::declaration(&store.read()?)?;
    check_held_declaration(held.as_ref(), data_dir, configured)
}

/// [`check_node_declaration`] of the declaration `held` (read by the
/// caller: `serve --check` reads it without opening the store).
///
/// # Errors
/// As [`check_node_declaration`].
pub fn check_held_declaration(
    held: Option<&rltp_storage::DeclarationRecord>,
    data_dir: &Path,
    configured: Option<&CarrierConstants>,
) -> Result<(), ServerError> {
    let refuse = |what: String, way_back: &str| {
        ServerError::Lineage(lineage::LineageError::Damaged {
            dir: data_dir.to_owned(),
            what,
            way_back: way_back.to_owned(),
        })
    };
    let key_path = data_dir.join(declaration::KEY_FILE);
    if let Some(record) = held {
        let Some((issuer, constants)) = declaration::held_declaration(record) else {
            return Err(refuse(
                format!(
                    "the database's declaration revision {} does not verify",
                    record.revision
                ),
                "restore the database from a backup",
            ));
        };
        let copy = format!(
            "copy declaration.key from a node of this carrier into {} (every node signs as {})",
            data_dir.display(),
            issuer.to_did_key()
        );
        if !key_path.exists() {
            return Err(refuse(
                format!(
                    "its declaration key {} is missing, and the database's declaration is signed by {}",
                    key_path.display(),
                    issuer.to_did_key()
                ),
                &copy,
            ));
        }
        let key = declaration::load_key(&key_path)?;
        if DidKey::from_verifying_key(&key.verifying_key()) != issuer {
            return Err(refuse(
                format!(
                    "its declaration key {} is not the key that signed the database's declaration ({})",
                    key_path.display(),
                    issuer.to_did_key()
                ),
                &copy,
            ));
        }
        if let Some(configured) = configured
            && constants != *configured
        {
            return Err(refuse(
                format!(
                    "its [constants] differ from those of the database's declaration revision {}: \
                         every node serves one declaration",
                    record.revision
                ),
                "set [constants] as the declaration does (rltp-carrier declaration prints them), \
                     or publish new ones for every node with `rltp-carrier migrate --config FILE --publish-constants`",
            ));
        }
    }
    Ok(())
}

fn prepare_data_dir(config: &Config) -> Result<(), ServerError> {
    tls::create_private_dir(&config.data_dir).map_err(ServerError::Tls)
}

impl<S: Store> Server<S> {
    /// Starts a carrier over `store` (any [`Store`]: the embedded one, or
    /// the in-memory reference store in tests).
    ///
    /// # Errors
    /// [`ServerError`].
    pub async fn start_with_store(
        config: &Config,
        store: Arc<S>,
    ) -> Result<Server<S>, ServerError> {
        tls::install_crypto_provider();
        prepare_data_dir(config)?;
        let identity = match (&config.tls.cert, &config.tls.key) {
            (Some(cert), Some(key)) => tls::load_pem(cert, key)?,
            _ => tls::load_or_generate(&config.tls_dir())?,
        };
        let key = declaration::load_or_create_key(&config.data_dir)?;
        let issuer = DidKey::from_verifying_key(&key.verifying_key());

        let starting = declaration::starting_constants(&*store, &key, &config.constants)?;
        // The engine's page bound (256) caps a collect page below the wire's
        // 1 024: a page of maximal envelopes stays near 22 MiB.
        let engine_config =
            EngineConfig::new(config.limits.capacity_bytes, config.limits.max_bindings);
        let server_clock = Arc::new(clock::ServerClock::start(&config.data_dir));
        let meter = Arc::new(GovernorMeter::new(crate::meter::quotas(
            &config.limits.meters,
        )));
        let engine = {
            let carrier = config.carrier.clone();
            let clock = Arc::clone(&server_clock);
            let meter: Arc<dyn rltp_engine::Meter> = Arc::clone(&meter) as _;
            tokio::task::spawn_blocking(move || {
                Driver::start(
                    store,
                    clock,
                    carrier,
                    EngineConstants::from(&starting),
                    engine_config,
                    meter,
                )
            })
            .await
            .map_err(|e| ServerError::Io {
                what: "starting the engine".into(),
                source: std::io::Error::other(e),
            })??
        };
        let record = {
            let engine = engine.clone();
            let constants = config.constants.clone();
            let data_dir = config.data_dir.clone();
            tokio::task::spawn_blocking(move || {
                declaration::publish(&engine, &key, &constants, &data_dir)
            })
            .await
            .map_err(|e| ServerError::Io {
                what: "publishing the declaration".into(),
                source: std::io::Error::other(e),
            })??
        };

        let endpoint = endpoint(config, &identity)?;
        let local_addr = endpoint.local_addr().map_err(|source| ServerError::Io {
            what: "reading the bound address".into(),
            source,
        })?;
        tracing::info!(
            listen = %local_addr,
            carrier = config.carrier.as_str(),
            fingerprint = %identity.fingerprint,
            generated_certificate = identity.generated,
            declaration_issuer = %issuer.to_did_key(),
            revision = record.revision,
            "carrier started"
        );
        let http_listener = match config.metrics.listen {
            Some(addr) => Some(bind_http(addr).await?),
            None => None,
        };
        let metrics = http_listener.as_ref().map(|_| {
            let metrics = Arc::new(metrics::Metrics::new());
            let observer = Arc::clone(&metrics);
            engine.observe_batches(Arc::new(move |report| observer.batch(report)));
            metrics
        });
        let (shutdown, shutdown_rx) = signal::channel(false);
        let (stopped, _) = signal::channel(false);
        let ctx = Arc::new(Ctx {
            engine,
            carrier: config.carrier.clone(),
            declaration: RwLock::new(Arc::new(record.document)),
            watchers: Arc::new(watch::Watchers::default()),
            limits: RwLock::new(config.limits),
            config: std::sync::Mutex::new(config.clone()),
            meter,
            shutdown: shutdown_rx,
            lame_duck: signal::channel(false).0,
            open_connections: signal::channel(0).0,
            clock: server_clock,
            metrics: metrics.clone(),
            drain_deadline: std::sync::OnceLock::new(),
            abandoned: std::sync::atomic::AtomicBool::new(false),
        });
        let task = tokio::spawn(serve(endpoint, Arc::clone(&ctx)));
        let mut aux = Vec::new();
        let mut metrics_addr = None;
        if let (Some(listener), Some(metrics)) = (http_listener, metrics) {
            metrics_addr = listener.local_addr().ok();
            if let Some(addr) = metrics_addr {
                tracing::info!(
                    listen = %addr,
                    "operator endpoint listening (/metrics /healthz /readyz /status)"
                );
            }
            aux.push(tokio::spawn(http::serve(
                listener,
                Arc::clone(&ctx),
                metrics,
                stopped.subscribe(),
            )));
        }
        Ok(Server {
            local_addr,
            fingerprint: identity.fingerprint,
            issuer,
            ctx,
            shutdown,
            task: Some(task),
            stopped,
            aux,
            metrics_addr,
        })
    }

    /// The bound address of the operator's HTTP endpoint, when configured
    /// (useful with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The bound UDP address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
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

/// Binds the operator's HTTP endpoint.
async fn bind_http(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Io {
            what: format!("binding the metrics endpoint {addr}"),
            source,
        })
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

/// The handle that replaces the log filter ([`set_log_filter`]).
static LOG_FILTER: std::sync::OnceLock<
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
> = std::sync::OnceLock::new();

/// Installs the tracing subscriber: human lines or JSON, filtered by
/// `filter` (`RUST_LOG` syntax; [`Config::effective_log_filter`]), which
/// a reload may replace ([`set_log_filter`]). Idempotent (a second call is
/// ignored).
pub fn init_tracing(format: LogFormat, filter: &str) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let registry = tracing_subscriber::registry().with(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Human => registry.with(fmt).try_init(),
        LogFormat::Json => registry.with(fmt.json()).try_init(),
    };
    if installed.is_ok() {
        let _ = LOG_FILTER.set(handle);
    }
}

/// Replaces the log filter of [`init_tracing`] (a reload); a filter that
/// does not parse (config validation refuses it first) is ignored.
pub fn set_log_filter(filter: &str) {
    if let (Some(handle), Ok(filter)) = (
        LOG_FILTER.get(),
        tracing_subscriber::EnvFilter::builder().parse(filter),
    ) && let Err(error) = handle.reload(filter)
    {
        tracing::warn!(%error, "the log filter could not be replaced");
    }
}

fn endpoint(
    config: &Config,
    identity: &tls::ServerIdentity,
) -> Result<quinn::Endpoint, ServerError> {
    let rustls_config = tls::rustls_server_config(identity)?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(rustls_config)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    config.transport.apply(&mut transport);
    transport
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(
            config.limits.max_streams_per_connection,
        ))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0))
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(Duration::from_millis(config.limits.idle_timeout_ms))
                .map_err(|e| TlsError::Config(e.to_string()))?,
        ));
    server_config.transport_config(Arc::new(transport));
    quinn::Endpoint::server(server_config, config.listen).map_err(|source| ServerError::Io {
        what: format!("binding {}", config.listen),
        source,
    })
}

async fn serve<S: Store>(endpoint: quinn::Endpoint, ctx: Arc<Ctx<S>>) {
    let connection_slots = Arc::new(tokio::sync::Semaphore::new(
        ctx.limits().max_connections as usize,
    ));
    let mut connections = JoinSet::new();
    let mut turned_away = JoinSet::new();
    let mut shutdown = ctx.shutdown.clone();
    let sweeper = tokio::spawn(sweeper(Arc::clone(&ctx)));
    loop {
        tokio::select! {
            _ = until_shutdown(&mut shutdown) => break,
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                match Arc::clone(&connection_slots).try_acquire_owned() {
                    // Turning a connection away holds a slot too, so a flood
                    // of handshakes stays bounded by max-connections.
                    Ok(slot) if *ctx.lame_duck.borrow() => {
                        let handshake = Duration::from_millis(ctx.limits().stream_read_timeout_ms);
                        turned_away.spawn(go_away(incoming, handshake, slot));
                    }
                    Ok(slot) => {
                        connections.spawn(ops::connection(incoming, Arc::clone(&ctx), slot));
                        ctx.open_connections.send_replace(connections.len());
                    }
                    Err(_) => {
                        tracing::warn!("connection refused: max-connections reached");
                        if let Some(m) = &ctx.metrics {
                            m.connection_refused();
                        }
                        incoming.refuse();
                    }
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {
                ctx.open_connections.send_replace(connections.len());
            }
            Some(_) = turned_away.join_next(), if !turned_away.is_empty() => {}
        }
    }
    // Stop accepting; let every connection drain its in-flight operations,
    // all within the one shutdown deadline.
    let deadline = drain_deadline(&ctx);
    endpoint.set_server_config(None);
    turned_away.abort_all();
    let drained = tokio::time::timeout_at(deadline, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    let abandon = || {
        ctx.abandoned
            .store(true, std::sync::atomic::Ordering::SeqCst)
    };
    if drained.is_err() {
        tracing::warn!(
            in_flight = connections.len(),
            "drain timeout: aborting remaining connections"
        );
        connections.abort_all();
        abandon();
    }
    let (code, reason) = close_code(&ctx);
    endpoint.close(code, reason);
    if tokio::time::timeout_at(deadline, endpoint.wait_idle())
        .await
        .is_err()
    {
        tracing::warn!("drain timeout: connections still closing are dropped");
    }
    if !bounded("the sweeper", sweeper, deadline).await {
        abandon();
    }
}

/// The application close of this node's connections: `going-away` in
/// lame-duck mode (`PROTOCOL.md` §5), else code 0, reason `shutdown`.
fn close_code<S: Store>(ctx: &Ctx<S>) -> (quinn::VarInt, &'static [u8]) {
    if *ctx.lame_duck.borrow() {
        let going_away = rltp_wire::CloseCode::GoingAway;
        (
            quinn::VarInt::from_u32(going_away.code()),
            going_away.as_str().as_bytes(),
        )
    } else {
        (
            quinn::VarInt::from_u32(rltp_wire::CloseCode::NoError.code()),
            b"shutdown",
        )
    }
}

/// Turns a new connection away in lame-duck mode: completes the
/// handshake (an application close is only carried once it is done, RFC
/// 9000 §10.2.3) and closes with `going-away`, reading no stream.
async fn go_away(
    incoming: quinn::Incoming,
    handshake: Duration,
    _slot: tokio::sync::OwnedSemaphorePermit,
) {
    let going_away = rltp_wire::CloseCode::GoingAway;
    match tokio::time::timeout(handshake, incoming).await {
        Ok(Ok(connection)) => {
            tracing::debug!(remote = %connection.remote_address(), "lame duck: connection turned away");
            connection.close(
                quinn::VarInt::from_u32(going_away.code()),
                going_away.as_str().as_bytes(),
            );
            // Wait until the close is on its way (bounded).
            let _ = tokio::time::timeout(handshake, connection.closed()).await;
        }
        Ok(Err(e)) => tracing::debug!(error = %e, "handshake failed"),
        Err(_) => tracing::debug!("lame duck: handshake timed out"),
    }
}

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
fn enter_lame_duck<S: Store>(ctx: &Ctx<S>, by: &str) -> bool {
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

/// Applies due horizons every `limits.sweep-interval-ms` (§5a.9), then one
/// bounded store maintenance step.
async fn sweeper<S: Store>(ctx: Arc<Ctx<S>>) {
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
            if let Err(e) = engine.store().maintenance_step() {
                tracing::warn!(error = %e, "store maintenance step failed");
            }
            swept
        });
        match swept.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "sweep failed; retrying next interval"),
            Err(e) => tracing::error!(error = %e, "sweep task failed"),
        }
        let adopting = Arc::clone(&ctx);
        if let Ok(Err(e)) =
            tokio::task::spawn_blocking(move || adopt_stored_declaration(&adopting)).await
        {
            tracing::warn!(error = %e, "reading the stored declaration failed; retrying next interval");
        }
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
