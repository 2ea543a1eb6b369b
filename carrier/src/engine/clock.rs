//! Time is injected (§5a.9 horizons span days): the engine reads a
//! [`Clock`], tests drive a [`ManualClock`].

use rltp_storage::Ms;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// Now, in ms since the Unix epoch.
    fn now(&self) -> Ms;
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
