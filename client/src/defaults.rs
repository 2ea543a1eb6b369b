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

/// Defaults of `[transport]` ([`crate::transport::Tuning`]: the carrier's
/// `[transport]` and [`crate::ConnectOptions::transport`]): quinn's own,
/// kept after measuring the alternatives with `carrier-bench
/// --transport-study` (BENCHMARKS.md "Transport settings",
/// `bench/results/transport-study.md`: ACK frequency at thresholds 8 and
/// 32, MTU discovery up to 65 527 bytes, and ACK frequency with it, each
/// on its own carrier with every connection set alike, 3 rounds of
/// scenario 1's cells against Redis). ACK frequency bought up to 9 % (8 ×
/// 32, threshold 8) or 20 % (64 × 4, threshold 32) and nothing at 1 × 256;
/// the larger MTU bound nothing. But a client that asks the carrier for
/// ACK frequency (quinn implements draft-ietf-quic-ack-frequency) did not
/// notice a carrier's shutdown within 20 s in the e2e test of an
/// always-on recipient across a restart (`an_always_on_recipient_*`:
/// 4 failures in 5 runs with it on at both ends, none with it on at the
/// carrier alone or off): a recipient that misses a restart misses its
/// deposits' pushes, which no throughput gain pays for. So ACK frequency
/// is off by default; an operator can turn it on for a carrier's own
/// side (`[transport] ack-eliciting-threshold`), where that test passes.
pub mod transport {
    /// ACK frequency off (`0`): the peer's own policy, an ACK every other
    /// packet (see above for why).
    pub const ACK_ELICITING_THRESHOLD: u32 = 0;
    /// With ACK frequency on, the longest the peer may hold an ACK: 25 ms,
    /// QUIC's own default max ACK delay (RFC 9000 §18.2), so loss recovery
    /// waits no longer than without the extension.
    pub const MAX_ACK_DELAY_MS: u64 = 25;
    /// QUIC's minimum, which every path carries.
    pub const INITIAL_MTU: u16 = 1_200;
    /// Probe for more.
    pub const MTU_DISCOVERY: bool = true;
    /// quinn's default upper bound: 1 500-byte Ethernet less IPv6 and UDP headers.
    pub const MTU_UPPER_BOUND: u16 = 1_452;
}
