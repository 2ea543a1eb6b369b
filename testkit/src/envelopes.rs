//! Shape-valid sealed envelopes of an exact size (§5: the JCS envelope
//! whose ciphertext's base64url makes up the rest).

use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::SealedEnvelope;

/// Bytes of a JCS envelope that are not the ciphertext's base64url.
pub const ENVELOPE_OVERHEAD: usize = 154;
/// The smallest valid envelope (17-byte ciphertext), bytes.
pub const MIN_ENVELOPE: usize = 177;

fn ct_len_for(size: usize) -> Option<usize> {
    let c = size.checked_sub(ENVELOPE_OVERHEAD)?;
    let n = match c % 4 {
        0 => c / 4 * 3,
        2 => c / 4 * 3 + 1,
        3 => c / 4 * 3 + 2,
        _ => return None,
    };
    (17..=65_552).contains(&n).then_some(n)
}

/// Whether an envelope of exactly `size` bytes exists.
pub fn envelope_size_ok(size: usize) -> bool {
    ct_len_for(size).is_some()
}

/// A shape-valid sealed envelope for `rkid` of exactly `size` bytes; its
/// bytes are a function of `salt`.
pub fn envelope(rkid: &Rkid, size: usize, salt: &str) -> Vec<u8> {
    let n = ct_len_for(size).unwrap_or_else(|| panic!("no envelope of {size} bytes"));
    let seed = rltp_proofs::encoding::sha256(salt.as_bytes());
    let mut ciphertext = Vec::with_capacity(n);
    let mut block = seed;
    while ciphertext.len() < n {
        block = rltp_proofs::encoding::sha256(&block);
        ciphertext.extend_from_slice(&block);
    }
    ciphertext.truncate(n);
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&seed[..12]);
    let bytes = SealedEnvelope {
        rkid: *rkid,
        epk: seed,
        nonce,
        ciphertext,
    }
    .to_bytes();
    assert_eq!(bytes.len(), size);
    bytes
}

/// Envelope sizes, each at most `max_piece` bytes, summing to exactly
/// `total` bytes.
pub fn sizes_summing_to(total: usize, max_piece: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut rest = total;
    while rest > 0 {
        let piece = (MIN_ENVELOPE..=rest.min(max_piece))
            .rev()
            .find(|&p| envelope_size_ok(p) && (rest - p == 0 || rest - p >= 2 * MIN_ENVELOPE + 4))
            .unwrap_or_else(|| panic!("cannot split {rest} bytes"));
        sizes.push(piece);
        rest -= piece;
    }
    sizes
}
