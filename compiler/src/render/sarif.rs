//! SARIF 2.1.0, the static-analysis interchange format that code-scanning services import.
//!
//! One run, tool `stratumc`; a rule for each code that occurs (id, name, description, help);
//! a result per diagnostic with its primary location, related locations for secondary labels
//! and a fix for a machine-applicable one. Columns count Unicode code points
//! (`columnKind: unicodeCodePoints`); regions also carry byte offsets.

use serde_json::{Value, json};

use super::FileReport;
use crate::diagnostic::{Code, Diagnostic, Severity};
use crate::source::{SourceMap, Span};

pub fn render(sources: &SourceMap, reports: &[FileReport<'_>]) -> String {
    let diagnostics: Vec<&Diagnostic> = reports.iter().flat_map(|r| r.diagnostics).collect();
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

/// Adds a member to a JSON object built here (so always an object).
fn set(object: &mut Value, key: &str, value: Value) {
    if let Some(members) = object.as_object_mut() {
        members.insert(key.to_owned(), value);
    }
}

fn path(sources: &SourceMap, span: Span) -> &str {
    sources.get(span.file).map_or("", |file| file.name())
}

/// A relative path as a URI reference: forward slashes, reserved characters percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.replace('\\', "/").bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(char::from(byte));
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
