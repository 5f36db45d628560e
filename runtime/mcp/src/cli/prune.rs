//! `stratum-mcp prune`: deletes finished flows from the store. Finished flows are kept by
//! default so that `stratum_audit` and `query flow` work after the end; an operator removes
//! them when they are old enough. A running flow is never removed, nor any flow of a tree
//! (a flow and its sub-flows) in which one still runs. What the pruned flows left on disk goes
//! with them: their judge turn directories and their tasks' git worktrees under the server's
//! home.

use std::path::PathBuf;

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
    /// The removed flows' judge turn directories (`$STRATUM_HOME/judge/<flow>`) removed.
    pub removed_judge_dirs: usize,
    /// The removed flows' task worktrees (`$STRATUM_HOME/worktrees/<flow>/<step>/<attempt>/<task>`)
    /// removed, their repositories' records of them pruned.
    pub removed_worktrees: usize,
    /// What could not be removed from disk, and why (the flows are gone from the store all
    /// the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// The cut-off: flows that finished before it were removed (milliseconds since the Unix
    /// epoch).
    pub finished_before_ms: u64,
}

/// Where the server keeps what flows leave on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dirs {
    /// Task worktrees, `<worktrees>/<flow>/…`.
    pub worktrees: PathBuf,
    /// Judge turns, `<judge>/<flow>/…`.
    pub judge: PathBuf,
}

impl Dirs {
    /// The directories a server uses by default: `$STRATUM_HOME/worktrees` and, beside it,
    /// `judge` (where `stratum_judge` puts its turns).
    pub fn of_home() -> Dirs {
        let worktrees = stratum_driver::default_worktrees();
        let judge = worktrees
            .parent()
            .map(|home| home.join("judge"))
            .unwrap_or_else(|| std::env::temp_dir().join("judge"));
        Dirs { worktrees, judge }
    }
}

/// Deletes the flows that finished more than `older_than_ms` before `now_ms`, and, with `dirs`,
/// what they left on disk there.
pub fn prune(
    store: &dyn Store,
    now_ms: u64,
    older_than_ms: u64,
    dirs: Option<&Dirs>,
) -> Result<PruneReport, StoreError> {
    let finished_before_ms = now_ms.saturating_sub(older_than_ms);
    let pruned = store.prune(finished_before_ms)?;
    let mut report = PruneReport {
        schema_version: SchemaVersion,
        removed_flows: pruned.flows.iter().map(ToString::to_string).collect(),
        removed_plans: pruned.plans,
        removed_judge_dirs: 0,
        removed_worktrees: 0,
        problems: Vec::new(),
        finished_before_ms,
    };
    if let Some(dirs) = dirs {
        let git = stratum_driver::git::Git::default();
        for flow in &pruned.flows {
            match stratum_driver::git::remove_flow_dir(&dirs.judge, flow.as_str()) {
                Ok(removed) => report.removed_judge_dirs += usize::from(removed),
                Err(error) => report
                    .problems
                    .push(format!("the judge turns of flow {flow}: {error}")),
            }
            match git.remove_flow_worktrees(&dirs.worktrees, flow.as_str()) {
                Ok(removed) => report.removed_worktrees += removed,
                Err(error) => report
                    .problems
                    .push(format!("the task worktrees of flow {flow}: {error}")),
            }
        }
    }
    Ok(report)
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
