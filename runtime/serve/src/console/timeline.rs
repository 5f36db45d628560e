//! A flow's audit as a timeline (SVG): one row per trace record, oldest first; a step's or a
//! gate's row is a bar from its dispatch to its result (the record's `duration_ms` before its
//! `at_ms`), a skip or a policy decision a tick. The horizontal axis runs from the flow's
//! start to its last change.
//!
//! Invariants as the graph's: escaped text, classes only, the same input the same SVG.

use std::fmt::Write;

use super::{shown_name, shown_text};
use crate::http::pages::escape;
use crate::response::Record;

const WIDTH: u64 = 760;
const LABEL: u64 = 190;
const ROW: u64 = 22;
const TOP: u64 = 26;
/// Rows drawn at most (the newest); the page says how many were left out.
pub const MAX_ROWS: usize = 400;

/// The SVG of `records` over the span `[start_ms, end_ms]`.
pub fn draw(records: &[&Record], start_ms: u64, end_ms: u64) -> String {
    let shown = records.len().min(MAX_ROWS);
    let skipped = records.len() - shown;
    let records = records.get(skipped..).unwrap_or_default();
    let span = end_ms.saturating_sub(start_ms).max(1);
    let plot = WIDTH - LABEL - 10;
    let x_of = |at: u64| LABEL + at.saturating_sub(start_ms).min(span) * plot / span;
    let rows = u64::try_from(records.len()).unwrap_or(u64::MAX);
    let height = TOP + rows.saturating_mul(ROW) + 8;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-labelledby=\"timeline-title\">\
         <title id=\"timeline-title\">The flow's trace over time: one bar per step, from its dispatch to its result</title>\
         <text class=\"axis\" x=\"{LABEL}\" y=\"14\">0 s</text>\
         <text class=\"axis\" x=\"{}\" y=\"14\" text-anchor=\"end\">{}</text>",
        WIDTH - 10,
        escape(&seconds(span))
    );
    for (row, record) in (0u64..).zip(records) {
        let y = TOP + row * ROW;
        let (class, label, from, to, detail) = describe(record);
        let x1 = x_of(from);
        let x2 = x_of(to).max(x1 + 2);
        let _ = write!(
            svg,
            "<g class=\"bar {class}\"><title>{label}: {detail}</title>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{label}</text>\
             <rect x=\"{x1}\" y=\"{y}\" width=\"{}\" height=\"{}\" rx=\"3\"/></g>",
            LABEL - 8,
            y + 13,
            x2 - x1,
            ROW - 6,
            label = shown_name(label),
            detail = shown_text(&detail),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A record's class, label, start, end and what its tooltip says.
fn describe(record: &Record) -> (&'static str, &str, u64, u64, String) {
    match record {
        Record::Step(step) => {
            let from = step.at_ms.saturating_sub(step.duration_ms);
            let (class, how) = if step.violations.is_empty() {
                ("step", "done")
            } else {
                ("failed", "failed")
            };
            let detail = format!(
                "{how} after {} ({} attempt{}{})",
                seconds(step.duration_ms),
                step.attempts,
                if step.attempts == 1 { "" } else { "s" },
                if step.cache_hit {
                    ", from the cache"
                } else {
                    ""
                }
            );
            (class, &step.step_id, from, step.at_ms, detail)
        }
        Record::Gate(gate) => (
            "gate",
            &gate.step_id,
            gate.at_ms.saturating_sub(gate.duration_ms),
            gate.at_ms,
            format!(
                "{} by {} after {}",
                gate.outcome,
                gate.actor.as_deref().unwrap_or(&gate.resolved_by),
                seconds(gate.duration_ms)
            ),
        ),
        Record::Skip(skip) => (
            "skip",
            &skip.step_id,
            skip.at_ms,
            skip.at_ms,
            format!("skipped: {}", skip.skip_reason),
        ),
        Record::Policy(policy) => (
            "policy",
            &policy.step_id,
            policy.at_ms,
            policy.at_ms,
            format!(
                "{} by policy {}",
                policy.resolved_outcome, policy.effective_policy
            ),
        ),
        Record::Approval(approval) => (
            "gate",
            &approval.step_id,
            approval.at_ms,
            approval.at_ms,
            format!(
                "approved by {} ({} of {})",
                approval.identity, approval.approvals, approval.min_approvals
            ),
        ),
    }
}

/// Milliseconds as a person reads them: `850 ms`, `12.4 s`, `3 min 5 s`, `2 h 3 min`.
pub fn seconds(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{}.{} s", ms / 1000, ms % 1000 / 100),
        60_000..3_600_000 => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{} h {} min", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(seconds(850), "850 ms");
        assert_eq!(seconds(12_480), "12.4 s");
        assert_eq!(seconds(185_000), "3 min 5 s");
        assert_eq!(seconds(7_380_000), "2 h 3 min");
    }
}
