//! The shipped Grafana dashboard (`deploy/grafana/carrier.json`) and
//! Prometheus alert rules (`deploy/prometheus/alerts.yml`) use only metrics
//! the real binary exports: a carrier is started, does a registration and
//! a deposit, its `/metrics` is scraped, and every metric name of every
//! PromQL expression of both files must be in that scrape (histogram
//! series by their `_bucket`/`_sum`/`_count` names, as the scrape has
//! them). The rules must pass `promtool check rules` (Debian's
//! `prometheus` package, installed by `test.sh`).

use super::*;

/// Prometheus records `up` for every scrape target; it is never in a
/// scrape.
const SYNTHETIC: [&str; 1] = ["up"];

/// PromQL words that are not metric names: keywords, and the aggregation
/// operators (which may be followed by `by (…)` rather than `(`).
const KEYWORDS: [&str; 27] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
    "atan2",
];

/// The metric names a PromQL expression selects: identifiers outside
/// strings, label matchers `{…}` and ranges `[…]`, that are neither a
/// function or aggregation (followed by `(`), nor a keyword, nor a label
/// of a `by`/`without`/`on`/`ignoring`/`group_*` list.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    let mut depth_brace = 0usize;
    let mut depth_bracket = 0usize;
    let mut after_grouping = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' && c != '`' {
                        i += 1;
                    }
                    i += 1;
                }
                assert!(i < chars.len(), "unterminated string in {expr:?}");
                i += 1;
                continue;
            }
            '{' => depth_brace += 1,
            '}' => depth_brace = depth_brace.checked_sub(1).expect("unbalanced }"),
            '[' => depth_bracket += 1,
            ']' => depth_bracket = depth_bracket.checked_sub(1).expect("unbalanced ]"),
            '(' if after_grouping => {
                // A label list: skip to its closing parenthesis.
                let close = chars[i..]
                    .iter()
                    .position(|&c| c == ')')
                    .unwrap_or_else(|| panic!("unclosed label list in {expr:?}"));
                i += close + 1;
                after_grouping = false;
                continue;
            }
            _ => {}
        }
        if c.is_ascii_digit() || c == '.' {
            // A number (or a duration inside a range): no names in it.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | ':' | '$'))
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if depth_brace > 0 || depth_bracket > 0 || word.starts_with('$') {
                continue;
            }
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            let lower = word.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
            ) {
                after_grouping = true;
            } else if next != Some(&'(') && !KEYWORDS.contains(&lower.as_str()) {
                names.push(word);
            }
            continue;
        }
        i += 1;
    }
    assert_eq!((depth_brace, depth_bracket), (0, 0), "unbalanced {expr:?}");
    names
}

#[test]
fn the_extractor_finds_metric_names_only() {
    assert_eq!(
        metric_names(
            "histogram_quantile(0.99, sum by (le, instance) (rate(a_bucket{x=~\"b{c}\", y=\"$z\"}[$__rate_interval] offset 5m))) > 0.25 and on (job) up == bool 0"
        ),
        ["a_bucket", "up"]
    );
    assert_eq!(
        metric_names("sum without (state) (b) / ignoring (q) group_left (r) c_max > 1e3"),
        ["b", "c_max"]
    );
}

/// Every PromQL expression of the dashboard: each target's `expr`, and
/// the metric of a `label_values(metric, label)` variable query.
fn dashboard_exprs(dashboard: &serde_json::Value) -> Vec<String> {
    let mut exprs = Vec::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = std::collections::BTreeSet::new();
    for panel in panels {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "panel ids repeat"
        );
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{} has no target", panel["title"]);
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}");
            exprs.push(target["expr"].as_str().expect("expr").to_owned());
        }
    }
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert_eq!(variables[0]["name"], "datasource");
    assert_eq!(variables[0]["type"], "datasource");
    assert_eq!(variables[0]["query"], "prometheus");
    for variable in &variables[1..] {
        let query = variable["query"]["query"].as_str().unwrap();
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable query {query:?}"));
        let (selector, _label) = inner.rsplit_once(',').unwrap();
        exprs.push(selector.trim().to_owned());
    }
    exprs
}

/// Every `expr:` of the alert rules (each is one line: checked against
/// the number of rules).
fn alert_exprs(rules: &str) -> Vec<String> {
    let exprs: Vec<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .map(|e| e.trim().to_owned())
        .collect();
    let alerts = rules
        .lines()
        .filter(|l| l.trim().starts_with("- alert:"))
        .count();
    assert_eq!(exprs.len(), alerts, "one one-line expr per alert");
    for e in &exprs {
        assert!(!e.is_empty() && !e.starts_with(['|', '>']), "{e:?}");
    }
    exprs
}

/// The sample names of a Prometheus text exposition.
fn scraped_names(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l[..l.find(['{', ' ']).unwrap_or(l.len())].to_owned())
        .collect()
}

#[test]
fn dashboard_and_alerts_use_only_exported_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let port = free_tcp_port();
    let config = document(
        dir,
        "carrier.toml",
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    let carrier = Carrier::start(&dir.join("data"), Some(&config));
    let (key, rkid) = keys_new(dir, "alice.json");
    cli_to(dir, &carrier, &["register", "--key", key.to_str().unwrap()]).expect(0);
    let doc = document(dir, "doc.json", r#"{"hello":"world"}"#);
    cli_to(
        dir,
        &carrier,
        &["send", "--to", &rkid, doc.to_str().unwrap()],
    )
    .expect(0);
    let (code, text) = http_get(port, "/metrics");
    assert_eq!(code, 200);
    assert!(
        text.contains("rltp_carrier_verdicts_total{operation=\"submit\",verdict=\"admitted\"} 1"),
        "{text}"
    );
    let scraped = scraped_names(&text);

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("deploy/grafana/carrier.json")).unwrap(),
    )
    .unwrap();
    let rules = std::fs::read_to_string(root.join("deploy/prometheus/alerts.yml")).unwrap();
    let mut used = std::collections::BTreeSet::new();
    for (file, exprs) in [
        ("carrier.json", dashboard_exprs(&dashboard)),
        ("alerts.yml", alert_exprs(&rules)),
    ] {
        for expr in exprs {
            let names = metric_names(&expr);
            assert!(!names.is_empty(), "{file}: no metric in {expr:?}");
            for name in names {
                assert!(
                    scraped.contains(&name) || SYNTHETIC.contains(&name.as_str()),
                    "{file}: {name} (in {expr:?}) is not in the scrape"
                );
                used.insert(name);
            }
        }
    }
    // What the issue asks the dashboard and alerts to show.
    for needed in [
        "rltp_carrier_verdicts_total",
        "rltp_carrier_unavailable_total",
        "rltp_carrier_commit_seconds_bucket",
        "rltp_carrier_capacity_used_bytes",
        "rltp_carrier_capacity_bytes",
        "rltp_carrier_bindings",
        "rltp_carrier_bindings_max",
        "rltp_carrier_wind_ups_total",
        "rltp_carrier_releases_total",
        "rltp_carrier_given_up_deposits_total",
        "rltp_carrier_commit_failures_total",
        "rltp_carrier_quarantined_deposits",
        "rltp_carrier_quarantined_deposits_total",
        "rltp_carrier_store_disk_bytes",
        "rltp_carrier_store_log_bytes",
        "rltp_carrier_store_live_bytes",
        "rltp_carrier_store_compactable_segments",
        "rltp_carrier_oldest_deposit_age_seconds",
    ] {
        assert!(used.contains(needed), "nothing shows {needed}");
    }
    assert!(carrier.terminate().success());

    let promtool = Command::new("promtool")
        .args(["check", "rules"])
        .arg(root.join("deploy/prometheus/alerts.yml"))
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool (Debian package prometheus; ./test.sh installs it) cannot run: {e}")
        });
    let said = String::from_utf8_lossy(&promtool.stdout);
    assert!(promtool.status.success(), "promtool: {said} {promtool:?}");
    assert!(said.contains("SUCCESS: 14 rules found"), "{said}");
}
