//! Runs every shipped vector case through the runner and requires zero
//! failures and the exact number of cases per section, so a skipped or
//! vanished case fails here (a missing file fails every section it feeds).

use rltp_vectors::{SpecVectors, run_spec};

/// (file, section, cases): every case the carrier touches, counted.
const EXPECTED: [(&str, &str, usize); 14] = [
    // intermediate + output values, open round trip, wrong-key open
    ("seal.json", "seal", 11),
    ("carrier-proof.json", "registration", 5),
    ("carrier-proof.json", "collection", 5),
    ("carrier-proof.json", "conclusion", 5),
    // seven transplant negatives
    ("carrier-proof.json", "negatives", 7),
    // six aliases + the positive control
    ("carrier-proof.json", "encodingAcceptanceSurface", 7),
    // four rejects (raw bytes) + three accepts
    ("carrier-proof.json", "generationSpelling", 7),
    // six accepts + nine rejects
    ("carrier-proof.json", "durationGrammar", 15),
    // names, role URI, the shipped declaration, three rejects
    ("carrier-proof.json", "carrierGuarantees.g1_declaration", 6),
    // relationship digest + three carriers + the relationship axis
    ("identity-derivation.json", "carrierRelationship", 5),
    // 5 accepts, 8 rejects, 7 raw-byte rejects, 1 raw-byte accept, NFC pair
    (
        "identity-derivation.json",
        "carrierRelationship.identifierGrammar",
        22,
    ),
    // 4 accepts + 7 rejects
    (
        "identity-derivation.json",
        "carrierRelationship.nonceConvergence.generationDomain",
        11,
    ),
    ("identity-derivation.json", "adapterScopedIdentities", 2),
    // version + 2 Cc + 21 Cf + 10 White_Space ranges, each executed
    ("identity-derivation.json", "unicodePin", 34),
];

#[test]
fn every_shipped_case_passes() {
    let report = run_spec(&SpecVectors::from_env());
    println!("{report}");
    assert_eq!(report.failures(), 0, "{report}");
    for (file, name, cases) in EXPECTED {
        let section = report
            .section(file, name)
            .unwrap_or_else(|| panic!("section {file} {name} did not run"));
        assert_eq!(section.total(), cases, "{file} {name}");
    }
    assert_eq!(report.sections.len(), EXPECTED.len());
    assert_eq!(report.total(), EXPECTED.iter().map(|e| e.2).sum::<usize>());
}

#[test]
fn a_missing_directory_fails_every_section() {
    let report = run_spec(&SpecVectors::Dir("/nonexistent/rltp-vectors".into()));
    // Every section fails (none is skipped), each naming the missing path.
    assert_eq!(report.sections.len(), EXPECTED.len(), "{report}");
    assert_eq!(report.total(), report.failures());
    for section in &report.sections {
        assert!(
            section.failures[0].contains("cannot read /nonexistent/rltp-vectors/"),
            "{section:?}"
        );
    }
}
