//! The operator queries, tables, watch and prune over a store, driven by the scenario driver:
//! what a person sees at a terminal (snapshots), and which flows a prune takes, on the memory
//! store and on SQLite alike.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

use stratum_test_support as support;

use std::sync::Arc;

use serde_json::json;
use stratum_mcp::cli::{prune, query, table, watch};
use stratum_runtime::{Config, MemoryStore, Store};
use stratum_store_sqlite::SqliteStore;
use support::{EPOCH_MS, Scenario};

const REVIEWED: &str = include_str!("../../../examples/reviewed-work.stratum.yaml");

const PARENT: &str = r#"
version: "0.2"
flows:
  child:
    input: {x: {type: string}}
    steps:
      - id: inner
        intent: "Do the inner work"
  parent:
    input: {x: {type: string}}
    steps:
      - id: sub
        flow: child
        inputs: {x: "$.input.x"}
      - id: after
        intent: "Finish up"
"#;

fn stores() -> Vec<(&'static str, Arc<dyn Store>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = SqliteStore::open(dir.path().join("stratum.db")).expect("sqlite");
    vec![
        ("memory", Arc::new(MemoryStore::new()), None),
        ("sqlite", Arc::new(sqlite), Some(dir)),
    ]
}

/// Two flows of `reviewed_work`: one at its gate, one finished.
fn two_flows(store: Arc<dyn Store>) -> Scenario {
    let mut scenario = Scenario::with(REVIEWED, store, Config::default());
    scenario.start(Some("reviewed_work"), json!({"text": "a"}));
    let first = scenario.flow(1);
    scenario.done(&first, "work", json!({"result": "r", "quality_score": 0.9}));
    scenario.start(Some("reviewed_work"), json!({"text": "b"}));
    let second = scenario.flow(2);
    scenario.done(
        &second,
        "work",
        json!({"result": "r", "quality_score": 0.9}),
    );
    scenario.gate(&second, "review", "approve", "fine", "human");
    scenario
}

#[test]
fn tables_show_where_each_flow_stands() {
    let scenario = two_flows(Arc::new(MemoryStore::new()));
    let store = scenario.store.as_ref();
    // The scenario's ids are derived from fixed seeds: the same in every run.
    let first = scenario.flow(1);
    let flows = query::flows(store).expect("flows");
    let gates = query::gates(store).expect("gates");
    let state = query::flow(store, &first).expect("read").expect("found");
    insta::assert_snapshot!(format!(
        "{}\n{}\n{}",
        table::flows(&flows),
        table::gates(&gates),
        table::flow(&state)
    ));
}

#[test]
fn queries_agree_on_every_store() {
    for (name, store, _dir) in stores() {
        let scenario = two_flows(store.clone());
        let flows = query::flows(store.as_ref()).expect("flows");
        let statuses: Vec<_> = flows.iter().map(|flow| flow.status).collect();
        assert_eq!(
            statuses,
            [
                query::SummaryStatus::Complete,
                query::SummaryStatus::AwaitingGate
            ],
            "{name}: newest first"
        );
        let gates = query::gates(store.as_ref()).expect("gates");
        assert_eq!(gates.len(), 1, "{name}");
        assert_eq!(
            gates.first().map(|gate| gate.flow_id.clone()),
            Some(scenario.flow(1))
        );
        assert_eq!(
            query::flow(store.as_ref(), "not-an-id").expect("read"),
            None
        );
        assert_eq!(
            query::flow(store.as_ref(), "00000000-0000-4000-8000-000000000000").expect("read"),
            None
        );
    }
}

#[test]
fn prune_takes_whole_finished_trees_and_keeps_running_ones() {
    for (name, store, _dir) in stores() {
        let mut scenario = Scenario::with(PARENT, store.clone(), Config::default());
        // A parent whose child finished but which still runs: kept whole.
        let started = scenario.start(Some("parent"), json!({"x": "1"}));
        let parent = started["parent_flow_id"]
            .as_str()
            .expect("parent")
            .to_owned();
        let child = started["child_flow_id"].as_str().expect("child").to_owned();
        scenario.done(&child, "inner", json!({"ok": true}));
        // A finished parent and its finished child: taken together.
        let started = scenario.start(Some("parent"), json!({"x": "2"}));
        let done_parent = started["parent_flow_id"]
            .as_str()
            .expect("parent")
            .to_owned();
        let done_child = started["child_flow_id"].as_str().expect("child").to_owned();
        let child_end = scenario.done(&done_child, "inner", json!({"ok": true}));
        scenario.done(&done_parent, "sub", child_end);
        let end = scenario.done(&done_parent, "after", json!({"ok": true}));
        assert_eq!(
            end["status"],
            "complete",
            "{name}: {}",
            scenario.transcript()
        );

        let later = scenario.now_ms + 60_000;
        let young = prune::prune(store.as_ref(), later, 3_600_000, None).expect("prune");
        assert!(young.removed_flows.is_empty(), "{name}: too young to prune");
        let report = prune::prune(store.as_ref(), later, 1_000, None).expect("prune");
        let mut removed = report.removed_flows.clone();
        removed.sort();
        let mut expected = vec![done_parent.clone(), done_child.clone()];
        expected.sort();
        assert_eq!(removed, expected, "{name}");
        assert_eq!(
            report.removed_plans, 0,
            "{name}: the running flow still uses the plan"
        );
        let left: Vec<String> = store
            .list_flows()
            .expect("list")
            .iter()
            .map(|header| header.id.to_string())
            .collect();
        assert_eq!(left, [child.clone(), parent.clone()], "{name}");
        assert!(
            query::flow(store.as_ref(), &parent)
                .expect("read")
                .is_some(),
            "{name}: the running parent can still be read"
        );
    }
}

#[test]
fn watch_reports_each_move_once() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut scenario = Scenario::with(REVIEWED, store.clone(), Config::default());
    let mut watcher = watch::Watcher::new(None);
    assert!(
        watcher
            .poll(store.as_ref(), EPOCH_MS)
            .expect("poll")
            .is_empty()
    );
    scenario.start(Some("reviewed_work"), json!({"text": "a"}));
    let flow = scenario.flow(1);
    let mut lines = Vec::new();
    let mut poll = |lines: &mut Vec<String>| {
        for happening in watcher.poll(store.as_ref(), EPOCH_MS).expect("poll") {
            lines.push(happening.to_line());
        }
    };
    poll(&mut lines);
    scenario.done(&flow, "work", json!({"result": "r", "quality_score": 0.1}));
    poll(&mut lines);
    scenario.done(&flow, "work", json!({"result": "r", "quality_score": 0.9}));
    poll(&mut lines);
    poll(&mut lines);
    scenario.gate(&flow, "review", "revise", "again", "human");
    poll(&mut lines);
    scenario.done(&flow, "work", json!({"result": "r", "quality_score": 0.95}));
    scenario.gate(&flow, "review", "approve", "ok", "human");
    poll(&mut lines);
    insta::assert_snapshot!(lines.join("\n"));
}

/// A flow whose gate follows a parallel step the server ran: its tasks' diffs are merged
/// before the gate asks.
const SHIPPED: &str = r#"
version: "0.3"
contracts:
  Change:
    summary: {type: string}
functions:
  sign_off:
    mode: gate
    timeout: 3600
flows:
  ship:
    input: {tasks: {type: array}, note: {type: string}}
    max_rounds: 3
    steps:
      - id: build
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Do {description}"
        output_contract: Change
      - id: review
        function: sign_off
        on_approve: ~
        on_revise: build
        on_kill: ~
"#;

/// The server's events of one task: its result and diff, then its merge.
fn merged(scenario: &mut Scenario, flow: &str, task: &str, diff: &str) {
    use stratum_runtime::TaskReport;
    let finished = scenario.task(
        flow,
        "build",
        1,
        task,
        TaskReport::Finished {
            result: json!({"summary": format!("did {task}")}),
            diff: Some(diff.to_owned()),
            usage: None,
        },
    );
    assert!(finished.get("error_type").is_none(), "{finished}");
    scenario.task(flow, "build", 1, task, TaskReport::Merging);
    scenario.task(flow, "build", 1, task, TaskReport::Merged);
}

/// Runs `build` on the server side: both tasks merged with `diffs`, then on to the gate.
fn build_then_gate(scenario: &mut Scenario, flow: &str, diffs: [&str; 2]) {
    let started = scenario.parallel_start(flow, "build", Some("0123abcd"));
    assert_eq!(support::status(&started), "started", "{started}");
    merged(scenario, flow, "a", diffs[0]);
    merged(scenario, flow, "b", diffs[1]);
    let gate = scenario.parallel_advance(flow, "build", None);
    assert_eq!(support::status(&gate), "await_gate", "{gate}");
}

#[test]
fn a_gates_context_shows_the_work_the_decisions_before_and_the_merged_diff() {
    let mut contexts = Vec::new();
    for (name, store, _dir) in stores() {
        let mut scenario = Scenario::with(SHIPPED, store.clone(), Config::default());
        scenario.start(
            Some("ship"),
            json!({"tasks": [{"id": "a", "description": "the parser"},
                             {"id": "b", "description": "the <printer>"}],
                   "note": "ship \u{1b}[31mit\u{7}"}),
        );
        let flow = scenario.flow(1);
        build_then_gate(
            &mut scenario,
            &flow,
            [
                "diff --git a/parse.rs b/parse.rs\n--- a/parse.rs\n+++ b/parse.rs\n@@ -1 +1,2 @@\n-old\n+new\n+more\n",
                "diff --git a/print.rs b/print.rs\nnew file mode 100644\n--- /dev/null\n+++ b/print.rs\n@@ -0,0 +1 @@\n+<script>alert(1)</script>\n",
            ],
        );
        scenario.gate(
            &flow,
            "review",
            "revise",
            "split the <printer> in two",
            "human",
        );
        build_then_gate(
            &mut scenario,
            &flow,
            [
                "diff --git a/parse.rs b/parse.rs\n--- a/parse.rs\n+++ b/parse.rs\n@@ -1 +1 @@\n-old\n+newer\n",
                "",
            ],
        );
        let id = stratum_runtime::FlowId::parse(&flow).unwrap();
        let context = stratum_mcp::gate_context::read(store.as_ref(), &id, EPOCH_MS + 60_000)
            .expect("read")
            .expect("at the gate");
        assert_eq!(context.round, 1, "{name}");
        assert_eq!(context.outputs.len(), 1, "{name}: {context:#?}");
        assert_eq!(context.decisions.len(), 1, "{name}");
        assert_eq!(
            context.decisions[0].rationale.text,
            "split the <printer> in two"
        );
        let diff = &context.diffs[0];
        // The second round's: `b` changed nothing this time.
        assert_eq!(diff.tasks, ["a"], "{name}: {diff:#?}");
        assert_eq!((diff.added, diff.removed), (1, 1), "{name}");
        // And `query gates` carries the same context.
        let gates = query::gates(store.as_ref()).expect("gates");
        assert_eq!(gates.len(), 1, "{name}");
        assert_eq!(gates[0].context.diffs, context.diffs, "{name}");
        contexts.push((name, context));
    }
    let (_, memory) = &contexts[0];
    for (name, context) in &contexts[1..] {
        assert_eq!(context, memory, "{name} and memory agree");
    }
    insta::assert_snapshot!(table::gate_contexts(&[query::PendingGate::from(
        memory.clone()
    )]));
}

#[test]
fn a_gates_context_is_bounded_whatever_the_flow_holds() {
    use stratum_mcp::gate_context::{self, MAX_DIFF_READ_BYTES, MAX_VALUE_CHARS};
    let mut scenario = Scenario::new(SHIPPED);
    let huge = "x".repeat(1_000_000);
    scenario.start(
        Some("ship"),
        json!({"tasks": [{"id": "a", "description": "a"}, {"id": "b", "description": "b"}],
               "note": huge}),
    );
    let flow = scenario.flow(1);
    let too_large = format!(
        "diff --git a/big b/big\n@@ -0,0 +1 @@\n+{}\n",
        "y".repeat(usize::try_from(MAX_DIFF_READ_BYTES).unwrap())
    );
    build_then_gate(
        &mut scenario,
        &flow,
        [&too_large, "diff --git a/s b/s\n@@ -0,0 +1 @@\n+s\n"],
    );
    let id = stratum_runtime::FlowId::parse(&flow).unwrap();
    let context = gate_context::read(scenario.store.as_ref(), &id, EPOCH_MS)
        .unwrap()
        .unwrap();
    assert_eq!(context.input.text.chars().count(), MAX_VALUE_CHARS);
    assert!(
        context.input.more_chars > 990_000,
        "{}",
        context.input.more_chars
    );
    let diff = &context.diffs[0];
    assert_eq!(diff.tasks, ["b"], "{diff:#?}");
    assert_eq!(diff.not_shown.len(), 1, "{diff:#?}");
    assert_eq!(diff.not_shown[0].task_id, "a");
    assert_eq!(diff.not_shown[0].reason, "too_large");
    let text = gate_context::to_text(&context, gate_context::TextBounds::FORM);
    assert!(text.len() < 10_000, "{} bytes", text.len());
    assert!(text.contains("too large to show here"), "{text}");
}
