//! The deposited bytes: §5 sealed-envelope objects of an exact size.
//!
//! Every envelope is the JCS object `{"ciphertext","epk","nonce","rkid"}`
//! with a fresh random 32-byte `epk`, 12-byte `nonce` and a random
//! ciphertext whose base64url length makes the whole object exactly the
//! requested size. The carrier is key-blind: it checks the shape only
//! (§5a.5 s2) and never decrypts, so its work on these bytes is the work
//! on a real seal; the sender's sealing cost (X25519 + AES-GCM, about
//! 120 µs per envelope) is a sender cost and stays out of a carrier
//! benchmark. The Redis peer stores exactly the same bytes.

use rand::Rng as _;
use rltp_proofs::encoding::b64url_encode;

/// Bytes of the object that are not the ciphertext's base64url:
/// `{"ciphertext":"…","epk":"<43>","nonce":"<16>","rkid":"<48>"}`.
const FIXED_BYTES: usize = 16 + 9 + 43 + 11 + 16 + 10 + 48 + 1;

/// Length of the unpadded base64url of `n` bytes.
fn b64_len(n: usize) -> usize {
    (4 * n).div_ceil(3)
}

/// The ciphertext length (bytes, ≥ 17) giving an envelope of exactly
/// `size` bytes, if one exists.
pub fn ciphertext_len(size: usize) -> Option<usize> {
    let text = size.checked_sub(FIXED_BYTES)?;
    let n = text * 3 / 4;
    (n.saturating_sub(1)..=n + 1).find(|&n| n >= 17 && b64_len(n) == text)
}

/// The nearest size at or above `size` for which an envelope exists.
pub fn fit_size(size: usize) -> usize {
    (size..size + 4)
        .find(|&s| ciphertext_len(s).is_some())
        .unwrap_or(size)
}

/// Makes envelopes of one size for any queue.
#[derive(Debug, Clone)]
pub struct EnvelopeMaker {
    ciphertext: usize,
}

impl EnvelopeMaker {
    /// A maker of `size`-byte envelopes (`size` as fitted by [`fit_size`]).
    ///
    /// # Errors
    /// When no envelope of that size exists.
    pub fn new(size: usize) -> anyhow::Result<EnvelopeMaker> {
        let ciphertext = ciphertext_len(size)
            .ok_or_else(|| anyhow::anyhow!("no sealed envelope is exactly {size} bytes"))?;
        Ok(EnvelopeMaker { ciphertext })
    }

    /// A fresh envelope for the queue whose Multikey is `rkid` (48 chars).
    pub fn make(&self, rkid: &str) -> Vec<u8> {
        let mut rng = rand::rng();
        let mut epk = [0u8; 32];
        let mut nonce = [0u8; 12];
        let mut ct = vec![0u8; self.ciphertext];
        rng.fill_bytes(&mut epk);
        rng.fill_bytes(&mut nonce);
        rng.fill_bytes(&mut ct);
        let mut out = Vec::with_capacity(FIXED_BYTES + b64_len(self.ciphertext));
        out.extend_from_slice(b"{\"ciphertext\":\"");
        out.extend_from_slice(b64url_encode(&ct).as_bytes());
        out.extend_from_slice(b"\",\"epk\":\"");
        out.extend_from_slice(b64url_encode(&epk).as_bytes());
        out.extend_from_slice(b"\",\"nonce\":\"");
        out.extend_from_slice(b64url_encode(&nonce).as_bytes());
        out.extend_from_slice(b"\",\"rkid\":\"");
        out.extend_from_slice(rkid.as_bytes());
        out.extend_from_slice(b"\"}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rltp_proofs::multikey::Rkid;

    #[test]
    fn envelopes_have_the_exact_size_and_pass_the_carrier_shape_check() {
        let rkid = Rkid::from_bytes([9u8; 32]);
        let multikey = rkid.to_multikey();
        assert_eq!(multikey.len(), 48);
        for size in [256, 1024, 4096, 65_536] {
            assert_eq!(fit_size(size), size);
            let maker = EnvelopeMaker::new(size).expect("size exists");
            let bytes = maker.make(&multikey);
            assert_eq!(bytes.len(), size);
            let sealed =
                rltp_proofs::envelope::check_shape(&bytes, &rkid, bytes.len()).expect("shape");
            assert_eq!(sealed.rkid, rkid);
            assert_ne!(maker.make(&multikey), bytes, "every envelope is fresh");
        }
    }

    #[test]
    fn sizes_without_an_envelope_are_refused() {
        assert!(EnvelopeMaker::new(100).is_err());
        assert_eq!(ciphertext_len(1024), Some(652));
    }
}
