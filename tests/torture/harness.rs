//! The torture harness: the shared process harness (`tests/support/
//! carrier.rs`: a real `rltp-carrier serve` on loopback, restartable,
//! killable, its RSS read from `/proc`), plus what only the torture tests
//! use: a seeded generator, key-blind envelopes, recipients, scrapes.

pub use crate::support::*;
use rltp_client::RecipientKeys;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::SealedEnvelope;

/// The carrier identifier.
pub fn carrier_id() -> CarrierId {
    CARRIER.parse().unwrap()
}

/// A small deterministic generator (xorshift64*).
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded (never 0).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// Seeded from `RLTP_TORTURE_SEED` if set, else from the clock; the
    /// seed is printed so a failing run can be repeated.
    pub fn from_env(what: &str) -> Rng {
        let seed = knob(
            "RLTP_TORTURE_SEED",
            wall_ms() ^ u64::from(std::process::id()),
        );
        println!("{what}: seed {seed} (RLTP_TORTURE_SEED)");
        Rng::new(seed)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `range` (inclusive of both ends).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `percent` %.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// 32 random bytes.
    pub fn bytes32(&mut self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for chunk in out.chunks_mut(8) {
            chunk.copy_from_slice(&self.next().to_le_bytes());
        }
        out
    }
}

/// A shape-valid sealed envelope for `rkid` with a `ciphertext_len`-byte
/// random ciphertext (17..=65 552): the carrier is key-blind, so random
/// bytes are as good as a real seal, and every envelope is unique.
pub fn envelope(rkid: &Rkid, ciphertext_len: usize, rng: &mut Rng) -> Vec<u8> {
    let mut ciphertext = Vec::with_capacity(ciphertext_len + 32);
    while ciphertext.len() < ciphertext_len {
        ciphertext.extend_from_slice(&rng.bytes32());
    }
    ciphertext.truncate(ciphertext_len);
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&rng.bytes32()[..12]);
    SealedEnvelope {
        rkid: *rkid,
        epk: rng.bytes32(),
        nonce,
        ciphertext,
    }
    .to_bytes()
}

/// A recipient: its rkid secret, control principal and generation.
pub fn recipient(secret: [u8; 32], principal: [u8; 32], generation: u64) -> RecipientKeys {
    RecipientKeys::new(
        carrier_id(),
        ed25519_dalek::SigningKey::from_bytes(&principal),
        secret,
        generation,
    )
}

/// Every unlabelled sample of the carrier's `/metrics` at `port`, by name.
pub fn scrape(port: u16) -> std::collections::BTreeMap<String, f64> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(name, value)| Some((name.to_owned(), value.trim().parse().ok()?)))
        .collect()
}

/// The guarantee-3 work counters from `/metrics`:
/// (asymmetric operations, random draws, proof verifications).
pub fn work(port: u16) -> (u64, u64, u64) {
    let m = scrape(port);
    let get = |name: &str| {
        *m.get(name)
            .unwrap_or_else(|| panic!("no {name} in /metrics")) as u64
    };
    (
        get("rltp_carrier_asymmetric_operations_total"),
        get("rltp_carrier_random_draws_total"),
        get("rltp_carrier_proof_verifications_total"),
    )
}
