//! A node's own clock against the shared database's (`PROTOCOL.md` §13,
//! "One clock").
//!
//! The writer stamps and judges every horizon on the database's clock
//! ([`rltp_storage::WriteTxn::store_now`]), so no node's clock can give a
//! deposit up early or keep one late. What a node still decides on its
//! own clock is read-only or node-local: a sender's status, which held
//! deposits a watch push serves, challenges and their expiry, the meters.
//! Those stay within `[store.postgres] max-clock-offset-ms` of the
//! database's time only while the node's clock does, so the node compares
//! the two at start and every `sweep-interval-ms` ([`ClockCheck::compare`]).
//! Beyond the bound the node is **not ready**: `/readyz` answers 503
//! naming both clocks, `rltp_carrier_clock_offset_exceeded` is 1, a log
//! line names both clocks, and every operation except `declaration` is
//! answered `unavailable` with [`ClockCheck::refusal`]'s reason, until a
//! comparison finds the offset within bound again.
//!
//! A store one carrier owns has no database clock
//! ([`rltp_storage::Store::database_now`] is `None`): its own clock is the
//! one clock (`PROTOCOL.md` §11) and this check is off.

use crate::clock::Clock;
use rltp_proofs::Ms;
use rltp_proofs::declaration::rfc3339_utc;
use rltp_storage::{Store, StoreResult};
use std::sync::{Mutex, PoisonError};

/// One comparison of the two clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comparison {
    /// The node's clock (ms since the epoch), halfway through the read.
    pub node_ms: Ms,
    /// The database's clock (ms since the epoch).
    pub database_ms: Ms,
    /// `node − database`, ms: positive when the node's clock is ahead.
    pub offset_ms: i64,
}

impl Comparison {
    /// `node` against `database`.
    pub fn of(node_ms: Ms, database_ms: Ms) -> Comparison {
        let offset_ms = if node_ms >= database_ms {
            i64::try_from(node_ms - database_ms).unwrap_or(i64::MAX)
        } else {
            i64::try_from(database_ms - node_ms).map_or(i64::MIN, |d| -d)
        };
        Comparison {
            node_ms,
            database_ms,
            offset_ms,
        }
    }

    /// Both clocks and the offset, for people.
    fn describe(&self) -> String {
        format!(
            "this node's clock reads {} ({} ms), the database's {} ({} ms): {} by {} ms",
            rfc3339_utc(self.node_ms),
            self.node_ms,
            rfc3339_utc(self.database_ms),
            self.database_ms,
            if self.offset_ms >= 0 {
                "ahead"
            } else {
                "behind"
            },
            self.offset_ms.unsigned_abs()
        )
    }
}

/// What the node knows of the two clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not compared yet.
    Unknown,
    /// The store has no clock of its own (one carrier owns it).
    Own,
    /// The last comparison.
    Compared(Comparison),
}

/// The node's view of its clock against the database's.
#[derive(Debug)]
pub struct ClockCheck {
    bound_ms: u64,
    state: Mutex<State>,
}

impl ClockCheck {
    /// A check with `max-clock-offset-ms` = `bound_ms`, not compared yet.
    pub fn new(bound_ms: u64) -> ClockCheck {
        ClockCheck {
            bound_ms,
            state: Mutex::new(State::Unknown),
        }
    }

    /// Reads the store's clock between two readings of `clock` and records
    /// the comparison (logged when the offset crosses the bound, either
    /// way). A failed read keeps the last comparison.
    ///
    /// # Errors
    /// The store's, if its clock cannot be read.
    pub fn compare<S: Store + ?Sized>(&self, store: &S, clock: &dyn Clock) -> StoreResult<()> {
        let before = clock.now();
        let database = store.database_now()?;
        let after = clock.now();
        match database {
            None => self.set(State::Own),
            Some(database_ms) => {
                // The test hook shifts both clocks alike (`Clock::test_offset`).
                let database_ms = database_ms.saturating_add(clock.test_offset());
                let node_ms = before + after.saturating_sub(before) / 2;
                self.record(Comparison::of(node_ms, database_ms));
            }
        }
        Ok(())
    }

    /// Records `comparison`, logging a crossing of the bound.
    pub fn record(&self, comparison: Comparison) {
        let was = self.exceeded();
        self.set(State::Compared(comparison));
        let is = self.exceeded() == Some(true);
        let (node_clock, database_clock) = (
            rfc3339_utc(comparison.node_ms),
            rfc3339_utc(comparison.database_ms),
        );
        if is && was != Some(true) {
            tracing::error!(
                node_clock,
                database_clock,
                offset_ms = comparison.offset_ms,
                max_clock_offset_ms = self.bound_ms,
                "this node's clock differs from the database's by more than \
                 max-clock-offset-ms: the node is not ready and serves nothing that depends on \
                 time (fix its time: NTP)"
            );
        } else if !is && was != Some(false) {
            tracing::info!(
                node_clock,
                database_clock,
                offset_ms = comparison.offset_ms,
                max_clock_offset_ms = self.bound_ms,
                "this node's clock is within max-clock-offset-ms of the database's"
            );
        }
    }

    fn set(&self, state: State) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }

    fn state(&self) -> State {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The last offset measured (`node − database`, ms), if any.
    pub fn offset_ms(&self) -> Option<i64> {
        match self.state() {
            State::Compared(c) => Some(c.offset_ms),
            _ => None,
        }
    }

    /// Whether the last comparison found the offset beyond the bound
    /// (`None`: no database clock, or not compared yet).
    pub fn exceeded(&self) -> Option<bool> {
        match self.state() {
            State::Compared(c) => Some(c.offset_ms.unsigned_abs() > self.bound_ms),
            _ => None,
        }
    }

    /// Why the node serves nothing that depends on time, if it does not:
    /// its clock beyond the bound, or never compared.
    pub fn refusal(&self) -> Option<String> {
        match self.state() {
            State::Own => None,
            State::Unknown => Some(
                "this carrier node has not yet compared its clock with the database's; \
                 retry shortly"
                    .to_owned(),
            ),
            State::Compared(c) if c.offset_ms.unsigned_abs() > self.bound_ms => Some(format!(
                "this carrier node is not ready: {}, more than max-clock-offset-ms = {}; \
                 retry through another node (the operator must fix this node's time)",
                c.describe(),
                self.bound_ms
            )),
            State::Compared(_) => None,
        }
    }

    /// The `/readyz` line (after `clock `) and whether it passes; `None`
    /// for a store with no clock of its own (no line).
    pub fn readyz(&self) -> Option<(bool, String)> {
        match self.state() {
            State::Own => None,
            State::Unknown => Some((false, "not compared with the database's yet".to_owned())),
            State::Compared(c) => {
                let ok = c.offset_ms.unsigned_abs() <= self.bound_ms;
                let verdict = if ok { "ok" } else { "NOT OK" };
                Some((
                    ok,
                    format!(
                        "{verdict}: {}; max-clock-offset-ms {}",
                        c.describe(),
                        self.bound_ms
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_the_bound_the_node_refuses_naming_both_clocks() {
        let check = ClockCheck::new(2_000);
        assert!(check.refusal().is_some(), "not compared yet");
        let db = 1_800_000_000_000;
        check.record(Comparison::of(db + 1_500, db));
        assert_eq!(check.refusal(), None);
        assert_eq!(check.exceeded(), Some(false));
        assert_eq!(check.offset_ms(), Some(1_500));
        let ahead = db + 3 * 86_400_000;
        check.record(Comparison::of(ahead, db));
        let refusal = check.refusal().unwrap_or_default();
        assert!(refusal.contains(&rfc3339_utc(ahead)), "{refusal}");
        assert!(refusal.contains(&rfc3339_utc(db)), "{refusal}");
        assert!(refusal.contains("ahead by 259200000 ms"), "{refusal}");
        assert!(refusal.contains("max-clock-offset-ms = 2000"), "{refusal}");
        let (ok, line) = check.readyz().unwrap_or_default();
        assert!(!ok);
        assert!(line.contains(&rfc3339_utc(ahead)), "{line}");
        check.record(Comparison::of(db - 3 * 86_400_000, db));
        assert!(
            check
                .refusal()
                .unwrap_or_default()
                .contains("behind by 259200000 ms")
        );
        assert_eq!(check.offset_ms(), Some(-259_200_000));
        check.record(Comparison::of(db - 2_000, db));
        assert_eq!(check.refusal(), None, "back within bound");
        assert_eq!(check.readyz().map(|(ok, _)| ok), Some(true));
    }
}
