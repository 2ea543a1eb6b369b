//! The direct frame writer of the carrier's answers (`PROTOCOL.md` §6:
//! "headers written by this implementation are JCS").
//!
//! Every answer header the carrier writes is a flat object of strings,
//! booleans and integers. For those RFC 8785 has a short rule, applied
//! here without a JSON tree or a JCS pass: members sorted by key (the keys
//! are ASCII, so UTF-16 order is byte order, §3.2.3); a string in quotes
//! with `"` `\` and the C0 controls escaped, `\b \t \n \f \r` short and the
//! rest as `\u00xx` lowercase, everything else (U+007F, U+2028, any
//! non-ASCII) as its UTF-8 (§3.2.2.2); an integer as ES6 writes the double
//! nearest it (§3.2.2.3), which is its decimal digits up to 2^53 — above,
//! the double is rounded and the frame is written by the JCS path
//! instead. The `*_header` functions of [`crate::response`] stay the
//! reference: each direct encoder has a test that its bytes equal
//! [`encode_frame`] of its header, and falls back to it.

use crate::frame::{PREFIX_BYTES, encode_frame};
use rltp_proofs::json::Object;

/// Largest integer the direct writer spells: every integer up to 2^53 is
/// a double exactly, so its JCS spelling is its decimal digits.
pub(crate) const MAX_EXACT: u64 = 1 << 53;

/// One member value of a flat header.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Flat<'a> {
    /// A JSON string (escaped as RFC 8785 §3.2.2.2 asks).
    Str(&'a str),
    /// `true` / `false`.
    Bool(bool),
    /// An integer, spelled directly up to [`MAX_EXACT`].
    Uint(u64),
}

/// A flat header: its members by key (ASCII, any order), `None` for a
/// member left out.
pub(crate) type Members<'a, 'm> = &'m mut [(&'static str, Option<Flat<'a>>)];

/// Appends the frame of the flat header `members` and `body` to `out`:
/// the bytes of [`encode_frame`] of `reference()`, which is what is
/// written for an integer above [`MAX_EXACT`].
pub(crate) fn frame_into(
    out: &mut Vec<u8>,
    members: Members<'_, '_>,
    body: &[u8],
    reference: impl FnOnce() -> Object,
) {
    if members
        .iter()
        .any(|(_, value)| matches!(value, Some(Flat::Uint(n)) if *n > MAX_EXACT))
    {
        out.extend(encode_frame(&reference(), body));
        return;
    }
    members.sort_unstable_by_key(|(key, _)| *key);
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX_BYTES]);
    out.push(b'{');
    let mut first = true;
    for (key, value) in members.iter() {
        let Some(value) = value else {
            continue;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        push_str(out, key);
        out.push(b':');
        match value {
            Flat::Str(text) => push_str(out, text),
            Flat::Bool(true) => out.extend_from_slice(b"true"),
            Flat::Bool(false) => out.extend_from_slice(b"false"),
            Flat::Uint(n) => push_uint(out, *n),
        }
    }
    out.push(b'}');
    let header_len = out.len() - start - PREFIX_BYTES;
    out.extend_from_slice(body);
    if let Some(prefix) = out.get_mut(start..start + PREFIX_BYTES) {
        prefix[..4].copy_from_slice(&(header_len as u32).to_be_bytes());
        prefix[4..].copy_from_slice(&(body.len() as u32).to_be_bytes());
    }
}

/// A JSON string as RFC 8785 §3.2.2.2 spells it: serde_json's escaping
/// is that rule (`"`, `\` and the C0 controls escaped, `\b \t \n \f \r`
/// short and the rest `\u00xx` lowercase, everything else as its UTF-8),
/// which the tests below hold to the JCS path.
fn push_str(out: &mut Vec<u8>, text: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(out, text);
}

/// Decimal digits of `n` (serde_json's integer writer).
fn push_uint(out: &mut Vec<u8>, n: u64) {
    let _ = serde_json::to_writer(out, &n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rltp_proofs::json::Number;

    fn direct(members: Members<'_, '_>, body: &[u8]) -> Vec<u8> {
        let mut out = b"kept".to_vec();
        frame_into(&mut out, members, body, || panic!("no fallback expected"));
        out.split_off(4)
    }

    fn reference(text: &str) -> Object {
        let mut h = Object::new();
        h.insert("detail", text);
        h.insert("error", "x");
        h
    }

    /// A string member's bytes are the JCS ones: every ASCII character,
    /// quotes and backslashes, U+007F, U+2028/2029, non-ASCII, emoji.
    #[test]
    fn strings_are_escaped_as_jcs_escapes_them() {
        let mut table: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        table.extend(
            [
                "",
                "\"\\\"",
                "a\\b",
                "\u{7f}",
                "\u{80}",
                "\u{2028}\u{2029}",
                "é€😀",
                "\u{feff}x",
                "tab\there\r\n",
                "\u{0}\u{1f}",
            ]
            .map(String::from),
        );
        table.push((0u8..0x80).map(char::from).collect());
        for text in table {
            let mut members = [
                ("error", Some(Flat::Str("x"))),
                ("absent", None),
                ("detail", Some(Flat::Str(&text))),
            ];
            assert_eq!(
                direct(&mut members, b"body"),
                encode_frame(&reference(&text), b"body"),
                "{text:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_string_is_escaped_as_jcs_escapes_it(text in any::<String>()) {
            let mut members = [("detail", Some(Flat::Str(&text))), ("error", Some(Flat::Str("x")))];
            prop_assert_eq!(direct(&mut members, b""), encode_frame(&reference(&text), b""));
        }

        #[test]
        fn any_exact_integer_is_spelled_as_jcs_spells_it(n in 0..=MAX_EXACT, b: bool) {
            let mut h = Object::new();
            h.insert("n", Number::from_u64(n));
            h.insert("b", b);
            let mut members = [("n", Some(Flat::Uint(n))), ("b", Some(Flat::Bool(b)))];
            prop_assert_eq!(direct(&mut members, b"x"), encode_frame(&h, b"x"));
        }
    }

    /// Integers at the edges of the exact range are spelled directly;
    /// above it, the frame is the reference's JCS frame.
    #[test]
    fn integers_above_two_to_the_53_take_the_jcs_path() {
        for n in [
            0,
            1,
            9,
            10,
            MAX_EXACT - 1,
            MAX_EXACT,
            MAX_EXACT + 1,
            MAX_EXACT + 2,
            1 << 63,
            u64::MAX,
        ] {
            let mut h = Object::new();
            h.insert("seq", Number::from_u64(n));
            let expected = encode_frame(&h, b"");
            let mut out = Vec::new();
            let mut fell_back = false;
            frame_into(&mut out, &mut [("seq", Some(Flat::Uint(n)))], b"", || {
                fell_back = true;
                h.clone()
            });
            assert_eq!(out, expected, "{n}");
            assert_eq!(fell_back, n > MAX_EXACT, "{n}");
        }
        // The JCS spelling above 2^53 is the rounded double's, which is
        // why the direct writer does not spell those.
        let mut h = Object::new();
        h.insert("seq", Number::from_u64(MAX_EXACT + 1));
        assert_eq!(
            &encode_frame(&h, b"")[PREFIX_BYTES..],
            b"{\"seq\":9007199254740992}"
        );
    }
}
