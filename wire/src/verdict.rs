//! The closed verdict sets of §5a.3 (registration, collection,
//! conclusion) and §5a.5 (submission), and the sender status of
//! §5a.8/§6.1. Each set is one table (`closed_set!`): `Display`
//! is the spec's exact spelling, and retriability is marked there and
//! nowhere else (§4.4 guarantee 2).

use crate::closed_set::closed_set;

closed_set! {
    /// §5a.5: the closed outcome set of a submission, in s-order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum SubmitVerdict {
        /// `admitted`: durable before this is answered.
        Admitted = "admitted";
        /// `duplicate`: byte-identical to a deposit held now (s3).
        Duplicate = "duplicate";
        /// `refused(no-such-queue)` (s1).
        NoSuchQueue = "refused(no-such-queue)";
        /// `refused(bounds)` (s2).
        Bounds = "refused(bounds)";
        /// `refused(admission-resource)` (s4), retriable.
        AdmissionResource = "refused(admission-resource)", retriable;
        /// `refused(queue-saturated)` (s5), retriable.
        QueueSaturated = "refused(queue-saturated)", retriable;
        /// `refused(capacity)` (s6), retriable.
        Capacity = "refused(capacity)", retriable;
    }
}

impl SubmitVerdict {
    /// Whether the deposit is held after this answer (`admitted`,
    /// `duplicate`): the answer then names its deposit id.
    pub const fn held(self) -> bool {
        matches!(self, SubmitVerdict::Admitted | SubmitVerdict::Duplicate)
    }
}

closed_set! {
    /// §5a.3: the closed verdict set told to a presenter of a proof
    /// (register, rebind, collect, conclude), in the order of §5a.3.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Verdict {
        /// `registered`.
        Registered = "registered";
        /// `registered(idempotent)`.
        RegisteredIdempotent = "registered(idempotent)";
        /// `rebound`.
        Rebound = "rebound";
        /// `served`.
        Served = "served";
        /// `refused(no-such-queue)`.
        NoSuchQueue = "refused(no-such-queue)";
        /// `refused(possession-failed)` (r3).
        PossessionFailed = "refused(possession-failed)";
        /// `refused(malformed)` (r1).
        Malformed = "refused(malformed)";
        /// `refused(stale-generation)`, carrying the generation the carrier
        /// holds for the `rkid` (`g`, or `t` from the tombstone; on the wire
        /// beside the spelling as `generation`).
        StaleGeneration {
            /// The held generation.
            held: u64,
        } = "refused(stale-generation)";
        /// `registration-refused(capacity)` (r4), retriable.
        RegistrationCapacity = "registration-refused(capacity)", retriable;
        /// `refused(admission-resource)` (r2), retriable.
        AdmissionResource = "refused(admission-resource)", retriable;
    }
}

closed_set! {
    /// §5a.8 / §6.1: what a sender learns by deposit id.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DepositStatus {
        /// `accepted`: held, or concluded (a carrier never reveals conclusion).
        Accepted = "accepted";
        /// `given-up`: given up at the horizon or the wind-up deadline; the
        /// sender's status becomes `failed(expired-by-adapter-policy)`.
        GivenUp = "given-up";
        /// `unknown`: never admitted, or forgotten.
        Unknown = "unknown";
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

    #[test]
    fn every_spelling_parses_back_and_is_unique_in_its_set() {
        for v in SubmitVerdict::ALL {
            assert_eq!(SubmitVerdict::from_wire(v.as_str()), Some(v));
            assert_eq!(v.to_string(), v.as_str());
        }
        for v in Verdict::ALL {
            assert_eq!(Verdict::from_wire(v.as_str()), Some(v));
        }
        for s in DepositStatus::ALL {
            assert_eq!(DepositStatus::from_wire(s.as_str()), Some(s));
            assert!(!s.retriable());
        }
        assert_eq!(Verdict::ALL.len(), 10);
        assert_eq!(
            Verdict::from_wire("refused(stale-generation)"),
            Some(Verdict::StaleGeneration { held: 0 })
        );
        assert_eq!(SubmitVerdict::from_wire("refused(Capacity)"), None);
    }
}
