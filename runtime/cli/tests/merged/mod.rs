//! A gate after a parallel step the server ran for real: `stratum-mcp serve` over a git
//! project, fake agent CLIs on its `PATH` (`stratum_test_support::fake_agent`) each editing a
//! file in its task's worktree, and the tasks' diffs merged into the project before the flow
//! waits at its gate, as the console's gate pages then show them.

#![allow(dead_code)]

use std::path::Path;

use serde_json::json;
use stratum_test_support::fake_agent::{Format, TaskAction, task_agent};

use crate::mcp::{McpServer, Protocol, status};
use crate::serve::{Serve, State};

/// Two tasks run by the server (`claude`), then a gate.
pub const SPEC: &str = r#"version: "0.3"
contracts:
  Change:
    summary: {type: string}
functions:
  sign_off:
    mode: gate
flows:
  build:
    input: {tasks: {type: array}}
    max_rounds: 3
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        agent: claude
        output_contract: Change
        max_concurrent: 2
        task_timeout: 60
      - id: review
        function: sign_off
        on_approve: ~
        on_revise: work
        on_kill: ~
"#;

/// What task `a` writes: a line indented by a tab, and markup a page must not run.
pub const A_RS: &str = "fn main() {\n\tprintln!(\"<script>alert(1)</script>\");\n}\n";

/// `serve` on `state` with the flow at its gate, the tasks' changes merged into the project.
pub struct AtGate {
    pub serve: Serve,
    pub agent: McpServer,
    pub secret: String,
    pub flow: String,
    /// The git project the changes were merged into.
    pub project: tempfile::TempDir,
    _home: tempfile::TempDir,
    _agents: tempfile::TempDir,
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts the flow over MCP HTTP as `secret`'s agent and has the server run its tasks.
pub async fn at_gate(state: &State, secret: &str) -> AtGate {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let agents = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("shared.txt"), "base\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    let done = |summary: &str| format!("Done.\n```json\n{{\"summary\": \"{summary}\"}}\n```");
    task_agent(
        agents.path(),
        Format::Claude,
        &[
            (
                "a",
                vec![TaskAction::Answer {
                    shell: format!("printf '%s' '{A_RS}' > a.rs"),
                    text: done("a"),
                }],
            ),
            ("b", vec![TaskAction::edit("b.txt", "from b", &done("b"))]),
        ],
    );
    let path = format!(
        "{}:{}",
        agents.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let serve = Serve::start_with_env(
        state,
        &[
            ("PATH", &path),
            ("STRATUM_HOME", &home.path().display().to_string()),
        ],
        &["--root", &root.display().to_string()],
    );
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        secret,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await;
    let tasks = json!([
        {"id": "a", "description": "write a.rs"},
        {"id": "b", "description": "write b.txt"}
    ]);
    let envelope = agent
        .call(
            "stratum_plan",
            json!({"spec": SPEC, "flow": "build", "inputs": {"tasks": tasks}}),
        )
        .await;
    assert_eq!(status(&envelope), "parallel_dispatch", "{envelope:#}");
    let flow = envelope["flow_id"].as_str().unwrap().to_owned();
    let ran = agent
        .call(
            "stratum_parallel_start",
            json!({"flow_id": flow, "step_id": "work", "wait_seconds": 120}),
        )
        .await;
    assert_eq!(ran["running"], false, "{ran:#}");
    let outcome = &ran["outcome"];
    assert_eq!(status(outcome), "await_gate", "{ran:#}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.rs")).unwrap(),
        A_RS,
        "merged into the project"
    );
    AtGate {
        serve,
        agent,
        secret: secret.to_owned(),
        flow,
        project,
        _home: home,
        _agents: agents,
    }
}
