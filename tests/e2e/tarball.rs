//! `deploy/tarball.sh` builds the Containerfile's and the unit's layout as
//! a tarball; unpacked into a temporary root, the binary runs from the
//! unit's paths with the shipped config: `serve` prints its listening
//! line, and SIGTERM ends it with exit 0.

use super::*;

/// The unit's `ExecStart=` words.
fn exec_start(unit: &str) -> Vec<String> {
    unit.lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("the unit has an ExecStart")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_tarball_runs_from_the_units_paths() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let archive = dir.join("rltp-carrier.tar.gz");
    let built = Command::new("bash")
        .arg(repo.join("deploy/tarball.sh"))
        .args(["--binary", BIN])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let said = String::from_utf8(built.stdout).unwrap();
    assert_eq!(
        said,
        format!(
            "tarball {}\nversion {}\n",
            archive.display(),
            env!("CARGO_PKG_VERSION")
        )
    );
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    let unpacked = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&root)
        .status()
        .unwrap();
    assert!(unpacked.success());

    let unit =
        std::fs::read_to_string(root.join("lib/systemd/system/rltp-carrier.service")).unwrap();
    assert_eq!(
        unit,
        std::fs::read_to_string(repo.join("deploy/rltp-carrier.service")).unwrap()
    );
    let words = exec_start(&unit);
    assert_eq!(
        words,
        [
            "/usr/local/bin/rltp-carrier",
            "serve",
            "--config",
            "/etc/rltp-carrier/carrier.toml",
            "--data-dir",
            "/var/lib/rltp-carrier",
        ]
    );
    for file in [
        "usr/share/bash-completion/completions/rltp-carrier",
        "usr/share/man/man1/rltp-carrier.1.gz",
        "usr/share/man/man1/rltp-carrier-serve.1.gz",
        "etc/sysctl.d/99-rltp-carrier-quic.conf",
        "usr/share/doc/rltp-carrier/ERRORS.md",
        "usr/share/doc/rltp-carrier/carrier.json",
        "usr/share/doc/rltp-carrier/alerts.yml",
    ] {
        assert!(root.join(file).is_file(), "the tarball lacks {file}");
    }
    let completions =
        std::fs::read_to_string(root.join("usr/share/bash-completion/completions/rltp-carrier"))
            .unwrap();
    assert!(completions.contains("rltp__carrier__subcmd__serve"));

    // ExecStart under the root: the binary and config at the unit's
    // paths, the state directory a temporary one, a free port.
    let binary = root.join(words[0].trim_start_matches('/'));
    let config = root.join(words[3].trim_start_matches('/'));
    let data = dir.join("var-lib-rltp-carrier");
    let version = Command::new(&binary).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8(version.stdout).unwrap(),
        format!("rltp-carrier {}\n", env!("CARGO_PKG_VERSION"))
    );
    let mut child = Command::new(&binary)
        .args([&words[1], &words[2]])
        .arg(&config)
        .arg(&words[4])
        .arg(&data)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = lines_of(child.stdout.take().unwrap());
    let first = lines.recv_timeout(PROCESS_DEADLINE).unwrap();
    assert!(first.starts_with("listening 127.0.0.1:"), "{first}");
    send_signal(child.id(), "TERM");
    let deadline = Instant::now() + PROCESS_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    assert!(
        data.join("store").exists(),
        "serve made no store in the data dir"
    );
}
