//! The rules of the `workflow:` block: it has an entry flow, and takes exactly that flow's
//! input keys, with types that agree with the flow's; each parameter's `default` fits its
//! `type`, and a required parameter has none.
//!
//! Takes the AST and its workflow block; pushes diagnostics. The entry flow is the flow named
//! like the workflow, else the spec's only flow. Input keys are compared only when both
//! `input` mappings were read whole (no diagnostic inside either), so that a parameter the
//! front end dropped is not reported again as missing.

use stratum_grammar::types::{Record, Type};

use crate::diagnostic::{Code, Diagnostic, backticked};
use crate::sema::symbols::Symbols;
use crate::sema::types::ContractTypes;
use crate::source::Span;
use crate::syntax::ast::{Ast, Field, FieldDef, Flow, ParamType, Workflow, WorkflowParam};
use crate::syntax::tree::{Node, NodeKind};

pub(super) fn check(
    ast: &Ast,
    symbols: &Symbols,
    contracts: &ContractTypes,
    workflow: &Field<Workflow>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for param in workflow.value.input.iter().flat_map(|input| &input.value) {
        check_default(param, diagnostics);
    }
    let name = workflow.value.name.as_ref();
    let entry = match name {
        Some(name) => symbols.flow(ast, &name.value),
        None => None,
    };
    let entry = match (entry, ast.flows.as_slice(), name) {
        (Some(entry), _, _) => entry,
        (None, [only], _) => only,
        (None, flows, Some(name)) => {
            diagnostics.push(no_entry_flow(name, flows));
            return;
        }
        (None, _, None) => return,
    };
    let (Some(params), Some(inputs)) = (&workflow.value.input, &entry.input) else {
        return;
    };
    let reported_within = |span: Span| {
        diagnostics.iter().any(|d| {
            d.is_error()
                && d.primary.span.file == span.file
                && d.primary.span.start >= span.start
                && d.primary.span.end <= span.end
        })
    };
    if reported_within(params.key.to(params.span)) || reported_within(inputs.key.to(inputs.span)) {
        return;
    }
    let mut found = Vec::new();
    for param in &params.value {
        if !inputs
            .value
            .iter()
            .any(|input| input.name.value == param.name.value)
        {
            found.push(extra_workflow_input(param, entry, inputs));
        }
    }
    let missing: Vec<&FieldDef> = inputs
        .value
        .iter()
        .filter(|input| {
            !params
                .value
                .iter()
                .any(|param| param.name.value == input.name.value)
        })
        .collect();
    if !missing.is_empty() {
        found.push(missing_workflow_inputs(params, entry, &missing));
    }
    if let Type::Record(record) = contracts.record(&inputs.value) {
        for param in &params.value {
            found.extend(type_mismatch(param, entry, &record, inputs));
        }
    }
    diagnostics.extend(found);
}

/// A parameter's `default` against its `type`, and `required: true` beside a `default`.
fn check_default(param: &WorkflowParam, diagnostics: &mut Vec<Diagnostic>) {
    let Some(default) = &param.default else {
        return;
    };
    if let Some(required) = param.required.as_ref().filter(|required| required.value) {
        diagnostics.push(default_never_applies(param, required, default));
    }
    let Some(ty) = &param.ty else {
        return;
    };
    let fits = match (&default.value.kind, ty.value) {
        // `default: ~` is no default: the reference reads the key with `.get`, which gives
        // `None` either way.
        (NodeKind::Null | NodeKind::Invalid, _) => true,
        (NodeKind::Str(_), ParamType::String)
        | (NodeKind::Bool(_), ParamType::Boolean)
        | (NodeKind::Int(_), ParamType::Integer | ParamType::Number)
        | (NodeKind::Float(_), ParamType::Number)
        | (NodeKind::Seq(_), ParamType::Array)
        | (NodeKind::Map(_), ParamType::Object) => true,
        _ => false,
    };
    if !fits {
        diagnostics.push(default_type_mismatch(param, ty, &default.value));
    }
}

/// What a YAML value is, in the words of the workflow's types.
fn value_kind(node: &Node) -> &'static str {
    match &node.kind {
        NodeKind::Null => "null",
        NodeKind::Bool(_) => "a boolean",
        NodeKind::Int(_) => "an integer",
        NodeKind::Float(_) => "a number",
        NodeKind::Str(_) => "a string",
        NodeKind::Seq(_) => "an array",
        NodeKind::Map(_) => "an object",
        NodeKind::Invalid => "a value",
    }
}

/// E0067 `workflow-default-type`: a parameter's `default` that is not of its `type`. Why: a
/// caller that leaves the input out gets a value the flow's input schema rejects. Fix: write
/// the default as a value of the type (unquoted for a number or boolean), or change the type.
fn default_type_mismatch(
    param: &WorkflowParam,
    ty: &Field<ParamType>,
    default: &Node,
) -> Diagnostic {
    let type_name = ty.value.as_str();
    let diagnostic = Diagnostic::new(
        Code::E0067,
        format!(
            "the default of `{}` is {}, but its type is `{type_name}`",
            param.name.value,
            value_kind(default)
        ),
        default.span,
        format!("not of type `{type_name}`"),
    )
    .secondary(
        ty.span,
        format!("`{}` is declared `{type_name}` here", param.name.value),
    );
    // A quoted number or boolean is the usual slip, and unquoting it is the one fix.
    let unquoted = match (&default.kind, ty.value) {
        (NodeKind::Str(text), ParamType::Integer) => {
            text.value.trim().parse::<i64>().ok().map(|n| n.to_string())
        }
        (NodeKind::Str(text), ParamType::Number) => text
            .value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(|_| text.value.trim().to_owned()),
        (NodeKind::Str(text), ParamType::Boolean) => {
            match text.value.trim().to_ascii_lowercase().as_str() {
                "true" => Some("true".to_owned()),
                "false" => Some("false".to_owned()),
                _ => None,
            }
        }
        _ => None,
    };
    match unquoted {
        Some(value) => diagnostic
            .help(format!(
                "write the value without quotes: `default: {value}`"
            ))
            .fix(
                format!("replace the default with `{value}`"),
                default.span,
                value,
            ),
        None => {
            // The type the default has, when it is one a workflow input may declare.
            let own = match &default.kind {
                NodeKind::Str(_) => Some(ParamType::String),
                NodeKind::Bool(_) => Some(ParamType::Boolean),
                NodeKind::Int(_) => Some(ParamType::Integer),
                NodeKind::Float(_) => Some(ParamType::Number),
                NodeKind::Seq(_) => Some(ParamType::Array),
                NodeKind::Map(_) => Some(ParamType::Object),
                NodeKind::Null | NodeKind::Invalid => None,
            };
            let retype = own.map_or_else(
                || "change its `type`".to_owned(),
                |own| {
                    format!(
                        "declare it `type: {}`, the type of this default",
                        own.as_str()
                    )
                },
            );
            diagnostic.help(format!(
                "give `{}` a default that is {}, or {retype}",
                param.name.value,
                match ty.value {
                    ParamType::String => "a string",
                    ParamType::Boolean => "`true` or `false`",
                    ParamType::Integer => "a whole number",
                    ParamType::Number => "a number",
                    ParamType::Array => "a list",
                    ParamType::Object => "a mapping",
                }
            ))
        }
    }
}

/// W0006 `default-never-applies`: `required: true` beside a `default`. Why: a required input is
/// always given, so its default is never used; one of the two is a mistake. Fix: remove the
/// default, or make the input optional (`required: false`).
fn default_never_applies(
    param: &WorkflowParam,
    required: &Field<bool>,
    default: &Field<Node>,
) -> Diagnostic {
    Diagnostic::new(
        Code::W0006,
        format!(
            "`{}` is required, so its default never applies",
            param.name.value
        ),
        default.key,
        "never used",
    )
    .secondary(required.span, "every caller must give it")
    .help(format!(
        "remove the `default`, or make `{}` optional with `required: false`",
        param.name.value
    ))
    .fix("set `required: false`", required.span, "false")
}

/// The plain type a workflow parameter type stands for.
fn param_type(ty: ParamType) -> Type {
    match ty {
        ParamType::String => Type::String,
        ParamType::Boolean => Type::Bool,
        ParamType::Integer => Type::Int,
        ParamType::Number => Type::Float,
        ParamType::Array => Type::list(Type::Any),
        ParamType::Object => Type::record(Record {
            fields: Vec::new(),
            open: true,
        }),
    }
}

/// E0068 `workflow-input-type-mismatch`: a workflow parameter and the entry flow's input of
/// the same name have types that disagree. Why: what the workflow advertises to callers is
/// passed to the flow as it is, and the flow's input schema rejects it. Fix: make the two
/// types the same.
fn type_mismatch(
    param: &WorkflowParam,
    entry: &Flow,
    record: &Record,
    inputs: &Field<Vec<FieldDef>>,
) -> Option<Diagnostic> {
    let ty = param.ty.as_ref()?;
    let flow_ty = record.field(&param.name.value)?;
    let expected = param_type(ty.value);
    // An enum narrows the values of its plain type, and an optional input also takes `None`:
    // what matters is that the two are the same kind of value.
    let flow_shape = flow_ty.non_optional().widened();
    if flow_shape.accepts(&expected) {
        return None;
    }
    let declared = inputs
        .value
        .iter()
        .find(|input| input.name.value == param.name.value)?;
    let flow_written = declared
        .ty
        .as_ref()
        .map_or_else(|| flow_ty.to_string(), |ty| ty.value.clone());
    let flow = &entry.name.value;
    let name = &param.name.value;
    let type_name = ty.value.as_str();
    let diagnostic = Diagnostic::new(
        Code::E0068,
        format!(
            "the workflow's input `{name}` is `{type_name}`, but flow `{flow}` takes `{flow_written}`"
        ),
        ty.span,
        format!("disagrees with `{flow}`"),
    );
    let diagnostic = match &declared.ty {
        Some(flow_type) => diagnostic.secondary(
            flow_type.span,
            format!("`{flow}` declares `{name}` as `{flow_written}` here"),
        ),
        None => diagnostic,
    };
    let same = match flow_shape {
        Type::String => Some("string"),
        Type::Bool => Some("boolean"),
        Type::Int => Some("integer"),
        Type::Float => Some("number"),
        Type::List(_) => Some("array"),
        Type::Record(_) => Some("object"),
        _ => None,
    };
    Some(match same {
        Some(same) => diagnostic
            .help(format!(
                "declare the workflow's `{name}` as `type: {same}`, the type flow `{flow}` takes"
            ))
            .fix(
                format!("replace `{type_name}` with `{same}`"),
                ty.span,
                same,
            ),
        None => diagnostic.help(format!(
            "make the workflow's `{name}` and the input of flow `{flow}` the same type"
        )),
    })
}

/// E0065 `no-entry-flow`: no flow is named like the workflow, and the spec does not have
/// exactly one flow. Why: the workflow runs its entry flow; the server cannot tell which one
/// that is. Fix: name the entry flow like the workflow, or the workflow like the entry flow.
fn no_entry_flow(name: &Field<String>, flows: &[Flow]) -> Diagnostic {
    let names: Vec<&str> = flows.iter().map(|flow| flow.name.value.as_str()).collect();
    let (message, help) = match names.as_slice() {
        [] => (
            format!(
                "workflow `{}` has no flow to run: the spec has no flows",
                name.value
            ),
            format!("add a flow named `{}`", name.value),
        ),
        _ => (
            format!(
                "no flow is named `{}`, and with {} flows the workflow's entry flow is ambiguous",
                name.value,
                names.len()
            ),
            format!(
                "name the entry flow `{}`, or rename the workflow after one of {}",
                name.value,
                backticked(&names)
            ),
        ),
    };
    Diagnostic::new(Code::E0065, message, name.span, "matches no flow").help(help)
}

/// E0066 `workflow-input-mismatch`, for a key the entry flow does not take. Why: the workflow's
/// input is what callers pass to the entry flow; the reference rejects any difference. Fix:
/// remove the key, or add it to the flow's `input`.
fn extra_workflow_input(
    param: &WorkflowParam,
    entry: &Flow,
    inputs: &Field<Vec<FieldDef>>,
) -> Diagnostic {
    let flow = &entry.name.value;
    Diagnostic::new(
        Code::E0066,
        format!(
            "the workflow takes `{}`, but its entry flow `{flow}` does not",
            param.name.value
        ),
        param.name.span,
        format!("not an input of `{flow}`"),
    )
    .secondary(inputs.key, format!("the input of `{flow}`"))
    .help(format!(
        "remove `{}` from the workflow's input, or add it to the input of flow `{flow}`",
        param.name.value
    ))
}

/// E0066 `workflow-input-mismatch`, for keys of the entry flow the workflow does not take.
fn missing_workflow_inputs(
    params: &Field<Vec<WorkflowParam>>,
    entry: &Flow,
    missing: &[&FieldDef],
) -> Diagnostic {
    let flow = &entry.name.value;
    let names: Vec<&str> = missing
        .iter()
        .map(|input| input.name.value.as_str())
        .collect();
    let mut diagnostic = Diagnostic::new(
        Code::E0066,
        format!(
            "the workflow's input lacks {} of its entry flow `{flow}`",
            backticked(&names)
        ),
        params.key,
        format!("no {}", backticked(&names)),
    );
    for input in missing {
        diagnostic = diagnostic.secondary(
            input.name.span,
            format!("`{flow}` takes `{}`", input.name.value),
        );
    }
    let (them, its) = if names.len() == 1 {
        ("it", "its")
    } else {
        ("them", "their")
    };
    diagnostic.help(format!(
        "add {} to the workflow's `input` (with {its} `type`), or remove {them} from the input of flow `{flow}`",
        backticked(&names)
    ))
}
