//! The black-box conformance runner (`rltp-carrier conformance`) against
//! our own `serve`: every wire-observable section passes, exactly the four
//! that need horizons, floods or internal counters are reported not
//! observable, and a wrong `C` or an unreachable carrier fails as it must.

use super::*;

/// The report sections and their outcomes over `transport`, from
/// `--json` lines.
fn outcomes(run: &Run, transport: &str) -> Vec<(String, String, usize)> {
    run.stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|v| v["transport"] == transport)
        .map(|v| {
            (
                v["section"].as_str().unwrap().to_owned(),
                v["outcome"].as_str().unwrap().to_owned(),
                v["checks"].as_array().unwrap().len(),
            )
        })
        .collect()
}

/// With a 5 s challenge lifetime and enough patience, even the expiry of a
/// challenge is checked; everything else observable passes.
#[test]
fn our_carrier_passes_every_wire_observable_section() {
    let dir = tempfile::tempdir().unwrap();
    let config = document(
        dir.path(),
        "carrier.toml",
        "[constants]\nchallenge-lifetime = \"PT5S\"\n",
    );
    let carrier = Carrier::start(&dir.path().join("data"), Some(&config));
    let run = cli_to(
        dir.path(),
        &carrier,
        &[
            "conformance",
            "--carrier",
            &carrier.carrier,
            "--issuer",
            &carrier.issuer,
            "--patience",
            "30",
            "--json",
        ],
    )
    .expect(0);
    let sections = outcomes(&run, "quic");
    // Every check ran over both bindings with the same outcomes
    // (`PROTOCOL.md` §5b: the same verdicts over TLS/TCP).
    assert_eq!(outcomes(&run, "tcp"), sections, "{}", run.stdout);
    let not_observable: Vec<&str> = sections
        .iter()
        .filter(|s| s.1 == "not-observable")
        .map(|s| s.0.as_str())
        .collect();
    assert_eq!(
        not_observable,
        ["§4.4 g3", "§4.4 g4", "§4.4 g5", "§5a.9"],
        "{}",
        run.stdout
    );
    for (section, outcome, checks) in &sections {
        if !not_observable.contains(&section.as_str()) {
            assert_eq!(outcome, "pass", "{section}: {}", run.stdout);
            assert!(*checks >= 1, "{section}");
        }
    }
    assert_eq!(sections.len(), 17);
    // Every check ran: none of the observable ones was left unobserved.
    assert!(
        !run.stdout.contains("rerun with --patience"),
        "{}",
        run.stdout
    );
    let total: usize = sections.iter().map(|s| s.2).sum();
    assert_eq!(total, 91, "{}", run.stdout);
}

/// The runner fails a carrier that does not behave as expected: here, the
/// same carrier probed as the wrong `C` (every challenge names another
/// carrier, so nothing registers) — exit 1, failures named.
#[test]
fn a_deviating_carrier_fails_and_an_unreachable_one_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(&dir.path().join("data"), None);
    let run = cli_to(
        dir.path(),
        &carrier,
        &[
            "conformance",
            "--carrier",
            "did:web:not-this-carrier.example",
        ],
    )
    .expect(1);
    assert!(
        run.stdout
            .contains("§5a.3 r5         quic fail              0/")
            && run.stdout.contains(" tcp fail "),
        "{}",
        run.stdout
    );
    // The sealed address challenge names the real C, so the runner
    // (a registrant) refuses to use it (PROTOCOL.md §8).
    for transport in ["quic", "tcp"] {
        assert!(
            run.stdout.contains(&format!(
                "FAIL {transport} a challenge is single use: a replayed proof is refused: address challenge: \
                 sealed address challenge member carrier differs from the request"
            )),
            "{}",
            run.stdout
        );
    }
    assert!(run.stdout.contains("quic: 17 sections: "), "{}", run.stdout);
    assert!(run.stdout.contains("tcp: 17 sections: "), "{}", run.stdout);
    assert!(run.stdout.contains(" fail, "), "{}", run.stdout);
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let unreachable = cli(
        dir.path(),
        &[
            "conformance",
            "--server",
            &addr,
            "--pin",
            &carrier.pin,
            "--timeout",
            "2",
        ],
    )
    .expect(3);
    assert!(
        unreachable.stderr.contains("cannot reach the carrier"),
        "{unreachable:?}"
    );
}
