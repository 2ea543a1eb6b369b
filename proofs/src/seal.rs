//! §5 sealed envelope: [`seal`] and [`open`], exactly one construction.
//!
//! ```text
//! shared  = X25519(ephemeral secret, rkid public)        -- all-zero rejected (both sides)
//! aes_key = HKDF-SHA-256(ikm = shared, salt = empty, info = "rltp/v1/seal"), 32 bytes
//! ct      = AES-256-GCM(aes_key, nonce, plaintext, AAD = empty) || 128-bit tag
//! ```
//!
//! The plaintext is the JCS canonicalization of a document (§5), 1 to
//! [`MAX_PLAINTEXT_BYTES`] bytes; this module seals and opens bytes and never
//! looks inside them. The document digest is computed over the plaintext,
//! never over the ciphertext (§5), so it is not this module's business.
//!
//! Secret material (ephemeral and recipient secrets, shared secret, AES key)
//! is never printed: [`SealTrace`] has a redacting `Debug`, and the buffers
//! this module owns are wiped before they are dropped (best effort; see
//! [`SealTrace`]). The x25519-dalek secret types zeroize themselves on drop.

use std::fmt;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{PublicKey, SharedSecret, StaticSecret};

use crate::encoding::b64url_encode;
use crate::json::{Object, Value};
use crate::multikey::Rkid;

/// §5 HKDF `info`: ASCII `rltp/v1/seal` (12 bytes).
pub const SEAL_INFO: &[u8] = b"rltp/v1/seal";

/// §5 largest plaintext (the JCS document), in bytes: 65 536.
pub const MAX_PLAINTEXT_BYTES: usize = 65_536;

/// §5 AES-256-GCM tag length, in bytes (128-bit tag).
pub const TAG_BYTES: usize = 16;

/// §5 largest ciphertext (plaintext + tag), in bytes: 65 536 + 16 = 65 552.
pub const MAX_CIPHERTEXT_BYTES: usize = MAX_PLAINTEXT_BYTES + TAG_BYTES;

/// §5 smallest ciphertext, in bytes: 1 + 16 = 17. A tag-only (16-byte)
/// ciphertext would carry a zero-length plaintext, which §5 makes invalid.
pub const MIN_CIPHERTEXT_BYTES: usize = 1 + TAG_BYTES;

/// §5 `epk` length: an X25519 public key, 32 bytes.
pub const EPK_BYTES: usize = 32;

/// §5 `nonce` length: 96 bits, 12 bytes.
pub const NONCE_BYTES: usize = 12;

/// §5 sealed envelope, decoded: the four members of the wire object.
///
/// Wire form ([`SealedEnvelope::to_json`], [`SealedEnvelope::to_bytes`]):
/// `rkid` as the X25519 Multikey (`z6LS…`, 48 chars), `epk` (32 bytes),
/// `nonce` (12 bytes) and `ciphertext` (17..=65 552 bytes, ciphertext ‖ tag)
/// as canonical unpadded base64url. Holds no secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedEnvelope {
    /// The recipient key-agreement key the envelope is sealed to (§5 `rkid`).
    pub rkid: Rkid,
    /// Ephemeral X25519 public key, 32 bytes (§5 `epk`).
    pub epk: [u8; EPK_BYTES],
    /// AES-256-GCM nonce, 12 bytes (§5 `nonce`).
    pub nonce: [u8; NONCE_BYTES],
    /// AES-256-GCM ciphertext ‖ 128-bit tag, in bytes (§5 `ciphertext`).
    pub ciphertext: Vec<u8>,
}

impl SealedEnvelope {
    /// §5 wire object: members `rkid` (Multikey), `epk`, `nonce`,
    /// `ciphertext` (canonical unpadded base64url). Infallible.
    pub fn to_json(&self) -> Value {
        let mut object = Object::new();
        object.insert("rkid", self.rkid.to_multikey());
        object.insert("epk", b64url_encode(&self.epk));
        object.insert("nonce", b64url_encode(&self.nonce));
        object.insert("ciphertext", b64url_encode(&self.ciphertext));
        Value::Object(object)
    }

    /// §5 wire bytes a sender submits: JCS (RFC 8785) of [`Self::to_json`],
    /// at most [`crate::envelope::MAX_ENVELOPE_BYTES`] bytes for a conformant
    /// envelope. Infallible.
    ///
    /// Written out directly rather than through [`crate::jcs::canonicalize`]:
    /// all four values come from the base64url and base58btc alphabets,
    /// which JCS emits verbatim, and the members are already in JCS order
    /// (`ciphertext` < `epk` < `nonce` < `rkid`). A test pins the two to be
    /// byte-identical.
    pub fn to_bytes(&self) -> Vec<u8> {
        format!(
            r#"{{"ciphertext":"{}","epk":"{}","nonce":"{}","rkid":"{}"}}"#,
            b64url_encode(&self.ciphertext),
            b64url_encode(&self.epk),
            b64url_encode(&self.nonce),
            self.rkid.to_multikey(),
        )
        .into_bytes()
    }
}

/// §5 intermediate values of one seal, so the shipped vector
/// (`vectors/seal.json`, `intermediate`) can be checked byte for byte.
///
/// **Holds secrets.** `Debug` prints `[redacted]`; the bytes are overwritten
/// with zeros when the value is dropped (`zeroize`, which the optimizer
/// cannot elide).
pub struct SealTrace {
    /// X25519(ephemeral secret, recipient public), 32 bytes; never all-zero.
    pub shared_secret: [u8; 32],
    /// HKDF-SHA-256(shared, salt = empty, info = [`SEAL_INFO`]), the 32-byte
    /// AES-256 key.
    pub aes_key: [u8; 32],
}

impl fmt::Debug for SealTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealTrace")
            .field("shared_secret", &"[redacted]")
            .field("aes_key", &"[redacted]")
            .finish()
    }
}

impl Drop for SealTrace {
    fn drop(&mut self) {
        wipe(&mut self.shared_secret);
        wipe(&mut self.aes_key);
    }
}

/// Why [`seal`], [`seal_deterministic`] or [`open`] refused (§5).
///
/// Receiver dispositions (§6.2): [`SealError::CiphertextTooLarge`] is
/// `failed(oversize)` (stage 1, before decryption);
/// [`SealError::CiphertextTooShort`] is `failed(malformed)` (stage 2, a
/// tag-only ciphertext); [`SealError::NonContributory`] and
/// [`SealError::DecryptionFailed`] are `failed(decryption-failed)` (stage 3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// Seal side: a zero-length plaintext; its ciphertext would be invalid (§5).
    #[error("empty plaintext: §5 plaintext is 1 to 65536 bytes")]
    EmptyPlaintext,
    /// Seal side: the plaintext is larger than [`MAX_PLAINTEXT_BYTES`] (§5).
    #[error("plaintext of {len} bytes exceeds the §5 maximum of 65536 bytes")]
    PlaintextTooLarge {
        /// Plaintext length, in bytes.
        len: usize,
    },
    /// Open side: the ciphertext is larger than [`MAX_CIPHERTEXT_BYTES`];
    /// rejected before any cryptography (§5, `failed(oversize)`).
    #[error("ciphertext of {len} bytes exceeds the §5 maximum of 65552 bytes")]
    CiphertextTooLarge {
        /// Ciphertext length (with tag), in bytes.
        len: usize,
    },
    /// Open side: the ciphertext is shorter than [`MIN_CIPHERTEXT_BYTES`]: a
    /// tag-only value (the seal of a zero-length plaintext) or shorter;
    /// rejected before any cryptography, even when its tag would verify (§5).
    #[error("ciphertext of {len} bytes is below the §5 minimum of 17 bytes")]
    CiphertextTooShort {
        /// Ciphertext length (with tag), in bytes.
        len: usize,
    },
    /// The X25519 shared secret is all-zero (a low-order `epk` or `rkid`);
    /// §5 requires rejecting it on both sides, before key derivation.
    #[error("all-zero x25519 shared secret (non-contributory key agreement)")]
    NonContributory,
    /// HKDF-SHA-256 refused to expand 32 bytes (cannot occur for SHA-256;
    /// kept so no path panics).
    #[error("hkdf-sha-256 key derivation failed")]
    KeyDerivation,
    /// AES-256-GCM refused to encrypt (cannot occur within the §5 size
    /// bounds; kept so no path panics).
    #[error("aes-256-gcm encryption failed")]
    EncryptionFailed,
    /// The AES-256-GCM tag did not verify: wrong key, a retired key's
    /// envelope, or altered `epk`, `nonce` or `ciphertext`
    /// (§5, `failed(decryption-failed)`).
    #[error("aes-256-gcm decryption failed: tag mismatch")]
    DecryptionFailed,
}

/// §5 seal with caller-chosen ephemeral secret and nonce: deterministic,
/// for the shipped vector and tests. Production code MUST use [`seal`]: §5
/// requires a fresh CSPRNG ephemeral key and nonce per envelope, never reused.
///
/// `plaintext`: 1..=[`MAX_PLAINTEXT_BYTES`] bytes (the JCS document).
/// `ephemeral_secret`: 32 bytes, clamped by X25519. `nonce`: 12 bytes.
/// Returns the envelope and the [`SealTrace`] of the shared secret and key.
///
/// # Errors
/// [`SealError::EmptyPlaintext`], [`SealError::PlaintextTooLarge`] (both
/// checked before any cryptography), [`SealError::NonContributory`] when
/// `rkid` is a low-order point, and the unreachable
/// [`SealError::KeyDerivation`] / [`SealError::EncryptionFailed`].
pub fn seal_deterministic(
    plaintext: &[u8],
    rkid: &Rkid,
    ephemeral_secret: [u8; 32],
    nonce: [u8; NONCE_BYTES],
) -> Result<(SealedEnvelope, SealTrace), SealError> {
    if plaintext.is_empty() {
        return Err(SealError::EmptyPlaintext);
    }
    if plaintext.len() > MAX_PLAINTEXT_BYTES {
        return Err(SealError::PlaintextTooLarge {
            len: plaintext.len(),
        });
    }
    let ephemeral = StaticSecret::from(ephemeral_secret);
    let epk = PublicKey::from(&ephemeral).to_bytes();
    let trace = agree(&ephemeral, rkid.as_bytes())?;
    let ciphertext = cipher(&trace)
        .encrypt(&Nonce::from(nonce), empty_aad(plaintext))
        .map_err(|_| SealError::EncryptionFailed)?;
    let envelope = SealedEnvelope {
        rkid: *rkid,
        epk,
        nonce,
        ciphertext,
    };
    Ok((envelope, trace))
}

/// §5 seal: draws a fresh 32-byte ephemeral X25519 secret and a fresh
/// 12-byte nonce from `rng` on every call, then seals as
/// [`seal_deterministic`] does. `rng` must be a CSPRNG (e.g. `rand::rng()`).
///
/// # Errors
/// As [`seal_deterministic`].
pub fn seal<R: rand::CryptoRng + ?Sized>(
    plaintext: &[u8],
    rkid: &Rkid,
    rng: &mut R,
) -> Result<SealedEnvelope, SealError> {
    let mut ephemeral_secret = [0u8; 32];
    rng.fill_bytes(&mut ephemeral_secret);
    let mut nonce = [0u8; NONCE_BYTES];
    rng.fill_bytes(&mut nonce);
    let sealed = seal_deterministic(plaintext, rkid, ephemeral_secret, nonce);
    wipe(&mut ephemeral_secret);
    sealed.map(|(envelope, _trace)| envelope)
}

/// §5 open with the recipient's 32-byte X25519 secret, the one the caller
/// looked up by `envelope.rkid` (this function does not consult `rkid`).
/// Returns the plaintext, 1..=[`MAX_PLAINTEXT_BYTES`] bytes.
///
/// Order: size bounds (no cryptography), then the all-zero shared-secret
/// check, then the tag.
///
/// # Errors
/// [`SealError::CiphertextTooLarge`], [`SealError::CiphertextTooShort`],
/// [`SealError::NonContributory`] (low-order `epk`),
/// [`SealError::DecryptionFailed`], and the unreachable
/// [`SealError::KeyDerivation`].
pub fn open(envelope: &SealedEnvelope, recipient_secret: &[u8; 32]) -> Result<Vec<u8>, SealError> {
    let len = envelope.ciphertext.len();
    if len > MAX_CIPHERTEXT_BYTES {
        return Err(SealError::CiphertextTooLarge { len });
    }
    if len < MIN_CIPHERTEXT_BYTES {
        return Err(SealError::CiphertextTooShort { len });
    }
    let recipient = StaticSecret::from(*recipient_secret);
    let trace = agree(&recipient, &envelope.epk)?;
    cipher(&trace)
        .decrypt(
            &Nonce::from(envelope.nonce),
            empty_aad(&envelope.ciphertext),
        )
        .map_err(|_| SealError::DecryptionFailed)
}

/// X25519 + all-zero check + HKDF: the key agreement both sides share (§5).
fn agree(secret: &StaticSecret, their_public: &[u8; 32]) -> Result<SealTrace, SealError> {
    let shared: SharedSecret = secret.diffie_hellman(&PublicKey::from(*their_public));
    if !shared.was_contributory() {
        return Err(SealError::NonContributory);
    }
    let mut trace = SealTrace {
        shared_secret: shared.to_bytes(),
        aes_key: [0u8; 32],
    };
    Hkdf::<Sha256>::new(None, shared.as_bytes())
        .expand(SEAL_INFO, &mut trace.aes_key)
        .map_err(|_| SealError::KeyDerivation)?;
    Ok(trace)
}

/// AES-256-GCM keyed with the trace's AES key.
fn cipher(trace: &SealTrace) -> Aes256Gcm {
    Aes256Gcm::new(&Key::<Aes256Gcm>::from(trace.aes_key))
}

/// §5 AAD: exactly zero bytes.
fn empty_aad(msg: &[u8]) -> Payload<'_, 'static> {
    Payload { msg, aad: &[] }
}

/// Best-effort wipe of a secret buffer this module owns.
fn wipe(bytes: &mut [u8]) {
    zeroize::Zeroize::zeroize(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_the_section_5_numbers() {
        assert_eq!(SEAL_INFO, b"rltp/v1/seal");
        assert_eq!(MAX_PLAINTEXT_BYTES, 65_536);
        assert_eq!(MAX_CIPHERTEXT_BYTES, 65_552);
        assert_eq!(MIN_CIPHERTEXT_BYTES, 17);
    }

    #[test]
    fn seal_trace_debug_redacts_secrets() {
        let trace = SealTrace {
            shared_secret: [0xab; 32],
            aes_key: [0xcd; 32],
        };
        let shown = format!("{trace:?}");
        assert_eq!(
            shown,
            r#"SealTrace { shared_secret: "[redacted]", aes_key: "[redacted]" }"#
        );
    }

    #[test]
    fn wipe_zeroes_the_buffer() {
        let mut buf = [0x5a_u8; 32];
        wipe(&mut buf);
        assert_eq!(buf, [0u8; 32]);
    }

    #[test]
    fn error_display_is_lowercase_and_names_values() {
        assert_eq!(
            SealError::PlaintextTooLarge { len: 65_537 }.to_string(),
            "plaintext of 65537 bytes exceeds the §5 maximum of 65536 bytes"
        );
        assert_eq!(
            SealError::CiphertextTooShort { len: 16 }.to_string(),
            "ciphertext of 16 bytes is below the §5 minimum of 17 bytes"
        );
        for e in [
            SealError::EmptyPlaintext,
            SealError::CiphertextTooLarge { len: 65_553 },
            SealError::NonContributory,
            SealError::KeyDerivation,
            SealError::EncryptionFailed,
            SealError::DecryptionFailed,
        ] {
            let text = e.to_string();
            assert_eq!(text, text.to_lowercase(), "{text}");
        }
    }
}
