//! The unit tests of `carrier.toml`'s parsing and validation.

use super::*;

#[test]
fn defaults_are_valid() {
    let config = Config::from_toml("").unwrap();
    assert_eq!(config.carrier.as_str(), DEFAULT_CARRIER);
    assert_eq!(config.listen.to_string(), DEFAULT_LISTEN);
    assert_eq!(config.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
    assert_eq!(config.log_format, LogFormat::Human);
    assert_eq!(config.constants.queue_floor_bytes(), 262_144);
    assert_eq!(config.constants.orphan_horizon_ms(), 30 * 86_400_000);
    assert_eq!(
        config.constants.get("challenge-lifetime").unwrap().lexeme(),
        "PT1M"
    );
    assert_eq!(config.limits, LimitsConfig::default());
    assert_eq!(Config::defaults().unwrap().listen, config.listen);
}

#[test]
fn full_example_parses() {
    let text = r#"
carrier = "did:web:carrier.example"
listen = "0.0.0.0:5000"
data-dir = "/var/lib/rltp"
log-format = "json"
[constants]
orphan-horizon = "P7D"
give-up-horizon = "P90D"
challenge-lifetime = "PT5S"
queue-floor = "65536"
max-queue-bytes = "1048576"
max-binding-tombstones = "1"
status-horizon = "PT5M"
[limits]
capacity-bytes = 1000000
max-streams-per-connection = 8
[limits.meters]
queue = { per-second = 5, burst = 6 }
[tls]
cert = "c.pem"
key = "k.pem"
"#;
    let config = Config::from_toml(text).unwrap();
    assert_eq!(config.carrier.as_str(), "did:web:carrier.example");
    assert_eq!(config.listen.port(), 5000);
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(config.constants.give_up_horizon_ms(), 90 * 86_400_000);
    assert_eq!(config.limits.capacity_bytes, 1_000_000);
    assert_eq!(config.limits.max_bindings, 16_384);
    assert_eq!(config.limits.meters.queue, RateConfig::new(5, 6));
    assert_eq!(config.limits.meters.held_binding, RateConfig::new(20, 100));
    assert_eq!(config.tls.cert, Some(PathBuf::from("c.pem")));
}

fn refusal(text: &str) -> String {
    Config::from_toml(text).unwrap_err().to_string()
}

#[test]
fn refusals_name_the_field_and_domain() {
    assert_eq!(
        refusal("[constants]\nqueue-floor = \"1\""),
        "config field constants: queue-floor \"1\" is outside its domain [65536, max-queue-bytes] (max-queue-bytes is 67108864)"
    );
    assert_eq!(
        refusal("[constants]\norphan-horizon = \"P1D\""),
        "config field constants: orphan-horizon \"P1D\" is outside its domain [P7D, P365D]"
    );
    assert!(
        refusal("[constants]\nstatus-horizon = \"PT1.5S\"")
            .starts_with("config field constants: status-horizon \"PT1.5S\" is not a duration")
    );
    assert!(refusal("listen = \"nowhere\"").starts_with("config field listen: \"nowhere\""));
    assert!(refusal("carrier = \"\"").starts_with("config field carrier: \"\""));
    assert_eq!(
        refusal("[limits]\nmax-bindings = 0"),
        "config field limits.max-bindings: must be at least 1"
    );
    assert_eq!(
        refusal("[tls]\ncert = \"c.pem\""),
        "config field tls: cert and key must be given together"
    );
    assert_eq!(
        refusal("[limits.meters]\nqueue = { per-second = 0, burst = 1 }"),
        "config field limits.meters.queue: per-second and burst must be at least 1"
    );
    assert_eq!(
        refusal("[metrics]\nlisten = \"0.0.0.0:9464\""),
        "config field metrics.listen: 0.0.0.0:9464 is not a loopback address (the endpoint \
         is for the local operator; set allow-remote = true to expose it behind your own \
         access control)"
    );
}

#[test]
fn the_metrics_endpoint_is_off_by_default_and_loopback_when_on() {
    assert_eq!(
        Config::defaults().unwrap().metrics,
        MetricsConfig::default()
    );
    assert_eq!(Config::defaults().unwrap().metrics.listen, None);
    let on = Config::from_toml("[metrics]\nlisten = \"127.0.0.1:9464\"").unwrap();
    assert_eq!(on.metrics.listen, Some("127.0.0.1:9464".parse().unwrap()));
    let v6 = Config::from_toml("[metrics]\nlisten = \"[::1]:9464\"").unwrap();
    assert!(v6.metrics.listen.unwrap().ip().is_loopback());
    let remote =
        Config::from_toml("[metrics]\nlisten = \"0.0.0.0:9464\"\nallow-remote = true").unwrap();
    assert!(remote.metrics.allow_remote);
}

#[test]
fn unknown_keys_and_wrong_types_are_refused() {
    let unknown = refusal("colour = \"red\"");
    assert!(unknown.contains("colour"), "{unknown}");
    let unknown = refusal("[constants]\nmax-deposit = \"1\"");
    assert!(unknown.contains("max-deposit"), "{unknown}");
    let typed = refusal("[constants]\nqueue-floor = 65536");
    assert!(
        typed.contains("queue-floor") && typed.contains("string"),
        "{typed}"
    );
    let format = refusal("log-format = \"xml\"");
    assert!(format.contains("xml"), "{format}");
}

/// `serve --check` prints [`Config::effective`]: it parses back to the
/// same configuration, key for key, with every default written out.
#[test]
fn the_effective_configuration_parses_back_to_itself() {
    let config =
        Config::from_toml("[limits.meters]\nqueue = { per-second = 3, burst = 4 }\n").unwrap();
    let text = toml::to_string(&config.effective()).unwrap();
    let again = Config::from_toml(&text).unwrap();
    assert_eq!(again.flattened(), config.flattened());
    assert!(
        text.contains("[limits.meters.queue]\nper-second = 3\nburst = 4\n"),
        "{text}"
    );
    assert!(text.contains("\ncapacity-bytes = 4294967296\n"), "{text}");
    assert!(text.contains("\nstatus-horizon = \"PT30S\"\n"), "{text}");
}

#[test]
fn a_password_in_the_database_url_is_never_printed() {
    assert_eq!(
        redact_password("host=db user=rltp password=s3cret dbname=rltp"),
        "host=db user=rltp password=<redacted> dbname=rltp"
    );
    assert_eq!(
        redact_password("postgresql://rltp:s3cret@db:5432/rltp"),
        "postgresql://rltp:<redacted>@db:5432/rltp"
    );
    assert_eq!(
        redact_password("postgresql://db/rltp"),
        "postgresql://db/rltp"
    );
}

/// Every key a configuration has is classified by [`RELOAD`], and
/// [`Config::with_reloaded`] applies exactly the [`Reload::Live`] ones:
/// a file that changes every key reloads the live keys and keeps every
/// other value.
#[test]
fn a_reload_applies_exactly_the_live_keys_of_the_reload_table() {
    let old = Config::defaults().unwrap();
    let new = Config::from_toml(
        r#"
carrier = "did:web:other.example"
listen = "127.0.0.1:5000"
data-dir = "/elsewhere"
log-format = "json"
log-filter = "debug"
[constants]
status-horizon = "PT1M"
[limits]
capacity-bytes = 1
max-bindings = 2
max-connections = 3
max-streams-per-connection = 4
idle-timeout-ms = 5
stream-read-timeout-ms = 6
sweep-interval-ms = 7
drain-timeout-ms = 8
[limits.meters]
unknown-address = { per-second = 9, burst = 10 }
held-binding = { per-second = 11, burst = 12 }
queue = { per-second = 13, burst = 14 }
shared-submission = { per-second = 15, burst = 16 }
[tls]
cert = "c.pem"
key = "k.pem"
[metrics]
listen = "127.0.0.1:9464"
"#,
    )
    .unwrap();
    let changes = changes(&old, &new);
    let mut keys: Vec<(&str, Reload)> =
        changes.iter().map(|c| (c.key.as_str(), c.reload)).collect();
    keys.sort_unstable_by_key(|(k, _)| *k);
    let mut expected = [
        ("carrier", Reload::Restart),
        ("listen", Reload::Restart),
        ("data-dir", Reload::Restart),
        ("log-format", Reload::Restart),
        ("log-filter", Reload::Live),
        ("constants.status-horizon", Reload::Declaration),
        ("limits.capacity-bytes", Reload::Live),
        ("limits.max-bindings", Reload::Live),
        ("limits.max-connections", Reload::Restart),
        ("limits.max-streams-per-connection", Reload::Restart),
        ("limits.idle-timeout-ms", Reload::Restart),
        ("limits.stream-read-timeout-ms", Reload::Live),
        ("limits.sweep-interval-ms", Reload::Live),
        ("limits.drain-timeout-ms", Reload::Live),
        ("limits.meters.unknown-address.per-second", Reload::Live),
        ("limits.meters.unknown-address.burst", Reload::Live),
        ("limits.meters.held-binding.per-second", Reload::Live),
        ("limits.meters.held-binding.burst", Reload::Live),
        ("limits.meters.queue.per-second", Reload::Live),
        ("limits.meters.queue.burst", Reload::Live),
        ("limits.meters.shared-submission.per-second", Reload::Live),
        ("limits.meters.shared-submission.burst", Reload::Live),
        ("tls.cert", Reload::Restart),
        ("tls.key", Reload::Restart),
        ("metrics.listen", Reload::Restart),
    ];
    expected.sort_unstable_by_key(|(k, _)| *k);
    assert_eq!(keys, expected);
    let capacity = changes
        .iter()
        .find(|c| c.key == "limits.capacity-bytes")
        .unwrap();
    assert_eq!(
        (capacity.old.as_str(), capacity.new.as_str()),
        ("4294967296", "1")
    );
    // Applied: the live keys are the new file's, every other key the old value.
    let applied = old.with_reloaded(&new);
    for change in &changes {
        let now = applied
            .flattened()
            .into_iter()
            .find(|(k, _)| *k == change.key)
            .map(|(_, v)| v)
            .unwrap_or_default();
        let expected = if change.reload == Reload::Live {
            &change.new
        } else {
            &change.old
        };
        assert_eq!(&now, expected, "{}", change.key);
    }
    // Every key of a full configuration is covered by an entry of its own section.
    for (key, _) in new.flattened() {
        assert!(
            RELOAD
                .iter()
                .any(|(k, _)| key == *k || key.starts_with(&format!("{k}."))),
            "{key} is not in RELOAD"
        );
    }
}

/// `deploy/OPERATIONS.md` lists exactly [`RELOAD`], in its order, with
/// the same class for every key.
#[test]
fn the_operations_guide_lists_the_reload_table() {
    const GUIDE: &str = include_str!("../../../deploy/OPERATIONS.md");
    let table = GUIDE
        .split_once("<!-- reload-table -->")
        .and_then(|(_, rest)| rest.split_once("<!-- /reload-table -->"))
        .map(|(table, _)| table)
        .unwrap();
    let rows: Vec<(String, Reload)> = table
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let key = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let class = match cells.next()? {
                "reloaded" => Reload::Live,
                "restart" => Reload::Restart,
                "declaration" => Reload::Declaration,
                other => panic!("{key}: unknown class {other:?}"),
            };
            Some((key.to_owned(), class))
        })
        .collect();
    let code: Vec<(String, Reload)> = RELOAD.iter().map(|(k, r)| ((*k).to_owned(), *r)).collect();
    assert_eq!(rows, code);
}
#[test]
fn transport_settings_are_checked_and_applied() {
    let base = "carrier = \"did:web:localhost\"\n[transport]\n";
    let with = |extra: &str| Config::from_toml(&format!("{base}{extra}"));
    let config =
        with("ack-eliciting-threshold = 8\ninitial-mtu = 8952\nmtu-upper-bound = 9000").unwrap();
    assert_eq!(config.transport.quic.ack_eliciting_threshold, 8);
    assert_eq!(config.transport.quic.initial_mtu, 8952);
    let mut quinn_config = quinn::TransportConfig::default();
    config.transport.quic.apply(&mut quinn_config);
    for (extra, field) in [
        ("initial-mtu = 1199", "transport.initial-mtu"),
        ("mtu-upper-bound = 65528", "transport.mtu-upper-bound"),
        (
            "initial-mtu = 1500\nmtu-upper-bound = 1400",
            "transport.mtu-upper-bound",
        ),
        ("max-ack-delay-ms = 0", "transport.max-ack-delay-ms"),
    ] {
        let error = with(extra).unwrap_err().to_string();
        assert!(error.contains(field), "{extra}: {error}");
    }
    assert!(
        with("ack-frequency = 1").is_err(),
        "unknown keys are refused"
    );
}

#[test]
fn tcp_listen_defaults_to_the_quic_address_and_can_be_moved_or_turned_off() {
    let with = |transport: &str| {
        Config::from_toml(&format!(
            "listen = \"127.0.0.1:4500\"\n[transport]\n{transport}"
        ))
    };
    let default = with("").unwrap();
    assert_eq!(default.transport.tcp_listen, TcpListen::Listen);
    assert_eq!(
        default.tcp_listen(),
        Some("127.0.0.1:4500".parse().unwrap())
    );
    let moved = with("tcp-listen = \"0.0.0.0:443\"").unwrap();
    assert_eq!(moved.tcp_listen(), Some("0.0.0.0:443".parse().unwrap()));
    assert_eq!(with("tcp-listen = \"off\"").unwrap().tcp_listen(), None);
    assert_eq!(
        toml::to_string(&default.effective())
            .unwrap()
            .matches("tcp-listen = \"listen\"")
            .count(),
        1
    );
    for bad in ["tcp-listen = \"443\"", "tcp-listen = 443"] {
        let error = with(bad).unwrap_err().to_string();
        assert!(error.contains("transport.tcp-listen"), "{bad}: {error}");
    }
    // The effective configuration shows it, and parses back to itself.
    let effective = toml::to_string(&moved.effective()).unwrap();
    assert!(
        effective.contains("tcp-listen = \"0.0.0.0:443\""),
        "{effective}"
    );
    assert_eq!(
        Config::from_toml(&effective).unwrap().transport,
        moved.transport
    );
}
