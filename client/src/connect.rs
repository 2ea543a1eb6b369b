//! Reaching a carrier over either binding (`PROTOCOL.md` §5 QUIC, §5b
//! TLS/TCP with HTTP/2), and racing the two (happy eyeballs).
//!
//! - [`TransportChoice::Quic`] / [`TransportChoice::Tcp`]: that binding
//!   only.
//! - [`TransportChoice::Auto`] (the default): start QUIC; if its handshake
//!   has not completed within [`crate::defaults::HAPPY_EYEBALLS_DELAY`]
//!   (or failed at once), start TLS/TCP beside it; the first to complete
//!   wins and the other is dropped. The winner is remembered per server
//!   for [`crate::defaults::REMEMBER_WINNER`]: while TLS/TCP is
//!   remembered, both start at once (QUIC is still tried, so a network
//!   that lets UDP through again is noticed); after it, QUIC leads again.
//!   Only when both fail is the failure reported, a TLS handshake failure
//!   (a pin mismatch: a TLS-intercepting middlebox) before any other; once
//!   TLS/TCP has failed, QUIC gets [`crate::defaults::RACE_GRACE`] more,
//!   not its whole timeout (where UDP is dropped it only fails at the end
//!   of it; the retry driver tries both again).
//!
//! Both bindings use the same trust ([`ServerTrust`]: the same SPKI pin),
//! so falling back is no downgrade (§5b).

use crate::defaults::{CLIENT_IDLE_TIMEOUT, HAPPY_EYEBALLS_DELAY, RACE_GRACE, REMEMBER_WINNER};
use crate::tls::{self, TlsError};
use crate::{ClientError, ConnectOptions, HandshakeError, TransportError, resolve};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rltp_quic::stream::{Binding, ChannelBody};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Which binding a client may use (`--transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportChoice {
    /// QUIC only (`PROTOCOL.md` §5).
    Quic,
    /// TLS 1.3/TCP with HTTP/2 only (§5b).
    Tcp,
    /// Both, raced (module docs).
    #[default]
    Auto,
}

impl TransportChoice {
    /// The spellings, in order: `quic`, `tcp`, `auto`.
    pub const ALL: [TransportChoice; 3] = [
        TransportChoice::Quic,
        TransportChoice::Tcp,
        TransportChoice::Auto,
    ];

    /// Its spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportChoice::Quic => "quic",
            TransportChoice::Tcp => "tcp",
            TransportChoice::Auto => "auto",
        }
    }
}

impl std::fmt::Display for TransportChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TransportChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<TransportChoice, String> {
        TransportChoice::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("{s:?} is not quic, tcp or auto"))
    }
}

/// An established connection of either binding.
#[derive(Debug, Clone)]
pub(crate) enum Conn {
    /// QUIC: the endpoint (its UDP socket) and the connection.
    Quic {
        endpoint: quinn::Endpoint,
        connection: quinn::Connection,
    },
    /// TLS/TCP with HTTP/2.
    Tcp(TcpConn),
}

/// An HTTP/2 connection over TLS/TCP: the request sender (one `POST` per
/// operation) and the task driving the connection (aborted with the last
/// handle).
#[derive(Debug, Clone)]
pub(crate) struct TcpConn {
    pub(crate) sender: hyper::client::conn::http2::SendRequest<ChannelBody>,
    pub(crate) remote: SocketAddr,
    /// The URI of every request: `https://<server>` + [`rltp_quic::stream::H2_PATH`].
    pub(crate) uri: hyper::Uri,
    pub(crate) _task: Arc<AbortOnDrop>,
    /// Set when the connection has ended: `true` when the carrier ended
    /// it (GOAWAY, or its orderly close), `false` on an error.
    pub(crate) ended: tokio::sync::watch::Receiver<Option<bool>>,
}

impl TcpConn {
    /// The error of a request that failed: `going-away` when the carrier
    /// turned the connection away (GOAWAY before the request was sent,
    /// which hyper reports as a closed connection: the connection's end
    /// says which, waited for up to [`ENDED_WAIT`]).
    pub(crate) async fn failure(&self, e: hyper::Error) -> ClientError {
        if (e.is_canceled() || e.is_closed()) && !rltp_quic::stream::is_go_away(&e) {
            let mut ended = self.ended.clone();
            let by_carrier =
                tokio::time::timeout(ENDED_WAIT, ended.wait_for(Option::is_some)).await;
            if matches!(by_carrier, Ok(Ok(ended)) if *ended == Some(true)) {
                return ClientError::Transport(TransportError::GoingAway);
            }
        }
        ClientError::Transport(TransportError::H2(e))
    }
}

/// How long a failed request waits to learn how its connection ended.
const ENDED_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Aborts the HTTP/2 connection task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Conn {
    /// The binding it is on.
    pub(crate) fn binding(&self) -> Binding {
        match self {
            Conn::Quic { .. } => Binding::Quic,
            Conn::Tcp(_) => Binding::Tcp,
        }
    }
}

/// Connects as `options.transport_choice` says (module docs).
pub(crate) async fn connect(options: &ConnectOptions) -> Result<Conn, ClientError> {
    match options.transport_choice {
        TransportChoice::Quic => connect_quic(options).await,
        TransportChoice::Tcp => connect_tcp(options).await,
        TransportChoice::Auto => race(options).await,
    }
}

/// Happy eyeballs (module docs).
async fn race(options: &ConnectOptions) -> Result<Conn, ClientError> {
    let head_start = if remembered(&options.server) == Some(Binding::Tcp) {
        std::time::Duration::ZERO
    } else {
        HAPPY_EYEBALLS_DELAY
    };
    let quic = connect_quic(options);
    tokio::pin!(quic);
    let early = tokio::select! {
        result = &mut quic => Some(result),
        () = tokio::time::sleep(head_start) => None,
    };
    let won = match early {
        Some(Ok(conn)) => Ok(conn),
        Some(Err(quic_error)) => {
            tracing::debug!(error = %quic_error, "quic failed at once: trying tls/tcp");
            connect_tcp(options)
                .await
                .map_err(|tcp_error| worse(quic_error, tcp_error))
        }
        None => {
            tracing::debug!(
                delay_ms = head_start.as_millis(),
                "quic not connected yet: starting tls/tcp beside it"
            );
            let tcp = connect_tcp(options);
            tokio::pin!(tcp);
            tokio::select! {
                result = &mut quic => match result {
                    Ok(conn) => Ok(conn),
                    Err(quic_error) => tcp.await.map_err(|tcp_error| worse(quic_error, tcp_error)),
                },
                result = &mut tcp => match result {
                    Ok(conn) => Ok(conn),
                    // QUIC gets a last grace, not its whole timeout: where
                    // UDP is dropped it would only fail after it.
                    Err(tcp_error) => match tokio::time::timeout(RACE_GRACE, quic).await {
                        Ok(result) => result.map_err(|quic_error| worse(quic_error, tcp_error)),
                        Err(_) => Err(tcp_error),
                    },
                },
            }
        }
    };
    if let Ok(conn) = &won {
        remember(&options.server, conn.binding());
        tracing::debug!(binding = %conn.binding(), server = %options.server, "connected");
    }
    won
}

/// Of two failures, the one to report: a TLS handshake failure (a pin
/// mismatch names a middlebox or another carrier) before a transport one;
/// else QUIC's.
fn worse(quic: ClientError, tcp: ClientError) -> ClientError {
    match (&quic, &tcp) {
        (ClientError::Handshake(_), _) => quic,
        (_, ClientError::Handshake(_)) => tcp,
        _ => quic,
    }
}

/// The winners of recent races, by server (module docs).
static WINNERS: Mutex<Option<HashMap<String, (Binding, Instant)>>> = Mutex::new(None);

fn remembered(server: &str) -> Option<Binding> {
    let winners = WINNERS.lock().unwrap_or_else(PoisonError::into_inner);
    winners
        .as_ref()?
        .get(server)
        .filter(|(_, at)| at.elapsed() < REMEMBER_WINNER)
        .map(|(binding, _)| *binding)
}

fn remember(server: &str, binding: Binding) {
    let mut winners = WINNERS.lock().unwrap_or_else(PoisonError::into_inner);
    let winners = winners.get_or_insert_with(HashMap::new);
    winners.retain(|_, (_, at)| at.elapsed() < REMEMBER_WINNER);
    winners.insert(server.to_owned(), (binding, Instant::now()));
}

/// QUIC + TLS 1.3, ALPN `rltp-carrier/1`.
async fn connect_quic(options: &ConnectOptions) -> Result<Conn, ClientError> {
    let addr = resolve(&options.server).await?;
    let rustls_config = tls::rustls_client_config_for(&options.trust, Binding::Quic)?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(rustls_config)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    options.transport.apply(&mut transport);
    transport
        .keep_alive_interval(options.keep_alive)
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(CLIENT_IDLE_TIMEOUT)
                .map_err(|e| TlsError::Config(e.to_string()))?,
        ))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0));
    config.transport_config(Arc::new(transport));
    let bind: SocketAddr = if addr.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let mut endpoint = quinn::Endpoint::client(bind)
        .map_err(|e| ClientError::Transport(TransportError::Socket(e)))?;
    endpoint.set_default_client_config(config);
    let connecting = endpoint
        .connect(addr, options.tls_name())
        .map_err(|e| ClientError::Transport(TransportError::Connect(e)))?;
    let connection = tokio::time::timeout(options.timeout, connecting)
        .await
        .map_err(|_| ClientError::Timeout(options.timeout))?
        .map_err(|e| {
            if is_quic_handshake_failure(&e) {
                ClientError::Handshake(HandshakeError::Quic(e))
            } else {
                ClientError::from(e)
            }
        })?;
    Ok(Conn::Quic {
        endpoint,
        connection,
    })
}

/// Whether a connection failed in the TLS handshake: a QUIC crypto error
/// (codes `0x100`–`0x1ff`, RFC 9000 §20.1) raised locally (our verifier
/// refused the certificate) or by the carrier.
fn is_quic_handshake_failure(e: &quinn::ConnectionError) -> bool {
    let crypto = |code: quinn::TransportErrorCode| (0x100..0x200).contains(&u64::from(code));
    match e {
        quinn::ConnectionError::TransportError(t) => crypto(t.code),
        quinn::ConnectionError::ConnectionClosed(c) => crypto(c.error_code),
        _ => false,
    }
}

/// TCP, TLS 1.3 (ALPN `h2`, the same trust), then the HTTP/2 handshake
/// (`PROTOCOL.md` §5b), all within the options' timeout.
async fn connect_tcp(options: &ConnectOptions) -> Result<Conn, ClientError> {
    let server = options.tcp_server();
    let uri: hyper::Uri = format!("https://{server}{}", rltp_quic::stream::H2_PATH)
        .parse()
        .map_err(|_| ClientError::Resolve(server.to_owned()))?;
    let addr = resolve(server).await?;
    let rustls_config = tls::rustls_client_config_for(&options.trust, Binding::Tcp)?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(rustls_config));
    let name = rustls::pki_types::ServerName::try_from(options.tls_name().to_owned())
        .map_err(|e| TlsError::Config(format!("server name: {e}")))?;
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| ClientError::Transport(TransportError::Tcp(e)))?;
        let _ = tcp.set_nodelay(true);
        let tls = connector.connect(name, tcp).await.map_err(|e| {
            if HandshakeError::is_tls(&e) {
                ClientError::Handshake(HandshakeError::Tcp(e))
            } else {
                ClientError::Transport(TransportError::Tcp(e))
            }
        })?;
        let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(options.keep_alive)
            .keep_alive_timeout(CLIENT_IDLE_TIMEOUT)
            .keep_alive_while_idle(true)
            .handshake(TokioIo::new(tls))
            .await
            .map_err(|e| ClientError::Transport(TransportError::H2(e)))?;
        let (ended_tx, ended) = tokio::sync::watch::channel(None);
        let task = tokio::spawn(async move {
            let by_carrier = match connection.await {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!(error = %e, "tls/tcp connection ended");
                    rltp_quic::stream::is_go_away(&e)
                }
            };
            ended_tx.send_replace(Some(by_carrier));
        });
        Ok(Conn::Tcp(TcpConn {
            sender,
            remote: addr,
            uri,
            _task: Arc::new(AbortOnDrop(task)),
            ended,
        }))
    };
    tokio::time::timeout(options.timeout, attempt)
        .await
        .map_err(|_| ClientError::Timeout(options.timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_spell_and_parse_alike() {
        for choice in TransportChoice::ALL {
            assert_eq!(choice.as_str().parse::<TransportChoice>(), Ok(choice));
        }
        assert_eq!(TransportChoice::default(), TransportChoice::Auto);
        assert!("udp".parse::<TransportChoice>().is_err());
    }

    #[test]
    fn a_pin_mismatch_is_reported_before_a_transport_failure() {
        let handshake = || {
            ClientError::Handshake(HandshakeError::Tcp(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                rustls::Error::General("pin".into()),
            )))
        };
        let timeout = || ClientError::Timeout(std::time::Duration::from_secs(1));
        assert!(matches!(
            worse(timeout(), handshake()),
            ClientError::Handshake(_)
        ));
        assert!(matches!(
            worse(handshake(), timeout()),
            ClientError::Handshake(_)
        ));
        assert!(matches!(
            worse(timeout(), timeout()),
            ClientError::Timeout(_)
        ));
    }

    #[test]
    fn winners_are_remembered_per_server() {
        remember("winner.example:1", Binding::Tcp);
        assert_eq!(remembered("winner.example:1"), Some(Binding::Tcp));
        assert_eq!(remembered("winner.example:2"), None);
        remember("winner.example:1", Binding::Quic);
        assert_eq!(remembered("winner.example:1"), Some(Binding::Quic));
    }
}
