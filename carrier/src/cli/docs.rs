//! `rltp-carrier completions SHELL` and `rltp-carrier man`: the shell
//! completion script (`clap_complete`) and the manual page (`clap_mangen`,
//! roff) of the whole command tree, generated from the same clap
//! definitions the binary parses with, so they never drift from it. The
//! deploy files install them (`deploy/README.md`, `deploy/tarball.sh`):
//! `/usr/share/bash-completion/completions/rltp-carrier` and
//! `/usr/share/man/man1/rltp-carrier.1`.

use super::{Failure, exit};
use std::io::Write;
use std::process::ExitCode;

/// `completions`: which shell.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints the completion script of `command` for the chosen shell.
pub fn completions(args: &CompletionsArgs, mut command: clap::Command) -> ExitCode {
    let name = command.get_name().to_owned();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, name, &mut script);
    super::finish("completions", write_stdout(&script))
}

/// `man`: where the pages go.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write `rltp-carrier.1` and one `rltp-carrier-COMMAND.1` per
    /// subcommand (the pages `rltp-carrier.1` refers to) into this
    /// existing directory, instead of printing `rltp-carrier.1`.
    #[arg(long)]
    out_dir: Option<std::path::PathBuf>,
}

/// Prints the manual page of `command` (section 1, roff), or writes every
/// page of the command tree into `--out-dir`.
pub fn man(args: &ManArgs, command: clap::Command) -> ExitCode {
    // As `generate_to` does: a `help` page would describe `--help`.
    let command = command.disable_help_subcommand(true);
    let cannot = |e: std::io::Error| Failure::usage(format!("cannot write the manual pages: {e}"));
    let done = match &args.out_dir {
        Some(dir) => clap_mangen::generate_to(command, dir)
            .map(|()| exit::OK)
            .map_err(cannot),
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .map_err(cannot)
                .and_then(|()| write_stdout(&page))
        }
    };
    super::finish("man", done)
}

fn write_stdout(bytes: &[u8]) -> Result<u8, Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(exit::OK),
        // A reader that stopped early (`| head`) has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        Err(e) => Err(Failure::usage(format!("standard output: {e}"))),
    }
}
