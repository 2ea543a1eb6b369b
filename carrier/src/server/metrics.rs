//! The carrier's metrics, rendered as Prometheus text on `/metrics`
//! (`deploy/OPERATIONS.md`, "Reading the metrics").
//!
//! ## Privacy (§5a.1, §10)
//! Every label value is taken from a closed set written in this file: an
//! operation name ([`Op`]), a verdict spelling of §5a.3/§5a.5 (or a
//! deposit status of §5a.8), a binding phase. No `rkid`, principal,
//! deposit id, generation or network address is ever a label or a value,
//! and nothing here keeps a per-client map: the memory of this module is
//! fixed at start (`tests/operations.rs` scrapes after real traffic and
//! checks that none of those values appear).
//!
//! ## One recorder per server
//! Each [`crate::server::Server`] builds its own recorder
//! (`PrometheusBuilder::build_recorder`) and registers every handle on it
//! once, at start; nothing is installed as the process-global `metrics`
//! recorder. Several carriers in one process (tests, the in-process demo)
//! therefore keep separate counts, and no other code in the process can add
//! series to a carrier's page. The price is that the `metrics` macros are
//! not used: handles are fields.
//!
//! ## Where the numbers come from
//! - verdict counters: counted by the server as it answers (`ops.rs`);
//! - transition counters: the engine's durable counts
//!   ([`rltp_engine::events`]), copied at each scrape;
//! - gauges: read from one store snapshot at each scrape;
//! - histograms: the group-commit writer's batch observer.

use crate::writer::BatchReport;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use rltp_engine::{EngineConstants, EventSnapshot, Limits};
use rltp_proofs::Ms;
use rltp_storage::{BindingPhases, Occupancy};
pub use rltp_wire::Op;
use std::sync::{Mutex, PoisonError};

/// Minutes of verdict history kept for the status page's chart.
pub const HISTORY_MINUTES: usize = 60;

/// The operations that are metric labels: every [`Op`] that answers as
/// itself (a `submit-stream` item counts as a `submit`).
fn metric_ops() -> impl Iterator<Item = Op> {
    Op::ALL.into_iter().filter(|op| op.answered_as() == *op)
}

/// The position of `op` among [`metric_ops`].
fn op_index(op: Op) -> usize {
    metric_ops()
        .position(|o| o == op.answered_as())
        .unwrap_or(0)
}

/// One verdict series: `rltp_carrier_verdicts_total{operation, verdict}`.
struct Series {
    op: Op,
    verdict: &'static str,
    counter: Counter,
}

/// Per-minute verdict counts of the last [`HISTORY_MINUTES`] minutes
/// (fixed size: one slot per minute, one count per series).
struct MinuteRing {
    slots: Vec<(u64, Vec<u64>)>,
}

impl MinuteRing {
    fn new(series: usize) -> MinuteRing {
        MinuteRing {
            slots: vec![(u64::MAX, vec![0; series]); HISTORY_MINUTES],
        }
    }

    fn add(&mut self, minute: u64, series: usize) {
        let Some(slot) = self
            .slots
            .get_mut((minute % HISTORY_MINUTES as u64) as usize)
        else {
            return;
        };
        if slot.0 != minute {
            slot.0 = minute;
            slot.1.iter_mut().for_each(|c| *c = 0);
        }
        if let Some(count) = slot.1.get_mut(series) {
            *count += 1;
        }
    }

    /// Counts per minute for the minutes ending with `now_minute`, oldest
    /// first (`HISTORY_MINUTES` rows, zeros where nothing was counted).
    fn window(&self, now_minute: u64, series: usize) -> Vec<Vec<u64>> {
        (0..HISTORY_MINUTES as u64)
            .rev()
            .map(|ago| {
                now_minute
                    .checked_sub(ago)
                    .and_then(|minute| {
                        self.slots
                            .get((minute % HISTORY_MINUTES as u64) as usize)
                            .filter(|slot| slot.0 == minute)
                    })
                    .map_or_else(|| vec![0; series], |slot| slot.1.clone())
            })
            .collect()
    }
}

/// The verdict history the status page charts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictHistory {
    /// The last minute of the window (ms since the epoch / 60 000).
    pub last_minute: u64,
    /// `(operation, verdict)` of each series.
    pub series: Vec<(Op, &'static str)>,
    /// `HISTORY_MINUTES` rows, oldest first; each row one count per series.
    pub minutes: Vec<Vec<u64>>,
}

/// What a scrape reads from the engine and one store snapshot.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// Held bindings by phase.
    pub phases: BindingPhases,
    /// The store's counters.
    pub occupancy: Occupancy,
    /// The constants in force.
    pub constants: EngineConstants,
    /// The private limits in force.
    pub limits: Limits,
    /// Durable transition counts.
    pub events: EventSnapshot,
    /// Failed group-commit batches since start.
    pub failed_batches: u64,
    /// Live challenges.
    pub challenges: u64,
    /// Quarantine records the store holds (deposits found damaged).
    pub quarantined: u64,
    /// The declaration revision served.
    pub revision: u64,
    /// The guarantee-3 work counters (§4.4).
    pub work: rltp_engine::CounterSnapshot,
    /// Wall-clock steps noticed (`PROTOCOL.md` §11).
    pub clock_steps: u64,
}

/// Every handle of one carrier's metrics.
pub struct Metrics {
    handle: PrometheusHandle,
    series: Vec<Series>,
    by_op: Vec<Vec<(&'static str, usize)>>,
    ring: Mutex<MinuteRing>,
    unavailable: Vec<Counter>,
    collected: Counter,
    connections_open: Gauge,
    connections_accepted: Counter,
    connections_refused: Counter,
    streams_open: Gauge,
    streams_accepted: Counter,
    bindings_live: Gauge,
    bindings_closing: Gauge,
    bindings_max: Gauge,
    tombstones: Gauge,
    tombstones_max: Gauge,
    deposits: Gauge,
    deposit_bytes: Gauge,
    capacity_bytes: Gauge,
    capacity_used: Gauge,
    capacity_reserved: Gauge,
    capacity_elastic: Gauge,
    challenges: Gauge,
    quarantined: Gauge,
    quarantined_total: Counter,
    revision: Gauge,
    wind_ups: Counter,
    releases: Counter,
    evictions: Counter,
    given_up: Counter,
    concluded: Counter,
    failed_batches: Counter,
    asymmetric_ops: Counter,
    random_draws: Counter,
    verifications: Counter,
    clock_steps: Counter,
    commit_seconds: Histogram,
    batch_operations: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("series", &self.series.len())
            .finish_non_exhaustive()
    }
}

const COMMIT_SECONDS: &str = "rltp_carrier_commit_seconds";
const BATCH_OPERATIONS: &str = "rltp_carrier_batch_operations";

/// Registers metrics on one recorder, with their help text.
struct Registrar<R: Recorder> {
    recorder: R,
}

const META: Metadata<'static> = Metadata::new("rltp_carrier", Level::INFO, None);

impl<R: Recorder> Registrar<R> {
    fn key(name: &'static str, labels: &[(&'static str, &'static str)]) -> Key {
        Key::from_parts(
            name,
            labels
                .iter()
                .map(|(k, v)| Label::new(*k, *v))
                .collect::<Vec<_>>(),
        )
    }

    fn counter(&self, name: &'static str, help: &'static str) -> Counter {
        self.counter_with(name, help, &[])
    }

    fn counter_with(
        &self,
        name: &'static str,
        help: &'static str,
        labels: &[(&'static str, &'static str)],
    ) -> Counter {
        self.recorder
            .describe_counter(KeyName::from(name), None, help.into());
        let counter = self
            .recorder
            .register_counter(&Self::key(name, labels), &META);
        // Present (at 0) from the first scrape, so rates start at once.
        counter.increment(0);
        counter
    }

    fn gauge(&self, name: &'static str, help: &'static str) -> Gauge {
        self.gauge_with(name, help, &[])
    }

    fn gauge_with(
        &self,
        name: &'static str,
        help: &'static str,
        labels: &[(&'static str, &'static str)],
    ) -> Gauge {
        self.recorder
            .describe_gauge(KeyName::from(name), None, help.into());
        let gauge = self
            .recorder
            .register_gauge(&Self::key(name, labels), &META);
        gauge.set(0.0);
        gauge
    }

    fn histogram(&self, name: &'static str, help: &'static str) -> Histogram {
        self.recorder
            .describe_histogram(KeyName::from(name), None, help.into());
        self.recorder
            .register_histogram(&Self::key(name, &[]), &META)
    }
}

fn gauge_u64(gauge: &Gauge, value: u64) {
    // f64 is exact up to 2^53, beyond any count a carrier holds.
    gauge.set(value as f64);
}

impl Metrics {
    /// A fresh set of metrics on its own recorder.
    pub fn new() -> Metrics {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full(COMMIT_SECONDS.into()),
                &[
                    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                ],
            )
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full(BATCH_OPERATIONS.into()),
                    &[
                        1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
                    ],
                )
            })
            // Non-empty bucket lists cannot fail; keep summaries otherwise.
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let r = Registrar { recorder };

        let mut series = Vec::new();
        let mut by_op = Vec::new();
        for op in metric_ops() {
            let mut entries = Vec::new();
            for verdict in op.answers() {
                entries.push((verdict, series.len()));
                series.push(Series {
                    op,
                    verdict,
                    counter: r.counter_with(
                        "rltp_carrier_verdicts_total",
                        "Answers given, by operation and verdict (the closed sets of §5a.3 and \
                         §5a.5; the deposit statuses of §5a.8 for `status`).",
                        &[("operation", op.as_str()), ("verdict", verdict)],
                    ),
                });
            }
            by_op.push(entries);
        }
        let unavailable = metric_ops()
            .map(|op| {
                r.counter_with(
                    "rltp_carrier_unavailable_total",
                    "Requests answered `unavailable` because the store could not complete them \
                     (retriable; nothing changed).",
                    &[("operation", op.as_str())],
                )
            })
            .collect();
        let bindings = "Held bindings by §5a.3 state (live, closing).";
        Metrics {
            ring: Mutex::new(MinuteRing::new(series.len())),
            unavailable,
            collected: r.counter(
                "rltp_carrier_collected_deposits_total",
                "Deposits delivered by collect pages and watch pushes (a deposit collected twice \
                 counts twice).",
            ),
            connections_open: r.gauge(
                "rltp_carrier_quic_connections",
                "QUIC connections open now.",
            ),
            connections_accepted: r.counter(
                "rltp_carrier_quic_connections_total",
                "QUIC connections established since start.",
            ),
            connections_refused: r.counter(
                "rltp_carrier_quic_connections_refused_total",
                "QUIC handshakes refused because limits.max-connections was reached.",
            ),
            streams_open: r.gauge(
                "rltp_carrier_quic_streams",
                "Bidirectional QUIC streams (operations) being served now.",
            ),
            streams_accepted: r.counter(
                "rltp_carrier_quic_streams_total",
                "Bidirectional QUIC streams (operations) accepted since start.",
            ),
            bindings_live: r.gauge_with("rltp_carrier_bindings", bindings, &[("state", "live")]),
            bindings_closing: r.gauge_with(
                "rltp_carrier_bindings",
                bindings,
                &[("state", "closing")],
            ),
            bindings_max: r.gauge(
                "rltp_carrier_bindings_max",
                "Most held bindings (private limit limits.max-bindings).",
            ),
            tombstones: r.gauge(
                "rltp_carrier_tombstones",
                "Binding tombstones held (§5a.3 released).",
            ),
            tombstones_max: r.gauge(
                "rltp_carrier_tombstones_max",
                "The declared max-binding-tombstones.",
            ),
            deposits: r.gauge("rltp_carrier_deposits", "Deposits held."),
            deposit_bytes: r.gauge(
                "rltp_carrier_deposit_bytes",
                "Envelope bytes held across all queues.",
            ),
            capacity_bytes: r.gauge(
                "rltp_carrier_capacity_bytes",
                "The private byte budget (limits.capacity-bytes).",
            ),
            capacity_used: r.gauge(
                "rltp_carrier_capacity_used_bytes",
                "Global occupancy judged by s6 and r4: held bindings x queue-floor + elastic bytes.",
            ),
            capacity_reserved: r.gauge(
                "rltp_carrier_capacity_reserved_bytes",
                "Bytes reserved as queue floors (held bindings x queue-floor).",
            ),
            capacity_elastic: r.gauge(
                "rltp_carrier_capacity_elastic_bytes",
                "Bytes queues hold above their floors (shared elastic room in use).",
            ),
            challenges: r.gauge(
                "rltp_carrier_challenges",
                "Live (issued, not yet consumed) challenges.",
            ),
            quarantined: r.gauge(
                "rltp_carrier_quarantined_deposits",
                "Deposits whose stored bytes failed their check, quarantined and given up \
                 (records held by the store; any value above 0 means damaged data on disk).",
            ),
            quarantined_total: r.counter(
                "rltp_carrier_quarantined_deposits_total",
                "Deposits quarantined since start (each also counted as given up).",
            ),
            revision: r.gauge(
                "rltp_carrier_declaration_revision",
                "The revision of the declaration being served.",
            ),
            wind_ups: r.counter(
                "rltp_carrier_wind_ups_total",
                "Bindings that began their wind-up at the orphan horizon (live -> closing).",
            ),
            releases: r.counter(
                "rltp_carrier_releases_total",
                "Bindings released at their wind-up deadline (closing -> released).",
            ),
            evictions: r.counter(
                "rltp_carrier_evictions_total",
                "Binding tombstones evicted over max-binding-tombstones.",
            ),
            given_up: r.counter(
                "rltp_carrier_given_up_deposits_total",
                "Deposits given up at their give-up horizon or a wind-up deadline.",
            ),
            concluded: r.counter(
                "rltp_carrier_concluded_deposits_total",
                "Deposits concluded by their recipients.",
            ),
            failed_batches: r.counter(
                "rltp_carrier_commit_failures_total",
                "Group-commit batches that failed (their callers were answered retriably).",
            ),
            asymmetric_ops: r.counter(
                "rltp_carrier_asymmetric_operations_total",
                "X25519 and Ed25519 operations done for requests (sealing address challenges, \
                 verifying proofs); guarantee 3: none for a request refused before its decision.",
            ),
            random_draws: r.counter(
                "rltp_carrier_random_draws_total",
                "Draws from the carrier's CSPRNG for requests (guarantee 3).",
            ),
            verifications: r.counter(
                "rltp_carrier_proof_verifications_total",
                "Ed25519 proof verifications (a subset of the asymmetric operations).",
            ),
            clock_steps: r.counter(
                "rltp_carrier_clock_steps_total",
                "Wall-clock steps noticed; horizons keep running on the monotonic clock \
                 (PROTOCOL.md §11).",
            ),
            commit_seconds: r.histogram(
                COMMIT_SECONDS,
                "Time to make one group-commit batch durable (segment fdatasync + redb commit), \
                 seconds.",
            ),
            batch_operations: r.histogram(
                BATCH_OPERATIONS,
                "Operations per group-commit batch.",
            ),
            series,
            by_op,
            handle,
        }
    }

    /// Counts one answer of `op` with exact spelling `verdict` at `now`
    /// (ms). A spelling outside the operation's closed set is not counted
    /// (and logged): label values never come from anywhere else.
    pub fn verdict(&self, op: Op, verdict: &str, now: Ms) {
        let Some(&(_, index)) = self
            .by_op
            .get(op_index(op))
            .and_then(|entries| entries.iter().find(|(v, _)| *v == verdict))
        else {
            tracing::warn!(op = op.as_str(), verdict, "verdict outside the metric set");
            return;
        };
        if let Some(series) = self.series.get(index) {
            series.counter.increment(1);
        }
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(now / 60_000, index);
    }

    /// Counts an established QUIC connection; the gauge of open ones is up
    /// by one until the returned guard drops.
    pub fn connection_opened(&self) -> Open {
        self.connections_accepted.increment(1);
        self.connections_open.increment(1.0);
        Open(self.connections_open.clone())
    }

    /// Counts an accepted stream; the gauge of open ones is up by one until
    /// the returned guard drops.
    pub fn stream_opened(&self) -> Open {
        self.streams_accepted.increment(1);
        self.streams_open.increment(1.0);
        Open(self.streams_open.clone())
    }

    /// Counts a handshake refused at `limits.max-connections`.
    pub fn connection_refused(&self) {
        self.connections_refused.increment(1);
    }

    /// Counts an `unavailable` answer of `op`.
    pub fn unavailable(&self, op: Op) {
        if let Some(counter) = self.unavailable.get(op_index(op)) {
            counter.increment(1);
        }
    }

    /// Counts `n` deposits delivered to a recipient.
    pub fn collected(&self, n: usize) {
        self.collected.increment(n as u64);
    }

    /// Records one group-commit batch (the engine's batch observer).
    pub fn batch(&self, report: &BatchReport) {
        if report.committed {
            self.commit_seconds.record(report.commit_time.as_secs_f64());
            self.batch_operations.record(report.operations as f64);
        }
    }

    /// Sets the gauges and the engine-derived counters from `reading`.
    pub fn refresh(&self, reading: &Reading) {
        let o = &reading.occupancy;
        let floor = reading.constants.queue_floor;
        gauge_u64(&self.bindings_live, reading.phases.live);
        gauge_u64(&self.bindings_closing, reading.phases.closing);
        gauge_u64(&self.bindings_max, reading.limits.max_bindings);
        gauge_u64(&self.tombstones, o.tombstones);
        gauge_u64(
            &self.tombstones_max,
            reading.constants.max_binding_tombstones,
        );
        gauge_u64(&self.deposits, o.deposits);
        gauge_u64(&self.deposit_bytes, o.total_bytes);
        gauge_u64(&self.capacity_bytes, reading.limits.capacity_bytes);
        gauge_u64(&self.capacity_used, rltp_engine::capacity::usage(o, floor));
        gauge_u64(&self.capacity_reserved, o.bindings.saturating_mul(floor));
        gauge_u64(&self.capacity_elastic, o.elastic_bytes);
        gauge_u64(&self.challenges, reading.challenges);
        gauge_u64(&self.quarantined, reading.quarantined);
        gauge_u64(&self.revision, reading.revision);
        let e = &reading.events;
        self.wind_ups.absolute(e.wind_ups);
        self.releases.absolute(e.releases);
        self.evictions.absolute(e.evictions);
        self.given_up.absolute(e.given_up);
        self.concluded.absolute(e.concluded);
        self.quarantined_total.absolute(e.quarantined);
        self.failed_batches.absolute(reading.failed_batches);
        self.asymmetric_ops.absolute(reading.work.asymmetric_ops);
        self.random_draws.absolute(reading.work.random_draws);
        self.verifications.absolute(reading.work.verifications);
        self.clock_steps.absolute(reading.clock_steps);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut text = self.handle.render();
        text.push_str(&format!(
            "# HELP rltp_carrier_build_info The running build.\n\
             # TYPE rltp_carrier_build_info gauge\n\
             rltp_carrier_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        ));
        text
    }

    /// Drains buffered histogram samples (call every few seconds, so that
    /// memory stays bounded when nobody scrapes).
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// The last hour of verdict counts per minute, ending at `now` (ms).
    pub fn history(&self, now: Ms) -> VerdictHistory {
        let last_minute = now / 60_000;
        let minutes = self
            .ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .window(last_minute, self.series.len());
        VerdictHistory {
            last_minute,
            series: self.series.iter().map(|s| (s.op, s.verdict)).collect(),
            minutes,
        }
    }
}

/// Keeps an open-connection or open-stream gauge up while it lives.
#[derive(Debug)]
pub struct Open(Gauge);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_sets_are_closed_and_counted() {
        let m = Metrics::new();
        m.verdict(Op::Submit, "admitted", 120_000);
        m.verdict(Op::Submit, "admitted", 120_001);
        m.verdict(Op::Register, "refused(stale-generation)", 60_000);
        m.verdict(Op::Submit, "did:key:z6Mk-not-a-verdict", 120_000);
        let text = m.render();
        assert!(
            text.contains(
                "rltp_carrier_verdicts_total{operation=\"submit\",verdict=\"admitted\"} 2"
            )
        );
        assert!(text.contains(
            "rltp_carrier_verdicts_total{operation=\"register\",verdict=\"refused(stale-generation)\"} 1"
        ));
        assert!(
            text.contains(
                "rltp_carrier_verdicts_total{operation=\"collect\",verdict=\"served\"} 0"
            )
        );
        assert!(!text.contains("did:key"));
        let history = m.history(180_000);
        assert_eq!(history.minutes.len(), HISTORY_MINUTES);
        let admitted = history
            .series
            .iter()
            .position(|s| *s == (Op::Submit, "admitted"))
            .unwrap();
        assert_eq!(history.minutes[HISTORY_MINUTES - 2][admitted], 2);
        assert_eq!(history.minutes[HISTORY_MINUTES - 1][admitted], 0);
        // An hour later the minute is gone.
        assert!(
            m.history(120_000 + 3_600_000)
                .minutes
                .iter()
                .all(|row| row.iter().all(|c| *c == 0))
        );
    }

    #[test]
    fn histograms_have_buckets() {
        let m = Metrics::new();
        m.batch(&BatchReport {
            operations: 3,
            committed: true,
            commit_time: std::time::Duration::from_millis(2),
        });
        let text = m.render();
        assert!(
            text.contains("rltp_carrier_commit_seconds_bucket{le=\"0.0025\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("rltp_carrier_batch_operations_bucket{le=\"4\"} 1"),
            "{text}"
        );
        assert!(text.contains("rltp_carrier_build_info{version=\""));
    }
}
