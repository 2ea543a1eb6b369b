//! Repeated failures logged at a bounded rate: a full disk fails every
//! write for as long as it lasts, and one log line per failure (thousands a
//! second under load) would bury everything else and fill the log's own
//! disk (issue 27). Each kind of failure gets a [`LogThrottle`]: the first
//! line is logged at once, the next ones at most once per interval, each
//! saying how many it stands for.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One line per `every` for one kind of repeated failure (module docs).
#[derive(Debug)]
pub struct LogThrottle {
    every: Duration,
    /// When a line was last let through, and how many were held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogThrottle {
    /// A throttle letting one line through per `every`.
    pub const fn new(every: Duration) -> LogThrottle {
        LogThrottle {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// Whether a line may be logged at `now`: `Some(n)`, `n` the lines held
    /// back since the last one let through (to be said in this one), or
    /// `None`: hold this one back (it is counted).
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = crate::failure::lock(&self.state);
        let (last, held) = &mut *state;
        match last {
            Some(at) if now.saturating_duration_since(*at) < self.every => {
                *held += 1;
                None
            }
            _ => {
                *last = Some(now);
                Some(std::mem::take(held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_counting_the_ones_held_back() {
        let throttle = LogThrottle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(throttle.admit(at(0)), Some(0));
        assert_eq!(throttle.admit(at(1)), None);
        assert_eq!(throttle.admit(at(9_999)), None);
        assert_eq!(throttle.admit(at(10_000)), Some(2));
        assert_eq!(throttle.admit(at(10_001)), None);
        assert_eq!(throttle.admit(at(30_000)), Some(1));
        assert_eq!(throttle.admit(at(40_000)), Some(0));
    }
}
