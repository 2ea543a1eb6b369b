//! The one harness that spawns the real `rltp-carrier` binary, shared by
//! the end-to-end tests (`tests/e2e`) and the torture tests
//! (`tests/torture`), which include it with `#[path]`: a `serve` process
//! on loopback (restartable on its data dir, killable with SIGKILL, its
//! RSS read from `/proc`, its JSON logs kept), the client library
//! connected to it, and bounded runs of the CLI subcommands.
//!
//! Both are test targets of the `rltp-carrier` package, so cargo builds
//! the binary in the same invocation and names it in
//! `CARGO_BIN_EXE_rltp-carrier`.

#![allow(dead_code, clippy::unwrap_used, clippy::panic, missing_docs)]

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

/// Sends the signal `name` (`TERM`, `INT`, `HUP`, …) to process `pid`.
pub fn send_signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{name} {pid}");
}

/// The lines of a child's `stdout`, as they come (read on a thread).
pub fn lines_of(stdout: std::process::ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A free loopback TCP port (for the metrics endpoint).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Longest wait for a process to start or finish.
pub const PROCESS_DEADLINE: Duration = Duration::from_secs(60);

/// A running `rltp-carrier serve` process.
pub struct Carrier {
    child: Option<Child>,
    /// `host:port` it listens on.
    pub addr: String,
    /// `host:port` of its TLS/TCP listener (`PROTOCOL.md` §5b), or `off`.
    pub tcp_addr: String,
    /// Its SPKI fingerprint (`sha256/…`).
    pub pin: String,
    /// The carrier identifier `C` it printed (`carrier …`).
    pub carrier: String,
    /// Its declaration key (`did:key:…`).
    pub issuer: String,
    logs: Arc<Mutex<Vec<String>>>,
}

/// How to start a carrier: data dir, config file, listen address, extra
/// environment (the test clock hook), log filter.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--listen` (empty: `127.0.0.1:0`).
    pub listen: String,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// `RUST_LOG` (`None`: `warn`, which the floods need: every log line
    /// is kept in memory).
    pub log: Option<String>,
}

/// The log filter of the end-to-end tests: per-deposit lines (`submit`)
/// are `debug`, and the tests read them.
pub const DEBUG_LOG: &str = "info,rltp_server=debug";

impl Spec {
    /// A carrier over `data_dir` configured by the TOML text `config`
    /// (written next to the data dir), on port 0, logging at `warn`.
    pub fn new(data_dir: &Path, config: &str) -> Spec {
        let path = data_dir.with_extension("toml");
        std::fs::write(&path, config).unwrap();
        Spec {
            data_dir: data_dir.to_owned(),
            config: Some(path),
            ..Spec::default()
        }
    }

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
            log: Some(DEBUG_LOG.into()),
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

/// A loopback port that was free a moment ago for UDP and for TCP (a
/// carrier's TLS/TCP listener takes the QUIC port's number: §5b).
pub fn free_udp_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl Carrier {
    /// Starts a carrier over `data_dir`, optionally with a config file.
    pub fn start(data_dir: &Path, config: Option<&Path>) -> Carrier {
        Carrier::start_with(&Spec {
            data_dir: data_dir.to_owned(),
            config: config.map(Path::to_owned),
            listen: "127.0.0.1:0".into(),
            env: Vec::new(),
            log: Some(DEBUG_LOG.into()),
        })
    }

    /// Starts a carrier as `spec` says.
    pub fn start_with(spec: &Spec) -> Carrier {
        let listen = if spec.listen.is_empty() {
            "127.0.0.1:0"
        } else {
            spec.listen.as_str()
        };
        let mut command = Command::new(BIN);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(&spec.data_dir)
            .args(["--listen", listen, "--log-format", "json"])
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
        let rx = lines_of(child.stdout.take().unwrap());
        let mut carrier = Carrier {
            child: Some(child),
            addr: String::new(),
            tcp_addr: String::new(),
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
                Some(("tcp-listening", v)) => carrier.tcp_addr = v.to_owned(),
                Some(("fingerprint", v)) => carrier.pin = v.to_owned(),
                Some(("carrier", v)) => carrier.carrier = v.to_owned(),
                Some(("declaration-issuer", v)) => carrier.issuer = v.to_owned(),
                _ => panic!("unexpected serve output {line:?}"),
            }
        }
        assert!(carrier.addr.starts_with("127.0.0.1:"), "{}", carrier.addr);
        if !listen.ends_with(":0") {
            assert_eq!(carrier.addr, listen);
        }
        assert!(carrier.pin.starts_with("sha256/"), "{}", carrier.pin);
        // `C` is on stdout before the issuer (PROTOCOL.md §5): a client
        // author needs it to derive principals.
        assert!(!carrier.carrier.is_empty(), "serve printed no carrier line");
        carrier
    }

    /// `--server ADDR --pin FP`, and `--tcp-port P` when the TLS/TCP
    /// listener did not get the QUIC port's number (port 0 takes any).
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--server".into(),
            self.addr.clone(),
            "--pin".into(),
            self.pin.clone(),
        ];
        let port = |addr: &str| addr.rsplit_once(':').map(|(_, p)| p.to_owned());
        if self.tcp_addr != "off" && port(&self.tcp_addr) != port(&self.addr) {
            args.push("--tcp-port".into());
            args.extend(port(&self.tcp_addr));
        }
        args
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

    /// The client library's connection to it (answer timeout 30 s).
    pub async fn connect(&self) -> rltp_client::Client {
        self.connect_within(Duration::from_secs(30)).await
    }

    /// The client library's connection to it (answer timeout `timeout`).
    pub async fn connect_within(&self, timeout: Duration) -> rltp_client::Client {
        rltp_client::tls::install_crypto_provider();
        let options = rltp_client::ConnectOptions::new(
            self.addr.clone(),
            rltp_client::tls::ServerTrust::Pin(self.pin.parse().unwrap()),
        )
        .with_timeout(timeout)
        // The raw tests reach quinn's connection: QUIC only.
        .with_transport_choice(rltp_client::TransportChoice::Quic);
        rltp_client::Client::connect(&options).await.unwrap()
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

    /// The `fields` of every JSON log line with `message`, now.
    pub fn logged(&self, message: &str) -> Vec<serde_json::Value> {
        self.logs()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .collect()
    }

    /// Sends the signal `name` (`HUP`, `USR2`, …) to the process.
    pub fn signal(&self, name: &str) {
        send_signal(self.pid(), name);
    }

    /// Waits (bounded) for the process to exit by itself.
    pub fn wait_exit(mut self) -> ExitStatus {
        self.wait()
    }

    /// SIGTERM, then waits: a graceful drain.
    pub fn terminate(mut self) -> ExitStatus {
        send_signal(self.child.as_ref().unwrap().id(), "TERM");
        self.wait()
    }

    /// SIGKILL, then waits: a crash.
    pub fn crash(mut self) {
        self.child.as_mut().unwrap().kill().unwrap();
        self.wait();
    }

    /// SIGKILL, then waits until the process is gone ([`Carrier::crash`]).
    pub fn kill(self) {
        self.crash();
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
    cli_env(dir, args, &[])
}

/// [`cli`] with extra environment variables (the test clock hook).
pub fn cli_env<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S], env: &[(String, String)]) -> Run {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("RLTP_CARRIER_SERVER")
        .env_remove("RLTP_CARRIER_PIN")
        .envs(env.iter().map(|(k, v)| (k, v)))
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

/// `GET path` from the operator endpoint on loopback `port`: the status
/// code and the body.
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (code, body)
}
