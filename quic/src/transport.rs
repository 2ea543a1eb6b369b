//! QUIC per-packet settings that a carrier and its clients each apply to
//! their own endpoint (`[transport]` in the carrier's configuration,
//! `ConnectOptions::transport` in the client's): ACK frequency
//! and the MTU. They change what a packet costs, never what is admitted
//! or answered. One type, one home for the defaults
//! ([`crate::defaults::transport`]), the domains ([`Tuning::check`]) and
//! how each maps onto quinn ([`Tuning::apply`]).
//!
//! ACK frequency (draft-ietf-quic-ack-frequency) is asked of the *peer*:
//! a carrier with a threshold asks its clients to acknowledge its answers
//! less often, a client with one asks the carrier to acknowledge its
//! deposits less often. A peer without the extension ignores the request.

use crate::defaults::transport;
use std::ops::RangeInclusive;
use std::time::Duration;

/// QUIC's minimum datagram size (RFC 9000 §14) to the largest UDP payload.
pub const MTU_DOMAIN: RangeInclusive<u16> = 1_200..=65_527;

/// The domain of [`Tuning::max_ack_delay_ms`]: what
/// draft-ietf-quic-ack-frequency lets a peer be asked for (2^14 ms).
pub const MAX_ACK_DELAY_DOMAIN: RangeInclusive<u64> = 1..=16_383;

/// QUIC per-packet settings (module docs). `Default` is
/// [`crate::defaults::transport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct Tuning {
    /// ACK frequency: ask the peer to acknowledge only after this many
    /// ack-eliciting packets beyond the first (`0`: off, the peer's own
    /// policy, an ACK every other packet).
    pub ack_eliciting_threshold: u32,
    /// With `ack-eliciting-threshold` above 0: the longest the peer may
    /// delay an ACK, ms ([`MAX_ACK_DELAY_DOMAIN`]).
    pub max_ack_delay_ms: u64,
    /// The UDP payload size QUIC starts with, bytes ([`MTU_DOMAIN`]); a
    /// path that does not carry it loses the handshake, so raise it only
    /// where every path does (loopback, a jumbo-frame LAN).
    pub initial_mtu: u16,
    /// Whether QUIC probes for a larger MTU (DPLPMTUD, RFC 8899) up to
    /// `mtu-upper-bound`; a probe that is lost costs one packet and
    /// changes nothing.
    pub mtu_discovery: bool,
    /// The largest UDP payload MTU discovery tries, bytes ([`MTU_DOMAIN`],
    /// at least `initial-mtu`).
    pub mtu_upper_bound: u16,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            ack_eliciting_threshold: transport::ACK_ELICITING_THRESHOLD,
            max_ack_delay_ms: transport::MAX_ACK_DELAY_MS,
            initial_mtu: transport::INITIAL_MTU,
            mtu_discovery: transport::MTU_DISCOVERY,
            mtu_upper_bound: transport::MTU_UPPER_BOUND,
        }
    }
}

impl Tuning {
    /// Checks every setting against its domain.
    ///
    /// # Errors
    /// The first setting outside its domain: its key (as spelled in
    /// `[transport]`) and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (key, value) in [
            ("initial-mtu", self.initial_mtu),
            ("mtu-upper-bound", self.mtu_upper_bound),
        ] {
            if !MTU_DOMAIN.contains(&value) {
                return Err((
                    key,
                    format!(
                        "{value} is outside [{}, {}]",
                        MTU_DOMAIN.start(),
                        MTU_DOMAIN.end()
                    ),
                ));
            }
        }
        if self.mtu_upper_bound < self.initial_mtu {
            return Err(("mtu-upper-bound", "must be at least initial-mtu".into()));
        }
        if !MAX_ACK_DELAY_DOMAIN.contains(&self.max_ack_delay_ms) {
            return Err((
                "max-ack-delay-ms",
                format!(
                    "{} is outside [{}, {}]",
                    self.max_ack_delay_ms,
                    MAX_ACK_DELAY_DOMAIN.start(),
                    MAX_ACK_DELAY_DOMAIN.end()
                ),
            ));
        }
        Ok(())
    }

    /// Applies these settings to a quinn transport configuration (they are
    /// assumed [`Tuning::check`]ed).
    pub fn apply(&self, config: &mut quinn::TransportConfig) {
        config.initial_mtu(self.initial_mtu);
        config.mtu_discovery_config(self.mtu_discovery.then(|| {
            let mut mtu = quinn::MtuDiscoveryConfig::default();
            mtu.upper_bound(self.mtu_upper_bound);
            mtu
        }));
        config.ack_frequency_config((self.ack_eliciting_threshold > 0).then(|| {
            let mut ack = quinn::AckFrequencyConfig::default();
            ack.ack_eliciting_threshold(quinn::VarInt::from_u32(self.ack_eliciting_threshold))
                .max_ack_delay(Some(Duration::from_millis(self.max_ack_delay_ms)));
            ack
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_their_domains() {
        assert_eq!(Tuning::default().check(), Ok(()));
    }

    #[test]
    fn each_domain_is_checked_by_key() {
        let base = Tuning::default();
        for (tuning, key) in [
            (
                Tuning {
                    initial_mtu: 1_199,
                    ..base
                },
                "initial-mtu",
            ),
            (
                Tuning {
                    mtu_upper_bound: 65_528,
                    ..base
                },
                "mtu-upper-bound",
            ),
            (
                Tuning {
                    initial_mtu: 1_500,
                    mtu_upper_bound: 1_400,
                    ..base
                },
                "mtu-upper-bound",
            ),
            (
                Tuning {
                    max_ack_delay_ms: 0,
                    ..base
                },
                "max-ack-delay-ms",
            ),
            (
                Tuning {
                    max_ack_delay_ms: 16_384,
                    ..base
                },
                "max-ack-delay-ms",
            ),
        ] {
            assert_eq!(tuning.check().map_err(|(k, _)| k), Err(key), "{tuning:?}");
        }
        let widest = Tuning {
            initial_mtu: 65_527,
            mtu_upper_bound: 65_527,
            max_ack_delay_ms: 16_383,
            ..base
        };
        assert_eq!(widest.check(), Ok(()));
    }
}
