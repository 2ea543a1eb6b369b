//! # rltp-client: the sender and recipient library of the RLTP carrier profile
//!
//! The async client of the wire profile (`PROTOCOL.md` §5–§10), over QUIC
//! (quinn) and TLS 1.3 (rustls), for senders and recipients.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rltp_client::ClientError> {
//! use rltp_client::{Client, ConnectOptions};
//! use rltp_client::tls::ServerTrust;
//! let pin = "sha256/…".parse().map_err(rltp_client::ClientError::from)?;
//! let client = Client::connect(&ConnectOptions::new("127.0.0.1:4433", ServerTrust::Pin(pin))).await?;
//! let declaration = client.declaration().await?;          // fetched, verified, accepted
//! println!("revision {}", declaration.declaration.revision());
//! # Ok(()) }
//! ```
//!
//! | module | what |
//! |---|---|
//! | [`Client`] (this module) | one connection, one stream per operation; every operation of `PROTOCOL.md` §7 |
//! | [`sender`] | §6.1 sender status and pre-transport reports, the retrying [`Sender::send`] |
//! | [`retry`] | the one retry driver: full-jitter backoff, reports on the clock, the give-up on its instant (`PROTOCOL.md` §9) |
//! | [`RecipientKeys`] | register, collect, watch and conclude, each with a fresh proof over a fresh challenge |
//! | [`net`], [`stream`], [`tls`], [`transport`] | frame I/O over an operation's stream on either binding (QUIC, or HTTP/2 over TLS/TCP: `PROTOCOL.md` §5b), the SPKI pin and CA trust modes and the client config, the `[transport]` tuning: `rltp_quic`'s, which the carrier's server shares |
//! | [`TransportChoice`] | QUIC, TLS/TCP, or both raced (happy eyeballs, the default) |
//! | [`clock`] | the wall clock for schedules the carrier judges by its clock, and the test clock hook |
//! | [`defaults`] | every operational constant, with its reason |
//!
//! - **One connection, one stream per operation**: every method opens a
//!   bidirectional stream, writes one request frame, finishes its side,
//!   and reads the answer. Methods take `&self`; many may run at once.
//! - **Sender**: [`Client::submit`], the pipelined [`Submitter`] /
//!   [`Client::submit_many`], [`Client::status`], and the retrying
//!   [`sender::Sender::send`] with §6.1 / §4.4 status reports.
//! - **Recipient**: [`Client::challenge`], [`Client::register`],
//!   [`Client::collect`], [`Client::watch`], [`Client::conclude`], all
//!   driven by [`RecipientKeys`].
//! - Refusals are values (verdicts), never `Err`: `Err` is for transport
//!   failures, closed stream errors ([`ClientError::Server`]) and
//!   protocol violations by the server.
//!
//! The connection carries no authority (§5a.5): every recipient operation
//! is authorized by its own fresh proof over a fresh challenge.
//!
//! What this crate does **not** do: it holds no store, runs no carrier,
//! reads no configuration file, parses no command line and installs no
//! log subscriber (it emits `tracing` events; the application chooses
//! where they go): its dependencies are the wire codec, the protocol
//! core, quinn, rustls and tokio. The command-line
//! client is `rltp-carrier`'s.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod clock;
mod connect;
pub mod defaults;
pub use rltp_quic::net;
mod recipient;
pub mod retry;
pub mod sender;
pub use rltp_quic::stream;
pub use rltp_quic::tls;
pub use rltp_quic::transport;

pub use connect::TransportChoice;
pub use recipient::{CollectPage, Delivered, RecipientKeys, RegisterOutcome, Watch, WatchEvent};
pub use retry::{
    AwaitingReason, Backoff, Finished, Link, RetryEvent, RetryPolicy, Schedule, Try, persist,
};
pub use rltp_quic::stream::Binding;
pub use sender::{FailReason, SendEvent, Sender, SenderStatus};

use crate::net::ReadError;
use crate::tls::{ServerTrust, TlsError};
use rltp_proofs::DepositId;
use rltp_proofs::declaration::{
    CarrierDeclaration, accept_carrier_declaration, parse_declaration, verify_declaration,
};
use rltp_proofs::json::Object;
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::proof::Purpose;
use rltp_quic::stream::{RecvHalf, SendHalf, StreamError, WriteError};
use rltp_wire::response::{self, ChallengeAnswer, ErrorAnswer, SubmitAnswer};
use rltp_wire::verdict::DepositStatus;
use rltp_wire::{self as wire, FrameError, Request};
use std::net::SocketAddr;
use std::time::Duration;

/// Why a client operation did not produce an answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server address could not be resolved.
    #[error("cannot resolve {0:?}")]
    Resolve(String),
    /// TLS configuration (pin, CA file) failed.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The connection could not be made or was lost (retriable).
    #[error("transport: {0}")]
    Transport(#[source] TransportError),
    /// No answer within the client's timeout (retriable).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The server answered with a closed stream error; `unavailable` is
    /// retriable, the others mean this client sent a bad frame.
    #[error("server error {}: {}", .0.code, .0.detail)]
    Server(ErrorAnswer),
    /// The server's answer violates the wire profile.
    #[error("protocol violation by the server: {0}")]
    Protocol(#[source] ProtocolError),
    /// The declaration did not parse, verify or pass the carrier role.
    #[error("declaration refused: {0}")]
    Declaration(#[source] DeclarationError),
    /// The TLS handshake failed (a pin or certificate that does not match
    /// the carrier's, [`HandshakeError::is_pin_mismatch`]): a
    /// configuration fault or a TLS-intercepting middlebox, never trusted
    /// and never retried.
    #[error("TLS handshake: {0}")]
    Handshake(#[source] HandshakeError),
    /// The sealed address challenge could not be used (`PROTOCOL.md` §8).
    #[error(transparent)]
    AddressChallenge(#[from] rltp_wire::address_challenge::AddressChallengeError),
    /// A proof could not be built.
    #[error("proof: {0}")]
    Proof(#[source] ProofError),
}

/// How a TLS handshake failed, by binding.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The QUIC handshake (`PROTOCOL.md` §5).
    #[error("quic: {0}")]
    Quic(#[source] quinn::ConnectionError),
    /// The TLS handshake over TCP (§5b; rustls's error inside).
    #[error("tls/tcp: {0}")]
    Tcp(#[source] std::io::Error),
}

impl HandshakeError {
    /// Whether the carrier's key is not the pinned one: another carrier,
    /// or a TLS-intercepting middlebox presenting its own certificate
    /// (`PROTOCOL.md` §5b): unreachable, never trusted.
    pub fn is_pin_mismatch(&self) -> bool {
        match self {
            HandshakeError::Quic(e) => e.to_string().contains(tls::PIN_MISMATCH),
            HandshakeError::Tcp(e) => e
                .get_ref()
                .is_some_and(|inner| inner.to_string().contains(tls::PIN_MISMATCH)),
        }
    }

    /// Whether an I/O error of a TLS connect is the handshake's (rustls
    /// refused or was refused), not the network's.
    pub(crate) fn is_tls(e: &std::io::Error) -> bool {
        e.get_ref()
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
    }
}

/// How the transport failed (each variant keeps quinn's, the socket's or
/// hyper's error as its source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No UDP socket could be opened for the client endpoint.
    #[error("cannot open a udp socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The connection attempt was refused before any packet was sent.
    #[error("{0}")]
    Connect(#[source] quinn::ConnectError),
    /// The connection failed or was lost.
    #[error("{0}")]
    Connection(#[source] quinn::ConnectionError),
    /// Writing to a stream failed.
    #[error("{}", lost(.0, matches!(.0, WriteError::Quic(quinn::WriteError::ConnectionLost(_)))))]
    Write(#[source] WriteError),
    /// Reading from a stream failed.
    #[error("{}", lost(.0, matches!(.0, StreamError::Quic(quinn::ReadError::ConnectionLost(_)))))]
    Read(#[source] StreamError),
    /// The TCP connection or its TLS layer failed (`PROTOCOL.md` §5b).
    #[error("tls/tcp: {0}")]
    Tcp(#[source] std::io::Error),
    /// The HTTP/2 connection or stream failed (§5b); GOAWAY from the
    /// carrier is [`ClientError::is_going_away`].
    #[error("http/2: {}", h2_text(.0))]
    H2(#[source] hyper::Error),
    /// The carrier turned the TLS/TCP connection away with GOAWAY before
    /// the request was sent (lame duck: §5b).
    #[error("http/2: going-away (GOAWAY)")]
    GoingAway,
    /// The retry driver holds no connection (a connection attempt failed).
    #[error("not connected")]
    NotConnected,
}

/// A stream error's text, with the connection's own error when the
/// connection was lost (quinn's says only "connection lost"; the reason —
/// e.g. `going-away` — is in its source).
fn lost(e: &(dyn std::error::Error + 'static), connection_lost: bool) -> String {
    match e.source().filter(|_| connection_lost) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// An HTTP/2 failure's text: `going-away (GOAWAY)` for the carrier's
/// GOAWAY (lame duck, shutdown: §5b), else the error and its causes.
fn h2_text(e: &hyper::Error) -> String {
    if stream::is_go_away(e) {
        "going-away (GOAWAY)".to_owned()
    } else {
        with_causes(e)
    }
}

/// `e` and its causes, `: `-separated (hyper's own text names only the
/// kind: "http2 error"; the cause says which, e.g. a GOAWAY).
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}

/// How the server's answer violates the wire profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// An answer frame or header did not decode (`rltp_wire`).
    #[error("{0}")]
    Frame(#[source] FrameError),
    /// An answer decoded but contradicts the request or the profile
    /// (named in the text).
    #[error("{0}")]
    Violation(String),
}

/// Why a fetched declaration was refused (parse ≠ verify ≠ accept, each
/// with its own typed error from `rltp_proofs::declaration`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeclarationError {
    /// Not a well-formed `registry-declaration/0.1`.
    #[error("parse: {0}")]
    Parse(#[source] rltp_proofs::declaration::DeclarationParseError),
    /// Its proof does not verify under its issuer.
    #[error("verify: {0}")]
    Verify(#[source] rltp_proofs::declaration::DeclarationVerifyError),
    /// It does not pass the carrier role.
    #[error("accept: {0}")]
    Accept(#[source] rltp_proofs::declaration::CarrierDeclarationError),
    /// It is signed by another issuer than the configured one.
    #[error("issuer {found} is not the configured {expected}")]
    ForeignIssuer {
        /// The issuer found (`did:key`).
        found: String,
        /// The issuer configured (`did:key`).
        expected: String,
    },
}

/// Why a proof could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    /// The field set does not fit the purpose (§5a.3 purpose matrix).
    #[error("{0}")]
    Build(#[source] rltp_proofs::proof::BuildError),
    /// The proof object could not be canonicalized for signing.
    #[error("{0}")]
    Sign(#[source] rltp_proofs::jcs::JcsError),
    /// `register` was asked with a purpose that is not register or rebind.
    #[error("{0} is not register or rebind")]
    NotSuccession(Purpose),
}

impl ClientError {
    /// A protocol violation described by `text`.
    pub(crate) fn violation(text: impl Into<String>) -> ClientError {
        ClientError::Protocol(ProtocolError::Violation(text.into()))
    }
}

impl ClientError {
    /// Whether retrying the same request later may succeed: transport
    /// failures, timeouts and `unavailable` (`PROTOCOL.md` §9).
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Transport(_) | ClientError::Timeout(_) => true,
            ClientError::Server(answer) => answer.code.retriable(),
            _ => false,
        }
    }

    /// Whether the carrier node closed the connection with
    /// [`rltp_wire::CloseCode::GoingAway`] (lame-duck mode, `PROTOCOL.md`
    /// §5): try the next configured server, or this one later.
    /// On TLS/TCP (§5b) that is HTTP/2 GOAWAY from the carrier.
    pub fn is_going_away(&self) -> bool {
        let closed = |e: &quinn::ConnectionError| {
            matches!(e, quinn::ConnectionError::ApplicationClosed(close)
                if rltp_wire::CloseCode::from_code(close.error_code.into_inner())
                    == Some(rltp_wire::CloseCode::GoingAway))
        };
        match self {
            ClientError::Transport(TransportError::Connection(e)) => closed(e),
            ClientError::Transport(TransportError::Write(WriteError::Quic(
                quinn::WriteError::ConnectionLost(e),
            ))) => closed(e),
            ClientError::Transport(TransportError::Read(StreamError::Quic(
                quinn::ReadError::ConnectionLost(e),
            ))) => closed(e),
            ClientError::Transport(TransportError::Read(e)) => e.is_h2_go_away(),
            ClientError::Transport(TransportError::H2(e)) => stream::is_go_away(e),
            ClientError::Transport(TransportError::GoingAway) => true,
            _ => false,
        }
    }

    /// Whether this is a failure to reach or keep the carrier.
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            ClientError::Transport(_) | ClientError::Timeout(_) | ClientError::Resolve(_)
        )
    }
}

impl From<quinn::ConnectionError> for ClientError {
    fn from(e: quinn::ConnectionError) -> ClientError {
        ClientError::Transport(TransportError::Connection(e))
    }
}

impl From<WriteError> for ClientError {
    fn from(e: WriteError) -> ClientError {
        ClientError::Transport(TransportError::Write(e))
    }
}

impl From<ReadError> for ClientError {
    fn from(e: ReadError) -> ClientError {
        match e {
            ReadError::Frame(f) => ClientError::from(f),
            ReadError::Stream(s) => ClientError::Transport(TransportError::Read(s)),
        }
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> ClientError {
        ClientError::Protocol(ProtocolError::Frame(e))
    }
}

impl From<DeclarationError> for ClientError {
    fn from(e: DeclarationError) -> ClientError {
        ClientError::Declaration(e)
    }
}

impl From<ProofError> for ClientError {
    fn from(e: ProofError) -> ClientError {
        ClientError::Proof(e)
    }
}

pub use defaults::{CLIENT_IDLE_TIMEOUT, KEEP_ALIVE};

/// Where and how to connect.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// `host:port` of the carrier.
    pub server: String,
    /// How the server certificate is trusted.
    pub trust: ServerTrust,
    /// TLS server name; default: the host part of `server` (any name
    /// works with a pin).
    pub server_name: Option<String>,
    /// Longest wait for a connection or an answer.
    pub timeout: Duration,
    /// How often to send a QUIC PING while the connection is otherwise
    /// quiet (`PROTOCOL.md` §5: the carrier closes a connection idle for
    /// its `idle-timeout-ms`); `None` sends none.
    pub keep_alive: Option<Duration>,
    /// QUIC per-packet settings of this client's endpoint (ACK frequency
    /// asked of the carrier, the MTU); default
    /// [`defaults::transport`].
    pub transport: transport::Tuning,
    /// Which binding to use: QUIC, TLS/TCP, or both raced (the default;
    /// `PROTOCOL.md` §5b).
    pub transport_choice: TransportChoice,
    /// `host:port` of the carrier's TLS/TCP listener; default: `server`
    /// (the same port number, as TCP: §5b "Naming an endpoint").
    pub tcp_server: Option<String>,
}

impl ConnectOptions {
    /// Options for `server` (`host:port`) trusted by `trust`, with a 30 s
    /// timeout and a keep-alive every [`KEEP_ALIVE`].
    pub fn new(server: impl Into<String>, trust: ServerTrust) -> ConnectOptions {
        ConnectOptions {
            server: server.into(),
            trust,
            server_name: None,
            timeout: Duration::from_secs(30),
            keep_alive: Some(KEEP_ALIVE),
            transport: transport::Tuning::default(),
            transport_choice: TransportChoice::default(),
            tcp_server: None,
        }
    }

    /// The same options on another binding choice.
    pub fn with_transport_choice(mut self, choice: TransportChoice) -> ConnectOptions {
        self.transport_choice = choice;
        self
    }

    /// The same options with the TLS/TCP listener at `server` (`host:port`).
    pub fn with_tcp_server(mut self, server: impl Into<String>) -> ConnectOptions {
        self.tcp_server = Some(server.into());
        self
    }

    /// `host:port` of the TLS/TCP listener.
    pub(crate) fn tcp_server(&self) -> &str {
        self.tcp_server.as_deref().unwrap_or(&self.server)
    }

    /// The TLS server name.
    pub(crate) fn tls_name(&self) -> &str {
        self.server_name.as_deref().unwrap_or_else(|| self.host())
    }

    /// The same options with other QUIC per-packet settings.
    pub fn with_transport(mut self, transport: transport::Tuning) -> ConnectOptions {
        self.transport = transport;
        self
    }

    /// The same options with another keep-alive interval (`None`: none).
    pub fn with_keep_alive(mut self, keep_alive: Option<Duration>) -> ConnectOptions {
        self.keep_alive = keep_alive;
        self
    }

    /// The same options with another timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> ConnectOptions {
        self.timeout = timeout;
        self
    }

    /// The same options with an explicit TLS server name.
    pub fn with_server_name(mut self, name: impl Into<String>) -> ConnectOptions {
        self.server_name = Some(name.into());
        self
    }

    fn host(&self) -> &str {
        let s = self.server.as_str();
        if let Some(rest) = s.strip_prefix('[') {
            return rest.split(']').next().unwrap_or(rest);
        }
        s.rsplit_once(':').map_or(s, |(host, _)| host)
    }
}

/// A fetched carrier declaration: the served bytes and the accepted value.
#[derive(Debug, Clone)]
pub struct FetchedDeclaration {
    /// The signed document as served (JCS).
    pub bytes: Vec<u8>,
    /// Parsed, verified under its issuer, accepted for the carrier role.
    pub declaration: CarrierDeclaration,
}

/// A connection to a carrier, on either binding.
#[derive(Debug, Clone)]
pub struct Client {
    conn: connect::Conn,
    timeout: Duration,
}

impl Client {
    /// Connects as `options.transport_choice` says: QUIC + TLS 1.3 (ALPN
    /// `rltp-carrier/1`), TLS 1.3/TCP + HTTP/2 (ALPN `h2`, `PROTOCOL.md`
    /// §5b), or both raced (happy eyeballs, the default).
    ///
    /// # Errors
    /// [`ClientError::Resolve`], [`ClientError::Tls`],
    /// [`ClientError::Handshake`] (a pin mismatch),
    /// [`ClientError::Transport`], [`ClientError::Timeout`]; with both
    /// raced, only when both failed.
    pub async fn connect(options: &ConnectOptions) -> Result<Client, ClientError> {
        let conn = connect::connect(options).await?;
        Ok(Client {
            conn,
            timeout: options.timeout,
        })
    }

    /// The binding this connection is on.
    pub fn binding(&self) -> Binding {
        self.conn.binding()
    }

    /// The underlying QUIC connection (QUIC only), for raw frames in
    /// conformance tests. Not needed otherwise: [`Client::open_raw`]
    /// serves both bindings.
    pub fn connection(&self) -> Option<&quinn::Connection> {
        match &self.conn {
            connect::Conn::Quic { connection, .. } => Some(connection),
            connect::Conn::Tcp(_) => None,
        }
    }

    /// The carrier's address.
    pub fn remote_address(&self) -> SocketAddr {
        match &self.conn {
            connect::Conn::Quic { connection, .. } => connection.remote_address(),
            connect::Conn::Tcp(tcp) => tcp.remote,
        }
    }

    /// Closes the connection without waiting (the next attempt connects
    /// afresh).
    pub fn close_now(&self) {
        if let connect::Conn::Quic { connection, .. } = &self.conn {
            connection.close(
                quinn::VarInt::from_u32(rltp_wire::CloseCode::NoError.code()),
                b"done",
            );
        }
        // HTTP/2: the connection task ends with the last handle.
    }

    /// Closes the connection and waits until the close is sent.
    pub async fn close(self) {
        self.close_now();
        if let connect::Conn::Quic { endpoint, .. } = &self.conn {
            endpoint.wait_idle().await;
        }
    }

    /// Opens an operation's stream on either binding: a bidirectional
    /// QUIC stream, or an HTTP/2 `POST` to the §5b path whose response
    /// body is read (its status must be 200). Raw: nothing is written.
    ///
    /// # Errors
    /// Transport errors; a status other than 200 is
    /// [`ClientError::Protocol`].
    pub async fn open_raw(&self) -> Result<(SendHalf, net::FrameReader), ClientError> {
        self.open_with(async |_| Ok(())).await
    }

    /// Opens a stream, and writes what `first` writes before waiting for
    /// the HTTP/2 response headers (the carrier answers them once it has
    /// the request).
    async fn open_with(
        &self,
        first: impl AsyncFnOnce(&mut SendHalf) -> Result<(), ClientError>,
    ) -> Result<(SendHalf, net::FrameReader), ClientError> {
        match &self.conn {
            connect::Conn::Quic { connection, .. } => {
                let (send, recv) = connection.open_bi().await?;
                let mut send = SendHalf::Quic(send);
                first(&mut send).await?;
                Ok((send, net::FrameReader::new(RecvHalf::Quic(recv))))
            }
            connect::Conn::Tcp(tcp) => {
                let (mut send, body) = stream::h2_channel();
                let mut request = hyper::Request::new(body);
                *request.method_mut() = hyper::Method::POST;
                *request.uri_mut() = tcp.uri.clone();
                let response = tcp.sender.clone().send_request(request);
                first(&mut send).await?;
                let response = match tokio::time::timeout(self.timeout, response).await {
                    Err(_) => return Err(ClientError::Timeout(self.timeout)),
                    Ok(Err(e)) => return Err(tcp.failure(e).await),
                    Ok(Ok(response)) => response,
                };
                if response.status() != hyper::StatusCode::OK {
                    return Err(ClientError::violation(format!(
                        "the carrier answered the request with http status {} (§5b: 200)",
                        response.status()
                    )));
                }
                Ok((
                    send,
                    net::FrameReader::new(RecvHalf::h2(response.into_body())),
                ))
            }
        }
    }

    /// Opens a stream and writes one request frame (the send side stays
    /// open only if `keep_open`); the answers are read in large chunks
    /// ([`net::FrameReader`]).
    async fn open(
        &self,
        request: &Request,
        body: &[u8],
        keep_open: bool,
    ) -> Result<(SendHalf, net::FrameReader), ClientError> {
        self.open_with(async |send| {
            match net::write_frame(send, &request.to_header(), body).await {
                // The server decided without reading the rest (a `submit`
                // above the s2 bound, a malformed frame): its answer follows.
                Err(e) if !e.is_stopped() => return Err(e.into()),
                _ => {}
            }
            if !keep_open {
                send.finish();
            }
            Ok(())
        })
        .await
    }

    /// One request → one answer header (no body expected), read by the
    /// strict reader.
    async fn call(&self, request: &Request, body: &[u8]) -> Result<Object, ClientError> {
        self.call_with(request, body, strict_answer).await
    }

    /// One request → one answer header (no body expected), read from its
    /// bytes by `read`.
    async fn call_with<T>(
        &self,
        request: &Request,
        body: &[u8],
        read: impl FnOnce(&[u8]) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let (_send, mut recv) = self.open(request, body, false).await?;
        let (answer, _) = read_answer(&mut recv, 0, self.timeout, read).await?;
        Ok(answer)
    }

    /// `declaration` (§4.4): fetches the served declaration, then parses,
    /// verifies (the proof must be by the document `issuer`) and accepts
    /// it for the carrier role (all seven constants in their §11 domains).
    ///
    /// # Errors
    /// [`ClientError::Declaration`] naming the failed step; transport errors.
    pub async fn declaration(&self) -> Result<FetchedDeclaration, ClientError> {
        let (_send, mut recv) = self.open(&Request::Declaration, b"", false).await?;
        let (header, bytes) =
            read_answer(&mut recv, wire::MAX_BODY_BYTES, self.timeout, strict_answer).await?;
        response::parse_declaration_header(&header)?;
        let declaration = accept_declaration(&bytes)?;
        Ok(FetchedDeclaration { bytes, declaration })
    }

    /// [`Client::declaration`], also requiring the issuer to be
    /// `expected` (the declaration key bound to `C` by configuration,
    /// `PROTOCOL.md` §3).
    ///
    /// # Errors
    /// As [`Client::declaration`]; a foreign issuer is
    /// [`ClientError::Declaration`].
    pub async fn declaration_from(
        &self,
        expected: &DidKey,
    ) -> Result<FetchedDeclaration, ClientError> {
        let fetched = self.declaration().await?;
        if fetched.declaration.issuer() != expected {
            return Err(DeclarationError::ForeignIssuer {
                found: fetched.declaration.issuer().to_did_key(),
                expected: expected.to_did_key(),
            }
            .into());
        }
        Ok(fetched)
    }

    /// `submit` (§5a.5): one sealed envelope into the queue of `rkid`.
    /// The answer carries the verdict and, for `admitted`/`duplicate`,
    /// the deposit id.
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Server`], [`ClientError::Protocol`].
    pub async fn submit(&self, rkid: &Rkid, envelope: &[u8]) -> Result<SubmitAnswer, ClientError> {
        let size = u32::try_from(envelope.len())
            .map_err(|_| ClientError::violation("envelope longer than 4 GiB"))?;
        let answer = self
            .call_with(&Request::Submit { rkid: *rkid, size }, envelope, |bytes| {
                SubmitAnswer::from_header_bytes(bytes)?.map_err(ClientError::Server)
            })
            .await?;
        check_deposit(&answer, envelope)?;
        Ok(answer)
    }

    /// Opens a pipelined `submit-stream`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn submitter(&self) -> Result<Submitter, ClientError> {
        let (send, recv) = self.open(&Request::SubmitStream, b"", true).await?;
        Ok(Submitter {
            writer: SubmitWriter { send },
            reader: SubmitReader {
                recv,
                timeout: self.timeout,
            },
        })
    }

    /// Submits every `(rkid, envelope)` on one pipelined stream, writing
    /// and reading concurrently; answers come back in order.
    ///
    /// # Errors
    /// As [`Submitter`]'s methods.
    pub async fn submit_many(
        &self,
        items: &[(Rkid, Vec<u8>)],
    ) -> Result<Vec<SubmitAnswer>, ClientError> {
        let (mut writer, mut reader) = self.submitter().await?.split();
        let write = async {
            for (rkid, envelope) in items {
                writer.send(rkid, envelope).await?;
            }
            writer.finish();
            Ok::<(), ClientError>(())
        };
        let read = async {
            let mut answers = Vec::with_capacity(items.len());
            for (_, envelope) in items {
                let answer = reader
                    .recv()
                    .await?
                    .ok_or_else(|| ClientError::violation("submit-stream ended early"))?;
                check_deposit(&answer, envelope)?;
                answers.push(answer);
            }
            Ok::<_, ClientError>(answers)
        };
        let (written, answers) = tokio::join!(write, read);
        let answers = answers?;
        written?;
        Ok(answers)
    }

    /// `status` (§5a.8, §6.1): `accepted`, `given-up` or `unknown`.
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Server`], [`ClientError::Protocol`].
    pub async fn status(
        &self,
        rkid: &Rkid,
        deposit: &DepositId,
    ) -> Result<DepositStatus, ClientError> {
        let header = self
            .call(
                &Request::Status {
                    rkid: *rkid,
                    deposit: *deposit,
                },
                b"",
            )
            .await?;
        Ok(response::parse_status_header(&header)?)
    }

    /// `challenge` (§5a.3): a challenge for `(rkid, purpose)`; for
    /// register/rebind it carries the address challenge sealed to `rkid`.
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Server`], [`ClientError::Protocol`].
    pub async fn challenge(
        &self,
        rkid: &Rkid,
        purpose: Purpose,
    ) -> Result<ChallengeAnswer, ClientError> {
        let header = self
            .call(
                &Request::Challenge {
                    rkid: *rkid,
                    purpose,
                },
                b"",
            )
            .await?;
        let answer = ChallengeAnswer::from_header(&header, rkid)?;
        if let ChallengeAnswer::Issued {
            address_challenge, ..
        } = &answer
            && address_challenge.is_some() != purpose.changes_succession()
        {
            return Err(ClientError::violation(format!(
                "addressChallenge presence does not fit purpose {purpose}"
            )));
        }
        Ok(answer)
    }
}

/// Parses, verifies and accepts a served declaration.
///
/// # Errors
/// [`ClientError::Declaration`].
pub fn accept_declaration(bytes: &[u8]) -> Result<CarrierDeclaration, ClientError> {
    let parsed = parse_declaration(bytes).map_err(DeclarationError::Parse)?;
    let verified = verify_declaration(parsed).map_err(DeclarationError::Verify)?;
    accept_carrier_declaration(&verified).map_err(|e| DeclarationError::Accept(e).into())
}

pub(crate) async fn resolve(server: &str) -> Result<SocketAddr, ClientError> {
    tokio::net::lookup_host(server)
        .await
        .map_err(|_| ClientError::Resolve(server.to_owned()))?
        .next()
        .ok_or_else(|| ClientError::Resolve(server.to_owned()))
}

/// Reads one answer frame within `timeout`: its header, from its bytes,
/// by `read` (which turns a closed stream error into
/// [`ClientError::Server`]), then its body of at most `max_body` bytes.
async fn read_answer<T>(
    recv: &mut net::FrameReader,
    max_body: usize,
    timeout: Duration,
    read: impl FnOnce(&[u8]) -> Result<T, ClientError>,
) -> Result<(T, Vec<u8>), ClientError> {
    let answer = async {
        let Some(prefix) = recv.prefix().await? else {
            return Err(ClientError::violation("the stream ended without an answer"));
        };
        let header = read(recv.header_bytes(prefix).await?)?;
        let body = recv.body(prefix, max_body).await?;
        Ok((header, body))
    };
    tokio::time::timeout(timeout, answer)
        .await
        .map_err(|_| ClientError::Timeout(timeout))?
}

/// An answer header by the strict reader; a closed stream error becomes
/// [`ClientError::Server`].
fn strict_answer(bytes: &[u8]) -> Result<Object, ClientError> {
    response::split_error(bytes)?.map_err(ClientError::Server)
}

fn check_deposit(answer: &SubmitAnswer, envelope: &[u8]) -> Result<(), ClientError> {
    match answer.deposit {
        Some(id) if id != DepositId::of(envelope) => Err(ClientError::violation(format!(
            "deposit id {} is not the digest of the submitted envelope",
            id.to_multibase()
        ))),
        _ => Ok(()),
    }
}

async fn write_stream_item(
    send: &mut SendHalf,
    rkid: &Rkid,
    envelope: &[u8],
) -> Result<(), ClientError> {
    if u32::try_from(envelope.len()).is_err() {
        return Err(ClientError::violation("envelope longer than 4 GiB"));
    }
    let mut frame = Vec::new();
    wire::encode_stream_item_into(rkid, envelope, &mut frame);
    send.write_all(&frame).await?;
    Ok(())
}

/// A pipelined `submit-stream` (`PROTOCOL.md` §6): write many
/// submissions with [`Submitter::send`], read their answers in the same
/// order with [`Submitter::recv`]. Interleave, [`Submitter::split`] the
/// two halves into two tasks, or use [`Client::submit_many`], so the
/// server's pipeline never stalls on unread answers.
#[derive(Debug)]
pub struct Submitter {
    writer: SubmitWriter,
    reader: SubmitReader,
}

/// The writing half of a [`Submitter`].
#[derive(Debug)]
pub struct SubmitWriter {
    send: SendHalf,
}

/// The reading half of a [`Submitter`].
#[derive(Debug)]
pub struct SubmitReader {
    /// Read in large chunks: many answers per quinn read.
    recv: net::FrameReader,
    timeout: Duration,
}

impl Submitter {
    /// Writes one submission.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn send(&mut self, rkid: &Rkid, envelope: &[u8]) -> Result<(), ClientError> {
        self.writer.send(rkid, envelope).await
    }

    /// Reads the next answer; see [`SubmitReader::recv`].
    ///
    /// # Errors
    /// As [`SubmitReader::recv`].
    pub async fn recv(&mut self) -> Result<Option<SubmitAnswer>, ClientError> {
        self.reader.recv().await
    }

    /// Says that no more submissions follow.
    pub fn finish(&mut self) {
        self.writer.finish();
    }

    /// The two halves, for a writer task and a reader task.
    pub fn split(self) -> (SubmitWriter, SubmitReader) {
        (self.writer, self.reader)
    }
}

impl SubmitWriter {
    /// Writes one submission.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn send(&mut self, rkid: &Rkid, envelope: &[u8]) -> Result<(), ClientError> {
        write_stream_item(&mut self.send, rkid, envelope).await
    }

    /// Says that no more submissions follow.
    pub fn finish(&mut self) {
        self.send.finish();
    }
}

impl SubmitReader {
    /// Reads the next answer, in submission order; `Ok(None)` once the
    /// server has answered everything (after the writer finished, or when
    /// the carrier stops reading at shutdown).
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Server`] (a malformed item ends
    /// the stream), [`ClientError::Protocol`].
    pub async fn recv(&mut self) -> Result<Option<SubmitAnswer>, ClientError> {
        let read = async {
            match self.recv.prefix().await? {
                None => Ok(None),
                Some(prefix) => {
                    let header = self.recv.header_bytes(prefix).await?;
                    let answer = SubmitAnswer::from_header_bytes(header)?;
                    let answer = answer.map_err(ClientError::Server)?;
                    self.recv.body(prefix, 0).await?;
                    Ok(Some(answer))
                }
            }
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| ClientError::Timeout(self.timeout))?
    }
}
