//! The operations of the profile (`PROTOCOL.md` §6–§7), one table: the
//! `op` member of a request header, the operation label of every metric,
//! and the closed answer set each operation gives.

use crate::closed_set::closed_set;
use crate::verdict::{DepositStatus, SubmitVerdict, Verdict};

closed_set! {
    /// An operation, spelled as the request header's `op`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Op {
        /// `declaration`: the current signed `registry-declaration/0.1`.
        Declaration = "declaration";
        /// `submit {rkid, size}` + envelope body (§5a.5).
        Submit = "submit";
        /// `submit-stream`: pipelined submissions; each item is answered
        /// as a `submit`.
        SubmitStream = "submit-stream";
        /// `status {rkid, deposit}` (§5a.8, §6.1).
        Status = "status";
        /// `challenge {rkid, purpose}` (§5a.3).
        Challenge = "challenge";
        /// `register` + proof body (register or rebind, §5a.3).
        Register = "register";
        /// `collect {after?, limit?, watch?}` + proof body (§5a.3, §5a.8).
        Collect = "collect";
        /// `conclude {deposits}` + proof body (§5a.8).
        Conclude = "conclude";
    }
}

/// The refusals r1–r3 give before any operation-specific rule (§5a.3).
const AUTHORIZATION_REFUSALS: [Verdict; 3] = [
    Verdict::Malformed,
    Verdict::AdmissionResource,
    Verdict::PossessionFailed,
];

impl Op {
    /// The operation whose answers this one gives: a `submit-stream` item
    /// is answered (and counted) as a `submit`; every other operation is
    /// its own.
    pub const fn answered_as(self) -> Op {
        match self {
            Op::SubmitStream => Op::Submit,
            other => other,
        }
    }

    /// The closed set of answers this operation gives, as exact spellings
    /// (`PROTOCOL.md` §7): the §5a.5 verdicts for `submit`, the §5a.8
    /// statuses for `status`, the §5a.3 verdicts each proof-carrying
    /// operation can reach. Empty for `submit-stream` (see
    /// [`Op::answered_as`]).
    pub fn answers(self) -> Vec<&'static str> {
        let spell = |vs: &[Verdict]| vs.iter().map(|v| v.as_str()).collect::<Vec<_>>();
        match self {
            Op::Declaration => vec!["ok"],
            Op::Submit => SubmitVerdict::ALL.iter().map(|v| v.as_str()).collect(),
            Op::SubmitStream => Vec::new(),
            Op::Status => DepositStatus::ALL.iter().map(|s| s.as_str()).collect(),
            Op::Challenge => std::iter::once("issued")
                .chain(spell(&[
                    Verdict::AdmissionResource,
                    Verdict::PossessionFailed,
                ]))
                .collect(),
            Op::Register => spell(&[
                Verdict::Registered,
                Verdict::RegisteredIdempotent,
                Verdict::Rebound,
                Verdict::StaleGeneration { held: 0 },
                Verdict::RegistrationCapacity,
            ])
            .into_iter()
            .chain(spell(&AUTHORIZATION_REFUSALS))
            .collect(),
            Op::Collect | Op::Conclude => spell(&[Verdict::Served, Verdict::NoSuchQueue])
                .into_iter()
                .chain(spell(&AUTHORIZATION_REFUSALS))
                .collect(),
        }
    }

    /// The largest body this operation's request frame may carry (bytes).
    /// A `submit` body is bounded by the frame alone: its envelope bound is
    /// §5a.5 s2's, and a `size` above it is answered `refused(bounds)`
    /// (after s1) without the body being read (`PROTOCOL.md` §7).
    pub const fn max_body(self) -> usize {
        match self {
            Op::Submit => crate::MAX_BODY_BYTES,
            Op::Register | Op::Collect | Op::Conclude => crate::MAX_PROOF_BYTES,
            Op::Declaration | Op::SubmitStream | Op::Status | Op::Challenge => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_spelled_once_and_answers_from_a_closed_set() {
        for op in Op::ALL {
            assert_eq!(Op::from_wire(op.as_str()), Some(op));
            let answers = op.answers();
            let mut unique = answers.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), answers.len(), "{op}");
            assert_eq!(answers.is_empty(), op.answered_as() != op, "{op}");
        }
        assert_eq!(Op::ALL.len(), 8);
        assert_eq!(Op::Register.answers().len(), 8);
    }
}
