//! What every harness shares: the test constants and the clock's origin,
//! and [`Drive`], the exchanges a test performs through a harness.
//!
//! Two harnesses drive the engine: the engine alone, each call one step
//! with no thread (`engine/tests/common`), and the shell's `Driver` with
//! its writer thread (`carrier/tests/common`). Each implements the calls
//! ([`Drive`]'s required methods); the exchanges built on them — a
//! challenge opened and a proof signed and presented, a collection, a
//! conclusion — and what a test reads back from the store are written
//! here once.

use crate::keys::{Principal, RkidKey, carrier_id};
use rltp_engine::table::State;
use rltp_engine::{
    Collected, Concluded, EngineConfig, EngineConstants, EngineError, IssuedChallenge, SessionError,
};
use rltp_proofs::Ms;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_storage::{Binding, DepositId, ReadTxn, Store, Tombstone};
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::sync::Arc;

/// The instant every harness clock starts at (ms).
pub const T0: Ms = 1_000_000;

/// Test constants: horizons in ms, sizes in bytes.
pub fn constants() -> EngineConstants {
    EngineConstants {
        orphan_horizon_ms: 10_000,
        give_up_horizon_ms: 100_000,
        challenge_lifetime_ms: 60_000,
        queue_floor: 65_536,
        max_queue_bytes: 131_072,
        max_binding_tombstones: 1_000,
        status_horizon_ms: 30_000,
    }
}

/// Private limits that never bind.
pub fn unlimited() -> EngineConfig {
    EngineConfig::new(u64::MAX / 4, 1 << 40)
}

/// The verdict spelling of a register/collect/conclude outcome.
pub fn spelling<T>(r: &Result<T, SessionError>) -> String {
    match r {
        Ok(_) => "served".to_owned(),
        Err(e) => e.to_string(),
    }
}

/// A harness over the engine and its manual clock. The required methods
/// are the harness's calls into the engine (each answers as the engine
/// or the shell's `Driver` does); the provided ones are the exchanges and
/// reads every test uses, built on them.
pub trait Drive {
    /// The store under the engine.
    type S: Store;

    /// The store under the engine.
    fn store(&self) -> &Arc<Self::S>;
    /// The manual clock's reading (ms).
    fn now(&self) -> Ms;
    /// Sets the manual clock to `now` (ms).
    fn set(&self, now: Ms);
    /// §5a.3: a challenge for `rkid` and `purpose` at now.
    fn challenge(&self, rkid: &Rkid, purpose: Purpose) -> Result<IssuedChallenge, SessionError>;
    /// §5a.3 register or rebind of a signed proof.
    fn decide_register(&self, proof: &[u8]) -> Result<Verdict, EngineError>;
    /// §5a.7 collect of a signed proof: the page after `after`, at most
    /// `limit` deposits.
    fn decide_collect(
        &self,
        proof: &[u8],
        after: Option<u64>,
        limit: usize,
    ) -> Result<Collected, SessionError>;
    /// §5a.8 conclude of a signed proof.
    fn decide_conclude(&self, proof: &[u8], ids: &[DepositId]) -> Result<Concluded, SessionError>;
    /// §5a.5 submit.
    fn decide_submit(&self, rkid: &Rkid, bytes: &[u8]) -> Result<SubmitVerdict, EngineError>;
    /// §5a.9: a sweep at now; the next due instant.
    fn decide_sweep(&self) -> Result<Option<Ms>, EngineError>;

    /// Moves the manual clock `ms` forward.
    fn advance(&self, ms: Ms) {
        self.set(self.now() + ms);
    }

    /// A signed register/rebind proof over a freshly issued challenge
    /// (the sealed address challenge opened with the rkid secret).
    fn registration_proof(
        &self,
        purpose: Purpose,
        key: &RkidKey,
        principal: &Principal,
        generation: u64,
    ) -> Result<Vec<u8>, SessionError> {
        let issued = self.challenge(&key.rkid, purpose)?;
        let sealed = issued.sealed_address_challenge.as_ref().unwrap();
        let address =
            open_address_challenge(sealed, &key.secret, &carrier_id(), &key.rkid, purpose).unwrap();
        Ok(UnsignedProof::registration(
            purpose,
            carrier_id(),
            key.rkid,
            generation,
            issued.principal_challenge,
            address,
        )
        .unwrap()
        .sign(&principal.key)
        .unwrap())
    }

    /// A signed collect/conclude proof over a freshly issued challenge.
    fn session_proof(
        &self,
        purpose: Purpose,
        rkid: &Rkid,
        principal: &Principal,
    ) -> Result<Vec<u8>, SessionError> {
        let issued = self.challenge(rkid, purpose)?;
        assert!(issued.sealed_address_challenge.is_none());
        Ok(
            UnsignedProof::session(purpose, carrier_id(), *rkid, issued.principal_challenge)
                .unwrap()
                .sign(&principal.key)
                .unwrap(),
        )
    }

    /// The whole exchange: challenge, open, sign, register.
    fn register(&self, key: &RkidKey, principal: &Principal, generation: u64) -> Verdict {
        self.present(Purpose::Register, key, principal, generation)
    }

    /// The whole exchange: challenge, open, sign, rebind.
    fn rebind(&self, key: &RkidKey, principal: &Principal, generation: u64) -> Verdict {
        self.present(Purpose::Rebind, key, principal, generation)
    }

    /// A registration-side exchange for `purpose`: its verdict, whether
    /// refused at the challenge or decided on the proof.
    fn present(
        &self,
        purpose: Purpose,
        key: &RkidKey,
        principal: &Principal,
        generation: u64,
    ) -> Verdict {
        match self.registration_proof(purpose, key, principal, generation) {
            Ok(proof) => self.decide_register(&proof).unwrap(),
            Err(e) => e.verdict().unwrap(),
        }
    }

    /// A whole collection: challenge, sign, collect every deposit.
    fn collect(&self, rkid: &Rkid, principal: &Principal) -> Result<Collected, SessionError> {
        let proof = self.session_proof(Purpose::Collect, rkid, principal)?;
        self.decide_collect(&proof, None, usize::MAX)
    }

    /// A whole conclusion: challenge, sign, conclude `ids`.
    fn conclude(
        &self,
        rkid: &Rkid,
        principal: &Principal,
        ids: &[DepositId],
    ) -> Result<Concluded, SessionError> {
        let proof = self.session_proof(Purpose::Conclude, rkid, principal)?;
        self.decide_conclude(&proof, ids)
    }

    /// A submission's verdict (the store answers).
    fn submit(&self, rkid: &Rkid, bytes: &[u8]) -> SubmitVerdict {
        self.decide_submit(rkid, bytes).unwrap()
    }

    /// A sweep at now (the store answers).
    fn sweep(&self) {
        self.decide_sweep().unwrap();
    }

    /// The stored binding of `rkid`.
    fn binding(&self, rkid: &Rkid) -> Option<Binding> {
        self.store().read().unwrap().binding(rkid).unwrap()
    }

    /// The stored tombstone of `rkid`.
    fn tombstone(&self, rkid: &Rkid) -> Option<Tombstone> {
        self.store().read().unwrap().tombstone(rkid).unwrap()
    }

    /// The stored state (after a sweep, the state at now).
    fn state(&self, rkid: &Rkid) -> State {
        let binding = self.binding(rkid);
        let tombstone = self.tombstone(rkid);
        assert!(
            binding.is_none() || tombstone.is_none(),
            "{rkid} holds a binding and a tombstone"
        );
        rltp_engine::state_of(binding.as_ref(), tombstone.as_ref())
    }

    /// The ids of the deposits held for `rkid`, in queue order.
    fn held_ids(&self, rkid: &Rkid) -> Vec<DepositId> {
        self.store()
            .read()
            .unwrap()
            .deposits(rkid, None, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|d| d.id)
            .collect()
    }
}

/// What [`drive_through!`](crate::drive_through) names, from the crates
/// the harnesses already use.
#[doc(hidden)]
pub mod __drive {
    pub use rltp_engine::{Collected, Concluded, EngineError, IssuedChallenge, SessionError};
    pub use rltp_proofs::Ms;
    pub use rltp_proofs::multikey::Rkid;
    pub use rltp_proofs::proof::Purpose;
    pub use rltp_storage::{DepositId, Store};
    pub use rltp_wire::verdict::{SubmitVerdict, Verdict};
    pub use std::sync::Arc;
}

/// Implements [`Drive`] for `Harness<S>` whose field `front` answers the
/// engine's calls under the names the shell's `Driver` and the engine
/// tests' one-step `Carrier` share (`store`, `now`, `challenge`,
/// `register`, `collect`, `conclude`, `submit`, `sweep`);
/// `set: |h, now| …` moves the harness's manual clock.
///
/// `drive_through!(Harness.engine, set: |h, now| h.clock.set(now));`
#[macro_export]
macro_rules! drive_through {
    ($harness:ident . $front:ident, set: |$h:ident, $now:ident| $set:expr) => {
        impl<S: $crate::__drive::Store> $crate::Drive for $harness<S> {
            type S = S;

            fn store(&self) -> &$crate::__drive::Arc<S> {
                self.$front.store()
            }

            fn now(&self) -> $crate::__drive::Ms {
                self.$front.now()
            }

            fn set(&self, $now: $crate::__drive::Ms) {
                let $h = self;
                $set
            }

            fn challenge(
                &self,
                rkid: &$crate::__drive::Rkid,
                purpose: $crate::__drive::Purpose,
            ) -> Result<$crate::__drive::IssuedChallenge, $crate::__drive::SessionError> {
                self.$front.challenge(rkid, purpose)
            }

            fn decide_register(
                &self,
                proof: &[u8],
            ) -> Result<$crate::__drive::Verdict, $crate::__drive::EngineError> {
                self.$front.register(proof)
            }

            fn decide_collect(
                &self,
                proof: &[u8],
                after: Option<u64>,
                limit: usize,
            ) -> Result<$crate::__drive::Collected, $crate::__drive::SessionError> {
                self.$front.collect(proof, after, limit)
            }

            fn decide_conclude(
                &self,
                proof: &[u8],
                ids: &[$crate::__drive::DepositId],
            ) -> Result<$crate::__drive::Concluded, $crate::__drive::SessionError> {
                self.$front.conclude(proof, ids)
            }

            fn decide_submit(
                &self,
                rkid: &$crate::__drive::Rkid,
                bytes: &[u8],
            ) -> Result<$crate::__drive::SubmitVerdict, $crate::__drive::EngineError> {
                self.$front.submit(rkid, bytes)
            }

            fn decide_sweep(
                &self,
            ) -> Result<Option<$crate::__drive::Ms>, $crate::__drive::EngineError> {
                self.$front.sweep()
            }
        }
    };
}
