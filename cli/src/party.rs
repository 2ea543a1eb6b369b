//! `rltp-carrier party`: a party's relationship file and its party store
//! (Identity §5.1–§5.2, §6.1, §7a; Delivery §4.2, §6.2; `PROTOCOL.md` §14).
//!
//! A **party file** replaces a key file for a party that sends and
//! acknowledges documents: `{"v": "rltp-carrier-party/1", "carrier": C,
//! "relationship": <rltp-party-relationship/1 record>}` (mode 0600). From
//! the relationship come the pair anchor (the documents' `issuer` /
//! `recipient`) and the `rkid` (the queue address, the card's
//! `keyAgreement`); from the canonical carrier nonce and `C` the control
//! principal (Identity §7a.4). Every carrier command that takes `--key`
//! takes a party file too ([`PartyFile::key_file`]); a key file keeps
//! working as before (its `collect` stores documents without acknowledging
//! them). `party new --from-key K` migrates: the principal is kept (same
//! root seed and carrier nonce), the `rkid` is new (a key file's was drawn
//! at random, a party's is derived), so register it again and hand out the
//! new card.
//!
//! The **party store** lives beside the file, same name with the extension
//! `redb` ([`store_path`]): the completed-effect cache with the kept
//! acknowledgements, the effects, the acknowledgement outbox and the
//! sent-register ([`rltp_party_store`]).
//!
//! | subcommand | what |
//! |---|---|
//! | `party new` | a fresh relationship: pair context, carrier nonce, own card with delivery hints |
//! | `party show` | the public parts |
//! | `party card` | the own signed card (JSON), to hand to the counterpart |
//! | `party trust` | verify the counterpart's card and keep it (where documents and acknowledgements go) |
//! | `party credential` | a sample `encounter-credential-delivery/0.1` (§4.3) to the counterpart, signed by the pair anchor |

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rltp_client::clock::WallClock;
use rltp_party::bundle::{ENCOUNTER_SCAN, enactment_binding};
use rltp_party::card::ContactCard;
use rltp_party::document::{Header, to_serde};
use rltp_party::hint::DeliveryHint;
use rltp_party::registry::CREDENTIAL_DELIVERY;
use rltp_party::relationship::{CarrierNonce, Relationship, RelationshipRecord};
use rltp_party_store::RedbStore;
use rltp_proofs::encoding::{b64url_decode, b64url_encode};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::json::{self, Object, Value};
use serde::{Deserialize, Serialize};

use super::keys::{KeyFile, write_key_material};
use super::{Failure, exit};

/// The party file's domain tag (`v`).
pub const PARTY_FILE_V: &str = "rltp-carrier-party/1";

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartyRecord {
    v: String,
    carrier: String,
    relationship: RelationshipRecord,
}

/// Whether `bytes` are a party file (by its `v`), not a key file.
pub fn is_party_file(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .is_ok_and(|v| v.get("v").and_then(serde_json::Value::as_str) == Some(PARTY_FILE_V))
}

/// Where the party store of the party file `path` lives: the same path
/// with the extension `redb`.
pub fn store_path(path: &Path) -> PathBuf {
    path.with_extension("redb")
}

/// Opens the party store of the party file `path`.
///
/// # Errors
/// [`Failure::usage`] naming the store (held by another process, damaged).
pub fn open_store(path: &Path) -> Result<RedbStore, Failure> {
    let store = store_path(path);
    RedbStore::open(&store).map_err(|e| Failure::usage(format!("{}: {e}", store.display())))
}

/// A party file, validated (everything derived is re-derived).
#[derive(Debug)]
pub struct PartyFile {
    /// The carrier identifier `C` the party's queue is registered at.
    pub carrier: CarrierId,
    /// The relationship.
    pub relationship: Relationship,
}

impl PartyFile {
    /// Reads party file bytes read from `path`.
    ///
    /// # Errors
    /// [`Failure::usage`] naming the file and what is wrong.
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<PartyFile, Failure> {
        let bad = |e: &dyn std::fmt::Display| {
            Failure::usage(format!("{}: party file: {e}", path.display()))
        };
        let record: PartyRecord = serde_json::from_slice(bytes).map_err(|e| bad(&e))?;
        if record.v != PARTY_FILE_V {
            return Err(bad(&format!("v is not {PARTY_FILE_V}")));
        }
        let carrier = CarrierId::from_bytes(record.carrier.as_bytes()).map_err(|e| bad(&e))?;
        let relationship = Relationship::from_record(&record.relationship).map_err(|e| bad(&e))?;
        Ok(PartyFile {
            carrier,
            relationship,
        })
    }

    /// Loads the party file at `path`.
    ///
    /// # Errors
    /// [`Failure::usage`] naming the file.
    pub fn load(path: &Path) -> Result<PartyFile, Failure> {
        PartyFile::from_bytes(path, &super::read_file(path)?)
    }

    /// Writes the file (mode 0600; `replace` for an atomic replacement).
    ///
    /// # Errors
    /// [`Failure::usage`].
    pub fn save(&self, path: &Path, replace: bool) -> Result<(), Failure> {
        let record = PartyRecord {
            v: PARTY_FILE_V.to_owned(),
            carrier: self.carrier.as_str().to_owned(),
            relationship: self.relationship.to_record(),
        };
        let mut bytes = serde_json::to_vec_pretty(&record)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        bytes.push(b'\n');
        write_key_material(path, &bytes, replace)
    }

    /// The carrier view (`register`, `collect`, `conclude`): the control
    /// principal from the root and the canonical carrier nonce at `C`
    /// (Identity §7a.4), the pair context's `rkid` and its X25519 secret.
    ///
    /// # Errors
    /// [`Failure::usage`]: a root IKM other than 32 bytes, or no carrier
    /// nonce.
    pub fn key_file(&self, path: &Path) -> Result<KeyFile, Failure> {
        let bad = |what: &str| Failure::usage(format!("{}: party file: {what}", path.display()));
        let root: [u8; 32] = b64url_decode(&self.relationship.to_record().root_ikm)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("the carrier commands need a 32-byte root IKM"))?;
        let nonce = self
            .relationship
            .canonical_carrier_nonce()
            .ok_or_else(|| bad("no carrier nonce (Identity 7a.3)"))?;
        let keys = KeyFile::from_parts(
            self.carrier.clone(),
            root,
            nonce.nonce,
            nonce.generation,
            self.relationship.pair().x_secret(),
        );
        if keys.rkid() != self.relationship.rkid() {
            return Err(bad(
                "the pair context's x25519 secret does not give its rkid",
            ));
        }
        Ok(keys)
    }

    fn lines(&self, path: &Path) -> Result<String, Failure> {
        let keys = self.key_file(path)?;
        let counterpart = self
            .relationship
            .counterpart()
            .map_or_else(|| "-".to_owned(), |c| c.anchor().to_did_key());
        Ok(format!(
            "party-file {}\ncarrier {}\nanchor {}\nrkid {}\nprincipal {}\ngeneration {}\nstore {}\ncounterpart {counterpart}\n",
            path.display(),
            self.carrier.as_str(),
            self.relationship.anchor().to_did_key(),
            keys.rkid().to_multikey(),
            keys.principal().to_did_key(),
            keys.generation(),
            store_path(path).display(),
        ))
    }
}

fn random32() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    rand::Rng::fill_bytes(&mut rand::rng(), &mut bytes);
    bytes
}

/// A new relationship for carrier `carrier` with `hints`, at `now`: fresh,
/// or (`from`) keeping a key file's root seed and carrier nonce, so its
/// control principal stays the same.
fn new_relationship(
    hints: &[DeliveryHint],
    from: Option<&KeyFile>,
    now: u64,
) -> Result<Relationship, Failure> {
    let created = rltp_proofs::declaration::rfc3339_utc(now);
    let usage = |e: &dyn std::fmt::Display| Failure::usage(e.to_string());
    let Some(keys) = from else {
        return Relationship::create(&random32(), &mut rand::rng(), hints, &created)
            .map_err(|e| usage(&e));
    };
    let (root, nonce, generation) = keys.principal_material();
    let mut relationship = Relationship::derive(&root, random32()).map_err(|e| usage(&e))?;
    relationship
        .add_carrier_nonce(CarrierNonce { nonce, generation })
        .map_err(|e| usage(&e))?;
    let card =
        ContactCard::sign_displayed(relationship.pair(), hints, &created).map_err(|e| usage(&e))?;
    let mut record = relationship.to_record();
    record.own_card = to_serde(&Value::Object(card.object().clone()));
    Relationship::from_record(&record).map_err(|e| usage(&e))
}

/// A sample `encounter-credential-delivery/0.1` (§4.3) from `party` to its
/// counterpart at `now`: an Encounter 0.25 credential issued by the pair
/// anchor to the counterpart's anchor (fresh challenges, their enactment
/// binding), wrapped in a document with a fresh `id` and `threadId`.
///
/// # Errors
/// [`Failure::usage`] when no counterpart card is held.
pub fn credential_delivery(party: &Relationship, now: u64) -> Result<Object, Failure> {
    let counterpart = party.counterpart().ok_or_else(|| {
        Failure::usage("no counterpart card is held: run `party trust --card FILE` first")
    })?;
    let rng = &mut rand::rng();
    let (mine, theirs) = (b64url_encode(&random32()), b64url_encode(&random32()));
    let binding = enactment_binding(ENCOUNTER_SCAN, &mine, &theirs)
        .ok_or_else(|| Failure::usage("cannot compute the enactment binding"))?;
    let at = rltp_proofs::declaration::rfc3339_utc(now);
    let mut subject = Object::new();
    subject.insert("id", counterpart.anchor().to_did_key());
    subject.insert("format", "rltp-encounter-credential/0.25");
    subject.insert("ceremony", ENCOUNTER_SCAN);
    subject.insert("challenge", theirs.as_str());
    subject.insert("enactmentBinding", binding);
    let strings = |items: &[&str]| Value::Array(items.iter().map(|s| Value::from(*s)).collect());
    let mut credential = Object::new();
    credential.insert(
        "@context",
        strings(&[
            "https://www.w3.org/ns/credentials/v2",
            "https://firstperson.network/credentials/dtg/v1",
            "https://real-life.org/rltp/v1",
        ]),
    );
    credential.insert(
        "type",
        strings(&[
            "VerifiableCredential",
            "DTGCredential",
            "RelationshipCredential",
            "EncounterCredential",
        ]),
    );
    credential.insert("issuer", party.anchor().to_did_key());
    credential.insert("validFrom", at.as_str());
    credential.insert("credentialSubject", subject);
    let credential =
        rltp_proofs::declaration::eddsa_jcs_2022_sign(&credential, &at, party.pair().signing_key())
            .map_err(|e| Failure::usage(e.to_string()))?;
    let mut payload = Object::new();
    payload.insert("credential", credential);
    Ok(Header {
        id: rltp_proofs::declaration::uuid_v4(rng),
        type_uri: CREDENTIAL_DELIVERY.to_owned(),
        issuer: party.anchor(),
        recipient: *counterpart.anchor(),
        thread_id: rltp_proofs::declaration::uuid_v4(rng),
        issued_at: at,
    }
    .with_payload(payload))
}

/// `party`: a party's relationship file.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: PartyCommand,
    /// Print one JSON object per line instead of `name value` lines.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum PartyCommand {
    /// Make a party file: pair context, carrier nonce, own card with hints.
    New(NewArgs),
    /// Print the public parts of a party file.
    Show(FileArgs),
    /// Write the own signed card (JSON) to hand to the counterpart.
    Card(CardArgs),
    /// Verify the counterpart's card and keep it in the party file.
    Trust(TrustArgs),
    /// Write a sample encounter-credential-delivery to the counterpart.
    Credential(CardArgs),
}

#[derive(Debug, clap::Args)]
struct NewArgs {
    /// The carrier identifier `C` of the party's own carrier.
    #[arg(long)]
    carrier: String,
    /// A delivery hint for the own card (`rltp+quic://host:port#sha256/…`,
    /// `PROTOCOL.md` §14); repeat in preference order, at most 8.
    #[arg(long)]
    hint: Vec<String>,
    /// Keep this key file's root seed and carrier nonce (its principal).
    #[arg(long)]
    from_key: Option<PathBuf>,
    /// Where to write the party file.
    #[arg(long, default_value = "party.json")]
    out: PathBuf,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, clap::Args)]
struct FileArgs {
    /// The party file.
    #[arg(long)]
    party: PathBuf,
}

#[derive(Debug, clap::Args)]
struct CardArgs {
    /// The party file.
    #[arg(long)]
    party: PathBuf,
    /// Where to write (JSON).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct TrustArgs {
    /// The party file (replaced atomically).
    #[arg(long)]
    party: PathBuf,
    /// The counterpart's card (JSON, as `party card` writes it).
    #[arg(long)]
    card: PathBuf,
}

fn write_json(path: &Path, object: &Object) -> Result<(), Failure> {
    let bytes = rltp_proofs::jcs::canonicalize(&Value::Object(object.clone()))
        .map_err(|e| Failure::usage(e.to_string()))?;
    std::fs::write(path, bytes).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}

fn new_party(a: &NewArgs, now: u64) -> Result<PartyFile, Failure> {
    let carrier = CarrierId::from_bytes(a.carrier.as_bytes()).map_err(|e| {
        Failure::usage(format!(
            "--carrier {:?} is not a carrier identifier (Identity §7a.2): {e}",
            a.carrier
        ))
    })?;
    let hints = a
        .hint
        .iter()
        .map(|h| {
            h.parse::<DeliveryHint>()
                .map_err(|e| Failure::usage(format!("--hint {h:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let from = a.from_key.as_deref().map(KeyFile::load).transpose()?;
    let relationship = new_relationship(&hints, from.as_ref(), now)?;
    let party = PartyFile {
        carrier,
        relationship,
    };
    party.save(&a.out, a.force)?;
    if let Some(key) = &a.from_key {
        eprintln!(
            "rltp-carrier party: migrated from the key file {}: the principal is kept, the rkid is new \
             (derived from the pair context); register it and hand out the new card",
            key.display()
        );
    }
    Ok(party)
}

fn execute(args: &Args) -> Result<u8, Failure> {
    let out = super::output::Output::new("party", args.json, tokio::time::Instant::now());
    let now = WallClock::from_env().now_ms();
    match &args.command {
        PartyCommand::New(a) => out.record("party", &new_party(a, now)?.lines(&a.out)?),
        PartyCommand::Show(a) => out.record("party", &PartyFile::load(&a.party)?.lines(&a.party)?),
        PartyCommand::Card(a) => {
            let party = PartyFile::load(&a.party)?;
            let card = party
                .relationship
                .own_card()
                .ok_or_else(|| Failure::usage("the party file holds no own card"))?;
            write_json(&a.out, card.object())?;
            out.record("card", &format!("card {}\n", a.out.display()));
        }
        PartyCommand::Trust(a) => {
            let mut party = PartyFile::load(&a.party)?;
            let text = super::read_file(&a.card)?;
            let card = json::parse(&text)
                .map_err(|e| Failure::usage(format!("{}: {e}", a.card.display())))
                .and_then(|v| {
                    ContactCard::verify(&v)
                        .map_err(|e| Failure::refused(format!("{}: {e}", a.card.display())))
                })?;
            party.relationship.set_counterpart(card);
            party.save(&a.party, true)?;
            out.record("party", &party.lines(&a.party)?);
        }
        PartyCommand::Credential(a) => {
            let party = PartyFile::load(&a.party)?;
            write_json(&a.out, &credential_delivery(&party.relationship, now)?)?;
            out.record("document", &format!("document {}\n", a.out.display()));
        }
    }
    Ok(exit::OK)
}

/// Runs `party`.
pub fn run(args: Args) -> ExitCode {
    super::finish("party", execute(&args))
}

/// `send --party`: the document's sent-register entry (§4.2, §6.1),
/// written **before** the submission — so an acknowledgement can never
/// arrive for a document the register lacks, and a party store held by
/// another process stops the send before anything leaves — and moved to
/// `failed(…)` when the send ends so.
pub struct SentRecorder {
    store: RedbStore,
    entry: Option<rltp_party::sender::SentEntry>,
}

impl SentRecorder {
    /// Records `bytes` (the document), sealed as deposit `deposit` to
    /// `rkid`, as `accepted` in the sent-register of the party file
    /// `path`. A document that earns no acknowledgement (a `delivery-ack`
    /// is terminal, §4.2) or is not a delivery document is not recorded.
    ///
    /// # Errors
    /// [`Failure::usage`] when the store cannot be opened or written.
    pub fn record(
        path: &Path,
        bytes: &[u8],
        deposit: &str,
        rkid: &rltp_proofs::multikey::Rkid,
    ) -> Result<SentRecorder, Failure> {
        let store = open_store(path)?;
        let now = WallClock::from_env().now_ms();
        let entry = rltp_party::document::Document::parse(bytes).and_then(|document| {
            let profiled = rltp_party::document::profile(&document).ok()?;
            rltp_party::sender::SentEntry::accepted(&profiled, document.digest(), now)
        });
        if let Some(entry) = &entry {
            store
                .record_deposit(entry, deposit, rkid)
                .map_err(|e| Failure::usage(e.to_string()))?;
        }
        Ok(SentRecorder { store, entry })
    }

    /// The entry, when the document was recorded.
    pub fn entry(&self) -> Option<&rltp_party::sender::SentEntry> {
        self.entry.as_ref()
    }

    /// The send ended `failed(reason)` (§6.1); returns the status now held.
    ///
    /// # Errors
    /// [`Failure::usage`] when the store cannot be written.
    pub fn failed(
        &self,
        reason: rltp_party::sender::SenderFailure,
    ) -> Result<Option<rltp_party::sender::SenderStatus>, Failure> {
        use rltp_party::store::PartyStore as _;
        match &self.entry {
            Some(entry) => self
                .store
                .give_up(&entry.digest, reason)
                .map_err(|e| Failure::usage(e.to_string())),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carrier() -> CarrierId {
        CarrierId::from_bytes(b"did:web:carrier.example").unwrap()
    }

    const HINT: &str =
        "rltp+quic://127.0.0.1:4433#sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

    #[test]
    fn a_party_file_round_trips_and_its_carrier_view_is_its_pair_context() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alice.party.json");
        let hints = [HINT.parse().unwrap()];
        let party = PartyFile {
            carrier: carrier(),
            relationship: new_relationship(&hints, None, 1_000).unwrap(),
        };
        party.save(&path, false).unwrap();
        assert_eq!(
            party.save(&path, false).unwrap_err().status,
            exit::USAGE,
            "never overwritten without --force"
        );
        let bytes = std::fs::read(&path).unwrap();
        assert!(is_party_file(&bytes));
        let back = PartyFile::load(&path).unwrap();
        assert_eq!(back.relationship.anchor(), party.relationship.anchor());
        assert_eq!(
            back.relationship.own_card().unwrap().hint_texts(),
            [HINT.to_owned()]
        );
        // Every carrier command's --key takes it: the pair context's rkid.
        let keys = KeyFile::load(&path).unwrap();
        assert_eq!(keys.rkid(), party.relationship.rkid());
        assert_eq!(keys.generation(), 1);
        let (_, principal) = party.relationship.principal(&carrier()).unwrap();
        assert_eq!(keys.principal(), principal);
        assert_eq!(store_path(&path), dir.path().join("alice.party.redb"));
        // A key file is not a party file.
        let key_file = KeyFile::generate(carrier()).to_bytes().unwrap();
        assert!(!is_party_file(&key_file));
    }

    #[test]
    fn migrating_a_key_file_keeps_its_principal_and_derives_a_new_rkid() {
        let key = KeyFile::from_parts(carrier(), [7; 32], [3; 32], 4, [9; 32]);
        let relationship = new_relationship(&[], Some(&key), 1_000).unwrap();
        let party = PartyFile {
            carrier: carrier(),
            relationship,
        };
        let dir = tempfile::tempdir().unwrap();
        let view = party.key_file(&dir.path().join("p.json")).unwrap();
        assert_eq!(view.principal(), key.principal());
        assert_eq!(view.generation(), 4);
        assert_ne!(view.rkid(), key.rkid());
        assert_eq!(view.rkid(), party.relationship.rkid());
    }

    #[test]
    fn a_credential_delivery_needs_the_counterparts_card_and_passes_stages_5_to_8() {
        let alice = new_relationship(&[], None, 1_000).unwrap();
        assert_eq!(
            credential_delivery(&alice, 1_000).unwrap_err().message,
            "no counterpart card is held: run `party trust --card FILE` first"
        );
        let mut alice = alice;
        let bob = new_relationship(&[], None, 1_000).unwrap();
        alice.set_counterpart(bob.own_card().unwrap().clone());
        let document = credential_delivery(&alice, 1_000).unwrap();
        let document = rltp_party::document::Document::from_value(Value::Object(document)).unwrap();
        let profiled = rltp_party::document::profile(&document).unwrap();
        assert_eq!(profiled.recipient, bob.anchor());
        assert_eq!(profiled.type_uri, CREDENTIAL_DELIVERY);
        rltp_party::consistency::credential_delivery(&profiled).unwrap();
    }
}
