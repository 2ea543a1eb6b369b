//! Strict JSON reader: bytes in, a [`Value`] or a closed [`JsonError`] out.
//!
//! Seed 003 ("strict UTF-8 and JSON parsing that rejects duplicate decoded
//! keys, malformed Unicode, ambiguous syntax and documents outside explicit
//! structural limits") applied to RFC 8259:
//!
//! - input is `&[u8]`; invalid UTF-8 is rejected, never replaced;
//! - `\u` escapes that leave an unpaired surrogate are rejected;
//! - duplicate object keys are rejected, compared **after** decoding escapes;
//! - trailing bytes after the value (other than RFC 8259 whitespace) are
//!   rejected, as is every syntax outside RFC 8259 (no comments, no trailing
//!   commas, no leading `+`, no leading zeros, no `NaN`, no byte-order mark);
//! - the frozen structural limits of [`Limits::FROZEN`] are enforced while
//!   parsing, so no input can make the reader allocate or recurse past them;
//! - every number keeps its **raw lexeme** ([`Number::lexeme`]), because
//!   §5a.3 checks the spelling of `generation` on the received bytes: `1`,
//!   `1.0` and `1e0` are three different values here.
//!
//! The reader never panics: recursion is bounded by [`Limits::max_depth`] and
//! every index is checked.

use std::collections::HashSet;
use std::fmt;

/// Frozen structural limits of the reader (seed 003). Callers may only
/// **narrow** them ([`Limits::narrowed_to`]); the frozen values are the
/// ceiling for everything the carrier parses.
///
/// Units: bytes for sizes, counts for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum nesting depth of arrays and objects (the top-level value is
    /// depth 1 if it is a container).
    pub max_depth: usize,
    /// Maximum members in one object.
    pub max_object_keys: usize,
    /// Maximum members across all objects of one document.
    pub max_total_keys: usize,
    /// Maximum items in one array.
    pub max_array_items: usize,
    /// Maximum items across all arrays of one document.
    pub max_total_items: usize,
    /// Maximum bytes of one decoded string (keys included), UTF-8.
    pub max_string_bytes: usize,
    /// Maximum bytes of the whole input.
    pub max_total_bytes: usize,
}

/// Maximum nesting depth (seed 003 frozen ceiling: 32).
pub const MAX_DEPTH: usize = 32;
/// Maximum keys in one object (seed 003: 256).
pub const MAX_OBJECT_KEYS: usize = 256;
/// Maximum keys in one document (seed 003: 2 048).
pub const MAX_TOTAL_KEYS: usize = 2_048;
/// Maximum items in one array (seed 003: 1 024).
pub const MAX_ARRAY_ITEMS: usize = 1_024;
/// Maximum items in one document (seed 003: 4 096).
pub const MAX_TOTAL_ITEMS: usize = 4_096;
/// Maximum bytes of one decoded string: 98 304 (96 KiB).
///
/// Seed 003 freezes 65 536 for its own payloads; a §5 envelope's
/// `ciphertext` member is up to 87 403 base64url characters (65 536-byte
/// plaintext + 16-byte tag), so the carrier's ceiling is the next 32 KiB
/// step above that.
pub const MAX_STRING_BYTES: usize = 98_304;
/// Maximum bytes of one input document: 262 144 (256 KiB, seed 003's
/// decompressed-envelope ceiling).
pub const MAX_TOTAL_BYTES: usize = 262_144;

impl Limits {
    /// The frozen ceiling (see the `MAX_*` constants for each value and why).
    pub const FROZEN: Limits = Limits {
        max_depth: MAX_DEPTH,
        max_object_keys: MAX_OBJECT_KEYS,
        max_total_keys: MAX_TOTAL_KEYS,
        max_array_items: MAX_ARRAY_ITEMS,
        max_total_items: MAX_TOTAL_ITEMS,
        max_string_bytes: MAX_STRING_BYTES,
        max_total_bytes: MAX_TOTAL_BYTES,
    };

    /// Returns these limits narrowed to `other`, field by field: an override
    /// can only lower a ceiling, never raise it (seed 003: "parser limit
    /// overrides may only narrow the frozen wire ceilings").
    #[must_use]
    pub fn narrowed_to(self, other: Limits) -> Limits {
        Limits {
            max_depth: self.max_depth.min(other.max_depth),
            max_object_keys: self.max_object_keys.min(other.max_object_keys),
            max_total_keys: self.max_total_keys.min(other.max_total_keys),
            max_array_items: self.max_array_items.min(other.max_array_items),
            max_total_items: self.max_total_items.min(other.max_total_items),
            max_string_bytes: self.max_string_bytes.min(other.max_string_bytes),
            max_total_bytes: self.max_total_bytes.min(other.max_total_bytes),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::FROZEN
    }
}

/// Which structural limit an input exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitKind {
    /// [`Limits::max_depth`].
    Depth,
    /// [`Limits::max_object_keys`].
    ObjectKeys,
    /// [`Limits::max_total_keys`].
    TotalKeys,
    /// [`Limits::max_array_items`].
    ArrayItems,
    /// [`Limits::max_total_items`].
    TotalItems,
    /// [`Limits::max_string_bytes`].
    StringBytes,
    /// [`Limits::max_total_bytes`].
    TotalBytes,
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitKind::Depth => "nesting depth",
            LimitKind::ObjectKeys => "keys per object",
            LimitKind::TotalKeys => "keys per document",
            LimitKind::ArrayItems => "items per array",
            LimitKind::TotalItems => "items per document",
            LimitKind::StringBytes => "string bytes",
            LimitKind::TotalBytes => "total bytes",
        })
    }
}

/// Why the strict reader refused an input. Every variant carries the byte
/// offset at which the problem was found, where one exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The input is not well-formed UTF-8 (overlong, surrogate, truncated,
    /// stray continuation, above U+10FFFF).
    #[error("invalid utf-8 at byte {offset}")]
    InvalidUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// A structural limit of [`Limits`] was exceeded.
    #[error("structural limit exceeded: {kind} (limit {limit})")]
    Limit {
        /// Which limit.
        kind: LimitKind,
        /// Its value in force.
        limit: usize,
    },
    /// The input ended inside a value.
    #[error("unexpected end of input")]
    UnexpectedEnd,
    /// A byte that RFC 8259 does not allow here.
    #[error("unexpected byte 0x{byte:02x} at byte {offset}")]
    UnexpectedByte {
        /// The byte.
        byte: u8,
        /// Its offset.
        offset: usize,
    },
    /// A number outside the RFC 8259 grammar (leading zero, `+`, bare `.`).
    #[error("invalid number at byte {offset}")]
    InvalidNumber {
        /// Offset of the number's first byte.
        offset: usize,
    },
    /// A bad escape sequence, or a raw control character inside a string.
    #[error("invalid string escape or control character at byte {offset}")]
    InvalidString {
        /// Offset of the offending byte.
        offset: usize,
    },
    /// A `\u` escape that leaves an unpaired surrogate.
    #[error("unpaired surrogate escape at byte {offset}")]
    UnpairedSurrogate {
        /// Offset of the escape.
        offset: usize,
    },
    /// An object repeats a key (compared after decoding escapes).
    #[error("duplicate key {key:?} at byte {offset}")]
    DuplicateKey {
        /// The decoded key.
        key: String,
        /// Offset of the repeated key.
        offset: usize,
    },
    /// Non-whitespace bytes follow the top-level value.
    #[error("trailing bytes at byte {offset}")]
    TrailingBytes {
        /// Offset of the first trailing byte.
        offset: usize,
    },
}

/// A JSON number as received: the exact RFC 8259 lexeme, never a parsed
/// float. §5a.3 and §4.4 compare numbers and integer constants **as received**.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number {
    lexeme: String,
}

impl Number {
    /// The raw lexeme, byte for byte as received (e.g. `"1"`, `"1.0"`, `"1e0"`).
    pub fn lexeme(&self) -> &str {
        &self.lexeme
    }

    /// A number from an unsigned integer (canonical decimal lexeme).
    pub fn from_u64(n: u64) -> Number {
        Number {
            lexeme: n.to_string(),
        }
    }

    /// Builds a number from a lexeme, checking it against the RFC 8259
    /// number grammar. Returns `None` if `lexeme` is not a JSON number.
    pub fn from_lexeme(lexeme: &str) -> Option<Number> {
        let bytes = lexeme.as_bytes();
        match scan_number(bytes, 0) {
            Ok(end) if end == bytes.len() => Some(Number {
                lexeme: lexeme.to_owned(),
            }),
            _ => None,
        }
    }

    /// The IEEE-754 double nearest to the lexeme (correctly rounded), or
    /// `None` if it overflows to infinity. This is the value JCS (RFC 8785)
    /// serializes.
    pub fn as_f64(&self) -> Option<f64> {
        self.lexeme
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite())
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.lexeme)
    }
}

/// A JSON object: members in received (or insertion) order, keys unique.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Object {
    members: Vec<(String, Value)>,
}

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Object::default()
    }

    /// The value of member `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, value)| value)
    }

    /// Sets member `key`, returning the previous value if there was one (the
    /// key keeps its original position then).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        let key = key.into();
        let value = value.into();
        match self.members.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => Some(std::mem::replace(slot, value)),
            None => {
                self.members.push((key, value));
                None
            }
        }
    }

    /// Removes member `key`, returning its value if it was present.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let index = self.members.iter().position(|(k, _)| k == key)?;
        Some(self.members.remove(index).1)
    }

    /// Whether member `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(k, _)| k.as_str())
    }

    /// The members, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl FromIterator<(String, Value)> for Object {
    /// Collects members; a repeated key keeps the last value (builder use
    /// only: the parser rejects duplicates instead).
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut object = Object::new();
        for (key, value) in iter {
            object.insert(key, value);
        }
        object
    }
}

/// A JSON value as read by the strict reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number with its raw lexeme.
    Number(Number),
    /// A string (escapes decoded; always valid Unicode scalar values).
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object.
    Object(Object),
}

impl Value {
    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if this is an object.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The number, if this is a number.
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The boolean, if this is a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A short name of the value's JSON type, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}
impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Value::Object(o)
    }
}
impl From<Number> for Value {
    fn from(n: Number) -> Self {
        Value::Number(n)
    }
}
impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Self {
        Value::Array(items)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// Converts a `serde_json::Value` (for builders and tests). Numbers take
/// serde_json's rendering as their lexeme; a repeated key cannot occur
/// because serde_json maps are already unique.
pub fn from_serde(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(Number {
            lexeme: n.to_string(),
        }),
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(from_serde).collect()),
        serde_json::Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), from_serde(v)))
                .collect(),
        ),
    }
}

/// Parses `bytes` as one JSON text under [`Limits::FROZEN`].
///
/// # Errors
/// A [`JsonError`] naming the first violation; the input is never repaired.
pub fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    parse_with_limits(bytes, Limits::FROZEN)
}

/// Parses `bytes` under `limits`, which are first narrowed to the frozen
/// ceiling (they can tighten, never loosen).
///
/// # Errors
/// A [`JsonError`] naming the first violation.
pub fn parse_with_limits(bytes: &[u8], limits: Limits) -> Result<Value, JsonError> {
    let limits = Limits::FROZEN.narrowed_to(limits);
    if bytes.len() > limits.max_total_bytes {
        return Err(JsonError::Limit {
            kind: LimitKind::TotalBytes,
            limit: limits.max_total_bytes,
        });
    }
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(JsonError::InvalidUtf8 {
            offset: e.valid_up_to(),
        });
    }
    let mut reader = Reader {
        bytes,
        pos: 0,
        limits,
        total_keys: 0,
        total_items: 0,
    };
    reader.skip_ws();
    let value = reader.value(0)?;
    reader.skip_ws();
    if reader.pos != bytes.len() {
        return Err(JsonError::TrailingBytes { offset: reader.pos });
    }
    Ok(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    limits: Limits,
    total_keys: usize,
    total_items: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn unexpected(&self) -> JsonError {
        match self.peek() {
            Some(byte) => JsonError::UnexpectedByte {
                byte,
                offset: self.pos,
            },
            None => JsonError::UnexpectedEnd,
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn limit(kind: LimitKind, limit: usize) -> JsonError {
        JsonError::Limit { kind, limit }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.peek() {
            None => Err(JsonError::UnexpectedEnd),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'n') => self.literal(b"null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn literal(&mut self, text: &[u8], value: Value) -> Result<Value, JsonError> {
        for &expected in text {
            if self.peek() != Some(expected) {
                return Err(self.unexpected());
            }
            self.pos += 1;
        }
        Ok(value)
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        let end = scan_number(self.bytes, start)?;
        self.pos = end;
        let lexeme = self
            .bytes
            .get(start..end)
            .and_then(|slice| std::str::from_utf8(slice).ok())
            .ok_or(JsonError::InvalidNumber { offset: start })?;
        Ok(Value::Number(Number {
            lexeme: lexeme.to_owned(),
        }))
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > self.limits.max_depth {
            return Err(Self::limit(LimitKind::Depth, self.limits.max_depth));
        }
        self.expect(b'{')?;
        let mut object = Object::new();
        let mut seen: HashSet<String> = HashSet::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(object));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected());
            }
            let key_offset = self.pos;
            let key = self.string()?;
            if object.members.len() >= self.limits.max_object_keys {
                return Err(Self::limit(
                    LimitKind::ObjectKeys,
                    self.limits.max_object_keys,
                ));
            }
            self.total_keys += 1;
            if self.total_keys > self.limits.max_total_keys {
                return Err(Self::limit(
                    LimitKind::TotalKeys,
                    self.limits.max_total_keys,
                ));
            }
            if !seen.insert(key.clone()) {
                return Err(JsonError::DuplicateKey {
                    key,
                    offset: key_offset,
                });
            }
            self.skip_ws();
            self.expect(b':')?;
            self.skip_ws();
            let value = self.value(depth)?;
            object.members.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(object));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > self.limits.max_depth {
            return Err(Self::limit(LimitKind::Depth, self.limits.max_depth));
        }
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            if items.len() >= self.limits.max_array_items {
                return Err(Self::limit(
                    LimitKind::ArrayItems,
                    self.limits.max_array_items,
                ));
            }
            self.total_items += 1;
            if self.total_items > self.limits.max_total_items {
                return Err(Self::limit(
                    LimitKind::TotalItems,
                    self.limits.max_total_items,
                ));
            }
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    /// Reads a string starting at the opening quote. The input is already
    /// known to be valid UTF-8, so multi-byte sequences are copied whole.
    fn string(&mut self) -> Result<String, JsonError> {
        self.expect(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let offset = self.pos;
            let Some(byte) = self.peek() else {
                return Err(JsonError::UnexpectedEnd);
            };
            self.pos += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let Some(escape) = self.peek() else {
                        return Err(JsonError::UnexpectedEnd);
                    };
                    self.pos += 1;
                    let simple = match escape {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'u' => None,
                        _ => return Err(JsonError::InvalidString { offset }),
                    };
                    match simple {
                        Some(decoded) => out.push(decoded),
                        None => {
                            let c = self.unicode_escape(offset)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                    }
                }
                0x00..=0x1f => return Err(JsonError::InvalidString { offset }),
                _ => out.push(byte),
            }
            if out.len() > self.limits.max_string_bytes {
                return Err(Self::limit(
                    LimitKind::StringBytes,
                    self.limits.max_string_bytes,
                ));
            }
        }
        // Escapes produce whole scalar values and raw bytes come from valid
        // UTF-8 copied between ASCII delimiters, so this cannot fail; map the
        // impossible case to an error rather than panicking.
        String::from_utf8(out).map_err(|_| JsonError::InvalidUtf8 { offset: self.pos })
    }

    fn hex4(&mut self, offset: usize) -> Result<u16, JsonError> {
        let mut value: u16 = 0;
        for _ in 0..4 {
            let Some(byte) = self.peek() else {
                return Err(JsonError::UnexpectedEnd);
            };
            let digit = match byte {
                b'0'..=b'9' => byte - b'0',
                b'a'..=b'f' => byte - b'a' + 10,
                b'A'..=b'F' => byte - b'A' + 10,
                _ => return Err(JsonError::InvalidString { offset }),
            };
            self.pos += 1;
            value = (value << 4) | u16::from(digit);
        }
        Ok(value)
    }

    /// Decodes the `XXXX` of a `\uXXXX` escape (the `\u` is consumed), joining
    /// a surrogate pair; an unpaired surrogate is an error.
    fn unicode_escape(&mut self, offset: usize) -> Result<char, JsonError> {
        let first = self.hex4(offset)?;
        let code = match first {
            0xD800..=0xDBFF => {
                if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u".as_slice()) {
                    return Err(JsonError::UnpairedSurrogate { offset });
                }
                self.pos += 2;
                let second = self.hex4(offset)?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(JsonError::UnpairedSurrogate { offset });
                }
                0x10000 + ((u32::from(first) - 0xD800) << 10) + (u32::from(second) - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(JsonError::UnpairedSurrogate { offset }),
            _ => u32::from(first),
        };
        char::from_u32(code).ok_or(JsonError::UnpairedSurrogate { offset })
    }
}

/// Scans an RFC 8259 number starting at `start`; returns the end offset.
/// Grammar: `-? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?`.
fn scan_number(bytes: &[u8], start: usize) -> Result<usize, JsonError> {
    let invalid = JsonError::InvalidNumber { offset: start };
    let at = |i: usize| bytes.get(i).copied();
    let digits = |mut i: usize| {
        let begin = i;
        while let Some(b'0'..=b'9') = at(i) {
            i += 1;
        }
        (i, i - begin)
    };
    let mut i = start;
    if at(i) == Some(b'-') {
        i += 1;
    }
    match at(i) {
        Some(b'0') => {
            i += 1;
            if let Some(b'0'..=b'9') = at(i) {
                return Err(invalid);
            }
        }
        Some(b'1'..=b'9') => i = digits(i).0,
        _ => return Err(invalid),
    }
    if at(i) == Some(b'.') {
        let (end, count) = digits(i + 1);
        if count == 0 {
            return Err(invalid);
        }
        i = end;
    }
    if let Some(b'e' | b'E') = at(i) {
        i += 1;
        if let Some(b'+' | b'-') = at(i) {
            i += 1;
        }
        let (end, count) = digits(i);
        if count == 0 {
            return Err(invalid);
        }
        i = end;
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(input: &[u8]) -> JsonError {
        match parse(input) {
            Err(e) => e,
            Ok(v) => panic!("accepted {:?} as {v:?}", String::from_utf8_lossy(input)),
        }
    }

    #[test]
    fn keeps_number_lexemes() {
        let v = parse(br#"{"a":1,"b":1.0,"c":1e0,"d":-0.5E+3}"#).unwrap();
        let o = v.as_object().unwrap();
        let lex = |k| o.get(k).unwrap().as_number().unwrap().lexeme().to_owned();
        assert_eq!(lex("a"), "1");
        assert_eq!(lex("b"), "1.0");
        assert_eq!(lex("c"), "1e0");
        assert_eq!(lex("d"), "-0.5E+3");
        assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    }

    #[test]
    fn rejects_bad_numbers() {
        for input in [
            "01", "+1", "1.", ".5", "-", "1e", "1e+", "--1", "0x10", "NaN", "Infinity",
        ] {
            let e = err(input.as_bytes());
            assert!(
                matches!(
                    e,
                    JsonError::InvalidNumber { .. }
                        | JsonError::UnexpectedByte { .. }
                        | JsonError::TrailingBytes { .. }
                ),
                "{input}: {e:?}"
            );
        }
        assert_eq!(err(b"01"), JsonError::InvalidNumber { offset: 0 });
        assert_eq!(
            err(b"+1"),
            JsonError::UnexpectedByte {
                byte: b'+',
                offset: 0
            }
        );
    }

    #[test]
    fn rejects_duplicate_keys_after_unescaping() {
        assert_eq!(
            err(br#"{"a":1,"\u0061":2}"#),
            JsonError::DuplicateKey {
                key: "a".into(),
                offset: 7
            }
        );
        assert!(matches!(
            err(br#"{"a":{"b":1,"b":1}}"#),
            JsonError::DuplicateKey { .. }
        ));
    }

    #[test]
    fn rejects_invalid_utf8_and_surrogates() {
        assert_eq!(err(b"\"\xC0\xAF\""), JsonError::InvalidUtf8 { offset: 1 });
        assert_eq!(
            err(b"\"\xED\xA0\x80\""),
            JsonError::InvalidUtf8 { offset: 1 }
        );
        assert_eq!(
            err(b"\"\xF4\x90\x80\x80\""),
            JsonError::InvalidUtf8 { offset: 1 }
        );
        assert_eq!(
            err(br#""\ud800""#),
            JsonError::UnpairedSurrogate { offset: 1 }
        );
        assert_eq!(
            err(br#""\udc00\ud800""#),
            JsonError::UnpairedSurrogate { offset: 1 }
        );
        assert_eq!(
            err(br#""\ud800\u0041""#),
            JsonError::UnpairedSurrogate { offset: 1 }
        );
        let v = parse(br#""\ud83d\ude00""#).unwrap();
        assert_eq!(v.as_str(), Some("\u{1F600}"));
    }

    #[test]
    fn rejects_syntax_outside_rfc8259() {
        for input in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "{'a':1}",
            "[1 2]",
            "{\"a\" 1}",
            "tru",
            "nul",
            "// c\n1",
            "\u{feff}1",
            "\"a\tb\"",
            "\"\\x\"",
            "1 1",
            "{\"a\":1}x",
            "[]]",
        ] {
            assert!(parse(input.as_bytes()).is_err(), "accepted {input:?}");
        }
        assert_eq!(err(b"1 2"), JsonError::TrailingBytes { offset: 2 });
        assert_eq!(err(b""), JsonError::UnexpectedEnd);
    }

    #[test]
    fn accepts_rfc8259_values() {
        assert_eq!(parse(b" null ").unwrap(), Value::Null);
        assert_eq!(parse(b"true").unwrap(), Value::Bool(true));
        assert_eq!(
            parse(br#""\"\\\/\b\f\n\r\t\u00e9""#).unwrap().as_str(),
            Some("\"\\/\u{8}\u{c}\n\r\té")
        );
        assert_eq!(parse(b"[]").unwrap(), Value::Array(vec![]));
        assert_eq!(parse(b"{}").unwrap(), Value::Object(Object::new()));
        assert_eq!(parse("\"é\"".as_bytes()).unwrap().as_str(), Some("é"));
    }

    #[test]
    fn enforces_each_limit() {
        let deep = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(deep.as_bytes()).is_ok());
        let deeper = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(
            err(deeper.as_bytes()),
            JsonError::Limit {
                kind: LimitKind::Depth,
                limit: MAX_DEPTH
            }
        );
        let keys = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":0")).collect();
            format!("{{{}}}", members.join(","))
        };
        assert!(parse(keys(MAX_OBJECT_KEYS).as_bytes()).is_ok());
        assert_eq!(
            err(keys(MAX_OBJECT_KEYS + 1).as_bytes()),
            JsonError::Limit {
                kind: LimitKind::ObjectKeys,
                limit: MAX_OBJECT_KEYS
            }
        );
        let total_keys = format!("[{}]", vec![keys(200); 11].join(","));
        assert_eq!(
            err(total_keys.as_bytes()),
            JsonError::Limit {
                kind: LimitKind::TotalKeys,
                limit: MAX_TOTAL_KEYS
            }
        );
        let items = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        assert!(parse(items(MAX_ARRAY_ITEMS).as_bytes()).is_ok());
        assert_eq!(
            err(items(MAX_ARRAY_ITEMS + 1).as_bytes()),
            JsonError::Limit {
                kind: LimitKind::ArrayItems,
                limit: MAX_ARRAY_ITEMS
            }
        );
        let total_items = format!("[{}]", vec![items(1000); 5].join(","));
        assert_eq!(
            err(total_items.as_bytes()),
            JsonError::Limit {
                kind: LimitKind::TotalItems,
                limit: MAX_TOTAL_ITEMS
            }
        );
        let string = |n: usize| format!("\"{}\"", "a".repeat(n));
        assert!(parse(string(MAX_STRING_BYTES).as_bytes()).is_ok());
        assert_eq!(
            err(string(MAX_STRING_BYTES + 1).as_bytes()),
            JsonError::Limit {
                kind: LimitKind::StringBytes,
                limit: MAX_STRING_BYTES
            }
        );
        let total = format!("{}{}", " ".repeat(MAX_TOTAL_BYTES), "1");
        assert_eq!(
            err(total.as_bytes()),
            JsonError::Limit {
                kind: LimitKind::TotalBytes,
                limit: MAX_TOTAL_BYTES
            }
        );
    }

    #[test]
    fn overrides_only_narrow() {
        let wide = Limits {
            max_depth: 1000,
            ..Limits::FROZEN
        };
        assert_eq!(Limits::FROZEN.narrowed_to(wide), Limits::FROZEN);
        let narrow = Limits {
            max_depth: 1,
            ..Limits::FROZEN
        };
        assert!(parse_with_limits(b"[]", narrow).is_ok());
        assert!(parse_with_limits(b"[[]]", narrow).is_err());
    }

    #[test]
    fn number_from_lexeme_checks_grammar() {
        assert_eq!(Number::from_lexeme("12").unwrap().lexeme(), "12");
        assert!(Number::from_lexeme("012").is_none());
        assert!(Number::from_lexeme("1 ").is_none());
        assert_eq!(Number::from_lexeme("1e400").unwrap().as_f64(), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn never_panics_on_json_like_bytes(s in "[\\[\\]{}\":,0-9eE+.\\-\\\\u a-f tnrl]{0,256}") {
            let _ = parse(s.as_bytes());
        }
    }
}
