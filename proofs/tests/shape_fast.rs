//! §5a.5 s2: the non-allocating scan (`envelope::fast_shape`) and the
//! strict checker (`envelope::check_shape`) agree on every input: on the
//! shipped `seal.json` envelope, on valid envelopes of every size class, on
//! near-valid ones (each a single rule broken) and on random bytes. The
//! fuzz target `shape` asserts the same on whatever the fuzzer finds.

mod common;

use proptest::prelude::*;
use rltp_proofs::encoding::b64url_encode;
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, check_shape, fast_shape, passes_shape};
use rltp_proofs::jcs::canonicalize;
use rltp_proofs::json;
use rltp_proofs::multikey::{Rkid, RkidText};
use rltp_proofs::seal::{MAX_CIPHERTEXT_BYTES, SealedEnvelope};

/// Asserts that both paths give one answer for `bytes` (under `bound`),
/// and returns it.
fn agree(bytes: &[u8], queue: &Rkid, bound: usize) -> bool {
    let strict = check_shape(bytes, queue, bound).is_ok();
    let text = RkidText::of(queue);
    assert_eq!(
        fast_shape(bytes, &text, bound),
        strict,
        "fast and strict differ on {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
    );
    assert_eq!(passes_shape(bytes, queue, &text, bound), strict);
    strict
}

fn envelope(rkid: Rkid, ciphertext_len: usize, seed: u8) -> Vec<u8> {
    SealedEnvelope {
        rkid,
        epk: [seed; 32],
        nonce: [seed.wrapping_add(1); 12],
        ciphertext: (0..ciphertext_len).map(|i| (i as u8) ^ seed).collect(),
    }
    .to_bytes()
}

/// Every single-rule break of a valid envelope that we can spell.
fn near_valid(valid: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8(valid.to_vec()).expect("jcs is utf-8");
    let mut out = Vec::new();
    // Each byte changed, dropped or doubled (bounded for long envelopes).
    let step = (valid.len() / 300).max(1);
    for i in (0..valid.len()).step_by(step).chain([valid.len() - 1]) {
        for replacement in [b'A', b'=', b'+', b'"', b'\\', b' ', b'_', b'1'] {
            let mut v = valid.to_vec();
            v[i] = replacement;
            out.push(v);
        }
        let mut dropped = valid.to_vec();
        dropped.remove(i);
        out.push(dropped);
        let mut doubled = valid.to_vec();
        doubled.insert(i, valid[i]);
        out.push(doubled);
    }
    // Truncations, trailing bytes, whitespace, another member order.
    for cut in [1, 2, valid.len() / 2, valid.len() - 1] {
        out.push(valid[..cut].to_vec());
    }
    for tail in [&b" "[..], b"\n", b"x", b"}", b"\0"] {
        let mut v = valid.to_vec();
        v.extend_from_slice(tail);
        out.push(v);
    }
    out.push(text.replacen(':', ": ", 1).into_bytes());
    out.push(text.replacen("\"epk\"", "\"e\\u0070k\"", 1).into_bytes());
    let value = json::parse(valid).expect("valid json");
    let object = value.as_object().expect("object");
    let reordered: Vec<String> = ["rkid", "nonce", "epk", "ciphertext"]
        .iter()
        .map(|k| {
            format!(
                "\"{k}\":\"{}\"",
                object.get(k).and_then(|v| v.as_str()).unwrap_or("")
            )
        })
        .collect();
    out.push(format!("{{{}}}", reordered.join(",")).into_bytes());
    // An extra member, a missing one.
    out.push(text.replacen("{", "{\"a\":\"b\",", 1).into_bytes());
    out.push(text.replacen("\"epk\"", "\"epq\"", 1).into_bytes());
    out
}

#[test]
fn the_shipped_vector_passes_both_paths() {
    let v = common::shipped("seal.json");
    let bytes = canonicalize(&json::from_serde(&v["output"]["sealedEnvelope"])).expect("jcs");
    let rkid = Rkid::parse(v["inputs"]["rkid"].as_str().expect("rkid")).expect("rkid parses");
    assert!(
        agree(&bytes, &rkid, MAX_ENVELOPE_BYTES),
        "the vector passes s2"
    );
    // To another queue, and under a bound one byte short: refused by both.
    assert!(!agree(
        &bytes,
        &Rkid::from_bytes([9; 32]),
        MAX_ENVELOPE_BYTES
    ));
    assert!(!agree(&bytes, &rkid, bytes.len() - 1));
    let mut refused = 0;
    for near in near_valid(&bytes) {
        refused += usize::from(!agree(&near, &rkid, MAX_ENVELOPE_BYTES));
    }
    assert!(
        refused > 100,
        "near-valid spellings are refused ({refused})"
    );
}

#[test]
fn size_classes_and_their_edges_agree() {
    let rkid = Rkid::from_bytes([0x42; 32]);
    // 16 bytes (tag only) and 65 553 are refused; 17 and 65 552 pass.
    for (len, passes) in [
        (0, false),
        (15, false),
        (16, false),
        (17, true),
        (18, true),
        (19, true),
        (1_000, true),
        (MAX_CIPHERTEXT_BYTES, true),
        (MAX_CIPHERTEXT_BYTES + 1, false),
    ] {
        let bytes = envelope(rkid, len, len as u8);
        assert_eq!(
            agree(&bytes, &rkid, 2 * MAX_ENVELOPE_BYTES),
            passes,
            "ciphertext of {len}"
        );
    }
    let largest = envelope(rkid, MAX_CIPHERTEXT_BYTES, 3);
    assert_eq!(largest.len(), MAX_ENVELOPE_BYTES);
    assert!(agree(&largest, &rkid, MAX_ENVELOPE_BYTES));
    assert!(!agree(&largest, &rkid, MAX_ENVELOPE_BYTES - 1));
    // Non-zero trailing bits in each base64url member: refused by both.
    let valid = String::from_utf8(envelope(rkid, 17, 0)).expect("ascii");
    let epk = b64url_encode(&[0; 32]);
    let mut bad_epk = epk.clone();
    bad_epk.pop();
    bad_epk.push('B');
    assert!(!agree(
        valid.replacen(&epk, &bad_epk, 1).as_bytes(),
        &rkid,
        MAX_ENVELOPE_BYTES
    ));
    for bad in ["{}", "[]", "", "{\"ciphertext\":\"\"}", "null"] {
        assert!(!agree(bad.as_bytes(), &rkid, MAX_ENVELOPE_BYTES));
    }
}

#[test]
fn rkid_text_is_the_one_spelling() {
    for seed in [[0u8; 32], [0xff; 32], [1; 32], [0x80; 32]] {
        let rkid = Rkid::from_bytes(seed);
        let text = RkidText::of(&rkid);
        assert_eq!(text.as_str(), rkid.to_multikey());
        assert_eq!(RkidText::parse(text.as_str()), Ok(text));
        assert_eq!(text.rkid(), &rkid);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn valid_and_mutated_envelopes_agree(
        key in any::<[u8; 32]>(),
        len in 0usize..400,
        seed in any::<u8>(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let rkid = Rkid::from_bytes(key);
        let text = RkidText::of(&rkid);
        prop_assert_eq!(text.as_str(), rkid.to_multikey());
        let valid = envelope(rkid, len, seed);
        prop_assert_eq!(agree(&valid, &rkid, MAX_ENVELOPE_BYTES), len >= 17);
        let mut mutated = valid.clone();
        let i = at.index(mutated.len());
        mutated[i] = byte;
        agree(&mutated, &rkid, MAX_ENVELOPE_BYTES);
    }

    #[test]
    fn random_bytes_agree(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        agree(&bytes, &Rkid::from_bytes([5; 32]), MAX_ENVELOPE_BYTES);
    }
}
