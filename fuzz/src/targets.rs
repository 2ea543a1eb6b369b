//! Fuzz target bodies (issue 6), one function per target.
//!
//! Each body feeds arbitrary bytes to one parser of untrusted input and
//! checks more than "no panic": whatever a parser accepts must survive a
//! round trip through its own encoder and be accepted again, unchanged.
//! A failed check panics, which libFuzzer reports as a crash.
//!
//! The same file is compiled into the main workspace's test
//! `carrier/tests/fuzz_corpus.rs` (`#[path]`), which replays every
//! committed seed and every crash reproducer on stable Rust as part of the
//! README's test command, so a fixed crash stays fixed. In both places the
//! wire codec is the `rltp-wire` crate itself.
//!
//! | target | parser | extra checks |
//! |---|---|---|
//! | `json` | the strict reader (`rltp_proofs::json::parse`) | JCS of an accepted value is accepted again and is a fixed point |
//! | `frame` | `wire::parse_prefix` + `parse_header` + `Request::from_header` / `parse_stream_item`, and every response decoder the client runs | an accepted request re-encodes to a frame that decodes to the same request |
//! | `proof` | `proof::parse` (r1) under two carrier identifiers, then `verify` | — |
//! | `envelope` | `envelope::check_shape` (s2) for the `seal.json` queue, then `seal::open` with its key | the envelope's JCS passes s2 again, to the same value |
//! | `declaration` | `parse_declaration` → `verify_declaration` → `accept_carrier_declaration` | — |
//! | `shape` | s2's fast scan (`envelope::fast_shape`, `passes_shape`) beside the strict `check_shape`, for the `seal.json` queue and another, under the bound and one byte below the input's length; the stream-item header's fast reader (`parse_stream_item_bytes`), the submit answer's (`SubmitAnswer::from_header_bytes`) and the collect frame's (`CollectFrame::from_header_bytes`) beside the strict ones | the fast and the strict paths give the same answer on every input |

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, check_shape, fast_shape, passes_shape};
use rltp_proofs::json;
use rltp_proofs::multikey::{Rkid, RkidText};
use rltp_wire::{self as wire, Request, response};

/// The carrier identifier of the shipped proof vectors (`carrier-proof.json`).
pub const VECTOR_CARRIER: &str = "did:web:carrier.example";
/// The carrier identifier of a default-configured carrier.
pub const DEFAULT_CARRIER: &str = "did:web:localhost";
/// The queue of the shipped seal vector (`seal.json` `inputs.rkid`).
pub const SEAL_RKID: &str = "z6LStLK2kxribiLHz6U4vpGfzMtmgc4q5WjR4mvhS6KG1W16";
/// The recipient's X25519 secret of `seal.json` (`inputs.recipientPrivateKeyRaw`).
pub const SEAL_SECRET: [u8; 32] = [10u8; 32];

/// A target body.
pub type Body = fn(&[u8]);

/// Every target, by name (the corpus folder names).
pub const TARGETS: [(&str, Body); 6] = [
    ("json", json),
    ("frame", frame),
    ("proof", proof),
    ("envelope", envelope),
    ("declaration", declaration),
    ("shape", shape),
];

/// The strict JSON reader: accepted input canonicalizes (RFC 8785) to
/// bytes the reader accepts again, and canonicalizing those gives the same
/// bytes. (JCS may legitimately fail only for a number with no finite
/// double, and may grow past the input limit only through number
/// spelling, e.g. `9e20` → 21 digits.)
pub fn json(data: &[u8]) {
    let Ok(value) = json::parse(data) else {
        return;
    };
    let Ok(jcs) = rltp_proofs::jcs::canonicalize(&value) else {
        return;
    };
    if jcs.len() > json::MAX_TOTAL_BYTES {
        return;
    }
    let again = json::parse(&jcs).unwrap_or_else(|e| {
        panic!(
            "the reader refused its own JCS output ({e}): {:?}",
            String::from_utf8_lossy(&jcs)
        )
    });
    let jcs2 = rltp_proofs::jcs::canonicalize(&again).expect("JCS of a JCS-parsed value");
    assert_eq!(jcs, jcs2, "JCS is not a fixed point");
}

/// The frame decoder, server side (prefix, header, request) and client
/// side (every response header reader).
pub fn frame(data: &[u8]) {
    if let Some((prefix, rest)) = data.split_first_chunk::<{ wire::PREFIX_BYTES }>()
        && let Ok((header_len, body_len)) = wire::parse_prefix(*prefix, wire::MAX_BODY_BYTES)
    {
        assert!(header_len <= wire::MAX_HEADER_BYTES && body_len <= wire::MAX_BODY_BYTES);
        if let Some(header_bytes) = rest.get(..header_len) {
            request(header_bytes);
        }
    }
    // The client reads the same header shapes from the server.
    if let Ok(header) = wire::parse_header(data) {
        let rkid = Rkid::parse(SEAL_RKID).expect("static rkid");
        let _ = response::SubmitAnswer::from_header(&header);
        let _ = response::ChallengeAnswer::from_header(&header, &rkid);
        let _ = response::CollectFrame::from_header(&header);
        let _ = response::parse_status_header(&header);
        let _ = response::parse_verdict_header(&header, &[]);
        let _ = response::parse_conclude_header(&header);
        let _ = response::parse_declaration_header(&header);
        if let Ok(answer) = response::SubmitAnswer::from_header(&header) {
            assert_eq!(
                response::SubmitAnswer::from_header(&answer.to_header()).as_ref(),
                Ok(&answer),
                "a submit answer does not round-trip"
            );
        }
    }
    let _ = response::split_error(data);
}

/// One request header: parsed, then re-encoded and parsed again.
fn request(header_bytes: &[u8]) {
    let Ok(header) = wire::parse_header(header_bytes) else {
        return;
    };
    let _ = wire::parse_stream_item(&header);
    let Ok(request) = Request::from_header(&header) else {
        return;
    };
    assert!(request.max_body() <= wire::MAX_BODY_BYTES);
    let frame = wire::encode_frame(&request.to_header(), b"");
    let (prefix, rest) = frame
        .split_first_chunk::<{ wire::PREFIX_BYTES }>()
        .expect("an encoded frame has a prefix");
    let (len, body) = wire::parse_prefix(*prefix, 0).expect("own prefix");
    assert_eq!((len, body), (rest.len(), 0));
    let again = wire::parse_header(rest).expect("own header");
    assert_eq!(
        Request::from_header(&again).as_ref(),
        Ok(&request),
        "a request does not round-trip"
    );
}

/// r1: the proof parser, then signature verification of what parses.
pub fn proof(data: &[u8]) {
    for carrier in [VECTOR_CARRIER, DEFAULT_CARRIER] {
        if let Ok(parsed) = rltp_proofs::proof::parse(data, carrier) {
            let _ = parsed.purpose();
            let _ = parsed.verify();
        }
    }
}

/// s2: the envelope shape check for the `seal.json` queue; what passes is
/// re-serialized (JCS), passes again to the same value, and is opened.
pub fn envelope(data: &[u8]) {
    let rkid = Rkid::parse(SEAL_RKID).expect("static rkid");
    let Ok(sealed) = check_shape(data, &rkid, MAX_ENVELOPE_BYTES) else {
        return;
    };
    let bytes = sealed.to_bytes();
    let again = check_shape(&bytes, &rkid, MAX_ENVELOPE_BYTES)
        .unwrap_or_else(|e| panic!("the JCS of an accepted envelope is refused: {e}"));
    assert_eq!(again, sealed, "an envelope does not round-trip");
    let _ = rltp_proofs::seal::open(&sealed, &SEAL_SECRET);
}

/// The fast paths agree with the strict ones: s2 (`fast_shape` and
/// `passes_shape` against `check_shape`) for two queues and two bounds,
/// the stream-item header (`parse_stream_item_bytes`, and through a
/// stream's known `rkid` texts, against
/// `parse_header` + `parse_stream_item`, errors included), and the
/// client's answer readers (`SubmitAnswer::from_header_bytes`,
/// `CollectFrame::from_header_bytes` against `split_error` + their
/// `from_header`: the same accept or reject, the same value, the same
/// error).
pub fn shape(data: &[u8]) {
    let seal = Rkid::parse(SEAL_RKID).expect("static rkid");
    for queue in [seal, Rkid::from_bytes([7; 32])] {
        let text = RkidText::of(&queue);
        for bound in [MAX_ENVELOPE_BYTES, data.len().saturating_sub(1)] {
            let strict = check_shape(data, &queue, bound).is_ok();
            assert_eq!(
                fast_shape(data, &text, bound),
                strict,
                "s2: fast and strict differ"
            );
            assert_eq!(passes_shape(data, &queue, &text, bound), strict);
        }
    }
    let strict = wire::parse_header(data).and_then(|h| wire::parse_stream_item(&h));
    assert_eq!(
        wire::parse_stream_item_bytes(data),
        strict,
        "stream item header: fast and strict differ"
    );
    // Read again through a stream's known texts: decoded, then found.
    let mut known = rltp_proofs::multikey::RkidTexts::default();
    for round in ["decoded", "known"] {
        assert_eq!(
            wire::parse_stream_item_bytes_with(data, &mut known),
            strict,
            "stream item header ({round} rkid text): fast and strict differ"
        );
    }
    assert_eq!(
        response::SubmitAnswer::from_header_bytes(data),
        strict_answer(data, response::SubmitAnswer::from_header),
        "submit answer: fast and strict differ"
    );
    assert_eq!(
        response::CollectFrame::from_header_bytes(data),
        strict_answer(data, response::CollectFrame::from_header),
        "collect frame: fast and strict differ"
    );
}

/// An answer header by the strict path: `split_error`, then `read`.
fn strict_answer<T>(
    data: &[u8],
    read: fn(&json::Object) -> Result<T, wire::FrameError>,
) -> Result<Result<T, response::ErrorAnswer>, wire::FrameError> {
    response::split_error(data).and_then(|header| match header {
        Ok(h) => read(&h).map(Ok),
        Err(error) => Ok(Err(error)),
    })
}

/// §4.4 declarations: parse, verify, accept for the carrier role.
pub fn declaration(data: &[u8]) {
    let Ok(parsed) = rltp_proofs::declaration::parse_declaration(data) else {
        return;
    };
    let Ok(verified) = rltp_proofs::declaration::verify_declaration(parsed) else {
        return;
    };
    let _ = rltp_proofs::declaration::accept_carrier_declaration(&verified);
}
