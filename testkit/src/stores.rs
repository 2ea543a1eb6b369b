//! Fresh, empty stores of every embedded backend, and
//! [`on_both_stores!`](crate::on_both_stores), which runs one generic test
//! on each.

use rltp_storage::Store;
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::mem::MemStore;
use rltp_storage::redb_store::RedbStore;
use std::sync::{Arc, Mutex};
use tempfile::TempDir;

/// A fresh in-memory reference store.
pub fn mem_store() -> Arc<MemStore> {
    Arc::new(MemStore::new())
}

/// Makes fresh, empty stores of one kind.
pub trait StoreFactory {
    /// The kind of store.
    type S: Store;
    /// A fresh, empty store.
    fn make(&self) -> Arc<Self::S>;
}

/// In-memory reference stores.
pub struct MemFactory;

impl StoreFactory for MemFactory {
    type S = MemStore;
    fn make(&self) -> Arc<MemStore> {
        mem_store()
    }
}

/// The temporary directories of a factory's stores, removed when the
/// factory is dropped (after the test body).
#[derive(Default)]
struct Dirs(Mutex<Vec<TempDir>>);

impl Dirs {
    /// A fresh directory that lives as long as the factory.
    fn open<T>(&self, open: impl FnOnce(&std::path::Path) -> T) -> T {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        self.0.lock().unwrap().push(dir);
        store
    }
}

/// Real redb stores (the legacy layout), each in its own temporary
/// directory.
#[derive(Default)]
pub struct RedbFactory {
    dirs: Dirs,
}

impl StoreFactory for RedbFactory {
    type S = RedbStore;
    fn make(&self) -> Arc<RedbStore> {
        self.dirs
            .open(|dir| Arc::new(RedbStore::open(dir).unwrap()))
    }
}

/// The log store (the embedded default), each in its own temporary
/// directory: with its background thread, as a serving carrier runs it
/// ([`LogFactory::default`]), or with none ([`LogFactory::thread_free`]).
#[derive(Default)]
pub struct LogFactory {
    thread_free: bool,
    dirs: Dirs,
}

impl LogFactory {
    /// Log stores with no background thread (the engine's thread-free
    /// harness).
    pub fn thread_free() -> LogFactory {
        LogFactory {
            thread_free: true,
            dirs: Dirs::default(),
        }
    }
}

impl StoreFactory for LogFactory {
    type S = LogStore;
    fn make(&self) -> Arc<LogStore> {
        let options = LogOptions {
            background: !self.thread_free,
            ..LogOptions::default()
        };
        self.dirs
            .open(|dir| Arc::new(LogStore::open_with(dir, options).unwrap()))
    }
}

/// Generates `mem`, `log` and `redb` tests for each generic test function
/// `fn name<F: StoreFactory>(stores: &F)`: `on_both_stores!(a, b)` runs
/// the log store with its background thread, `on_both_stores!(thread_free:
/// a, b)` without one.
#[macro_export]
macro_rules! on_both_stores {
    (thread_free: $($name:ident),* $(,)?) => {
        $crate::on_both_stores!(@log $crate::LogFactory::thread_free(); $($name),*);
    };
    (@log $log:expr; $($name:ident),*) => {
        $(
            mod $name {
                #[test]
                fn mem() {
                    super::$name(&$crate::MemFactory);
                }
                #[test]
                fn log() {
                    super::$name(&$log);
                }
                #[test]
                fn redb() {
                    super::$name(&$crate::RedbFactory::default());
                }
            }
        )*
    };
    ($($name:ident),* $(,)?) => {
        $crate::on_both_stores!(@log $crate::LogFactory::default(); $($name),*);
    };
}
