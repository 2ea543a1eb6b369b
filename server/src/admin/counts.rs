//! Counts only (§5a.1): what the operator page, `/metrics` and `admin
//! stats` say about the store. Every value here is a number summed over
//! all queues; nothing names or selects an `rkid`, a principal or a
//! deposit.

use rltp_engine::capacity;
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::declaration::parse_declaration;
use rltp_storage::{BindingPhases, Due, Ms, Occupancy, ReadTxn, StoreResult};

pub use crate::defaults::horizons::{
    SCAN_LIMIT as HORIZON_SCAN_LIMIT, WINDOW_MS as HORIZON_WINDOW_MS,
};

/// Transitions due within the window, read from the due index (§5a.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Horizons {
    /// Live bindings reaching their orphan horizon (wind-ups beginning).
    pub wind_ups: u64,
    /// Closing bindings reaching their wind-up deadline (releases).
    pub releases: u64,
    /// Deposits reaching their own give-up horizon.
    pub give_ups: u64,
    /// Tombstones the releases will push over `max-binding-tombstones`
    /// (each evicts the longest-released one).
    pub evictions: u64,
    /// The scan stopped at [`HORIZON_SCAN_LIMIT`]: counts are lower bounds.
    pub truncated: bool,
}

/// Everything countable about a store at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    /// The instant the counts describe (ms since the Unix epoch).
    pub now: Ms,
    /// The store's counters.
    pub occupancy: Occupancy,
    /// Held bindings by phase.
    pub phases: BindingPhases,
    /// The stored declaration's revision and constants, if any.
    pub declaration: Option<(u64, CarrierConstants)>,
    /// What falls due in the next [`HORIZON_WINDOW_MS`].
    pub horizons: Horizons,
    /// Deposits quarantined (found damaged and given up), a count.
    pub quarantined: u64,
}

impl Counts {
    /// Reads the counts from `read` as of `now` (ms). Costs O(bindings)
    /// plus at most [`HORIZON_SCAN_LIMIT`] due entries.
    ///
    /// # Errors
    /// [`rltp_storage::StoreError`] from the reads.
    pub fn read<R: ReadTxn + ?Sized>(read: &R, now: Ms) -> StoreResult<Counts> {
        let occupancy = read.occupancy()?;
        let declaration = read.declaration()?.and_then(|record| {
            let parsed = parse_declaration(&record.document).ok()?;
            let constants = CarrierConstants::from_declared(parsed.constants()).ok()?;
            Some((record.revision, constants))
        });
        let due = read.due(now.saturating_add(HORIZON_WINDOW_MS), HORIZON_SCAN_LIMIT)?;
        let mut horizons = Horizons {
            truncated: due.len() >= HORIZON_SCAN_LIMIT,
            ..Horizons::default()
        };
        for (_, entry) in &due {
            match entry {
                Due::OrphanExpiry(_) => horizons.wind_ups += 1,
                Due::Deadline(_) => horizons.releases += 1,
                Due::GiveUp(..) => horizons.give_ups += 1,
                Due::Forget(..) => {}
            }
        }
        if let Some((_, c)) = &declaration {
            horizons.evictions = occupancy
                .tombstones
                .saturating_add(horizons.releases)
                .saturating_sub(c.max_binding_tombstones());
        }
        Ok(Counts {
            now,
            occupancy,
            phases: read.binding_phases()?,
            declaration,
            horizons,
            quarantined: read.quarantined()?,
        })
    }

    /// Bytes judged by s6 and r4: held bindings × `queue-floor` + elastic
    /// bytes (needs the declaration's `queue-floor`).
    pub fn used_bytes(&self) -> Option<u64> {
        self.declaration
            .as_ref()
            .map(|(_, c)| capacity::usage(&self.occupancy, c.queue_floor_bytes()))
    }

    /// The store-growth lines of `size` at `now` (the `admin store` output
    /// and the control socket's `store` answer): `name value`, `unknown`
    /// where the store cannot tell, `none` for an oldest deposit when none
    /// is held. `dead-bytes` is `log-bytes − live-bytes`: what compaction
    /// and reclaiming can give back (with record headers, other records
    /// and preallocated space).
    pub fn size_lines(size: &rltp_storage::StoreSize, now: Ms) -> String {
        let known = |v: Option<u64>| v.map_or_else(|| "unknown".to_owned(), |v| v.to_string());
        let dead = size
            .log_bytes
            .zip(size.live_bytes)
            .map(|(log, live)| log.saturating_sub(live));
        let (age, admitted) = match size.oldest_deposit_at {
            Some(at) => (
                (now.saturating_sub(at) / 1000).to_string(),
                rltp_proofs::declaration::rfc3339_utc(at),
            ),
            None => ("none".to_owned(), "none".to_owned()),
        };
        let lines = [
            format!("at {}", rltp_proofs::declaration::rfc3339_utc(now)),
            format!("disk-bytes {}", known(size.disk_bytes)),
            format!("log-bytes {}", known(size.log_bytes)),
            format!("live-bytes {}", known(size.live_bytes)),
            format!("dead-bytes {}", known(dead)),
            format!("segments {}", known(size.segments)),
            format!("compactable-segments {}", known(size.compactable_segments)),
            format!("snapshot-bytes {}", known(size.snapshot_bytes)),
            format!("index-bytes {}", known(size.index_bytes)),
            format!("oldest-deposit-age-seconds {age}"),
            format!("oldest-deposit-admitted-at {admitted}"),
        ];
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }

    /// `name value` lines (the `admin stats` output and the control
    /// socket's `stats` answer).
    pub fn to_lines(&self) -> String {
        let o = &self.occupancy;
        let h = &self.horizons;
        let mut lines = vec![
            format!("at {}", rltp_proofs::declaration::rfc3339_utc(self.now)),
            format!(
                "declaration-revision {}",
                self.declaration
                    .as_ref()
                    .map_or_else(|| "none".to_owned(), |(r, _)| r.to_string())
            ),
            format!("bindings-live {}", self.phases.live),
            format!("bindings-closing {}", self.phases.closing),
            format!("tombstones {}", o.tombstones),
            format!("deposits {}", o.deposits),
            format!("deposit-bytes {}", o.total_bytes),
            format!("elastic-bytes {}", o.elastic_bytes),
            format!("quarantined-deposits {}", self.quarantined),
        ];
        if let Some(used) = self.used_bytes() {
            lines.push(format!("used-bytes {used}"));
        }
        if let Some((_, c)) = &self.declaration {
            lines.push(format!(
                "max-binding-tombstones {}",
                c.max_binding_tombstones()
            ));
        }
        let bound = if h.truncated { "at-least " } else { "" };
        lines.extend([
            format!("due-24h-wind-ups {bound}{}", h.wind_ups),
            format!("due-24h-releases {bound}{}", h.releases),
            format!("due-24h-give-ups {bound}{}", h.give_ups),
            format!("due-24h-evictions {bound}{}", h.evictions),
        ]);
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }
}
