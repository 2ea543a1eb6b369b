//! `rltp-carrier serve --check`: everything [`super::Server::start`] (or
//! [`super::Server::start_postgres`]) would check before serving, and
//! nothing it would make. The data dir, its TLS identity, declaration key,
//! lineage and store are read, never created, written, locked for writing
//! or recovered; the database is connected to and read, never migrated.
//!
//! Each finding is a line for the operator ([`Finding`]); the first
//! problem is a [`ServerError`] naming the field or file, as a start
//! would refuse it.

use super::{ServerError, declaration, lineage};
use crate::config::{Backend, Config};
use crate::tls;
use rltp_storage::redb_store::{Inspection, RedbStore, StoreId};
use std::path::Path;

/// One thing the check looked at and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked: `data-dir`, `tls`, `declaration-key`, `lineage`, `store`.
    pub what: &'static str,
    /// What was found, for people.
    pub detail: String,
}

fn found(what: &'static str, detail: impl Into<String>) -> Finding {
    Finding {
        what,
        detail: detail.into(),
    }
}

fn config_error(field: &str, detail: impl std::fmt::Display) -> ServerError {
    ServerError::Config(format!("config field {field}: {detail}"))
}

/// Checks `config` as a start would, without side effects.
///
/// # Errors
/// The [`ServerError`] a start would refuse with.
pub fn check(config: &Config) -> Result<Vec<Finding>, ServerError> {
    let mut findings = Vec::new();
    let data_dir = &config.data_dir;
    let exists = data_dir_access(data_dir, &mut findings)?;
    let generated_tls = config.tls.cert.is_none();
    match (&config.tls.cert, &config.tls.key) {
        (Some(cert), Some(key)) => {
            let identity = tls::load_pem(cert, key)?;
            tls::rustls_server_config(&identity)?;
            findings.push(found(
                "tls",
                format!(
                    "{} and {} load; fingerprint {}",
                    cert.display(),
                    key.display(),
                    identity.fingerprint
                ),
            ));
        }
        _ => {
            let dir = config.tls_dir();
            let (cert, key) = (dir.join(tls::CERT_FILE), dir.join(tls::KEY_FILE));
            if cert.exists() && key.exists() {
                // Both present: load_or_generate only reads them.
                let identity = tls::load_or_generate(&dir)?;
                tls::rustls_server_config(&identity)?;
                findings.push(found(
                    "tls",
                    format!(
                        "generated identity loads; fingerprint {}",
                        identity.fingerprint
                    ),
                ));
            } else {
                findings.push(found(
                    "tls",
                    "no certificate configured or generated yet: the first start generates one",
                ));
            }
        }
    }
    let key_path = data_dir.join(declaration::KEY_FILE);
    if key_path.exists() {
        let key = declaration::load_key(&key_path)?;
        findings.push(found(
            "declaration-key",
            format!(
                "loads; issuer {}",
                rltp_proofs::multikey::DidKey::from_verifying_key(&key.verifying_key())
                    .to_did_key()
            ),
        ));
    } else {
        findings.push(found(
            "declaration-key",
            "none yet: the first start makes one",
        ));
    }
    let home = match config.store.backend {
        Backend::Embedded => lineage::StoreHome::DataDir,
        Backend::Postgres => lineage::StoreHome::External,
    };
    let life = if exists {
        lineage::account_for(data_dir, generated_tls, home)?
    } else {
        lineage::Life::Fresh
    };
    let known = match &life {
        lineage::Life::Known(l) => Some(l.store_id),
        _ => None,
    };
    findings.push(found(
        "lineage",
        match &life {
            lineage::Life::Fresh => "a fresh data dir: the first start makes it".to_owned(),
            lineage::Life::Adopt => {
                "a store without a lineage: the next start adopts it".to_owned()
            }
            lineage::Life::Known(l) => format!("every file accounted for (store {})", l.store_id),
        },
    ));
    let store = match config.store.backend {
        Backend::Embedded => check_embedded(data_dir, exists, known)?,
        Backend::Postgres => check_postgres(config, known)?,
    };
    findings.push(store);
    Ok(findings)
}

/// The data dir: absent (then the nearest existing ancestor must let the
/// start make it), or a directory this process may read, write and enter.
/// Returns whether it exists.
fn data_dir_access(dir: &Path, findings: &mut Vec<Finding>) -> Result<bool, ServerError> {
    use rustix::fs::{Access, access};
    let io = |what: String, e: std::io::Error| ServerError::Io { what, source: e };
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => Err(config_error(
            "data-dir",
            format!("{} is not a directory", dir.display()),
        )),
        Ok(meta) => {
            access(dir, Access::READ_OK | Access::WRITE_OK | Access::EXEC_OK).map_err(|e| {
                config_error(
                    "data-dir",
                    format!(
                        "{}: this user may not read, write and enter it: {e}",
                        dir.display()
                    ),
                )
            })?;
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            findings.push(found(
                "data-dir",
                if mode == 0o700 {
                    format!("{} exists, mode 0700", dir.display())
                } else {
                    format!(
                        "{} exists, mode {mode:04o}: the start sets it to 0700",
                        dir.display()
                    )
                },
            ));
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut ancestor = dir.parent();
            while let Some(a) = ancestor {
                let a = if a.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    a
                };
                if a.exists() {
                    if !a.is_dir() {
                        return Err(config_error(
                            "data-dir",
                            format!("{} is not a directory", a.display()),
                        ));
                    }
                    access(a, Access::WRITE_OK | Access::EXEC_OK).map_err(|e| {
                        config_error(
                            "data-dir",
                            format!(
                                "{} does not exist and this user may not create it in {}: {e}",
                                dir.display(),
                                a.display()
                            ),
                        )
                    })?;
                    break;
                }
                ancestor = a.parent();
            }
            findings.push(found(
                "data-dir",
                format!(
                    "{} does not exist: the first start makes it (mode 0700)",
                    dir.display()
                ),
            ));
            Ok(false)
        }
        Err(e) => Err(io(format!("reading {}", dir.display()), e)),
    }
}

fn check_embedded(
    data_dir: &Path,
    exists: bool,
    known: Option<StoreId>,
) -> Result<Finding, ServerError> {
    if !exists {
        return Ok(found(
            "store",
            "embedded, none yet: the first start makes it",
        ));
    }
    let detail = match RedbStore::inspect(crate::data_dir::store(data_dir))? {
        Inspection::Absent => "embedded, none yet: the first start makes it".to_owned(),
        Inspection::InUse => {
            "embedded, held open by a running carrier (not read; everything else was checked)"
                .to_owned()
        }
        Inspection::NeedsRecovery => {
            "embedded, not closed cleanly: the next start recovers it (not read)".to_owned()
        }
        Inspection::Held { store_id, format } => {
            if let (Some(expected), Some(held)) = (known, store_id)
                && expected != held
            {
                return Err(ServerError::Lineage(lineage::LineageError::Damaged {
                    dir: data_dir.to_owned(),
                    what: format!(
                        "its store holds store {held}, but this data dir's store is {expected}"
                    ),
                    way_back: lineage::RESTORE.into(),
                }));
            }
            let layout = match format {
                Some(rltp_storage::log_store::FORMAT) => "the log store",
                Some(_) => "the redb layout: the next start upgrades it to the log store",
                None => "no format yet",
            };
            format!(
                "embedded, opens read-only: store {}, format {} ({layout})",
                store_id.map_or_else(|| "without an id".to_owned(), |id| id.to_string()),
                format.map_or_else(|| "none".to_owned(), |f| f.to_string())
            )
        }
    };
    Ok(found("store", detail))
}

fn check_postgres(config: &Config, known: Option<StoreId>) -> Result<Finding, ServerError> {
    let options = config
        .store
        .postgres
        .as_ref()
        .ok_or_else(|| config_error("store.postgres", "is required"))?
        .options()
        .map_err(|e| ServerError::Config(e.to_string()))?;
    let checked =
        rltp_storage::postgres::PgStore::check(&options).map_err(rltp_storage::StoreError::from)?;
    super::check_held_declaration(
        checked.declaration.as_ref(),
        &config.data_dir,
        Some(&config.constants),
    )?;
    super::node_limits::check_held_limits(checked.limits, &config.limits)?;
    if let (Some(expected), Some(held)) = (known, checked.store_id.map(StoreId))
        && expected != held
    {
        return Err(ServerError::Lineage(lineage::LineageError::Damaged {
            dir: config.data_dir.clone(),
            what: format!(
                "it belongs to the carrier of store {expected}, but the database holds store {held}"
            ),
            way_back: "point [store.postgres] url at this node's database, or give the node a new, empty data dir".into(),
        }));
    }
    Ok(found(
        "store",
        format!(
            "postgres, reachable: schema version {} (this binary: {}), store {}, {}",
            checked.schema_version,
            rltp_storage::postgres::schema::SCHEMA_VERSION,
            checked
                .store_id
                .map_or_else(|| "none yet".to_owned(), |id| StoreId(id).to_string()),
            checked.declaration.as_ref().map_or_else(
                || "no declaration yet (the first node signs revision 1)".to_owned(),
                |d| format!(
                    "declaration revision {} (this node's key and constants match it)",
                    d.revision
                )
            )
        ),
    ))
}
