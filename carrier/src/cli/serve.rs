//! `rltp-carrier serve`: run a carrier ([`rltp_server::service`]) until SIGINT or
//! SIGTERM, then drain and exit 0. SIGHUP reloads the configuration file
//! ([`rltp_server::service::reload`]; what reloads: [`rltp_server::config::RELOAD`]);
//! SIGUSR2 enters lame-duck mode ([`rltp_server::service::Server::lame_duck`]),
//! after which the carrier drains and exits 0 by itself.
//! `serve --check` checks everything a start would and prints the
//! configuration in force, changing nothing ([`rltp_server::service::check`]).
//!
//! Once listening it prints four lines on stdout, for people and for
//! scripts (the e2e tests read them), always in this order:
//!
//! ```text
//! listening 127.0.0.1:4433
//! fingerprint sha256/…            (pin this: --pin)
//! carrier did:web:localhost       (C, named in every proof: keys new --carrier)
//! declaration-issuer did:key:z6Mk…
//! ```
//!
//! Logs (tracing) go to stderr. A bad configuration is refused before
//! anything starts, with exit status 2 and a message naming the field.

use super::{Failure, exit};
use rltp_server::config::{Config, LogFormat};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `serve --help` says about the environment (also in the README).
const ENVIRONMENT_HELP: &str = "Environment:
  RUST_LOG              the log filter (default `info`; `info,rltp_server=debug`
                        adds a line per deposit and per challenge)
  RLTP_TEST_CLOCK_FILE  TEST HOOK, never for production: names a file holding a
                        decimal millisecond offset that is added to every reading
                        of the carrier's time (re-read at each reading), so tests
                        can let days of horizons pass in seconds (PROTOCOL.md §11);
                        the carrier logs a warning at start when it is set";

/// `serve`: run a carrier.
#[derive(Debug, clap::Args)]
#[command(after_help = ENVIRONMENT_HELP)]
pub struct Args {
    /// TOML configuration file (every key optional; see the README and
    /// `deploy/carrier.toml`).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Data directory (overrides `data-dir`; default ./carrier-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// UDP listen address (overrides `listen`; default 127.0.0.1:4433;
    /// port 0 picks a free port, printed on stdout).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Log format (overrides `log-format`).
    #[arg(long, value_parser = ["human", "json"])]
    log_format: Option<String>,
    /// Check everything a start would (configuration, TLS files, data dir,
    /// lineage, store read-only, database schema) without starting or
    /// changing anything, print the configuration in force with every
    /// default filled in (TOML; findings as `#` comments), exit 0, or 2
    /// naming the field or file.
    #[arg(long)]
    check: bool,
    /// Print the four start-up lines as one JSON object (`listening`,
    /// `fingerprint`, `carrier`, `declarationIssuer`); with --check, one
    /// JSON object (`config`, `checks`) instead of TOML.
    #[arg(long)]
    json: bool,
}

/// The configuration `args` name: the file (or the defaults), then the
/// command-line overrides.
///
/// # Errors
/// [`Failure::usage`] with the config error (it names the field).
pub fn load_config(args: &Args) -> Result<Config, Failure> {
    let mut config = match &args.config {
        Some(path) => Config::load(path),
        None => Config::defaults(),
    }
    .map_err(|e| Failure::usage(e.to_string()))?;
    if let Some(dir) = &args.data_dir {
        config.data_dir = dir.clone();
    }
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    match args.log_format.as_deref() {
        Some("json") => config.log_format = LogFormat::Json,
        Some(_) => config.log_format = LogFormat::Human,
        None => {}
    }
    Ok(config)
}

/// `serve --check`: [`rltp_server::service::check::check`], then the
/// configuration in force.
fn check(args: &Args) -> Result<u8, Failure> {
    let config = load_config(args)?;
    let findings =
        rltp_server::service::check::check(&config).map_err(|e| Failure::usage(e.to_string()))?;
    let effective = config.effective();
    if args.json {
        let checks: Vec<serde_json::Value> = findings
            .iter()
            .map(|f| serde_json::json!({ "what": f.what, "detail": f.detail }))
            .collect();
        let object = serde_json::json!({ "config": effective, "checks": checks });
        println!("{object}");
    } else {
        let text = toml::to_string(&effective)
            .map_err(|e| Failure::usage(format!("printing the configuration: {e}")))?;
        for finding in &findings {
            println!("# check {}: {}", finding.what, finding.detail);
        }
        print!("{text}");
    }
    Ok(exit::OK)
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    if args.check {
        return check(args);
    }
    let config = load_config(args)?;
    rltp_server::service::init_tracing(config.log_format, &config.effective_log_filter());
    match config.store.backend {
        rltp_server::config::Backend::Embedded => {
            let server = rltp_server::service::Server::start(&config)
                .await
                .map_err(|e| Failure::usage(e.to_string()))?;
            run_until_signal(server, args).await
        }
        rltp_server::config::Backend::Postgres => {
            let server = rltp_server::service::Server::start_postgres(&config)
                .await
                .map_err(|e| Failure::usage(e.to_string()))?;
            run_until_signal(server, args).await
        }
    }
}

/// Prints the five lines, serves until SIGINT or SIGTERM (or the end of
/// lame-duck mode, SIGUSR2), reloads on SIGHUP, drains.
async fn run_until_signal<S: rltp_storage::Store>(
    server: rltp_server::service::Server<S>,
    args: &Args,
) -> Result<u8, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    // Every handler is installed before the lines are printed: a signal
    // sent as soon as they are read must not meet its default action.
    let listen = |kind: SignalKind, name: &str| {
        signal(kind).map_err(|e| Failure::usage(format!("cannot listen for {name}: {e}")))
    };
    let mut hangup = listen(SignalKind::hangup(), "SIGHUP")?;
    let mut usr2 = listen(SignalKind::user_defined2(), "SIGUSR2")?;
    let stop = rltp_server::service::shutdown_signal();
    tokio::pin!(stop);
    let started = super::output::Output::new("serve", args.json, tokio::time::Instant::now());
    started.record(
        "serving",
        &format!(
            "listening {}\ntcp-listening {}\nfingerprint {}\ncarrier {}\ndeclaration-issuer {}\n",
            server.local_addr(),
            server.tcp_addr().map_or_else(
                || rltp_server::config::TCP_LISTEN_OFF.to_owned(),
                |a| a.to_string()
            ),
            server.fingerprint(),
            server.carrier().as_str(),
            server.declaration_issuer().to_did_key()
        ),
    );
    {
        let lame_duck_over = server.lame_duck_over();
        tokio::pin!(lame_duck_over);
        serve_signals(&server, args, &mut hangup, &mut usr2, stop, lame_duck_over).await;
    }
    if !server.shutdown().await {
        // Something was abandoned at the drain deadline and a blocking
        // thread may be stuck in it (a backup a client stopped reading):
        // exit now instead of letting the runtime wait to join it, so
        // `drain-timeout-ms` bounds the whole shutdown. Everything that was
        // answered is durable; the store is crash-safe for the rest.
        std::process::exit(i32::from(exit::OK));
    }
    Ok(exit::OK)
}

/// The signal loop of [`run_until_signal`]: returns on SIGINT/SIGTERM or
/// at the end of lame-duck mode.
async fn serve_signals<S: rltp_storage::Store>(
    server: &rltp_server::service::Server<S>,
    args: &Args,
    hangup: &mut tokio::signal::unix::Signal,
    usr2: &mut tokio::signal::unix::Signal,
    mut stop: std::pin::Pin<&mut impl Future<Output = ()>>,
    mut lame_duck_over: std::pin::Pin<&mut impl Future<Output = ()>>,
) {
    loop {
        tokio::select! {
            () = &mut stop => return,
            () = &mut lame_duck_over => return,
            _ = hangup.recv() => {
                tracing::info!("SIGHUP: reloading the configuration");
                match load_config(args) {
                    Ok(config) => {
                        server.reload(&config);
                    }
                    Err(failure) => server.reload_refused(&failure.message),
                }
            }
            _ = usr2.recv() => {
                server.lame_duck("SIGUSR2");
            }
        }
    }
}

/// Runs `serve`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("serve", execute(&args).await)
}

#[cfg(test)]
// A test reads top to bottom: long test functions are legitimate here.
#[allow(clippy::too_many_lines)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../../deploy/carrier.toml");

    /// `deploy/carrier.toml` loads as shipped (every option commented out:
    /// the defaults), and with every option uncommented it loads to the
    /// same values, so the file documents every key with its default.
    #[test]
    fn the_deploy_example_documents_every_key_with_its_default() {
        let shipped = Config::from_toml(EXAMPLE).unwrap();
        let defaults = Config::defaults().unwrap();
        let uncommented: String = EXAMPLE
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest)
                    if rest.starts_with('[')
                        || rest.split_once(" = ").is_some_and(|(k, _)| {
                            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                        }) =>
                {
                    rest
                }
                _ => line,
            })
            .collect::<Vec<_>>()
            .join("\n");
        // Every key uncommented, with the PostgreSQL store it documents.
        let full = Config::from_toml(
            &uncommented.replace("backend = \"embedded\"", "backend = \"postgres\""),
        )
        .unwrap();
        assert_eq!(shipped.store, defaults.store);
        let pg = full.store.postgres.as_ref().unwrap();
        assert_eq!(
            (pg.pool_size, pg.connect_timeout_ms, pg.lock_timeout_ms),
            (
                rltp_server::defaults::postgres::POOL_SIZE,
                rltp_server::defaults::postgres::CONNECT_TIMEOUT_MS,
                rltp_server::defaults::postgres::LOCK_TIMEOUT_MS
            )
        );
        assert_eq!(
            (pg.commit_timeout_ms, pg.notify, pg.tls),
            (
                rltp_server::defaults::postgres::COMMIT_TIMEOUT_MS,
                rltp_server::defaults::postgres::NOTIFY,
                rltp_server::config::PgTlsMode::Disable
            )
        );
        assert_eq!(
            pg.max_clock_offset_ms,
            rltp_server::defaults::postgres::MAX_CLOCK_OFFSET_MS
        );
        for config in [&shipped, &full] {
            assert_eq!(config.carrier.as_str(), defaults.carrier.as_str());
            assert_eq!(config.listen, defaults.listen);
            assert_eq!(config.data_dir, defaults.data_dir);
            assert_eq!(config.log_format, defaults.log_format);
            assert_eq!(config.constants, defaults.constants);
            assert_eq!(config.limits, defaults.limits);
            assert_eq!(config.transport, defaults.transport);
        }
        // Every key of the reference appears uncommented in `full`.
        for key in [
            "carrier",
            "listen",
            "data-dir",
            "log-format",
            "log-filter",
            "orphan-horizon",
            "give-up-horizon",
            "challenge-lifetime",
            "queue-floor",
            "max-queue-bytes",
            "max-binding-tombstones",
            "status-horizon",
            "capacity-bytes",
            "max-bindings",
            "max-connections",
            "max-streams-per-connection",
            "ack-eliciting-threshold",
            "max-ack-delay-ms",
            "initial-mtu",
            "mtu-discovery",
            "mtu-upper-bound",
            "idle-timeout-ms",
            "stream-read-timeout-ms",
            "sweep-interval-ms",
            "drain-timeout-ms",
            "unknown-address",
            "held-binding",
            "queue",
            "shared-submission",
            "cert",
            "key",
            "backend",
            "url",
            "pool-size",
            "tls",
            "ca-file",
            "password-file",
            "connect-timeout-ms",
            "lock-timeout-ms",
            "commit-timeout-ms",
            "notify",
            "max-clock-offset-ms",
        ] {
            assert!(
                uncommented
                    .lines()
                    .any(|l| l.starts_with(&format!("{key} = "))),
                "{key} is not documented"
            );
        }
        for section in [
            "[constants]",
            "[limits]",
            "[limits.meters]",
            "[tls]",
            "[store]",
            "[store.postgres]",
        ] {
            assert!(uncommented.lines().any(|l| l == section), "{section}");
        }
    }
}
