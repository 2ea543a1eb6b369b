//! The carrier's metrics, rendered as Prometheus text (format 0.0.4) on
//! `/metrics` (`deploy/OPERATIONS.md`, "Reading the metrics"), through the
//! `prometheus-client` registry: one documented field per metric, help
//! text at registration, label sets derived from closed types.
//!
//! ## Privacy (§5a.1, §10)
//! Every label value is taken from a closed set: an operation name
//! ([`Op`], `rltp_wire`), a verdict spelling of §5a.3/§5a.5 (or a deposit
//! status of §5a.8: [`Op::answers`]), a binding phase. No `rkid`,
//! principal, deposit id, generation or network address is ever a label or
//! a value, and nothing here keeps a per-client map: every series exists
//! from the start and the memory of this module is fixed then
//! (`tests/operations.rs` scrapes after real traffic and checks that none
//! of those values appear).
//!
//! ## One registry per server
//! Each [`crate::service::Server`] builds its own [`Registry`]; nothing is
//! process-global. Several carriers in one process (tests, the in-process
//! demo) therefore keep separate counts.
//!
//! ## Where the numbers come from
//! - verdict counters: counted by the server as it answers (`ops.rs`),
//!   with the status page's per-minute [`History`] beside them;
//! - transition counters: the writer's durable event counts
//!   ([`rltp_engine::events`]), copied at each scrape;
//! - gauges: read from one store snapshot at each scrape;
//! - histograms: the group-commit writer's batch observer.

use crate::service::status_page::{History, VerdictHistory};
use crate::writer::BatchReport;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rltp_engine::{EngineConstants, EventSnapshot, Limits};
use rltp_proofs::Ms;
use rltp_quic::stream::Binding;
use rltp_storage::{BindingPhases, Occupancy};
use std::sync::atomic::Ordering;

pub use rltp_wire::Op;

/// The operations that are metric labels: every [`Op`] that answers as
/// itself (a `submit-stream` item counts as a `submit`).
fn metric_ops() -> impl Iterator<Item = Op> {
    Op::ALL.into_iter().filter(|op| op.answered_as() == *op)
}

/// The label model: every `(operation, verdict)` series, in order (the
/// verdict counters and the status page's history share it).
pub fn series() -> Vec<(Op, &'static str)> {
    metric_ops()
        .flat_map(|op| op.answers().into_iter().map(move |verdict| (op, verdict)))
        .collect()
}

/// `rltp_carrier_verdicts_total{operation, verdict}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    operation: &'static str,
    verdict: &'static str,
}

/// `{operation}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: &'static str,
}

/// `{state}` of a held binding.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// `{version}` of the build.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: &'static str,
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
    /// The last offset measured between this node's clock and a shared
    /// database's, ms (`PROTOCOL.md` §13, "One clock"); `None` without one.
    pub clock_offset_ms: Option<i64>,
    /// Whether that offset is beyond `max-clock-offset-ms` (the node is
    /// then not ready).
    pub clock_offset_exceeded: bool,
    /// The store's size and its oldest deposit ([`Store::size`]).
    ///
    /// [`Store::size`]: rltp_storage::Store::size
    pub size: rltp_storage::StoreSize,
    /// The instant of the reading (ms), for the oldest deposit's age.
    pub now: Ms,
}

/// Every metric of one carrier, each registered once on its own registry.
#[derive(Debug)]
#[non_exhaustive]
pub struct Metrics {
    registry: Registry,
    series: Vec<(Op, &'static str)>,
    history: History,
    /// Answers given, by operation and verdict.
    verdicts: Family<VerdictLabels, Counter>,
    /// `unavailable` answers, by operation.
    unavailable: Family<OperationLabel, Counter>,
    /// Deposits delivered.
    collected: Counter,
    /// QUIC connections (`PROTOCOL.md` §5).
    quic: ConnectionSeries,
    /// TLS/TCP connections (`PROTOCOL.md` §5b).
    tcp: ConnectionSeries,
    /// Streams being served now.
    streams_open: Gauge,
    /// Streams accepted.
    streams_accepted: Counter,
    /// Held bindings by state.
    bindings: Family<StateLabel, Gauge>,
    /// `max-bindings`.
    bindings_max: Gauge,
    /// Tombstones held.
    tombstones: Gauge,
    /// `max-binding-tombstones`.
    tombstones_max: Gauge,
    /// Deposits held.
    deposits: Gauge,
    /// Envelope bytes held.
    deposit_bytes: Gauge,
    /// `capacity-bytes`.
    capacity_bytes: Gauge,
    /// Occupancy judged by s6 and r4.
    capacity_used: Gauge,
    /// Bytes reserved as floors.
    capacity_reserved: Gauge,
    /// Bytes above floors.
    capacity_elastic: Gauge,
    /// Live challenges.
    challenges: Gauge,
    /// Quarantine records held.
    quarantined: Gauge,
    /// Deposits quarantined since start.
    quarantined_total: Counter,
    /// The revision served.
    revision: Gauge,
    /// Wind-ups begun.
    wind_ups: Counter,
    /// Releases at the deadline.
    releases: Counter,
    /// Tombstone evictions.
    evictions: Counter,
    /// Deposits given up.
    given_up: Counter,
    /// Deposits concluded.
    concluded: Counter,
    /// Failed group-commit batches.
    failed_batches: Counter,
    /// Asymmetric operations for requests.
    asymmetric_ops: Counter,
    /// CSPRNG draws for requests.
    random_draws: Counter,
    /// Proof verifications.
    verifications: Counter,
    /// Wall-clock steps noticed.
    clock_steps: Counter,
    /// This node's clock minus the shared database's, ms.
    clock_offset_ms: Gauge,
    /// 1 while that offset is beyond `max-clock-offset-ms`.
    clock_offset_exceeded: Gauge,
    /// Time to make one batch durable, seconds.
    commit_seconds: Histogram,
    /// Operations per batch.
    batch_operations: Histogram,
    /// Store growth (`rltp_carrier_store_*`).
    store: StoreGauges,
}

/// Store growth: what the store takes and how much of it is live
/// ([`rltp_storage::StoreSize`]). A figure the store cannot tell (the
/// PostgreSQL store has no log of its own) is 0.
#[derive(Debug)]
struct StoreGauges {
    disk_bytes: Gauge,
    log_bytes: Gauge,
    live_bytes: Gauge,
    segments: Gauge,
    compactable_segments: Gauge,
    snapshot_bytes: Gauge,
    index_bytes: Gauge,
    oldest_deposit_age: Gauge,
}

impl StoreGauges {
    fn register(registry: &mut Registry) -> StoreGauges {
        let mut gauge = |name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        StoreGauges {
            disk_bytes: gauge("rltp_carrier_store_disk_bytes", HELP_STORE_DISK),
            log_bytes: gauge("rltp_carrier_store_log_bytes", HELP_STORE_LOG),
            live_bytes: gauge("rltp_carrier_store_live_bytes", HELP_STORE_LIVE),
            segments: gauge("rltp_carrier_store_segments", HELP_STORE_SEGMENTS),
            compactable_segments: gauge(
                "rltp_carrier_store_compactable_segments",
                HELP_STORE_COMPACTABLE,
            ),
            snapshot_bytes: gauge("rltp_carrier_store_snapshot_bytes", HELP_STORE_SNAPSHOT),
            index_bytes: gauge("rltp_carrier_store_index_bytes", HELP_STORE_INDEX),
            oldest_deposit_age: gauge(
                "rltp_carrier_oldest_deposit_age_seconds",
                HELP_OLDEST_DEPOSIT,
            ),
        }
    }

    fn refresh(&self, size: &rltp_storage::StoreSize, now: Ms) {
        for (gauge, value) in [
            (&self.disk_bytes, size.disk_bytes),
            (&self.log_bytes, size.log_bytes),
            (&self.live_bytes, size.live_bytes),
            (&self.segments, size.segments),
            (&self.compactable_segments, size.compactable_segments),
            (&self.snapshot_bytes, size.snapshot_bytes),
            (&self.index_bytes, size.index_bytes),
        ] {
            set(gauge, value.unwrap_or(0));
        }
        let age_ms = size
            .oldest_deposit_at
            .map_or(0, |at| now.saturating_sub(at));
        set(&self.oldest_deposit_age, age_ms / 1000);
    }
}

const HELP_STORE_DISK: &str = "Bytes of every file of the store (log segments, preallocated ones included, snapshots, redb), or the PostgreSQL database's size";
const HELP_STORE_LOG: &str = "Bytes of the store's log segment files (0 for PostgreSQL)";
const HELP_STORE_LIVE: &str = "Bytes of held deposits' envelopes in the log; log bytes minus these is what compaction and reclaiming can give back (0 for PostgreSQL)";
const HELP_STORE_SEGMENTS: &str = "Log segment files (0 for PostgreSQL)";
const HELP_STORE_COMPACTABLE: &str =
    "Sealed log segments sparse enough to be compacted: compaction's backlog, 0 once it caught up";
const HELP_STORE_SNAPSHOT: &str = "Bytes of the store's index snapshot files (0 for PostgreSQL)";
const HELP_STORE_INDEX: &str =
    "Bytes the store's in-memory index holds, an estimate (0 for PostgreSQL)";
const HELP_OLDEST_DEPOSIT: &str =
    "Age of the oldest held deposit, seconds (0 with none held); it stays below give-up-horizon";

/// Commit-time buckets, seconds: 0.5 ms (one fdatasync on fast NVMe) to
/// 2.5 s (a stalled disk).
const COMMIT_BUCKETS: [f64; 12] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];
/// Batch-size buckets, operations: powers of two up to the writer's bound
/// ([`crate::defaults::MAX_BATCH`]).
const BATCH_BUCKETS: [f64; 11] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

fn set(gauge: &Gauge, value: u64) {
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
}

fn absolute(counter: &Counter, value: u64) {
    counter.inner().store(value, Ordering::Relaxed);
}

/// The labelled families, the histograms, the store's gauges and the build
/// info, registered after the plain counters and gauges of [`Metrics::new`];
/// every labelled series is present (at 0) from the first scrape.
struct Families {
    series: Vec<(Op, &'static str)>,
    verdicts: Family<VerdictLabels, Counter>,
    unavailable: Family<OperationLabel, Counter>,
    bindings: Family<StateLabel, Gauge>,
    commit_seconds: Histogram,
    batch_operations: Histogram,
    store: StoreGauges,
}

impl Families {
    fn register(registry: &mut Registry) -> Families {
        let series = series();
        let verdicts = Family::<VerdictLabels, Counter>::default();
        for (op, verdict) in &series {
            let _ = verdicts.get_or_create(&VerdictLabels {
                operation: op.as_str(),
                verdict,
            });
        }
        registry.register("rltp_carrier_verdicts", HELP_VERDICTS, verdicts.clone());
        let unavailable = Family::<OperationLabel, Counter>::default();
        for op in metric_ops() {
            let _ = unavailable.get_or_create(&OperationLabel {
                operation: op.as_str(),
            });
        }
        registry.register(
            "rltp_carrier_unavailable",
            HELP_UNAVAILABLE,
            unavailable.clone(),
        );
        let bindings = Family::<StateLabel, Gauge>::default();
        for state in ["live", "closing"] {
            let _ = bindings.get_or_create(&StateLabel { state });
        }
        registry.register("rltp_carrier_bindings", HELP_BINDINGS, bindings.clone());
        let commit_seconds = Histogram::new(COMMIT_BUCKETS);
        registry.register(
            "rltp_carrier_commit_seconds",
            HELP_COMMIT_SECONDS,
            commit_seconds.clone(),
        );
        let batch_operations = Histogram::new(BATCH_BUCKETS);
        registry.register(
            "rltp_carrier_batch_operations",
            HELP_BATCH_OPERATIONS,
            batch_operations.clone(),
        );
        let store = StoreGauges::register(registry);
        let build = Family::<VersionLabel, Gauge>::default();
        build
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("rltp_carrier_build_info", "The running build", build);
        Families {
            series,
            verdicts,
            unavailable,
            bindings,
            commit_seconds,
            batch_operations,
            store,
        }
    }
}

impl Metrics {
    /// A fresh set of metrics on its own registry; every series is present
    /// (at 0) from the first scrape, so rates start at once.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let mut counter = |name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let collected = counter("rltp_carrier_collected_deposits", HELP_COLLECTED);
        let streams_accepted = counter("rltp_carrier_quic_streams", HELP_STREAMS_TOTAL);
        let quarantined_total =
            counter("rltp_carrier_quarantined_deposits", HELP_QUARANTINED_TOTAL);
        let wind_ups = counter("rltp_carrier_wind_ups", HELP_WIND_UPS);
        let releases = counter("rltp_carrier_releases", HELP_RELEASES);
        let evictions = counter("rltp_carrier_evictions", HELP_EVICTIONS);
        let given_up = counter("rltp_carrier_given_up_deposits", HELP_GIVEN_UP);
        let concluded = counter("rltp_carrier_concluded_deposits", HELP_CONCLUDED);
        let failed_batches = counter("rltp_carrier_commit_failures", HELP_COMMIT_FAILURES);
        let asymmetric_ops = counter("rltp_carrier_asymmetric_operations", HELP_ASYMMETRIC);
        let random_draws = counter("rltp_carrier_random_draws", HELP_RANDOM_DRAWS);
        let verifications = counter("rltp_carrier_proof_verifications", HELP_VERIFICATIONS);
        let clock_steps = counter("rltp_carrier_clock_steps", HELP_CLOCK_STEPS);
        let mut gauge = |name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let streams_open = gauge("rltp_carrier_quic_streams", HELP_STREAMS);
        let bindings_max = gauge("rltp_carrier_bindings_max", HELP_BINDINGS_MAX);
        let clock_offset_ms = gauge("rltp_carrier_clock_offset_ms", HELP_CLOCK_OFFSET);
        let clock_offset_exceeded = gauge(
            "rltp_carrier_clock_offset_exceeded",
            HELP_CLOCK_OFFSET_EXCEEDED,
        );
        let tombstones = gauge("rltp_carrier_tombstones", HELP_TOMBSTONES);
        let tombstones_max = gauge("rltp_carrier_tombstones_max", HELP_TOMBSTONES_MAX);
        let deposits = gauge("rltp_carrier_deposits", HELP_DEPOSITS);
        let deposit_bytes = gauge("rltp_carrier_deposit_bytes", HELP_DEPOSIT_BYTES);
        let capacity_bytes = gauge("rltp_carrier_capacity_bytes", HELP_CAPACITY);
        let capacity_used = gauge("rltp_carrier_capacity_used_bytes", HELP_CAPACITY_USED);
        let capacity_reserved = gauge(
            "rltp_carrier_capacity_reserved_bytes",
            HELP_CAPACITY_RESERVED,
        );
        let capacity_elastic = gauge("rltp_carrier_capacity_elastic_bytes", HELP_CAPACITY_ELASTIC);
        let challenges = gauge("rltp_carrier_challenges", HELP_CHALLENGES);
        let quarantined = gauge("rltp_carrier_quarantined_deposits", HELP_QUARANTINED);
        let revision = gauge("rltp_carrier_declaration_revision", HELP_REVISION);

        let quic = ConnectionSeries::register(&mut registry, Binding::Quic);
        let tcp = ConnectionSeries::register(&mut registry, Binding::Tcp);
        let families = Families::register(&mut registry);
        Metrics {
            registry,
            history: History::new(families.series.clone()),
            series: families.series,
            verdicts: families.verdicts,
            unavailable: families.unavailable,
            collected,
            quic,
            tcp,
            streams_open,
            streams_accepted,
            bindings: families.bindings,
            bindings_max,
            tombstones,
            tombstones_max,
            deposits,
            deposit_bytes,
            capacity_bytes,
            capacity_used,
            capacity_reserved,
            capacity_elastic,
            challenges,
            quarantined,
            quarantined_total,
            revision,
            wind_ups,
            releases,
            evictions,
            given_up,
            concluded,
            failed_batches,
            asymmetric_ops,
            random_draws,
            verifications,
            clock_steps,
            clock_offset_ms,
            clock_offset_exceeded,
            commit_seconds: families.commit_seconds,
            batch_operations: families.batch_operations,
            store: families.store,
        }
    }

    /// Counts one answer of `op` with exact spelling `verdict` at `now`
    /// (ms). A spelling outside the operation's closed set is not counted
    /// (and logged): label values never come from anywhere else.
    pub fn verdict(&self, op: Op, verdict: &str, now: Ms) {
        let op = op.answered_as();
        let Some((index, &(op, verdict))) = self
            .series
            .iter()
            .enumerate()
            .find(|(_, (o, v))| *o == op && *v == verdict)
        else {
            tracing::warn!(op = op.as_str(), verdict, "verdict outside the metric set");
            return;
        };
        self.verdicts
            .get_or_create(&VerdictLabels {
                operation: op.as_str(),
                verdict,
            })
            .inc();
        self.history.add(index, now);
    }

    /// Counts an established connection of `binding`; the gauge of open
    /// ones is up by one until the returned guard drops.
    pub fn connection_opened(&self, binding: Binding) -> Open {
        let series = self.connections(binding);
        series.accepted.inc();
        series.open.inc();
        Open(series.open.clone())
    }

    fn connections(&self, binding: Binding) -> &ConnectionSeries {
        match binding {
            Binding::Quic => &self.quic,
            Binding::Tcp => &self.tcp,
        }
    }

    /// Counts an accepted stream; the gauge of open ones is up by one until
    /// the returned guard drops.
    pub fn stream_opened(&self) -> Open {
        self.streams_accepted.inc();
        self.streams_open.inc();
        Open(self.streams_open.clone())
    }

    /// Counts a connection of `binding` refused at
    /// `limits.max-connections` (which counts both bindings).
    pub fn connection_refused(&self, binding: Binding) {
        self.connections(binding).refused.inc();
    }

    /// Counts an `unavailable` answer of `op`.
    pub fn unavailable(&self, op: Op) {
        self.unavailable
            .get_or_create(&OperationLabel {
                operation: op.answered_as().as_str(),
            })
            .inc();
    }

    /// Counts `n` deposits delivered to a recipient.
    pub fn collected(&self, n: usize) {
        self.collected.inc_by(n as u64);
    }

    /// Records one group-commit batch (the writer's batch observer).
    pub fn batch(&self, report: &BatchReport) {
        if report.committed {
            self.commit_seconds
                .observe(report.commit_time.as_secs_f64());
            self.batch_operations.observe(report.operations as f64);
        }
    }

    /// Sets the gauges and the engine-derived counters from `reading`.
    pub fn refresh(&self, reading: &Reading) {
        let o = &reading.occupancy;
        let floor = reading.constants.queue_floor;
        for (state, n) in [
            ("live", reading.phases.live),
            ("closing", reading.phases.closing),
        ] {
            set(&self.bindings.get_or_create(&StateLabel { state }), n);
        }
        set(&self.bindings_max, reading.limits.max_bindings);
        set(&self.tombstones, o.tombstones);
        set(
            &self.tombstones_max,
            reading.constants.max_binding_tombstones,
        );
        set(&self.deposits, o.deposits);
        set(&self.deposit_bytes, o.total_bytes);
        set(&self.capacity_bytes, reading.limits.capacity_bytes);
        set(&self.capacity_used, rltp_engine::capacity::usage(o, floor));
        set(&self.capacity_reserved, o.bindings.saturating_mul(floor));
        set(&self.capacity_elastic, o.elastic_bytes);
        set(&self.challenges, reading.challenges);
        set(&self.quarantined, reading.quarantined);
        set(&self.revision, reading.revision);
        let e = &reading.events;
        absolute(&self.wind_ups, e.wind_ups);
        absolute(&self.releases, e.releases);
        absolute(&self.evictions, e.evictions);
        absolute(&self.given_up, e.given_up);
        absolute(&self.concluded, e.concluded);
        absolute(&self.quarantined_total, e.quarantined);
        absolute(&self.failed_batches, reading.failed_batches);
        absolute(&self.asymmetric_ops, reading.work.asymmetric_ops);
        absolute(&self.random_draws, reading.work.random_draws);
        absolute(&self.verifications, reading.work.verifications);
        absolute(&self.clock_steps, reading.clock_steps);
        self.clock_offset_ms
            .set(reading.clock_offset_ms.unwrap_or(0));
        self.clock_offset_exceeded
            .set(i64::from(reading.clock_offset_exceeded));
        self.store.refresh(&reading.size, reading.now);
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric.
    pub fn render(&self) -> String {
        let mut text = String::with_capacity(16 << 10);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }

    /// The last hour of verdict counts per minute, ending at `now` (ms).
    pub fn history(&self, now: Ms) -> VerdictHistory {
        self.history.window(now)
    }
}

/// The connection series of one binding: `rltp_carrier_quic_connections*`
/// (`PROTOCOL.md` §5) or `rltp_carrier_tcp_connections*` (§5b).
#[derive(Debug)]
struct ConnectionSeries {
    /// Open now.
    open: Gauge,
    /// Established since start.
    accepted: Counter,
    /// Refused at `max-connections`.
    refused: Counter,
}

impl ConnectionSeries {
    fn register(registry: &mut Registry, binding: Binding) -> ConnectionSeries {
        let name = format!("rltp_carrier_{}_connections", binding.as_str());
        let what = match binding {
            Binding::Quic => "QUIC connections",
            Binding::Tcp => "TLS/TCP (HTTP/2) connections",
        };
        let (open, accepted, refused) = (Gauge::default(), Counter::default(), Counter::default());
        registry.register(&name, format!("{what} open now"), open.clone());
        registry.register(
            &name,
            format!("{what} established since start"),
            accepted.clone(),
        );
        registry.register(
            format!("{name}_refused"),
            format!("{what} refused because limits.max-connections (both bindings) was reached"),
            refused.clone(),
        );
        ConnectionSeries {
            open,
            accepted,
            refused,
        }
    }
}

/// Keeps an open-connection or open-stream gauge up while it lives.
#[derive(Debug)]
pub struct Open(Gauge);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

// Help texts (the registry ends each with a period).
const HELP_VERDICTS: &str = "Answers given, by operation and verdict (the closed sets of §5a.3 and §5a.5; the deposit statuses of §5a.8 for `status`)";
const HELP_UNAVAILABLE: &str = "Requests answered `unavailable` because the store could not complete them (retriable; nothing changed)";
const HELP_COLLECTED: &str =
    "Deposits delivered by collect pages and watch pushes (a deposit collected twice counts twice)";
const HELP_STREAMS: &str =
    "Operation streams (bidirectional QUIC streams and HTTP/2 streams) being served now";
const HELP_STREAMS_TOTAL: &str =
    "Operation streams (bidirectional QUIC streams and HTTP/2 streams) accepted since start";
const HELP_BINDINGS: &str = "Held bindings by §5a.3 state (live, closing)";
const HELP_BINDINGS_MAX: &str = "Most held bindings (private limit limits.max-bindings)";
const HELP_TOMBSTONES: &str = "Binding tombstones held (§5a.3 released)";
const HELP_TOMBSTONES_MAX: &str = "The declared max-binding-tombstones";
const HELP_DEPOSITS: &str = "Deposits held";
const HELP_DEPOSIT_BYTES: &str = "Envelope bytes held across all queues";
const HELP_CAPACITY: &str = "The private byte budget (limits.capacity-bytes)";
const HELP_CAPACITY_USED: &str =
    "Global occupancy judged by s6 and r4: held bindings x queue-floor + elastic bytes";
const HELP_CAPACITY_RESERVED: &str = "Bytes reserved as queue floors (held bindings x queue-floor)";
const HELP_CAPACITY_ELASTIC: &str =
    "Bytes queues hold above their floors (shared elastic room in use)";
const HELP_CHALLENGES: &str = "Live (issued, not yet consumed) challenges";
const HELP_QUARANTINED: &str = "Deposits whose stored bytes failed their check, quarantined and given up (records held by the store; any value above 0 means damaged data on disk)";
const HELP_QUARANTINED_TOTAL: &str =
    "Deposits quarantined since start (each also counted as given up)";
const HELP_REVISION: &str = "The revision of the declaration being served";
const HELP_WIND_UPS: &str =
    "Bindings that began their wind-up at the orphan horizon (live -> closing)";
const HELP_RELEASES: &str = "Bindings released at their wind-up deadline (closing -> released)";
const HELP_EVICTIONS: &str = "Binding tombstones evicted over max-binding-tombstones";
const HELP_GIVEN_UP: &str = "Deposits given up at their give-up horizon or a wind-up deadline";
const HELP_CONCLUDED: &str = "Deposits concluded by their recipients";
const HELP_COMMIT_FAILURES: &str =
    "Group-commit batches that failed (their callers were answered retriably)";
const HELP_ASYMMETRIC: &str = "X25519 and Ed25519 operations done for requests (sealing address challenges, verifying proofs); guarantee 3: none for a request refused before its decision";
const HELP_RANDOM_DRAWS: &str = "Draws from the carrier's CSPRNG for requests (guarantee 3)";
const HELP_VERIFICATIONS: &str =
    "Ed25519 proof verifications (a subset of the asymmetric operations)";
const HELP_CLOCK_STEPS: &str =
    "Wall-clock steps noticed; horizons keep running on the monotonic clock (PROTOCOL.md §11)";
const HELP_CLOCK_OFFSET: &str = "This node's clock minus the shared database's, ms, at the last \
     comparison (0 without a shared database); horizons run on the database's (PROTOCOL.md §13)";
const HELP_CLOCK_OFFSET_EXCEEDED: &str = "1 while this node's clock is beyond \
     max-clock-offset-ms of the database's: not ready, serving nothing that depends on time";
const HELP_COMMIT_SECONDS: &str =
    "Time to make one group-commit batch durable (segment fdatasync + redb commit), seconds";
const HELP_BATCH_OPERATIONS: &str = "Operations per group-commit batch";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults::http::HISTORY_MINUTES;

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
