//! `seal.json` (§5): the sealed-envelope construction, byte for byte.

use crate::{Report, Section, SpecVectors, expect_eq, missing, str_at};
use rltp_proofs::encoding::{b64url_decode_array, b64url_encode, document_digest};
use rltp_proofs::json::from_serde;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::{jcs, seal};

const FILE: &str = "seal.json";

/// Runs section `seal` of `seal.json`: every intermediate and output value.
pub fn run(vectors: &SpecVectors, report: &mut Report) {
    let (_, v) = match vectors.load(FILE) {
        Ok(loaded) => loaded,
        Err(why) => return missing(report, FILE, &["seal"], &why),
    };
    let mut s = Section::new(FILE, "seal");
    match Inputs::read(&v) {
        Ok(inputs) => checks(&v, &inputs, &mut s),
        Err(why) => s.case("inputs", Err(why)),
    }
    report.sections.push(s);
}

struct Inputs {
    recipient_secret: [u8; 32],
    recipient_public: [u8; 32],
    rkid: Rkid,
    ephemeral_secret: [u8; 32],
    nonce: [u8; 12],
    plaintext: Vec<u8>,
}

impl Inputs {
    fn read(v: &serde_json::Value) -> Result<Inputs, String> {
        let b32 = |p: &str| -> Result<[u8; 32], String> {
            b64url_decode_array(str_at(v, p)?).map_err(|e| format!("{p}: {e}"))
        };
        let document = v.pointer("/inputs/document").ok_or("no /inputs/document")?;
        Ok(Inputs {
            recipient_secret: b32("/inputs/recipientPrivateKeyRaw")?,
            recipient_public: b32("/inputs/recipientPublicKeyRaw")?,
            rkid: Rkid::parse(str_at(v, "/inputs/rkid")?).map_err(|e| e.to_string())?,
            ephemeral_secret: b32("/inputs/ephemeralPrivateKeyRaw")?,
            nonce: b64url_decode_array(str_at(v, "/inputs/nonce")?).map_err(|e| e.to_string())?,
            plaintext: jcs::canonicalize(&from_serde(document)).map_err(|e| e.to_string())?,
        })
    }
}

fn checks(v: &serde_json::Value, inputs: &Inputs, s: &mut Section) {
    s.case(
        "rkid is the Multikey of the recipient public key",
        expect_eq("rkid", inputs.rkid.as_bytes(), &inputs.recipient_public),
    );
    s.case(
        "plaintextJcs",
        str_at(v, "/intermediate/plaintextJcs").and_then(|expected| {
            expect_eq("JCS", inputs.plaintext.as_slice(), expected.as_bytes())
        }),
    );
    let sealed = seal::seal_deterministic(
        &inputs.plaintext,
        &inputs.rkid,
        inputs.ephemeral_secret,
        inputs.nonce,
    );
    let (envelope, trace) = match sealed {
        Ok(done) => done,
        Err(e) => return s.case("seal", Err(e.to_string())),
    };
    let b64 = |p: &str| str_at(v, p).map(str::to_owned);
    s.case(
        "sharedSecret",
        b64("/intermediate/sharedSecret")
            .and_then(|x| expect_eq("shared secret", b64url_encode(&trace.shared_secret), x)),
    );
    s.case(
        "aesKey (HKDF-SHA-256, info rltp/v1/seal)",
        b64("/intermediate/aesKey")
            .and_then(|x| expect_eq("aes key", b64url_encode(&trace.aes_key), x)),
    );
    s.case(
        "hkdfInfo",
        b64("/intermediate/hkdfInfo")
            .and_then(|x| expect_eq("info", seal::SEAL_INFO, x.as_bytes())),
    );
    s.case(
        "epk",
        b64("/output/sealedEnvelope/epk")
            .and_then(|x| expect_eq("epk", b64url_encode(&envelope.epk), x)),
    );
    s.case(
        "ciphertext",
        b64("/output/sealedEnvelope/ciphertext")
            .and_then(|x| expect_eq("ciphertext", b64url_encode(&envelope.ciphertext), x)),
    );
    s.case(
        "sealedEnvelope (whole object, JCS bytes)",
        v.pointer("/output/sealedEnvelope")
            .ok_or_else(|| "no /output/sealedEnvelope".to_owned())
            .and_then(|expected| {
                let expected =
                    jcs::canonicalize(&from_serde(expected)).map_err(|e| e.to_string())?;
                expect_eq("envelope bytes", envelope.to_bytes(), expected)
            }),
    );
    s.case(
        "documentDigest (over the plaintext, never the ciphertext)",
        v.pointer("/inputs/document")
            .ok_or_else(|| "no document".to_owned())
            .and_then(|doc| document_digest(&from_serde(doc)).map_err(|e| e.to_string()))
            .and_then(|digest| expect_eq("digest", digest, b64("/output/documentDigest")?)),
    );
    s.case(
        "open recovers plaintextJcs",
        seal::open(&envelope, &inputs.recipient_secret)
            .map_err(|e| e.to_string())
            .and_then(|plain| expect_eq("plaintext", plain, inputs.plaintext.clone())),
    );
    let wrong_key = [0x0b; 32];
    s.case(
        "open with another key fails",
        match seal::open(&envelope, &wrong_key) {
            Err(seal::SealError::DecryptionFailed) => Ok(()),
            other => Err(format!("expected DecryptionFailed, got {other:?}")),
        },
    );
}
