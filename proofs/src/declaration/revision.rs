//! The generic revision rule (§4.4): what a verified, accepted declaration
//! does to the one held per (issuer, role).

// The generic revision rule
// ---------------------------------------------------------------------------

/// What the generic revision rule (§4.4, the pattern of Visibility §6.4)
/// does with an incoming declaration for one (issuer, role).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionOutcome {
    /// Nothing held: record it.
    Install,
    /// A higher revision than the held one: it replaces it (prospectively,
    /// never retroactively for a running act).
    Supersedes,
    /// The same revision with a JCS-identical payload: nothing changes.
    Idempotent,
    /// The same revision with a different payload: an equivocation error —
    /// reject, keep state.
    Equivocation,
    /// A lower revision: rejected, so a delayed or redelivered older
    /// declaration never rolls a value back.
    Rollback,
}

impl RevisionOutcome {
    /// Whether the incoming declaration becomes the recorded one.
    pub fn records(self) -> bool {
        matches!(self, RevisionOutcome::Install | RevisionOutcome::Supersedes)
    }

    /// Whether the incoming declaration is rejected (equivocation or rollback).
    pub fn is_rejection(self) -> bool {
        matches!(
            self,
            RevisionOutcome::Equivocation | RevisionOutcome::Rollback
        )
    }
}

/// The generic revision rule (§4.4): `held` is the recorded
/// (revision, JCS of payload) for this (issuer, role), if any; `incoming`
/// the new one. Higher wins; equal and JCS-identical is idempotent; equal
/// and different is an equivocation; lower is a rollback.
pub fn revision_rule(held: Option<(u64, &[u8])>, incoming: (u64, &[u8])) -> RevisionOutcome {
    let Some((held_revision, held_payload)) = held else {
        return RevisionOutcome::Install;
    };
    let (revision, payload) = incoming;
    match revision.cmp(&held_revision) {
        std::cmp::Ordering::Greater => RevisionOutcome::Supersedes,
        std::cmp::Ordering::Less => RevisionOutcome::Rollback,
        std::cmp::Ordering::Equal if payload == held_payload => RevisionOutcome::Idempotent,
        std::cmp::Ordering::Equal => RevisionOutcome::Equivocation,
    }
}
