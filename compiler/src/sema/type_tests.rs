//! Contract types end to end: spec text → field types, record types, schemas, hashes and the
//! diagnostics of E0070–E0075.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)] // tests unwrap

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use stratum_grammar::types::Type;

use crate::diagnostic::{Code, Diagnostic};
use crate::sema::json_schema;
use crate::sema::types::{Bounds, ContractTypes, FieldType, Literal};
use crate::source::{FileId, SourceFile};

fn compile(contracts: &str) -> (ContractTypes, Vec<Diagnostic>, String) {
    let text = format!("version: \"0.2\"\ncontracts:\n{contracts}");
    let src = SourceFile::new(FileId::default(), "test.stratum.yaml", text.clone());
    let compilation = crate::check(&src);
    (
        compilation.model.contracts,
        without_usage_warnings(compilation.diagnostics),
        text,
    )
}

/// These specs declare contracts and functions that nothing uses; the warnings about that are not
/// what they test.
fn without_usage_warnings(diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    diagnostics
        .into_iter()
        .filter(|d| !matches!(d.code, Code::W0010 | Code::W0011))
        .collect()
}

/// The types of a clean spec's contracts.
fn clean(contracts: &str) -> ContractTypes {
    let (types, diagnostics, _) = compile(contracts);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    types
}

/// The (code, underlined text) of each diagnostic.
fn problems(contracts: &str) -> Vec<(Code, String)> {
    let (_, diagnostics, text) = compile(contracts);
    diagnostics
        .iter()
        .map(|d| {
            let underlined = text.get(d.primary.span.range()).unwrap_or("?").to_owned();
            (d.code, underlined)
        })
        .collect()
}

fn field<'a>(types: &'a ContractTypes, contract: &str, name: &str) -> &'a FieldType {
    &types
        .fields(contract)
        .unwrap()
        .iter()
        .find(|field| field.name == name)
        .unwrap()
        .ty
}

fn string() -> FieldType {
    FieldType::String(Bounds::default())
}

#[test]
fn every_accepted_spelling_of_a_field_type() {
    let types = clean(
        "  C:
    a: {type: string}
    b: string
    c: {type: int}
    d: {type: integer}
    e: {type: float}
    f: {type: number}
    g: {type: bool}
    h: {type: boolean}
    i: {type: array}
    j: {type: array, items: {type: string}}
    k: {type: array, items: string}
    l: {type: object}
    m: {type: string, values: [low, high]}
    n: {type: string, optional: true}
    o: {type: string, required: false}
    p: {type: string?}
    q: {type: \"float[0.0..1.0]\"}
    r: {type: \"int[1..100]\"}
    s: {type: \"string[1..500]\"}
    t: {type: \"string[]\"}
    u: {type: \"string?[]\"}
    v: {type: \"string[]?\"}
    w: {type: '\"low\" | \"medium\" | \"high\"'}
    x: {type: \"'a' | 'b'\"}
    y: {type: number, minimum: 0, maximum: 1}
    z: {type: string, min_length: 2, max_length: 2}
    aa: {type: integer, values: [1, 2, 3]}
    ab: {type: array, items: {type: array, items: {type: integer, minimum: 0}}}
    ac: {type: \"('x' | 'y')?\"}
",
    );
    let int = FieldType::Integer(Bounds::default());
    let number = FieldType::Number(Bounds::default());
    let strs = |values: &[&str]| {
        FieldType::Enum(values.iter().map(|v| Literal::Str((*v).into())).collect())
    };
    let list = |item: FieldType| FieldType::Array(Some(Box::new(item)));
    let expected = [
        ("a", string()),
        ("b", string()),
        ("c", int.clone()),
        ("d", int.clone()),
        ("e", number.clone()),
        ("f", number.clone()),
        ("g", FieldType::Boolean),
        ("h", FieldType::Boolean),
        ("i", FieldType::Array(None)),
        ("j", list(string())),
        ("k", list(string())),
        ("l", FieldType::Object),
        ("m", strs(&["low", "high"])),
        ("n", string().optional()),
        ("o", string().optional()),
        ("p", string().optional()),
        (
            "q",
            FieldType::Number(Bounds {
                minimum: Some(0.0),
                maximum: Some(1.0),
            }),
        ),
        (
            "r",
            FieldType::Integer(Bounds {
                minimum: Some(1),
                maximum: Some(100),
            }),
        ),
        (
            "s",
            FieldType::String(Bounds {
                minimum: Some(1),
                maximum: Some(500),
            }),
        ),
        ("t", list(string())),
        ("u", list(string().optional())),
        ("v", list(string()).optional()),
        ("w", strs(&["low", "medium", "high"])),
        ("x", strs(&["a", "b"])),
        (
            "y",
            FieldType::Number(Bounds {
                minimum: Some(0.0),
                maximum: Some(1.0),
            }),
        ),
        (
            "z",
            FieldType::String(Bounds {
                minimum: Some(2),
                maximum: Some(2),
            }),
        ),
        (
            "aa",
            FieldType::Enum(vec![Literal::Int(1), Literal::Int(2), Literal::Int(3)]),
        ),
        (
            "ab",
            list(list(FieldType::Integer(Bounds {
                minimum: Some(0),
                maximum: None,
            }))),
        ),
        ("ac", strs(&["x", "y"]).optional()),
    ];
    for (name, ty) in expected {
        assert_eq!(field(&types, "C", name), &ty, "field `{name}`");
    }
    let record = types.contract("C").unwrap().to_string();
    assert!(
        record.starts_with("{a: string, b: string, c: int, d: int, e: float, f: float, g: bool"),
        "{record}"
    );
    assert!(
        record.contains("j: list<string>, k: list<string>, l: {...}"),
        "{record}"
    );
    assert!(record.contains("n: string?"), "{record}");
    assert!(record.contains("ac: ('x' | 'y')?"), "{record}");
}

#[test]
fn nested_contracts_are_record_types_and_inlined_schemas() {
    let types = clean(
        "  Address:
    city: string
    country: {type: \"string[2..2]\"}
  Profile:
    name: string
    home: {type: Address}
    past: {type: \"Address[]\"}
    work: {type: Address?}
",
    );
    assert_eq!(
        types.contract("Profile").unwrap().to_string(),
        "{name: string, home: {city: string, country: string}, \
         past: list<{city: string, country: string}>, work: {city: string, country: string}?}"
    );
    let address = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "country": {"type": "string", "minLength": 2, "maxLength": 2}
        },
        "required": ["city", "country"]
    });
    assert_eq!(types.schema("Address"), Some(&address));
    assert_eq!(
        types.schema("Profile"),
        Some(&json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "home": address,
                "past": {"type": "array", "items": address},
                "work": {"anyOf": [address, {"type": "null"}]}
            },
            "required": ["name", "home", "past"]
        }))
    );
    let uses: Vec<&str> = types.uses().map(|(name, _)| name).collect();
    assert_eq!(uses, ["Address", "Address", "Address"]);
}

#[test]
fn input_records_resolve_nested_contracts_and_list_their_uses() {
    let text = "version: \"0.2\"
contracts:
  Address: {city: string}
functions:
  ship:
    mode: compute
    intent: \"ship it\"
    input: {to: {type: Address}, note: {type: string, required: false}, anything: {}}
    output: Address
";
    let src = SourceFile::new(FileId::default(), "t.stratum.yaml", text);
    let compilation = crate::check(&src);
    let diagnostics = without_usage_warnings(compilation.diagnostics.clone());
    assert!(diagnostics.is_empty(), "{:#?}", compilation.diagnostics);
    let types = &compilation.model.contracts;
    let input = &compilation.ast.functions[0].input.as_ref().unwrap().value;
    assert_eq!(
        types.record(input).to_string(),
        "{to: {city: string}, note: string?, anything: any}"
    );
    let uses: Vec<(&str, &str)> = types
        .uses()
        .map(|(name, span)| (name, &text[span.range()]))
        .collect();
    assert_eq!(uses, [("Address", "Address")]);
    assert_eq!(types.contract("Nope"), None);
    assert!(matches!(types.contract("Address"), Some(Type::Record(_))));
}

// Hashes computed independently with Python:
//   python3 -c 'import hashlib, json; print(hashlib.sha256(json.dumps(SCHEMA,
//       sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12])'
// with SCHEMA the schema asserted next to each hash.
#[test]
fn hashes_match_pythons() {
    let types = clean(
        "  SentimentResult:
    label: {type: string, values: [positive, negative, neutral]}
    confidence: {type: \"float[0.0..1.0]\"}
    reasoning: string
  Mood:
    mood: {type: \"'café' | '日本' | '😀'\"}
    score: {type: number, minimum: 0.00001, maximum: 100.5, optional: true}
    tags: {type: array, items: \"string[1..500]\"}
    count: {type: int, minimum: -3, maximum: 10}
  Empty: {}
",
    );
    // {"type":"object","properties":{"label":{"enum":["positive","negative","neutral"]},
    //  "confidence":{"type":"number","minimum":0.0,"maximum":1.0},"reasoning":{"type":"string"}},
    //  "required":["label","confidence","reasoning"]}
    assert_eq!(types.hash("SentimentResult"), Some("d9a22805a3e3"));
    // {"type":"object","properties":{"mood":{"enum":["café","日本","😀"]},
    //  "score":{"anyOf":[{"type":"number","minimum":1e-05,"maximum":100.5},{"type":"null"}]},
    //  "tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":500}},
    //  "count":{"type":"integer","minimum":-3,"maximum":10}},"required":["mood","tags","count"]}
    assert_eq!(
        json_schema::canonical(types.schema("Mood").unwrap()),
        r#"{"properties":{"count":{"maximum":10,"minimum":-3,"type":"integer"},"mood":{"enum":["caf\u00e9","\u65e5\u672c","\ud83d\ude00"]},"score":{"anyOf":[{"maximum":100.5,"minimum":1e-05,"type":"number"},{"type":"null"}]},"tags":{"items":{"maxLength":500,"minLength":1,"type":"string"},"type":"array"}},"required":["mood","tags","count"],"type":"object"}"#
    );
    assert_eq!(types.hash("Mood"), Some("cb1e83d64a7d"));
    // {"type":"object","properties":{},"required":[]}
    assert_eq!(types.hash("Empty"), Some("c8a1ac469a82"));
}

/// The canonical form and hash of a few schemas, compared with Python's when `python3` is on
/// PATH (skipped silently otherwise).
#[test]
fn python_agrees_on_canonical_json_and_hashes() {
    let available = Command::new("python3")
        .arg("-c")
        .arg("import sys; sys.exit(0)")
        .status()
        .is_ok_and(|status| status.success());
    if !available {
        eprintln!("note: python3 is not on PATH; the comparison with Python is skipped");
        return;
    }
    let schemas = [
        json!({"type": "object", "properties": {"a": {"enum": ["é", "日本", "😀", "\u{7f}", "\"q\"\n"]}}, "required": ["a"]}),
        json!({"type": "number", "minimum": 1e-5, "maximum": 1e16}),
        json!({"anyOf": [{"type": "number", "minimum": 0.0, "maximum": 0.1}, {"type": "null"}]}),
        json!({"enum": [1, 2.5, -0.0, 123456789.125, 1.5e300, true], "B": {}, "a": [], "Z": null}),
    ];
    let harness = r#"
import hashlib, json, sys
for line in sys.stdin.buffer.read().decode("utf-8").splitlines():
    canonical = json.dumps(json.loads(line), sort_keys=True, separators=(',', ':'))
    print(json.dumps([canonical, hashlib.sha256(canonical.encode()).hexdigest()[:12]]))
"#;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(harness)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    let input: String = schemas.iter().map(|s| format!("{s}\n")).collect();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("schemas written");
    let output = child.wait_with_output().expect("python3 finishes");
    assert!(output.status.success());
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), schemas.len());
    for (schema, python) in schemas.iter().zip(&lines) {
        assert_eq!(json_schema::canonical(schema), python[0], "{schema}");
        assert_eq!(json_schema::hash(schema), python[1], "{schema}");
    }
}

#[test]
fn unknown_types_are_reported_once_with_a_suggestion() {
    let (types, diagnostics, text) = compile(
        "  Address: {city: string}
  C:
    a: {type: strng}
    b: {type: \"Adress[]\"}
    c: {type: banana}
    d: {type: list}
",
    );
    let found: Vec<(Code, &str, Option<&str>)> = diagnostics
        .iter()
        .map(|d| {
            (
                d.code,
                &text[d.primary.span.range()],
                d.fix.as_ref().map(|f| f.edits[0].replacement.as_str()),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (Code::E0070, "strng", Some("string")),
            (Code::E0070, "Adress", Some("Address")),
            (Code::E0070, "banana", None),
            (Code::E0070, "list", Some("array")),
        ]
    );
    assert_eq!(field(&types, "C", "a"), &FieldType::Any);
    assert_eq!(
        field(&types, "C", "b"),
        &FieldType::Array(Some(Box::new(FieldType::Any)))
    );
    assert!(diagnostics[2].help.as_ref().unwrap().contains("`Address`"));
}

#[test]
fn type_syntax_errors_point_inside_the_type() {
    assert_eq!(
        problems("  C:\n    a: {type: \"string[1..5\"}\n"),
        [(Code::E0070, "5".to_owned())]
    );
    assert_eq!(
        problems("  C:\n    a: {type: \"string | int\"}\n"),
        [(Code::E0070, "string".to_owned())]
    );
}

#[test]
fn range_problems() {
    let cases = [
        ("{type: number, minimum: 5, maximum: 1}", "1"),
        ("{type: string, min_length: 5, max_length: 1}", "1"),
        ("{type: \"int[10..1]\"}", "[10..1]"),
        ("{type: \"string[-1..5]\"}", "-1"),
        ("{type: \"string[1.5..5]\"}", "1.5"),
        ("{type: boolean, minimum: 1}", "minimum"),
        ("{type: number, max_length: 1}", "max_length"),
        ("{type: \"bool[1..2]\"}", "[1..2]"),
        ("{type: \"int[1..5]\", maximum: 3}", "maximum"),
        ("{type: integer, minimum: 0.5}", "0.5"),
        ("{type: number, maximum: .inf}", ".inf"),
        ("{type: string, values: [a], min_length: 1}", "min_length"),
    ];
    for (field, underlined) in cases {
        assert_eq!(
            problems(&format!("  C:\n    a: {field}\n")),
            [(Code::E0072, underlined.to_owned())],
            "{field}"
        );
    }
    // The front end already rejects a negative length key.
    assert_eq!(
        problems("  C:\n    a: {type: string, min_length: -1}\n"),
        [(Code::E0020, "-1".to_owned())]
    );
}

#[test]
fn values_and_items_that_do_not_fit() {
    let cases = [
        ("{type: string, values: [a, 1]}", "1", Code::E0074),
        ("{type: integer, values: [1, b]}", "b", Code::E0074),
        ("{type: array, values: [a]}", "values", Code::E0074),
        ("{type: string, values: [a, ~]}", "~", Code::E0074),
        ("{type: string, values: []}", "[]", Code::E0021),
        (
            "{type: string, items: {type: string}}",
            "items",
            Code::E0074,
        ),
        (
            "{type: \"string[]\", items: {type: string}}",
            "items",
            Code::E0074,
        ),
        ("{type: array, items: 5}", "5", Code::E0074),
        ("{type: array, items: {type: strng}}", "strng", Code::E0070),
        ("{type: array, items: {tpye: string}}", "tpye", Code::W0001),
        ("{type: array, items: {type: 5}}", "5", Code::E0012),
        ("{type: \"'a' | 1\"}", "1", Code::E0074),
        ("{type: \"'a' | 'b'\", values: [a]}", "values", Code::E0074),
    ];
    for (field, underlined, code) in cases {
        assert_eq!(
            problems(&format!("  C:\n    a: {field}\n")),
            [(code, underlined.to_owned())],
            "{field}"
        );
    }
    // A number enum accepts integers; an input without `type` takes its values' kind.
    let types = clean("  C:\n    a: {type: number, values: [1, 2.5]}\n");
    assert_eq!(
        field(&types, "C", "a"),
        &FieldType::Enum(vec![Literal::Int(1), Literal::Float(2.5)])
    );
}

#[test]
fn recursive_contracts_are_reported_once_per_cycle() {
    let (types, diagnostics, text) = compile(
        "  Node:
    value: string
    next: {type: Node?}
  A:
    b: {type: B}
  B:
    c: {type: \"C[]\"}
  C:
    a: {type: A}
  D:
    a: {type: A}
",
    );
    let found: Vec<(&str, &str, usize)> = diagnostics
        .iter()
        .map(|d| {
            (
                d.message.as_str(),
                &text[d.primary.span.range()],
                d.secondary.len(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "contract `Node` contains itself: `Node` → `Node`",
                "Node",
                0
            ),
            (
                "contract `A` contains itself: `A` → `B` → `C` → `A`",
                "B",
                2
            ),
        ]
    );
    assert_eq!(field(&types, "Node", "next"), &FieldType::Any);
    assert_eq!(types.contract("D").unwrap().to_string(), "{a: {b: any}}");
    assert!(types.hash("D").is_some());
}

#[test]
fn schemas_that_multiply_are_bounded() {
    // Each contract holds four of the previous one: 4^7 copies of `C0`'s schema.
    let mut contracts = String::from("  C0: {a: string, b: string}\n");
    for i in 1..=8 {
        let p = i - 1;
        contracts.push_str(&format!("  C{i}: {{a: C{p}, b: C{p}, c: C{p}, d: C{p}}}\n"));
    }
    let (types, diagnostics, _) = compile(&contracts);
    let codes: Vec<Code> = diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::E0075]);
    assert!(types.schema("C4").is_some());
    assert_eq!(types.schema("C8"), None);
    assert_eq!(types.contract("C8"), Some(&Type::Any));

    // A chain of nested contracts deeper than a schema may nest.
    let mut contracts = String::from("  C0: {a: string}\n");
    for i in 1..=100 {
        contracts.push_str(&format!("  C{i}: {{a: C{}}}\n", i - 1));
    }
    let (_, diagnostics, _) = compile(&contracts);
    let codes: Vec<Code> = diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::E0075]);
}

/// Every schema compiled from the valid corpus's catalogue of field forms is itself a valid
/// draft 2020-12 schema.
#[test]
fn compiled_schemas_pass_the_meta_schema() {
    let text = include_str!("../../../tests/corpus/valid/contract-types.stratum.yaml");
    let src = SourceFile::new(FileId::default(), "contract-types.stratum.yaml", text);
    let compilation = crate::check(&src);
    assert!(
        compilation.diagnostics.is_empty(),
        "{:#?}",
        compilation.diagnostics
    );
    let types = &compilation.model.contracts;
    let validator = jsonschema::draft202012::meta::validator();
    for name in ["Address", "Review"] {
        let schema = types.schema(name).unwrap();
        assert!(validator.is_valid(schema), "{name}: {schema}");
        assert_eq!(types.hash(name).unwrap().len(), 12);
    }
    let review = types.schema("Review").unwrap();
    assert_eq!(
        review["properties"]["kind"],
        json!({"anyOf": [{"enum": ["bug", "feature"]}, {"type": "null"}]})
    );
    assert_eq!(
        review["properties"]["confidence"],
        json!({"type": "number", "minimum": 0.0, "maximum": 1.0})
    );
    assert_eq!(
        review["properties"]["score"],
        json!({"type": "number", "minimum": 0.0, "maximum": 100.0})
    );
    assert_eq!(
        review["properties"]["grid"],
        json!({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}})
    );
    assert_eq!(
        review["properties"]["reviewers"]["items"],
        *types.schema("Address").unwrap()
    );
    assert!(
        !review["required"]
            .as_array()
            .unwrap()
            .iter()
            .any(|name| name == "note" || name == "blocking" || name == "forwarded_to")
    );
    let input = &compilation.ast.functions[1].input.as_ref().unwrap().value;
    assert_eq!(
        types.record(input).to_string(),
        "{diff: string, author: {street: string, city: string, country: string, \
         postal_code: string?}, strictness: ('lenient' | 'strict')?}"
    );
}

/// The problems (code, underlined text) of a whole spec, without the usage warnings.
fn spec_problems(text: &str) -> Vec<(Code, String)> {
    let src = SourceFile::new(FileId::default(), "test.stratum.yaml", text.to_owned());
    without_usage_warnings(crate::check(&src).diagnostics)
        .iter()
        .map(|d| {
            let underlined = text.get(d.primary.span.range()).unwrap_or("?").to_owned();
            (d.code, underlined)
        })
        .collect()
}

#[test]
fn a_gate_with_an_output_contract_gives_a_typed_human_decision() {
    let spec = |reference: &str, output: &str| {
        format!(
            r#"version: "0.2"
contracts:
  Release:
    version: {{type: string}}
    channel: {{type: string, values: [stable, beta]}}
  Done:
    ok: {{type: boolean}}
functions:
  write:
    mode: infer
    intent: "Write"
    input: {{}}
    output: Done
  sign_off:
    mode: gate
{output}
  publish:
    mode: infer
    intent: "Publish"
    input:
      version: {{type: string}}
    output: Done
flows:
  release:
    input: {{}}
    steps:
      - id: write
        function: write
        inputs: {{}}
      - id: review
        function: sign_off
        on_approve: publish
        on_revise: write
        on_kill: ~
        depends_on: [write]
      - id: publish
        function: publish
        inputs:
          version: "{reference}"
        depends_on: [review]
"#
        )
    };
    let typed = "    output: Release";
    for clean in [
        "$.steps.review.output.value.version",
        "$.steps.review.output.rationale",
        "$.steps.review.output.review_id",
    ] {
        assert_eq!(spec_problems(&spec(clean, typed)), vec![], "{clean}");
    }
    assert_eq!(
        spec_problems(&spec("$.steps.review.output.value.versoin", typed)),
        vec![(Code::E0029, "versoin".to_owned())]
    );
    assert_eq!(
        spec_problems(&spec("$.steps.review.output.approver", typed)),
        vec![(Code::E0029, "approver".to_owned())]
    );
    // A gate without `output` decides no value: its output is not typed.
    assert_eq!(
        spec_problems(&spec("$.steps.review.output.anything", "    timeout: 60")),
        vec![]
    );
}
