//! Completion tests: small specs with the cursor marked `‸` (removed before analysis).

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use super::*;

const CURSOR: &str = "‸";

/// A clean spec; tests insert lines into it.
const BASE: &str = r#"version: "0.2"
contracts:
  Summary:
    text: {type: string}
    score: {type: number}
    tone: {type: string, values: [calm, angry]}
    address: {type: Address}
  Address:
    city: {type: string}
    zip: {type: string, optional: true}
functions:
  summarize:
    mode: infer
    intent: "Summarise the document"
    input:
      doc: {type: string}
    output: Summary
    ensure:
      - "len(result.text) > 0"
  tally:
    mode: compute
    intent: "Count the items"
    input:
      items: {type: array}
      label: {type: string}
    output: Address
  approve:
    mode: gate
flows:
  main:
    input:
      doc: {type: string}
      limit: {type: integer}
    output: Summary
    steps:
      - id: first
        function: summarize
        inputs:
          doc: "$.input.doc"
      - id: second
        intent: "Check the summary"
        inputs:
          text: "$.steps.first.output.text"
        output_contract: Summary
        depends_on: [first]
      - id: review
        function: approve
        on_approve: ~
        on_revise: first
        on_kill: ~
        depends_on: [second]
  helper:
    input:
      items: {type: array}
    output: Address
    steps:
      - id: count
        function: tally
        inputs:
          items: "$.input.items"
          label: "x"
"#;

/// The analysis of `marked` without its cursor, and the cursor's offset.
fn at(marked: &str) -> (Analysis, usize) {
    let offset = marked.find(CURSOR).expect("a cursor");
    (
        Analysis::new("t.stratum.yaml", &marked.replacen(CURSOR, "", 1)),
        offset,
    )
}

fn run(marked: &str) -> Vec<Completion> {
    let (analysis, offset) = at(marked);
    complete(&analysis, None, offset)
}

fn labels(marked: &str) -> Vec<String> {
    run(marked).into_iter().map(|c| c.label).collect()
}

/// BASE with `insertion` put after the first line equal to `anchor` (without its newline).
fn base_with(anchor: &str, insertion: &str) -> String {
    let at = BASE.find(&format!("{anchor}\n")).expect("the anchor") + anchor.len() + 1;
    format!("{}{insertion}{}", &BASE[..at], &BASE[at..])
}

/// BASE with the first `from` replaced by `to`.
fn base_replacing(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from:?} is not in BASE");
    BASE.replacen(from, to, 1)
}

fn has(labels: &[String], wanted: &[&str]) {
    for want in wanted {
        assert!(
            labels.iter().any(|l| l == want),
            "{want:?} missing from {labels:?}"
        );
    }
}

fn lacks(labels: &[String], unwanted: &[&str]) {
    for unwanted in unwanted {
        assert!(
            !labels.iter().any(|l| l == unwanted),
            "{unwanted:?} offered in {labels:?}"
        );
    }
}

fn detail(completions: &[Completion], label: &str) -> String {
    completions
        .iter()
        .find(|c| c.label == label)
        .unwrap_or_else(|| panic!("no {label:?} in {completions:?}"))
        .detail
        .clone()
        .unwrap_or_default()
}

#[test]
fn the_base_spec_is_clean() {
    crate::analysis::clean(BASE);
}

// ----- keys -------------------------------------------------------------------------------------

#[test]
fn root_keys_leave_out_the_written_ones_and_follow_the_version() {
    let found = labels("version: \"0.2\"\n‸");
    assert_eq!(found, ["contracts", "functions", "flows", "workflow"]);
    let found = labels("version: \"0.1\"\nflows: {}\n‸\n");
    assert_eq!(found, ["contracts", "functions"]);
    let found = labels("‸");
    has(&found, &["version", "contracts", "flows"]);
}

#[test]
fn keys_of_an_inline_step() {
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        ‸\n",
    ));
    has(
        &found,
        &[
            "agent",
            "ensure",
            "retries",
            "next",
            "on_fail",
            "skip_if",
            "max_iterations",
            "model",
            "budget",
        ],
    );
    lacks(
        &found,
        &[
            "id",
            "intent",
            "inputs",
            "output_contract",
            "depends_on", // written
            "function",
            "flow",
            "judge", // a second kind
            "on_approve",
            "on_revise",
            "on_kill",
            "policy",
            "policy_fallback", // gates only
            "cache",           // compute functions only
            "accumulate_key",  // needs accumulate
        ],
    );
}

#[test]
fn keys_of_a_function_step_leave_what_belongs_to_the_function() {
    let found = labels(&base_with("        function: summarize", "        ‸\n"));
    has(
        &found,
        &[
            "depends_on",
            "next",
            "on_fail",
            "skip_if",
            "max_iterations",
            "agent",
        ],
    );
    lacks(
        &found,
        &[
            "ensure",
            "retries",
            "output_contract",
            "model",
            "budget",
            "guardrails",
            "cache",
            "on_approve",
            "intent",
        ],
    );
    // A compute function's step may be cached.
    let found = labels(&base_with("        function: tally", "        ‸\n"));
    has(&found, &["cache"]);
}

#[test]
fn keys_of_a_gate_step() {
    let found = labels(&base_with("        function: approve", "        ‸\n"));
    has(&found, &["policy", "skip_if", "agent"]);
    lacks(
        &found,
        &[
            "on_approve",
            "on_revise",
            "on_kill",
            "depends_on",
            "next",
            "on_fail",
            "ensure",
            "retries",
            "max_iterations",
            "budget",
            "cache",
            "policy_fallback",
        ],
    );
    let found = labels(&base_with(
        "        function: approve",
        "        policy: flag\n        ‸\n",
    ));
    has(&found, &["policy_fallback"]);
}

#[test]
fn keys_of_a_flow_step() {
    let found = labels(&base_with(
        "          label: \"x\"",
        "      - id: sub\n        flow: main\n        ‸\n",
    ));
    has(
        &found,
        &["inputs", "depends_on", "ensure", "output_contract"],
    );
    lacks(
        &found,
        &[
            "agent",
            "retries",
            "model",
            "budget",
            "guardrails",
            "reasoning_template",
            "cache",
            "function",
        ],
    );
}

#[test]
fn a_new_step_starts_with_its_required_keys() {
    let completions = run(&base_with("        label: \"x\"", "      - ‸\n"));
    assert_eq!(completions[0].label, "id");
    assert!(
        completions[0]
            .detail
            .as_deref()
            .unwrap()
            .starts_with("required")
    );
    let found: Vec<String> = completions.into_iter().map(|c| c.label).collect();
    has(
        &found,
        &["function", "intent", "flow", "inputs", "depends_on"],
    );
    // The next line of the same new step: `id` is written now.
    let found = labels(&base_with(
        "        label: \"x\"",
        "      - id: last\n        ‸\n",
    ));
    has(&found, &["function", "intent"]);
    lacks(&found, &["id"]);
}

#[test]
fn keys_of_version_0_1_steps() {
    let spec = "version: \"0.1\"\nfunctions:\n  f:\n    mode: infer\n    intent: \"x\"\n    input: {}\n    output: C\ncontracts:\n  C:\n    a: {type: string}\nflows:\n  run:\n    input: {}\n    output: C\n    steps:\n      - id: s\n        ‸\n";
    let completions = run(spec);
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        found[..2],
        ["function", "inputs"],
        "required in 0.1 first: {found:?}"
    );
    lacks(&labels(spec), &["intent", "next", "ensure", "on_fail"]);
}

#[test]
fn keys_of_functions_flows_contract_fields_budgets_and_the_workflow() {
    let found = labels(&base_with("    mode: gate", "    ‸\n"));
    has(&found, &["intent", "timeout", "output"]);
    lacks(&found, &["mode"]);
    let found = labels(&base_replacing(
        "    output: Address\n    steps:",
        "    output: Address\n    ‸\n    steps:",
    ));
    has(&found, &["budget", "max_rounds"]);
    lacks(&found, &["input", "output", "steps"]);
    let found = labels(&base_with(
        "    text: {type: string}",
        "    score2:\n      ‸\n",
    ));
    assert_eq!(found[0], "type");
    has(&found, &["values", "items", "optional", "description"]);
    let found = labels(&base_replacing(
        "    output: Address\n    steps:",
        "    output: Address\n    budget:\n      ms: 10\n      ‸\n    steps:",
    ));
    assert_eq!(found, ["usd", "max_agent_dispatches", "max_tokens"]);
    let found = labels("version: \"0.2\"\nworkflow:\n  name: w\n  ‸\n");
    assert_eq!(found, ["description", "input"]);
    let found = labels("version: \"0.2\"\nworkflow:\n  input:\n    x:\n      ‸\n");
    assert_eq!(found, ["type", "required", "default"]);
}

#[test]
fn key_completions_bring_their_colon_unless_the_line_has_one() {
    let completions = run(&base_with(
        "        output_contract: Summary",
        "        ag‸\n",
    ));
    let agent = completions.iter().find(|c| c.label == "agent").unwrap();
    assert_eq!(agent.insert_text.as_deref(), Some("agent: "));
    let (analysis, offset) = at(&base_with(
        "        output_contract: Summary",
        "        ag‸: claude\n",
    ));
    let completions = complete(&analysis, None, offset);
    let agent = completions.iter().find(|c| c.label == "agent").unwrap();
    assert_eq!(agent.insert_text, None);
    assert_eq!(analysis.slice(agent.replace.unwrap()), "ag");
}

#[test]
fn the_inputs_of_a_function_step_are_its_functions_parameters() {
    let completions = run(&base_replacing("          label: \"x\"\n", "          ‸\n"));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["label"]);
    assert_eq!(detail(&completions, "label"), "string");
}

#[test]
fn nothing_in_comments_or_under_a_contract() {
    assert!(
        labels(&base_with(
            "        output_contract: Summary",
            "        # a note ‸\n"
        ))
        .is_empty()
    );
    assert!(labels(&base_with("  Summary:", "    ‸\n")).is_empty());
}

// ----- names ------------------------------------------------------------------------------------

#[test]
fn function_names_with_mode_and_output() {
    let (analysis, offset) = at(&base_replacing("function: summarize", "function: sum‸"));
    let completions = complete(&analysis, None, offset);
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["summarize", "tally", "approve"]);
    assert_eq!(detail(&completions, "summarize"), "infer → Summary");
    assert_eq!(detail(&completions, "approve"), "gate");
    assert!(
        completions
            .iter()
            .all(|c| c.kind == CompletionKind::Function)
    );
    assert_eq!(analysis.slice(completions[0].replace.unwrap()), "sum");
}

#[test]
fn contract_names_with_their_field_counts() {
    let completions = run(&base_replacing(
        "output_contract: Summary",
        "output_contract: ‸",
    ));
    assert_eq!(detail(&completions, "Summary"), "4 fields");
    assert_eq!(detail(&completions, "Address"), "2 fields");
    let found = labels(&base_replacing(
        "    output: Address\n    steps",
        "    output: ‸\n    steps",
    ));
    assert_eq!(found, ["Summary", "Address"]);
}

#[test]
fn flow_names_with_their_input_except_the_flow_itself() {
    let completions = run(&base_with("      - id: count", "        flow: ‸\n"));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["main"]);
    assert_eq!(
        detail(&completions, "main"),
        "{doc: string, limit: int} → Summary"
    );
}

#[test]
fn step_ids_in_an_inline_depends_on() {
    let found = labels(&base_replacing(
        "depends_on: [second]",
        "depends_on: [second, ‸]",
    ));
    assert_eq!(found, ["first"]);
    let completions = run(&base_replacing("depends_on: [first]", "depends_on: [‸]"));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["first", "review"]);
    assert_eq!(detail(&completions, "first"), "function step → Summary");
    assert_eq!(detail(&completions, "review"), "gate step");
}

#[test]
fn step_ids_in_a_block_depends_on() {
    let found = labels(&base_replacing(
        "        depends_on: [second]\n",
        "        depends_on:\n          - first\n          - ‸\n",
    ));
    assert_eq!(found, ["second"]);
    // A sequence at the key's own indentation.
    let found = labels(&base_replacing(
        "        depends_on: [second]\n",
        "        depends_on:\n        - s‸\n",
    ));
    assert_eq!(found, ["first", "second"]);
}

#[test]
fn step_ids_in_routing_fields() {
    let found = labels(&base_replacing("on_revise: first", "on_revise: ‸"));
    assert_eq!(found, ["first", "second"]);
    let found = labels(&base_replacing("on_approve: ~", "on_approve: ‸"));
    assert_eq!(found, ["first", "second", "~"]);
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        next: ‸\n",
    ));
    assert_eq!(found, ["first", "review"]);
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        on_fail: ‸\n",
    ));
    assert_eq!(found, ["first", "review"]);
}

#[test]
fn fixed_values() {
    assert_eq!(
        labels(&base_replacing("mode: gate", "mode: ‸")),
        ["infer", "compute", "gate"]
    );
    assert_eq!(
        labels(&base_with(
            "        function: approve",
            "        policy: ‸\n"
        )),
        ["gate", "flag", "skip"]
    );
    let found = labels(&base_replacing(
        "zip: {type: string, optional: true}",
        "zip:\n      type: ‸",
    ));
    has(
        &found,
        &["string", "integer", "array", "Summary", "Address"],
    );
}

// ----- expressions ------------------------------------------------------------------------------

#[test]
fn dollar_completes_input_and_steps() {
    let completions = run(&base_replacing("doc: \"$.input.doc\"", "doc: \"$.‸\""));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["input", "steps"]);
    assert_eq!(detail(&completions, "input"), "{doc: string, limit: int}");
}

#[test]
fn input_fields_with_their_types() {
    let (analysis, offset) = at(&base_replacing(
        "doc: \"$.input.doc\"",
        "doc: \"$.input.d‸\"",
    ));
    let completions = complete(&analysis, None, offset);
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["doc", "limit"]);
    assert_eq!(detail(&completions, "limit"), "int");
    assert!(completions.iter().all(|c| c.kind == CompletionKind::Field));
    assert_eq!(analysis.slice(completions[0].replace.unwrap()), "d");
}

#[test]
fn step_ids_and_outputs_after_dollar_steps() {
    let found = labels(&base_replacing(
        "text: \"$.steps.first.output.text\"",
        "text: \"$.steps.‸\"",
    ));
    assert_eq!(found, ["first", "review"]);
    let completions = run(&base_replacing(
        "text: \"$.steps.first.output.text\"",
        "text: \"$.steps.first.‸\"",
    ));
    assert_eq!(completions.len(), 1);
    assert_eq!(completions[0].label, "output");
    assert_eq!(detail(&completions, "output"), "Summary");
}

#[test]
fn output_fields_of_a_step_with_types_and_nested_contracts() {
    let completions = run(&base_replacing(
        "text: \"$.steps.first.output.text\"",
        "text: \"$.steps.first.output.‸\"",
    ));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["text", "score", "tone", "address"]);
    assert_eq!(detail(&completions, "text"), "string");
    assert_eq!(detail(&completions, "score"), "float");
    assert_eq!(detail(&completions, "tone"), "'calm' | 'angry'");
    assert_eq!(detail(&completions, "address"), "Address");
    let completions = run(&base_replacing(
        "text: \"$.steps.first.output.text\"",
        "text: \"$.steps.first.output.address.‸\"",
    ));
    assert_eq!(detail(&completions, "city"), "string");
    assert_eq!(detail(&completions, "zip"), "string?");
    // Flow-style inputs, unquoted.
    let found = labels(&base_replacing(
        "        inputs:\n          text: \"$.steps.first.output.text\"\n",
        "        inputs: {text: $.steps.first.output.sc‸}\n",
    ));
    assert_eq!(found, ["text", "score", "tone", "address"]);
}

#[test]
fn result_fields_in_a_steps_ensure_and_exit_criterion() {
    let completions = run(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"result.‸\"\n",
    ));
    assert_eq!(detail(&completions, "score"), "float");
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["text", "score", "tone", "address"]);
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        max_iterations: 3\n        exit_criterion: \"result.score > 0.5 and result.address.‸\"\n",
    ));
    assert_eq!(found, ["city", "zip"]);
    // A block scalar.
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - |\n            len(result.t‸\n",
    ));
    assert_eq!(found, ["text", "score", "tone", "address"]);
    // An inline list.
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        ensure: [\"result.score > 0\", \"result.‸\"]\n",
    ));
    assert_eq!(found, ["text", "score", "tone", "address"]);
}

#[test]
fn result_fields_in_a_functions_ensure() {
    let completions = run(&base_replacing("len(result.text) > 0", "len(result.‸) > 0"));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["text", "score", "tone", "address"]);
    // No `$` in a function's ensure.
    assert!(labels(&base_replacing("len(result.text) > 0", "$.‸")).is_empty());
    // A bare name: `result`, typed.
    let completions = run(&base_replacing("len(result.text) > 0", "len(‸"));
    assert_eq!(completions.len(), 1);
    assert_eq!(detail(&completions, "result"), "Summary");
}

#[test]
fn an_ensure_sees_only_the_steps_that_ran_before() {
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"$.steps.‸\"\n",
    ));
    assert_eq!(found, ["first"]);
}

// ----- half-typed documents ---------------------------------------------------------------------

#[test]
fn a_half_typed_line_completes_from_the_last_good_analysis() {
    let good = Analysis::new("t.stratum.yaml", BASE);
    let marked = base_with("        function: summarize", "        dep‸\n");
    let (current, offset) = at(&marked);
    assert!(
        current
            .compilation
            .diagnostics
            .iter()
            .any(|d| d.code.to_string() == "E0004"),
        "the half-typed text must not parse: {:?}",
        current.compilation.diagnostics
    );
    let completions = complete(&current, Some(&good), offset);
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert!(found.contains(&"depends_on"), "{found:?}");
    // The step's kind still comes through: a function step takes no `ensure`.
    assert!(!found.contains(&"ensure"), "{found:?}");
    let depends_on = completions
        .iter()
        .find(|c| c.label == "depends_on")
        .unwrap();
    assert_eq!(current.slice(depends_on.replace.unwrap()), "dep");
    // Without the last good analysis the keys are still known, the kind is not.
    let found: Vec<String> = complete(&current, None, offset)
        .into_iter()
        .map(|c| c.label)
        .collect();
    has(&found, &["depends_on", "ensure"]);
}

#[test]
fn a_half_typed_reference_completes_from_the_last_good_analysis() {
    let good = Analysis::new("t.stratum.yaml", BASE);
    let marked = base_replacing(
        "text: \"$.steps.first.output.text\"",
        "text: \"$.steps.first.output.‸",
    );
    let (current, offset) = at(&marked);
    let found: Vec<String> = complete(&current, Some(&good), offset)
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert_eq!(found, ["text", "score", "tone", "address"]);
    let marked = base_replacing("depends_on: [second]", "depends_on: [sec‸");
    let (current, offset) = at(&marked);
    let found: Vec<String> = complete(&current, Some(&good), offset)
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert_eq!(found, ["first", "second"]);
}

// ----- robustness -------------------------------------------------------------------------------

#[test]
fn every_offset_of_odd_texts_is_answered() {
    let good = Analysis::new("t.stratum.yaml", BASE);
    let texts = [
        BASE.to_owned(),
        BASE.replace('\n', "\r\n"),
        BASE.replace("  ", "\t"),
        "é: 😀\n- - a: [b, {c: \"$.steps.\u{301}.output.\"}]\n  ? x\n: y\n\r\r---\n...\n".to_owned(),
        "flows:\n  f:\n    steps:\n    - id: a\n      ensure: |\n        result.\n      depends_on:\n      - \n".to_owned(),
        "- - - -\n:::\n'a\": b\n\"\": c\n  d: |\n e\n".to_owned(),
        String::new(),
    ];
    for text in &texts {
        let analysis = Analysis::new("t.stratum.yaml", text);
        for offset in 0..=text.len() + 2 {
            let _ = complete(&analysis, None, offset);
            let _ = complete(&analysis, Some(&good), offset);
        }
    }
}

#[test]
fn every_line_deleted_in_turn_is_answered() {
    let good = Analysis::new("t.stratum.yaml", BASE);
    let lines: Vec<&str> = BASE.lines().collect();
    for skipped in 0..lines.len() {
        let text: String = lines
            .iter()
            .enumerate()
            .filter(|&(at, _)| at != skipped)
            .map(|(_, line)| format!("{line}\n"))
            .collect();
        let analysis = Analysis::new("t.stratum.yaml", &text);
        for offset in (0..=text.len()).step_by(5) {
            let _ = complete(&analysis, Some(&good), offset);
        }
    }
}

#[test]
fn crlf_line_breaks_complete_as_lf_ones() {
    let marked = base_replacing("doc: \"$.input.doc\"", "doc: \"$.input.‸\"").replace('\n', "\r\n");
    assert_eq!(labels(&marked), ["doc", "limit"]);
    let marked = base_with("        output_contract: Summary", "        ‸\n").replace('\n', "\r\n");
    has(&labels(&marked), &["agent", "next"]);
}

#[test]
fn results_and_details_are_bounded() {
    let fields: String = (0..3000)
        .map(|i| format!("    f{i}: {{type: string}}\n"))
        .collect();
    let values: String = (0..500).map(|i| format!("v{i}, ")).collect();
    let spec = format!(
        "version: \"0.2\"\ncontracts:\n  Big:\n{fields}    e: {{type: string, values: [{values}]}}\nfunctions:\n  f:\n    mode: infer\n    intent: x\n    input: {{}}\n    output: Big\n    ensure:\n      - \"result.‸\"\n"
    );
    let completions = run(&spec);
    assert_eq!(completions.len(), MAX_COMPLETIONS);
    let spec = spec
        .replace("result.‸", "result.e.x")
        .replace("    ensure:", "    ensure:\n      - \"result.‸\"");
    let _ = spec;
    let long = detail(
        &run(&format!(
            "version: \"0.2\"\ncontracts:\n  Big:\n    e: {{type: string, values: [{values}]}}\nfunctions:\n  f:\n    mode: infer\n    intent: x\n    input: {{}}\n    output: Big\n    ensure:\n      - \"result.‸\"\n"
        )),
        "e",
    );
    assert_eq!(long.chars().count(), MAX_DETAIL + 1, "{long}");
    assert!(long.ends_with('…'));
}

/// The key filters per step kind must agree with the middle end's rules: every key refused on
/// a kind of step is an error there.
#[test]
fn refused_keys_are_errors_on_that_kind_of_step() {
    let value = |key: &str| match key {
        "output_schema" => "{type: object}",
        "max_iterations" | "retries" => "2",
        "exit_criterion" | "score_expr" => "\"1\"",
        "accumulate" => "\"[1]\"",
        "accumulate_key" => "\"item\"",
        "on_fail" | "next" | "on_approve" | "on_revise" | "on_kill" => "first",
        "ensure" => "[\"True\"]",
        "output_contract" => "Summary",
        "model" | "agent" => "claude",
        "budget" => "{ms: 1}",
        "guardrails" => "[\"x\"]",
        "reasoning_template" => "{a: 1}",
        "cache" => "true",
        "policy" | "policy_fallback" => "flag",
        other => panic!("no value for {other}"),
    };
    let kinds = [
        (
            StepSort::Gate,
            "function: approve\n        on_approve: ~\n        on_revise: first\n        on_kill: ~",
        ),
        (StepSort::Function { compute: false }, "function: summarize"),
        (StepSort::Flow, "flow: helper"),
        (StepSort::Inline, "intent: \"go\""),
    ];
    for (sort, kind) in kinds {
        // The version 0.3 keys are another version's error on this spec: tested below.
        let keys = keys::STEP
            .keys
            .iter()
            .filter(|key| key.since <= Version::V0_2);
        for key in keys.map(|key| key.name) {
            if !refused_on(sort, key) {
                continue;
            }
            let step = format!(
                "      - id: extra\n        {kind}\n        {key}: {}\n",
                value(key)
            );
            let spec = base_with("        depends_on: [second]", &step);
            let analysis = Analysis::new("t.stratum.yaml", &spec);
            let mentioned = format!("`{key}");
            assert!(
                analysis
                    .compilation
                    .diagnostics
                    .iter()
                    .any(|d| d.is_error() && d.message.contains(&mentioned)),
                "{key} on a {sort:?} step is not an error: {:?}",
                analysis.compilation.diagnostics
            );
        }
    }
}

#[test]
fn snapshot_of_an_inline_steps_keys_and_result_fields() {
    let completions = run(&base_with(
        "        output_contract: Summary",
        "        ‸\n",
    ));
    let shown: String = completions
        .iter()
        .map(|c| {
            format!(
                "{:<20} {:?} {:?} {:?}\n",
                c.label,
                c.kind,
                c.detail.as_deref().unwrap_or(""),
                c.insert_text.as_deref().unwrap_or("")
            )
        })
        .collect();
    let fields = run(&base_with(
        "        output_contract: Summary",
        "        max_iterations: 2\n        exit_criterion: \"result.‸\"\n",
    ));
    let shown: String = std::iter::once("keys of an inline step:\n".to_owned())
        .chain(shown.lines().map(|line| format!("{line}\n")))
        .chain(std::iter::once(
            "result. in its exit_criterion:\n".to_owned(),
        ))
        .chain(fields.iter().map(|c| {
            format!(
                "{:<20} {:?} {:?}\n",
                c.label,
                c.kind,
                c.detail.as_deref().unwrap_or("")
            )
        }))
        .collect();
    insta::assert_snapshot!(shown);
}

// ----- iteration names --------------------------------------------------------------------------

/// A clean spec with a step that iterates: scored, accumulating, keyed.
const LOOP: &str = r#"version: "0.2"
contracts:
  Finding:
    id: {type: string}
    severity: {type: string, values: [low, high]}
  Review:
    findings: {type: "Finding[]"}
    score: {type: number}
    notes: {type: object}
flows:
  audit:
    input:
      doc: {type: string}
    output: Review
    steps:
      - id: look
        intent: "Review the document"
        inputs:
          doc: "$.input.doc"
        output_contract: Review
        max_iterations: 5
        score_expr: "result.score"
        accumulate: "result.findings"
        accumulate_key: "item.id"
        exit_criterion: "best_score > 0.9 or dry_streak >= 2"
        ensure:
          - "len(result.findings) >= 0"
        skip_if: "$.input.doc == ''"
"#;

/// LOOP with the first `from` replaced by `to`.
fn loop_replacing(from: &str, to: &str) -> String {
    assert!(LOOP.contains(from), "{from:?} is not in LOOP");
    LOOP.replacen(from, to, 1)
}

/// LOOP without the lines that start (after their indentation) with one of `keys` and a colon.
fn loop_without(keys: &[&str]) -> String {
    LOOP.lines()
        .filter(|line| {
            !keys
                .iter()
                .any(|key| line.trim_start().starts_with(&format!("{key}:")))
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

const SCORED: [&str; 3] = ["best_score", "prior_scores", "iteration"];
const ACCUMULATED: [&str; 4] = [
    "accumulator",
    "accumulated_count",
    "new_count",
    "dry_streak",
];

#[test]
fn the_loop_spec_is_clean() {
    crate::analysis::clean(LOOP);
}

#[test]
fn an_exit_criterion_sees_the_iteration_names_with_types_and_docs() {
    let completions = run(&loop_replacing(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"best_score > 0.9 or ‸\"",
    ));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        found,
        [
            "result",
            "best_score",
            "prior_scores",
            "iteration",
            "accumulator",
            "accumulated_count",
            "new_count",
            "dry_streak"
        ]
    );
    assert_eq!(detail(&completions, "result"), "Review");
    assert_eq!(detail(&completions, "best_score"), "float?");
    assert_eq!(detail(&completions, "prior_scores"), "list<float>");
    assert_eq!(detail(&completions, "iteration"), "int");
    assert_eq!(
        detail(&completions, "accumulator"),
        "list<{id: string, severity: 'low' | 'high'}>"
    );
    assert_eq!(detail(&completions, "accumulated_count"), "int");
    assert_eq!(detail(&completions, "new_count"), "int?");
    assert_eq!(detail(&completions, "dry_streak"), "int");
    for completion in &completions {
        assert_eq!(completion.kind, CompletionKind::Variable);
        let doc = completion.documentation.as_deref().unwrap_or("");
        assert!(
            !doc.is_empty() && !doc.contains('\n'),
            "{}: {doc:?}",
            completion.label
        );
    }
    // A block scalar, and the word typed so far is what is replaced.
    let (analysis, offset) = at(&loop_replacing(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: |\n          iteration > 2 and dry_s‸",
    ));
    let completions = complete(&analysis, None, offset);
    let dry = completions
        .iter()
        .find(|c| c.label == "dry_streak")
        .unwrap();
    assert_eq!(analysis.slice(dry.replace.unwrap()), "dry_s");
}

#[test]
fn the_score_names_need_a_score_expr() {
    let marked = loop_without(&["score_expr"]).replace(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"‸\"",
    );
    let found = labels(&marked);
    lacks(&found, &SCORED);
    has(&found, &ACCUMULATED);
    has(&found, &["result"]);
}

#[test]
fn the_accumulate_names_need_an_accumulate() {
    let marked = loop_without(&["accumulate", "accumulate_key"]).replace(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"‸\"",
    );
    let found = labels(&marked);
    lacks(&found, &ACCUMULATED);
    has(&found, &SCORED);
    let marked = loop_without(&["accumulate", "accumulate_key", "score_expr"]).replace(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"‸\"",
    );
    assert_eq!(labels(&marked), ["result"]);
}

#[test]
fn the_iteration_names_are_only_in_an_exit_criterion() {
    let all: Vec<&str> = SCORED
        .iter()
        .chain(&ACCUMULATED)
        .copied()
        .chain(["item"])
        .collect();
    for (from, to) in [
        ("- \"len(result.findings) >= 0\"", "- \"‸\""),
        ("score_expr: \"result.score\"", "score_expr: \"‸\""),
        ("accumulate: \"result.findings\"", "accumulate: \"‸\""),
        ("skip_if: \"$.input.doc == ''\"", "skip_if: \"‸\""),
        ("doc: \"$.input.doc\"", "doc: \"‸\""),
    ] {
        let found = labels(&loop_replacing(from, to));
        lacks(&found, &all);
    }
    // Nor in a function's `ensure`.
    let found = labels(&base_replacing("len(result.text) > 0", "len(‸"));
    lacks(&found, &all);
}

#[test]
fn an_accumulate_key_sees_item_and_its_fields_only() {
    let completions = run(&loop_replacing(
        "accumulate_key: \"item.id\"",
        "accumulate_key: \"‸\"",
    ));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["item"], "no `result`, no iteration names");
    assert_eq!(
        detail(&completions, "item"),
        "{id: string, severity: 'low' | 'high'}"
    );
    assert!(completions[0].documentation.is_some());
    let completions = run(&loop_replacing(
        "accumulate_key: \"item.id\"",
        "accumulate_key: \"item.‸\"",
    ));
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["id", "severity"]);
    assert_eq!(detail(&completions, "severity"), "'low' | 'high'");
    // `item` is no name anywhere else, not even in the exit criterion.
    let found = labels(&loop_replacing(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"item.‸\"",
    ));
    assert!(found.is_empty(), "{found:?}");
    let found = labels(&loop_replacing(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"‸\"",
    ));
    lacks(&found, &["item"]);
}

#[test]
fn an_item_of_unknown_type_has_no_fields() {
    // `notes` is an open record: not a list, so `item` is `any` (and the spec has an E0045).
    let marked = loop_replacing(
        "accumulate: \"result.findings\"",
        "accumulate: \"result.notes\"",
    )
    .replace("accumulate_key: \"item.id\"", "accumulate_key: \"item.‸\"");
    assert!(labels(&marked).is_empty());
    let marked = marked.replace("item.‸", "‸");
    let completions = run(&marked);
    assert_eq!(detail(&completions, "item"), "any");
}

#[test]
fn iteration_names_from_the_last_good_analysis() {
    let good = Analysis::new("t.stratum.yaml", LOOP);
    let (current, offset) = at(&loop_replacing(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"‸",
    ));
    assert!(!parsed(&current.compilation.ast), "the text must not parse");
    let found: Vec<String> = complete(&current, Some(&good), offset)
        .into_iter()
        .map(|c| c.label)
        .collect();
    has(&found, &SCORED);
    has(&found, &ACCUMULATED);
}

// ----- bracket access ---------------------------------------------------------------------------

#[test]
fn bracket_access_offers_fields_closed() {
    let (analysis, offset) = at(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"result['‸\"\n",
    ));
    let completions = complete(&analysis, None, offset);
    let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(found, ["text", "score", "tone", "address"]);
    let score = completions.iter().find(|c| c.label == "score").unwrap();
    assert_eq!(score.insert_text.as_deref(), Some("score']"));
    assert_eq!(score.kind, CompletionKind::Field);
    assert_eq!(detail(&completions, "score"), "float");
    let replace = score.replace.unwrap();
    assert_eq!(replace.range(), offset..offset);
    // What was typed of the name is replaced.
    let (analysis, offset) = at(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"result['sc‸ > 1\"\n",
    ));
    let completions = complete(&analysis, None, offset);
    let score = completions.iter().find(|c| c.label == "score").unwrap();
    assert_eq!(analysis.slice(score.replace.unwrap()), "sc");
}

#[test]
fn bracket_access_with_double_quotes_and_escaped_quotes() {
    let completions = run(&base_with(
        "        output_contract: Summary",
        "        exit_criterion: 'result[\"‸'\n        max_iterations: 2\n",
    ));
    let text = completions.iter().find(|c| c.label == "text").unwrap();
    assert_eq!(text.insert_text.as_deref(), Some("text\"]"));
    // Inside a double-quoted YAML scalar the quote is escaped, and so is its closing.
    let completions = run(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"result[\\\"‸\"\n",
    ));
    let text = completions.iter().find(|c| c.label == "text").unwrap();
    assert_eq!(text.insert_text.as_deref(), Some("text\\\"]"));
    // Inside a single-quoted one, doubled.
    let completions = run(&base_with(
        "        output_contract: Summary",
        "        ensure: ['result[''‸']\n",
    ));
    let text = completions.iter().find(|c| c.label == "text").unwrap();
    assert_eq!(text.insert_text.as_deref(), Some("text'']"));
}

#[test]
fn nested_bracket_access() {
    let expected = ["city", "zip"];
    for typed in [
        "result['address']['‸",
        "result.address['‸",
        "result[\"address\"]['‸",
    ] {
        let completions = run(&base_with(
            "        output_contract: Summary",
            &format!("        ensure:\n          - |\n            {typed}\n"),
        ));
        let found: Vec<&str> = completions.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(found, expected, "{typed}");
        assert_eq!(completions[1].insert_text.as_deref(), Some("zip']"));
    }
    // And a dot after a bracket.
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"result['address'].‸\"\n",
    ));
    assert_eq!(found, expected);
    // `$`-references too.
    let found = labels(&base_replacing(
        "text: \"$.steps.first.output.text\"",
        "text: \"$.steps.first.output['address']['‸\"",
    ));
    assert_eq!(found, expected);
}

#[test]
fn bracket_access_replaces_what_an_editor_closed() {
    let (analysis, offset) = at(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"result['sc‸'] > 0\"\n",
    ));
    let completions = complete(&analysis, None, offset);
    let score = completions.iter().find(|c| c.label == "score").unwrap();
    assert_eq!(analysis.slice(score.replace.unwrap()), "sc']");
    let (analysis, offset) = at(&base_with(
        "        output_contract: Summary",
        "        ensure:\n          - \"result['‸]\"\n",
    ));
    let completions = complete(&analysis, None, offset);
    let score = completions.iter().find(|c| c.label == "score").unwrap();
    assert_eq!(analysis.slice(score.replace.unwrap()), "]");
}

#[test]
fn no_bracket_fields_where_no_field_can_follow() {
    for typed in [
        // A string literal, not an access.
        "result.text == '‸",
        "result.text == 'ab‸",
        // Nothing before the bracket, or no quote yet.
        "['‸",
        // `$` and `$.steps` take names, not fields.
        "$['‸",
        "$.steps['‸",
        // An unknown field.
        "result['nope']['‸",
        // A field that has no fields.
        "result['text']['‸",
    ] {
        let found = labels(&base_with(
            "        output_contract: Summary",
            &format!("        ensure:\n          - |\n            {typed}\n"),
        ));
        lacks(&found, &["text", "score", "city", "first"]);
    }
    // Not outside their scope either: `result` in a skip_if.
    let found = labels(&base_with(
        "        output_contract: Summary",
        "        skip_if: \"result['‸\"\n",
    ));
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn the_access_before_the_cursor() {
    type Read<'t> = Option<(Vec<&'t str>, &'t str, Option<&'static str>)>;
    fn read(typed: &str) -> Read<'_> {
        access(typed).map(|a| (a.segments, a.partial, a.quote))
    }
    assert_eq!(
        read("$.steps.a.output.sc"),
        Some((vec!["$", "steps", "a", "output"], "sc", None))
    );
    assert_eq!(read("len(resu"), Some((vec![], "resu", None)));
    assert_eq!(
        read("x['a'][\"b\"]['"),
        Some((vec!["x", "a", "b"], "", Some("'")))
    );
    assert_eq!(
        read("x[''a''][''c"),
        Some((vec!["x", "a"], "c", Some("''")))
    );
    assert_eq!(read("f(x)."), None);
    assert_eq!(read("x[0]."), None);
    assert_eq!(read("x]['"), None);
    assert_eq!(read("x == 'a"), Some((vec![], "a", None)));
}

#[test]
fn snapshot_of_iteration_names_and_bracket_fields() {
    let show = |title: &str, completions: &[Completion]| -> String {
        std::iter::once(format!("{title}:\n"))
            .chain(completions.iter().map(|c| {
                format!(
                    "{:<18} {:?} {:?} {:?} {:?}\n",
                    c.label,
                    c.kind,
                    c.detail.as_deref().unwrap_or(""),
                    c.insert_text.as_deref().unwrap_or(""),
                    c.documentation.as_deref().unwrap_or(""),
                )
            }))
            .collect()
    };
    let exit = run(&loop_replacing(
        "exit_criterion: \"best_score > 0.9 or dry_streak >= 2\"",
        "exit_criterion: \"‸\"",
    ));
    let key = run(&loop_replacing(
        "accumulate_key: \"item.id\"",
        "accumulate_key: \"‸\"",
    ));
    let bracket = run(&loop_replacing(
        "score_expr: \"result.score\"",
        "score_expr: \"len(result['findings']) + result['‸\"",
    ));
    let shown = [
        show("a bare name in exit_criterion", &exit),
        show("a bare name in accumulate_key", &key),
        show("result[' in score_expr", &bracket),
    ]
    .concat();
    insta::assert_snapshot!(shown);
}

// ----- version 0.3: stages, fan-out values, placeholders ----------------------------------------

/// The v0.3 spec with the first `from` replaced by `to` (which holds the cursor).
fn v03_replacing(from: &str, to: &str) -> String {
    let spec = crate::placeholders::V03_SPEC;
    assert!(spec.contains(from), "{from:?} is not in the v0.3 spec");
    spec.replacen(from, to, 1)
}

#[test]
fn keys_of_a_pipeline_stage_and_of_its_fanout() {
    let found = labels(&v03_replacing(
        "            join: true\n",
        "            join: true\n            ‸\n",
    ));
    has(
        &found,
        &["agent", "when", "exit_when", "fanout", "task_timeout"],
    );
    lacks(&found, &["intent_template", "join", "id", "source"]);
    let completions = run(&v03_replacing(
        "            join: true\n",
        "            join: true\n            ‸\n",
    ));
    assert!(
        detail(&completions, "when").starts_with("An expression over `item`"),
        "{completions:?}"
    );
    // A new stage starts with its required key.
    let found = labels(&v03_replacing(
        "            join: true\n",
        "            join: true\n          - ‸\n",
    ));
    assert_eq!(found.first().map(String::as_str), Some("intent_template"));
    let found = labels(&v03_replacing(
        "            fanout: {max: 3, require: all}\n",
        "            fanout:\n              max: 3\n              ‸\n",
    ));
    assert_eq!(found, ["require"]);
}

#[test]
fn fixed_values_of_fan_out_keys() {
    let step = "        type: parallel_dispatch\n";
    let with = |line: &str| v03_replacing(step, &format!("{step}        {line}\n"));
    assert_eq!(
        labels(&v03_replacing("type: parallel_dispatch", "type: ‸")),
        [
            "inline",
            "function",
            "flow",
            "decompose",
            "parallel_dispatch",
            "pipeline"
        ]
    );
    assert_eq!(labels(&with("isolation: ‸")), ["worktree", "none"]);
    assert_eq!(labels(&with("merge: ‸")), ["sequential_apply", "manual"]);
    assert_eq!(labels(&with("require: ‸")), ["all", "any"]);
    assert_eq!(
        labels(&v03_replacing(
            "            fanout: {max: 3, require: all}\n",
            "            fanout:\n              max: 3\n              require: ‸\n",
        )),
        ["all", "any"]
    );
    assert_eq!(
        labels(&v03_replacing(
            "source: \"$.steps.plan.output.tasks\"",
            "source: \"$.steps.plan.output.‸\""
        )),
        ["tasks"]
    );
}

#[test]
fn keys_of_fan_out_steps_follow_their_type() {
    let parallel = labels(&v03_replacing(
        "        intent_template: \"Task {task.id}: {description}\"\n",
        "        intent_template: \"Task {task.id}: {description}\"\n        ‸\n",
    ));
    has(
        &parallel,
        &["max_concurrent", "isolation", "merge", "require"],
    );
    lacks(
        &parallel,
        &[
            "stages",
            "max_iterations",
            "function",
            "intent",
            "reasoning_template",
        ],
    );
    let pipeline = labels(&v03_replacing(
        "        depends_on: [build]\n",
        "        depends_on: [build]\n        ‸\n",
    ));
    has(&pipeline, &["max_concurrent", "pre_merge_verify"]);
    lacks(&pipeline, &["intent_template", "stages", "accumulate"]);
    // A decompose step is an agent step: no fan-out keys.
    let decompose = labels(&v03_replacing(
        "      - {id: plan, type: decompose, agent: claude, output_contract: TaskGraph, intent: \"Split\", inputs: {feature: \"$.input.feature\"}}\n",
        "      - id: plan\n        type: decompose\n        agent: claude\n        output_contract: TaskGraph\n        intent: \"Split\"\n        inputs: {feature: \"$.input.feature\"}\n        ‸\n",
    ));
    has(&decompose, &["ensure", "retries"]);
    lacks(
        &decompose,
        &["source", "stages", "isolation", "intent_template"],
    );
}

#[test]
fn placeholders_of_a_parallel_template() {
    let names = run(&v03_replacing("{description}\"", "{‸\""));
    let found: Vec<String> = names.iter().map(|c| c.label.clone()).collect();
    assert_eq!(
        found,
        [
            "task",
            "prev",
            "prev_raw",
            "id",
            "description",
            "files_owned"
        ]
    );
    assert_eq!(detail(&names, "description"), "string");
    assert_eq!(detail(&names, "prev"), "string");
    let fields = run(&v03_replacing("{description}\"", "{task.d‸\""));
    let found: Vec<String> = fields.iter().map(|c| c.label.clone()).collect();
    assert_eq!(found, ["id", "description", "files_owned"]);
    assert_eq!(detail(&fields, "files_owned"), "list<any>");
    // The completion replaces what is typed of the name.
    let (analysis, offset) = at(&v03_replacing("{description}\"", "{task.d‸\""));
    let replace = complete(&analysis, None, offset)[0].replace.unwrap();
    assert_eq!(analysis.slice(replace), "d");
    // Not after a literal brace, nor outside a placeholder.
    assert!(labels(&v03_replacing("{description}\"", "{{‸\"")).is_empty());
    assert!(labels(&v03_replacing("{description}\"", "{description} ‸\"")).is_empty());
}

#[test]
fn placeholders_of_stages_follow_their_role() {
    let first = labels(&v03_replacing("({id})\"", "({‸\""));
    assert_eq!(first, ["id", "item", "description", "files_owned"]);
    let later = labels(&v03_replacing("{prev} for", "{‸ for"));
    has(&later, &["item", "prev", "prev_raw", "description"]);
    let lane = labels(&v03_replacing("{source.id}", "{‸"));
    has(&lane, &["item", "prev", "source"]);
    lacks(&lane, &["description", "prevs"]);
    let join = labels(&v03_replacing("{prevs}", "{‸"));
    has(&join, &["prevs", "prevs_raw", "source"]);
    lacks(&join, &["prev"]);
    assert_eq!(
        labels(&v03_replacing("{item.description}", "{item.‸}")),
        ["id", "description", "files_owned"]
    );
    assert_eq!(
        labels(&v03_replacing("{source.id}", "{source.‸}")),
        ["id", "description", "files_owned"]
    );
}

#[test]
fn refused_keys_are_errors_on_version_0_3_steps() {
    let value = |key: &str| match key {
        "max_iterations" | "max_concurrent" | "task_timeout" => "2",
        "exit_criterion" | "score_expr" => "\"1\"",
        "accumulate" => "\"[1]\"",
        "accumulate_key" => "\"item\"",
        "on_approve" | "on_revise" | "on_kill" => "plan",
        "reasoning_template" | "task_reasoning_template" => "{a: 1}",
        "cache" | "capture_diff" | "defer_advance" => "true",
        "policy" | "policy_fallback" => "flag",
        "function" => "f",
        "intent" => "\"go\"",
        "flow" => "implement",
        "judge" => "{criteria: [ok]}",
        "source" => "\"$.steps.plan.output.tasks\"",
        "intent_template" => "\"x\"",
        "stages" => "[{intent_template: \"x\"}]",
        "isolation" => "none",
        "require" => "any",
        "merge" => "manual",
        "pre_merge_verify" => "[\"true\"]",
        other => panic!("no value for {other}"),
    };
    let kinds = [
        (
            StepSort::Parallel,
            "type: parallel_dispatch\n        source: \"$.steps.plan.output.tasks\"\n        intent_template: \"{id}\"",
        ),
        (
            StepSort::Pipeline,
            "type: pipeline\n        source: \"$.steps.plan.output.tasks\"\n        stages: [{intent_template: \"{id}\"}]",
        ),
        (StepSort::Inline, "intent: \"go\""),
    ];
    for (sort, kind) in kinds {
        for key in keys::STEP.keys.iter().map(|key| key.name) {
            if !refused_on(sort, key) || kind.contains(&format!("{key}:")) {
                continue;
            }
            let spec = format!(
                "{}      - id: extra\n        {kind}\n        {key}: {}\n",
                crate::placeholders::V03_SPEC,
                value(key)
            );
            let analysis = Analysis::new("t.stratum.yaml", &spec);
            let mentioned = format!("`{key}");
            assert!(
                analysis
                    .compilation
                    .diagnostics
                    .iter()
                    .any(|d| d.is_error() && d.message.contains(&mentioned)),
                "{key} on a {sort:?} step is not an error: {:?}",
                analysis.compilation.diagnostics
            );
        }
    }
}

// ----- judge blocks and reasoning templates ------------------------------------------------------

/// A spec with a judge step and a reasoning template, `‸` where `CURSOR` stands.
fn judged(cursor: &str) -> String {
    r#"version: "0.3"
flows:
  review:
    input: {diff: {type: string}}
    steps:
      - id: review
        intent: "Review the diff"
        inputs: {diff: "$.input.diff"}
        reasoning_template:
          sections:
            - id: p
              label: Premises
              description: "The facts"
CURSOR_TEMPLATE
      - id: check
        depends_on: [review]
        judge:
          predicates:
            - id: tests
              type: deterministic
              statement: "file_exists('artifacts/log.txt')"
CURSOR_PREDICATE
          budget:
            max_turns: 3
CURSOR_BUDGET
CURSOR_JUDGE
"#
    .replace(cursor, "‸")
    .replace("CURSOR_TEMPLATE\n", "")
    .replace("CURSOR_PREDICATE\n", "")
    .replace("CURSOR_BUDGET\n", "")
    .replace("CURSOR_JUDGE\n", "")
}

#[test]
fn keys_and_values_inside_a_judge_block() {
    let spec = |cursor: &str, line: &str| judged(cursor).replace('‸', line);
    assert_eq!(
        labels(&spec("CURSOR_JUDGE", "          ‸\n")),
        ["stakes"],
        "`predicates` and `budget` are written"
    );
    assert_eq!(
        labels(&spec("CURSOR_PREDICATE", "              ‸\n")),
        ["applied_gate"]
    );
    assert_eq!(
        labels(&spec("CURSOR_BUDGET", "            ‸\n")),
        ["max_dollars", "max_wall_clock_s"]
    );
    assert_eq!(
        labels(&spec("CURSOR_JUDGE", "          stakes: ‸\n")),
        ["cheap", "default", "paranoid"]
    );
    assert_eq!(
        labels(&spec(
            "CURSOR_PREDICATE",
            "            - id: more\n              type: ‸\n"
        )),
        ["deterministic", "verified", "judged"]
    );
}

#[test]
fn keys_inside_a_reasoning_template() {
    let spec = |line: &str| judged("CURSOR_TEMPLATE").replace('‸', line);
    assert_eq!(labels(&spec("          ‸\n")), ["require_citations"]);
    let section = labels(&spec("            - ‸\n"));
    assert_eq!(section, ["id", "label", "description"]);
}
