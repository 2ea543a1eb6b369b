//! The carrier's TOML configuration (`rltp-carrier serve --config FILE`).
//!
//! Every key is optional and has a default; unknown keys are refused
//! (`deny_unknown_fields`), and every value is validated before the
//! carrier starts. A refusal names the field and, for the seven
//! constants, the §11 domain (the constants' own errors say it).
//!
//! ```toml
//! carrier = "did:web:carrier.example"   # C, Identity §7a.2
//! listen = "127.0.0.1:4433"
//! data-dir = "./carrier-data"
//! log-format = "human"                  # or "json"
//! log-filter = "info"                   # RUST_LOG syntax; absent: RUST_LOG, else info
//!
//! [constants]                           # §4.4 guarantee 1, declared lexemes
//! orphan-horizon = "P30D"               # [P7D, P365D]
//! give-up-horizon = "P14D"              # [P1D, P90D]
//! challenge-lifetime = "PT1M"           # [PT5S, PT5M]
//! queue-floor = "262144"                # [65536, max-queue-bytes]
//! max-queue-bytes = "67108864"          # [1048576, 1073741824]
//! max-binding-tombstones = "1000000"    # [1, 2^53-1]
//! status-horizon = "PT30S"              # [PT5S, PT5M]
//!
//! [limits]                              # private (§4.4 guarantee 2)
//! capacity-bytes = 4294967296
//! max-bindings = 16384
//! max-connections = 1024
//! max-streams-per-connection = 64
//! idle-timeout-ms = 30000
//! stream-read-timeout-ms = 10000
//! sweep-interval-ms = 1000
//! drain-timeout-ms = 10000
//!
//! [limits.meters]                       # private rate budgets, units/s and burst
//! unknown-address = { per-second = 2000, burst = 4000 }
//! held-binding = { per-second = 20, burst = 100 }
//! queue = { per-second = 2000, burst = 10000 }
//! shared-submission = { per-second = 50000, burst = 100000 }
//!
//! [transport]                           # QUIC per-packet costs (quinn's; BENCHMARKS.md)
//! tcp-listen = "listen"                 # TLS/TCP (HTTP/2, §5b): "listen" (its address, as TCP), ip:port, or "off"
//! ack-eliciting-threshold = 0           # 0: off; n: ask the peer to ACK every n+1 packets
//! max-ack-delay-ms = 25                 # [1, 16383], with a threshold above 0
//! initial-mtu = 1200                    # [1200, 65527]
//! mtu-discovery = true
//! mtu-upper-bound = 1452                # [initial-mtu, 65527]
//!
//! [tls]                                 # both or neither; PEM files
//! cert = "/etc/rltp/fullchain.pem"
//! key = "/etc/rltp/key.pem"
//!
//! [metrics]                             # off unless listen is given
//! listen = "127.0.0.1:9464"             # /metrics /healthz /readyz /status
//! allow-remote = false                  # a non-loopback listen is refused unless true
//!
//! [store]
//! backend = "embedded"                  # or "postgres": many nodes, one database
//!
//! [store.postgres]                      # only with backend = "postgres"
//! url = "host=db1,db2 user=rltp dbname=rltp target_session_attrs=read-write"
//! pool-size = 8
//! tls = "disable"                       # or "require", with ca-file
//! ca-file = "/etc/rltp/db-ca.pem"
//! password-file = "/etc/rltp/db-password"
//! connect-timeout-ms = 5000
//! lock-timeout-ms = 10000
//! commit-timeout-ms = 10000
//! notify = true                        # false: a database without LISTEN/NOTIFY
//! max-clock-offset-ms = 2000            # beyond it from the database's clock: not ready
//! ```
//!
//! Relative paths are relative to the working directory of the process.

use rltp_proofs::constants::{CarrierConstantLexemes, CarrierConstants};
use rltp_proofs::identity::CarrierId;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The carrier identifier used when the config names none. A real
/// deployment names its own: recipients derive their keys from `C`.
pub const DEFAULT_CARRIER: &str = "did:web:localhost";
/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:4433";
/// Default data directory.
pub const DEFAULT_DATA_DIR: &str = "./carrier-data";

/// Why a configuration was refused. Display names the field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax, a wrong type or an unknown key (the text names the key).
    #[error("config: {0}")]
    Toml(String),
    /// A value outside its domain.
    #[error("config field {field}: {detail}")]
    Field {
        /// The dotted field name, e.g. `constants.queue-floor`.
        field: String,
        /// What is wrong, with the domain.
        detail: String,
    },
}

fn field_error(field: &str, detail: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field: field.to_owned(),
        detail: detail.into(),
    }
}

/// Log output format (`log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// Human-readable lines (default).
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

/// A private rate budget: `burst` units at once, refilled at `per_second`
/// units per second (both ≥ 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RateConfig {
    /// Sustained units per second, ≥ 1.
    pub per_second: u32,
    /// Largest burst, units, ≥ 1.
    pub burst: u32,
}

impl RateConfig {
    const fn new(per_second: u32, burst: u32) -> RateConfig {
        RateConfig { per_second, burst }
    }
}

/// The private meter budgets (§4.4 guarantees 2–5; never published).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct MeterConfig {
    /// All registration-side traffic (challenges and proofs of every
    /// purpose) naming an rkid without a held binding.
    pub unknown_address: RateConfig,
    /// `register`/`rebind` challenges and proofs per held binding. Its
    /// `collect`/`conclude` traffic is not charged here but to a budget of
    /// twice [`MeterConfig::queue`] (`PROTOCOL.md` §9a).
    pub held_binding: RateConfig,
    /// Submissions per queue; also sets each held binding's
    /// `collect`/`conclude` budget (twice this).
    pub queue: RateConfig,
    /// Submissions that land above a queue's floor, all queues together.
    pub shared_submission: RateConfig,
}

impl Default for MeterConfig {
    /// [`crate::defaults::meters`].
    fn default() -> MeterConfig {
        use crate::defaults::meters;
        let rate = |(per_second, burst)| RateConfig::new(per_second, burst);
        MeterConfig {
            unknown_address: rate(meters::UNKNOWN_ADDRESS),
            held_binding: rate(meters::HELD_BINDING),
            queue: rate(meters::QUEUE),
            shared_submission: rate(meters::SHARED_SUBMISSION),
        }
    }
}

/// The carrier's private limits (§4.4 guarantee 2) and connection hygiene.
/// None of them is ever an admission input except through the engine's
/// retriable capacity verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct LimitsConfig {
    /// Global byte budget, bytes (each held binding reserves `queue-floor`).
    pub capacity_bytes: u64,
    /// Most held bindings, a count.
    pub max_bindings: u64,
    /// Most concurrent QUIC connections; further handshakes are refused.
    pub max_connections: u32,
    /// Most concurrent bidirectional streams per connection (QUIC flow
    /// control: the peer cannot open more).
    pub max_streams_per_connection: u32,
    /// A connection with no traffic for this long is closed, ms.
    pub idle_timeout_ms: u64,
    /// Longest wait for the rest of a frame once a stream has started
    /// (slowloris bound), ms.
    pub stream_read_timeout_ms: u64,
    /// How often the sweeper applies due horizons, ms.
    pub sweep_interval_ms: u64,
    /// The whole shutdown, from the signal to the exit, ms: in-flight
    /// operations, closing connections, a backup in progress; what is left
    /// at the bound is aborted (`PROTOCOL.md` §5).
    pub drain_timeout_ms: u64,
    /// Private meter budgets.
    pub meters: MeterConfig,
}

/// QUIC transport settings of the carrier's endpoint: per-packet costs,
/// never admission inputs. The type, its defaults
/// ([`crate::defaults::transport`]) and its domains are the client
/// library's, so that both ends spell and check them alike.
pub type QuicTuning = rltp_quic::transport::Tuning;

/// `[transport]`: the QUIC per-packet settings ([`QuicTuning`], its keys
/// at the top of the section) and `tcp-listen`, the address of the
/// TLS/TCP binding (`PROTOCOL.md` §5b).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportConfig {
    /// The QUIC per-packet settings.
    pub quic: QuicTuning,
    /// The TLS/TCP listen address.
    pub tcp_listen: TcpListen,
}

/// `tcp-listen`: where the TLS/TCP binding listens (`PROTOCOL.md` §5b).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpListen {
    /// `"listen"` (the default): the QUIC `listen` address, as TCP — the
    /// same port number (with port 0, the port QUIC was given), so one
    /// `host:port` names both bindings.
    Listen,
    /// `"off"`: no TLS/TCP listener.
    Off,
    /// `"ip:port"`.
    At(SocketAddr),
}

/// The spelling of `tcp-listen` that turns the TLS/TCP listener off.
pub const TCP_LISTEN_OFF: &str = "off";
/// The spelling of `tcp-listen` that follows `listen` (the default).
pub const TCP_LISTEN_LISTEN: &str = "listen";

impl TransportConfig {
    /// The `[transport]` table: `tcp-listen` (resolved against `listen`)
    /// taken out, the rest the QUIC settings (unknown keys refused).
    fn from_table(mut table: toml::Table) -> Result<TransportConfig, ConfigError> {
        let spelled = "ip:port, \"listen\" or \"off\"";
        let tcp_listen = match table.remove("tcp-listen") {
            None => TcpListen::Listen,
            Some(toml::Value::String(text)) if text == TCP_LISTEN_LISTEN => TcpListen::Listen,
            Some(toml::Value::String(text)) if text == TCP_LISTEN_OFF => TcpListen::Off,
            Some(toml::Value::String(text)) => {
                TcpListen::At(text.parse::<SocketAddr>().map_err(|e| {
                    field_error(
                        "transport.tcp-listen",
                        format!("{text:?} is not {spelled}: {e}"),
                    )
                })?)
            }
            Some(other) => {
                return Err(field_error(
                    "transport.tcp-listen",
                    format!("{other} is not a string ({spelled})"),
                ));
            }
        };
        let quic = QuicTuning::deserialize(toml::Value::Table(table))
            .map_err(|e| ConfigError::Toml(format!("transport: {e}")))?;
        Ok(TransportConfig { quic, tcp_listen })
    }

    /// `tcp-listen` as spelled in the configuration.
    pub fn tcp_listen_text(&self) -> String {
        match self.tcp_listen {
            TcpListen::Listen => TCP_LISTEN_LISTEN.to_owned(),
            TcpListen::Off => TCP_LISTEN_OFF.to_owned(),
            TcpListen::At(addr) => addr.to_string(),
        }
    }
}

impl Serialize for TransportConfig {
    fn serialize<Se: serde::Serializer>(&self, serializer: Se) -> Result<Se::Ok, Se::Error> {
        let mut table = toml::Table::try_from(self.quic).map_err(serde::ser::Error::custom)?;
        table.insert(
            "tcp-listen".to_owned(),
            toml::Value::String(self.tcp_listen_text()),
        );
        table.serialize(serializer)
    }
}

impl Default for LimitsConfig {
    /// [`crate::defaults::limits`].
    fn default() -> LimitsConfig {
        use crate::defaults::limits;
        LimitsConfig {
            capacity_bytes: limits::CAPACITY_BYTES,
            max_bindings: limits::MAX_BINDINGS,
            max_connections: limits::MAX_CONNECTIONS,
            max_streams_per_connection: limits::MAX_STREAMS_PER_CONNECTION,
            idle_timeout_ms: limits::IDLE_TIMEOUT_MS,
            stream_read_timeout_ms: limits::STREAM_READ_TIMEOUT_MS,
            sweep_interval_ms: limits::SWEEP_INTERVAL_MS,
            drain_timeout_ms: limits::DRAIN_TIMEOUT_MS,
            meters: MeterConfig::default(),
        }
    }
}

/// `[tls]`: a CA-issued certificate. Absent: the self-signed certificate
/// in `<data-dir>/tls/`, made on first start.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TlsConfig {
    /// PEM certificate chain, end-entity first.
    pub cert: Option<PathBuf>,
    /// PEM private key of that certificate.
    pub key: Option<PathBuf>,
}

/// `[metrics]`: the operator's HTTP endpoint (`/metrics`, `/healthz`,
/// `/readyz`, `/status`; see `deploy/OPERATIONS.md`). Off unless `listen`
/// is given; a `listen` address outside loopback is refused unless
/// `allow-remote` is set (then access control is the operator's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MetricsConfig {
    /// TCP address of the endpoint; absent: no endpoint.
    pub listen: Option<SocketAddr>,
    /// Allow a `listen` address outside loopback.
    #[serde(default)]
    pub allow_remote: bool,
}

/// `[store]`: which store holds the carrier's state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StoreConfig {
    /// `embedded` (default: the store in `<data-dir>/store`) or `postgres`
    /// (many nodes on one database, `[store.postgres]`).
    #[serde(default)]
    pub backend: Backend,
    /// The database, for `backend = "postgres"`.
    pub postgres: Option<PostgresConfig>,
}

/// `[store] backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// One node, its store in its data dir.
    #[default]
    Embedded,
    /// Any number of nodes on one PostgreSQL database (`PROTOCOL.md` §13).
    Postgres,
}

/// `[store.postgres]`: how a node reaches the shared database.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PostgresConfig {
    /// libpq-style parameters (`host=db1,db2 port=5432 user=rltp
    /// dbname=rltp target_session_attrs=read-write`) or a `postgresql://`
    /// URL. Give every host of a failover pair with
    /// `target_session_attrs=read-write`, and the node follows a
    /// promotion.
    pub url: String,
    /// Reader connections (the writer and the listener have one each).
    #[serde(default = "default_pool_size")]
    pub pool_size: u32,
    /// `disable` (plain TCP: loopback or a trusted network) or `require`
    /// (TLS, the server verified against `ca-file`).
    #[serde(default)]
    pub tls: PgTlsMode,
    /// PEM file of the CA roots the database's certificate chains to.
    pub ca_file: Option<PathBuf>,
    /// A file holding the password (kept out of the configuration file).
    pub password_file: Option<PathBuf>,
    /// Longest wait for a connection, ms.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Longest a write transaction waits for a lock (a queue's, once its
    /// operation was put off three times; the pool's; the tombstone gate), ms.
    #[serde(default = "default_lock_timeout_ms")]
    pub lock_timeout_ms: u64,
    /// Longest a commit may wait for its confirmation, ms (after it: an
    /// unknown outcome, answered `unavailable`).
    #[serde(default = "default_commit_timeout_ms")]
    pub commit_timeout_ms: u64,
    /// Tell the other nodes of each admission with `NOTIFY` and listen
    /// for theirs, so their watch sessions are pushed at once; `false` for
    /// a database without LISTEN/NOTIFY (watch sessions then re-read their
    /// queue every `sweep-interval-ms`).
    #[serde(default = "default_notify")]
    pub notify: bool,
    /// Largest offset between this node's clock and the database's, ms;
    /// beyond it the node is not ready and serves nothing that depends on
    /// time (`PROTOCOL.md` §13, "One clock").
    #[serde(default = "default_max_clock_offset_ms")]
    pub max_clock_offset_ms: u64,
}

fn default_pool_size() -> u32 {
    crate::defaults::postgres::POOL_SIZE
}
fn default_connect_timeout_ms() -> u64 {
    crate::defaults::postgres::CONNECT_TIMEOUT_MS
}
fn default_lock_timeout_ms() -> u64 {
    crate::defaults::postgres::LOCK_TIMEOUT_MS
}
fn default_commit_timeout_ms() -> u64 {
    crate::defaults::postgres::COMMIT_TIMEOUT_MS
}
fn default_notify() -> bool {
    crate::defaults::postgres::NOTIFY
}
fn default_max_clock_offset_ms() -> u64 {
    crate::defaults::postgres::MAX_CLOCK_OFFSET_MS
}

/// `[store.postgres] tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PgTlsMode {
    /// Plain TCP.
    #[default]
    Disable,
    /// TLS, verified against `ca-file`.
    Require,
}

impl PostgresConfig {
    /// The store options these settings name (the password read from its
    /// file).
    ///
    /// # Errors
    /// [`ConfigError::Field`] if the password file cannot be read.
    pub fn options(&self) -> Result<rltp_storage::postgres::PgOptions, ConfigError> {
        use std::time::Duration;
        let mut url = self.url.clone();
        if let Some(path) = &self.password_file {
            let password = std::fs::read_to_string(path).map_err(|e| {
                field_error(
                    "store.postgres.password-file",
                    format!("{}: {e}", path.display()),
                )
            })?;
            let password = password.trim_end_matches(['\n', '\r']);
            // libpq parameter syntax: quote, escape ' and \.
            let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
            if url.contains("://") {
                return Err(field_error(
                    "store.postgres.password-file",
                    "use libpq parameters (host=… user=…) in url with a password file, not a URL",
                ));
            }
            url = format!("{url} password='{quoted}'");
        }
        let mut options = rltp_storage::postgres::PgOptions::new(url);
        options.pool_size = self.pool_size as usize;
        options.tls = match (self.tls, &self.ca_file) {
            (PgTlsMode::Require, Some(ca_file)) => rltp_storage::postgres::PgTls::Require {
                ca_file: ca_file.clone(),
            },
            _ => rltp_storage::postgres::PgTls::Disable,
        };
        options.connect_timeout = Duration::from_millis(self.connect_timeout_ms);
        options.lock_timeout = Duration::from_millis(self.lock_timeout_ms);
        options.commit_timeout = Duration::from_millis(self.commit_timeout_ms);
        options.notify = self.notify;
        Ok(options)
    }
}

/// The seven constants as declared lexemes (`[constants]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
struct ConstantsConfig {
    orphan_horizon: String,
    give_up_horizon: String,
    challenge_lifetime: String,
    queue_floor: String,
    max_queue_bytes: String,
    max_binding_tombstones: String,
    status_horizon: String,
}

impl Default for ConstantsConfig {
    /// [`crate::defaults::constants`].
    fn default() -> ConstantsConfig {
        use crate::defaults::constants as c;
        ConstantsConfig {
            orphan_horizon: c::ORPHAN_HORIZON.into(),
            give_up_horizon: c::GIVE_UP_HORIZON.into(),
            challenge_lifetime: c::CHALLENGE_LIFETIME.into(),
            queue_floor: c::QUEUE_FLOOR.into(),
            max_queue_bytes: c::MAX_QUEUE_BYTES.into(),
            max_binding_tombstones: c::MAX_BINDING_TOMBSTONES.into(),
            status_horizon: c::STATUS_HORIZON.into(),
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    carrier: Option<String>,
    listen: Option<String>,
    data_dir: Option<PathBuf>,
    #[serde(default)]
    log_format: LogFormat,
    log_filter: Option<String>,
    #[serde(default)]
    constants: ConstantsConfig,
    #[serde(default)]
    limits: LimitsConfig,
    #[serde(default)]
    transport: toml::Table,
    #[serde(default)]
    tls: TlsConfig,
    #[serde(default)]
    metrics: MetricsConfig,
    #[serde(default)]
    store: StoreConfig,
}

/// A validated configuration.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The carrier identifier `C` (Identity §7a.2), validated.
    pub carrier: CarrierId,
    /// UDP address to listen on.
    pub listen: SocketAddr,
    /// Where the store, the TLS material and the declaration key live.
    pub data_dir: PathBuf,
    /// Log output format.
    pub log_format: LogFormat,
    /// The log filter (`RUST_LOG` syntax, e.g. `info,rltp_server=debug`),
    /// validated; `None`: `RUST_LOG`, else `info` ([`Config::effective_log_filter`]).
    pub log_filter: Option<String>,
    /// The seven published constants, validated against §11.
    pub constants: CarrierConstants,
    /// Private limits.
    pub limits: LimitsConfig,
    /// QUIC transport settings and the TLS/TCP listen address.
    pub transport: TransportConfig,
    /// CA-issued certificate, if configured.
    pub tls: TlsConfig,
    /// The operator's HTTP endpoint, if enabled.
    pub metrics: MetricsConfig,
    /// Which store holds the state.
    pub store: StoreConfig,
}

impl Config {
    /// Reads and validates the TOML file at `path`.
    ///
    /// # Errors
    /// [`ConfigError::Read`], then as [`Config::from_toml`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml(&text)
    }

    /// Parses and validates TOML text.
    ///
    /// # Errors
    /// [`ConfigError::Toml`] (syntax, types, unknown keys),
    /// [`ConfigError::Field`] (values outside their domains).
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Toml(e.to_string()))?;
        Config::validate(raw)
    }

    /// The all-default configuration (carrier [`DEFAULT_CARRIER`]); the
    /// same as parsing an empty file. Tests and the demo adjust its public
    /// fields (`listen`, `data_dir`, …) afterwards.
    ///
    /// # Errors
    /// None in practice (pinned by a test); as [`Config::from_toml`].
    pub fn defaults() -> Result<Config, ConfigError> {
        Config::validate(RawConfig::default())
    }

    fn validate(raw: RawConfig) -> Result<Config, ConfigError> {
        let carrier_text = raw.carrier.unwrap_or_else(|| DEFAULT_CARRIER.to_owned());
        let carrier = CarrierId::from_bytes(carrier_text.as_bytes()).map_err(|e| {
            field_error(
                "carrier",
                format!("{carrier_text:?} is not a carrier identifier (Identity §7a.2): {e}"),
            )
        })?;
        let listen_text = raw.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen_text
            .parse::<SocketAddr>()
            .map_err(|e| field_error("listen", format!("{listen_text:?} is not ip:port: {e}")))?;
        let c = &raw.constants;
        let constants = CarrierConstants::from_lexemes(&CarrierConstantLexemes {
            orphan_horizon: &c.orphan_horizon,
            give_up_horizon: &c.give_up_horizon,
            challenge_lifetime: &c.challenge_lifetime,
            queue_floor: &c.queue_floor,
            max_queue_bytes: &c.max_queue_bytes,
            max_binding_tombstones: &c.max_binding_tombstones,
            status_horizon: &c.status_horizon,
        })
        .map_err(|e| field_error("constants", e.to_string()))?;
        validate_limits(&raw.limits)?;
        if let Some(filter) = &raw.log_filter {
            tracing_subscriber::EnvFilter::builder()
                .parse(filter)
                .map_err(|e| field_error("log-filter", format!("{filter:?}: {e}")))?;
        }
        let transport = TransportConfig::from_table(raw.transport)?;
        validate_transport(&transport.quic)?;
        if raw.tls.cert.is_some() != raw.tls.key.is_some() {
            return Err(field_error("tls", "cert and key must be given together"));
        }
        if let Some(addr) = raw.metrics.listen
            && !addr.ip().is_loopback()
            && !raw.metrics.allow_remote
        {
            return Err(field_error(
                "metrics.listen",
                format!(
                    "{addr} is not a loopback address (the endpoint is for the local operator; \
                     set allow-remote = true to expose it behind your own access control)"
                ),
            ));
        }
        validate_store(&raw.store)?;
        Ok(Config {
            carrier,
            listen,
            data_dir: raw
                .data_dir
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            log_format: raw.log_format,
            log_filter: raw.log_filter,
            constants,
            limits: raw.limits,
            transport,
            tls: raw.tls,
            metrics: raw.metrics,
            store: raw.store,
        })
    }

    /// The log filter in force: `log-filter`, else `RUST_LOG`, else `info`.
    pub fn effective_log_filter(&self) -> String {
        self.log_filter
            .clone()
            .or_else(|| std::env::var(tracing_subscriber::EnvFilter::DEFAULT_ENV).ok())
            .filter(|f| tracing_subscriber::EnvFilter::builder().parse(f).is_ok())
            .unwrap_or_else(|| "info".to_owned())
    }

    /// The configuration in force with every default filled in, as
    /// `serve --check` prints it (TOML or JSON). Parsing its TOML gives
    /// this configuration back; a password in `store.postgres.url` is
    /// shown as `<redacted>`.
    pub fn effective(&self) -> Effective {
        let c = &self.constants;
        let lexeme = |name: &str| {
            c.get(name)
                .map(|k| k.lexeme().to_owned())
                .unwrap_or_default()
        };
        let mut store = self.store.clone();
        if let Some(pg) = &mut store.postgres {
            pg.url = redact_password(&pg.url);
        }
        Effective {
            carrier: self.carrier.as_str().to_owned(),
            listen: self.listen.to_string(),
            data_dir: self.data_dir.clone(),
            log_format: self.log_format,
            log_filter: self.effective_log_filter(),
            constants: ConstantsConfig {
                orphan_horizon: lexeme("orphan-horizon"),
                give_up_horizon: lexeme("give-up-horizon"),
                challenge_lifetime: lexeme("challenge-lifetime"),
                queue_floor: lexeme("queue-floor"),
                max_queue_bytes: lexeme("max-queue-bytes"),
                max_binding_tombstones: lexeme("max-binding-tombstones"),
                status_horizon: lexeme("status-horizon"),
            },
            limits: self.limits,
            transport: self.transport,
            tls: self.tls.clone(),
            metrics: self.metrics,
            store,
        }
    }

    /// Every key of [`Config::effective`] as a dotted name and its value
    /// (TOML text), in order: what a reload compares.
    pub fn flattened(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Ok(toml::Value::Table(table)) = toml::Value::try_from(self.effective()) {
            flatten("", &table, &mut out);
        }
        out
    }

    /// The TLS/TCP listen address (`PROTOCOL.md` §5b), `tcp-listen`
    /// resolved against `listen`; `None` when it is off.
    pub fn tcp_listen(&self) -> Option<SocketAddr> {
        match self.transport.tcp_listen {
            TcpListen::Listen => Some(self.listen),
            TcpListen::Off => None,
            TcpListen::At(addr) => Some(addr),
        }
    }

    /// The TLS directory: `<data-dir>/tls`.
    pub fn tls_dir(&self) -> PathBuf {
        crate::data_dir::tls(&self.data_dir)
    }
}

/// The configuration in force with every default filled in
/// ([`Config::effective`]).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub struct Effective {
    pub carrier: String,
    pub listen: String,
    pub data_dir: PathBuf,
    pub log_format: LogFormat,
    pub log_filter: String,
    constants: ConstantsConfig,
    pub limits: LimitsConfig,
    pub transport: TransportConfig,
    pub tls: TlsConfig,
    pub metrics: MetricsConfig,
    pub store: StoreConfig,
}

fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, String)>) {
    for (key, value) in table {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten(&name, inner, out),
            other => out.push((name, other.to_string())),
        }
    }
}

/// `url` with the value of a libpq `password=` parameter, or the password
/// of a `scheme://user:password@host` URL, replaced by `<redacted>`.
fn redact_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((userinfo, host)) = rest.split_once('@')
            && let Some((user, _)) = userinfo.split_once(':')
        {
            return format!("{scheme}://{user}:<redacted>@{host}");
        }
        return url.to_owned();
    }
    url.split_whitespace()
        .map(|word| match word.split_once('=') {
            Some(("password", _)) => "password=<redacted>".to_owned(),
            _ => word.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a running carrier takes a changed key on SIGHUP
/// (`deploy/OPERATIONS.md`, "Reloading the configuration").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Applied by a reload.
    Live,
    /// Takes effect only at the next start.
    Restart,
    /// One of the seven published constants (§4.4 guarantee 1): never
    /// changed under a published declaration; the next start publishes it
    /// as a new declaration revision (or `rltp-carrier migrate
    /// --publish-constants` for many nodes).
    Declaration,
}

/// **The one list** of which configuration key reloads on SIGHUP and which
/// needs a restart: a key (or a section, for every key under it) and how
/// it reloads. `deploy/OPERATIONS.md` shows the same list (a test compares
/// them), and [`changes`] classifies every changed key by it.
pub const RELOAD: [(&str, Reload); 19] = [
    ("carrier", Reload::Restart),
    ("listen", Reload::Restart),
    ("data-dir", Reload::Restart),
    ("log-format", Reload::Restart),
    ("log-filter", Reload::Live),
    ("constants", Reload::Declaration),
    ("limits.capacity-bytes", Reload::Live),
    ("limits.max-bindings", Reload::Live),
    ("limits.max-connections", Reload::Restart),
    ("limits.max-streams-per-connection", Reload::Restart),
    ("limits.idle-timeout-ms", Reload::Restart),
    ("limits.stream-read-timeout-ms", Reload::Live),
    ("limits.sweep-interval-ms", Reload::Live),
    ("limits.drain-timeout-ms", Reload::Live),
    ("limits.meters", Reload::Live),
    ("transport", Reload::Restart),
    ("tls", Reload::Restart),
    ("metrics", Reload::Restart),
    ("store", Reload::Restart),
];

/// How `key` (dotted, as [`Config::flattened`] names it) reloads: the
/// entry of [`RELOAD`] that is the longest prefix of it at a dot.
pub fn reload_of(key: &str) -> Reload {
    RELOAD
        .iter()
        .filter(|(k, _)| key == *k || key.strip_prefix(k).is_some_and(|r| r.starts_with('.')))
        .max_by_key(|(k, _)| k.len())
        .map_or(Reload::Restart, |(_, r)| *r)
}

/// One changed key between two configurations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Dotted key, e.g. `limits.meters.queue.burst`.
    pub key: String,
    /// The value in force (TOML text; empty when unset).
    pub old: String,
    /// The value in the new file (TOML text; empty when unset).
    pub new: String,
    /// How it reloads.
    pub reload: Reload,
}

/// Every key whose value differs between `old` and `new`, in order.
pub fn changes(old: &Config, new: &Config) -> Vec<Change> {
    let before = old.flattened();
    let after = new.flattened();
    let mut keys: Vec<&String> = before.iter().map(|(k, _)| k).collect();
    for (k, _) in &after {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let value = |list: &[(String, String)], key: &str| {
        list.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    keys.into_iter()
        .filter_map(|key| {
            let (o, n) = (value(&before, key), value(&after, key));
            (o != n).then(|| Change {
                key: key.clone(),
                old: o,
                new: n,
                reload: reload_of(key),
            })
        })
        .collect()
}

impl Config {
    /// `self` with the [`Reload::Live`] parts of `new` applied: what a
    /// carrier runs with after a reload of `new`. Every other key keeps
    /// its value.
    pub fn with_reloaded(&self, new: &Config) -> Config {
        let mut applied = self.clone();
        applied.log_filter = new.log_filter.clone();
        applied.limits = LimitsConfig {
            capacity_bytes: new.limits.capacity_bytes,
            max_bindings: new.limits.max_bindings,
            stream_read_timeout_ms: new.limits.stream_read_timeout_ms,
            sweep_interval_ms: new.limits.sweep_interval_ms,
            drain_timeout_ms: new.limits.drain_timeout_ms,
            meters: new.limits.meters,
            ..self.limits
        };
        applied
    }
}

fn validate_store(store: &StoreConfig) -> Result<(), ConfigError> {
    match (store.backend, &store.postgres) {
        (Backend::Embedded, None) => Ok(()),
        (Backend::Embedded, Some(_)) => Err(field_error(
            "store.postgres",
            "is given but store.backend is \"embedded\" (set backend = \"postgres\" to use it)",
        )),
        (Backend::Postgres, None) => Err(field_error(
            "store.postgres",
            "is required when store.backend is \"postgres\" (at least url)",
        )),
        (Backend::Postgres, Some(pg)) => {
            if pg.url.trim().is_empty() {
                return Err(field_error("store.postgres.url", "must not be empty"));
            }
            rltp_storage::postgres::check_url(&pg.url)
                .map_err(|e| field_error("store.postgres.url", e))?;
            if !(1..=256).contains(&pg.pool_size) {
                return Err(field_error(
                    "store.postgres.pool-size",
                    format!("{} is outside [1, 256]", pg.pool_size),
                ));
            }
            if pg.tls == PgTlsMode::Require && pg.ca_file.is_none() {
                return Err(field_error(
                    "store.postgres.ca-file",
                    "is required with tls = \"require\" (the CA the database's certificate chains to)",
                ));
            }
            for (field, v) in [
                ("store.postgres.connect-timeout-ms", pg.connect_timeout_ms),
                ("store.postgres.lock-timeout-ms", pg.lock_timeout_ms),
                ("store.postgres.commit-timeout-ms", pg.commit_timeout_ms),
                ("store.postgres.max-clock-offset-ms", pg.max_clock_offset_ms),
            ] {
                if !(1..=3_600_000).contains(&v) {
                    return Err(field_error(
                        field,
                        format!("{v} is outside [1, 3600000] ms"),
                    ));
                }
            }
            Ok(())
        }
    }
}

fn validate_transport(t: &QuicTuning) -> Result<(), ConfigError> {
    t.check()
        .map_err(|(key, why)| field_error(&format!("transport.{key}"), why))
}

fn validate_limits(l: &LimitsConfig) -> Result<(), ConfigError> {
    let positive = |field: &str, v: u64| {
        if v == 0 {
            Err(field_error(field, "must be at least 1"))
        } else {
            Ok(())
        }
    };
    positive("limits.capacity-bytes", l.capacity_bytes)?;
    positive("limits.max-bindings", l.max_bindings)?;
    positive("limits.max-connections", u64::from(l.max_connections))?;
    if !(1..=10_000).contains(&l.max_streams_per_connection) {
        return Err(field_error(
            "limits.max-streams-per-connection",
            format!("{} is outside [1, 10000]", l.max_streams_per_connection),
        ));
    }
    // quinn's idle timeout is a VarInt of ms; keep all timers sane.
    for (field, v) in [
        ("limits.idle-timeout-ms", l.idle_timeout_ms),
        ("limits.stream-read-timeout-ms", l.stream_read_timeout_ms),
        ("limits.sweep-interval-ms", l.sweep_interval_ms),
        ("limits.drain-timeout-ms", l.drain_timeout_ms),
    ] {
        if !(1..=86_400_000).contains(&v) {
            return Err(field_error(
                field,
                format!("{v} is outside [1, 86400000] ms"),
            ));
        }
    }
    for (field, rate) in [
        ("limits.meters.unknown-address", l.meters.unknown_address),
        ("limits.meters.held-binding", l.meters.held_binding),
        ("limits.meters.queue", l.meters.queue),
        (
            "limits.meters.shared-submission",
            l.meters.shared_submission,
        ),
    ] {
        if rate.per_second == 0 || rate.burst == 0 {
            return Err(field_error(
                field,
                "per-second and burst must be at least 1",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
