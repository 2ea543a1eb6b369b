//! What `/proc` says about a process: resident memory, CPU time, bytes
//! written to the block device; and the size of a directory on disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

/// A `kB` line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 if unknown).
fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// User + system CPU seconds in a `stat` file (of a process: all its
/// threads; of a task: that thread).
fn stat_cpu_seconds(path: &str) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name; utime and stime are
    // fields 14 and 15 of the whole line, i.e. 12 and 13 after ") ".
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

/// User + system CPU seconds of `pid` so far (all its threads).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&format!("/proc/{pid}/stat"))
}

/// CPU seconds of `pid` so far per thread-name group: thread names with
/// their trailing digits and dashes dropped (`tokio-runtime-w`,
/// `rltp-writer`, …), summed.
pub fn thread_cpu_seconds(pid: u32) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let group = name
            .trim()
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '-');
        if let Some(cpu) = stat_cpu_seconds(&dir.join("stat").to_string_lossy()) {
            *out.entry(group.to_owned()).or_insert(0.0) += cpu;
        }
    }
    out
}

/// CPU seconds the whole machine has been busy (all CPUs: user, nice,
/// system, irq, softirq, steal; `/proc/stat`).
pub fn system_busy_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    (at(0) + at(1) + at(2) + at(5) + at(6) + at(7)) / clock_ticks()
}

/// Bytes `pid` caused to be written to storage (`write_bytes` of
/// `/proc/<pid>/io`).
pub fn write_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A point-in-time sample of a process.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// CPU seconds so far.
    pub cpu: f64,
    /// Bytes written to storage so far.
    pub written: u64,
    /// CPU seconds so far per thread group.
    pub threads: BTreeMap<String, f64>,
}

impl Sample {
    /// Samples `pid` (zeros for what cannot be read).
    pub fn of(pid: u32) -> Sample {
        Sample {
            cpu: cpu_seconds(pid).unwrap_or(0.0),
            written: write_bytes(pid).unwrap_or(0),
            threads: thread_cpu_seconds(pid),
        }
    }

    /// CPU seconds per thread group between `earlier` and this sample
    /// (threads that ended in between are not counted).
    pub fn threads_since(&self, earlier: &Sample) -> BTreeMap<String, f64> {
        self.threads
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v - earlier.threads.get(k).copied().unwrap_or(0.0),
                )
            })
            .filter(|(_, v)| *v > 0.0)
            .collect()
    }
}

/// Allocated bytes (blocks) and apparent bytes of every file under `dir`.
pub fn dir_size(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    let mut allocated = 0;
    let mut apparent = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                allocated += meta.blocks() * 512;
                apparent += meta.len();
            }
        }
    }
    (allocated, apparent)
}

/// The 1/5/15-minute load averages.
pub fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text.split_whitespace().map(|v| v.parse().unwrap_or(0.0));
    [
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
    ]
}

/// CPU model name from `/proc/cpuinfo`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default()
}

/// Total memory, KiB.
pub fn mem_total_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
