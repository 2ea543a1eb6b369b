//! `ERRORS.md` lists exactly the closed sets the code defines: every
//! table there against its one home in code, in order, with the same
//! retriable flag (a member added to the code and not documented fails
//! here, and so does a documented member the code lacks).

use super::*;
use rltp_cli::exit;
use rltp_wire::response::ErrorCode;
use rltp_wire::{CloseCode, DepositStatus, SubmitVerdict, Verdict};

/// The rows of the table under the `## heading` of `ERRORS.md`: the
/// backticked spans of the first cell joined by a space, and the
/// `retriable` column (`yes`/`no`).
fn table(text: &str, heading: &str) -> Vec<(String, bool)> {
    let start = text
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("ERRORS.md has no section {heading:?}"));
    let section = &text[start + heading.len() + 5..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut rows = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    let header: Vec<&str> = rows
        .next()
        .unwrap_or_else(|| panic!("{heading}: no table"))
        .split('|')
        .map(str::trim)
        .collect();
    let retriable = header
        .iter()
        .position(|c| *c == "retriable")
        .unwrap_or_else(|| panic!("{heading}: no retriable column in {header:?}"));
    rows.skip(1) // the |---| line
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let key = cells[1]
                .split('`')
                .skip(1)
                .step_by(2)
                .collect::<Vec<_>>()
                .join(" ");
            let flag = match cells[retriable] {
                "yes" => true,
                "no" => false,
                other => panic!("{heading}: retriable {other:?} in {row:?}"),
            };
            (key, flag)
        })
        .collect()
}

fn named<I: IntoIterator<Item = (String, bool)>>(members: I) -> Vec<(String, bool)> {
    members.into_iter().collect()
}

#[test]
fn errors_md_lists_exactly_the_closed_sets_of_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ERRORS.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let cases: [(&str, Vec<(String, bool)>); 6] = [
        (
            "Submission verdicts",
            named(
                SubmitVerdict::ALL
                    .iter()
                    .map(|v| (v.as_str().to_owned(), v.retriable())),
            ),
        ),
        (
            "Proof verdicts",
            named(
                Verdict::ALL
                    .iter()
                    .map(|v| (v.as_str().to_owned(), v.retriable())),
            ),
        ),
        (
            "Deposit statuses",
            named(
                DepositStatus::ALL
                    .iter()
                    .map(|v| (v.as_str().to_owned(), v.retriable())),
            ),
        ),
        (
            "Stream error codes",
            named(
                ErrorCode::ALL
                    .iter()
                    .map(|v| (v.as_str().to_owned(), v.retriable())),
            ),
        ),
        (
            "QUIC application error codes",
            named(
                CloseCode::ALL
                    .iter()
                    .map(|v| (format!("{} {}", v.code(), v.as_str()), v.retriable())),
            ),
        ),
        (
            "Exit statuses",
            named(
                exit::ALL
                    .iter()
                    .map(|s| (format!("{s} {}", exit::name(*s)), exit::retriable(*s))),
            ),
        ),
    ];
    for (heading, expected) in cases {
        assert_eq!(
            table(&text, heading),
            expected,
            "ERRORS.md section {heading:?} against the code (member, retriable)"
        );
    }
    // The sets themselves, so a change to them is seen here too.
    assert_eq!(
        ErrorCode::ALL.iter().filter(|c| c.retriable()).count(),
        1,
        "unavailable is the only retriable stream error code"
    );
    assert_eq!(exit::ALL, [0, 1, 2, 3]);
}
