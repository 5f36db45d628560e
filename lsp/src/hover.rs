//! Hover: Markdown about the name or key under the cursor.
//!
//! On a contract, function, flow, step or field name (a definition, a YAML reference or a name
//! inside an expression string), what the model knows of it: a contract's fields and schema
//! hash; a function's mode, intent, signature, `ensure`s and retries; a flow's signature and
//! steps; a step's kind, what it runs, its output type and what it depends on; a field's type
//! and the line it is declared on. On an identifier of an intent template's placeholder, its
//! type and what it reads, as the checker scopes it ([`crate::placeholders`]). On a key, its
//! line of the format reference ([`crate::key_docs`]).

use std::fmt::Write as _;

use stratum_compiler::sema::dag::EdgeKind;
use stratum_compiler::sema::fan_out::Reading;
use stratum_compiler::sema::resolve::StepKind;
use stratum_compiler::sema::symbols::flow_steps;
use stratum_compiler::sema::types::{Bounds, FieldType};
use stratum_compiler::source::Span;
use stratum_compiler::syntax::ast::{Budget, Field, FieldDef, Mode, Stage};
use stratum_compiler::syntax::tree::{Node, NodeKind};

use crate::analysis::Analysis;
use crate::index::{Index, Symbol, name_span};
use crate::key_docs::{self, KeyPlace};
use crate::placeholders;

/// Longest type text shown before it is cut.
const MAX_TYPE_TEXT: usize = 160;
/// Most step names listed on a flow's hover.
const MAX_LISTED_STEPS: usize = 12;

/// The span hovered and its Markdown, when the cursor is on a name or a key.
pub fn hover(analysis: &Analysis, offset: usize) -> Option<(Span, String)> {
    hover_in(analysis, &Index::new(analysis), offset)
}

pub fn hover_in(analysis: &Analysis, index: &Index, offset: usize) -> Option<(Span, String)> {
    if let Some(found) = placeholder(analysis, index, offset) {
        return Some(found);
    }
    if let Some(occurrence) = index.at(offset) {
        let text = match &occurrence.symbol {
            Symbol::Contract(name) => contract(analysis, name),
            Symbol::Function(name) => function(analysis, name),
            Symbol::Flow(name) => flow(analysis, name),
            Symbol::Step { flow, id } => step(analysis, *flow, id),
            Symbol::ContractField { contract, field } => contract_field(analysis, contract, field),
            Symbol::FlowInput { flow, field } => flow_input(analysis, *flow, field),
        };
        if let Some(text) = text {
            return Some((occurrence.span, text));
        }
    }
    key(analysis, offset)
}

fn line_of(analysis: &Analysis, span: Span) -> u32 {
    analysis.position(span.start as usize).line + 1
}

fn cut(text: String) -> String {
    if text.chars().count() <= MAX_TYPE_TEXT {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_TYPE_TEXT).collect();
    cut.push('…');
    cut
}

/// A field type as a spec may write it: literals, ranges, `[]` and `?`.
fn type_text(ty: &FieldType) -> String {
    /// `name[low..high]`; floats keep their point (`0.0`), as a spec writes them.
    fn bounds<T: std::fmt::Debug>(name: &str, bounds: &Bounds<T>) -> String {
        if bounds.is_empty() {
            return name.to_owned();
        }
        let show = |bound: &Option<T>| {
            bound
                .as_ref()
                .map_or(String::new(), |bound| format!("{bound:?}"))
        };
        format!(
            "{name}[{}..{}]",
            show(&bounds.minimum),
            show(&bounds.maximum)
        )
    }
    fn wrapped(ty: &FieldType) -> String {
        match ty {
            FieldType::Enum(values) if values.len() > 1 => format!("({})", type_text(ty)),
            _ => type_text(ty),
        }
    }
    match ty {
        FieldType::String(b) => bounds("string", b),
        FieldType::Number(b) => bounds("number", b),
        FieldType::Integer(b) => bounds("integer", b),
        FieldType::Enum(values) => values
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" | "),
        FieldType::Array(Some(item)) => format!("{}[]", wrapped(item)),
        FieldType::Optional(inner) => format!("{}?", wrapped(inner)),
        other => other.describe(),
    }
}

/// The type of an `input` parameter as written.
fn param_type(def: &FieldDef) -> String {
    def.ty
        .as_ref()
        .map_or_else(|| "any".to_owned(), |ty| ty.value.clone())
}

fn signature(inputs: Option<&Field<Vec<FieldDef>>>, output: Option<&Field<String>>) -> String {
    let inputs: Vec<String> = inputs
        .iter()
        .flat_map(|inputs| &inputs.value)
        .map(|def| format!("{}: {}", def.name.value, param_type(def)))
        .collect();
    let output = output.map_or("(no output contract)", |output| output.value.as_str());
    cut(format!("({}) → {output}", inputs.join(", ")))
}

fn contract(analysis: &Analysis, name: &str) -> Option<String> {
    let model = &analysis.compilation.model;
    let def = model.symbols.contract(&analysis.compilation.ast, name)?;
    let mut text = format!("**contract** `{name}`\n");
    match model.contracts.fields(name) {
        Some(fields) if !fields.is_empty() => {
            text.push('\n');
            for field in fields {
                let _ = writeln!(text, "- `{}`: `{}`", field.name, cut(type_text(&field.ty)));
            }
        }
        Some(_) => text.push_str("\nno fields\n"),
        None => {
            // Types that did not resolve were reported; show what is written.
            text.push('\n');
            for field in &def.fields {
                let _ = writeln!(text, "- `{}`: `{}`", field.name.value, param_type(field));
            }
        }
    }
    if let Some(hash) = model.contracts.hash(name) {
        let _ = write!(text, "\nJSON Schema hash `{hash}`");
    }
    Some(text.trim_end().to_owned())
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Infer => "infer",
        Mode::Compute => "compute",
        Mode::Gate => "gate",
    }
}

fn function(analysis: &Analysis, name: &str) -> Option<String> {
    let def = analysis
        .compilation
        .model
        .symbols
        .function(&analysis.compilation.ast, name)?;
    let mode = def.mode.as_ref().map(|mode| mode.value);
    let mut text = format!("**function** `{name}`");
    if let Some(mode) = mode {
        let _ = write!(text, " · `{}`", mode_name(mode));
    }
    text.push_str("\n\n");
    if let Some(intent) = &def.intent {
        let _ = writeln!(text, "{}\n", intent.value.trim());
    }
    if mode == Some(Mode::Gate) {
        text.push_str("waits for approval, revision or a kill");
        if let Some(timeout) = &def.timeout {
            let _ = write!(text, "; killed after {} s", timeout.value);
        }
        text.push('\n');
    } else {
        let _ = writeln!(
            text,
            "`{}`",
            signature(def.input.as_ref(), def.output.as_ref())
        );
        let ensures: Vec<&str> = def
            .ensure
            .iter()
            .flat_map(|ensure| &ensure.value)
            .map(|text| text.value.as_str())
            .collect();
        if !ensures.is_empty() {
            text.push_str("\nensure:\n");
            for ensure in ensures {
                let _ = writeln!(text, "- `{}`", cut(ensure.to_owned()));
            }
        }
        match &def.retries {
            Some(retries) => {
                let _ = write!(text, "\nretries: {}", retries.value);
            }
            None => text.push_str("\nretries: 3 (default)"),
        }
    }
    Some(text.trim_end().to_owned())
}

fn flow(analysis: &Analysis, name: &str) -> Option<String> {
    let def = analysis
        .compilation
        .model
        .symbols
        .flow(&analysis.compilation.ast, name)?;
    let mut text = format!(
        "**flow** `{name}`\n\n`{}`\n",
        signature(def.input.as_ref(), def.output.as_ref())
    );
    let steps: Vec<String> = flow_steps(def)
        .iter()
        .filter_map(|step| step.id.as_ref())
        .map(|id| format!("`{}`", id.value))
        .collect();
    let count = steps.len();
    let listed: Vec<&str> = steps
        .iter()
        .take(MAX_LISTED_STEPS)
        .map(String::as_str)
        .collect();
    let more = if count > MAX_LISTED_STEPS {
        ", …"
    } else {
        ""
    };
    let noun = if count == 1 { "step" } else { "steps" };
    let _ = write!(text, "\n{count} {noun}: {}{more}", listed.join(", "));
    Some(text.trim_end().to_owned())
}

fn step(analysis: &Analysis, flow: usize, id: &str) -> Option<String> {
    let ast = &analysis.compilation.ast;
    let model = &analysis.compilation.model;
    let index = model.symbols.steps.get(flow)?.get(id)?;
    let flow_def = ast.flows.get(flow)?;
    let def = flow_steps(flow_def).get(index)?;
    let flow_model = model.flows.get(flow)?;
    let info = flow_model.steps.get(index)?;
    let mut text = format!(
        "**{}** `{id}` in flow `{}`\n\n",
        info.kind.noun(),
        flow_def.name.value
    );
    match info.kind {
        StepKind::Function(function) | StepKind::Gate(function) => {
            if let Some(function) = ast.functions.get(function) {
                let _ = writeln!(text, "runs function `{}`", function.name.value);
            }
        }
        StepKind::Flow(called) => {
            if let Some(called) = ast.flows.get(called) {
                let _ = writeln!(text, "runs flow `{}`", called.name.value);
            }
        }
        StepKind::Inline | StepKind::Decompose => {
            if let Some(intent) = &def.intent {
                let _ = writeln!(text, "intent: {}", cut(intent.value.trim().to_owned()));
            }
        }
        StepKind::Parallel | StepKind::Pipeline => {
            if let Some(source) = &def.source {
                let _ = writeln!(text, "fans out over `{}`", source.value.value);
            }
            if let Some(template) = &def.intent_template {
                let _ = writeln!(
                    text,
                    "each task: {}",
                    cut(template.value.value.trim().to_owned())
                );
            }
            if let Some(stages) = &def.stages {
                let _ = writeln!(text, "{} stages", stages.value.len());
            }
        }
        StepKind::Judge | StepKind::Unknown => {}
    }
    if !matches!(info.kind, StepKind::Gate(_)) {
        let output = match &info.contract {
            Some(contract) if def.skip_if.is_some() => {
                format!("`{contract}?` (`None` when skipped)")
            }
            Some(contract) => format!("`{contract}`"),
            None => format!("`{}`", cut(info.output.to_string())),
        };
        let _ = writeln!(text, "\noutput: {output}");
    }
    // Incoming edges, grouped by the step they come from, in declaration order.
    let mut needs: Vec<(usize, Vec<&'static str>)> = Vec::new();
    for edge in flow_model.dag.graph.raw_edges() {
        if edge.target().index() != index {
            continue;
        }
        let kind = match edge.weight.kind {
            EdgeKind::DependsOn => "depends_on",
            EdgeKind::Input => "input",
            EdgeKind::SkipIf => "skip_if",
            EdgeKind::Source => "source",
        };
        let from = edge.source().index();
        match needs.iter_mut().find(|(step, _)| *step == from) {
            Some((_, kinds)) => {
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            None => needs.push((from, vec![kind])),
        }
    }
    needs.sort();
    if needs.is_empty() {
        text.push_str("\ndepends on no step");
    } else {
        text.push_str("\ndepends on:\n");
        let steps = flow_steps(flow_def);
        for (from, kinds) in needs {
            let name = steps
                .get(from)
                .and_then(|step| step.id.as_ref())
                .map_or("?", |id| id.value.as_str());
            let _ = writeln!(text, "- `{name}` ({})", kinds.join(", "));
        }
    }
    Some(text.trim_end().to_owned())
}

fn contract_field(analysis: &Analysis, contract: &str, field: &str) -> Option<String> {
    let model = &analysis.compilation.model;
    let def = model
        .symbols
        .contract(&analysis.compilation.ast, contract)?
        .fields
        .iter()
        .find(|def| def.name.value == field)?;
    let ty = model
        .contracts
        .fields(contract)
        .and_then(|fields| fields.iter().find(|resolved| resolved.name == field))
        .map_or_else(|| param_type(def), |resolved| type_text(&resolved.ty));
    let mut text = format!(
        "**field** `{field}` of contract `{contract}`: `{}`\n\n",
        cut(ty)
    );
    if let Some(description) = &def.description {
        let _ = writeln!(text, "{}\n", description.value.trim());
    }
    let _ = write!(
        text,
        "declared on line {}",
        line_of(analysis, def.name.span)
    );
    Some(text)
}

fn flow_input(analysis: &Analysis, flow: usize, field: &str) -> Option<String> {
    let flow_def = analysis.compilation.ast.flows.get(flow)?;
    let def = flow_def
        .input
        .as_ref()?
        .value
        .iter()
        .find(|def| def.name.value == field)?;
    let mut text = format!(
        "**input** `{field}` of flow `{}`: `{}`\n\n",
        flow_def.name.value,
        cut(param_type(def))
    );
    if let Some(description) = &def.description {
        let _ = writeln!(text, "{}\n", description.value.trim());
    }
    let _ = write!(
        text,
        "declared on line {}",
        line_of(analysis, def.name.span)
    );
    Some(text)
}

// ----- placeholders ----------------------------------------------------------------------------

/// The identifier of an intent template's placeholder under `offset`: the placeholder as far
/// as that identifier, its type, and what it reads.
fn placeholder(analysis: &Analysis, index: &Index, offset: usize) -> Option<(Span, String)> {
    let (located, position) = placeholders::at(&analysis.compilation, offset)?;
    let segments = &located.placeholder.segments;
    let (name, span, reading) = segments.get(position)?;
    let path: Vec<&str> = segments
        .iter()
        .take(position + 1)
        .map(|(name, _, _)| name.as_str())
        .collect();
    let shown = format!("{{{}}}", path.join("."));
    let text = match reading {
        Reading::Name { ty, element } => format!(
            "**`{shown}`**: `{}`\n\n{}",
            cut(ty.to_string()),
            placeholders::name_doc(name, *element)
        ),
        Reading::Field { ty, spread } => {
            let mut text = format!("**`{shown}`**: `{}`\n\n", cut(ty.to_string()));
            let field = match index.at(offset).map(|occurrence| &occurrence.symbol) {
                Some(Symbol::ContractField { contract, field }) => {
                    format!("field `{field}` of contract `{contract}`")
                }
                _ => format!("field `{name}`"),
            };
            text.push_str(&field);
            if *spread {
                text.push_str(", of the element this task fans out over");
            }
            text
        }
        Reading::Unbound(why) => format!("**`{shown}`** is not bound here\n\n{why}"),
        Reading::Missing => format!("**`{shown}`** names nothing here"),
    };
    Some((*span, text))
}

// ----- keys ------------------------------------------------------------------------------------

/// The documentation of the key under `offset`.
fn key(analysis: &Analysis, offset: usize) -> Option<(Span, String)> {
    let (span, place, name) = key_at(analysis, offset)?;
    let doc = key_docs::doc(place, &name)?;
    let place = match place {
        KeyPlace::Root => "top-level key",
        KeyPlace::ContractField => "contract field key",
        KeyPlace::InputParam => "input parameter key",
        KeyPlace::Function => "function key",
        KeyPlace::Budget => "budget key",
        KeyPlace::Flow => "flow key",
        KeyPlace::Step => "step key",
        KeyPlace::Stage => "pipeline stage key",
        KeyPlace::Fanout => "fanout key",
        KeyPlace::Judge => "judge key",
        KeyPlace::Predicate => "judge predicate key",
        KeyPlace::JudgeBudget => "judge budget key",
        KeyPlace::Certificate => "reasoning template key",
        KeyPlace::Section => "reasoning template section key",
        KeyPlace::Workflow => "workflow key",
        KeyPlace::WorkflowParam => "workflow input key",
    };
    Some((span, format!("**`{name}`** · {place}\n\n{doc}")))
}

/// Collects the keys of the document that contain an offset.
struct Keys<'a> {
    text: &'a str,
    offset: usize,
    found: Option<(Span, KeyPlace, String)>,
}

impl Keys<'_> {
    fn add(&mut self, span: Span, place: KeyPlace, name: &str) {
        let span = name_span(self.text, span, name);
        if self.found.is_none()
            && span.start as usize <= self.offset
            && self.offset <= span.end as usize
        {
            self.found = Some((span, place, name.to_owned()));
        }
    }

    fn field<T>(&mut self, field: Option<&Field<T>>, place: KeyPlace, name: &str) {
        if let Some(field) = field {
            self.add(field.key, place, name);
        }
    }

    fn field_def(&mut self, def: &FieldDef, place: KeyPlace) {
        self.field(def.ty.as_ref(), place, "type");
        self.field(def.values.as_ref(), place, "values");
        self.field(def.items.as_ref(), place, "items");
        self.field(def.optional.as_ref(), place, "optional");
        self.field(def.required.as_ref(), place, "required");
        self.field(def.description.as_ref(), place, "description");
        self.field(def.default.as_ref(), place, "default");
        self.field(def.minimum.as_ref(), place, "minimum");
        self.field(def.maximum.as_ref(), place, "maximum");
        self.field(def.min_length.as_ref(), place, "min_length");
        self.field(def.max_length.as_ref(), place, "max_length");
    }

    /// The keys of a mapping as written, and the mappings under `nested` keys (a mapping, or
    /// each mapping of a list) with their own place.
    fn written(&mut self, node: &Node, place: KeyPlace, nested: &[(&str, KeyPlace)]) {
        let NodeKind::Map(entries) = &node.kind else {
            return;
        };
        for entry in entries {
            let Some(name) = entry.key.as_str() else {
                continue;
            };
            self.add(entry.key.span, place, name);
            let Some(&(_, inner)) = nested.iter().find(|(key, _)| *key == name) else {
                continue;
            };
            match &entry.value.kind {
                NodeKind::Seq(items) => {
                    for item in items {
                        self.written(item, inner, &[]);
                    }
                }
                _ => self.written(&entry.value, inner, &[]),
            }
        }
    }

    fn judge(&mut self, judge: &Node) {
        self.written(
            judge,
            KeyPlace::Judge,
            &[
                ("predicates", KeyPlace::Predicate),
                ("budget", KeyPlace::JudgeBudget),
            ],
        );
    }

    fn certificate(&mut self, template: &Node) {
        self.written(
            template,
            KeyPlace::Certificate,
            &[("sections", KeyPlace::Section)],
        );
    }

    fn stage(&mut self, stage: &Stage) {
        let place = KeyPlace::Stage;
        self.field(stage.intent_template.as_ref(), place, "intent_template");
        self.field(stage.agent.as_ref(), place, "agent");
        self.field(
            stage.task_reasoning_template.as_ref(),
            place,
            "task_reasoning_template",
        );
        self.field(stage.task_timeout.as_ref(), place, "task_timeout");
        self.field(stage.when.as_ref(), place, "when");
        self.field(stage.exit_when.as_ref(), place, "exit_when");
        self.field(stage.fanout.as_ref(), place, "fanout");
        self.field(stage.join.as_ref(), place, "join");
        if let Some(fanout) = &stage.fanout {
            self.field(fanout.value.max.as_ref(), KeyPlace::Fanout, "max");
            self.field(fanout.value.require.as_ref(), KeyPlace::Fanout, "require");
        }
    }

    fn budget(&mut self, budget: Option<&Field<Budget>>) {
        let Some(budget) = budget else {
            return;
        };
        let budget = &budget.value;
        self.field(budget.ms.as_ref(), KeyPlace::Budget, "ms");
        self.field(budget.usd.as_ref(), KeyPlace::Budget, "usd");
        self.field(
            budget.max_agent_dispatches.as_ref(),
            KeyPlace::Budget,
            "max_agent_dispatches",
        );
        self.field(budget.max_tokens.as_ref(), KeyPlace::Budget, "max_tokens");
    }
}

fn key_at(analysis: &Analysis, offset: usize) -> Option<(Span, KeyPlace, String)> {
    let text = analysis.text.as_str();
    let ast = &analysis.compilation.ast;
    // Top-level keys have no span in the AST: they are the lines that start with one.
    let line_start = text.get(..offset).map_or(0, |before| {
        before.rfind(['\n', '\r']).map_or(0, |at| at + 1)
    });
    let line = text.get(line_start..).unwrap_or("");
    for key in ["version", "contracts", "functions", "flows", "workflow"] {
        if let Some(rest) = line.strip_prefix(key)
            && rest.trim_start_matches([' ', '\t']).starts_with(':')
            && offset <= line_start + key.len()
        {
            let span = Span::new(analysis.file_id(), line_start..line_start + key.len());
            return Some((span, KeyPlace::Root, key.to_owned()));
        }
    }
    let mut keys = Keys {
        text,
        offset,
        found: None,
    };
    for contract in &ast.contracts {
        for def in &contract.fields {
            keys.field_def(def, KeyPlace::ContractField);
        }
    }
    for function in &ast.functions {
        for key in &function.keys {
            keys.add(key.span, KeyPlace::Function, &key.value);
        }
        for def in function.input.iter().flat_map(|input| &input.value) {
            keys.field_def(def, KeyPlace::InputParam);
        }
        keys.budget(function.budget.as_ref());
    }
    for flow in &ast.flows {
        keys.field(flow.input.as_ref(), KeyPlace::Flow, "input");
        keys.field(flow.output.as_ref(), KeyPlace::Flow, "output");
        keys.field(flow.budget.as_ref(), KeyPlace::Flow, "budget");
        keys.field(flow.max_rounds.as_ref(), KeyPlace::Flow, "max_rounds");
        keys.field(flow.steps.as_ref(), KeyPlace::Flow, "steps");
        for def in flow.input.iter().flat_map(|input| &input.value) {
            keys.field_def(def, KeyPlace::InputParam);
        }
        keys.budget(flow.budget.as_ref());
        for step in flow_steps(flow) {
            for key in &step.keys {
                keys.add(key.span, KeyPlace::Step, &key.value);
            }
            keys.budget(step.budget.as_ref());
            if let Some(judge) = &step.judge {
                keys.judge(&judge.value.written);
            }
            for template in [&step.reasoning_template, &step.task_reasoning_template]
                .into_iter()
                .flatten()
            {
                keys.certificate(&template.value);
            }
            for stage in step.stages.iter().flat_map(|stages| &stages.value) {
                keys.stage(stage);
                if let Some(template) = &stage.task_reasoning_template {
                    keys.certificate(&template.value);
                }
            }
        }
    }
    if let Some(workflow) = &ast.workflow {
        let workflow = &workflow.value;
        keys.field(workflow.name.as_ref(), KeyPlace::Workflow, "name");
        keys.field(
            workflow.description.as_ref(),
            KeyPlace::Workflow,
            "description",
        );
        keys.field(workflow.input.as_ref(), KeyPlace::Workflow, "input");
        for param in workflow.input.iter().flat_map(|input| &input.value) {
            keys.field(param.ty.as_ref(), KeyPlace::WorkflowParam, "type");
            keys.field(param.required.as_ref(), KeyPlace::WorkflowParam, "required");
            keys.field(param.default.as_ref(), KeyPlace::WorkflowParam, "default");
        }
    }
    keys.found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    const SPEC: &str = r#"version: "0.2"
contracts:
  Finding:
    title: {type: string, description: "A short title"}
    severity: {type: "'low' | 'high'"}
    score: {type: "float[0.0..1.0]"}
  Report:
    summary: {type: string}
    findings: {type: "Finding[]"}
functions:
  scan_code:
    mode: infer
    intent: "Scan the code for problems"
    input: {path: {type: string}, depth: {type: integer}}
    output: Report
    ensure:
      - "len(result.summary) > 0"
    retries: 2
  sign_off:
    mode: gate
    timeout: 3600
flows:
  review:
    input:
      path: {type: string}
      strict: {type: "boolean?"}
    output: Report
    steps:
      - id: scan
        function: scan_code
        inputs: {path: "$.input.path", depth: 3}
      - id: triage
        intent: "Triage the findings"
        inputs: {summary: "$.steps.scan.output.summary"}
        output_contract: Report
        depends_on: [scan]
        skip_if: "$.input.strict == False"
        max_iterations: 3
        exit_criterion: "all(f.score > 0.5 for f in result.findings)"
      - id: approve
        function: sign_off
        depends_on: [triage]
        on_approve: ~
        on_revise: triage
        on_kill: ~
"#;

    fn analysis() -> Analysis {
        crate::analysis::clean(SPEC)
    }

    /// The hover at `into` bytes into the `nth` occurrence of `needle`, with the hovered text.
    fn hover_at(analysis: &Analysis, needle: &str, nth: usize, into: usize) -> String {
        let offset = SPEC.match_indices(needle).nth(nth).unwrap().0 + into;
        let (span, text) = hover(analysis, offset).unwrap();
        format!("[{}]\n{text}", analysis.slice(span))
    }

    #[test]
    fn hover_on_a_contract() {
        let analysis = analysis();
        insta::assert_snapshot!(hover_at(&analysis, "Finding:", 0, 1));
        // A reference in a `type:` text gives the same.
        let reference = hover_at(&analysis, "Finding[]", 0, 1);
        assert_eq!(reference, hover_at(&analysis, "Finding:", 0, 1));
    }

    #[test]
    fn hover_on_functions() {
        let analysis = analysis();
        insta::assert_snapshot!(
            "function",
            hover_at(&analysis, "function: scan_code", 0, 12)
        );
        insta::assert_snapshot!("gate_function", hover_at(&analysis, "sign_off:", 0, 0));
    }

    #[test]
    fn hover_on_a_flow() {
        let analysis = analysis();
        insta::assert_snapshot!(hover_at(&analysis, "review:", 0, 0));
    }

    #[test]
    fn hover_on_steps() {
        let analysis = analysis();
        insta::assert_snapshot!("step_reference", hover_at(&analysis, "$.steps.scan", 0, 9));
        insta::assert_snapshot!(
            "inline_step",
            hover_at(&analysis, "on_revise: triage", 0, 12)
        );
        insta::assert_snapshot!("gate_step", hover_at(&analysis, "id: approve", 0, 5));
    }

    #[test]
    fn hover_on_fields_inside_expressions() {
        let analysis = analysis();
        insta::assert_snapshot!("flow_input", hover_at(&analysis, "$.input.strict", 0, 9));
        insta::assert_snapshot!("result_field", hover_at(&analysis, "result.findings", 0, 8));
        // Through a generator variable bound to the items of `result.findings`.
        insta::assert_snapshot!("generator_field", hover_at(&analysis, "f.score", 0, 3));
    }

    #[test]
    fn hover_on_keys() {
        let analysis = analysis();
        let keys: Vec<String> = [
            ("version:", 0, 1),
            ("flows:", 0, 5),
            ("mode: infer", 0, 0),
            ("depends_on: [scan]", 0, 3),
            ("max_iterations", 0, 0),
            ("type: \"boolean?\"", 0, 2),
            ("output: Report", 1, 1),
            ("timeout", 0, 1),
        ]
        .into_iter()
        .map(|(needle, nth, into)| hover_at(&analysis, needle, nth, into))
        .collect();
        insta::assert_snapshot!(keys.join("\n\n"));
        // A value is not a key.
        let offset = SPEC.find("mode: infer").unwrap() + 7;
        assert_eq!(hover(&analysis, offset), None);
    }

    #[test]
    fn hover_on_judge_and_reasoning_template_keys() {
        let spec = r#"version: "0.3"
flows:
  review:
    input: {diff: {type: string}}
    steps:
      - id: review
        intent: "Review the diff"
        inputs: {diff: "$.input.diff"}
        reasoning_template:
          require_citations: true
          sections: [{id: p, label: Premises, description: "The facts"}]
      - id: check
        depends_on: [review]
        judge:
          stakes: default
          predicates:
            - {id: tests, type: deterministic, statement: "file_exists('artifacts/log.txt')", applied_gate: 8}
          budget: {max_turns: 3}
"#;
        let analysis = crate::analysis::clean(spec);
        let at = |needle: &str| {
            let offset = spec.find(needle).unwrap() + 1;
            let (span, text) = hover(&analysis, offset).unwrap();
            let first = text.lines().next().unwrap_or_default().to_owned();
            format!("[{}] {first}", analysis.slice(span))
        };
        assert_eq!(
            at("require_citations"),
            "[require_citations] **`require_citations`** · reasoning template key"
        );
        assert_eq!(
            at("label: Premises"),
            "[label] **`label`** · reasoning template section key"
        );
        assert_eq!(at("stakes"), "[stakes] **`stakes`** · judge key");
        assert_eq!(
            at("applied_gate"),
            "[applied_gate] **`applied_gate`** · judge predicate key"
        );
        assert_eq!(
            at("max_turns"),
            "[max_turns] **`max_turns`** · judge budget key"
        );
        // `type` inside a predicate is the predicate's, not a step's.
        let (_, text) = hover(&analysis, spec.find("type: deterministic").unwrap() + 1).unwrap();
        assert!(text.contains("`deterministic` (an expression"), "{text}");
    }

    /// The hover at `into` bytes into the first occurrence of `needle` in the v0.3 spec.
    fn hover_v03(needle: &str, into: usize) -> String {
        let spec = crate::placeholders::V03_SPEC;
        let analysis = crate::analysis::clean(spec);
        let offset = spec.find(needle).unwrap() + into;
        let (span, text) = hover(&analysis, offset).unwrap();
        format!("[{}]\n{text}", analysis.slice(span))
    }

    #[test]
    fn hover_on_placeholders() {
        assert_eq!(
            hover_v03("{description}", 3),
            "[description]\n**`{description}`**: `string`\n\nfield `description` of contract \
             `Task`, of the element this task fans out over"
        );
        assert_eq!(
            hover_v03("{task.id}", 7),
            "[id]\n**`{task.id}`**: `string`\n\nfield `id` of contract `Task`"
        );
        assert!(
            hover_v03("{task.id}", 2).starts_with("[task]\n**`{task}`**: `{id: string"),
            "{}",
            hover_v03("{task.id}", 2)
        );
        assert_eq!(
            hover_v03("{prev} for", 2),
            "[prev]\n**`{prev}`**: `string`\n\nThe previous result, as text (a task's single \
             dependency, or the stage before)."
        );
        assert_eq!(
            hover_v03("{item} of", 2),
            "[item]\n**`{item}`**: `any`\n\nThe lane's element: one of the list the `fanout` \
             stage answered."
        );
    }

    #[test]
    fn hover_on_stage_and_fanout_keys() {
        let join = hover_v03("join: true", 1);
        assert!(
            join.starts_with("[join]\n**`join`** · pipeline stage key"),
            "{join}"
        );
        let max = hover_v03("max: 3", 0);
        assert!(max.starts_with("[max]\n**`max`** · fanout key"), "{max}");
        let template = hover_v03("intent_template: \"Review", 3);
        assert!(template.contains("pipeline stage key"), "{template}");
    }

    #[test]
    fn hover_on_a_placeholder_not_bound_there() {
        let spec = crate::placeholders::V03_SPEC.replacen("{description}\"", "{item}\"", 1);
        let analysis = Analysis::new("spec.stratum.yaml", &spec);
        let offset = spec.find("{item}\"").unwrap() + 2;
        let (span, text) = hover(&analysis, offset).unwrap();
        assert_eq!(analysis.slice(span), "item");
        assert!(
            text.starts_with("**`{item}`** is not bound here\n\n"),
            "{text}"
        );
    }
}
