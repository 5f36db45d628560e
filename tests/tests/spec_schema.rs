//! The spec format's JSON Schema (`compiler/schemas/stratum-spec.schema.json`): the committed
//! file is what the compiler generates, it is a valid draft 2020-12 schema, it accepts every
//! example and valid corpus spec, and it rejects misspelt keys and values of the wrong type.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use std::path::{Path, PathBuf};

use serde_json::Value;
use stratum_compiler::sema::schema::to_json;
use stratum_compiler::spec_schema::{spec_schema, spec_schema_text};
use stratum_compiler::syntax::tree;
use stratum_tests::{check_one, specs_in};

const PUBLISHED: &str = include_str!("../../compiler/schemas/stratum-spec.schema.json");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&spec_schema()).expect("the spec schema is a valid schema")
}

/// A spec's YAML as the JSON value an editor's schema validation sees, read by the compiler's
/// own YAML loader (anchors, merge keys and YAML 1.1 scalars resolved as `check` resolves them).
fn spec_json(name: &str, text: &str) -> Value {
    let (sources, _) = check_one(name, text.as_bytes());
    let src = sources.iter().next().expect("the spec was added");
    let loaded = tree::load(src);
    let root = loaded
        .root
        .unwrap_or_else(|| panic!("{name} has a YAML document"));
    to_json(&root).unwrap_or_else(|| panic!("{name} converts to JSON"))
}

/// The schema's complaints about a spec: `message at /instance/path`.
fn errors(validator: &jsonschema::Validator, name: &str, text: &str) -> Vec<String> {
    let value = spec_json(name, text);
    validator
        .iter_errors(&value)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect()
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    assert!(
        PUBLISHED == spec_schema_text(),
        "compiler/schemas/stratum-spec.schema.json is out of date; regenerate it with\n  \
         cargo run -p stratum-compiler --bin stratumc -- schema > compiler/schemas/stratum-spec.schema.json"
    );
}

#[test]
fn the_schema_is_a_valid_draft_2020_12_schema() {
    let published: Value = serde_json::from_str(PUBLISHED).expect("the schema is JSON");
    assert_eq!(
        published["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let meta = jsonschema::draft202012::meta::validator();
    let problems: Vec<String> = meta
        .iter_errors(&published)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    jsonschema::draft202012::new(&published).expect("the schema compiles");
}

#[test]
fn every_example_and_valid_spec_follows_the_schema() {
    let validator = validator();
    let mut checked = 0;
    for dir in ["examples", "tests/corpus/valid"] {
        for (name, text) in specs_in(dir) {
            let problems = errors(&validator, &name, &text);
            assert!(problems.is_empty(), "{name}: {problems:#?}");
            checked += 1;
        }
    }
    assert!(checked >= 15, "found only {checked} specs");
}

const STEP_SPEC: &str = r#"version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: first
        intent: "summarize the input"
"#;

#[test]
fn a_misspelt_key_fails_validation_where_it_stands() {
    let validator = validator();
    assert_eq!(
        errors(&validator, "ok.stratum.yaml", STEP_SPEC),
        Vec::<String>::new()
    );
    let misspelt = STEP_SPEC.replace("intent:", "intnet:");
    let problems = errors(&validator, "misspelt.stratum.yaml", &misspelt);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("intnet") && p.ends_with("at /flows/main/steps/0")),
        "{problems:#?}"
    );
    // The compiler agrees.
    let (_, compilation) = check_one("misspelt.stratum.yaml", misspelt.as_bytes());
    assert!(
        compilation
            .diagnostics
            .iter()
            .any(|d| d.code.as_str() == "E0011")
    );
}

#[test]
fn values_of_the_wrong_type_fail_validation() {
    let validator = validator();
    for (wrong, at) in [
        (
            STEP_SPEC.replace(
                "intent: \"summarize the input\"",
                "intent: \"go\"\n        retries: many",
            ),
            "/flows/main/steps/0/retries",
        ),
        (
            STEP_SPEC.replace(
                "intent: \"summarize the input\"",
                "intent: \"go\"\n        ensure: \"result.ok\"",
            ),
            "/flows/main/steps/0/ensure",
        ),
        (
            STEP_SPEC.replace(
                "intent: \"summarize the input\"",
                "intent: \"go\"\n        cache: \"yes\"",
            ),
            "/flows/main/steps/0/cache",
        ),
        (
            STEP_SPEC.replace("input: {}", "input: []"),
            "/flows/main/input",
        ),
        (STEP_SPEC.replace("\"0.2\"", "0.2"), "/version"),
    ] {
        let problems = errors(&validator, "wrong.stratum.yaml", &wrong);
        assert!(
            problems.iter().any(|p| p.ends_with(&format!("at {at}"))),
            "{wrong}\n{problems:#?}"
        );
        let (_, compilation) = check_one("wrong.stratum.yaml", wrong.as_bytes());
        assert!(compilation.has_errors(), "{wrong}");
    }
}

#[test]
fn missing_required_keys_fail_validation() {
    let validator = validator();
    let without_id = STEP_SPEC.replace("- id: first\n        intent", "- intent");
    let problems = errors(&validator, "no-id.stratum.yaml", &without_id);
    assert!(
        problems.iter().any(|p| p.contains("\"id\"")),
        "{problems:#?}"
    );
    let without_version = STEP_SPEC.replace("version: \"0.2\"\n", "");
    let problems = errors(&validator, "no-version.stratum.yaml", &without_version);
    assert!(
        problems.iter().any(|p| p.contains("\"version\"")),
        "{problems:#?}"
    );
}

#[test]
fn every_key_has_a_description_for_editor_hovers() {
    let schema = spec_schema();
    let defs = schema["$defs"].as_object().expect("$defs");
    for (shape, def) in defs {
        for (key, property) in def["properties"].as_object().expect("properties") {
            assert!(
                property["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty()),
                "{shape}.{key} has no description"
            );
        }
    }
}

/// The schema's descriptions and the language server's hovers are the same lines. The
/// compiler's tables hold them (`Key::doc`); `lsp/src/key_docs.rs` still has its own copy,
/// which this pins until it reads the tables: every line of the tables must appear there.
#[test]
fn the_key_docs_are_the_language_server_hovers() {
    let hovers = std::fs::read_to_string(root().join("lsp/src/key_docs.rs"))
        .expect("the language server's key docs are readable");
    for shape in stratum_compiler::syntax::keys::SHAPES {
        for key in shape.keys {
            // As a Rust string literal writes it.
            let literal = format!("\"{}\"", key.doc.replace('\\', "\\\\").replace('"', "\\\""));
            assert!(
                hovers.contains(&literal),
                "{}.{}: the doc {literal} is not in lsp/src/key_docs.rs",
                shape.name,
                key.name
            );
        }
    }
}
