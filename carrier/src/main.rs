//! `rltp-carrier`: the carrier binary. CLI parsing and dispatch only; the
//! work is in the library ([`rltp_carrier::server`], [`rltp_carrier::client`]).

use clap::{Parser, Subcommand};
use rltp_carrier::config::{Config, LogFormat};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// The RLTP carrier: a key-blind relay for sealed envelopes.
#[derive(Debug, Parser)]
#[command(name = "rltp-carrier", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a carrier: QUIC on the listen address, embedded store in the data dir.
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// TOML configuration file (every key optional; see the README).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Data directory (overrides `data-dir`; default ./carrier-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// UDP listen address (overrides `listen`; default 127.0.0.1:4433).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Log format (overrides `log-format`).
    #[arg(long, value_parser = ["human", "json"])]
    log_format: Option<String>,
}

fn load_config(args: &ServeArgs) -> Result<Config, String> {
    let mut config = match &args.config {
        Some(path) => Config::load(path),
        None => Config::defaults(),
    }
    .map_err(|e| e.to_string())?;
    if let Some(dir) = &args.data_dir {
        config.data_dir = dir.clone();
    }
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    match args.log_format.as_deref() {
        Some("json") => config.log_format = LogFormat::Json,
        Some(_) => config.log_format = LogFormat::Human,
        None => {}
    }
    Ok(config)
}

async fn serve(args: ServeArgs) -> ExitCode {
    let config = match load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rltp-carrier: {e}");
            return ExitCode::from(2);
        }
    };
    rltp_carrier::server::init_tracing(config.log_format);
    let server = match rltp_carrier::server::Server::start(&config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rltp-carrier: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening {}", server.local_addr());
    println!("fingerprint {}", server.fingerprint());
    println!(
        "declaration-issuer {}",
        server.declaration_issuer().to_did_key()
    );
    rltp_carrier::server::shutdown_signal().await;
    server.shutdown().await;
    ExitCode::SUCCESS
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args).await,
    }
}
