//! The operator's HTTP endpoint (config `[metrics] listen`, off by default,
//! loopback unless `allow-remote`): HTTP/1.1 through hyper, GET and HEAD
//! only.
//!
//! | path | answer |
//! |---|---|
//! | `/metrics` | Prometheus text ([`super::metrics`]); 503 if the store cannot be read |
//! | `/healthz` | 200 `ok`: the process is up |
//! | `/readyz` | 200 when the store is open and writable, the declaration is loaded, the node's clock is within `max-clock-offset-ms` of a shared database's (the `clock` line names both) and the carrier is neither draining nor a lame duck; else 503 naming the failed check; the `store-damage` line counts quarantined deposits (still 200: the carrier serves everything else) |
//! | `/status` | the operator page ([`super::status_page`]) |
//!
//! The writability check commits one empty transaction through the
//! group-commit writer (so it also proves the writer is alive); its result
//! is reused for [`READY_CACHE`], so probes cannot add fsync load. The
//! endpoint keeps answering while the carrier drains (`/readyz` says
//! `draining`) and stops once it has stopped.

use super::Ctx;
use super::metrics::Reading;
use super::status_page::{self, DeclarationView, StatusData};
use crate::admin::counts::Counts;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::declaration::parse_declaration;
use rltp_storage::{ReadTxn, Store, StoreError};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::defaults::http::{HEADER_TIMEOUT, MAX_CONNECTIONS, READY_CACHE, READY_TIMEOUT};

/// State of the endpoint beside the server's context.
struct Web<S: Store> {
    ctx: Arc<Ctx<S>>,
    metrics: Arc<super::metrics::Metrics>,
    ready: Mutex<Option<(Instant, Result<(), String>)>>,
}

type Answer = Response<Full<Bytes>>;

fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Answer {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    response
}

fn text(status: StatusCode, body: impl Into<String>) -> Answer {
    reply(status, "text/plain; charset=utf-8", body.into())
}

/// Serves the endpoint on `listener` until `stop` is signalled.
pub(super) async fn serve<S: Store>(
    listener: TcpListener,
    ctx: Arc<Ctx<S>>,
    metrics: Arc<super::metrics::Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let web = Arc::new(Web {
        ctx,
        metrics,
        ready: Mutex::new(None),
    });
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = super::until_shutdown(&mut stop) => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { break };
                let web = Arc::clone(&web);
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        let web = Arc::clone(&web);
                        async move { Ok::<_, Infallible>(route(&web, request).await) }
                    });
                    let _ = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    drop(slot);
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

async fn route<S: Store>(web: &Arc<Web<S>>, request: Request<Incoming>) -> Answer {
    let head = request.method() == Method::HEAD;
    if request.method() != Method::GET && !head {
        let mut answer = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        answer
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return answer;
    }
    let answer = match request.uri().path() {
        "/metrics" => metrics(web).await,
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => ready(web).await,
        "/status" | "/" => status(web).await,
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    };
    if head {
        let (parts, _) = answer.into_parts();
        Response::from_parts(parts, Full::new(Bytes::new()))
    } else {
        answer
    }
}

/// Runs `f` with the context on the blocking pool (store reads).
async fn blocking<S: Store, T: Send + 'static>(
    web: &Arc<Web<S>>,
    f: impl FnOnce(&Ctx<S>) -> T + Send + 'static,
) -> Option<T> {
    let ctx = Arc::clone(&web.ctx);
    tokio::task::spawn_blocking(move || f(&ctx)).await.ok()
}

/// The served declaration's revision and constants, if it parses.
fn declaration_view<S: Store>(ctx: &Ctx<S>) -> Option<DeclarationView> {
    let document = super::current_declaration(ctx);
    let parsed = parse_declaration(&document).ok()?;
    let constants = CarrierConstants::from_declared(parsed.constants()).ok()?;
    Some(DeclarationView {
        revision: parsed.revision(),
        issuer: parsed.issuer().to_did_key(),
        issued_at: parsed.issued_at().to_owned(),
        constants: status_page::constant_rows(&constants),
    })
}

fn reading<S: Store>(ctx: &Ctx<S>) -> Result<Reading, StoreError> {
    let engine = &ctx.engine;
    let read = engine.store().read()?;
    Ok(Reading {
        phases: read.binding_phases()?,
        occupancy: read.occupancy()?,
        constants: engine.constants(),
        limits: engine.limits(),
        events: engine.events(),
        failed_batches: engine
            .commit_stats()
            .failed_batches
            .load(std::sync::atomic::Ordering::Relaxed),
        challenges: engine.store().challenge_count() as u64,
        quarantined: read.quarantined()?,
        revision: declaration_view(ctx).map_or(0, |d| d.revision),
        work: engine.counters(),
        clock_steps: ctx.clock.steps(),
        clock_offset_ms: ctx.clock_check.offset_ms(),
        clock_offset_exceeded: ctx.clock_check.exceeded().unwrap_or(false),
        size: engine.store().size()?,
        now: engine.now(),
    })
}

async fn metrics<S: Store>(web: &Arc<Web<S>>) -> Answer {
    match blocking(web, reading).await {
        Some(Ok(reading)) => {
            web.metrics.refresh(&reading);
            reply(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                web.metrics.render(),
            )
        }
        Some(Err(error)) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store unreadable: {error}\n"),
        ),
        None => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n"),
    }
}

async fn writable<S: Store>(web: &Arc<Web<S>>) -> Result<(), String> {
    if let Some((at, result)) = web
        .ready
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        && at.elapsed() < READY_CACHE
    {
        return result.clone();
    }
    let result = match tokio::time::timeout(READY_TIMEOUT, web.ctx.engine.probe_write()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(format!("not writable: {error}")),
        Err(_) => Err(format!(
            "not writable: no commit within {} ms",
            READY_TIMEOUT.as_millis()
        )),
    };
    *web.ready.lock().unwrap_or_else(PoisonError::into_inner) =
        Some((Instant::now(), result.clone()));
    result
}

async fn ready<S: Store>(web: &Arc<Web<S>>) -> Answer {
    let draining = *web.ctx.shutdown.borrow();
    let lame_duck = *web.ctx.lame_duck.borrow();
    let declaration = declaration_view(&web.ctx);
    let store = if draining {
        Err("not checked (draining)".to_owned())
    } else {
        writable(web).await
    };
    // Damaged records are isolated (quarantined and given up), and the
    // carrier serves everything else: reported, but still ready.
    let quarantined = blocking(web, |ctx| ReadTxn::quarantined(&ctx.engine.store().read()?))
        .await
        .and_then(Result::ok);
    // Only a node of a shared database has a clock line (`db_clock`).
    let clock = web.ctx.clock_check.readyz();
    let clock_ok = clock.as_ref().is_none_or(|(ok, _)| *ok);
    let clock = clock.map_or_else(String::new, |(_, line)| format!("clock {line}\n"));
    let lines = format!(
        "store {}
declaration {}
draining {}
lame-duck {}
store-damage {}
{clock}",
        store
            .as_ref()
            .map_or_else(Clone::clone, |()| "ok".to_owned()),
        declaration.as_ref().map_or_else(
            || "missing".to_owned(),
            |d| format!("ok (revision {})", d.revision)
        ),
        if draining { "yes" } else { "no" },
        if lame_duck {
            "yes (new connections are turned away: going-away)"
        } else {
            "no"
        },
        match quarantined {
            Some(0) => "none".to_owned(),
            Some(n) => format!(
                "{n} quarantined deposit(s): damaged data on disk, see deploy/OPERATIONS.md \"Damaged data dir\""
            ),
            None => "unknown (store unreadable)".to_owned(),
        },
    );
    let ok = !draining && !lame_duck && declaration.is_some() && store.is_ok() && clock_ok;
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    text(
        status,
        format!("{}\n{lines}", if ok { "ready" } else { "not ready" }),
    )
}

async fn status<S: Store>(web: &Arc<Web<S>>) -> Answer {
    let history = web.metrics.history(web.ctx.engine.now());
    let draining = *web.ctx.shutdown.borrow();
    let page = blocking(web, move |ctx| {
        let counts = ctx
            .engine
            .store()
            .read()
            .and_then(|read| Counts::read(&read, ctx.engine.now()))?;
        Ok::<_, StoreError>(status_page::render(&StatusData {
            carrier: ctx.carrier.as_str().to_owned(),
            version: env!("CARGO_PKG_VERSION"),
            declaration: declaration_view(ctx),
            counts,
            limits: ctx.engine.limits(),
            history,
            draining,
            listeners: ctx.listeners.clone(),
        }))
    })
    .await;
    match page {
        Some(Ok(html)) => reply(StatusCode::OK, "text/html; charset=utf-8", html),
        Some(Err(error)) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store unreadable: {error}\n"),
        ),
        None => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n"),
    }
}
