//! The §5a.3 binding state table, as one data table.
//!
//! One `rkid` at one carrier is in exactly one [`State`]: `unbound`,
//! `live(g, P)`, `closing(g, P)` or `released(t)`. The table is entered
//! only by a request that already passed r1–r4 (syntax, admission,
//! possession, capacity) or by an internal horizon; every `(state, input,
//! guard)` point has exactly one [`Cell`] giving the outcome and the next
//! state. The runtime executes [`TABLE`] through [`transition`], and the
//! conformance tests iterate the same table against the shipped
//! `bindingLifecycle.cells` (seed 000: one transition table shared by
//! runtime and conformance checks).

use std::fmt;

/// The state of one `rkid` (§5a.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No binding, no tombstone.
    Unbound,
    /// `live(g, P)`.
    Live,
    /// `closing(g, P)`: the §5a.9 wind-up runs to a fixed deadline.
    Closing,
    /// `released(t)`: no binding; a binding tombstone records `t`.
    Released,
}

/// An input of the table (§5a.3). `release` is not an input: it happens
/// only inside the deadline transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Input {
    /// `register` or `rebind` (equivalent in effect; purpose selects no cell).
    RegisterRebind,
    /// `collect` or `conclude`.
    CollectConclude,
    /// `last_collection_at + orphan-horizon` passed with no collection.
    OrphanExpiry,
    /// The wind-up deadline arrived.
    Deadline,
    /// The tombstone store exceeds `max-binding-tombstones` and this is the
    /// longest-released tombstone.
    Eviction,
}

/// The guard of a cell: how the proof's `g′`/`P′` compare with the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Guard {
    /// `g′ > g` (or `> t` in `released`).
    Gt,
    /// `g′ = g` and `P′ = P`.
    EqSame,
    /// `g′ = g` and `P′ ≠ P`.
    EqDiff,
    /// `g′ < g`.
    Lt,
    /// No guard.
    Any,
}

/// The outcome of a cell: a verdict told to a presenter, or an internal
/// transition with no presenter (one closed set, §5a.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `registered`.
    Registered,
    /// `registered(idempotent)`.
    RegisteredIdempotent,
    /// `rebound`.
    Rebound,
    /// `served` (collect/conclude under the bound principal).
    Served,
    /// `refused(no-such-queue)`.
    NoSuchQueue,
    /// `refused(stale-generation)` (carries the held generation).
    StaleGeneration,
    /// `wind-up begins` (internal).
    WindUpBegins,
    /// `obligations discharged + released` (internal, one transition).
    DischargedAndReleased,
    /// `evicted` (internal).
    Evicted,
    /// `cannot arise` (internal: the input has no meaning in this state).
    CannotArise,
}

impl Outcome {
    /// The spec's exact spelling (§5a.3 verdicts and internal transitions).
    pub const fn as_str(self) -> &'static str {
        match self {
            Registered => "registered",
            RegisteredIdempotent => "registered(idempotent)",
            Rebound => "rebound",
            Served => "served",
            NoSuchQueue => "refused(no-such-queue)",
            StaleGeneration => "refused(stale-generation)",
            WindUpBegins => "wind-up begins",
            DischargedAndReleased => "obligations discharged + released",
            Evicted => "evicted",
            CannotArise => "cannot arise",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl State {
    /// The spec's name of the state.
    pub const fn as_str(self) -> &'static str {
        match self {
            Unbound => "unbound",
            Live => "live",
            Closing => "closing",
            Released => "released",
        }
    }
}

impl Input {
    /// The name used by the shipped `bindingLifecycle` vector.
    pub const fn as_str(self) -> &'static str {
        match self {
            RegisterRebind => "register-rebind",
            CollectConclude => "collect-conclude",
            OrphanExpiry => "orphan-expiry",
            Deadline => "deadline",
            Eviction => "eviction",
        }
    }
}

impl Guard {
    /// The name used by the shipped `bindingLifecycle` vector.
    pub const fn as_str(self) -> &'static str {
        match self {
            Gt => "gt",
            EqSame => "eq-same",
            EqDiff => "eq-diff",
            Lt => "lt",
            Any => "any",
        }
    }

    /// The guard of a register/rebind with `(g′, P′)` against a record
    /// `(g, P)`; `None` record (unbound) compares as `Gt` (no recorded
    /// generation exists, so a first registration is accepted at any
    /// generation in the domain).
    pub fn of_registration(
        proof: (u64, &[u8; 32]),
        record: Option<(u64, Option<&[u8; 32]>)>,
    ) -> Guard {
        let Some((recorded, principal)) = record else {
            return Gt;
        };
        let (generation, presenter) = proof;
        match generation.cmp(&recorded) {
            std::cmp::Ordering::Greater => Gt,
            std::cmp::Ordering::Less => Lt,
            // A tombstone records no principal: equal generation never
            // exceeds it, same as a different principal.
            std::cmp::Ordering::Equal if principal == Some(presenter) => EqSame,
            std::cmp::Ordering::Equal => EqDiff,
        }
    }
}

/// One cell: `(state, input, guard) → (outcome, next state)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The state the `rkid` is in.
    pub state: State,
    /// The input.
    pub input: Input,
    /// The guard.
    pub guard: Guard,
    /// What happens.
    pub outcome: Outcome,
    /// The state after.
    pub next: State,
}

const fn cell(state: State, input: Input, guard: Guard, outcome: Outcome, next: State) -> Cell {
    Cell {
        state,
        input,
        guard,
        outcome,
        next,
    }
}

use Guard::{Any, EqDiff, EqSame, Gt, Lt};
use Input::{CollectConclude, Deadline, Eviction, OrphanExpiry, RegisterRebind};
use Outcome::{
    CannotArise, DischargedAndReleased, Evicted, NoSuchQueue, Rebound, Registered,
    RegisteredIdempotent, Served, StaleGeneration, WindUpBegins,
};
use State::{Closing, Live, Released, Unbound};

/// The whole §5a.3 outcome table: every `(state, input, guard)` point of
/// the domain exactly once. Register/rebind points carry the four
/// generation guards; every other input carries [`Guard::Any`].
///
/// `collect / conclude` under a principal other than the bound one is
/// `refused(no-such-queue)` in `live` and `closing` (§5a.3); that principal
/// check is the cell's precondition ("proof under `P`") and is applied by
/// [`transition`] before the table is read, so the table's `Served` cells
/// are reached only under the bound principal.
pub const TABLE: [Cell; 32] = [
    cell(Unbound, RegisterRebind, Gt, Registered, Live),
    cell(Unbound, RegisterRebind, EqSame, Registered, Live),
    cell(Unbound, RegisterRebind, EqDiff, Registered, Live),
    cell(Unbound, RegisterRebind, Lt, Registered, Live),
    cell(Unbound, CollectConclude, Any, NoSuchQueue, Unbound),
    cell(Unbound, OrphanExpiry, Any, CannotArise, Unbound),
    cell(Unbound, Deadline, Any, CannotArise, Unbound),
    cell(Unbound, Eviction, Any, CannotArise, Unbound),
    cell(Live, RegisterRebind, Gt, Rebound, Live),
    cell(Live, RegisterRebind, EqSame, RegisteredIdempotent, Live),
    cell(Live, RegisterRebind, EqDiff, StaleGeneration, Live),
    cell(Live, RegisterRebind, Lt, StaleGeneration, Live),
    cell(Live, CollectConclude, Any, Served, Live),
    cell(Live, OrphanExpiry, Any, WindUpBegins, Closing),
    cell(Live, Deadline, Any, CannotArise, Live),
    cell(Live, Eviction, Any, CannotArise, Live),
    cell(Closing, RegisterRebind, Gt, Rebound, Live),
    cell(Closing, RegisterRebind, EqSame, RegisteredIdempotent, Live),
    cell(Closing, RegisterRebind, EqDiff, StaleGeneration, Closing),
    cell(Closing, RegisterRebind, Lt, StaleGeneration, Closing),
    cell(Closing, CollectConclude, Any, Served, Closing),
    cell(Closing, OrphanExpiry, Any, CannotArise, Closing),
    cell(Closing, Deadline, Any, DischargedAndReleased, Released),
    cell(Closing, Eviction, Any, CannotArise, Closing),
    cell(Released, RegisterRebind, Gt, Registered, Live),
    cell(Released, RegisterRebind, EqSame, StaleGeneration, Released),
    cell(Released, RegisterRebind, EqDiff, StaleGeneration, Released),
    cell(Released, RegisterRebind, Lt, StaleGeneration, Released),
    cell(Released, CollectConclude, Any, NoSuchQueue, Released),
    cell(Released, OrphanExpiry, Any, CannotArise, Released),
    cell(Released, Deadline, Any, CannotArise, Released),
    cell(Released, Eviction, Any, Evicted, Unbound),
];

/// Looks up the cell for `(state, input, guard)`. Inputs other than
/// register/rebind ignore the guard (their cells carry [`Guard::Any`]).
///
/// Total over the domain: every point has exactly one cell (checked by
/// the tests), so this never returns `None` for a well-formed query;
/// `None` means a guard was given to an input that has none.
pub fn lookup(state: State, input: Input, guard: Guard) -> Option<&'static Cell> {
    let guard = if input == RegisterRebind { guard } else { Any };
    TABLE
        .iter()
        .find(|c| c.state == state && c.input == input && c.guard == guard)
}

/// The transition for a presenter's collect/conclude: a valid, fresh
/// proof under a principal other than the bound one is
/// `refused(no-such-queue)` and changes nothing (§5a.3 — no queue exists
/// under that principal); otherwise the table decides.
pub fn collect_conclude(state: State, bound_principal_matches: bool) -> (Outcome, State) {
    if matches!(state, Live | Closing) && !bound_principal_matches {
        return (NoSuchQueue, state);
    }
    transition(state, CollectConclude, Any)
}

/// `(outcome, next)` for `(state, input, guard)`; a point outside the
/// domain answers `cannot arise` and keeps the state.
pub fn transition(state: State, input: Input, guard: Guard) -> (Outcome, State) {
    lookup(state, input, guard).map_or((CannotArise, state), |c| (c.outcome, c.next))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATES: [State; 4] = [Unbound, Live, Closing, Released];
    const INPUTS: [Input; 5] = [
        RegisterRebind,
        CollectConclude,
        OrphanExpiry,
        Deadline,
        Eviction,
    ];
    const GUARDS: [Guard; 4] = [Gt, EqSame, EqDiff, Lt];

    /// Totality: exactly one cell per point of the domain.
    #[test]
    fn one_cell_per_point() {
        let mut points = 0;
        for state in STATES {
            for input in INPUTS {
                let guards: &[Guard] = if input == RegisterRebind {
                    &GUARDS
                } else {
                    &[Any]
                };
                for &guard in guards {
                    let matching = TABLE
                        .iter()
                        .filter(|c| c.state == state && c.input == input && c.guard == guard)
                        .count();
                    assert_eq!(matching, 1, "{state:?} {input:?} {guard:?}");
                    points += 1;
                }
            }
        }
        assert_eq!(points, TABLE.len());
    }

    #[test]
    fn guards_from_generations() {
        let p = [1u8; 32];
        let q = [2u8; 32];
        assert_eq!(Guard::of_registration((3, &p), Some((2, Some(&p)))), Gt);
        assert_eq!(Guard::of_registration((2, &p), Some((2, Some(&p)))), EqSame);
        assert_eq!(Guard::of_registration((2, &q), Some((2, Some(&p)))), EqDiff);
        assert_eq!(Guard::of_registration((1, &p), Some((2, Some(&p)))), Lt);
        assert_eq!(Guard::of_registration((2, &p), Some((2, None))), EqDiff);
        assert_eq!(Guard::of_registration((1, &p), None), Gt);
    }

    #[test]
    fn other_principal_is_no_such_queue() {
        assert_eq!(collect_conclude(Live, false), (NoSuchQueue, Live));
        assert_eq!(collect_conclude(Closing, false), (NoSuchQueue, Closing));
        assert_eq!(collect_conclude(Live, true), (Served, Live));
        assert_eq!(collect_conclude(Released, true), (NoSuchQueue, Released));
    }
}
