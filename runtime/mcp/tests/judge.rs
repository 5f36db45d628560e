//! `stratum_judge` over real files and a real agent process (a fake Claude CLI speaking its
//! stream-JSON), on SQLite and PostgreSQL: a deterministic predicate read from the staged
//! artifacts says not met, then met; an agent's verdict counts only with citations of staged
//! lines, else it is ambiguous and a person decides; a path out of the project is refused.
//! Under paranoid stakes a second-tier `met` is read again cold, by a fake Codex (or, with
//! Claude alone installed, a fresh Claude session): agreement is met; disagreement, a citation
//! of a file not staged, or a budget with no turn left for it is ambiguous.

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
        wait_seconds: None,
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
                via: None,
                round: None,
                value: None,
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

/// Paranoid stakes: a verified predicate goes through the second tier, then the cold read.
/// `tight` leaves room for two tier runs only (the deterministic check, the second tier).
const PARANOID: &str = r#"version: "0.3"
flows:
  paranoid:
    input: {}
    steps:
      - id: check
        retries: 3
        judge:
          predicates:
            - {id: no-todo, type: verified, statement: "No modified file adds a TODO", applied_gate: 8}
          stakes: paranoid
        ensure: ["result.met == True"]
      - id: ship
        intent: "Ship it"
  tight:
    input: {}
    steps:
      - id: check
        retries: 3
        judge:
          predicates:
            - {id: tests, type: deterministic, statement: "file_contains('artifacts/log.txt', ' passed')"}
            - {id: no-todo, type: verified, statement: "No modified file adds a TODO", applied_gate: 8}
          stakes: paranoid
          budget: {max_turns: 2}
        ensure: ["result.met == True"]
      - id: ship
        intent: "Ship it"
"#;

/// A driver whose default agent is a fake Claude (in `dir/claude-bin`) and whose Codex is a
/// fake too (in `dir/codex-bin`) when `codex` answers are given, else a path that does not
/// exist, so that no Codex on the machine's PATH can stand in.
fn paranoid_driver(
    store: Arc<dyn Store>,
    dir: &Path,
    claude: &[&str],
    codex: Option<&[&str]>,
) -> Driver {
    let mut driver = driver(store, dir, &["unused"]);
    let claude_bin = dir.join("claude-bin");
    std::fs::create_dir_all(&claude_bin).unwrap();
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = stratum_test_support::fake_agent::claude(&claude_bin, claude);
    // The operator's arguments must not reach the cold read, which gets the read-only ones.
    connector.extra_args = vec!["--permission-mode".to_owned(), "acceptEdits".to_owned()];
    driver.connectors.insert(Agent::Claude, connector);
    let mut connector = Connector::new(Agent::Codex);
    connector.binary = match codex {
        Some(answers) => {
            let codex_bin = dir.join("codex-bin");
            std::fs::create_dir_all(&codex_bin).unwrap();
            stratum_test_support::fake_agent::codex(&codex_bin, answers)
        }
        None => dir.join("no-codex-here").join("codex"),
    };
    connector.extra_args = vec!["--sandbox".to_owned(), "workspace-write".to_owned()];
    driver.connectors.insert(Agent::Codex, connector);
    driver
}

fn start_paranoid(driver: &Driver, flow: &str) -> String {
    stratum_test_support::unattended::start_enrolled(
        &driver.runtime,
        PARANOID,
        Some(flow),
        &json!({}),
        1,
    )
    .remove(0)
    .to_string()
}

/// The lines of a fake agent's record (`prompts`, `argv`), or nothing when it never ran.
fn record(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

#[test]
fn paranoid_stakes_met_by_both_tiers_is_met_after_a_cold_read_on_the_other_cli() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let second = agent_says("met", "modified/lib.rs:2");
        let cold = agent_says("met", "modified/lib.rs:1");
        let driver = paranoid_driver(open(), dir.path(), &[&second], Some(&[&cold]));
        let flow = start_paranoid(&driver, "paranoid");
        let judged = stratum_mcp::judge::judge(&driver, args(&flow, "ok", &["lib.rs"])).unwrap();
        let verdict = &judged["verdict"];
        assert_eq!(verdict["met"], true, "{kind}: {judged}");
        assert_eq!(judged["next"]["step_id"], "ship", "{kind}: {judged}");
        let predicate = &verdict["predicates"][0];
        let tiers: Vec<&str> = predicate["tier_history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tier| tier["tier"].as_str().unwrap())
            .collect();
        assert_eq!(tiers, ["T2", "T3"], "{kind}: {predicate}");
        assert_eq!(predicate["t3"]["agent"], "codex", "{kind}: {predicate}");
        assert_eq!(predicate["t3"]["mode"], "other_cli", "{kind}");
        assert_eq!(predicate["t3"]["verdict"], "met", "{kind}");
        assert_eq!(predicate["t3"]["jailed"], false, "{kind}");
        assert_eq!(
            verdict["meta"]["t3_summary"],
            json!({"reached": 1, "by_mode": {"other_cli": 1}, "all_jailed": false, "any_degraded": false}),
            "{kind}"
        );
        assert_eq!(verdict["tier_disagreements"], json!([]), "{kind}");
        assert_eq!(verdict["budget_consumed"]["turns"], 2, "{kind}");
        // The cold read was told the predicate and the staged files, nothing of the second
        // tier's answer, and ran Codex read-only, without the operator's arguments.
        let codex = dir.path().join("codex-bin");
        let prompt = record(&codex, "prompts");
        assert!(
            prompt.contains("No modified file adds a TODO") && prompt.contains("- modified/lib.rs"),
            "{kind}: {prompt}"
        );
        assert!(!prompt.contains("no TODO added"), "{kind}: {prompt}");
        let argv = record(&codex, "argv");
        assert!(argv.contains("--sandbox read-only"), "{kind}: {argv}");
        assert!(!argv.contains("workspace-write"), "{kind}: {argv}");
        assert_eq!(record(&dir.path().join("claude-bin"), "count").trim(), "1");
    }
}

#[test]
fn a_cold_read_that_disagrees_makes_the_predicate_ambiguous_and_a_person_decides() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let second = agent_says("met", "modified/lib.rs:2");
        let cold = agent_says("not_met", "modified/lib.rs:1");
        let driver = paranoid_driver(open(), dir.path(), &[&second], Some(&[&cold]));
        let flow = start_paranoid(&driver, "paranoid");
        let judged = stratum_mcp::judge::judge(&driver, args(&flow, "ok", &["lib.rs"])).unwrap();
        let verdict = &judged["verdict"];
        assert_eq!(verdict["met"], false, "{kind}: {judged}");
        assert_eq!(verdict["predicates"][0]["verdict"], "ambiguous", "{kind}");
        assert_eq!(
            verdict["tier_disagreements"],
            json!([{
                "predicate_id": "no-todo",
                "tiers": ["T2", "T3"],
                "verdicts": ["met", "not_met"],
                "reasons": ["no TODO added", "no TODO added"],
            }]),
            "{kind}: {judged}"
        );
        assert_eq!(verdict["findings"][0]["severity"], "should-fix", "{kind}");
        assert_eq!(verdict["meta"]["t3_summary"]["reached"], 1, "{kind}");
        assert_eq!(judged["next"]["status"], "await_gate", "{kind}: {judged}");
        assert_eq!(judged["next"]["step_id"], "check", "{kind}: {judged}");
    }
}

#[test]
fn a_cold_read_citing_a_file_that_was_not_staged_is_ambiguous() {
    let dir = tempfile::tempdir().unwrap();
    let second = agent_says("met", "modified/lib.rs:2");
    let cold = agent_says("met", "modified/other.rs:1");
    let driver = paranoid_driver(sqlite(), dir.path(), &[&second], Some(&[&cold]));
    let flow = start_paranoid(&driver, "paranoid");
    let judged = stratum_mcp::judge::judge(&driver, args(&flow, "ok", &["lib.rs"])).unwrap();
    let predicate = &judged["verdict"]["predicates"][0];
    assert_eq!(predicate["verdict"], "ambiguous", "{judged}");
    let reason = predicate["t3"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("citation refused: `modified/other.rs` is not a staged file"),
        "{reason}"
    );
    assert_eq!(
        judged["verdict"]["tier_disagreements"][0]["verdicts"],
        json!(["met", "ambiguous"]),
        "{judged}"
    );
    assert_eq!(judged["next"]["status"], "await_gate", "{judged}");
}

#[test]
fn a_budget_spent_before_the_cold_read_leaves_the_predicate_ambiguous_with_the_reason() {
    for (kind, open) in STORES {
        let dir = tempfile::tempdir().unwrap();
        let second = agent_says("met", "modified/lib.rs:2");
        let cold = agent_says("met", "modified/lib.rs:1");
        let driver = paranoid_driver(open(), dir.path(), &[&second], Some(&[&cold]));
        let flow = start_paranoid(&driver, "tight");
        let judged =
            stratum_mcp::judge::judge(&driver, args(&flow, "12 passed", &["lib.rs"])).unwrap();
        let verdict = &judged["verdict"];
        assert_eq!(
            verdict["predicates"][0]["verdict"], "met",
            "{kind}: {judged}"
        );
        let predicate = &verdict["predicates"][1];
        assert_eq!(predicate["verdict"], "ambiguous", "{kind}: {predicate}");
        assert_eq!(
            predicate["reason"],
            "the second tier said met, but the cold read did not run: turn budget exceeded: \
             next turn would be 3, max_turns=2",
            "{kind}"
        );
        assert_eq!(predicate["t3"]["ran"], false, "{kind}: {predicate}");
        assert_eq!(predicate["tier_history"][1]["tier"], "T3", "{kind}");
        assert_eq!(verdict["meta"]["t3_summary"]["reached"], 0, "{kind}");
        assert_eq!(verdict["budget_consumed"]["turns"], 2, "{kind}");
        assert_eq!(judged["next"]["status"], "await_gate", "{kind}: {judged}");
        assert!(
            !dir.path().join("codex-bin/count").exists(),
            "{kind}: codex never ran"
        );
    }
}

#[test]
fn with_one_cli_installed_the_cold_read_is_a_fresh_session_of_it_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let second = agent_says("met", "modified/lib.rs:2");
    let cold = agent_says("met", "modified/lib.rs:1");
    let driver = paranoid_driver(sqlite(), dir.path(), &[&second, &cold], None);
    let flow = start_paranoid(&driver, "paranoid");
    let judged = stratum_mcp::judge::judge(&driver, args(&flow, "ok", &["lib.rs"])).unwrap();
    let verdict = &judged["verdict"];
    assert_eq!(verdict["met"], true, "{judged}");
    assert_eq!(verdict["predicates"][0]["t3"]["agent"], "claude");
    assert_eq!(
        verdict["predicates"][0]["t3"]["mode"],
        "same_cli_fresh_session"
    );
    assert_eq!(verdict["meta"]["t3_summary"]["any_degraded"], true);
    assert_eq!(
        verdict["meta"]["t3_summary"]["by_mode"],
        json!({"same_cli_fresh_session": 1})
    );
    let claude = dir.path().join("claude-bin");
    assert_eq!(record(&claude, "count").trim(), "2");
    // Both tiers read only: the operator's arguments (which allow edits) give way to the
    // read-only ones.
    let argv = record(&claude, "argv");
    let runs: Vec<&str> = argv.lines().collect();
    assert_eq!(runs.len(), 2, "{argv}");
    for run in &runs {
        assert!(
            run.contains("--allowedTools Read,Grep,Glob") && !run.contains("acceptEdits"),
            "{argv}"
        );
    }
    // The cold prompt is not the second tier's.
    let prompts = record(&claude, "prompts");
    assert_eq!(
        prompts.matches("independent reviewer").count(),
        1,
        "{prompts}"
    );
}
