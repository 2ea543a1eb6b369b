//! JSON Canonicalization Scheme (RFC 8785) over the strict reader's values.
//!
//! The serialization itself is delegated to `serde_json_canonicalizer`
//! (chosen in `notes/rust-deps.md`: it passes RFC 8785 §3.2.2/§3.2.3, the
//! cyberphone test data and 599 933 V8 number cases, sorts keys by UTF-16
//! code units and errors on non-finite numbers). This module adapts
//! [`crate::json::Value`] to it: every number is serialized as the IEEE-754
//! double nearest its lexeme, which is what RFC 8785 §3.2.2.3 canonicalizes.
//! This is why `1`, `1.0` and `1e0` have identical JCS bytes, and why §5a.3
//! has to check the `generation` lexeme *before* canonicalization.
//!
//! Used for: signature inputs (§5a.3 proofs, `eddsa-jcs-2022`), the §5
//! plaintext and the document digest (§2).

use crate::json::{Number, Value};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// Why a value has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JcsError {
    /// A number whose nearest double is infinite (e.g. `1e400`): RFC 8785
    /// §3.2.2.3 has no serialization for it.
    #[error("number {lexeme} has no finite IEEE-754 value")]
    NonFiniteNumber {
        /// The offending lexeme.
        lexeme: String,
    },
    /// Any other serializer failure (not expected for reader values).
    #[error("canonicalization failed: {0}")]
    Serializer(String),
}

/// The RFC 8785 canonical UTF-8 bytes of `value`.
///
/// # Errors
/// [`JcsError::NonFiniteNumber`] for a number outside the double range.
pub fn canonicalize(value: &Value) -> Result<Vec<u8>, JcsError> {
    find_non_finite(value)?;
    serde_json_canonicalizer::to_vec(&Canonical(value))
        .map_err(|e| JcsError::Serializer(e.to_string()))
}

/// [`canonicalize`] as a `String` (JCS output is always UTF-8).
///
/// # Errors
/// As [`canonicalize`].
pub fn canonicalize_string(value: &Value) -> Result<String, JcsError> {
    let bytes = canonicalize(value)?;
    String::from_utf8(bytes).map_err(|e| JcsError::Serializer(e.to_string()))
}

fn find_non_finite(value: &Value) -> Result<(), JcsError> {
    match value {
        Value::Number(n) if n.as_f64().is_none() => Err(JcsError::NonFiniteNumber {
            lexeme: n.lexeme().to_owned(),
        }),
        Value::Array(items) => items.iter().try_for_each(find_non_finite),
        Value::Object(o) => o.iter().try_for_each(|(_, v)| find_non_finite(v)),
        _ => Ok(()),
    }
}

struct Canonical<'a>(&'a Value);

fn number_f64<E: serde::ser::Error>(n: &Number) -> Result<f64, E> {
    n.as_f64()
        .ok_or_else(|| E::custom(format!("non-finite number {}", n.lexeme())))
}

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => serializer.serialize_f64(number_f64::<S::Error>(n)?),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Canonical(item))?;
                }
                seq.end()
            }
            Value::Object(object) => {
                let mut map = serializer.serialize_map(Some(object.len()))?;
                for (key, item) in object.iter() {
                    map.serialize_entry(key, &Canonical(item))?;
                }
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn jcs(input: &str) -> String {
        canonicalize_string(&parse(input.as_bytes()).unwrap()).unwrap()
    }

    /// RFC 8785 §3.2.2 example, including its number and string cases.
    #[test]
    fn rfc8785_example() {
        let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
        assert_eq!(
            jcs(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    /// RFC 8785 §3.2.3: keys sorted by UTF-16 code units, not code points.
    #[test]
    fn rfc8785_utf16_key_ordering() {
        let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
        let out = jcs(input);
        let v = parse(out.as_bytes()).unwrap();
        let keys: Vec<String> = v
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.chars().map(|c| format!("{:04x}", c as u32)).collect())
            .collect();
        assert_eq!(
            keys,
            ["000d", "0031", "0080", "00f6", "20ac", "1f600", "fb33"]
        );
    }

    /// RFC 8785 Appendix B / §3.2.2.3 number serialization edge cases.
    #[test]
    fn rfc8785_numbers() {
        let cases = [
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("-0.0", "0"),
            ("1E+30", "1e+30"),
            ("1.0", "1"),
            ("1e0", "1"),
            ("9007199254740993", "9007199254740992"),
            ("4.35", "4.35"),
            ("0.1", "0.1"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("295147905179352830000", "295147905179352830000"),
            ("-1.5e-10", "-1.5e-10"),
        ];
        for (input, expected) in cases {
            assert_eq!(jcs(input), expected, "{input}");
        }
    }

    #[test]
    fn rejects_non_finite() {
        let v = parse(b"[1e400]").unwrap();
        assert_eq!(
            canonicalize(&v),
            Err(JcsError::NonFiniteNumber {
                lexeme: "1e400".into()
            })
        );
    }

    proptest::proptest! {
        /// JCS is idempotent: canonical bytes re-read and re-canonicalized are unchanged.
        #[test]
        fn idempotent(value in arb_value()) {
            let once = canonicalize(&value).unwrap();
            let twice = canonicalize(&parse(&once).unwrap()).unwrap();
            proptest::prop_assert_eq!(once, twice);
        }
    }

    fn arb_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| Value::Number(Number::from_lexeme(&format!("{f:e}")).unwrap())),
            any::<i64>().prop_map(|i| Value::Number(Number::from_lexeme(&i.to_string()).unwrap())),
            "\\PC{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("\\PC{0,6}", inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }
}
