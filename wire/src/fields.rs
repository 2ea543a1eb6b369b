//! The one reader of header members, shared by requests and responses:
//! closed member sets and exact types, each failure a
//! [`FrameError::Header`] naming the member.

use crate::frame::FrameError;
use rltp_proofs::DepositId;
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::Rkid;

/// The lexeme rule of [`Fields::opt_uint0`]: `0`, or a canonical decimal
/// integer in `[1, 2^53 − 1]`.
pub(crate) fn uint0(lexeme: &str) -> Result<u64, rltp_proofs::constants::ConstantError> {
    match lexeme {
        "0" => Ok(0),
        _ => rltp_proofs::constants::parse_canonical_integer(lexeme),
    }
}

/// A header's members, read strictly.
pub(crate) struct Fields<'a>(pub(crate) &'a Object);

impl Fields<'_> {
    /// Refuses any member outside `allowed`.
    pub(crate) fn closed(&self, allowed: &[&str]) -> Result<(), FrameError> {
        match self.0.keys().find(|k| !allowed.contains(k)) {
            Some(unknown) => Err(FrameError::Header(format!("unknown member {unknown:?}"))),
            None => Ok(()),
        }
    }

    /// A required string.
    pub(crate) fn str(&self, name: &str) -> Result<&str, FrameError> {
        self.0
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| FrameError::Header(format!("{name} must be a string")))
    }

    /// An optional boolean.
    pub(crate) fn opt_bool(&self, name: &str) -> Result<Option<bool>, FrameError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(FrameError::Header(format!(
                "{name} is a json {}",
                other.kind()
            ))),
        }
    }

    /// An optional non-negative canonical decimal integer (no sign,
    /// fraction, exponent or leading zero; `0` allowed), at most 2^53 − 1.
    pub(crate) fn opt_uint0(&self, name: &str) -> Result<Option<u64>, FrameError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => uint0(n.lexeme())
                .map(Some)
                .map_err(|e| FrameError::Header(format!("{name}: {e}"))),
            Some(other) => Err(FrameError::Header(format!(
                "{name} is a json {}",
                other.kind()
            ))),
        }
    }

    /// A required [`Fields::opt_uint0`].
    pub(crate) fn uint0(&self, name: &str) -> Result<u64, FrameError> {
        self.opt_uint0(name)?
            .ok_or_else(|| FrameError::Header(format!("{name} is required")))
    }

    /// A required canonical integer ≥ 1.
    pub(crate) fn uint1(&self, name: &str) -> Result<u64, FrameError> {
        match self.0.get(name) {
            Some(Value::Number(n)) => rltp_proofs::constants::parse_canonical_integer(n.lexeme())
                .map_err(|e| FrameError::Header(format!("{name}: {e}"))),
            Some(other) => Err(FrameError::Header(format!(
                "{name} is a json {}",
                other.kind()
            ))),
            None => Err(FrameError::Header(format!("{name} is required"))),
        }
    }

    /// The `rkid` member: an X25519 Multikey.
    pub(crate) fn rkid(&self) -> Result<Rkid, FrameError> {
        Rkid::parse(self.str("rkid")?).map_err(|e| FrameError::Header(format!("rkid: {e}")))
    }

    /// A deposit id in its one wire spelling (`u` multibase, §7).
    pub(crate) fn deposit_id(s: &str) -> Result<DepositId, FrameError> {
        DepositId::from_wire(s).map_err(|e| FrameError::Header(format!("deposit id: {e}")))
    }

    /// An optional deposit-id member.
    pub(crate) fn opt_deposit(&self, name: &str) -> Result<Option<DepositId>, FrameError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(_) => DepositId::from_wire(self.str(name)?)
                .map(Some)
                .map_err(|e| FrameError::Header(format!("{name}: {e}"))),
        }
    }

    /// The `retriable` member, which must equal what the verdict implies.
    pub(crate) fn retriable(&self, expected: bool) -> Result<(), FrameError> {
        match self.opt_bool("retriable")? {
            Some(b) if b == expected => Ok(()),
            Some(b) => Err(FrameError::Header(format!(
                "retriable {b} contradicts the verdict"
            ))),
            None => Err(FrameError::Header("retriable is required".into())),
        }
    }
}
