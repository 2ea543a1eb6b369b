//! The simulation in CI: a sweep of seeds keeps every invariant, one seed
//! replays exactly, and the workload reaches every kind of step.
//!
//! `RLTP_SIM_SEEDS` (default 300) and `RLTP_SIM_FIRST_SEED` (default 0)
//! widen or move the sweep; `RLTP_SIM_STEPS` (default 200) lengthens runs.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
        })
        .unwrap_or(default)
}

#[test]
fn every_seed_of_the_sweep_keeps_every_invariant() {
    let first = env("RLTP_SIM_FIRST_SEED", 0);
    let seeds = env("RLTP_SIM_SEEDS", 300);
    let steps = env("RLTP_SIM_STEPS", rltp_sim::DEFAULT_STEPS as u64) as usize;
    let started = std::time::Instant::now();
    // Each run is one thread; the runs share the machine's cores.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let mut failures: Vec<(u64, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                scope.spawn(move || {
                    (first + w..first + seeds)
                        .step_by(workers as usize)
                        .filter_map(|seed| rltp_sim::run(seed, steps).err())
                        .map(|f| (f.seed, f.to_string()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    failures.sort();
    let failures: Vec<String> = failures.into_iter().map(|f| f.1).collect();
    eprintln!(
        "{seeds} seeds × {steps} steps on {workers} threads in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {seeds} seeds failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn one_seed_replays_exactly() {
    let a = rltp_sim::run(7, 200).unwrap();
    let b = rltp_sim::run(7, 200).unwrap();
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.digest.len(), 64);
    let other = rltp_sim::run(8, 200).unwrap();
    assert_ne!(a.digest, other.digest, "another seed, another run");
}

/// Over a few seeds the workload reaches every kind of step and verdict
/// the invariants are about (else a sweep could pass by never trying).
#[test]
fn the_workload_reaches_every_kind_of_step() {
    let traces: Vec<String> = (0..20)
        .map(|seed| rltp_sim::run(seed, 200).unwrap().trace.join("\n"))
        .collect();
    let all = traces.join("\n");
    for needle in [
        "-> admitted",
        "-> duplicate",
        "submit-invalid",
        "-> refused(bounds)",
        "-> refused(capacity)",
        "-> refused(queue-saturated)",
        "-> refused(admission-resource)",
        "register g1 -> registered",
        "registration-refused(capacity)",
        "collect -> [1",
        "conclude",
        "Ok(1)",
        "sweep",
        "snapshot",
        "housekeeping",
        "compact",
        "power cut",
        "cut before its fdatasync",
        "restart",
        "given up 1",
    ] {
        assert!(all.contains(needle), "no run of 20 seeds has {needle:?}");
    }
}
