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

// A test reads top to bottom: long test functions are legitimate here (issue 22 bounds production code).
#![allow(clippy::too_many_lines)]
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod catalogue;
mod cli_flow;
mod conformance;
mod damage;
mod dashboards;
mod exits;
mod json_output;
mod nodes;
mod nodes_clock;
mod operator;
mod party;
mod recipient;
mod sender;
mod shutdown;
mod store;
mod tarball;
mod tcp;
mod transport;
mod wire;

#[path = "../support/carrier.rs"]
mod support;

pub use json_output::{objects, only_object};
pub use support::*;

// The test modules take these through `use super::*`.
#[allow(unused_imports)]
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
#[allow(unused_imports)]
use std::process::{Child, Command, ExitStatus, Stdio};
#[allow(unused_imports)]
use std::sync::{Arc, Mutex, mpsc};
#[allow(unused_imports)]
use std::time::{Duration, Instant};

/// The document digest of `seal.json`'s sample document.
pub const SEAL_SAMPLE_DIGEST: &str = "uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ";

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
        let lines = lines_of(child.stdout.take().unwrap());
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
        send_signal(self.child.id(), "INT");
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
