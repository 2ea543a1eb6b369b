//! A PostgreSQL primary and synchronous standby under Patroni, for the
//! failover tests (issue 23 item 5; `deploy/OPERATIONS.md` §12 describes
//! the production layout this models).
//!
//! [`Patroni::start`] starts, in one fresh temporary directory, on free
//! loopback ports:
//! - a single-member etcd (Debian's `etcd-server` 3.4, with its v2 API on:
//!   Patroni's `etcd` section, not `etcd3` — see below);
//! - two Patroni members (Debian's `patroni` 3.0.2), `m1` and `m2`, each
//!   with its own data directory, PostgreSQL port and REST API port, both
//!   run as the `postgres` user when the tests run as root (as
//!   [`crate::Cluster`] runs PostgreSQL), with `synchronous_mode: true`
//!   and short timings ([`TTL`], [`LOOP_WAIT`], [`RETRY_TIMEOUT`]) so that
//!   a failover completes in seconds;
//!
//! and waits until `m1` leads and `m2` streams as its synchronous
//! standby. Nodes reach it with [`Patroni::conninfo`], the
//! multi-host string with `target_session_attrs=read-write`.
//!
//! What the faults model:
//! - [`Patroni::kill_leader`] is a dead primary host: SIGKILL of the
//!   leader's Patroni and of every PostgreSQL process of its data
//!   directory at once, so nothing of that host acts again (a SIGKILL of
//!   the postmaster alone would be a crash Patroni repairs by restarting it
//!   as primary within the ttl: no failover; a SIGKILL of Patroni alone
//!   would leave a primary running without its manager). The kernel stays
//!   up, so clients see their connections reset at once, not silence; the
//!   silent host is the next fault. etcd is not touched: in production it
//!   runs on three hosts and keeps its quorum when one dies.
//! - [`Patroni::stop_leader`] / [`Patroni::cont_leader`] is a frozen or
//!   partitioned primary host: SIGSTOP of the same processes (clients'
//!   connections stay open and go silent), then SIGCONT. Patroni 3.0.2, on
//!   waking, finds the leader key held by the other member and demotes its
//!   PostgreSQL (immediate shutdown), then starts it as a replica of the
//!   new leader (`pg_rewind` if its timeline diverged).
//!
//! Why etcd's v2 API: Patroni 3.0.2's `etcd3` section renews the leader key
//! with an unconditional put when its lease has expired, so a leader that
//! wakes from a freeze overwrites the key its successor took, the
//! successor demotes and is rewound, and what it committed — and the
//! carrier acknowledged — is gone. This harness caught it (the SIGSTOP
//! torture, `tests/torture/failover.rs`); upstream fixed it in Patroni
//! 3.0.3 (patroni/patroni#2689, #2693). The `etcd` (v2) section renews
//! with a compare-and-swap on its own name and demotes when that fails.
//!
//! Dropping the harness SIGKILLs every process it started (Patroni first,
//! so nothing restarts PostgreSQL behind it), waits until none is left
//! ([`ProcessMarks::alive`] finds strays), and removes the directory.
//!
//! A missing program is [`Error::Missing`], naming the Debian package;
//! callers fail the test with it.

use crate::{Error, Runner, free_port, io, signal};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Patroni's `ttl`: the leader key's lease. A leader that cannot renew it
/// for this long loses it, and the standby takes over.
pub const TTL: Duration = Duration::from_secs(6);
/// Patroni's `loop_wait`: the pause between two runs of its HA loop.
pub const LOOP_WAIT: Duration = Duration::from_secs(1);
/// Patroni's `retry_timeout`: how long it retries the DCS and PostgreSQL
/// before it gives up (`loop_wait + 2 × retry_timeout ≤ ttl`, as Patroni
/// asks).
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(2);

/// How long [`Patroni::start`] waits for a leader and a streaming
/// synchronous standby (two `initdb`s and a base backup on a loaded
/// machine).
const START_WITHIN: Duration = Duration::from_secs(120);

/// The two member names (also their `application_name`s, so the names
/// Patroni writes into `synchronous_standby_names`).
const MEMBERS: [&str; 2] = ["m1", "m2"];

/// What a member's REST API says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It holds the leader key (`GET /leader` is 200).
    Leader,
    /// A running replica named in the leader's synchronous standby names
    /// (`GET /sync` is 200).
    SyncStandby,
    /// A running replica, not synchronous (`GET /replica` is 200).
    Replica,
    /// None of these: starting, demoting, stopped, or not answering.
    Other,
}

/// What finds the processes of one harness: its directory (in the
/// command lines of etcd, Patroni and every postmaster) and its scope (the
/// `cluster_name` in every PostgreSQL child's process title).
#[derive(Debug, Clone)]
pub struct ProcessMarks {
    root: PathBuf,
    scope: String,
}

impl ProcessMarks {
    /// The live (not zombie) processes that belong to the harness.
    pub fn alive(&self) -> Vec<u32> {
        let root = self.root.display().to_string();
        let title = format!("postgres: {}: ", self.scope);
        processes()
            .into_iter()
            .filter(|p| p.cmdline.contains(&root) || p.cmdline.starts_with(&title))
            .map(|p| p.pid)
            .collect()
    }
}

/// One process as `/proc` shows it.
struct Process {
    pid: u32,
    ppid: u32,
    cmdline: String,
}

/// Every live process (zombies left out: they hold nothing and run
/// nothing; this machine's init does not reap orphans).
fn processes() -> Vec<Process> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) S ppid …": comm may hold spaces and parentheses.
            let mut rest = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
            let state = rest.next()?;
            let ppid = rest.next()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (state != "Z" && state != "X").then_some(Process { pid, ppid, cmdline })
        })
        .collect()
}

/// The live children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.ppid == pid)
        .map(|p| p.pid)
        .collect()
}

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    processes().iter().any(|p| p.pid == pid)
}

/// `program` on PATH (`path`), or [`Error::Missing`] naming `package`.
fn find_program(program: &str, package: &str, path: &std::ffi::OsStr) -> Result<PathBuf, Error> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::Missing {
            program: program.to_owned(),
            package: package.to_owned(),
        })
}

/// The status code of `GET path` on loopback `port` (HTTP/1.0, one
/// second to connect and one to answer: a stopped member answers
/// nothing), `None` without an answer.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    // "HTTP/1.0 200"
    std::str::from_utf8(head.get(9..12)?).ok()?.parse().ok()
}

/// One Patroni member.
#[derive(Debug)]
struct Member {
    name: &'static str,
    pg_port: u16,
    rest_port: u16,
    /// Patroni itself (spawned directly, so this is its pid).
    patroni: Option<Child>,
}

/// A Patroni-managed primary and synchronous standby over one etcd (see
/// the module documentation).
#[derive(Debug)]
pub struct Patroni {
    runner: Runner,
    root: tempfile::TempDir,
    scope: String,
    etcd: Option<Child>,
    members: Vec<Member>,
    /// The member [`Patroni::stop_leader`] froze and its stopped pids.
    stopped: Option<(usize, Vec<u32>)>,
}

impl Patroni {
    /// Starts etcd and two Patroni members and waits until `m1` leads with
    /// `m2` streaming as its synchronous standby.
    ///
    /// # Errors
    /// [`Error::Missing`] without `patroni` or `etcd`;
    /// [`Error::NotInstalled`] without PostgreSQL; [`Error::Timeout`] if no
    /// leader with a synchronous standby comes up in time.
    pub fn start() -> Result<Patroni, Error> {
        let search = std::env::var_os("PATH").unwrap_or_default();
        let patroni = find_program("patroni", "patroni", &search)?;
        let etcd = find_program("etcd", "etcd-server", &search)?;
        let runner = Runner::new()?;
        let root = tempfile::Builder::new()
            .prefix("rltp-patroni-")
            .tempdir()
            .map_err(io("make the Patroni directory"))?;
        runner.own(root.path())?;
        let scope = root
            .path()
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .replace(|c: char| !c.is_ascii_alphanumeric(), "")
            })
            .unwrap_or_default();
        let mut harness = Patroni {
            runner,
            root,
            scope,
            etcd: None,
            members: Vec::new(),
            stopped: None,
        };
        let etcd_port = harness.start_etcd(&etcd)?;
        for name in MEMBERS {
            let member = Member {
                name,
                pg_port: free_port()?,
                rest_port: free_port()?,
                patroni: None,
            };
            harness.members.push(member);
        }
        // m1 first, and m2 once m1 leads: the first host of
        // [`Patroni::conninfo`] is then always the one a fault hits, the
        // harder case for a client (it must get past it to the second).
        harness.start_member(0, &patroni, etcd_port)?;
        harness.wait_for_role(0, Role::Leader, START_WITHIN)?;
        harness.start_member(1, &patroni, etcd_port)?;
        harness.wait_ready(START_WITHIN)?;
        Ok(harness)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// Log file `name.log`, for a child's standard output and error.
    fn log_file(&self, name: &str) -> Result<(Stdio, Stdio), Error> {
        let what = format!("create {name}.log");
        let file =
            std::fs::File::create(self.path(&format!("{name}.log"))).map_err(io(what.clone()))?;
        let copy = file.try_clone().map_err(io(what))?;
        Ok((Stdio::from(file), Stdio::from(copy)))
    }

    /// Starts etcd (single member, loopback) and waits for `/health`;
    /// returns its client port.
    fn start_etcd(&mut self, etcd: &Path) -> Result<u16, Error> {
        let (client, peer) = (free_port()?, free_port()?);
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let (stdout, stderr) = self.log_file("etcd")?;
        let mut command = self.runner.command_as_postgres(etcd)?;
        command
            .args(["--name", "e1", "--data-dir"])
            .arg(self.path("etcd"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("e1={peer_url}")])
            .args(["--log-level", "warn", "--enable-v2=true"])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        // etcd 3.4 refuses to start on an architecture it does not
        // support unless told to (amd64 and arm64 are supported).
        if !matches!(std::env::consts::ARCH, "x86_64" | "aarch64")
            && let Ok(out) = std::process::Command::new("dpkg")
                .arg("--print-architecture")
                .output()
        {
            command.env(
                "ETCD_UNSUPPORTED_ARCH",
                String::from_utf8_lossy(&out.stdout).trim(),
            );
        }
        self.etcd = Some(command.spawn().map_err(io("start etcd"))?);
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_status(client, "/health") != Some(200) {
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!(
                    "etcd did not answer /health on port {client} within 30 s: {}",
                    self.log_tail("etcd")
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(client)
    }

    /// Patroni's configuration for member `i`.
    fn member_config(&self, i: usize, etcd_port: u16) -> String {
        let m = &self.members[i];
        let dir = self.path(m.name);
        let ttl = TTL.as_secs();
        let loop_wait = LOOP_WAIT.as_secs();
        let retry = RETRY_TIMEOUT.as_secs();
        format!(
            "scope: {scope}
name: {name}
namespace: /rltp/
restapi:
  listen: 127.0.0.1:{rest}
  connect_address: 127.0.0.1:{rest}
etcd:
  hosts: 127.0.0.1:{etcd_port}
bootstrap:
  dcs:
    ttl: {ttl}
    loop_wait: {loop_wait}
    retry_timeout: {retry}
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        fsync: 'on'
        full_page_writes: 'on'
        synchronous_commit: 'on'
        max_connections: 200
        shared_buffers: 64MB
        wal_log_hints: 'on'
        log_min_messages: warning
  initdb:
    - encoding: UTF8
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg}
  connect_address: 127.0.0.1:{pg}
  data_dir: {data}
  bin_dir: {bin}
  pgpass: {dir}/pgpass
  authentication:
    superuser: {{username: postgres}}
    replication: {{username: postgres}}
    rewind: {{username: postgres}}
  parameters:
    unix_socket_directories: '{dir}'
",
            scope = self.scope,
            name = m.name,
            rest = m.rest_port,
            pg = m.pg_port,
            data = dir.join("data").display(),
            bin = self.runner.bin().display(),
            dir = dir.display(),
        )
    }

    /// Writes member `i`'s configuration and starts its Patroni.
    fn start_member(&mut self, i: usize, patroni: &Path, etcd_port: u16) -> Result<(), Error> {
        let name = self.members[i].name;
        let dir = self.path(name);
        std::fs::create_dir_all(&dir).map_err(io(format!("make {}", dir.display())))?;
        let config = self.path(&format!("{name}.yml"));
        std::fs::write(&config, self.member_config(i, etcd_port))
            .map_err(io(format!("write {name}.yml")))?;
        self.runner.own(&dir)?;
        self.runner.own(&config)?;
        let (stdout, stderr) = self.log_file(name)?;
        let child = self
            .runner
            .command_as_postgres(patroni)?
            .arg(&config)
            .env("HOME", self.root.path())
            .current_dir(self.root.path())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(io(format!("start patroni {name}")))?;
        self.members[i].patroni = Some(child);
        Ok(())
    }

    /// Waits until a member leads, accepts writes, and has a streaming
    /// synchronous standby (the other member, which Patroni's REST API
    /// calls `sync_standby`); returns the leader.
    ///
    /// # Errors
    /// [`Error::Timeout`] naming what was last seen.
    pub fn wait_ready(&self, within: Duration) -> Result<usize, Error> {
        let deadline = Instant::now() + within;
        loop {
            let seen = match self.leader() {
                Some(i) => match self.psql(
                    i,
                    "SELECT pg_is_in_recovery()::text || ' ' || \
                     (SELECT count(*) FROM pg_stat_replication \
                      WHERE sync_state = 'sync' AND state = 'streaming')",
                ) {
                    // Patroni names the standby in its DCS a moment
                    // after PostgreSQL reports it synchronous.
                    Ok(s) if s == "false 1" && self.role(1 - i) == Role::SyncStandby => {
                        return Ok(i);
                    }
                    Ok(s) => format!("leader {} says {s}", self.members[i].name),
                    Err(e) => format!("leader {}: {e}", self.members[i].name),
                },
                None => "no leader".to_owned(),
            };
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!(
                    "no leader with a streaming synchronous standby within {within:?} ({seen}); \
                     cluster {}; m1: {}; m2: {}",
                    self.cluster_json(),
                    self.log_tail("m1"),
                    self.log_tail("m2")
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The multi-host connection string a carrier node is given: both
    /// members, `target_session_attrs=read-write` (libpq and
    /// tokio-postgres try the hosts in order and keep the one that accepts
    /// writes).
    pub fn conninfo(&self) -> String {
        let ports: Vec<String> = self.members.iter().map(|m| m.pg_port.to_string()).collect();
        format!(
            "host=127.0.0.1,127.0.0.1 port={} user=postgres dbname=postgres \
             target_session_attrs=read-write",
            ports.join(",")
        )
    }

    /// Member `i`'s name (`m1`, `m2`).
    pub fn name(&self, i: usize) -> &'static str {
        self.members[i].name
    }

    /// Member `i`'s PostgreSQL port.
    pub fn pg_port(&self, i: usize) -> u16 {
        self.members[i].pg_port
    }

    /// What member `i`'s REST API says it is.
    pub fn role(&self, i: usize) -> Role {
        let port = self.members[i].rest_port;
        for (path, role) in [
            ("/leader", Role::Leader),
            ("/sync", Role::SyncStandby),
            ("/replica", Role::Replica),
        ] {
            if http_status(port, path) == Some(200) {
                return role;
            }
        }
        Role::Other
    }

    /// The member whose REST API says it holds the leader key, if one
    /// does (a stopped member answers nothing, so it is never named).
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len())
            .find(|&i| http_status(self.members[i].rest_port, "/leader") == Some(200))
    }

    /// Runs `sql` with `psql` on member `i`'s PostgreSQL.
    ///
    /// # Errors
    /// [`Error::Command`] if psql fails.
    pub fn psql(&self, i: usize, sql: &str) -> Result<String, Error> {
        self.runner.psql(self.members[i].pg_port, sql)
    }

    /// The leader, or [`Error::Timeout`] naming the cluster's state.
    fn current_leader(&self) -> Result<usize, Error> {
        self.leader().ok_or_else(|| {
            Error::Timeout(format!("no member leads: cluster {}", self.cluster_json()))
        })
    }

    /// Member `i`'s Patroni and every PostgreSQL process of its data
    /// directory (the postmaster first), the postmaster SIGSTOPped first so
    /// that it forks nothing the list misses. The caller signals them.
    fn host_processes(&mut self, i: usize) -> Result<Vec<u32>, Error> {
        let mut pids = Vec::new();
        if let Some(patroni) = &self.members[i].patroni {
            pids.push(patroni.id());
        }
        let pidfile = self.path(self.members[i].name).join("data/postmaster.pid");
        let postmaster = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.lines().next()?.trim().parse::<u32>().ok())
            .filter(|&pid| alive(pid));
        if let Some(pid) = postmaster {
            signal("STOP", &[pid])?;
            pids.push(pid);
            pids.extend(children(pid));
        }
        Ok(pids)
    }

    /// A dead primary host (see the module documentation): SIGKILLs the
    /// leader's Patroni and all its PostgreSQL processes, waits until they
    /// are gone, and returns the member that led. Nothing restarts them.
    ///
    /// # Errors
    /// [`Error::Timeout`] if no member leads or the processes survive;
    /// [`Error::Command`] if kill fails.
    pub fn kill_leader(&mut self) -> Result<usize, Error> {
        let i = self.current_leader()?;
        if let Some(patroni) = self.members[i].patroni.as_mut() {
            let _ = patroni.kill();
            let _ = patroni.wait();
        }
        self.members[i].patroni = None;
        let pids = self.host_processes(i)?;
        signal("KILL", &pids)?;
        wait_gone(&pids, Duration::from_secs(10))?;
        Ok(i)
    }

    /// A frozen primary host (see the module documentation): SIGSTOPs the
    /// leader's Patroni and all its PostgreSQL processes and returns the
    /// member that led; [`Patroni::cont_leader`] wakes them.
    ///
    /// # Errors
    /// [`Error::Timeout`] if no member leads; [`Error::Command`] if kill
    /// fails.
    pub fn stop_leader(&mut self) -> Result<usize, Error> {
        let i = self.current_leader()?;
        if let Some(patroni) = &self.members[i].patroni {
            // Patroni first: it must not see its PostgreSQL stop.
            signal("STOP", &[patroni.id()])?;
        }
        let pids = self.host_processes(i)?;
        signal("STOP", &pids)?;
        self.stopped = Some((i, pids));
        Ok(i)
    }

    /// SIGCONTs what [`Patroni::stop_leader`] stopped (PostgreSQL's
    /// processes, then Patroni) and returns that member.
    ///
    /// # Errors
    /// [`Error::Timeout`] if nothing is stopped; [`Error::Command`] if
    /// kill fails.
    pub fn cont_leader(&mut self) -> Result<usize, Error> {
        let (i, mut pids) = self
            .stopped
            .take()
            .ok_or_else(|| Error::Timeout("no member was stopped".into()))?;
        pids.reverse();
        pids.retain(|&pid| alive(pid));
        signal("CONT", &pids)?;
        Ok(i)
    }

    /// Waits until a member other than `old` holds the leader key and its
    /// PostgreSQL accepts writes (out of recovery); returns it and how
    /// long that took. The test does nothing else: Patroni promotes.
    ///
    /// # Errors
    /// [`Error::Timeout`] naming the cluster's state.
    pub fn wait_for_new_leader(
        &self,
        old: usize,
        within: Duration,
    ) -> Result<(usize, Duration), Error> {
        let start = Instant::now();
        loop {
            let promoted = (0..self.members.len()).filter(|&i| i != old).find(|&i| {
                self.role(i) == Role::Leader
                    && self.psql(i, "SELECT pg_is_in_recovery()").ok().as_deref() == Some("f")
            });
            if let Some(i) = promoted {
                return Ok((i, start.elapsed()));
            }
            if start.elapsed() > within {
                return Err(Error::Timeout(format!(
                    "no new leader within {within:?}: cluster {}; m1: {}; m2: {}",
                    self.cluster_json(),
                    self.log_tail("m1"),
                    self.log_tail("m2")
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until member `i` has role `role`; returns how long it took.
    ///
    /// # Errors
    /// [`Error::Timeout`] naming the role last seen.
    pub fn wait_for_role(&self, i: usize, role: Role, within: Duration) -> Result<Duration, Error> {
        let start = Instant::now();
        loop {
            let seen = self.role(i);
            if seen == role {
                return Ok(start.elapsed());
            }
            if start.elapsed() > within {
                return Err(Error::Timeout(format!(
                    "{} is {seen:?}, not {role:?}, after {within:?}: cluster {}; log: {}",
                    self.members[i].name,
                    self.cluster_json(),
                    self.log_tail(self.members[i].name)
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Patroni's `GET /cluster` from the first member that answers (for
    /// failure messages), or a note that none did.
    pub fn cluster_json(&self) -> String {
        for m in &self.members {
            let addr = SocketAddr::from(([127, 0, 0, 1], m.rest_port));
            let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
                continue;
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
            let mut text = String::new();
            if stream
                .write_all(b"GET /cluster HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                .is_ok()
                && stream.read_to_string(&mut text).is_ok()
                && let Some((_, body)) = text.split_once("\r\n\r\n")
            {
                return body.to_owned();
            }
        }
        "(no member answered GET /cluster)".to_owned()
    }

    /// The last lines of log `name` (`m1`, `m2`: Patroni's and its
    /// PostgreSQL's output; `etcd`).
    pub fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// What finds this harness's processes, to check after it is dropped
    /// that none is left.
    pub fn process_marks(&self) -> ProcessMarks {
        ProcessMarks {
            root: self.root.path().to_owned(),
            scope: self.scope.clone(),
        }
    }
}

/// Waits until none of `pids` is alive.
fn wait_gone(pids: &[u32], within: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + within;
    while pids.iter().any(|&pid| alive(pid)) {
        if Instant::now() > deadline {
            return Err(Error::Timeout(format!(
                "{pids:?} still alive after SIGKILL"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

impl Drop for Patroni {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Keep the logs of a failed test (the directory goes).
            let keep = std::env::temp_dir().join(format!("{}-logs", self.scope));
            if std::fs::create_dir_all(&keep).is_ok() {
                for name in ["m1", "m2", "etcd"] {
                    let log = format!("{name}.log");
                    let _ = std::fs::copy(self.path(&log), keep.join(&log));
                }
                eprintln!("Patroni harness logs kept in {}", keep.display());
            }
        }
        // Patroni first, so that nothing starts PostgreSQL again; then
        // every process the marks find (postmasters, their children,
        // pg_rewind or pg_basebackup a Patroni started), until none is left.
        for m in &mut self.members {
            if let Some(mut patroni) = m.patroni.take() {
                let _ = patroni.kill();
                let _ = patroni.wait();
            }
        }
        if let Some(mut etcd) = self.etcd.take() {
            let _ = etcd.kill();
            let _ = etcd.wait();
        }
        let marks = self.process_marks();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let strays = marks.alive();
            if strays.is_empty() || Instant::now() > deadline {
                break;
            }
            let _ = signal("KILL", &strays);
            let _ = wait_gone(&strays, Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing program names its Debian package.
    #[test]
    fn a_missing_program_names_its_debian_package() {
        let empty = tempfile::tempdir().unwrap();
        let err = find_program("patroni", "patroni", empty.path().as_os_str()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`patroni` is not on PATH: install Debian's `patroni` package (./test.sh does)"
        );
        let err = find_program("etcd", "etcd-server", empty.path().as_os_str()).unwrap_err();
        assert!(err.to_string().contains("`etcd-server`"), "{err}");
    }

    /// Drops `patroni` and checks that none of its processes is left.
    fn drop_and_check(patroni: Patroni) {
        let marks = patroni.process_marks();
        // etcd, a Patroni, a postmaster and its children at least.
        assert!(
            marks.alive().len() >= 5,
            "the marks see the harness: {:?}",
            marks.alive()
        );
        drop(patroni);
        assert_eq!(marks.alive(), Vec::<u32>::new(), "stray processes");
    }

    /// The leader dies with its host: Patroni promotes the synchronous
    /// standby without help, the committed row is there, the new leader
    /// takes writes through the multi-host string, and nothing is left
    /// after the drop.
    #[test]
    fn a_dead_leader_is_replaced_by_its_synchronous_standby() {
        let mut pair = Patroni::start().unwrap_or_else(|e| panic!("{e}"));
        let first = pair.leader().unwrap();
        assert_eq!(first, 0, "m1 leads after the start");
        assert_eq!(pair.role(1 - first), Role::SyncStandby);
        let (psql, conninfo) = (crate::bin_dir().unwrap().join("psql"), pair.conninfo());
        let via_string = |sql: &str| -> String {
            let out = std::process::Command::new(&psql)
                .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
                .args(["-d", &conninfo, "-c", sql])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        via_string("CREATE TABLE t (n int); INSERT INTO t VALUES (7)");
        let killed = pair.kill_leader().unwrap();
        assert_eq!(killed, first);
        let (second, took) = pair
            .wait_for_new_leader(first, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(second, 1 - first);
        assert!(
            took < TTL + Duration::from_secs(20),
            "failover took {took:?}"
        );
        assert_eq!(pair.role(first), Role::Other);
        via_string("INSERT INTO t VALUES (8)");
        assert_eq!(pair.psql(second, "SELECT sum(n) FROM t").unwrap(), "15");
        drop_and_check(pair);
    }

    /// The leader's host freezes: the standby is promoted while it is
    /// stopped; once woken, Patroni demotes the old leader, which comes
    /// back as the new leader's synchronous standby with its rows.
    #[test]
    fn a_frozen_leader_is_replaced_and_comes_back_as_a_standby() {
        let mut pair = Patroni::start().unwrap_or_else(|e| panic!("{e}"));
        let first = pair.leader().unwrap();
        assert_eq!(first, 0, "m1 leads after the start");
        pair.psql(first, "CREATE TABLE t (n int); INSERT INTO t VALUES (7)")
            .unwrap();
        assert_eq!(pair.stop_leader().unwrap(), first);
        let (second, took) = pair
            .wait_for_new_leader(first, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        println!("frozen leader: replaced after {took:?}");
        pair.psql(second, "INSERT INTO t VALUES (8)").unwrap();
        assert_eq!(pair.cont_leader().unwrap(), first);
        pair.wait_for_role(first, Role::SyncStandby, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pair.wait_ready(Duration::from_secs(30)).unwrap(), second);
        assert_eq!(pair.psql(first, "SELECT pg_is_in_recovery()").unwrap(), "t");
        let deadline = Instant::now() + Duration::from_secs(30);
        while pair.psql(first, "SELECT sum(n) FROM t").unwrap() != "15" {
            assert!(Instant::now() < deadline, "the old leader did not follow");
            std::thread::sleep(Duration::from_millis(50));
        }
        drop_and_check(pair);
    }
}
