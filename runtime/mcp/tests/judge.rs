//! `stratum_judge` over real files and a real agent process (a fake Claude CLI speaking its
//! stream-JSON), on SQLite and PostgreSQL: a deterministic predicate read from the staged
//! artifacts says not met, then met; an agent's verdict counts only with citations of staged
//! lines, else it is ambiguous and a person decides; a path out of the project is refused.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use stratum_agents::{Agent, Connector};
use stratum_driver::Driver;
use stratum_mcp::args::JudgeArgs;
use stratum_runtime::{Command, Config, Runtime, Store};

const SPEC: &str = r#"version: "0.3"
flows:
  main:
    input: {}
    steps:
      - id: check
        retries: 3
        judge:
          predicates:
            - {id: tests, type: deterministic, statement: "file_contains('artifacts/log.txt', ' passed')"}
            - {id: no-todo, type: verified, statement: "No modified file adds a TODO", applied_gate: 8}
        ensure: ["result.met == True"]
      - id: ship
        intent: "Ship it"
"#;

use stratum_test_support::unattended::{STORES, sqlite};

fn driver(store: Arc<dyn Store>, dir: &Path, answers: &[&str]) -> Driver {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("lib.rs"), "fn main() {}\n// reviewed\n").unwrap();
    let claude = stratum_test_support::fake_agent::claude(dir, answers);
    let mut driver = Driver::new(
        Runtime::new(store, Config::default()),
        project.canonicalize().unwrap(),
    );
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = claude;
    driver.connectors.insert(Agent::Claude, connector);
    driver.worktrees = dir.join("home").join("worktrees");
    driver
}

fn start(driver: &Driver) -> String {
    stratum_test_support::unattended::start_enrolled(&driver.runtime, SPEC, None, &json!({}), 1)
        .remove(0)
        .to_string()
}

fn args(flow: &str, log: &str, modified: &[&str]) -> JudgeArgs {
    let mut artifacts = Map::new();
    artifacts.insert("log".to_owned(), json!(log));
    JudgeArgs {
        flow_id: flow.to_owned(),
        step_id: "check".to_owned(),
        artifacts,
        modified_files: Some(modified.iter().map(|path| (*path).to_owned()).collect()),
        predicates: None,
        stakes: None,
        budget: None,
    }
}

fn agent_says(verdict: &str, source: &str) -> String {
    format!(
        "Checked.\n```json\n{{\"predicate_id\": \"no-todo\", \"verdict\": \"{verdict}\", \"confidence\": 9, \"reason\": \"no TODO added\", \"evidence\": [{{\"source\": \"{source}\", \"quote\": \"// reviewed\"}}]}}\n```"
    )
}

#[test]
fn a_verdict_is_the_servers_unmet_then_met() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let good = agent_says("met", "modified/lib.rs:2");
        let driver = driver(open(), dir.path(), &[&good]);
        let flow = start(&driver);
        let unmet =
            stratum_mcp::judge::judge(&driver, args(&flow, "3 failed", &["lib.rs"])).unwrap();
        assert_eq!(unmet["verdict"]["met"], false, "{kind}: {unmet}");
        assert_eq!(
            unmet["verdict"]["predicates"][0]["verdict"], "not_met",
            "{kind}"
        );
        assert_eq!(unmet["next"]["status"], "ensure_failed", "{kind}: {unmet}");
        let met =
            stratum_mcp::judge::judge(&driver, args(&flow, "12 passed", &["lib.rs"])).unwrap();
        assert_eq!(met["verdict"]["met"], true, "{kind}: {met}");
        assert_eq!(
            met["next"]["step_id"], "ship",
            "{kind}: the step completed: {met}"
        );
        // The staged turn holds the artifact and the copied file, with their hashes.
        let turn = Path::new(met["verdict"]["meta"]["turn_dir"].as_str().unwrap());
        assert_eq!(
            std::fs::read_to_string(turn.join("artifacts/log.txt")).unwrap(),
            "12 passed"
        );
        assert!(turn.join("modified/lib.rs").is_file(), "{kind}");
        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(turn.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(
            manifest["modified/lib.rs"].as_str().map(str::len),
            Some(64),
            "{kind}"
        );
    }
}

#[test]
fn an_agent_verdict_without_a_real_citation_is_ambiguous_and_a_person_decides() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let invented = agent_says("met", "modified/lib.rs:99");
        let driver = driver(open(), dir.path(), &[&invented]);
        let flow = start(&driver);
        let judged =
            stratum_mcp::judge::judge(&driver, args(&flow, "all passed", &["lib.rs"])).unwrap();
        let reason = judged["verdict"]["predicates"][1]["reason"]
            .as_str()
            .unwrap();
        assert!(reason.contains("citation refused"), "{kind}: {reason}");
        assert_eq!(judged["next"]["status"], "await_gate", "{kind}: {judged}");
        let decided = driver
            .runtime
            .call(&Command::GateResolve {
                flow_id: flow.clone(),
                step_id: "check".to_owned(),
                outcome: "approve".to_owned(),
                rationale: "I read it".to_owned(),
                resolved_by: "human".to_owned(),
                actor: None,
            })
            .unwrap()
            .to_json();
        assert_eq!(decided["step_id"], "ship", "{kind}: {decided}");
    }
}

#[test]
fn an_agent_citing_a_file_that_was_never_staged_is_ambiguous() {
    let dir = tempfile::tempdir().unwrap();
    let invented = agent_says("met", "modified/gone.rs:1");
    let driver = driver(sqlite(), dir.path(), &[&invented]);
    let flow = start(&driver);
    let judged =
        stratum_mcp::judge::judge(&driver, args(&flow, "all passed", &["lib.rs"])).unwrap();
    let predicate = &judged["verdict"]["predicates"][1];
    assert_eq!(predicate["verdict"], "ambiguous", "{judged}");
    assert_eq!(
        predicate["reason"],
        "no TODO added (citation refused: `modified/gone.rs` is not a staged file)"
    );
}

#[test]
fn staging_refuses_paths_out_of_the_project_and_unsafe_names() {
    let dir = tempfile::tempdir().unwrap();
    let driver = driver(sqlite(), dir.path(), &["no"]);
    let flow = start(&driver);
    let escape =
        stratum_mcp::judge::judge(&driver, args(&flow, "x", &["../../etc/passwd"])).unwrap_err();
    assert_eq!(
        escape.argument.as_deref(),
        Some("modified_files"),
        "{escape:?}"
    );
    let mut bad = args(&flow, "x", &[]);
    bad.artifacts.insert("../x".to_owned(), json!("y"));
    let named = stratum_mcp::judge::judge(&driver, bad).unwrap_err();
    assert_eq!(named.argument.as_deref(), Some("artifacts"), "{named:?}");
}
