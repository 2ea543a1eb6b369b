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
//! | the give-up instant passed | `failed(expired-by-adapter-policy)` |
//!
//! The retrying, the reports on the clock and the give-up instant are the
//! client library's one driver ([`super::retry::persist`]): a report within
//! the status horizon in force whatever the transport is doing, and the
//! give-up on its instant even with an attempt in flight.
//! [`Sender::send_on`] takes a [`Schedule`] that started when the caller
//! did (the command's start) and may learn the carrier's declared
//! horizons on the first connection.

use super::retry::{self, Finished, Link, RetryEvent, Schedule, Try};
use super::{Client, ClientError, ConnectOptions};
use rltp_proofs::DepositId;
use rltp_proofs::multikey::Rkid;
use rltp_wire::response::ErrorCode;
use rltp_wire::verdict::SubmitVerdict;
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;

pub use super::retry::{AwaitingReason, Backoff, RetryPolicy};

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
    /// The carrier's declaration was fetched and verified: its horizons
    /// (shortened by the caller's cap) are in force from now on.
    Policy(RetryPolicy),
    /// The carrier answered this verdict.
    Verdict(SubmitVerdict),
    /// An attempt failed in transport (it is retried); for people.
    Failed(String),
    /// A report (pre-transport or final).
    Report(SenderStatus),
    /// Waiting this long before the next attempt.
    Backoff(Duration),
    /// Moved to the next configured server (`host:port`, [`Link`]).
    Moved(String),
    /// Connected to `server` (`host:port`) on `binding` (`PROTOCOL.md` §5b).
    Connected {
        /// `host:port`.
        server: String,
        /// QUIC or TLS/TCP.
        binding: crate::Binding,
    },
}

/// A sender bound to one carrier; it connects lazily and reconnects after
/// transport failures.
#[derive(Debug)]
pub struct Sender {
    link: Link,
}

impl Sender {
    /// A sender for the carrier at `options`.
    pub fn new(options: ConnectOptions) -> Sender {
        Sender {
            link: Link::new(options),
        }
    }

    /// A sender over `link` (e.g. several servers, [`Link::with_alternates`]).
    pub fn over(link: Link) -> Sender {
        Sender { link }
    }

    /// A sender over an existing connection.
    pub fn with_client(options: ConnectOptions, client: Client) -> Sender {
        Sender {
            link: Link::with_client(options, client),
        }
    }

    /// Its link (the connection and the declaration, once fetched).
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// Closes the connection, if any.
    pub async fn close(self) {
        self.link.close().await;
    }

    /// Submits `envelope` to the queue of `rkid` until it has a §6.1
    /// state, with `policy`'s horizons from now on ([`Sender::send_on`]).
    ///
    /// # Errors
    /// As [`Sender::send_on`].
    pub async fn send(
        &mut self,
        rkid: &Rkid,
        envelope: &[u8],
        policy: RetryPolicy,
        on_event: impl FnMut(SendEvent),
    ) -> Result<SenderStatus, ClientError> {
        let mut schedule = Schedule::new(Instant::now(), policy, None);
        self.send_on(rkid, envelope, &mut schedule, on_event).await
    }

    /// Submits `envelope` to the queue of `rkid` until it has a §6.1
    /// state, retrying retriable refusals and transport failures with
    /// [`Backoff`] until `schedule`'s give-up instant, then
    /// `failed(expired-by-adapter-policy)`. Every event goes to
    /// `on_event` as it happens; a report comes at least every half
    /// status horizon in force while no state is reached.
    ///
    /// # Errors
    /// Only for faults that retrying cannot cure: a protocol violation by
    /// the server, a closed stream error other than `unavailable`, a
    /// failed TLS handshake, a declaration that does not verify (nothing
    /// is submitted to such a carrier).
    pub async fn send_on(
        &mut self,
        rkid: &Rkid,
        envelope: &[u8],
        schedule: &mut Schedule,
        mut on_event: impl FnMut(SendEvent),
    ) -> Result<SenderStatus, ClientError> {
        let finished = retry::persist(
            &mut self.link,
            schedule,
            async |client: &Client| {
                let answer = match client.submit(rkid, envelope).await {
                    // A body over the frame bound never reached s2; for the
                    // sender it is the same fact as `refused(bounds)`:
                    // `failed(oversize)` (`PROTOCOL.md` §9).
                    Err(ClientError::Server(e)) if e.code == ErrorCode::FrameTooLarge => {
                        super::response::SubmitAnswer {
                            verdict: SubmitVerdict::Bounds,
                            deposit: None,
                        }
                    }
                    other => other?,
                };
                if answer.verdict.retriable() {
                    return Ok(Try::Again(answer.verdict));
                }
                match SenderStatus::of_verdict(answer.verdict, answer.deposit) {
                    Some(status) => Ok(Try::Done((answer.verdict, status))),
                    None => Err(ClientError::violation(format!(
                        "{} without a deposit id",
                        answer.verdict
                    ))),
                }
            },
            |event| {
                on_event(match event {
                    RetryEvent::Attempt { number } => SendEvent::Attempt { number },
                    RetryEvent::Declared(policy) => SendEvent::Policy(policy),
                    RetryEvent::Refused(verdict) => SendEvent::Verdict(verdict),
                    RetryEvent::Failed(text) => SendEvent::Failed(text),
                    RetryEvent::Report(reason) => {
                        SendEvent::Report(SenderStatus::AwaitingTransport(reason))
                    }
                    RetryEvent::Backoff(d) => SendEvent::Backoff(d),
                    RetryEvent::Moved(server) => SendEvent::Moved(server),
                    RetryEvent::Connected { server, binding } => {
                        SendEvent::Connected { server, binding }
                    }
                });
            },
        )
        .await?;
        let status = match finished {
            Finished::Done((verdict, status)) => {
                on_event(SendEvent::Verdict(verdict));
                status
            }
            Finished::GaveUp(_) => SenderStatus::Failed(FailReason::ExpiredByAdapterPolicy),
        };
        on_event(SendEvent::Report(status));
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A carrier that never answers, a client timeout (30 s) longer than
    /// the give-up bound, a schedule that wants the declaration: the
    /// fallback horizon is in force, every report is on time, and the
    /// give-up comes on its instant with `failed(expired-by-adapter-policy)`.
    #[tokio::test(start_paused = true)]
    async fn unreachable_carrier_reports_within_the_horizon_then_gives_up() {
        crate::tls::install_crypto_provider();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let options = ConnectOptions::new(
            addr.to_string(),
            crate::tls::ServerTrust::Pin(crate::tls::SpkiFingerprint([0; 32])),
        )
        // A stuck QUIC handshake alone (raced, a refused TLS/TCP would end
        // each attempt after its grace).
        .with_transport_choice(crate::TransportChoice::Quic);
        let mut sender = Sender::new(options);
        let start = Instant::now();
        let mut schedule =
            Schedule::new(start, RetryPolicy::FALLBACK, Some(Duration::from_secs(20))).learning();
        let mut reports = Vec::new();
        let status = sender
            .send_on(&Rkid::from_bytes([9; 32]), b"{}", &mut schedule, |event| {
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
        assert!(!schedule.declared);
        let horizon = RetryPolicy::FALLBACK.status_horizon;
        let (first_at, first) = reports[0];
        assert_eq!(first_at, horizon / 2, "first report at {first_at:?}");
        assert_eq!(
            first,
            SenderStatus::AwaitingTransport(AwaitingReason::TransportUnreachable)
        );
        for pair in reports.windows(2) {
            assert!(pair[1].0 - pair[0].0 <= horizon / 2, "{reports:?}");
        }
        let (last_at, last) = *reports.last().unwrap();
        assert_eq!(last, status);
        assert_eq!(last_at, Duration::from_secs(20), "on the instant");
        drop(socket);
    }
}
