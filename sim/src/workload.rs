//! The simulated parties and what they ask of the carrier: every request
//! is built for real (sealed envelopes, challenges opened with the
//! `rkid`'s secret, proofs signed by the control principal), from the
//! simulation's one generator.

use crate::world::{self, Job, World};
use ed25519_dalek::SigningKey;
use rand::rngs::StdRng;
use rand::{Rng as _, RngExt as _};
use rltp_engine::{Operation, SessionError};
use rltp_proofs::DepositId;
use rltp_proofs::multikey::{Rkid, RkidText};
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_proofs::seal::SealedEnvelope;
use rltp_wire::Verdict;
use rltp_wire::address_challenge::open_address_challenge;
use std::collections::BTreeSet;

/// One recipient: its address key, its control principal, and the
/// generation it registers with next.
#[derive(Debug)]
pub struct Party {
    secret: [u8; 32],
    /// Its queue's address.
    pub rkid: Rkid,
    principal: SigningKey,
    /// The generation its next registration names.
    pub generation: u64,
}

impl Party {
    /// A party whose keys are drawn from `rng`.
    pub fn new(rng: &mut StdRng) -> Party {
        let secret: [u8; 32] = rng.random();
        let rkid = Rkid::from_bytes(
            x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(secret)).to_bytes(),
        );
        Party {
            secret,
            rkid,
            principal: SigningKey::from_bytes(&rng.random()),
            generation: 1,
        }
    }
}

/// A request the shell turned into a job, or answered before the writer.
#[derive(Debug)]
pub enum Prepared {
    /// A job for the batch, and what the simulation needs to judge its
    /// answer.
    Job(Box<(Job, Request)>),
    /// Refused before the writer (r1–r3, a challenge), with its verdict.
    Refused(String),
}

/// What a job asked, for judging its answer and for the trace.
#[derive(Debug, Clone)]
pub enum Request {
    /// A registration of `party` at `generation`.
    Register {
        /// The party.
        party: usize,
        /// The generation named.
        generation: u64,
    },
    /// A submission to `party`'s queue.
    Submit {
        /// The party.
        party: usize,
        /// Its deposit id.
        id: DepositId,
        /// Its bytes.
        bytes: Vec<u8>,
        /// Whether it passes s2.
        valid: bool,
    },
    /// `party` collects.
    Collect {
        /// The party.
        party: usize,
    },
    /// `party` concludes `ids`.
    Conclude {
        /// The party.
        party: usize,
        /// The ids named.
        ids: BTreeSet<DepositId>,
    },
}

/// A valid submission to `party`: a shape-valid sealed envelope (§5) of
/// a random ciphertext (the carrier never opens one, and a real seal would
/// cost an X25519 agreement per deposit), or, now and then, the bytes of a
/// deposit the party holds again (`resend`).
pub fn submit(
    world: &World,
    parties: &[Party],
    party: usize,
    resend: Option<Vec<u8>>,
    rng: &mut StdRng,
) -> Prepared {
    let bytes = resend.unwrap_or_else(|| {
        let len = rng.random_range(17..2_600);
        envelope(&parties[party].rkid, len, rng)
    });
    screen(world, parties, party, bytes, true)
}

/// A sealed envelope addressed to `rkid` with a `len`-byte random
/// ciphertext.
fn envelope(rkid: &Rkid, len: usize, rng: &mut StdRng) -> Vec<u8> {
    let mut ciphertext = vec![0u8; len];
    rng.fill_bytes(&mut ciphertext);
    SealedEnvelope {
        rkid: *rkid,
        epk: rng.random(),
        nonce: rng.random(),
        ciphertext,
    }
    .to_bytes()
}

/// A submission s2 must refuse: junk, an envelope sealed to another
/// queue, or one over the bound.
pub fn submit_invalid(
    world: &World,
    parties: &[Party],
    party: usize,
    rng: &mut StdRng,
) -> Prepared {
    let other = (party + 1) % parties.len();
    let bytes = match rng.random_range(0..3) {
        0 => (0..rng.random_range(1..400))
            .map(|_| rng.random::<u8>())
            .collect::<Vec<u8>>(),
        1 => envelope(&parties[other].rkid, 100, rng),
        _ => envelope(&parties[party].rkid, 10_000, rng),
    };
    screen(world, parties, party, bytes, false)
}

fn screen(world: &World, parties: &[Party], party: usize, bytes: Vec<u8>, valid: bool) -> Prepared {
    let submission = world
        .engine()
        .screen(&RkidText::of(&parties[party].rkid), bytes.clone());
    let id = submission.id();
    Prepared::Job(Box::new((
        Job::Submit(submission),
        Request::Submit {
            party,
            id,
            bytes,
            valid,
        },
    )))
}

/// A registration: challenge, open the sealed address challenge, sign,
/// r1–r3.
pub fn register(world: &World, parties: &[Party], party: usize, rng: &mut StdRng) -> Prepared {
    let p = &parties[party];
    let proof = (|| {
        let issued = world.challenge(&p.rkid, Purpose::Register, rng)?;
        let sealed = issued
            .sealed_address_challenge
            .as_ref()
            .ok_or(SessionError::Refused(Verdict::Malformed))?;
        let address = open_address_challenge(
            sealed,
            &p.secret,
            &world::carrier_id(),
            &p.rkid,
            Purpose::Register,
        )
        .map_err(|_| SessionError::Refused(Verdict::PossessionFailed))?;
        UnsignedProof::registration(
            Purpose::Register,
            world::carrier_id(),
            p.rkid,
            p.generation,
            issued.principal_challenge,
            address,
        )
        .map_err(|_| SessionError::Refused(Verdict::Malformed))?
        .sign(&p.principal)
        .map_err(|_| SessionError::Refused(Verdict::Malformed))
    })();
    authorized(world, proof, Operation::Register, |a| {
        (
            Job::Register(a),
            Request::Register {
                party,
                generation: p.generation,
            },
        )
    })
}

/// A collect (`ids` empty) or a conclusion of `ids`: challenge, sign,
/// r1–r3.
pub fn session(
    world: &World,
    parties: &[Party],
    party: usize,
    conclude: Option<BTreeSet<DepositId>>,
    rng: &mut StdRng,
) -> Prepared {
    let p = &parties[party];
    let purpose = match conclude {
        Some(_) => Purpose::Conclude,
        None => Purpose::Collect,
    };
    let proof = world.challenge(&p.rkid, purpose, rng).and_then(|issued| {
        UnsignedProof::session(
            purpose,
            world::carrier_id(),
            p.rkid,
            issued.principal_challenge,
        )
        .map_err(|_| SessionError::Refused(Verdict::Malformed))?
        .sign(&p.principal)
        .map_err(|_| SessionError::Refused(Verdict::Malformed))
    });
    let operation = match purpose {
        Purpose::Conclude => Operation::Conclude,
        _ => Operation::Collect,
    };
    authorized(world, proof, operation, |a| match conclude {
        Some(ids) => (
            Job::Conclude(a, ids.clone()),
            Request::Conclude { party, ids },
        ),
        None => (Job::Collect(a), Request::Collect { party }),
    })
}

/// r1–r3 over `proof`; a refusal is answered before the writer.
fn authorized(
    world: &World,
    proof: Result<Vec<u8>, SessionError>,
    operation: Operation,
    job: impl FnOnce(rltp_engine::Authorized) -> (Job, Request),
) -> Prepared {
    match proof.and_then(|proof| world.authorize(&proof, operation)) {
        Ok(a) => Prepared::Job(Box::new(job(a))),
        Err(e) => Prepared::Refused(e.to_string()),
    }
}
