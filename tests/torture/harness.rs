//! The torture harness: a real `rltp-carrier serve` process on loopback,
//! restartable on the same data directory, killable with SIGKILL, with its
//! RSS read from `/proc`; the client library connected to it; envelopes.

use rltp_carrier::tls::ServerTrust;
use rltp_client::{Client, ConnectOptions, RecipientKeys};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::SealedEnvelope;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_rltp-carrier");
/// The carrier identifier of every torture carrier.
pub const CARRIER: &str = "did:web:localhost";
/// Longest wait for a carrier to start or exit.
const DEADLINE: Duration = Duration::from_secs(60);

/// Milliseconds since the Unix epoch, by the wall clock.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An env knob: `name` parsed, else `default`.
pub fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A running `rltp-carrier serve` process.
pub struct Carrier {
    child: Option<Child>,
    /// `host:port`.
    pub addr: String,
    /// SPKI pin.
    pub pin: String,
    /// The carrier identifier `C` it printed (`carrier …`).
    pub carrier: String,
    logs: Arc<Mutex<Vec<String>>>,
}

/// How to start a carrier.
#[derive(Clone, Default)]
pub struct Spec {
    /// Its data directory.
    pub data_dir: PathBuf,
    /// A TOML config file.
    pub config: Option<PathBuf>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// `RUST_LOG` (default `warn`).
    pub log: Option<String>,
}

impl Spec {
    /// A carrier over `data_dir` configured by the TOML text `config`
    /// (written next to the data dir).
    pub fn new(data_dir: &Path, config: &str) -> Spec {
        let path = data_dir.with_extension("toml");
        std::fs::write(&path, config).unwrap();
        Spec {
            data_dir: data_dir.to_owned(),
            config: Some(path),
            ..Spec::default()
        }
    }
}

impl Carrier {
    /// Starts a carrier and waits for its three stdout lines.
    pub fn start(spec: &Spec) -> Carrier {
        let mut command = Command::new(BIN);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(&spec.data_dir)
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .env("RUST_LOG", spec.log.as_deref().unwrap_or("warn"))
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(config) = &spec.config {
            command.arg("--config").arg(config);
        }
        let mut child = command.spawn().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        {
            let logs = Arc::clone(&logs);
            let stderr = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    logs.lock().unwrap().push(line);
                }
            });
        }
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut carrier = Carrier {
            child: Some(child),
            addr: String::new(),
            pin: String::new(),
            carrier: String::new(),
            logs,
        };
        let deadline = Instant::now() + DEADLINE;
        let mut issuer = false;
        while !issuer {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("serve did not start; stderr: {:?}", carrier.logs()));
            match line.split_once(' ') {
                Some(("listening", v)) => carrier.addr = v.to_owned(),
                Some(("fingerprint", v)) => carrier.pin = v.to_owned(),
                Some(("carrier", v)) => carrier.carrier = v.to_owned(),
                Some(("declaration-issuer", _)) => issuer = true,
                _ => panic!("unexpected serve output {line:?}"),
            }
        }
        carrier
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Resident set size now (KiB), from `/proc/<pid>/status`.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// The stderr lines (JSON logs) so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The `fields` of every JSON log line whose message is `message`.
    pub fn log_events(&self, message: &str) -> Vec<serde_json::Value> {
        self.logs()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("fields").cloned())
            .filter(|f| f["message"] == message)
            .collect()
    }

    fn wait(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the carrier did not exit");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL, then waits until the process is gone: a crash.
    pub fn kill(mut self) {
        self.child.as_mut().unwrap().kill().unwrap();
        self.wait();
    }

    /// SIGTERM, then waits: a graceful drain. Returns the exit code.
    pub fn terminate(mut self) -> Option<i32> {
        let pid = self.pid().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        self.wait().code()
    }

    /// A client connection (answer timeout `timeout`).
    pub async fn connect(&self, timeout: Duration) -> Client {
        rltp_carrier::tls::install_crypto_provider();
        let options = ConnectOptions::new(
            self.addr.clone(),
            ServerTrust::Pin(self.pin.parse().unwrap()),
        )
        .with_timeout(timeout);
        Client::connect(&options).await.unwrap()
    }
}

impl Drop for Carrier {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The carrier identifier.
pub fn carrier_id() -> CarrierId {
    CARRIER.parse().unwrap()
}

/// A small deterministic generator (xorshift64*).
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded (never 0).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// Seeded from `RLTP_TORTURE_SEED` if set, else from the clock; the
    /// seed is printed so a failing run can be repeated.
    pub fn from_env(what: &str) -> Rng {
        let seed = knob(
            "RLTP_TORTURE_SEED",
            wall_ms() ^ u64::from(std::process::id()),
        );
        println!("{what}: seed {seed} (RLTP_TORTURE_SEED)");
        Rng::new(seed)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `range` (inclusive of both ends).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `percent` %.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// 32 random bytes.
    pub fn bytes32(&mut self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for chunk in out.chunks_mut(8) {
            chunk.copy_from_slice(&self.next().to_le_bytes());
        }
        out
    }
}

/// A shape-valid sealed envelope for `rkid` with a `ciphertext_len`-byte
/// random ciphertext (17..=65 552): the carrier is key-blind, so random
/// bytes are as good as a real seal, and every envelope is unique.
pub fn envelope(rkid: &Rkid, ciphertext_len: usize, rng: &mut Rng) -> Vec<u8> {
    let mut ciphertext = Vec::with_capacity(ciphertext_len + 32);
    while ciphertext.len() < ciphertext_len {
        ciphertext.extend_from_slice(&rng.bytes32());
    }
    ciphertext.truncate(ciphertext_len);
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&rng.bytes32()[..12]);
    SealedEnvelope {
        rkid: *rkid,
        epk: rng.bytes32(),
        nonce,
        ciphertext,
    }
    .to_bytes()
}

/// A recipient: its rkid secret, control principal and generation.
pub fn recipient(secret: [u8; 32], principal: [u8; 32], generation: u64) -> RecipientKeys {
    RecipientKeys::new(
        carrier_id(),
        ed25519_dalek::SigningKey::from_bytes(&principal),
        secret,
        generation,
    )
}

/// A free loopback TCP port (for the metrics endpoint).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every unlabelled sample of the carrier's `/metrics` at `port`, by name.
pub fn scrape(port: u16) -> std::collections::BTreeMap<String, f64> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(name, value)| Some((name.to_owned(), value.trim().parse().ok()?)))
        .collect()
}

/// The guarantee-3 work counters from `/metrics`:
/// (asymmetric operations, random draws, proof verifications).
pub fn work(port: u16) -> (u64, u64, u64) {
    let m = scrape(port);
    let get = |name: &str| {
        *m.get(name)
            .unwrap_or_else(|| panic!("no {name} in /metrics")) as u64
    };
    (
        get("rltp_carrier_asymmetric_operations_total"),
        get("rltp_carrier_random_draws_total"),
        get("rltp_carrier_proof_verifications_total"),
    )
}
