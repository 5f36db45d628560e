//! Scenarios of ordinary steps: what a dispatch says, how `step_done` checks a result (output
//! schema, contract, guardrails, `ensure`s) and counts attempts, routing (`on_fail`, `next`)
//! and its bound, `skip_if` and `stratum_skip_step`, the final output and the flow's output
//! contract, flow inputs, errors, the result cache, budgets, the file built-ins' root, and
//! `stratum_resume`.
//!
//! Each scenario is a transcript snapshot plus explicit assertions on the fields it is about.
//! Tests named `reference_bug_N_…` pin the fix of weak point N of the reference runtime
//! (`reference-runtime.md` §3).

use stratum_test_support as support;

use std::sync::Arc;

use serde_json::{Value, json};
use stratum_runtime::state::FlowHeader;
use stratum_runtime::{Config, FlowId, MemoryStore, Pricing};
use support::Scenario;

/// The value at a JSON pointer, or null.
fn at(value: &Value, pointer: &str) -> Value {
    value.pointer(pointer).cloned().unwrap_or(Value::Null)
}

/// The number of elements of the list at `pointer` (0 when it is not a list).
fn len_at(value: &Value, pointer: &str) -> usize {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// The strings of the list at `pointer`.
fn strings_at(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A flow's stored header, as the store has it.
fn stored_header(s: &Scenario, flow: &str) -> FlowHeader {
    let id = FlowId::parse(flow).expect("a flow id");
    let mut header = None;
    s.store
        .read(&mut |snapshot| {
            header = snapshot.flow(&id)?;
            Ok(())
        })
        .expect("the store reads");
    header.expect("the flow is stored")
}

fn with_config(spec: &str, config: Config) -> Scenario {
    Scenario::with(spec, Arc::new(MemoryStore::new()), config)
}

// ---------------------------------------------------------------------------------------------
// Dispatch

const DISPATCH: &str = r#"
version: "0.2"
contracts:
  Draft:
    title: {type: string}
    meta: {type: object}
  Summary:
    text: {type: string}
functions:
  summarize:
    mode: compute
    intent: "Summarize the draft"
    input:
      title: {type: string}
      author: {type: string}
      topic: {type: string}
    output: Summary
    ensure:
      - "len(result.text) > 0"
    retries: 2
  draft:
    mode: infer
    intent: "Draft a document on the topic"
    input: {topic: {type: string}}
    output: Draft
    ensure:
      - "result.title != ''"
flows:
  main:
    input:
      topic: {type: string}
    steps:
      # Declared first, but it reads `draft`'s output: it runs second.
      - id: summarize
        function: summarize
        inputs:
          title: "$.steps.draft.output.title"
          author: "$.steps.draft.output.meta.author"
          topic: "$.input.topic"
      - id: draft
        function: draft
        inputs: {topic: "$.input.topic"}
      - id: polish
        intent: "Polish the summary for the newsletter"
        agent: claude
        model: "claude-sonnet-4"
        inputs:
          summary: "$.steps.summarize.output"
          edition: "weekly"
        output_contract: Summary
        ensure:
          - "result.text != $.steps.summarize.output.text"
"#;

#[test]
fn dispatch_of_function_and_inline_steps_in_topological_order() {
    let mut s = Scenario::new(DISPATCH);
    let first = s.start(Some("main"), json!({"topic": "rust"}));
    let flow = s.flow(1);
    assert_eq!(at(&first, "/status"), "execute_step");
    assert_eq!(
        at(&first, "/step_id"),
        "draft",
        "a step that others depend on runs first"
    );
    assert_eq!(at(&first, "/step_number"), 1);
    assert_eq!(at(&first, "/total_steps"), 3);
    assert_eq!(at(&first, "/step_mode"), "function");
    assert_eq!(at(&first, "/function"), "draft");
    assert_eq!(at(&first, "/mode"), "infer");
    assert_eq!(at(&first, "/intent"), "Draft a document on the topic");
    assert_eq!(at(&first, "/inputs"), json!({"topic": "rust"}));
    assert_eq!(at(&first, "/output_contract"), "Draft");
    assert_eq!(
        at(&first, "/output_fields"),
        json!({"title": "string", "meta": "object"})
    );
    assert_eq!(at(&first, "/ensure"), json!(["result.title != ''"]));
    assert_eq!(
        at(&first, "/retries_remaining"),
        3,
        "a function's default retries: 3 attempts"
    );
    assert!(
        first.get("model").is_none(),
        "function dispatches carry no model key"
    );

    s.wait_ms(1_500);
    let second = s.done(
        &flow,
        "draft",
        json!({"title": "Rust", "meta": {"author": "ann"}}),
    );
    assert_eq!(at(&second, "/step_id"), "summarize");
    assert_eq!(at(&second, "/step_number"), 2);
    assert_eq!(at(&second, "/mode"), "compute");
    assert_eq!(
        at(&second, "/inputs"),
        json!({"title": "Rust", "author": "ann", "topic": "rust"}),
        "inputs from $.input, from a step's output field and from a nested path"
    );
    assert_eq!(at(&second, "/retries_remaining"), 2);
    assert_eq!(at(&second, "/output_fields"), json!({"text": "string"}));

    let third = s.done(&flow, "summarize", json!({"text": "Rust is fast"}));
    assert_eq!(at(&third, "/step_id"), "polish");
    assert_eq!(at(&third, "/step_number"), 3);
    assert_eq!(at(&third, "/step_mode"), "inline");
    assert_eq!(
        at(&third, "/intent"),
        "Polish the summary for the newsletter"
    );
    assert_eq!(at(&third, "/agent"), "claude");
    assert_eq!(at(&third, "/model"), "claude-sonnet-4");
    assert_eq!(
        at(&third, "/inputs"),
        json!({"summary": {"text": "Rust is fast"}, "edition": "weekly"})
    );
    assert_eq!(at(&third, "/output_contract"), "Summary");
    assert_eq!(
        at(&third, "/retries_remaining"),
        1,
        "an inline step's default retries: 1 attempt"
    );
    assert!(third.get("function").is_none() && third.get("mode").is_none());

    let done = s.done(&flow, "polish", json!({"text": "Rust: fast, and safe"}));
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(
        at(&done, "/output"),
        json!({"text": "Rust: fast, and safe"})
    );
    let order: Vec<Value> = ["/trace/0/step_id", "/trace/1/step_id", "/trace/2/step_id"]
        .iter()
        .map(|pointer| at(&done, pointer))
        .collect();
    assert_eq!(
        order,
        vec![json!("draft"), json!("summarize"), json!("polish")]
    );
    assert_eq!(
        at(&done, "/trace/0/duration_ms"),
        1_500,
        "from its dispatch to its result"
    );
    assert_eq!(at(&done, "/trace/1/duration_ms"), 0);
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// Checking results

const CHECKS: &str = r#"
version: "0.2"
contracts:
  Report:
    summary: {type: string}
    score: {type: number}
functions:
  write_report:
    mode: infer
    intent: "Write the report"
    input: {topic: {type: string}}
    output: Report
    guardrails: ["sk-[A-Za-z0-9]{8,}", "(?i)password"]
    ensure:
      - "result.score >= 0.5"
      - "len(result.summary) <= 20"
    retries: 5
flows:
  main:
    input: {topic: {type: string}}
    steps:
      - id: report
        function: write_report
        inputs: {topic: "$.input.topic"}
        output_schema:
          type: object
          required: [summary, score, sources]
          properties:
            sources: {type: array, minItems: 1}
"#;

#[test]
fn step_done_checks_schema_contract_guardrails_then_ensures() {
    let mut s = Scenario::new(CHECKS);
    s.start(None, json!({"topic": "q3"}));
    let flow = s.flow(1);

    s.note("everything wrong at once: every problem is reported, in the order of the checks");
    let all = s.done(
        &flow,
        "report",
        json!({"summary": 7, "score": "high", "note": "password is sk-ABCDEFGH12"}),
    );
    assert_eq!(at(&all, "/status"), "schema_failed");
    assert_eq!(at(&all, "/retries_remaining"), 4);
    let violations = strings_at(&all, "/violations");
    let kinds: Vec<&str> = violations
        .iter()
        .map(|violation| {
            if violation.starts_with("output_schema violation") {
                "output_schema"
            } else if violation.starts_with("contract 'Report' violation") {
                "contract"
            } else if violation.starts_with("guardrail matched") {
                "guardrail"
            } else if violation.starts_with("ensure ") {
                "ensure"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "output_schema",
            "contract",
            "contract",
            "guardrail",
            "guardrail",
            "ensure",
            "ensure"
        ],
        "{violations:#?}"
    );

    s.note("only a guardrail fails: guardrail_blocked");
    let blocked = s.done(
        &flow,
        "report",
        json!({"summary": "my password", "score": 0.9, "sources": ["wiki"]}),
    );
    assert_eq!(at(&blocked, "/status"), "guardrail_blocked");
    assert_eq!(at(&blocked, "/retries_remaining"), 3);
    assert_eq!(
        at(&blocked, "/violations"),
        json!(["guardrail matched: '(?i)password'"])
    );

    s.note("only ensures fail: ensure_failed, each with the operands that decided it");
    let ensures = s.done(
        &flow,
        "report",
        json!({"summary": "a summary that is far too long", "score": 0.25, "sources": ["wiki"]}),
    );
    assert_eq!(at(&ensures, "/status"), "ensure_failed");
    assert_eq!(at(&ensures, "/retries_remaining"), 2);
    let violations = strings_at(&ensures, "/violations");
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(
        violations.iter().all(|v| v.starts_with("ensure '")),
        "{violations:#?}"
    );
    assert!(
        violations.iter().any(|v| v.contains("0.25")),
        "the operand's value: {violations:#?}"
    );

    let done = s.done(
        &flow,
        "report",
        json!({"summary": "Q3 went well", "score": 0.75, "sources": ["wiki"]}),
    );
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/trace/0/attempts"), 4);
    insta::assert_snapshot!(s.transcript());
}

const INLINE_SCHEMA: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: plan
        intent: "Plan the change as a list of steps"
        output_schema:
          type: object
          required: [steps]
          properties:
            steps: {type: array, items: {type: string}}
        on_fail: replan
      - id: replan
        intent: "Turn the failed plan into a list of steps by hand"
        inputs:
          failed: "$.steps.plan.output"
          draft: "$.steps.plan.output.draft"
"#;

#[test]
fn reference_bug_3_output_schema_is_checked_on_inline_steps() {
    let mut s = Scenario::new(INLINE_SCHEMA);
    let first = s.start(None, json!({}));
    let flow = s.flow(1);
    assert_eq!(at(&first, "/retries_remaining"), 1);

    s.note("the inline step's output_schema refuses the result; with its one attempt spent, on_fail routes");
    let routed = s.done(
        &flow,
        "plan",
        json!({"draft": "do it", "steps": "all of them"}),
    );
    assert_eq!(at(&routed, "/status"), "execute_step");
    assert_eq!(at(&routed, "/step_id"), "replan");
    assert_eq!(at(&routed, "/routed_from"), "plan");
    let violations = strings_at(&routed, "/violations");
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert!(
        violations
            .iter()
            .all(|v| v.starts_with("output_schema violation: ")),
        "{violations:#?}"
    );
    assert_eq!(
        at(&routed, "/inputs"),
        json!({"failed": {"draft": "do it", "steps": "all of them"}, "draft": "do it"}),
        "the recovery step reads the failing result"
    );
    let done = s.done(&flow, "replan", json!({"steps": ["do it"]}));
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/trace/0/violations"), json!(violations));
    insta::assert_snapshot!(s.transcript());
}

const CONTRACTS: &str = r#"
version: "0.2"
contracts:
  Estimate:
    hours: {type: number}
    risk: {type: string}
    tags: {type: array}
functions:
  estimate:
    mode: infer
    intent: "Estimate the work"
    input: {task: {type: string}}
    output: Estimate
flows:
  main:
    input: {task: {type: string}}
    steps:
      - id: estimate
        function: estimate
        inputs: {task: "$.input.task"}
"#;

#[test]
fn reference_bug_8_output_contracts_are_enforced() {
    let mut s = Scenario::new(CONTRACTS);
    s.start(None, json!({"task": "port the parser"}));
    let flow = s.flow(1);

    let missing = s.done(&flow, "estimate", json!({"hours": 12, "tags": []}));
    assert_eq!(at(&missing, "/status"), "schema_failed");
    let violations = strings_at(&missing, "/violations");
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert!(
        violations
            .iter()
            .all(|v| v.starts_with("contract 'Estimate' violation: ") && v.contains("risk"))
    );

    let wrong_type = s.done(
        &flow,
        "estimate",
        json!({"hours": "twelve", "risk": "low", "tags": []}),
    );
    assert_eq!(at(&wrong_type, "/status"), "schema_failed");
    let violations = strings_at(&wrong_type, "/violations");
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert!(
        violations
            .iter()
            .all(|v| v.contains("twelve") && v.contains("number")),
        "{violations:#?}"
    );

    let done = s.done(
        &flow,
        "estimate",
        json!({"hours": 12, "risk": "low", "tags": ["parser"]}),
    );
    assert_eq!(at(&done, "/status"), "complete");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// Attempts and failure

const SENTIMENT: &str = r#"
version: "0.2"
contracts:
  Sentiment:
    label: {type: string}
    confidence: {type: number}
functions:
  classify:
    mode: infer
    intent: "Classify the sentiment of this text"
    input: {text: {type: string}}
    output: Sentiment
    ensure:
      - "result.confidence > 0.7"
flows:
  main:
    input: {text: {type: string}}
    steps:
      - id: classify
        function: classify
        inputs: {text: "$.input.text"}
      - id: respond
        intent: "Write a reply matching the sentiment"
        inputs: {label: "$.steps.classify.output.label"}
"#;

#[test]
fn reference_bug_1_retries_exhausted_ends_the_flow() {
    let mut s = Scenario::new(SENTIMENT);
    let first = s.start(None, json!({"text": "meh"}));
    let flow = s.flow(1);
    assert_eq!(
        at(&first, "/retries_remaining"),
        3,
        "retries count total attempts: 3 by default"
    );
    let low = json!({"label": "neutral", "confidence": 0.4});
    assert_eq!(
        at(
            &s.done(&flow, "classify", low.clone()),
            "/retries_remaining"
        ),
        2
    );
    assert_eq!(
        at(
            &s.done(&flow, "classify", low.clone()),
            "/retries_remaining"
        ),
        1
    );
    let exhausted = s.done(&flow, "classify", low);
    assert_eq!(at(&exhausted, "/status"), "error");
    assert_eq!(at(&exhausted, "/error_type"), "retries_exhausted");
    assert_eq!(at(&exhausted, "/step_id"), "classify");
    assert_eq!(at(&exhausted, "/step_mode"), "function");
    assert_eq!(
        at(&exhausted, "/violations"),
        json!(["ensure 'result.confidence > 0.7' failed: `result.confidence` was 0.4"])
    );

    let audit = s.audit(&flow);
    assert_eq!(
        at(&audit, "/status"),
        "failed",
        "the flow is over, not in_progress"
    );
    assert_eq!(at(&audit, "/error_type"), "retries_exhausted");
    assert_eq!(at(&audit, "/trace/0/attempts"), 3);

    s.note("a fourth result for the exhausted step does not complete it");
    let late = s.done(
        &flow,
        "classify",
        json!({"label": "positive", "confidence": 0.99}),
    );
    assert_eq!(at(&late, "/error_type"), "flow_already_complete");
    assert_eq!(at(&late, "/flow_status"), "failed");
    let resumed = s.resume(&flow);
    assert_eq!(resumed, json!({"status": "failed", "flow_id": flow}));
    assert_eq!(at(&s.audit(&flow), "/status"), "failed");
    insta::assert_snapshot!(s.transcript());
}

const RECOVERY: &str = r#"
version: "0.2"
contracts:
  Code:
    code: {type: string}
    compiles: {type: boolean}
functions:
  generate:
    mode: infer
    intent: "Generate the code"
    input: {spec: {type: string}}
    output: Code
    ensure:
      - "result.compiles == True"
    retries: 2
flows:
  main:
    input: {spec: {type: string}}
    steps:
      - id: generate
        function: generate
        inputs: {spec: "$.input.spec"}
        on_fail: manual_fix
      - id: manual_fix
        intent: "Fix the generated code by hand"
        inputs:
          failed: "$.steps.generate.output"
          code: "$.steps.generate.output.code"
"#;

#[test]
fn on_fail_routes_the_final_failure_to_the_recovery_step() {
    let mut s = Scenario::new(RECOVERY);
    s.start(None, json!({"spec": "parse ints"}));
    let flow = s.flow(1);
    let retry = s.done(
        &flow,
        "generate",
        json!({"code": "fn a(", "compiles": false}),
    );
    assert_eq!(at(&retry, "/status"), "ensure_failed");
    assert_eq!(at(&retry, "/retries_remaining"), 1);
    let routed = s.done(
        &flow,
        "generate",
        json!({"code": "fn b(", "compiles": false}),
    );
    assert_eq!(at(&routed, "/status"), "execute_step");
    assert_eq!(at(&routed, "/step_id"), "manual_fix");
    assert_eq!(at(&routed, "/routed_from"), "generate");
    assert_eq!(
        at(&routed, "/violations"),
        json!(["ensure 'result.compiles == True' failed: `result.compiles` was False"])
    );
    assert_eq!(
        at(&routed, "/inputs"),
        json!({"failed": {"code": "fn b(", "compiles": false}, "code": "fn b("}),
        "the recovery step reads the last failing result"
    );
    let done = s.done(
        &flow,
        "manual_fix",
        json!({"code": "fn b() {}", "compiles": true}),
    );
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(
        at(&done, "/output"),
        json!({"code": "fn b() {}", "compiles": true})
    );
    assert_eq!(at(&done, "/trace/0/attempts"), 2);
    assert_eq!(
        len_at(&done, "/trace/0/violations"),
        1,
        "the failed step's record says why"
    );
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// Routing

const REVIEW_LOOP: &str = r#"
version: "0.2"
flows:
  main:
    input: {spec: {type: string}}
    steps:
      - id: write
        intent: "Write the code"
        inputs: {spec: "$.input.spec"}
        ensure:
          - "len(result.code) > 0"
        retries: 2
        next: review
      - id: review
        intent: "Review the code"
        inputs: {code: "$.steps.write.output.code"}
        ensure:
          - "result.approved == True"
        on_fail: write
"#;

#[test]
fn reference_bug_2_routing_back_gives_fresh_attempts() {
    let mut s = Scenario::new(REVIEW_LOOP);
    s.start(None, json!({"spec": "add two numbers"}));
    let flow = s.flow(1);
    let retry = s.done(&flow, "write", json!({"code": ""}));
    assert_eq!(at(&retry, "/retries_remaining"), 1);
    let review = s.done(&flow, "write", json!({"code": "a + b"}));
    assert_eq!(at(&review, "/step_id"), "review");
    assert_eq!(at(&review, "/retries_remaining"), 1);

    s.note("the review rejects: its one attempt is spent, on_fail sends the work back to write");
    let back = s.done(&flow, "review", json!({"approved": false}));
    assert_eq!(at(&back, "/step_id"), "write");
    assert_eq!(at(&back, "/routed_from"), "review");
    assert_eq!(
        at(&back, "/retries_remaining"),
        2,
        "write starts afresh, not with its old attempts"
    );
    assert_eq!(
        at(&back, "/violations"),
        json!(["ensure 'result.approved == True' failed: `result.approved` was False"])
    );

    let again = s.done(&flow, "write", json!({"code": "a.checked_add(b)"}));
    assert_eq!(at(&again, "/step_id"), "review");
    assert_eq!(
        at(&again, "/retries_remaining"),
        1,
        "the failed review runs again with a fresh attempt, not 0 left"
    );
    assert_eq!(at(&again, "/inputs"), json!({"code": "a.checked_add(b)"}));
    let done = s.done(&flow, "review", json!({"approved": true}));
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/output"), json!({"approved": true}));
    let steps: Vec<(Value, Value)> = (0..4)
        .map(|i| {
            (
                at(&done, &format!("/trace/{i}/step_id")),
                at(&done, &format!("/trace/{i}/attempts")),
            )
        })
        .collect();
    assert_eq!(
        steps,
        vec![
            (json!("write"), json!(2)),
            (json!("review"), json!(1)),
            (json!("write"), json!(1)),
            (json!("review"), json!(1)),
        ]
    );
    insta::assert_snapshot!(s.transcript());
}

const FORWARD_JUMP: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: triage
        intent: "Triage the report"
        next: ship
      - id: investigate
        intent: "Investigate the root cause"
      - id: ship
        intent: "Ship the fix"
"#;

#[test]
fn next_jumps_forward_and_skipped_over_steps_never_run() {
    let mut s = Scenario::new(FORWARD_JUMP);
    s.start(None, json!({}));
    let flow = s.flow(1);
    let ship = s.done(&flow, "triage", json!({"trivial": true}));
    assert_eq!(at(&ship, "/step_id"), "ship");
    assert_eq!(at(&ship, "/step_number"), 3);
    let done = s.done(&flow, "ship", json!({"shipped": true}));
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/output"), json!({"shipped": true}));
    assert_eq!(len_at(&done, "/trace"), 2);
    assert_eq!(at(&done, "/trace/1/step_id"), "ship");
    let audit = s.audit(&flow);
    assert!(
        !serde_json::to_string(&audit)
            .unwrap_or_default()
            .contains("investigate"),
        "investigate never ran"
    );
    insta::assert_snapshot!(s.transcript());
}

const ALWAYS_REJECTED: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: write
        intent: "Write the code"
        next: review
      - id: review
        intent: "Review the code"
        ensure:
          - "result.approved == True"
        on_fail: write
"#;

#[test]
fn reference_bug_2_routing_loops_end_at_the_reentry_bound() {
    let config = Config {
        max_reentries: 3,
        ..Default::default()
    };
    let mut s = with_config(ALWAYS_REJECTED, config);
    s.start(None, json!({}));
    let flow = s.flow(1);
    for round in 1..=3 {
        s.done(&flow, "write", json!({"code": format!("attempt {round}")}));
        let back = s.done(&flow, "review", json!({"approved": false}));
        assert_eq!(
            at(&back, "/step_id"),
            "write",
            "re-entry {round} of 3 is allowed"
        );
        assert_eq!(at(&back, "/routed_from"), "review");
    }
    s.done(&flow, "write", json!({"code": "attempt 4"}));
    let ended = s.done(&flow, "review", json!({"approved": false}));
    assert_eq!(at(&ended, "/status"), "error");
    assert_eq!(at(&ended, "/error_type"), "routing_loop");
    assert_eq!(at(&ended, "/step_id"), "write");
    let message = at(&ended, "/message");
    let message = message.as_str().unwrap_or_default();
    assert!(
        message.contains("'write'") && message.contains("limit of 3"),
        "{message}"
    );
    assert_eq!(
        at(&ended, "/violations"),
        json!(["ensure 'result.approved == True' failed: `result.approved` was False"]),
        "why review failed the last time"
    );
    let audit = s.audit(&flow);
    assert_eq!(at(&audit, "/status"), "failed");
    assert_eq!(at(&audit, "/error_type"), "routing_loop");
    let late = s.done(&flow, "write", json!({"code": "attempt 5"}));
    assert_eq!(at(&late, "/error_type"), "flow_already_complete");
    insta::assert_snapshot!(s.transcript());
}

const ROUNDS_BOUND: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    max_rounds: 1
    steps:
      - id: fetch
        intent: "Fetch the page"
        ensure:
          - "result.status == 200"
        on_fail: fetch
      - id: parse
        intent: "Parse the page"
        next: fetch
"#;

#[test]
fn reference_bug_2_on_fail_to_itself_and_next_backward_are_bounded_by_max_rounds() {
    // The flow's max_rounds (1) wins over the runtime's default.
    let mut s = Scenario::new(ROUNDS_BOUND);
    s.start(None, json!({}));
    let flow = s.flow(1);
    s.note("on_fail to itself: a fresh attempt once, then the bound");
    let again = s.done(&flow, "fetch", json!({"status": 500}));
    assert_eq!(at(&again, "/step_id"), "fetch");
    assert_eq!(at(&again, "/routed_from"), "fetch");
    assert_eq!(at(&again, "/retries_remaining"), 1);
    let ended = s.done(&flow, "fetch", json!({"status": 503}));
    assert_eq!(at(&ended, "/error_type"), "routing_loop");
    assert_eq!(
        at(&ended, "/violations"),
        json!(["ensure 'result.status == 200' failed: `result.status` was 503"])
    );
    let message = at(&ended, "/message");
    assert!(
        message.as_str().unwrap_or_default().contains("max_rounds"),
        "{message}"
    );

    s.note("next back to an earlier step: the same bound");
    s.start(None, json!({}));
    let flow = s.flow(2);
    s.done(&flow, "fetch", json!({"status": 200}));
    let back = s.done(&flow, "parse", json!({"links": 1}));
    assert_eq!(
        at(&back, "/step_id"),
        "fetch",
        "`next` on success routes back once"
    );
    assert_eq!(at(&back, "/retries_remaining"), 1);
    s.done(&flow, "fetch", json!({"status": 200}));
    let ended = s.done(&flow, "parse", json!({"links": 2}));
    assert_eq!(at(&ended, "/error_type"), "routing_loop");
    assert_eq!(at(&s.audit(&flow), "/status"), "failed");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// Skipping

const SKIPS: &str = r#"
version: "0.2"
contracts:
  Check:
    ready: {type: boolean}
    url: {type: string}
flows:
  main:
    input:
      total: {type: integer}
      parts: {type: integer}
    steps:
      - id: check
        intent: "Check the deploy preconditions"
        output_contract: Check
      - id: deploy
        intent: "Deploy to staging"
        inputs: {url: "$.steps.check.output.url"}
        skip_if: "$.steps.check.output.ready == False"
        skip_reason: "Preconditions failed; not deploying"
      - id: smoke
        intent: "Smoke-test the deployment"
        inputs: {deployed: "$.steps.deploy.output"}
        skip_if: "$.steps.deploy.output.url == None"
      - id: report
        intent: "Report on the deployment"
        inputs:
          url: "$.steps.deploy.output.url"
          ready: "$.steps.check.output.ready"
        skip_if: "$.input.total / $.input.parts > 10"
"#;

#[test]
fn skip_if_records_a_skip_with_a_null_output_and_a_reason() {
    let mut s = Scenario::new(SKIPS);
    s.start(None, json!({"total": 5, "parts": 0}));
    let flow = s.flow(1);
    s.wait_ms(1_500);
    s.note("deploy is skipped with its skip_reason, smoke with the default reason; report's skip_if divides by zero");
    let report = s.done(
        &flow,
        "check",
        json!({"ready": false, "url": "https://staging"}),
    );
    assert_eq!(at(&report, "/status"), "execute_step");
    assert_eq!(at(&report, "/step_id"), "report");
    assert_eq!(at(&report, "/step_number"), 4);
    assert_eq!(
        at(&report, "/inputs"),
        json!({"url": null, "ready": false}),
        "a field of a skipped step's output is null"
    );
    let error = at(&report, "/skip_if_error");
    assert!(
        error
            .as_str()
            .is_some_and(|text| text.contains("$.input.total / $.input.parts > 10")),
        "a skip_if that cannot be evaluated says so: {error}"
    );
    let done = s.done(&flow, "report", json!({"summary": "nothing deployed"}));
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/output"), json!({"summary": "nothing deployed"}));
    assert_eq!(at(&done, "/trace/1/type"), "skip");
    assert_eq!(at(&done, "/trace/1/step_id"), "deploy");
    assert_eq!(
        at(&done, "/trace/1/skip_reason"),
        "Preconditions failed; not deploying"
    );
    assert_eq!(at(&done, "/trace/2/type"), "skip");
    assert_eq!(at(&done, "/trace/2/step_id"), "smoke");
    assert_eq!(
        at(&done, "/trace/2/skip_reason"),
        "skip_if: $.steps.deploy.output.url == None",
        "a field of a skipped step's output is None in a skip_if too, as in the reference"
    );
    insta::assert_snapshot!(s.transcript());
}

/// A flow of `skipped` steps that `skip_if: $.input.fast == True` skips, then one that runs.
fn long_skip_chain(skipped: usize) -> String {
    let mut spec = String::from(
        "version: \"0.2\"\nflows:\n  long:\n    input: {fast: {type: boolean}}\n    steps:\n",
    );
    for n in 0..skipped {
        spec.push_str(&format!(
            "      - id: s{n:04}\n        intent: \"Step {n}\"\n        skip_if: \"$.input.fast == True\"\n"
        ));
    }
    spec.push_str("      - id: last\n        intent: \"The step that runs\"\n");
    spec
}

#[test]
fn reference_bug_27_a_long_chain_of_skipped_steps_does_not_overflow() {
    let mut s = Scenario::new(&long_skip_chain(1500));
    let first = s.start(None, json!({"fast": true}));
    let flow = s.flow(1);
    assert_eq!(at(&first, "/status"), "execute_step", "{first}");
    assert_eq!(at(&first, "/step_id"), "last");
    assert_eq!(at(&first, "/step_number"), 1501);
    assert_eq!(at(&first, "/total_steps"), 1501);
    let done = s.done(&flow, "last", json!({"ok": true}));
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/output"), json!({"ok": true}));
    assert_eq!(len_at(&done, "/trace"), 1501);
    assert_eq!(at(&done, "/trace/1499/step_id"), "s1499");
    assert_eq!(at(&done, "/trace/1499/type"), "skip");
}

/// The issue's loop: `critique` routes back to `draft` on success, and is skipped once the draft
/// is final.
const SKIP_WITH_NEXT: &str = r#"
version: "0.2"
contracts:
  Draft:
    text: {type: string}
    final: {type: boolean}
flows:
  write:
    input: {}
    steps:
      - id: draft
        intent: "Write the draft"
        output_contract: Draft
      - id: critique
        intent: "Critique the draft"
        inputs: {text: "$.steps.draft.output.text"}
        skip_if: "$.steps.draft.output.final == True"
        next: draft
      - id: publish
        intent: "Publish the draft"
        inputs: {text: "$.steps.draft.output.text"}
"#;

#[test]
fn a_skipped_step_goes_on_in_order_not_to_its_next() {
    let mut s = Scenario::new(SKIP_WITH_NEXT);
    s.start(None, json!({}));
    let flow = s.flow(1);
    s.note("a first draft is not final: critique runs and its next sends the flow back to draft");
    let critique = s.done(&flow, "draft", json!({"text": "v1", "final": false}));
    assert_eq!(at(&critique, "/step_id"), "critique");
    let again = s.done(&flow, "critique", json!({"notes": "tighten it"}));
    assert_eq!(at(&again, "/step_id"), "draft", "`next` is success routing");
    s.note("the final draft: critique is skipped, and a skip is not a success: on to publish");
    let publish = s.done(&flow, "draft", json!({"text": "v2", "final": true}));
    assert_eq!(at(&publish, "/status"), "execute_step", "{publish}");
    assert_eq!(
        at(&publish, "/step_id"),
        "publish",
        "a skipped step goes on in order, as the reference's does"
    );
    assert_eq!(at(&publish, "/inputs"), json!({"text": "v2"}));
    let done = s.done(
        &flow,
        "publish",
        json!({"url": "https://example.test/post"}),
    );
    assert_eq!(at(&done, "/status"), "complete");
}

#[test]
fn skip_step_on_a_step_with_next_goes_on_in_order() {
    let mut s = Scenario::new(SKIP_WITH_NEXT);
    s.start(None, json!({}));
    let flow = s.flow(1);
    let critique = s.done(&flow, "draft", json!({"text": "v1", "final": false}));
    assert_eq!(at(&critique, "/step_id"), "critique");
    let publish = s.skip(&flow, "critique", "good enough");
    assert_eq!(
        at(&publish, "/step_id"),
        "publish",
        "stratum_skip_step does not take the step's success route either: {publish}"
    );
}

const SKIP_COMMAND: &str = r#"
version: "0.2"
functions:
  approve_release:
    mode: gate
flows:
  main:
    input: {}
    steps:
      - id: lint
        intent: "Lint the code"
      - id: review
        function: approve_release
        on_approve: publish
        on_revise: lint
        on_kill: ~
      - id: publish
        intent: "Publish the release"
"#;

#[test]
fn skip_step_skips_the_current_step_only() {
    let mut s = Scenario::new(SKIP_COMMAND);
    s.start(None, json!({}));
    let flow = s.flow(1);
    let wrong = s.skip(&flow, "publish", "not needed");
    assert_eq!(at(&wrong, "/error_type"), "wrong_step");
    assert_eq!(
        at(&wrong, "/message"),
        "Expected step 'lint', got 'publish'"
    );
    let gate = s.skip(&flow, "lint", "linted in CI already");
    assert_eq!(at(&gate, "/status"), "await_gate");
    assert_eq!(at(&gate, "/step_id"), "review");
    let refused = s.skip(&flow, "review", "in a hurry");
    assert_eq!(
        at(&refused, "/error_type"),
        "gate_step_requires_gate_resolve"
    );
    let publish = s.gate(&flow, "review", "approve", "fine", "human");
    assert_eq!(at(&publish, "/step_id"), "publish");
    let done = s.skip(&flow, "publish", "publishing by hand");
    assert_eq!(
        at(&done, "/status"),
        "complete",
        "skipping the last step completes the flow"
    );
    assert_eq!(at(&done, "/output"), Value::Null);
    assert_eq!(at(&done, "/trace/0/type"), "skip");
    assert_eq!(at(&done, "/trace/0/skip_reason"), "linted in CI already");
    assert_eq!(at(&done, "/trace/1/type"), "gate");
    assert_eq!(at(&done, "/trace/2/type"), "skip");
    assert_eq!(at(&done, "/trace/2/step_id"), "publish");
    assert_eq!(at(&done, "/trace/2/skip_reason"), "publishing by hand");
    let late = s.skip(&flow, "publish", "again");
    assert_eq!(at(&late, "/error_type"), "flow_already_complete");
    insta::assert_snapshot!(s.transcript());
}

const ALL_SKIPPED: &str = r#"
version: "0.2"
flows:
  main:
    input: {dry_run: {type: boolean}}
    steps:
      - id: build
        intent: "Build the artifact"
        skip_if: "$.input.dry_run"
      - id: upload
        intent: "Upload the artifact"
        inputs: {artifact: "$.steps.build.output.path"}
        skip_if: "$.input.dry_run"
        skip_reason: "dry run"
"#;

#[test]
fn reference_bug_4_every_step_skipped_at_start_completes_with_null_output() {
    let mut s = Scenario::new(ALL_SKIPPED);
    let done = s.start(None, json!({"dry_run": true}));
    let flow = s.flow(1);
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(
        done.get("output"),
        Some(&Value::Null),
        "output is present, and null"
    );
    assert_eq!(len_at(&done, "/trace"), 2);
    assert_eq!(
        at(&done, "/trace/0/skip_reason"),
        "skip_if: $.input.dry_run"
    );
    assert_eq!(at(&done, "/trace/1/skip_reason"), "dry run");
    let audit = s.audit(&flow);
    assert_eq!(at(&audit, "/status"), "complete");
    let late = s.done(&flow, "build", json!({}));
    assert_eq!(at(&late, "/error_type"), "flow_already_complete");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// The final output

const FLOW_OUTPUT: &str = r#"
version: "0.2"
contracts:
  Answer:
    answer: {type: string}
    confidence: {type: number}
flows:
  main:
    input: {question: {type: string}, footnotes: {type: boolean}}
    output: Answer
    steps:
      - id: research
        intent: "Collect notes on the question"
        inputs: {question: "$.input.question"}
      - id: answer
        intent: "Answer the question from the notes"
        inputs: {notes: "$.steps.research.output"}
        retries: 2
      - id: footnote
        intent: "Add footnotes to the answer"
        inputs: {answer: "$.steps.answer.output"}
        skip_if: "$.input.footnotes == False"
"#;

#[test]
fn reference_bug_8_the_final_output_is_checked_against_the_flow_output_contract() {
    let mut s = Scenario::new(FLOW_OUTPUT);
    s.start(None, json!({"question": "why?", "footnotes": false}));
    let flow = s.flow(1);
    s.done(&flow, "research", json!({"notes": ["because"]}));
    s.note("the last step is skipped: the final output is answer's, which breaks the flow's output contract");
    let refused = s.done(&flow, "answer", json!({"answer": 42}));
    assert_eq!(at(&refused, "/status"), "schema_failed");
    assert_eq!(
        at(&refused, "/step_id"),
        "answer",
        "the last step that produced the output answers for it"
    );
    assert_eq!(at(&refused, "/retries_remaining"), 1);
    let violations = strings_at(&refused, "/violations");
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(
        violations
            .iter()
            .all(|v| v.starts_with("flow output contract 'Answer' violation: ")),
        "{violations:#?}"
    );
    let done = s.done(
        &flow,
        "answer",
        json!({"answer": "because", "confidence": 0.9}),
    );
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(
        at(&done, "/output"),
        json!({"answer": "because", "confidence": 0.9})
    );
    // The trace tells what happened: answer's first result was taken (and footnote skipped)
    // before the flow's output check refused it; then answer's second attempt, and the skip.
    let trace: Vec<(Value, Value)> = (0..5)
        .map(|i| {
            (
                at(&done, &format!("/trace/{i}/step_id")),
                at(&done, &format!("/trace/{i}/type")),
            )
        })
        .collect();
    assert_eq!(
        trace,
        vec![
            (json!("research"), json!("step")),
            (json!("answer"), json!("step")),
            (json!("footnote"), json!("skip")),
            (json!("answer"), json!("step")),
            (json!("footnote"), json!("skip")),
        ]
    );
    assert_eq!(at(&done, "/trace/3/attempts"), 2);

    s.note("with its attempts spent, the producing step's failure ends the flow");
    s.start(None, json!({"question": "how?", "footnotes": false}));
    let flow = s.flow(2);
    s.done(&flow, "research", json!({"notes": []}));
    s.done(&flow, "answer", json!({"answer": "somehow"}));
    let ended = s.done(
        &flow,
        "answer",
        json!({"answer": "somehow", "confidence": "high"}),
    );
    assert_eq!(at(&ended, "/error_type"), "retries_exhausted");
    assert_eq!(at(&ended, "/step_id"), "answer");
    assert_eq!(len_at(&ended, "/violations"), 1);
    assert_eq!(at(&s.audit(&flow), "/status"), "failed");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// Starting

const INPUTS: &str = r#"
version: "0.2"
flows:
  main:
    input:
      name: {type: string}
      count: {type: integer}
      tags: {type: array}
    steps:
      - id: greet
        intent: "Greet"
        inputs: {name: "$.input.name"}
  maintenance:
    input: {}
    steps:
      - id: sweep
        intent: "Sweep"
"#;

#[test]
fn flow_inputs_are_checked_at_start_and_unknown_flows_get_a_suggestion() {
    let mut s = Scenario::new(INPUTS);
    let invalid = s.start(Some("main"), json!({"name": 5, "count": "three"}));
    assert_eq!(at(&invalid, "/status"), "error");
    assert_eq!(at(&invalid, "/error_type"), "invalid_inputs");
    let violations = strings_at(&invalid, "/violations");
    assert_eq!(
        violations.len(),
        3,
        "every problem at once: {violations:#?}"
    );
    for needle in ["name", "count", "tags"] {
        assert!(
            violations.iter().any(|v| v.contains(needle)),
            "{needle}: {violations:#?}"
        );
    }
    assert!(invalid.get("flow_id").is_none(), "no flow was started");
    let message = at(&invalid, "/message");
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.starts_with("the inputs do not match the input of flow 'main': ")),
        "{message}"
    );

    let unknown = s.start(Some("mian"), json!({}));
    assert_eq!(at(&unknown, "/error_type"), "execution_error");
    let message = at(&unknown, "/message");
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.contains("'mian'") && m.contains("did you mean 'main'")),
        "{message}"
    );
    let unnamed = s.start(None, json!({}));
    assert_eq!(
        at(&unnamed, "/error_type"),
        "execution_error",
        "two flows and no workflow entry"
    );

    let ok = s.start(Some("main"), json!({"name": "ann", "count": 3, "tags": []}));
    assert_eq!(at(&ok, "/status"), "execute_step");
    assert_eq!(at(&ok, "/inputs"), json!({"name": "ann"}));
    insta::assert_snapshot!(s.transcript());
}

const CODE_REVIEW: &str = include_str!("../../../examples/code-review.stratum.yaml");

/// The workflow block's defaults fill the entry flow's missing inputs, and a misspelt input is
/// reported with the name it was probably meant to be, instead of being dropped silently.
#[test]
fn workflow_defaults_fill_inputs_and_unknown_inputs_are_refused() {
    let mut s = Scenario::new(CODE_REVIEW);
    let typo = s.start(None, json!({"files": ["src/a.rs"], "base_rfe": "dev"}));
    assert_eq!(at(&typo, "/error_type"), "invalid_inputs");
    assert_eq!(
        strings_at(&typo, "/violations"),
        ["unknown input 'base_rfe'; did you mean 'base_ref'?"]
    );
    let started = s.start(None, json!({"files": ["src/a.rs"]}));
    assert_eq!(at(&started, "/status"), "execute_step");
    assert_eq!(
        at(&started, "/inputs"),
        json!({"files": ["src/a.rs"], "base_ref": "main"}),
        "base_ref takes the workflow's default"
    );
    let given = s.start(None, json!({"files": ["src/a.rs"], "base_ref": "dev"}));
    assert_eq!(
        at(&given, "/inputs/base_ref"),
        "dev",
        "a given input wins over the default"
    );
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// Errors

const ERRORS: &str = r#"
version: "0.2"
functions:
  sign_off:
    mode: gate
flows:
  main:
    input: {}
    steps:
      - id: work
        intent: "Do the work"
      - id: approve
        function: sign_off
        on_approve: ~
        on_revise: work
        on_kill: ~
"#;

#[test]
fn errors_name_what_is_wrong() {
    let mut s = Scenario::new(ERRORS);
    let missing = s.resume("0b9e6a52-7d1c-4e8f-9a3b-2c4d5e6f7a8b");
    assert_eq!(at(&missing, "/error_type"), "flow_not_found");
    assert_eq!(
        at(&missing, "/message"),
        "No active flow with id '0b9e6a52-7d1c-4e8f-9a3b-2c4d5e6f7a8b'"
    );
    let traversal = s.done("../../x", "work", json!({}));
    assert_eq!(at(&traversal, "/error_type"), "flow_not_found");
    assert_eq!(
        at(&traversal, "/message"),
        "No active flow with id '../../x'"
    );
    assert_eq!(at(&s.audit("../../x"), "/error_type"), "flow_not_found");

    s.start(None, json!({}));
    let flow = s.flow(1);
    let wrong = s.done(&flow, "approve", json!({"ok": true}));
    assert_eq!(at(&wrong, "/error_type"), "wrong_step");
    assert_eq!(
        at(&wrong, "/message"),
        "Expected step 'work', got 'approve'"
    );
    assert_eq!(at(&wrong, "/step_id"), "work");
    let gate = s.done(&flow, "work", json!({"ok": true}));
    assert_eq!(at(&gate, "/status"), "await_gate");
    let not_done = s.done(&flow, "approve", json!({"approved": true}));
    assert_eq!(
        at(&not_done, "/error_type"),
        "gate_step_requires_gate_resolve"
    );
    assert_eq!(
        at(&not_done, "/message"),
        "Step 'approve' is a gate step. Use stratum_gate_resolve to resolve it."
    );
    let done = s.gate(&flow, "approve", "approve", "looks good", "human");
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/output"), json!({"ok": true}));
    let late = s.done(&flow, "work", json!({"ok": true}));
    assert_eq!(at(&late, "/error_type"), "flow_already_complete");
    assert_eq!(at(&late, "/flow_status"), "complete");
    let resumed = s.resume(&flow);
    assert_eq!(resumed, json!({"status": "complete", "flow_id": flow}));
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// The result cache

const CACHED: &str = r#"
version: "0.2"
contracts:
  Build:
    artifact: {type: string}
    size: {type: integer}
functions:
  build:
    mode: compute
    intent: "Build the package and report the artifact's path"
    input: {package: {type: string}}
    output: Build
    ensure:
      - "file_exists(result.artifact)"
    cache: true
flows:
  main:
    input: {package: {type: string}}
    steps:
      - id: build
        function: build
        inputs: {package: "$.input.package"}
      - id: publish
        intent: "Publish the artifact"
        inputs: {artifact: "$.steps.build.output.artifact"}
"#;

#[test]
fn cache_serves_a_compute_step_again_for_the_same_inputs_after_revalidating() {
    let root = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(root.path().join("dist")).expect("dist/");
    std::fs::write(root.path().join("dist/app.tar"), "tar").expect("the artifact");
    let mut s = with_config(CACHED, Config::default().with_root(root.path()));

    s.note("first run: a miss, the step is dispatched and its result cached");
    let build = s.start(None, json!({"package": "app"}));
    let first = s.flow(1);
    assert_eq!(at(&build, "/step_id"), "build");
    s.done(
        &first,
        "build",
        json!({"artifact": "dist/app.tar", "size": 3}),
    );
    let done = s.done(&first, "publish", json!({"published": true}));
    assert_eq!(at(&done, "/trace/0/cache_hit"), false);
    let key = at(&done, "/trace/0/cache_key");
    assert!(
        key.is_string(),
        "an accepted cached step records its key: {done}"
    );

    s.note("same inputs: a hit, the step is not dispatched");
    let publish = s.start(None, json!({"package": "app"}));
    let second = s.flow(2);
    assert_eq!(at(&publish, "/step_id"), "publish");
    assert_eq!(at(&publish, "/step_number"), 2);
    assert_eq!(at(&publish, "/inputs"), json!({"artifact": "dist/app.tar"}));
    let audit = s.audit(&second);
    assert_eq!(at(&audit, "/cache_hits"), 1);
    assert_eq!(at(&audit, "/trace/0/step_id"), "build");
    assert_eq!(at(&audit, "/trace/0/cache_hit"), true);
    assert_eq!(at(&audit, "/trace/0/cache_key"), key);
    let done = s.done(&second, "publish", json!({"published": true}));
    assert_eq!(at(&done, "/status"), "complete");

    s.note("different inputs: a miss");
    let other = s.start(None, json!({"package": "lib"}));
    assert_eq!(at(&other, "/step_id"), "build");

    s.note("the cached result no longer passes its ensure (the artifact is gone): a miss");
    std::fs::remove_file(root.path().join("dist/app.tar")).expect("remove the artifact");
    let stale = s.start(None, json!({"package": "app"}));
    assert_eq!(at(&stale, "/step_id"), "build");
    assert_eq!(at(&stale, "/status"), "execute_step");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// Budgets

const BUDGETED: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    budget: {usd: 1.0, max_tokens: 500000}
    steps:
      - id: plan
        intent: "Plan the article"
      - id: draft
        intent: "Draft the article"
      - id: edit
        intent: "Edit the article"
      - id: publish
        intent: "Publish the article"
"#;

fn consumed(value: &Value, pointer: &str, field: &str) -> f64 {
    at(value, &format!("{pointer}/consumed/{field}"))
        .as_f64()
        .unwrap_or(f64::NAN)
}

#[test]
fn budget_is_debited_from_usage_and_ends_the_flow_when_spent() {
    let mut s = Scenario::new(BUDGETED);
    s.start(None, json!({}));
    let flow = s.flow(1);
    s.done_with_usage(
        &flow,
        "plan",
        json!({"outline": ["intro"]}),
        json!({"tokens": 400, "dollars": 0.1}),
    );
    s.note("tokens priced from the table: claude-sonnet-4-6 is priced as claude-sonnet-4 ($3 / $15 per million)");
    s.done_with_usage(
        &flow,
        "draft",
        json!({"text": "draft"}),
        json!({"input_tokens": 100_000, "output_tokens": 20_000, "model": "claude-sonnet-4-6"}),
    );
    let audit = s.audit(&flow);
    assert_eq!(consumed(&audit, "/budget_state", "tokens"), 120_400.0);
    assert!(
        (consumed(&audit, "/budget_state", "dollars") - 0.7).abs() < 1e-9,
        "{audit}"
    );
    assert_eq!(consumed(&audit, "/budget_state", "dispatches"), 3.0);

    s.note("claude-opus-4 at $15 / $75: the dollars pass the cap, publish is never dispatched");
    let ended = s.done_with_usage(
        &flow,
        "edit",
        json!({"text": "edited"}),
        json!({"input_tokens": 10_000, "output_tokens": 10_000, "model": "claude-opus-4"}),
    );
    assert_eq!(at(&ended, "/status"), "budget_exhausted");
    assert_eq!(at(&ended, "/output"), json!({"text": "edited"}));
    assert!(
        (consumed(&ended, "/budget_state", "dollars") - 1.6).abs() < 1e-9,
        "{ended}"
    );
    assert_eq!(at(&ended, "/budget_state/caps/usd"), 1.0);
    assert_eq!(len_at(&ended, "/trace"), 3);
    let resumed = s.resume(&flow);
    assert_eq!(
        resumed,
        json!({"status": "budget_exhausted", "flow_id": flow})
    );
    assert_eq!(at(&s.audit(&flow), "/status"), "budget_exhausted");
    let late = s.done(&flow, "publish", json!({}));
    assert_eq!(at(&late, "/error_type"), "flow_already_complete");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn budget_prices_tokens_with_user_overrides() {
    let pricing = Pricing::default()
        .with_overrides(r#"{"models": {"acme-large": {"input": 2.0, "output": 4.0}, "claude-sonnet-4": {"input": 30.0, "output": 150.0}}}"#)
        .expect("valid pricing JSON");
    let config = Config {
        pricing,
        ..Default::default()
    };
    let mut s = with_config(BUDGETED, config);
    s.start(None, json!({}));
    let flow = s.flow(1);
    s.done_with_usage(
        &flow,
        "plan",
        json!({}),
        json!({"input_tokens": 250_000, "output_tokens": 50_000, "model": "acme-large"}),
    );
    let audit = s.audit(&flow);
    assert!(
        (consumed(&audit, "/budget_state", "dollars") - 0.7).abs() < 1e-9,
        "a model only the user prices: {audit}"
    );
    s.note("the user's price of claude-sonnet-4 replaces the default one");
    let ended = s.done_with_usage(
        &flow,
        "draft",
        json!({}),
        json!({"input_tokens": 10_000, "output_tokens": 0, "model": "claude-sonnet-4"}),
    );
    assert_eq!(at(&ended, "/status"), "budget_exhausted");
    assert!(
        (consumed(&ended, "/budget_state", "dollars") - 1.0).abs() < 1e-9,
        "{ended}"
    );
    assert_eq!(consumed(&ended, "/budget_state", "tokens"), 310_000.0);
    insta::assert_snapshot!(s.transcript());
}

const DISPATCH_CAP: &str = r#"
version: "0.2"
flows:
  three:
    input: {}
    budget: {max_agent_dispatches: 2}
    steps:
      - id: a
        intent: "First"
      - id: b
        intent: "Second"
        ensure:
          - "result.ok == True"
        retries: 2
      - id: c
        intent: "Third"
  two:
    input: {}
    budget: {max_agent_dispatches: 2}
    steps:
      - id: a
        intent: "First"
      - id: b
        intent: "Second"
  timed:
    input: {}
    budget: {ms: 60000}
    steps:
      - id: a
        intent: "First"
      - id: b
        intent: "Second"
"#;

#[test]
fn budget_caps_agent_dispatches_and_wall_time() {
    let mut s = Scenario::new(DISPATCH_CAP);
    s.note("a cap of 2 dispatches: the third (a retry counts) does not happen");
    s.start(Some("three"), json!({}));
    let flow = s.flow(1);
    s.done(&flow, "a", json!({}));
    let ended = s.done(&flow, "b", json!({"ok": false}));
    assert_eq!(at(&ended, "/status"), "budget_exhausted");
    assert_eq!(at(&ended, "/budget_state/consumed/dispatches"), 2);
    assert_eq!(at(&ended, "/budget_state/caps/max_agent_dispatches"), 2);
    assert_eq!(at(&s.resume(&flow), "/status"), "budget_exhausted");

    s.note("a cap of 2 dispatches is enough for a flow of two steps");
    s.start(Some("two"), json!({}));
    let flow = s.flow(2);
    s.done(&flow, "a", json!({}));
    let done = s.done(&flow, "b", json!({"ok": true}));
    assert_eq!(at(&done, "/status"), "complete");
    assert_eq!(at(&done, "/output"), json!({"ok": true}));

    s.note("a wall-time cap of 60 s");
    s.start(Some("timed"), json!({}));
    let flow = s.flow(3);
    s.wait_ms(30_000);
    let b = s.done(&flow, "a", json!({}));
    assert_eq!(at(&b, "/step_id"), "b");
    s.wait_ms(31_000);
    let ended = s.done(&flow, "b", json!({"late": true}));
    assert_eq!(at(&ended, "/status"), "budget_exhausted");
    assert_eq!(at(&ended, "/budget_state/consumed/wall_s"), 61.0);
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// The file built-ins' root

const FILES: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: notes
        intent: "Write the release notes to a file and report its path"
        ensure:
          - "file_exists(result.path)"
          - "file_contains(result.path, 'Release')"
        retries: 5
"#;

#[test]
fn reference_bug_19_file_builtins_are_confined_to_the_root() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("project");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&root).expect("the project root");
    std::fs::create_dir(&outside).expect("a directory outside it");
    std::fs::write(outside.join("notes.md"), "Release 1.0 (outside)").expect("a file outside");
    std::fs::write(root.join("notes.md"), "Release 1.0").expect("a file inside");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, root.join("link")).expect("a link out of the root");
    let config = Config::default().with_root(&root);

    let mut s = with_config(FILES, config.clone());
    s.start(None, json!({}));
    let flow = s.flow(1);
    s.note("outside/notes.md holds 'Release': had it been read, the ensures would pass");
    let climbing = s.done(&flow, "notes", json!({"path": "../outside/notes.md"}));
    assert_eq!(at(&climbing, "/status"), "ensure_failed");
    let violations = strings_at(&climbing, "/violations");
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(
        violations
            .iter()
            .all(|v| v.contains("escapes the project root")),
        "{violations:#?}"
    );
    #[cfg(unix)]
    {
        let linked = s.done(&flow, "notes", json!({"path": "link/notes.md"}));
        assert_eq!(at(&linked, "/status"), "ensure_failed");
        let violations = strings_at(&linked, "/violations");
        assert!(
            violations.iter().all(|v| v.contains("symbolic link")),
            "{violations:#?}"
        );
    }
    let done = s.done(&flow, "notes", json!({"path": "notes.md"}));
    assert_eq!(at(&done, "/status"), "complete");
    insta::assert_snapshot!(s.transcript());

    // An absolute path outside the root (not in the transcript: it names the temporary
    // directory).
    let mut s = with_config(FILES, config);
    s.start(None, json!({}));
    let flow = s.flow(1);
    let absolute = outside.join("notes.md").to_string_lossy().into_owned();
    let refused = s.done(&flow, "notes", json!({"path": absolute}));
    assert_eq!(at(&refused, "/status"), "ensure_failed");
    let violations = strings_at(&refused, "/violations");
    assert!(
        violations
            .iter()
            .all(|v| v.contains("outside the project root")),
        "{violations:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Resume

const RESUMABLE: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    budget: {max_agent_dispatches: 10}
    steps:
      - id: a
        intent: "First"
      - id: b
        intent: "Second"
"#;

#[test]
fn resume_of_a_running_flow_changes_nothing() {
    let mut s = Scenario::new(RESUMABLE);
    let dispatched = s.start(None, json!({}));
    let flow = s.flow(1);
    let before = s.audit(&flow);
    let stored = stored_header(&s, &flow);
    s.wait_ms(1_000);
    let first = s.resume(&flow);
    s.wait_ms(1_000);
    let second = s.resume(&flow);
    assert_eq!(first, dispatched, "resume returns the current dispatch");
    assert_eq!(second, first, "twice");
    assert_eq!(
        stored_header(&s, &flow),
        stored,
        "the stored flow is untouched (not even its version)"
    );
    let after = s.audit(&flow);
    assert_eq!(
        at(&after, "/budget_state"),
        at(&before, "/budget_state"),
        "a resume is not a new dispatch"
    );
    assert_eq!(at(&after, "/budget_state/consumed/dispatches"), 1);
    assert_eq!(at(&after, "/trace"), at(&before, "/trace"));
    let next = s.done(&flow, "a", json!({"ok": true}));
    assert_eq!(at(&next, "/step_id"), "b");
    let trace = s.audit(&flow);
    assert_eq!(
        at(&trace, "/trace/0/duration_ms"),
        2_000,
        "the step's clock runs from its first dispatch, not from a resume"
    );
    insta::assert_snapshot!(s.transcript());
}

/// A result nested past the runtime's bound is refused before anything reads it (the store
/// must be able to read back whatever it accepted); one within it is checked as usual.
#[test]
fn results_nested_past_the_bound_are_refused() {
    let mut s = Scenario::new(ERRORS);
    let started = s.start(None, json!({}));
    let flow = at(&started, "/flow_id")
        .as_str()
        .map(str::to_owned)
        .unwrap_or_default();
    let step = at(&started, "/step_id")
        .as_str()
        .map(str::to_owned)
        .unwrap_or_default();
    let nested = |depth: usize| (0..depth).fold(json!(1), |inner, _| json!({ "a": inner }));
    let refused = s.done(&flow, &step, nested(400));
    assert_eq!(at(&refused, "/error_type"), "invalid_result");
    assert_eq!(
        at(&refused, "/message"),
        "the result nests deeper than 256 levels; send a flatter value"
    );
    let checked = s.done(&flow, &step, nested(100));
    assert_ne!(at(&checked, "/error_type"), "invalid_result");
}

const SKIP_ON_FILE: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: build
        intent: "Build the release"
        skip_if: "file_exists('release.done')"
        skip_reason: "already released"
      - id: announce
        intent: "Announce the release"
"#;

/// `skip_if` is decided when the step becomes current: once dispatched, a resume (say after a
/// restart) does not skip the step the agent may already be working on, even if the
/// condition now holds.
#[test]
fn a_dispatched_step_is_not_skipped_by_a_later_resume() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let config = Config::default().with_root(root.path());
    let mut s = Scenario::with(SKIP_ON_FILE, Arc::new(MemoryStore::new()), config);
    let dispatched = s.start(None, json!({}));
    assert_eq!(at(&dispatched, "/step_id"), "build");
    let flow = s.flow(1);
    std::fs::write(root.path().join("release.done"), "yes").expect("the flag file is written");
    let resumed = s.resume(&flow);
    assert_eq!(resumed, dispatched, "still the same dispatch");
    let next = s.done(&flow, "build", json!({}));
    assert_eq!(at(&next, "/step_id"), "announce");
    let second = s.start(None, json!({}));
    assert_eq!(
        at(&second, "/step_id"),
        "announce",
        "a step that becomes current while the condition holds is skipped"
    );
}

const PLANNED: &str = r#"
version: "0.2"
contracts:
  Task:
    id: {type: string}
    files_owned: {type: "string[]"}
    depends_on: {type: "string[]"}
  TaskGraph:
    tasks: {type: "Task[]"}
  PlanItem:
    text: {type: string}
    file: {type: string}
    critical: {type: boolean, optional: true}
  Implementation:
    plan_items: {type: "PlanItem[]"}
    files_changed: {type: "string[]"}
flows:
  build:
    input: {}
    steps:
      - id: plan
        intent: "Split the work into tasks"
        output_contract: TaskGraph
        ensure: ["no_file_conflicts(result.tasks)"]
        retries: 2
      - id: implement
        intent: "Implement the tasks"
        depends_on: [plan]
        output_contract: Implementation
        ensure: ["plan_completion(result.plan_items, result.files_changed)"]
        retries: 3
"#;

/// The reference's planning built-ins fail a step with the reference's words: a file conflict
/// as the `ensure`'s error, each missing plan item as a violation of its own.
#[test]
fn planning_builtins_fail_with_the_references_violations() {
    let mut s = Scenario::new(PLANNED);
    s.start(None, json!({}));
    let flow = s.flow(1);
    let conflicting = s.done(
        &flow,
        "plan",
        json!({"tasks": [
            {"id": "t1", "files_owned": ["shared.py", "a.py"], "depends_on": []},
            {"id": "t2", "files_owned": ["shared.py", "b.py"], "depends_on": []},
        ]}),
    );
    assert_eq!(at(&conflicting, "/status"), "ensure_failed");
    let violations = strings_at(&conflicting, "/violations");
    let [violation] = violations.as_slice() else {
        panic!("one violation: {violations:?}");
    };
    assert!(
        violation.starts_with(
            "ensure 'no_file_conflicts(result.tasks)' failed: File ownership conflict between \
             independent tasks 't1' and 't2': ['shared.py']"
        ),
        "{violation}"
    );
    let ordered = s.done(
        &flow,
        "plan",
        json!({"tasks": [
            {"id": "t1", "files_owned": ["shared.py", "a.py"], "depends_on": []},
            {"id": "t2", "files_owned": ["shared.py", "b.py"], "depends_on": ["t1"]},
        ]}),
    );
    assert_eq!(at(&ordered, "/step_id"), "implement");

    let incomplete = s.done(
        &flow,
        "implement",
        json!({
            "plan_items": [
                {"text": "Parse the input", "file": "parse.py"},
                {"text": "Write the output", "file": "write.py"},
                {"text": "Document it", "file": "README.md"},
            ],
            "files_changed": ["parse.py"],
        }),
    );
    assert_eq!(at(&incomplete, "/status"), "ensure_failed");
    assert_eq!(
        at(&incomplete, "/violations"),
        json!([
            "Plan completion 33% is below threshold 90%",
            "Missing item: Write the output (expected in write.py)",
            "Missing item: Document it (expected in README.md)",
        ]),
        "one violation per line, as the reference passes its list through"
    );
    let critical = s.done(
        &flow,
        "implement",
        json!({
            "plan_items": [
                {"text": "Parse the input", "file": "parse.py", "critical": true},
                {"text": "Write the output", "file": "write.py", "critical": true},
            ],
            "files_changed": ["write.py"],
        }),
    );
    assert_eq!(
        at(&critical, "/violations"),
        json!(["Missing critical item: Parse the input (expected in parse.py)"])
    );
    let complete = s.done(
        &flow,
        "implement",
        json!({
            "plan_items": [{"text": "Parse the input", "file": "parse.py", "critical": true}],
            "files_changed": ["parse.py", "tests/test_parse.py"],
        }),
    );
    assert_eq!(at(&complete, "/status"), "complete");
}

const VOCABULARY_CHECKED: &str = r#"
version: "0.2"
contracts:
  Change:
    files_changed: {type: "string[]"}
flows:
  build:
    input: {}
    steps:
      - id: implement
        intent: "Implement the change in the project's words"
        output_contract: Change
        ensure: ["vocabulary_compliance('contracts/vocabulary.yaml', result.files_changed)"]
        retries: 3
"#;

/// The reference's `vocabulary_compliance` reads the YAML vocabulary under the root and fails
/// a step with one violation per use of a rejected alias, in the reference's words; a
/// malformed vocabulary is the reference's schema error, word for word.
#[test]
fn vocabulary_compliance_fails_with_the_references_violations() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let path = |name: &str| root.path().join(name);
    std::fs::create_dir_all(path("contracts")).expect("contracts/");
    std::fs::create_dir_all(path("src")).expect("src/");
    std::fs::write(
        path("contracts/vocabulary.yaml"),
        "color:\n  reject: [colour]\n  reason: US spelling\nsize:\n  reject: [sz]\n",
    )
    .expect("the vocabulary");
    std::fs::write(path("src/paint.py"), "colour = 1\nsz = colour\n").expect("a file");
    std::fs::write(path("src/clean.py"), "color = 1\n").expect("a file");
    let mut s = with_config(VOCABULARY_CHECKED, Config::default().with_root(root.path()));
    s.start(None, json!({}));
    let flow = s.flow(1);

    let rejected = s.done(
        &flow,
        "implement",
        json!({"files_changed": ["src/paint.py", "src/clean.py"]}),
    );
    assert_eq!(at(&rejected, "/status"), "ensure_failed");
    assert_eq!(
        at(&rejected, "/violations"),
        json!([
            "vocabulary violation: src/paint.py:1 uses 'colour' — canonical is 'color' (reason: US spelling)",
            "vocabulary violation: src/paint.py:2 uses 'colour' — canonical is 'color' (reason: US spelling)",
            "vocabulary violation: src/paint.py:2 uses 'sz' — canonical is 'size'",
        ])
    );

    std::fs::write(path("contracts/vocabulary.yaml"), "- colour\n").expect("a bad vocabulary");
    let malformed = s.done(
        &flow,
        "implement",
        json!({"files_changed": ["src/clean.py"]}),
    );
    assert_eq!(
        at(&malformed, "/violations"),
        json!(["vocabulary.yaml schema error: top-level must be a mapping"])
    );

    std::fs::write(
        path("contracts/vocabulary.yaml"),
        "color:\n  reject: [colour]\n",
    )
    .expect("the vocabulary");
    let clean = s.done(
        &flow,
        "implement",
        json!({"files_changed": ["src/clean.py"]}),
    );
    assert_eq!(at(&clean, "/status"), "complete");
}
