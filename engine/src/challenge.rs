//! Challenges (§5a.3) and the work counters that prove guarantee 3.
//!
//! - `issue` runs **only after** the caller's admission decision (r2):
//!   from the caller's CSPRNG (injected: the shell passes the operating
//!   system's, a test a seeded one) it draws 32 random bytes for the principal challenge and, for
//!   `register`/`rebind`, 32 more for the address challenge, which it
//!   seals to the `rkid` with the §5 construction
//!   ([`rltp_proofs::seal::seal`]). Every random draw and every asymmetric
//!   operation is counted in [`Counters`], so tests prove that a refused
//!   request cost none (§4.4 guarantee 3, `g3_order`).
//! - `consume_and_verify` is r3: the challenge named by the proof's
//!   `principalChallenge` is **taken from the store first** — consumed
//!   before verification, never restored — and only then checked (issued,
//!   unexpired, same `rkid`, same purpose, the sealed address challenge)
//!   and the Ed25519 signature verified (`challengeConsumption`). A replay
//!   finds nothing and is refused at the cost of a lookup, with no
//!   verification.

use rand_core::{CryptoRng, Rng, TryCryptoRng, TryRng};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{CarrierProof, Purpose};
use rltp_proofs::seal::{self, SealedEnvelope};
use rltp_store::{Challenge, Ms, Store, StoreError};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the work guarantee 3 orders (§4.4): monotonic, never reset.
#[derive(Debug, Default)]
pub struct Counters {
    /// X25519 and Ed25519 operations performed for requests (sealing an
    /// address challenge, verifying a proof signature).
    pub asymmetric_ops: AtomicU64,
    /// Draws from the carrier's CSPRNG (each `fill_bytes` call).
    pub random_draws: AtomicU64,
    /// Ed25519 proof verifications (a subset of `asymmetric_ops`).
    pub verifications: AtomicU64,
}

/// A point-in-time copy of [`Counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CounterSnapshot {
    /// See [`Counters::asymmetric_ops`].
    pub asymmetric_ops: u64,
    /// See [`Counters::random_draws`].
    pub random_draws: u64,
    /// See [`Counters::verifications`].
    pub verifications: u64,
}

impl Counters {
    /// The current values.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            asymmetric_ops: self.asymmetric_ops.load(Ordering::SeqCst),
            random_draws: self.random_draws.load(Ordering::SeqCst),
            verifications: self.verifications.load(Ordering::SeqCst),
        }
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

/// The caller's CSPRNG, counting every draw into `Counters::random_draws`.
struct CountingRng<'a, R: CryptoRng + ?Sized> {
    inner: &'a mut R,
    draws: &'a AtomicU64,
}

impl<R: CryptoRng + ?Sized> TryRng for CountingRng<'_, R> {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Counters::bump(self.draws);
        self.inner.try_next_u32()
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Counters::bump(self.draws);
        self.inner.try_next_u64()
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        Counters::bump(self.draws);
        self.inner.try_fill_bytes(dst)
    }
}

impl<R: CryptoRng + ?Sized> TryCryptoRng for CountingRng<'_, R> {}

/// What a requester receives for a challenge request (§5a.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedChallenge {
    /// The purpose it is good for.
    pub purpose: Purpose,
    /// The queue it is good for.
    pub rkid: Rkid,
    /// The principal challenge, 32 bytes: signed over in the proof's
    /// `principalChallenge` (canonical base64url, 43 characters).
    pub principal_challenge: [u8; 32],
    /// For `register`/`rebind`: the `PROTOCOL.md` §8 plaintext carrying
    /// the 32-byte address challenge, sealed to `rkid` (§5); the registrant
    /// opens it ([`rltp_wire::address_challenge::open_address_challenge`]) and returns the value as
    /// `addressChallenge`. `None` for `collect`/`conclude`.
    pub sealed_address_challenge: Option<SealedEnvelope>,
    /// The last instant it is accepted is `expires_at − 1` (ms): issue
    /// instant + `challenge-lifetime`.
    pub expires_at: Ms,
}

/// Why a challenge could not be issued after the admission decision.
#[derive(Debug)]
pub(crate) enum IssueError {
    /// The `rkid` is a low-order X25519 point: nothing can be sealed to
    /// it, so nobody can ever prove possession of it.
    Unsealable,
    /// The plaintext could not be encoded (not reachable).
    Encoding,
    /// The store could not record the challenge.
    Store(StoreError),
}

/// Draws (from `rng`) and records a challenge for `(rkid, purpose)` at
/// `now`, valid for `lifetime_ms`. Call only after the admission decision
/// (r2).
#[allow(clippy::too_many_arguments)] // the challenge's facts, then its sources
pub(crate) fn issue<S: Store + ?Sized, R: CryptoRng + ?Sized>(
    store: &S,
    counters: &Counters,
    carrier: &CarrierId,
    rkid: Rkid,
    purpose: Purpose,
    now: Ms,
    lifetime_ms: Ms,
    rng: &mut R,
) -> Result<IssuedChallenge, IssueError> {
    let mut rng = CountingRng {
        inner: rng,
        draws: &counters.random_draws,
    };
    let mut principal_challenge = [0u8; 32];
    rng.fill_bytes(&mut principal_challenge);
    let (address_challenge, sealed_address_challenge) = if purpose.changes_succession() {
        let mut address = [0u8; 32];
        rng.fill_bytes(&mut address);
        let plaintext = rltp_wire::address_challenge::address_challenge_plaintext(
            carrier, &rkid, purpose, &address,
        )
        .map_err(|_| IssueError::Encoding)?;
        Counters::bump(&counters.asymmetric_ops);
        let sealed = seal::seal(&plaintext, &rkid, &mut rng).map_err(|_| IssueError::Unsealable)?;
        (Some(address), Some(sealed))
    } else {
        (None, None)
    };
    let expires_at = now.saturating_add(lifetime_ms);
    store
        .issue_challenge(Challenge {
            rkid,
            purpose,
            principal_challenge,
            address_challenge,
            expires_at,
        })
        .map_err(IssueError::Store)?;
    Ok(IssuedChallenge {
        purpose,
        rkid,
        principal_challenge,
        sealed_address_challenge,
        expires_at,
    })
}

/// The outcome of r3.
#[derive(Debug)]
pub(crate) enum Possession {
    /// Both proofs the purpose requires hold.
    Proven,
    /// `refused(possession-failed)`.
    Failed,
}

/// r3 (§5a.3): consume the challenge the proof names, then check it, then
/// verify the signature. Consumption happens first and is never undone.
///
/// # Errors
/// [`StoreError`] if the challenge lookup fails (the caller answers its
/// retriable resource verdict).
pub(crate) fn consume_and_verify<S: Store + ?Sized>(
    store: &S,
    counters: &Counters,
    proof: &CarrierProof,
    now: Ms,
) -> Result<Possession, StoreError> {
    let Some(challenge) = store.take_challenge(proof.principal_challenge())? else {
        // Not issued, or already consumed: nothing live to verify against.
        return Ok(Possession::Failed);
    };
    let matches = challenge.expires_at > now
        && challenge.rkid == *proof.rkid()
        && challenge.purpose == proof.purpose()
        && challenge.address_challenge.as_ref() == proof.address_challenge();
    if !matches {
        return Ok(Possession::Failed);
    }
    Counters::bump(&counters.asymmetric_ops);
    Counters::bump(&counters.verifications);
    Ok(match proof.verify() {
        Ok(()) => Possession::Proven,
        Err(_) => Possession::Failed,
    })
}
