//! The data directory's layout, in one place: every file and folder a
//! carrier keeps under `data-dir` (mode 0700), what it is, and who writes
//! it. Every other module names these paths through this one; nothing
//! spells them by hand.
//!
//! | path | what | written by |
//! |---|---|---|
//! | `store/` | the embedded store (`carrier.redb`, `log/`, `snap/`) | `rltp_storage::log_store` |
//! | `tls/cert.der`, `tls/key.der` | the generated self-signed TLS identity (mode 0600) | [`crate::tls::load_or_generate`] |
//! | `declaration.key` | the declaration signing key (mode 0600) | [`crate::service::declaration`] |
//! | `declaration.signed` | every declaration revision signed, before it is stored | [`crate::service::declaration`] |
//! | `clock` | the clock's high-water instant, then the store id | [`crate::service::clock`] |
//! | `lineage` | what the data dir was made as (store id, issuer, TLS fingerprint) | [`crate::service::lineage`] |
//! | `quic-reset.key` | the QUIC stateless-reset key, kept across restarts (mode 0600) | [`crate::tls::load_or_make_reset_key`] |
//! | `control.sock` | the control socket (online backup, stats; mode 0600) | [`crate::service`] |

use std::path::{Path, PathBuf};

/// The embedded store's folder.
pub const STORE: &str = rltp_storage::store_id::STORE_DIR;
/// The embedded store's index file, relative to the data dir (named by
/// refusals of a damaged data dir).
pub const STORE_INDEX: &str = rltp_storage::store_id::STORE_INDEX;
/// The generated TLS identity's folder.
pub const TLS: &str = "tls";
/// The generated certificate's file name inside [`TLS`] (DER).
pub const TLS_CERT_FILE: &str = "cert.der";
/// The generated private key's file name inside [`TLS`] (PKCS#8 DER).
pub const TLS_KEY_FILE: &str = "key.der";
/// The generated certificate, relative to the data dir.
pub const TLS_CERT: &str = "tls/cert.der";
/// The generated private key, relative to the data dir.
pub const TLS_KEY: &str = "tls/key.der";
/// The declaration signing key.
pub const DECLARATION_KEY: &str = "declaration.key";
/// The record of every signed declaration revision.
pub const DECLARATION_SIGNED: &str = "declaration.signed";
/// The clock's high-water file.
pub const CLOCK: &str = "clock";
/// The lineage file.
pub const LINEAGE: &str = "lineage";
/// The control socket.
pub const CONTROL_SOCKET: &str = "control.sock";
/// The QUIC stateless-reset key.
pub const QUIC_RESET_KEY: &str = "quic-reset.key";

/// The files a backup archive carries beside the store, relative to the
/// data dir, when present.
pub const BACKED_UP: [&str; 4] = [DECLARATION_KEY, DECLARATION_SIGNED, TLS_CERT, TLS_KEY];

/// The entries a fresh data dir may not hold without a lineage (anything
/// else of a carrier's making means it is not fresh).
pub const MADE_BY_A_CARRIER: [&str; 5] = [DECLARATION_KEY, DECLARATION_SIGNED, TLS, CLOCK, STORE];

/// The embedded store's folder of `data_dir`.
pub fn store(data_dir: &Path) -> PathBuf {
    data_dir.join(STORE)
}

/// The TLS identity's folder of `data_dir`.
pub fn tls(data_dir: &Path) -> PathBuf {
    data_dir.join(TLS)
}

/// Why writing a file of the data dir failed.
#[derive(Debug, thiserror::Error)]
#[error("writing {}: {source}", path.display())]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

/// Writes `bytes` to a new file `path` with mode 0600 (created with that
/// mode, never widened in between), fsync'd.
///
/// # Errors
/// The I/O error, also if the file already exists.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Writes `path` through a temporary file, fsync, rename and a directory
/// fsync (mode 0600): a reader sees the old bytes or the new, never a part.
///
/// # Errors
/// [`WriteError`].
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let parent = path.parent().unwrap_or(Path::new("."));
    write_private(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .and_then(|()| std::fs::File::open(parent))
        .and_then(|dir| dir.sync_all())
        .map_err(|source| WriteError {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relative_paths_agree_with_their_parts() {
        assert_eq!(TLS_CERT, format!("{TLS}/{TLS_CERT_FILE}"));
        assert_eq!(TLS_KEY, format!("{TLS}/{TLS_KEY_FILE}"));
        assert!(STORE_INDEX.starts_with(&format!("{STORE}/")));
        assert_eq!(store(Path::new("/d")), Path::new("/d/store"));
        assert_eq!(tls(Path::new("/d")), Path::new("/d/tls"));
    }
}
