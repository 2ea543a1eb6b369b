//! What the client commands print, as each step happens: `name value`
//! progress lines, or with `--json` one JSON object per line (JCS), each
//! carrying `event` and `elapsedMs` — milliseconds since the command
//! started, on the monotonic clock — so a script (or a test) can check
//! when each report came without a clock of its own (`README.md`,
//! `PROTOCOL.md` §10).
//!
//! Standard output is line-buffered by the Rust runtime, so a line is out
//! before the step it announces begins: a killed command leaves a trace of
//! everything it had started.

use rltp_client::{AwaitingReason, RetryEvent};
use rltp_proofs::json::{Number, Object, Value};
use std::time::Duration;
use tokio::time::Instant;

/// The printer of one command run.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    command: &'static str,
    json: bool,
    quiet: bool,
    stderr: bool,
    started: Instant,
}

/// A JSON number from a `u64`.
pub fn n(v: u64) -> Value {
    Number::from_u64(v).into()
}

/// Milliseconds of `d`, saturating.
pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Output {
    /// A printer for `command`, started at `started`.
    pub fn new(command: &'static str, json: bool, started: Instant) -> Output {
        Output {
            command,
            json,
            quiet: false,
            stderr: false,
            started,
        }
    }

    /// The same printer writing its progress lines to standard error: for
    /// a command whose standard output is a document (`declaration
    /// --json` prints the signed declaration and nothing else there).
    pub fn on_stderr(self) -> Output {
        Output {
            stderr: true,
            ..self
        }
    }

    fn print(&self, line: &str) {
        if self.stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    /// A printer that prints nothing (the in-process demo drives the
    /// commands' code and prints its own steps).
    pub fn quiet(command: &'static str) -> Output {
        Output {
            quiet: true,
            ..Output::new(command, false, Instant::now())
        }
    }

    /// Whether it prints JSON lines.
    pub fn json(&self) -> bool {
        self.json
    }

    /// When the command started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Prints one event: `{"event": event, fields…, "elapsedMs"}` or the
    /// `human` line(s).
    pub fn emit(&self, event: &str, fields: &[(&str, Value)], human: impl FnOnce() -> String) {
        if self.quiet {
            return;
        }
        if self.json {
            let mut object = Object::new();
            object.insert("event", event);
            for (name, value) in fields {
                object.insert(*name, value.clone());
            }
            object.insert("elapsedMs", n(ms(self.started.elapsed())));
            match rltp_proofs::jcs::canonicalize_string(&Value::Object(object)) {
                Ok(line) => self.print(&line),
                Err(e) => eprintln!("rltp-carrier {}: cannot print an event: {e}", self.command),
            }
        } else {
            self.print(&human());
        }
    }

    /// Prints a retry event of a recipient operation (`what`: `collect`,
    /// `conclude`, `register`, …): `attempt`, `verdict` (a retriable
    /// refusal), `transport-failure`, `status` (a report), `backoff`.
    pub fn retry<R: std::fmt::Display>(&self, what: &str, event: &RetryEvent<R>) {
        match event {
            RetryEvent::Attempt { number } => self.emit(
                "attempt",
                &[("op", what.into()), ("number", n(u64::from(*number)))],
                || format!("attempt {what} {number}"),
            ),
            RetryEvent::Declared(policy) => self.emit(
                "policy",
                &[
                    ("source", "declared".into()),
                    ("statusHorizonMs", n(ms(policy.status_horizon))),
                    ("giveUpHorizonMs", n(ms(policy.give_up_horizon))),
                ],
                || {
                    format!(
                        "policy declared status-horizon {} ms give-up-horizon {} ms",
                        ms(policy.status_horizon),
                        ms(policy.give_up_horizon)
                    )
                },
            ),
            RetryEvent::Refused(verdict) => self.emit(
                "verdict",
                &[
                    ("op", what.into()),
                    ("verdict", verdict.to_string().into()),
                    ("retriable", Value::Bool(true)),
                ],
                || format!("verdict {what} {verdict} retriable"),
            ),
            RetryEvent::Failed(detail) => self.emit(
                "transport-failure",
                &[("op", what.into()), ("detail", detail.clone().into())],
                || format!("transport-failure {what} {detail}"),
            ),
            RetryEvent::Report(reason) => self.report(*reason),
            RetryEvent::Moved(server) => self.emit(
                "moved",
                &[("op", what.into()), ("server", server.clone().into())],
                || format!("moved {what} {server}"),
            ),
            RetryEvent::Backoff(d) => self.emit("backoff", &[("ms", n(ms(*d)))], || {
                format!("backoff {} ms", ms(*d))
            }),
        }
    }

    /// A pre-transport report: `status awaiting-transport(…)`.
    pub fn report(&self, reason: AwaitingReason) {
        self.emit("status", &[("status", reason.to_string().into())], || {
            format!("status {reason}")
        });
    }
}
