//! # rltp-cli: the client commands of `rltp-carrier`
//!
//! The sender and recipient subcommands of the `rltp-carrier` binary
//! (`README.md`, `PROTOCOL.md` §5–§9), and the command-line plumbing every
//! subcommand shares (exit statuses, [`Failure`], [`finish`], [`output`]).
//! The binary's `main.rs` only parses the command line and dispatches;
//! every command is one module with its clap `Args` and an async `run`.
//! The operator commands (`serve`, `migrate`, `backup`, `restore`,
//! `admin`, `completions`, `man`) are the binary's own, over
//! `rltp-server`.
//!
//! | command | module | what |
//! |---|---|---|
//! | `serve` | `rltp-carrier`'s `serve` | run a carrier (SIGHUP reloads, SIGUSR2 lame duck); `serve --check` checks without starting |
//! | `keys new` / `keys rotate` | [`keys`] | recipient key material (Identity §7a) |
//! | `party new` / `card` / `trust` / `credential` | [`party`] | a party's relationship file and party store (Identity §5–§7a, `PROTOCOL.md` §14) |
//! | `declaration` | [`declaration`] | fetch and verify the signed declaration (§4.4) |
//! | `register` | [`register`] | register or rebind an `rkid` (§5a.3) |
//! | `send` | [`send`] | seal a document and submit it, reporting §6.1 status |
//! | `status` | [`status`] | a deposit's status by id (§5a.8) |
//! | `collect` | [`collect`] | collect, open, write, and conclude terminal outcomes (§5a.8) |
//! | `conclude` | [`conclude`] | conclude given deposit ids (§5a.8) |
//! | `demo` | [`demo`] | the whole round trip against an in-process carrier |
//! | `conformance` | [`conformance`] | check any carrier from the wire, one line per contract section |
//! | `migrate` | `rltp-carrier`'s `migrate` | prepare the shared PostgreSQL database; publish new constants for every node |
//! | `backup` | `rltp-carrier`'s `backup` | an online, consistent backup archive (`deploy/OPERATIONS.md`) |
//! | `restore` | `rltp-carrier`'s `restore` | check an archive and install it, or `--verify` it |
//! | `admin stats` | `rltp-carrier`'s `admin` | counts only (no cross-principal answers, §5a.1) |
//! | `completions` / `man` | `rltp-carrier`'s `docs` | shell completion scripts and the manual page |
//! | `admin lame-duck` | `rltp-carrier`'s `admin` | lame-duck mode through the control socket (`PROTOCOL.md` §5) |
//!
//! ## Exit statuses
//! [`exit::OK`] (0) the operation reached its positive outcome;
//! [`exit::REFUSED`] (1) the carrier answered with a refusal, the sender's
//! status is `failed(…)`, or a deposit could not be handled;
//! [`exit::USAGE`] (2) bad arguments, files or configuration;
//! [`exit::TRANSPORT`] (3) the carrier could not be reached (every client
//! command, also when it gave up retrying while the carrier was
//! unreachable), failed the TLS handshake, or broke the wire profile.
//!
//! ## Retrying
//! Every client command retries retriable refusals and transport failures
//! with full-jitter backoff and reports `status awaiting-transport(…)` at
//! least every half status horizon meanwhile ([`rltp_client::retry`]),
//! until `--give-up-after`: for `send` the carrier's declared
//! `give-up-horizon` shortened by it, measured from the command's start;
//! for the recipient commands each request gives up after it (default
//! [`DEFAULT_GIVE_UP_AFTER`]); `collect --watch` never gives up on the
//! carrier and reconnects until stopped.
//!
//! Output is line-oriented `name value` text on stdout (or, with `--json`,
//! which every command printing results takes, JSON lines: [`output`],
//! `README.md` "JSON output"), each line printed as its step happens;
//! diagnostics go to stderr. No command ever prints a
//! secret or an envelope body.

pub mod collect;
pub mod conclude;
pub mod conformance;
pub mod declaration;
pub mod demo;
pub mod demo_delivered;
pub mod keys;
pub mod output;
pub mod party;
pub mod receive;
pub mod register;
pub mod send;
pub mod status;

use rltp_client::tls::{ServerTrust, SpkiFingerprint};
use rltp_client::{
    AwaitingReason, Client, ClientError, ConnectOptions, Link, Schedule, TransportChoice,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Exit statuses of every subcommand.
pub mod exit {
    /// The operation reached its positive outcome.
    pub const OK: u8 = 0;
    /// A refusal, a `failed(…)` status, or a deposit that could not be handled.
    pub const REFUSED: u8 = 1;
    /// Bad arguments, files or configuration.
    pub const USAGE: u8 = 2;
    /// The carrier could not be reached, or it broke the wire profile.
    pub const TRANSPORT: u8 = 3;

    /// Every exit status a command ends with, in order (`ERRORS.md`, "Exit
    /// statuses", lists exactly these). Clap's own argument errors exit
    /// with [`USAGE`] too.
    pub const ALL: [u8; 4] = [OK, REFUSED, USAGE, TRANSPORT];

    /// The name of an exit status (`ok`, `refused`, `usage`, `transport`).
    pub const fn name(status: u8) -> &'static str {
        match status {
            OK => "ok",
            REFUSED => "refused",
            USAGE => "usage",
            TRANSPORT => "transport",
            _ => "unknown",
        }
    }

    /// Whether running the same command again later may succeed without
    /// changing anything: only [`TRANSPORT`] (the carrier was unreachable;
    /// a refusal was already retried until `--give-up-after` when it was
    /// retriable).
    pub const fn retriable(status: u8) -> bool {
        status == TRANSPORT
    }
}

/// Why a command stopped early: an exit status and a message for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// One of [`exit`].
    pub status: u8,
    /// For people; never a secret.
    pub message: String,
}

impl Failure {
    /// A [`exit::USAGE`] failure.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            status: exit::USAGE,
            message: message.into(),
        }
    }

    /// A [`exit::REFUSED`] failure.
    pub fn refused(message: impl Into<String>) -> Failure {
        Failure {
            status: exit::REFUSED,
            message: message.into(),
        }
    }

    /// A [`exit::TRANSPORT`] failure.
    pub fn transport(message: impl Into<String>) -> Failure {
        Failure {
            status: exit::TRANSPORT,
            message: message.into(),
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        match e {
            ClientError::Tls(_) | ClientError::Proof(_) => Failure::usage(e.to_string()),
            ClientError::AddressChallenge(_) | ClientError::Declaration(_) => {
                Failure::refused(e.to_string())
            }
            ClientError::Handshake(h) => handshake_failure(None, &h),
            _ => Failure::transport(e.to_string()),
        }
    }
}

/// The failure of a TLS handshake with the carrier at `server` (exit 3,
/// unreachable): a pin mismatch is named as such — another carrier, or a
/// TLS-intercepting middlebox presenting its own certificate, never
/// trusted, nothing sent (`PROTOCOL.md` §5b).
pub fn handshake_failure(server: Option<&str>, e: &rltp_client::HandshakeError) -> Failure {
    let at = server.map(|s| format!(" at {s}")).unwrap_or_default();
    Failure::transport(if e.is_pin_mismatch() {
        format!(
            "pin mismatch: the carrier{at} presented a key that is not the pinned one \
             (a TLS-intercepting middlebox, or another carrier); not trusted, nothing was sent: {e}"
        )
    } else {
        format!("the carrier{at} failed the TLS handshake (wrong --pin?): {e}")
    })
}

/// The failure of a request that gave up while in `reason`: exit 3 when
/// the carrier could not be reached, 1 when it kept refusing retriably.
pub fn gave_up(what: &str, reason: AwaitingReason) -> Failure {
    let message = format!("{what}: gave up at --give-up-after, {reason}");
    if reason.is_unreachable() {
        Failure::transport(message)
    } else {
        Failure::refused(message)
    }
}

pub use rltp_server::defaults::GIVE_UP_AFTER as DEFAULT_GIVE_UP_AFTER;

/// Makes a closed standard output end the command quietly instead of in a
/// panic: `rltp-carrier declaration | head -5` must not print a backtrace.
/// Rust ignores `SIGPIPE`, so a write to a closed pipe fails with `EPIPE`,
/// and `println!` panics on that ("failed printing to stdout: Broken
/// pipe"). This panic hook turns exactly that panic into exit status 0 —
/// the reader has everything it asked for — and leaves every other panic
/// to the previous hook. Installed first thing by `main`.
pub fn end_quietly_on_closed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        // EPIPE's text ("Broken pipe (os error 32)" on Linux).
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(i32::from(exit::OK));
        }
        previous(info);
    }));
}

/// Turns a command's result into the process exit status, printing a
/// failure's message to stderr as `rltp-carrier COMMAND: MESSAGE`.
pub fn finish(command: &str, result: Result<u8, Failure>) -> ExitCode {
    match result {
        Ok(status) => ExitCode::from(status),
        Err(failure) => {
            eprintln!("rltp-carrier {command}: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

/// How a client command reaches a carrier (`PROTOCOL.md` §5).
#[derive(Debug, Clone, clap::Args)]
pub struct CarrierArgs {
    /// The carrier's `host:port` (UDP). Repeat it (or give a comma-separated
    /// list) for the nodes of one carrier: they are tried in order, and a
    /// node that is unreachable or going away (lame duck) is left for the
    /// next at once (`PROTOCOL.md` §5, §10).
    #[arg(
        long,
        env = "RLTP_CARRIER_SERVER",
        default_value = rltp_server::config::DEFAULT_LISTEN,
        value_delimiter = ','
    )]
    pub server: Vec<String>,
    /// The carrier's SHA-256 SPKI fingerprint (`sha256/…`, printed by
    /// `serve`). With several `--server`s: one pin for all, or one per
    /// server, in the same order.
    #[arg(
        long,
        env = "RLTP_CARRIER_PIN",
        required_unless_present = "ca_file",
        value_delimiter = ','
    )]
    pub pin: Vec<SpkiFingerprint>,
    /// Trust a CA-issued certificate: PEM file of the CA roots (instead of `--pin`).
    #[arg(long, conflicts_with = "pin")]
    pub ca_file: Option<PathBuf>,
    /// TLS server name (default: the host part of `--server`).
    #[arg(long)]
    pub server_name: Option<String>,
    /// Which binding to reach the carrier by (`PROTOCOL.md` §5b): `quic`,
    /// `tcp` (TLS 1.3/TCP with HTTP/2, where UDP is blocked), or `auto`:
    /// QUIC first, TLS/TCP beside it after 250 ms, the first to connect
    /// wins. Both use the same `--pin`.
    #[arg(long, env = "RLTP_CARRIER_TRANSPORT", default_value_t = TransportChoice::Auto)]
    pub transport: TransportChoice,
    /// The TCP port of the carrier's TLS/TCP listener, when it is not the
    /// `--server` port (`[transport] tcp-listen`; §5b "Naming an endpoint").
    #[arg(long, env = "RLTP_CARRIER_TCP_PORT")]
    pub tcp_port: Option<u16>,
    /// Longest wait for a connection or an answer, seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Stop retrying after this long (Access §7.3 duration, e.g. `PT30S`).
    /// `send`: from its start, at most the carrier's give-up-horizon (the
    /// default; the sender's own declared bound, §6.1). Other commands:
    /// each request, default PT1M (`collect --watch` itself never gives up:
    /// it reconnects).
    #[arg(long, value_parser = parse_duration)]
    pub give_up_after: Option<Duration>,
}

/// `server` (`host:port`, `[v6]:port`) with its port replaced by `port`.
fn with_port(server: &str, port: u16) -> String {
    let host = server.rsplit_once(':').map_or(server, |(host, _)| host);
    format!("{host}:{port}")
}

/// An Access §7.3 duration.
fn parse_duration(text: &str) -> Result<Duration, String> {
    rltp_proofs::constants::parse_duration(text)
        .map(Duration::from_millis)
        .map_err(|e| e.to_string())
}

impl CarrierArgs {
    /// The first server's `host:port` (for messages).
    pub fn first_server(&self) -> &str {
        self.server
            .first()
            .map_or(rltp_server::config::DEFAULT_LISTEN, String::as_str)
    }

    /// The connect options of every server these arguments name, in order.
    ///
    /// # Errors
    /// [`Failure::usage`] when neither a pin nor a CA file is given, or
    /// the pins do not pair with the servers.
    pub fn all_options(&self) -> Result<Vec<ConnectOptions>, Failure> {
        if self.server.is_empty() {
            return Err(Failure::usage("give --server host:port"));
        }
        if self.pin.len() > 1 && self.pin.len() != self.server.len() {
            return Err(Failure::usage(format!(
                "{} --pin for {} --server: give one pin for all, or one per server",
                self.pin.len(),
                self.server.len()
            )));
        }
        self.server
            .iter()
            .enumerate()
            .map(|(i, server)| {
                let trust = match (self.pin.get(i).or(self.pin.first()), &self.ca_file) {
                    (Some(pin), _) => ServerTrust::Pin(*pin),
                    (None, Some(file)) => ServerTrust::CaFile(file.clone()),
                    (None, None) => return Err(Failure::usage("give --pin or --ca-file")),
                };
                let mut options = ConnectOptions::new(server.clone(), trust)
                    .with_timeout(Duration::from_secs(self.timeout))
                    .with_transport_choice(self.transport);
                if let Some(port) = self.tcp_port {
                    options = options.with_tcp_server(with_port(server, port));
                }
                if let Some(name) = &self.server_name {
                    options = options.with_server_name(name.clone());
                }
                Ok(options)
            })
            .collect()
    }

    /// The connect options of the first server.
    ///
    /// # Errors
    /// As [`CarrierArgs::all_options`].
    pub fn options(&self) -> Result<ConnectOptions, Failure> {
        self.all_options()?
            .into_iter()
            .next()
            .ok_or_else(|| Failure::usage("give --server host:port"))
    }

    /// Connects.
    ///
    /// # Errors
    /// [`Failure`] from [`CarrierArgs::options`] or the connection.
    pub async fn connect(&self) -> Result<Client, Failure> {
        rltp_client::tls::install_crypto_provider();
        let options = self.options()?;
        Client::connect(&options).await.map_err(|e| {
            Failure::transport(format!(
                "cannot reach the carrier at {}: {e}",
                self.first_server()
            ))
        })
    }

    /// A link to the carrier (connected by the first request).
    ///
    /// # Errors
    /// [`Failure`] from [`CarrierArgs::options`].
    pub fn link(&self) -> Result<Link, Failure> {
        rltp_client::tls::install_crypto_provider();
        let mut servers = self.all_options()?.into_iter();
        let first = servers
            .next()
            .ok_or_else(|| Failure::usage("give --server host:port"))?;
        Ok(Link::new(first).with_alternates(servers))
    }

    /// The schedule of one recipient request starting now: reports at the
    /// §11 floor, gives up after `--give-up-after` (default
    /// [`DEFAULT_GIVE_UP_AFTER`]).
    pub fn request_schedule(&self) -> Schedule {
        Schedule::for_at_most(
            tokio::time::Instant::now(),
            self.give_up_after.unwrap_or(DEFAULT_GIVE_UP_AFTER),
        )
    }
}

/// Reads a whole file for a command.
///
/// # Errors
/// [`Failure::usage`] naming the file.
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}
