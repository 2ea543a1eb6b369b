//! Start-up (module docs of [`super`], "Start-up"): the data dir and its
//! lineage, the TLS identity, the store, the declaration key, the engine
//! and the published declaration, then the QUIC endpoint, the operator's
//! HTTP endpoint and the control socket.

use super::endpoint::{endpoint, serve};
use super::lame_duck::enter_lame_duck;
use super::sweeper::compare_clocks;
use super::{
    Ctx, Server, ServerError, control, db_clock, declaration, http, lineage, metrics, node_limits,
    tcp, watch,
};
use crate::config::Config;
use crate::driver::Driver;
use crate::meter::GovernorMeter;
use crate::service::clock;
use crate::tls;
use rltp_engine::{EngineConfig, EngineConstants};
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::multikey::DidKey;
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::postgres::PgStore;
use rltp_storage::redb_store::StoreId;
use rltp_storage::{OpenError, Store, StoreError};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use tokio::sync::watch as signal;

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
                OpenError::Damaged(what) => ServerError::Lineage(lineage::LineageError::Damaged {
                    dir: data_dir.clone(),
                    what,
                    way_back: lineage::RESTORE.into(),
                }),
                other => ServerError::Store(other.into()),
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
            })?
            .map_err(StoreError::from)?;
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
        node_limits::claim(&store, &config.limits, config.constants.queue_floor_bytes())?;
        if !matches!(life, lineage::Life::Known(_)) {
            lineage::stamp_clock(&data_dir, store_id, crate::admin::now_ms())?;
        }
        let mut server = Server::start_with_store(config, Arc::new(store)).await?;
        server
            .ctx
            .limits_in_database
            .store(true, std::sync::atomic::Ordering::SeqCst);
        server
            .aux
            .push(tokio::spawn(node_limits::adopt_loop(Arc::clone(
                &server.ctx,
            ))));
        // Deposits admitted through other nodes wake this node's watchers.
        {
            let watchers = Arc::clone(&server.ctx.watchers);
            server
                .ctx
                .engine
                .store()
                .on_remote_admission(Arc::new(move |rkid| match rkid {
                    Some(rkid) => watchers.admitted(rkid),
                    None => watchers.admitted_any(),
                }));
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
        let record = publish_declaration(&engine, key, config).await?;

        let clock_check = Arc::new(clock_check(config));
        compare_clocks(&engine, &server_clock, &clock_check).await;
        let endpoint = endpoint(config, &identity)?;
        let local_addr = endpoint.local_addr().map_err(|source| ServerError::Io {
            what: "reading the bound address".into(),
            source,
        })?;
        let tcp = tcp::bind(config, &identity, local_addr).await?;
        let tcp_addr = tcp.as_ref().map(|l| l.addr);
        let revision = record.revision;
        log_started(config, &identity, local_addr, tcp_addr, &issuer, revision);
        let http_listener = match config.metrics.listen {
            Some(addr) => Some(bind_http(addr).await?),
            None => None,
        };
        let metrics = http_listener.as_ref().map(|_| observed_metrics(&engine));
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
            listeners: if tcp_addr.is_some() {
                "bindings: quic, tcp".to_owned()
            } else {
                "bindings: quic (tcp off)".to_owned()
            },
            connection_slots: Arc::new(tokio::sync::Semaphore::new(
                config.limits.max_connections as usize,
            )),
            clock: server_clock,
            clock_check,
            limits_in_database: std::sync::atomic::AtomicBool::new(false),
            metrics: metrics.clone(),
            drain_deadline: std::sync::OnceLock::new(),
            abandoned: std::sync::atomic::AtomicBool::new(false),
        });
        let quic = serve(endpoint, Arc::clone(&ctx));
        let task = tokio::spawn(tcp::beside(quic, tcp, Arc::clone(&ctx)));
        let (aux, metrics_addr) = spawn_operator_endpoint(http_listener, metrics, &ctx, &stopped);
        Ok(Server {
            local_addr,
            tcp_addr,
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
}

/// The start-up log line: both listeners, `C`, the pin, the declaration.
fn log_started(
    config: &Config,
    identity: &tls::ServerIdentity,
    local_addr: SocketAddr,
    tcp_addr: Option<SocketAddr>,
    issuer: &DidKey,
    revision: u64,
) {
    tracing::info!(
        listen = %local_addr,
        tcp_listen = %tcp_addr.map_or_else(|| "off".to_owned(), |a| a.to_string()),
        carrier = config.carrier.as_str(),
        fingerprint = %identity.fingerprint,
        generated_certificate = identity.generated,
        declaration_issuer = %issuer.to_did_key(),
        revision,
        "carrier started"
    );
}

/// The metrics of the operator endpoint, fed by the writer's batches.
fn observed_metrics<S: Store>(engine: &Driver<S>) -> Arc<metrics::Metrics> {
    let metrics = Arc::new(metrics::Metrics::new());
    let observer = Arc::clone(&metrics);
    engine.observe_batches(Arc::new(move |report| observer.batch(report)));
    metrics
}

/// Publishes the declaration over the started `engine`, signing with `key`
/// when it must (off the async runtime: it writes).
async fn publish_declaration<S: Store>(
    engine: &Driver<S>,
    key: ed25519_dalek::SigningKey,
    config: &Config,
) -> Result<rltp_storage::DeclarationRecord, ServerError> {
    let engine = engine.clone();
    let constants = config.constants.clone();
    let data_dir = config.data_dir.clone();
    Ok(tokio::task::spawn_blocking(move || {
        declaration::publish(&engine, &key, &constants, &data_dir)
    })
    .await
    .map_err(|e| ServerError::Io {
        what: "publishing the declaration".into(),
        source: std::io::Error::other(e),
    })??)
}

/// The check of the database's clock against this node's: the configured
/// bound for Postgres, else the default.
fn clock_check(config: &Config) -> db_clock::ClockCheck {
    db_clock::ClockCheck::new(
        config
            .store
            .postgres
            .as_ref()
            .map_or(crate::defaults::postgres::MAX_CLOCK_OFFSET_MS, |pg| {
                pg.max_clock_offset_ms
            }),
    )
}

/// Serves the operator endpoint (/metrics /healthz /readyz /status) on
/// `http_listener` when metrics are on; yields its task and address.
fn spawn_operator_endpoint<S: Store>(
    http_listener: Option<tokio::net::TcpListener>,
    metrics: Option<Arc<metrics::Metrics>>,
    ctx: &Arc<Ctx<S>>,
    stopped: &signal::Sender<bool>,
) -> (Vec<tokio::task::JoinHandle<()>>, Option<SocketAddr>) {
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
            Arc::clone(ctx),
            metrics,
            stopped.subscribe(),
        )));
    }
    (aux, metrics_addr)
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
