//! The retrying sender (`PROTOCOL.md` §9, §5a.5, §6.1, §4.4
//! `status-horizon`).
//!
//! [`Sender::send`] submits one envelope until it has a §6.1 state:
//!
//! | carrier verdict / condition | sender status |
//! |---|---|
//! | `admitted`, `duplicate` | `accepted` |
//! | `refused(no-such-queue)` | `failed(unroutable)` |
//! | `refused(bounds)` | `failed(oversize)` |
//! | retriable refusal | report `awaiting-transport(carrier-refused-retriable)`, retry |
//! | carrier unreachable | report `awaiting-transport(transport-unreachable)`, retry |
//! | no network route | report `awaiting-transport(offline)`, retry |
//! | `give-up-horizon` passed since the first attempt | `failed(expired-by-adapter-policy)` |
//!
//! Retries wait with full-jitter exponential backoff ([`Backoff`]).
//! Reports go to the caller's callback as [`SendEvent`]s, at least once
//! every half `status-horizon` while no state is reached, so a submission
//! is never un-described for a whole `status-horizon` (§4.4).

use super::{Client, ClientError, ConnectOptions};
use crate::engine::verdict::SubmitVerdict;
use crate::wire::response::ErrorCode;
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::multikey::Rkid;
use rltp_storage::DepositId;
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;

/// Backoff base: attempt 0 waits at most this long.
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Backoff ceiling: no wait is longer.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);

/// Full-jitter exponential backoff (`PROTOCOL.md` §9): attempt *n* (from
/// 0) waits a uniformly random time in `[0, min(60 s, 250 ms · 2^n)]`.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    attempt: u32,
}

impl Backoff {
    /// A fresh backoff (next wait is attempt 0's).
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// The upper bound of attempt `n`'s wait: `min(60 s, 250 ms · 2^n)`.
    pub fn ceiling(n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
        BACKOFF_BASE.saturating_mul(factor).min(BACKOFF_CAP)
    }

    /// The next wait, drawn from `rng`; advances the attempt.
    pub fn next_delay<R: rand::Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        use rand::RngExt as _;
        let ceiling = Backoff::ceiling(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        let ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rng.random_range(0..=ms))
    }
}

/// The two declared horizons a sender honours (§4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retry until this long after the first attempt (`give-up-horizon`).
    pub give_up_horizon: Duration,
    /// Report some state at least this often (`status-horizon`).
    pub status_horizon: Duration,
}

impl RetryPolicy {
    /// The carrier's declared horizons.
    pub fn from_constants(constants: &CarrierConstants) -> RetryPolicy {
        RetryPolicy {
            give_up_horizon: Duration::from_millis(constants.give_up_horizon_ms()),
            status_horizon: Duration::from_millis(constants.status_horizon_ms()),
        }
    }
}

/// Why a submission has no §6.1 state yet (§6.1, the closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AwaitingReason {
    /// `offline`: no network route to the carrier.
    Offline,
    /// `transport-unreachable`: the carrier did not answer.
    TransportUnreachable,
    /// `carrier-refused-retriable`: a retriable refusal (§5a.5).
    CarrierRefusedRetriable,
}

impl AwaitingReason {
    /// The spelling inside `awaiting-transport(…)`.
    pub const fn as_str(self) -> &'static str {
        match self {
            AwaitingReason::Offline => "offline",
            AwaitingReason::TransportUnreachable => "transport-unreachable",
            AwaitingReason::CarrierRefusedRetriable => "carrier-refused-retriable",
        }
    }
}

/// §6.1 sender failure reasons this sender can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailReason {
    /// `unroutable`: `refused(no-such-queue)`.
    Unroutable,
    /// `oversize`: `refused(bounds)`.
    Oversize,
    /// `expired-by-adapter-policy`: the give-up horizon passed (or the
    /// carrier gave the deposit up).
    ExpiredByAdapterPolicy,
}

impl FailReason {
    /// The spelling inside `failed(…)`.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailReason::Unroutable => "unroutable",
            FailReason::Oversize => "oversize",
            FailReason::ExpiredByAdapterPolicy => "expired-by-adapter-policy",
        }
    }
}

/// A sender's report: a §6.1 state (`accepted`, `failed(…)`) or a
/// pre-transport report (`awaiting-transport(…)`, never a trias state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderStatus {
    /// `awaiting-transport(reason)`.
    AwaitingTransport(AwaitingReason),
    /// `accepted`: the carrier holds the deposit durably.
    Accepted {
        /// The deposit id (for `status`).
        deposit: DepositId,
    },
    /// `failed(reason)`.
    Failed(FailReason),
}

impl SenderStatus {
    /// Whether this is a §6.1 state (the sender stops).
    pub fn is_final(&self) -> bool {
        !matches!(self, SenderStatus::AwaitingTransport(_))
    }

    /// The §6.1 mapping of a non-retriable verdict; `None` for retriable
    /// ones (§5a.5: "not yet a status").
    pub fn of_verdict(verdict: SubmitVerdict, deposit: Option<DepositId>) -> Option<SenderStatus> {
        match (verdict, deposit) {
            (SubmitVerdict::Admitted | SubmitVerdict::Duplicate, Some(deposit)) => {
                Some(SenderStatus::Accepted { deposit })
            }
            (SubmitVerdict::NoSuchQueue, _) => Some(SenderStatus::Failed(FailReason::Unroutable)),
            (SubmitVerdict::Bounds, _) => Some(SenderStatus::Failed(FailReason::Oversize)),
            _ => None,
        }
    }
}

impl fmt::Display for SenderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SenderStatus::AwaitingTransport(r) => write!(f, "awaiting-transport({})", r.as_str()),
            SenderStatus::Accepted { .. } => f.write_str("accepted"),
            SenderStatus::Failed(r) => write!(f, "failed({})", r.as_str()),
        }
    }
}

/// What [`Sender::send`] tells its caller as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendEvent {
    /// Attempt `number` (from 1) is starting.
    Attempt {
        /// 1 for the first attempt.
        number: u32,
    },
    /// The carrier answered this verdict.
    Verdict(SubmitVerdict),
    /// A report (pre-transport or final).
    Report(SenderStatus),
    /// Waiting this long before the next attempt.
    Backoff(Duration),
}

/// A sender bound to one carrier; it connects lazily and reconnects after
/// transport failures.
#[derive(Debug)]
pub struct Sender {
    options: ConnectOptions,
    client: Option<Client>,
}

impl Sender {
    /// A sender for the carrier at `options`.
    pub fn new(options: ConnectOptions) -> Sender {
        Sender {
            options,
            client: None,
        }
    }

    /// A sender over an existing connection.
    pub fn with_client(options: ConnectOptions, client: Client) -> Sender {
        Sender {
            options,
            client: Some(client),
        }
    }

    async fn client(&mut self) -> Result<&Client, ClientError> {
        if self.client.is_none() {
            self.client = Some(Client::connect(&self.options).await?);
        }
        self.client
            .as_ref()
            .ok_or_else(|| ClientError::Transport("not connected".into()))
    }

    async fn attempt(
        &mut self,
        rkid: &Rkid,
        envelope: &[u8],
    ) -> Result<super::response::SubmitAnswer, ClientError> {
        let result = match self.client().await {
            Ok(client) => client.submit(rkid, envelope).await,
            Err(e) => Err(e),
        };
        // A body over the frame bound never reached s2; for the sender it
        // is the same fact as `refused(bounds)`: `failed(oversize)`
        // (`PROTOCOL.md` §9).
        let result = match result {
            Err(ClientError::Server(e)) if e.code == ErrorCode::FrameTooLarge => {
                Ok(super::response::SubmitAnswer {
                    verdict: SubmitVerdict::Bounds,
                    deposit: None,
                })
            }
            other => other,
        };
        if result.as_ref().is_err_and(ClientError::is_transport) {
            self.client = None;
        }
        result
    }

    /// Submits `envelope` to the queue of `rkid` until it has a §6.1
    /// state, retrying retriable refusals and transport failures with
    /// [`Backoff`] until `policy.give_up_horizon` has passed since the
    /// first attempt. Every event goes to `on_event`.
    ///
    /// # Errors
    /// Only for faults that retrying cannot cure: a protocol violation by
    /// the server, a closed stream error other than `unavailable`, a TLS
    /// configuration error.
    pub async fn send(
        &mut self,
        rkid: &Rkid,
        envelope: &[u8],
        policy: RetryPolicy,
        mut on_event: impl FnMut(SendEvent),
    ) -> Result<SenderStatus, ClientError> {
        let start = Instant::now();
        let give_up_at = start + policy.give_up_horizon;
        let report_every = (policy.status_horizon / 2).max(Duration::from_millis(1));
        let mut next_report = start + report_every;
        let mut awaiting = AwaitingReason::TransportUnreachable;
        let mut reported: Option<AwaitingReason> = None;
        let mut backoff = Backoff::new();
        let mut number = 0u32;
        loop {
            number = number.saturating_add(1);
            on_event(SendEvent::Attempt { number });
            // The attempt, with heartbeat reports while it is in flight.
            let outcome = {
                let server = self.options.server.clone();
                let attempt = self.attempt(rkid, envelope);
                tokio::pin!(attempt);
                loop {
                    tokio::select! {
                        outcome = &mut attempt => break outcome,
                        _ = tokio::time::sleep_until(next_report) => {
                            on_event(SendEvent::Report(SenderStatus::AwaitingTransport(awaiting)));
                            reported = Some(awaiting);
                            next_report = Instant::now() + report_every;
                        }
                    }
                }
                .map_err(|e| (e, server))
            };
            match outcome {
                Ok(answer) => {
                    on_event(SendEvent::Verdict(answer.verdict));
                    if let Some(status) = SenderStatus::of_verdict(answer.verdict, answer.deposit) {
                        on_event(SendEvent::Report(status));
                        return Ok(status);
                    }
                    awaiting = AwaitingReason::CarrierRefusedRetriable;
                }
                Err((e, server)) if e.is_retriable() || e.is_transport() => {
                    tracing::debug!(error = %e, "submission attempt failed");
                    awaiting = if network_unreachable(&server).await {
                        AwaitingReason::Offline
                    } else {
                        AwaitingReason::TransportUnreachable
                    };
                }
                Err((e, _)) => return Err(e),
            }
            if reported != Some(awaiting) {
                on_event(SendEvent::Report(SenderStatus::AwaitingTransport(awaiting)));
                reported = Some(awaiting);
                next_report = Instant::now() + report_every;
            }
            let now = Instant::now();
            if now >= give_up_at {
                let status = SenderStatus::Failed(FailReason::ExpiredByAdapterPolicy);
                on_event(SendEvent::Report(status));
                return Ok(status);
            }
            let delay = backoff.next_delay(&mut rand::rng()).min(give_up_at - now);
            on_event(SendEvent::Backoff(delay));
            let wake = now + delay;
            while Instant::now() < wake {
                if next_report <= wake {
                    tokio::time::sleep_until(next_report).await;
                    on_event(SendEvent::Report(SenderStatus::AwaitingTransport(awaiting)));
                    next_report = Instant::now() + report_every;
                } else {
                    tokio::time::sleep_until(wake).await;
                }
            }
        }
    }
}

/// Whether the OS has no route to `server` (offline): a UDP `connect`
/// fails at once with no route. DNS failure counts as offline too.
async fn network_unreachable(server: &str) -> bool {
    let Ok(mut addrs) = tokio::net::lookup_host(server).await else {
        return true;
    };
    let Some(addr) = addrs.next() else {
        return true;
    };
    let bind: std::net::SocketAddr = if addr.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    match std::net::UdpSocket::bind(bind).and_then(|s| s.connect(addr)) {
        Ok(()) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::NetworkUnreachable
                | std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::AddrNotAvailable
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_ceilings_follow_protocol_9() {
        let ms = |d: Duration| d.as_millis();
        assert_eq!(ms(Backoff::ceiling(0)), 250);
        assert_eq!(ms(Backoff::ceiling(1)), 500);
        assert_eq!(ms(Backoff::ceiling(5)), 8_000);
        assert_eq!(ms(Backoff::ceiling(7)), 32_000);
        assert_eq!(ms(Backoff::ceiling(8)), 60_000);
        assert_eq!(ms(Backoff::ceiling(40)), 60_000);
        let mut backoff = Backoff::new();
        let mut rng = rand::rng();
        for n in 0..12 {
            let d = backoff.next_delay(&mut rng);
            assert!(d <= Backoff::ceiling(n), "attempt {n}: {d:?}");
        }
    }

    #[test]
    fn statuses_are_spelled_as_6_1() {
        let id = DepositId::of(b"x");
        let cases = [
            (SubmitVerdict::Admitted, Some("accepted")),
            (SubmitVerdict::Duplicate, Some("accepted")),
            (SubmitVerdict::NoSuchQueue, Some("failed(unroutable)")),
            (SubmitVerdict::Bounds, Some("failed(oversize)")),
            (SubmitVerdict::AdmissionResource, None),
            (SubmitVerdict::QueueSaturated, None),
            (SubmitVerdict::Capacity, None),
        ];
        for (verdict, expected) in cases {
            let status = SenderStatus::of_verdict(verdict, Some(id)).map(|s| s.to_string());
            assert_eq!(status.as_deref(), expected, "{verdict}");
        }
        assert_eq!(
            SenderStatus::AwaitingTransport(AwaitingReason::CarrierRefusedRetriable).to_string(),
            "awaiting-transport(carrier-refused-retriable)"
        );
        assert_eq!(
            SenderStatus::Failed(FailReason::ExpiredByAdapterPolicy).to_string(),
            "failed(expired-by-adapter-policy)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unreachable_carrier_reports_within_the_horizon_then_gives_up() {
        // A loopback port with nothing listening: every attempt times out.
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let options = ConnectOptions::new(
            addr.to_string(),
            crate::tls::ServerTrust::Pin(crate::tls::SpkiFingerprint([0; 32])),
        )
        .with_timeout(Duration::from_secs(2));
        let mut sender = Sender::new(options);
        let policy = RetryPolicy {
            give_up_horizon: Duration::from_secs(20),
            status_horizon: Duration::from_secs(5),
        };
        let start = Instant::now();
        let mut reports = Vec::new();
        let status = sender
            .send(&Rkid::from_bytes([9; 32]), b"{}", policy, |event| {
                if let SendEvent::Report(s) = event {
                    reports.push((Instant::now() - start, s));
                }
            })
            .await
            .unwrap();
        assert_eq!(
            status,
            SenderStatus::Failed(FailReason::ExpiredByAdapterPolicy)
        );
        let (first_at, first) = reports[0];
        assert!(
            first_at <= policy.status_horizon,
            "first report at {first_at:?}"
        );
        assert_eq!(
            first,
            SenderStatus::AwaitingTransport(AwaitingReason::TransportUnreachable)
        );
        for pair in reports.windows(2) {
            assert!(
                pair[1].0 - pair[0].0 <= policy.status_horizon,
                "{reports:?}"
            );
        }
        drop(socket);
    }
}
