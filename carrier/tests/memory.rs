//! Memory follows live state (issue 13): a table keyed by what strangers
//! ask for gives its memory back once its entries are gone. The failure it
//! guards against: 10⁶ challenges for distinct unknown rkids (the
//! unknown-address meter opened) raised the carrier's RSS from 10.7 to 311
//! MiB, and it stayed at 311 MiB after every challenge had expired, because
//! the challenge table's purge never released its capacity.
//!
//! This test binary holds one test, so the process's RSS is this flood's:
//! flood the engine (time injected: a manual clock, no sleeps), let the
//! challenge lifetime pass, sweep, and compare the RSS with the baseline.
//! `RLTP_MEMORY_CHALLENGES` sets the flood (default the 1 000 000,
//! about 3 s in a debug build).

mod common;

use common::*;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_storage::Store;
use rltp_storage::mem::MemStore;
use std::sync::Arc;

/// Resident set size of this process, KiB (`/proc/self/statm`).
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("statm resident pages");
    pages * 4
}

#[test]
fn memory_returns_to_baseline_after_a_flood_of_challenges_expires() {
    let n: u64 = std::env::var("RLTP_MEMORY_CHALLENGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let store = Arc::new(MemStore::new());
    let h = Harness::new(Arc::clone(&store));
    let lifetime = h.engine.constants().challenge_lifetime_ms;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rkid = || {
        let mut bytes = [0u8; 32];
        for chunk in bytes.chunks_mut(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            chunk.copy_from_slice(&seed.to_le_bytes());
        }
        Rkid::from_bytes(bytes)
    };
    // Warm up every path once (allocator arenas, the writer), then measure.
    for _ in 0..1_000 {
        h.engine.challenge(&rkid(), Purpose::Collect).unwrap();
    }
    h.advance(lifetime);
    h.engine.sweep().unwrap();
    let baseline = rss_kib();
    for _ in 0..n {
        h.engine.challenge(&rkid(), Purpose::Collect).unwrap();
    }
    assert_eq!(store.challenge_count() as u64, n);
    let peak = rss_kib();
    // The lifetime passes (injected time), and the sweeper runs.
    h.advance(lifetime);
    h.engine.sweep().unwrap();
    assert_eq!(store.challenge_count(), 0);
    let after = rss_kib();
    println!(
        "{n} challenges for distinct unknown rkids: RSS {baseline} KiB before, {peak} KiB at the \
         peak, {after} KiB after they expired and a sweep ran ({} KiB above the baseline)",
        after.saturating_sub(baseline)
    );
    assert!(
        peak > baseline + (n / 20).max(1024),
        "the flood should have grown the table: {baseline} → {peak} KiB"
    );
    assert!(
        after <= baseline + 4 * 1024,
        "memory did not return within 4 MiB of the baseline: {baseline} → {peak} → {after} KiB"
    );
}
