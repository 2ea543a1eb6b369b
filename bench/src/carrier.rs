//! The carrier under test: a release `rltp-carrier serve` child process on
//! loopback with a fresh data directory, and the recipients that use it.
//!
//! The configuration opens the carrier's **private** meters and limits
//! (`[limits]`, §4.4 guarantee 2) so that the benchmark measures the
//! carrier's work rather than its admission budgets. Durability is never
//! touched: every `admitted` still follows an fsync'd group commit.

use anyhow::{Context as _, bail};
use ed25519_dalek::SigningKey;
use rltp_client::tls::ServerTrust;
use rltp_client::transport::Tuning;
use rltp_client::{Client, ConnectOptions, RecipientKeys};
use rltp_proofs::encoding::sha256;
use rltp_proofs::identity::CarrierId;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The carrier identifier `C` the benchmark's carrier declares.
pub const CARRIER_ID: &str = "did:web:localhost";

/// A budget no benchmark reaches (per second and burst), for the private
/// meters.
const OPEN_METER: u32 = 1_000_000_000;

/// The benchmark's carrier configuration (TOML), for `data_dir`.
/// `max_bindings` bounds the held bindings (a private limit).
pub fn config_toml(data_dir: &Path, max_bindings: u64) -> String {
    let meter = format!("{{ per-second = {OPEN_METER}, burst = {OPEN_METER} }}");
    format!(
        r#"# carrier-bench: published constants as shipped; private limits opened.
carrier = "{CARRIER_ID}"
listen = "127.0.0.1:0"
data-dir = "{dir}"
log-format = "human"

[limits]
capacity-bytes = 4398046511104
max-bindings = {max_bindings}
max-connections = 4096
max-streams-per-connection = 1024
idle-timeout-ms = 120000

[limits.meters]
unknown-address = {meter}
held-binding = {meter}
queue = {meter}
shared-submission = {meter}
"#,
        dir = data_dir.display()
    )
}

/// A running carrier process.
#[derive(Debug)]
pub struct CarrierProc {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// The SPKI fingerprint it printed (`sha256/…`).
    pub fingerprint: String,
    /// Its data directory.
    pub data_dir: PathBuf,
    bin: PathBuf,
    config: PathBuf,
    log: PathBuf,
    log_level: String,
    /// The QUIC per-packet settings of both ends: the carrier's
    /// `[transport]` and every connection of the harness.
    transport: Tuning,
}

/// How long a start took.
#[derive(Debug, Clone, Copy)]
pub struct StartTiming {
    /// Spawn → the `listening` line, seconds.
    pub to_listening_s: f64,
    /// Spawn → the first answered request (`declaration`, fetched,
    /// verified and accepted by the client), seconds.
    pub to_first_request_s: f64,
}

impl CarrierProc {
    /// Writes the configuration into `dir` and starts a carrier whose data
    /// directory is `dir/carrier`.
    ///
    /// # Errors
    /// When it cannot be started or does not serve within 120 s.
    pub async fn start(
        bin: &Path,
        dir: &Path,
        max_bindings: u64,
        log_level: &str,
    ) -> anyhow::Result<(CarrierProc, StartTiming)> {
        CarrierProc::start_node(
            bin,
            dir,
            max_bindings,
            log_level,
            "",
            None,
            Tuning::default(),
        )
        .await
    }

    /// [`CarrierProc::start`] with `transport` as the carrier's
    /// `[transport]` and as the settings of every connection to it.
    ///
    /// # Errors
    /// As [`CarrierProc::start`].
    pub async fn start_tuned(
        bin: &Path,
        dir: &Path,
        max_bindings: u64,
        log_level: &str,
        transport: Tuning,
    ) -> anyhow::Result<(CarrierProc, StartTiming)> {
        let section = format!("\n[transport]\n{}", toml::to_string(&transport)?);
        CarrierProc::start_node(bin, dir, max_bindings, log_level, &section, None, transport).await
    }

    /// [`CarrierProc::start`] with `extra` TOML appended to the
    /// configuration (e.g. a `[store]` section) and, for a further node of
    /// a carrier on a shared database, the declaration key of its first
    /// node copied into the data directory first.
    ///
    /// # Errors
    /// As [`CarrierProc::start`]; the key cannot be copied.
    pub async fn start_node(
        bin: &Path,
        dir: &Path,
        max_bindings: u64,
        log_level: &str,
        extra: &str,
        key_of: Option<&CarrierProc>,
        transport: Tuning,
    ) -> anyhow::Result<(CarrierProc, StartTiming)> {
        let data_dir = dir.join("carrier");
        let config = dir.join("carrier.toml");
        std::fs::write(
            &config,
            format!("{}{extra}", config_toml(&data_dir, max_bindings)),
        )?;
        if let Some(first) = key_of {
            std::fs::create_dir_all(&data_dir)?;
            std::fs::copy(
                first.data_dir.join("declaration.key"),
                data_dir.join("declaration.key"),
            )
            .context("copying the declaration key to a further node")?;
        }
        CarrierProc::spawn(
            bin.to_path_buf(),
            config,
            data_dir,
            dir.join("carrier.log"),
            log_level.to_owned(),
            transport,
        )
        .await
    }

    async fn spawn(
        bin: PathBuf,
        config: PathBuf,
        data_dir: PathBuf,
        log: PathBuf,
        log_level: String,
        transport: Tuning,
    ) -> anyhow::Result<(CarrierProc, StartTiming)> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let started = Instant::now();
        let mut child = Command::new(&bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", &log_level)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("carrier stdout")?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Keep draining so the carrier never blocks on stdout.
                    continue;
                }
            }
        });
        let wait = tokio::task::spawn_blocking(move || {
            let mut addr = None;
            let mut fingerprint = None;
            let mut listening_at = None;
            let deadline = Instant::now() + Duration::from_secs(120);
            while addr.is_none() || fingerprint.is_none() {
                let left = deadline.saturating_duration_since(Instant::now());
                let line = rx.recv_timeout(left).ok()?;
                if let Some(a) = line.strip_prefix("listening ") {
                    addr = Some(a.trim().to_owned());
                    listening_at = Some(Instant::now());
                } else if let Some(f) = line.strip_prefix("fingerprint ") {
                    fingerprint = Some(f.trim().to_owned());
                }
            }
            Some((addr?, fingerprint?, listening_at?))
        })
        .await?;
        let Some((addr, fingerprint, listening_at)) = wait else {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the carrier did not print its address and fingerprint; see {}",
                log.display()
            );
        };
        let proc = CarrierProc {
            child,
            addr,
            fingerprint,
            data_dir,
            bin,
            config,
            log,
            log_level,
            transport,
        };
        let client = proc.connect().await?;
        client
            .declaration()
            .await
            .context("first declaration request")?;
        let timing = StartTiming {
            to_listening_s: listening_at.duration_since(started).as_secs_f64(),
            to_first_request_s: started.elapsed().as_secs_f64(),
        };
        close(client);
        Ok((proc, timing))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new QUIC connection pinned to the carrier's certificate.
    ///
    /// # Errors
    /// Connection failures.
    pub async fn connect(&self) -> anyhow::Result<Client> {
        let pin = self
            .fingerprint
            .parse()
            .map_err(|e| anyhow::anyhow!("fingerprint {}: {e}", self.fingerprint))?;
        let options = ConnectOptions::new(self.addr.clone(), ServerTrust::Pin(pin))
            .with_timeout(Duration::from_secs(60))
            .with_transport(self.transport)
            // The cells measure QUIC (a TLS/TCP cell is still to come).
            .with_transport_choice(rltp_client::TransportChoice::Quic);
        Ok(Client::connect(&options).await?)
    }

    /// `n` connections.
    ///
    /// # Errors
    /// Connection failures.
    pub async fn connect_many(&self, n: usize) -> anyhow::Result<Vec<Client>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.connect().await?);
        }
        Ok(out)
    }

    /// Stops the carrier gracefully (SIGTERM, then SIGKILL after 60 s).
    ///
    /// # Errors
    /// When it cannot be signalled.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let pid = self.pid();
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()?;
        if !status.success() {
            bail!("kill -TERM {pid} failed");
        }
        let waited = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                match self.child.try_wait() {
                    Ok(Some(_)) | Err(_) => return None,
                    Ok(None) if Instant::now() >= deadline => return Some(self),
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })
        .await?;
        if let Some(mut stuck) = waited {
            let _ = stuck.child.kill();
            let _ = stuck.child.wait();
            bail!("the carrier did not stop within 60 s of SIGTERM");
        }
        Ok(())
    }

    /// Stops the carrier and starts it again on the same data directory.
    ///
    /// # Errors
    /// As [`CarrierProc::stop`] and [`CarrierProc::start`].
    pub async fn restart(self) -> anyhow::Result<(CarrierProc, StartTiming)> {
        let again = self.again();
        self.stop().await?;
        again.spawn().await
    }

    /// What it takes to start this carrier again on its data directory.
    fn again(&self) -> Again {
        Again {
            bin: self.bin.clone(),
            config: self.config.clone(),
            data_dir: self.data_dir.clone(),
            log: self.log.clone(),
            level: self.log_level.clone(),
            transport: self.transport,
        }
    }

    /// Kills the carrier (SIGKILL: no drain, no snapshot at close) and
    /// starts it again on the same data directory: the crash restart.
    ///
    /// # Errors
    /// As [`CarrierProc::start`].
    pub async fn kill_and_restart(mut self) -> anyhow::Result<(CarrierProc, StartTiming)> {
        let again = self.again();
        // Already dead (killed by pid) or not: killed and reaped either way.
        let _ = self.child.kill();
        self.child.wait()?;
        again.spawn().await
    }

    /// The store directory.
    pub fn store_dir(&self) -> PathBuf {
        self.data_dir.join("store")
    }
}

impl Drop for CarrierProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A carrier to start again ([`CarrierProc::restart`],
/// [`CarrierProc::kill_and_restart`]).
struct Again {
    bin: PathBuf,
    config: PathBuf,
    data_dir: PathBuf,
    log: PathBuf,
    level: String,
    transport: Tuning,
}

impl Again {
    async fn spawn(self) -> anyhow::Result<(CarrierProc, StartTiming)> {
        CarrierProc::spawn(
            self.bin,
            self.config,
            self.data_dir,
            self.log,
            self.level,
            self.transport,
        )
        .await
    }
}

/// Closes a connection without waiting for the peer.
pub fn close(client: Client) {
    client.close_now();
}

/// The benchmark's recipients: keys derived from a per-run seed and an
/// index, so any of them can be re-made without keeping secrets around.
#[derive(Debug, Clone, Copy)]
pub struct Recipients {
    seed: [u8; 32],
}

impl Recipients {
    /// A fresh family of recipients.
    pub fn fresh() -> Recipients {
        let mut seed = [0u8; 32];
        rand::Rng::fill_bytes(&mut rand::rng(), &mut seed);
        Recipients { seed }
    }

    /// The keys of recipient `i`: its own control principal and its own
    /// rkid, generation 1.
    ///
    /// # Errors
    /// Never in practice (the carrier id is a constant).
    pub fn keys(&self, i: u64) -> anyhow::Result<RecipientKeys> {
        let derive = |label: &[u8]| {
            let mut input = Vec::with_capacity(64);
            input.extend_from_slice(&self.seed);
            input.extend_from_slice(label);
            input.extend_from_slice(&i.to_be_bytes());
            sha256(&input)
        };
        let carrier = CarrierId::from_bytes(CARRIER_ID.as_bytes())
            .map_err(|e| anyhow::anyhow!("carrier id: {e}"))?;
        Ok(RecipientKeys::new(
            carrier,
            SigningKey::from_bytes(&derive(b"principal")),
            derive(b"rkid"),
            1,
        ))
    }
}
