//! Every row of a store as it is stored, for copying a whole state from one store to another
//! (`stratum-mcp migrate-store`) and proving the copy whole: the same rows, counted and
//! checksummed on both sides.
//!
//! Values stay the JSON text the store holds, byte for byte: a copy re-encodes nothing, so a
//! plan keeps its checksum and an output its exact numbers.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::StoreError;
use super::rows::{decode, to_i64};
use crate::state::FlowHeader;

/// The rows of a store, each table in the order of its primary key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Dump {
    pub plans: Vec<PlanRow>,
    /// In creation order.
    pub flows: Vec<FlowRow>,
    pub steps: Vec<StepRow>,
    pub events: Vec<EventRow>,
    pub checkpoints: Vec<CheckpointRow>,
    pub cache: Vec<CacheRow>,
    pub diffs: Vec<DiffRow>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanRow {
    pub checksum: String,
    pub json: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowRow {
    pub id: String,
    /// The flow's place in creation order.
    pub seq: i64,
    pub header: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepRow {
    pub flow: String,
    pub step: u32,
    pub state: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventRow {
    pub flow: String,
    pub seq: i64,
    pub round: u32,
    pub reverted: bool,
    pub body: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointRow {
    pub flow: String,
    pub label: String,
    /// The label's place in its flow's commit order (first commit of the label).
    pub position: i64,
    pub body: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CacheRow {
    pub key: String,
    pub value: String,
}

/// A fan-out task's diff (see [`super::DiffKey`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DiffRow {
    pub flow: String,
    pub step: String,
    pub attempt: u32,
    pub task: String,
    pub diff: String,
}

/// How many rows each table of a [`Dump`] has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub plans: usize,
    pub flows: usize,
    pub steps: usize,
    pub events: usize,
    pub checkpoints: usize,
    pub cache: usize,
    pub diffs: usize,
}

impl Dump {
    pub fn counts(&self) -> Counts {
        Counts {
            plans: self.plans.len(),
            flows: self.flows.len(),
            steps: self.steps.len(),
            events: self.events.len(),
            checkpoints: self.checkpoints.len(),
            cache: self.cache.len(),
            diffs: self.diffs.len(),
        }
    }

    /// Puts every table in the order of its primary key, by bytes (as SQLite's `BINARY`
    /// collation does), whatever order a database returned the rows in.
    pub fn sort(&mut self) {
        self.plans.sort_by(|a, b| a.checksum.cmp(&b.checksum));
        self.flows.sort_by_key(|row| row.seq);
        self.steps
            .sort_by(|a, b| (&a.flow, a.step).cmp(&(&b.flow, b.step)));
        self.events
            .sort_by(|a, b| (&a.flow, a.seq).cmp(&(&b.flow, b.seq)));
        self.checkpoints
            .sort_by(|a, b| (&a.flow, &a.label).cmp(&(&b.flow, &b.label)));
        self.cache.sort_by(|a, b| a.key.cmp(&b.key));
        self.diffs.sort_by(|a, b| {
            (&a.flow, &a.step, a.attempt, &a.task).cmp(&(&b.flow, &b.step, b.attempt, &b.task))
        });
    }

    /// SHA-256 of every row, in order, as hex: equal exactly when the two stores hold the same
    /// rows.
    pub fn checksum(&self) -> String {
        let mut hasher = Sha256::new();
        let mut feed = |table: &str, fields: &[&[u8]]| {
            hasher.update(table.as_bytes());
            for field in fields {
                // Each field is preceded by its length, so that no two rows hash alike.
                hasher.update((field.len() as u64).to_le_bytes());
                hasher.update(field);
            }
        };
        for row in &self.plans {
            feed("plan", &[row.checksum.as_bytes(), row.json.as_bytes()]);
        }
        for row in &self.flows {
            let seq = row.seq.to_le_bytes();
            feed("flow", &[row.id.as_bytes(), &seq, row.header.as_bytes()]);
        }
        for row in &self.steps {
            let step = row.step.to_le_bytes();
            feed("step", &[row.flow.as_bytes(), &step, row.state.as_bytes()]);
        }
        for row in &self.events {
            let (seq, round) = (row.seq.to_le_bytes(), row.round.to_le_bytes());
            let reverted = [u8::from(row.reverted)];
            feed(
                "event",
                &[
                    row.flow.as_bytes(),
                    &seq,
                    &round,
                    &reverted,
                    row.body.as_bytes(),
                ],
            );
        }
        for row in &self.checkpoints {
            let position = row.position.to_le_bytes();
            feed(
                "checkpoint",
                &[
                    row.flow.as_bytes(),
                    row.label.as_bytes(),
                    &position,
                    row.body.as_bytes(),
                ],
            );
        }
        for row in &self.cache {
            feed("cache", &[row.key.as_bytes(), row.value.as_bytes()]);
        }
        for row in &self.diffs {
            let attempt = row.attempt.to_le_bytes();
            feed(
                "diff",
                &[
                    row.flow.as_bytes(),
                    row.step.as_bytes(),
                    &attempt,
                    row.task.as_bytes(),
                    row.diff.as_bytes(),
                ],
            );
        }
        hasher
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// The columns a flow row copies out of its header, for operators' queries and the
/// compare-and-set; computed by every store the same way.
pub struct FlowColumns<'h> {
    pub parent: Option<&'h str>,
    pub plan: &'h str,
    pub status: &'static str,
    pub flow_name: &'h str,
    pub updated_ms: i64,
    pub version: i64,
}

impl<'h> FlowColumns<'h> {
    pub fn of(header: &'h FlowHeader) -> Result<FlowColumns<'h>, StoreError> {
        Ok(FlowColumns {
            parent: header.parent.as_ref().map(|link| link.flow.as_str()),
            plan: &header.plan,
            status: header.status.as_str(),
            flow_name: &header.flow_name,
            updated_ms: to_i64(header.updated_ms, "a time")?,
            version: to_i64(header.version, "a flow version")?,
        })
    }
}

/// A flow row's header, read to fill the other columns on import; a header that cannot be
/// read, or names another flow, stops the copy.
pub fn header_of(row: &FlowRow) -> Result<FlowHeader, StoreError> {
    let header: FlowHeader = decode(&row.header, || format!("flow {}'s header", row.id))?;
    if header.id.as_str() != row.id {
        return Err(StoreError::Corrupt(format!(
            "the row of flow {} holds the header of flow {}",
            row.id, header.id
        )));
    }
    Ok(header)
}

/// Refuses to copy into a store that already holds flows or plans: the copy would mix two
/// states.
pub fn ensure_empty(flows: i64, plans: i64) -> Result<(), StoreError> {
    if flows > 0 || plans > 0 {
        return Err(StoreError::NotEmpty { flows, plans });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Dump, FlowRow, PlanRow};

    #[test]
    fn the_checksum_tells_rows_apart() {
        let mut dump = Dump {
            plans: vec![PlanRow {
                checksum: "ab".into(),
                json: "c".into(),
            }],
            ..Dump::default()
        };
        let before = dump.checksum();
        assert_eq!(before, dump.clone().checksum());
        dump.plans = vec![PlanRow {
            checksum: "a".into(),
            json: "bc".into(),
        }];
        assert_ne!(before, dump.checksum());
        dump.flows.push(FlowRow {
            id: "f".into(),
            seq: 1,
            header: "{}".into(),
        });
        assert_ne!(before, dump.checksum());
    }
}
