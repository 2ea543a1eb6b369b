//! §5 sealed envelope and §5a.5 s2 shape check, against the shipped
//! `vectors/seal.json` and the low-order X25519 points.

mod common;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use proptest::prelude::*;
use rltp_proofs::encoding::{
    EncodingError, b64url_decode, b64url_decode_array, b64url_encode, digest_multibase,
    document_digest,
};
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, ShapeError, check_shape};
use rltp_proofs::jcs::canonicalize;
use rltp_proofs::json::{self, JsonError};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::{
    MAX_CIPHERTEXT_BYTES, MAX_PLAINTEXT_BYTES, MIN_CIPHERTEXT_BYTES, SEAL_INFO, SealError,
    SealedEnvelope, open, seal, seal_deterministic,
};
use serde_json::json;
use x25519_dalek::{PublicKey, StaticSecret, x25519};

// ---------------------------------------------------------------- vector --

/// `seal.json`, through the one resolver (`RLTP_SPEC_VECTORS`, else the
/// vendored copy).
/// A missing or unreadable file fails the test.
fn seal_vector() -> serde_json::Value {
    common::shipped("seal.json")
}

/// A string at a JSON pointer in the vector.
fn text<'a>(v: &'a serde_json::Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("seal.json has no string at {pointer}"))
        .expect("vector member present")
}

/// Canonical base64url of exactly N bytes at a JSON pointer in the vector.
fn bytes32(v: &serde_json::Value, pointer: &str) -> [u8; 32] {
    b64url_decode_array(text(v, pointer)).expect("32-byte base64url")
}

/// The decoded vector inputs.
struct Inputs {
    recipient_secret: [u8; 32],
    rkid: Rkid,
    ephemeral_secret: [u8; 32],
    nonce: [u8; 12],
    plaintext: Vec<u8>,
}

fn inputs(v: &serde_json::Value) -> Inputs {
    Inputs {
        recipient_secret: bytes32(v, "/inputs/recipientPrivateKeyRaw"),
        rkid: Rkid::parse(text(v, "/inputs/rkid")).expect("vector rkid parses"),
        ephemeral_secret: bytes32(v, "/inputs/ephemeralPrivateKeyRaw"),
        nonce: b64url_decode_array(text(v, "/inputs/nonce")).expect("12-byte nonce"),
        plaintext: canonicalize(&json::from_serde(&v["inputs"]["document"]))
            .expect("vector document canonicalizes"),
    }
}

/// The vector's sealed envelope as wire bytes (JCS of `output.sealedEnvelope`).
fn vector_envelope_bytes(v: &serde_json::Value) -> Vec<u8> {
    canonicalize(&json::from_serde(&v["output"]["sealedEnvelope"])).expect("envelope JCS")
}

#[test]
fn vector_keys_are_consistent() {
    let v = seal_vector();
    let i = inputs(&v);
    let public = PublicKey::from(&StaticSecret::from(i.recipient_secret)).to_bytes();
    assert_eq!(public, bytes32(&v, "/inputs/recipientPublicKeyRaw"));
    assert_eq!(i.rkid.as_bytes(), &public);
    assert_eq!(
        Rkid::from_bytes(public).to_multikey(),
        "z6LStLK2kxribiLHz6U4vpGfzMtmgc4q5WjR4mvhS6KG1W16"
    );
    assert_eq!(
        text(&v, "/output/sealedEnvelope/rkid"),
        i.rkid.to_multikey()
    );
    assert_eq!(text(&v, "/intermediate/hkdfInfo").as_bytes(), SEAL_INFO);
}

#[test]
fn vector_plaintext_is_jcs_of_document() {
    let v = seal_vector();
    let i = inputs(&v);
    assert_eq!(
        i.plaintext,
        text(&v, "/intermediate/plaintextJcs").as_bytes(),
        "plaintext = JCS(document)"
    );
    assert_eq!(i.plaintext.len(), 423);
}

#[test]
fn vector_seal_reproduces_every_byte() {
    let v = seal_vector();
    let i = inputs(&v);
    let (envelope, trace) = seal_deterministic(&i.plaintext, &i.rkid, i.ephemeral_secret, i.nonce)
        .expect("vector seals");

    assert_eq!(
        trace.shared_secret,
        bytes32(&v, "/intermediate/sharedSecret")
    );
    assert_eq!(trace.aes_key, bytes32(&v, "/intermediate/aesKey"));
    assert_eq!(
        b64url_encode(&trace.shared_secret),
        "wJ2KF_VPBqU_hE6svGJzAXWBubxTtfMfPTOMw__XuGs"
    );
    assert_eq!(
        b64url_encode(&trace.aes_key),
        "_cXntSwE-neUfOxJZdOJCopdY-jNCH--68_L0JZ5eNM"
    );

    assert_eq!(envelope.rkid, i.rkid);
    assert_eq!(envelope.epk, bytes32(&v, "/output/sealedEnvelope/epk"));
    assert_eq!(
        b64url_encode(&envelope.epk),
        "c7LYt2qptTZgAyvI9di-46OuTjs6f9Sa3oH3NHo0qmg"
    );
    assert_eq!(b64url_encode(&envelope.nonce), "DAwMDAwMDAwMDAwM");
    assert_eq!(
        b64url_encode(&envelope.ciphertext),
        text(&v, "/output/sealedEnvelope/ciphertext")
    );
    assert_eq!(
        envelope.ciphertext.len(),
        i.plaintext.len() + 16,
        "ciphertext = plaintext + 128-bit tag"
    );

    // The whole object: member by member, and as JCS bytes.
    let object = envelope.to_json();
    let object = object.as_object().expect("object");
    assert_eq!(object.len(), 4);
    for member in ["rkid", "epk", "nonce", "ciphertext"] {
        assert_eq!(
            object.get(member).and_then(json::Value::as_str),
            Some(text(&v, &format!("/output/sealedEnvelope/{member}"))),
            "{member}"
        );
    }
    let wire = vector_envelope_bytes(&v);
    assert_eq!(envelope.to_bytes(), wire);
    assert_eq!(
        canonicalize(&envelope.to_json()).expect("jcs"),
        envelope.to_bytes()
    );
}

#[test]
fn vector_document_digest_is_over_the_plaintext() {
    let v = seal_vector();
    let i = inputs(&v);
    let expected = text(&v, "/output/documentDigest");
    assert_eq!(expected, "uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ");
    assert_eq!(
        document_digest(&json::from_serde(&v["inputs"]["document"])).expect("digest"),
        expected
    );
    assert_eq!(digest_multibase(&i.plaintext), expected);
    // Never the ciphertext.
    let ciphertext = b64url_decode(text(&v, "/output/sealedEnvelope/ciphertext")).expect("b64");
    assert_ne!(digest_multibase(&ciphertext), expected);
}

#[test]
fn vector_envelope_opens_to_the_plaintext() {
    let v = seal_vector();
    let i = inputs(&v);
    let envelope =
        check_shape(&vector_envelope_bytes(&v), &i.rkid, MAX_ENVELOPE_BYTES).expect("s2 passes");
    assert_eq!(
        open(&envelope, &i.recipient_secret).expect("opens"),
        i.plaintext
    );
}

#[test]
fn resealing_changes_the_envelope_never_the_digest() {
    let v = seal_vector();
    let i = inputs(&v);
    let mut rng = rand::rng();
    let a = seal(&i.plaintext, &i.rkid, &mut rng).expect("seal a");
    let b = seal(&i.plaintext, &i.rkid, &mut rng).expect("seal b");
    assert_ne!(a.epk, b.epk);
    assert_ne!(a.nonce, b.nonce);
    assert_ne!(a.ciphertext, b.ciphertext);
    assert_ne!(a.to_bytes(), b.to_bytes(), "distinct envelopes (§5a.5 s3)");
    let expected = text(&v, "/output/documentDigest");
    for envelope in [a, b] {
        let plaintext = open(&envelope, &i.recipient_secret).expect("opens");
        assert_eq!(digest_multibase(&plaintext), expected);
    }
}

// ------------------------------------------------------- open rejections --

#[test]
fn open_rejects_tampering_and_wrong_keys() {
    let v = seal_vector();
    let i = inputs(&v);
    let (envelope, _) =
        seal_deterministic(&i.plaintext, &i.rkid, i.ephemeral_secret, i.nonce).expect("seals");

    for index in [0, 100, envelope.ciphertext.len() - 1] {
        let mut bad = envelope.clone();
        bad.ciphertext[index] ^= 0x01;
        assert_eq!(
            open(&bad, &i.recipient_secret),
            Err(SealError::DecryptionFailed)
        );
    }
    let mut bad = envelope.clone();
    bad.nonce[0] ^= 0x01;
    assert_eq!(
        open(&bad, &i.recipient_secret),
        Err(SealError::DecryptionFailed)
    );
    let mut bad = envelope.clone();
    bad.epk[0] ^= 0x02;
    assert_eq!(
        open(&bad, &i.recipient_secret),
        Err(SealError::DecryptionFailed)
    );
    // A retired or foreign key: the tag fails (failed(decryption-failed)).
    assert_eq!(
        open(&envelope, &i.ephemeral_secret),
        Err(SealError::DecryptionFailed)
    );
}

#[test]
fn open_rejects_oversize_before_any_crypto() {
    let v = seal_vector();
    let i = inputs(&v);
    // An all-zero epk would fail the shared-secret check; the size check
    // must come first.
    let envelope = SealedEnvelope {
        rkid: i.rkid,
        epk: [0; 32],
        nonce: i.nonce,
        ciphertext: vec![0; MAX_CIPHERTEXT_BYTES + 1],
    };
    assert_eq!(
        open(&envelope, &i.recipient_secret),
        Err(SealError::CiphertextTooLarge { len: 65_553 })
    );
}

#[test]
fn open_rejects_tag_only_ciphertext_even_with_a_valid_tag() {
    let v = seal_vector();
    let i = inputs(&v);
    let (envelope, trace) =
        seal_deterministic(&i.plaintext, &i.rkid, i.ephemeral_secret, i.nonce).expect("seals");
    // The seal of a zero-length plaintext under the right key: 16 tag bytes
    // that would verify.
    let tag_only = Aes256Gcm::new(&Key::<Aes256Gcm>::from(trace.aes_key))
        .encrypt(&Nonce::from(i.nonce), Payload { msg: &[], aad: &[] })
        .expect("aes-gcm encrypts");
    assert_eq!(tag_only.len(), MIN_CIPHERTEXT_BYTES - 1);
    let envelope = SealedEnvelope {
        ciphertext: tag_only,
        ..envelope
    };
    assert_eq!(
        open(&envelope, &i.recipient_secret),
        Err(SealError::CiphertextTooShort { len: 16 })
    );
    for len in [0, 1, 15] {
        let short = SealedEnvelope {
            ciphertext: vec![0; len],
            ..envelope.clone()
        };
        assert_eq!(
            open(&short, &i.recipient_secret),
            Err(SealError::CiphertextTooShort { len })
        );
    }
}

// ------------------------------------------------------ plaintext bounds --

#[test]
fn plaintext_bounds() {
    let v = seal_vector();
    let i = inputs(&v);
    let mut rng = rand::rng();
    assert_eq!(
        seal_deterministic(&[], &i.rkid, i.ephemeral_secret, i.nonce).map(|(e, _)| e),
        Err(SealError::EmptyPlaintext)
    );
    assert_eq!(seal(&[], &i.rkid, &mut rng), Err(SealError::EmptyPlaintext));
    let too_big = vec![b'x'; MAX_PLAINTEXT_BYTES + 1];
    assert_eq!(
        seal_deterministic(&too_big, &i.rkid, i.ephemeral_secret, i.nonce).map(|(e, _)| e),
        Err(SealError::PlaintextTooLarge { len: 65_537 })
    );
    assert_eq!(
        seal(&too_big, &i.rkid, &mut rng),
        Err(SealError::PlaintextTooLarge { len: 65_537 })
    );
    // 1 byte is the smallest plaintext.
    let one = seal(b"x", &i.rkid, &mut rng).expect("1-byte plaintext seals");
    assert_eq!(one.ciphertext.len(), MIN_CIPHERTEXT_BYTES);
    assert_eq!(open(&one, &i.recipient_secret).expect("opens"), b"x");
}

#[test]
fn largest_plaintext_gives_max_envelope_bytes() {
    let v = seal_vector();
    let i = inputs(&v);
    let plaintext = vec![b'a'; MAX_PLAINTEXT_BYTES];
    let envelope = seal(&plaintext, &i.rkid, &mut rand::rng()).expect("65 536 bytes seal");
    assert_eq!(envelope.ciphertext.len(), MAX_CIPHERTEXT_BYTES);
    let wire = envelope.to_bytes();
    assert_eq!(wire.len(), MAX_ENVELOPE_BYTES);
    assert_eq!(wire.len(), 87_557);
    assert_eq!(canonicalize(&envelope.to_json()).expect("jcs"), wire);
    let checked = check_shape(&wire, &i.rkid, MAX_ENVELOPE_BYTES).expect("s2 passes at the bound");
    assert_eq!(checked, envelope);
    assert_eq!(
        check_shape(&wire, &i.rkid, MAX_ENVELOPE_BYTES - 1),
        Err(ShapeError::TooLarge {
            len: 87_557,
            max: 87_556
        })
    );
    assert_eq!(
        open(&checked, &i.recipient_secret).expect("opens"),
        plaintext
    );
}

// ------------------------------------------------------ low-order points --

/// Little-endian 32-byte encoding of a decimal integer below 2^256.
fn le_from_decimal(decimal: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for digit in decimal.bytes() {
        assert!(digit.is_ascii_digit(), "{decimal}");
        let mut carry = u32::from(digit - b'0');
        for byte in &mut out {
            let value = u32::from(*byte) * 10 + carry;
            *byte = (value & 0xff) as u8;
            carry = value >> 8;
        }
        assert_eq!(carry, 0, "{decimal} is above 2^256");
    }
    out
}

fn hex32(hex: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex");
    }
    out
}

/// The seven standard low-order X25519 u-coordinates (cr.yp.to/ecdh.html):
/// 0, 1, two points of order 8, p − 1, p, p + 1, with p = 2^255 − 19.
fn low_order_points() -> [(&'static str, [u8; 32]); 7] {
    [
        ("0", le_from_decimal("0")),
        ("1", le_from_decimal("1")),
        (
            "order-8 point e0eb…b800",
            le_from_decimal(
                "325606250916557431795983626356110631294008115727848805560023387167927233504",
            ),
        ),
        (
            "order-8 point 5f9c…1157",
            le_from_decimal(
                "39382357235489614581723060781553021112529911719440698176882885853963445705823",
            ),
        ),
        (
            "p - 1",
            le_from_decimal(
                "57896044618658097711785492504343953926634992332820282019728792003956564819948",
            ),
        ),
        (
            "p",
            le_from_decimal(
                "57896044618658097711785492504343953926634992332820282019728792003956564819949",
            ),
        ),
        (
            "p + 1",
            le_from_decimal(
                "57896044618658097711785492504343953926634992332820282019728792003956564819950",
            ),
        ),
    ]
}

#[test]
fn low_order_points_are_the_standard_encodings() {
    let points = low_order_points();
    assert_eq!(
        points[2].1,
        hex32("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")
    );
    assert_eq!(
        points[3].1,
        hex32("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157")
    );
    let mut p = [0xff; 32];
    p[0] = 0xed;
    p[31] = 0x7f;
    assert_eq!(points[5].1, p);
    p[0] = 0xec;
    assert_eq!(points[4].1, p);
    p[0] = 0xee;
    assert_eq!(points[6].1, p);
}

/// Each point, and each with bit 255 set (X25519 ignores it, RFC 7748 §5).
fn low_order_encodings() -> Vec<(String, [u8; 32])> {
    low_order_points()
        .into_iter()
        .flat_map(|(name, point)| {
            let mut high = point;
            high[31] |= 0x80;
            [(name.to_owned(), point), (format!("{name} | 2^255"), high)]
        })
        .collect()
}

#[test]
fn every_low_order_point_gives_an_all_zero_shared_secret() {
    let v = seal_vector();
    let i = inputs(&v);
    for (name, point) in low_order_encodings() {
        // Clamping makes every scalar a multiple of the cofactor 8, so all
        // fourteen encodings land on the identity (u = 0).
        assert_eq!(x25519(i.ephemeral_secret, point), [0; 32], "{name}");
        assert_eq!(x25519(i.recipient_secret, point), [0; 32], "{name}");
    }
}

#[test]
fn seal_rejects_every_low_order_rkid() {
    let v = seal_vector();
    let i = inputs(&v);
    let mut rng = rand::rng();
    for (name, point) in low_order_encodings() {
        let rkid = Rkid::from_bytes(point);
        assert_eq!(
            seal_deterministic(&i.plaintext, &rkid, i.ephemeral_secret, i.nonce).map(|(e, _)| e),
            Err(SealError::NonContributory),
            "{name}"
        );
        assert_eq!(
            seal(&i.plaintext, &rkid, &mut rng),
            Err(SealError::NonContributory),
            "{name}"
        );
    }
}

#[test]
fn open_rejects_every_low_order_epk() {
    let v = seal_vector();
    let i = inputs(&v);
    let (envelope, _) =
        seal_deterministic(&i.plaintext, &i.rkid, i.ephemeral_secret, i.nonce).expect("seals");
    for (name, point) in low_order_encodings() {
        let bad = SealedEnvelope {
            epk: point,
            ..envelope.clone()
        };
        assert_eq!(
            open(&bad, &i.recipient_secret),
            Err(SealError::NonContributory),
            "{name}"
        );
    }
}

// ------------------------------------------------------------ s2 shape --

/// The vector envelope as a mutable serde_json object.
fn vector_object(v: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v["output"]["sealedEnvelope"]
        .as_object()
        .cloned()
        .expect("sealedEnvelope is an object")
}

/// s2 on the vector envelope with one member replaced by `value`.
fn s2_with(member: &str, value: serde_json::Value) -> Result<SealedEnvelope, ShapeError> {
    let v = seal_vector();
    let mut object = vector_object(&v);
    object.insert(member.to_owned(), value);
    let bytes = serde_json::to_vec(&object).expect("serializes");
    check_shape(&bytes, &inputs(&v).rkid, MAX_ENVELOPE_BYTES)
}

#[test]
fn s2_accepts_the_vector_envelope_for_its_queue() {
    let v = seal_vector();
    let i = inputs(&v);
    let (expected, _) =
        seal_deterministic(&i.plaintext, &i.rkid, i.ephemeral_secret, i.nonce).expect("seals");
    let bytes = vector_envelope_bytes(&v);
    assert_eq!(
        check_shape(&bytes, &i.rkid, MAX_ENVELOPE_BYTES),
        Ok(expected)
    );
    // The wire profile takes the JCS spelling only (PROTOCOL.md §7): the
    // same object with insignificant whitespace is refused(bounds).
    let spaced = serde_json::to_vec_pretty(&v["output"]["sealedEnvelope"]).expect("pretty");
    assert_eq!(
        check_shape(&spaced, &i.rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::NotCanonical)
    );
}

#[test]
fn s2_rejects_a_different_queue() {
    let v = seal_vector();
    let other = Rkid::from_bytes(bytes32(&v, "/output/sealedEnvelope/epk"));
    assert_eq!(
        check_shape(&vector_envelope_bytes(&v), &other, MAX_ENVELOPE_BYTES),
        Err(ShapeError::WrongQueue {
            rkid: "z6LStLK2kxribiLHz6U4vpGfzMtmgc4q5WjR4mvhS6KG1W16".into(),
            queue: other.to_multikey(),
        })
    );
}

#[test]
fn s2_rejects_an_rkid_that_is_not_an_x25519_multikey() {
    // An Ed25519 Multikey (the vector's issuer): right encoding, wrong codec.
    assert_eq!(
        s2_with(
            "rkid",
            json!("z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK")
        ),
        Err(ShapeError::Rkid(EncodingError::Prefix {
            expected: [0xec, 0x01],
            actual: [0xed, 0x01],
        }))
    );
    assert_eq!(
        s2_with("rkid", json!("u7AE")),
        Err(ShapeError::Rkid(EncodingError::MultibasePrefix(Some('u'))))
    );
}

#[test]
fn s2_rejects_wrong_member_sets_and_types() {
    assert_eq!(
        s2_with("extra", json!("x")),
        Err(ShapeError::UnknownMember {
            member: "extra".into()
        })
    );
    let v = seal_vector();
    let rkid = inputs(&v).rkid;
    for member in ["rkid", "epk", "nonce", "ciphertext"] {
        let mut object = vector_object(&v);
        object.remove(member);
        let bytes = serde_json::to_vec(&object).expect("serializes");
        assert_eq!(
            check_shape(&bytes, &rkid, MAX_ENVELOPE_BYTES),
            Err(ShapeError::MissingMember { member })
        );
    }
    assert_eq!(
        s2_with("epk", json!(32)),
        Err(ShapeError::NotAString {
            member: "epk",
            kind: "number"
        })
    );
    assert_eq!(
        s2_with("rkid", json!(null)),
        Err(ShapeError::NotAString {
            member: "rkid",
            kind: "null"
        })
    );
    assert_eq!(
        s2_with("ciphertext", json!(["a"])),
        Err(ShapeError::NotAString {
            member: "ciphertext",
            kind: "array"
        })
    );
    assert_eq!(
        check_shape(b"[]", &rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::NotAnObject { kind: "array" })
    );
    assert_eq!(
        check_shape(b"{}", &rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::MissingMember { member: "rkid" })
    );
}

#[test]
fn s2_rejects_bad_epk() {
    let v = seal_vector();
    let epk = text(&v, "/output/sealedEnvelope/epk");
    assert_eq!(
        s2_with("epk", json!(format!("{epk}="))),
        Err(ShapeError::EpkEncoding(EncodingError::Base64Url)),
        "padding"
    );
    assert_eq!(
        s2_with("epk", json!(b64url_encode(&[7; 31]))),
        Err(ShapeError::EpkLength { len: 31 })
    );
    assert_eq!(
        s2_with("epk", json!(b64url_encode(&[7; 33]))),
        Err(ShapeError::EpkLength { len: 33 })
    );
    // Standard alphabet: the vector epk contains '-'.
    assert!(epk.contains('-'));
    assert_eq!(
        s2_with("epk", json!(epk.replace('-', "+"))),
        Err(ShapeError::EpkEncoding(EncodingError::Base64Url))
    );
    // 32 bytes = 43 chars carrying 2 trailing bits: the vector's final 'g'
    // (0b100000) has them zero, 'h' (0b100001) sets one.
    assert!(epk.ends_with('g'));
    assert_eq!(
        s2_with("epk", json!(format!("{}h", &epk[..42]))),
        Err(ShapeError::EpkEncoding(EncodingError::Base64Url)),
        "non-zero trailing bits"
    );
}

#[test]
fn s2_rejects_bad_nonce() {
    for (len, expected) in [
        (11, ShapeError::NonceLength { len: 11 }),
        (13, ShapeError::NonceLength { len: 13 }),
        (0, ShapeError::NonceLength { len: 0 }),
    ] {
        assert_eq!(
            s2_with("nonce", json!(b64url_encode(&vec![12; len]))),
            Err(expected)
        );
    }
    assert_eq!(
        s2_with("nonce", json!("DAwMDAwMDAwMDAwM=")),
        Err(ShapeError::NonceEncoding(EncodingError::Base64Url))
    );
    assert_eq!(
        s2_with("nonce", json!("DAwMDAwMDAwMDAw/")),
        Err(ShapeError::NonceEncoding(EncodingError::Base64Url))
    );
}

#[test]
fn s2_rejects_bad_ciphertext() {
    assert_eq!(
        s2_with("ciphertext", json!(b64url_encode(&[9; 16]))),
        Err(ShapeError::CiphertextTooShort { len: 16 }),
        "tag-only"
    );
    assert_eq!(
        s2_with("ciphertext", json!("")),
        Err(ShapeError::CiphertextTooShort { len: 0 })
    );
    // 17 bytes = 23 chars carrying 2 trailing bits: "…A" is canonical, "…B"
    // sets a trailing bit.
    let canonical = b64url_encode(&[0; 17]);
    assert_eq!(canonical.len(), 23);
    assert!(s2_with("ciphertext", json!(canonical)).is_ok());
    assert_eq!(
        s2_with("ciphertext", json!(format!("{}B", &canonical[..22]))),
        Err(ShapeError::CiphertextEncoding(EncodingError::Base64Url)),
        "non-zero trailing bits"
    );
    assert_eq!(
        s2_with("ciphertext", json!(format!("{}A", b64url_encode(&[0; 18])))),
        Err(ShapeError::CiphertextEncoding(EncodingError::Base64Url)),
        "length mod 4 = 1"
    );
    assert_eq!(
        s2_with("ciphertext", json!(format!("{canonical}=="))),
        Err(ShapeError::CiphertextEncoding(EncodingError::Base64Url)),
        "padding"
    );
    assert_eq!(
        s2_with("ciphertext", json!(format!("{}/", &canonical[..22]))),
        Err(ShapeError::CiphertextEncoding(EncodingError::Base64Url)),
        "standard alphabet"
    );
}

#[test]
fn s2_ciphertext_above_65552_bytes_needs_a_looser_bound() {
    let v = seal_vector();
    let i = inputs(&v);
    let mut object = vector_object(&v);
    object.insert(
        "ciphertext".into(),
        json!(b64url_encode(&vec![1; MAX_CIPHERTEXT_BYTES + 1])),
    );
    let bytes = serde_json::to_vec(&object).expect("serializes");
    assert_eq!(
        check_shape(&bytes, &i.rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::TooLarge {
            len: bytes.len(),
            max: 87_557
        })
    );
    assert_eq!(
        check_shape(&bytes, &i.rkid, 2 * MAX_ENVELOPE_BYTES),
        Err(ShapeError::CiphertextTooLarge { len: 65_553 })
    );
}

#[test]
fn s2_checks_size_before_parsing() {
    let v = seal_vector();
    let i = inputs(&v);
    let bytes = vector_envelope_bytes(&v);
    assert_eq!(
        check_shape(&bytes, &i.rkid, bytes.len() - 1),
        Err(ShapeError::TooLarge {
            len: bytes.len(),
            max: bytes.len() - 1
        })
    );
    let garbage = vec![0xff; MAX_ENVELOPE_BYTES + 1];
    assert_eq!(
        check_shape(&garbage, &i.rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::TooLarge {
            len: 87_558,
            max: 87_557
        })
    );
}

#[test]
fn s2_rejects_non_strict_json() {
    let v = seal_vector();
    let i = inputs(&v);
    let bytes = vector_envelope_bytes(&v);

    let truncated = &bytes[..bytes.len() - 1];
    assert_eq!(
        check_shape(truncated, &i.rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::Json(JsonError::UnexpectedEnd))
    );

    // {"rkid":"…","ciphertext":…,"rkid":"…"}: the second rkid repeats.
    let rkid = text(&v, "/output/sealedEnvelope/rkid");
    let mut duplicate = format!(r#"{{"rkid":"{rkid}","#).into_bytes();
    duplicate.extend_from_slice(&bytes[1..]);
    let second_rkid = duplicate
        .windows(6)
        .enumerate()
        .filter(|(_, w)| w == br#""rkid""#)
        .map(|(at, _)| at)
        .nth(1)
        .expect("two rkid members");
    assert_eq!(
        check_shape(&duplicate, &i.rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::Json(JsonError::DuplicateKey {
            key: "rkid".into(),
            offset: second_rkid,
        }))
    );

    // A raw 0xff byte inside the nonce string.
    let nonce_at = bytes
        .windows(16)
        .position(|w| w == b"DAwMDAwMDAwMDAwM")
        .expect("nonce in bytes");
    let mut non_utf8 = bytes.clone();
    non_utf8[nonce_at] = 0xff;
    assert_eq!(
        check_shape(&non_utf8, &i.rkid, MAX_ENVELOPE_BYTES),
        Err(ShapeError::Json(JsonError::InvalidUtf8 {
            offset: nonce_at
        }))
    );
}

// -------------------------------------------------------------- proptest --

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Any 1..2048-byte plaintext, any keys and nonce: seal → s2 → open is
    /// the identity, and the wire bytes are JCS.
    #[test]
    fn seal_check_open_round_trip(
        plaintext in proptest::collection::vec(any::<u8>(), 1..2048),
        recipient_secret in any::<[u8; 32]>(),
        ephemeral_secret in any::<[u8; 32]>(),
        nonce in any::<[u8; 12]>(),
    ) {
        let rkid = Rkid::from_bytes(PublicKey::from(&StaticSecret::from(recipient_secret)).to_bytes());
        let (envelope, _) = seal_deterministic(&plaintext, &rkid, ephemeral_secret, nonce)
            .expect("seals");
        prop_assert_eq!(envelope.ciphertext.len(), plaintext.len() + 16);
        let wire = envelope.to_bytes();
        prop_assert_eq!(&canonicalize(&envelope.to_json()).expect("jcs"), &wire);
        let checked = check_shape(&wire, &rkid, MAX_ENVELOPE_BYTES).expect("s2 passes");
        prop_assert_eq!(&checked, &envelope);
        prop_assert_eq!(open(&checked, &recipient_secret).expect("opens"), plaintext);
    }

    /// s2 never panics and never accepts bytes that are not a §5 envelope
    /// for the queue.
    #[test]
    fn s2_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let queue = Rkid::from_bytes([9; 32]);
        if let Ok(envelope) = check_shape(&bytes, &queue, MAX_ENVELOPE_BYTES) {
            prop_assert_eq!(envelope.rkid, queue);
        }
    }
}
