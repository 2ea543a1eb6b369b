//! `rltp-carrier`: the carrier binary. CLI parsing and dispatch only: the
//! operator commands live in this binary's `cli` module (over
//! `rltp-server`), the client commands in `rltp-cli`.

mod cli;

use clap::{CommandFactory, Parser, Subcommand};
use rltp_cli as client;
use std::process::ExitCode;

/// The RLTP carrier: a key-blind relay for sealed envelopes, and the
/// sender and recipient commands that use one.
#[derive(Debug, Parser)]
#[command(name = "rltp-carrier", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a carrier: QUIC on the listen address, embedded store in the data dir.
    Serve(cli::serve::Args),
    /// Recipient key material (control principal and rkid) for one carrier.
    Keys(client::keys::Args),
    /// A party's relationship file: pair context, own card, counterpart card.
    Party(client::party::Args),
    /// Fetch, verify and print the carrier's signed declaration.
    Declaration(client::declaration::Args),
    /// Register (or rebind) the key file's rkid under its principal.
    Register(client::register::Args),
    /// Seal a JSON document to an rkid and submit it, reporting its status.
    Send(client::send::Args),
    /// Ask the carrier for a deposit's status.
    Status(client::status::Args),
    /// Collect, open and store deposits; conclude the terminal ones.
    Collect(client::collect::Args),
    /// Conclude deposits of the key file's queue by id.
    Conclude(client::conclude::Args),
    /// The whole round trip against an in-process loopback carrier.
    Demo(client::demo::Args),
    /// Check any carrier from the wire: one line per contract section.
    Conformance(client::conformance::Args),
    /// Prepare the shared PostgreSQL database (schema; new constants for every node).
    Migrate(cli::migrate::Args),
    /// Write a consistent backup archive of a carrier's store (online while `serve` runs).
    Backup(cli::backup::Args),
    /// Check a backup archive and install it into a data dir (or only --verify it).
    Restore(cli::restore::Args),
    /// Operator queries: counts only.
    Admin(cli::admin::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cli::docs::CompletionsArgs),
    /// Print the manual page (roff), or write one page per command to a directory.
    Man(cli::docs::ManArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    client::end_quietly_on_closed_stdout();
    match Cli::parse().command {
        Command::Serve(args) => cli::serve::run(args).await,
        Command::Keys(args) => client::keys::run(args),
        Command::Party(args) => client::party::run(args),
        Command::Declaration(args) => client::declaration::run(args).await,
        Command::Register(args) => client::register::run(args).await,
        Command::Send(args) => client::send::run(args).await,
        Command::Status(args) => client::status::run(args).await,
        Command::Collect(args) => client::collect::run(args).await,
        Command::Conclude(args) => client::conclude::run(args).await,
        Command::Demo(args) => client::demo::run(args).await,
        Command::Conformance(args) => client::conformance::run(args).await,
        Command::Migrate(args) => cli::migrate::run(args).await,
        Command::Backup(args) => cli::backup::run(args),
        Command::Restore(args) => cli::restore::run(args),
        Command::Admin(args) => cli::admin::run(args),
        Command::Completions(args) => cli::docs::completions(&args, Cli::command()),
        Command::Man(args) => cli::docs::man(&args, Cli::command()),
    }
}
