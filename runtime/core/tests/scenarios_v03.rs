//! Version 0.3 at run time, on every store at once: a decompose step's task graph is checked
//! before its ensures; a parallel_dispatch step hands out its tasks with their prompts
//! rendered, counts `require` over the tasks it expects (never over what was reported),
//! checks each task's result against the task contract, and on a retry runs again only what
//! failed, keyed by (flow, step, attempt, task). The server's side (start, task events,
//! advance, poll) is driven here by hand; the executor that runs agents is
//! `stratum-driver`'s, tested with real processes there. A pipeline hands out its stages as
//! they become ready (the VM deciding `when` before a stage and `exit_when` after it), its
//! fan-out region one lane per element of the split's result, its join counting the lanes.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index the JSON answers they assert on

use stratum_test_support as support;

use serde_json::{Value, json};
use stratum_runtime::TaskReport;
use support::{Scenario, error_type, status};

const SPEC: &str = r#"version: "0.3"
contracts:
  TaskGraph:
    tasks: {type: array}
  Change:
    summary: {type: string}
flows:
  implement:
    input: {feature: {type: string}}
    steps:
      - id: plan
        type: decompose
        agent: claude
        intent: "Split the feature into tasks"
        inputs: {feature: "$.input.feature"}
        output_contract: TaskGraph
        ensure: ["no_file_conflicts(result.tasks)"]
      - id: build
        type: parallel_dispatch
        source: "$.steps.plan.output.tasks"
        intent_template: "Do {description} (task {id})"
        output_contract: Change
        retries: 3
      - id: review
        type: parallel_dispatch
        source: "$.steps.plan.output.tasks"
        intent_template: "Review task {id}"
        require: any
  quorum:
    input: {modules: {type: array}}
    steps:
      - id: port
        type: parallel_dispatch
        source: "$.input.modules"
        intent_template: "Port {path}"
        require: 2
        retries: 1
        on_fail: by_hand
      - id: by_hand
        intent: "Port the failed modules"
        inputs: {failed: "$.steps.port.output.failed"}
  triage:
    input: {issues: {type: array}}
    steps:
      - id: triage
        type: pipeline
        source: "$.input.issues"
        isolation: none
        require: any
        stages:
          - {intent_template: "Reproduce {item}"}
          - {intent_template: "Is a fix needed? {prev}", exit_when: "'no-fix' in result"}
          - {intent_template: "Fix {item}: {prev}", when: "'duplicate' not in prev"}
  review:
    input: {diff: {type: string}, files: {type: array}}
    steps:
      - id: review
        intent: "Review the diff"
        agent: codex
        retries: 3
        inputs: {diff: "$.input.diff"}
        reasoning_template:
          require_citations: true
          sections: [{id: p, label: Premises, description: "[P1].. with file:line"}, {id: v, label: Verdict, description: "Cite [P<n>]"}]
        ensure: ["result.verdict in ('approve', 'request-changes')"]
      - id: per_file
        type: parallel_dispatch
        source: "$.input.files"
        intent_template: "Check {path}"
        task_reasoning_template: {sections: [{id: c, label: Change, description: "What changed"}]}
  judged:
    input: {}
    steps:
      - id: check
        retries: 2
        judge:
          predicates:
            - {id: tests, type: deterministic, statement: "file_contains('artifacts/log.txt', ' passed')"}
            - {id: no-todo, type: verified, statement: "No modified file adds a TODO", applied_gate: 8}
        ensure: ["result.met == True"]
      - id: ship
        intent: "Ship it"
  sections:
    input: {docs: {type: array}}
    steps:
      - id: split
        type: pipeline
        source: "$.input.docs"
        isolation: none
        retries: 2
        stages:
          - {intent_template: "Split {item} into sections", fanout: {max: 3, require: any}}
          - {intent_template: "Summarise {item} of {source}"}
          - {intent_template: "Join {prevs}", join: true}
          - {intent_template: "Publish {prev}"}
"#;

fn graph() -> Value {
    json!({"tasks": [
        {"id": "a", "description": "the parser", "depends_on": [], "files_owned": ["parse.rs"]},
        {"id": "b", "description": "the printer", "depends_on": ["a"], "files_owned": ["print.rs"]}
    ]})
}

fn ok(task: &str) -> Value {
    json!({"task_id": task, "status": "complete", "result": {"summary": format!("did {task}")}})
}

fn ids(envelope: &Value) -> Vec<String> {
    envelope["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .filter_map(|task| task["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The flow at `build`, its envelope answered.
fn at_build(s: &mut Scenario) -> (String, Value) {
    let planned = s.start(Some("implement"), json!({"feature": "search"}));
    assert_eq!(planned["step_mode"], "decompose", "{planned}");
    let flow = s.flow(1);
    let envelope = s.done(&flow, "plan", graph());
    assert_eq!(status(&envelope), "parallel_dispatch", "{envelope}");
    (flow, envelope)
}

#[test]
fn a_decompose_result_must_be_a_safe_acyclic_task_graph() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("implement"), json!({"feature": "search"}));
    let flow = s.flow(1);
    let unsafe_id = s.done(&flow, "plan", json!({"tasks": [{"id": "../../x"}]}));
    assert_eq!(status(&unsafe_id), "schema_failed", "{unsafe_id}");
    let text = unsafe_id["violations"].to_string();
    assert!(
        text.contains("'../../x', which is not a safe task id"),
        "{text}"
    );
    // Two attempts (a decompose step's default): the flow fails rather than fanning out.
    let cycle = s.done(
        &flow,
        "plan",
        json!({"tasks": [{"id": "a", "depends_on": ["b"]}, {"id": "b", "depends_on": ["a"]}]}),
    );
    assert_eq!(error_type(&cycle), "retries_exhausted", "{cycle}");
    assert_eq!(
        cycle["violations"],
        json!(["dependency cycle: a -> b -> a"]),
        "{cycle}"
    );
    s.start(Some("implement"), json!({"feature": "search"}));
    let twice = s.done(
        &s.flow(2),
        "plan",
        json!({"tasks": [{"id": "a"}, {"id": "a"}]}),
    );
    assert_eq!(
        twice["violations"],
        json!(["result.tasks has the task id 'a' twice"]),
        "{twice}"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn the_envelope_carries_every_task_with_its_prompt_rendered() {
    let mut s = Scenario::new(SPEC);
    let (_, envelope) = at_build(&mut s);
    assert_eq!(ids(&envelope), ["a", "b"]);
    assert_eq!(envelope["tasks"][0]["prompt"], "Do the parser (task a)");
    assert_eq!(envelope["tasks"][1]["depends_on"], json!(["a"]));
    assert_eq!(envelope["intent_template"], "Do {description} (task {id})");
    assert_eq!(envelope["require"], "all");
    assert_eq!(envelope["attempt"], 1);
    assert_eq!(envelope["dispatch"], "consumer");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn an_empty_or_partial_report_never_satisfies_all_and_the_retry_runs_only_the_rest() {
    let mut s = Scenario::new(SPEC);
    let (flow, _) = at_build(&mut s);
    let empty = s.parallel_done(&flow, "build", json!([]), json!("clean"));
    assert_eq!(status(&empty), "ensure_failed", "{empty}");
    let text = empty["violations"].to_string();
    assert!(
        text.contains("require='all' not satisfied: 0 of 2"),
        "{text}"
    );
    assert!(text.contains("task 'a' was not reported"), "{text}");
    assert_eq!(
        ids(&empty),
        ["a", "b"],
        "nothing was accepted, both run again"
    );
    assert_eq!(empty["attempt"], 2);

    let partial = s.parallel_done(&flow, "build", json!([ok("a")]), json!("clean"));
    assert_eq!(status(&partial), "ensure_failed", "{partial}");
    assert_eq!(ids(&partial), ["b"], "a was accepted and is kept");
    assert_eq!(partial["kept"], json!(["a"]));
    let prompt = partial["tasks"][0]["prompt"].as_str().unwrap_or_default();
    assert!(
        prompt.starts_with("Do the printer (task b)")
            && prompt.contains("task 'b' was not reported"),
        "the retry's prompt carries its violations: {prompt}"
    );

    // Reporting a kept task again is refused, and changes nothing.
    let again = s.parallel_done(&flow, "build", json!([ok("a"), ok("b")]), json!("clean"));
    assert_eq!(error_type(&again), "unknown_task", "{again}");

    // The next fan-out step has the same task ids and starts from nothing: attempt 1.
    let review = s.parallel_done(&flow, "build", json!([ok("b")]), json!("clean"));
    assert_eq!(review["step_id"], "review", "{review}");
    assert_eq!(ids(&review), ["a", "b"]);
    assert_eq!(review["attempt"], 1);
    assert!(review.get("kept").is_none(), "{review}");

    // `any`: one complete task is enough; the flow ends with both steps' aggregates.
    let done = s.parallel_done(
        &flow,
        "review",
        json!([{"task_id": "a", "status": "complete", "result": "fine"}, {"task_id": "b", "status": "failed"}]),
        json!("clean"),
    );
    assert_eq!(status(&done), "complete", "{done}");
    let audit = s.audit(&flow);
    assert_eq!(audit["status"], "complete", "{audit}");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn reports_that_name_the_wrong_tasks_are_refused_and_change_nothing() {
    let mut s = Scenario::new(SPEC);
    let (flow, _) = at_build(&mut s);
    let unknown = s.parallel_done(&flow, "build", json!([ok("zz")]), json!("clean"));
    assert_eq!(error_type(&unknown), "unknown_task", "{unknown}");
    let twice = s.parallel_done(&flow, "build", json!([ok("a"), ok("a")]), json!("clean"));
    assert_eq!(error_type(&twice), "duplicate_task", "{twice}");
    let merge = s.parallel_done(&flow, "build", json!([ok("a")]), json!("merged-ish"));
    assert_eq!(error_type(&merge), "invalid_merge_status", "{merge}");
    let whole = s.done(&flow, "build", json!({"outcome": "complete"}));
    assert_eq!(error_type(&whole), "wrong_step_type", "{whole}");
    let wrong = s.parallel_done(&flow, "review", json!([]), json!("clean"));
    assert_eq!(error_type(&wrong), "wrong_step", "{wrong}");
    // Nothing above spent an attempt.
    let resumed = s.resume(&flow);
    assert_eq!(resumed["attempt"], 1, "{resumed}");
    assert_eq!(resumed["retries_remaining"], 3, "{resumed}");
}

#[test]
fn a_task_result_that_breaks_the_task_contract_fails_that_task() {
    let mut s = Scenario::new(SPEC);
    let (flow, _) = at_build(&mut s);
    let refused = s.parallel_done(
        &flow,
        "build",
        json!([ok("a"), {"task_id": "b", "status": "complete", "result": {"summary": 7}}]),
        json!("clean"),
    );
    assert_eq!(status(&refused), "ensure_failed", "{refused}");
    assert_eq!(ids(&refused), ["b"]);
    let text = refused["violations"].to_string();
    assert!(text.contains("contract 'Change' violation"), "{text}");
}

#[test]
fn a_merge_conflict_bounces_its_task_to_the_retry() {
    let mut s = Scenario::new(SPEC);
    let (flow, _) = at_build(&mut s);
    let bounced = s.parallel_done(
        &flow,
        "build",
        json!([ok("a"), ok("b")]),
        json!({"status": "conflict", "bounced_tasks": [
            {"task_id": "b", "reason": "merge_conflict", "files": ["print.rs"]}
        ]}),
    );
    assert_eq!(status(&bounced), "ensure_failed", "{bounced}");
    assert_eq!(ids(&bounced), ["b"]);
    assert_eq!(bounced["bounced_tasks"][0]["task_id"], "b", "{bounced}");
    let text = bounced["violations"].to_string();
    assert!(
        text.contains("task 'b' merge conflict on print.rs"),
        "{text}"
    );
    let next = s.parallel_done(&flow, "build", json!([ok("b")]), json!("clean"));
    assert_eq!(next["step_id"], "review", "{next}");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_quorum_counts_complete_tasks_and_a_failed_one_routes_to_on_fail_with_the_aggregate() {
    let mut s = Scenario::new(SPEC);
    let modules = json!({"modules": [{"id": "m1", "path": "a.py"}, {"id": "m2", "path": "b.py"}, {"id": "m3", "path": "c.py"}]});
    let envelope = s.start(Some("quorum"), modules.clone());
    assert_eq!(envelope["require"], 2, "{envelope}");
    let flow = s.flow(1);
    let fail = |task: &str| json!({"task_id": task, "status": "failed", "result": null});
    let one = s.parallel_done(
        &flow,
        "port",
        json!([ok("m1"), fail("m2"), fail("m3")]),
        json!("clean"),
    );
    // retries: 1, so the first shortfall routes to by_hand with the failing aggregate.
    assert_eq!(one["step_id"], "by_hand", "{one}");
    assert_eq!(one["routed_from"], "port", "{one}");
    let failed = &one["inputs"]["failed"];
    assert_eq!(failed.as_array().map(Vec::len), Some(2), "{one}");

    s.start(Some("quorum"), modules);
    let second = s.flow(2);
    let two = s.parallel_done(
        &second,
        "port",
        json!([ok("m1"), ok("m2"), fail("m3")]),
        json!("clean"),
    );
    assert_eq!(two["step_id"], "by_hand", "{two}");
    assert!(
        two.get("routed_from").is_none(),
        "met by two of three: {two}"
    );
}

#[test]
fn a_source_with_an_unsafe_task_id_fails_the_attempt_before_anything_runs() {
    let mut s = Scenario::new(SPEC);
    let refused = s.start(
        Some("quorum"),
        json!({"modules": [{"id": "../../x", "path": "a.py"}]}),
    );
    // The attempt fails (retries: 1), so on_fail takes over; no task was handed out.
    assert_eq!(refused["step_id"], "by_hand", "{refused}");
    let text = refused["violations"].to_string();
    assert!(text.contains("not a safe task id"), "{text}");
}

#[test]
fn the_server_runs_the_tasks_one_event_at_a_time() {
    let mut s = Scenario::new(SPEC);
    let (flow, _) = at_build(&mut s);
    let started = s.parallel_start(&flow, "build", Some("0123abcd"));
    assert_eq!(status(&started), "started", "{started}");
    assert_eq!(started["task_count"], 2);
    assert_eq!(started["base"], "0123abcd");
    let again = s.parallel_start(&flow, "build", Some("ffff"));
    assert_eq!(
        again["base"], "0123abcd",
        "start is idempotent per attempt: {again}"
    );
    let consumer = s.parallel_done(&flow, "build", json!([ok("a"), ok("b")]), json!("clean"));
    assert_eq!(error_type(&consumer), "server_dispatched", "{consumer}");

    s.task(
        &flow,
        "build",
        1,
        "a",
        TaskReport::Running {
            run_id: Some("r1".into()),
        },
    );
    let early = s.parallel_advance(&flow, "build", None);
    assert_eq!(error_type(&early), "tasks_not_terminal", "{early}");
    let stale = s.task(&flow, "build", 2, "a", TaskReport::Merged);
    assert_eq!(error_type(&stale), "stale_attempt", "{stale}");
    s.task(
        &flow,
        "build",
        1,
        "a",
        TaskReport::Finished {
            result: json!({"summary": "parser"}),
            diff: Some("diff --git a/parse.rs b/parse.rs\n".into()),
            usage: None,
        },
    );
    let twice = s.task(
        &flow,
        "build",
        1,
        "a",
        TaskReport::Finished {
            result: json!({"summary": "again"}),
            diff: None,
            usage: None,
        },
    );
    assert_eq!(error_type(&twice), "task_already_settled", "{twice}");
    s.task(&flow, "build", 1, "a", TaskReport::Merging);
    s.task(&flow, "build", 1, "a", TaskReport::Merged);
    s.task(
        &flow,
        "build",
        1,
        "b",
        TaskReport::Failed {
            violations: vec!["the agent ran out of time (900 s)".into()],
            bounce: None,
            diff: None,
            usage: None,
        },
    );
    let poll = s.parallel_poll(&flow, "build");
    assert_eq!(poll["can_advance"], true, "{poll}");
    assert_eq!(poll["summary"]["complete"], 1, "{poll}");
    let retry = s.parallel_advance(&flow, "build", None);
    assert_eq!(status(&retry), "ensure_failed", "{retry}");
    assert_eq!(ids(&retry), ["b"], "{retry}");
    assert_eq!(
        retry["dispatch"], "consumer",
        "a new attempt is taken afresh: {retry}"
    );
    s.parallel_start(&flow, "build", Some("0123abcd"));
    s.task(
        &flow,
        "build",
        2,
        "b",
        TaskReport::Finished {
            result: json!({"summary": "printer"}),
            diff: None,
            usage: None,
        },
    );
    let next = s.parallel_advance(&flow, "build", None);
    assert_eq!(next["step_id"], "review", "{next}");
    insta::assert_snapshot!(s.transcript());
}

/// The diff row of task `task` of step `build` in `attempt`, as the store holds it.
fn stored_diff(s: &Scenario, flow: &str, attempt: u32, task: &str) -> Option<String> {
    let id = stratum_runtime::FlowId::parse(flow).unwrap();
    let key = stratum_runtime::store::DiffKey {
        step: "build".to_owned(),
        attempt,
        task: task.to_owned(),
    };
    let mut found = None;
    s.store
        .read(&mut |snapshot| {
            found = snapshot.task_diff(&id, &key)?;
            Ok(())
        })
        .unwrap();
    found
}

#[test]
fn task_diffs_are_rows_of_their_own_capped_per_step() {
    let mut s = Scenario::new(SPEC);
    s.config = std::sync::Arc::new(stratum_runtime::Config {
        max_step_diff_bytes: 100,
        ..stratum_runtime::Config::default()
    });
    let (flow, _) = at_build(&mut s);
    s.parallel_start(&flow, "build", Some("0123abcd"));
    let finished = |summary: &str, diff: String| TaskReport::Finished {
        result: json!({"summary": summary}),
        diff: Some(diff),
        usage: None,
    };
    let a = s.task(&flow, "build", 1, "a", finished("a", "A".repeat(60)));
    assert_eq!(a["tasks"][0]["state"], "complete", "{a}");
    assert_eq!(a["tasks"][0]["diff_bytes"], 60, "{a}");
    assert!(
        a["tasks"][0].get("diff").is_none(),
        "a task event's answer carries no diff text: {a}"
    );
    let b = s.task(&flow, "build", 1, "b", finished("b", "B".repeat(50)));
    assert_eq!(b["tasks"][1]["state"], "failed", "{b}");
    let why = b["tasks"][1]["violations"].to_string();
    assert!(
        why.contains("task 'b': its diff (50 bytes) would take the step's diffs past their limit of 100 bytes (its other tasks hold 60)"),
        "{why}"
    );
    assert_eq!(stored_diff(&s, &flow, 1, "b"), None, "{b}");
    let poll = s.parallel_poll(&flow, "build");
    assert_eq!(poll["tasks"][0]["diff"], "A".repeat(60), "{poll}");
    assert!(poll["tasks"][1].get("diff").is_none(), "{poll}");

    let retry = s.parallel_advance(&flow, "build", None);
    assert_eq!(ids(&retry), ["b"], "{retry}");
    s.parallel_start(&flow, "build", Some("0123abcd"));
    let bounced = TaskReport::Failed {
        violations: vec!["the check failed".into()],
        bounce: None,
        diff: Some("b".repeat(10)),
        usage: None,
    };
    s.task(&flow, "build", 2, "b", bounced);
    assert_eq!(stored_diff(&s, &flow, 2, "b"), Some("b".repeat(10)));
    let again = s.parallel_advance(&flow, "build", None);
    assert_eq!(ids(&again), ["b"], "{again}");
    s.parallel_start(&flow, "build", Some("0123abcd"));
    assert_eq!(
        stored_diff(&s, &flow, 2, "b"),
        None,
        "the row of a task the new attempt runs again is deleted"
    );
    let fits = s.task(&flow, "build", 3, "b", finished("b", "b".repeat(40)));
    assert_eq!(
        fits["tasks"][1]["state"], "complete",
        "up to the limit: {fits}"
    );
    let poll = s.parallel_poll(&flow, "build");
    assert_eq!(poll["tasks"][0]["diff"], "A".repeat(60), "kept: {poll}");
    assert_eq!(poll["tasks"][1]["diff"], "b".repeat(40), "{poll}");
    let next = s.parallel_advance(&flow, "build", None);
    assert_eq!(next["step_id"], "review", "{next}");
}

fn done_all(tasks: &Value, results: &[(&str, Value)]) -> Value {
    let mut reports = Vec::new();
    for task in tasks.as_array().unwrap() {
        let id = task["id"].as_str().unwrap();
        let result = results
            .iter()
            .find(|(wanted, _)| *wanted == id)
            .map(|(_, result)| result.clone())
            .unwrap_or_else(|| panic!("no result for {id}"));
        match result {
            Value::Null => reports.push(json!({"task_id": id, "status": "failed"})),
            result => reports.push(json!({"task_id": id, "status": "complete", "result": result})),
        }
    }
    Value::Array(reports)
}

#[test]
fn a_pipeline_hands_out_each_stage_as_it_becomes_ready_with_when_and_exit_when_decided_by_the_vm() {
    let mut s = Scenario::new(SPEC);
    let first = s.start(
        Some("triage"),
        json!({"issues": ["bug-1", "bug-2", "bug-3"]}),
    );
    assert_eq!(first["pipeline"], true, "{first}");
    assert_eq!(
        ids(&first),
        ["item0.stage0", "item1.stage0", "item2.stage0"]
    );
    assert_eq!(first["tasks"][0]["prompt"], "Reproduce bug-1");
    let flow = s.flow(1);
    let reports = done_all(
        &first["tasks"],
        &[
            ("item0.stage0", json!("repro 1")),
            ("item1.stage0", json!("repro 2")),
            ("item2.stage0", json!("repro 3")),
        ],
    );
    let second = s.parallel_done(&flow, "triage", reports, json!("clean"));
    assert_eq!(status(&second), "parallel_dispatch", "{second}");
    assert_eq!(
        ids(&second),
        ["item0.stage1", "item1.stage1", "item2.stage1"]
    );
    assert_eq!(second["tasks"][0]["prompt"], "Is a fix needed? repro 1");
    let reports = done_all(
        &second["tasks"],
        &[
            ("item0.stage1", json!("a fix is needed")),
            ("item1.stage1", json!("no-fix: works as designed")),
            ("item2.stage1", json!("duplicate of bug-1")),
        ],
    );
    // item1's exit_when ends it; item2's next stage is skipped by its when.
    let third = s.parallel_done(&flow, "triage", reports, json!("clean"));
    assert_eq!(ids(&third), ["item0.stage2"], "{third}");
    assert_eq!(third["tasks"][0]["prompt"], "Fix bug-1: a fix is needed");
    let reports = done_all(
        &third["tasks"],
        &[("item0.stage2", json!({"patched": true}))],
    );
    let done = s.parallel_done(&flow, "triage", reports, json!("clean"));
    assert_eq!(status(&done), "complete", "{done}");
    let output = &s.audit(&flow)["output"];
    let statuses: Vec<&str> = output["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["complete", "complete", "complete"], "{output}");
    assert_eq!(output["items"][0]["result"], json!({"patched": true}));
    assert_eq!(
        output["items"][2]["result"], "duplicate of bug-1",
        "a skipped stage passes on"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_fan_out_region_runs_a_lane_per_element_and_its_join_counts_the_lanes() {
    let mut s = Scenario::new(SPEC);
    let split = s.start(Some("sections"), json!({"docs": ["guide"]}));
    let flow = s.flow(1);
    // Too many elements for `max: 3`: the split fails, the item with it; a retry follows.
    let too_many = s.parallel_done(
        &flow,
        "split",
        done_all(
            &split["tasks"],
            &[("item0.stage0", json!(["a", "b", "c", "d"]))],
        ),
        json!("clean"),
    );
    assert_eq!(status(&too_many), "ensure_failed", "{too_many}");
    let text = too_many["violations"].to_string();
    assert!(
        text.contains("4 elements, more than its max of 3"),
        "{text}"
    );
    let lanes = s.parallel_done(
        &flow,
        "split",
        done_all(
            &too_many["tasks"],
            &[("item0.stage0", json!(["intro", "usage"]))],
        ),
        json!("clean"),
    );
    assert_eq!(
        ids(&lanes),
        ["item0.stage1.lane0", "item0.stage1.lane1"],
        "{lanes}"
    );
    assert_eq!(lanes["tasks"][1]["prompt"], "Summarise usage of guide");
    // One lane fails: the join's `require: any` is met by the other.
    let join = s.parallel_done(
        &flow,
        "split",
        done_all(
            &lanes["tasks"],
            &[
                ("item0.stage1.lane0", json!("the intro")),
                ("item0.stage1.lane1", Value::Null),
            ],
        ),
        json!("clean"),
    );
    assert_eq!(ids(&join), ["item0.stage2"], "{join}");
    assert_eq!(join["tasks"][0]["prompt"], "Join [\"the intro\"]");
    let publish = s.parallel_done(
        &flow,
        "split",
        done_all(&join["tasks"], &[("item0.stage2", json!("joined"))]),
        json!("clean"),
    );
    assert_eq!(publish["tasks"][0]["prompt"], "Publish joined", "{publish}");
    let done = s.parallel_done(
        &flow,
        "split",
        done_all(&publish["tasks"], &[("item0.stage3", json!("published"))]),
        json!("clean"),
    );
    assert_eq!(status(&done), "complete", "{done}");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_reasoning_certificate_is_in_the_prompt_of_any_agent_and_checked_on_the_result() {
    let mut s = Scenario::new(SPEC);
    let files = json!([{"id": "f1", "path": "a.rs"}, {"id": "f2", "path": "b.rs"}]);
    let review = s.start(Some("review"), json!({"diff": "+x", "files": files}));
    let intent = review["intent"].as_str().unwrap();
    assert!(
        intent.starts_with(
            "Review the diff\n\n---\n\nYou MUST structure your response with these sections:"
        ) && intent.contains("## Verdict\nCite [P<n>]\nReference premises by their [P<n>] ID."),
        "a codex step gets it too: {intent}"
    );
    let flow = s.flow(1);
    let inline = s.done(
        &flow,
        "review",
        json!({"verdict": "approve", "artifact": "I looked. ## Premises ## Verdict [P1]"}),
    );
    assert_eq!(status(&inline), "ensure_failed", "{inline}");
    assert_eq!(
        inline["violations"],
        json!([
            "certificate missing section: Premises (a line `## Premises`)",
            "certificate missing section: Verdict (a line `## Verdict`)"
        ])
    );
    let uncited = s.done(
        &flow,
        "review",
        json!({"verdict": "approve", "artifact": "## Premises\n[P1] a.rs:1 adds x\n## Verdict\napprove"}),
    );
    assert_eq!(
        uncited["violations"],
        json!(["certificate violation: conclusion contains no premise citations [P<n>]"])
    );
    let fan = s.done(
        &flow,
        "review",
        json!({"verdict": "approve", "artifact": "## Premises\n[P1] a.rs:1 adds x\n## Verdict\napprove per [P1]"}),
    );
    assert_eq!(status(&fan), "parallel_dispatch", "{fan}");
    let prompt = fan["tasks"][0]["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with("Check a.rs\n\n---\n\nYou MUST structure")
            && prompt.contains("## Change\nWhat changed"),
        "{prompt}"
    );
    let checked = s.parallel_done(
        &flow,
        "per_file",
        json!([
            {"task_id": "f1", "status": "complete", "result": {"artifact": "## Change\nnothing"}},
            {"task_id": "f2", "status": "complete", "result": "plain text"}
        ]),
        json!("clean"),
    );
    assert_eq!(ids(&checked), ["f2"], "{checked}");
    let text = checked["violations"].to_string();
    assert!(
        text.contains("task 'f2' cert: certificate violation: the result is not an object"),
        "{text}"
    );
}

fn verdict(tests: &str, todo: &str) -> Value {
    json!({"met": tests == "met" && todo == "met", "predicates": [
        {"id": "tests", "verdict": tests, "statement": "tests pass", "reason": "log"},
        {"id": "no-todo", "verdict": todo, "statement": "No TODO", "reason": "read"}
    ]})
}

fn judge(s: &mut Scenario, flow: &str, verdict: Value) -> Value {
    s.run(
        &format!("judge_verdict {flow} check {verdict}"),
        stratum_runtime::Command::JudgeVerdict {
            flow_id: flow.to_owned(),
            step_id: "check".to_owned(),
            verdict,
        },
    )
}

#[test]
fn a_judge_verdict_binds_and_an_ambiguous_one_waits_for_a_person() {
    let mut s = Scenario::new(SPEC);
    let dispatched = s.start(Some("judged"), json!({}));
    assert_eq!(dispatched["step_mode"], "judge", "{dispatched}");
    assert_eq!(
        dispatched["predicates"][1]["applied_gate"], 8,
        "{dispatched}"
    );
    let flow = s.flow(1);
    let claimed = s.done(&flow, "check", json!({"met": true}));
    assert_eq!(
        error_type(&claimed),
        "judge_required",
        "a client cannot claim met: {claimed}"
    );
    let unmet = judge(&mut s, &flow, verdict("not_met", "met"));
    assert_eq!(status(&unmet), "ensure_failed", "{unmet}");
    let text = unmet["violations"].to_string();
    assert!(text.contains("judge: predicate 'tests' not met"), "{text}");
    let ambiguous = judge(&mut s, &flow, verdict("met", "ambiguous"));
    assert_eq!(status(&ambiguous), "await_gate", "{ambiguous}");
    assert_eq!(ambiguous["step_mode"], "judge", "{ambiguous}");
    let resumed = s.resume(&flow);
    assert_eq!(
        status(&resumed),
        "await_gate",
        "it waits across calls: {resumed}"
    );
    let approved = s.gate(
        &flow,
        "check",
        "approve",
        "I read the diff: no TODO",
        "human",
    );
    assert_eq!(approved["step_id"], "ship", "{approved}");
    let audit = s.audit(&flow);
    let gate = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "gate")
        .cloned()
        .unwrap_or_default();
    assert_eq!(gate["resolved_by"], "human", "{audit}");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_met_verdict_completes_the_judge_step() {
    let mut s = Scenario::new(SPEC);
    s.start(Some("judged"), json!({}));
    let flow = s.flow(1);
    let next = judge(&mut s, &flow, verdict("met", "met"));
    assert_eq!(next["step_id"], "ship", "{next}");
}

const PREV_SPEC: &str = r#"version: "0.3"
contracts:
  Change:
    summary: {type: string}
flows:
  chain:
    input: {tasks: {type: array}}
    steps:
      - id: build
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Do {description} [{prev}]"
        output_contract: Change
        retries: 2
"#;

fn chain() -> Value {
    json!({"tasks": [
        {"id": "a", "description": "A"},
        {"id": "b", "description": "B", "depends_on": ["a"]},
        {"id": "c", "description": "C", "depends_on": ["b"]},
        {"id": "d", "description": "D"}
    ]})
}

fn prompts(envelope: &Value) -> Vec<String> {
    envelope["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["prompt"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_prev_task_is_handed_out_once_its_dependency_completed_with_its_result_in_the_prompt() {
    let mut s = Scenario::new(PREV_SPEC);
    let first = s.start(Some("chain"), chain());
    let flow = s.flow(1);
    assert_eq!(status(&first), "parallel_dispatch", "{first}");
    assert_eq!(ids(&first), ["a", "d"], "b and c wait for their {{prev}}");
    assert_eq!(
        prompts(&first),
        ["Do A []", "Do D []"],
        "a chain's head reads it empty"
    );

    let second = s.parallel_done(&flow, "build", json!([ok("a"), ok("d")]), json!("clean"));
    assert_eq!(status(&second), "parallel_dispatch", "{second}");
    assert_eq!(
        second["attempt"], 1,
        "the same attempt, its next round: {second}"
    );
    assert_eq!(ids(&second), ["b"]);
    assert_eq!(prompts(&second), [r#"Do B [{"summary":"did a"}]"#]);

    // b fails: c can never be told its {prev}, so it is cancelled, and the attempt fails.
    let failed = s.parallel_done(
        &flow,
        "build",
        json!([{"task_id": "b", "status": "failed"}]),
        json!("clean"),
    );
    assert_eq!(status(&failed), "ensure_failed", "{failed}");
    let text = failed["violations"].to_string();
    assert!(
        text.contains(
            "task 'c' cancelled: its intent template needs {prev}, and its dependency 'b' is failed"
        ),
        "{text}"
    );
    // The retry keeps a and d; b's dependency is kept, so b is handed out at once.
    assert_eq!(failed["attempt"], 2);
    assert_eq!(failed["kept"], json!(["a", "d"]));
    assert_eq!(ids(&failed), ["b"]);
    let prompt = &prompts(&failed)[0];
    assert!(
        prompt.starts_with(r#"Do B [{"summary":"did a"}]"#)
            && prompt.contains("the agent reported task 'b' failed"),
        "{prompt}"
    );

    let third = s.parallel_done(&flow, "build", json!([ok("b")]), json!("clean"));
    assert_eq!(ids(&third), ["c"], "{third}");
    assert_eq!(prompts(&third)[0], r#"Do C [{"summary":"did b"}]"#);
    let done = s.parallel_done(&flow, "build", json!([ok("c")]), json!("clean"));
    assert_eq!(status(&done), "complete", "{done}");
}

#[test]
fn the_server_renders_a_prev_prompt_when_the_dependency_s_result_is_recorded() {
    let mut s = Scenario::new(PREV_SPEC);
    s.start(Some("chain"), chain());
    let flow = s.flow(1);
    let started = s.parallel_start(&flow, "build", None);
    let prompt_of = |report: &Value, id: &str| {
        report["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|task| task["task_id"] == id)
            .map(|task| task["prompt"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(
        prompt_of(&started, "b"),
        "",
        "not rendered before a completes"
    );
    let finished = |summary: &str| TaskReport::Finished {
        result: json!({"summary": summary}),
        diff: None,
        usage: None,
    };
    let recorded = s.task(&flow, "build", 1, "a", finished("parser"));
    assert_eq!(prompt_of(&recorded, "b"), r#"Do B [{"summary":"parser"}]"#);
    assert_eq!(prompt_of(&recorded, "c"), "");
    s.task(&flow, "build", 1, "d", finished("docs"));
    let failed = s.task(
        &flow,
        "build",
        1,
        "b",
        TaskReport::Failed {
            violations: vec!["task 'b': the agent ran out of time (60 s)".into()],
            bounce: None,
            diff: None,
            usage: None,
        },
    );
    let c = failed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|task| task["task_id"] == "c")
        .unwrap()
        .clone();
    assert_eq!(c["state"], "cancelled", "{failed}");
    assert_eq!(failed["can_advance"], true, "{failed}");
}

#[test]
fn a_prev_task_with_several_dependencies_does_not_fit_the_template() {
    let mut s = Scenario::new(PREV_SPEC);
    let refused = s.start(
        Some("chain"),
        json!({"tasks": [
            {"id": "a", "description": "A"},
            {"id": "b", "description": "B"},
            {"id": "c", "description": "C", "depends_on": ["a", "b"]}
        ]}),
    );
    let text = refused.to_string();
    assert!(
        text.contains("template_field_missing: the intent template's {prev} is the result of a task's one dependency, and task 'c' depends on 2"),
        "{refused}"
    );
}
