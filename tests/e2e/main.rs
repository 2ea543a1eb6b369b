//! End-to-end tests: the real `rltp-carrier` binary on real loopback QUIC.
//!
//! Every test starts its own `rltp-carrier serve` process on
//! `127.0.0.1:0` over a temporary data dir, reads the bound address, the
//! SPKI fingerprint and the declaration issuer from its stdout, and drives
//! it either through the CLI subcommands (separate processes) or, for raw
//! frames and hand-built proofs, through the client library over QUIC.
//!
//! This target is compiled as the `e2e` test of the `rltp-carrier` package
//! (`carrier/Cargo.toml`, `[[test]] path = "../tests/e2e/main.rs"`), so
//! cargo builds the binary in the same invocation, with the same features,
//! and hands its path in `CARGO_BIN_EXE_rltp-carrier`.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod cli_flow;
mod conformance;
mod damage;
mod exits;
mod recipient;
mod sender;
mod shutdown;
mod transport;
mod wire;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_rltp-carrier");

/// The carrier identifier of a default-configured carrier.
pub const CARRIER: &str = "did:web:localhost";

/// The document digest of `seal.json`'s sample document.
pub const SEAL_SAMPLE_DIGEST: &str = "uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ";

/// Longest wait for a process to start or finish.
const PROCESS_DEADLINE: Duration = Duration::from_secs(60);

/// A running `rltp-carrier serve` process.
pub struct Carrier {
    child: Option<Child>,
    /// `host:port` it listens on.
    pub addr: String,
    /// Its SPKI fingerprint (`sha256/…`).
    pub pin: String,
    /// The carrier identifier `C` it printed (`carrier …`).
    pub carrier: String,
    /// Its declaration key (`did:key:…`).
    pub issuer: String,
    logs: Arc<Mutex<Vec<String>>>,
}

/// How to start a carrier: data dir, config file, listen address, extra
/// environment (the test clock hook).
#[derive(Debug, Clone)]
pub struct Spec {
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--listen` (default `127.0.0.1:0`).
    pub listen: String,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
}

impl Spec {
    /// A carrier over `data_dir` with the TOML `config` (written beside
    /// it), on a fixed free loopback port (so it can restart on it).
    pub fn fixed(data_dir: &Path, config: &str) -> Spec {
        let path = data_dir.with_extension("toml");
        std::fs::write(&path, config).unwrap();
        Spec {
            data_dir: data_dir.to_owned(),
            config: Some(path),
            listen: format!("127.0.0.1:{}", free_udp_port()),
            env: Vec::new(),
        }
    }

    /// The same, with `RLTP_TEST_CLOCK_FILE` = `file`.
    pub fn with_clock(mut self, file: &Path) -> Spec {
        self.env.push((
            "RLTP_TEST_CLOCK_FILE".into(),
            file.to_str().unwrap().to_owned(),
        ));
        self
    }
}

/// A loopback UDP port that was free a moment ago.
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Carrier {
    /// Starts a carrier over `data_dir`, optionally with a config file.
    pub fn start(data_dir: &Path, config: Option<&Path>) -> Carrier {
        Carrier::start_with(&Spec {
            data_dir: data_dir.to_owned(),
            config: config.map(Path::to_owned),
            listen: "127.0.0.1:0".into(),
            env: Vec::new(),
        })
    }

    /// Starts a carrier as `spec` says.
    pub fn start_with(spec: &Spec) -> Carrier {
        let mut command = Command::new(BIN);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(&spec.data_dir)
            .args(["--listen", &spec.listen, "--log-format", "json"])
            // Per-deposit lines (`submit`) are `debug`; the tests read them.
            .env("RUST_LOG", "info,rltp_carrier=debug")
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
            issuer: String::new(),
            logs,
        };
        let deadline = Instant::now() + PROCESS_DEADLINE;
        while carrier.issuer.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "serve did not print its address; stderr: {:?}",
                    carrier.logs()
                )
            });
            match line.split_once(' ') {
                Some(("listening", v)) => carrier.addr = v.to_owned(),
                Some(("fingerprint", v)) => carrier.pin = v.to_owned(),
                Some(("carrier", v)) => carrier.carrier = v.to_owned(),
                Some(("declaration-issuer", v)) => carrier.issuer = v.to_owned(),
                _ => panic!("unexpected serve output {line:?}"),
            }
        }
        assert!(carrier.addr.starts_with("127.0.0.1:"), "{}", carrier.addr);
        if !spec.listen.ends_with(":0") {
            assert_eq!(carrier.addr, spec.listen);
        }
        assert!(carrier.pin.starts_with("sha256/"), "{}", carrier.pin);
        // `C` is on stdout before the issuer (PROTOCOL.md §5): a client
        // author needs it to derive principals.
        assert!(!carrier.carrier.is_empty(), "serve printed no carrier line");
        carrier
    }

    /// `--server ADDR --pin FP`.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--server".into(),
            self.addr.clone(),
            "--pin".into(),
            self.pin.clone(),
        ]
    }

    /// The log lines as they come, also after the process is gone.
    pub fn log_handle(&self) -> Arc<Mutex<Vec<String>>> {
        Arc::clone(&self.logs)
    }

    /// The log lines (JSON) written so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The `fields` of every JSON log line whose message is `message`,
    /// waiting up to 5 s for at least `count` of them.
    pub fn log_events(&self, message: &str, count: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let events: Vec<serde_json::Value> = self
                .logs()
                .iter()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|v| v.get("fields").cloned())
                .filter(|f| f["message"] == message)
                .collect();
            if events.len() >= count || Instant::now() > deadline {
                return events;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait(&mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + PROCESS_DEADLINE;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the carrier did not exit");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The client library's connection to it.
    pub async fn connect(&self) -> rltp_client::Client {
        rltp_carrier::tls::install_crypto_provider();
        let options = rltp_client::ConnectOptions::new(
            self.addr.clone(),
            rltp_carrier::tls::ServerTrust::Pin(self.pin.parse().unwrap()),
        )
        .with_timeout(Duration::from_secs(30));
        rltp_client::Client::connect(&options).await.unwrap()
    }

    /// The `fields` of every JSON log line with `message`, now.
    pub fn logged(&self, message: &str) -> Vec<serde_json::Value> {
        self.logs()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .collect()
    }

    /// SIGTERM, then waits: a graceful drain.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        self.wait()
    }

    /// SIGKILL, then waits: a crash.
    pub fn crash(mut self) {
        self.child.as_mut().unwrap().kill().unwrap();
        self.wait();
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

/// A finished CLI run.
#[derive(Debug)]
pub struct Run {
    /// The exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// The value of the first stdout line `KEY VALUE`.
    pub fn value(&self, key: &str) -> &str {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {key:?} line in {self:#?}"))
    }

    /// Every stdout line starting with `prefix`.
    pub fn lines(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }

    /// Asserts the exit code, showing the output otherwise.
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "{self:#?}");
        self
    }
}

/// Runs `rltp-carrier ARGS…` in `dir` and waits (bounded).
pub fn cli<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S]) -> Run {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("RLTP_CARRIER_SERVER")
        .env_remove("RLTP_CARRIER_PIN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + PROCESS_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "rltp-carrier {:?} did not finish",
                args.iter()
                    .map(|a| a.as_ref().to_os_string())
                    .collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// `cli` with the carrier's `--server`/`--pin` appended.
pub fn cli_to(dir: &Path, carrier: &Carrier, args: &[&str]) -> Run {
    let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    all.extend(carrier.args());
    cli(dir, &all)
}

/// A fresh key file `name` in `dir` for the default carrier; returns its
/// path and rkid.
pub fn keys_new(dir: &Path, name: &str) -> (PathBuf, String) {
    let run = cli(dir, &["keys", "new", "--carrier", CARRIER, "--out", name]).expect(0);
    (dir.join(name), run.value("rkid").to_owned())
}

/// Writes a JSON document and returns its path.
pub fn document(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The document digest of `text` (JCS, sha2-256 multihash, `u`).
pub fn digest_of(text: &str) -> String {
    let value = rltp_proofs::json::parse(text.as_bytes()).unwrap();
    rltp_proofs::encoding::document_digest(&value).unwrap()
}

/// A long-running CLI process (`collect --watch`) and its stdout lines.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    /// Starts `rltp-carrier ARGS…` in `dir` with the carrier's address.
    pub fn start(dir: &Path, carrier: &Carrier, args: &[&str]) -> Running {
        Running::start_env(dir, &carrier.args(), args, &[])
    }

    /// Starts `rltp-carrier ARGS… CARRIER_ARGS…` in `dir` with `env`.
    pub fn start_env(
        dir: &Path,
        carrier_args: &[String],
        args: &[&str],
        env: &[(String, String)],
    ) -> Running {
        let mut child = Command::new(BIN)
            .args(args)
            .args(carrier_args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// The next stdout line starting with `prefix` (others are skipped),
    /// within 20 s.
    pub fn next(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no line starting with {prefix:?}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// The next JSON line whose `event` is `event` (others are skipped),
    /// within 20 s.
    pub fn next_event(&self, event: &str) -> serde_json::Value {
        self.next_event_of(&[event])
    }

    /// The next JSON line whose `event` is `event`, within `within`.
    pub fn next_event_within(&self, event: &str, within: Duration) -> serde_json::Value {
        self.next_event_of_within(&[event], within)
    }

    /// The next JSON line whose `event` is one of `events`, within 20 s.
    pub fn next_event_of(&self, events: &[&str]) -> serde_json::Value {
        self.next_event_of_within(events, Duration::from_secs(20))
    }

    /// The next JSON line whose `event` is one of `events`, within `within`.
    pub fn next_event_of_within(&self, events: &[&str], within: Duration) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {events:?} event"));
            let value: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            if events.iter().any(|e| value["event"] == *e) {
                return value;
            }
        }
    }

    /// SIGINT, then the exit code (bounded wait).
    pub fn interrupt(self) -> Option<i32> {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
        self.wait()
    }

    /// Waits for the exit code (bounded wait).
    pub fn wait(mut self) -> Option<i32> {
        let deadline = Instant::now() + PROCESS_DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the process did not exit");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
