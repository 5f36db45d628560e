//! Unattended flows against fake agent CLIs (shell scripts speaking Claude Code's and Codex's
//! event formats), on SQLite and on PostgreSQL: every result goes through the `step_done`
//! path, an invalid answer is retried with its violations in the prompt, an answer without
//! JSON is a failed attempt, a gate parks the drive until a person decides.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde_json::{Value, json};
use stratum_agents::{Agent, Connector};
use stratum_driver::{Driver, Ended, StopSignal, Turn};
use stratum_runtime::ids::FlowId;
use stratum_runtime::store::{DriveState, RunStatus};
use stratum_runtime::{Command, Config, Runtime, Store};
use stratum_test_support::unattended::start_enrolled;

/// A flow of two inline steps and a gate between them.
const SPEC: &str = r#"version: "0.2"
contracts:
  Part:
    n: {type: integer}
functions:
  review:
    mode: gate
    timeout: 3600
flows:
  main:
    input: {text: {type: string}}
    output: Part
    steps:
      - id: first
        intent: "Count the words"
        inputs: {text: "$.input.text"}
        output_contract: Part
        ensure: ["result.n >= 0"]
        retries: 3
      - id: approve
        function: review
        on_approve: second
        on_revise: first
        on_kill: ~
        depends_on: [first]
      - id: second
        intent: "Double it"
        inputs: {n: "$.steps.first.output.n"}
        output_contract: Part
        depends_on: [approve]
"#;

/// One step, for the no-JSON case.
const ONE_STEP: &str = r#"version: "0.2"
contracts:
  Part:
    n: {type: integer}
flows:
  main:
    input: {}
    output: Part
    steps:
      - id: only
        intent: "Answer"
        output_contract: Part
        retries: 2
"#;

use stratum_test_support::unattended::{STORES, sqlite};

fn driver(store: Arc<dyn Store>, root: &Path, claude: PathBuf) -> Driver {
    let runtime = Runtime::new(store, Config::default());
    let mut driver = Driver::new(runtime, root.canonicalize().unwrap());
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = claude;
    driver.connectors.insert(Agent::Claude, connector);
    driver
}

fn start(driver: &Driver, spec: &str, inputs: Value) -> FlowId {
    start_enrolled(&driver.runtime, spec, None, &inputs, 1).remove(0)
}

fn audit(driver: &Driver, id: &FlowId) -> Value {
    driver
        .runtime
        .call(&Command::Audit {
            flow_id: id.to_string(),
        })
        .unwrap()
        .to_json()
}

#[test]
fn an_invalid_result_is_retried_with_its_violations_then_a_gate_waits_for_a_person() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let claude = stratum_test_support::fake_agent::claude(
            dir.path(),
            &[
                "Counted.\n```json\n{\"n\": -3}\n```",
                "Fixed it.\n```json\n{\"n\": 4}\n```",
            ],
        );
        let driver = driver(open(), dir.path(), claude);
        let id = start(&driver, SPEC, json!({"text": "a b c d"}));
        let stop = StopSignal::new();

        let ended = driver.drive(&id, Turn::Whole, &stop, &mut ()).unwrap();
        assert_eq!(
            ended,
            Ended::Parked {
                flow: id.to_string(),
                step: "approve".to_owned()
            },
            "{kind}"
        );
        // The second prompt carried the first attempt's violation, verbatim.
        let prompts = std::fs::read_to_string(dir.path().join("prompts")).unwrap();
        let second = prompts.split("----").nth(1).unwrap();
        assert!(second.contains("result.n >= 0"), "{kind}: {second}");
        assert!(
            !prompts
                .split("----")
                .next()
                .unwrap()
                .contains("result.n >= 0")
        );

        // Parked: nobody can claim it until a person decides, which the lease never blocks.
        assert_eq!(
            driver.drive(&id, Turn::Whole, &stop, &mut ()).unwrap(),
            Ended::NotClaimable,
            "{kind}"
        );
        let decided = driver
            .runtime
            .call(&Command::GateResolve {
                flow_id: id.to_string(),
                step_id: "approve".to_owned(),
                outcome: "approve".to_owned(),
                rationale: "looks right".to_owned(),
                resolved_by: "human".to_owned(),
                actor: None,
                via: None,
                round: None,
                value: None,
            })
            .unwrap()
            .to_json();
        assert_eq!(decided["step_id"], "second", "{kind}: {decided}");
        let ended = driver.drive(&id, Turn::Whole, &stop, &mut ()).unwrap();
        assert_eq!(
            ended,
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );

        let audit = audit(&driver, &id);
        assert_eq!(audit["status"], "complete", "{kind}: {audit}");
        let steps: Vec<&str> = audit["trace"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|record| record["step_id"].as_str())
            .collect();
        assert_eq!(steps, ["first", "approve", "second"], "{kind}: {audit}");
        assert_eq!(audit["trace"][0]["attempts"], 2, "{kind}: {audit}");

        let store = driver.runtime.store();
        let runs = store.agent_runs(Some(&id), 10).unwrap();
        assert_eq!(runs.len(), 3, "{kind}: one run per attempt");
        assert!(runs.iter().all(|run| run.status == RunStatus::Answered));
        assert!(
            runs.iter()
                .all(|run| run.pid.is_some() && run.finished_ms.is_some())
        );
        let drive = store.drive(&id).unwrap().unwrap();
        assert_eq!(drive.state, DriveState::Done, "{kind}");
        assert_eq!(drive.owner, None, "{kind}");
    }
}

#[test]
fn an_answer_without_json_is_a_failed_attempt_never_an_empty_result() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let claude = stratum_test_support::fake_agent::claude(dir.path(), &["I could not decide."]);
        let driver = driver(open(), dir.path(), claude);
        let id = start(&driver, ONE_STEP, json!({}));
        let ended = driver
            .drive(&id, Turn::Whole, &StopSignal::new(), &mut ())
            .unwrap();
        assert_eq!(
            ended,
            Ended::Finished {
                status: "failed".to_owned()
            },
            "{kind}"
        );
        let runs = driver.runtime.store().agent_runs(Some(&id), 10).unwrap();
        assert_eq!(runs.len(), 2, "{kind}: both attempts ran");
        assert!(
            runs.iter()
                .all(|run| run.status == RunStatus::NoJson && run.result.is_none())
        );
        let prompts = std::fs::read_to_string(dir.path().join("prompts")).unwrap();
        assert!(
            prompts.split("----").nth(1).unwrap().contains("no_result"),
            "{kind}: the retry is told why"
        );
    }
}

/// A flow with a sub-flow between two steps.
const NESTED: &str = r#"version: "0.2"
contracts:
  Part:
    n: {type: integer}
flows:
  inner:
    input: {}
    output: Part
    steps:
      - id: deep
        intent: "Inner work"
        output_contract: Part
  outer:
    input: {}
    output: Part
    steps:
      - id: prep
        intent: "Prepare"
        output_contract: Part
      - id: sub
        flow: inner
        depends_on: [prep]
      - id: last
        intent: "Finish"
        output_contract: Part
        depends_on: [sub]
"#;

/// Three steps under a budget of 250 tokens; each fake run reports 120.
const BUDGETED: &str = r#"version: "0.2"
contracts:
  Part:
    n: {type: integer}
flows:
  main:
    input: {}
    output: Part
    budget: {max_tokens: 250}
    steps:
      - id: a
        intent: "One"
        output_contract: Part
      - id: b
        intent: "Two"
        output_contract: Part
        depends_on: [a]
      - id: c
        intent: "Three"
        output_contract: Part
        depends_on: [b]
"#;

fn start_flow(driver: &Driver, spec: &str, flow: &str) -> FlowId {
    start_enrolled(&driver.runtime, spec, Some(flow), &json!({}), 1).remove(0)
}

#[test]
fn a_sub_flow_is_driven_and_reported_to_its_parent() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let claude =
            stratum_test_support::fake_agent::claude(dir.path(), &["```json\n{\"n\": 2}\n```"]);
        let driver = driver(open(), dir.path(), claude);
        let id = start_flow(&driver, NESTED, "outer");
        let ended = driver
            .drive(&id, Turn::Whole, &StopSignal::new(), &mut ())
            .unwrap();
        assert_eq!(
            ended,
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        let audit = audit(&driver, &id);
        let steps: Vec<&str> = audit["trace"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|record| record["step_id"].as_str())
            .collect();
        assert_eq!(steps, ["prep", "sub", "last"], "{kind}: {audit}");
        // Three agent runs: the parent's two steps and the child's one, each under its flow.
        let store = driver.runtime.store();
        assert_eq!(store.agent_runs(Some(&id), 10).unwrap().len(), 2, "{kind}");
        assert_eq!(store.agent_runs(None, 10).unwrap().len(), 3, "{kind}");
    }
}

#[test]
fn agent_usage_is_debited_and_a_spent_budget_ends_the_drive() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let claude =
            stratum_test_support::fake_agent::claude(dir.path(), &["```json\n{\"n\": 2}\n```"]);
        let driver = driver(open(), dir.path(), claude);
        let id = start_flow(&driver, BUDGETED, "main");
        let ended = driver
            .drive(&id, Turn::Whole, &StopSignal::new(), &mut ())
            .unwrap();
        assert_eq!(
            ended,
            Ended::Finished {
                status: "budget_exhausted".to_owned()
            },
            "{kind}"
        );
        let audit = audit(&driver, &id);
        let runs = driver.runtime.store().agent_runs(Some(&id), 10).unwrap();
        assert_eq!(
            audit["budget_state"]["consumed"]["tokens"],
            json!(120 * runs.len()),
            "{kind}: every run's tokens debited: {audit}"
        );
        assert!(runs.len() <= 3, "{kind}");
    }
}

#[test]
fn a_step_naming_an_agent_no_connector_runs_is_handed_back_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let claude =
        stratum_test_support::fake_agent::claude(dir.path(), &["```json\n{\"n\": 2}\n```"]);
    let driver = driver(sqlite(), dir.path(), claude);
    let spec = ONE_STEP.replace(
        "        intent: \"Answer\"\n",
        "        intent: \"Answer\"\n        agent: gemini\n",
    );
    let id = start(&driver, &spec, json!({}));
    let ended = driver
        .drive(&id, Turn::Whole, &StopSignal::new(), &mut ())
        .unwrap();
    let Ended::HandedOff { note } = ended else {
        panic!("{ended:?}");
    };
    assert!(note.contains("`gemini`"), "{note}");
    // No attempt was spent: the flow waits at its step for an agent.
    let audit = audit(&driver, &id);
    assert_eq!(audit["status"], "in_progress", "{audit}");
    assert_eq!(audit["trace"], json!([]), "{audit}");
    let drive = driver.runtime.store().drive(&id).unwrap().unwrap();
    assert_eq!(drive.state, DriveState::Stopped);
    assert!(
        driver
            .runtime
            .store()
            .agent_runs(Some(&id), 5)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_sub_flow_that_fails_is_reported_to_its_parent_which_fails_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    // The parent's first step answers; every later run (the child's) gives no JSON.
    let claude = stratum_test_support::fake_agent::claude(
        dir.path(),
        &["```json\n{\"n\": 2}\n```", "no json at all"],
    );
    let driver = driver(sqlite(), dir.path(), claude);
    let id = start_flow(&driver, NESTED, "outer");
    let ended = driver
        .drive(&id, Turn::Whole, &StopSignal::new(), &mut ())
        .unwrap();
    assert_eq!(
        ended,
        Ended::Finished {
            status: "failed".to_owned()
        }
    );
    let audit = audit(&driver, &id);
    assert_eq!(audit["status"], "failed", "{audit}");
    let drive = driver.runtime.store().drive(&id).unwrap().unwrap();
    assert_eq!(drive.state, DriveState::Done);
}

#[test]
fn a_step_naming_codex_runs_codex_and_its_retry_carries_the_violations() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let claude = stratum_test_support::fake_agent::claude(dir.path(), &["unused"]);
        let codex = stratum_test_support::fake_agent::codex(
            dir.path(),
            &[
                "Here.\n```json\n{\"n\": -1}\n```",
                "Fixed.\n```json\n{\"n\": 5}\n```",
            ],
        );
        let mut driver = driver(open(), dir.path(), claude);
        let mut connector = Connector::new(Agent::Codex);
        connector.binary = codex;
        driver.connectors.insert(Agent::Codex, connector);
        let spec = ONE_STEP.replace(
            "        intent: \"Answer\"\n",
            "        intent: \"Answer\"\n        agent: codex\n        ensure: [\"result.n >= 0\"]\n",
        );
        let id = start(&driver, &spec, json!({}));
        let ended = driver
            .drive(&id, Turn::Whole, &StopSignal::new(), &mut ())
            .unwrap();
        assert_eq!(
            ended,
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        let prompts = std::fs::read_to_string(dir.path().join("prompts")).unwrap();
        assert!(
            prompts
                .split("----")
                .nth(1)
                .unwrap()
                .contains("result.n >= 0"),
            "{kind}: {prompts}"
        );
        let runs = driver.runtime.store().agent_runs(Some(&id), 5).unwrap();
        assert_eq!(runs.len(), 2, "{kind}");
        assert!(
            runs.iter().all(|run| run.agent == "codex"),
            "{kind}: {runs:#?}"
        );
        assert_eq!(runs[0].result, Some(json!({"n": 5})), "{kind}");
        assert_eq!(runs[0].usage["output_tokens"], 20, "{kind}");
    }
}
