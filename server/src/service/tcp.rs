//! The TLS/TCP listener (`PROTOCOL.md` §5b): TLS 1.3 with the QUIC
//! listener's certificate (one SPKI pin), ALPN `h2`, HTTP/2 (hyper), one
//! HTTP/2 stream per operation, each a `POST` to
//! [`rltp_quic::stream::H2_PATH`] whose request body carries the request
//! frames and whose response body carries the answer frames. Each stream
//! is handed to the same seam as a QUIC stream
//! ([`super::stream::stream_task`]): one dispatch, one writer, one set of
//! meters and limits behind both listeners.
//!
//! Hygiene, as on QUIC: a connection takes a `max-connections` slot (one
//! pool for both bindings) **before** its TLS handshake, which must finish
//! within `stream-read-timeout-ms`; `max-streams-per-connection` is
//! HTTP/2's `MAX_CONCURRENT_STREAMS`; HTTP/2 PING is the keep-alive (a
//! peer that does not answer within `idle-timeout-ms` is closed); every
//! stream's frames are bounded by the same read deadlines. In lame-duck
//! mode a new connection is answered with GOAWAY (last stream 0) and
//! closed; at shutdown every connection gets a graceful GOAWAY and its
//! streams in flight finish within the one drain deadline.

use super::stream::stream_task;
use super::{ConnectionCount, Ctx, ServerError, drain_deadline, until_shutdown};
use crate::config::Config;
use crate::defaults::h2 as limits;
use crate::tls;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rltp_quic::stream::{Binding, ChannelBody, H2_PATH, RecvHalf, SendHalf, h2_channel};
use rltp_storage::Store;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Binds the TLS/TCP listener at `[transport] tcp-listen` (`None` when
/// it is off) with the QUIC listener's certificate. `tcp-listen` defaults
/// to `listen`; with port 0 there (any port), the TCP port is the one QUIC
/// was given (`quic`) when it is free, so that one `host:port` names both
/// bindings, else any free one.
pub(super) async fn bind(
    config: &Config,
    identity: &tls::ServerIdentity,
    quic: SocketAddr,
) -> Result<Option<Listener>, ServerError> {
    let Some(addr) = config.tcp_listen() else {
        return Ok(None);
    };
    let any_port = addr == config.listen && addr.port() == 0;
    let rustls = tls::rustls_server_config_for(identity, Binding::Tcp)?;
    let bound = if any_port {
        // Any port was asked for: QUIC's number if TCP has it free, else
        // another (the address printed at start names it).
        match TcpListener::bind(SocketAddr::new(addr.ip(), quic.port())).await {
            Ok(listener) => Ok(listener),
            Err(_) => TcpListener::bind(addr).await,
        }
    } else {
        TcpListener::bind(addr).await
    };
    let listener = bound.map_err(|source| ServerError::Io {
        what: format!("binding the tls/tcp listener {addr} ([transport] tcp-listen)"),
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| ServerError::Io {
        what: "reading the bound tcp address".into(),
        source,
    })?;
    Ok(Some(Listener {
        listener,
        acceptor: TlsAcceptor::from(Arc::new(rustls)),
        addr,
    }))
}

/// The bound TLS/TCP listener.
pub(super) struct Listener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    /// The bound address.
    pub(super) addr: SocketAddr,
}

/// Runs the QUIC service `quic` and, beside it, the TLS/TCP listener
/// (when there is one) until both have drained.
pub(super) async fn beside<S: Store>(
    quic: impl Future<Output = ()>,
    tcp: Option<Listener>,
    ctx: Arc<Ctx<S>>,
) {
    match tcp {
        Some(tcp) => {
            tokio::join!(quic, serve(tcp.listener, tcp.acceptor, ctx));
        }
        None => quic.await,
    }
}

/// Accepts TLS/TCP connections until shutdown, then lets them drain within
/// the one deadline.
async fn serve<S: Store>(listener: TcpListener, acceptor: TlsAcceptor, ctx: Arc<Ctx<S>>) {
    let mut connections = JoinSet::new();
    let mut shutdown = ctx.shutdown.clone();
    loop {
        tokio::select! {
            _ = until_shutdown(&mut shutdown) => break,
            accepted = listener.accept() => {
                let (tcp, remote) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "tcp accept failed");
                        tokio::time::sleep(limits::ACCEPT_ERROR_PAUSE).await;
                        continue;
                    }
                };
                match Arc::clone(&ctx.connection_slots).try_acquire_owned() {
                    Ok(slot) => {
                        connections.spawn(connection(tcp, remote, acceptor.clone(), Arc::clone(&ctx), slot));
                    }
                    Err(_) => {
                        tracing::warn!(%remote, "tcp connection refused: max-connections reached");
                        if let Some(m) = &ctx.metrics {
                            m.connection_refused(Binding::Tcp);
                        }
                        drop(tcp);
                    }
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let deadline = drain_deadline(&ctx);
    let drained = tokio::time::timeout_at(deadline, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            in_flight = connections.len(),
            "drain timeout: aborting remaining tcp connections"
        );
        connections.abort_all();
        ctx.abandoned
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// One TLS/TCP connection: the TLS handshake within the read deadline,
/// then HTTP/2 until the peer leaves or the carrier shuts down (or, in
/// lame-duck mode, GOAWAY at once).
async fn connection<S: Store>(
    tcp: TcpStream,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    ctx: Arc<Ctx<S>>,
    _slot: OwnedSemaphorePermit,
) {
    let _ = tcp.set_nodelay(true);
    let handshake = Duration::from_millis(ctx.limits().stream_read_timeout_ms);
    let tls = match tokio::time::timeout(handshake, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%remote, error = %e, "tls handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%remote, "tls handshake timed out");
            return;
        }
    };
    if *ctx.lame_duck.borrow() {
        go_away(tls, handshake).await;
        return;
    }
    tracing::debug!(%remote, "tcp connection open");
    let _counted = ConnectionCount::open(&ctx);
    let _open = ctx
        .metrics
        .as_ref()
        .map(|m| m.connection_opened(Binding::Tcp));
    serve_h2(tls, ctx).await;
}

/// HTTP/2 over one TLS stream: each operation's stream is spawned into
/// this connection's set (aborted with it at the drain deadline).
async fn serve_h2<S: Store>(tls: TlsStream<TcpStream>, ctx: Arc<Ctx<S>>) {
    let (streams_tx, mut streams_rx) = mpsc::unbounded_channel::<(SendHalf, RecvHalf)>();
    let service = hyper::service::service_fn(move |request| {
        let answer = route(request, &streams_tx);
        async move { Ok::<_, Infallible>(answer) }
    });
    let limits_now = ctx.limits();
    let idle = Duration::from_millis(limits_now.idle_timeout_ms);
    let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits_now.max_streams_per_connection)
        .initial_stream_window_size(limits::STREAM_WINDOW)
        .initial_connection_window_size(limits::CONNECTION_WINDOW)
        .max_header_list_size(limits::MAX_HEADER_LIST)
        .keep_alive_interval(Some(idle / 2))
        .keep_alive_timeout(idle / 2)
        .serve_connection(TokioIo::new(tls), service);
    tokio::pin!(connection);
    let mut streams = JoinSet::new();
    let mut shutdown = ctx.shutdown.clone();
    let mut closing = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "tcp connection closed");
                }
                break;
            }
            _ = until_shutdown(&mut shutdown), if !closing => {
                // GOAWAY; the streams in flight finish (watch sessions end
                // on shutdown), then the connection closes.
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            Some((send, recv)) = streams_rx.recv() => {
                streams.spawn(stream_task(Arc::clone(&ctx), send, recv));
            }
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
    while streams.join_next().await.is_some() {}
}

/// The answer to one HTTP/2 request: a `POST` to [`H2_PATH`] becomes an
/// operation's stream (status 200 at once, the answer frames in the
/// body); anything else is `404` with an empty body.
fn route(
    request: hyper::Request<Incoming>,
    streams: &mpsc::UnboundedSender<(SendHalf, RecvHalf)>,
) -> hyper::Response<ChannelBody> {
    let (send, body) = h2_channel();
    let status = if request.method() != hyper::Method::POST || request.uri().path() != H2_PATH {
        hyper::StatusCode::NOT_FOUND
    } else if streams
        .send((send, RecvHalf::h2(request.into_body())))
        .is_err()
    {
        hyper::StatusCode::SERVICE_UNAVAILABLE
    } else {
        hyper::StatusCode::OK
    };
    let mut response = hyper::Response::new(body);
    *response.status_mut() = status;
    response
}

/// What a node in lame-duck mode sends on a new TLS/TCP connection
/// (`PROTOCOL.md` §5b): the server connection preface, an empty SETTINGS
/// frame (RFC 9113 §3.4, §6.5), then GOAWAY with last stream id 0 and
/// `NO_ERROR` (§6.8): no stream of the connection will be served. Two
/// fixed frames, 9-byte headers each (length, type, flags, stream 0).
const TURN_AWAY: [u8; 26] = [
    0, 0, 0, 0x4, 0, 0, 0, 0, 0, // SETTINGS, empty
    0, 0, 8, 0x7, 0, 0, 0, 0, 0, // GOAWAY, 8 bytes of payload
    0, 0, 0, 0, // last stream id 0
    0, 0, 0, 0, // NO_ERROR
];

/// Turns a new connection away in lame-duck mode (`PROTOCOL.md` §5b):
/// [`TURN_AWAY`], TLS `close_notify`, then whatever the client sends is
/// read and dropped until it closes (a socket closed with unread bytes
/// resets the connection, and the client could lose the GOAWAY), all
/// within `bound`.
async fn go_away(mut tls: TlsStream<TcpStream>, bound: Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let turned_away = async {
        tls.write_all(&TURN_AWAY).await?;
        tls.shutdown().await?;
        let mut sink = [0u8; 4_096];
        while tls.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    };
    match tokio::time::timeout(bound, turned_away).await {
        Ok(Ok(())) => tracing::debug!("lame duck: tcp connection turned away"),
        Ok(Err(e)) => tracing::debug!(error = %e, "lame duck: tcp turn-away ended"),
        Err(_) => tracing::debug!("lame duck: tcp turn-away timed out"),
    }
}
