//! The JSON Schemas (draft 2020-12) of everything the operator commands print as JSON,
//! generated from the types that print it, so a schema cannot drift from the output. They
//! are published in `runtime/cli/schemas/`; a test keeps the files equal to [`all`] and
//! validates the real commands' output against them.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Value, json};

use super::doctor::Report;
use super::gate::{Conflict, GateMutation, NotFound};
use super::migrate::MigrateReport;
use super::prune::PruneReport;
use super::query::{FlowState, FlowSummary, PendingGate};
use super::token::{CreatedToken, Refused, RevokedToken, TokenSummary};
use super::watch::Happening;

/// Every published schema: its file name in `runtime/cli/schemas/` and its content.
pub fn all() -> Vec<(&'static str, Value)> {
    vec![
        (
            "query-flows.schema.json",
            schema(
                "stratum-mcp query flows --json",
                "Every flow in the store, newest first.",
                |generator| json!({"type": "array", "items": generator.subschema_for::<FlowSummary>()}),
            ),
        ),
        (
            "query-flow.schema.json",
            schema(
                "stratum-mcp query flow ID --json",
                "One flow's whole state (exit 0), or NOT_FOUND (exit 1).",
                any_of(&[
                    |generator| generator.subschema_for::<FlowState>().to_value(),
                    |generator| generator.subschema_for::<NotFound>().to_value(),
                ]),
            ),
        ),
        (
            "query-gates.schema.json",
            schema(
                "stratum-mcp query gates --json",
                "Every gate a running flow waits at.",
                |generator| json!({"type": "array", "items": generator.subschema_for::<PendingGate>()}),
            ),
        ),
        (
            "gate.schema.json",
            schema(
                "stratum-mcp gate approve|revise|kill FLOW STEP --json",
                "The gate resolved (exit 0), no such flow (exit 1), or a conflict (exit 2).",
                any_of(&[
                    |generator| generator.subschema_for::<GateMutation>().to_value(),
                    |generator| generator.subschema_for::<NotFound>().to_value(),
                    |generator| generator.subschema_for::<Conflict>().to_value(),
                ]),
            ),
        ),
        (
            "doctor.schema.json",
            schema(
                "stratum-mcp doctor --json",
                "Every check of the set-up; exit 1 when one found a problem.",
                |generator| generator.subschema_for::<Report>().to_value(),
            ),
        ),
        (
            "migrate-store.schema.json",
            schema(
                "stratum-mcp migrate-store --from URL --to URL --json",
                "What a copy moved, and whether the target, read back, matched the source.",
                |generator| generator.subschema_for::<MigrateReport>().to_value(),
            ),
        ),
        (
            "prune.schema.json",
            schema(
                "stratum-mcp prune --json",
                "What a prune removed.",
                |generator| generator.subschema_for::<PruneReport>().to_value(),
            ),
        ),
        (
            "token-create.schema.json",
            schema(
                "stratum-mcp token create --name NAME [--read-only] --json",
                "The new token with its secret, shown once (exit 0), or its name refused (exit 2).",
                any_of(&[
                    |generator| generator.subschema_for::<CreatedToken>().to_value(),
                    |generator| generator.subschema_for::<Refused>().to_value(),
                ]),
            ),
        ),
        (
            "token-list.schema.json",
            schema(
                "stratum-mcp token list --json",
                "Every access token, by name; never a secret.",
                |generator| json!({"type": "array", "items": generator.subschema_for::<TokenSummary>()}),
            ),
        ),
        (
            "token-revoke.schema.json",
            schema(
                "stratum-mcp token revoke NAME --json",
                "The token revoked (exit 0), or no token of that name (exit 1).",
                any_of(&[
                    |generator| generator.subschema_for::<RevokedToken>().to_value(),
                    |generator| generator.subschema_for::<NotFound>().to_value(),
                ]),
            ),
        ),
        (
            "watch-event.schema.json",
            schema(
                "stratum-mcp watch --json (one object per line)",
                "One thing that happened to a flow.",
                |generator| generator.subschema_for::<Happening>().to_value(),
            ),
        ),
    ]
}

type Part = fn(&mut SchemaGenerator) -> Value;

fn any_of(parts: &'static [Part]) -> impl Fn(&mut SchemaGenerator) -> Value {
    move |generator| {
        let shapes: Vec<Value> = parts.iter().map(|part| part(generator)).collect();
        json!({ "anyOf": shapes })
    }
}

/// A root schema: `body`'s shape with every definition it refers to.
fn schema(title: &str, description: &str, body: impl Fn(&mut SchemaGenerator) -> Value) -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let mut root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "description": description,
    });
    let shape = body(&mut generator);
    let definitions = generator.take_definitions(true);
    if let (Value::Object(root), Value::Object(shape)) = (&mut root, shape) {
        root.extend(shape);
        if !definitions.is_empty() {
            root.insert("$defs".to_owned(), Value::Object(definitions));
        }
    }
    root
}

/// `T`'s schema alone, for tests that check one value.
pub fn of<T: JsonSchema>() -> Value {
    schema(std::any::type_name::<T>(), "", |generator| {
        generator.subschema_for::<T>().to_value()
    })
}
