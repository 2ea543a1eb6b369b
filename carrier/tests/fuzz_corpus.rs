//! The fuzz corpus, replayed on stable Rust (issue 6).
//!
//! The fuzz target bodies (`fuzz/src/targets.rs`) are compiled in here, and
//! every committed seed (`fuzz/corpus/<target>/`) and every crash
//! reproducer (`fuzz/regressions/<target>/`) is run through its target's
//! body, so a crash once found stays fixed without a nightly toolchain or
//! cargo-fuzz. The seeds are also rebuilt in memory from the shipped
//! vectors and run, so the seed set cannot silently go stale.
//!
//! `RLTP_FUZZ_WRITE_SEEDS=1` writes the seeds built from the shipped
//! vectors into `fuzz/corpus/<target>/seed-*` (how the committed seeds
//! were made).

// A test reads top to bottom: long test functions are legitimate here (issue 22 bounds production code).
#![allow(clippy::too_many_lines)]
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

#[path = "../../fuzz/src/targets.rs"]
mod targets;

mod common;

use ed25519_dalek::SigningKey;
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::declaration::{DeclarationHeader, sign_carrier_declaration};
use rltp_proofs::json::{self, Object, Value};
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::proof::Purpose;
use rltp_storage::DepositId;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use rltp_wire::{self as wire, Request, response};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The JCS of a serde value (the shipped vectors are serde JSON).
fn jcs(value: &serde_json::Value) -> Vec<u8> {
    rltp_proofs::jcs::canonicalize(&json::from_serde(value)).unwrap()
}

/// A signed proof object: the vector's `object` with its `sig`.
fn signed(case: &serde_json::Value, sig: &serde_json::Value) -> serde_json::Value {
    let mut object = case["object"].clone();
    object["sig"] = sig.clone();
    object
}

/// Every seed, by target, built from the shipped vectors.
fn seeds() -> BTreeMap<&'static str, Vec<(String, Vec<u8>)>> {
    let proof_vectors = common::carrier_proof();
    let seal = common::load("seal.json");
    let ack = common::load("delivery-ack.json");
    let mut out: BTreeMap<&'static str, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    fn put(
        out: &mut BTreeMap<&'static str, Vec<(String, Vec<u8>)>>,
        target: &'static str,
        name: &str,
        bytes: Vec<u8>,
    ) {
        out.entry(target)
            .or_default()
            .push((name.to_owned(), bytes));
    }

    // proof: the three signed vectors, the negatives (each with the
    // registration signature), and the generation spellings as raw bytes.
    let registration = &proof_vectors["registration"];
    let sig = &registration["sig"];
    let mut proofs = vec![
        ("registration".to_owned(), jcs(&signed(registration, sig))),
        (
            "collection".to_owned(),
            jcs(&signed(
                &proof_vectors["collection"],
                &proof_vectors["collection"]["sig"],
            )),
        ),
        (
            "conclusion".to_owned(),
            jcs(&signed(
                &proof_vectors["conclusion"],
                &proof_vectors["conclusion"]["sig"],
            )),
        ),
    ];
    for (i, case) in proof_vectors["negatives"]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        proofs.push((format!("negative-{i}"), jcs(&signed(case, sig))));
    }
    let canonical = String::from_utf8(jcs(&signed(registration, sig))).unwrap();
    let spelling = &proof_vectors["generationSpelling"];
    for (i, lexeme) in spelling["rejects"]
        .as_array()
        .unwrap()
        .iter()
        .chain(spelling["accepts"].as_array().into_iter().flatten())
        .filter_map(|c| c["lexeme"].as_str())
        .enumerate()
    {
        proofs.push((
            format!("generation-{i}"),
            canonical
                .replacen("\"generation\":1", &format!("\"generation\":{lexeme}"), 1)
                .into_bytes(),
        ));
    }
    for (name, bytes) in &proofs {
        put(&mut out, "proof", name, bytes.clone());
    }

    // envelope: the seal vector's envelope, and the same for another queue.
    let envelope = jcs(&seal["output"]["sealedEnvelope"]);
    put(&mut out, "envelope", "seal-json", envelope.clone());
    let mut wrong_queue = seal["output"]["sealedEnvelope"].clone();
    wrong_queue["rkid"] = proof_vectors["keys"]["rkid"].clone();
    put(&mut out, "envelope", "wrong-queue", jcs(&wrong_queue));
    // shape: the same two envelopes, and a stream item header in its JCS
    // spelling and in another.
    put(&mut out, "shape", "sealed-envelope", envelope.clone());
    put(
        &mut out,
        "shape",
        "sealed-envelope-wrong-queue",
        jcs(&wrong_queue),
    );
    let item = format!("{{\"rkid\":\"{}\",\"size\":1234}}", targets::SEAL_RKID);
    put(&mut out, "shape", "item-jcs", item.clone().into_bytes());
    put(
        &mut out,
        "shape",
        "item-spaced",
        item.replacen(':', ": ", 1).into_bytes(),
    );
    // ... and the collect frames as the carrier writes them (headers only).
    let collect_frames: [(&str, Object); 3] = [
        (
            "collect-deposit",
            response::deposit_header(&DepositId::of(&envelope), 41),
        ),
        (
            "collect-end",
            response::collect_end_header(Verdict::Served, Some(false)),
        ),
        (
            "collect-stale",
            response::collect_end_header(Verdict::StaleGeneration { held: 3 }, None),
        ),
    ];
    for (name, header) in collect_frames {
        let frame = wire::encode_frame(&header, b"");
        put(
            &mut out,
            "shape",
            name,
            frame[wire::PREFIX_BYTES..].to_vec(),
        );
    }

    // declaration: a carrier declaration signed like the server signs one
    // (the g1 constants), the W3C eddsa-jcs-2022 vector, the signed ack.
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let issuer = DidKey::from_verifying_key(&key.verifying_key());
    let constants = CarrierConstants::from_declared(
        json::from_serde(&proof_vectors["carrierGuarantees"]["g1_declaration"]["declaration"])
            .as_object()
            .unwrap(),
    )
    .unwrap();
    let header = DeclarationHeader {
        id: "11111111-2222-4333-8444-555555555555",
        thread_id: "66666666-7777-4888-9999-aaaaaaaaaaaa",
        issued_at: "2026-11-29T00:00:00Z",
        created: "2026-11-29T00:00:00Z",
        revision: 1,
    };
    let declaration = sign_carrier_declaration(&key, &issuer, &header, &constants).unwrap();
    put(&mut out, "declaration", "carrier-g1", declaration.clone());
    let w3c = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../proofs/tests/data/w3c-eddsa-jcs-2022/signed.json");
    put(
        &mut out,
        "declaration",
        "w3c-signed",
        std::fs::read(&w3c).unwrap(),
    );
    put(&mut out, "declaration", "delivery-ack", jcs(&ack["output"]));

    // frame: every request as the client writes it (with its body), and
    // every response header the server writes.
    let rkid = Rkid::parse(targets::SEAL_RKID).unwrap();
    let deposit = DepositId::of(&envelope);
    let registration_proof = proofs[0].1.clone();
    let requests: Vec<(&str, Request, Vec<u8>)> = vec![
        ("declaration", Request::Declaration, vec![]),
        (
            "submit",
            Request::Submit {
                rkid,
                size: envelope.len() as u32,
            },
            envelope.clone(),
        ),
        ("submit-stream", Request::SubmitStream, vec![]),
        ("status", Request::Status { rkid, deposit }, vec![]),
        (
            "challenge",
            Request::Challenge {
                rkid,
                purpose: Purpose::Register,
            },
            vec![],
        ),
        ("register", Request::Register, registration_proof.clone()),
        (
            "collect",
            Request::Collect {
                after: Some(3),
                limit: 10,
                watch: true,
            },
            registration_proof.clone(),
        ),
        (
            "conclude",
            Request::Conclude {
                deposits: vec![deposit],
            },
            registration_proof,
        ),
    ];
    for (name, request, body) in requests {
        put(
            &mut out,
            "frame",
            &format!("request-{name}"),
            wire::encode_frame(&request.to_header(), &body),
        );
    }
    put(
        &mut out,
        "frame",
        "stream-item",
        wire::encode_frame(
            &wire::stream_item_header(&rkid, envelope.len() as u32),
            &envelope,
        ),
    );
    let answers: Vec<(&str, Object)> = vec![
        (
            "admitted",
            response::SubmitAnswer::new(SubmitVerdict::Admitted, deposit).to_header(),
        ),
        (
            "stale",
            response::verdict_header(Verdict::StaleGeneration { held: 4 }),
        ),
        ("deposit", response::deposit_header(&deposit, 9)),
        (
            "collect-end",
            response::collect_end_header(Verdict::Served, Some(true)),
        ),
        (
            "conclude",
            response::conclude_header(Verdict::Served, Some(1)),
        ),
        ("declaration", response::declaration_header()),
    ];
    for (name, header) in answers {
        let bytes = rltp_proofs::jcs::canonicalize(&Value::Object(header)).unwrap();
        put(&mut out, "frame", &format!("answer-{name}"), bytes);
    }
    let mut oversize = wire::encode_frame(&Request::Declaration.to_header(), b"");
    oversize[..4].copy_from_slice(&u32::MAX.to_be_bytes());
    put(&mut out, "frame", "oversize-prefix", oversize);

    // json: everything above, and the reader's edge cases.
    let all: Vec<(String, Vec<u8>)> = out
        .values()
        .flatten()
        .map(|(n, b)| (format!("from-{n}"), b.clone()))
        .collect();
    let edges: [(&str, &[u8]); 8] = [
        (
            "escapes",
            br#"{"a":"\u00e9\ud83d\ude00\n\/","b":[1,-0,0.5e-7,1E+30,true,false,null]}"#,
        ),
        ("lone-surrogate", br#"["\ud800"]"#),
        ("duplicate-key", br#"{"a":1,"\u0061":2}"#),
        (
            "deep",
            b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        ),
        (
            "big-number",
            b"[1e400, 9e20, 123456789012345678901234567890]",
        ),
        ("bad-utf8", b"[\"\xc0\xaf\"]"),
        ("trailing", b"{} {}"),
        ("bom", b"\xef\xbb\xbf{}"),
    ];
    for (name, bytes) in all {
        put(&mut out, "json", &name, bytes);
    }
    for (name, bytes) in edges {
        put(&mut out, "json", name, bytes.to_vec());
    }
    out
}

/// The files of `dir`, sorted (a missing folder is empty).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.is_file());
    files.sort();
    files
}

fn run(target: &str, body: targets::Body, name: &str, bytes: &[u8]) {
    if std::panic::catch_unwind(|| body(bytes)).is_err() {
        panic!("fuzz target {target} fails on {name}");
    }
}

/// Every committed seed and crash reproducer, and every seed rebuilt from
/// the vectors, passes its target's body; each target has committed seeds.
#[test]
fn the_corpus_and_every_crash_reproducer_pass() {
    let built = seeds();
    if std::env::var_os("RLTP_FUZZ_WRITE_SEEDS").is_some() {
        for (target, seeds) in &built {
            let dir = fuzz_dir().join("corpus").join(target);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in seeds {
                std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
            }
        }
    }
    for (target, body) in targets::TARGETS {
        let corpus = files(&fuzz_dir().join("corpus").join(target));
        let committed_seeds = corpus
            .iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
            })
            .count();
        assert!(
            committed_seeds >= built[target].len(),
            "fuzz/corpus/{target} holds {committed_seeds} seeds, the vectors make {}",
            built[target].len()
        );
        let regressions = files(&fuzz_dir().join("regressions").join(target));
        for path in corpus.iter().chain(&regressions) {
            run(
                target,
                body,
                &path.display().to_string(),
                &std::fs::read(path).unwrap(),
            );
        }
        for (name, bytes) in &built[target] {
            run(target, body, name, bytes);
        }
        println!(
            "fuzz corpus {target}: {} files ({committed_seeds} seeds), {} crash reproducers, {} rebuilt seeds: all pass",
            corpus.len(),
            regressions.len(),
            built[target].len()
        );
    }
}
