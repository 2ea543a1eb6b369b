//! One run: the seed's generator picks each step, the step runs against
//! the [`World`], its answers are judged and folded into the [`Model`],
//! the store is checked against the model, and the step's line goes into
//! the trace.

use crate::model::{self, Model, Violation};
use crate::workload::{self, Party, Prepared, Request};
use crate::world::{Answer, Job, World};
use rand::rngs::StdRng;
use rand::{Rng as _, RngExt as _, SeedableRng as _};
use rltp_proofs::{DepositId, Ms};
use rltp_storage::StoreError;
use rltp_storage::fault_fs::Rng;
use rltp_wire::{SubmitVerdict, Verdict};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The instant every run starts at (ms).
const T0: Ms = 1_800_000_000_000;
/// Parties (queues) per run: more than the carrier has room for.
const PARTIES: usize = 6;

/// A run that kept every invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Steps run.
    pub steps: usize,
    /// SHA-256 of the trace (lowercase hex): equal for two runs of one seed.
    pub digest: String,
    /// The trace, one line per step.
    pub trace: Vec<String>,
}

/// A run that broke an invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The steps the run was asked for.
    pub steps: usize,
    /// The step that broke it (from 0).
    pub step: usize,
    /// What broke.
    pub violation: Violation,
    /// The trace up to and including that step.
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "seed {} failed at step {}: {}",
            self.seed, self.step, self.violation.invariant
        )?;
        writeln!(f, "  {}", self.violation.detail)?;
        if let Some(last) = self.trace.last() {
            writeln!(f, "  last step: {last}")?;
        }
        write!(
            f,
            "replay: cargo run -p rltp-sim -- --seed {} --steps {}",
            self.seed, self.steps
        )
    }
}

impl std::error::Error for Failure {}

/// Runs `steps` steps from `seed`; the same seed gives the same trace.
///
/// # Errors
/// The first broken invariant, with the seed and the command that replays it.
pub fn run(seed: u64, steps: usize) -> Result<Outcome, Box<Failure>> {
    let mut sim = Sim::new(seed).map_err(|e| sim_failure(seed, steps, 0, e, Vec::new()))?;
    for step in 0..steps {
        let line = sim.step();
        let line = match line {
            Ok(line) => format!("{step:4} t+{:>9} {line}", sim.world.now - T0),
            Err((line, violation)) => {
                let mut trace = sim.trace;
                trace.push(format!(
                    "{step:4} t+{:>9} {line} FAILED",
                    sim.world.now - T0
                ));
                return Err(Box::new(Failure {
                    seed,
                    steps,
                    step,
                    violation,
                    trace,
                }));
            }
        };
        sim.trace.push(line);
    }
    sim.trace.push(format!(
        "end: {} held, {} concluded, given up {}",
        sim.model.held.len(),
        sim.model.concluded.len(),
        sim.model.given_up
    ));
    let mut digest = Sha256::new();
    for line in &sim.trace {
        digest.update(line.as_bytes());
        digest.update(b"\n");
    }
    let digest = digest.finalize().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    });
    Ok(Outcome {
        seed,
        steps,
        digest,
        trace: sim.trace,
    })
}

fn sim_failure(
    seed: u64,
    steps: usize,
    step: usize,
    error: StoreError,
    trace: Vec<String>,
) -> Box<Failure> {
    Box::new(Failure {
        seed,
        steps,
        step,
        violation: store_failed(error),
        trace,
    })
}

fn store_failed(error: StoreError) -> Violation {
    Violation {
        invariant: model::LOST,
        detail: format!("the store failed: {error}"),
    }
}

/// The state of one run.
struct Sim {
    rng: StdRng,
    world: World,
    model: Model,
    parties: Vec<Party>,
    rkids: Vec<rltp_proofs::multikey::Rkid>,
    /// The bytes of every deposit submitted, for resending.
    sent: BTreeMap<DepositId, Vec<u8>>,
    trace: Vec<String>,
}

impl Sim {
    fn new(seed: u64) -> Result<Sim, StoreError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let parties: Vec<Party> = (0..PARTIES).map(|_| Party::new(&mut rng)).collect();
        let rkids = parties.iter().map(|p| p.rkid).collect();
        Ok(Sim {
            rng,
            world: World::new(T0)?,
            model: Model::default(),
            parties,
            rkids,
            sent: BTreeMap::new(),
            trace: Vec::new(),
        })
    }

    /// One step: its trace line, or that line (as far as it got) and the
    /// invariant it broke.
    fn step(&mut self) -> Result<String, (String, Violation)> {
        let (line, crashed) = self
            .act()
            .map_err(|v| ("(broke an invariant before its end)".to_owned(), v))?;
        match self.model.check_store(&self.world, &self.rkids, crashed) {
            Ok(()) => Ok(line),
            Err(v) => Err((line, v)),
        }
    }

    /// What one step does: its trace line, and whether it cut the power.
    fn act(&mut self) -> Result<(String, bool), Violation> {
        let roll = self.rng.random_range(0..100u32);
        Ok(match roll {
            0..62 => self.traffic()?,
            62..80 => (self.advance(1..3_000), false),
            80..85 => (self.advance(10_000..70_000), false),
            85..89 => (self.batch(Vec::new(), false)?, false),
            89..93 => (self.maintain()?, false),
            93..97 => (self.crash()?, true),
            _ => {
                self.world.restart().map_err(store_failed)?;
                ("restart".to_owned(), true)
            }
        })
    }

    fn advance(&mut self, range: std::ops::Range<Ms>) -> String {
        let by = self.rng.random_range(range);
        self.world.now += by;
        format!("advance {by}")
    }

    /// One to three requests from random parties, in one batch; now and
    /// then the power is cut between its commit and its `fdatasync`.
    fn traffic(&mut self) -> Result<(String, bool), Violation> {
        let count = self.rng.random_range(1..=3);
        let mut line = String::new();
        let mut jobs = Vec::new();
        for _ in 0..count {
            match self.request() {
                Prepared::Job(job) => jobs.push(*job),
                Prepared::Refused(why) => {
                    let _ = write!(line, "[refused before the writer: {why}] ");
                }
            }
        }
        if jobs.is_empty() {
            return Ok((line, false));
        }
        let cut = self.rng.random_range(0..20) == 0;
        line.push_str(&self.batch(jobs, cut)?);
        if cut {
            line.push_str(&self.crash()?);
        }
        Ok((line, cut))
    }

    /// A request of a random party.
    fn request(&mut self) -> Prepared {
        let party = self.rng.random_range(0..PARTIES);
        let (world, parties, rng) = (&self.world, &self.parties, &mut self.rng);
        match rng.random_range(0..100u32) {
            0..46 => workload::submit(world, parties, party, None, rng),
            46..53 => workload::submit_invalid(world, parties, party, rng),
            53..60 => {
                let held: Vec<DepositId> = self
                    .model
                    .held
                    .keys()
                    .filter(|k| k.0 == party)
                    .map(|k| k.1)
                    .collect();
                let resend = held
                    .get(rng.random_range(0..held.len().max(1)))
                    .and_then(|id| self.sent.get(id).cloned());
                workload::submit(world, parties, party, resend, rng)
            }
            60..72 => workload::register(world, parties, party, rng),
            72..86 => workload::session(world, parties, party, None, rng),
            _ => {
                let mut ids: BTreeSet<DepositId> = self
                    .model
                    .held
                    .keys()
                    .filter(|k| k.0 == party && rng.random_range(0..3) != 0)
                    .map(|k| k.1)
                    .collect();
                if rng.random_range(0..4) == 0 {
                    ids.insert(DepositId::of(&rng.next_u64().to_le_bytes()));
                }
                workload::session(world, parties, party, Some(ids), rng)
            }
        }
    }

    /// Runs one batch and judges its answers; an empty batch is a sweep.
    fn batch(&mut self, jobs: Vec<(Job, Request)>, cut: bool) -> Result<String, Violation> {
        let (jobs, requests): (Vec<Job>, Vec<Request>) = jobs.into_iter().unzip();
        for request in &requests {
            if let Request::Submit { id, bytes, .. } = request {
                self.sent.insert(*id, bytes.clone());
            }
        }
        let answers = self.world.batch(&jobs, cut).map_err(store_failed)?;
        let Some(answers) = answers else {
            // In flight at the cut: a conclusion may or may not have
            // happened, and so may a resubmission after a conclusion.
            for request in &requests {
                match request {
                    Request::Conclude { party, ids } => self
                        .model
                        .maybe_concluded
                        .extend(ids.iter().map(|id| (*party, *id))),
                    Request::Submit { party, id, .. } => {
                        self.model.concluded.remove(&(*party, *id));
                    }
                    _ => {}
                }
            }
            return Ok(format!(
                "batch of {} cut before its fdatasync; ",
                jobs.len()
            ));
        };
        let mut line = if jobs.is_empty() {
            "sweep".to_owned()
        } else {
            "batch:".to_owned()
        };
        for (request, answer) in requests.iter().zip(answers) {
            let said = self.judge(request, answer)?;
            let _ = write!(line, " {said};");
        }
        Ok(line)
    }

    /// Judges one acknowledged answer and folds it into the model.
    fn judge(&mut self, request: &Request, answer: Answer) -> Result<String, Violation> {
        let now = self.world.now;
        match (request, answer) {
            (Request::Register { party, generation }, Answer::Registered(v)) => {
                match v {
                    Verdict::Registered | Verdict::RegisteredIdempotent | Verdict::Rebound => {
                        self.model.registered(*party, *generation, now);
                    }
                    Verdict::StaleGeneration { held } => self.parties[*party].generation = held + 1,
                    _ => {}
                }
                Ok(format!("p{party} register g{generation} -> {v}"))
            }
            (
                Request::Submit {
                    party,
                    id,
                    bytes,
                    valid,
                },
                Answer::Submitted {
                    verdict,
                    before,
                    held,
                },
            ) => {
                let len = bytes.len() as u64;
                model::check_submitted(*valid, len, verdict, before, held)?;
                if verdict == SubmitVerdict::Admitted {
                    // Admitted afresh: a concluded deposit is not held, so
                    // its bytes sent again are a new deposit (§5a.5 s3).
                    self.model.concluded.remove(&(*party, *id));
                    self.model.admitted(*party, *id, now, true);
                }
                let kind = if *valid { "submit" } else { "submit-invalid" };
                Ok(format!("p{party} {kind} {len}B -> {verdict}"))
            }
            (Request::Collect { party }, Answer::Collected(page)) => match page {
                Ok(page) => {
                    self.model.check_page(*party, &page)?;
                    self.model.collected(*party, now);
                    let seqs: Vec<u64> = page.iter().map(|d| d.0).collect();
                    Ok(format!("p{party} collect -> {seqs:?}"))
                }
                Err(v) => Ok(format!("p{party} collect -> {v}")),
            },
            (Request::Conclude { party, ids }, Answer::Concluded(outcome)) => {
                if outcome.is_ok() {
                    for id in ids {
                        self.model.held.remove(&(*party, *id));
                        self.model.concluded.insert((*party, *id));
                    }
                }
                Ok(format!("p{party} conclude {} -> {outcome:?}", ids.len()))
            }
            (request, answer) => Ok(format!("mismatched answer {answer:?} to {request:?}")),
        }
    }

    /// A snapshot, a housekeeping step or a compaction step of the store.
    fn maintain(&mut self) -> Result<String, Violation> {
        let store = self.world.store().map_err(store_failed)?;
        let what = match self.rng.random_range(0..3) {
            0 => store.snapshot_now().map(|()| "snapshot".to_owned()),
            1 => store
                .housekeeping_step()
                .map(|()| "housekeeping".to_owned()),
            _ => store.compact_step(64).map(|n| format!("compact {n}")),
        };
        what.map_err(store_failed)
    }

    /// The power is cut; the carrier restarts on what the disk kept.
    fn crash(&mut self) -> Result<String, Violation> {
        let mut rng = Rng::new(self.rng.next_u64());
        let report = self.world.crash(&mut rng).map_err(store_failed)?;
        Ok(format!(
            "power cut: {} pending writes ({} dropped, {} torn, {} kept), recovered",
            report.pending, report.dropped, report.torn, report.kept
        ))
    }
}
