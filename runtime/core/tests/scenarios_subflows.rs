//! Flow steps: a parent step runs a child flow, the agent drives the child, and the parent
//! step takes the child's result once (and only once) the child has finished.

use stratum_test_support as support;

use serde_json::{Value, json};
use support::Scenario;

/// A deploy flow whose `test` step runs the `integration_tests` flow; a failing test step
/// rebuilds (and so runs a new child).
const DEPLOY: &str = r#"
version: "0.2"
contracts:
  TestResult:
    all_passed: {type: boolean}
    count: {type: integer}
flows:
  integration_tests:
    input: {project: {type: string}, version: {type: string}}
    output: TestResult
    steps:
      - id: prepare
        intent: "Prepare the test environment"
        inputs: {project: "$.input.project", version: "$.input.version"}
      - id: run
        intent: "Run integration tests"
        inputs: {env: "$.steps.prepare.output.env"}
        output_contract: TestResult
        ensure:
          - "result.all_passed == True"
  deploy:
    input: {project: {type: string}}
    steps:
      - id: build
        intent: "Build the project"
        inputs: {project: "$.input.project"}
      - id: test
        flow: integration_tests
        inputs: {project: "$.input.project", version: "$.steps.build.output.version"}
        ensure:
          - "result.count > 0"
        on_fail: build
      - id: release
        intent: "Deploy to production"
        inputs: {tests: "$.steps.test.output"}
"#;

fn field<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}

fn at(value: &Value, index: usize) -> &Value {
    value.get(index).unwrap_or(&Value::Null)
}

/// Starts `deploy` and finishes `build`: the parent waits on its `test` step, whose child
/// is the second flow seen.
fn at_the_flow_step(spec: &str) -> (Scenario, String, String, Value) {
    let mut s = Scenario::new(spec);
    s.start(Some("deploy"), json!({"project": "web"}));
    let parent = s.flow(1);
    let dispatch = s.done(&parent, "build", json!({"version": "1.2.0"}));
    let child = s.flow(2);
    (s, parent, child, dispatch)
}

/// Drives the child through both of its steps to completion; returns its envelope.
fn finish_child(s: &mut Scenario, child: &str, result: Value) -> Value {
    s.done(child, "prepare", json!({"env": "staging"}));
    s.done(child, "run", result)
}

#[test]
fn flow_step_dispatches_execute_flow_with_the_childs_first_step() {
    let (s, parent, child, dispatch) = at_the_flow_step(DEPLOY);
    assert_eq!(field(&dispatch, "status"), "execute_flow");
    assert!(
        dispatch.get("flow_id").is_none(),
        "execute_flow has no flow_id key"
    );
    assert_eq!(field(&dispatch, "parent_flow_id"), parent.as_str());
    assert_eq!(field(&dispatch, "parent_step_id"), "test");
    assert_eq!(field(&dispatch, "child_flow_id"), child.as_str());
    assert_ne!(parent, child);
    assert_eq!(field(&dispatch, "child_flow_name"), "integration_tests");
    assert_eq!(field(&dispatch, "step_number"), 2);
    assert_eq!(field(&dispatch, "total_steps"), 3);
    let child_step = field(&dispatch, "child_step");
    assert_eq!(field(child_step, "status"), "execute_step");
    assert_eq!(field(child_step, "flow_id"), child.as_str());
    assert_eq!(field(child_step, "step_id"), "prepare");
    assert_eq!(field(child_step, "step_number"), 1);
    assert_eq!(field(child_step, "total_steps"), 2);
    assert_eq!(
        field(child_step, "inputs"),
        &json!({"project": "web", "version": "1.2.0"}),
        "the child's inputs are the parent step's inputs, resolved"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn child_completion_names_the_parent_which_accepts_the_envelope() {
    let (mut s, parent, child, _) = at_the_flow_step(DEPLOY);
    let run = s.done(&child, "prepare", json!({"env": "staging"}));
    assert_eq!(field(&run, "flow_id"), child.as_str());
    assert_eq!(field(&run, "step_id"), "run");
    assert_eq!(field(&run, "inputs"), &json!({"env": "staging"}));
    let envelope = s.done(&child, "run", json!({"all_passed": true, "count": 12}));
    assert_eq!(field(&envelope, "status"), "complete");
    assert_eq!(field(&envelope, "flow_id"), child.as_str());
    assert_eq!(
        field(&envelope, "output"),
        &json!({"all_passed": true, "count": 12})
    );
    assert_eq!(field(&envelope, "parent_flow_id"), parent.as_str());
    assert_eq!(field(&envelope, "parent_step_id"), "test");
    let release = s.done(&parent, "test", envelope.clone());
    assert_eq!(field(&release, "status"), "execute_step");
    assert_eq!(field(&release, "step_id"), "release");
    assert_eq!(
        field(field(&release, "inputs"), "tests"),
        &json!({"all_passed": true, "count": 12}),
        "the parent step's output is the child's output, unwrapped"
    );
    let done = s.done(&parent, "release", json!({"released": true}));
    assert_eq!(field(&done, "status"), "complete");
    let test_record = at(field(&done, "trace"), 1);
    assert_eq!(field(test_record, "step_id"), "test");
    assert_eq!(field(test_record, "step_mode"), "flow");
    assert_eq!(field(test_record, "child_flow_id"), child.as_str());
    s.note("the child's audit stays under the parent after both completed");
    let audit = s.audit(&parent);
    let children = field(field(&audit, "child_audits"), "test");
    assert_eq!(children.as_array().map(Vec::len), Some(1));
    assert_eq!(field(at(children, 0), "flow_id"), child.as_str());
    assert_eq!(field(at(children, 0), "status"), "complete");
    assert_eq!(field(at(children, 0), "parent_flow_id"), parent.as_str());
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn parent_accepts_the_childs_output_as_well_as_its_envelope() {
    let (mut s, parent, child, _) = at_the_flow_step(DEPLOY);
    finish_child(&mut s, &child, json!({"all_passed": true, "count": 3}));
    let release = s.done(&parent, "test", json!({"all_passed": true, "count": 3}));
    assert_eq!(field(&release, "step_id"), "release");
    assert_eq!(
        field(field(&release, "inputs"), "tests"),
        &json!({"all_passed": true, "count": 3})
    );
}

#[test]
fn bug9_parent_step_output_is_the_childs_recorded_output_not_what_the_agent_relays() {
    let (mut s, parent, child, _) = at_the_flow_step(DEPLOY);
    finish_child(&mut s, &child, json!({"all_passed": true, "count": 3}));
    s.note("the agent relays an altered result");
    let release = s.done(&parent, "test", json!({"all_passed": true, "count": 300}));
    assert_eq!(field(&release, "step_id"), "release");
    assert_eq!(
        field(field(&release, "inputs"), "tests"),
        &json!({"all_passed": true, "count": 3})
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn bug9_parent_step_done_before_the_child_completes_is_refused() {
    let (mut s, parent, child, _) = at_the_flow_step(DEPLOY);
    let early = s.done(&parent, "test", json!({"all_passed": true, "count": 99}));
    assert_eq!(field(&early, "status"), "error");
    assert_eq!(field(&early, "error_type"), "child_flow_not_complete");
    assert_eq!(field(&early, "flow_id"), parent.as_str());
    assert_eq!(field(&early, "step_id"), "test");
    assert_eq!(field(&early, "child_flow_id"), child.as_str());
    assert!(
        field(&early, "message")
            .as_str()
            .is_some_and(|message| message.contains(child.as_str())),
        "the message names the child: {early}"
    );
    s.done(&child, "prepare", json!({"env": "staging"}));
    let still = s.done(&parent, "test", json!({"all_passed": true, "count": 99}));
    assert_eq!(
        field(&still, "error_type"),
        "child_flow_not_complete",
        "one child step done is not the child done"
    );
    let envelope = s.done(&child, "run", json!({"all_passed": true, "count": 4}));
    assert_eq!(field(&envelope, "status"), "complete");
    let release = s.done(&parent, "test", envelope);
    assert_eq!(field(&release, "step_id"), "release");
    let audit = s.audit(&parent);
    let test_record = at(field(&audit, "trace"), 1);
    assert_eq!(
        field(test_record, "attempts"),
        1,
        "refused reports are not attempts"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn failing_ensure_on_the_parent_step_runs_a_new_child() {
    let (mut s, parent, first_child, _) = at_the_flow_step(DEPLOY);
    let envelope = finish_child(
        &mut s,
        &first_child,
        json!({"all_passed": true, "count": 0}),
    );
    assert_eq!(field(&envelope, "status"), "complete");
    let recovered = s.done(&parent, "test", envelope);
    assert_eq!(field(&recovered, "status"), "execute_step");
    assert_eq!(field(&recovered, "step_id"), "build");
    assert_eq!(field(&recovered, "routed_from"), "test");
    assert_eq!(
        field(&recovered, "violations"),
        &json!(["ensure 'result.count > 0' failed: `result.count` was 0"])
    );
    let again = s.done(&parent, "build", json!({"version": "1.2.1"}));
    assert_eq!(field(&again, "status"), "execute_flow");
    let second_child = s.flow(3);
    assert_eq!(
        field(&again, "child_flow_id"),
        second_child.as_str(),
        "a new child, not the finished one"
    );
    assert_ne!(first_child, second_child);
    assert_eq!(
        field(field(field(&again, "child_step"), "inputs"), "version"),
        "1.2.1"
    );
    let envelope = finish_child(
        &mut s,
        &second_child,
        json!({"all_passed": true, "count": 8}),
    );
    let release = s.done(&parent, "test", envelope);
    assert_eq!(field(&release, "step_id"), "release");
    s.done(&parent, "release", json!({"released": true}));
    let audit = s.audit(&parent);
    let children = field(field(&audit, "child_audits"), "test");
    assert_eq!(
        children.as_array().map(Vec::len),
        Some(2),
        "every child of every attempt"
    );
    assert_eq!(field(at(children, 0), "flow_id"), first_child.as_str());
    assert_eq!(field(at(children, 1), "flow_id"), second_child.as_str());
    assert_eq!(
        field(at(children, 1), "output"),
        &json!({"all_passed": true, "count": 8})
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn parent_step_checks_its_output_schema_against_the_childs_result() {
    let spec = DEPLOY.replace(
        "        ensure:\n          - \"result.count > 0\"\n        on_fail: build\n",
        "        output_schema:\n          type: object\n          required: [report_url]\n",
    );
    let (mut s, parent, child, _) = at_the_flow_step(&spec);
    let envelope = finish_child(&mut s, &child, json!({"all_passed": true, "count": 5}));
    let failed = s.done(&parent, "test", envelope);
    assert_eq!(field(&failed, "status"), "error");
    assert_eq!(field(&failed, "error_type"), "retries_exhausted");
    assert_eq!(field(&failed, "step_id"), "test");
    assert_eq!(field(&failed, "step_mode"), "flow");
    assert_eq!(
        field(&failed, "violations"),
        &json!(["output_schema violation: \"report_url\" is a required property"])
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn child_that_fails_makes_the_parent_steps_attempt_fail() {
    let (mut s, parent, child, _) = at_the_flow_step(DEPLOY);
    s.done(&child, "prepare", json!({"env": "staging"}));
    let failed = s.done(&child, "run", json!({"all_passed": false, "count": 7}));
    assert_eq!(field(&failed, "status"), "error");
    assert_eq!(field(&failed, "error_type"), "retries_exhausted");
    assert_eq!(field(&failed, "flow_id"), child.as_str());
    assert!(
        field(&failed, "message")
            .as_str()
            .is_some_and(|message| message.contains(parent.as_str())),
        "the child's failure says where to report it: {failed}"
    );
    let resumed = s.resume(&parent);
    assert_eq!(field(&resumed, "status"), "execute_flow");
    assert_eq!(field(&resumed, "child_flow_id"), child.as_str());
    let child_step = field(&resumed, "child_step");
    assert_eq!(field(child_step, "flow_status"), "failed");
    assert!(
        field(child_step, "message")
            .as_str()
            .is_some_and(|message| message.contains(parent.as_str())),
        "a failed child points at its parent, not at a new flow: {child_step}"
    );
    let again = s.done(&child, "run", json!({"all_passed": true, "count": 7}));
    assert_eq!(field(&again, "error_type"), "flow_already_complete");
    assert_eq!(field(&again, "message"), field(child_step, "message"));
    let recovered = s.done(&parent, "test", failed);
    assert_eq!(field(&recovered, "status"), "execute_step");
    assert_eq!(field(&recovered, "step_id"), "build");
    assert_eq!(field(&recovered, "routed_from"), "test");
    let violations = field(&recovered, "violations");
    assert_eq!(violations.as_array().map(Vec::len), Some(1));
    assert!(
        at(violations, 0)
            .as_str()
            .is_some_and(|text| text.contains(child.as_str()) && text.contains("failed")),
        "the violation names the child and how it ended: {violations}"
    );
    let audit = s.audit(&parent);
    let children = field(field(&audit, "child_audits"), "test");
    assert_eq!(field(at(children, 0), "status"), "failed");
    assert_eq!(field(at(children, 0), "error_type"), "retries_exhausted");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn child_that_fails_with_no_recovery_ends_the_parent() {
    let spec = DEPLOY.replace("        on_fail: build\n", "");
    let (mut s, parent, child, _) = at_the_flow_step(&spec);
    s.done(&child, "prepare", json!({"env": "staging"}));
    s.done(&child, "run", json!({"all_passed": false, "count": 7}));
    let failed = s.done(&parent, "test", json!({}));
    assert_eq!(field(&failed, "status"), "error");
    assert_eq!(field(&failed, "error_type"), "retries_exhausted");
    assert_eq!(field(&failed, "flow_id"), parent.as_str());
    assert_eq!(field(&failed, "step_id"), "test");
    let audit = s.audit(&parent);
    assert_eq!(field(&audit, "status"), "failed");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn resume_of_the_parent_returns_the_childs_current_dispatch() {
    let (mut s, parent, child, _) = at_the_flow_step(DEPLOY);
    s.done(&child, "prepare", json!({"env": "staging"}));
    let resumed = s.resume(&parent);
    assert_eq!(field(&resumed, "status"), "execute_flow");
    assert_eq!(field(&resumed, "parent_step_id"), "test");
    assert_eq!(
        field(&resumed, "child_flow_id"),
        child.as_str(),
        "the same child, not a new one"
    );
    assert_eq!(field(field(&resumed, "child_step"), "step_id"), "run");
    assert_eq!(
        field(field(&resumed, "child_step"), "inputs"),
        &json!({"env": "staging"})
    );
    let child_resumed = s.resume(&child);
    assert_eq!(field(&child_resumed, "step_id"), "run");
    let envelope = s.done(&child, "run", json!({"all_passed": true, "count": 2}));
    s.note("the child has completed; the parent step still waits for its report");
    let waiting = s.resume(&parent);
    assert_eq!(field(&waiting, "status"), "execute_flow");
    assert_eq!(field(field(&waiting, "child_step"), "status"), "complete");
    assert_eq!(field(&waiting, "child_step"), &envelope);
    let release = s.done(&parent, "test", field(&waiting, "child_step").clone());
    assert_eq!(field(&release, "step_id"), "release");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn child_flow_with_every_step_skipped_completes_at_once() {
    let spec = r#"
version: "0.2"
flows:
  lint_all:
    input: {strict: {type: boolean}}
    steps:
      - id: check
        intent: "Lint strictly"
        skip_if: "$.input.strict == False"
        skip_reason: "not in strict mode"
  main:
    input: {strict: {type: boolean}}
    steps:
      - id: lint
        flow: lint_all
        inputs: {strict: "$.input.strict"}
      - id: ship
        intent: "Ship it"
"#;
    let mut s = Scenario::new(spec);
    s.note("ids are numbered as the response's keys name them: <flow-1> is the child, <flow-2> the parent");
    let dispatch = s.start(Some("main"), json!({"strict": false}));
    let parent = field(&dispatch, "parent_flow_id")
        .as_str()
        .expect("a parent id")
        .to_owned();
    let child = field(&dispatch, "child_flow_id")
        .as_str()
        .expect("a child id")
        .to_owned();
    assert_eq!(field(&dispatch, "status"), "execute_flow");
    let envelope = field(&dispatch, "child_step").clone();
    assert_eq!(field(&envelope, "status"), "complete");
    assert_eq!(field(&envelope, "flow_id"), child.as_str());
    assert_eq!(field(&envelope, "output"), &Value::Null);
    assert_eq!(field(&envelope, "parent_flow_id"), parent.as_str());
    assert_eq!(field(&envelope, "parent_step_id"), "lint");
    assert_eq!(field(at(field(&envelope, "trace"), 0), "type"), "skip");
    let ship = s.done(&parent, "lint", envelope);
    assert_eq!(field(&ship, "step_id"), "ship");
    insta::assert_snapshot!(s.transcript());
}

/// A parent step that moves on without its child (skipped here; routing back past it or a
/// revert do the same) cancels the child, which would otherwise stay running forever and
/// later report to a step that no longer waits for it.
#[test]
fn a_child_the_parent_no_longer_waits_for_is_cancelled() {
    let (mut s, parent, child, _) = at_the_flow_step(DEPLOY);
    s.done(&child, "prepare", json!({"env": "staging"}));
    let next = s.skip(&parent, "test", "tests are flaky today");
    assert_eq!(field(&next, "step_id"), "release");
    let late = s.done(&child, "run", json!({"all_passed": true, "count": 3}));
    assert_eq!(field(&late, "error_type"), "flow_already_complete");
    assert_eq!(field(&late, "flow_status"), "cancelled");
    assert!(
        field(&late, "message")
            .as_str()
            .is_some_and(|message| message.contains("cancelled when its parent flow")),
        "{late}"
    );
    let audit = s.audit(&child);
    assert_eq!(field(&audit, "status"), "cancelled");
    let parent_audit = s.audit(&parent);
    assert_eq!(
        parent_audit
            .pointer("/child_audits/test/0/status")
            .cloned()
            .unwrap_or_default(),
        "cancelled",
        "the parent's audit keeps the cancelled child"
    );
    insta::assert_snapshot!(s.transcript());
}
