//! The checks of submission, collection, conclusion and the frames (§5a.5–§5a.8, `PROTOCOL.md` §6–§7).

use super::*;

// ---------------------------------------------------------------------------
// §5a.3 sessions
// ---------------------------------------------------------------------------

pub(super) async fn sessions(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.3 session";
    let check = async {
        let who = registered(probe).await?;
        let stranger = who.other_principal(1);
        let proof = session_proof(probe, &stranger, Purpose::Collect).await?;
        let page = probe
            .client
            .collect_proof(&proof, None, 10)
            .await
            .map_err(|e| e.to_string())?;
        expect(
            "collect under another principal",
            page.verdict,
            Verdict::NoSuchQueue,
        )
    };
    report.record(
        S,
        "a valid proof under another principal finds no queue",
        check.await,
    );
    let check = async {
        let who = registered(probe).await?;
        let mut watch = match probe.client.watch(&who.keys, None).await {
            Ok(Ok(w)) => w,
            Ok(Err(v)) => return Err(format!("watch refused: {v}")),
            Err(e) => return Err(e.to_string()),
        };
        match tokio::time::timeout(probe.timeout, watch.next()).await {
            Ok(Ok(Some(WatchEvent::PageEnd { .. }))) => {}
            other => return Err(format!("expected the first page's end, got {other:?}")),
        }
        let second = session_proof(probe, &who, Purpose::Collect).await?;
        watch
            .present_second_proof(&second)
            .await
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(probe.timeout, watch.next()).await {
            Ok(Err(ClientError::Server(e))) => expect("answer", e.code, ErrorCode::SecondProof),
            other => Err(format!("expected second-proof, got {other:?}")),
        }
    };
    report.record(
        S,
        "a second proof on a watch session is answered second-proof",
        check.await,
    );
}

// ---------------------------------------------------------------------------
// §5a.5 s1–s3, §4.4 g2 precedence
// ---------------------------------------------------------------------------

pub(super) async fn submissions(probe: &Probe, report: &mut Report) {
    unknown_rkid(probe, report).await;
    let who = match registered(probe).await {
        Ok(who) => who,
        Err(e) => {
            report.record("§5a.5 s2", "a queue to submit to", Err(e));
            return;
        }
    };
    let rkid = who.rkid();
    let other = registered(probe).await.map(|o| o.rkid());
    bounds(probe, &rkid, other.ok(), report).await;

    same_bytes_same_deposit(probe, &rkid, report).await;
    // Leave the queues empty.
    drain(probe, &who).await;
}

/// §5a.5 s1 and its §4.4 g2 precedence: submissions to an rkid nobody
/// registered, well-formed, malformed and oversize, are all `NoSuchQueue`.
async fn unknown_rkid(probe: &Probe, report: &mut Report) {
    let stranger = Recipient::fresh(&probe.carrier, 1).rkid();
    report.record(
        "§5a.5 s1",
        "an rkid nobody registered",
        async {
            expect(
                "verdict",
                submit(probe, &stranger, &envelope(&stranger, 100)).await?,
                SubmitVerdict::NoSuchQueue,
            )
        }
        .await,
    );
    report.record(
        "§4.4 g2",
        "s1 before s2: a malformed envelope to an unknown rkid",
        async {
            expect(
                "verdict",
                submit(probe, &stranger, b"not an envelope").await?,
                SubmitVerdict::NoSuchQueue,
            )
        }
        .await,
    );
    let oversize = {
        let mut e = envelope(&stranger, 65_552);
        e.insert(1, b' ');
        e
    };
    report.record(
        "§4.4 g2",
        "s1 before s2: an oversize envelope to an unknown rkid",
        async {
            expect(
                "verdict",
                submit(probe, &stranger, &oversize).await?,
                SubmitVerdict::NoSuchQueue,
            )
        }
        .await,
    );
}

/// §5a.5 s3: byte-identical bytes are a duplicate of one deposit; a re-seal
/// of the same document is a different envelope.
async fn same_bytes_same_deposit(probe: &Probe, rkid: &Rkid, report: &mut Report) {
    const S3: &str = "§5a.5 s3";
    let bytes = envelope(rkid, 200);
    let check = async {
        let first = probe
            .client
            .submit(rkid, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        let again = probe
            .client
            .submit(rkid, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        let id = DepositId::of(&bytes);
        expect(
            "verdicts and deposit ids",
            (
                (first.verdict, first.deposit),
                (again.verdict, again.deposit),
            ),
            (
                (SubmitVerdict::Admitted, Some(id)),
                (SubmitVerdict::Duplicate, Some(id)),
            ),
        )
    };
    report.record(
        S3,
        "byte-identical bytes are a duplicate with the same deposit id",
        check.await,
    );
    let check = async {
        let document = b"{\"n\":1}";
        let a = rltp_proofs::seal::seal(document, rkid, &mut rand::rng())
            .map_err(|e| e.to_string())?
            .to_bytes();
        let b = rltp_proofs::seal::seal(document, rkid, &mut rand::rng())
            .map_err(|e| e.to_string())?
            .to_bytes();
        expect(
            "two seals of one document",
            (
                deposit(probe, rkid, &a).await?,
                deposit(probe, rkid, &b).await?,
            ),
            (SubmitVerdict::Admitted, SubmitVerdict::Admitted),
        )
    };
    report.record(
        S3,
        "re-sealing the same document is a different envelope, admitted",
        check.await,
    );
}

/// §5a.5 s2: every shape fault, the size bound, and the JCS rule.
pub(super) async fn bounds(probe: &Probe, rkid: &Rkid, other: Option<Rkid>, report: &mut Report) {
    const S: &str = "§5a.5 s2";
    let valid = String::from_utf8(envelope(rkid, 300)).unwrap_or_default();
    let member = |name: &str| -> String {
        rltp_proofs::json::parse(valid.as_bytes())
            .ok()
            .and_then(|v| {
                v.as_object()
                    .and_then(|o| o.get(name))
                    .and_then(|v| v.as_str().map(str::to_owned))
            })
            .unwrap_or_default()
    };
    let (epk, nonce, ciphertext) = (member("epk"), member("nonce"), member("ciphertext"));
    let standard = ciphertext.replace('-', "+").replace('_', "/");
    let mut cases: Vec<(&str, String)> = vec![
        ("padded epk", valid.replace(&epk, &format!("{epk}="))),
        (
            "short nonce",
            valid.replace(&nonce, nonce.get(..15).unwrap_or_default()),
        ),
        (
            "tag-only ciphertext",
            valid.replace(&ciphertext, &b64url_encode(&[0u8; 16])),
        ),
        ("an extra member", valid.replacen('{', "{\"x\":\"1\",", 1)),
        (
            "a duplicate member",
            valid.replacen('{', &format!("{{\"epk\":\"{epk}\","), 1),
        ),
        ("not JSON", "not json".to_owned()),
        (
            "whitespace (not the JCS)",
            valid.replacen("\":\"", "\": \"", 1),
        ),
        (
            "members out of order (not the JCS)",
            format!(
                "{{\"rkid\":\"{}\",\"epk\":\"{epk}\",\"nonce\":\"{nonce}\",\"ciphertext\":\"{ciphertext}\"}}",
                rkid.to_multikey()
            ),
        ),
    ];
    if standard != ciphertext {
        cases.push((
            "the standard base64 alphabet",
            valid.replace(&ciphertext, &standard),
        ));
    }
    if let Some(other) = other {
        cases.push((
            "an envelope for another held queue",
            String::from_utf8(envelope(&other, 300)).unwrap_or_default(),
        ));
    }
    for (what, bytes) in cases {
        report.record(
            S,
            format!("{what}: refused(bounds)"),
            async {
                expect(
                    "verdict",
                    submit(probe, rkid, bytes.as_bytes()).await?,
                    SubmitVerdict::Bounds,
                )
            }
            .await,
        );
    }
    let maximal = envelope(rkid, 65_552);
    report.record(
        S,
        format!("a maximal envelope ({MAX_ENVELOPE_BYTES} bytes) is admitted"),
        async {
            expect("length", maximal.len(), MAX_ENVELOPE_BYTES)?;
            expect(
                "verdict",
                deposit(probe, rkid, &maximal).await?,
                SubmitVerdict::Admitted,
            )
        }
        .await,
    );
    let mut over = maximal;
    over.insert(1, b' ');
    report.record(
        S,
        "one byte over the bound: refused(bounds), decided from the header",
        async {
            expect(
                "verdict",
                submit(probe, rkid, &over).await?,
                SubmitVerdict::Bounds,
            )
        }
        .await,
    );
}

/// Collects and concludes everything in `who`'s queue (best effort).
pub(super) async fn drain(probe: &Probe, who: &Recipient) {
    for _ in 0..20 {
        let Ok(page) = probe.client.collect(&who.keys, None, 256).await else {
            return;
        };
        if page.deposits.is_empty() {
            return;
        }
        let ids: Vec<DepositId> = page.deposits.iter().map(|d| d.id).collect();
        if probe.client.conclude(&who.keys, &ids).await.is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// §5a.8
// ---------------------------------------------------------------------------

pub(super) async fn collection(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.8";
    let who = match registered(probe).await {
        Ok(who) => who,
        Err(e) => {
            report.record(S, "a queue to collect from", Err(e));
            return;
        }
    };
    let rkid = who.rkid();
    let envelopes: Vec<Vec<u8>> = (0..3).map(|_| envelope(&rkid, 120)).collect();
    let ids: Vec<DepositId> = envelopes.iter().map(|e| DepositId::of(e)).collect();
    for e in &envelopes {
        if let Err(e) = deposit(probe, &rkid, e).await {
            report.record(S, "three deposits", Err(e));
            return;
        }
    }
    collect_paging(probe, &who, &ids, report).await;
    malformed_collects(probe, &who, report).await;
    status_and_conclusion(probe, &who, &ids, report).await;
    malformed_concludes(probe, &who, report).await;
    drain(probe, &who).await;
}

/// One collect of `who`'s queue: the verdict, the `(seq, id)` of each deposit
/// served, and `more`.
async fn collect_page(
    probe: &Probe,
    who: &Recipient,
    after: Option<u64>,
    limit: u32,
) -> Result<(Verdict, Vec<(u64, DepositId)>, bool), String> {
    let page = probe
        .client
        .collect(&who.keys, after, limit)
        .await
        .map_err(|e| e.to_string())?;
    Ok((
        page.verdict,
        page.deposits
            .iter()
            .map(|d| (d.seq, d.id))
            .collect::<Vec<_>>(),
        page.more,
    ))
}

/// §5a.8 paging over three held deposits `ids`: seq order, exclusive
/// `after`, and `more`.
async fn collect_paging(probe: &Probe, who: &Recipient, ids: &[DepositId], report: &mut Report) {
    const S: &str = "§5a.8";
    let check = async {
        let first = collect_page(probe, who, None, 1).await?;
        let second = collect_page(probe, who, Some(1), 1).await?;
        let rest = collect_page(probe, who, Some(2), 10).await?;
        let past = collect_page(probe, who, Some(3), 10).await?;
        expect(
            "pages (limit 1, after 1 limit 1, after 2, after 3)",
            vec![first, second, rest, past],
            vec![
                (Verdict::Served, vec![(1, ids[0])], true),
                (Verdict::Served, vec![(2, ids[1])], true),
                (Verdict::Served, vec![(3, ids[2])], false),
                (Verdict::Served, vec![], false),
            ],
        )
    };
    report.record(
        S,
        "seq starts at 1 in admission order; after is exclusive; more says whether to page on",
        check.await,
    );
}

/// §5a.8: a collect `limit` out of 1..=1024, or an `after` that is not an
/// integer, is malformed-frame.
async fn malformed_collects(probe: &Probe, who: &Recipient, report: &mut Report) {
    const S: &str = "§5a.8";
    for (what, header) in [
        ("limit 0", "{\"limit\":0,\"op\":\"collect\"}"),
        ("limit 1025", "{\"limit\":1025,\"op\":\"collect\"}"),
        ("after as a string", "{\"after\":\"1\",\"op\":\"collect\"}"),
    ] {
        let check = async {
            let proof = session_proof(probe, who, Purpose::Collect).await?;
            let answer = probe
                .raw(&Probe::frame(header.as_bytes(), &proof), true)
                .await?;
            expect("answer", answer.error_code(), Some("malformed-frame"))
        };
        report.record(
            S,
            format!("collect with {what} is malformed-frame"),
            check.await,
        );
    }
}

/// §5a.8 status and conclude over the held deposits `ids`: a repeated id
/// counts once, a concluded deposit is never redelivered, and its status
/// stays accepted.
async fn status_and_conclusion(
    probe: &Probe,
    who: &Recipient,
    ids: &[DepositId],
    report: &mut Report,
) {
    const S: &str = "§5a.8";
    let rkid = who.rkid();
    let status = |id: DepositId| async move {
        probe
            .client
            .status(&rkid, &id)
            .await
            .map_err(|e| e.to_string())
    };
    report.record(
        S,
        "status of a held deposit is accepted",
        async { expect("status", status(ids[0]).await?, DepositStatus::Accepted) }.await,
    );
    report.record(
        S,
        "status of a deposit never admitted is unknown",
        async {
            expect(
                "status",
                status(DepositId::of(b"never admitted")).await?,
                DepositStatus::Unknown,
            )
        }
        .await,
    );
    let check = async {
        let once = probe
            .client
            .conclude(&who.keys, &[ids[0], ids[0]])
            .await
            .map_err(|e| e.to_string())?;
        let again = probe
            .client
            .conclude(&who.keys, &[ids[0], DepositId::of(b"never admitted")])
            .await
            .map_err(|e| e.to_string())?;
        expect(
            "[a, a] then [a, unknown]",
            (once, again),
            ((Verdict::Served, Some(1)), (Verdict::Served, Some(0))),
        )
    };
    report.record(
        S,
        "conclude: a repeated id counts once; concluding again is served, concluded 0",
        check.await,
    );
    report.record(
        S,
        "a concluded deposit is never redelivered",
        async {
            let (_, deposits, _) = collect_page(probe, who, None, 10).await?;
            expect(
                "held seqs after concluding seq 1",
                deposits.iter().map(|d| d.0).collect::<Vec<_>>(),
                vec![2, 3],
            )
        }
        .await,
    );
    report.record(
        S,
        "status after conclusion is still accepted (a carrier never reveals a conclusion)",
        async { expect("status", status(ids[0]).await?, DepositStatus::Accepted) }.await,
    );
}

/// §5a.8: a conclude with no ids, or more than 256, is malformed-frame.
async fn malformed_concludes(probe: &Probe, who: &Recipient, report: &mut Report) {
    const S: &str = "§5a.8";
    for (what, count) in [("no ids", 0usize), ("257 ids", wire::MAX_CONCLUDE_IDS + 1)] {
        let check = async {
            let proof = session_proof(probe, who, Purpose::Conclude).await?;
            let deposits = Value::Array(
                (0..count)
                    .map(|i| Value::from(DepositId::of(&i.to_be_bytes()).to_multibase()))
                    .collect(),
            );
            let mut header = Object::new();
            header.insert("op", "conclude");
            header.insert("deposits", deposits);
            let answer = probe
                .raw(&Probe::frame(jcs_text(&header).as_bytes(), &proof), true)
                .await?;
            expect("answer", answer.error_code(), Some("malformed-frame"))
        };
        report.record(
            S,
            format!("conclude with {what} is malformed-frame (1..=256)"),
            check.await,
        );
    }
}

// ---------------------------------------------------------------------------
// PROTOCOL.md §6: frames
// ---------------------------------------------------------------------------

/// The id of the empty envelope in `z` (base58btc) multibase: a spelling
/// the wire does not take (§7: `u` only, one spelling per id).
const Z_DEPOSIT_ID: &str = "zQmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n";

pub(super) async fn frames(probe: &Probe, report: &mut Report) {
    const S: &str = "PROTOCOL §6";
    let rkid = Recipient::fresh(&probe.carrier, 1).rkid();
    let submit_header = |size: &str| {
        format!(
            "{{\"op\":\"submit\",\"rkid\":\"{}\",\"size\":{size}}}",
            rkid.to_multikey()
        )
    };
    let cases: Vec<(&str, Vec<u8>, bool, &str)> = vec![
        ("a header prefix over 16 384 bytes (decided from the prefix)", prefix_only(16_385, 0), false, "frame-too-large"),
        ("a body prefix over 262 144 bytes (decided from the prefix)", prefix_only(20, 262_145), false, "frame-too-large"),
        ("a header that is not JSON", Probe::frame(b"{\"op\":", b""), true, "malformed-frame"),
        ("a header that is a JSON array", Probe::frame(b"[1]", b""), true, "malformed-frame"),
        ("a duplicate member", Probe::frame(b"{\"op\":\"declaration\",\"op\":\"declaration\"}", b""), true, "malformed-frame"),
        ("an unknown operation", Probe::frame(b"{\"op\":\"nope\"}", b""), true, "unknown-operation"),
        ("an unknown member", Probe::frame(b"{\"op\":\"declaration\",\"x\":1}", b""), true, "malformed-frame"),
        ("a stream that ends inside the header", prefix_only(20, 0), true, "truncated-frame"),
        ("bytes after the request frame", [Probe::frame(b"{\"op\":\"declaration\"}", b""), b"x".to_vec()].concat(), true, "malformed-frame"),
        (
            "a header rkid that is not an X25519 Multikey",
            Probe::frame(b"{\"op\":\"status\",\"rkid\":\"z6LS11111111111111111111111111111111111111111111\",\"deposit\":\"uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ\"}", b""),
            true,
            "malformed-frame",
        ),
        (
            "a status deposit id in z (base58btc) multibase",
            Probe::frame(format!("{{\"op\":\"status\",\"rkid\":\"{}\",\"deposit\":\"{Z_DEPOSIT_ID}\"}}", rkid.to_multikey()).as_bytes(), b""),
            true,
            "malformed-frame",
        ),
        (
            "a conclude deposit id in z (base58btc) multibase",
            Probe::frame(format!("{{\"op\":\"conclude\",\"deposits\":[\"{Z_DEPOSIT_ID}\"]}}").as_bytes(), b""),
            true,
            "malformed-frame",
        ),
        (
            "an unknown challenge purpose",
            Probe::frame(format!("{{\"op\":\"challenge\",\"purpose\":\"delete\",\"rkid\":\"{}\"}}", rkid.to_multikey()).as_bytes(), b""),
            true,
            "malformed-frame",
        ),
        ("a submit whose size is not the body length", Probe::frame(submit_header("10").as_bytes(), b"12345"), true, "malformed-frame"),
        ("a size that is not a canonical integer", Probe::frame(submit_header("1.0").as_bytes(), b"x"), true, "malformed-frame"),
        (
            "a proof body over 4 096 bytes",
            Probe::frame(b"{\"op\":\"register\"}", &[b' '; 4_097]),
            false,
            "frame-too-large",
        ),
    ];
    for (what, bytes, finish, code) in cases {
        let check = async {
            let answer = probe.raw(&bytes, finish).await?;
            expect("answer", answer.error_code(), Some(code))
                .map_err(|e| format!("{e}: {}", answer.describe()))
        };
        report.record(S, what.to_string(), check.await);
    }
    trailing_byte_registers_nothing(probe, report).await;
    let check = async {
        let answer = probe
            .raw(
                &Probe::frame(submit_header(&"9".repeat(5_000)).as_bytes(), b""),
                true,
            )
            .await?;
        match answer {
            Answer::Error(e) if e.detail.len() <= MAX_DETAIL_BYTES => {
                Ok(format!("{}: a {}-byte detail", e.code, e.detail.len()))
            }
            Answer::Error(e) => Err(format!(
                "a {}-byte detail echoes the request",
                e.detail.len()
            )),
            other => Err(format!("expected a closed error, got {}", other.describe())),
        }
    };
    report.record(
        S,
        "a detail is at most 256 bytes, whatever the request held",
        check.await,
    );
    let check = async {
        let answer = probe.request(&Request::Declaration, b"").await?;
        expect("verdict", answer.member("verdict"), Some("ok"))
    };
    report.record(
        S,
        "a well-formed request ended by FIN is served",
        check.await,
    );
}

/// PROTOCOL §6: a valid registration with one byte after it is
/// malformed-frame and registers nothing.
async fn trailing_byte_registers_nothing(probe: &Probe, report: &mut Report) {
    const S: &str = "PROTOCOL §6";
    let check = async {
        // A valid registration with one byte after it registers nothing.
        let who = Recipient::fresh(&probe.carrier, 1);
        let (object, _) = registration_object(probe, &who, Purpose::Register).await?;
        let mut bytes = wire::encode_frame(
            &Request::Register.to_header(),
            &sign_object(&who.key, object),
        );
        bytes.push(b'x');
        let answer = probe.raw(&bytes, true).await?;
        expect("answer", answer.error_code(), Some("malformed-frame"))?;
        let page = probe
            .client
            .collect(&who.keys, None, 1)
            .await
            .map_err(|e| e.to_string())?;
        expect("collect after it", page.verdict, Verdict::NoSuchQueue)
    };
    report.record(
        S,
        "a valid register followed by a byte is malformed-frame and registers nothing",
        check.await,
    );
}

/// A bare frame prefix: `header_len ‖ body_len`.
pub(super) fn prefix_only(header_len: u32, body_len: u32) -> Vec<u8> {
    let mut out = header_len.to_be_bytes().to_vec();
    out.extend_from_slice(&body_len.to_be_bytes());
    out
}

// ---------------------------------------------------------------------------
// PROTOCOL.md §7: submit-stream
// ---------------------------------------------------------------------------

pub(super) async fn submit_stream(probe: &Probe, report: &mut Report) {
    const S: &str = "PROTOCOL §7";
    let who = match registered(probe).await {
        Ok(who) => who,
        Err(e) => {
            report.record(S, "a queue to submit to", Err(e));
            return;
        }
    };
    let rkid = who.rkid();
    let stranger = Recipient::fresh(&probe.carrier, 1).rkid();
    let check = async {
        let a = envelope(&rkid, 100);
        let mut oversize = envelope(&rkid, 65_552);
        oversize.insert(1, b' ');
        let b = envelope(&rkid, 100);
        let mut bytes = wire::encode_frame(&Request::SubmitStream.to_header(), b"");
        for (target, envelope) in [
            (&rkid, &a),
            (&rkid, &oversize),
            (&stranger, &b),
            (&rkid, &b),
        ] {
            let size = u32::try_from(envelope.len()).unwrap_or(u32::MAX);
            bytes.extend(wire::encode_frame(
                &wire::stream_item_header(target, size),
                envelope,
            ));
        }
        let answer = probe.raw(&bytes, true).await?;
        let Answer::Frames(frames) = answer else {
            return Err(format!("expected four answers, got {}", answer.describe()));
        };
        let verdicts: Vec<Option<String>> = frames
            .iter()
            .map(|(h, _)| h.get("verdict").and_then(Value::as_str).map(str::to_owned))
            .collect();
        expect(
            "answers in item order",
            verdicts,
            [
                "admitted",
                "refused(bounds)",
                "refused(no-such-queue)",
                "admitted",
            ]
            .map(|v| Some(v.to_owned()))
            .to_vec(),
        )
    };
    report.record(
        S,
        "items answered in order; an oversize item is refused(bounds) and the stream goes on",
        check.await,
    );
    drain(probe, &who).await;
}
