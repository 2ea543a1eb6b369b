//! The address challenge of `PROTOCOL.md` §8: the plaintext a carrier
//! seals to an `rkid` for a `register`/`rebind` challenge, and the
//! registrant's side that opens it. The carrier's side (drawing the
//! randomness, sealing, recording the challenge) is the engine's.

use rltp_proofs::encoding::{b64url_decode_array, b64url_encode};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_proofs::seal::{self, SealedEnvelope};

/// `PROTOCOL.md` §8: the domain tag `v` of the sealed address-challenge
/// plaintext. The object has no `type`, so it never passes as a delivery
/// document, and no document carries `v`.
pub const ADDRESS_CHALLENGE_V: &str = "rltp-carrier-address-challenge/1";

/// `PROTOCOL.md` §8: the plaintext sealed to the `rkid` for a
/// `register`/`rebind` challenge — the JCS of
/// `{"addressChallenge": <43 base64url chars>, "carrier": C, "purpose": p,
/// "rkid": <Multikey>, "v": ADDRESS_CHALLENGE_V}` (about 260 bytes).
///
/// # Errors
/// [`rltp_proofs::jcs::JcsError`], not reachable for these values.
pub fn address_challenge_plaintext(
    carrier: &CarrierId,
    rkid: &Rkid,
    purpose: Purpose,
    address_challenge: &[u8; 32],
) -> Result<Vec<u8>, rltp_proofs::jcs::JcsError> {
    let mut object = Object::new();
    object.insert("addressChallenge", b64url_encode(address_challenge));
    object.insert("carrier", carrier.as_str());
    object.insert("purpose", purpose.as_str());
    object.insert("rkid", rkid.to_multikey());
    object.insert("v", ADDRESS_CHALLENGE_V);
    rltp_proofs::jcs::canonicalize(&Value::Object(object))
}

/// Why a registrant refuses to use a sealed address challenge
/// (`PROTOCOL.md` §8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressChallengeError {
    /// §5 open failed (wrong key, altered envelope).
    #[error("sealed address challenge does not open: {0}")]
    Open(#[from] seal::SealError),
    /// The plaintext is not the §8 object.
    #[error("sealed address challenge plaintext is not the protocol object")]
    Shape,
    /// `v`, `carrier`, `rkid` or `purpose` differ from what was asked
    /// (named by the member).
    #[error("sealed address challenge member {0} differs from the request")]
    Mismatch(&'static str),
}

/// The registrant side of `PROTOCOL.md` §8: opens `sealed` with the
/// `rkid`'s 32-byte X25519 secret, checks `v`, `carrier` (byte-equal),
/// `rkid` and `purpose` against the request, and returns the 32-byte
/// address challenge to copy into the proof.
///
/// # Errors
/// [`AddressChallengeError`].
pub fn open_address_challenge(
    sealed: &SealedEnvelope,
    rkid_secret: &[u8; 32],
    carrier: &CarrierId,
    rkid: &Rkid,
    purpose: Purpose,
) -> Result<[u8; 32], AddressChallengeError> {
    let plaintext = seal::open(sealed, rkid_secret)?;
    let value = rltp_proofs::json::parse(&plaintext).map_err(|_| AddressChallengeError::Shape)?;
    let object = value.as_object().ok_or(AddressChallengeError::Shape)?;
    let member = |name: &'static str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .ok_or(AddressChallengeError::Shape)
    };
    if object.len() != 5 {
        return Err(AddressChallengeError::Shape);
    }
    for (name, expected) in [
        ("v", ADDRESS_CHALLENGE_V.to_owned()),
        ("carrier", carrier.as_str().to_owned()),
        ("rkid", rkid.to_multikey()),
        ("purpose", purpose.as_str().to_owned()),
    ] {
        if member(name)? != expected {
            return Err(AddressChallengeError::Mismatch(name));
        }
    }
    b64url_decode_array::<32>(member("addressChallenge")?).map_err(|_| AddressChallengeError::Shape)
}
