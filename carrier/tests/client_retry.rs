//! The client's retry driver against a real in-process carrier
//! (`rltp_client::retry`): retriable refusals are retried with backoff and
//! reported, and the carrier's declared horizons are adopted. (Moved here
//! from the client crate's unit tests: it needs the server.)

#![allow(clippy::unwrap_used, clippy::panic)]

use rltp_client::retry::{
    AwaitingReason, Backoff, Finished, Link, RetryEvent, RetryPolicy, Schedule, Try, persist,
};
use rltp_client::{Client, ClientError, ConnectOptions};
use std::time::Duration;
use tokio::time::Instant;

/// Retriable refusals are retried with backoff and reported as
/// `carrier-refused-retriable` at once; the first outcome ends it.
/// (Real time: an in-process carrier's writer thread is not on tokio's
/// clock.)
#[tokio::test]
async fn retriable_refusals_are_retried_until_an_outcome() {
    rltp_client::tls::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let server = rltp_server::service::Server::start_with_store(
        &test_config(dir.path()),
        std::sync::Arc::new(rltp_storage::mem::MemStore::new()),
    )
    .await
    .unwrap();
    let options = ConnectOptions::new(
        server.local_addr().to_string(),
        rltp_client::tls::ServerTrust::Pin(server.fingerprint()),
    );
    let mut link = Link::new(options);
    let start = Instant::now();
    let mut schedule =
        Schedule::new(start, RetryPolicy::FALLBACK, Some(Duration::from_secs(600))).learning();
    let mut refusals = 3;
    let mut events = Vec::new();
    let finished = persist(
        &mut link,
        &mut schedule,
        async |client: &Client| -> Result<Try<u64, &'static str>, ClientError> {
            let revision = client.declaration().await?.declaration.revision();
            if refusals > 0 {
                refusals -= 1;
                return Ok(Try::Again("refused(admission-resource)"));
            }
            Ok(Try::Done(revision))
        },
        |e| events.push(e),
    )
    .await
    .unwrap();
    assert_eq!(finished, Finished::Done(1));
    assert!(schedule.declared, "the declared horizons are in force");
    assert_eq!(schedule.policy.status_horizon, Duration::from_secs(30));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, RetryEvent::Attempt { .. }))
            .count(),
        4
    );
    assert!(matches!(events[1], RetryEvent::Declared(_)), "{events:?}");
    // The link says which binding its connection is on (PROTOCOL.md §5b).
    assert!(
        matches!(events[2], RetryEvent::Connected { .. }),
        "{events:?}"
    );
    assert_eq!(
        events[3],
        RetryEvent::Refused("refused(admission-resource)")
    );
    assert_eq!(
        events[4],
        RetryEvent::Report(AwaitingReason::CarrierRefusedRetriable)
    );
    assert!(matches!(events[5], RetryEvent::Backoff(d) if d <= Backoff::ceiling(0)));
    link.close().await;
    server.shutdown().await;
}

fn test_config(dir: &std::path::Path) -> rltp_server::config::Config {
    let mut config = rltp_server::config::Config::defaults().unwrap();
    config.data_dir = dir.to_owned();
    config.listen = ([127, 0, 0, 1], 0).into();
    config
}
