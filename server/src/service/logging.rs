//! The log subscriber of `serve`: human lines or JSON on stderr, its
//! filter replaced by a reload.

use crate::config::LogFormat;

/// The handle that replaces the log filter ([`set_log_filter`]).
static LOG_FILTER: std::sync::OnceLock<
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
> = std::sync::OnceLock::new();

/// Installs the tracing subscriber: human lines or JSON, filtered by
/// `filter` (`RUST_LOG` syntax; [`crate::config::Config::effective_log_filter`]), which
/// a reload may replace ([`set_log_filter`]). Idempotent (a second call is
/// ignored).
pub fn init_tracing(format: LogFormat, filter: &str) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let registry = tracing_subscriber::registry().with(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Human => registry.with(fmt).try_init(),
        LogFormat::Json => registry.with(fmt.json()).try_init(),
    };
    if installed.is_ok() {
        let _ = LOG_FILTER.set(handle);
    }
}

/// Replaces the log filter of [`init_tracing`] (a reload); a filter that
/// does not parse (config validation refuses it first) is ignored.
pub fn set_log_filter(filter: &str) {
    if let (Some(handle), Ok(filter)) = (
        LOG_FILTER.get(),
        tracing_subscriber::EnvFilter::builder().parse(filter),
    ) && let Err(error) = handle.reload(filter)
    {
        tracing::warn!(%error, "the log filter could not be replaced");
    }
}
