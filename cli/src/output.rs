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

    /// Prints a result given as `name value` lines (`backup`, `restore`,
    /// `admin`, `keys`, `migrate`): the lines as they are, or with `--json`
    /// one object `{"event": event, …, "elapsedMs"}` holding one member
    /// per line, named by [`json_name`] and valued by [`json_value`]. A
    /// line without a value (`integrity ok` has one; a bare word has none)
    /// is `true`.
    pub fn record(&self, event: &str, lines: &str) {
        if self.quiet {
            return;
        }
        if !self.json {
            self.print(lines.trim_end_matches('\n'));
            return;
        }
        let fields: Vec<(String, Value)> = lines
            .lines()
            .filter(|l| !l.is_empty())
            .map(|line| match line.split_once(' ') {
                Some((name, value)) => (json_name(name), json_value(value)),
                None => (json_name(line), Value::Bool(true)),
            })
            .collect();
        let borrowed: Vec<(&str, Value)> = fields
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone()))
            .collect();
        self.emit(event, &borrowed, String::new);
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
            RetryEvent::Connected { server, binding } => self.connected(server, *binding),
        }
    }

    /// The binding a connection is on (`PROTOCOL.md` §5b): `connected
    /// SERVER quic|tcp`.
    pub fn connected(&self, server: &str, binding: rltp_client::Binding) {
        self.emit(
            "connected",
            &[
                ("server", server.into()),
                ("transport", binding.as_str().into()),
            ],
            || format!("connected {server} {binding}"),
        );
    }

    /// A pre-transport report: `status awaiting-transport(…)`.
    pub fn report(&self, reason: AwaitingReason) {
        self.emit("status", &[("status", reason.to_string().into())], || {
            format!("status {reason}")
        });
    }
}

/// The JSON member name of a `name value` line's name: kebab-case to
/// camelCase, a trailing `:` dropped (`deposit-bytes` → `depositBytes`,
/// `due-24h-give-ups` → `due24hGiveUps`, `hint:` → `hint`).
pub fn json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.trim_end_matches(':').chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The JSON value of a `name value` line's value: a canonical decimal
/// integer up to 2^53 − 1 (exact in every JSON reader) is a number, `none`
/// is `null`, `true` and `false` are booleans, anything else the text
/// itself.
pub fn json_value(text: &str) -> Value {
    const EXACT: u64 = (1 << 53) - 1;
    match text.parse::<u64>() {
        Ok(v) if v <= EXACT && v.to_string() == text => n(v),
        _ if text == "none" => Value::Null,
        _ if text == "true" || text == "false" => Value::Bool(text == "true"),
        _ => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_become_named_members() {
        assert_eq!(json_name("deposit-bytes"), "depositBytes");
        assert_eq!(json_name("due-24h-give-ups"), "due24hGiveUps");
        assert_eq!(json_name("hint:"), "hint");
        assert_eq!(json_name("rkid"), "rkid");
        assert_eq!(json_value("42"), n(42));
        assert_eq!(json_value("0"), n(0));
        assert_eq!(json_value("007"), Value::from("007"));
        assert_eq!(json_value("none"), Value::Null);
        assert_eq!(json_value("true"), Value::Bool(true));
        assert_eq!(json_value("at-least 5"), Value::from("at-least 5"));
        assert_eq!(
            json_value("99999999999999999999"),
            Value::from("99999999999999999999")
        );
    }
}
