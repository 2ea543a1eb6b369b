//! The QUIC endpoint (ALPN `rltp-carrier/1`, the `[transport]` tuning,
//! the hygiene bounds of the module docs of [`super`]) and its accept loop:
//! connections bounded by `limits.max-connections`, turned away in
//! lame-duck mode, drained at shutdown within the one deadline.

use super::sweeper::sweeper;
use super::{Ctx, ServerError, bounded, drain_deadline, stream, until_shutdown};
use crate::config::Config;
use crate::tls::{self, TlsError};
use rltp_quic::stream::Binding;
use rltp_storage::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

pub(super) fn endpoint(
    config: &Config,
    identity: &tls::ServerIdentity,
) -> Result<quinn::Endpoint, ServerError> {
    let rustls_config = tls::rustls_server_config(identity)?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(rustls_config)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    config.transport.quic.apply(&mut transport);
    transport
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(
            config.limits.max_streams_per_connection,
        ))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0))
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(Duration::from_millis(config.limits.idle_timeout_ms))
                .map_err(|e| TlsError::Config(e.to_string()))?,
        ));
    server_config.transport_config(Arc::new(transport));
    // The kept stateless-reset key: a restarted carrier resets the
    // connections of its previous life at their next packet.
    let endpoint_config = kept_endpoint_config(&config.data_dir)?;
    let binding = |source| ServerError::Io {
        what: format!("binding {}", config.listen),
        source,
    };
    let socket = std::net::UdpSocket::bind(config.listen).map_err(binding)?;
    let runtime = quinn::default_runtime()
        .ok_or_else(|| binding(std::io::Error::other("no async runtime")))?;
    quinn::Endpoint::new(endpoint_config, Some(server_config), socket, runtime).map_err(binding)
}

/// The endpoint configuration of a restarted carrier's previous life
/// (`PROTOCOL.md` §5): the stateless-reset key kept in the data dir, and
/// the connection-ID validation key derived from it, so that the next
/// packet of an old connection is recognized as one of ours (quinn drops
/// a packet whose CID its generator does not validate) and answered with
/// a stateless reset whose token the client holds.
fn kept_endpoint_config(data_dir: &std::path::Path) -> Result<quinn::EndpointConfig, ServerError> {
    let reset_key = tls::load_or_make_reset_key(data_dir)?;
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &reset_key);
    let tag = ring::hmac::sign(&key, b"rltp-carrier/1 connection-id validation");
    let mut cid_key = [0u8; 8];
    cid_key.copy_from_slice(&tag.as_ref()[..8]);
    let cid_key = u64::from_be_bytes(cid_key);
    let mut config = quinn::EndpointConfig::new(Arc::new(key));
    config.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    Ok(config)
}

pub(super) async fn serve<S: Store>(endpoint: quinn::Endpoint, ctx: Arc<Ctx<S>>) {
    let mut connections = JoinSet::new();
    let mut turned_away = JoinSet::new();
    let mut shutdown = ctx.shutdown.clone();
    let sweeper = tokio::spawn(sweeper(Arc::clone(&ctx)));
    loop {
        tokio::select! {
            _ = until_shutdown(&mut shutdown) => break,
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                match Arc::clone(&ctx.connection_slots).try_acquire_owned() {
                    // Turning a connection away holds a slot too, so a flood
                    // of handshakes stays bounded by max-connections.
                    Ok(slot) if *ctx.lame_duck.borrow() => {
                        let handshake = Duration::from_millis(ctx.limits().stream_read_timeout_ms);
                        turned_away.spawn(go_away(incoming, handshake, slot));
                    }
                    Ok(slot) => {
                        connections.spawn(stream::connection(incoming, Arc::clone(&ctx), slot));
                    }
                    Err(_) => {
                        tracing::warn!("connection refused: max-connections reached");
                        if let Some(m) = &ctx.metrics {
                            m.connection_refused(Binding::Quic);
                        }
                        incoming.refuse();
                    }
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            Some(_) = turned_away.join_next(), if !turned_away.is_empty() => {}
        }
    }
    // Stop accepting; let every connection drain its in-flight operations,
    // all within the one shutdown deadline.
    let deadline = drain_deadline(&ctx);
    endpoint.set_server_config(None);
    turned_away.abort_all();
    let drained = tokio::time::timeout_at(deadline, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    let abandon = || {
        ctx.abandoned
            .store(true, std::sync::atomic::Ordering::SeqCst)
    };
    if drained.is_err() {
        tracing::warn!(
            in_flight = connections.len(),
            "drain timeout: aborting remaining connections"
        );
        connections.abort_all();
        abandon();
    }
    let (code, reason) = close_code(&ctx);
    endpoint.close(code, reason);
    if tokio::time::timeout_at(deadline, endpoint.wait_idle())
        .await
        .is_err()
    {
        tracing::warn!("drain timeout: connections still closing are dropped");
    }
    if !bounded("the sweeper", sweeper, deadline).await {
        abandon();
    }
}

/// The application close of this node's connections: `going-away` in
/// lame-duck mode (`PROTOCOL.md` §5), else code 0, reason `shutdown`.
pub(super) fn close_code<S: Store>(ctx: &Ctx<S>) -> (quinn::VarInt, &'static [u8]) {
    if *ctx.lame_duck.borrow() {
        let going_away = rltp_wire::CloseCode::GoingAway;
        (
            quinn::VarInt::from_u32(going_away.code()),
            going_away.as_str().as_bytes(),
        )
    } else {
        (
            quinn::VarInt::from_u32(rltp_wire::CloseCode::NoError.code()),
            b"shutdown",
        )
    }
}

/// Turns a new connection away in lame-duck mode: completes the
/// handshake (an application close is only carried once it is done, RFC
/// 9000 §10.2.3) and closes with `going-away`, reading no stream.
async fn go_away(
    incoming: quinn::Incoming,
    handshake: Duration,
    _slot: tokio::sync::OwnedSemaphorePermit,
) {
    let going_away = rltp_wire::CloseCode::GoingAway;
    match tokio::time::timeout(handshake, incoming).await {
        Ok(Ok(connection)) => {
            tracing::debug!(remote = %connection.remote_address(), "lame duck: connection turned away");
            connection.close(
                quinn::VarInt::from_u32(going_away.code()),
                going_away.as_str().as_bytes(),
            );
            // Wait until the close is on its way (bounded).
            let _ = tokio::time::timeout(handshake, connection.closed()).await;
        }
        Ok(Err(e)) => tracing::debug!(error = %e, "handshake failed"),
        Err(_) => tracing::debug!("lame duck: handshake timed out"),
    }
}
