//! The YAML tree → the typed [`Ast`], with a diagnostic for every structural problem.
//!
//! Takes the root [`Node`] of a spec; gives its [`Ast`] and pushes diagnostics for unknown keys
//! (with a did-you-mean over the keys valid at that place), values of the wrong type, missing
//! required keys, version problems, out-of-range and empty values, and duplicate step ids.
//!
//! Invariant: one mistake, one diagnostic. A value that was reported is left out of the AST
//! (its field is `None`), a key that was reported as unknown is not read, and a missing key is
//! reported only when the key is absent, never because its value was invalid. A spec whose
//! version is unknown is read by the version 0.2 rules, so its other errors still show.

use std::collections::HashMap;

use crate::diagnostic::{Code, Diagnostic, backticked, did_you_mean};
use crate::source::{SourceFile, Span};
use crate::syntax::ast::*;
use crate::syntax::keys::{self, Key, Required, Shape};
use crate::syntax::scalar::{ScalarMap, ScalarStyle};
use crate::syntax::tree::{Entry, Node, NodeKind};

/// Reads a spec whose root is a mapping.
pub fn read(root: &Node, src: &SourceFile, diagnostics: &mut Vec<Diagnostic>) -> Ast {
    let mut cx = Reader {
        src,
        version: Version::V0_2,
        version_value: None,
        diagnostics,
    };
    let mut ast = Ast {
        span: root.span,
        ..Ast::default()
    };
    let NodeKind::Map(entries) = &root.kind else {
        return ast;
    };
    match cx.read_version(root, entries) {
        VersionRead::Supported(version) => ast.version = Some(version),
        VersionRead::Unknown => {}
    }
    let Some(map) = cx.map(root, &keys::ROOT, root.span) else {
        return ast;
    };
    ast.contracts = map
        .get("contracts")
        .map(|value| cx.named(value, "contracts", Reader::contract))
        .unwrap_or_default();
    ast.functions = map
        .get("functions")
        .map(|value| cx.named(value, "functions", Reader::function))
        .unwrap_or_default();
    ast.flows = map
        .get("flows")
        .map(|value| cx.named(value, "flows", Reader::flow))
        .unwrap_or_default();
    ast.workflow = map
        .entry("workflow")
        .and_then(|entry| cx.field(entry, |cx, node| cx.workflow(node, entry.key.span)));
    ast
}

/// Keys people write for another one, too far from it for a did-you-mean, each with the keys
/// it may stand for (the first valid at its place is suggested): `output_fields` is what the
/// runtime's dispatches call the fields to report, and agents write it back into specs.
const KEY_ALIASES: &[(&str, &[&str])] = &[
    ("output_fields", &["output_contract", "output"]),
    ("postconditions", &["ensure"]),
];

struct Reader<'a> {
    src: &'a SourceFile,
    /// The version the spec is read by.
    version: Version,
    /// The `version` value's span, for fixes that raise it.
    version_value: Option<Span>,
    diagnostics: &'a mut Vec<Diagnostic>,
}

enum VersionRead {
    Supported(Field<Version>),
    Unknown,
}

/// The entries of a mapping that passed its shape check, by key.
struct Entries<'t> {
    entries: Vec<&'t Entry>,
}

impl<'t> Entries<'t> {
    fn entry(&self, key: &str) -> Option<&'t Entry> {
        self.entries
            .iter()
            .copied()
            .find(|entry| entry.key.as_str() == Some(key))
    }

    fn get(&self, key: &str) -> Option<&'t Node> {
        self.entry(key).map(|entry| &entry.value)
    }
}

impl Reader<'_> {
    fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    // ----- version -------------------------------------------------------------------------

    fn read_version(&mut self, root: &Node, entries: &[Entry]) -> VersionRead {
        let Some(entry) = entries.iter().find(|e| e.key.as_str() == Some("version")) else {
            let at = Span::point(root.span.file, root.span.start as usize);
            self.push(
                Diagnostic::new(
                    Code::E0014,
                    "the spec has no `version`",
                    at,
                    "`version` is missing",
                )
                .help(
                    "start the spec with `version: \"0.2\"` (or `\"0.1\"` for the original format)",
                )
                .fix("add `version: \"0.2\"`", at, "version: \"0.2\"\n"),
            );
            return VersionRead::Unknown;
        };
        let value = &entry.value;
        self.version_value = Some(value.span);
        let written = match &value.kind {
            NodeKind::Str(s) => s.value.clone(),
            NodeKind::Float(f) if *f == 0.1 || *f == 0.2 || *f == 0.3 => {
                let text = self.src.slice(value.span).to_owned();
                self.push(
                    Diagnostic::new(
                        Code::E0012,
                        "`version` must be a string",
                        value.span,
                        "this is a number",
                    )
                    .help(format!("quote it: `version: \"{text}\"`"))
                    .fix(
                        "quote the version",
                        value.span,
                        format!("\"{text}\""),
                    ),
                );
                text
            }
            NodeKind::Invalid => return VersionRead::Unknown,
            _ => {
                self.push(
                    Diagnostic::new(
                        Code::E0014,
                        format!(
                            "`version` must be \"0.1\", \"0.2\" or \"0.3\", not {}",
                            value.kind_name()
                        ),
                        value.span,
                        "not a spec version",
                    )
                    .help("write `version: \"0.2\"`"),
                );
                return VersionRead::Unknown;
            }
        };
        let version = match written.as_str() {
            "0.1" => Version::V0_1,
            "0.2" => Version::V0_2,
            "0.3" => Version::V0_3,
            other => {
                let mut diagnostic = Diagnostic::new(
                    Code::E0014,
                    format!("unknown spec version `{other}`"),
                    value.span,
                    "not a spec version",
                );
                diagnostic = match did_you_mean(other, keys::VERSIONS.iter().copied()) {
                    Some(best) => diagnostic.help(format!("did you mean \"{best}\"?")).fix(
                        format!("use version \"{best}\""),
                        value.span,
                        format!("\"{best}\""),
                    ),
                    None => diagnostic.help("the versions are \"0.1\", \"0.2\" and \"0.3\""),
                };
                self.push(diagnostic);
                return VersionRead::Unknown;
            }
        };
        self.version = version;
        VersionRead::Supported(Field {
            key: entry.key.span,
            span: value.span,
            value: version,
        })
    }

    /// Diagnoses something that needs a later version than the spec's.
    fn requires(&mut self, since: Version, span: Span, what: String) {
        if since == Version::V0_3 {
            self.requires_v03(span, what);
        } else {
            self.requires_v02(span, what);
        }
    }

    /// Diagnoses a key of version 0.3 in a 0.1 or 0.2 spec.
    fn requires_v03(&mut self, span: Span, what: String) {
        let mut diagnostic = Diagnostic::new(
            Code::E0023,
            format!("{what} needs spec version 0.3"),
            span,
            "version 0.3 only",
        )
        .help("change the spec to `version: \"0.3\"` (`stratumc migrate` does it); every 0.1 and 0.2 spec is also valid 0.3");
        if let Some(version) = self.version_value {
            diagnostic = diagnostic
                .secondary(
                    version,
                    format!("the spec says version {}", self.version.as_str()),
                )
                .fix("change the version to \"0.3\"", version, "\"0.3\"");
        }
        self.push(diagnostic);
    }

    /// Diagnoses something that needs version 0.2 in a 0.1 spec.
    fn requires_v02(&mut self, span: Span, what: String) {
        let mut diagnostic = Diagnostic::new(
            Code::E0016,
            format!("{what} needs spec version 0.2"),
            span,
            "version 0.2 only",
        )
        .help("change the spec to `version: \"0.2\"`; every version 0.1 spec is also valid 0.2");
        if let Some(version) = self.version_value {
            diagnostic = diagnostic
                .secondary(version, "the spec says version 0.1")
                .fix("change the version to \"0.2\"", version, "\"0.2\"");
        }
        self.push(diagnostic);
    }

    // ----- mappings and their shapes -------------------------------------------------------

    /// Checks a mapping against the keys valid at its place; `owner` is what a missing-key
    /// diagnostic points at (the definition's name, or a step's first key).
    fn map<'t>(&mut self, node: &'t Node, shape: &Shape, owner: Span) -> Option<Entries<'t>> {
        let entries = match &node.kind {
            NodeKind::Map(entries) => entries,
            NodeKind::Invalid => return None,
            _ => {
                self.wrong_type(node, &format!("a mapping ({})", shape.what));
                return None;
            }
        };
        let mut accepted = Vec::with_capacity(entries.len());
        let mut unknown = Vec::new();
        for entry in entries {
            let Some(name) = self.key_name(&entry.key) else {
                continue;
            };
            match shape.key(name) {
                Some(key) => {
                    if key.since > self.version {
                        self.requires(
                            key.since,
                            entry.key.span,
                            format!("`{name}` in {}", shape.what),
                        );
                    }
                    accepted.push(entry);
                }
                None => unknown.push((entry, name)),
            }
        }
        let map = Entries { entries: accepted };
        let mut missing: Vec<&Key> = shape
            .keys
            .iter()
            .filter(|key| self.is_required(key) && map.entry(key.name).is_none())
            .collect();
        for (entry, name) in unknown {
            // A misspelt required key is one mistake: report the spelling, not also the absence.
            let misspelt = did_you_mean(name, missing.iter().map(|key| key.name));
            if let Some(intended) = misspelt {
                missing.retain(|key| key.name != intended);
            }
            self.unknown_key(&entry.key, name, shape, misspelt.is_some());
        }
        for key in missing {
            self.push(
                Diagnostic::new(
                    Code::E0013,
                    format!("{} has no `{}`", shape.what, key.name),
                    owner,
                    format!("`{}` is missing", key.name),
                )
                .help(format!("add `{}: {}`", key.name, key.placeholder)),
            );
        }
        Some(map)
    }

    fn is_required(&self, key: &Key) -> bool {
        match key.required {
            Required::No => false,
            Required::Always => true,
            Required::InV01 => self.version == Version::V0_1,
        }
    }

    fn key_name<'t>(&mut self, key: &'t Node) -> Option<&'t str> {
        match &key.kind {
            NodeKind::Str(s) => Some(&s.value),
            NodeKind::Invalid => None,
            _ => {
                let text = self.src.slice(key.span).to_owned();
                self.push(
                    Diagnostic::new(
                        Code::E0012,
                        format!("keys must be strings, but this key is {}", key.kind_name()),
                        key.span,
                        "not a string key",
                    )
                    .help(format!("quote it: `\"{text}\"`")),
                );
                None
            }
        }
    }

    /// Reports a key not valid at its place; `misspells_required` when it is a typo of a
    /// required key that is missing, which makes it an error even where unknown keys are
    /// only warnings.
    fn unknown_key(&mut self, key: &Node, name: &str, shape: &Shape, misspells_required: bool) {
        let valid: Vec<&str> = shape
            .keys
            .iter()
            .filter(|key| key.since <= self.version)
            .map(|key| key.name)
            .collect();
        let warn = shape.unknown_is_warning && !misspells_required;
        let code = if warn { Code::W0001 } else { Code::E0011 };
        let message = if warn {
            format!(
                "`{name}` is not a known key of {}; it is ignored",
                shape.what
            )
        } else {
            format!("unknown key `{name}` in {}", shape.what)
        };
        let mut diagnostic = Diagnostic::new(code, message, key.span, "unknown key");
        let meant = KEY_ALIASES
            .iter()
            .filter(|(alias, _)| *alias == name)
            .flat_map(|(_, keys)| keys.iter())
            .find(|key| valid.contains(key))
            .copied();
        diagnostic = match meant.or_else(|| did_you_mean(name, valid.iter().copied())) {
            Some(best) => diagnostic.help(format!("did you mean `{best}`?")).fix(
                format!("rename to `{best}`"),
                key.span,
                best,
            ),
            None => diagnostic.help(format!(
                "the keys of {} are {}",
                shape.what,
                backticked(&valid)
            )),
        };
        self.push(diagnostic);
    }

    /// Reads `name: definition` pairs (contracts, functions, flows, contract fields).
    fn named<T>(
        &mut self,
        node: &Node,
        what: &str,
        read_one: impl Fn(&mut Self, Name, &Node) -> Option<T>,
    ) -> Vec<T> {
        let entries = match &node.kind {
            NodeKind::Map(entries) => entries,
            NodeKind::Invalid => return Vec::new(),
            _ => {
                self.wrong_type(node, &format!("a mapping of {what}"));
                return Vec::new();
            }
        };
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let Some(name) = self.key_name(&entry.key) else {
                continue;
            };
            let name = Spanned {
                value: name.to_owned(),
                span: entry.key.span,
            };
            out.extend(read_one(self, name, &entry.value));
        }
        out
    }

    fn field<T>(
        &mut self,
        entry: &Entry,
        read_value: impl FnOnce(&mut Self, &Node) -> Option<T>,
    ) -> Option<Field<T>> {
        let value = read_value(self, &entry.value)?;
        Some(Field {
            key: entry.key.span,
            span: entry.value.span,
            value,
        })
    }

    fn get<T>(
        &mut self,
        map: &Entries<'_>,
        key: &str,
        read_value: impl FnOnce(&mut Self, &Node) -> Option<T>,
    ) -> Option<Field<T>> {
        let entry = map.entry(key)?;
        self.field(entry, read_value)
    }

    // ----- definitions ---------------------------------------------------------------------

    fn contract(&mut self, name: Name, node: &Node) -> Option<Contract> {
        let contract = name.value.clone();
        let fields = self.named(
            node,
            &format!("fields of contract `{contract}`"),
            |cx, field, value| {
                let shape = keys::CONTRACT_FIELD
                    .named(&format!("field `{}` of contract `{contract}`", field.value));
                cx.field_def(field, value, &shape)
            },
        );
        Some(Contract {
            span: name.span.to(node.span),
            name,
            fields,
        })
    }

    /// A contract field or an input parameter. `text: string` is shorthand for
    /// `text: {type: string}`.
    fn field_def(&mut self, name: Name, node: &Node, shape: &Shape) -> Option<FieldDef> {
        let span = name.span.to(node.span);
        let mut def = FieldDef::new(name, span);
        if let NodeKind::Str(s) = &node.kind {
            def.ty = Some(Field {
                key: node.span,
                span: node.span,
                value: s.value.clone(),
            });
            return Some(def);
        }
        let map = self.map(node, shape, def.name.span)?;
        def.ty = self.get(&map, "type", |cx, n| cx.string(n));
        def.values = self.get(&map, "values", |cx, n| {
            cx.list(n).map(|items| items.to_vec())
        });
        def.items = self.get(&map, "items", |_, n| Some(n.clone()));
        def.optional = self.get(&map, "optional", |cx, n| cx.boolean(n));
        def.required = self.get(&map, "required", |cx, n| cx.boolean(n));
        def.description = self.get(&map, "description", |cx, n| cx.string(n));
        def.default = self.get(&map, "default", |_, n| Some(n.clone()));
        def.minimum = self.get(&map, "minimum", |cx, n| cx.number(n));
        def.maximum = self.get(&map, "maximum", |cx, n| cx.number(n));
        def.min_length = self.get(&map, "min_length", |cx, n| cx.count(n, "min_length", 0));
        def.max_length = self.get(&map, "max_length", |cx, n| cx.count(n, "max_length", 0));
        Some(def)
    }

    fn params(&mut self, node: &Node, owner: &str) -> Option<Vec<FieldDef>> {
        Some(self.named(
            node,
            &format!("input parameters of {owner}"),
            |cx, name, value| {
                let shape = keys::INPUT_PARAM.named(&format!("input `{}` of {owner}", name.value));
                cx.field_def(name, value, &shape)
            },
        ))
    }

    fn function(&mut self, name: Name, node: &Node) -> Option<Function> {
        let what = format!("function `{}`", name.value);
        let shape = keys::FUNCTION.named(&what);
        let map = self.map(node, &shape, name.span)?;
        let version = self.version;
        let function = Function {
            span: name.span.to(node.span),
            mode: self.get(&map, "mode", |cx, n| {
                let mode = cx.choice(
                    n,
                    "mode",
                    &[
                        ("infer", Mode::Infer),
                        ("compute", Mode::Compute),
                        ("gate", Mode::Gate),
                    ],
                )?;
                if mode == Mode::Gate && version == Version::V0_1 {
                    cx.requires_v02(n.span, "`mode: gate`".to_owned());
                }
                Some(mode)
            }),
            intent: self.get(&map, "intent", |cx, n| cx.non_empty_string(n, "intent")),
            input: self.get(&map, "input", |cx, n| cx.params(n, &what)),
            output: self.get(&map, "output", |cx, n| cx.string(n)),
            ensure: self.get(&map, "ensure", |cx, n| cx.expressions(n)),
            retries: self.get(&map, "retries", |cx, n| cx.count32(n, "retries", 1)),
            budget: self.get(&map, "budget", |cx, n| cx.budget(n)),
            model: self.get(&map, "model", |cx, n| cx.string(n)),
            timeout: self.get(&map, "timeout", |cx, n| cx.count(n, "timeout", 1)),
            guardrails: self.get(&map, "guardrails", |cx, n| cx.guardrails(n)),
            cache: self.get(&map, "cache", |cx, n| cx.boolean(n)),
            keys: written_keys(node),
            name,
        };
        Some(function)
    }

    fn budget(&mut self, node: &Node) -> Option<Budget> {
        let map = self.map(node, &keys::BUDGET, node.span)?;
        Some(Budget {
            ms: self.get(&map, "ms", |cx, n| cx.count(n, "ms", 1)),
            usd: self.get(&map, "usd", |cx, n| {
                let usd = cx.number(n)?;
                if usd < 0.0 || usd.is_nan() {
                    cx.out_of_range(
                        n,
                        format!("`usd` must be 0 or more, not {usd}"),
                        "write 0 or more".to_owned(),
                    );
                    return None;
                }
                Some(usd)
            }),
            max_agent_dispatches: self.get(&map, "max_agent_dispatches", |cx, n| {
                cx.count(n, "max_agent_dispatches", 1)
            }),
            max_tokens: self.get(&map, "max_tokens", |cx, n| cx.count(n, "max_tokens", 1)),
        })
    }

    fn flow(&mut self, name: Name, node: &Node) -> Option<Flow> {
        let what = format!("flow `{}`", name.value);
        let shape = keys::FLOW.named(&what);
        let map = self.map(node, &shape, name.span)?;
        let steps = map.entry("steps").and_then(|entry| {
            self.field(entry, |cx, n| {
                let steps = cx.steps(n)?;
                if steps.is_empty() && !matches!(n.kind, NodeKind::Invalid) {
                    cx.push(
                        Diagnostic::new(Code::E0021, format!("{what} has no steps"), n.span, "empty list")
                            .help("add at least one step: `- id: first` with a `function`, `intent` or `flow`"),
                    );
                }
                Some(steps)
            })
        });
        Some(Flow {
            span: name.span.to(node.span),
            input: self.get(&map, "input", |cx, n| cx.params(n, &what)),
            output: self.get(&map, "output", |cx, n| cx.string(n)),
            budget: self.get(&map, "budget", |cx, n| cx.budget(n)),
            max_rounds: self.get(&map, "max_rounds", |cx, n| cx.count32(n, "max_rounds", 1)),
            steps,
            name,
        })
    }

    fn steps(&mut self, node: &Node) -> Option<Vec<Step>> {
        let items = self.list(node)?;
        let mut steps = Vec::with_capacity(items.len());
        let mut ids: HashMap<String, Span> = HashMap::new();
        for item in items {
            let Some(step) = self.step(item) else {
                continue;
            };
            if let Some(id) = &step.id {
                if let Some(&first) = ids.get(&id.value) {
                    self.push(
                        Diagnostic::new(
                            Code::E0017,
                            format!("two steps have the id `{}`", id.value),
                            id.span,
                            "used again here",
                        )
                        .secondary(first, "first used here")
                        .help("step ids must be unique within a flow; rename one of them"),
                    );
                } else {
                    ids.insert(id.value.clone(), id.span);
                }
            }
            steps.push(step);
        }
        Some(steps)
    }

    fn step(&mut self, node: &Node) -> Option<Step> {
        let owner = match &node.kind {
            NodeKind::Map(entries) => entries.first().map_or(node.span, |e| e.key.span),
            _ => node.span,
        };
        let id_text = match &node.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|e| e.key.as_str() == Some("id"))
                .and_then(|e| e.value.as_str()),
            _ => None,
        };
        let what = match id_text {
            Some(id) => format!("step `{id}`"),
            None => "a step".to_owned(),
        };
        let shape = keys::STEP.named(&what);
        let map = self.map(node, &shape, owner)?;
        Some(Step {
            span: node.span,
            id: self.get(&map, "id", |cx, n| cx.step_id(n)),
            function: self.get(&map, "function", |cx, n| cx.string(n)),
            intent: self.get(&map, "intent", |cx, n| cx.non_empty_string(n, "intent")),
            flow: self.get(&map, "flow", |cx, n| cx.string(n)),
            judge: self.get(&map, "judge", |cx, n| cx.judge(n)),
            agent: self.get(&map, "agent", |cx, n| cx.string(n)),
            inputs: self.get(&map, "inputs", |cx, n| cx.inputs(n)),
            depends_on: self.get(&map, "depends_on", |cx, n| cx.names(n)),
            output_schema: self.get(&map, "output_schema", |cx, n| match n.kind {
                NodeKind::Map(_) => Some(n.clone()),
                NodeKind::Invalid => None,
                _ => {
                    cx.wrong_type(n, "a mapping (a JSON Schema)");
                    None
                }
            }),
            ensure: self.get(&map, "ensure", |cx, n| cx.expressions(n)),
            retries: self.get(&map, "retries", |cx, n| cx.count32(n, "retries", 1)),
            output_contract: self.get(&map, "output_contract", |cx, n| cx.string(n)),
            model: self.get(&map, "model", |cx, n| cx.string(n)),
            budget: self.get(&map, "budget", |cx, n| cx.budget(n)),
            on_approve: self.get(&map, "on_approve", |cx, n| cx.route(n)),
            on_revise: self.get(&map, "on_revise", |cx, n| cx.route(n)),
            on_kill: self.get(&map, "on_kill", |cx, n| cx.route(n)),
            policy: self.get(&map, "policy", |cx, n| cx.policy(n)),
            policy_fallback: self.get(&map, "policy_fallback", |cx, n| cx.policy(n)),
            on_fail: self.get(&map, "on_fail", |cx, n| cx.string(n)),
            next: self.get(&map, "next", |cx, n| cx.string(n)),
            skip_if: self.get(&map, "skip_if", |cx, n| cx.text(n)),
            skip_reason: self.get(&map, "skip_reason", |cx, n| cx.string(n)),
            max_iterations: self.get(&map, "max_iterations", |cx, n| {
                cx.count32(n, "max_iterations", 1)
            }),
            exit_criterion: self.get(&map, "exit_criterion", |cx, n| cx.text(n)),
            score_expr: self.get(&map, "score_expr", |cx, n| cx.text(n)),
            accumulate: self.get(&map, "accumulate", |cx, n| cx.text(n)),
            accumulate_key: self.get(&map, "accumulate_key", |cx, n| cx.text(n)),
            guardrails: self.get(&map, "guardrails", |cx, n| cx.guardrails(n)),
            cache: self.get(&map, "cache", |cx, n| cx.boolean(n)),
            reasoning_template: self.get(&map, "reasoning_template", |cx, n| cx.mapping(n)),
            step_type: self.get(&map, "type", |cx, n| cx.step_type(n)),
            source: self.get(&map, "source", |cx, n| cx.text(n)),
            intent_template: self.get(&map, "intent_template", |cx, n| cx.template(n)),
            max_concurrent: self.get(&map, "max_concurrent", |cx, n| {
                cx.count32(n, "max_concurrent", 1)
            }),
            isolation: self.get(&map, "isolation", |cx, n| cx.isolation(n)),
            require: self.get(&map, "require", |cx, n| cx.require(n, "require")),
            merge: self.get(&map, "merge", |cx, n| cx.merge(n)),
            task_timeout: self.get(&map, "task_timeout", |cx, n| cx.count(n, "task_timeout", 1)),
            task_reasoning_template: self
                .get(&map, "task_reasoning_template", |cx, n| cx.mapping(n)),
            capture_diff: self.get(&map, "capture_diff", |cx, n| cx.boolean(n)),
            defer_advance: self.get(&map, "defer_advance", |cx, n| cx.boolean(n)),
            pre_merge_verify: self.get(&map, "pre_merge_verify", |cx, n| cx.pre_merge_verify(n)),
            stages: self.get(&map, "stages", |cx, n| cx.stages(n)),
            keys: written_keys(node),
        })
    }

    /// A pipeline's stages; an empty list is reported and read as no stages.
    fn stages(&mut self, node: &Node) -> Option<Vec<Stage>> {
        let items = self.list(node)?;
        if items.is_empty() {
            self.push(
                Diagnostic::new(
                    Code::E0021,
                    "a pipeline has no stages",
                    node.span,
                    "empty list",
                )
                .help("add at least one stage: `- intent_template: \"what to do with {item}\"`"),
            );
            return None;
        }
        Some(items.iter().filter_map(|item| self.stage(item)).collect())
    }

    fn stage(&mut self, node: &Node) -> Option<Stage> {
        let owner = match &node.kind {
            NodeKind::Map(entries) => entries.first().map_or(node.span, |e| e.key.span),
            _ => node.span,
        };
        let map = self.map(node, &keys::STAGE, owner)?;
        Some(Stage {
            span: node.span,
            intent_template: self.get(&map, "intent_template", |cx, n| cx.template(n)),
            agent: self.get(&map, "agent", |cx, n| cx.string(n)),
            task_reasoning_template: self
                .get(&map, "task_reasoning_template", |cx, n| cx.mapping(n)),
            task_timeout: self.get(&map, "task_timeout", |cx, n| cx.count(n, "task_timeout", 1)),
            when: self.get(&map, "when", |cx, n| cx.text(n)),
            exit_when: self.get(&map, "exit_when", |cx, n| cx.text(n)),
            fanout: self.get(&map, "fanout", |cx, n| {
                let map = cx.map(n, &keys::FANOUT, n.span)?;
                Some(Fanout {
                    max: cx.get(&map, "max", |cx, n| cx.count32(n, "max", 1)),
                    require: cx.get(&map, "require", |cx, n| cx.require(n, "require")),
                })
            }),
            join: self.get(&map, "join", |cx, n| cx.boolean(n)),
        })
    }

    /// A judge step's `judge:` block.
    fn judge(&mut self, node: &Node) -> Option<Judge> {
        let map = self.map(node, &keys::JUDGE, node.span)?;
        Some(Judge {
            written: node.clone(),
            predicates: self.get(&map, "predicates", |cx, n| cx.predicates(n)),
            stakes: self.get(&map, "stakes", |cx, n| {
                cx.choice(
                    n,
                    "stakes",
                    &[
                        ("cheap", Stakes::Cheap),
                        ("default", Stakes::Default),
                        ("paranoid", Stakes::Paranoid),
                    ],
                )
            }),
            budget: self.get(&map, "budget", |cx, n| {
                let map = cx.map(n, &keys::JUDGE_BUDGET, n.span)?;
                Some(JudgeBudget {
                    max_turns: cx.get(&map, "max_turns", |cx, n| cx.count32(n, "max_turns", 1)),
                    max_dollars: cx.get(&map, "max_dollars", |cx, n| cx.positive(n, "max_dollars")),
                    max_wall_clock_s: cx.get(&map, "max_wall_clock_s", |cx, n| {
                        cx.positive(n, "max_wall_clock_s")
                    }),
                })
            }),
        })
    }

    /// A judge's predicates; an empty list is reported and read as none.
    fn predicates(&mut self, node: &Node) -> Option<Vec<Predicate>> {
        let items = self.list(node)?;
        if items.is_empty() {
            self.push(
                Diagnostic::new(
                    Code::E0021,
                    "a judge has no predicates",
                    node.span,
                    "empty list",
                )
                .help("add at least one predicate: `- {id: tests, type: deterministic, statement: \"file_exists('artifacts/log.txt')\"}`"),
            );
            return None;
        }
        Some(
            items
                .iter()
                .filter_map(|item| {
                    let map = self.map(item, &keys::PREDICATE, item.span)?;
                    Some(Predicate {
                        span: item.span,
                        id: self.get(&map, "id", |cx, n| cx.non_empty_string(n, "id")),
                        kind: self.get(&map, "type", |cx, n| {
                            cx.choice(
                                n,
                                "type",
                                &[
                                    ("deterministic", PredicateKind::Deterministic),
                                    ("verified", PredicateKind::Verified),
                                    ("judged", PredicateKind::Judged),
                                ],
                            )
                        }),
                        statement: self.get(&map, "statement", |cx, n| {
                            let text = cx.text(n)?;
                            if text.value.trim().is_empty() {
                                cx.push(
                                    Diagnostic::new(
                                        Code::E0021,
                                        "a predicate's `statement` is empty",
                                        n.span,
                                        "empty string",
                                    )
                                    .help("write what must hold: an expression for a deterministic predicate, a sentence otherwise"),
                                );
                                return None;
                            }
                            Some(text)
                        }),
                        applied_gate: self.get(&map, "applied_gate", |cx, n| {
                            let gate = cx.count32(n, "applied_gate", 1)?;
                            if gate > 10 {
                                cx.out_of_range(
                                    n,
                                    format!("`applied_gate` must be from 1 to 10, not {gate}"),
                                    "write the confidence a `met` verdict needs, from 1 to 10 (default 7)".to_owned(),
                                );
                                return None;
                            }
                            Some(gate)
                        }),
                    })
                })
                .collect(),
        )
    }

    /// A number above 0.
    fn positive(&mut self, node: &Node, key: &str) -> Option<f64> {
        let number = self.number(node)?;
        if number <= 0.0 || number.is_nan() {
            self.out_of_range(
                node,
                format!("`{key}` must be more than 0, not {number}"),
                "write a number above 0".to_owned(),
            );
            return None;
        }
        Some(number)
    }

    /// A mapping kept as written (a JSON Schema, a reasoning template).
    fn mapping(&mut self, node: &Node) -> Option<Node> {
        match node.kind {
            NodeKind::Map(_) => Some(node.clone()),
            NodeKind::Invalid => None,
            _ => {
                self.wrong_type(node, "a mapping");
                None
            }
        }
    }

    /// A template: a string that is not only whitespace, with its offset map (placeholders are
    /// parsed by the middle end).
    fn template(&mut self, node: &Node) -> Option<Text> {
        let text = self.text(node)?;
        if text.value.trim().is_empty() {
            self.push(
                Diagnostic::new(
                    Code::E0021,
                    "`intent_template` is empty",
                    node.span,
                    "empty string",
                )
                .help("write what each task does, with placeholders such as `{description}`"),
            );
            return None;
        }
        Some(text)
    }

    fn step_type(&mut self, node: &Node) -> Option<StepType> {
        self.choice(
            node,
            "type",
            &[
                ("function", StepType::Function),
                ("inline", StepType::Inline),
                ("flow", StepType::Flow),
                ("decompose", StepType::Decompose),
                ("parallel_dispatch", StepType::ParallelDispatch),
                ("pipeline", StepType::Pipeline),
            ],
        )
    }

    fn isolation(&mut self, node: &Node) -> Option<Isolation> {
        self.choice(
            node,
            "isolation",
            &[
                ("worktree", Isolation::Worktree),
                ("branch", Isolation::Branch),
                ("none", Isolation::None),
            ],
        )
    }

    fn merge(&mut self, node: &Node) -> Option<Merge> {
        self.choice(
            node,
            "merge",
            &[
                ("sequential_apply", Merge::SequentialApply),
                ("manual", Merge::Manual),
            ],
        )
    }

    /// `all`, `any` or a whole number of at least 1.
    fn require(&mut self, node: &Node, key: &str) -> Option<Require> {
        match &node.kind {
            NodeKind::Int(_) => self.count32(node, key, 1).map(Require::AtLeast),
            NodeKind::Str(_) => {
                self.choice(node, key, &[("all", Require::All), ("any", Require::Any)])
            }
            NodeKind::Invalid => None,
            _ => {
                self.wrong_type(node, "`all`, `any` or a whole number");
                None
            }
        }
    }

    /// Commands, or a `$`-reference to a list of them; a lone string that is not a reference
    /// is one command.
    fn pre_merge_verify(&mut self, node: &Node) -> Option<PreMergeVerify> {
        match &node.kind {
            NodeKind::Str(s) if s.value.trim_start().starts_with('$') => {
                self.text(node).map(PreMergeVerify::Reference)
            }
            NodeKind::Str(_) => {
                let command = self.non_empty_string(node, "command")?;
                Some(PreMergeVerify::Commands(vec![Spanned {
                    value: command,
                    span: node.span,
                }]))
            }
            NodeKind::Seq(items) => {
                let mut commands = Vec::with_capacity(items.len());
                for item in items {
                    if let Some(command) = self.non_empty_string(item, "command") {
                        commands.push(Spanned {
                            value: command,
                            span: item.span,
                        });
                    }
                }
                Some(PreMergeVerify::Commands(commands))
            }
            NodeKind::Invalid => None,
            _ => {
                self.wrong_type(node, "a list of commands or a `$.input` reference");
                None
            }
        }
    }

    fn inputs(&mut self, node: &Node) -> Option<Vec<Input>> {
        if !matches!(node.kind, NodeKind::Map(_)) {
            // A reported value is left out of the AST, not read as empty.
            self.wrong_type(node, "a mapping of input names to values");
            return None;
        }
        Some(
            self.named(node, "input names to values", |cx, name, value| {
                let value = match &value.kind {
                    NodeKind::Str(_) => InputValue::Text(cx.text(value)?),
                    NodeKind::Invalid => return None,
                    _ => {
                        if cx.version == Version::V0_1 {
                            cx.requires_v02(
                                value.span,
                                format!("a step input that is {}", value.kind_name()),
                            );
                        }
                        InputValue::Literal(value.clone())
                    }
                };
                Some(Input { name, value })
            }),
        )
    }

    fn workflow(&mut self, node: &Node, key: Span) -> Option<Workflow> {
        let map = self.map(node, &keys::WORKFLOW, key)?;
        Some(Workflow {
            name: self.get(&map, "name", |cx, n| cx.workflow_name(n)),
            description: self.get(&map, "description", |cx, n| {
                cx.non_empty_string(n, "description")
            }),
            input: self.get(&map, "input", |cx, n| {
                Some(cx.named(n, "workflow inputs", |cx, name, value| {
                    cx.workflow_param(name, value)
                }))
            }),
        })
    }

    fn workflow_param(&mut self, name: Name, node: &Node) -> Option<WorkflowParam> {
        let shape = keys::WORKFLOW_PARAM.named(&format!("workflow input `{}`", name.value));
        let map = self.map(node, &shape, name.span)?;
        Some(WorkflowParam {
            span: name.span.to(node.span),
            ty: self.get(&map, "type", |cx, n| {
                cx.choice(
                    n,
                    "type",
                    &[
                        ("string", ParamType::String),
                        ("boolean", ParamType::Boolean),
                        ("integer", ParamType::Integer),
                        ("number", ParamType::Number),
                        ("array", ParamType::Array),
                        ("object", ParamType::Object),
                    ],
                )
            }),
            required: self.get(&map, "required", |cx, n| cx.boolean(n)),
            default: self.get(&map, "default", |_, n| Some(n.clone())),
            name,
        })
    }

    fn workflow_name(&mut self, node: &Node) -> Option<String> {
        let name = self.string(node)?;
        let mut chars = name.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            let mut diagnostic = Diagnostic::new(
                Code::E0022,
                format!("workflow name `{name}` must be lowercase words joined by hyphens"),
                node.span,
                "invalid workflow name",
            );
            diagnostic = match suggest_workflow_name(&name) {
                Some(better) => diagnostic
                    .help(format!("write `{better}`: a lowercase letter, then lowercase letters, digits and hyphens"))
                    .fix(format!("rename to `{better}`"), node.span, better),
                None => diagnostic.help("start with a lowercase letter, then use lowercase letters, digits and hyphens"),
            };
            self.push(diagnostic);
        }
        Some(name)
    }

    // ----- values --------------------------------------------------------------------------

    fn wrong_type(&mut self, node: &Node, expected: &str) {
        if matches!(node.kind, NodeKind::Invalid) {
            return;
        }
        let diagnostic = Diagnostic::new(
            Code::E0012,
            format!("expected {expected}, found {}", node.kind_name()),
            node.span,
            format!("this is {}", node.kind_name()),
        );
        let diagnostic = match self.retyping_fix(node, expected) {
            Some((help, fix, replacement)) => {
                diagnostic.help(help).fix(fix, node.span, replacement)
            }
            None => diagnostic.help(how_to_write(expected)),
        };
        self.push(diagnostic);
    }

    /// The fix when the value is right but YAML typed it otherwise: quotes that make a
    /// number a string, or a bare number or boolean that should be a string.
    fn retyping_fix(&self, node: &Node, expected: &str) -> Option<(String, &'static str, String)> {
        match &node.kind {
            NodeKind::Str(s) if s.style != ScalarStyle::Plain => {
                let fits = match crate::syntax::tree::resolve_plain(&s.value)? {
                    NodeKind::Int(_) => expected == "an integer" || expected == "a number",
                    NodeKind::Float(_) => expected == "a number",
                    NodeKind::Bool(_) => expected == "`true` or `false`",
                    _ => false,
                };
                fits.then(|| {
                    (
                        format!("remove the quotes: `{}`", s.value),
                        "remove the quotes",
                        s.value.clone(),
                    )
                })
            }
            NodeKind::Bool(_) | NodeKind::Int(_) | NodeKind::Float(_) => {
                let string_like = expected == "a string" || expected == "a step id or `~`";
                let text = self.src.slice(node.span);
                if !string_like || text.is_empty() {
                    return None;
                }
                let help = match node.kind {
                    NodeKind::Bool(_) => format!(
                        "YAML reads `{text}` as a boolean; quote it to make it a string: `\"{text}\"`"
                    ),
                    _ => format!("quote it to make it a string: `\"{text}\"`"),
                };
                Some((help, "quote the value", format!("\"{text}\"")))
            }
            _ => None,
        }
    }

    fn string(&mut self, node: &Node) -> Option<String> {
        match &node.kind {
            NodeKind::Str(s) => Some(s.value.clone()),
            _ => {
                self.wrong_type(node, "a string");
                None
            }
        }
    }

    /// A step's `id`: a string with something in it. An empty id cannot be named by
    /// `depends_on`, routing or `$.steps`, and the reference reports it nowhere (its paths then
    /// read `flows.<flow>.steps.`).
    fn step_id(&mut self, node: &Node) -> Option<String> {
        let value = self.string(node)?;
        if value.trim().is_empty() {
            self.push(
                Diagnostic::new(Code::E0021, "a step id is empty", node.span, "empty id")
                    .help("name the step after what it does, as in `id: summarise`: its id is how `depends_on`, routing and `$.steps.<id>.output` refer to it"),
            );
            return None;
        }
        Some(value)
    }

    fn non_empty_string(&mut self, node: &Node, key: &str) -> Option<String> {
        let value = self.string(node)?;
        if value.trim().is_empty() {
            self.push(
                Diagnostic::new(
                    Code::E0021,
                    format!("`{key}` is empty"),
                    node.span,
                    "empty string",
                )
                .help(format!("write the {key} out")),
            );
            return None;
        }
        Some(value)
    }

    /// A string scalar with its offset map, for expressions and step inputs.
    fn text(&mut self, node: &Node) -> Option<Text> {
        match &node.kind {
            NodeKind::Str(s) => Some(Text {
                value: s.value.clone(),
                span: node.span,
                map: ScalarMap::new(self.src.text(), s.token.range(), s.style, &s.value),
            }),
            _ => {
                self.wrong_type(node, "a string");
                None
            }
        }
    }

    /// A gate route: a step id or null.
    fn route(&mut self, node: &Node) -> Option<Option<String>> {
        match &node.kind {
            NodeKind::Null => Some(None),
            NodeKind::Str(s) => Some(Some(s.value.clone())),
            _ => {
                self.wrong_type(node, "a step id or `~`");
                None
            }
        }
    }

    fn boolean(&mut self, node: &Node) -> Option<bool> {
        match &node.kind {
            NodeKind::Bool(b) => Some(*b),
            _ => {
                self.wrong_type(node, "`true` or `false`");
                None
            }
        }
    }

    fn number(&mut self, node: &Node) -> Option<f64> {
        match &node.kind {
            NodeKind::Float(f) => Some(*f),
            NodeKind::Int(i) => Some(*i as f64),
            _ => {
                self.wrong_type(node, "a number");
                None
            }
        }
    }

    /// A whole number of at least `min`, under `key`.
    fn count(&mut self, node: &Node, key: &str, min: u64) -> Option<u64> {
        let value = match &node.kind {
            NodeKind::Int(i) => *i,
            _ => {
                self.wrong_type(node, "an integer");
                return None;
            }
        };
        match u64::try_from(value) {
            Ok(value) if value >= min => Some(value),
            _ => {
                self.out_of_range(
                    node,
                    format!("`{key}` must be at least {min}, not {value}"),
                    format!("write {min} or more"),
                );
                None
            }
        }
    }

    fn count32(&mut self, node: &Node, key: &str, min: u64) -> Option<u32> {
        let value = self.count(node, key, min)?;
        match u32::try_from(value) {
            Ok(value) => Some(value),
            Err(_) => {
                self.out_of_range(
                    node,
                    format!("`{key}` must be at most {}, not {value}", u32::MAX),
                    "no run counts that high; use a realistic limit".to_owned(),
                );
                None
            }
        }
    }

    fn out_of_range(&mut self, node: &Node, message: String, help: String) {
        self.push(Diagnostic::new(Code::E0020, message, node.span, "out of range").help(help));
    }

    fn list<'t>(&mut self, node: &'t Node) -> Option<&'t [Node]> {
        match &node.kind {
            NodeKind::Seq(items) => Some(items),
            _ => {
                self.wrong_type(node, "a list");
                None
            }
        }
    }

    fn names(&mut self, node: &Node) -> Option<Vec<Name>> {
        let items = self.list(node)?;
        Some(
            items
                .iter()
                .filter_map(|item| {
                    let value = self.string(item)?;
                    Some(Spanned {
                        value,
                        span: item.span,
                    })
                })
                .collect(),
        )
    }

    /// A list of expression strings. A lone string is reported, with a fix that wraps it in a
    /// list, and read as a one-element list so nothing follows from it.
    fn expressions(&mut self, node: &Node) -> Option<Vec<Text>> {
        if let NodeKind::Str(s) = &node.kind {
            let written = self.src.slice(node.span);
            let quoted = if matches!(
                s.style,
                ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted
            ) {
                written.to_owned()
            } else {
                serde_json::to_string(&s.value).unwrap_or_default()
            };
            self.push(
                Diagnostic::new(
                    Code::E0012,
                    "expected a list of expressions, found a string",
                    node.span,
                    "a single string",
                )
                .help(format!("write it as a list: `[{quoted}]`"))
                .fix(
                    "wrap the expression in a list",
                    node.span,
                    format!("[{quoted}]"),
                ),
            );
            return self.text(node).map(|text| vec![text]);
        }
        let items = self.list(node)?;
        Some(items.iter().filter_map(|item| self.text(item)).collect())
    }

    fn guardrails(&mut self, node: &Node) -> Option<Vec<Spanned<String>>> {
        let items = self.list(node)?;
        let mut patterns = Vec::with_capacity(items.len());
        for item in items {
            let Some(pattern) = self.non_empty_string(item, "guardrail") else {
                continue;
            };
            patterns.push(Spanned {
                value: pattern,
                span: item.span,
            });
        }
        Some(patterns)
    }

    fn policy(&mut self, node: &Node) -> Option<Policy> {
        self.choice(
            node,
            "policy",
            &[
                ("gate", Policy::Gate),
                ("flag", Policy::Flag),
                ("skip", Policy::Skip),
            ],
        )
    }

    /// One of a fixed set of words.
    fn choice<T: Copy>(&mut self, node: &Node, key: &str, choices: &[(&str, T)]) -> Option<T> {
        let word = self.string(node)?;
        if let Some(&(_, value)) = choices.iter().find(|(name, _)| *name == word) {
            return Some(value);
        }
        let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
        let mut diagnostic = Diagnostic::new(
            Code::E0019,
            format!("`{word}` is not a valid `{key}`"),
            node.span,
            format!("not a valid `{key}`"),
        );
        diagnostic = match did_you_mean(&word, names.iter().copied()) {
            Some(best) => diagnostic
                .help(format!(
                    "did you mean `{best}`? `{key}` is one of {}",
                    backticked(&names)
                ))
                .fix(format!("replace with `{best}`"), node.span, best),
            None => diagnostic.help(format!("`{key}` is one of {}", backticked(&names))),
        };
        self.push(diagnostic);
        None
    }
}

/// The string keys of a mapping as written, whether or not they were read.
fn written_keys(node: &Node) -> Vec<Name> {
    let NodeKind::Map(entries) = &node.kind else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            Some(Spanned {
                value: entry.key.as_str()?.to_owned(),
                span: entry.key.span,
            })
        })
        .collect()
}

/// The general help for a value of the wrong type: what to write instead.
fn how_to_write(expected: &str) -> String {
    let example = if expected.starts_with("a mapping") {
        ": `key: value` entries indented under the key, or `{key: value}`"
    } else if expected.starts_with("a list") {
        ": `[a, b]`, or one `- item` per line"
    } else {
        match expected {
            "an integer" => ", such as `3`",
            "a number" => ", such as `0.5`",
            "a string" => ", in quotes if YAML could read it as anything else",
            _ => "",
        }
    };
    format!("write {expected} here{example}")
}

/// `Code_Review` → `code-review`, when the result is a valid workflow name.
fn suggest_workflow_name(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    for c in name.trim().chars() {
        match c {
            'a'..='z' | '0'..='9' => out.push(c),
            'A'..='Z' => out.push(c.to_ascii_lowercase()),
            '-' | '_' | ' ' | '.' if !out.ends_with('-') && !out.is_empty() => out.push('-'),
            _ => {}
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    let starts_well = out.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    (starts_well && out != name).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_names_are_suggested_in_kebab_case() {
        assert_eq!(
            suggest_workflow_name("Code_Review").as_deref(),
            Some("code-review")
        );
        assert_eq!(
            suggest_workflow_name("my workflow 2").as_deref(),
            Some("my-workflow-2")
        );
        assert_eq!(suggest_workflow_name("2fast"), None);
    }
}
