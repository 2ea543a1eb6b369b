//! Kill points: where the crash tests can stop the process (test hooks).

use crate::failure::lock;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The file-writing steps of the log store where the crash test
/// (`carrier/tests/store_crash.rs`; `upgrade-log` in
/// `storage/tests/log_store.rs`, where an upgrade runs) can kill the process: in the middle of a
/// snapshot, after a snapshot is durable and before older ones go, in the
/// middle of zero-filling a segment, after a new segment's header and
/// before its first record, in the middle of reclaiming segments, after a
/// compaction's copy is logged and before its commit, after a record
/// reached the file and before redb's commit and the sync, in recovery
/// after the new segment is made and before redb's commit, and in the
/// middle of an upgrade's log.
pub const KILL_POINTS: [&str; 9] = [
    "snapshot-chunk",
    "snapshot-durable",
    "spare-fill",
    "rotate-header",
    "reclaim",
    "compact-moved",
    "record-written",
    "open-new-segment",
    "upgrade-log",
];

static KILL_ARMED: AtomicBool = AtomicBool::new(false);
static KILL_AT: Mutex<Option<(&'static str, u64)>> = Mutex::new(None);

/// **Test hook, never for production**: the process aborts (no cleanup,
/// as a SIGKILL) at the `nth` pass through step `name` (one of
/// [`KILL_POINTS`]).
#[doc(hidden)]
pub fn arm_kill_point(name: &str, nth: u64) {
    if let Some(point) = KILL_POINTS.iter().find(|p| **p == name) {
        *lock(&KILL_AT) = Some((point, nth.max(1)));
        KILL_ARMED.store(true, Ordering::SeqCst);
    }
}

/// A kill point (see [`KILL_POINTS`]).
pub(crate) fn kill_point(name: &str) {
    if !KILL_ARMED.load(Ordering::Relaxed) {
        return;
    }
    let mut at = lock(&KILL_AT);
    if let Some((point, n)) = at.as_mut()
        && *point == name
    {
        *n -= 1;
        if *n == 0 {
            eprintln!("rltp-storage: kill point {name} reached; aborting");
            std::process::abort();
        }
    }
}
