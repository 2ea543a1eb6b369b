//! The serving carrier's clock (`PROTOCOL.md` §11).
//!
//! - A [`SteadyClock`]: wall time at start, then the monotonic clock, so
//!   a wall-clock step while serving moves no horizon (and is logged).
//! - Its start is never earlier than the last instant this carrier
//!   recorded: the sweeper writes that instant to `<data-dir>/clock`
//!   ([`HIGH_WATER_FILE`]) at most every [`PERSIST_EVERY_MS`], through a
//!   temporary file, fsync and rename. A wall clock that went back while
//!   the carrier was down therefore extends nothing that was decided
//!   against the later instant by more than that interval.
//! - A start after a gap (downtime, or a forward step while down: the two
//!   cannot be told apart) applies the horizons that came due in the gap,
//!   each at its own instant; the gap is logged at start, as a warning
//!   when it is longer than [`LONG_GAP_MS`].
//! - **Test hook, never for production:** when the environment variable
//!   [`TEST_CLOCK_ENV`] (`RLTP_TEST_CLOCK_FILE`) names a file, every
//!   reading adds the decimal millisecond offset that file holds (re-read
//!   at every reading; a missing or unreadable file keeps the last offset
//!   read, 0 at first). The crash-torture harness uses it to let days of
//!   horizons pass in seconds. The carrier warns at start when it is set.

use crate::clock::{Clock, SteadyClock};
use rltp_proofs::Ms;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The high-water file in the data directory: decimal ms since the epoch on
/// the first line; the lines after it (the data dir's `store-id`, see
/// [`super::lineage`]) are kept as they are.
pub use crate::data_dir::CLOCK as HIGH_WATER_FILE;
pub use crate::defaults::{LONG_GAP_MS, PERSIST_EVERY_MS};
pub use rltp_quic::clock_hook::{TEST_CLOCK_ENV, read_ms};

/// The clock a serving carrier's engine reads.
#[derive(Debug)]
pub struct ServerClock {
    steady: SteadyClock,
    high_water: PathBuf,
    /// The lines after the instant, rewritten with every instant.
    tag: String,
    persisted: AtomicU64,
    test_offset: Option<(PathBuf, AtomicU64)>,
}

/// The instant the data dir's high-water file records, if any.
pub fn recorded(data_dir: &Path) -> Option<Ms> {
    read_ms(&data_dir.join(HIGH_WATER_FILE))
}

/// The lines of the high-water file after its instant.
fn read_tag(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.split_once('\n').map(|(_, rest)| rest.to_owned()))
        .unwrap_or_default()
}

impl ServerClock {
    /// The clock for the carrier whose data directory is `data_dir`, with
    /// the test hook if [`TEST_CLOCK_ENV`] is set.
    pub fn start(data_dir: &Path) -> ServerClock {
        ServerClock::with_test_offset(
            data_dir,
            std::env::var_os(TEST_CLOCK_ENV).map(PathBuf::from),
        )
    }

    /// [`ServerClock::start`] with the test hook's offset file given
    /// explicitly (`None`: no hook).
    pub fn with_test_offset(data_dir: &Path, offset_file: Option<PathBuf>) -> ServerClock {
        let high_water = data_dir.join(HIGH_WATER_FILE);
        let recorded = read_ms(&high_water);
        let tag = read_tag(&high_water);
        let steady = SteadyClock::system(recorded.unwrap_or(0));
        let now = steady.now();
        if let Some(recorded) = recorded {
            let gap_ms = now.saturating_sub(recorded);
            if gap_ms > LONG_GAP_MS {
                tracing::warn!(
                    gap_ms,
                    "the carrier last recorded its time long ago (downtime, or the wall clock \
                     stepped forward while it was down): horizons that came due in the gap are \
                     applied now, each at its own instant"
                );
            } else {
                tracing::info!(gap_ms, "time since the carrier last recorded its time");
            }
        }
        let test_offset = offset_file.map(|path| {
            tracing::warn!(
                file = %path.display(),
                "{TEST_CLOCK_ENV} is set: a TEST clock hook shifts this carrier's time by the \
                 offset in that file; never use it in production"
            );
            (path, AtomicU64::new(0))
        });
        let clock = ServerClock {
            steady,
            high_water,
            tag,
            persisted: AtomicU64::new(0),
            test_offset,
        };
        clock.persist_now(now);
        clock
    }

    /// Wall-clock steps noticed since start.
    pub fn steps(&self) -> u64 {
        self.steady.steps()
    }

    /// Records the current instant as the high-water mark, unless one was
    /// recorded less than [`PERSIST_EVERY_MS`] ago (the sweeper calls this
    /// every interval; blocking file I/O). Failures are logged and retried
    /// at the next call.
    pub fn persist(&self) {
        let now = self.steady.now();
        if now.saturating_sub(self.persisted.load(Ordering::SeqCst)) >= PERSIST_EVERY_MS {
            self.persist_now(now);
        }
    }

    fn persist_now(&self, now: Ms) {
        let tmp = self.high_water.with_extension("tmp");
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| {
                f.write_all(format!("{now}\n{}", self.tag).as_bytes())?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, &self.high_water));
        match written {
            Ok(()) => self.persisted.store(now, Ordering::SeqCst),
            Err(e) => tracing::warn!(error = %e, "cannot record the carrier's time"),
        }
    }
}

impl Clock for ServerClock {
    fn now(&self) -> Ms {
        self.steady.now().saturating_add(self.test_offset())
    }

    fn test_offset(&self) -> Ms {
        match &self.test_offset {
            None => 0,
            Some((path, last)) => match read_ms(path) {
                Some(offset) => {
                    last.store(offset, Ordering::SeqCst);
                    offset
                }
                None => last.load(Ordering::SeqCst),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_high_water_mark_is_recorded_and_respected() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let clock = ServerClock::with_test_offset(dir.path(), None);
        let recorded = read_ms(&dir.path().join(HIGH_WATER_FILE));
        assert!(recorded.is_some_and(|r| r <= clock.now()));
        // A recorded instant in the future (the wall clock went back while
        // the carrier was down): the next start resumes from it.
        let future = clock.now() + 3_600_000;
        std::fs::write(dir.path().join(HIGH_WATER_FILE), format!("{future}\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let restarted = ServerClock::with_test_offset(dir.path(), None);
        let now = restarted.now();
        assert!(
            (future..future + 60_000).contains(&now),
            "{now} vs {future}"
        );
        assert_eq!(restarted.steps(), 1);
    }

    #[test]
    fn the_test_hook_adds_the_offset_in_its_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let offset = dir.path().join("offset");
        let clock = ServerClock::with_test_offset(dir.path(), Some(offset.clone()));
        let base = clock.now();
        std::fs::write(&offset, "86400000\n").unwrap_or_else(|e| panic!("{e}"));
        let shifted = clock.now();
        assert!((base + 86_400_000..base + 86_460_000).contains(&shifted));
        // An unreadable file keeps the last offset read.
        std::fs::write(&offset, "garbage").unwrap_or_else(|e| panic!("{e}"));
        assert!(clock.now() >= shifted);
        // The recorded high-water mark never includes the test offset.
        clock.persist_now(clock.steady.now());
        let recorded = read_ms(&dir.path().join(HIGH_WATER_FILE)).unwrap_or(u64::MAX);
        assert!(recorded < base + 86_400_000);
    }
}
