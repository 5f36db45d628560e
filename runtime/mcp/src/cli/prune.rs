//! `stratum-mcp prune`: deletes finished flows from the store. Finished flows are kept by
//! default so that `stratum_audit` and `query flow` work after the end; an operator removes
//! them when they are old enough. A running flow is never removed, nor any flow of a tree
//! (a flow and its sub-flows) in which one still runs.

use schemars::JsonSchema;
use serde::Serialize;

use super::SchemaVersion;
use crate::store::{Store, StoreError};

/// What a prune removed.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PruneReport {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    /// The flows deleted, sub-flows included.
    pub removed_flows: Vec<String>,
    /// Stored plans no remaining flow ran on, deleted with them.
    pub removed_plans: usize,
    /// The cut-off: flows that finished before it were removed (milliseconds since the Unix
    /// epoch).
    pub finished_before_ms: u64,
}

/// Deletes the flows that finished more than `older_than_ms` before `now_ms`.
pub fn prune(
    store: &dyn Store,
    now_ms: u64,
    older_than_ms: u64,
) -> Result<PruneReport, StoreError> {
    let finished_before_ms = now_ms.saturating_sub(older_than_ms);
    let pruned = store.prune(finished_before_ms)?;
    Ok(PruneReport {
        schema_version: SchemaVersion,
        removed_flows: pruned.flows.iter().map(ToString::to_string).collect(),
        removed_plans: pruned.plans,
        finished_before_ms,
    })
}

/// Reads a duration such as `30d`, `12h`, `90m`, `45s`, `500ms` or `1w` (a bare number is
/// seconds) as milliseconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| {
        format!("`{text}` is not a duration; write a whole number and a unit, like `7d` or `12h`")
    })?;
    let unit_ms: u64 = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`; use ms, s, m, h, d or w"
            ));
        }
    };
    number
        .checked_mul(unit_ms)
        .ok_or_else(|| format!("`{text}` is longer than this program can count"))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(parse_duration("7d"), Ok(604_800_000));
        assert_eq!(parse_duration("90m"), Ok(5_400_000));
        assert_eq!(parse_duration("45"), Ok(45_000));
        assert_eq!(parse_duration("0s"), Ok(0));
        assert!(parse_duration("3 fortnights").is_err_and(|m| m.contains("unknown unit")));
        assert!(parse_duration("-1d").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
    }
}
