//! A data dir knows its own life (issue 13, `deploy/OPERATIONS.md`
//! "Damaged data dir").
//!
//! The first start of a carrier writes `<data-dir>/lineage` once it has
//! made everything else: the store's id ([`StoreId`], also in the store's
//! `meta` table and so in every backup), the declaration key's `did:key`,
//! the generated TLS identity's SPKI fingerprint (if one is used), and the
//! instant. The store's id is also written into the clock file
//! (`PROTOCOL.md` §11). Every later start accounts for each file against
//! it **before anything is created**, and refuses — naming what is
//! missing or foreign and the way back — rather than make a new one in its
//! place:
//!
//! | found | refused because | the way back |
//! |---|---|---|
//! | the store missing, empty or of another id | a fresh store would lose every deposit and answer `unknown` for deposits that were `admitted` | `restore` from a backup |
//! | `declaration.key` missing or another key | a new key re-signs the declaration under another issuer | restore the key; or `admin renew --declaration-key` (deliberately: revision + 1 under a new issuer) |
//! | `tls/` missing or another identity | pinned clients could no longer connect | restore `tls/`; or `admin renew --tls-identity` |
//! | `clock` missing or naming another store | the backward-step guard of §11 would be gone | restore it; or `admin renew --clock` |
//! | no `lineage`, no store, but any other file | not a fresh data dir | restore, or start a new carrier in an empty directory |
//!
//! A data dir written before lineages existed (a store, no `lineage`) is
//! adopted: its store is opened as it is and the lineage written after a
//! successful start. There is no rebuild of the store from its log alone:
//! the log holds what changed since the latest snapshot, not a history
//! (segments whose deposits have all left are deleted, and with them the
//! records of every binding registered in them), so it cannot carry
//! enough.

use crate::tls::{self, SpkiFingerprint};
use rltp_proofs::multikey::DidKey;
use rltp_storage::Ms;
use rltp_storage::redb_store::StoreId;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The lineage file inside the data directory.
pub use crate::data_dir::LINEAGE as LINEAGE_FILE;
/// Its format line.
pub const FORMAT: &str = "rltp-carrier-lineage/1";
use crate::data_dir::STORE_INDEX;

/// What a data dir was made as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The store's id.
    pub store_id: StoreId,
    /// When the data dir was made (ms since the Unix epoch).
    pub created_at: Ms,
    /// The declaration key's `did:key`.
    pub declaration_issuer: String,
    /// The generated TLS identity's SPKI fingerprint (`None`: none was
    /// generated, a CA-issued certificate is configured).
    pub tls_identity: Option<String>,
}

/// Why a data dir may not start (or a lineage cannot be written).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineageError {
    /// A file is missing, foreign or inconsistent.
    #[error("the data dir {dir} is damaged: {what}. Nothing was changed. The way back: {way_back}")]
    Damaged {
        /// The data directory.
        dir: PathBuf,
        /// What is missing or wrong.
        what: String,
        /// How to recover.
        way_back: String,
    },
    /// Reading or writing a file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The way back from a damaged or missing store.
pub const RESTORE: &str = "restore the store from a backup \
    (`rltp-carrier restore --from FILE --data-dir DIR`, deploy/OPERATIONS.md \"Damaged data dir\"): \
    this loses every deposit admitted after the backup was taken (its `taken-at`), so first keep a copy \
    of this data dir; the carrier never makes a fresh store where one was";

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LineageError {
    let what = what.into();
    move |source| LineageError::Io { what, source }
}

impl Lineage {
    /// The file's text: `name value` lines.
    pub fn render(&self) -> String {
        format!(
            "format {FORMAT}\nstore-id {}\ncreated-at-ms {}\ndeclaration-issuer {}\ntls-identity {}\n",
            self.store_id,
            self.created_at,
            self.declaration_issuer,
            self.tls_identity.as_deref().unwrap_or("none"),
        )
    }

    /// Parses [`Lineage::render`]'s text.
    ///
    /// # Errors
    /// A message naming the defect.
    pub fn parse(text: &str) -> Result<Lineage, String> {
        let mut fields = std::collections::HashMap::new();
        for line in text.lines() {
            let (name, value) = line
                .split_once(' ')
                .ok_or_else(|| format!("line {line:?}"))?;
            if fields.insert(name, value).is_some() {
                return Err(format!("{name} twice"));
            }
        }
        let get = |name: &str| fields.get(name).copied().ok_or(format!("no {name}"));
        if get("format")? != FORMAT {
            return Err(format!("format {:?}", get("format")?));
        }
        let store_id = StoreId::parse(get("store-id")?).ok_or("store-id")?;
        let created_at = get("created-at-ms")?
            .parse()
            .map_err(|_| "created-at-ms".to_owned())?;
        let issuer = get("declaration-issuer")?;
        DidKey::parse(issuer).map_err(|e| format!("declaration-issuer: {e}"))?;
        let tls_identity = match get("tls-identity")? {
            "none" => None,
            fp => {
                fp.parse::<SpkiFingerprint>()
                    .map_err(|e| format!("tls-identity: {e}"))?;
                Some(fp.to_owned())
            }
        };
        Ok(Lineage {
            store_id,
            created_at,
            declaration_issuer: issuer.to_owned(),
            tls_identity,
        })
    }

    /// Reads `<data_dir>/lineage` (`None` if there is none).
    ///
    /// # Errors
    /// [`LineageError`] if it cannot be read or parsed.
    pub fn read(data_dir: &Path) -> Result<Option<Lineage>, LineageError> {
        let path = data_dir.join(LINEAGE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Lineage::parse(&text)
                .map(Some)
                .map_err(|what| LineageError::Damaged {
                    dir: data_dir.to_owned(),
                    what: format!("{} is not a lineage file ({what})", path.display()),
                    way_back: "restore it from a backup of this data dir".into(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(format!("reading {}", path.display()))(e)),
        }
    }

    /// Writes `<data_dir>/lineage` (temporary file, fsync, rename,
    /// directory fsync).
    ///
    /// # Errors
    /// [`LineageError::Io`].
    pub fn write(&self, data_dir: &Path) -> Result<(), LineageError> {
        write_atomically(&data_dir.join(LINEAGE_FILE), self.render().as_bytes())
    }
}

/// [`crate::data_dir::write_atomically`], its failure a [`LineageError::Io`].
///
/// # Errors
/// [`LineageError::Io`].
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), LineageError> {
    crate::data_dir::write_atomically(path, bytes).map_err(|e| LineageError::Io {
        what: format!("writing {}", e.path.display()),
        source: e.source,
    })
}

/// What [`account`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Life {
    /// An empty data dir: everything is made now.
    Fresh,
    /// A store and no lineage (a data dir of an earlier version, or a first
    /// start that stopped before writing its lineage): opened as it is;
    /// the lineage is written after a successful start.
    Adopt,
    /// The data dir's lineage: every file was accounted for against it.
    Known(Lineage),
}

/// The store id the clock file names (its `store-id` line), if any.
pub fn clock_store_id(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("store-id "))
        .map(str::trim)
}

/// Accounts for every file of `data_dir` before anything is made
/// (module docs). `generated_tls`: the configuration uses the generated
/// TLS identity (no `[tls]` files).
///
/// # Errors
/// [`LineageError::Damaged`] naming what is missing or foreign, and the
/// way back.
pub fn account(data_dir: &Path, generated_tls: bool) -> Result<Life, LineageError> {
    account_for(data_dir, generated_tls, StoreHome::DataDir)
}

/// Where a carrier's store lives, for [`account_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreHome {
    /// In the data dir (`store/`): the embedded store.
    DataDir,
    /// Outside it (the shared PostgreSQL database, `PROTOCOL.md` §13): the
    /// data dir holds a node's declaration key, TLS identity, clock and
    /// lineage, and the caller checks the lineage's store id against the
    /// database's. A new node's data dir may already hold the carrier's
    /// declaration key (and `declaration.signed`) and a TLS identity,
    /// copied from another node (so that one pin fits every node): that is
    /// still a fresh node.
    External,
}

/// [`account`] for a store that lives at `home`.
///
/// # Errors
/// As [`account`].
pub fn account_for(
    data_dir: &Path,
    generated_tls: bool,
    home: StoreHome,
) -> Result<Life, LineageError> {
    let key_path = data_dir.join(super::declaration::KEY_FILE);
    let tls_dir = crate::data_dir::tls(data_dir);
    let clock_path = data_dir.join(super::clock::HIGH_WATER_FILE);
    let index = data_dir.join(STORE_INDEX);
    let index_present = std::fs::metadata(&index).is_ok_and(|m| m.len() > 0);
    let Some(lineage) = Lineage::read(data_dir)? else {
        return without_lineage(data_dir, home, index_present);
    };
    if !index_present && home == StoreHome::DataDir {
        return Err(damaged(
            data_dir,
            format!(
                "its store {STORE_INDEX} (store {}) is missing or empty",
                lineage.store_id
            ),
            RESTORE,
        ));
    }
    check_declaration_key(data_dir, &lineage, &key_path)?;
    if generated_tls && let Some(expected) = &lineage.tls_identity {
        let found = generated_fingerprint(&tls_dir);
        if found.as_deref() != Some(expected.as_str()) {
            let what = match found {
                None => format!(
                    "its TLS identity {} is missing: a new one would lock out every client pinning {expected}",
                    tls_dir.display()
                ),
                Some(other) => format!(
                    "its TLS identity {} is {other}, not this carrier's {expected}",
                    tls_dir.display()
                ),
            };
            return Err(damaged(data_dir, what, &renew(data_dir, "tls-identity")));
        }
    }
    match std::fs::read_to_string(&clock_path) {
        Ok(text) => {
            if let Some(named) = clock_store_id(&text)
                && named != lineage.store_id.to_string()
            {
                return Err(damaged(
                    data_dir,
                    format!(
                        "its clock file {} belongs to store {named}, not {}",
                        clock_path.display(),
                        lineage.store_id
                    ),
                    &renew(data_dir, "clock"),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(damaged(
                data_dir,
                format!(
                    "its clock file {} is missing (the last instant this carrier used, PROTOCOL.md §11)",
                    clock_path.display()
                ),
                &renew(data_dir, "clock"),
            ));
        }
        Err(e) => return Err(io(format!("reading {}", clock_path.display()))(e)),
    }
    Ok(Life::Known(lineage))
}

/// [`account_for`] without a lineage: a data dir to adopt, a fresh one, or
/// one holding what a carrier made, which is damage (a fresh store there
/// would sign the declaration again from revision 1).
fn without_lineage(
    data_dir: &Path,
    home: StoreHome,
    index_present: bool,
) -> Result<Life, LineageError> {
    if index_present && home == StoreHome::DataDir {
        return Ok(Life::Adopt);
    }
    // What an operator copies from another node of the same database.
    let shared = [
        super::declaration::KEY_FILE,
        super::declaration::SIGNED_FILE,
        crate::data_dir::TLS,
    ];
    let leftovers: Vec<String> = crate::data_dir::MADE_BY_A_CARRIER
        .into_iter()
        .filter(|name| data_dir.join(name).exists())
        .filter(|name| home == StoreHome::DataDir || !shared.contains(name))
        .map(str::to_owned)
        .collect();
    if leftovers.is_empty() || leftovers == [crate::data_dir::STORE] && store_is_empty(data_dir) {
        return Ok(Life::Fresh);
    }
    let no_store = match home {
        StoreHome::DataDir => format!("no store ({STORE_INDEX}) and "),
        StoreHome::External => String::new(),
    };
    Err(damaged(
        data_dir,
        format!(
            "it holds {} but {no_store}no lineage: it is not a fresh data dir, \
             and a fresh store here would sign the declaration again from revision 1",
            leftovers.join(", ")
        ),
        &format!("{RESTORE}; to start a new carrier, give it a new, empty data directory"),
    ))
}

/// [`account_for`]: the declaration key in the data dir is present and is
/// the lineage's declaration issuer.
fn check_declaration_key(
    data_dir: &Path,
    lineage: &Lineage,
    key_path: &Path,
) -> Result<(), LineageError> {
    match std::fs::read(key_path) {
        Ok(bytes) => {
            let issuer = <[u8; 32]>::try_from(bytes.as_slice()).ok().map(|seed| {
                DidKey::from_verifying_key(
                    &ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key(),
                )
                .to_did_key()
            });
            if issuer.as_deref() != Some(lineage.declaration_issuer.as_str()) {
                return Err(damaged(
                    data_dir,
                    format!(
                        "{} is not this carrier's declaration key ({})",
                        key_path.display(),
                        lineage.declaration_issuer
                    ),
                    &renew(data_dir, "declaration-key"),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(damaged(
                data_dir,
                format!(
                    "its declaration key {} is missing: a new one would re-sign the declaration under \
                     another issuer than {}, which counterparts pin",
                    key_path.display(),
                    lineage.declaration_issuer
                ),
                &renew(data_dir, "declaration-key"),
            ));
        }
        Err(e) => return Err(io(format!("reading {}", key_path.display()))(e)),
    }
    Ok(())
}

/// The data dir is damaged: `what`, and the `way_back`.
fn damaged(data_dir: &Path, what: String, way_back: &str) -> LineageError {
    LineageError::Damaged {
        dir: data_dir.to_owned(),
        what,
        way_back: way_back.to_owned(),
    }
}

/// The way back from a damaged `what`: a backup, or `admin renew --{what}`.
fn renew(data_dir: &Path, what: &str) -> String {
    format!(
        "restore it from a backup of this data dir; or, to replace it deliberately, stop the carrier \
         and run `rltp-carrier admin renew --data-dir {} --{what}`",
        data_dir.display()
    )
}

/// `store/` holds no file at all (a directory tree an interrupted first
/// start may leave).
fn store_is_empty(data_dir: &Path) -> bool {
    fn empty(dir: &Path) -> bool {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .all(|e| e.file_type().is_ok_and(|t| t.is_dir()) && empty(&e.path()))
        })
    }
    empty(&crate::data_dir::store(data_dir))
}

/// The SPKI fingerprint of the generated identity in `tls_dir`, if there
/// is one.
pub fn generated_fingerprint(tls_dir: &Path) -> Option<String> {
    let cert = std::fs::read(tls_dir.join(tls::CERT_FILE)).ok()?;
    std::fs::metadata(tls_dir.join(tls::KEY_FILE)).ok()?;
    let cert = rustls::pki_types::CertificateDer::from(cert);
    SpkiFingerprint::of_certificate(&cert)
        .ok()
        .map(|f| f.to_string())
}

/// Writes the store id into the clock file (keeping the instant it holds,
/// or now if there is none), so that a clock file is never taken for
/// another data dir's.
///
/// # Errors
/// [`LineageError::Io`].
pub fn stamp_clock(data_dir: &Path, store_id: StoreId, now: Ms) -> Result<(), LineageError> {
    let path = data_dir.join(super::clock::HIGH_WATER_FILE);
    let recorded = super::clock::recorded(data_dir).unwrap_or(0).max(now);
    let mut text = Vec::new();
    let _ = writeln!(text, "{recorded}\nstore-id {store_id}");
    write_atomically(&path, &text)
}

/// The lineage of a data dir whose store is `store_id`, as its files are
/// now (after a successful start, or a restore).
///
/// # Errors
/// [`LineageError`] if the declaration key cannot be read.
pub fn describe(data_dir: &Path, store_id: StoreId, now: Ms) -> Result<Lineage, LineageError> {
    let key_path = data_dir.join(super::declaration::KEY_FILE);
    let key = super::declaration::load_key(&key_path).map_err(|e| LineageError::Io {
        what: format!("reading {}", key_path.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(Lineage {
        store_id,
        created_at: now,
        declaration_issuer: DidKey::from_verifying_key(&key.verifying_key()).to_did_key(),
        tls_identity: generated_fingerprint(&crate::data_dir::tls(data_dir)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lineage_round_trips_and_bad_files_are_refused() {
        let lineage = Lineage {
            store_id: StoreId([7; 16]),
            created_at: 1_788_177_600_000,
            declaration_issuer: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK".into(),
            tls_identity: None,
        };
        assert_eq!(Lineage::parse(&lineage.render()), Ok(lineage.clone()));
        assert!(Lineage::parse("format other/1\n").is_err());
        assert!(Lineage::parse(&lineage.render().replace("0707", "07zz")).is_err());
        assert_eq!(clock_store_id("123\nstore-id ab\n"), Some("ab"));
        assert_eq!(clock_store_id("123\n"), None);
    }
}
