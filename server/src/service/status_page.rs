//! The operator page, `/status`: one server-rendered HTML document with
//! inline CSS and an inline SVG chart, no script and no external asset (the
//! endpoint's content security policy forbids both).
//!
//! It shows the declaration being served (the seven constants, revision,
//! signing key), occupancy against capacity, the verdicts of the last hour
//! per minute, the horizons due in the next 24 h, and the build. Every
//! number is a count over the whole carrier: nothing per principal, per
//! `rkid` or per deposit (§5a.1, §10).
//!
//! The page's own state is the verdict [`History`]: the last hour per
//! minute, kept here (the metrics count answers; this module charts them).

use crate::admin::counts::Counts;
pub use crate::defaults::http::HISTORY_MINUTES;
use rltp_engine::Limits;
use rltp_proofs::Ms;
use rltp_proofs::constants::CONSTANT_NAMES;
use rltp_wire::Op;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

/// The declaration as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclarationView {
    /// Its `revision`.
    pub revision: u64,
    /// The signing key (`issuer`), a `did:key`.
    pub issuer: String,
    /// Its `issuedAt`.
    pub issued_at: String,
    /// The seven constants, `(name, declared lexeme)`, in §4.4 order.
    pub constants: Vec<(String, String)>,
}

/// Everything the page shows.
#[derive(Debug, Clone)]
pub struct StatusData {
    /// The carrier identifier `C`.
    pub carrier: String,
    /// The build version.
    pub version: &'static str,
    /// The declaration served, if it could be read.
    pub declaration: Option<DeclarationView>,
    /// Counts read from one store snapshot.
    pub counts: Counts,
    /// The private limits in force.
    pub limits: Limits,
    /// The verdict history.
    pub history: VerdictHistory,
    /// The carrier is draining (shutting down).
    pub draining: bool,
    /// The bindings served (`PROTOCOL.md` §5, §5b), for people:
    /// `bindings: quic, tcp`. No address: the page names none (§5a.1).
    pub listeners: String,
}

/// Escapes text for HTML element content and quoted attribute values
/// (`&`, `<`, `>`, `"`, `'`; the `html-escape` crate).
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    html_escape::encode_quoted_attribute(text)
}

/// A byte count for people (binary units, one decimal).
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 / whole as f64 * 100.0).min(100.0)
    }
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:20px;color:#1b1f24;background:#fafbfc}\
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:16px 0 6px}\
.sub{color:#57606a;margin:0 0 12px}table{border-collapse:collapse;background:#fff}\
td,th{border:1px solid #d0d7de;padding:3px 10px;text-align:left}th{background:#f3f4f6;font-weight:600}\
td.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px}\
.bar{width:100%;height:10px;background:#e5e7eb;border-radius:3px;display:inline-block;vertical-align:middle}\
.bar span{display:block;height:100%;background:#2563eb;border-radius:3px}\
.drain{color:#b91c1c;font-weight:600}.grid{display:flex;gap:24px;flex-wrap:wrap}";

/// Series colours (cycled).
const COLOURS: [&str; 10] = [
    "#2563eb", "#16a34a", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
    "#475569", "#ea580c",
];

/// Renders the page.
pub fn render(data: &StatusData) -> String {
    let mut html = String::with_capacity(16 << 10);
    let c = &data.counts;
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>rltp-carrier status</title><style>{STYLE}</style></head><body>\
         <h1>rltp-carrier {version}</h1><p class=\"sub\">carrier <code>{carrier}</code> · \
         <span id=\"listeners\">{listeners}</span> · page generated {at}{drain}</p>",
        version = escape(data.version),
        carrier = escape(&data.carrier),
        listeners = escape(&data.listeners),
        at = rltp_proofs::declaration::rfc3339_utc(c.now),
        drain = if data.draining {
            " · <span class=\"drain\">draining</span>"
        } else {
            ""
        },
    );
    html.push_str("<div class=\"grid\"><section>");
    declaration(&mut html, data.declaration.as_ref());
    html.push_str("</section><section>");
    occupancy(&mut html, data);
    horizons(&mut html, c);
    html.push_str("</section></div>");
    chart(&mut html, &data.history);
    let _ = write!(
        html,
        "<p class=\"sub\">build <span id=\"version\">{}</span> · counts only: nothing on this \
         page is per principal or per rkid (§5a.1)</p></body></html>",
        escape(data.version)
    );
    html
}

fn declaration(html: &mut String, view: Option<&DeclarationView>) {
    html.push_str("<h2>Declaration</h2>");
    let Some(view) = view else {
        html.push_str("<p class=\"drain\">no declaration is being served</p>");
        return;
    };
    let _ = write!(
        html,
        "<table id=\"declaration\"><tr><th>revision</th><td id=\"revision\" class=\"n\">{}</td></tr>\
         <tr><th>signing key</th><td><code id=\"issuer\">{}</code></td></tr>\
         <tr><th>issued at</th><td>{}</td></tr>",
        view.revision,
        escape(&view.issuer),
        escape(&view.issued_at)
    );
    for (name, lexeme) in &view.constants {
        let _ = write!(
            html,
            "<tr><th>{name}</th><td class=\"constant\" data-name=\"{name}\"><code>{lexeme}</code></td></tr>",
            name = escape(name),
            lexeme = escape(lexeme)
        );
    }
    html.push_str("</table>");
}

fn occupancy(html: &mut String, data: &StatusData) {
    let c = &data.counts;
    let o = &c.occupancy;
    let capacity = data.limits.capacity_bytes;
    let used = c.used_bytes();
    html.push_str("<h2>Occupancy</h2><table id=\"occupancy\">");
    if let Some(used) = used {
        let _ = write!(
            html,
            "<tr><th>used / capacity</th><td class=\"n\">{} of {} ({:.1} %)</td></tr>\
             <tr><td colspan=\"2\"><span class=\"bar\"><span style=\"width:{:.1}%\"></span></span></td></tr>",
            bytes(used),
            bytes(capacity),
            percent(used, capacity),
            percent(used, capacity),
        );
    }
    let max_tombstones = c.declaration.as_ref().map_or_else(String::new, |(_, k)| {
        format!(" of {}", k.max_binding_tombstones())
    });
    let _ = write!(
        html,
        "<tr><th>bindings live</th><td class=\"n\">{}</td></tr>\
         <tr><th>bindings closing</th><td class=\"n\">{}</td></tr>\
         <tr><th>bindings held / max</th><td class=\"n\">{} of {}</td></tr>\
         <tr><th>tombstones</th><td class=\"n\">{}{}</td></tr>\
         <tr><th>deposits held</th><td class=\"n\">{}</td></tr>\
         <tr><th>envelope bytes held</th><td class=\"n\">{}</td></tr>\
         <tr><th>elastic bytes (above floors)</th><td class=\"n\">{}</td></tr></table>",
        c.phases.live,
        c.phases.closing,
        o.bindings,
        data.limits.max_bindings,
        o.tombstones,
        max_tombstones,
        o.deposits,
        bytes(o.total_bytes),
        bytes(o.elastic_bytes),
    );
}

fn chart(html: &mut String, history: &VerdictHistory) {
    const W: f64 = 1100.0;
    const H: f64 = 220.0;
    const LEFT: f64 = 48.0;
    const BOTTOM: f64 = 26.0;
    const TOP: f64 = 12.0;
    let totals: Vec<u64> = (0..history.series.len())
        .map(|s| {
            history
                .minutes
                .iter()
                .map(|row| row.get(s).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    let shown: Vec<usize> = (0..history.series.len())
        .filter(|s| totals[*s] > 0)
        .collect();
    let peak = history
        .minutes
        .iter()
        .flat_map(|row| shown.iter().map(move |s| row.get(*s).copied().unwrap_or(0)))
        .max()
        .unwrap_or(0)
        .max(1);
    let x =
        |minute: usize| LEFT + (W - LEFT - 12.0) * minute as f64 / (HISTORY_MINUTES as f64 - 1.0);
    let y = |count: u64| TOP + (H - TOP - BOTTOM) * (1.0 - count as f64 / peak as f64);
    let points_total: usize = shown
        .iter()
        .map(|s| {
            history
                .minutes
                .iter()
                .filter(|row| row.get(*s).copied().unwrap_or(0) > 0)
                .count()
        })
        .sum();
    let _ = write!(
        html,
        "<h2>Verdicts per minute, last hour</h2>\
         <svg id=\"verdict-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" data-points=\"{points_total}\" data-series=\"{}\" role=\"img\" \
         aria-label=\"verdicts per minute over the last hour\" style=\"background:#fff;border:1px solid #d0d7de\">",
        shown.len()
    );
    // Axes, grid and labels.
    let mut ticks: Vec<u64> = (0..=4u64).map(|i| peak * i / 4).collect();
    ticks.dedup();
    for value in ticks {
        let gy = y(value);
        let _ = write!(
            html,
            "<line x1=\"{LEFT}\" y1=\"{gy:.1}\" x2=\"{:.1}\" y2=\"{gy:.1}\" stroke=\"#eef0f2\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"#57606a\">{value}</text>",
            W - 12.0,
            LEFT - 6.0,
            gy + 4.0
        );
    }
    for (minute, label) in [
        (0usize, "-60 min"),
        (30, "-30 min"),
        (HISTORY_MINUTES - 1, "now"),
    ] {
        let _ = write!(
            html,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#57606a\">{label}</text>",
            x(minute),
            H - 8.0
        );
    }
    let _ = write!(
        html,
        "<line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#8c959f\"/>",
        H - BOTTOM,
        W - 12.0,
        H - BOTTOM
    );
    if shown.is_empty() {
        let _ = write!(
            html,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\" fill=\"#57606a\">no answers in the last hour</text>",
            W / 2.0,
            H / 2.0
        );
    }
    chart_lines(html, history, &shown, x, y);
    chart_legend(html, history, &shown, &totals);
}

/// The chart's body: for each shown series, its polyline over the hour and
/// a dot (titled with the count) at each minute that had answers.
fn chart_lines(
    html: &mut String,
    history: &VerdictHistory,
    shown: &[usize],
    x: impl Fn(usize) -> f64,
    y: impl Fn(u64) -> f64,
) {
    for (colour_index, &s) in shown.iter().enumerate() {
        let colour = COLOURS[colour_index % COLOURS.len()];
        let mut line = String::new();
        let mut dots = String::new();
        for (minute, row) in history.minutes.iter().enumerate() {
            let count = row.get(s).copied().unwrap_or(0);
            let _ = write!(line, "{:.1},{:.1} ", x(minute), y(count));
            if count > 0 {
                let _ = write!(
                    dots,
                    "<circle class=\"point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"><title>{count}</title></circle>",
                    x(minute),
                    y(count)
                );
            }
        }
        let _ = write!(
            html,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>{dots}",
            line.trim_end()
        );
    }
}

/// The chart's legend: one row per shown series, in its colour, with its
/// answers over the last hour.
fn chart_legend(html: &mut String, history: &VerdictHistory, shown: &[usize], totals: &[u64]) {
    html.push_str("</svg><table id=\"verdicts\"><tr><th></th><th>operation</th><th>verdict</th><th>answers, last hour</th></tr>");
    for (colour_index, &s) in shown.iter().enumerate() {
        let (op, verdict) = history.series[s];
        let _ = write!(
            html,
            "<tr><td style=\"background:{}\"></td><td>{}</td><td><code>{}</code></td><td class=\"n\">{}</td></tr>",
            COLOURS[colour_index % COLOURS.len()],
            op.as_str(),
            escape(verdict),
            totals[s]
        );
    }
    html.push_str("</table>");
}

fn horizons(html: &mut String, c: &Counts) {
    let h = &c.horizons;
    let bound = if h.truncated { "≥ " } else { "" };
    let _ = write!(
        html,
        "<h2>Due in the next 24 h</h2><table id=\"horizons\">\
         <tr><th>wind-ups beginning (orphan horizon)</th><td class=\"n\">{bound}{}</td></tr>\
         <tr><th>wind-up deadlines (releases)</th><td class=\"n\">{bound}{}</td></tr>\
         <tr><th>deposit give-ups</th><td class=\"n\">{bound}{}</td></tr>\
         <tr><th>tombstone evictions</th><td class=\"n\">{bound}{}</td></tr></table>",
        h.wind_ups, h.releases, h.give_ups, h.evictions
    );
}

/// The constants of a declaration document in §4.4 order, as declared
/// lexemes (for [`DeclarationView`]).
pub fn constant_rows(
    constants: &rltp_proofs::constants::CarrierConstants,
) -> Vec<(String, String)> {
    CONSTANT_NAMES
        .iter()
        .filter_map(|name| {
            constants
                .get(name)
                .map(|c| ((*name).to_owned(), c.lexeme().to_owned()))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The verdict history the page charts
// ---------------------------------------------------------------------------

/// Per-minute verdict counts of the last [`HISTORY_MINUTES`] minutes
/// (fixed size: one slot per minute, one count per series).
#[derive(Debug)]
struct MinuteRing {
    slots: Vec<(u64, Vec<u64>)>,
}

impl MinuteRing {
    fn new(series: usize) -> MinuteRing {
        MinuteRing {
            slots: vec![(u64::MAX, vec![0; series]); HISTORY_MINUTES],
        }
    }

    fn add(&mut self, minute: u64, series: usize) {
        let Some(slot) = self
            .slots
            .get_mut((minute % HISTORY_MINUTES as u64) as usize)
        else {
            return;
        };
        if slot.0 != minute {
            slot.0 = minute;
            slot.1.iter_mut().for_each(|c| *c = 0);
        }
        if let Some(count) = slot.1.get_mut(series) {
            *count += 1;
        }
    }

    /// Counts per minute for the minutes ending with `now_minute`, oldest
    /// first (`HISTORY_MINUTES` rows, zeros where nothing was counted).
    fn window(&self, now_minute: u64, series: usize) -> Vec<Vec<u64>> {
        (0..HISTORY_MINUTES as u64)
            .rev()
            .map(|ago| {
                now_minute
                    .checked_sub(ago)
                    .and_then(|minute| {
                        self.slots
                            .get((minute % HISTORY_MINUTES as u64) as usize)
                            .filter(|slot| slot.0 == minute)
                    })
                    .map_or_else(|| vec![0; series], |slot| slot.1.clone())
            })
            .collect()
    }
}

/// The verdict history the status page charts (a copy of the window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictHistory {
    /// The last minute of the window (ms since the epoch / 60 000).
    pub last_minute: u64,
    /// `(operation, verdict)` of each series.
    pub series: Vec<(Op, &'static str)>,
    /// `HISTORY_MINUTES` rows, oldest first; each row one count per series.
    pub minutes: Vec<Vec<u64>>,
}

/// The last hour of verdicts per minute, one count per series of the
/// metrics' label model ([`crate::service::metrics::series`]): fixed memory,
/// allocated at start.
#[derive(Debug)]
pub struct History {
    series: Vec<(Op, &'static str)>,
    ring: Mutex<MinuteRing>,
}

impl History {
    /// An empty history over `series`.
    pub fn new(series: Vec<(Op, &'static str)>) -> History {
        History {
            ring: Mutex::new(MinuteRing::new(series.len())),
            series,
        }
    }

    /// Counts one answer of series `index` at `now` (ms).
    pub fn add(&self, index: usize, now: Ms) {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(now / 60_000, index);
    }

    /// The last hour of counts per minute, ending at `now` (ms).
    pub fn window(&self, now: Ms) -> VerdictHistory {
        let last_minute = now / 60_000;
        let minutes = self
            .ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .window(last_minute, self.series.len());
        VerdictHistory {
            last_minute,
            series: self.series.clone(),
            minutes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_units() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
        );
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(4 << 30), "4.0 GiB");
        assert_eq!(percent(1, 0), 0.0);
    }
}
