//! The control socket of a running carrier, `<data-dir>/control.sock`
//! (protocol and access rules: [`crate::admin`]). It performs the two
//! things another process cannot do while the carrier holds the store
//! open: stream a consistent online backup, and read the counts.
//!
//! A backup runs on the blocking pool over one consistent copy of the
//! store ([`rltp_storage::log_store::LogStore::backup_source`]): the
//! group-commit writer goes on committing meanwhile, so admission never
//! waits for it.
//! Shutdown stops accepting requests and waits for a backup in progress.

use crate::admin::{self, Request, counts::Counts};
use crate::driver::Driver;
use rltp_storage::Store as _;
use rltp_storage::log_store::LogStore;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio::io::AsyncReadExt as _;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::defaults::control::{MAX_REQUEST, REQUEST_TIMEOUT};

/// Binds `<data_dir>/control.sock` (mode 0600). A stale socket file left by
/// a crash is replaced; if another process answers on it, or the path
/// cannot be bound (e.g. longer than the 107 bytes a socket path may have),
/// the carrier runs without one and says so.
pub(super) fn bind(data_dir: &Path) -> Option<UnixListener> {
    let path = admin::socket_path(data_dir);
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            tracing::warn!(
                socket = %path.display(),
                "another process answers on the control socket; running without one"
            );
            return None;
        }
        let _ = std::fs::remove_file(&path);
    }
    match UnixListener::bind(&path) {
        Ok(listener) => {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
            tracing::info!(socket = %path.display(), "control socket listening (backup, stats, lame-duck)");
            Some(listener)
        }
        Err(error) => {
            tracing::warn!(
                socket = %path.display(),
                %error,
                "control socket unavailable: online backup and stats are off"
            );
            None
        }
    }
}

/// Serves the control socket until `stop` is signalled, then removes the
/// socket file and waits for requests in progress.
/// What the control socket asks of the carrier besides its store: enter
/// lame-duck mode (`true` if it was not in it yet).
pub(super) type LameDuck = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

pub(super) async fn serve(
    listener: UnixListener,
    engine: Driver<LogStore>,
    data_dir: PathBuf,
    lame_duck: LameDuck,
    mut stop: watch::Receiver<bool>,
) {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(&data_dir).map(|m| m.uid()).ok();
    let mut handlers = JoinSet::new();
    loop {
        tokio::select! {
            _ = super::until_shutdown(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let uid = stream.peer_cred().map(|c| c.uid()).ok();
                    if uid.is_none() || (uid != owner && uid != Some(0)) {
                        tracing::warn!(?uid, "control request from a foreign user refused");
                        continue;
                    }
                    handlers.spawn(handle(stream, engine.clone(), data_dir.clone(), std::sync::Arc::clone(&lame_duck)));
                }
                Err(error) => tracing::warn!(%error, "control socket accept failed"),
            },
            Some(_) = handlers.join_next(), if !handlers.is_empty() => {}
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(admin::socket_path(&data_dir));
    while handlers.join_next().await.is_some() {}
}

async fn read_request(stream: &mut UnixStream) -> Option<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte).await {
            Ok(1) if byte[0] == b'\n' => return String::from_utf8(line).ok(),
            Ok(1) if line.len() < MAX_REQUEST => line.push(byte[0]),
            _ => return None,
        }
    }
}

async fn handle(
    mut stream: UnixStream,
    engine: Driver<LogStore>,
    data_dir: PathBuf,
    lame_duck: LameDuck,
) {
    let line = tokio::time::timeout(REQUEST_TIMEOUT, read_request(&mut stream))
        .await
        .ok()
        .flatten();
    let Ok(std_stream) = stream.into_std() else {
        return;
    };
    if std_stream.set_nonblocking(false).is_err() {
        return;
    }
    let request = line.as_deref().and_then(Request::parse);
    let done = tokio::task::spawn_blocking(move || {
        let mut out = BufWriter::new(&std_stream);
        let result = match request {
            None => writeln!(out, "error unknown request {:?}", line.unwrap_or_default())
                .map_err(|e| e.to_string()),
            Some(Request::Stats) => stats(&engine, &mut out),
            Some(Request::Store) => store(&engine, &mut out),
            Some(Request::Backup) => backup(&engine, &data_dir, &mut out),
            Some(Request::LameDuck) => {
                let entered = lame_duck();
                writeln!(
                    out,
                    "ok\nlame-duck {}",
                    if entered { "entered" } else { "already" }
                )
                .map_err(|e| e.to_string())
            }
        };
        let _ = out.flush();
        result
    })
    .await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "control request failed"),
        Err(error) => tracing::error!(%error, "control request task failed"),
    }
}

fn stats(engine: &Driver<LogStore>, out: &mut impl Write) -> Result<(), String> {
    let counts = engine
        .store()
        .read()
        .and_then(|read| Counts::read(&read, engine.now()));
    match counts {
        Ok(counts) => write!(out, "ok\n{}", counts.to_lines()).map_err(|e| e.to_string()),
        Err(error) => {
            let _ = writeln!(out, "error {error}");
            Err(error.to_string())
        }
    }
}

fn store(engine: &Driver<LogStore>, out: &mut impl Write) -> Result<(), String> {
    match engine.store().size() {
        Ok(size) => write!(out, "ok\n{}", Counts::size_lines(&size, engine.now()))
            .map_err(|e| e.to_string()),
        Err(error) => {
            let _ = writeln!(out, "error {error}");
            Err(error.to_string())
        }
    }
}

fn backup(engine: &Driver<LogStore>, data_dir: &Path, out: &mut impl Write) -> Result<(), String> {
    let extra = match admin::backup::extra_files(data_dir) {
        Ok(extra) => extra,
        Err(error) => {
            let _ = writeln!(out, "error {error}");
            return Err(error.to_string());
        }
    };
    writeln!(out, "ok").map_err(|e| e.to_string())?;
    let started = Instant::now();
    let clock = || engine.now();
    // After `ok`, a failure can only cut the stream short: the client's
    // completeness check (no end record) reports it.
    let summary = admin::backup::write_archive(engine.store(), &extra, &clock, out)
        .map_err(|e| e.to_string())?;
    tracing::info!(
        taken_at = summary.manifest.taken_at,
        deposits = summary.manifest.occupancy.deposits,
        bytes = summary.archive_bytes,
        took_ms = started.elapsed().as_millis() as u64,
        "online backup streamed"
    );
    Ok(())
}
