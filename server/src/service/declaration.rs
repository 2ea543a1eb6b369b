//! The carrier's published declaration (§4.4 guarantee 1, `PROTOCOL.md` §3).
//!
//! - The **declaration key** is a dedicated Ed25519 key kept in
//!   `<data-dir>/declaration.key` (the 32-byte seed, mode 0600), made on
//!   first start. Its `did:key` is the declaration's `issuer` and
//!   `recipient` (a self-addressed publication: `C`, possibly a `did:web`,
//!   is not a did:key anchor, and one byte string must serve every
//!   counterpart).
//! - At every start the configured constants are compared with the stored
//!   revision. Identical constants under the same key: the stored bytes
//!   are served unchanged. Anything else: a new revision (held + 1) is
//!   signed and applied through [`crate::driver::Driver::apply_constants`],
//!   which stores it under the generic revision rule in the same
//!   transaction that makes the new constants govern.
//! - **A revision is never signed twice** (`PROTOCOL.md` §3: two documents
//!   of one revision are an equivocation). Every newly signed revision is
//!   first written to `<data-dir>/declaration.signed` ([`SIGNED_FILE`]:
//!   the latest signed document, temporary file, fsync, rename), and only
//!   then stored. The next revision is one past the newest of the store's
//!   and that file's; when the file holds a revision the store lacks (a
//!   crash between the two writes, or a restore of an older backup) and
//!   it declares the configured constants, those exact bytes are stored
//!   and served again. A restore keeps the data dir's file when it is
//!   newer than the archive's.

use crate::driver::Driver;
use crate::tls::{TlsError, write_private};
use ed25519_dalek::SigningKey;
use rltp_engine::{EngineConstants, EngineError};
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::declaration::{
    DeclarationBuildError, DeclarationHeader, accept_carrier_declaration, parse_declaration,
    rfc3339_utc, sign_carrier_declaration, uuid_v4, verify_declaration,
};
use rltp_proofs::multikey::DidKey;
use rltp_storage::{DeclarationRecord, Ms, Store, StoreError};
use std::path::Path;

/// File name of the declaration key inside the data directory.
pub use crate::data_dir::DECLARATION_KEY as KEY_FILE;
/// File name of the latest signed declaration inside the data directory.
pub use crate::data_dir::DECLARATION_SIGNED as SIGNED_FILE;

/// Why the declaration could not be made or published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeclarationError {
    /// The key file could not be read or written.
    #[error("declaration key: {0}")]
    Key(#[from] TlsError),
    /// The key file is not a 32-byte seed.
    #[error("declaration key {0}: not a 32-byte ed25519 seed")]
    KeyShape(String),
    /// Building the document failed.
    #[error("declaration: {0}")]
    Build(#[from] DeclarationBuildError),
    /// The store could not be read.
    #[error("declaration: {0}")]
    Store(#[from] StoreError),
    /// The engine refused the revision or the store failed.
    #[error("declaration: {0}")]
    Engine(#[from] EngineError),
    /// The signed document could not be recorded in `declaration.signed`.
    #[error("declaration: {0}")]
    Record(#[from] crate::data_dir::WriteError),
}

/// Loads the declaration key from `<data_dir>/declaration.key`, creating
/// it (mode 0600) on first start.
///
/// # Errors
/// [`DeclarationError::Key`], [`DeclarationError::KeyShape`].
pub fn load_or_create_key(data_dir: &Path) -> Result<SigningKey, DeclarationError> {
    let path = data_dir.join(KEY_FILE);
    if path.exists() {
        return load_key(&path);
    }
    let key = SigningKey::generate(&mut rand::rng());
    write_private(&path, key.as_bytes())?;
    Ok(key)
}

/// Loads the declaration key file at `path` (a 32-byte Ed25519 seed).
///
/// # Errors
/// [`DeclarationError::Key`], [`DeclarationError::KeyShape`].
pub fn load_key(path: &Path) -> Result<SigningKey, DeclarationError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })?;
    let seed: [u8; 32] = bytes
        .try_into()
        .map_err(|_| DeclarationError::KeyShape(path.display().to_string()))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The latest signed declaration recorded in `<data_dir>/declaration.signed`
/// (`None` if there is none or it does not parse).
pub fn read_signed(data_dir: &Path) -> Option<DeclarationRecord> {
    let document = std::fs::read(data_dir.join(SIGNED_FILE)).ok()?;
    let revision = parse_declaration(&document).ok()?.revision();
    Some(DeclarationRecord { revision, document })
}

/// Records `record` as the latest signed declaration (before it is stored).
///
/// # Errors
/// [`DeclarationError::Record`] if it cannot be written.
fn write_signed(data_dir: &Path, record: &DeclarationRecord) -> Result<(), DeclarationError> {
    Ok(crate::data_dir::write_atomically(
        &data_dir.join(SIGNED_FILE),
        &record.document,
    )?)
}

/// The constants of the stored declaration if it is a valid carrier
/// declaration by `issuer`; `None` otherwise (absent, foreign or
/// unreadable — the next revision supersedes it).
/// The issuer and constants of a stored revision, if it is a valid
/// carrier declaration (any issuer).
pub fn held_declaration(record: &DeclarationRecord) -> Option<(DidKey, CarrierConstants)> {
    let parsed = parse_declaration(&record.document).ok()?;
    let verified = verify_declaration(parsed).ok()?;
    let accepted = accept_carrier_declaration(&verified).ok()?;
    Some((*accepted.issuer(), accepted.constants().clone()))
}

fn held_constants(record: &DeclarationRecord, issuer: &DidKey) -> Option<CarrierConstants> {
    let parsed = parse_declaration(&record.document).ok()?;
    let verified = verify_declaration(parsed).ok()?;
    let accepted = accept_carrier_declaration(&verified).ok()?;
    (accepted.issuer() == issuer).then(|| accepted.constants().clone())
}

/// The constants the engine must start with: those of the stored
/// revision (so that a changed configuration is applied as a revision,
/// re-deriving what depends on it), else the configured ones.
///
/// # Errors
/// [`DeclarationError::Store`].
pub fn starting_constants<S: Store>(
    store: &S,
    key: &SigningKey,
    configured: &CarrierConstants,
) -> Result<CarrierConstants, DeclarationError> {
    let issuer = DidKey::from_verifying_key(&key.verifying_key());
    let held = {
        use rltp_storage::ReadTxn as _;
        store.read()?.declaration()?
    };
    Ok(held
        .as_ref()
        .and_then(|record| held_constants(record, &issuer))
        .unwrap_or_else(|| configured.clone()))
}

/// Publishes the declaration for `constants`: reuses the newest revision
/// (the store's, or the data dir's `declaration.signed` when the store
/// lacks it) if it declares exactly these constants under `key`, else
/// signs the next revision (1 on first start), records it in
/// `declaration.signed`, and applies it through the engine (module docs).
/// Returns the signed document bytes (JCS) to serve.
///
/// # Errors
/// [`DeclarationError`].
///
/// On a store other writers share (carrier nodes on one database,
/// `PROTOCOL.md` §13), another node may store a revision between the read
/// and the write: the engine then refuses ours under the revision rule and
/// the publication is decided once more against what is stored now: the
/// same constants reuse the other node's document, other ones are refused
/// (this node is not signing over a revision it has not seen).
pub fn publish<S: Store>(
    engine: &Driver<S>,
    key: &SigningKey,
    constants: &CarrierConstants,
    data_dir: &Path,
) -> Result<DeclarationRecord, DeclarationError> {
    match publish_once(engine, key, constants, data_dir, true) {
        Err(DeclarationError::Engine(EngineError::Revision { .. })) => {
            publish_once(engine, key, constants, data_dir, false)
        }
        done => done,
    }
}

fn publish_once<S: Store>(
    engine: &Driver<S>,
    key: &SigningKey,
    constants: &CarrierConstants,
    data_dir: &Path,
    may_sign: bool,
) -> Result<DeclarationRecord, DeclarationError> {
    let issuer = DidKey::from_verifying_key(&key.verifying_key());
    let held = {
        use rltp_storage::ReadTxn as _;
        engine.store().read()?.declaration()?
    };
    let signed = read_signed(data_dir);
    let newest = match (&held, &signed) {
        (Some(h), Some(s)) if s.revision > h.revision => Some(s),
        (Some(h), _) => Some(h),
        (None, s) => s.as_ref(),
    };
    if let Some(record) = newest
        && held_constants(record, &issuer).as_ref() == Some(constants)
    {
        if held.as_ref() != Some(record) {
            // Signed here before, never stored (or lost to a restore):
            // the same bytes again, never a second document.
            engine.apply_constants(EngineConstants::from(constants), Some(record.clone()))?;
        }
        if signed.as_ref() != Some(record) {
            write_signed(data_dir, record)?;
        }
        return Ok(record.clone());
    }
    let revision = newest.map_or(1, |r| r.revision.saturating_add(1));
    if !may_sign {
        return Err(DeclarationError::Engine(EngineError::Revision {
            held: revision - 1,
            offered: revision,
        }));
    }
    let document = sign(key, &issuer, constants, revision, engine.now())?;
    let record = DeclarationRecord { revision, document };
    write_signed(data_dir, &record)?;
    engine.apply_constants(EngineConstants::from(constants), Some(record.clone()))?;
    Ok(record)
}

/// Signs a carrier declaration of `revision` at `now` (ms).
fn sign(
    key: &SigningKey,
    issuer: &DidKey,
    constants: &CarrierConstants,
    revision: u64,
    now: Ms,
) -> Result<Vec<u8>, DeclarationBuildError> {
    let id = uuid_v4(&mut rand::rng());
    let thread_id = uuid_v4(&mut rand::rng());
    let at = rfc3339_utc(now);
    let header = DeclarationHeader {
        id: &id,
        thread_id: &thread_id,
        issued_at: &at,
        created: &at,
        revision,
    };
    sign_carrier_declaration(key, issuer, &header, constants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_declaration_verifies_and_carries_the_constants() {
        let key = SigningKey::from_bytes(&[3u8; 32]);
        let issuer = DidKey::from_verifying_key(&key.verifying_key());
        let config = crate::config::Config::defaults().unwrap();
        let bytes = sign(&key, &issuer, &config.constants, 4, 1_788_177_600_000).unwrap();
        let record = DeclarationRecord {
            revision: 4,
            document: bytes,
        };
        assert_eq!(
            held_constants(&record, &issuer),
            Some(config.constants.clone())
        );
        let other = DidKey::from_bytes([1u8; 32]);
        assert_eq!(held_constants(&record, &other), None);
        let parsed = parse_declaration(&record.document).unwrap();
        assert_eq!(parsed.revision(), 4);
        assert_eq!(parsed.recipient(), &issuer);
        assert_eq!(parsed.issued_at(), "2026-08-31T12:00:00Z");
    }

    #[test]
    fn key_is_made_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create_key(dir.path()).unwrap();
        let b = load_or_create_key(dir.path()).unwrap();
        assert_eq!(a.as_bytes(), b.as_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.path().join(KEY_FILE), b"short").unwrap();
        assert!(matches!(
            load_or_create_key(dir.path()),
            Err(DeclarationError::KeyShape(_))
        ));
    }
}
