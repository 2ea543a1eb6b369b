//! `rltp-carrier keys new` / `keys rotate`: a recipient's key material for
//! one carrier (Identity §7a, Delivery §5a.1–§5a.3).
//!
//! A key file holds, for one (relationship × carrier):
//! - `rootSeed`: a random 32-byte root IKM (Identity §3's root input
//!   keying material; here a fresh one per file);
//! - `relationshipNonce` `N` (32 random bytes) and its `generation`
//!   (Identity §7a.3, `[1, 2^53 − 1]`; 1 for a new file);
//! - `carrier`: the carrier identifier `C` (Identity §7a.2, validated);
//! - `rkidSecret`: a random X25519 secret, whose public key is the queue
//!   address `rkid` (§5a.1);
//! - `superseded`: the earlier `(generation, relationshipNonce)` entries
//!   (entries are superseded, never deleted, §5a.3);
//! - `principal` and `rkid`, derived (`control_principal(root, C, N)`,
//!   Identity §7a.4, and X25519 of the secret) and checked on every load.
//!
//! The file is the JCS of that object plus a newline, tagged
//! `"v": "rltp-carrier-keys/1"`, read back with the strict reader (closed
//! member set), written with mode 0600 (never widened in between) and
//! never overwritten without `--force`. `keys rotate` draws a fresh `N`
//! with `generation + 1` (or a given higher generation) and replaces the
//! file atomically: a rebind at the new generation wins (§5a.3).

use super::{Failure, exit};
use rltp_client::RecipientKeys;
use rltp_proofs::encoding::{b64url_decode_array, b64url_encode};
use rltp_proofs::identity::{
    CarrierId, GENERATION_MAX, control_principal, parse_generation_lexeme,
};
use rltp_proofs::json::{self, Number, Object, Value};
use rltp_proofs::multikey::{DidKey, Rkid};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zeroize::Zeroizing;

/// The key file's domain tag (`v`).
pub const KEY_FILE_V: &str = "rltp-carrier-keys/1";

/// The members of a key file, all required.
const MEMBERS: [&str; 9] = [
    "carrier",
    "generation",
    "principal",
    "relationshipNonce",
    "rkid",
    "rkidSecret",
    "rootSeed",
    "superseded",
    "v",
];

/// Why a key file could not be read, made or changed. Display names the
/// member or file, never a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeysError {
    /// Not strict JSON, not an object, or a member missing, unknown or of
    /// the wrong form.
    #[error("key file: {0}")]
    Malformed(String),
    /// A derived member (`principal`, `rkid`) does not match the secrets.
    #[error("key file: {0} does not match the secrets it is derived from")]
    Mismatch(&'static str),
    /// `carrier` is not a carrier identifier (Identity §7a.2).
    #[error("key file: carrier {0:?} is not a carrier identifier: {1}")]
    Carrier(String, String),
    /// A rotation's generation is not above the current one, or past the
    /// top of the domain (Identity §7a.3: rotation ends at 2^53 − 1).
    #[error(
        "generation {requested} cannot follow {current} (must be above it and at most 9007199254740991)"
    )]
    Generation {
        /// The current generation.
        current: u64,
        /// The requested one.
        requested: u64,
    },
}

/// One recipient's key material for one carrier. Secrets are wiped on
/// drop; `Debug` is redacted.
pub struct KeyFile {
    carrier: CarrierId,
    root_seed: Zeroizing<[u8; 32]>,
    nonce: Zeroizing<[u8; 32]>,
    generation: u64,
    rkid_secret: Zeroizing<[u8; 32]>,
    superseded: Vec<(u64, [u8; 32])>,
}

impl fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFile")
            .field("carrier", &self.carrier.as_str())
            .field("generation", &self.generation)
            .field("principal", &self.principal().to_did_key())
            .field("rkid", &self.rkid().to_multikey())
            .field("secrets", &"[redacted]")
            .finish()
    }
}

fn random32() -> Zeroizing<[u8; 32]> {
    let mut bytes = Zeroizing::new([0u8; 32]);
    rand::Rng::fill_bytes(&mut rand::rng(), bytes.as_mut());
    bytes
}

fn member<'a>(object: &'a Object, name: &str) -> Result<&'a Value, KeysError> {
    object
        .get(name)
        .ok_or_else(|| KeysError::Malformed(format!("member {name} is missing")))
}

fn string_member<'a>(object: &'a Object, name: &str) -> Result<&'a str, KeysError> {
    member(object, name)?
        .as_str()
        .ok_or_else(|| KeysError::Malformed(format!("member {name} is not a string")))
}

fn bytes32(value: &Value, name: &str) -> Result<[u8; 32], KeysError> {
    value
        .as_str()
        .and_then(|s| b64url_decode_array::<32>(s).ok())
        .ok_or_else(|| {
            KeysError::Malformed(format!(
                "member {name} is not canonical base64url of 32 bytes"
            ))
        })
}

fn generation(value: &Value, name: &str) -> Result<u64, KeysError> {
    let number = value
        .as_number()
        .ok_or_else(|| KeysError::Malformed(format!("member {name} is not a number")))?;
    parse_generation_lexeme(number.lexeme())
        .map_err(|e| KeysError::Malformed(format!("member {name}: {e}")))
}

impl KeyFile {
    /// Fresh key material for carrier `carrier`: random root seed, random
    /// relationship nonce at generation 1, random rkid secret.
    pub fn generate(carrier: CarrierId) -> KeyFile {
        KeyFile {
            carrier,
            root_seed: random32(),
            nonce: random32(),
            generation: 1,
            rkid_secret: random32(),
            superseded: Vec::new(),
        }
    }

    /// Key material from explicit parts (tests, the demo with fixed bytes).
    pub fn from_parts(
        carrier: CarrierId,
        root_seed: [u8; 32],
        nonce: [u8; 32],
        generation: u64,
        rkid_secret: [u8; 32],
    ) -> KeyFile {
        KeyFile {
            carrier,
            root_seed: Zeroizing::new(root_seed),
            nonce: Zeroizing::new(nonce),
            generation,
            rkid_secret: Zeroizing::new(rkid_secret),
            superseded: Vec::new(),
        }
    }

    /// Rotates the relationship nonce (Identity §7a.3): a fresh `N` at
    /// `to` (default `generation + 1`); the old entry is kept as
    /// superseded. The principal changes, the `rkid` does not.
    ///
    /// # Errors
    /// [`KeysError::Generation`] when `to` is not above the current
    /// generation or is past 2^53 − 1.
    pub fn rotate(&mut self, to: Option<u64>) -> Result<(), KeysError> {
        let requested = to.unwrap_or(self.generation.saturating_add(1));
        if requested <= self.generation || requested > GENERATION_MAX {
            return Err(KeysError::Generation {
                current: self.generation,
                requested,
            });
        }
        self.superseded.push((self.generation, *self.nonce));
        self.nonce = random32();
        self.generation = requested;
        Ok(())
    }

    /// The carrier identifier `C`.
    pub fn carrier(&self) -> &CarrierId {
        &self.carrier
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The control principal's `did:key` (Identity §7a.4).
    pub fn principal(&self) -> DidKey {
        control_principal(self.root_seed.as_slice(), &self.carrier, &self.nonce).1
    }

    /// The queue address: the X25519 public key of the rkid secret.
    pub fn rkid(&self) -> Rkid {
        let secret = x25519_dalek::StaticSecret::from(*self.rkid_secret);
        Rkid::from_bytes(x25519_dalek::PublicKey::from(&secret).to_bytes())
    }

    /// The rkid's 32-byte X25519 secret (to open envelopes, §5).
    pub fn rkid_secret(&self) -> &[u8; 32] {
        &self.rkid_secret
    }

    /// The client library's view: carrier, principal signing key, rkid
    /// secret, generation.
    pub fn recipient_keys(&self) -> RecipientKeys {
        let (signing_key, _) =
            control_principal(self.root_seed.as_slice(), &self.carrier, &self.nonce);
        RecipientKeys::new(
            self.carrier.clone(),
            signing_key,
            *self.rkid_secret,
            self.generation,
        )
    }

    /// The file bytes: JCS of the key object, then a newline.
    ///
    /// # Errors
    /// [`KeysError::Malformed`] if JCS fails (not reachable: the object
    /// holds only strings and integers below 2^53).
    pub fn to_bytes(&self) -> Result<Vec<u8>, KeysError> {
        let mut object = Object::new();
        object.insert("v", KEY_FILE_V);
        object.insert("carrier", self.carrier.as_str());
        object.insert("rootSeed", b64url_encode(self.root_seed.as_slice()));
        object.insert("relationshipNonce", b64url_encode(self.nonce.as_slice()));
        object.insert("generation", Number::from_u64(self.generation));
        object.insert("rkidSecret", b64url_encode(self.rkid_secret.as_slice()));
        object.insert("principal", self.principal().to_did_key());
        object.insert("rkid", self.rkid().to_multikey());
        let superseded = self
            .superseded
            .iter()
            .map(|(g, n)| {
                let mut entry = Object::new();
                entry.insert("generation", Number::from_u64(*g));
                entry.insert("relationshipNonce", b64url_encode(n));
                Value::Object(entry)
            })
            .collect();
        object.insert("superseded", Value::Array(superseded));
        let mut bytes = rltp_proofs::jcs::canonicalize(&Value::Object(object))
            .map_err(|e| KeysError::Malformed(format!("cannot canonicalize: {e}")))?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// Reads key file bytes (strict JSON, closed member set), checking the
    /// derived `principal` and `rkid` against the secrets.
    ///
    /// # Errors
    /// [`KeysError`].
    pub fn from_bytes(bytes: &[u8]) -> Result<KeyFile, KeysError> {
        let value = json::parse(bytes)
            .map_err(|e| KeysError::Malformed(format!("not strict json: {e}")))?;
        let object = value
            .as_object()
            .ok_or_else(|| KeysError::Malformed("not a json object".into()))?;
        if let Some(unknown) = object.keys().find(|k| !MEMBERS.contains(k)) {
            return Err(KeysError::Malformed(format!("unknown member {unknown:?}")));
        }
        if string_member(object, "v")? != KEY_FILE_V {
            return Err(KeysError::Malformed(format!("v is not {KEY_FILE_V}")));
        }
        let carrier_text = string_member(object, "carrier")?;
        let carrier = CarrierId::from_bytes(carrier_text.as_bytes())
            .map_err(|e| KeysError::Carrier(carrier_text.to_owned(), e.to_string()))?;
        let mut superseded = Vec::new();
        let entries = member(object, "superseded")?
            .as_array()
            .ok_or_else(|| KeysError::Malformed("member superseded is not an array".into()))?;
        for entry in entries {
            let entry = entry.as_object().filter(|e| e.len() == 2).ok_or_else(|| {
                KeysError::Malformed(
                    "a superseded entry is not {generation, relationshipNonce}".into(),
                )
            })?;
            superseded.push((
                generation(member(entry, "generation")?, "superseded.generation")?,
                bytes32(
                    member(entry, "relationshipNonce")?,
                    "superseded.relationshipNonce",
                )?,
            ));
        }
        let file = KeyFile {
            carrier,
            root_seed: Zeroizing::new(bytes32(member(object, "rootSeed")?, "rootSeed")?),
            nonce: Zeroizing::new(bytes32(
                member(object, "relationshipNonce")?,
                "relationshipNonce",
            )?),
            generation: generation(member(object, "generation")?, "generation")?,
            rkid_secret: Zeroizing::new(bytes32(member(object, "rkidSecret")?, "rkidSecret")?),
            superseded,
        };
        if string_member(object, "principal")? != file.principal().to_did_key() {
            return Err(KeysError::Mismatch("principal"));
        }
        if string_member(object, "rkid")? != file.rkid().to_multikey() {
            return Err(KeysError::Mismatch("rkid"));
        }
        Ok(file)
    }

    /// Loads a key file, or the carrier view of a party file
    /// ([`super::party::PartyFile::key_file`]).
    ///
    /// # Errors
    /// [`Failure::usage`] naming the file.
    pub fn load(path: &Path) -> Result<KeyFile, Failure> {
        let bytes = super::read_file(path)?;
        if super::party::is_party_file(&bytes) {
            return super::party::PartyFile::from_bytes(path, &bytes)?.key_file(path);
        }
        KeyFile::from_bytes(&bytes).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
    }

    /// Writes the file at `path` with mode 0600: a new file, or with
    /// `replace` an atomic replacement ([`write_key_material`]).
    ///
    /// # Errors
    /// [`Failure::usage`]: the file exists and `replace` is false, or I/O.
    pub fn save(&self, path: &Path, replace: bool) -> Result<(), Failure> {
        let bytes = self
            .to_bytes()
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        write_key_material(path, &bytes, replace)
    }

    /// The root seed and the current relationship nonce with its
    /// generation (for `party new --from-key`: the principal is kept).
    pub(crate) fn principal_material(&self) -> ([u8; 32], [u8; 32], u64) {
        (*self.root_seed, *self.nonce, self.generation)
    }

    /// The public parts, as `name value` lines.
    fn lines(&self, path: &Path) -> String {
        format!(
            "key-file {}\ncarrier {}\nrkid {}\nprincipal {}\ngeneration {}\n",
            path.display(),
            self.carrier.as_str(),
            self.rkid().to_multikey(),
            self.principal().to_did_key(),
            self.generation
        )
    }
}

/// Writes key material (a key file, a party file) at `path` with mode
/// 0600: a new file, or with `replace` an atomic replacement (a fresh 0600
/// file renamed over it); never overwrites without `replace`.
///
/// # Errors
/// [`Failure::usage`]: the file exists and `replace` is false, or I/O.
pub fn write_key_material(path: &Path, bytes: &[u8], replace: bool) -> Result<(), Failure> {
    let io = |e: &dyn fmt::Display| Failure::usage(format!("{}: {e}", path.display()));
    if !replace {
        if path.exists() {
            return Err(Failure::usage(format!(
                "{} exists; refusing to overwrite key material (use --force)",
                path.display()
            )));
        }
        return rltp_server::tls::write_private(path, bytes).map_err(|e| io(&e));
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    let temporary = path.with_file_name(name);
    let _ = std::fs::remove_file(&temporary);
    rltp_server::tls::write_private(&temporary, bytes).map_err(|e| io(&e))?;
    std::fs::rename(&temporary, path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        io(&e)
    })
}

/// `keys`: recipient key material.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: KeysCommand,
    /// Print one JSON object per line instead of `name value` lines
    /// (members: the line names in camelCase, `README.md` "JSON output").
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum KeysCommand {
    /// Make new key material for one carrier: root seed, relationship
    /// nonce at generation 1, rkid secret (file mode 0600).
    New(NewArgs),
    /// Draw a fresh relationship nonce at a higher generation (a new
    /// principal for the same rkid); register again to rebind.
    Rotate(RotateArgs),
    /// Print the public parts of a key file.
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
struct NewArgs {
    /// The carrier identifier `C` (the carrier's `carrier` config key),
    /// e.g. `did:web:localhost`.
    #[arg(long)]
    carrier: String,
    /// Where to write the key file.
    #[arg(long, default_value = "recipient.keys.json")]
    out: PathBuf,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, clap::Args)]
struct RotateArgs {
    /// The key file to rotate (replaced atomically).
    #[arg(long)]
    key: PathBuf,
    /// The new generation (default: current + 1); must be above the current.
    #[arg(long)]
    generation: Option<u64>,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// The key file.
    #[arg(long)]
    key: PathBuf,
}

fn execute(args: &Args) -> Result<u8, Failure> {
    let out = super::output::Output::new("keys", args.json, tokio::time::Instant::now());
    match &args.command {
        KeysCommand::New(a) => {
            let carrier = CarrierId::from_bytes(a.carrier.as_bytes()).map_err(|e| {
                Failure::usage(format!(
                    "--carrier {:?} is not a carrier identifier (Identity §7a.2): {e}",
                    a.carrier
                ))
            })?;
            let file = KeyFile::generate(carrier);
            file.save(&a.out, a.force)?;
            out.record("keys", &file.lines(&a.out));
        }
        KeysCommand::Rotate(a) => {
            if super::party::is_party_file(&super::read_file(&a.key)?) {
                return Err(Failure::usage(format!(
                    "{} is a party file: keys rotate rewrites key files only (a party's carrier \
                     nonce is kept in its relationship record)",
                    a.key.display()
                )));
            }
            let mut file = KeyFile::load(&a.key)?;
            file.rotate(a.generation)
                .map_err(|e| Failure::usage(e.to_string()))?;
            file.save(&a.key, true)?;
            out.record("keys", &file.lines(&a.key));
        }
        KeysCommand::Show(a) => out.record("keys", &KeyFile::load(&a.key)?.lines(&a.key)),
    }
    Ok(exit::OK)
}

/// Runs `keys`.
pub fn run(args: Args) -> ExitCode {
    super::finish("keys", execute(&args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carrier() -> CarrierId {
        CarrierId::from_bytes(b"did:web:carrier.example").unwrap()
    }

    #[test]
    fn a_key_file_round_trips_and_derives_per_identity_7a() {
        let file = KeyFile::from_parts(carrier(), [7; 32], [3; 32], 1, [9; 32]);
        let bytes = file.to_bytes().unwrap();
        let back = KeyFile::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes().unwrap(), bytes);
        assert_eq!(
            back.principal(),
            control_principal(&[7; 32], &carrier(), &[3; 32]).1
        );
        assert_eq!(back.recipient_keys().principal(), back.principal());
        assert_eq!(back.recipient_keys().rkid(), &back.rkid());
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("{\"carrier\":\"did:web:carrier.example\",\"generation\":1,"));
        assert!(text.ends_with(",\"superseded\":[],\"v\":\"rltp-carrier-keys/1\"}\n"));
        assert!(!format!("{back:?}").contains(&b64url_encode(&[9; 32])));
    }

    #[test]
    fn rotation_moves_the_principal_not_the_rkid() {
        let mut file = KeyFile::from_parts(carrier(), [7; 32], [3; 32], 1, [9; 32]);
        let (principal, rkid) = (file.principal(), file.rkid());
        file.rotate(None).unwrap();
        assert_eq!(file.generation(), 2);
        assert_ne!(file.principal(), principal);
        assert_eq!(file.rkid(), rkid);
        assert_eq!(
            file.rotate(Some(2)),
            Err(KeysError::Generation {
                current: 2,
                requested: 2
            })
        );
        file.rotate(Some(7)).unwrap();
        let back = KeyFile::from_bytes(&file.to_bytes().unwrap()).unwrap();
        assert_eq!(back.generation(), 7);
        assert_eq!(back.superseded.len(), 2);
        assert_eq!(back.superseded[0], (1, [3; 32]));
    }

    #[test]
    fn tampered_or_malformed_files_are_refused() {
        let bytes = KeyFile::from_parts(carrier(), [7; 32], [3; 32], 1, [9; 32])
            .to_bytes()
            .unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let other_rkid = KeyFile::from_parts(carrier(), [7; 32], [3; 32], 1, [8; 32])
            .rkid()
            .to_multikey();
        let rkid = KeyFile::from_bytes(text.as_bytes())
            .unwrap()
            .rkid()
            .to_multikey();
        let cases = [
            (
                text.replace(&rkid, &other_rkid),
                "key file: rkid does not match the secrets it is derived from",
            ),
            (
                text.replace("\"generation\":1", "\"generation\":1.0"),
                "key file: member generation: generation \"1.0\" is not canonical decimal (no sign, no leading zero, no fraction, no exponent)",
            ),
            (
                text.replace("\"generation\":1", "\"generation\":0"),
                "key file: member generation: generation 0 is outside the domain [1, 9007199254740991]",
            ),
            (
                text.replace("rltp-carrier-keys/1", "rltp-carrier-keys/2"),
                "key file: v is not rltp-carrier-keys/1",
            ),
            (
                text.replace("\"superseded\"", "\"extra\":1,\"superseded\""),
                "key file: unknown member \"extra\"",
            ),
            ("[]".to_owned(), "key file: not a json object"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                KeyFile::from_bytes(input.as_bytes())
                    .unwrap_err()
                    .to_string(),
                expected
            );
        }
    }

    #[test]
    fn files_are_private_and_never_silently_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.json");
        let file = KeyFile::generate(carrier());
        file.save(&path, false).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let refusal = file.save(&path, false).unwrap_err();
        assert_eq!(refusal.status, exit::USAGE);
        assert!(
            refusal
                .message
                .ends_with("exists; refusing to overwrite key material (use --force)")
        );
        let other = KeyFile::generate(carrier());
        other.save(&path, true).unwrap();
        assert_eq!(KeyFile::load(&path).unwrap().rkid(), other.rkid());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
