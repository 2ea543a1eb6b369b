//! Latency percentiles (nearest rank) and medians.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Latency percentiles, milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    /// Samples.
    pub n: u64,
    /// Median, ms.
    pub p50: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// 99.9th percentile, ms.
    pub p999: f64,
    /// Largest sample, ms.
    pub max: f64,
}

impl Percentiles {
    /// Percentiles of samples in microseconds (sorted in place).
    pub fn of_micros(samples: &mut [u32]) -> Percentiles {
        samples.sort_unstable();
        let at = |q: f64| -> f64 {
            if samples.is_empty() {
                return 0.0;
            }
            let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples.get(rank - 1).copied().unwrap_or(0) as f64 / 1000.0
        };
        Percentiles {
            n: samples.len() as u64,
            p50: at(0.50),
            p99: at(0.99),
            p999: at(0.999),
            max: samples.last().copied().unwrap_or(0) as f64 / 1000.0,
        }
    }

    /// Percentiles of durations.
    pub fn of_durations(samples: &mut [Duration]) -> Percentiles {
        let mut micros: Vec<u32> = samples.iter().map(|d| micros(*d)).collect();
        Percentiles::of_micros(&mut micros)
    }
}

/// A duration in whole microseconds, saturating.
pub fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The median of `values` (mean of the middle two for an even count; 0
/// for none).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v.get(n / 2).copied().unwrap_or(0.0),
        n => {
            (v.get(n / 2 - 1).copied().unwrap_or(0.0) + v.get(n / 2).copied().unwrap_or(0.0)) / 2.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<u32> = (1..=1000).rev().map(|v| v * 1000).collect();
        let p = Percentiles::of_micros(&mut samples);
        assert_eq!(p.n, 1000);
        assert_eq!(p.p50, 500.0);
        assert_eq!(p.p99, 990.0);
        assert_eq!(p.p999, 999.0);
        assert_eq!(p.max, 1000.0);
        assert_eq!(Percentiles::of_micros(&mut []), Percentiles::default());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
