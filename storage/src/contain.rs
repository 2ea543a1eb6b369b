//! Containing the storage engine's panics on damaged data.
//!
//! redb treats some impossible page contents as a bug and panics
//! (`entered unreachable code`) instead of returning an error. Nothing is
//! lost by that, but the message names neither the file nor the way back.
//! [`contain`] runs a step that may meet damaged pages (opening the store,
//! the integrity check), turns such a panic into
//! [`OpenError::Damaged`] naming what was being done, and keeps the
//! panic's default report (message and backtrace) off stderr while it
//! runs: the error says it all.

use crate::OpenError;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Set while [`contain`] runs on this thread.
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Wraps the process's panic hook once: silent on a thread inside
/// [`contain`], the previous hook everywhere else.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CONTAINED.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs `step`; a panic inside it becomes [`OpenError::Damaged`]
/// (`what`: what was being done, for the message), as `step`'s error type.
///
/// # Errors
/// `step`'s own errors, and the contained panic.
pub(crate) fn contain<R, E: From<OpenError>>(
    what: &str,
    step: impl FnOnce() -> Result<R, E>,
) -> Result<R, E> {
    install_hook();
    let outer = CONTAINED.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(step));
    CONTAINED.with(|c| c.set(outer));
    result.unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        Err(OpenError::Damaged(format!(
            "{what}: the storage engine stopped on damaged data ({message}); \
             the index file is damaged"
        ))
        .into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreResult;

    #[test]
    #[allow(clippy::panic)]
    fn a_panic_becomes_a_damaged_error_naming_the_step() {
        let result: StoreResult<()> = contain("opening the store in /x", || {
            panic!("internal error: entered unreachable code")
        });
        let message = result.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("opening the store in /x")
                && message.contains("entered unreachable code"),
            "{message}"
        );
        assert!(matches!(contain("ok", || StoreResult::Ok(5)), Ok(5)));
    }
}
