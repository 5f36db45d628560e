//! Rendering a compiled intent template for one task: text as written, each value a string
//! as it is or anything else as compact JSON. A value the task does not have fails the task
//! (`template_field_missing`): a template never reaches an agent unrendered.

use serde_json::Value;
use stratum_compiler::plan::{Plan, Template, TemplatePart, TemplateRoot};

/// What a task's placeholders may read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Bound<'a> {
    pub(crate) item: Option<&'a Value>,
    pub(crate) source: Option<&'a Value>,
    pub(crate) task_id: &'a str,
    pub(crate) prev: Option<&'a Value>,
    pub(crate) prevs: Option<&'a Value>,
}

/// The template rendered for one task, or why it cannot be.
pub(crate) fn render(
    plan: &Plan,
    template: &Template,
    bound: &Bound<'_>,
) -> Result<String, String> {
    let mut text = String::new();
    for part in &template.parts {
        match part {
            TemplatePart::Text(literal) => text.push_str(literal),
            TemplatePart::Value { root, path } => {
                let fields = path_of(plan, *path);
                let task_id = Value::String(bound.task_id.to_owned());
                let start = match root {
                    TemplateRoot::Item => bound.item,
                    TemplateRoot::Source => bound.source,
                    TemplateRoot::TaskId => Some(&task_id),
                    TemplateRoot::Prev | TemplateRoot::PrevRaw => bound.prev,
                    TemplateRoot::Prevs | TemplateRoot::PrevsRaw => bound.prevs,
                };
                let value = start.and_then(|value| walk(value, fields)).ok_or_else(|| {
                    format!(
                        "template_field_missing: the intent template's {} has no value for task '{}'",
                        placeholder(*root, fields),
                        bound.task_id
                    )
                })?;
                match value {
                    Value::String(string) => text.push_str(string),
                    other => text.push_str(&other.to_string()),
                }
            }
        }
    }
    Ok(text)
}

/// The template as text again (`{path}`, `{{` for a brace), for the envelope's
/// `intent_template`.
pub(crate) fn source_text(plan: &Plan, template: &Template) -> String {
    let mut text = String::new();
    for part in &template.parts {
        match part {
            TemplatePart::Text(literal) => {
                text.push_str(&literal.replace('{', "{{").replace('}', "}}"))
            }
            TemplatePart::Value { root, path } => {
                text.push_str(&placeholder(*root, path_of(plan, *path)))
            }
        }
    }
    text
}

fn placeholder(root: TemplateRoot, fields: &[String]) -> String {
    let name = match root {
        TemplateRoot::Item if fields.is_empty() => "item",
        TemplateRoot::Item => "",
        TemplateRoot::Source => "source",
        TemplateRoot::TaskId => "id",
        TemplateRoot::Prev => "prev",
        TemplateRoot::PrevRaw => "prev_raw",
        TemplateRoot::Prevs => "prevs",
        TemplateRoot::PrevsRaw => "prevs_raw",
    };
    let mut parts: Vec<&str> = Vec::with_capacity(fields.len() + 1);
    if !name.is_empty() {
        parts.push(name);
    }
    parts.extend(fields.iter().map(String::as_str));
    format!("{{{}}}", parts.join("."))
}

fn path_of(plan: &Plan, path: u32) -> &[String] {
    plan.paths
        .get(path as usize)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Follows `fields` into `value`; `None` where a field is absent (a JSON null is a value).
/// A text value (`{prev}` holding JSON text) is read as JSON when a field is asked of it.
fn walk<'v>(value: &'v Value, fields: &[String]) -> Option<&'v Value> {
    let mut at = value;
    for field in fields {
        at = match at {
            Value::Object(map) => map.get(field)?,
            Value::Array(items) => items.get(field.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}
