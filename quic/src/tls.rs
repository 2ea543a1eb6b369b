//! TLS for the client side of the QUIC profile (`PROTOCOL.md` §5): the
//! server's SHA-256 SPKI fingerprint and the two ways a client trusts a
//! server.
//!
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
//! [`install_crypto_provider`]), ALPN [`rltp_wire::ALPN`]. The server's
//! half (its certificate, generated or loaded, and its config) is the
//! carrier's (`rltp_carrier::tls`).
//!
//! Nothing here is an admission input (§5a.5): the certificate
//! authenticates the carrier to clients, never a client to the carrier.

use crate::stream::Binding;
use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Once};

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

/// Maps an I/O error on `path` to [`TlsError::Io`].
pub fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
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

/// The ring provider every config of this profile names.
pub fn provider() -> Arc<CryptoProvider> {
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

/// The certificates of a PEM file (at least one).
///
/// # Errors
/// [`TlsError::Io`], [`TlsError::Pem`].
pub fn read_pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
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
    rustls_client_config_for(trust, Binding::Quic)
}

/// The ALPN protocol of `binding`: [`rltp_wire::ALPN`] on QUIC, `h2` on
/// TLS/TCP (`PROTOCOL.md` §5b).
pub fn alpn(binding: Binding) -> &'static [u8] {
    match binding {
        Binding::Quic => rltp_wire::ALPN,
        Binding::Tcp => crate::stream::ALPN_H2,
    }
}

/// [`rustls_client_config`] for `binding`: the same trust (the same pin
/// on both bindings, so a fallback is no downgrade: `PROTOCOL.md` §5b),
/// TLS 1.3 only, ALPN [`alpn`].
///
/// # Errors
/// As [`rustls_client_config`].
pub fn rustls_client_config_for(
    trust: &ServerTrust,
    binding: Binding,
) -> Result<rustls::ClientConfig, TlsError> {
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
    config.alpn_protocols = vec![alpn(binding).to_vec()];
    Ok(config)
}

/// What the text of a handshake failure contains when the pin refused
/// the carrier's key (another carrier, or a TLS-intercepting middlebox):
/// quinn carries a local TLS error as its text, tokio-rustls as rustls's
/// error, so the text is the one form both bindings keep. Reported as
/// unreachable naming the pin mismatch, never trusted (`PROTOCOL.md` §5b).
pub const PIN_MISMATCH: &str = "is not the pinned";

/// Accepts exactly one SPKI fingerprint; verifies handshake signatures
/// with the certificate's key like any verifier.
#[derive(Debug)]
struct PinnedVerifier {
    pin: SpkiFingerprint,
    provider: Arc<CryptoProvider>,
}

/// The pin did not match (carried inside `rustls::Error`, whose text
/// shows it by `Debug`: the same words as `Display`, [`PIN_MISMATCH`]).
#[derive(thiserror::Error)]
#[error("server spki fingerprint {got} {PIN_MISMATCH} {want}")]
struct PinMismatch {
    got: SpkiFingerprint,
    want: SpkiFingerprint,
}

impl fmt::Debug for PinMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
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
    fn a_missing_ca_file_is_an_io_error() {
        let missing = rustls_client_config(&ServerTrust::CaFile("/nonexistent/ca.pem".into()));
        assert!(matches!(missing, Err(TlsError::Io { .. })));
    }
}
