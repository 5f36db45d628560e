//! Checkpoints: `stratum_commit` and `stratum_revert`. A revert restores step outputs,
//! attempts, the cursor, round and iteration state, and the trace (what was written after the
//! checkpoint leaves it); it dispatches as any move does (gate policies apply), refuses a
//! finished flow, and checkpoints live in the store, so they survive a restart.
//!
//! Tests named `reference_bug_<n>_…` cover item n of the reference runtime's weak points
//! (`reference-runtime.md` §3).

#![allow(clippy::indexing_slicing)] // JSON values index to null; a short list fails the test

use stratum_test_support as support;

use serde_json::{Value, json};
use support::{Scenario, error_type, status};

/// `pipeline`: two checked steps, a gate that revises to the second, a report. `tuning`: an
/// iterated step. `cached`: a cached step before a `policy: skip` gate.
const SPEC: &str = r#"version: "0.2"
contracts:
  Data:
    rows: {type: integer}
  Tuning:
    quality: {type: number}
functions:
  load_rows:
    mode: compute
    intent: "Load the rows from the source"
    input: {source: {type: string}}
    output: Data
    ensure: ["result.rows > 0"]
  clean_rows:
    mode: infer
    intent: "Drop the malformed rows"
    input: {rows: {type: integer}}
    output: Data
    ensure: ["result.rows > 0"]
  fetch:
    mode: compute
    intent: "Fetch the dataset"
    input: {url: {type: string}}
    output: Data
    cache: true
  approval:
    mode: gate
flows:
  pipeline:
    input: {source: {type: string}}
    max_rounds: 3
    steps:
      - id: load
        function: load_rows
        inputs: {source: "$.input.source"}
      - id: clean
        function: clean_rows
        inputs: {rows: "$.steps.load.output.rows"}
      - id: review
        function: approval
        depends_on: [clean]
        on_approve: report
        on_revise: clean
        on_kill: ~
      - id: report
        intent: "Write the report"
        depends_on: [review]
        inputs: {rows: "$.steps.clean.output.rows"}
  tuning:
    input: {}
    steps:
      - id: tune
        intent: "Tune the parameters until the quality is good enough"
        output_contract: Tuning
        max_iterations: 5
        exit_criterion: "result.quality >= 0.9"
      - id: publish
        intent: "Publish the tuned parameters"
        inputs: {quality: "$.steps.tune.output.quality"}
  cached:
    input: {url: {type: string}}
    steps:
      - id: fetch
        function: fetch
        inputs: {url: "$.input.url"}
      - id: check
        function: approval
        policy: skip
        depends_on: [fetch]
        on_approve: summarize
        on_revise: fetch
        on_kill: ~
      - id: summarize
        intent: "Summarize the dataset"
        depends_on: [check]
        inputs: {rows: "$.steps.fetch.output.rows"}
"#;

/// The step ids of a trace's records, in order.
fn trace_steps(trace: &Value) -> Vec<String> {
    trace
        .as_array()
        .expect("a trace is an array")
        .iter()
        .map(|record| {
            let id = record["step_id"].as_str().expect("a record names its step");
            match record["type"].as_str() {
                Some("gate") => format!("{id}:{}", record["outcome"].as_str().unwrap_or("?")),
                Some("policy") | Some("skip") => {
                    format!("{id}:{}", record["type"].as_str().unwrap_or("?"))
                }
                _ => id.to_owned(),
            }
        })
        .collect()
}

#[test]
fn commit_response_shape_and_label_trim() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.done(&flow, "load", json!({"rows": 10}));
    let committed = s.commit(&flow, "  after_load  ");
    assert_eq!(
        committed,
        json!({
            "status": "committed",
            "flow_id": flow,
            "label": "after_load",
            "step_number": 2,
            "current_step_id": "clean",
            "checkpoints": ["after_load"],
        }),
        "the reference's shape; the label trimmed"
    );
    let blank = s.commit(&flow, "   ");
    assert_eq!(error_type(&blank), "invalid_label");
    assert_eq!(blank["message"], "label must be a non-empty string");
    let empty = s.commit(&flow, "");
    assert_eq!(error_type(&empty), "invalid_label");
    let second = s.commit(&flow, "before_clean");
    assert_eq!(second["checkpoints"], json!(["after_load", "before_clean"]));
    let reverted = s.revert(&flow, " after_load ");
    assert_eq!(
        reverted["reverted_to"], "after_load",
        "revert trims the label too"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn checkpoints_are_listed_in_the_order_they_were_first_committed() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.commit(&flow, "zeta");
    s.done(&flow, "load", json!({"rows": 10}));
    let second = s.commit(&flow, "alpha");
    assert_eq!(
        second["checkpoints"],
        json!(["zeta", "alpha"]),
        "commit order, not name order"
    );
    s.done(&flow, "clean", json!({"rows": 8}));
    let again = s.commit(&flow, "zeta");
    assert_eq!(
        again["checkpoints"],
        json!(["zeta", "alpha"]),
        "a label committed again keeps its place, as a Python dict keeps a key's"
    );
    let missing = s.revert(&flow, "omega");
    assert_eq!(missing["available"], json!(["zeta", "alpha"]));
}

#[test]
fn commit_same_label_overwrites() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.commit(&flow, "cp");
    s.done(&flow, "load", json!({"rows": 10}));
    s.done(&flow, "clean", json!({"rows": 8}));
    let again = s.commit(&flow, "cp");
    assert_eq!(
        again["checkpoints"],
        json!(["cp"]),
        "one checkpoint per label"
    );
    assert_eq!(again["current_step_id"], "review");
    s.gate(&flow, "review", "approve", "ok", "human");
    let reverted = s.revert(&flow, "cp");
    assert_eq!(status(&reverted), "await_gate", "back to the later commit");
    assert_eq!(reverted["step_id"], "review");
    assert_eq!(reverted["reverted_to"], "cp");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn revert_restores_outputs_attempts_cursor_and_trace() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.done(&flow, "load", json!({"rows": 10}));
    let failed = s.done(&flow, "clean", json!({"rows": 0}));
    assert_eq!(status(&failed), "ensure_failed");
    assert_eq!(failed["retries_remaining"], 2);
    let committed = s.commit(&flow, "clean_tried_once");
    assert_eq!(committed["current_step_id"], "clean");
    s.done(&flow, "clean", json!({"rows": 8}));
    let report = s.gate(&flow, "review", "approve", "ok", "human");
    assert_eq!(report["step_id"], "report");
    assert_eq!(report["inputs"], json!({"rows": 8}));

    let reverted = s.revert(&flow, "clean_tried_once");
    assert_eq!(status(&reverted), "execute_step");
    assert_eq!(reverted["step_id"], "clean", "the cursor is back");
    assert_eq!(
        reverted["retries_remaining"], 2,
        "the failed attempt still counts"
    );
    assert_eq!(
        reverted["inputs"],
        json!({"rows": 10}),
        "earlier outputs kept"
    );
    assert_eq!(reverted["reverted_to"], "clean_tried_once");
    let audit = s.audit(&flow);
    assert_eq!(
        trace_steps(&audit["trace"]),
        ["load"],
        "records written after the checkpoint are gone from the trace"
    );
    assert_eq!(audit["output"], Value::Null);

    s.done(&flow, "clean", json!({"rows": 5}));
    let report = s.gate(&flow, "review", "approve", "ok", "human");
    assert_eq!(
        report["inputs"],
        json!({"rows": 5}),
        "the new output, not the undone one"
    );
    let done = s.done(&flow, "report", json!({"summary": "5 rows"}));
    assert_eq!(status(&done), "complete");
    assert_eq!(
        trace_steps(&done["trace"]),
        ["load", "clean", "review:approve", "report"]
    );
    assert_eq!(
        done["trace"][1]["attempts"], 2,
        "attempts count across the revert"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn revert_restores_round_state() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.done(&flow, "load", json!({"rows": 10}));
    s.done(&flow, "clean", json!({"rows": 8}));
    s.commit(&flow, "first_review");
    s.gate(&flow, "review", "revise", "drop fewer rows", "human");
    s.done(&flow, "clean", json!({"rows": 9}));
    let audit = s.audit(&flow);
    assert_eq!(audit["round"], 1);

    let reverted = s.revert(&flow, "first_review");
    assert_eq!(status(&reverted), "await_gate");
    assert_eq!(reverted["step_id"], "review");
    assert_eq!(reverted["reverted_to"], "first_review");
    let audit = s.audit(&flow);
    assert_eq!(audit["round"], 0, "back in round 0");
    assert_eq!(audit["rounds"], json!([]), "the revised round is undone");
    assert_eq!(trace_steps(&audit["trace"]), ["load", "clean"]);
    let report = s.gate(&flow, "review", "approve", "fine after all", "human");
    assert_eq!(
        report["inputs"],
        json!({"rows": 8}),
        "round 0's output is back"
    );
    let done = s.done(&flow, "report", json!({"summary": "8 rows"}));
    for record in done["trace"].as_array().expect("a trace") {
        assert_eq!(record["round"], 0);
        assert_eq!(record["round_start_step_id"], Value::Null);
    }
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn revert_restores_iteration_state() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("tuning"), json!({}));
    let flow = s.flow(1);
    s.iteration_start(&flow, "tune");
    s.iteration_report(&flow, "tune", json!({"quality": 0.5}));
    s.commit(&flow, "one_report");
    let second = s.iteration_report(&flow, "tune", json!({"quality": 0.6}));
    assert_eq!(second["iteration"], 2);

    let reverted = s.revert(&flow, "one_report");
    assert_eq!(reverted["step_id"], "tune");
    assert_eq!(reverted["reverted_to"], "one_report");
    let audit = s.audit(&flow);
    let reports = audit["iterations"]["tune"]
        .as_array()
        .expect("tune's reports");
    assert_eq!(
        reports.len(),
        1,
        "the report after the checkpoint is undone"
    );
    let again = s.iteration_report(&flow, "tune", json!({"quality": 0.95}));
    assert_eq!(
        status(&again),
        "iteration_exit",
        "the loop is still active after the revert"
    );
    assert_eq!(again["iteration"], 2, "counting from the checkpoint");
    assert_eq!(again["outcome"], "exit_success");
    let publish = s.done(&flow, "tune", json!({"quality": 0.95}));
    assert_eq!(publish["inputs"], json!({"quality": 0.95}));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn revert_to_unknown_label_is_checkpoint_not_found() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    let none = s.revert(&flow, "nope");
    assert_eq!(error_type(&none), "checkpoint_not_found");
    assert_eq!(
        none["message"],
        format!("No checkpoint 'nope' on flow '{flow}'")
    );
    assert_eq!(none["available"], json!([]));
    s.commit(&flow, "start");
    s.done(&flow, "load", json!({"rows": 10}));
    s.commit(&flow, "after_load");
    let missing = s.revert(&flow, "after_clean");
    assert_eq!(error_type(&missing), "checkpoint_not_found");
    assert_eq!(
        missing["available"],
        json!(["start", "after_load"]),
        "in commit order, as the reference lists them"
    );
    let still = s.resume(&flow);
    assert_eq!(still["step_id"], "clean", "nothing moved");
    insta::assert_snapshot!(s.transcript());
}

/// Reference bug 10: the reference's revert dispatches without the policy loop, so a
/// `policy: skip` gate it walks into answers `await_gate`. Here a revert walks like any
/// move: the cached step is served again and the skip gate approves itself.
#[test]
fn reference_bug_10_revert_applies_gate_policies() {
    let mut s = Scenario::new(SPEC);
    s.start(
        Some("cached"),
        json!({"url": "https://example.com/data.csv"}),
    );
    let flow = s.flow(1);
    s.commit(&flow, "fresh");
    let summarize = s.done(&flow, "fetch", json!({"rows": 3}));
    assert_eq!(
        summarize["step_id"], "summarize",
        "the skip gate did not wait"
    );
    let reverted = s.revert(&flow, "fresh");
    assert_ne!(
        status(&reverted),
        "await_gate",
        "a policy: skip gate never waits"
    );
    assert_eq!(status(&reverted), "execute_step");
    assert_eq!(reverted["step_id"], "summarize");
    assert_eq!(reverted["reverted_to"], "fresh");
    let audit = s.audit(&flow);
    assert_eq!(trace_steps(&audit["trace"]), ["fetch", "check:policy"]);
    assert_eq!(audit["trace"][0]["cache_hit"], true);
    assert_eq!(audit["trace"][1]["effective_policy"], "skip");
    insta::assert_snapshot!(s.transcript());
}

/// Reference bug 10: the reference can revert a completed flow still in memory, bringing it
/// back to life. A finished flow stays finished.
#[test]
fn reference_bug_10_finished_flow_cannot_be_reverted() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.commit(&flow, "start");
    s.done(&flow, "load", json!({"rows": 10}));
    s.done(&flow, "clean", json!({"rows": 8}));
    s.gate(&flow, "review", "approve", "ok", "human");
    let done = s.done(&flow, "report", json!({"summary": "8 rows"}));
    assert_eq!(status(&done), "complete");
    let refused = s.revert(&flow, "start");
    assert_eq!(error_type(&refused), "flow_already_complete");
    assert_eq!(refused["flow_status"], "complete");
    let commit = s.commit(&flow, "late");
    assert_eq!(error_type(&commit), "flow_already_complete");
    let audit = s.audit(&flow);
    assert_eq!(audit["status"], "complete");
    assert_eq!(
        trace_steps(&audit["trace"]),
        ["load", "clean", "review:approve", "report"]
    );

    s.note("a killed flow stays killed too");
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(2);
    s.commit(&flow, "start");
    s.done(&flow, "load", json!({"rows": 10}));
    s.done(&flow, "clean", json!({"rows": 8}));
    s.gate(&flow, "review", "kill", "wrong source", "human");
    let refused = s.revert(&flow, "start");
    assert_eq!(error_type(&refused), "flow_already_complete");
    assert_eq!(refused["flow_status"], "killed");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn checkpoints_survive_a_restart() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.done(&flow, "load", json!({"rows": 10}));
    s.commit(&flow, "after_load");
    s.done(&flow, "clean", json!({"rows": 8}));
    let mut s = s.reopen();
    let listed = s.revert(&flow, "unknown");
    assert_eq!(listed["available"], json!(["after_load"]));
    let reverted = s.revert(&flow, "after_load");
    assert_eq!(status(&reverted), "execute_step");
    assert_eq!(reverted["step_id"], "clean");
    assert_eq!(reverted["retries_remaining"], 3);
    assert_eq!(reverted["reverted_to"], "after_load");
    let audit = s.audit(&flow);
    assert_eq!(trace_steps(&audit["trace"]), ["load"]);
    insta::assert_snapshot!(s.transcript());
}

/// The same over SQLite: the old process exits, a new one opens the database file.
#[test]
fn checkpoints_survive_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("stratum.db");
    let store = stratum_store_sqlite::SqliteStore::open(&path).expect("the database opens");
    let mut s = Scenario::with(
        SPEC,
        std::sync::Arc::new(store),
        stratum_runtime::Config::default(),
    );
    s.start(Some("pipeline"), json!({"source": "s3://bucket/rows.csv"}));
    let flow = s.flow(1);
    s.done(&flow, "load", json!({"rows": 10}));
    s.done(&flow, "clean", json!({"rows": 0}));
    s.commit(&flow, "clean_tried_once");
    s.done(&flow, "clean", json!({"rows": 8}));
    s.gate(&flow, "review", "revise", "again", "human");
    s.store = std::sync::Arc::new(stratum_runtime::MemoryStore::new());
    let reopened =
        stratum_store_sqlite::SqliteStore::open(&path).expect("the database opens again");
    let mut s = s.reopen_with(std::sync::Arc::new(reopened));
    let reverted = s.revert(&flow, "clean_tried_once");
    assert_eq!(reverted["step_id"], "clean");
    assert_eq!(
        reverted["retries_remaining"], 2,
        "attempts restored from the database"
    );
    assert_eq!(reverted["reverted_to"], "clean_tried_once");
    let audit = s.audit(&flow);
    assert_eq!(audit["round"], 0);
    assert_eq!(audit["rounds"], json!([]));
    assert_eq!(trace_steps(&audit["trace"]), ["load"]);
    insta::assert_snapshot!(s.transcript());
}
