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

/// Defaults of `[transport]`, shared with the carrier: `rltp_quic`'s.
pub use rltp_quic::defaults::transport;

/// Happy eyeballs (`PROTOCOL.md` §5b): how long QUIC leads before TLS/TCP
/// starts beside it, 250 ms. A QUIC handshake on a path that carries UDP
/// completes within one or two round trips (well under 250 ms on most
/// paths); where UDP is dropped, nothing comes back, and the TLS/TCP
/// attempt starts after this instead of after the whole timeout. The
/// value of Chrome's and the MASQUE clients' races.
pub const HAPPY_EYEBALLS_DELAY: Duration = Duration::from_millis(250);

/// Once TLS/TCP has failed in a race, how much longer QUIC may take: 1 s,
/// some round trips of a slow path. A QUIC handshake that has not
/// completed by then is most likely lost to dropped UDP, where it would
/// fail only at its idle timeout (15 s): a carrier restarting behind such
/// a network is reached on the next attempt instead of 15 s later.
pub const RACE_GRACE: Duration = Duration::from_secs(1);

/// How long the winner of a race is remembered per server: 10 minutes.
/// While TLS/TCP is remembered, both start at once (no 250 ms lost at each
/// reconnection of a watch on a UDP-less network); after it, QUIC leads
/// again, so a network that carries UDP again is used as such.
pub const REMEMBER_WINNER: Duration = Duration::from_secs(600);
