//! The operator commands of `stratum-mcp` (beside the MCP server): what they read and write
//! in the store and what they print, apart from the binary's argument parsing so that each is
//! tested on a store directly.
//!
//! In reading order: [`query`] (flows, one flow, waiting gates), [`gate`] (resolve a gate),
//! [`watch`] (follow flows), [`prune`] (delete finished flows), [`token`] (the access tokens
//! of `stratum-mcp serve`), [`table`] (the terminal
//! rendering of query results) and [`schemas`] (the JSON Schemas of everything printed as
//! JSON, published in `runtime/cli/schemas/`).

pub mod doctor;
pub mod flow_ref;
pub mod gate;
pub mod migrate;
pub mod prune;
pub mod query;
pub mod schemas;
pub mod table;
pub mod token;
pub mod watch;

use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};
use stratum_compiler::plan::Plan;

use crate::store::{Store, StoreError};

/// The `"_schema_version": "1"` every operator JSON object carries: the reference's
/// version-1 contracts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchemaVersion;

impl Serialize for SchemaVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("1")
    }
}

impl JsonSchema for SchemaVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SchemaVersion".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The version of the operator JSON contract.",
            "const": "1"
        })
    }
}

/// The plans of the flows an operator command reads, each read from the store once (plans are
/// immutable, named by checksum).
#[derive(Default)]
pub struct Plans(HashMap<String, Arc<Plan>>);

impl Plans {
    /// The plan of that checksum; `None` when a prune took it (with its flows) meanwhile.
    pub fn get(
        &mut self,
        store: &dyn Store,
        checksum: &str,
    ) -> Result<Option<Arc<Plan>>, StoreError> {
        if let Some(plan) = self.0.get(checksum) {
            return Ok(Some(plan.clone()));
        }
        let mut found = None;
        store.read(&mut |snapshot| {
            found = snapshot.plan(checksum)?;
            Ok(())
        })?;
        if let Some(plan) = &found {
            self.0.insert(checksum.to_owned(), plan.clone());
        }
        Ok(found)
    }
}
