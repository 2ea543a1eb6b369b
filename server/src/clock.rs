//! The shell's clocks. The engine reads none: the shell reads a [`Clock`]
//! once per decision (once per batch in the writer) and passes that `now`
//! (§5a.9 horizons span days). Tests drive a [`ManualClock`]; a serving
//! carrier reads a [`SteadyClock`], which wall-clock steps do not move
//! (`PROTOCOL.md` §11), behind `server::clock::ServerClock`.

use rltp_proofs::Ms;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// Now, in ms since the Unix epoch.
    fn now(&self) -> Ms;
    /// What the test clock hook adds to every reading (`PROTOCOL.md` §11),
    /// ms: 0 but under the hook. A shared database's clock is shifted by
    /// it too wherever the carrier reads that clock (the writer's batch
    /// instant, the clock comparison: `PROTOCOL.md` §13), so that the hook
    /// moves every clock of a test carrier alike.
    fn test_offset(&self) -> Ms {
        0
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Ms {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `start` ms.
    pub fn new(start: Ms) -> ManualClock {
        ManualClock(AtomicU64::new(start))
    }

    /// Sets the reading to `now` ms (may step backwards, to test steps).
    pub fn set(&self, now: Ms) {
        self.0.store(now, Ordering::SeqCst);
    }

    /// Advances the reading by `ms`.
    pub fn advance(&self, ms: Ms) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Ms {
        self.0.load(Ordering::SeqCst)
    }
}

/// A monotonic reading: milliseconds since this clock was made, from
/// [`std::time::Instant`] (never steps, never goes back).
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock(std::time::Instant);

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock(std::time::Instant::now())
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Ms {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

pub use crate::defaults::STEP_TOLERANCE_MS;

/// The carrier's time under wall-clock steps (`PROTOCOL.md` §11): wall
/// time at start (never earlier than `floor`, the last instant the carrier
/// is known to have used), then advanced **only by the monotonic clock**.
/// A step of the wall clock while the carrier runs (an NTP step, `date
/// -s`, a VM resume) therefore moves no horizon: a forward step gives up
/// nothing early, a backward step extends nothing and revives no expired
/// challenge. Each reading compares the two clocks; a divergence that
/// moved by more than [`STEP_TOLERANCE_MS`] since it was last reported is
/// counted ([`SteadyClock::steps`]) and logged as a warning with the
/// offset, so a step is never silent. The carrier re-reads the wall
/// clock at its next start.
pub struct SteadyClock {
    wall: Arc<dyn Clock>,
    monotonic: Arc<dyn Clock>,
    anchor: Ms,
    monotonic_at_anchor: Ms,
    reported_offset: AtomicI64,
    steps: AtomicU64,
}

impl std::fmt::Debug for SteadyClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SteadyClock")
            .field("anchor", &self.anchor)
            .field("offset_ms", &self.offset_ms())
            .field("steps", &self.steps())
            .finish_non_exhaustive()
    }
}

/// `a − b` as a signed difference of two instants (ms), saturating.
fn signed_diff(a: Ms, b: Ms) -> i64 {
    if a >= b {
        i64::try_from(a - b).unwrap_or(i64::MAX)
    } else {
        i64::try_from(b - a).map_or(i64::MIN, |d| -d)
    }
}

impl SteadyClock {
    /// Starts at `max(wall.now(), floor)` (ms since the epoch) and advances
    /// with `monotonic`. A wall clock behind `floor` (a backward step while
    /// the carrier was down) is reported at once.
    pub fn start(wall: Arc<dyn Clock>, monotonic: Arc<dyn Clock>, floor: Ms) -> SteadyClock {
        let now = wall.now();
        let anchor = now.max(floor);
        let offset = signed_diff(now, anchor);
        if offset != 0 {
            tracing::warn!(
                wall_ms = now,
                carrier_ms = anchor,
                offset_ms = offset,
                "the wall clock is behind the last instant this carrier used: \
                 time resumes from that instant (no horizon moves back)"
            );
        }
        SteadyClock {
            monotonic_at_anchor: monotonic.now(),
            wall,
            monotonic,
            anchor,
            reported_offset: AtomicI64::new(offset),
            steps: AtomicU64::new(u64::from(offset != 0)),
        }
    }

    /// The system wall clock and [`MonotonicClock`], not below `floor`.
    pub fn system(floor: Ms) -> SteadyClock {
        SteadyClock::start(
            Arc::new(SystemClock),
            Arc::new(MonotonicClock::default()),
            floor,
        )
    }

    /// Wall-clock steps noticed so far (including one at start).
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::SeqCst)
    }

    /// The last reported divergence, wall − carrier time (ms): positive
    /// after a forward step of the wall clock.
    pub fn offset_ms(&self) -> i64 {
        self.reported_offset.load(Ordering::SeqCst)
    }
}

impl Clock for SteadyClock {
    fn now(&self) -> Ms {
        let elapsed = self
            .monotonic
            .now()
            .saturating_sub(self.monotonic_at_anchor);
        let now = self.anchor.saturating_add(elapsed);
        let offset = signed_diff(self.wall.now(), now);
        let reported = self.reported_offset.load(Ordering::SeqCst);
        if offset.abs_diff(reported) > STEP_TOLERANCE_MS.unsigned_abs()
            && self
                .reported_offset
                .compare_exchange(reported, offset, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.steps.fetch_add(1, Ordering::SeqCst);
            tracing::warn!(
                offset_ms = offset,
                previous_offset_ms = reported,
                carrier_ms = now,
                "the wall clock stepped: horizons keep running on the monotonic clock \
                 (nothing is given up early or kept late); the wall clock is read again at \
                 the next start"
            );
        }
        now
    }
}
