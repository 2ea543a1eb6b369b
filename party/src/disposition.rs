//! Delivery §6.2: the receiver's closed disposition set and the stage that
//! names it. Every spelling is the contract's, byte for byte: the
//! `Display` of each value is what a log, a vector or a second
//! implementation compares.

use std::fmt;
use std::str::FromStr;

/// §6.2: why a document failed, each named by the first failing stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailReason {
    /// Stage 1: the envelope exceeds the §5 size bound (`oversize`).
    Oversize,
    /// Stages 2, 4, 5, 7: not an envelope, an unknown `rkid`, not JSON, not
    /// the document profile or not the payload schema (`malformed`).
    Malformed,
    /// Stage 3: the all-zero check or the tag failed (`decryption-failed`).
    DecryptionFailed,
    /// Stage 5: `recipient` is not the arrival tuple's own anchor
    /// (`wrong-recipient`).
    WrongRecipient,
    /// Stage 6: the `type` is not in the receiver's registry
    /// (`unknown-type`).
    UnknownType,
    /// Stages 8 and 9: a consistency rule or acceptance check failed
    /// (`validation-failed`).
    ValidationFailed,
    /// Stage 8/9 for bundles: Encounter's `ERR_STALE_ISSUANCE`
    /// (`stale-issuance`).
    StaleIssuance,
    /// Stage 9 for bundles: an own challenge future-dated beyond
    /// `skew-tolerance` (`gate-future`).
    GateFuture,
    /// Stage 9 for bundles: the challenge was consumed by a different
    /// enactment (`consumed-challenge`).
    ConsumedChallenge,
}

impl FailReason {
    /// Every reason, in stage order.
    pub const ALL: [FailReason; 9] = [
        FailReason::Oversize,
        FailReason::Malformed,
        FailReason::DecryptionFailed,
        FailReason::WrongRecipient,
        FailReason::UnknownType,
        FailReason::ValidationFailed,
        FailReason::StaleIssuance,
        FailReason::GateFuture,
        FailReason::ConsumedChallenge,
    ];

    /// The contract's spelling (inside `failed(…)`).
    pub const fn as_str(self) -> &'static str {
        match self {
            FailReason::Oversize => "oversize",
            FailReason::Malformed => "malformed",
            FailReason::DecryptionFailed => "decryption-failed",
            FailReason::WrongRecipient => "wrong-recipient",
            FailReason::UnknownType => "unknown-type",
            FailReason::ValidationFailed => "validation-failed",
            FailReason::StaleIssuance => "stale-issuance",
            FailReason::GateFuture => "gate-future",
            FailReason::ConsumedChallenge => "consumed-challenge",
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// §6.2: a receiver's disposition of one envelope. Every value is
/// **terminal** (§5a.8: conclude it); what is transient never becomes a
/// disposition (see [`crate::pipeline::Pending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Stage 9 committed the effect (`unique`).
    Unique,
    /// Stage 4 found the digest in the completed-effect cache
    /// (`duplicate-known`): the stored acknowledgement, if any, is re-sent.
    DuplicateKnown,
    /// The first failing stage's reason (`failed(<reason>)`).
    Failed(FailReason),
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disposition::Unique => f.write_str("unique"),
            Disposition::DuplicateKnown => f.write_str("duplicate-known"),
            Disposition::Failed(reason) => write!(f, "failed({reason})"),
        }
    }
}

/// A string that is not a §6.2 disposition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a disposition: {0:?}")]
pub struct UnknownDisposition(pub String);

impl FromStr for Disposition {
    type Err = UnknownDisposition;

    fn from_str(s: &str) -> Result<Disposition, UnknownDisposition> {
        match s {
            "unique" => return Ok(Disposition::Unique),
            "duplicate-known" => return Ok(Disposition::DuplicateKnown),
            _ => {}
        }
        s.strip_prefix("failed(")
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|reason| FailReason::ALL.into_iter().find(|r| r.as_str() == reason))
            .map(Disposition::Failed)
            .ok_or_else(|| UnknownDisposition(s.to_owned()))
    }
}

/// §6.2: the stage (1–9) that produced a disposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stage(u8);

impl Stage {
    /// Stage 1, the size bound.
    pub const SIZE: Stage = Stage(1);
    /// Stage 2, envelope schema and `rkid` known.
    pub const ENVELOPE: Stage = Stage(2);
    /// Stage 3, decryption.
    pub const DECRYPTION: Stage = Stage(3);
    /// Stage 4, parse, digest and the duplicate check.
    pub const DIGEST: Stage = Stage(4);
    /// Stage 5, document profile and `recipient`.
    pub const PROFILE: Stage = Stage(5);
    /// Stage 6, `type` known.
    pub const TYPE: Stage = Stage(6);
    /// Stage 7, payload schema.
    pub const PAYLOAD: Stage = Stage(7);
    /// Stage 8, consistency and pre-lock checks.
    pub const CONSISTENCY: Stage = Stage(8);
    /// Stage 9, the critical section.
    pub const EFFECT: Stage = Stage(9);

    /// The stage number, 1–9.
    pub const fn number(self) -> u8 {
        self.0
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_disposition_spells_as_the_contract_and_parses_back() {
        let mut all = vec![Disposition::Unique, Disposition::DuplicateKnown];
        all.extend(FailReason::ALL.map(Disposition::Failed));
        let spelled: Vec<String> = all.iter().map(ToString::to_string).collect();
        assert_eq!(
            spelled,
            [
                "unique",
                "duplicate-known",
                "failed(oversize)",
                "failed(malformed)",
                "failed(decryption-failed)",
                "failed(wrong-recipient)",
                "failed(unknown-type)",
                "failed(validation-failed)",
                "failed(stale-issuance)",
                "failed(gate-future)",
                "failed(consumed-challenge)",
            ]
        );
        for (d, s) in all.iter().zip(&spelled) {
            assert_eq!(s.parse::<Disposition>().as_ref(), Ok(d));
        }
        assert!("failed(transient)".parse::<Disposition>().is_err());
        assert!("accepted".parse::<Disposition>().is_err());
    }
}
