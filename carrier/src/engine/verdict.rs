//! The closed verdict sets of §5a.3 (registration, collection,
//! conclusion) and §5a.5 (submission), and the sender status of §5a.8/§6.1.
//! `Display` is the spec's exact spelling; retriability is marked here and
//! nowhere else (§4.4 guarantee 2).

use std::fmt;

/// §5a.5: the closed outcome set of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubmitVerdict {
    /// `admitted`: durable before this is answered.
    Admitted,
    /// `duplicate`: byte-identical to a deposit held now (s3).
    Duplicate,
    /// `refused(no-such-queue)` (s1).
    NoSuchQueue,
    /// `refused(bounds)` (s2).
    Bounds,
    /// `refused(admission-resource)` (s4), retriable.
    AdmissionResource,
    /// `refused(queue-saturated)` (s5), retriable.
    QueueSaturated,
    /// `refused(capacity)` (s6), retriable.
    Capacity,
}

impl SubmitVerdict {
    /// Every verdict, in s-order.
    pub const ALL: [SubmitVerdict; 7] = [
        SubmitVerdict::Admitted,
        SubmitVerdict::Duplicate,
        SubmitVerdict::NoSuchQueue,
        SubmitVerdict::Bounds,
        SubmitVerdict::AdmissionResource,
        SubmitVerdict::QueueSaturated,
        SubmitVerdict::Capacity,
    ];

    /// The spec's exact spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            SubmitVerdict::Admitted => "admitted",
            SubmitVerdict::Duplicate => "duplicate",
            SubmitVerdict::NoSuchQueue => "refused(no-such-queue)",
            SubmitVerdict::Bounds => "refused(bounds)",
            SubmitVerdict::AdmissionResource => "refused(admission-resource)",
            SubmitVerdict::QueueSaturated => "refused(queue-saturated)",
            SubmitVerdict::Capacity => "refused(capacity)",
        }
    }

    /// Whether the same submission presented later may be admitted
    /// (§5a.5: the carrier's own resources, never a judgement).
    pub const fn retriable(self) -> bool {
        matches!(
            self,
            SubmitVerdict::AdmissionResource
                | SubmitVerdict::QueueSaturated
                | SubmitVerdict::Capacity
        )
    }

    /// Parses the exact spelling.
    pub fn from_wire(s: &str) -> Option<SubmitVerdict> {
        SubmitVerdict::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl fmt::Display for SubmitVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// §5a.3: the closed verdict set told to a presenter of a proof
/// (register, rebind, collect, conclude).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `registered`.
    Registered,
    /// `registered(idempotent)`.
    RegisteredIdempotent,
    /// `rebound`.
    Rebound,
    /// `served`.
    Served,
    /// `refused(no-such-queue)`.
    NoSuchQueue,
    /// `refused(possession-failed)` (r3).
    PossessionFailed,
    /// `refused(malformed)` (r1).
    Malformed,
    /// `refused(stale-generation)`, carrying the generation the carrier
    /// holds for the `rkid` (`g`, or `t` from the tombstone).
    StaleGeneration {
        /// The held generation.
        held: u64,
    },
    /// `registration-refused(capacity)` (r4), retriable.
    RegistrationCapacity,
    /// `refused(admission-resource)` (r2), retriable.
    AdmissionResource,
}

impl Verdict {
    /// Every verdict, in the order of §5a.3 (a stale generation with a
    /// placeholder held generation 0: the set is closed over spellings).
    pub const ALL: [Verdict; 10] = [
        Verdict::Registered,
        Verdict::RegisteredIdempotent,
        Verdict::Rebound,
        Verdict::Served,
        Verdict::NoSuchQueue,
        Verdict::PossessionFailed,
        Verdict::Malformed,
        Verdict::StaleGeneration { held: 0 },
        Verdict::RegistrationCapacity,
        Verdict::AdmissionResource,
    ];

    /// The spec's exact spelling (the held generation travels beside it).
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Registered => "registered",
            Verdict::RegisteredIdempotent => "registered(idempotent)",
            Verdict::Rebound => "rebound",
            Verdict::Served => "served",
            Verdict::NoSuchQueue => "refused(no-such-queue)",
            Verdict::PossessionFailed => "refused(possession-failed)",
            Verdict::Malformed => "refused(malformed)",
            Verdict::StaleGeneration { .. } => "refused(stale-generation)",
            Verdict::RegistrationCapacity => "registration-refused(capacity)",
            Verdict::AdmissionResource => "refused(admission-resource)",
        }
    }

    /// Whether the verdict is one of the carrier's own retriable limits
    /// (§4.4 guarantee 2).
    pub const fn retriable(self) -> bool {
        matches!(
            self,
            Verdict::RegistrationCapacity | Verdict::AdmissionResource
        )
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// §5a.8 / §6.1: what a sender learns by deposit id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DepositStatus {
    /// `accepted`: held, or concluded (a carrier never reveals conclusion).
    Accepted,
    /// `given-up`: given up at the horizon or the wind-up deadline; the
    /// sender's status becomes `failed(expired-by-adapter-policy)`.
    GivenUp,
    /// `unknown`: never admitted, or forgotten.
    Unknown,
}

impl DepositStatus {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            DepositStatus::Accepted => "accepted",
            DepositStatus::GivenUp => "given-up",
            DepositStatus::Unknown => "unknown",
        }
    }
}

impl fmt::Display for DepositStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_family_is_closed() {
        // carrier-proof.json carrierGuarantees.g2_family
        let submission: Vec<&str> = SubmitVerdict::ALL
            .iter()
            .filter(|v| v.retriable())
            .map(|v| v.as_str())
            .collect();
        assert_eq!(
            submission,
            [
                "refused(admission-resource)",
                "refused(queue-saturated)",
                "refused(capacity)"
            ]
        );
        assert!(Verdict::RegistrationCapacity.retriable());
        assert!(Verdict::AdmissionResource.retriable());
        assert!(!Verdict::StaleGeneration { held: 1 }.retriable());
        assert!(!Verdict::PossessionFailed.retriable());
    }
}
