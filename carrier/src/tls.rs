//! TLS for the QUIC profile (`PROTOCOL.md` §5): the server's certificate,
//! its SHA-256 SPKI fingerprint, and the two ways a client trusts a server.
//!
//! - **Server.** On first start [`load_or_generate`] makes an Ed25519
//!   self-signed certificate (rcgen, key from `ed25519-dalek` as PKCS#8)
//!   and keeps it in `<data-dir>/tls/cert.der` and `<data-dir>/tls/key.der`
//!   (mode 0600, directory 0700); later starts reuse it, so the fingerprint
//!   is stable. A CA-issued certificate is loaded from PEM files instead
//!   ([`load_pem`], config `[tls] cert` / `key`).
//! - **Fingerprint.** [`SpkiFingerprint`]: `sha256/` + standard base64
//!   (padded) of SHA-256 over the DER `SubjectPublicKeyInfo` (the HPKP
//!   form). It names the key, not the certificate, so re-issuing a
//!   certificate over the same key keeps it.
//! - **Client.** [`ServerTrust::Pin`] accepts exactly one SPKI fingerprint
//!   (name, chain and validity are not consulted: the pin is the trust
//!   decision) and still verifies the TLS 1.3 handshake signature with the
//!   pinned key, so only the key's holder can complete the handshake.
//!   [`ServerTrust::CaFile`] uses standard WebPKI verification against the
//!   roots in a PEM file.
//!
//! Every config is TLS 1.3 only, provider ring (installed once by
//! [`install_crypto_provider`]), ALPN [`rltp_wire::ALPN`].
//!
//! Nothing here is an admission input (§5a.5): the certificate
//! authenticates the carrier to clients, never a client to the carrier.

use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Once};

/// File name of the generated certificate (DER) inside the TLS directory.
pub const CERT_FILE: &str = "cert.der";
/// File name of the generated private key (PKCS#8 DER) inside the TLS directory.
pub const KEY_FILE: &str = "key.der";
/// The DNS name the generated certificate is issued for. A pinning
/// client may connect under any name; this one is what the CLI uses.
pub const SELF_SIGNED_NAME: &str = "localhost";

/// Why TLS material could not be made, loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A PEM file held nothing usable.
    #[error("{path}: {detail}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// rcgen could not build the certificate.
    #[error("certificate generation failed: {0}")]
    Generate(String),
    /// A certificate could not be parsed.
    #[error("certificate is not parseable: {0}")]
    BadCertificate(String),
    /// rustls or quinn refused the configuration.
    #[error("tls configuration refused: {0}")]
    Config(String),
    /// A fingerprint string is not `sha256/` + base64 of 32 bytes.
    #[error("{0:?} is not an spki fingerprint (expected sha256/ followed by base64 of 32 bytes)")]
    BadFingerprint(String),
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Installs ring as the process-wide rustls provider, once. Needed because
/// a second provider compiled into the process would make
/// `rustls::*Config::builder()` panic; every config in this crate also
/// names ring explicitly, so this is belt and braces.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first: keep it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `sha256/` + base64 (standard alphabet, padded) of SHA-256 over a DER
/// `SubjectPublicKeyInfo` (`PROTOCOL.md` §5; the HPKP pin form). 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpkiFingerprint(pub [u8; 32]);

impl SpkiFingerprint {
    /// The prefix of the text form.
    pub const PREFIX: &'static str = "sha256/";

    /// The fingerprint of the end-entity certificate `cert` (its SPKI).
    ///
    /// # Errors
    /// [`TlsError::BadCertificate`] if `cert` does not parse.
    pub fn of_certificate(cert: &CertificateDer<'_>) -> Result<SpkiFingerprint, TlsError> {
        let parsed = rustls::server::ParsedCertificate::try_from(cert)
            .map_err(|e| TlsError::BadCertificate(e.to_string()))?;
        Ok(SpkiFingerprint(rltp_proofs::encoding::sha256(
            parsed.subject_public_key_info().as_ref(),
        )))
    }
}

impl fmt::Display for SpkiFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}",
            Self::PREFIX,
            base64::engine::general_purpose::STANDARD.encode(self.0)
        )
    }
}

impl fmt::Debug for SpkiFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for SpkiFingerprint {
    type Err = TlsError;

    /// Parses `sha256/<base64>`: standard alphabet, padded, exactly 32 bytes.
    fn from_str(s: &str) -> Result<SpkiFingerprint, TlsError> {
        let bad = || TlsError::BadFingerprint(s.to_owned());
        let b64 = s.strip_prefix(Self::PREFIX).ok_or_else(bad)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| bad())?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad())?;
        Ok(SpkiFingerprint(bytes))
    }
}

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

fn read_pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = std::fs::read(path).map_err(io_error(path))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            detail: "no certificate".into(),
        });
    }
    Ok(certs)
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
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io_error(path))?;
    file.write_all(bytes).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))
}

/// The rustls server config of this profile: TLS 1.3, ring, no client
/// authentication, ALPN [`rltp_wire::ALPN`].
///
/// # Errors
/// [`TlsError::Config`] if rustls refuses the key or chain.
pub fn rustls_server_config(identity: &ServerIdentity) -> Result<rustls::ServerConfig, TlsError> {
    install_crypto_provider();
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![rltp_wire::ALPN.to_vec()];
    Ok(config)
}

/// How a client trusts the carrier's certificate (`PROTOCOL.md` §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerTrust {
    /// Accept exactly this SPKI fingerprint (`--pin`).
    Pin(SpkiFingerprint),
    /// Standard WebPKI verification against the CA certificates in this
    /// PEM file; the server name must match the certificate.
    CaFile(PathBuf),
}

/// The rustls client config of this profile for `trust`: TLS 1.3, ring,
/// ALPN [`rltp_wire::ALPN`].
///
/// # Errors
/// [`TlsError::Io`] / [`TlsError::Pem`] reading a CA file,
/// [`TlsError::Config`].
pub fn rustls_client_config(trust: &ServerTrust) -> Result<rustls::ClientConfig, TlsError> {
    install_crypto_provider();
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut config = match trust {
        ServerTrust::Pin(pin) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                pin: *pin,
                provider,
            }))
            .with_no_client_auth(),
        ServerTrust::CaFile(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_pem_certificates(path)? {
                roots.add(cert).map_err(|e| TlsError::Pem {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![rltp_wire::ALPN.to_vec()];
    Ok(config)
}

/// Accepts exactly one SPKI fingerprint; verifies handshake signatures
/// with the certificate's key like any verifier.
#[derive(Debug)]
struct PinnedVerifier {
    pin: SpkiFingerprint,
    provider: Arc<CryptoProvider>,
}

/// The pin did not match (carried inside `rustls::Error`).
#[derive(Debug, thiserror::Error)]
#[error("server spki fingerprint {got} is not the pinned {want}")]
struct PinMismatch {
    got: SpkiFingerprint,
    want: SpkiFingerprint,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = SpkiFingerprint::of_certificate(end_entity).map_err(|_| {
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
        })?;
        if got == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Other(rustls::OtherError(Arc::new(PinMismatch {
                    got,
                    want: self.pin,
                }))),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // Unreachable: the config is TLS 1.3 only. Verified anyway.
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_text_round_trips() {
        let fp = SpkiFingerprint([7u8; 32]);
        let text = fp.to_string();
        assert_eq!(text, "sha256/BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=");
        assert_eq!(text.parse::<SpkiFingerprint>().unwrap(), fp);
        for bad in [
            "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=",
            "sha256/BwcH",
            "sha1/BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=",
            "sha256/BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc",
        ] {
            assert!(bad.parse::<SpkiFingerprint>().is_err(), "{bad}");
        }
    }

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
