//! Version 0.3 specs before the runtime that executes them: a flow that can reach a decompose,
//! parallel_dispatch or pipeline step is refused when it starts, with an `error_type` that
//! names the step and its kind, and nothing is stored; a flow of the same spec that reaches
//! none of them runs as usual.
#![allow(clippy::indexing_slicing)] // tests may index the JSON answers they assert on

use stratum_test_support as support;

use serde_json::json;
use support::Scenario;

const SPEC: &str = r#"version: "0.3"
contracts:
  TaskGraph:
    tasks: {type: array}
  Summary:
    text: {type: string}
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
      - id: build
        type: parallel_dispatch
        source: "$.steps.plan.output.tasks"
        intent_template: "Do {description}"
  outer:
    input: {feature: {type: string}}
    steps:
      - id: run
        flow: implement
        inputs: {feature: "$.input.feature"}
  summarise:
    input: {feature: {type: string}}
    steps:
      - id: summary
        intent: "Summarise the feature"
        inputs: {feature: "$.input.feature"}
        output_contract: Summary
"#;

#[test]
fn a_flow_that_reaches_a_v03_step_is_refused_when_it_starts() {
    let mut s = Scenario::new(SPEC);
    for flow in ["implement", "outer"] {
        let refused = s.start(Some(flow), json!({"feature": "search"}));
        assert_eq!(refused["status"], "error", "{refused}");
        assert_eq!(refused["error_type"], "unsupported_step_kind", "{refused}");
        let message = refused["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("step 'plan' of flow 'implement' is a decompose step"),
            "{message}"
        );
    }
    let started = s.start(Some("summarise"), json!({"feature": "search"}));
    assert_eq!(started["status"], "execute_step", "{started}");
    assert_eq!(started["step_id"], "summary", "{started}");
    insta::assert_snapshot!(s.transcript());
}
