//! Gates: the `await_gate` dispatch, approve / revise / kill and their routing, rounds and
//! `max_rounds`, policies (`gate`, `flag`, `skip`) and a gate's `skip_if`, timeouts (persisted,
//! so they fire after a restart and on any call), the errors of `stratum_gate_resolve`, and
//! the approval rules of gate functions (who may decide, how many must approve, whether the
//! flow's starter may approve).
//!
//! Tests named `reference_bug_<n>_…` / `reference_<n>_…` cover item n of the reference
//! runtime's weak points (`reference-runtime.md` §3).

#![allow(clippy::indexing_slicing)] // JSON values index to null; a short list fails the test

use std::collections::BTreeMap;
use std::sync::Arc;

use stratum_test_support as support;

use serde_json::{Value, json};
use stratum_runtime::{Config, FlowId, GateRule};
use support::{Scenario, error_type, status};

const REVIEWED_WORK: &str = include_str!("../../../examples/reviewed-work.stratum.yaml");

/// Gates routing to steps, to the end, and to a cleanup step (one with a timeout).
const ROUTES: &str = r#"version: "0.2"
functions:
  approval:
    mode: gate
  timed_approval:
    mode: gate
    timeout: 60
flows:
  ends_at_gate:
    input: {}
    steps:
      - id: draft
        intent: "Draft the release notes"
      - id: review
        function: approval
        on_approve: ~
        on_revise: draft
        on_kill: ~
      - id: publish
        intent: "Publish the release notes"
        depends_on: [review]
  routes_on:
    input: {}
    steps:
      - id: draft
        intent: "Draft the release notes"
      - id: review
        function: approval
        on_approve: publish
        on_revise: draft
        on_kill: ~
      - id: publish
        intent: "Publish the release notes"
        inputs: {notes: "$.steps.draft.output.notes"}
  with_cleanup:
    input: {}
    steps:
      - id: migrate
        intent: "Apply the schema migration to staging"
      - id: review
        function: approval
        on_approve: ~
        on_revise: migrate
        on_kill: cleanup
      - id: cleanup
        intent: "Roll the staging schema back"
  cleanup_before_publish:
    input: {}
    steps:
      - id: migrate
        intent: "Apply the schema migration to staging"
      - id: review
        function: approval
        on_approve: publish
        on_revise: migrate
        on_kill: cleanup
      - id: cleanup
        intent: "Roll the staging schema back"
      - id: publish
        intent: "Publish the migration"
  timed_cleanup:
    input: {}
    steps:
      - id: migrate
        intent: "Apply the schema migration to staging"
      - id: review
        function: timed_approval
        on_approve: ~
        on_revise: migrate
        on_kill: cleanup
      - id: cleanup
        intent: "Roll the staging schema back"
"#;

/// Gate policies, and a gate's `skip_if`.
const POLICIES: &str = r#"version: "0.2"
functions:
  approval:
    mode: gate
flows:
  chain:
    input: {}
    steps:
      - id: w
        intent: "Write the change"
      - id: r1
        function: approval
        policy: flag
        on_approve: r2
        on_revise: w
        on_kill: ~
      - id: r2
        function: approval
        policy: skip
        on_approve: ~
        on_revise: w
        on_kill: ~
  waits:
    input: {}
    steps:
      - id: w
        intent: "Write the change"
      - id: r
        function: approval
        policy: gate
        on_approve: ~
        on_revise: w
        on_kill: ~
  flagged_then_work:
    input: {}
    steps:
      - id: w
        intent: "Write the change"
      - id: r
        function: approval
        policy: flag
        on_approve: ship
        on_revise: w
        on_kill: ~
      - id: ship
        intent: "Ship the change"
  auto_review:
    input: {}
    steps:
      - id: w
        intent: "Write the change; say whether it is trivial"
        output_schema:
          type: object
          required: [trivial]
          properties:
            trivial: {type: boolean}
      - id: r
        function: approval
        skip_if: "$.steps.w.output.trivial == True"
        on_approve: ship
        on_revise: w
        on_kill: ~
      - id: ship
        intent: "Ship the change"
"#;

/// A step before the revise target (kept across rounds), a target with retries, `max_rounds: 2`.
const REVISE: &str = r#"version: "0.2"
contracts:
  Draft:
    text: {type: string}
    score: {type: number}
functions:
  write_draft:
    mode: infer
    intent: "Write the draft from the outline"
    input: {brief: {type: string}}
    output: Draft
    ensure: ["result.score >= 0.8"]
    retries: 3
  editor_review:
    mode: gate
flows:
  article:
    input: {topic: {type: string}}
    max_rounds: 2
    steps:
      - id: outline
        intent: "Outline an article on the topic"
        inputs: {topic: "$.input.topic"}
      - id: draft
        function: write_draft
        inputs: {brief: "$.steps.outline.output.brief"}
      - id: review
        function: editor_review
        on_approve: ~
        on_revise: draft
        on_kill: ~
"#;

/// The trace records of one type.
fn records<'v>(trace: &'v Value, kind: &str) -> Vec<&'v Value> {
    trace
        .as_array()
        .expect("a trace is an array")
        .iter()
        .filter(|record| record["type"] == kind)
        .collect()
}

/// reviewed-work up to its gate: the flow id.
fn reviewed_work_at_gate(s: &mut Scenario) -> String {
    s.start(Some("reviewed_work"), json!({"text": "t"}));
    let flow = s.flow(1);
    let at_gate = s.done(&flow, "work", json!({"result": "r1", "quality_score": 0.9}));
    assert_eq!(status(&at_gate), "await_gate");
    flow
}

// ---------------------------------------------------------------------------------------------
// The dispatch

#[test]
fn await_gate_dispatch_shape() {
    let mut s = Scenario::new(REVIEWED_WORK);
    s.start(Some("reviewed_work"), json!({"text": "t"}));
    let flow = s.flow(1);
    let gate = s.done(&flow, "work", json!({"result": "r1", "quality_score": 0.9}));
    let expected = json!({
        "status": "await_gate",
        "flow_id": flow,
        "step_number": 2,
        "total_steps": 2,
        "step_id": "review",
        "step_mode": "function",
        "function": "review_gate",
        "agent": null,
        "on_approve": null,
        "on_revise": "work",
        "on_kill": null,
        "timeout": 3600,
        // The one key the reference does not send: what to tell the person who decides.
        "how_to_decide": stratum_runtime::response::how_to_decide(&flow, "review", None),
    });
    assert_eq!(
        gate, expected,
        "the reference's await_gate shape, exactly, and how_to_decide"
    );
    let told = gate["how_to_decide"].as_str().unwrap_or_default();
    assert!(
        told.contains(&format!(
            "`stratum-mcp gate approve {flow} review --note \"why\"`"
        )),
        "{told}"
    );
    insta::assert_snapshot!("await_gate_dispatch_shape_reviewed_work", s.transcript());

    let mut s = Scenario::new(ROUTES);
    s.start(Some("routes_on"), json!({}));
    let flow = s.flow(1);
    let gate = s.done(&flow, "draft", json!({"notes": "n"}));
    assert_eq!(gate["on_approve"], "publish", "targets are step ids");
    assert_eq!(gate["on_revise"], "draft");
    assert_eq!(gate["on_kill"], Value::Null);
    assert_eq!(gate["timeout"], Value::Null, "no timeout configured");
    s.start(Some("with_cleanup"), json!({}));
    let flow = s.flow(2);
    let gate = s.done(&flow, "migrate", json!({"applied": true}));
    assert_eq!(gate["on_kill"], "cleanup");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// approve

#[test]
fn approve_routes_to_on_approve_step() {
    let mut s = Scenario::new(ROUTES);
    s.start(Some("routes_on"), json!({}));
    let flow = s.flow(1);
    s.done(&flow, "draft", json!({"notes": "fixed a crash"}));
    let publish = s.gate(&flow, "review", "approve", "lgtm", "human");
    assert_eq!(status(&publish), "execute_step");
    assert_eq!(publish["step_id"], "publish");
    assert_eq!(publish["inputs"], json!({"notes": "fixed a crash"}));
    let done = s.done(
        &flow,
        "publish",
        json!({"url": "https://example.com/notes"}),
    );
    assert_eq!(status(&done), "complete");
    assert_eq!(done["output"], json!({"url": "https://example.com/notes"}));
    let gates = records(&done["trace"], "gate");
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0]["outcome"], "approve");
    assert_eq!(gates[0]["rationale"], "lgtm");
    assert_eq!(gates[0]["resolved_by"], "human");
    insta::assert_snapshot!(s.transcript());
}

/// Reference item 12, by design: `on_approve: ~` completes the flow at once, even when steps
/// follow the gate (the compiler warns that they are never reached, W0012).
#[test]
fn reference_12_approve_with_null_on_approve_ends_flow_before_later_steps() {
    let mut s = Scenario::new(ROUTES);
    s.start(Some("ends_at_gate"), json!({}));
    let flow = s.flow(1);
    s.done(&flow, "draft", json!({"notes": "n"}));
    let done = s.gate(&flow, "review", "approve", "ship it", "agent");
    assert_eq!(status(&done), "complete");
    assert_eq!(
        done["output"],
        json!({"notes": "n"}),
        "the last output produced: the draft's"
    );
    let trace = done["trace"].as_array().expect("a trace");
    assert!(
        trace.iter().all(|record| record["step_id"] != "publish"),
        "publish never ran"
    );
    let again = s.done(&flow, "publish", json!({}));
    assert_eq!(error_type(&again), "flow_already_complete");
    let audit = s.audit(&flow);
    assert_eq!(audit["status"], "complete");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// revise and rounds

#[test]
fn revise_starts_new_round_with_fresh_attempts() {
    let mut s = Scenario::new(REVISE);
    s.start(Some("article"), json!({"topic": "rust"}));
    let flow = s.flow(1);
    s.done(&flow, "outline", json!({"brief": "ownership, borrowing"}));
    let retry = s.done(&flow, "draft", json!({"text": "d0", "score": 0.5}));
    assert_eq!(status(&retry), "ensure_failed");
    assert_eq!(retry["retries_remaining"], 2);
    s.wait_ms(20_000);
    s.done(&flow, "draft", json!({"text": "d1", "score": 0.85}));
    s.wait_ms(30_000);
    let again = s.gate(&flow, "review", "revise", "tighten the intro", "human");
    assert_eq!(status(&again), "execute_step");
    assert_eq!(again["step_id"], "draft");
    assert_eq!(
        again["retries_remaining"], 3,
        "the revise target starts with fresh attempts"
    );
    assert_eq!(
        again["inputs"],
        json!({"brief": "ownership, borrowing"}),
        "steps before the target keep their outputs"
    );
    s.done(&flow, "draft", json!({"text": "d2", "score": 0.9}));
    let done = s.gate(&flow, "review", "approve", "good", "human");
    assert_eq!(status(&done), "complete");
    assert_eq!(done["output"], json!({"text": "d2", "score": 0.9}));
    // The trace is the current round's: the redone draft and the approval.
    let trace = done["trace"].as_array().expect("a trace");
    assert_eq!(trace.len(), 2);
    for record in trace {
        assert_eq!(record["round"], 1);
        assert_eq!(record["round_start_step_id"], "draft");
    }
    assert_eq!(trace[0]["step_id"], "draft");
    assert_eq!(trace[0]["attempts"], 1, "attempts count from the new round");
    let audit = s.audit(&flow);
    assert_eq!(audit["round"], 1);
    let rounds = audit["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0]["round"], 0);
    let round0: Vec<&str> = rounds[0]["steps"]
        .as_array()
        .expect("round steps")
        .iter()
        .map(|record| record["step_id"].as_str().expect("a step id"))
        .collect();
    assert_eq!(round0, ["outline", "draft", "review"]);
    assert_eq!(rounds[0]["steps"][1]["attempts"], 2);
    assert_eq!(
        rounds[0]["steps"][1]["duration_ms"], 20_000,
        "from the draft's last dispatch"
    );
    assert_eq!(rounds[0]["steps"][2]["outcome"], "revise");
    assert_eq!(
        rounds[0]["steps"][2]["duration_ms"], 30_000,
        "from the gate's dispatch"
    );
    assert_eq!(rounds[0]["steps"][2]["round_start_step_id"], Value::Null);
    insta::assert_snapshot!(s.transcript());
}

/// `max_rounds: 2` allows exactly two revises; the third is refused and the gate stays current
/// and can still be approved. The refusal is an error and, like every refusal, changes nothing:
/// it writes no gate record (the reference writes one, §4, which makes the trace claim a
/// revise that never happened).
#[test]
fn max_rounds_allows_exactly_n_revises() {
    let mut s = Scenario::new(REVISE);
    s.start(Some("article"), json!({"topic": "rust"}));
    let flow = s.flow(1);
    s.done(&flow, "outline", json!({"brief": "b"}));
    s.done(&flow, "draft", json!({"text": "d0", "score": 0.9}));
    for round in 1..=2 {
        let redo = s.gate(
            &flow,
            "review",
            "revise",
            &format!("revise {round}"),
            "human",
        );
        assert_eq!(redo["step_id"], "draft", "revise {round} is allowed");
        s.done(
            &flow,
            "draft",
            json!({"text": format!("d{round}"), "score": 0.9}),
        );
    }
    let refused = s.gate(&flow, "review", "revise", "revise 3", "human");
    assert_eq!(error_type(&refused), "max_rounds_exceeded");
    assert_eq!(
        refused["message"],
        "Maximum rounds (2) exceeded; gate 'review' still waits: approve or kill it"
    );
    assert_eq!(refused["round"], 2);
    assert_eq!(refused["step_id"], "review");
    let still = s.resume(&flow);
    assert_eq!(status(&still), "await_gate", "the gate is still current");
    assert_eq!(still["step_id"], "review");
    let done = s.gate(&flow, "review", "approve", "fine", "human");
    assert_eq!(status(&done), "complete");
    let gates = records(&done["trace"], "gate");
    let outcomes: Vec<&Value> = gates.iter().map(|record| &record["outcome"]).collect();
    assert_eq!(
        outcomes,
        [&json!("approve")],
        "the refused revise wrote no record"
    );
    assert_eq!(gates[0]["rationale"], "fine");
    let audit = s.audit(&flow);
    assert_eq!(audit["round"], 2);
    assert_eq!(audit["rounds"].as_array().expect("rounds").len(), 2);
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// kill

#[test]
fn kill_without_on_kill_ends_flow_without_output() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    let killed = s.gate(&flow, "review", "kill", "bad", "agent");
    assert_eq!(status(&killed), "killed");
    assert!(
        killed.get("output").is_none(),
        "a kill with no on_kill has no output"
    );
    assert!(
        killed.get("reason").is_none(),
        "a kill by a resolver has no reason"
    );
    let gates = records(&killed["trace"], "gate");
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0]["outcome"], "kill");
    assert_eq!(gates[0]["resolved_by"], "agent");
    let resumed = s.resume(&flow);
    assert_eq!(resumed, json!({"status": "killed", "flow_id": flow}));
    let audit = s.audit(&flow);
    assert_eq!(audit["status"], "killed");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn kill_routes_to_cleanup_before_reporting_killed() {
    let mut s = Scenario::new(ROUTES);
    s.start(Some("with_cleanup"), json!({}));
    let flow = s.flow(1);
    s.done(&flow, "migrate", json!({"applied": true}));
    let cleanup = s.gate(&flow, "review", "kill", "wrong schema", "human");
    assert_eq!(
        status(&cleanup),
        "execute_step",
        "the cleanup step runs first"
    );
    assert_eq!(cleanup["step_id"], "cleanup");
    let audit = s.audit(&flow);
    assert_eq!(
        audit["status"], "in_progress",
        "not killed until the cleanup is done"
    );
    let killed = s.done(&flow, "cleanup", json!({"rolled_back": true}));
    assert_eq!(status(&killed), "killed");
    assert_eq!(killed["output"], json!({"rolled_back": true}));
    let steps: Vec<&Value> = killed["trace"]
        .as_array()
        .expect("a trace")
        .iter()
        .map(|record| &record["step_id"])
        .collect();
    assert_eq!(
        steps,
        [&json!("migrate"), &json!("review"), &json!("cleanup")]
    );
    insta::assert_snapshot!(s.transcript());
}

/// The second half of reference bug 7: a cleanup step that is not the last step must not
/// fall through into the steps the gate refused.
#[test]
fn reference_bug_7_cleanup_does_not_fall_through_into_refused_steps() {
    let mut s = Scenario::new(ROUTES);
    s.start(Some("cleanup_before_publish"), json!({}));
    let flow = s.flow(1);
    s.done(&flow, "migrate", json!({"applied": true}));
    let cleanup = s.gate(&flow, "review", "kill", "wrong schema", "human");
    assert_eq!(cleanup["step_id"], "cleanup");
    let killed = s.done(&flow, "cleanup", json!({"rolled_back": true}));
    assert_eq!(status(&killed), "killed", "publish never runs after a kill");
    assert_eq!(killed["output"], json!({"rolled_back": true}));
    insta::assert_snapshot!(s.transcript());
}

/// Reference bug 7: the reference marks the flow killed at once, so after a restart
/// `stratum_resume` answers `{status: killed}` and the cleanup step never runs.
#[test]
fn reference_bug_7_kill_cleanup_survives_restart() {
    let mut s = Scenario::new(ROUTES);
    s.start(Some("with_cleanup"), json!({}));
    let flow = s.flow(1);
    s.done(&flow, "migrate", json!({"applied": true}));
    s.gate(&flow, "review", "kill", "wrong schema", "human");
    let mut s = s.reopen();
    let resumed = s.resume(&flow);
    assert_eq!(
        status(&resumed),
        "execute_step",
        "the pending cleanup is dispatched"
    );
    assert_eq!(resumed["step_id"], "cleanup");
    let killed = s.done(&flow, "cleanup", json!({"rolled_back": true}));
    assert_eq!(status(&killed), "killed");
    assert_eq!(killed["output"], json!({"rolled_back": true}));
    let audit = s.audit(&flow);
    assert_eq!(audit["status"], "killed");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// policies and skip_if

#[test]
fn policy_gate_waits() {
    let mut s = Scenario::new(POLICIES);
    s.start(Some("waits"), json!({}));
    let flow = s.flow(1);
    let gate = s.done(&flow, "w", json!({"ok": true}));
    assert_eq!(status(&gate), "await_gate");
    assert_eq!(gate["step_id"], "r");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn policy_flag_auto_approves_with_policy_record() {
    let mut s = Scenario::new(POLICIES);
    s.start(Some("flagged_then_work"), json!({}));
    let flow = s.flow(1);
    let ship = s.done(&flow, "w", json!({"ok": true}));
    assert_eq!(status(&ship), "execute_step", "the flag gate does not wait");
    assert_eq!(ship["step_id"], "ship");
    let done = s.done(&flow, "ship", json!({"shipped": true}));
    let policies = records(&done["trace"], "policy");
    assert_eq!(policies.len(), 1);
    assert_eq!(policies[0]["step_id"], "r");
    assert_eq!(policies[0]["effective_policy"], "flag");
    assert_eq!(policies[0]["resolved_outcome"], "approve");
    assert_eq!(policies[0]["rationale"], "policy: flag — auto-approved");
    assert!(
        records(&done["trace"], "gate").is_empty(),
        "no gate record for a policy"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn policy_flag_then_skip_chain_finishes_flow_from_step_done() {
    let mut s = Scenario::new(POLICIES);
    s.start(Some("chain"), json!({}));
    let flow = s.flow(1);
    let done = s.done(&flow, "w", json!({"ok": true}));
    assert_eq!(status(&done), "complete");
    assert_eq!(done["output"], json!({"ok": true}));
    let policies = records(&done["trace"], "policy");
    assert_eq!(policies.len(), 2);
    assert_eq!(policies[0]["step_id"], "r1");
    assert_eq!(policies[0]["effective_policy"], "flag");
    assert_eq!(policies[0]["rationale"], "policy: flag — auto-approved");
    assert_eq!(policies[1]["step_id"], "r2");
    assert_eq!(policies[1]["effective_policy"], "skip");
    assert_eq!(policies[1]["rationale"], "policy: skip — auto-approved");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn gate_skip_if_approves_with_policy_record() {
    let mut s = Scenario::new(POLICIES);
    s.start(Some("auto_review"), json!({}));
    let flow = s.flow(1);
    let ship = s.done(&flow, "w", json!({"trivial": true}));
    assert_eq!(
        status(&ship),
        "execute_step",
        "the gate is approved by its skip_if"
    );
    assert_eq!(ship["step_id"], "ship", "and routed as an approval");
    let done = s.done(&flow, "ship", json!({"shipped": true}));
    let policies = records(&done["trace"], "policy");
    assert_eq!(policies.len(), 1);
    assert_eq!(policies[0]["effective_policy"], "skip_if");
    assert_eq!(policies[0]["resolved_outcome"], "approve");
    assert_eq!(
        policies[0]["rationale"],
        "skip_if: $.steps.w.output.trivial == True"
    );

    s.note("the same flow, with a change that is not trivial: the gate waits");
    s.start(Some("auto_review"), json!({}));
    let flow = s.flow(2);
    let gate = s.done(&flow, "w", json!({"trivial": false}));
    assert_eq!(status(&gate), "await_gate");
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// timeouts

#[test]
fn check_timeouts_reports_why_nothing_expires() {
    let mut s = Scenario::new(REVIEWED_WORK);
    s.start(Some("reviewed_work"), json!({"text": "t"}));
    let flow = s.flow(1);
    let not_gate = s.check_timeouts(&flow);
    assert_eq!(
        not_gate,
        json!({"status": "no_timeout", "message": "Current step is not a gate step"})
    );
    s.done(&flow, "work", json!({"result": "r1", "quality_score": 0.9}));
    s.wait_ms(1_500);
    let remaining = s.check_timeouts(&flow);
    assert_eq!(
        remaining,
        json!({"status": "no_timeout", "remaining_seconds": 3598.5})
    );
    s.gate(&flow, "review", "approve", "ok", "human");
    let complete = s.check_timeouts(&flow);
    assert_eq!(
        complete,
        json!({"status": "no_timeout", "message": "Flow is already complete"})
    );

    let mut s2 = Scenario::new(POLICIES);
    s2.start(Some("waits"), json!({}));
    let flow = s2.flow(1);
    s2.done(&flow, "w", json!({"ok": true}));
    let untimed = s2.check_timeouts(&flow);
    assert_eq!(
        untimed,
        json!({"status": "no_timeout", "message": "Gate has no timeout configured"})
    );
    insta::assert_snapshot!("check_timeouts_reports_why_nothing_expires", s.transcript());
    insta::assert_snapshot!(
        "check_timeouts_reports_why_nothing_expires_untimed",
        s2.transcript()
    );
}

#[test]
fn gate_timeout_kills_once_the_clock_passes_it() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    s.wait_ms(3_599_999);
    let almost = s.check_timeouts(&flow);
    assert_eq!(
        almost,
        json!({"status": "no_timeout", "remaining_seconds": 0.001})
    );
    s.wait_ms(1);
    let killed = s.check_timeouts(&flow);
    assert_eq!(status(&killed), "killed");
    assert_eq!(killed["reason"], "timeout");
    assert!(killed.get("output").is_none(), "no on_kill: no output");
    let gates = records(&killed["trace"], "gate");
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0]["outcome"], "kill");
    assert_eq!(gates[0]["rationale"], "timeout");
    assert_eq!(gates[0]["resolved_by"], "system");
    assert_eq!(gates[0]["duration_ms"], 3_600_000);
    let after = s.check_timeouts(&flow);
    assert_eq!(
        after,
        json!({"status": "no_timeout", "message": "Flow is already complete"})
    );
    let audit = s.audit(&flow);
    assert_eq!(audit["status"], "killed");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn gate_timeout_routes_to_on_kill_cleanup() {
    let mut s = Scenario::new(ROUTES);
    s.start(Some("timed_cleanup"), json!({}));
    let flow = s.flow(1);
    s.done(&flow, "migrate", json!({"applied": true}));
    s.wait_ms(60_000);
    let cleanup = s.check_timeouts(&flow);
    assert_eq!(status(&cleanup), "execute_step");
    assert_eq!(cleanup["step_id"], "cleanup");
    let killed = s.done(&flow, "cleanup", json!({"rolled_back": true}));
    assert_eq!(status(&killed), "killed");
    let gates = records(&killed["trace"], "gate");
    assert_eq!(gates[0]["rationale"], "timeout");
    assert_eq!(gates[0]["resolved_by"], "system");
    insta::assert_snapshot!(s.transcript());
}

/// Reference bug 11: the reference keeps the gate's dispatch time in memory only, so after a
/// restart the timeout can never fire ("Gate not yet dispatched").
#[test]
fn reference_bug_11_gate_timeout_survives_restart() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    s.wait_ms(1_000_000);
    let mut s = s.reopen();
    let remaining = s.check_timeouts(&flow);
    assert_eq!(
        remaining["remaining_seconds"], 2600.0,
        "the clock kept running"
    );
    s.wait_ms(2_600_000);
    let killed = s.check_timeouts(&flow);
    assert_eq!(status(&killed), "killed");
    assert_eq!(killed["reason"], "timeout");
    assert_eq!(
        records(&killed["trace"], "gate")[0]["duration_ms"],
        3_600_000
    );
    insta::assert_snapshot!(s.transcript());
}

/// Reference bug 11: the reference checks timeouts only when asked; here any call that
/// touches the flow finds the gate expired and reports the kill.
#[test]
fn reference_bug_11_timeout_fires_on_any_call() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    s.wait_ms(3_600_000);
    let late_approval = s.gate(&flow, "review", "approve", "sorry, was away", "human");
    assert_eq!(
        status(&late_approval),
        "killed",
        "the approval came too late"
    );
    assert_eq!(late_approval["reason"], "timeout");
    let gates = records(&late_approval["trace"], "gate");
    assert_eq!(gates.len(), 1, "the late approval is not recorded");
    assert_eq!(gates[0]["resolved_by"], "system");

    s.start(Some("reviewed_work"), json!({"text": "t"}));
    let flow = s.flow(2);
    s.done(&flow, "work", json!({"result": "r1", "quality_score": 0.9}));
    s.wait_ms(3_700_000);
    let late_result = s.done(&flow, "work", json!({"result": "r2", "quality_score": 0.9}));
    assert_eq!(status(&late_result), "killed");
    assert_eq!(late_result["reason"], "timeout");
    let gate = records(&late_result["trace"], "gate")[0];
    assert_eq!(
        gate["duration_ms"], 3_600_000,
        "the kill is recorded at the deadline"
    );
    assert_eq!(
        gate["at_ms"],
        support::EPOCH_MS + 3_600_000 + 3_600_000,
        "flow 2 began an hour in"
    );
    assert_eq!(
        late_result["total_duration_ms"], 3_600_000,
        "the flow ended at the deadline"
    );
    let resumed = s.resume(&flow);
    assert_eq!(resumed, json!({"status": "killed", "flow_id": flow}));
    insta::assert_snapshot!(s.transcript());
}

/// Reference bug 11: after a restart the reference records a gate's duration as 0.
#[test]
fn reference_bug_11_gate_duration_survives_restart() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    s.wait_ms(120_000);
    let mut s = s.reopen();
    s.wait_ms(5_000);
    let done = s.gate(&flow, "review", "approve", "ok", "human");
    assert_eq!(status(&done), "complete");
    assert_eq!(records(&done["trace"], "gate")[0]["duration_ms"], 125_000);
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// errors

#[test]
fn gate_resolve_on_a_step_that_is_not_a_gate() {
    let mut s = Scenario::new(REVIEWED_WORK);
    s.start(Some("reviewed_work"), json!({"text": "t"}));
    let flow = s.flow(1);
    let named_current = s.gate(&flow, "work", "approve", "ok", "human");
    assert_eq!(error_type(&named_current), "not_a_gate_step");
    assert_eq!(
        named_current["message"],
        "Step 'work' is not a gate step; finish it with stratum_step_done"
    );
    let named_gate = s.gate(&flow, "review", "approve", "ok", "human");
    assert_eq!(
        error_type(&named_gate),
        "not_a_gate_step",
        "the current step is not a gate"
    );
    assert_eq!(
        named_gate["message"],
        "Step 'work' is not a gate step: the flow is at 'work', not at 'review'; finish it with stratum_step_done"
    );
    assert_eq!(named_gate["step_id"], "work");
    let audit = s.audit(&flow);
    assert_eq!(audit["trace"], json!([]), "nothing recorded");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn gate_resolve_rejects_unknown_outcome() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    let rejected = s.gate(&flow, "review", "reject", "no", "human");
    assert_eq!(error_type(&rejected), "invalid_outcome");
    assert_eq!(
        rejected["message"],
        "outcome must be one of ['approve', 'kill', 'revise'], got 'reject'"
    );
    let still = s.resume(&flow);
    assert_eq!(status(&still), "await_gate");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn gate_resolve_rejects_unknown_resolver() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    let refused = s.gate(&flow, "review", "approve", "ok", "robot");
    assert_eq!(error_type(&refused), "invalid_resolved_by");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn gate_resolve_names_the_expected_gate() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    let wrong = s.gate(&flow, "work", "approve", "ok", "human");
    assert_eq!(error_type(&wrong), "wrong_step");
    assert_eq!(wrong["message"], "Expected gate step 'review', got 'work'");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn gate_resolve_on_finished_flow_is_flow_already_complete() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    s.gate(&flow, "review", "approve", "ok", "human");
    let again = s.gate(&flow, "review", "kill", "changed my mind", "human");
    assert_eq!(error_type(&again), "flow_already_complete");
    assert_eq!(again["flow_status"], "complete");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn step_done_on_a_gate_requires_gate_resolve() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    let refused = s.done(&flow, "review", json!({"approved": true}));
    assert_eq!(error_type(&refused), "gate_step_requires_gate_resolve");
    assert_eq!(
        refused["message"],
        "Step 'review' is a gate step. Use stratum_gate_resolve to resolve it."
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn skip_step_on_a_gate_is_refused() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    let refused = s.skip(&flow, "review", "no time");
    assert_eq!(error_type(&refused), "gate_step_requires_gate_resolve");
    assert_eq!(refused["step_id"], "review");
    let still = s.resume(&flow);
    assert_eq!(status(&still), "await_gate", "the gate is still current");
    let audit = s.audit(&flow);
    assert!(
        records(&audit["trace"], "skip").is_empty(),
        "no skip recorded"
    );
    insta::assert_snapshot!(s.transcript());
}

// ---------------------------------------------------------------------------------------------
// a real restart: SQLite, closed and opened again

/// The old process exits (its connection closes) and a new one opens the database file.
fn restart_on_sqlite(mut s: Scenario, path: &std::path::Path) -> Scenario {
    s.store = std::sync::Arc::new(stratum_runtime::MemoryStore::new());
    let store = stratum_store_sqlite::SqliteStore::open(path).expect("the database opens again");
    s.reopen_with(std::sync::Arc::new(store))
}

/// Reference bugs 7 and 11 over SQLite: a pending cleanup and a running gate clock are in the
/// database, so a new process dispatches the cleanup and fires the timeout.
#[test]
fn reference_bugs_7_and_11_survive_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("stratum.db");
    let store = stratum_store_sqlite::SqliteStore::open(&path).expect("the database opens");
    let mut s = Scenario::with(
        ROUTES,
        std::sync::Arc::new(store),
        stratum_runtime::Config::default(),
    );
    s.start(Some("with_cleanup"), json!({}));
    let killed = s.flow(1);
    s.done(&killed, "migrate", json!({"applied": true}));
    s.gate(&killed, "review", "kill", "wrong schema", "human");
    s.start(Some("timed_cleanup"), json!({}));
    let timed = s.flow(2);
    s.done(&timed, "migrate", json!({"applied": true}));
    s.wait_ms(30_000);
    let mut s = restart_on_sqlite(s, &path);
    let cleanup = s.resume(&killed);
    assert_eq!(status(&cleanup), "execute_step");
    assert_eq!(cleanup["step_id"], "cleanup");
    let done = s.done(&killed, "cleanup", json!({"rolled_back": true}));
    assert_eq!(status(&done), "killed");
    assert_eq!(done["output"], json!({"rolled_back": true}));
    let remaining = s.check_timeouts(&timed);
    assert_eq!(
        remaining,
        json!({"status": "no_timeout", "remaining_seconds": 30.0})
    );
    s.wait_ms(30_000);
    let expired = s.check_timeouts(&timed);
    assert_eq!(
        expired["step_id"], "cleanup",
        "the timeout fired and routed to on_kill"
    );
    let gate = records(&s.audit(&timed)["trace"], "gate")[0].clone();
    assert_eq!(gate["resolved_by"], "system");
    assert_eq!(gate["duration_ms"], 60_000);
    insta::assert_snapshot!(s.transcript());
}

/// Two `flag` gates that approve into each other form a loop no agent takes part in; with a
/// huge `max_rounds` it must still end at once (one command may not walk or write without
/// bound), as a `routing_loop`.
#[test]
fn auto_approving_gates_in_a_loop_end_the_flow_whatever_max_rounds_says() {
    let spec = r#"
version: "0.2"
functions:
  approval:
    mode: gate
flows:
  main:
    input: {}
    max_rounds: 1000000000
    steps:
      - id: work
        intent: "Do the work"
      - id: first
        function: approval
        policy: flag
        on_approve: second
        on_revise: work
        on_kill: ~
      - id: second
        function: approval
        policy: flag
        on_approve: first
        on_revise: work
        on_kill: ~
"#;
    let mut s = Scenario::new(spec);
    s.start(None, json!({}));
    let flow = s.flow(1);
    let ended = s.done(&flow, "work", json!({}));
    assert_eq!(error_type(&ended), "routing_loop", "{ended}");
    let audit = s.audit(&flow);
    let records = audit["trace"].as_array().map_or(0, Vec::len);
    assert!(records <= 1_000, "the walk wrote {records} records");
}

#[test]
fn a_decision_for_an_earlier_round_never_resolves_the_gate_of_a_later_one() {
    let mut s = Scenario::new(REVIEWED_WORK);
    let flow = reviewed_work_at_gate(&mut s);
    let for_round = |round: u32, rationale: &str| stratum_runtime::Command::GateResolve {
        flow_id: flow.clone(),
        step_id: "review".to_owned(),
        outcome: "approve".to_owned(),
        rationale: rationale.to_owned(),
        resolved_by: "human".to_owned(),
        actor: None,
        via: None,
        round: Some(round),
        value: None,
    };
    // A form shown in round 0 is still open when someone else revises, and the work comes
    // back to the gate in round 1.
    let revised = s.gate(&flow, "review", "revise", "more", "human");
    assert_eq!(status(&revised), "execute_step", "{revised}");
    let again = s.done(&flow, "work", json!({"result": "r2", "quality_score": 0.9}));
    assert_eq!(status(&again), "await_gate", "{again}");
    let stale = s.run("the round-0 form answers", for_round(0, "saw r1"));
    assert_eq!(error_type(&stale), "stale_round", "{stale}");
    assert_eq!(stale["round"], 1, "{stale}");
    let still = s.resume(&flow);
    assert_eq!(
        status(&still),
        "await_gate",
        "nothing was resolved: {still}"
    );
    let approved = s.run("the round-1 form answers", for_round(1, "saw r2"));
    assert_eq!(status(&approved), "complete", "{approved}");
}

// ---------------------------------------------------------------------------------------------
// Approval rules of gate functions (the server's config file): who may decide, how many must
// approve, and whether the flow's starter may approve its own work.

/// `REVIEWED_WORK` under `rule` for its gate function, `review_gate`.
fn ruled(rule: GateRule) -> Scenario {
    let rules = BTreeMap::from([("review_gate".to_owned(), rule)]);
    Scenario::configured(REVIEWED_WORK, Config::default().with_gate_rules(rules))
}

fn two_approvals() -> GateRule {
    GateRule {
        min_approvals: 2,
        ..GateRule::default()
    }
}

/// The flow's version and event count as the store holds them: a refused decision leaves both.
fn stored(s: &Scenario, flow: &str) -> (u64, u64) {
    let id = FlowId::parse(flow).expect("a flow id");
    let mut header = None;
    s.store
        .read(&mut |snapshot| {
            header = snapshot.flow(&id)?;
            Ok(())
        })
        .expect("the store reads");
    let header = header.expect("the flow is stored");
    (header.version, header.events)
}

/// Every trace record of the audit, earlier rounds first.
fn all_records(audit: &Value) -> Vec<Value> {
    let earlier = audit["rounds"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|round| round["steps"].as_array().into_iter().flatten());
    earlier
        .chain(audit["trace"].as_array().into_iter().flatten())
        .cloned()
        .collect()
}

fn of_type(records: &[Value], kind: &str) -> Vec<Value> {
    records
        .iter()
        .filter(|record| record["type"] == kind)
        .cloned()
        .collect()
}

#[test]
fn min_approvals_2_needs_two_distinct_identities() {
    let mut s = ruled(two_approvals());
    s.acting_as(Some("os:carol"));
    let flow = reviewed_work_at_gate(&mut s);

    s.acting_as(Some("alice"));
    let first = s.gate(&flow, "review", "approve", "reads well", "human");
    assert_eq!(status(&first), "approval_recorded", "{first}");
    assert_eq!(
        (
            &first["approvals"],
            &first["approvals_needed"],
            &first["min_approvals"],
            &first["counted"],
            &first["approvers"]
        ),
        (
            &json!(1),
            &json!(1),
            &json!(2),
            &json!(true),
            &json!(["alice"])
        ),
        "{first}"
    );
    let still = s.resume(&flow);
    assert_eq!(
        status(&still),
        "await_gate",
        "the gate still waits: {still}"
    );

    // The same identity again counts once, and changes nothing.
    let before = stored(&s, &flow);
    let again = s.gate(&flow, "review", "approve", "still fine", "human");
    assert_eq!(status(&again), "approval_recorded", "{again}");
    assert_eq!(
        (&again["counted"], &again["approvals"]),
        (&json!(false), &json!(1))
    );
    let message = again["message"].as_str().expect("a message");
    assert!(message.contains("already approved"), "{message}");
    assert_eq!(stored(&s, &flow), before, "nothing was written");

    s.acting_as(Some("bob"));
    let done = s.gate(&flow, "review", "approve", "agreed", "human");
    assert_eq!(status(&done), "complete", "{done}");

    let audit = s.audit(&flow);
    assert_eq!(audit["started_by"], "os:carol", "{audit}");
    let records = all_records(&audit);
    let approvals = of_type(&records, "approval");
    assert_eq!(approvals.len(), 1, "one partial approval: {audit}");
    assert_eq!(
        (
            &approvals[0]["identity"],
            &approvals[0]["rationale"],
            &approvals[0]["approvals"],
            &approvals[0]["min_approvals"],
            &approvals[0]["round"]
        ),
        (
            &json!("alice"),
            &json!("reads well"),
            &json!(1),
            &json!(2),
            &json!(0)
        )
    );
    let gates = of_type(&records, "gate");
    assert_eq!(gates.len(), 1, "{audit}");
    assert_eq!(gates[0]["outcome"], "approve");
    assert_eq!(gates[0]["actor"], "bob");
    assert_eq!(gates[0]["approvers"], json!(["alice", "bob"]));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn revise_or_kill_by_one_identity_decides_at_once_and_a_new_round_counts_afresh() {
    let mut s = ruled(two_approvals());
    let flow = reviewed_work_at_gate(&mut s);
    s.acting_as(Some("alice"));
    let first = s.gate(&flow, "review", "approve", "fine by me", "human");
    assert_eq!(status(&first), "approval_recorded", "{first}");

    // One identity's revise sends the work back at once, whatever was approved before.
    s.acting_as(Some("bob"));
    let revised = s.gate(&flow, "review", "revise", "needs a summary", "human");
    assert_eq!(status(&revised), "execute_step", "{revised}");
    let back = s.done(&flow, "work", json!({"result": "r2", "quality_score": 0.9}));
    assert_eq!(status(&back), "await_gate", "{back}");

    // Round 1 counts from none: alice's round-0 approval was of other work.
    s.acting_as(Some("alice"));
    let fresh = s.gate(&flow, "review", "approve", "better", "human");
    assert_eq!(status(&fresh), "approval_recorded", "{fresh}");
    assert_eq!(
        (&fresh["round"], &fresh["approvals"]),
        (&json!(1), &json!(1))
    );

    s.acting_as(Some("carol"));
    let killed = s.gate(&flow, "review", "kill", "not this quarter", "human");
    assert_eq!(status(&killed), "killed", "{killed}");

    let audit = s.audit(&flow);
    let records = all_records(&audit);
    let approvals: Vec<(Value, Value)> = of_type(&records, "approval")
        .iter()
        .map(|record| (record["identity"].clone(), record["round"].clone()))
        .collect();
    assert_eq!(
        approvals,
        [(json!("alice"), json!(0)), (json!("alice"), json!(1))]
    );
    let gates = of_type(&records, "gate");
    let decided: Vec<(Value, Value, Value)> = gates
        .iter()
        .map(|gate| {
            (
                gate["outcome"].clone(),
                gate["actor"].clone(),
                gate.get("approvers").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    assert_eq!(
        decided,
        [
            (json!("revise"), json!("bob"), Value::Null),
            (json!("kill"), json!("carol"), Value::Null)
        ],
        "{audit}"
    );
}

#[test]
fn the_flows_starter_cannot_approve_when_self_approval_is_off_but_may_revise() {
    let mut s = ruled(GateRule {
        self_approval: false,
        ..GateRule::default()
    });
    s.acting_as(Some("alice"));
    let flow = reviewed_work_at_gate(&mut s);

    let before = stored(&s, &flow);
    let refused = s.gate(&flow, "review", "approve", "my own work is fine", "human");
    assert_eq!(error_type(&refused), "self_approval", "{refused}");
    assert_eq!(
        (&refused["flow_id"], &refused["step_id"], &refused["round"]),
        (&json!(flow), &json!("review"), &json!(0))
    );
    let message = refused["message"].as_str().expect("a message");
    assert!(message.contains("`alice` started flow"), "{message}");
    assert!(message.contains("revise or kill"), "{message}");
    assert_eq!(stored(&s, &flow), before, "a refusal writes nothing");
    assert!(of_type(&all_records(&s.audit(&flow)), "gate").is_empty());

    // Sending one's own work back is not approving it.
    let revised = s.gate(&flow, "review", "revise", "I found a bug", "human");
    assert_eq!(status(&revised), "execute_step", "{revised}");
    let back = s.done(&flow, "work", json!({"result": "r2", "quality_score": 0.9}));
    assert_eq!(status(&back), "await_gate", "{back}");
    let still_refused = s.gate(&flow, "review", "approve", "fixed", "human");
    assert_eq!(error_type(&still_refused), "self_approval");

    s.acting_as(Some("bob"));
    let approved = s.gate(&flow, "review", "approve", "reviewed", "human");
    assert_eq!(status(&approved), "complete", "{approved}");
}

#[test]
fn an_identity_not_among_the_approvers_is_refused_whatever_it_decides() {
    let mut s = ruled(GateRule {
        approvers: Some(vec!["alice".to_owned(), "os:bob".to_owned()]),
        ..GateRule::default()
    });
    let flow = reviewed_work_at_gate(&mut s);
    s.acting_as(Some("mallory"));
    let before = stored(&s, &flow);
    for outcome in ["approve", "revise", "kill"] {
        let refused = s.gate(&flow, "review", outcome, "let me", "human");
        assert_eq!(error_type(&refused), "not_an_approver", "{refused}");
        let message = refused["message"].as_str().expect("a message");
        assert!(message.contains("admit only alice, os:bob"), "{message}");
    }
    assert_eq!(stored(&s, &flow), before, "the refusals wrote nothing");
    s.acting_as(Some("os:bob"));
    let approved = s.gate(&flow, "review", "approve", "fine", "human");
    assert_eq!(status(&approved), "complete", "{approved}");
}

#[test]
fn a_decision_without_a_verified_identity_is_refused_at_a_gate_with_rules() {
    let mut s = ruled(GateRule::default());
    let flow = reviewed_work_at_gate(&mut s);
    // An agent's own stratum_gate_resolve over stdio: no identity the server vouches for.
    s.acting_as(None);
    let before = stored(&s, &flow);
    let refused = s.gate(&flow, "review", "approve", "looks right to me", "human");
    assert_eq!(error_type(&refused), "identity_required", "{refused}");
    let message = refused["message"].as_str().expect("a message");
    for hint in [
        "stratum_gate_wait",
        "stratum-mcp gate approve",
        "web console",
    ] {
        assert!(message.contains(hint), "{hint} not in {message}");
    }
    assert_eq!(stored(&s, &flow), before);

    // A gate whose function has no rule is decided as before, by anyone.
    let rules = BTreeMap::from([("another_gate".to_owned(), two_approvals())]);
    let mut unruled = Scenario::configured(REVIEWED_WORK, Config::default().with_gate_rules(rules));
    let other = reviewed_work_at_gate(&mut unruled);
    let approved = unruled.gate(&other, "review", "approve", "fine", "agent");
    assert_eq!(status(&approved), "complete", "{approved}");
}

#[test]
fn a_decision_bound_to_an_earlier_round_is_refused_before_any_rule_counts_it() {
    let mut s = ruled(two_approvals());
    let flow = reviewed_work_at_gate(&mut s);
    s.acting_as(Some("alice"));
    s.gate(&flow, "review", "revise", "again", "human");
    s.done(&flow, "work", json!({"result": "r2", "quality_score": 0.9}));
    // bob's form showed round 0; it answers after the revise.
    let stale = s.run(
        "bob answers the round-0 form",
        stratum_runtime::Command::GateResolve {
            flow_id: flow.clone(),
            step_id: "review".to_owned(),
            outcome: "approve".to_owned(),
            rationale: "saw r1".to_owned(),
            resolved_by: "human".to_owned(),
            actor: Some("bob".to_owned()),
            via: None,
            round: Some(0),
            value: None,
        },
    );
    assert_eq!(error_type(&stale), "stale_round", "{stale}");
    let first = s.gate(&flow, "review", "approve", "r2 is good", "human");
    assert_eq!(
        (&first["status"], &first["approvals"]),
        (&json!("approval_recorded"), &json!(1)),
        "bob's stale answer counted for nothing: {first}"
    );
}

#[test]
fn a_timeout_still_kills_a_gate_that_has_some_of_its_approvals() {
    let mut s = ruled(two_approvals());
    let flow = reviewed_work_at_gate(&mut s);
    s.acting_as(Some("alice"));
    s.gate(&flow, "review", "approve", "ok", "human");
    s.wait_ms(3_600_000);
    let killed = s.check_timeouts(&flow);
    assert_eq!(status(&killed), "killed", "{killed}");
    assert_eq!(killed["reason"], "timeout");
}

#[test]
fn approvals_count_against_the_rule_in_force() {
    let mut s = ruled(GateRule {
        min_approvals: 2,
        approvers: Some(vec![
            "alice".to_owned(),
            "bob".to_owned(),
            "carol".to_owned(),
        ]),
        self_approval: true,
    });
    let flow = reviewed_work_at_gate(&mut s);
    s.acting_as(Some("alice"));
    s.gate(&flow, "review", "approve", "ok", "human");
    // The operators drop alice from the approvers and restart the server.
    let rules = BTreeMap::from([(
        "review_gate".to_owned(),
        GateRule {
            min_approvals: 2,
            approvers: Some(vec!["bob".to_owned(), "carol".to_owned()]),
            self_approval: true,
        },
    )]);
    s.config = Arc::new(Config::default().with_gate_rules(rules));
    s.acting_as(Some("bob"));
    let waiting = s.gate(&flow, "review", "approve", "ok", "human");
    assert_eq!(status(&waiting), "approval_recorded", "{waiting}");
    assert_eq!(
        waiting["approvers"],
        json!(["bob"]),
        "alice no longer counts"
    );
    s.acting_as(Some("carol"));
    let done = s.gate(&flow, "review", "approve", "ok", "human");
    assert_eq!(status(&done), "complete", "{done}");
}

/// A sub-flow with a gate: its starter is the parent's.
const NESTED_REVIEW: &str = r#"
version: "0.2"
functions:
  review_gate:
    mode: gate
flows:
  reviewed:
    input: {}
    steps:
      - id: write
        intent: "Write it"
      - id: review
        function: review_gate
        on_approve: ~
        on_revise: write
        on_kill: ~
  main:
    input: {}
    steps:
      - id: inner
        flow: reviewed
        inputs: {}
"#;

#[test]
fn a_sub_flows_gate_knows_who_started_the_flow_above_it() {
    let rules = BTreeMap::from([(
        "review_gate".to_owned(),
        GateRule {
            self_approval: false,
            ..GateRule::default()
        },
    )]);
    let mut s = Scenario::configured(NESTED_REVIEW, Config::default().with_gate_rules(rules));
    s.acting_as(Some("alice"));
    let started = s.start(Some("main"), json!({}));
    assert_eq!(status(&started), "execute_flow", "{started}");
    let child = started["child_flow_id"]
        .as_str()
        .expect("a child flow")
        .to_owned();
    let at_gate = s.done(&child, "write", json!({"text": "t"}));
    assert_eq!(status(&at_gate), "await_gate", "{at_gate}");
    assert_eq!(s.audit(&child)["started_by"], "alice");
    let refused = s.gate(&child, "review", "approve", "mine", "human");
    assert_eq!(error_type(&refused), "self_approval", "{refused}");
    s.acting_as(Some("bob"));
    let approved = s.gate(&child, "review", "approve", "theirs", "human");
    assert_eq!(status(&approved), "complete", "{approved}");
}

// ---------------------------------------------------------------------------------------------
// A gate whose function declares `output`: the person approves with a typed value, and the
// step's output is their decision (the seed's `HumanDecision[T]`), read by later steps.

const RELEASE: &str = r#"version: "0.2"
contracts:
  Draft:
    text: {type: string}
  Release:
    version: {type: string}
    channel: {type: string, values: [stable, beta]}
  Published:
    url: {type: string}
functions:
  write:
    mode: infer
    intent: "Write the release note"
    input: {}
    output: Draft
  sign_off:
    mode: gate
    output: Release
  publish:
    mode: infer
    intent: "Publish the release"
    input:
      version: {type: string}
      reviewer: {type: string}
    output: Published
flows:
  release:
    input: {}
    steps:
      - id: write
        function: write
        inputs: {}
      - id: review
        function: sign_off
        on_approve: publish
        on_revise: write
        on_kill: ~
        depends_on: [write]
      - id: publish
        function: publish
        inputs:
          version: "$.steps.review.output.value.version"
          reviewer: "$.steps.review.output.rationale"
        depends_on: [review]
"#;

/// The stored output of the step at plan index `index` of `flow`.
fn step_output(s: &Scenario, flow: &str, index: u32) -> Value {
    let id = FlowId::parse(flow).expect("a flow id");
    let mut output = None;
    s.store
        .read(&mut |snapshot| {
            output = snapshot.step(&id, index)?.and_then(|step| step.output);
            Ok(())
        })
        .expect("the store reads");
    output.expect("the step has an output")
}

fn decide_with(flow: &str, outcome: &str, value: Option<Value>) -> stratum_runtime::Command {
    stratum_runtime::Command::GateResolve {
        flow_id: flow.to_owned(),
        step_id: "review".to_owned(),
        outcome: outcome.to_owned(),
        rationale: "ship 1.2 to stable".to_owned(),
        resolved_by: "human".to_owned(),
        actor: Some("alice".to_owned()),
        via: None,
        round: None,
        value,
    }
}

#[test]
#[allow(clippy::unwrap_used)]
fn a_typed_gate_is_approved_with_a_value_of_its_contract_that_later_steps_read() {
    let mut s = Scenario::new(RELEASE);
    s.start(None, json!({}));
    let flow = s.flow(1);
    let gate = s.done(&flow, "write", json!({"text": "notes"}));
    assert_eq!(status(&gate), "await_gate", "{gate}");
    let before = stored(&s, &flow);

    let missing = s.run(
        "approve without a value",
        decide_with(&flow, "approve", None),
    );
    assert_eq!(error_type(&missing), "decision_value_required", "{missing}");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("channel, version"),
        "{missing}"
    );
    let wrong = s.run(
        "approve with a value that breaks the contract",
        decide_with(
            &flow,
            "approve",
            Some(json!({"version": "1.2", "channel": "nightly"})),
        ),
    );
    assert_eq!(error_type(&wrong), "decision_value_invalid", "{wrong}");
    assert!(
        !wrong["violations"].as_array().unwrap().is_empty(),
        "{wrong}"
    );
    assert_eq!(
        stored(&s, &flow),
        before,
        "a refused decision wrote nothing"
    );

    let approved = s.run(
        "approve with the release",
        decide_with(
            &flow,
            "approve",
            Some(json!({"version": "1.2", "channel": "stable"})),
        ),
    );
    assert_eq!(status(&approved), "execute_step", "{approved}");
    assert_eq!(approved["step_id"], "publish");
    assert_eq!(approved["inputs"]["version"], "1.2", "{approved}");
    assert_eq!(
        approved["inputs"]["reviewer"], "ship 1.2 to stable",
        "{approved}"
    );

    let audit = s.audit(&flow);
    let record = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "gate")
        .unwrap()
        .clone();
    assert_eq!(
        record["value"],
        json!({"version": "1.2", "channel": "stable"})
    );
    let review_id = record["review_id"].as_str().unwrap();
    assert_eq!(review_id.len(), 36, "{record}");
    let decision = step_output(&s, &flow, 1);
    assert_eq!(decision["value"]["channel"], "stable", "{decision}");
    assert_eq!(decision["reviewer"], "alice", "{decision}");
    assert_eq!(decision["outcome"], "approve", "{decision}");
    assert_eq!(decision["review_id"], review_id, "{decision}");
    assert!(
        decision["decided_at"].as_str().unwrap().ends_with('Z'),
        "{decision}"
    );
}

#[test]
fn revise_and_kill_need_no_value_and_an_untyped_gate_takes_none() {
    let mut s = Scenario::new(RELEASE);
    s.start(None, json!({}));
    let flow = s.flow(1);
    s.done(&flow, "write", json!({"text": "notes"}));
    let revised = s.run("revise without a value", decide_with(&flow, "revise", None));
    assert_eq!(status(&revised), "execute_step", "{revised}");

    let mut untyped = Scenario::new(REVIEWED_WORK);
    let other = reviewed_work_at_gate(&mut untyped);
    let refused = untyped.run(
        "a value for a gate that decides none",
        decide_with(&other, "approve", Some(json!({"version": "1"}))),
    );
    assert_eq!(
        error_type(&refused),
        "decision_value_unexpected",
        "{refused}"
    );
}
