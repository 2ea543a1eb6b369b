//! `rltp-carrier migrate --config FILE [--data-dir DIR] [--publish-constants] [--publish-limits]`:
//! prepares the shared PostgreSQL database of a carrier's nodes
//! (`[store] backend = "postgres"`, `PROTOCOL.md` §13) without serving.
//!
//! - It applies the schema migrations this binary knows (each in one
//!   transaction; a database migrated by a newer binary is refused by
//!   name) and prints `schema-version` and `store-id`. `serve` applies
//!   them too; `migrate` lets an operator do it first, once, for all nodes.
//! - With `--publish-constants` it signs the configuration's `[constants]`
//!   as the database's next declaration revision, with the node's
//!   declaration key (`--data-dir`, else the config's `data-dir`): the way
//!   to change the constants of a carrier with several nodes. The revision
//!   is applied in one transaction (what depends on `queue-floor` and
//!   `orphan-horizon` is re-derived there), every running node adopts it
//!   within one `sweep-interval-ms`, and a node that starts later must
//!   have the same `[constants]`. Prints `declaration-revision`.
//! - With `--publish-limits` it stores the configuration's `[limits]
//!   capacity-bytes` and `max-bindings` in the database: the way to change
//!   them for a carrier with several nodes (every node judges capacity
//!   against the database's values, `PROTOCOL.md` §13). Running nodes
//!   adopt them within one `sweep-interval-ms`; a node started later with
//!   other values is refused by name. Prints `capacity-bytes` and
//!   `max-bindings`.
//! - With `--after-restore` (every node stopped, the database just
//!   restored from a backup or a point in time) it raises the floor every
//!   queue's next `seq` stays above to now × 1024 (now by the database's
//!   clock, `PROTOCOL.md` §13 "One clock")
//!   ([`rltp_server::admin::backup::restore_seq_floor`], the rule `restore`
//!   applies to the embedded store), so that no `seq` handed out after the
//!   backup's instant is handed out again (`PROTOCOL.md` §7). Prints
//!   `seq-floor`.
//!
//! The embedded store needs none of this: it upgrades itself when it opens.

use super::{Failure, exit};
use rltp_engine::EngineConstants;
use rltp_server::config::{Backend, Config};
use rltp_server::service::{self as server, declaration};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// `migrate`: prepare the PostgreSQL database.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node's TOML configuration (its `[store.postgres]` names the
    /// database).
    #[arg(long, short)]
    config: PathBuf,
    /// The node's data directory, for its declaration key (default: the
    /// config's `data-dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Sign the configuration's `[constants]` as the next declaration
    /// revision, for every node.
    #[arg(long)]
    publish_constants: bool,
    /// Store the configuration's `[limits] capacity-bytes` and
    /// `max-bindings` in the database, for every node (running nodes adopt
    /// them within a sweep interval; a node started later must have them).
    #[arg(long)]
    publish_limits: bool,
    /// The database was just restored: raise the `seq` floor past every
    /// `seq` the carrier may have handed out since the backup's instant
    /// (run with every node stopped).
    #[arg(long)]
    after_restore: bool,
    /// Print one JSON object per line instead of `name value` lines
    /// (members: the line names in camelCase, `README.md` "JSON output").
    #[arg(long)]
    json: bool,
}

fn execute(args: &Args) -> Result<u8, Failure> {
    let mut config = Config::load(&args.config).map_err(|e| Failure::usage(e.to_string()))?;
    if let Some(dir) = &args.data_dir {
        config.data_dir = dir.clone();
    }
    if config.store.backend != Backend::Postgres {
        return Err(Failure::usage(
            "migrate prepares the PostgreSQL store ([store] backend = \"postgres\"); \
             the embedded store upgrades itself when it opens",
        ));
    }
    let pg = config
        .store
        .postgres
        .as_ref()
        .ok_or_else(|| Failure::usage("store.postgres is required"))?;
    let options = pg.options().map_err(|e| Failure::usage(e.to_string()))?;
    let store = rltp_storage::postgres::PgStore::open(options)
        .map_err(|e| Failure::transport(format!("the database: {e}")))?;
    let mut lines = format!(
        "schema-version {}\nstore-id {}\n",
        rltp_storage::postgres::schema::SCHEMA_VERSION,
        rltp_storage::redb_store::StoreId(store.store_id())
    );
    if args.after_restore {
        // The database's clock, the one every node stamps on (§13).
        let now = store
            .database_clock()
            .map_err(|e| Failure::transport(format!("reading the database's clock: {e}")))?;
        let floor = rltp_server::admin::backup::restore_seq_floor(now, 0, None);
        store
            .raise_seq_floor(floor)
            .map_err(|e| Failure::transport(format!("raising the seq floor: {e}")))?;
        lines.push_str(&format!("seq-floor {floor}\n"));
    }
    if args.publish_limits {
        let limits = server::node_limits::of(&config.limits);
        store
            .publish_limits(limits, config.constants.queue_floor_bytes())
            .map_err(|e| Failure::transport(format!("publishing the capacity limits: {e}")))?;
        lines.push_str(&format!(
            "capacity-bytes {}\nmax-bindings {}\n",
            limits.capacity_bytes, limits.max_bindings
        ));
    }
    let out = super::output::Output::new("migrate", args.json, tokio::time::Instant::now());
    if !args.publish_constants {
        out.record("migrate", &lines);
        return Ok(exit::OK);
    }
    // The key that signed the database's declaration, if it has one.
    server::check_node_declaration(&store, &config.data_dir, None)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let key = declaration::load_or_create_key(&config.data_dir)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let store = Arc::new(store);
    let starting = declaration::starting_constants(&*store, &key, &config.constants)
        .map_err(|e| Failure::transport(e.to_string()))?;
    let driver = rltp_server::driver::Driver::start(
        store,
        Arc::new(rltp_server::clock::SystemClock),
        config.carrier.clone(),
        EngineConstants::from(&starting),
        rltp_engine::EngineConfig::new(config.limits.capacity_bytes, config.limits.max_bindings),
        Arc::new(rltp_engine::Unmetered),
    )
    .map_err(|e| Failure::transport(e.to_string()))?;
    let record = declaration::publish(&driver, &key, &config.constants, &config.data_dir)
        .map_err(|e| Failure::transport(e.to_string()))?;
    lines.push_str(&format!("declaration-revision {}\n", record.revision));
    out.record("migrate", &lines);
    Ok(exit::OK)
}

/// Runs `migrate` on a blocking thread: the store and the writer block.
pub async fn run(args: Args) -> ExitCode {
    let done = tokio::task::spawn_blocking(move || execute(&args))
        .await
        .unwrap_or_else(|e| Err(Failure::transport(format!("migrate stopped: {e}"))));
    super::finish("migrate", done)
}
