//! The connectors against the real agent CLIs, when they are installed and logged in: one
//! small contract per CLI, answered through the same command line, stdin and event parser as
//! a flow's step. Where a CLI is missing, its `--version` fails, or it answers that it is not
//! logged in, the test says so plainly on stderr (written directly, so the test harness does
//! not hide it) and checks nothing for that CLI: CI has none of them.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use stratum_agents::{Agent, Connector, DetectionStatus, Outcome, Prompt, Request, Run};
use tokio_util::sync::CancellationToken;

/// Says what happened to one CLI, past the harness's capture.
fn say(agent: Agent, what: &str) {
    let _ = writeln!(std::io::stderr(), "real CLI `{}`: {what}", agent.name());
}

/// Whether a failed run reads as a CLI that is installed but not logged in.
fn not_logged_in(run: &Run) -> bool {
    let message = match &run.outcome {
        Outcome::AgentError { message } => message.clone(),
        Outcome::Crashed { message } => message.clone().unwrap_or_default(),
        _ => return false,
    };
    let text = format!("{message}\n{}\n{}", run.text, run.stderr.text()).to_lowercase();
    [
        "log in",
        "login",
        "logged in",
        "api key",
        "api_key",
        "authenticat",
        "unauthorized",
        "401",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

#[tokio::test]
async fn each_installed_cli_answers_a_small_contract() {
    for agent in Agent::ALL {
        let connector = Connector::new(agent);
        match connector.detect().await.status {
            DetectionStatus::Found { version } => say(agent, &format!("found {version}")),
            DetectionStatus::NotFound => {
                say(agent, "skipped: not installed (not found on PATH)");
                continue;
            }
            DetectionStatus::Failed { reason } => {
                say(agent, &format!("skipped: `--version` failed: {reason}"));
                continue;
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let prompt = Prompt {
            intent: "Add the two numbers of the inputs. Do not read or change any file.".to_owned(),
            inputs: json!({"a": 2, "b": 3}),
            schema: Some(json!({
                "type": "object",
                "properties": {"sum": {"type": "integer"}},
                "required": ["sum"]
            })),
            violations: Vec::new(),
        };
        let mut request = Request::new(prompt, dir.path(), dir.path());
        request.deadline = Duration::from_secs(300);
        let run = connector
            .run(&request, &CancellationToken::new())
            .await
            .unwrap();
        if not_logged_in(&run) {
            say(agent, "skipped: installed but not logged in");
            continue;
        }
        match &run.outcome {
            Outcome::Answered { object } => {
                assert_eq!(object["sum"], json!(5), "{run:?}");
                say(
                    agent,
                    &format!(
                        "answered in {:.1} s, usage {:?}",
                        run.elapsed.as_secs_f64(),
                        run.usage
                    ),
                );
            }
            other => panic!("`{}` did not answer: {other:?}\n{run:?}", agent.name()),
        }
    }
}
