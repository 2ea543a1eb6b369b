//! # rltp-pgtest: throwaway PostgreSQL clusters for the tests
//!
//! Every test that needs PostgreSQL starts its own cluster with
//! [`Cluster::start`]: `initdb` and `pg_ctl` from Debian's `postgresql`
//! package, in a fresh temporary directory, listening on a free loopback
//! port only (no system service is used or assumed to be up). Dropping the
//! [`Cluster`] stops it (immediately) and removes its directory.
//!
//! `initdb` and `postgres` refuse to run as root ("initdb: error: cannot be
//! run as root"); when the tests run as root, every PostgreSQL program runs
//! as the `postgres` user the Debian package creates (`runuser -u postgres
//! --`), in a directory owned by that user.
//!
//! A missing package is an error that names it ([`Error::NotInstalled`]);
//! callers fail the test with it, never skip. `./test.sh` installs the
//! package.
//!
//! [`Patroni`] starts a pair of PostgreSQL servers managed by Patroni over a
//! single-member etcd, for the failover tests (`patroni` module).
//!
//! What it does not do: it is not a production deployment helper (no
//! authentication: `trust` on loopback), and it never touches a cluster it
//! did not create.

mod patroni;

pub use patroni::{Patroni, ProcessMarks, Role};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Why a cluster could not be made or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// PostgreSQL's server programs are not installed.
    #[error(
        "PostgreSQL is not installed ({0}): install Debian's `postgresql` package (./test.sh does)"
    )]
    NotInstalled(String),
    /// Another program the harness runs is not installed.
    #[error("`{program}` is not on PATH: install Debian's `{package}` package (./test.sh does)")]
    Missing {
        /// The program looked for.
        program: String,
        /// The Debian package that provides it.
        package: String,
    },
    /// A PostgreSQL program failed.
    #[error("{what} failed: {detail}")]
    Command {
        /// What was run.
        what: String,
        /// Its exit status and output.
        detail: String,
    },
    /// A file-system step failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The server did not come up (or down) in time.
    #[error("{0}")]
    Timeout(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// The directory of the newest installed PostgreSQL's server programs
/// (`/usr/lib/postgresql/<major>/bin`), or `RLTP_PG_BIN` when set.
///
/// # Errors
/// [`Error::NotInstalled`] naming where it looked.
pub fn bin_dir() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("RLTP_PG_BIN") {
        let dir = PathBuf::from(dir);
        return if dir.join("initdb").is_file() {
            Ok(dir)
        } else {
            Err(Error::NotInstalled(format!(
                "no initdb in RLTP_PG_BIN={}",
                dir.display()
            )))
        };
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .map_err(|_| Error::NotInstalled(format!("no {}", root.display())))?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    majors.sort();
    majors
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| Error::NotInstalled(format!("no */bin/initdb under {}", root.display())))
}

/// Whether this process runs as root (then PostgreSQL runs as `postgres`).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A free TCP port on loopback (bound, read, released).
///
/// # Errors
/// [`Error::Io`] if no port can be bound.
pub fn free_port() -> Result<u16, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("bind a free port"))?;
    Ok(listener.local_addr().map_err(io("read the port"))?.port())
}

/// How to run PostgreSQL's programs on this machine.
#[derive(Debug, Clone)]
pub(crate) struct Runner {
    bin: PathBuf,
    as_postgres: bool,
}

impl Runner {
    pub(crate) fn new() -> Result<Runner, Error> {
        let bin = bin_dir()?;
        let as_postgres = is_root();
        if as_postgres {
            let known = Command::new("id")
                .args(["-u", "postgres"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if !known {
                return Err(Error::NotInstalled(
                    "running as root but there is no `postgres` user".into(),
                ));
            }
        }
        Ok(Runner { bin, as_postgres })
    }

    /// A command for program `name` of the PostgreSQL installation.
    fn command(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    /// The directory of PostgreSQL's server programs.
    pub(crate) fn bin(&self) -> &Path {
        &self.bin
    }

    /// A command for `program` (any program, not only PostgreSQL's) that
    /// runs as the `postgres` user when the tests run as root: its uid
    /// and gid are set on the process itself, so the child's pid is the
    /// program's (no `runuser` in between) and signals reach it.
    pub(crate) fn command_as_postgres(&self, program: &Path) -> Result<Command, Error> {
        use std::os::unix::process::CommandExt as _;
        let mut c = Command::new(program);
        if self.as_postgres {
            let id = |flag: &str| -> Result<u32, Error> {
                let out = self.run("id", Command::new("id").args([flag, "postgres"]))?;
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .map_err(|_| Error::NotInstalled("no `postgres` user".into()))
            };
            c.uid(id("-u")?).gid(id("-g")?);
        }
        Ok(c)
    }

    pub(crate) fn run(&self, what: &str, command: &mut Command) -> Result<Output, Error> {
        let out = command.output().map_err(io(what.to_owned()))?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(Error::Command {
                what: what.to_owned(),
                detail: format!(
                    "{}: {}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            })
        }
    }

    /// Runs `sql` with `psql` on the server at loopback `port` (tuples
    /// only, unaligned) and returns stdout.
    pub(crate) fn psql(&self, port: u16, sql: &str) -> Result<String, Error> {
        let out = self.run(
            "psql",
            self.command("psql")
                .args(["-h", "127.0.0.1", "-p", &port.to_string()])
                .args(["-U", "postgres", "-d", "postgres", "-X", "-q", "-t", "-A"])
                .args(["-v", "ON_ERROR_STOP=1", "-c", sql]),
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Gives `path` to the `postgres` user (when running as root).
    pub(crate) fn own(&self, path: &Path) -> Result<(), Error> {
        if self.as_postgres {
            let out = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(path)
                .output()
                .map_err(io("chown"))?;
            if !out.status.success() {
                return Err(Error::Command {
                    what: format!("chown {}", path.display()),
                    detail: String::from_utf8_lossy(&out.stderr).into_owned(),
                });
            }
        }
        Ok(())
    }
}

/// Sends signal `name` (`KILL`, `STOP`, `CONT`) to every process of
/// `pids`, in order, with kill(1) (the crate forbids `unsafe`, so no
/// `libc::kill`).
///
/// # Errors
/// [`Error::Command`] if kill fails (a pid that is already gone).
pub(crate) fn signal(name: &str, pids: &[u32]) -> Result<(), Error> {
    if pids.is_empty() {
        return Ok(());
    }
    let mut kill = Command::new("kill");
    kill.arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string));
    let out = kill.output().map_err(io(format!("kill -{name}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            what: format!("kill -{name} {pids:?}"),
            detail: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Server settings every cluster gets: loopback only, real durability
/// (`fsync`, `synchronous_commit` on), replication allowed for standbys.
const BASE_SETTINGS: &[(&str, &str)] = &[
    ("listen_addresses", "'127.0.0.1'"),
    ("fsync", "on"),
    ("synchronous_commit", "on"),
    ("max_connections", "200"),
    ("wal_level", "replica"),
    ("max_wal_senders", "10"),
    ("hot_standby", "on"),
    ("shared_buffers", "'64MB'"),
    ("log_min_messages", "warning"),
];

/// One running (or stopped) throwaway cluster.
#[derive(Debug)]
pub struct Cluster {
    runner: Runner,
    root: tempfile::TempDir,
    port: u16,
    running: bool,
    name: String,
}

impl Cluster {
    /// A fresh primary cluster with the base settings (loopback only,
    /// `fsync` and `synchronous_commit` on, replication allowed), started and accepting
    /// connections.
    ///
    /// # Errors
    /// [`Error::NotInstalled`] without PostgreSQL; [`Error::Command`] if a
    /// program fails; [`Error::Timeout`] if it does not come up.
    pub fn start() -> Result<Cluster, Error> {
        Cluster::start_with(&[])
    }

    /// [`Cluster::start`] with extra `postgresql.conf` lines (`name`,
    /// `value` as written in the file, strings quoted).
    ///
    /// # Errors
    /// As [`Cluster::start`].
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Cluster, Error> {
        let runner = Runner::new()?;
        let root = tempfile::Builder::new()
            .prefix("rltp-pg-")
            .tempdir()
            .map_err(io("make the cluster directory"))?;
        runner.own(root.path())?;
        let data = root.path().join("data");
        runner.run(
            "initdb",
            runner.command("initdb").arg("-D").arg(&data).args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ]),
        )?;
        let mut cluster = Cluster {
            runner,
            root,
            port: free_port()?,
            running: false,
            name: "primary".into(),
        };
        let mut lines: Vec<(String, String)> = BASE_SETTINGS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        lines.extend(
            settings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        cluster.append_conf(&lines)?;
        // Local replication connections for standbys.
        let hba = data.join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba).map_err(io("read pg_hba.conf"))?;
        text.push_str("\nhost replication all 127.0.0.1/32 trust\n");
        std::fs::write(&hba, text).map_err(io("write pg_hba.conf"))?;
        cluster.start_server()?;
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    fn append_conf(&self, lines: &[(String, String)]) -> Result<(), Error> {
        let conf = self.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).map_err(io("read postgresql.conf"))?;
        text.push_str("\n# rltp-pgtest\n");
        text.push_str(&format!("port = {}\n", self.port));
        text.push_str(&format!(
            "unix_socket_directories = '{}'\n",
            self.root.path().display()
        ));
        for (k, v) in lines {
            text.push_str(&format!("{k} = {v}\n"));
        }
        std::fs::write(&conf, text).map_err(io("write postgresql.conf"))
    }

    fn start_server(&mut self) -> Result<(), Error> {
        let log = self.root.path().join(format!("{}.log", self.name));
        self.runner.run(
            "pg_ctl start",
            self.runner
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "start"]),
        )?;
        self.running = true;
        self.wait_ready(Duration::from_secs(60))
    }

    /// Waits until the server accepts connections.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub fn wait_ready(&self, within: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + within;
        loop {
            let ready = self
                .runner
                .command("pg_isready")
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!(
                    "the {} cluster on port {} did not accept connections within {within:?}: {}",
                    self.name,
                    self.port,
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the server log (for failure messages).
    pub fn log_tail(&self) -> String {
        let log = self.root.path().join(format!("{}.log", self.name));
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// libpq-style connection parameters for the `postgres` database.
    pub fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// A `postgresql://` URL for the `postgres` database.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs `sql` with `psql` (tuples only, unaligned) and returns stdout.
    ///
    /// # Errors
    /// [`Error::Command`] if psql fails.
    pub fn psql(&self, sql: &str) -> Result<String, Error> {
        self.runner.psql(self.port, sql)
    }

    /// Runs `pgbench` against `conninfo` (libpq parameters; host and port
    /// are this cluster's) with the custom `script` (written into the
    /// cluster's directory, where the `postgres` user reads it) and
    /// `args`; returns its standard output (the summary).
    ///
    /// # Errors
    /// [`Error::Io`] if the script cannot be written; [`Error::Command`]
    /// if pgbench fails.
    pub fn pgbench(&self, conninfo: &str, script: &str, args: &[&str]) -> Result<String, Error> {
        let path = self.root.path().join("pgbench-script.sql");
        std::fs::write(&path, script).map_err(io("write the pgbench script"))?;
        self.runner.own(&path)?;
        let out = self.runner.run(
            "pgbench",
            self.runner
                .command("pgbench")
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", "postgres", "-n", "-f"])
                .arg(&path)
                .args(args)
                .arg(conninfo),
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Sets `name = value` in `postgresql.conf` and reloads.
    ///
    /// # Errors
    /// As [`Cluster::psql`].
    pub fn set(&self, name: &str, value: &str) -> Result<(), Error> {
        self.append_conf(&[(name.to_owned(), value.to_owned())])?;
        self.psql("SELECT pg_reload_conf()").map(drop)
    }

    /// The postmaster's process id.
    ///
    /// # Errors
    /// [`Error::Io`] if `postmaster.pid` cannot be read.
    pub fn pid(&self) -> Result<u32, Error> {
        let text = std::fs::read_to_string(self.data().join("postmaster.pid"))
            .map_err(io("read postmaster.pid"))?;
        text.lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| Error::Io {
                what: "parse postmaster.pid".into(),
                source: std::io::Error::other(text.clone()),
            })
    }

    /// SIGKILL the postmaster (a crash: no shutdown checkpoint), then
    /// `pg_ctl stop -m immediate` for its children.
    ///
    /// # Errors
    /// [`Error::Command`] if the kill fails.
    pub fn kill(&mut self) -> Result<(), Error> {
        if !self.running {
            return Ok(());
        }
        let pid = self.pid()?;
        signal("KILL", &[pid])?;
        // The backends notice their postmaster is gone; stop the rest.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self
            .runner
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "stop"])
            .output();
        self.running = false;
        Ok(())
    }

    /// Stops the server (`-m fast`).
    ///
    /// # Errors
    /// [`Error::Command`].
    pub fn stop(&mut self) -> Result<(), Error> {
        if !self.running {
            return Ok(());
        }
        self.runner.run(
            "pg_ctl stop",
            self.runner
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-m", "fast", "-w", "stop"]),
        )?;
        self.running = false;
        Ok(())
    }

    /// Starts a stopped (or crashed) cluster again on the same port.
    ///
    /// # Errors
    /// As [`Cluster::start`].
    pub fn restart(&mut self) -> Result<(), Error> {
        if self.running {
            self.stop()?;
        }
        self.start_server()
    }

    /// A streaming standby of this cluster, named `name` (its
    /// `application_name`, for `synchronous_standby_names`):
    /// `pg_basebackup -R` into a fresh directory, started on its own port.
    ///
    /// # Errors
    /// As [`Cluster::start`].
    pub fn standby(&self, name: &str) -> Result<Cluster, Error> {
        let root = tempfile::Builder::new()
            .prefix("rltp-pg-standby-")
            .tempdir()
            .map_err(io("make the standby directory"))?;
        self.runner.own(root.path())?;
        let data = root.path().join("data");
        let conninfo = format!(
            "host=127.0.0.1 port={} user=postgres application_name={name}",
            self.port
        );
        self.runner.run(
            "pg_basebackup",
            self.runner
                .command("pg_basebackup")
                .arg("-D")
                .arg(&data)
                .args(["-d", &conninfo, "-R", "-X", "stream", "-c", "fast"]),
        )?;
        let mut standby = Cluster {
            runner: self.runner.clone(),
            root,
            port: free_port()?,
            running: false,
            name: name.to_owned(),
        };
        standby.append_conf(&[])?;
        standby.start_server()?;
        Ok(standby)
    }

    /// Promotes a standby to primary and waits until it accepts writes.
    ///
    /// # Errors
    /// [`Error::Command`], [`Error::Timeout`].
    pub fn promote(&self) -> Result<(), Error> {
        self.runner.run(
            "pg_ctl promote",
            self.runner
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-w", "promote"]),
        )?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.psql("SELECT pg_is_in_recovery()")? == "f" {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!(
                    "{} did not leave recovery",
                    self.name
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.running {
            let _ = self
                .runner
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-m", "immediate", "stop"])
                .output();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster starts, answers, survives a crash and a restart, and a
    /// standby follows it and can be promoted.
    #[test]
    fn a_cluster_starts_crashes_restarts_and_has_a_standby() {
        let mut primary = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(primary.psql("SELECT 1").unwrap(), "1");
        primary
            .psql("CREATE TABLE t (n int); INSERT INTO t VALUES (7)")
            .unwrap();
        primary.kill().unwrap();
        primary.restart().unwrap();
        assert_eq!(primary.psql("SELECT n FROM t").unwrap(), "7");
        let standby = primary.standby("s1").unwrap();
        primary.psql("INSERT INTO t VALUES (8)").unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while standby.psql("SELECT count(*) FROM t").unwrap() != "2" {
            assert!(Instant::now() < deadline, "the standby did not follow");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(standby.psql("SELECT pg_is_in_recovery()").unwrap(), "t");
        primary.kill().unwrap();
        standby.promote().unwrap();
        standby.psql("INSERT INTO t VALUES (9)").unwrap();
        assert_eq!(standby.psql("SELECT sum(n) FROM t").unwrap(), "24");
    }
}
