//! TLS for the server side of the QUIC profile (`PROTOCOL.md` §5): the
//! carrier's certificate and its server config. The fingerprint, the trust
//! modes and the client config are shared with the client library
//! ([`rltp_quic::tls`]).
//!
//! On first start [`load_or_generate`] makes an Ed25519 self-signed
//! certificate (rcgen, key from `ed25519-dalek` as PKCS#8) and keeps it in
//! `<data-dir>/tls/cert.der` and `<data-dir>/tls/key.der` (mode 0600,
//! directory 0700; [`crate::data_dir`]); later starts reuse it, so the
//! fingerprint is stable. A CA-issued certificate is loaded from PEM files
//! instead ([`load_pem`], config `[tls] cert` / `key`).

use rltp_quic::stream::Binding;
pub use rltp_quic::tls::{
    ServerTrust, SpkiFingerprint, TlsError, install_crypto_provider, rustls_client_config,
};
use rltp_quic::tls::{io_error, provider, read_pem_certificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::fmt;
use std::path::Path;

pub use crate::data_dir::{TLS_CERT_FILE as CERT_FILE, TLS_KEY_FILE as KEY_FILE};
/// The DNS name the generated certificate is issued for. A pinning
/// client may connect under any name; this one is what the CLI uses.
pub const SELF_SIGNED_NAME: &str = "localhost";

/// A server's certificate chain and private key, with the fingerprint of
/// the end-entity certificate.
pub struct ServerIdentity {
    /// End-entity certificate first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key (never logged; `Debug` is redacted).
    pub key: PrivateKeyDer<'static>,
    /// SPKI fingerprint of `chain[0]`.
    pub fingerprint: SpkiFingerprint,
    /// Whether this start generated the certificate (first start).
    pub generated: bool,
}

impl fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("certificates", &self.chain.len())
            .field("key", &"[redacted]")
            .field("fingerprint", &self.fingerprint)
            .field("generated", &self.generated)
            .finish()
    }
}

/// Loads the self-signed identity from `tls_dir`, generating it on first
/// start (`PROTOCOL.md` §5): an Ed25519 key (PKCS#8 DER) and a
/// certificate for [`SELF_SIGNED_NAME`], each written with mode 0600 in a
/// directory of mode 0700.
///
/// # Errors
/// [`TlsError::Io`], [`TlsError::Generate`], [`TlsError::BadCertificate`].
pub fn load_or_generate(tls_dir: &Path) -> Result<ServerIdentity, TlsError> {
    let cert_path = tls_dir.join(CERT_FILE);
    let key_path = tls_dir.join(KEY_FILE);
    if cert_path.exists() && key_path.exists() {
        let cert = CertificateDer::from(std::fs::read(&cert_path).map_err(io_error(&cert_path))?);
        let key = PrivatePkcs8KeyDer::from(std::fs::read(&key_path).map_err(io_error(&key_path))?);
        let fingerprint = SpkiFingerprint::of_certificate(&cert)?;
        return Ok(ServerIdentity {
            chain: vec![cert],
            key: PrivateKeyDer::Pkcs8(key),
            fingerprint,
            generated: false,
        });
    }
    let (cert, key) = generate_self_signed()?;
    create_private_dir(tls_dir)?;
    write_private(&key_path, key.secret_pkcs8_der())?;
    write_private(&cert_path, cert.as_ref())?;
    let fingerprint = SpkiFingerprint::of_certificate(&cert)?;
    Ok(ServerIdentity {
        chain: vec![cert],
        key: PrivateKeyDer::Pkcs8(key),
        fingerprint,
        generated: true,
    })
}

/// Bytes of the QUIC stateless-reset key (an HMAC-SHA-256 key).
pub const RESET_KEY_BYTES: usize = 32;

/// The QUIC stateless-reset key of this data dir (`PROTOCOL.md` §5),
/// made on first start (mode 0600) and kept like the carrier's TLS
/// identity: a carrier restarted after a crash derives the same
/// stateless-reset tokens, so the next packet of a connection to its
/// previous life is answered with a stateless reset (RFC 9000 §10.3) and
/// the client learns at once, not at its idle timeout. A file of another
/// length is refused, naming it.
///
/// # Errors
/// [`TlsError::Io`]; [`TlsError::Pem`] for a file of another length.
pub fn load_or_make_reset_key(data_dir: &Path) -> Result<[u8; RESET_KEY_BYTES], TlsError> {
    let path = data_dir.join(crate::data_dir::QUIC_RESET_KEY);
    match std::fs::read(&path) {
        Ok(bytes) => bytes.try_into().map_err(|bytes: Vec<u8>| TlsError::Pem {
            path: path.clone(),
            detail: format!(
                "a stateless-reset key is {RESET_KEY_BYTES} bytes, this file has {}; \
                 delete it to make a new one (open connections then learn of a restart only at their idle timeout)",
                bytes.len()
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut key = [0u8; RESET_KEY_BYTES];
            rand::Rng::fill_bytes(&mut rand::rng(), &mut key);
            write_private(&path, &key)?;
            Ok(key)
        }
        Err(e) => Err(io_error(&path)(e)),
    }
}

/// A fresh Ed25519 self-signed certificate for [`SELF_SIGNED_NAME`] and its
/// PKCS#8 key (in memory; for tests and for [`load_or_generate`]).
///
/// # Errors
/// [`TlsError::Generate`].
pub fn generate_self_signed()
-> Result<(CertificateDer<'static>, PrivatePkcs8KeyDer<'static>), TlsError> {
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    let signing = ed25519_dalek::SigningKey::generate(&mut rand::rng());
    let pkcs8 = signing
        .to_pkcs8_der()
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let key_der = PrivatePkcs8KeyDer::from(pkcs8.as_bytes().to_vec());
    let key_pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&key_der, &rcgen::PKCS_ED25519)
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let params = rcgen::CertificateParams::new(vec![SELF_SIGNED_NAME.to_owned()])
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let cert = params
        .self_signed(&key_pair)
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    Ok((cert.der().clone(), key_der))
}

/// Loads a CA-issued certificate chain and its private key from PEM files
/// (config `[tls] cert`, `key`).
///
/// # Errors
/// [`TlsError::Io`], [`TlsError::Pem`], [`TlsError::BadCertificate`].
pub fn load_pem(cert_path: &Path, key_path: &Path) -> Result<ServerIdentity, TlsError> {
    let pem_error = |path: &Path, detail: String| TlsError::Pem {
        path: path.to_owned(),
        detail,
    };
    let chain = read_pem_certificates(cert_path)?;
    let key_pem = std::fs::read(key_path).map_err(io_error(key_path))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| pem_error(key_path, format!("no private key: {e}")))?;
    let first = chain
        .first()
        .ok_or_else(|| pem_error(cert_path, "no certificate".into()))?;
    let fingerprint = SpkiFingerprint::of_certificate(first)?;
    Ok(ServerIdentity {
        chain,
        key,
        fingerprint,
        generated: false,
    })
}

/// Creates `dir` (and parents) and sets it to mode 0700.
///
/// # Errors
/// [`TlsError::Io`].
pub fn create_private_dir(dir: &Path) -> Result<(), TlsError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io_error(dir))?;
    }
    Ok(())
}

/// Writes `bytes` to a new file `path` with mode 0600 (created with that
/// mode, never widened in between), fsync'd.
///
/// # Errors
/// [`TlsError::Io`], also if the file already exists.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), TlsError> {
    crate::data_dir::write_private(path, bytes).map_err(io_error(path))
}

/// The rustls server config of this profile: TLS 1.3, ring, no client
/// authentication, ALPN [`rltp_wire::ALPN`].
///
/// # Errors
/// [`TlsError::Config`] if rustls refuses the key or chain.
pub fn rustls_server_config(identity: &ServerIdentity) -> Result<rustls::ServerConfig, TlsError> {
    rustls_server_config_for(identity, Binding::Quic)
}

/// [`rustls_server_config`] for `binding`: the same certificate and key
/// on both bindings (one SPKI pin, `PROTOCOL.md` §5b), ALPN
/// [`rltp_quic::tls::alpn`] (`h2` on TLS/TCP).
///
/// # Errors
/// As [`rustls_server_config`].
pub fn rustls_server_config_for(
    identity: &ServerIdentity,
    binding: Binding,
) -> Result<rustls::ServerConfig, TlsError> {
    install_crypto_provider();
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![rltp_quic::tls::alpn(binding).to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_identity_is_kept_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let first = load_or_generate(&tls).unwrap();
        assert!(first.generated);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for name in [CERT_FILE, KEY_FILE] {
                let mode = std::fs::metadata(tls.join(name))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o777, 0o600, "{name}");
            }
            let mode = std::fs::metadata(&tls).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        let second = load_or_generate(&tls).unwrap();
        assert!(!second.generated);
        assert_eq!(first.fingerprint, second.fingerprint);
        assert_eq!(first.chain, second.chain);
        // The fingerprint is over the SPKI: 12-byte Ed25519 AlgorithmIdentifier
        // prefix + 32-byte key = 44 bytes of DER.
        let parsed = rustls::server::ParsedCertificate::try_from(&first.chain[0]).unwrap();
        let spki = parsed.subject_public_key_info();
        assert_eq!(spki.as_ref().len(), 44);
        assert_eq!(
            &spki.as_ref()[..12],
            &[
                0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00
            ]
        );
        assert_eq!(
            first.fingerprint.0,
            rltp_proofs::encoding::sha256(spki.as_ref())
        );
    }

    #[test]
    fn configs_build_for_both_trust_modes() {
        let (cert, key) = generate_self_signed().unwrap();
        let identity = ServerIdentity {
            fingerprint: SpkiFingerprint::of_certificate(&cert).unwrap(),
            chain: vec![cert.clone()],
            key: PrivateKeyDer::Pkcs8(key),
            generated: true,
        };
        let server = rustls_server_config(&identity).unwrap();
        assert_eq!(server.alpn_protocols, vec![b"rltp-carrier/1".to_vec()]);
        let client = rustls_client_config(&ServerTrust::Pin(identity.fingerprint)).unwrap();
        assert_eq!(client.alpn_protocols, vec![b"rltp-carrier/1".to_vec()]);
        let missing = rustls_client_config(&ServerTrust::CaFile("/nonexistent/ca.pem".into()));
        assert!(matches!(missing, Err(TlsError::Io { .. })));
    }
}
