//! `stratum-mcp migrate-store`: copies a whole state from one store into another, empty one
//! (a machine's SQLite file into the team's PostgreSQL, say), then proves the copy whole: the
//! target, read back, has as many rows in every table as the source, and the same SHA-256 over
//! all of them.

use schemars::JsonSchema;
use serde::Serialize;

use super::SchemaVersion;
use crate::store::{Counts, Store, StoreError};

/// What a copy moved, and whether the target, read back, matched.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct MigrateReport {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    /// The source, without its password.
    pub from: String,
    /// The target, without its password.
    pub to: String,
    /// Rows read from the source, by table.
    pub source: TableCounts,
    /// Rows read back from the target after the copy, by table.
    pub target: TableCounts,
    /// SHA-256 of every row of the source, in order.
    pub source_checksum: String,
    /// SHA-256 of every row of the target, read back after the copy.
    pub target_checksum: String,
    /// Counts and checksums agree.
    pub verified: bool,
}

/// Rows by table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TableCounts {
    pub plans: usize,
    pub flows: usize,
    pub steps: usize,
    /// The audit records.
    pub events: usize,
    pub checkpoints: usize,
    pub cache: usize,
    /// The diffs of fan-out tasks.
    pub diffs: usize,
}

impl From<Counts> for TableCounts {
    fn from(counts: Counts) -> TableCounts {
        TableCounts {
            plans: counts.plans,
            flows: counts.flows,
            steps: counts.steps,
            events: counts.events,
            checkpoints: counts.checkpoints,
            cache: counts.cache,
            diffs: counts.diffs,
        }
    }
}

/// Copies every row of `source` into `target` (which must be empty) in one transaction of the
/// target, then reads the target back and compares.
pub fn migrate(
    source: &dyn Store,
    from: String,
    target: &dyn Store,
    to: String,
) -> Result<MigrateReport, StoreError> {
    let dump = source.export()?;
    target.import(&dump)?;
    let copied = target.export()?;
    let (source_checksum, target_checksum) = (dump.checksum(), copied.checksum());
    Ok(MigrateReport {
        schema_version: SchemaVersion,
        from,
        to,
        source: dump.counts().into(),
        target: copied.counts().into(),
        verified: dump.counts() == copied.counts() && source_checksum == target_checksum,
        source_checksum,
        target_checksum,
    })
}
