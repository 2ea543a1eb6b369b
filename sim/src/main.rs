//! `rltp-sim --seed N [--steps K]`: one seeded run of the carrier
//! simulation; prints the trace's digest, or the broken invariant and the
//! command that replays it (exit status 1).

use clap::Parser;

/// One seeded run of the carrier simulation (see the `rltp-sim` crate docs).
#[derive(Debug, Parser)]
#[command(name = "rltp-sim")]
struct Args {
    /// The seed: one seed replays one run exactly.
    #[arg(long)]
    seed: u64,
    /// Steps to run.
    #[arg(long, default_value_t = rltp_sim::DEFAULT_STEPS)]
    steps: usize,
    /// Print the trace, one line per step.
    #[arg(long)]
    trace: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match rltp_sim::run(args.seed, args.steps) {
        Ok(outcome) => {
            if args.trace {
                for line in &outcome.trace {
                    println!("{line}");
                }
            }
            println!(
                "seed {} passed {} steps; trace digest {}",
                outcome.seed, outcome.steps, outcome.digest
            );
            std::process::ExitCode::SUCCESS
        }
        Err(failure) => {
            if args.trace {
                for line in &failure.trace {
                    println!("{line}");
                }
            }
            eprintln!("{failure}");
            std::process::ExitCode::FAILURE
        }
    }
}
