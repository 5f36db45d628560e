//! SARIF 2.1.0, the static-analysis interchange format that code-scanning services import.
//!
//! One run, tool `stratumc`; a rule for each code that occurs (id, name, description, help);
//! a result per diagnostic with its primary location, related locations for secondary labels
//! and a fix for a machine-applicable one. Columns count Unicode code points
//! (`columnKind: unicodeCodePoints`); regions also carry byte offsets.
//!
//! The log is serialized from borrowed structs, not built as a `serde_json::Value` tree (which
//! allocated a map and a key for every member of every result). Members are declared in the
//! order of their names, as serde_json's maps sorted them when the log was such a tree: the
//! output stays the same, and a test compares the two on the corpus.

use std::borrow::Cow;

use serde::Serialize;

use super::FileReport;
use crate::diagnostic::{Code, Diagnostic, Label, Severity};
use crate::source::{SourceMap, Span};

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    runs: [Run<'a>; 1],
    version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    artifacts: Vec<Artifact<'a>>,
    column_kind: &'static str,
    results: Vec<ResultOut<'a>>,
    tool: Tool,
}

#[derive(Serialize)]
struct Artifact<'a> {
    location: ArtifactLocation<'a>,
}

#[derive(Serialize)]
struct ArtifactLocation<'a> {
    uri: Cow<'a, str>,
}

#[derive(Serialize)]
struct Tool {
    driver: Driver,
}

#[derive(Serialize)]
struct Driver {
    name: &'static str,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    default_configuration: Configuration,
    full_description: Message<String>,
    help: Help,
    id: &'static str,
    name: &'static str,
    short_description: Message<&'static str>,
}

#[derive(Serialize)]
struct Configuration {
    level: &'static str,
}

#[derive(Serialize)]
struct Help {
    markdown: &'static str,
    text: String,
}

#[derive(Serialize)]
struct Message<T> {
    text: T,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    fixes: Option<[FixOut<'a>; 1]>,
    level: &'static str,
    locations: [Location<'a>; 1],
    message: Message<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    related_locations: Option<Vec<Location<'a>>>,
    rule_id: &'static str,
    rule_index: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<Message<&'a str>>,
    physical_location: PhysicalLocation<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation<'a> {
    artifact_location: ArtifactLocation<'a>,
    region: Region,
}

/// Lines and columns are absent for a span whose file is unknown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    byte_length: usize,
    byte_offset: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_column: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_column: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_line: Option<usize>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FixOut<'a> {
    artifact_changes: Vec<ArtifactChange<'a>>,
    description: Message<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactChange<'a> {
    artifact_location: ArtifactLocation<'a>,
    replacements: [Replacement<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Replacement<'a> {
    deleted_region: DeletedRegion,
    inserted_content: Message<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeletedRegion {
    byte_length: usize,
    byte_offset: u32,
}

/// Each file's URI, by `FileId`, made once rather than for every location.
struct Uris(Vec<String>);

impl Uris {
    fn new(sources: &SourceMap) -> Uris {
        Uris(sources.iter().map(|file| uri(file.name())).collect())
    }

    /// The URI of `span`'s file; empty, as the URI of an empty path, for an unknown file.
    fn of(&self, span: Span) -> &str {
        let uri = usize::try_from(span.file.0)
            .ok()
            .and_then(|idx| self.0.get(idx));
        uri.map_or("", String::as_str)
    }
}

pub fn render(sources: &SourceMap, reports: &[FileReport<'_>]) -> String {
    let uris = Uris::new(sources);
    let diagnostics: Vec<&Diagnostic> = reports.iter().flat_map(|r| r.diagnostics).collect();
    let mut codes: Vec<Code> = diagnostics.iter().map(|d| d.code).collect();
    codes.sort();
    codes.dedup();
    let rules = codes.iter().map(|&code| rule(code)).collect();
    let results = diagnostics
        .iter()
        .map(|diagnostic| {
            let rule_index = codes.binary_search(&diagnostic.code).unwrap_or_default();
            result(sources, &uris, diagnostic, rule_index)
        })
        .collect();
    let artifacts = reports
        .iter()
        .map(|report| Artifact {
            location: ArtifactLocation {
                uri: Cow::Owned(uri(report.file.name())),
            },
        })
        .collect();
    let log = Log {
        schema: "https://json.schemastore.org/sarif-2.1.0.json",
        runs: [Run {
            artifacts,
            column_kind: "unicodeCodePoints",
            results,
            tool: Tool {
                driver: Driver {
                    name: "stratumc",
                    rules,
                },
            },
        }],
        version: "2.1.0",
    };
    let mut text = serde_json::to_string_pretty(&log).unwrap_or_default();
    text.push('\n');
    text
}

fn rule(code: Code) -> Rule {
    let explanation = code.explanation();
    Rule {
        default_configuration: Configuration {
            level: level(code.severity()),
        },
        full_description: Message {
            text: first_paragraph(explanation),
        },
        help: Help {
            markdown: explanation,
            text: format!("run `stratumc explain {code}` for the full explanation"),
        },
        id: code.as_str(),
        name: code.slug(),
        short_description: Message {
            text: code.summary(),
        },
    }
}

/// The first paragraph after the title of an explanation.
fn first_paragraph(explanation: &str) -> String {
    explanation
        .split("\n\n")
        .map(str::trim)
        .find(|paragraph| !paragraph.is_empty() && !paragraph.starts_with('#'))
        .unwrap_or_default()
        .replace('\n', " ")
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

fn result<'a>(
    sources: &SourceMap,
    uris: &'a Uris,
    diagnostic: &'a Diagnostic,
    rule_index: usize,
) -> ResultOut<'a> {
    let mut text = diagnostic.message.clone();
    if let Some(help) = &diagnostic.help {
        text.push_str("\nhelp: ");
        text.push_str(help);
    }
    let related_locations = (!diagnostic.secondary.is_empty()).then(|| {
        diagnostic
            .secondary
            .iter()
            .enumerate()
            .map(|(id, label)| Location {
                id: Some(id),
                ..location(sources, uris, label)
            })
            .collect()
    });
    let fixes = diagnostic.fix.as_ref().map(|fix| {
        [FixOut {
            artifact_changes: fix
                .edits
                .iter()
                .map(|edit| ArtifactChange {
                    artifact_location: ArtifactLocation {
                        uri: Cow::Borrowed(uris.of(edit.span)),
                    },
                    replacements: [Replacement {
                        deleted_region: DeletedRegion {
                            byte_length: edit.span.len(),
                            byte_offset: edit.span.start,
                        },
                        inserted_content: Message {
                            text: &edit.replacement,
                        },
                    }],
                })
                .collect(),
            description: Message { text: &fix.message },
        }]
    });
    ResultOut {
        fixes,
        level: level(diagnostic.severity),
        locations: [location(sources, uris, &diagnostic.primary)],
        message: Message { text },
        related_locations,
        rule_id: diagnostic.code.as_str(),
        rule_index,
    }
}

fn location<'a>(sources: &SourceMap, uris: &'a Uris, label: &'a Label) -> Location<'a> {
    let span = label.span;
    let (start, end) = match sources.get(span.file) {
        Some(file) => (
            Some(file.line_col(span.start as usize)),
            Some(file.line_col(span.end as usize)),
        ),
        None => (None, None),
    };
    Location {
        id: None,
        message: Some(Message {
            text: &label.message,
        }),
        physical_location: PhysicalLocation {
            artifact_location: ArtifactLocation {
                uri: Cow::Borrowed(uris.of(span)),
            },
            region: Region {
                byte_length: span.len(),
                byte_offset: span.start,
                end_column: end.map(|end| end.column),
                end_line: end.map(|end| end.line),
                start_column: start.map(|start| start.column),
                start_line: start.map(|start| start.line),
            },
        },
    }
}

/// A relative path as a URI reference: forward slashes, reserved characters percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        match byte {
            b'\\' => out.push('/'),
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(char::from(byte));
            }
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push('%');
                for digit in [byte >> 4, byte & 0xf] {
                    out.push(char::from(
                        HEX.get(usize::from(digit)).copied().unwrap_or(b'0'),
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The renderer as it was, building a `serde_json::Value` tree: the reference for the
    /// byte-for-byte comparison.
    mod tree {
        use serde_json::{Value, json};

        use super::super::{first_paragraph, level, uri};
        use crate::diagnostic::{Code, Diagnostic};
        use crate::render::FileReport;
        use crate::source::{SourceMap, Span};

        pub(super) fn render(sources: &SourceMap, reports: &[FileReport<'_>]) -> String {
            let diagnostics: Vec<&Diagnostic> =
                reports.iter().flat_map(|r| r.diagnostics).collect();
            let mut codes: Vec<Code> = diagnostics.iter().map(|d| d.code).collect();
            codes.sort();
            codes.dedup();
            let rules: Vec<Value> = codes.iter().map(|&code| rule(code)).collect();
            let results: Vec<Value> = diagnostics
                .iter()
                .map(|diagnostic| {
                    let rule_index = codes.binary_search(&diagnostic.code).unwrap_or_default();
                    result(sources, diagnostic, rule_index)
                })
                .collect();
            let artifacts: Vec<Value> = reports
                .iter()
                .map(|report| json!({ "location": { "uri": uri(report.file.name()) } }))
                .collect();
            let log = json!({
                "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
                "version": "2.1.0",
                "runs": [{
                    "tool": { "driver": {
                        "name": "stratumc",
                        "rules": rules,
                    }},
                    "columnKind": "unicodeCodePoints",
                    "artifacts": artifacts,
                    "results": results,
                }],
            });
            let mut text = serde_json::to_string_pretty(&log).unwrap_or_default();
            text.push('\n');
            text
        }

        fn rule(code: Code) -> Value {
            let explanation = code.explanation();
            json!({
                "id": code.as_str(),
                "name": code.slug(),
                "shortDescription": { "text": code.summary() },
                "fullDescription": { "text": first_paragraph(explanation) },
                "help": { "text": format!("run `stratumc explain {code}` for the full explanation"), "markdown": explanation },
                "defaultConfiguration": { "level": level(code.severity()) },
            })
        }

        fn result(sources: &SourceMap, diagnostic: &Diagnostic, rule_index: usize) -> Value {
            let mut text = diagnostic.message.clone();
            if let Some(help) = &diagnostic.help {
                text.push_str("\nhelp: ");
                text.push_str(help);
            }
            let mut result = json!({
                "ruleId": diagnostic.code.as_str(),
                "ruleIndex": rule_index,
                "level": level(diagnostic.severity),
                "message": { "text": text },
                "locations": [location(sources, diagnostic.primary.span, Some(&diagnostic.primary.message))],
            });
            if !diagnostic.secondary.is_empty() {
                let related: Vec<Value> = diagnostic
                    .secondary
                    .iter()
                    .enumerate()
                    .map(|(id, label)| {
                        let mut location = location(sources, label.span, Some(&label.message));
                        set(&mut location, "id", json!(id));
                        location
                    })
                    .collect();
                set(&mut result, "relatedLocations", json!(related));
            }
            if let Some(fix) = &diagnostic.fix {
                let changes: Vec<Value> = fix
                .edits
                .iter()
                .map(|edit| {
                    json!({
                        "artifactLocation": { "uri": uri(path(sources, edit.span)) },
                        "replacements": [{
                            "deletedRegion": { "byteOffset": edit.span.start, "byteLength": edit.span.len() },
                            "insertedContent": { "text": edit.replacement },
                        }],
                    })
                })
                .collect();
                set(
                    &mut result,
                    "fixes",
                    json!([{ "description": { "text": fix.message }, "artifactChanges": changes }]),
                );
            }
            result
        }

        fn location(sources: &SourceMap, span: Span, label: Option<&str>) -> Value {
            let region = match sources.get(span.file) {
                Some(file) => {
                    let start = file.line_col(span.start as usize);
                    let end = file.line_col(span.end as usize);
                    json!({
                        "startLine": start.line,
                        "startColumn": start.column,
                        "endLine": end.line,
                        "endColumn": end.column,
                        "byteOffset": span.start,
                        "byteLength": span.len(),
                    })
                }
                None => json!({ "byteOffset": span.start, "byteLength": span.len() }),
            };
            let mut location = json!({
                "physicalLocation": {
                    "artifactLocation": { "uri": uri(path(sources, span)) },
                    "region": region,
                }
            });
            if let Some(label) = label {
                set(&mut location, "message", json!({ "text": label }));
            }
            location
        }

        fn path(sources: &SourceMap, span: Span) -> &str {
            sources.get(span.file).map_or("", |file| file.name())
        }

        /// Adds a member to a JSON object built here (so always an object).
        fn set(object: &mut Value, key: &str, value: Value) {
            if let Some(members) = object.as_object_mut() {
                members.insert(key.to_owned(), value);
            }
        }
    }

    /// The structs serialize to the tree renderer's bytes on every corpus file, each alone and
    /// all in one run.
    #[test]
    fn logs_are_those_of_the_tree_renderer() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
        let mut sources = SourceMap::new();
        let mut compilations = Vec::new();
        for dir in ["invalid", "valid"] {
            let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
                .expect("the corpus is readable")
                .map(|entry| entry.expect("the corpus is readable").path())
                .collect();
            paths.sort();
            for path in paths {
                let bytes = std::fs::read(&path).expect("the file is readable");
                let name = format!(
                    "{dir}/{}",
                    path.file_name().unwrap_or_default().to_string_lossy()
                );
                compilations.push(crate::check_bytes(&mut sources, &name, &bytes));
            }
        }
        assert!(
            compilations
                .iter()
                .any(|c| c.diagnostics.iter().any(|d| d.fix.is_some()))
        );
        assert!(
            compilations
                .iter()
                .any(|c| c.diagnostics.iter().any(|d| !d.secondary.is_empty()))
        );
        let reports = crate::render::reports(&sources, &compilations);
        for report in reports.chunks(1) {
            assert_eq!(render(&sources, report), tree::render(&sources, report));
        }
        assert_eq!(render(&sources, &reports), tree::render(&sources, &reports));
    }

    #[test]
    fn paths_become_uri_references() {
        assert_eq!(
            uri("specs/my spec.stratum.yaml"),
            "specs/my%20spec.stratum.yaml"
        );
        assert_eq!(uri("a\\b.yaml"), "a/b.yaml");
        assert_eq!(uri("é.yaml"), "%C3%A9.yaml");
    }
}
