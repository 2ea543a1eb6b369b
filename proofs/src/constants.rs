//! The seven carrier constants (Delivery §4.4 guarantee 1, §11) and the
//! two value grammars they are written in (§4.4 "How the published
//! constants are written, and how they are read").
//!
//! * Durations use Access §7.3's grammar ([`parse_duration`]): the
//!   day-and-time subset of ISO 8601, no fraction, exact milliseconds;
//!   a value outside it is **rejected, never rounded**.
//! * Integers are canonical decimal in `[1, 2^53-1]`
//!   ([`parse_canonical_integer`]), checked on the received bytes.
//! * [`CarrierConstants`] holds the seven values a carrier publishes under
//!   [`CARRIER_ROLE`], each with its declared lexeme, and enforces the §11
//!   domains.
//!
//! This module is declaration validation only. Engine configuration that
//! deliberately runs outside the §11 domains (e.g. the shipped
//! `carrier-proof.json` vectors with `max-queue-bytes` 131072) is not built
//! through [`CarrierConstants`].

use crate::json::{Object, Value};
use std::fmt;

/// The carrier role URI (§4.4): the `role` of a carrier's
/// `registry-declaration/0.1`, compared byte-exact. It names a role, not a
/// task type: used as a document `type` it is `failed(unknown-type)` (§11).
pub const CARRIER_ROLE: &str = "https://real-life.org/trust-tasks/delivery-carrier/0.1";

/// The seven constant names of the carrier role (§4.4 guarantee 1), in the
/// order the spec lists them in `carrier-proof.json` `g1_declaration.required`.
pub const CONSTANT_NAMES: [&str; 7] = [
    "orphan-horizon",
    "give-up-horizon",
    "challenge-lifetime",
    "queue-floor",
    "max-queue-bytes",
    "max-binding-tombstones",
    "status-horizon",
];

/// `2^53 - 1`, the upper bound of every §4.4 integer constant.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A duration in exact milliseconds (Access §7.3; 1D = 86 400 000 ms).
pub type DurationMs = u64;

const MS_PER_SECOND: u64 = 1_000;
const MS_PER_MINUTE: u64 = 60 * MS_PER_SECOND;
const MS_PER_HOUR: u64 = 60 * MS_PER_MINUTE;
const MS_PER_DAY: u64 = 24 * MS_PER_HOUR;

/// Why a lexeme is outside Access §7.3's duration grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationFault {
    /// The lexeme does not begin with an upper-case `P`.
    #[error("it does not begin with the designator P")]
    MissingP,
    /// A lower-case letter (the grammar's designators are upper-case only).
    #[error("designators are upper-case only")]
    Lowercase,
    /// Neither the day part nor the time part carries a component (`P`, `PT`).
    #[error("no component at all")]
    NoComponent,
    /// A `T` that carries no `H`, `M` or `S` component (`P1DT`).
    #[error("a T that is present carries no component")]
    EmptyTimePart,
    /// A value of more than three digits (`PT1234S`).
    #[error("a value longer than 3 digits")]
    TooManyDigits,
    /// A fractional component (`PT1.0005S`).
    #[error("a fractional component")]
    Fraction,
    /// Years (`Y`) are not in the subset.
    #[error("years are not in the subset")]
    Years,
    /// Months (`M` before `T`) are not in the subset.
    #[error("months are not in the subset")]
    Months,
    /// Weeks (`W`) are not in the subset.
    #[error("weeks are not in the subset")]
    Weeks,
    /// `H`, `M` or `S` after the day part without a `T`, or `D` after `T`.
    #[error("a component on the wrong side of T")]
    WrongPart,
    /// Components out of descending order, or repeated (`PT3M2H`).
    #[error("components out of descending order")]
    OutOfOrder,
    /// A designator with no value before it (`PD`, `PTS`).
    #[error("a designator without a value")]
    MissingValue,
    /// Digits not followed by a designator (`P1`).
    #[error("a value without a designator")]
    MissingDesignator,
    /// Any other byte (sign, space, a second `T`, non-ASCII).
    #[error("an unexpected character")]
    UnexpectedCharacter,
}

/// Why a lexeme is not a canonical decimal integer in `[1, 2^53-1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IntegerFault {
    /// The empty string.
    #[error("it is empty")]
    Empty,
    /// A leading `+` or `-`.
    #[error("a sign")]
    Sign,
    /// A leading zero (`01`).
    #[error("a leading zero")]
    LeadingZero,
    /// A fraction (`1.0`).
    #[error("a fraction")]
    Fraction,
    /// An exponent (`1e3`).
    #[error("an exponent")]
    Exponent,
    /// Any other non-digit byte.
    #[error("a non-digit character")]
    NotDecimal,
    /// Canonical spelling, but `0` or above `2^53-1`.
    #[error("outside [1, 2^53-1]")]
    OutOfRange,
}

/// Errors of this module (§4.4, §11). Display text names the constant, the
/// value as received, and (for domain errors) the §11 domain — an operator
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConstantError {
    /// [`parse_duration`]: the lexeme is outside Access §7.3's grammar.
    #[error("{lexeme:?} is not a duration in Access §7.3's grammar: {fault}")]
    Duration {
        /// The lexeme as received.
        lexeme: String,
        /// What is wrong with it.
        fault: DurationFault,
    },
    /// [`parse_canonical_integer`]: the lexeme is not canonical decimal in
    /// `[1, 2^53-1]`.
    #[error("{lexeme:?} is not a canonical decimal integer in [1, 2^53-1]: {fault}")]
    Integer {
        /// The lexeme as received.
        lexeme: String,
        /// What is wrong with it.
        fault: IntegerFault,
    },
    /// A duration constant whose value is outside Access §7.3's grammar.
    #[error("{name} {lexeme:?} is not a duration in Access §7.3's grammar: {fault}")]
    ConstantDuration {
        /// The constant.
        name: &'static str,
        /// Its value as received.
        lexeme: String,
        /// What is wrong with it.
        fault: DurationFault,
    },
    /// An integer constant whose value is not a canonical decimal spelling.
    #[error("{name} {lexeme:?} is not a canonical decimal integer: {fault}")]
    ConstantInteger {
        /// The constant.
        name: &'static str,
        /// Its value as received.
        lexeme: String,
        /// What is wrong with it.
        fault: IntegerFault,
    },
    /// A well-spelled value outside the constant's §11 domain.
    #[error("{name} {lexeme:?} is outside its domain {domain}")]
    OutOfDomain {
        /// The constant.
        name: &'static str,
        /// Its value as received.
        lexeme: String,
        /// The §11 domain, e.g. `[P1D, P90D]`.
        domain: String,
    },
    /// One of the seven constants is absent (§4.4: a declaration under the
    /// carrier role carries all seven or rejects).
    #[error("the carrier declaration does not declare {name}")]
    Missing {
        /// The missing constant.
        name: &'static str,
    },
    /// A constant name the carrier role does not admit (§4.4: unknown
    /// constant names reject the declaration).
    #[error("{name:?} is not a constant of the carrier role")]
    Unknown {
        /// The name as received.
        name: String,
    },
    /// A constant whose JSON value is not a string (§4.4: values travel as
    /// value strings).
    #[error("{name} is a JSON {kind}, not a value string")]
    NotAString {
        /// The constant.
        name: &'static str,
        /// The JSON kind received (`number`, `object`, …).
        kind: &'static str,
    },
}

/// Parses a duration in Access §7.3's grammar (§4.4; grammar string in
/// `carrier-proof.json` `durationGrammar.grammar`) into exact milliseconds.
///
/// Grammar: `P`, then an optional `<d>D`, then an optional `T` part with
/// `<h>H`, `<m>M`, `<s>S` in descending order and at least one of the three;
/// at least one component overall; each value 1 to 3 ASCII digits; no years,
/// months or weeks; no fraction; upper-case only; `1D` = 86 400 s.
///
/// Leading zeros inside the 1–3 digits are accepted (`PT05S` = 5000 ms):
/// the grammar text says "each value 1-3 digits" and nothing more, and this
/// parser keeps that literal reading rather than adding a rule of its own.
/// Zero values (`PT0S`) are grammatical; the §11 domains reject them.
///
/// Returns milliseconds (at most 999 D + 999 H + 999 M + 999 S, no overflow).
///
/// # Errors
/// [`ConstantError::Duration`] naming the lexeme and a [`DurationFault`];
/// a value outside the grammar is rejected, never rounded.
pub fn parse_duration(s: &str) -> Result<DurationMs, ConstantError> {
    duration_ms(s).map_err(|fault| ConstantError::Duration {
        lexeme: s.to_owned(),
        fault,
    })
}

fn duration_ms(s: &str) -> Result<DurationMs, DurationFault> {
    let bytes = s.as_bytes();
    match bytes.first() {
        Some(b'P') => {}
        Some(b'p') => return Err(DurationFault::Lowercase),
        _ => return Err(DurationFault::MissingP),
    }
    // Rank of the last component read: D = 1, H = 2, M = 3, S = 4.
    let mut last_rank = 0u8;
    let mut in_time = false;
    let mut any_component = false;
    let mut time_component = false;
    let mut total: DurationMs = 0;
    let mut i = 1;
    while let Some(&c) = bytes.get(i) {
        if c == b'T' {
            if in_time {
                return Err(DurationFault::UnexpectedCharacter);
            }
            in_time = true;
            i += 1;
            continue;
        }
        if !c.is_ascii_digit() {
            return Err(match c {
                b'D' | b'H' | b'M' | b'S' | b'Y' | b'W' => DurationFault::MissingValue,
                b'.' | b',' => DurationFault::Fraction,
                c if c.is_ascii_lowercase() => DurationFault::Lowercase,
                _ => DurationFault::UnexpectedCharacter,
            });
        }
        let start = i;
        let mut value: u64 = 0;
        while let Some(&d) = bytes.get(i).filter(|d| d.is_ascii_digit()) {
            if i - start == 3 {
                return Err(DurationFault::TooManyDigits);
            }
            value = value * 10 + u64::from(d - b'0');
            i += 1;
        }
        let (rank, unit) = match (bytes.get(i), in_time) {
            (None, _) => return Err(DurationFault::MissingDesignator),
            (Some(b'D'), false) => (1, MS_PER_DAY),
            (Some(b'H'), true) => (2, MS_PER_HOUR),
            (Some(b'M'), true) => (3, MS_PER_MINUTE),
            (Some(b'S'), true) => (4, MS_PER_SECOND),
            (Some(b'M'), false) => return Err(DurationFault::Months),
            (Some(b'Y'), _) => return Err(DurationFault::Years),
            (Some(b'W'), _) => return Err(DurationFault::Weeks),
            (Some(b'D' | b'H' | b'S'), _) => return Err(DurationFault::WrongPart),
            (Some(b'.' | b','), _) => return Err(DurationFault::Fraction),
            (Some(c), _) if c.is_ascii_lowercase() => return Err(DurationFault::Lowercase),
            (Some(_), _) => return Err(DurationFault::UnexpectedCharacter),
        };
        if rank <= last_rank {
            return Err(DurationFault::OutOfOrder);
        }
        last_rank = rank;
        any_component = true;
        time_component |= in_time;
        total += value * unit;
        i += 1;
    }
    if !any_component {
        return Err(DurationFault::NoComponent);
    }
    if in_time && !time_component {
        return Err(DurationFault::EmptyTimePart);
    }
    Ok(total)
}

/// Parses a §4.4 integer constant: canonical decimal in `[1, 2^53-1]` — no
/// sign, no leading zero, no exponent, no fraction — checked on the received
/// bytes (`1`, `1.0` and `1e0` are not alike here).
///
/// # Errors
/// [`ConstantError::Integer`] naming the lexeme and an [`IntegerFault`].
pub fn parse_canonical_integer(s: &str) -> Result<u64, ConstantError> {
    canonical_integer(s).map_err(|fault| ConstantError::Integer {
        lexeme: s.to_owned(),
        fault,
    })
}

/// The one home of the canonical-decimal rule in `[1, 2^53-1]` (§4.4 integer
/// constants; Identity §7a.3 `generation` reads through it too).
pub(crate) fn canonical_integer(s: &str) -> Result<u64, IntegerFault> {
    let bytes = s.as_bytes();
    match bytes.first() {
        None => return Err(IntegerFault::Empty),
        Some(b'+' | b'-') => return Err(IntegerFault::Sign),
        Some(b'0') if bytes.len() > 1 && bytes.iter().all(u8::is_ascii_digit) => {
            return Err(IntegerFault::LeadingZero);
        }
        _ => {}
    }
    if let Some(bad) = bytes.iter().find(|b| !b.is_ascii_digit()) {
        return Err(match bad {
            b'.' => IntegerFault::Fraction,
            b'e' | b'E' => IntegerFault::Exponent,
            _ => IntegerFault::NotDecimal,
        });
    }
    // All ASCII digits, no leading zero (except "0" itself). More than 16
    // digits is above 2^53-1 (16 digits) without computing it.
    if bytes.len() > 16 {
        return Err(IntegerFault::OutOfRange);
    }
    let value = bytes
        .iter()
        .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    if value == 0 || value > MAX_SAFE_INTEGER {
        return Err(IntegerFault::OutOfRange);
    }
    Ok(value)
}

/// One declared constant: the lexeme as published and its value
/// (milliseconds for durations, bytes or a count for integers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredConstant {
    lexeme: String,
    value: u64,
}

impl DeclaredConstant {
    /// The value string exactly as declared (what is published, §4.4).
    pub fn lexeme(&self) -> &str {
        &self.lexeme
    }

    /// The value: milliseconds for a duration, bytes or a count for an integer.
    pub fn value(&self) -> u64 {
        self.value
    }
}

/// The §11 domain of one constant.
#[derive(Clone, Copy)]
enum Domain {
    /// A duration in `[low, high]`, bounds as (lexeme, ms).
    Duration {
        low: (&'static str, DurationMs),
        high: (&'static str, DurationMs),
    },
    /// An integer in `[low, high]`.
    Integer { low: u64, high: u64 },
    /// `queue-floor`: `[65536, max-queue-bytes]`, with the declared
    /// `max-queue-bytes`.
    QueueFloor { max_queue_bytes: u64 },
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Domain::Duration { low, high } => write!(f, "[{}, {}]", low.0, high.0),
            Domain::Integer { high, .. } if *high == MAX_SAFE_INTEGER => {
                // `max-binding-tombstones`: spelled as §11 spells it.
                write!(f, "[1, 2^53-1]")
            }
            Domain::Integer { low, high } => write!(f, "[{low}, {high}]"),
            Domain::QueueFloor { max_queue_bytes } => write!(
                f,
                "[{QUEUE_FLOOR_MIN}, max-queue-bytes] (max-queue-bytes is {max_queue_bytes})"
            ),
        }
    }
}

const QUEUE_FLOOR_MIN: u64 = 65_536;
const MAX_QUEUE_BYTES_MIN: u64 = 1_048_576;
const MAX_QUEUE_BYTES_MAX: u64 = 1_073_741_824;

/// The fixed §11 domains of the six constants whose domain does not depend
/// on another constant (`queue-floor`'s is [`Domain::QueueFloor`]).
fn fixed_domain(name: &'static str) -> Domain {
    const S5: (&str, DurationMs) = ("PT5S", 5 * MS_PER_SECOND);
    const M5: (&str, DurationMs) = ("PT5M", 5 * MS_PER_MINUTE);
    match name {
        "orphan-horizon" => Domain::Duration {
            low: ("P7D", 7 * MS_PER_DAY),
            high: ("P365D", 365 * MS_PER_DAY),
        },
        "give-up-horizon" => Domain::Duration {
            low: ("P1D", MS_PER_DAY),
            high: ("P90D", 90 * MS_PER_DAY),
        },
        "challenge-lifetime" | "status-horizon" => Domain::Duration { low: S5, high: M5 },
        "max-queue-bytes" => Domain::Integer {
            low: MAX_QUEUE_BYTES_MIN,
            high: MAX_QUEUE_BYTES_MAX,
        },
        // "max-binding-tombstones"
        _ => Domain::Integer {
            low: 1,
            high: MAX_SAFE_INTEGER,
        },
    }
}

/// Reads one constant: grammar first (rejected, never rounded), then its
/// fixed §11 domain.
fn read_constant(
    name: &'static str,
    lexeme: &str,
    domain: Domain,
) -> Result<DeclaredConstant, ConstantError> {
    let (value, (low, high)) = match domain {
        Domain::Duration { low, high } => {
            let ms = duration_ms(lexeme).map_err(|fault| ConstantError::ConstantDuration {
                name,
                lexeme: lexeme.to_owned(),
                fault,
            })?;
            (Some(ms), (low.1, high.1))
        }
        Domain::Integer { low, high } => (integer_constant(name, lexeme)?, (low, high)),
        Domain::QueueFloor { max_queue_bytes } => (
            integer_constant(name, lexeme)?,
            (QUEUE_FLOOR_MIN, max_queue_bytes),
        ),
    };
    match value {
        Some(value) if (low..=high).contains(&value) => Ok(DeclaredConstant {
            lexeme: lexeme.to_owned(),
            value,
        }),
        _ => Err(ConstantError::OutOfDomain {
            name,
            lexeme: lexeme.to_owned(),
            domain: domain.to_string(),
        }),
    }
}

/// An integer constant's value: `None` for a canonical spelling outside
/// `[1, 2^53-1]` (a domain error, reported with the constant's domain).
fn integer_constant(name: &'static str, lexeme: &str) -> Result<Option<u64>, ConstantError> {
    match canonical_integer(lexeme) {
        Ok(n) => Ok(Some(n)),
        Err(IntegerFault::OutOfRange) => Ok(None),
        Err(fault) => Err(ConstantError::ConstantInteger {
            name,
            lexeme: lexeme.to_owned(),
            fault,
        }),
    }
}

/// The seven constants as value strings, by name — the input a carrier's
/// configuration hands to [`CarrierConstants::from_lexemes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CarrierConstantLexemes<'a> {
    /// `orphan-horizon`, a duration (§5a.9).
    pub orphan_horizon: &'a str,
    /// `give-up-horizon`, a duration (§5a.9).
    pub give_up_horizon: &'a str,
    /// `challenge-lifetime`, a duration (§5a.3).
    pub challenge_lifetime: &'a str,
    /// `queue-floor`, an integer in bytes (§4.4 guarantee 5).
    pub queue_floor: &'a str,
    /// `max-queue-bytes`, an integer in bytes (§4.4 guarantee 5).
    pub max_queue_bytes: &'a str,
    /// `max-binding-tombstones`, an integer count (§5a.3).
    pub max_binding_tombstones: &'a str,
    /// `status-horizon`, a duration (§4.4).
    pub status_horizon: &'a str,
}

impl<'a> CarrierConstantLexemes<'a> {
    fn get(&self, name: &str) -> Option<&'a str> {
        Some(match name {
            "orphan-horizon" => self.orphan_horizon,
            "give-up-horizon" => self.give_up_horizon,
            "challenge-lifetime" => self.challenge_lifetime,
            "queue-floor" => self.queue_floor,
            "max-queue-bytes" => self.max_queue_bytes,
            "max-binding-tombstones" => self.max_binding_tombstones,
            "status-horizon" => self.status_horizon,
            _ => return None,
        })
    }
}

/// The seven published carrier constants (§4.4 guarantee 1), each with its
/// declared lexeme and its value, validated against the §11 domains:
///
/// | constant | kind | domain |
/// |---|---|---|
/// | `orphan-horizon` | duration | `[P7D, P365D]` |
/// | `give-up-horizon` | duration | `[P1D, P90D]` |
/// | `challenge-lifetime` | duration | `[PT5S, PT5M]` |
/// | `queue-floor` | bytes | `[65536, max-queue-bytes]` |
/// | `max-queue-bytes` | bytes | `[1048576, 1073741824]` |
/// | `max-binding-tombstones` | count | `[1, 2^53-1]` |
/// | `status-horizon` | duration | `[PT5S, PT5M]` |
///
/// **`orphan-horizon ≥ give-up-horizon` is deliberately not enforced.**
/// §11 closes the list of domain rules and this relation is not in it; the
/// declaration binds both ways (§4.4 guarantee 1), so rejecting a
/// declaration the spec admits would make this carrier's counterparts
/// disagree with every other conforming reader of the same bytes. And the
/// spec does not need the relation: §5a.9 fixes the wind-up deadline as
/// `closing start + give-up-horizon` and has deposits admitted during
/// `closing` inherit the remaining time to it, "so the bound follows from
/// the construction rather than from comparing two durations". A carrier
/// declaring `orphan-horizon` P7D with `give-up-horizon` P90D is
/// conformant.
///
/// The one cross-constant rule §11 does state, `queue-floor ≤
/// max-queue-bytes`, is enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarrierConstants {
    orphan_horizon: DeclaredConstant,
    give_up_horizon: DeclaredConstant,
    challenge_lifetime: DeclaredConstant,
    queue_floor: DeclaredConstant,
    max_queue_bytes: DeclaredConstant,
    max_binding_tombstones: DeclaredConstant,
    status_horizon: DeclaredConstant,
}

impl CarrierConstants {
    /// Reads the `constants` member of a carrier declaration (§4.4): all
    /// seven names required, no other name admitted, every value a JSON
    /// string in its grammar and §11 domain.
    ///
    /// Checks run in a fixed order so one input always yields one error:
    /// members in received order (unknown name, then non-string value), then
    /// the seven in [`CONSTANT_NAMES`] order (missing, grammar, domain),
    /// except that `max-queue-bytes` is read before `queue-floor`, whose
    /// domain `[65536, max-queue-bytes]` depends on it.
    ///
    /// # Errors
    /// [`ConstantError::Unknown`], [`ConstantError::NotAString`],
    /// [`ConstantError::Missing`], [`ConstantError::ConstantDuration`],
    /// [`ConstantError::ConstantInteger`], [`ConstantError::OutOfDomain`].
    pub fn from_declared(constants: &Object) -> Result<Self, ConstantError> {
        for (name, value) in constants.iter() {
            let Some(known) = CONSTANT_NAMES.iter().copied().find(|n| *n == name) else {
                return Err(ConstantError::Unknown {
                    name: name.to_owned(),
                });
            };
            if value.as_str().is_none() {
                return Err(ConstantError::NotAString {
                    name: known,
                    kind: value.kind(),
                });
            }
        }
        Self::validate(|name| constants.get(name).and_then(Value::as_str))
    }

    /// Builds the constants from seven value strings (a carrier's own
    /// configuration), under exactly the rules of [`Self::from_declared`].
    ///
    /// # Errors
    /// As [`Self::from_declared`], minus the errors a named-field input
    /// cannot produce (unknown, missing, non-string).
    pub fn from_lexemes(lexemes: &CarrierConstantLexemes<'_>) -> Result<Self, ConstantError> {
        Self::validate(|name| lexemes.get(name))
    }

    fn validate<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<Self, ConstantError> {
        let read = |name: &'static str, domain: Domain| match get(name) {
            Some(lexeme) => read_constant(name, lexeme, domain),
            None => Err(ConstantError::Missing { name }),
        };
        let fixed = |name: &'static str| read(name, fixed_domain(name));
        let orphan_horizon = fixed("orphan-horizon")?;
        let give_up_horizon = fixed("give-up-horizon")?;
        let challenge_lifetime = fixed("challenge-lifetime")?;
        // queue-floor's domain is [65536, max-queue-bytes]: read its bound first.
        let max_queue_bytes = fixed("max-queue-bytes")?;
        let queue_floor = read(
            "queue-floor",
            Domain::QueueFloor {
                max_queue_bytes: max_queue_bytes.value,
            },
        )?;
        Ok(CarrierConstants {
            orphan_horizon,
            give_up_horizon,
            challenge_lifetime,
            queue_floor,
            max_queue_bytes,
            max_binding_tombstones: fixed("max-binding-tombstones")?,
            status_horizon: fixed("status-horizon")?,
        })
    }

    /// The `constants` member to publish (§4.4): the seven declared lexemes,
    /// in [`CONSTANT_NAMES`] order (order is irrelevant after JCS).
    pub fn to_declared(&self) -> Object {
        let mut object = Object::new();
        for name in CONSTANT_NAMES {
            if let Some(constant) = self.get(name) {
                object.insert(name, constant.lexeme.as_str());
            }
        }
        object
    }

    /// The declared constant `name`, or `None` for a name outside
    /// [`CONSTANT_NAMES`].
    pub fn get(&self, name: &str) -> Option<&DeclaredConstant> {
        Some(match name {
            "orphan-horizon" => &self.orphan_horizon,
            "give-up-horizon" => &self.give_up_horizon,
            "challenge-lifetime" => &self.challenge_lifetime,
            "queue-floor" => &self.queue_floor,
            "max-queue-bytes" => &self.max_queue_bytes,
            "max-binding-tombstones" => &self.max_binding_tombstones,
            "status-horizon" => &self.status_horizon,
            _ => return None,
        })
    }

    /// `orphan-horizon` in ms (§5a.9: how long a holder may be away).
    pub fn orphan_horizon_ms(&self) -> DurationMs {
        self.orphan_horizon.value
    }

    /// `give-up-horizon` in ms (§5a.9: how long a deposit lives).
    pub fn give_up_horizon_ms(&self) -> DurationMs {
        self.give_up_horizon.value
    }

    /// `challenge-lifetime` in ms (§5a.3: how long an issued challenge is good for).
    pub fn challenge_lifetime_ms(&self) -> DurationMs {
        self.challenge_lifetime.value
    }

    /// `queue-floor` in bytes (§4.4 guarantee 5).
    pub fn queue_floor_bytes(&self) -> u64 {
        self.queue_floor.value
    }

    /// `max-queue-bytes` in bytes (§4.4 guarantee 5).
    pub fn max_queue_bytes(&self) -> u64 {
        self.max_queue_bytes.value
    }

    /// `max-binding-tombstones`, a count (§5a.3).
    pub fn max_binding_tombstones(&self) -> u64 {
        self.max_binding_tombstones.value
    }

    /// `status-horizon` in ms (§4.4, §6.1).
    pub fn status_horizon_ms(&self) -> DurationMs {
        self.status_horizon.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_bounds_agree_with_their_lexemes() {
        for name in CONSTANT_NAMES {
            if let Domain::Duration { low, high } = fixed_domain(name) {
                assert_eq!(parse_duration(low.0), Ok(low.1), "{name} low");
                assert_eq!(parse_duration(high.0), Ok(high.1), "{name} high");
            }
        }
    }

    #[test]
    fn duration_faults_are_specific() {
        let cases = [
            ("PT1.0005S", DurationFault::Fraction),
            ("P1M", DurationFault::Months),
            ("P1Y", DurationFault::Years),
            ("P1W", DurationFault::Weeks),
            ("PT3M2H", DurationFault::OutOfOrder),
            ("PT1H1H", DurationFault::OutOfOrder),
            ("P", DurationFault::NoComponent),
            ("PT", DurationFault::NoComponent),
            ("P1DT", DurationFault::EmptyTimePart),
            ("PT1234S", DurationFault::TooManyDigits),
            ("pt1s", DurationFault::Lowercase),
            ("PT1s", DurationFault::Lowercase),
            ("1D", DurationFault::MissingP),
            ("", DurationFault::MissingP),
            ("P1", DurationFault::MissingDesignator),
            ("PD", DurationFault::MissingValue),
            ("P1H", DurationFault::WrongPart),
            ("PT1D", DurationFault::WrongPart),
            ("P-1D", DurationFault::UnexpectedCharacter),
            ("PT1S ", DurationFault::UnexpectedCharacter),
            ("PTT1S", DurationFault::UnexpectedCharacter),
            ("P１D", DurationFault::UnexpectedCharacter),
        ];
        for (lexeme, fault) in cases {
            assert_eq!(duration_ms(lexeme), Err(fault), "{lexeme}");
        }
    }
}
