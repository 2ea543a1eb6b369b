//! The test clock hook both ends read (`PROTOCOL.md` §11), **tests only**:
//! when [`TEST_CLOCK_ENV`] names a file, every clock reading of a carrier
//! and of a client adds the decimal millisecond offset it holds, so a test
//! moves both through simulated days together.

use std::path::Path;

/// The environment variable of the test clock hook (tests only), shared
/// by the carrier and its clients: one file moves both.
pub const TEST_CLOCK_ENV: &str = "RLTP_TEST_CLOCK_FILE";

/// A decimal millisecond count from the first line of `path` (the test
/// hook's offset file; the carrier's high-water file has the same first
/// line).
pub fn read_ms(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}
