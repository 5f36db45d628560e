//! Iteration loops on steps with `max_iterations`: start, report and abort; exit criteria,
//! scores, accumulators, stagnation; how a loop ends with `step_done`; and the refusals.

use stratum_test_support as support;

use serde_json::{Value, json};
use support::Scenario;

/// A loop with an exit criterion and no score.
const PLAIN: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: polish
        intent: "Polish the draft until it is done"
        max_iterations: 4
        exit_criterion: "result.done == True"
      - id: publish
        intent: "Publish the draft"
        inputs: {draft: "$.steps.polish.output"}
"#;

/// A scored loop whose criterion reads the best score and the scores before this one.
const SCORED: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: refine
        intent: "Improve the draft"
        max_iterations: 4
        score_expr: "result.quality"
        exit_criterion: "best_score >= 0.9 and len(prior_scores) >= 2"
      - id: publish
        intent: "Publish the draft"
        inputs: {draft: "$.steps.refine.output"}
"#;

/// A scored loop that ends when it has run three times.
const SCORED_BY_COUNT: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: refine
        intent: "Improve the draft"
        max_iterations: 5
        score_expr: "result.quality"
        exit_criterion: "iteration >= 3"
      - id: publish
        intent: "Publish the draft"
        inputs: {draft: "$.steps.refine.output"}
"#;

/// A scored loop with no criterion: it ends by stagnation or at its maximum.
const SCORED_NO_CRITERION: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: refine
        intent: "Improve the draft"
        max_iterations: 10
        score_expr: "result.quality"
      - id: publish
        intent: "Publish the draft"
        inputs: {draft: "$.steps.refine.output"}
"#;

/// Loop-until-dry: findings deduplicated by id, two dry rounds end it.
const HUNT: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: hunt
        intent: "Find issues; keep hunting until two dry rounds"
        max_iterations: 6
        accumulate: "result.findings"
        accumulate_key: "item.id"
        exit_criterion: "dry_streak >= 2"
      - id: report
        intent: "Write up the findings"
        inputs: {found: "$.steps.hunt.output"}
"#;

/// Two iterated steps in a row.
const TWO_LOOPS: &str = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: draft
        intent: "Draft it"
        max_iterations: 3
        exit_criterion: "result.done == True"
      - id: tighten
        intent: "Tighten it"
        max_iterations: 3
        exit_criterion: "result.done == True"
"#;

fn field<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}

fn started(spec: &str) -> (Scenario, String) {
    let mut s = Scenario::new(spec);
    s.start(None, json!({}));
    let flow = s.flow(1);
    (s, flow)
}

#[test]
fn iteration_start_reports_max_iterations_and_exit_criterion() {
    let (mut s, flow) = started(PLAIN);
    let response = s.iteration_start(&flow, "polish");
    assert_eq!(field(&response, "status"), "iteration_started");
    assert_eq!(field(&response, "step_id"), "polish");
    assert_eq!(field(&response, "max_iterations"), 4);
    assert_eq!(field(&response, "exit_criterion"), "result.done == True");
    assert_eq!(field(&response, "iteration"), 0);
    assert_eq!(field(&response, "flow_id"), flow.as_str());
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn plain_loop_continues_then_exits_on_its_criterion() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    let first = s.iteration_report(&flow, "polish", json!({"text": "rough", "done": false}));
    assert_eq!(field(&first, "status"), "iteration_continue");
    assert_eq!(field(&first, "iteration"), 1);
    assert_eq!(field(&first, "max_iterations"), 4);
    assert_eq!(field(&first, "exit_criterion_met"), false);
    assert_eq!(field(&first, "outcome"), "continue");
    assert!(
        first.get("final_result").is_none(),
        "a continue has no final result"
    );
    let second = s.iteration_report(&flow, "polish", json!({"text": "smooth", "done": true}));
    assert_eq!(field(&second, "status"), "iteration_exit");
    assert_eq!(field(&second, "iteration"), 2);
    assert_eq!(field(&second, "exit_criterion_met"), true);
    assert_eq!(field(&second, "outcome"), "exit_success");
    assert_eq!(
        field(&second, "final_result"),
        &json!({"text": "smooth", "done": true})
    );
    for absent in [
        "best_score",
        "best_iteration",
        "score",
        "accumulated",
        "accumulated_count",
        "new_count",
        "dry_streak",
    ] {
        assert!(
            second.get(absent).is_none(),
            "a plain loop's exit has no `{absent}`"
        );
    }
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn bug5_plain_iterated_step_output_has_no_accumulated_keys() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    s.iteration_report(&flow, "polish", json!({"text": "smooth", "done": true}));
    let next = s.done(&flow, "polish", json!({"text": "smooth", "done": true}));
    assert_eq!(field(&next, "step_id"), "publish");
    assert_eq!(
        field(field(&next, "inputs"), "draft"),
        &json!({"text": "smooth", "done": true}),
        "the output is the result as submitted, without `accumulated` keys"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn exit_criterion_sees_the_iteration_count() {
    let (mut s, flow) = started(SCORED_BY_COUNT);
    s.iteration_start(&flow, "refine");
    let outcomes: Vec<Value> = [0.2, 0.3, 0.25]
        .into_iter()
        .map(|quality| {
            let response = s.iteration_report(&flow, "refine", json!({"quality": quality}));
            field(&response, "outcome").clone()
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![json!("continue"), json!("continue"), json!("exit_success")]
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn exit_criterion_sees_best_score_and_prior_scores() {
    let (mut s, flow) = started(SCORED);
    s.iteration_start(&flow, "refine");
    // best_score 0.95, but no prior scores yet.
    let first = s.iteration_report(&flow, "refine", json!({"quality": 0.95, "text": "v1"}));
    assert_eq!(field(&first, "outcome"), "continue");
    assert_eq!(field(&first, "score"), 0.95);
    // One prior score.
    let second = s.iteration_report(&flow, "refine", json!({"quality": 0.5, "text": "v2"}));
    assert_eq!(field(&second, "outcome"), "continue");
    // Two prior scores, and the best is still 0.95: the criterion holds.
    let third = s.iteration_report(&flow, "refine", json!({"quality": 0.4, "text": "v3"}));
    assert_eq!(field(&third, "status"), "iteration_exit");
    assert_eq!(field(&third, "outcome"), "exit_success");
    assert_eq!(field(&third, "exit_criterion_met"), true);
    assert_eq!(field(&third, "score"), 0.4);
    assert_eq!(field(&third, "best_score"), 0.95);
    assert_eq!(field(&third, "best_iteration"), 1);
    assert_eq!(
        field(&third, "final_result"),
        &json!({"quality": 0.95, "text": "v1"}),
        "a scored loop's final result is its best one"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn step_done_after_a_scored_loop_keeps_the_best_result() {
    let (mut s, flow) = started(SCORED);
    s.iteration_start(&flow, "refine");
    s.iteration_report(&flow, "refine", json!({"quality": 0.8, "text": "v1"}));
    s.iteration_report(&flow, "refine", json!({"quality": 0.6, "text": "v2"}));
    s.iteration_report(&flow, "refine", json!({"quality": 0.7, "text": "v3"}));
    let last = s.iteration_report(&flow, "refine", json!({"quality": 0.5, "text": "v4"}));
    assert_eq!(field(&last, "outcome"), "exit_max");
    assert_eq!(field(&last, "best_score"), 0.8);
    assert_eq!(field(&last, "best_iteration"), 1);
    assert_eq!(
        field(&last, "final_result"),
        &json!({"quality": 0.8, "text": "v1"})
    );
    s.note("the agent submits its last draft; the best one becomes the output");
    let next = s.done(&flow, "refine", json!({"quality": 0.5, "text": "v4"}));
    assert_eq!(field(&next, "step_id"), "publish");
    assert_eq!(
        field(field(&next, "inputs"), "draft"),
        &json!({"quality": 0.8, "text": "v1"}),
        "the best result, not the submitted one, and no `accumulated` keys (bug 5)"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn max_iterations_reached_exits_max() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    for (n, text) in ["a", "b", "c"].into_iter().enumerate() {
        let response = s.iteration_report(&flow, "polish", json!({"text": text, "done": false}));
        assert_eq!(field(&response, "outcome"), "continue", "report {}", n + 1);
    }
    let last = s.iteration_report(&flow, "polish", json!({"text": "d", "done": false}));
    assert_eq!(field(&last, "status"), "iteration_exit");
    assert_eq!(field(&last, "iteration"), 4);
    assert_eq!(field(&last, "exit_criterion_met"), false);
    assert_eq!(field(&last, "outcome"), "exit_max");
    assert_eq!(
        field(&last, "final_result"),
        &json!({"text": "d", "done": false})
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn three_identical_results_stagnate_without_a_score() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    let same = json!({"text": "stuck", "done": false});
    let first = s.iteration_report(&flow, "polish", same.clone());
    let second = s.iteration_report(&flow, "polish", same.clone());
    assert_eq!(field(&first, "outcome"), "continue");
    assert_eq!(field(&second, "outcome"), "continue");
    let third = s.iteration_report(&flow, "polish", same.clone());
    assert_eq!(field(&third, "status"), "iteration_exit");
    assert_eq!(field(&third, "iteration"), 3);
    assert_eq!(field(&third, "exit_criterion_met"), false);
    assert_eq!(field(&third, "outcome"), "exit_stagnation");
    assert_eq!(field(&third, "final_result"), &same);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn identical_results_apart_do_not_stagnate() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    let same = json!({"text": "stuck", "done": false});
    s.iteration_report(&flow, "polish", same.clone());
    s.iteration_report(&flow, "polish", same.clone());
    s.iteration_report(&flow, "polish", json!({"text": "moved", "done": false}));
    let fourth = s.iteration_report(&flow, "polish", same);
    assert_eq!(
        field(&fourth, "outcome"),
        "exit_max",
        "the last three results differ"
    );
}

#[test]
fn scored_loop_without_criterion_stagnates_after_three_reports_without_improvement() {
    let (mut s, flow) = started(SCORED_NO_CRITERION);
    s.iteration_start(&flow, "refine");
    let outcomes: Vec<Value> = [0.5, 0.4, 0.5, 0.3]
        .into_iter()
        .map(|quality| {
            let response = s.iteration_report(&flow, "refine", json!({"quality": quality}));
            field(&response, "outcome").clone()
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            json!("continue"),
            json!("continue"),
            json!("continue"),
            json!("exit_stagnation")
        ],
        "an equal score is no improvement"
    );
    let late = s.iteration_report(&flow, "refine", json!({"quality": 0.9}));
    assert_eq!(field(&late, "message"), "No active iteration loop");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn score_error_is_reported_and_counts_as_no_improvement() {
    let (mut s, flow) = started(SCORED_NO_CRITERION);
    s.iteration_start(&flow, "refine");
    s.iteration_report(&flow, "refine", json!({"quality": 0.5}));
    let broken = s.iteration_report(&flow, "refine", json!({"grade": "B"}));
    assert_eq!(field(&broken, "outcome"), "continue");
    assert!(
        broken.get("score_error").is_some_and(Value::is_string),
        "{broken}"
    );
    assert_eq!(broken.get("score"), Some(&Value::Null));
    s.iteration_report(&flow, "refine", json!({"quality": "high"}));
    let last = s.iteration_report(&flow, "refine", json!({"quality": 0.4}));
    assert_eq!(field(&last, "outcome"), "exit_stagnation");
    assert_eq!(field(&last, "best_score"), 0.5);
    assert_eq!(field(&last, "final_result"), &json!({"quality": 0.5}));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn scored_loop_without_criterion_keeps_going_while_it_improves() {
    let (mut s, flow) = started(SCORED_NO_CRITERION);
    s.iteration_start(&flow, "refine");
    for quality in [0.1, 0.0, 0.0, 0.2, 0.1, 0.1, 0.3] {
        let response = s.iteration_report(&flow, "refine", json!({"quality": quality}));
        assert_eq!(field(&response, "outcome"), "continue", "quality {quality}");
    }
}

#[test]
fn accumulate_dedups_by_key_and_exits_when_dry() {
    let (mut s, flow) = started(HUNT);
    let start = s.iteration_start(&flow, "hunt");
    assert_eq!(field(&start, "exit_criterion"), "dry_streak >= 2");
    let first = s.iteration_report(
        &flow,
        "hunt",
        json!({"findings": [{"id": 1, "what": "leak"}, {"id": 2, "what": "race"}]}),
    );
    assert_eq!(field(&first, "new_count"), 2);
    assert_eq!(field(&first, "dry_streak"), 0);
    assert_eq!(field(&first, "outcome"), "continue");
    assert!(
        first.get("accumulated").is_none(),
        "the set is reported on exit"
    );
    let second = s.iteration_report(
        &flow,
        "hunt",
        json!({"findings": [{"id": 2, "what": "race, again"}, {"id": 3, "what": "typo"}]}),
    );
    assert_eq!(field(&second, "new_count"), 1, "id 2 was found before");
    assert_eq!(field(&second, "dry_streak"), 0);
    let third = s.iteration_report(
        &flow,
        "hunt",
        json!({"findings": [{"id": 3, "what": "typo"}]}),
    );
    assert_eq!(field(&third, "new_count"), 0);
    assert_eq!(field(&third, "dry_streak"), 1);
    assert_eq!(field(&third, "outcome"), "continue");
    let fourth = s.iteration_report(&flow, "hunt", json!({"findings": []}));
    assert_eq!(field(&fourth, "status"), "iteration_exit");
    assert_eq!(field(&fourth, "outcome"), "exit_success");
    assert_eq!(field(&fourth, "exit_criterion_met"), true);
    assert_eq!(field(&fourth, "new_count"), 0);
    assert_eq!(field(&fourth, "dry_streak"), 2);
    let found =
        json!([{"id": 1, "what": "leak"}, {"id": 2, "what": "race"}, {"id": 3, "what": "typo"}]);
    assert_eq!(
        field(&fourth, "accumulated"),
        &found,
        "first sighting of each id wins"
    );
    assert_eq!(field(&fourth, "accumulated_count"), 3);
    assert_eq!(field(&fourth, "final_result"), &json!({"findings": []}));
    assert!(
        fourth.get("best_score").is_none(),
        "an unscored loop has no best score"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn accumulating_step_output_gets_the_accumulated_set() {
    let (mut s, flow) = started(HUNT);
    s.iteration_start(&flow, "hunt");
    s.iteration_report(&flow, "hunt", json!({"findings": [{"id": 1}, {"id": 2}]}));
    s.iteration_report(&flow, "hunt", json!({"findings": [{"id": 2}]}));
    s.iteration_report(&flow, "hunt", json!({"findings": []}));
    let next = s.done(
        &flow,
        "hunt",
        json!({"findings": [], "summary": "two issues"}),
    );
    assert_eq!(field(&next, "step_id"), "report");
    assert_eq!(
        field(field(&next, "inputs"), "found"),
        &json!({
            "findings": [],
            "summary": "two issues",
            "accumulated": [{"id": 1}, {"id": 2}],
            "accumulated_count": 2
        })
    );
    let done = s.done(&flow, "report", json!({"written": true}));
    assert_eq!(field(&done, "status"), "complete");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn broken_extractor_reports_accumulate_error_and_freezes_dry_streak() {
    let (mut s, flow) = started(HUNT);
    s.iteration_start(&flow, "hunt");
    s.iteration_report(&flow, "hunt", json!({"findings": [{"id": 1}]}));
    let dry = s.iteration_report(&flow, "hunt", json!({"findings": []}));
    assert_eq!(field(&dry, "dry_streak"), 1);
    let missing = s.iteration_report(&flow, "hunt", json!({"issues": []}));
    assert_eq!(field(&missing, "outcome"), "continue");
    assert!(
        missing
            .get("accumulate_error")
            .is_some_and(Value::is_string),
        "{missing}"
    );
    assert_eq!(field(&missing, "new_count"), &Value::Null);
    assert_eq!(
        field(&missing, "dry_streak"),
        1,
        "a broken extractor cannot fake dryness"
    );
    let not_a_list = s.iteration_report(&flow, "hunt", json!({"findings": "none"}));
    assert!(
        not_a_list
            .get("accumulate_error")
            .is_some_and(Value::is_string),
        "{not_a_list}"
    );
    assert_eq!(field(&not_a_list, "dry_streak"), 1);
    assert_eq!(field(&not_a_list, "outcome"), "continue");
    let bad_key = s.iteration_report(&flow, "hunt", json!({"findings": [{"name": "no id"}]}));
    assert_eq!(field(&bad_key, "dry_streak"), 1, "{bad_key}");
    let exit = s.iteration_report(&flow, "hunt", json!({"findings": []}));
    assert_eq!(field(&exit, "dry_streak"), 2);
    assert_eq!(field(&exit, "outcome"), "exit_success");
    assert_eq!(field(&exit, "accumulated"), &json!([{"id": 1}]));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn accumulate_loops_never_stagnate() {
    let spec = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: hunt
        intent: "Collect three distinct findings"
        max_iterations: 5
        accumulate: "result.findings"
        exit_criterion: "accumulated_count >= 3"
"#;
    let (mut s, flow) = started(spec);
    s.iteration_start(&flow, "hunt");
    let same = json!({"findings": [{"id": 1}]});
    for n in 1..=3 {
        let response = s.iteration_report(&flow, "hunt", same.clone());
        assert_eq!(
            field(&response, "outcome"),
            "continue",
            "identical report {n}"
        );
    }
    let fourth = s.iteration_report(&flow, "hunt", json!({"findings": [{"id": 2}, {"id": 3}]}));
    assert_eq!(field(&fourth, "outcome"), "exit_success");
    assert_eq!(field(&fourth, "accumulated_count"), 3);
    assert_eq!(
        field(&fourth, "accumulated"),
        &json!([{"id": 1}, {"id": 2}, {"id": 3}]),
        "dedup on the whole item"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn exit_criterion_error_is_reported_and_the_loop_continues() {
    let spec = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: sample
        intent: "Run the sample"
        max_iterations: 3
        exit_criterion: "result.passed / result.total > 0.5"
"#;
    let (mut s, flow) = started(spec);
    s.iteration_start(&flow, "sample");
    let broken = s.iteration_report(&flow, "sample", json!({"passed": 0, "total": 0}));
    assert_eq!(field(&broken, "status"), "iteration_continue");
    assert_eq!(field(&broken, "outcome"), "continue");
    assert_eq!(field(&broken, "exit_criterion_met"), false);
    assert!(
        broken
            .get("exit_criterion_error")
            .is_some_and(Value::is_string),
        "{broken}"
    );
    let fine = s.iteration_report(&flow, "sample", json!({"passed": 3, "total": 4}));
    assert_eq!(field(&fine, "outcome"), "exit_success");
    assert!(fine.get("exit_criterion_error").is_none());
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn bug6_step_done_during_an_active_loop_closes_it() {
    let (mut s, flow) = started(TWO_LOOPS);
    s.iteration_start(&flow, "draft");
    s.iteration_report(&flow, "draft", json!({"text": "v1", "done": false}));
    s.note("the agent finishes the step without ending the loop");
    let next = s.done(&flow, "draft", json!({"text": "v2", "done": true}));
    assert_eq!(field(&next, "step_id"), "tighten");
    let late = s.iteration_report(&flow, "draft", json!({"text": "v3", "done": true}));
    assert_eq!(field(&late, "status"), "error");
    assert_eq!(field(&late, "message"), "No active iteration loop");
    let start = s.iteration_start(&flow, "tighten");
    assert_eq!(
        field(&start, "status"),
        "iteration_started",
        "the next step starts its own loop"
    );
    let other = s.iteration_report(&flow, "draft", json!({"text": "v3", "done": true}));
    assert_eq!(field(&other, "status"), "error");
    assert_eq!(
        field(&other, "message"),
        "Active iteration is on step 'tighten', got report for 'draft'"
    );
    let own = s.iteration_report(&flow, "tighten", json!({"text": "tight", "done": true}));
    assert_eq!(field(&own, "outcome"), "exit_success");
    let audit = s.audit(&flow);
    let draft_log = field(field(&audit, "iterations"), "draft");
    assert_eq!(
        draft_log.as_array().map(Vec::len),
        Some(2),
        "one report and the close; the refused reports are not logged"
    );
    assert_eq!(
        field(draft_log.get(1).unwrap_or(&Value::Null), "outcome"),
        "exit_step_done"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_start_on_a_step_without_max_iterations_is_refused() {
    let spec = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: draft
        intent: "Draft it"
      - id: tighten
        intent: "Tighten it"
        max_iterations: 3
"#;
    let (mut s, flow) = started(spec);
    let response = s.iteration_start(&flow, "draft");
    assert_eq!(field(&response, "status"), "error");
    assert_eq!(field(&response, "error_type"), "execution_error");
    assert_eq!(
        field(&response, "message"),
        "Step 'draft' does not have max_iterations defined"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_start_on_a_gate_is_refused() {
    let spec = r#"
version: "0.2"
functions:
  review_gate:
    mode: gate
flows:
  main:
    input: {}
    steps:
      - id: work
        intent: "Do the work"
      - id: review
        function: review_gate
        on_approve: ~
        on_revise: work
        on_kill: ~
"#;
    let (mut s, flow) = started(spec);
    let gate = s.done(&flow, "work", json!({"ok": true}));
    assert_eq!(field(&gate, "status"), "await_gate");
    let response = s.iteration_start(&flow, "review");
    assert_eq!(field(&response, "status"), "error");
    assert_eq!(field(&response, "error_type"), "execution_error");
    assert_eq!(
        field(&response, "message"),
        "Step 'review' is a gate step; gates cannot iterate"
    );
    let report = s.iteration_report(&flow, "review", json!({}));
    assert_eq!(field(&report, "message"), "No active iteration loop");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_start_on_another_step_is_wrong_step() {
    let (mut s, flow) = started(TWO_LOOPS);
    let response = s.iteration_start(&flow, "tighten");
    assert_eq!(field(&response, "status"), "error");
    assert_eq!(field(&response, "error_type"), "wrong_step");
    assert_eq!(
        field(&response, "message"),
        "Expected step 'draft', got 'tighten'"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_start_twice_is_refused_while_the_loop_runs() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    s.iteration_report(&flow, "polish", json!({"text": "a", "done": false}));
    let again = s.iteration_start(&flow, "polish");
    assert_eq!(field(&again, "error_type"), "execution_error");
    assert_eq!(
        field(&again, "message"),
        "Iteration loop already active on step 'polish'"
    );
    let next = s.iteration_report(&flow, "polish", json!({"text": "b", "done": false}));
    assert_eq!(
        field(&next, "iteration"),
        2,
        "the refused start did not reset the loop"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_start_with_a_pending_outcome_asks_for_step_done() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    s.iteration_report(&flow, "polish", json!({"text": "a", "done": true}));
    let again = s.iteration_start(&flow, "polish");
    assert_eq!(field(&again, "error_type"), "execution_error");
    assert_eq!(
        field(&again, "message"),
        "Step 'polish' already has a pending iteration outcome ('exit_success') — call stratum_step_done first"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_report_without_a_loop_is_refused() {
    let (mut s, flow) = started(PLAIN);
    let response = s.iteration_report(&flow, "polish", json!({"text": "a", "done": true}));
    assert_eq!(field(&response, "status"), "error");
    assert_eq!(field(&response, "error_type"), "execution_error");
    assert_eq!(field(&response, "message"), "No active iteration loop");
    let abort = s.iteration_abort(&flow, "polish", "nothing to abort");
    assert_eq!(field(&abort, "message"), "No active iteration loop");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_report_for_another_step_is_refused() {
    let (mut s, flow) = started(TWO_LOOPS);
    s.iteration_start(&flow, "draft");
    let response = s.iteration_report(&flow, "tighten", json!({"done": true}));
    assert_eq!(field(&response, "status"), "error");
    assert_eq!(field(&response, "error_type"), "execution_error");
    assert_eq!(
        field(&response, "message"),
        "Active iteration is on step 'draft', got report for 'tighten'"
    );
    let own = s.iteration_report(&flow, "draft", json!({"done": false}));
    assert_eq!(
        field(&own, "iteration"),
        1,
        "the refused report was not counted"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_abort_of_a_scored_loop_reports_the_best_result() {
    let (mut s, flow) = started(SCORED);
    s.iteration_start(&flow, "refine");
    s.iteration_report(&flow, "refine", json!({"quality": 0.6, "text": "v1"}));
    s.iteration_report(&flow, "refine", json!({"quality": 0.7, "text": "v2"}));
    let aborted = s.iteration_abort(&flow, "refine", "good enough for now");
    assert_eq!(field(&aborted, "status"), "iteration_aborted");
    assert_eq!(field(&aborted, "step_id"), "refine");
    assert_eq!(field(&aborted, "iteration"), 2);
    assert_eq!(field(&aborted, "reason"), "good enough for now");
    assert_eq!(
        field(&aborted, "best_result"),
        &json!({"quality": 0.7, "text": "v2"})
    );
    assert_eq!(field(&aborted, "best_score"), 0.7);
    let again = s.iteration_start(&flow, "refine");
    assert_eq!(
        field(&again, "message"),
        "Step 'refine' already has a pending iteration outcome ('exit_abort') — call stratum_step_done first"
    );
    let next = s.done(&flow, "refine", json!({"quality": 0.1, "text": "scrap"}));
    assert_eq!(
        field(field(&next, "inputs"), "draft"),
        &json!({"quality": 0.7, "text": "v2"})
    );
    let audit = s.audit(&flow);
    let log = field(field(&audit, "iterations"), "refine");
    assert_eq!(
        log.as_array().map(Vec::len),
        Some(3),
        "two reports and the abort"
    );
    assert_eq!(
        log.pointer("/2/exit_criterion_met"),
        Some(&json!(false)),
        "an aborted loop did not meet its criterion, as the reference records"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_abort_of_a_scored_loop_before_any_score_has_null_best() {
    let (mut s, flow) = started(SCORED);
    s.iteration_start(&flow, "refine");
    let aborted = s.iteration_abort(&flow, "refine", "wrong approach");
    assert_eq!(field(&aborted, "iteration"), 0);
    assert_eq!(aborted.get("best_result"), Some(&Value::Null));
    assert_eq!(aborted.get("best_score"), Some(&Value::Null));
}

#[test]
fn iteration_abort_of_an_unscored_loop_has_no_best() {
    let (mut s, flow) = started(PLAIN);
    s.iteration_start(&flow, "polish");
    s.iteration_report(&flow, "polish", json!({"text": "a", "done": false}));
    let aborted = s.iteration_abort(&flow, "polish", "the brief changed");
    assert_eq!(field(&aborted, "status"), "iteration_aborted");
    assert_eq!(field(&aborted, "iteration"), 1);
    assert!(aborted.get("best_result").is_none());
    assert!(aborted.get("best_score").is_none());
    let next = s.done(&flow, "polish", json!({"text": "b", "done": true}));
    assert_eq!(
        field(field(&next, "inputs"), "draft"),
        &json!({"text": "b", "done": true})
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_failed_result_clears_the_loop_so_a_new_one_can_start() {
    let spec = r#"
version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: refine
        intent: "Improve the draft"
        retries: 2
        ensure: ["result.quality >= 0.5"]
        max_iterations: 3
        score_expr: "result.quality"
        exit_criterion: "best_score >= 0.9"
"#;
    let (mut s, flow) = started(spec);
    s.iteration_start(&flow, "refine");
    s.iteration_report(&flow, "refine", json!({"quality": 0.3}));
    let abort = s.iteration_abort(&flow, "refine", "stuck");
    assert_eq!(field(&abort, "best_score"), 0.3);
    let failed = s.done(&flow, "refine", json!({"quality": 0.2}));
    assert_eq!(field(&failed, "status"), "ensure_failed");
    assert_eq!(
        field(&failed, "violations"),
        &json!(["ensure 'result.quality >= 0.5' failed: `result.quality` was 0.3"]),
        "the best result was checked"
    );
    let restart = s.iteration_start(&flow, "refine");
    assert_eq!(field(&restart, "status"), "iteration_started");
    let fresh = s.iteration_report(&flow, "refine", json!({"quality": 0.95}));
    assert_eq!(field(&fresh, "iteration"), 1);
    assert_eq!(field(&fresh, "best_score"), 0.95);
    let done = s.done(&flow, "refine", json!({"quality": 0.95}));
    assert_eq!(field(&done, "status"), "complete");
    assert_eq!(field(&done, "output"), &json!({"quality": 0.95}));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn iteration_history_is_in_the_audit_and_archived_after_a_revise() {
    let spec = r#"
version: "0.2"
functions:
  review_gate:
    mode: gate
flows:
  main:
    input: {}
    steps:
      - id: refine
        intent: "Improve the draft"
        max_iterations: 3
        score_expr: "result.quality"
        exit_criterion: "best_score >= 0.9"
      - id: review
        function: review_gate
        on_approve: ~
        on_revise: refine
        on_kill: ~
"#;
    let (mut s, flow) = started(spec);
    s.iteration_start(&flow, "refine");
    s.iteration_report(&flow, "refine", json!({"quality": 0.5}));
    s.iteration_report(&flow, "refine", json!({"quality": 0.92}));
    s.done(&flow, "refine", json!({"quality": 0.92}));
    let before = s.audit(&flow);
    let log = field(field(&before, "iterations"), "refine");
    assert_eq!(log.as_array().map(Vec::len), Some(2));
    assert_eq!(
        field(log.get(1).unwrap_or(&Value::Null), "outcome"),
        "exit_success"
    );
    assert_eq!(field(log.get(1).unwrap_or(&Value::Null), "score"), 0.92);
    assert_eq!(field(&before, "archived_iterations"), &json!([]));
    let revised = s.gate(&flow, "review", "revise", "tighten the intro", "human");
    assert_eq!(field(&revised, "step_id"), "refine");
    let restart = s.iteration_start(&flow, "refine");
    assert_eq!(
        field(&restart, "status"),
        "iteration_started",
        "the revise cleared the old outcome"
    );
    s.iteration_report(&flow, "refine", json!({"quality": 0.95}));
    let after = s.audit(&flow);
    let archived = field(&after, "archived_iterations");
    assert_eq!(archived.as_array().map(Vec::len), Some(1));
    let round0 = field(archived.get(0).unwrap_or(&Value::Null), "refine");
    assert_eq!(
        round0.as_array().map(Vec::len),
        Some(2),
        "round 0's reports are archived"
    );
    let current = field(field(&after, "iterations"), "refine");
    assert_eq!(
        current.as_array().map(Vec::len),
        Some(1),
        "round 1 has its own history"
    );
    assert_eq!(field(current.get(0).unwrap_or(&Value::Null), "round"), 1);
    insta::assert_snapshot!(s.transcript());
}
