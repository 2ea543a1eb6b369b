//! Every operational constant of the client library, in one place, each
//! with its reason and arithmetic (the carrier's own are in
//! `rltp_carrier::defaults`). Protocol limits are not here: they live
//! beside their codecs in `rltp_wire`.

use std::time::Duration;

/// How often a client connection sends a keep-alive (a QUIC PING) by
/// default ([`crate::ConnectOptions::keep_alive`]): every 5 s, a sixth of
/// the carrier's default idle timeout (30 s), so an idle watch session is
/// never closed for silence.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// A client connection that hears nothing from the carrier for this long
/// is lost (a carrier that crashed, a network that went away): 15 s =
/// three keep-alives unanswered. The carrier's own idle timeout still
/// applies; QUIC uses the smaller of the two.
pub const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// Backoff base: attempt 0 waits at most 250 ms (full jitter), long enough
/// for a restarting carrier to bind again, short enough to be unnoticed.
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);

/// Backoff ceiling: no wait is longer than 60 s; the doubling reaches it
/// at attempt 8 (250 ms × 2^8 = 64 s).
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);

/// How often a schedule on the wall clock is checked (the watch refresh,
/// `PROTOCOL.md` §10): every 30 s, against a 42 h refresh interval.
pub const POLL: Duration = Duration::from_secs(30);

/// How often under the test clock hook: 100 ms, since simulated days pass
/// in jumps.
pub const TEST_POLL: Duration = Duration::from_millis(100);

/// Bytes reserved ahead of a header or body before any of it arrives
/// (4 KiB): the buffer grows only with bytes received, so a peer that
/// announces a large body and sends nothing costs nothing (issue 6,
/// slowloris).
pub const FIRST_RESERVE: usize = 4_096;

/// Most bytes one read of a stream asks quinn for (64 KiB): a
/// [`crate::net::FrameReader`] takes whatever has arrived up to this, so a
/// pipelined burst of ~1 KiB submissions is one read, not three per item,
/// and what it holds ahead of the frame being parsed stays bounded.
pub const READ_CHUNK: usize = 65_536;

/// Defaults of `[transport]` ([`crate::transport::Tuning`], the carrier's `[transport]` and
/// [`crate::ConnectOptions::transport`]): quinn's
/// own, which every QUIC peer and path expects. Not yet measured against
/// the alternatives (ACK frequency threshold 8, a loopback-sized MTU; the
/// design study `perf-design.md` measured about 1 µs per request per side
/// saved by both together on loopback): change a default only with a
/// `carrier-bench` run that shows it.
pub mod transport {
    /// ACK frequency off (`0`): the peer's own policy.
    pub const ACK_ELICITING_THRESHOLD: u32 = 0;
    /// quinn's default max ACK delay, 25 ms (RFC 9000 §18.2).
    pub const MAX_ACK_DELAY_MS: u64 = 25;
    /// QUIC's minimum, which every path carries.
    pub const INITIAL_MTU: u16 = 1_200;
    /// Probe for more.
    pub const MTU_DISCOVERY: bool = true;
    /// quinn's default upper bound: 1 500-byte Ethernet less IPv6 and UDP headers.
    pub const MTU_UPPER_BOUND: u16 = 1_452;
}
