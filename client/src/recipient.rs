//! The recipient side (§5a.3, §5a.7, §5a.8): register or rebind, collect
//! (once or as a watch session) and conclude, each authorized by a fresh
//! proof of possession over a fresh challenge.

use super::{Client, ClientError, ProofError, read_answer, strict_answer};
use crate::net;
use ed25519_dalek::SigningKey;
use rltp_proofs::DepositId;
use rltp_proofs::envelope::MAX_ENVELOPE_BYTES;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::proof::{Purpose, UnsignedProof};
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::response::{self, ChallengeAnswer, CollectFrame};
use rltp_wire::verdict::Verdict;
use rltp_wire::{self as wire, Request};
use std::fmt;

/// What a recipient holds for one carrier (Identity §7a): the carrier
/// identifier `C`, the Ed25519 control principal, the X25519 secret of
/// its `rkid`, and the generation it registers with.
///
/// Holds secrets: `Debug` is redacted; the X25519 secret is wiped on drop.
pub struct RecipientKeys {
    carrier: CarrierId,
    principal: SigningKey,
    rkid_secret: x25519_dalek::StaticSecret,
    rkid: Rkid,
    generation: u64,
}

impl RecipientKeys {
    /// Keys for `carrier`: the control principal `principal`, the rkid
    /// secret `rkid_secret` (32 bytes, X25519), and `generation`
    /// (Identity §7a.3, `[1, 2^53 − 1]`).
    pub fn new(
        carrier: CarrierId,
        principal: SigningKey,
        rkid_secret: [u8; 32],
        generation: u64,
    ) -> RecipientKeys {
        let rkid_secret = x25519_dalek::StaticSecret::from(rkid_secret);
        let rkid = Rkid::from_bytes(x25519_dalek::PublicKey::from(&rkid_secret).to_bytes());
        RecipientKeys {
            carrier,
            principal,
            rkid_secret,
            rkid,
            generation,
        }
    }

    /// The queue address (the X25519 public key as Multikey).
    pub fn rkid(&self) -> &Rkid {
        &self.rkid
    }

    /// The carrier identifier `C` the proofs name.
    pub fn carrier(&self) -> &CarrierId {
        &self.carrier
    }

    /// The control principal's `did:key`.
    pub fn principal(&self) -> DidKey {
        DidKey::from_verifying_key(&self.principal.verifying_key())
    }

    /// The generation registered with.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The same keys registering with another generation.
    pub fn with_generation(mut self, generation: u64) -> RecipientKeys {
        self.generation = generation;
        self
    }

    /// Opens a collected envelope with the rkid secret (§5): the plaintext
    /// (the JCS document).
    ///
    /// # Errors
    /// [`rltp_proofs::seal::SealError`] / [`rltp_proofs::envelope::ShapeError`] as text.
    pub fn open(&self, envelope: &[u8]) -> Result<Vec<u8>, String> {
        let sealed = rltp_proofs::envelope::check_shape(envelope, &self.rkid, MAX_ENVELOPE_BYTES)
            .map_err(|e| e.to_string())?;
        rltp_proofs::seal::open(&sealed, self.rkid_secret.as_bytes()).map_err(|e| e.to_string())
    }

    /// A signed `collect`/`conclude` proof over `principal_challenge`.
    ///
    /// # Errors
    /// [`ClientError::Proof`].
    pub fn session_proof(
        &self,
        purpose: Purpose,
        principal_challenge: [u8; 32],
    ) -> Result<Vec<u8>, ClientError> {
        UnsignedProof::session(
            purpose,
            self.carrier.clone(),
            self.rkid,
            principal_challenge,
        )
        .map_err(ProofError::Build)?
        .sign(&self.principal)
        .map_err(|e| ProofError::Sign(e).into())
    }
}

impl fmt::Debug for RecipientKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecipientKeys")
            .field("carrier", &self.carrier.as_str())
            .field("rkid", &self.rkid.to_multikey())
            .field("principal", &self.principal().to_did_key())
            .field("generation", &self.generation)
            .field("secrets", &"[redacted]")
            .finish()
    }
}

/// The outcome of a registration attempt (§5a.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterOutcome {
    /// The challenge itself was refused (`refused(admission-resource)`,
    /// or `refused(possession-failed)` for an rkid nothing seals to).
    ChallengeRefused(Verdict),
    /// The carrier's verdict on the proof. `refused(stale-generation)`
    /// carries the held generation: a registration wins with any
    /// generation above it.
    Verdict(Verdict),
}

impl RegisterOutcome {
    /// The verdict, whichever step gave it.
    pub fn verdict(&self) -> Verdict {
        match self {
            RegisterOutcome::ChallengeRefused(v) | RegisterOutcome::Verdict(v) => *v,
        }
    }

    /// For `refused(stale-generation)`: the smallest generation that would
    /// win (held + 1).
    pub fn winning_generation(&self) -> Option<u64> {
        match self.verdict() {
            Verdict::StaleGeneration { held } => held.checked_add(1),
            _ => None,
        }
    }
}

/// One deposit handed out by `collect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// Its id (checked: the sha2-256 of `envelope`).
    pub id: DepositId,
    /// Admission-order position (page on with it).
    pub seq: u64,
    /// The sealed envelope bytes.
    pub envelope: Vec<u8>,
}

/// A collect page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectPage {
    /// `served`, or the refusal (then `deposits` is empty).
    pub verdict: Verdict,
    /// The deposits, in admission order.
    pub deposits: Vec<Delivered>,
    /// For `served`: whether more deposits follow (collect again with
    /// `after` = the last `seq`).
    pub more: bool,
}

/// What a watch session yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// A deposit (from the first page or pushed later).
    Deposit(Delivered),
    /// The first page is complete; `more` deposits follow immediately.
    PageEnd {
        /// Whether the page was cut at the limit.
        more: bool,
    },
    /// The session ended with this verdict (a refusal at the start, or
    /// `refused(no-such-queue)` when the binding left the principal).
    Ended(Verdict),
}

/// An open watch session (`collect` with `watch`): one authorization
/// session, one principal (§5a.3).
#[derive(Debug)]
pub struct Watch {
    send: rltp_quic::stream::SendHalf,
    /// Read in large chunks: a push of many deposits takes few reads.
    recv: net::FrameReader,
}

impl Watch {
    /// The next event; `Ok(None)` when the server ended the session
    /// without a verdict (shutdown) or after [`WatchEvent::Ended`].
    ///
    /// # Errors
    /// Transport errors; [`ClientError::Server`] (e.g. `second-proof`);
    /// [`ClientError::Protocol`].
    pub async fn next(&mut self) -> Result<Option<WatchEvent>, ClientError> {
        read_collect_frame(&mut self.recv).await.map(|frame| {
            frame.map(|frame| match frame {
                Frame::Deposit(d) => WatchEvent::Deposit(d),
                Frame::End {
                    verdict: Verdict::Served,
                    more,
                } => WatchEvent::PageEnd { more },
                Frame::End { verdict, .. } => WatchEvent::Ended(verdict),
            })
        })
    }

    /// Presents another `collect` proof on this session's stream. The
    /// carrier refuses it (`second-proof`) and ends the session: one
    /// authorization session carries exactly one principal (§5a.3). For
    /// conformance tests.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn present_second_proof(&mut self, proof: &[u8]) -> Result<(), ClientError> {
        let request = Request::Collect {
            after: None,
            limit: wire::MAX_COLLECT_LIMIT,
            watch: false,
        };
        net::write_frame(&mut self.send, &request.to_header(), proof).await?;
        Ok(())
    }

    /// Ends the session from this side.
    pub fn stop(mut self) {
        self.recv.stop();
        self.send.finish();
    }
}

enum Frame {
    Deposit(Delivered),
    End { verdict: Verdict, more: bool },
}

/// Reads the next frame of a collect stream (§5a.7): the header from its
/// bytes by [`CollectFrame::from_header_bytes`] (the carrier's spelling
/// without a JSON tree, anything else by the strict reader), then the
/// body under the frame's bound, checked against the deposit id.
async fn read_collect_frame(recv: &mut net::FrameReader) -> Result<Option<Frame>, ClientError> {
    let Some(prefix) = recv.prefix().await? else {
        return Ok(None);
    };
    let frame = CollectFrame::from_header_bytes(recv.header_bytes(prefix).await?)?
        .map_err(ClientError::Server)?;
    match frame {
        CollectFrame::Deposit { id, seq } => {
            let envelope = recv.body(prefix, MAX_ENVELOPE_BYTES).await?;
            if DepositId::of(&envelope) != id {
                return Err(ClientError::violation(format!(
                    "deposit {} does not match its bytes",
                    id.to_multibase()
                )));
            }
            Ok(Some(Frame::Deposit(Delivered { id, seq, envelope })))
        }
        CollectFrame::End { verdict, more } => {
            recv.body(prefix, 0).await?;
            Ok(Some(Frame::End {
                verdict,
                more: more.unwrap_or(false),
            }))
        }
    }
}

impl Client {
    /// A fresh challenge for `purpose`, or the refusal.
    async fn issued(
        &self,
        keys: &RecipientKeys,
        purpose: Purpose,
    ) -> Result<Result<([u8; 32], Option<[u8; 32]>), Verdict>, ClientError> {
        match self.challenge(keys.rkid(), purpose).await? {
            ChallengeAnswer::Refused(v) => Ok(Err(v)),
            ChallengeAnswer::Issued {
                principal_challenge,
                address_challenge,
                ..
            } => {
                let address = match address_challenge {
                    Some(sealed) => Some(open_address_challenge(
                        &sealed,
                        keys.rkid_secret.as_bytes(),
                        &keys.carrier,
                        keys.rkid(),
                        purpose,
                    )?),
                    None => None,
                };
                Ok(Ok((principal_challenge, address)))
            }
        }
    }

    /// `register` or `rebind` (§5a.3, `PROTOCOL.md` §8): requests a
    /// challenge, opens the sealed address challenge with the rkid secret
    /// (checking `v`, `carrier`, `rkid`, `purpose`), signs both challenges
    /// with the control principal at `keys.generation()`, presents the
    /// proof, and returns the verdict.
    ///
    /// # Errors
    /// Transport errors, [`ClientError::AddressChallenge`] (the challenge
    /// was not the one asked for: nothing is signed),
    /// [`ClientError::Protocol`], [`ClientError::Proof`].
    pub async fn register(
        &self,
        keys: &RecipientKeys,
        purpose: Purpose,
    ) -> Result<RegisterOutcome, ClientError> {
        if !purpose.changes_succession() {
            return Err(ProofError::NotSuccession(purpose).into());
        }
        let (principal_challenge, address) = match self.issued(keys, purpose).await? {
            Ok(pair) => pair,
            Err(v) => return Ok(RegisterOutcome::ChallengeRefused(v)),
        };
        let address = address.ok_or_else(|| ClientError::violation("no address challenge"))?;
        let proof = UnsignedProof::registration(
            purpose,
            keys.carrier.clone(),
            keys.rkid,
            keys.generation,
            principal_challenge,
            address,
        )
        .map_err(ProofError::Build)?
        .sign(&keys.principal)
        .map_err(ProofError::Sign)?;
        self.register_proof(&proof)
            .await
            .map(RegisterOutcome::Verdict)
    }

    /// Presents an already signed register/rebind proof (replay and
    /// expiry tests).
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Server`], [`ClientError::Protocol`].
    pub async fn register_proof(&self, proof: &[u8]) -> Result<Verdict, ClientError> {
        let header = self.call(&Request::Register, proof).await?;
        Ok(response::parse_verdict_header(&header, &[])?.0)
    }

    /// A signed session proof for `purpose` over a fresh challenge, or
    /// the challenge refusal.
    ///
    /// # Errors
    /// As [`Client::challenge`], [`ClientError::Proof`].
    pub async fn session_proof(
        &self,
        keys: &RecipientKeys,
        purpose: Purpose,
    ) -> Result<Result<Vec<u8>, Verdict>, ClientError> {
        match self.issued(keys, purpose).await? {
            Ok((principal_challenge, _)) => {
                Ok(Ok(keys.session_proof(purpose, principal_challenge)?))
            }
            Err(v) => Ok(Err(v)),
        }
    }

    /// `collect` (§5a.7, §5a.8): one page of held deposits with `seq`
    /// above `after`, at most `limit` (1..=1024).
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Server`], [`ClientError::Protocol`].
    pub async fn collect(
        &self,
        keys: &RecipientKeys,
        after: Option<u64>,
        limit: u32,
    ) -> Result<CollectPage, ClientError> {
        let proof = match self.session_proof(keys, Purpose::Collect).await? {
            Ok(proof) => proof,
            Err(verdict) => {
                return Ok(CollectPage {
                    verdict,
                    deposits: Vec::new(),
                    more: false,
                });
            }
        };
        self.collect_proof(&proof, after, limit).await
    }

    /// `collect` with an already signed proof.
    ///
    /// # Errors
    /// As [`Client::collect`].
    pub async fn collect_proof(
        &self,
        proof: &[u8],
        after: Option<u64>,
        limit: u32,
    ) -> Result<CollectPage, ClientError> {
        let request = Request::Collect {
            after,
            limit,
            watch: false,
        };
        let (_send, mut recv) = self.open(&request, proof, false).await?;
        let timeout = self.timeout;
        let read = async {
            let mut deposits = Vec::new();
            loop {
                match read_collect_frame(&mut recv).await? {
                    Some(Frame::Deposit(d)) => deposits.push(d),
                    Some(Frame::End { verdict, more }) => {
                        return Ok(CollectPage {
                            verdict,
                            deposits,
                            more,
                        });
                    }
                    None => {
                        return Err(ClientError::violation("collect ended without a verdict"));
                    }
                }
            }
        };
        tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| ClientError::Timeout(timeout))?
    }

    /// `collect` with `watch` (`PROTOCOL.md` §7): the first page, then
    /// every newly admitted deposit as it arrives, on one stream that is
    /// one authorization session.
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Proof`]. A refusal arrives as
    /// [`WatchEvent::Ended`] or, for the challenge,
    /// `Ok(Err(verdict))`.
    pub async fn watch(
        &self,
        keys: &RecipientKeys,
        after: Option<u64>,
    ) -> Result<Result<Watch, Verdict>, ClientError> {
        let proof = match self.session_proof(keys, Purpose::Collect).await? {
            Ok(proof) => proof,
            Err(v) => return Ok(Err(v)),
        };
        let request = Request::Collect {
            after,
            limit: wire::MAX_COLLECT_LIMIT,
            watch: true,
        };
        let (send, recv) = self.open(&request, &proof, true).await?;
        Ok(Ok(Watch { send, recv }))
    }

    /// `conclude` (§5a.8): concludes `deposits` (only terminal outcomes:
    /// a transient local failure is never concluded). Returns the verdict
    /// and, for `served`, how many of them were still held.
    ///
    /// # Errors
    /// Transport errors, [`ClientError::Server`], [`ClientError::Protocol`].
    pub async fn conclude(
        &self,
        keys: &RecipientKeys,
        deposits: &[DepositId],
    ) -> Result<(Verdict, Option<u64>), ClientError> {
        let proof = match self.session_proof(keys, Purpose::Conclude).await? {
            Ok(proof) => proof,
            Err(v) => return Ok((v, None)),
        };
        self.conclude_proof(&proof, deposits).await
    }

    /// `conclude` with an already signed proof.
    ///
    /// # Errors
    /// As [`Client::conclude`].
    pub async fn conclude_proof(
        &self,
        proof: &[u8],
        deposits: &[DepositId],
    ) -> Result<(Verdict, Option<u64>), ClientError> {
        let request = Request::Conclude {
            deposits: deposits.to_vec(),
        };
        let (_send, mut recv) = self.open(&request, proof, false).await?;
        let (header, _) = read_answer(&mut recv, 0, self.timeout, strict_answer).await?;
        Ok(response::parse_conclude_header(&header)?)
    }
}

/// The recipient operations, retried (`PROTOCOL.md` §9, [`super::retry`]):
/// each runs its [`Client`] method under [`super::retry::persist`], so a
/// retriable refusal — of the challenge (`refused(admission-resource)`) or
/// of the proof (`refused(admission-resource)`,
/// `registration-refused(capacity)`) — and a transport failure are retried
/// with backoff, on a fresh challenge and, after a transport failure, a
/// fresh connection, until `schedule` gives up; every other verdict is the
/// outcome.
impl super::retry::Link {
    /// [`Client::register`], retried.
    ///
    /// # Errors
    /// As [`Client::register`], for faults retrying cannot cure.
    pub async fn register(
        &mut self,
        keys: &RecipientKeys,
        purpose: Purpose,
        schedule: &mut super::retry::Schedule,
        on_event: impl FnMut(super::retry::RetryEvent<Verdict>),
    ) -> Result<super::retry::Finished<RegisterOutcome>, ClientError> {
        super::retry::persist(
            self,
            schedule,
            async |client: &Client| {
                let outcome = client.register(keys, purpose).await?;
                Ok(again_if_retriable(outcome.verdict(), outcome))
            },
            on_event,
        )
        .await
    }

    /// [`Client::collect`], retried.
    ///
    /// # Errors
    /// As [`Client::collect`], for faults retrying cannot cure.
    pub async fn collect(
        &mut self,
        keys: &RecipientKeys,
        after: Option<u64>,
        limit: u32,
        schedule: &mut super::retry::Schedule,
        on_event: impl FnMut(super::retry::RetryEvent<Verdict>),
    ) -> Result<super::retry::Finished<CollectPage>, ClientError> {
        super::retry::persist(
            self,
            schedule,
            async |client: &Client| {
                let page = client.collect(keys, after, limit).await?;
                Ok(again_if_retriable(page.verdict, page))
            },
            on_event,
        )
        .await
    }

    /// [`Client::conclude`], retried: the verdict and, for `served`, how
    /// many were still held.
    ///
    /// # Errors
    /// As [`Client::conclude`], for faults retrying cannot cure.
    pub async fn conclude(
        &mut self,
        keys: &RecipientKeys,
        deposits: &[DepositId],
        schedule: &mut super::retry::Schedule,
        on_event: impl FnMut(super::retry::RetryEvent<Verdict>),
    ) -> Result<super::retry::Finished<(Verdict, Option<u64>)>, ClientError> {
        super::retry::persist(
            self,
            schedule,
            async |client: &Client| {
                let answer = client.conclude(keys, deposits).await?;
                Ok(again_if_retriable(answer.0, answer))
            },
            on_event,
        )
        .await
    }

    /// [`Client::watch`], retried until the session is open (or refused
    /// for good).
    ///
    /// # Errors
    /// As [`Client::watch`], for faults retrying cannot cure.
    pub async fn watch(
        &mut self,
        keys: &RecipientKeys,
        after: Option<u64>,
        schedule: &mut super::retry::Schedule,
        on_event: impl FnMut(super::retry::RetryEvent<Verdict>),
    ) -> Result<super::retry::Finished<Result<Watch, Verdict>>, ClientError> {
        super::retry::persist(
            self,
            schedule,
            async |client: &Client| {
                Ok(match client.watch(keys, after).await? {
                    Err(v) if v.retriable() => super::retry::Try::Again(v),
                    opened => super::retry::Try::Done(opened),
                })
            },
            on_event,
        )
        .await
    }

    /// [`Client::status`], retried over transport failures.
    ///
    /// # Errors
    /// As [`Client::status`], for faults retrying cannot cure.
    pub async fn status(
        &mut self,
        rkid: &Rkid,
        deposit: &DepositId,
        schedule: &mut super::retry::Schedule,
        on_event: impl FnMut(super::retry::RetryEvent<Verdict>),
    ) -> Result<super::retry::Finished<rltp_wire::verdict::DepositStatus>, ClientError> {
        super::retry::persist(
            self,
            schedule,
            async |client: &Client| {
                Ok(super::retry::Try::Done(client.status(rkid, deposit).await?))
            },
            on_event,
        )
        .await
    }

    /// [`Client::declaration`] (and, with `expected`, its issuer check),
    /// retried over transport failures.
    ///
    /// # Errors
    /// As [`Client::declaration_from`], for faults retrying cannot cure.
    pub async fn fetch_declaration(
        &mut self,
        expected: Option<&DidKey>,
        schedule: &mut super::retry::Schedule,
        on_event: impl FnMut(super::retry::RetryEvent<Verdict>),
    ) -> Result<super::retry::Finished<super::FetchedDeclaration>, ClientError> {
        super::retry::persist(
            self,
            schedule,
            async |client: &Client| {
                Ok(super::retry::Try::Done(match expected {
                    Some(issuer) => client.declaration_from(issuer).await?,
                    None => client.declaration().await?,
                }))
            },
            on_event,
        )
        .await
    }
}

/// `Again(verdict)` for a retriable verdict, else `Done(value)`.
fn again_if_retriable<T>(verdict: Verdict, value: T) -> super::retry::Try<T, Verdict> {
    if verdict.retriable() {
        super::retry::Try::Again(verdict)
    } else {
        super::retry::Try::Done(value)
    }
}
