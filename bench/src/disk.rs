//! Scenario 7: the machine's durable-write limits, measured in the same
//! run on the same file system as the stores.
//!
//! - **fsync rate**: append 4 KiB with `pwrite`, then `fdatasync`, one at a
//!   time: the most durable commits per second one writer can make.
//! - **durable append bandwidth**: append 256 KiB blocks (a batch of about
//!   256 one-KiB deposits) to a file opened `O_DSYNC`: bytes per second
//!   the disk accepts durably when commits are large.

use crate::stats::Percentiles;
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::time::{Duration, Instant};

/// The probe's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskProbe {
    /// `pwrite` 4 KiB + `fdatasync` per second.
    pub fsync_per_s: f64,
    /// Latency of one 4 KiB append + `fdatasync`, ms.
    pub fsync_ms: Percentiles,
    /// `O_DSYNC` append bandwidth with 256 KiB writes, MiB/s.
    pub dsync_append_mib_s: f64,
    /// The same bandwidth as 1 KiB records per second (the physical bound
    /// of a 1 KiB deposit whose only cost were its bytes reaching disk).
    pub dsync_append_1k_records_per_s: f64,
    /// Seconds spent in each of the two probes.
    pub seconds_each: f64,
}

/// Runs both probes in `dir` for `each` apiece (blocking; run off the
/// async runtime).
///
/// # Errors
/// I/O errors.
pub fn probe(dir: &Path, each: Duration) -> anyhow::Result<DiskProbe> {
    // fdatasync rate.
    let path = dir.join("fsync-probe");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let block = vec![0x5au8; 4096];
    let mut latencies = Vec::new();
    let start = Instant::now();
    let mut offset = 0u64;
    while start.elapsed() < each {
        let t = Instant::now();
        file.write_all_at(&block, offset)?;
        file.sync_data()?;
        latencies.push(t.elapsed());
        offset += block.len() as u64;
    }
    let fsync_secs = start.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(&path)?;

    // O_DSYNC append bandwidth.
    let path = dir.join("dsync-probe");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .custom_flags(libc::O_DSYNC)
        .open(&path)?;
    let block = vec![0xa5u8; 256 * 1024];
    let mut bytes = 0u64;
    let start = Instant::now();
    while start.elapsed() < each {
        file.write_all(&block)?;
        bytes += block.len() as u64;
    }
    let dsync_secs = start.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(&path)?;

    let mib_s = bytes as f64 / dsync_secs / (1024.0 * 1024.0);
    Ok(DiskProbe {
        fsync_per_s: latencies.len() as f64 / fsync_secs,
        fsync_ms: Percentiles::of_durations(&mut latencies),
        dsync_append_mib_s: mib_s,
        dsync_append_1k_records_per_s: bytes as f64 / dsync_secs / 1024.0,
        seconds_each: each.as_secs_f64(),
    })
}
