//! # rltp-conformance
//!
//! A black-box conformance runner: drives any carrier that speaks the
//! wire profile of `PROTOCOL.md` (ours or another implementation) through
//! every rule of the Delivery Contract that is observable from the wire,
//! and reports one line per contract section: `pass`, `fail`, or
//! `not-observable` (a rule that needs days of horizons, a flood, or the
//! carrier's own counters).
//!
//! It is a client only: it holds fresh random keys, registers a handful of
//! fresh `rkid`s, submits small envelopes to them, collects and concludes
//! what it submitted. It never touches another principal's queue. What it
//! leaves behind — a few bindings with no deposits — winds up by the
//! carrier's own `orphan-horizon`. Run it against a test carrier, not one
//! that serves people.
//!
//! Every answer is read with the strict parsers of [`rltp_wire`], so a
//! verdict outside the closed sets, a `retriable` flag that contradicts
//! its verdict or a deposit id that is not the digest of its bytes fails
//! the check that received it.
//!
//! Expected values come from the contract (`rltp-delivery@0.80`) and the
//! profile's own decisions in `PROTOCOL.md`; each check names its rule.

mod checks;
mod probe;

use rltp_client::ConnectOptions;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::DidKey;
use std::fmt;
use std::time::Duration;

/// What to check and how to reach it.
#[derive(Debug, Clone)]
pub struct Target {
    /// How to connect (address, trust, timeout).
    pub options: ConnectOptions,
    /// The carrier identifier `C` its proofs must name.
    pub carrier: CarrierId,
    /// The declaration key bound to `C` by configuration, when known.
    pub issuer: Option<DidKey>,
    /// Longest the runner may wait for a time-bound rule (a challenge's
    /// expiry); a rule that would need longer is `not-observable`.
    pub patience: Duration,
}

/// The contract sections the runner reports on, in report order, with
/// what each covers. One home for the list: the checks name these keys,
/// and a check naming another key is a bug the unit tests catch.
pub const SECTIONS: [(&str, &str); 17] = [
    (
        "§4.4 g1",
        "the declaration: signed by its issuer, the seven constants in their §11 domains",
    ),
    (
        "§4.4 g2",
        "refusals from the closed family, retriable exactly as marked; s-order precedence",
    ),
    (
        "§4.4 g3",
        "no asymmetric work before the admission decision",
    ),
    (
        "§4.4 g4",
        "unknown-address traffic cannot starve a held binding",
    ),
    (
        "§4.4 g5",
        "a queue below its floor is beyond other queues' reach",
    ),
    (
        "§5a.3 challenge",
        "challenges: sealed address half, single use, consumed before verification, lifetime",
    ),
    (
        "§5a.3 r1",
        "syntax and canonical encodings (carrier-proof.json cases on the wire): refused(malformed)",
    ),
    (
        "§5a.3 r3",
        "both possession proofs: refused(possession-failed)",
    ),
    (
        "§5a.3 r5",
        "the binding state table: registered, idempotent, rebound, stale generation",
    ),
    (
        "§5a.3 session",
        "one principal per authorization session; no queue under another principal",
    ),
    ("§5a.5 s1", "queue lookup: refused(no-such-queue)"),
    (
        "§5a.5 s2",
        "envelope shape and size, JCS only: refused(bounds)",
    ),
    ("§5a.5 s3", "byte identity: duplicate, the same deposit id"),
    (
        "§5a.8",
        "collect paging, conclusion (idempotent), no redelivery, sender status",
    ),
    (
        "§5a.9",
        "orphan horizon, wind-up deadline, give-up, tombstones",
    ),
    (
        "PROTOCOL §6",
        "frames: bounds from the prefix, the closed error family, capped details",
    ),
    (
        "PROTOCOL §7",
        "submit-stream: pipelined, answered in order, an oversize item decided unread",
    ),
];

/// One check's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The carrier did what the rule says.
    Pass,
    /// It did not.
    Fail,
    /// The rule cannot be decided from the wire in a bounded run.
    NotObservable,
}

impl Outcome {
    /// The report spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::NotObservable => "not-observable",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check: which section, what, and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// A key of [`SECTIONS`].
    pub section: &'static str,
    /// What was checked.
    pub name: String,
    /// How it went.
    pub outcome: Outcome,
    /// What was seen (for a failure: expected and got).
    pub detail: String,
}

/// Every check of a run, in order.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The checks.
    pub checks: Vec<Check>,
}

/// A section's aggregate: `fail` if any check failed, else `pass` if any
/// passed, else `not-observable`.
#[derive(Debug, Clone)]
pub struct SectionSummary<'a> {
    /// The section key.
    pub section: &'static str,
    /// What it covers.
    pub title: &'static str,
    /// The aggregate outcome.
    pub outcome: Outcome,
    /// Its checks.
    pub checks: Vec<&'a Check>,
}

impl SectionSummary<'_> {
    /// How many of its checks passed.
    pub fn passed(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.outcome == Outcome::Pass)
            .count()
    }
}

impl Report {
    /// Records a check.
    pub fn record(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        result: Result<String, String>,
    ) {
        let (outcome, detail) = match result {
            Ok(detail) => (Outcome::Pass, detail),
            Err(detail) => (Outcome::Fail, detail),
        };
        self.checks.push(Check {
            section,
            name: name.into(),
            outcome,
            detail,
        });
    }

    /// Records a rule that cannot be decided from the wire.
    pub fn unobservable(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        why: impl Into<String>,
    ) {
        self.checks.push(Check {
            section,
            name: name.into(),
            outcome: Outcome::NotObservable,
            detail: why.into(),
        });
    }

    /// Failed checks.
    pub fn failures(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.outcome == Outcome::Fail)
            .count()
    }

    /// One summary per section of [`SECTIONS`], in order.
    pub fn sections(&self) -> Vec<SectionSummary<'_>> {
        SECTIONS
            .iter()
            .map(|&(section, title)| {
                let checks: Vec<&Check> = self
                    .checks
                    .iter()
                    .filter(|c| c.section == section)
                    .collect();
                let outcome = if checks.iter().any(|c| c.outcome == Outcome::Fail) {
                    Outcome::Fail
                } else if checks.iter().any(|c| c.outcome == Outcome::Pass) {
                    Outcome::Pass
                } else {
                    Outcome::NotObservable
                };
                SectionSummary {
                    section,
                    title,
                    outcome,
                    checks,
                }
            })
            .collect()
    }

    /// The human report: one line per section, the failed checks (and the
    /// reasons a rule is not observable) indented beneath it, then a
    /// summary line.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let sections = self.sections();
        for s in &sections {
            let passed = s.passed();
            out.push_str(&format!(
                "{:<16} {:<15} {:>3}/{:<3} {}\n",
                s.section,
                s.outcome.as_str(),
                passed,
                s.checks.len(),
                s.title
            ));
            for c in &s.checks {
                match c.outcome {
                    Outcome::Fail => out.push_str(&format!("    FAIL {}: {}\n", c.name, c.detail)),
                    Outcome::NotObservable => {
                        out.push_str(&format!("    not observable: {}: {}\n", c.name, c.detail));
                    }
                    Outcome::Pass => {}
                }
            }
        }
        let count = |o: Outcome| sections.iter().filter(|s| s.outcome == o).count();
        out.push_str(&format!(
            "{} sections: {} pass, {} fail, {} not observable; {} checks, {} failed\n",
            sections.len(),
            count(Outcome::Pass),
            count(Outcome::Fail),
            count(Outcome::NotObservable),
            self.checks.len(),
            self.failures()
        ));
        out
    }

    /// The script report: one JSON object per section and line,
    /// `{"section", "title", "outcome", "checks": [{"check", "outcome",
    /// "detail"}…]}` (JCS).
    pub fn to_json_lines(&self) -> String {
        self.to_json_lines_on(None)
    }

    /// [`Report::to_json_lines`], each object with a `"transport"` member
    /// (`quic`, `tcp`: `PROTOCOL.md` §5b) when `transport` is given.
    pub fn to_json_lines_on(&self, transport: Option<&str>) -> String {
        let mut out = String::new();
        for s in self.sections() {
            let checks: Vec<Value> = s
                .checks
                .iter()
                .map(|c| {
                    let mut o = Object::new();
                    o.insert("check", c.name.as_str());
                    o.insert("outcome", c.outcome.as_str());
                    o.insert("detail", c.detail.as_str());
                    Value::Object(o)
                })
                .collect();
            let mut o = Object::new();
            o.insert("section", s.section);
            o.insert("title", s.title);
            o.insert("outcome", s.outcome.as_str());
            o.insert("checks", Value::Array(checks));
            if let Some(transport) = transport {
                o.insert("transport", transport);
            }
            let line = rltp_proofs::jcs::canonicalize(&Value::Object(o)).unwrap_or_default();
            out.push_str(&String::from_utf8_lossy(&line));
            out.push('\n');
        }
        out
    }
}

/// Reports of the same checks over several transports, side by side
/// (`PROTOCOL.md` §5b: the same verdicts over QUIC and TLS/TCP): one line
/// per section with each transport's outcome and passed checks, the
/// failed checks beneath it by transport, then each report's summary.
pub fn side_by_side(reports: &[(&str, &Report)]) -> String {
    let columns: Vec<Vec<SectionSummary<'_>>> = reports.iter().map(|(_, r)| r.sections()).collect();
    let mut out = String::new();
    for (i, &(section, title)) in SECTIONS.iter().enumerate() {
        out.push_str(&format!("{section:<16}"));
        for ((transport, _), sections) in reports.iter().zip(&columns) {
            if let Some(s) = sections.get(i) {
                let passed = s.passed();
                out.push_str(&format!(
                    " {transport} {:<15} {passed:>3}/{:<3}",
                    s.outcome.as_str(),
                    s.checks.len()
                ));
            }
        }
        out.push_str(&format!(" {title}\n"));
        for ((transport, _), sections) in reports.iter().zip(&columns) {
            for c in sections.get(i).map_or(&[][..], |s| &s.checks[..]) {
                if c.outcome == Outcome::Fail {
                    out.push_str(&format!("    FAIL {transport} {}: {}\n", c.name, c.detail));
                }
            }
        }
    }
    for (transport, report) in reports {
        let summary = report.to_text();
        let last = summary.lines().last().unwrap_or_default();
        out.push_str(&format!("{transport}: {last}\n"));
    }
    out
}

/// Why the runner could not run at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The carrier could not be reached (nothing was checked).
    #[error("cannot reach the carrier: {0}")]
    Unreachable(#[source] rltp_client::ClientError),
}

/// Runs every check against `target`.
///
/// # Errors
/// [`RunError::Unreachable`] when the first connection fails; every later
/// fault is a failed check, never an error.
pub async fn run(target: &Target) -> Result<Report, RunError> {
    checks::run(target).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_keys_are_unique() {
        let mut keys: Vec<&str> = SECTIONS.iter().map(|s| s.0).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), SECTIONS.len());
    }

    #[test]
    fn a_section_fails_if_any_check_fails_and_is_unobservable_if_none_ran() {
        let mut report = Report::default();
        report.record("§5a.5 s1", "a", Ok("ok".into()));
        report.record("§5a.5 s1", "b", Err("expected x, got y".into()));
        report.record("§5a.5 s3", "c", Ok("ok".into()));
        report.unobservable("§5a.9", "d", "days");
        let sections = report.sections();
        let outcome = |key: &str| sections.iter().find(|s| s.section == key).unwrap().outcome;
        assert_eq!(outcome("§5a.5 s1"), Outcome::Fail);
        assert_eq!(outcome("§5a.5 s3"), Outcome::Pass);
        assert_eq!(outcome("§5a.9"), Outcome::NotObservable);
        assert_eq!(outcome("§4.4 g1"), Outcome::NotObservable);
        assert_eq!(report.failures(), 1);
        let text = report.to_text();
        assert!(text.contains("    FAIL b: expected x, got y\n"), "{text}");
        assert!(
            text.ends_with("17 sections: 1 pass, 1 fail, 15 not observable; 4 checks, 1 failed\n"),
            "{text}"
        );
        let json = report.to_json_lines();
        assert_eq!(json.lines().count(), SECTIONS.len());
        assert!(json.lines().any(|l| l
            == "{\"checks\":[{\"check\":\"c\",\"detail\":\"ok\",\"outcome\":\"pass\"}],\"outcome\":\"pass\",\"section\":\"§5a.5 s3\",\"title\":\"byte identity: duplicate, the same deposit id\"}"));
    }
}
