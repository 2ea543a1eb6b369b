//! The operational constants of what both ends share, each with its
//! reason (the carrier's own are in the server crate's `defaults`, the
//! client's in `rltp_client::defaults`). Protocol limits are not here: they
//! live beside their codecs in `rltp_wire`.

/// Bytes reserved ahead of a header or body before any of it arrives
/// (4 KiB): the buffer grows only with bytes received, so a peer that
/// announces a large body and sends nothing costs nothing (issue 6,
/// slowloris).
pub const FIRST_RESERVE: usize = 4_096;

/// Defaults of `[transport]` ([`crate::transport::Tuning`]: the carrier's
/// `[transport]` and the client's `ConnectOptions::transport`): quinn's own,
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
