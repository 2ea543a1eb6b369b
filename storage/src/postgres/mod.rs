//! The PostgreSQL store: many stateless carrier nodes on one
//! PostgreSQL-protocol database (issue 16), behind the same [`Store`] trait
//! as the embedded store.
//!
//! ## One database, many nodes, every rule exact
//! - **Per-queue locks and escrowed budgets** (`escrow.rs`, `PROTOCOL.md`
//!   §13): a write transaction holds the lock of every queue it touches
//!   (taken in `rkid` order for the batch, without waiting: a queue another
//!   node's transaction holds goes into the writer's next batch), so the
//!   transactions of all nodes on one queue are serialized: the r5
//!   state-table transition is a compare-and-swap on the binding row, s3's
//!   byte identity and s5 are judged under the queue's lock, a queue's
//!   next `seq` is its row's `last_seq + 1` under that lock (never a
//!   global serial: a cursor over `nextval()` would skip deposits whose
//!   commits land out of order), and a horizon entry of `rltp_due` is
//!   applied by exactly one node (the one whose transaction holds its
//!   queue and first sees it due; it deletes it in the same transaction,
//!   so a node that dies mid-sweep applied nothing). s6 and r4 spend from
//!   the node's lane budget, refilled from the pool in the same
//!   transaction; floors are in no budget (g5). Each node's own group
//!   commit (one writer per node) puts hundreds of operations into one
//!   such transaction.
//! - **Durability** is the database's: `admitted` is answered only after
//!   `COMMIT` returned, with `synchronous_commit` on (and, with a
//!   synchronous standby, confirmed by it). A commit whose outcome is
//!   unknown — the connection lost, or no standby confirmation within
//!   `commit-timeout-ms` (the wait is then cancelled; PostgreSQL keeps the
//!   transaction locally) — is a [`StoreError`], answered `unavailable`;
//!   the sender's retry is absorbed by s3 (`duplicate`), never admitted
//!   twice.
//! - **Challenges** are held by the node that issued them, in memory (an
//!   authorization session and its challenges stay on one QUIC connection,
//!   hence one node, `PROTOCOL.md` §13).
//! - **Watch pushes across nodes**: once a transaction that admitted
//!   deposits has committed, the node rings a doorbell from a session of
//!   its own ([`doorbell`]: channel `rltp_deposits`, payload the queues'
//!   `rkid`s in hex; never a `NOTIFY` inside the write transaction), and
//!   every node LISTENs and wakes its own watch sessions of those queues
//!   ([`Store::on_remote_admission`]); sessions also re-read on their own
//!   timer, so a database without LISTEN/NOTIFY, or a doorbell lost,
//!   still delivers.
//! - **One clock**: every write transaction reads the database's clock
//!   once it holds its queues' locks (`clock.rs`); the carrier stamps and judges
//!   every horizon of the transaction on it, never on a node's own.
//!
//! ## How a write transaction talks to the database
//! Point reads (a binding, a tombstone, a queue's counters, a deposit by
//! id, a departure) are answered from the transaction's own cache once
//! read (exact: no other writer can change a row while this one holds the
//! lock); mutations are buffered and written as one multi-row statement per
//! table (`unnest` arrays) — before any range read (a page of deposits, the
//! due index, the eviction order), so the database answers it with this
//! transaction's own writes, and at commit. Statements on the writer's
//! connection are pipelined.
//!
//! ## Threads
//! The store owns a small tokio runtime for its connections; its
//! synchronous trait methods hand each query to it and wait on a channel,
//! so they may be called from any thread (the writer thread, the blocking
//! pool, or inline from an async task, as the embedded store's are).

mod clock;
mod codec;
pub mod doorbell;
mod escrow;
mod limits;
mod queries;
mod read;
pub mod schema;
mod write;

pub use limits::HeldLimits;
pub use read::PgRead;
pub use write::PgWrite;

use crate::ChallengeTable;
use crate::failure::Context;
use crate::{AdmissionHook, BoxError, Ms, OpenError, OpenResult, Store, StoreError, StoreResult};
use codec::pg_error;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio_postgres::Client;

/// How often the listener's connection is pinged, and how long a ping may
/// go unanswered before the listener counts as hung and is made again.
const LISTEN_PING: Duration = Duration::from_secs(5);

/// The `application_name` of the listener's session.
pub const LISTENER_NAME: &str = "rltp-carrier-listener";

/// The notification channel of admissions (payload: the queues' `rkid`s,
/// lower-case hex, separated by spaces: [`doorbell`]).
pub const ADMISSIONS_CHANNEL: &str = "rltp_deposits";

/// How a [`PgStore`] reaches its database.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PgOptions {
    /// libpq-style parameters or a `postgresql://` URL (several `host=`
    /// entries with `target_session_attrs=read-write` follow a failover).
    pub url: String,
    /// Connections for readers (the writer and the listener have their own).
    pub pool_size: usize,
    /// TLS to the database.
    pub tls: PgTls,
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
    /// Longest a write transaction waits for a lock (a queue's, once its
    /// batch has been put off three times; the pool's; the tombstone gate).
    pub lock_timeout: Duration,
    /// Longest a `COMMIT` may take before its outcome counts as unknown
    /// (answered `unavailable`): bounds the wait for a synchronous standby
    /// that is gone.
    pub commit_timeout: Duration,
    /// How many due entries a write transaction reads ahead in one query
    /// (the batch prelude and the sweep then take them without a round
    /// trip each); at least 1.
    pub due_read_ahead: usize,
    /// Tell the other nodes of each admission (`NOTIFY`) and listen for
    /// theirs (`LISTEN`). Off for a PostgreSQL-protocol database without
    /// LISTEN/NOTIFY: watch sessions then find other nodes' deposits when
    /// they re-read their queue (every `sweep-interval-ms`).
    pub notify: bool,
}

impl PgOptions {
    /// Options for `url` with the defaults: 8 reader connections, no TLS,
    /// 5 s to connect, 10 s for the lock, 10 s for a commit, 512 due
    /// entries read ahead, notifications on.
    pub fn new(url: impl Into<String>) -> PgOptions {
        PgOptions {
            url: url.into(),
            pool_size: 8,
            tls: PgTls::Disable,
            connect_timeout: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(10),
            commit_timeout: Duration::from_secs(10),
            due_read_ahead: 512,
            notify: true,
        }
    }
}

/// What [`PgStore::integrity_check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgIntegrity {
    /// Held deposits.
    pub deposits: u64,
    /// Their bytes.
    pub bytes: u64,
    /// rkids holding both a binding and a tombstone (the engine keeps this
    /// 0; the store itself does not forbid it).
    pub binding_and_tombstone: u64,
    /// Every inconsistency, named (empty: clean).
    pub problems: Vec<String>,
}

/// Whether `url` is libpq-style parameters or a `postgresql://` URL the
/// driver reads (the configuration checks it before anything starts).
///
/// # Errors
/// The driver's reason, for people.
pub fn check_url(url: &str) -> Result<(), String> {
    url.parse::<tokio_postgres::Config>()
        .map(drop)
        .map_err(|e| e.to_string())
}

/// TLS to the database.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PgTls {
    /// Plain TCP (loopback, or a private network the operator trusts).
    Disable,
    /// TLS, verifying the server against the CA certificates in this PEM
    /// file (rustls).
    Require {
        /// PEM file of the CA roots.
        ca_file: std::path::PathBuf,
    },
}

/// The runtime the store's connections live on, and the bridge from
/// synchronous callers to it.
struct Io {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Io {
    fn new() -> StoreResult<Io> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rltp-postgres")
            .enable_all()
            .build()?;
        Ok(Io {
            runtime: Some(runtime),
        })
    }

    fn handle(&self) -> StoreResult<&tokio::runtime::Handle> {
        self.runtime
            .as_ref()
            .map(tokio::runtime::Runtime::handle)
            .ok_or(StoreError::Closed)
    }

    /// Runs `future` on the store's runtime and waits for it on this
    /// thread (any thread: the wait is a plain channel receive).
    fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = StoreResult<T>> + Send + 'static,
    ) -> StoreResult<T> {
        self.run_as(future)
    }

    /// [`Io::run`] for a future of another error type (opening's).
    fn run_as<T: Send + 'static, E: From<StoreError> + Send + 'static>(
        &self,
        future: impl Future<Output = Result<T, E>> + Send + 'static,
    ) -> Result<T, E> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle()?.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().map_err(|_| StoreError::Closed)?
    }

    /// [`Io::run`], giving up after `within` (a server that stopped
    /// answering: its connection stays open and silent, and nothing
    /// else would end the wait).
    fn run_within<T: Send + 'static>(
        &self,
        within: Duration,
        future: impl Future<Output = StoreResult<T>> + Send + 'static,
    ) -> StoreResult<T> {
        self.run(async move {
            tokio::time::timeout(within, future)
                .await
                .unwrap_or_else(|_| {
                    Err(StoreError::Postgres(
                        format!("postgres: no answer within {within:?}").into(),
                    ))
                })
        })
    }

    /// Runs `future` on the store's runtime without waiting.
    fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        if let Ok(handle) = self.handle() {
            handle.spawn(future);
        }
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        // May be dropped from inside another runtime: never block here.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A connector for the configured TLS mode.
#[derive(Clone)]
enum Connector {
    Plain,
    Tls(tokio_postgres_rustls::MakeRustlsConnect),
}

impl Connector {
    fn new(tls: &PgTls) -> OpenResult<Connector> {
        match tls {
            PgTls::Disable => Ok(Connector::Plain),
            PgTls::Require { ca_file } => {
                let pem = std::fs::read(ca_file)
                    .map_err(|e| settings(format!("ca-file {}", ca_file.display()), e))?;
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_pemfile_certs(&pem)? {
                    roots
                        .add(cert)
                        .map_err(|e| settings(format!("ca-file {}", ca_file.display()), e))?;
                }
                let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .map_err(|e| settings("tls", e))?
                .with_root_certificates(roots)
                .with_no_client_auth();
                Ok(Connector::Tls(
                    tokio_postgres_rustls::MakeRustlsConnect::new(config),
                ))
            }
        }
    }

    /// One connection to the first host of `config` that takes it, in
    /// order. Each host's whole attempt — TCP, TLS, startup and the
    /// `target_session_attrs` check — is bounded by the connect timeout,
    /// as libpq bounds it: tokio-postgres bounds only the TCP connect, so
    /// a host whose kernel accepts but whose server never answers (frozen,
    /// or stuck on a dead disk) would hold every attempt, and the next
    /// host — the new primary after a failover — would never be tried.
    async fn connect(&self, config: &tokio_postgres::Config) -> StoreResult<Client> {
        let within = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(5));
        let mut failure = StoreError::Postgres("postgres url: no host".into());
        for one in each_host(config) {
            match tokio::time::timeout(within, self.connect_one(&one)).await {
                Ok(Ok(client)) => return Ok(client),
                Ok(Err(e)) => failure = e,
                Err(_) => {
                    failure = StoreError::Postgres(
                        format!(
                            "postgres connect: {:?} did not answer within {within:?}",
                            one.get_hosts()
                        )
                        .into(),
                    );
                }
            }
        }
        Err(failure)
    }

    /// One connection to `config`'s host, its driver spawned on the
    /// current runtime.
    async fn connect_one(&self, config: &tokio_postgres::Config) -> StoreResult<Client> {
        match self {
            Connector::Plain => {
                let (client, connection) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| pg_error("connect", e))?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "postgres connection ended");
                    }
                });
                Ok(client)
            }
            Connector::Tls(tls) => {
                let (client, connection) = config
                    .connect(tls.clone())
                    .await
                    .map_err(|e| pg_error("connect", e))?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "postgres connection ended");
                    }
                });
                Ok(client)
            }
        }
    }
}

/// `config` once per host, with that host's port and `hostaddr` and every
/// other setting, in order (from a random host with
/// `load_balance_hosts=random`); a single-host `config` as it is.
fn each_host(config: &tokio_postgres::Config) -> Vec<tokio_postgres::Config> {
    use tokio_postgres::config::{Host, LoadBalanceHosts};
    let (hosts, addrs, ports) = (
        config.get_hosts(),
        config.get_hostaddrs(),
        config.get_ports(),
    );
    let count = hosts.len().max(addrs.len());
    if count <= 1 {
        return vec![config.clone()];
    }
    let mut each: Vec<tokio_postgres::Config> = (0..count)
        .map(|i| {
            let mut one = tokio_postgres::Config::new();
            match hosts.get(i) {
                Some(Host::Tcp(name)) => {
                    one.host(name);
                }
                Some(Host::Unix(path)) => {
                    one.host_path(path);
                }
                None => {}
            }
            if let Some(addr) = addrs.get(i) {
                one.hostaddr(*addr);
            }
            if let Some(port) = ports.get(i).or(ports.first()) {
                one.port(*port);
            }
            if let Some(v) = config.get_user() {
                one.user(v);
            }
            if let Some(v) = config.get_password() {
                one.password(v);
            }
            if let Some(v) = config.get_dbname() {
                one.dbname(v);
            }
            if let Some(v) = config.get_options() {
                one.options(v);
            }
            if let Some(v) = config.get_application_name() {
                one.application_name(v);
            }
            if let Some(v) = config.get_connect_timeout() {
                one.connect_timeout(*v);
            }
            if let Some(v) = config.get_tcp_user_timeout() {
                one.tcp_user_timeout(*v);
            }
            if let Some(v) = config.get_keepalives_interval() {
                one.keepalives_interval(v);
            }
            if let Some(v) = config.get_keepalives_retries() {
                one.keepalives_retries(v);
            }
            one.ssl_mode(config.get_ssl_mode())
                .ssl_negotiation(config.get_ssl_negotiation())
                .keepalives(config.get_keepalives())
                .keepalives_idle(config.get_keepalives_idle())
                .target_session_attrs(config.get_target_session_attrs())
                .channel_binding(config.get_channel_binding());
            one
        })
        .collect();
    if config.get_load_balance_hosts() == LoadBalanceHosts::Random {
        each.rotate_left(usize::from(rand::random::<u16>()) % count);
    }
    each
}

/// The certificates of a PEM file.
fn rustls_pemfile_certs(pem: &[u8]) -> OpenResult<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject as _;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| settings("ca-file", e))
}

/// The connection settings of `options`: its URL, its connect timeout,
/// and `application_name` unless the URL names one.
fn client_config(
    options: &PgOptions,
    application_name: &str,
) -> OpenResult<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config = options.url.parse().map_err(|e| settings("url", e))?;
    config.connect_timeout(options.connect_timeout);
    if config.get_application_name().is_none() {
        config.application_name(application_name);
    }
    Ok(config)
}

/// What [`PgStore::check`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgCheck {
    /// The held schema version ([`schema::SCHEMA_VERSION`] or older: a
    /// start migrates it).
    pub schema_version: u32,
    /// The store identity, `None` until the first node starts.
    pub store_id: Option<[u8; 16]>,
    /// The stored declaration, `None` until the first node signs one.
    pub declaration: Option<crate::DeclarationRecord>,
    /// The capacity limits every node judges against, `None` until the
    /// first node stores its own ([`PgStore::claim_limits`]).
    pub limits: Option<HeldLimits>,
}

/// The PostgreSQL [`Store`].
pub struct PgStore {
    io: Io,
    config: tokio_postgres::Config,
    connector: Connector,
    options: PgOptions,
    /// The writer's connection (one per node), made again after a failure.
    writer: Mutex<Option<Arc<Client>>>,
    /// The writer's lane ([`escrow`]): the one its session holds, kept
    /// across a new session while it was not reclaimed.
    lane: Mutex<Option<escrow::Lane>>,
    /// The limits the database holds, as last read (a lane's refill
    /// target, [`escrow::target`]).
    limits: Mutex<Option<HeldLimits>>,
    /// Serializes this node's write transactions (the database lock
    /// serializes them across nodes).
    write_gate: Mutex<()>,
    readers: deadpool_postgres::Pool,
    challenges: ChallengeTable,
    store_id: [u8; 16],
    hook: Arc<Mutex<Option<AdmissionHook>>>,
    /// Rings the other nodes after each commit that admitted
    /// ([`doorbell`]); `None` with notifications off.
    doorbell: Option<doorbell::Doorbell>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("store_id", &self.store_id)
            .field("pool_size", &self.options.pool_size)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PgStore {
    /// Connects, applies the migrations this binary knows (refusing a
    /// newer schema by name), creates the store identity on first use, and
    /// starts the admission listener.
    ///
    /// # Errors
    /// [`OpenError::Refused`] for a schema newer than this binary's or a
    /// database without durability, [`OpenError::Settings`] for unusable
    /// connection settings, [`StoreError::Postgres`] (in
    /// [`OpenError::Store`]) if the database cannot be reached.
    pub fn open(options: PgOptions) -> OpenResult<PgStore> {
        let config = client_config(&options, "rltp-carrier")?;
        let connector = Connector::new(&options.tls)?;
        let io = Io::new()?;
        let readers = {
            let _guard = io.handle()?.enter();
            let manager = match &connector {
                Connector::Plain => deadpool_postgres::Manager::from_config(
                    config.clone(),
                    tokio_postgres::NoTls,
                    manager_config(),
                ),
                Connector::Tls(tls) => deadpool_postgres::Manager::from_config(
                    config.clone(),
                    tls.clone(),
                    manager_config(),
                ),
            };
            deadpool_postgres::Pool::builder(manager)
                .max_size(options.pool_size.max(1))
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(options.connect_timeout))
                .create_timeout(Some(options.connect_timeout))
                .build()
                .map_err(|e| settings("pool", e))?
        };
        let (store_id, held_limits) = {
            let (config, connector) = (config.clone(), connector.clone());
            io.run_as(async move {
                let client = connector.connect(&config).await?;
                let store_id = migrate(&client).await?;
                Ok::<_, OpenError>((store_id, limits::read(&client).await?))
            })?
        };
        let doorbell = if options.notify {
            let config = client_config(&options, doorbell::APPLICATION_NAME)?;
            Some(doorbell::Doorbell::start(&io, config, connector.clone()))
        } else {
            None
        };
        let store = PgStore {
            doorbell,
            io,
            config,
            connector,
            options,
            writer: Mutex::new(None),
            lane: Mutex::new(None),
            limits: Mutex::new(held_limits),
            write_gate: Mutex::new(()),
            readers,
            challenges: ChallengeTable::default(),
            store_id,
            hook: Arc::new(Mutex::new(None)),
        };
        if store.options.notify {
            store.listen();
        }
        Ok(store)
    }

    /// Connects and reads what [`PgStore::open`] would act on, writing
    /// nothing (`rltp-carrier serve --check`): the durability settings,
    /// the schema version and the store identity. No migration, no
    /// store id, no listener.
    ///
    /// # Errors
    /// [`OpenError::Store`] if the database cannot be reached,
    /// [`OpenError::Refused`] if it runs
    /// without durability, holds no carrier schema (`rltp-carrier migrate`
    /// makes it) or a schema newer than this binary's.
    pub fn check(options: &PgOptions) -> OpenResult<PgCheck> {
        let config = client_config(options, "rltp-carrier-check")?;
        let connector = Connector::new(&options.tls)?;
        let io = Io::new()?;
        io.run_as(async move {
            let client = connector.connect(&config).await?;
            check_durability(&client).await?;
            let exists: bool = client
                .query_one("SELECT to_regclass('rltp_meta') IS NOT NULL", &[])
                .await
                .map_err(|e| pg_error("schema check", e))?
                .get(0);
            if !exists {
                return Err(OpenError::Refused(
                    "the database holds no carrier schema (rltp_meta): run `rltp-carrier migrate --config FILE`"
                        .into(),
                ));
            }
            let meta = |name: &'static str| {
                let client = &client;
                async move {
                    client
                        .query_opt("SELECT value FROM rltp_meta WHERE name = $1", &[&name])
                        .await
                        .map_err(|e| pg_error("rltp_meta", e))
                        .map(|row| row.map(|r| r.get::<_, Vec<u8>>(0)))
                }
            };
            let schema_version = match meta("schema_version").await? {
                Some(bytes) => {
                    schema::decode_version(&bytes).map_err(|e| OpenError::Refused(e.into()))?
                }
                None => 0,
            };
            schema::pending(schema_version).map_err(|e| OpenError::Refused(e.into()))?;
            let store_id = match meta("store_id").await? {
                Some(bytes) => Some(<[u8; 16]>::try_from(bytes.as_slice()).map_err(|_| {
                    StoreError::Corrupt("rltp_meta.store_id is not 16 bytes".into())
                })?),
                None => None,
            };
            let declaration = queries::declaration(&client).await?;
            let limits = limits::read(&client).await?;
            Ok(PgCheck {
                schema_version,
                store_id,
                declaration,
                limits,
            })
        })
    }

    /// This store's identity (`rltp_meta.store_id`, made by the first node).
    pub fn store_id(&self) -> [u8; 16] {
        self.store_id
    }

    /// The options it was opened with.
    pub fn options(&self) -> &PgOptions {
        &self.options
    }

    /// The writer's connection and its lane, connecting (again) if there
    /// is none or it broke: the new session resumes the lane it had, or
    /// claims a new one ([`escrow::resume`]).
    fn writer_client(&self) -> StoreResult<(Arc<Client>, escrow::Lane)> {
        let mut writer = lock(&self.writer);
        if let Some(client) = writer.as_ref().filter(|c| !c.is_closed())
            && let Some(lane) = *lock(&self.lane)
        {
            return Ok((Arc::clone(client), lane));
        }
        *writer = None;
        let (config, connector) = (self.config.clone(), self.connector.clone());
        let lock_timeout = self.options.lock_timeout;
        // Each host within the connect timeout, then one round trip.
        let hosts = u32::try_from(self.config.get_hosts().len().max(1)).unwrap_or(u32::MAX);
        let within = self.options.connect_timeout * hosts + self.round_trip();
        let client = self.io.run_within(within, async move {
            let client = connector.connect(&config).await?;
            client
                .batch_execute(&format!(
                    "SET lock_timeout = {}; SET synchronous_commit = on",
                    lock_timeout.as_millis()
                ))
                .await
                .map_err(|e| pg_error("session settings", e))?;
            Ok(client)
        })?;
        let had = *lock(&self.lane);
        let client = Arc::new(client);
        let lane = {
            let client = Arc::clone(&client);
            self.io.run_within(self.round_trip(), async move {
                escrow::resume(&client, had).await
            })?
        };
        *lock(&self.lane) = Some(lane);
        *writer = Some(Arc::clone(&client));
        Ok((client, lane))
    }

    /// A lane's refill target under the limits last read
    /// ([`escrow::target`]; none known: refills take only what a decision
    /// needs).
    fn target(&self) -> escrow::Budget {
        lock(&self.limits).map_or(escrow::Budget::default(), |l| {
            escrow::target(l.capacity_bytes, l.max_bindings)
        })
    }

    /// Longest one round trip of a transaction may take: a statement
    /// waits at most `lock-timeout-ms` for a lock, a `COMMIT` at most
    /// `commit-timeout-ms` and then 5 s for its cancellation. Past it the
    /// server has stopped answering (a frozen or cut-off host): the
    /// operation fails (`unavailable`), the writer's connection is dropped
    /// for a fresh one, which finds the host that now accepts writes, and
    /// a reader's connection is not reused.
    fn round_trip(&self) -> Duration {
        self.options.lock_timeout + self.options.commit_timeout + Duration::from_secs(5)
    }

    /// Forgets the writer's connection (after a failure).
    fn drop_writer(&self) {
        *lock(&self.writer) = None;
    }

    /// The LISTEN side: a task that keeps one connection listening on
    /// [`ADMISSIONS_CHANNEL`] and tells the hook, reconnecting with backoff.
    fn listen(&self) {
        let (mut config, connector, hook) = (
            self.config.clone(),
            self.connector.clone(),
            Arc::clone(&self.hook),
        );
        config.application_name(LISTENER_NAME);
        self.io.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                match listen_once(&config, &connector, &hook).await {
                    Ok(()) => backoff = Duration::from_millis(100),
                    Err(e) => tracing::debug!(error = %e, "postgres listener: reconnecting"),
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        });
    }

    /// Checks the database against itself: the global counters equal the
    /// rows they count, every queue's `bytes` is the sum of its deposits'
    /// lengths, every deposit's bytes are as long as recorded and hash to
    /// its id (`sha256(bytes) = id`, checked in the database); counts the
    /// rkids holding both a binding and a tombstone. Reads one
    /// consistent snapshot.
    ///
    /// # Errors
    /// [`StoreError::Postgres`] if the database cannot be read.
    pub fn integrity_check(&self) -> StoreResult<PgIntegrity> {
        let pool = self.readers.clone();
        self.io.run(async move {
            let c = pool
                .get()
                .await
                .map_err(|e| StoreError::Postgres(Context::new("postgres pool", e)))?;
            c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1")
                .await
                .map_err(|e| pg_error("integrity snapshot", e))?;
            let mut problems = Vec::new();
            let (o, quarantined) = queries::occupancy(&c).await?;
            let row = c
                .query_one(
                    "SELECT (SELECT count(*) FROM rltp_bindings), \
                            (SELECT count(*) FROM rltp_tombstones), \
                            (SELECT count(*) FROM rltp_deposits), \
                            (SELECT coalesce(sum(len), 0)::bigint FROM rltp_deposits), \
                            (SELECT count(*) FROM rltp_quarantine)",
                    &[],
                )
                .await
                .map_err(|e| pg_error("integrity counts", e))?;
            let counts: [i64; 5] = [row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)];
            let both: i64 = c
                .query_one(
                    "SELECT count(*) FROM rltp_bindings JOIN rltp_tombstones USING (rkid)",
                    &[],
                )
                .await
                .map_err(|e| pg_error("integrity counts", e))?
                .get(0);
            let held = [
                ("bindings", o.bindings),
                ("tombstones", o.tombstones),
                ("deposits", o.deposits),
                ("total_bytes", o.total_bytes),
                ("quarantined", quarantined),
            ];
            for ((name, counter), actual) in held.iter().zip(counts) {
                if i64::try_from(*counter).ok() != Some(actual) {
                    problems.push(format!(
                        "occupancy {name} = {counter}, the rows hold {actual}"
                    ));
                }
            }
            for (what, sql) in [
                (
                    "queue bytes",
                    "SELECT encode(q.rkid, 'hex') FROM rltp_queues q LEFT JOIN \
                     (SELECT rkid, sum(len) AS s FROM rltp_deposits GROUP BY rkid) d USING (rkid) \
                     WHERE q.bytes <> coalesce(d.s, 0)",
                ),
                (
                    "deposit bytes",
                    "SELECT encode(rkid, 'hex') || ' seq ' || seq FROM rltp_deposits \
                     WHERE length(bytes) <> len OR sha256(bytes) <> id",
                ),
            ] {
                for row in c
                    .query(sql, &[])
                    .await
                    .map_err(|e| pg_error("integrity check", e))?
                {
                    let name: String = row.get(0);
                    problems.push(format!("{what}: {name}"));
                }
            }
            let _ = c.batch_execute("ROLLBACK").await;
            Ok(PgIntegrity {
                deposits: o.deposits,
                bytes: o.total_bytes,
                binding_and_tombstone: u64::try_from(both).unwrap_or(0),
                problems,
            })
        })
    }

    /// Raises the floor every queue's next `seq` stays above (after the
    /// database was restored from a backup: `PROTOCOL.md` §7).
    ///
    /// # Errors
    /// [`StoreError::Postgres`].
    pub fn raise_seq_floor(&self, floor: u64) -> StoreResult<()> {
        let pool = self.readers.clone();
        // Big-endian bytes order as the numbers do, so the greater wins.
        let floor = floor.to_be_bytes().to_vec();
        self.io.run(async move {
            let client = pool
                .get()
                .await
                .map_err(|e| StoreError::Postgres(Context::new("postgres pool", e)))?;
            client
                .execute(
                    "INSERT INTO rltp_meta (name, value) VALUES ('seq_floor', $1) \
                     ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value \
                     WHERE rltp_meta.value < EXCLUDED.value",
                    &[&floor],
                )
                .await
                .map(drop)
                .map_err(|e| pg_error("raise seq floor", e))
        })
    }
}

/// A connection setting that cannot be used ([`OpenError::Settings`]).
fn settings(what: impl Into<String>, error: impl Into<BoxError>) -> OpenError {
    OpenError::Settings {
        what: what.into(),
        source: error.into(),
    }
}

fn manager_config() -> deadpool_postgres::ManagerConfig {
    deadpool_postgres::ManagerConfig {
        recycling_method: deadpool_postgres::RecyclingMethod::Fast,
    }
}

/// Applies pending migrations in one transaction each (under an advisory
/// lock, so two nodes starting together migrate once) and returns the
/// store id (made on first use).
async fn migrate(client: &Client) -> OpenResult<[u8; 16]> {
    const LOCK: i64 = 0x0072_6c74_706d_6967; // "rltpmig"
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK])
        .await
        .map_err(|e| pg_error("migration lock", e))?;
    let result = migrate_locked(client).await;
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK])
        .await;
    result
}

/// Refuses a database that would acknowledge a commit it could lose:
/// `fsync` or `full_page_writes` off (a crash then corrupts or drops
/// committed transactions). `synchronous_commit` is set to `on` by every
/// writer session, whatever the server's default.
async fn check_durability(client: &Client) -> OpenResult<()> {
    for setting in ["fsync", "full_page_writes"] {
        let row = client
            .query_one(&format!("SHOW {setting}"), &[])
            .await
            .map_err(|e| pg_error("read settings", e))?;
        let value: String = row.get(0);
        if value != "on" {
            return Err(OpenError::Refused(
                format!(
                    "the database runs with {setting} = {value}: a crash could lose committed \
                     transactions, so admitted deposits; set {setting} = on"
                )
                .into(),
            ));
        }
    }
    Ok(())
}

async fn migrate_locked(client: &Client) -> OpenResult<[u8; 16]> {
    check_durability(client).await?;
    let exists: bool = client
        .query_one("SELECT to_regclass('rltp_meta') IS NOT NULL", &[])
        .await
        .map_err(|e| pg_error("schema check", e))?
        .get(0);
    let version = if exists {
        match client
            .query_opt(
                "SELECT value FROM rltp_meta WHERE name = 'schema_version'",
                &[],
            )
            .await
            .map_err(|e| pg_error("schema version", e))?
        {
            Some(row) => schema::decode_version(row.get::<_, &[u8]>(0))
                .map_err(|e| OpenError::Refused(e.into()))?,
            None => 0,
        }
    } else {
        0
    };
    let pending = schema::pending(version).map_err(|e| OpenError::Refused(e.into()))?;
    for (to, sql) in pending {
        let sql = format!(
            "BEGIN; {sql}; INSERT INTO rltp_meta (name, value) VALUES ('schema_version', '\\x{:08x}') \
             ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value; COMMIT;",
            to
        );
        client
            .batch_execute(&sql)
            .await
            .map_err(|e| pg_error(&format!("migration {to}"), e))?;
        tracing::info!(version = to, "postgres schema migrated");
    }
    let fresh: [u8; 16] = rand::random();
    client
        .execute(
            "INSERT INTO rltp_meta (name, value) VALUES ('store_id', $1) ON CONFLICT (name) DO NOTHING",
            &[&fresh.as_slice()],
        )
        .await
        .map_err(|e| pg_error("store id", e))?;
    let row = client
        .query_one("SELECT value FROM rltp_meta WHERE name = 'store_id'", &[])
        .await
        .map_err(|e| pg_error("store id", e))?;
    <[u8; 16]>::try_from(row.get::<_, &[u8]>(0))
        .map_err(|_| StoreError::Corrupt("rltp_meta.store_id is not 16 bytes".into()).into())
}

async fn listen_once(
    config: &tokio_postgres::Config,
    connector: &Connector,
    hook: &Arc<Mutex<Option<AdmissionHook>>>,
) -> StoreResult<()> {
    use futures_util::StreamExt as _;
    // The listener drives its own connection to see notifications.
    let notify = |payload: Option<&str>| {
        let Some(hook) = lock(hook).clone() else {
            return;
        };
        match payload {
            Some(payload) => {
                for rkid in doorbell::rkids_of(payload) {
                    hook(Some(&rkid));
                }
            }
            None => hook(None),
        }
    };
    macro_rules! drive {
        ($tls:expr) => {{
            let (client, mut connection) = config
                .connect($tls)
                .await
                .map_err(|e| pg_error("listen connect", e))?;
            let mut messages =
                futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            let statement = format!("LISTEN {ADMISSIONS_CHANNEL}");
            let listen = client.batch_execute(&statement);
            tokio::pin!(listen);
            let mut listening = false;
            // A ping every LISTEN_PING; one unanswered for as long is a
            // hung listener (a half-open connection): dropped, made again.
            let mut ping_every =
                tokio::time::interval_at(tokio::time::Instant::now() + LISTEN_PING, LISTEN_PING);
            ping_every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut ping: Option<std::pin::Pin<Box<dyn Future<Output = _> + Send + '_>>> = None;
            let mut ping_sent = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    done = &mut listen, if !listening => {
                        done.map_err(|e| pg_error("listen", e))?;
                        listening = true;
                        // Listening (again): whatever was admitted while no
                        // listener was may have rung nobody. Every local watch
                        // session re-reads now, not a sweep interval later.
                        notify(None);
                    }
                    message = messages.next() => match message {
                        Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => notify(Some(n.payload())),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(pg_error("listen", e)),
                        None => return Ok(()),
                    },
                    _ = ping_every.tick(), if listening => {
                        if ping.is_some() && ping_sent.elapsed() >= LISTEN_PING {
                            return Err(StoreError::Postgres(
                                format!("the database listener did not answer a ping within {LISTEN_PING:?}: reconnecting").into(),
                            ));
                        }
                        if ping.is_none() {
                            ping = Some(Box::pin(client.simple_query("SELECT 1")));
                            ping_sent = tokio::time::Instant::now();
                        }
                    }
                    answered = async { ping.as_mut().expect("guarded").await }, if ping.is_some() => {
                        answered.map_err(|e| pg_error("listener ping", e))?;
                        ping = None;
                    }
                }
            }
        }};
    }
    match connector {
        Connector::Plain => drive!(tokio_postgres::NoTls),
        Connector::Tls(tls) => drive!(tls.clone()),
    }
}

impl Store for PgStore {
    type Read<'a> = PgRead<'a>;
    type Write<'a> = PgWrite<'a>;

    fn read(&self) -> StoreResult<PgRead<'_>> {
        PgRead::begin(self)
    }

    fn begin_write(&self) -> StoreResult<PgWrite<'_>> {
        let gate = lock(&self.write_gate);
        let (client, lane) = self.writer_client()?;
        match PgWrite::begin(self, client, lane, gate) {
            Ok(txn) => Ok(txn),
            Err(e) => {
                self.drop_writer();
                Err(e)
            }
        }
    }

    fn commit(&self, txn: PgWrite<'_>) -> StoreResult<()> {
        let result = txn.commit();
        if result.is_err() {
            self.drop_writer();
        }
        result
    }

    fn after_failure(&self) {
        // A failed statement or commit may leave the writer's connection in
        // an unknown state: the next transaction starts on a fresh one.
        self.drop_writer();
    }

    fn challenges(&self) -> &ChallengeTable {
        &self.challenges
    }

    fn on_remote_admission(&self, hook: AdmissionHook) {
        *lock(&self.hook) = Some(hook);
    }

    fn database_now(&self) -> StoreResult<Option<Ms>> {
        self.database_clock().map(Some)
    }

    /// The database's size, and the oldest deposit: each queue's head
    /// through the `(rkid, seq)` key, so O(queues), never a scan of the
    /// deposits. The rest is PostgreSQL's own (`VACUUM` gives back what
    /// departed deposits held: `pg_stat_user_tables.n_dead_tup`).
    fn size(&self) -> StoreResult<crate::StoreSize> {
        let pool = self.readers.clone();
        self.io.run_within(self.round_trip(), async move {
            let c = pool
                .get()
                .await
                .map_err(|e| StoreError::Postgres(Context::new("postgres pool", e)))?;
            let row = c
                .query_one(
                    "SELECT pg_database_size(current_database()), \
                            (SELECT min(h.admitted_at) FROM rltp_queues q \
                             CROSS JOIN LATERAL (SELECT d.admitted_at FROM rltp_deposits d \
                               WHERE d.rkid = q.rkid ORDER BY d.seq LIMIT 1) h)",
                    &[],
                )
                .await
                .map_err(|e| pg_error("store size", e))?;
            let disk: i64 = row.get(0);
            let oldest: Option<i64> = row.get(1);
            Ok(crate::StoreSize {
                disk_bytes: u64::try_from(disk).ok(),
                oldest_deposit_at: oldest.and_then(|v| u64::try_from(v).ok()),
                ..crate::StoreSize::default()
            })
        })
    }
}
