//! The format's rules about which keys go together: what a step runs, what gates, flow steps
//! and function steps may carry, when `on_fail`, iterations and `cache` make sense, guardrail
//! patterns, and how the `workflow:` block matches its entry flow.
//!
//! Takes the AST, its symbol tables and each flow's execution order; pushes one diagnostic per
//! broken rule and returns nothing. Invariants: a name that does not resolve is someone else's
//! diagnostic, so a rule that depends on what a name means (is this function a gate?) is
//! skipped when it does not resolve; a key whose value the front end rejected counts as
//! written, so "missing key" rules never follow from a bad value; and a key that is reported
//! as not allowed is not checked any further.

mod certificate;
mod fan_out;
mod functions;
mod steps;
mod workflow;

use crate::diagnostic::{Diagnostic, did_you_mean};
use crate::sema::FlowModel;
use crate::sema::symbols::Symbols;
use crate::sema::types::ContractTypes;
use crate::source::Span;
use crate::syntax::ast::{Ast, Name, Version};
use crate::syntax::keys::Shape;

/// Checks every format rule of `ast`, adding what it finds to `diagnostics`.
pub fn check(
    ast: &Ast,
    symbols: &Symbols,
    contracts: &ContractTypes,
    flows: &[FlowModel],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let version = ast.version.as_ref().map(|version| version.value);
    for function in &ast.functions {
        functions::check(function, version, diagnostics);
    }
    for (flow_index, flow) in ast.flows.iter().enumerate() {
        let model = flows.get(flow_index);
        steps::check_flow(ast, symbols, version, flow_index, flow, model, diagnostics);
        steps::max_rounds_without_gate(ast, flow, model, diagnostics);
    }
    if let Some(workflow) = &ast.workflow {
        workflow::check(ast, symbols, contracts, workflow, diagnostics);
    }
}

/// Whether the mapping whose keys are `keys` (of `shape`) wrote `key`: under its own name (its
/// value may have been rejected), or misspelt so that the front end already suggested it.
fn is_written(keys: &[Name], key: &str, shape: &Shape) -> bool {
    keys.iter().any(|written| {
        written.value == key
            || (shape.key(&written.value).is_none()
                && did_you_mean(&written.value, shape.keys.iter().map(|k| k.name)) == Some(key))
    })
}

/// The span that removes the entry `key: value` from the mapping `owner` whose keys are
/// `keys`: up to the next key, so that neither a blank line nor a stray comma is left behind,
/// or to the end of the value for the last entry. `None` when an alias or merge key put
/// entries of the mapping elsewhere in the file, where an edit could change another mapping.
fn removal(keys: &[Name], owner: Span, key: Span, value: Span) -> Option<Span> {
    let spans: Vec<Span> = keys.iter().map(|k| k.span).collect();
    removal_among(&spans, owner, key, value)
}

/// [`removal`] with the spans of the mapping's keys.
fn removal_among(keys: &[Span], owner: Span, key: Span, value: Span) -> Option<Span> {
    let inside = |span: Span| span.start >= owner.start && span.end <= owner.end;
    if !inside(key) || !inside(value) || !keys.iter().all(|k| inside(*k)) {
        return None;
    }
    let end = keys
        .iter()
        .map(|k| k.start)
        .filter(|&start| start >= value.end)
        .min()
        .unwrap_or(value.end);
    Some(key.with_end(end))
}

/// Whether a version 0.2 rule applies: in a version 0.1 spec the front end already holds the
/// spec to the stricter 0.1 shapes.
fn is_v02(version: Option<Version>) -> bool {
    version != Some(Version::V0_1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::diagnostic::Code;
    use crate::source::{FileId, SourceFile};

    /// The codes found, without the warnings about unused definitions: these small specs
    /// declare functions no step calls, which is not what they test.
    fn codes(text: &str) -> Vec<Code> {
        let file = SourceFile::new(FileId(0), "t.stratum.yaml", text);
        crate::check(&file)
            .diagnostics
            .iter()
            .map(|d| d.code)
            .filter(|code| !matches!(code, Code::W0010 | Code::W0011))
            .collect()
    }

    const GATE: &str = "version: \"0.2\"\nfunctions:\n  ok: {mode: gate}\nflows:\n  f:\n    input: {}\n    steps:\n      - id: work\n        intent: \"do it\"\n      - id: review\n        function: ok\n";

    #[test]
    fn a_rejected_or_misspelt_key_is_not_also_missing() {
        let rejected =
            format!("{GATE}        on_approve: ~\n        on_revise: work\n        on_kill: 5\n");
        assert_eq!(codes(&rejected), [Code::E0012]);
        let misspelt =
            format!("{GATE}        on_aprove: ~\n        on_revise: work\n        on_kill: ~\n");
        assert_eq!(codes(&misspelt), [Code::E0011]);
        let empty_intent = "version: \"0.2\"\nflows:\n  f:\n    input: {}\n    steps:\n      - id: a\n        intent: \"\"\n";
        assert_eq!(codes(empty_intent), [Code::E0021]);
        let empty_function_intent = "version: \"0.2\"\ncontracts:\n  C: {x: {type: string}}\nfunctions:\n  g:\n    mode: infer\n    intent: \"\"\n    input: {}\n    output: C\n";
        assert_eq!(codes(empty_function_intent), [Code::E0021]);
    }

    #[test]
    fn a_reasoning_template_for_claude_can_fail_whatever_its_profile() {
        let step = |agent: &str| {
            format!(
                "version: \"0.2\"\nflows:\n  f:\n    input: {{}}\n    steps:\n      - id: a\n        intent: \"do it\"\n        agent: {agent}\n        reasoning_template: {{sections: [{{id: premises, label: Premises, description: Facts}}]}}\n        on_fail: b\n      - id: b\n        intent: \"recover\"\n"
            )
        };
        assert_eq!(codes(&step("claude")), []);
        assert_eq!(codes(&step("claude:reviewer")), []);
        assert_eq!(codes(&step("codex")), [Code::E0060]);
    }

    #[test]
    fn a_version_0_1_step_without_function_is_reported_once() {
        let text = "version: \"0.1\"\ncontracts:\n  C: {x: {type: string}}\nflows:\n  f:\n    input: {}\n    output: C\n    steps:\n      - id: a\n        inputs: {}\n";
        assert_eq!(codes(text), [Code::E0013]);
    }

    #[test]
    fn kind_rules_wait_for_the_name_to_resolve() {
        let text = "version: \"0.2\"\nflows:\n  f:\n    input: {}\n    steps:\n      - id: a\n        function: nowhere\n        on_approve: ~\n        retries: 2\n        on_fail: a\n";
        let found = codes(text);
        for code in [Code::E0053, Code::E0056, Code::E0059, Code::E0060] {
            assert!(!found.contains(&code), "{found:?}");
        }
    }

    /// The text with the fix of the first diagnostic of `code` applied.
    fn fixed(text: &str, code: Code) -> String {
        let file = SourceFile::new(FileId(0), "t.stratum.yaml", text);
        let compilation = crate::check(&file);
        let diagnostic = compilation
            .diagnostics
            .iter()
            .find(|d| d.code == code)
            .unwrap_or_else(|| panic!("no {code:?} in {:?}", compilation.diagnostics));
        let mut edits = diagnostic.fix.as_ref().expect("a fix").edits.clone();
        edits.sort_by_key(|edit| std::cmp::Reverse(edit.span.start));
        let mut fixed = text.to_owned();
        for edit in edits {
            fixed.replace_range(edit.span.range(), &edit.replacement);
        }
        fixed
    }

    #[test]
    fn the_fixes_of_the_new_rules_leave_a_clean_spec() {
        let flow = "version: \"0.2\"\nflows:\n  f:\n    input: {}\n";
        let cases = [
            (
                format!("{flow}    max_rounds: 3\n    steps:\n      - {{id: a, intent: \"do it\"}}\n"),
                Code::W0020,
                "    steps:\n",
            ),
            (
                format!("{flow}    steps:\n      - id: a\n        intent: \"do it\"\n        ensure: [\"result.ok\"]\n        on_fail: a\n        retries: 2\n"),
                Code::W0009,
                "        ensure: [\"result.ok\"]\n        retries: 2\n",
            ),
            (
                format!("{flow}    steps:\n      - {{id: a, intent: \"do it\", agent: 'cluade:reviewer'}}\n"),
                Code::W0022,
                "agent: 'claude:reviewer'}",
            ),
            (
                format!("{flow}    steps:\n      - id: a\n        intent: \"do it\"\n        reasoning_template:\n          sections: [{{id: p, label: P, descripton: Facts}}]\n"),
                Code::E0069,
                "description: Facts}",
            ),
            (
                "version: \"0.2\"\nflows:\n  child:\n    input: {channel: {type: string}}\n    steps:\n      - {id: a, intent: \"do it\"}\n  main:\n    input: {}\n    steps:\n      - {id: b, flow: child, inputs: {channel: yes}}\n".to_owned(),
                Code::E0076,
                "inputs: {channel: \"yes\"}",
            ),
        ];
        for (text, code, expected) in cases {
            let fixed = fixed(&text, code);
            assert!(fixed.contains(expected), "{code:?}:\n{fixed}");
            assert!(
                codes(&fixed).is_empty(),
                "{code:?}:\n{fixed}\n{:?}",
                codes(&fixed)
            );
        }
    }

    #[test]
    fn removing_a_gate_key_leaves_valid_yaml() {
        for (function, expected) in [
            ("{mode: gate, retries: 2}", "{mode: gate, }"),
            ("{retries: 2, mode: gate}", "{mode: gate}"),
            ("\n    retries: 2\n    mode: gate", "\n    mode: gate"),
        ] {
            let text = format!("version: \"0.2\"\nfunctions:\n  g: {function}\n");
            let file = SourceFile::new(FileId(0), "t.stratum.yaml", text.as_str());
            let compilation = crate::check(&file);
            let gate_key = compilation
                .diagnostics
                .iter()
                .find(|d| d.code == Code::E0052);
            let fix = gate_key.unwrap().fix.as_ref().unwrap();
            let edit = &fix.edits[0];
            let mut fixed = text.clone();
            fixed.replace_range(edit.span.range(), &edit.replacement);
            assert!(fixed.ends_with(&format!("g: {expected}\n")), "{fixed}");
            assert!(codes(&fixed).is_empty(), "{fixed}");
        }
    }
}
