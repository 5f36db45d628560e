//! The operator commands of `stratum-mcp` (beside the MCP server): what they read and write
//! in the store and what they print, apart from the binary's argument parsing so that each is
//! tested on a store directly.
//!
//! In reading order: [`query`] (flows, one flow, waiting gates), [`gate`] (resolve a gate),
//! [`watch`] (follow flows), [`prune`] (delete finished flows), [`table`] (the terminal
//! rendering of query results) and [`schemas`] (the JSON Schemas of everything printed as
//! JSON, published in `runtime/schemas/`).

pub mod gate;
pub mod prune;
pub mod query;
pub mod schemas;
pub mod table;
pub mod watch;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

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
