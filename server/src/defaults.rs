//! Every operational constant of the service, in one place, each with the
//! reason for its value and the arithmetic behind it (the habit of
//! iroh-relay's `defaults.rs`). The protocol's frozen limits are not here:
//! they live beside their codecs (`rltp_wire::frame`,
//! `rltp_proofs::envelope`) and cite their sections. The seven declared
//! constants are not here either as numbers: a carrier parses their
//! lexemes ([`constants`]) and enforces exactly what it published (§4.4).
//!
//! Values an operator may change are the defaults of `carrier.toml`
//! ([`crate::config`], the README's configuration reference); the others
//! are fixed by the build.

use rltp_proofs::Ms;
use std::time::Duration;

/// The defaults of `[constants]`: the seven carrier constants as declared
/// lexemes (§4.4 guarantee 1, Access §7.3 durations), inside the §11
/// domains the README's reference lists.
pub mod constants {
    /// `orphan-horizon`: 30 days. A recipient that collects monthly keeps
    /// its binding; the domain is `[P7D, P365D]`.
    pub const ORPHAN_HORIZON: &str = "P30D";
    /// `give-up-horizon`: 14 days. Two weeks for a recipient to come back
    /// for a deposit (and the length of a wind-up); `[P1D, P90D]`.
    pub const GIVE_UP_HORIZON: &str = "P14D";
    /// `challenge-lifetime`: 1 minute, room for a round trip and a proof
    /// on a slow link; `[PT5S, PT5M]`.
    pub const CHALLENGE_LIFETIME: &str = "PT1M";
    /// `queue-floor`: 256 KiB = 262 144 bytes, three maximal envelopes
    /// (§5: about 88 KiB each) guaranteed to every held queue (§4.4
    /// guarantee 5); `[65536, max-queue-bytes]`.
    pub const QUEUE_FLOOR: &str = "262144";
    /// `max-queue-bytes`: 64 MiB = 67 108 864 bytes, about 760 maximal
    /// envelopes per queue; `[1048576, 1073741824]`.
    pub const MAX_QUEUE_BYTES: &str = "67108864";
    /// `max-binding-tombstones`: 10^6 released rkids remembered; at about
    /// 60 bytes per tombstone record that is some 60 MB of index.
    pub const MAX_BINDING_TOMBSTONES: &str = "1000000";
    /// `status-horizon`: 30 s, so a sender reports at least every 15 s
    /// (half the horizon, §6.1); `[PT5S, PT5M]`.
    pub const STATUS_HORIZON: &str = "PT30S";
}

/// The defaults of `[limits]` (private, §4.4 guarantee 2) and of the
/// connection hygiene.
pub mod limits {
    /// `capacity-bytes`: 4 GiB = 4 294 967 296 bytes of envelopes, a
    /// modest disk share; at the default floor it reserves room for 16 384
    /// held queues (4 GiB / 256 KiB), which is [`MAX_BINDINGS`].
    pub const CAPACITY_BYTES: u64 = 4 << 30;
    /// `max-bindings`: 16 384 = capacity / queue-floor, so that every held
    /// binding's floor fits the default capacity.
    pub const MAX_BINDINGS: u64 = 16_384;
    /// `max-connections`: 1 024 concurrent QUIC connections; at about
    /// 100 KiB of quinn state each, some 100 MiB.
    pub const MAX_CONNECTIONS: u32 = 1_024;
    /// `max-streams-per-connection`: 64 operations in flight per
    /// connection (QUIC flow control; a pipelining client uses one
    /// `submit-stream` instead of many streams).
    pub const MAX_STREAMS_PER_CONNECTION: u32 = 64;
    /// `idle-timeout-ms`: 30 s. Clients keep alive every 5 s
    /// (`rltp_client::defaults::KEEP_ALIVE`), six per timeout.
    pub const IDLE_TIMEOUT_MS: u64 = 30_000;
    /// `stream-read-timeout-ms`: 10 s for a frame to arrive once its stream
    /// started (the slowloris bound): a maximal frame of 1 MiB needs only
    /// 100 KiB/s.
    pub const STREAM_READ_TIMEOUT_MS: u64 = 10_000;
    /// `sweep-interval-ms`: 1 s. Every operation applies what is due at
    /// its own instant anyway (the batch prelude); the sweep only makes
    /// transitions happen without traffic, and 1 s keeps an idle carrier's
    /// lateness far below any horizon (the shortest, `challenge-lifetime`,
    /// is ≥ 5 s).
    pub const SWEEP_INTERVAL_MS: u64 = 1_000;
    /// `drain-timeout-ms`: 10 s for the whole shutdown, the same as a
    /// systemd stop is usually given before SIGKILL (90 s) with room to
    /// spare; in-flight operations take milliseconds.
    pub const DRAIN_TIMEOUT_MS: u64 = 10_000;
}

/// The HTTP/2 settings of the TLS/TCP binding (`PROTOCOL.md` §5b), fixed
/// by the build. The per-connection bounds an operator sets are the
/// `[limits]` both bindings share (`max-connections` counts both,
/// `max-streams-per-connection` is HTTP/2's `MAX_CONCURRENT_STREAMS`,
/// `stream-read-timeout-ms` bounds the TLS handshake and every frame).
pub mod h2 {
    /// Each stream's receive window: 256 KiB, about three maximal
    /// `submit` frames in flight per stream; a stream that is not read
    /// (a slow operation) holds no more than this.
    pub const STREAM_WINDOW: u32 = 256 << 10;
    /// The connection's receive window: 1 MiB, four streams' worth; what
    /// one connection can make the carrier buffer, at most.
    pub const CONNECTION_WINDOW: u32 = 1 << 20;
    /// The largest header list a client may send: 16 KiB. A request
    /// carries a method, a path and an authority; the frames travel in
    /// the body.
    pub const MAX_HEADER_LIST: u32 = 16 << 10;
    /// After an `accept` error (out of file descriptors: `EMFILE`), the
    /// listener waits 50 ms before the next accept instead of spinning;
    /// connections that close in the meantime give descriptors back.
    pub const ACCEPT_ERROR_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
}

/// The defaults of `[limits.meters]`: `(per-second, burst)` budgets,
/// sized to the calibration of this machine type (about 7 000
/// registrations/s and 50 000+ deposits/s per core).
pub mod meters {
    /// `unknown-address`: 2 000/s, burst 4 000, for all registration-side
    /// traffic naming rkids without a binding together: below the ~7 000
    /// proof verifications/s a core can do, so a flood of unknown rkids
    /// cannot take a core (§4.4 guarantee 3).
    pub const UNKNOWN_ADDRESS: (u32, u32) = (2_000, 4_000);
    /// `held-binding`: 20/s, burst 100, per held binding for
    /// `register`/`rebind` (each costs a seal and two verifications; a
    /// recipient rebinds rarely).
    pub const HELD_BINDING: (u32, u32) = (20, 100);
    /// `queue`: 2 000/s, burst 10 000 submissions per queue; doubled, each
    /// held binding's `collect`/`conclude` budget (`PROTOCOL.md` §9a: a
    /// challenge and a proof per deposit the queue admits).
    pub const QUEUE: (u32, u32) = (2_000, 10_000);
    /// `shared-submission`: 50 000/s, burst 100 000 submissions above a
    /// queue's floor, all queues together: the calibrated deposit rate.
    pub const SHARED_SUBMISSION: (u32, u32) = (50_000, 100_000);
}

/// Most operations in one group-commit batch: bounds the latency a batch
/// adds (1 024 × ~20 µs of engine work ≈ 20 ms at worst) and the memory a
/// write transaction holds (1 024 maximal envelopes ≈ 88 MiB).
pub const MAX_BATCH: usize = 1_024;

/// Committed batches that may wait for the syncer besides the group it is
/// syncing: bounds what is visible before it is durable to 4 batches,
/// while letting the writer build the next batches during an fsync (at
/// ~2 ms per fdatasync, 4 batches cover a slow sync of ~8 ms).
pub const SYNC_DEPTH: usize = 4;

/// How many pipelined submissions may await their verdicts on one
/// `submit-stream` before the server stops reading further items: 256
/// maximal envelopes ≈ 22 MiB per stream at most.
pub const PIPELINE_DEPTH: usize = 256;

/// Most deposits one watch push reads at once: 64 maximal envelopes
/// (~88 KiB each) ≈ 5.5 MiB per push.
pub const WATCH_PAGE: usize = 64;

/// How many bytes of encoded frames the server gathers before it writes
/// them (256 KiB): a collect page or a watch push is encoded into one
/// buffer and written with one write while it stays under this, which a
/// page of small envelopes does (256 deposits of ~1 KiB); a page of large
/// ones (up to 256 × ~88 KiB ≈ 22 MiB) is written whenever the buffer
/// reaches it, so the buffer never holds more than this plus one frame.
pub const WRITE_CHUNK: usize = 256 * 1024;

/// How far the wall clock may drift from the carrier's steady clock before
/// the divergence is reported as a step (ms): 1 s. NTP slews at most
/// 500 ppm, i.e. 0.5 ms per second, so only a step gets this far between
/// two readings.
pub const STEP_TOLERANCE_MS: i64 = 1_000;

/// Shortest interval between two writes of the clock's high-water mark
/// (ms): 10 s. A wall clock that went back while the carrier was down
/// therefore extends nothing decided against the later instant by more
/// than 10 s, against one fsync'd file write per 10 s.
pub const PERSIST_EVERY_MS: Ms = 10_000;

/// A start gap longer than this is logged as a warning (ms): one hour, the
/// shortest downtime an operator would want to hear about.
pub const LONG_GAP_MS: Ms = 3_600_000;

/// The operator's HTTP endpoint.
pub mod http {
    use std::time::Duration;

    /// How long a `/readyz` result is reused: 1 s, so probes cannot add
    /// more than one empty commit (one fsync) per second.
    pub const READY_CACHE: Duration = Duration::from_secs(1);
    /// Longest wait for the writability check: 2 s, twice a slow fsync
    /// burst, well inside a probe's usual 5 s timeout.
    pub const READY_TIMEOUT: Duration = Duration::from_secs(2);
    /// Most HTTP connections served at once (more wait in the kernel
    /// backlog): 32, plenty for a scraper and a browser.
    pub const MAX_CONNECTIONS: usize = 32;
    /// Longest wait for a request's headers: 5 s (the slowloris bound of a
    /// loopback endpoint).
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
    /// Minutes of verdict history the status page charts: one hour, one
    /// slot per minute (fixed memory: 60 × the ~40 verdict series × 8 B).
    pub const HISTORY_MINUTES: usize = 60;
}

/// The PostgreSQL store (`[store.postgres]`, `PROTOCOL.md` §13).
pub mod postgres {
    /// Reader connections per node: status, watch pages and challenges
    /// read outside the writer; eight covers a node's blocking pool with
    /// room (the writer and the listener have a connection each besides,
    /// so a database serves `nodes × (pool-size + 2)` connections).
    pub const POOL_SIZE: u32 = 8;
    /// Longest wait for a connection: long enough for a loaded database,
    /// short enough that a dead host is reported well within a client's
    /// 30 s answer timeout.
    pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
    /// Longest a write transaction waits for a lock (a queue's, once its
    /// operation was put off three times; the pool's; the tombstone gate):
    /// another node's transaction holds it for one group commit
    /// (milliseconds); a lock held for ten seconds is a node that died
    /// mid-transaction, which the database notices and rolls back.
    pub const LOCK_TIMEOUT_MS: u64 = 10_000;
    /// Longest a `COMMIT` may wait for its confirmation (a synchronous
    /// standby): after it the outcome is unknown and the carrier answers
    /// `unavailable`; a third of a client's answer timeout.
    pub const COMMIT_TIMEOUT_MS: u64 = 10_000;
    /// LISTEN/NOTIFY on: PostgreSQL has it, and a watch on one node is
    /// pushed what another admits at once rather than at its next re-read.
    pub const NOTIFY: bool = true;
    /// Largest offset between a node's clock and the database's before the
    /// node stops serving what depends on time (`PROTOCOL.md` §13, "One
    /// clock"): NTP keeps hosts within milliseconds, so two seconds is a
    /// clock that is wrong, not one that drifts; and a status or a watch
    /// push judged two seconds off is still within the answer timeouts.
    pub const MAX_CLOCK_OFFSET_MS: u64 = 2_000;
}

/// The control socket (`<data-dir>/control.sock`).
pub mod control {
    use std::time::Duration;

    /// Longest wait for the request line: 5 s.
    pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    /// Longest request line, bytes: 64, longer than any command
    /// (`backup`, `stats`).
    pub const MAX_REQUEST: usize = 64;
}

/// The horizon counts of the status page and `admin stats`.
pub mod horizons {
    use rltp_proofs::Ms;

    /// How far ahead the due counts look: 24 h = 86 400 000 ms.
    pub const WINDOW_MS: Ms = 24 * 3_600_000;
    /// Most due-index entries one reading examines: 100 000 (a few
    /// milliseconds of index reads); beyond it the counts are lower bounds.
    pub const SCAN_LIMIT: usize = 100_000;
}

/// How long past the drain deadline a shutdown waits for the QUIC
/// service to finish its own steps, each of which ends at the deadline
/// (connections still draining aborted and logged, the endpoint closed),
/// before aborting the service itself: 500 ms. Both bounds at the same
/// instant raced, and on a loaded machine the outer one could abort the
/// service before it said what it abandoned (e2e
/// `shutdown_takes_at_most_drain_timeout_in_total`, once in 8 runs).
pub const DRAIN_BACKSTOP: Duration = Duration::from_millis(500);

/// A client command's default `--give-up-after` for operations other than
/// `send` (which uses the carrier's `give-up-horizon`): one minute per
/// request, long enough to ride out a carrier restart.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// Defaults of `[transport]`: the client library's, one home for both
/// ends ([`rltp_quic::defaults::transport`]).
pub use rltp_quic::defaults::transport;
