//! Retrying with honest reports on the clock (`PROTOCOL.md` §9, §4.4
//! guarantee 2, §6.1): one driver, [`persist`], for every client
//! operation — submit, challenge, register, collect, conclude, status,
//! declaration.
//!
//! - **Retriable means retried.** A retriable refusal (the four of
//!   `PROTOCOL.md` §9), a transport failure, a timeout and `unavailable`
//!   are retried after a full-jitter exponential [`Backoff`], on a fresh
//!   connection after a transport failure, until the give-up instant of
//!   the [`Schedule`]; any other error or verdict ends the operation.
//! - **A report within the status horizon, whatever the transport does.**
//!   From [`Schedule::started`] on, the driver reports its state
//!   (`awaiting-transport(…)`, from the closed set of §4.4) at least every
//!   half `status-horizon` — while a connection, a handshake, the
//!   declaration fetch or an attempt is in flight, and while it backs off
//!   — and at once whenever the state changes.
//! - **Every step is bounded by the give-up instant.** Connecting, the
//!   handshake, the declaration fetch and the attempt run under the same
//!   `select!` as the report ticker and the give-up timer: at the give-up
//!   instant whatever is in flight is dropped (its connection with it) and
//!   the driver answers [`Finished::GaveUp`] — on time, not one client
//!   timeout later. Each step is also bounded by the connection's own
//!   timeout ([`ConnectOptions::timeout`]).
//! - **Horizons in force.** A [`Schedule`] starts with the horizons it is
//!   given (the §11 floors, [`RetryPolicy::FALLBACK`], when nothing is
//!   known) and, with [`Schedule::learn`], adopts the carrier's declared
//!   ones as soon as its declaration has been fetched and verified (the
//!   first step of the first attempt that connects). A declared horizon is
//!   never shorter than the floor, so the switch only ever makes reports
//!   sparser and the give-up later — a report already scheduled is early,
//!   never late.
//!
//! Time is tokio's ([`tokio::time::Instant`]), so unit tests run it paused.

use super::{Client, ClientError, ConnectOptions, FetchedDeclaration};
use rltp_proofs::constants::CarrierConstants;
use std::cell::Cell;
use std::time::Duration;
use tokio::time::{Instant, sleep_until};

pub use crate::defaults::{BACKOFF_BASE, BACKOFF_CAP};

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

    /// Starts over (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The two declared horizons a retrying client honours (§4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retry until this long after the start (`give-up-horizon`).
    pub give_up_horizon: Duration,
    /// Report some state at least this often (`status-horizon`).
    pub status_horizon: Duration,
}

impl RetryPolicy {
    /// The horizons in force before a carrier's declaration is known: the
    /// §11 floors, `status-horizon` PT5S and `give-up-horizon` P1D, so the
    /// reports meet any carrier's declared horizon and nothing is given up
    /// before any carrier would (`PROTOCOL.md` §10).
    pub const FALLBACK: RetryPolicy = RetryPolicy {
        give_up_horizon: Duration::from_secs(86_400),
        status_horizon: Duration::from_secs(5),
    };

    /// The carrier's declared horizons.
    pub fn from_constants(constants: &CarrierConstants) -> RetryPolicy {
        RetryPolicy {
            give_up_horizon: Duration::from_millis(constants.give_up_horizon_ms()),
            status_horizon: Duration::from_millis(constants.status_horizon_ms()),
        }
    }
}

/// When a retrying operation reports and when it gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// The instant the operation began, for the caller (a command's start,
    /// so that time spent before the first attempt counts).
    pub started: Instant,
    /// The horizons in force.
    pub policy: RetryPolicy,
    /// The caller's own shorter give-up bound (`--give-up-after`).
    pub cap: Option<Duration>,
    /// Fetch the carrier's declaration on the first connection and adopt
    /// its horizons (keeping `cap`).
    pub learn: bool,
    /// Whether `policy` came from the carrier's declaration.
    pub declared: bool,
}

impl Schedule {
    /// A schedule from `started` with `policy` in force, giving up after
    /// at most `cap`.
    pub fn new(started: Instant, policy: RetryPolicy, cap: Option<Duration>) -> Schedule {
        Schedule {
            started,
            policy,
            cap,
            learn: false,
            declared: false,
        }
    }

    /// A schedule that reports at the §11 floor PT5S and gives up `after`
    /// `started` (the recipient commands).
    pub fn for_at_most(started: Instant, after: Duration) -> Schedule {
        Schedule::new(started, RetryPolicy::FALLBACK, Some(after))
    }

    /// The same schedule, adopting the declared horizons once known.
    pub fn learning(mut self) -> Schedule {
        self.learn = true;
        self
    }

    /// The give-up horizon in force: the policy's, shortened by `cap`.
    pub fn give_up_after(&self) -> Duration {
        let horizon = self.policy.give_up_horizon;
        self.cap.map_or(horizon, |cap| cap.min(horizon))
    }

    /// The instant the operation gives up.
    pub fn give_up_at(&self) -> Instant {
        self.started + self.give_up_after()
    }

    /// How often an unchanged state is reported again: half the
    /// `status-horizon` (at least 1 ms), so a report is never more than a
    /// horizon late even if one wake-up is.
    pub fn report_every(&self) -> Duration {
        (self.policy.status_horizon / 2).max(Duration::from_millis(1))
    }

    fn adopt(&mut self, declared: RetryPolicy) {
        self.policy = declared;
        self.declared = true;
    }
}

/// Why an operation has no outcome yet (§4.4, the closed set of
/// pre-transport reports; never a §6.1 trias state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AwaitingReason {
    /// `offline`: no network route to the carrier.
    Offline,
    /// `transport-unreachable`: the carrier did not answer.
    TransportUnreachable,
    /// `carrier-refused-retriable`: a retriable refusal (§5a.5, §5a.3).
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

    /// Whether the carrier could not be reached at all (the `3` exit
    /// status of the commands), as opposed to refusing retriably.
    pub const fn is_unreachable(self) -> bool {
        !matches!(self, AwaitingReason::CarrierRefusedRetriable)
    }
}

impl std::fmt::Display for AwaitingReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "awaiting-transport({})", self.as_str())
    }
}

/// What one attempt of an operation came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Try<T, R> {
    /// An outcome the caller keeps (a success or a final refusal).
    Done(T),
    /// A retriable refusal `R`: retry after a backoff.
    Again(R),
}

/// How a retrying operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished<T> {
    /// Its outcome.
    Done(T),
    /// The give-up instant came first; the state it was in.
    GaveUp(AwaitingReason),
}

impl<T> Finished<T> {
    /// The outcome, if it was reached.
    pub fn done(self) -> Option<T> {
        match self {
            Finished::Done(t) => Some(t),
            Finished::GaveUp(_) => None,
        }
    }
}

/// What [`persist`] tells its caller as it goes, each as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryEvent<R> {
    /// Attempt `number` (from 1) is starting.
    Attempt {
        /// 1 for the first attempt.
        number: u32,
    },
    /// The carrier's declaration was fetched and verified; these horizons
    /// are in force from now on (a [`Schedule::learning`] schedule).
    Declared(RetryPolicy),
    /// The attempt met this retriable refusal.
    Refused(R),
    /// The attempt failed in transport (retriable); for people.
    Failed(String),
    /// A report: no outcome yet, for this reason.
    Report(AwaitingReason),
    /// Waiting this long before the next attempt.
    Backoff(Duration),
    /// The link moved to the next configured server (`host:port`): the
    /// last one failed in transport or was going away (`PROTOCOL.md` §5).
    Moved(String),
    /// The link connected to `server` on `binding` (`PROTOCOL.md` §5b:
    /// which binding won the race).
    Connected {
        /// `host:port`.
        server: String,
        /// QUIC or TLS/TCP.
        binding: crate::Binding,
    },
}

/// A connection to one carrier that is made when needed and made again
/// after a transport failure; it also keeps the carrier's declaration
/// once fetched.
///
/// **Several servers** ([`Link::with_alternates`]): the nodes of one
/// carrier, tried in order. After a transport failure — a node in
/// lame-duck mode closing with `going-away` among them — the link moves to
/// the next one at once, without a backoff, until every server has failed
/// once since the last answer; then [`persist`] backs off as for one
/// server. Each move forgets the declaration, so the next attempt fetches
/// and verifies the new node's.
#[derive(Debug)]
pub struct Link {
    /// Never empty.
    servers: Vec<ConnectOptions>,
    current: usize,
    /// Servers that may still be tried before a backoff.
    untried: usize,
    client: Option<Client>,
    declaration: Option<FetchedDeclaration>,
    /// The connection has been announced ([`RetryEvent::Connected`]).
    announced: bool,
}

impl Link {
    /// A link to the carrier at `options` (not yet connected).
    pub fn new(options: ConnectOptions) -> Link {
        Link {
            servers: vec![options],
            current: 0,
            untried: 1,
            client: None,
            declaration: None,
            announced: false,
        }
    }

    /// A link over an existing connection.
    pub fn with_client(options: ConnectOptions, client: Client) -> Link {
        Link {
            client: Some(client),
            ..Link::new(options)
        }
    }

    /// The same link with more servers to move to, in order, after the
    /// first (see the type's docs).
    pub fn with_alternates(mut self, more: impl IntoIterator<Item = ConnectOptions>) -> Link {
        self.servers.extend(more);
        self.untried = self.servers.len();
        self
    }

    /// Where it connects now.
    pub fn options(&self) -> &ConnectOptions {
        &self.servers[self.current % self.servers.len()]
    }

    /// Every server it may connect to, in order.
    pub fn servers(&self) -> &[ConnectOptions] {
        &self.servers
    }

    /// After a transport failure: moves to the next server. Returns
    /// whether the next attempt should go at once (a server not yet
    /// tried since the last answer) rather than after a backoff.
    fn move_on(&mut self) -> bool {
        self.untried = self.untried.saturating_sub(1);
        if self.servers.len() < 2 {
            self.untried = 1;
            return false;
        }
        self.forget();
        self.declaration = None;
        self.current = (self.current + 1) % self.servers.len();
        if self.untried == 0 {
            self.untried = self.servers.len();
            return false;
        }
        true
    }

    /// An answer came: every server may be tried again before a backoff.
    fn answered(&mut self) {
        self.untried = self.servers.len();
    }

    /// Says once per connection which server and binding it is on
    /// ([`RetryEvent::Connected`]).
    fn announce<R>(&mut self, on_event: &mut impl FnMut(RetryEvent<R>)) {
        if let Some(client) = self.client.as_ref().filter(|_| !self.announced) {
            self.announced = true;
            on_event(RetryEvent::Connected {
                server: self.options().server.clone(),
                binding: client.binding(),
            });
        }
    }

    /// The current connection, if any.
    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    /// The carrier's declaration, once fetched by a learning schedule.
    pub fn declaration(&self) -> Option<&FetchedDeclaration> {
        self.declaration.as_ref()
    }

    /// Drops the connection (the next attempt connects afresh).
    pub fn forget(&mut self) {
        self.announced = false;
        if let Some(client) = self.client.take() {
            client.close_now();
        }
    }

    /// Closes the connection, if any, and waits until the close is sent.
    pub async fn close(mut self) {
        if let Some(client) = self.client.take() {
            client.close().await;
        }
    }

    async fn connected(&mut self) -> Result<&Client, ClientError> {
        if self.client.is_none() {
            self.client = Some(Client::connect(self.options()).await?);
        }
        self.client
            .as_ref()
            .ok_or_else(|| ClientError::Transport(super::TransportError::NotConnected))
    }
}

/// One attempt: connect if needed, fetch the declaration if asked and not
/// yet held (its horizons go to `learned`), then `op`. After a transport
/// failure the connection is dropped and the network is probed for the
/// report's reason, inside the attempt, so a slow name lookup delays no
/// report.
async fn attempt_once<T, R>(
    link: &mut Link,
    learn: bool,
    learned: &Cell<Option<RetryPolicy>>,
    op: &mut impl AsyncFnMut(&Client) -> Result<Try<T, R>, ClientError>,
) -> (Result<Try<T, R>, ClientError>, AwaitingReason) {
    let result = async {
        if learn && link.declaration.is_none() {
            let fetched = link.connected().await?.declaration().await?;
            learned.set(Some(RetryPolicy::from_constants(
                fetched.declaration.constants(),
            )));
            link.declaration = Some(fetched);
        }
        let client = link.connected().await?;
        op(client).await
    }
    .await;
    let mut reason = AwaitingReason::TransportUnreachable;
    if let Err(e) = &result
        && e.is_transport()
    {
        link.forget();
        if network_unreachable(&link.options().server).await {
            reason = AwaitingReason::Offline;
        }
    }
    (result, reason)
}

/// Runs `op` over `link` until it has an outcome, retrying retriable
/// refusals and transport failures with [`Backoff`], reporting on the
/// clock of `schedule` and giving up at its give-up instant (see the
/// module docs). Every event goes to `on_event` as it happens.
///
/// # Errors
/// Only for faults that retrying cannot cure: a protocol violation by the
/// server, a closed stream error other than `unavailable`, a failed TLS
/// handshake (a wrong pin), a declaration that does not verify, a proof
/// that cannot be built.
pub async fn persist<T, R: Clone>(
    link: &mut Link,
    schedule: &mut Schedule,
    mut op: impl AsyncFnMut(&Client) -> Result<Try<T, R>, ClientError>,
    mut on_event: impl FnMut(RetryEvent<R>),
) -> Result<Finished<T>, ClientError> {
    let mut awaiting = AwaitingReason::TransportUnreachable;
    let mut reported: Option<AwaitingReason> = None;
    let mut next_report = schedule.started + schedule.report_every();
    let mut backoff = Backoff::new();
    let mut number = 0u32;
    let learned = Cell::new(None);
    let adopt = |schedule: &mut Schedule, on_event: &mut dyn FnMut(RetryEvent<R>)| {
        if let Some(policy) = learned.take() {
            schedule.adopt(policy);
            on_event(RetryEvent::Declared(policy));
        }
    };
    loop {
        if Instant::now() >= schedule.give_up_at() {
            link.forget();
            return Ok(Finished::GaveUp(awaiting));
        }
        number = number.saturating_add(1);
        on_event(RetryEvent::Attempt { number });
        // The attempt, under the report ticker and the give-up timer.
        let outcome = {
            let learn = schedule.learn;
            let attempt = attempt_once(link, learn, &learned, &mut op);
            tokio::pin!(attempt);
            loop {
                let give_up_at = schedule.give_up_at();
                tokio::select! {
                    outcome = &mut attempt => break Some(outcome),
                    () = sleep_until(next_report) => {
                        adopt(schedule, &mut on_event);
                        on_event(RetryEvent::Report(awaiting));
                        reported = Some(awaiting);
                        next_report = Instant::now() + schedule.report_every();
                    }
                    () = sleep_until(give_up_at) => {
                        adopt(schedule, &mut on_event);
                        if Instant::now() < schedule.give_up_at() {
                            continue;
                        }
                        break None;
                    }
                }
            }
        };
        adopt(schedule, &mut on_event);
        link.announce(&mut on_event);
        let Some((result, reason)) = outcome else {
            link.forget();
            return Ok(Finished::GaveUp(awaiting));
        };
        let mut at_once = false;
        match result {
            Ok(Try::Done(t)) => return Ok(Finished::Done(t)),
            Ok(Try::Again(refusal)) => {
                link.answered();
                on_event(RetryEvent::Refused(refusal));
                awaiting = AwaitingReason::CarrierRefusedRetriable;
            }
            Err(e) if e.is_retriable() || e.is_transport() => {
                tracing::debug!(error = %e, going_away = e.is_going_away(), "attempt failed");
                on_event(RetryEvent::Failed(e.to_string()));
                awaiting = reason;
                if e.is_transport() {
                    let before = link.current;
                    at_once = link.move_on();
                    if link.current != before {
                        on_event(RetryEvent::Moved(link.options().server.clone()));
                    }
                }
            }
            Err(e) => return Err(e),
        }
        if reported != Some(awaiting) {
            on_event(RetryEvent::Report(awaiting));
            reported = Some(awaiting);
            next_report = Instant::now() + schedule.report_every();
        }
        let now = Instant::now();
        let give_up_at = schedule.give_up_at();
        if now >= give_up_at {
            link.forget();
            return Ok(Finished::GaveUp(awaiting));
        }
        if at_once {
            continue;
        }
        let delay = backoff.next_delay(&mut rand::rng()).min(give_up_at - now);
        on_event(RetryEvent::Backoff(delay));
        let wake = now + delay;
        loop {
            tokio::select! {
                () = sleep_until(wake) => break,
                () = sleep_until(next_report) => {
                    on_event(RetryEvent::Report(awaiting));
                    next_report = Instant::now() + schedule.report_every();
                }
            }
        }
    }
}

/// Whether the OS has no route to `server` (offline): a UDP `connect`
/// fails at once with no route. DNS failure counts as offline too.
pub async fn network_unreachable(server: &str) -> bool {
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
        backoff.reset();
        assert!(backoff.next_delay(&mut rng) <= Backoff::ceiling(0));
    }

    #[test]
    fn schedules_cap_the_give_up_and_report_at_half_the_horizon() {
        let start = Instant::now();
        let s = Schedule::new(start, RetryPolicy::FALLBACK, Some(Duration::from_secs(10)));
        assert_eq!(s.give_up_at(), start + Duration::from_secs(10));
        assert_eq!(s.report_every(), Duration::from_millis(2_500));
        let mut learning = Schedule::new(start, RetryPolicy::FALLBACK, None).learning();
        assert_eq!(learning.give_up_after(), Duration::from_secs(86_400));
        learning.adopt(RetryPolicy {
            give_up_horizon: Duration::from_secs(14 * 86_400),
            status_horizon: Duration::from_secs(30),
        });
        assert!(learning.declared);
        assert_eq!(learning.report_every(), Duration::from_secs(15));
        assert_eq!(learning.give_up_after(), Duration::from_secs(14 * 86_400));
        assert_eq!(
            Schedule::for_at_most(start, Duration::from_secs(60)).give_up_at(),
            start + Duration::from_secs(60)
        );
    }

    fn unreachable_link() -> (std::net::UdpSocket, Link) {
        // A bound loopback port where nothing speaks QUIC.
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let options = ConnectOptions::new(
            socket.local_addr().unwrap().to_string(),
            crate::tls::ServerTrust::Pin(crate::tls::SpkiFingerprint([0; 32])),
        )
        .with_timeout(Duration::from_secs(30))
        // One handshake stuck until its timeout: QUIC alone (raced, a
        // refused TLS/TCP would end each attempt after its grace).
        .with_transport_choice(crate::TransportChoice::Quic);
        (socket, Link::new(options))
    }

    /// A carrier that never answers, with a client timeout (30 s) far
    /// longer than the give-up bound (7 s): the first report comes within
    /// half the horizon, every gap is at most half the horizon, and the
    /// operation gives up exactly at its instant, not a timeout later.
    #[tokio::test(start_paused = true)]
    async fn reports_come_on_the_clock_and_the_give_up_is_on_time() {
        crate::tls::install_crypto_provider();
        let (_socket, mut link) = unreachable_link();
        let start = Instant::now();
        let mut schedule =
            Schedule::new(start, RetryPolicy::FALLBACK, Some(Duration::from_secs(7)));
        let mut events = Vec::new();
        let finished = persist(
            &mut link,
            &mut schedule,
            async |client: &Client| -> Result<Try<(), ()>, ClientError> {
                client.declaration().await.map(|_| Try::Done(()))
            },
            |e| events.push((Instant::now() - start, e)),
        )
        .await
        .unwrap();
        let ended = Instant::now() - start;
        assert_eq!(
            finished,
            Finished::GaveUp(AwaitingReason::TransportUnreachable)
        );
        assert_eq!(ended, Duration::from_secs(7), "gave up on the instant");
        let reports: Vec<Duration> = events
            .iter()
            .filter(|(_, e)| matches!(e, RetryEvent::Report(_)))
            .map(|(at, _)| *at)
            .collect();
        assert_eq!(
            reports,
            [Duration::from_millis(2_500), Duration::from_millis(5_000)],
            "{events:?}"
        );
        assert_eq!(
            events[0],
            (Duration::ZERO, RetryEvent::Attempt { number: 1 })
        );
        assert!(link.client().is_none(), "the stuck connection is dropped");
    }

    /// Three servers: after each transport failure the link moves on at
    /// once, until every server has failed once since the last answer;
    /// then the driver backs off. An answer (a retriable refusal) resets
    /// the round. Each move forgets the connection's declaration.
    #[test]
    fn a_link_moves_through_its_servers_then_backs_off() {
        let options = |server: &str| {
            ConnectOptions::new(
                server,
                crate::tls::ServerTrust::Pin(crate::tls::SpkiFingerprint([0; 32])),
            )
        };
        let mut link = Link::new(options("a:1")).with_alternates([options("b:1"), options("c:1")]);
        let servers: Vec<&str> = link.servers().iter().map(|o| o.server.as_str()).collect();
        assert_eq!(servers, ["a:1", "b:1", "c:1"]);
        let mut seen = vec![link.options().server.clone()];
        let mut at_once = Vec::new();
        for _ in 0..4 {
            at_once.push(link.move_on());
            seen.push(link.options().server.clone());
        }
        assert_eq!(seen, ["a:1", "b:1", "c:1", "a:1", "b:1"]);
        assert_eq!(at_once, [true, true, false, true]);
        link.answered();
        assert_eq!(
            [link.move_on(), link.move_on(), link.move_on()],
            [true, true, false]
        );
        // One server: a failure always backs off.
        let mut one = Link::new(options("a:1"));
        assert_eq!([one.move_on(), one.move_on()], [false, false]);
        assert_eq!(one.options().server, "a:1");
    }
}
