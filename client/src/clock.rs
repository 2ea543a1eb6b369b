//! The client's wall clock, for schedules measured against a carrier's
//! horizons (the watch refresh of `collect --watch`, `PROTOCOL.md` §10).
//!
//! Retries, backoff and the §6.1 reports run on tokio's monotonic clock
//! ([`super::retry`]); a schedule the carrier judges by *its* clock (the
//! orphan horizon, measured from the last collection) is kept on the wall
//! clock instead, checked every [`WallClock::poll_interval`], so that time
//! a suspended laptop sleeps through still counts.
//!
//! **Test hook, never for production:** when [`TEST_CLOCK_ENV`]
//! (`RLTP_TEST_CLOCK_FILE`) names a file, every reading adds the decimal
//! millisecond offset it holds — the same file and rule as the carrier's
//! (`PROTOCOL.md` §11), so a test moves client and carrier through
//! simulated days together — and the poll interval shrinks to 100 ms.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use rltp_quic::clock_hook::{TEST_CLOCK_ENV, read_ms};

pub use crate::defaults::{POLL, TEST_POLL};

/// Wall-clock milliseconds since the Unix epoch, plus the test hook's
/// offset when it is set.
#[derive(Debug)]
pub struct WallClock {
    offset_file: Option<PathBuf>,
    offset: AtomicU64,
}

impl WallClock {
    /// The system wall clock, with the test hook if [`TEST_CLOCK_ENV`] is set.
    pub fn from_env() -> WallClock {
        WallClock::with_offset_file(std::env::var_os(TEST_CLOCK_ENV).map(PathBuf::from))
    }

    /// The system wall clock shifted by the offset in `file` (re-read at
    /// every reading; the last value read is kept while it is unreadable).
    pub fn with_offset_file(file: Option<PathBuf>) -> WallClock {
        WallClock {
            offset_file: file,
            offset: AtomicU64::new(0),
        }
    }

    /// Whether the test hook is set.
    pub fn is_test_hook(&self) -> bool {
        self.offset_file.is_some()
    }

    /// Now, ms since the Unix epoch (plus the hook's offset).
    pub fn now_ms(&self) -> u64 {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let offset = match &self.offset_file {
            None => 0,
            Some(path) => match read_ms(path) {
                Some(offset) => {
                    self.offset.store(offset, Ordering::Relaxed);
                    offset
                }
                None => self.offset.load(Ordering::Relaxed),
            },
        };
        wall.saturating_add(offset)
    }

    /// How often a wall-clock schedule should be checked: [`POLL`], or
    /// [`TEST_POLL`] under the hook (simulated days pass in jumps).
    pub fn poll_interval(&self) -> Duration {
        if self.is_test_hook() { TEST_POLL } else { POLL }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_adds_the_offset_and_keeps_the_last_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("offset");
        let clock = WallClock::with_offset_file(Some(file.clone()));
        assert!(clock.is_test_hook());
        assert_eq!(clock.poll_interval(), TEST_POLL);
        let plain = WallClock::with_offset_file(None);
        std::fs::write(&file, "86400000\n").unwrap();
        let shifted = clock.now_ms();
        let base = plain.now_ms();
        assert!(shifted >= base + 86_400_000 - 1_000 && shifted <= base + 86_400_000 + 1_000);
        std::fs::remove_file(&file).unwrap();
        assert!(
            clock.now_ms() >= plain.now_ms() + 86_400_000 - 1_000,
            "kept"
        );
        assert_eq!(plain.poll_interval(), POLL);
    }
}
