//! The connectors against fake agent CLIs: shell scripts written into a temporary directory
//! that read stdin like the real CLIs and print their event formats (reference §4). Real
//! processes throughout; nothing of ours is mocked.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stratum_agents::{Agent, Connector, Error, Limits, Outcome, Prompt, Request};
use tokio_util::sync::CancellationToken;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A shell script at `dir/name` running `body`.
fn script(dir: &Path, name: &str, body: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// Shell lines printing each event as one JSON line (`printf %s` interprets no escapes).
fn print_events(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| {
            let line = event.to_string();
            assert!(
                !line.contains('\''),
                "events are single-quoted in the script"
            );
            format!("printf '%s\\n' '{line}'\n")
        })
        .collect()
}

const ANSWER: &str = "Done.\n```json\n{\"label\": \"positive\", \"confidence\": 0.9}\n```";

/// A whole successful stream in each CLI's format, ending with `final_text`.
fn events(agent: Agent, final_text: &str) -> Vec<Value> {
    match agent {
        Agent::Claude => vec![
            json!({"type": "system", "subtype": "init", "model": "claude-sonnet-4-6"}),
            json!({"type": "assistant", "message": {"model": "claude-sonnet-4-6", "content": [
                {"type": "text", "text": "Reading the input."},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.txt"}}]}}),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "hello", "is_error": false}]}}),
            json!({"type": "assistant", "message": {"model": "claude-sonnet-4-6", "content": [
                {"type": "text", "text": final_text}]}}),
            json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 2,
                "session_id": "s1", "result": final_text, "total_cost_usd": 0.0123,
                "usage": {"input_tokens": 120, "output_tokens": 30,
                    "cache_read_input_tokens": 5, "cache_creation_input_tokens": 7}}),
        ],
        Agent::Codex => vec![
            json!({"type": "thread.started", "thread_id": "th1"}),
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "thinking"}}),
            json!({"type": "item.completed", "item": {"id": "i1", "type": "command_execution",
                "command": "cat a.txt", "exit_code": 0}}),
            json!({"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": "Reading the input."}}),
            json!({"type": "item.completed", "item": {"id": "i3", "type": "agent_message", "text": final_text}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 120, "cached_input_tokens": 5, "output_tokens": 30}}),
        ],
        Agent::OpenCode => {
            let step_finish = |input: u64, output: u64| {
                json!({"type": "step_finish", "timestamp": 1767036059400_u64, "sessionID": "ses_1",
                    "part": {"type": "step-finish", "reason": "stop", "cost": 0.005,
                        "tokens": {"input": input, "output": output, "reasoning": 0,
                            "cache": {"read": 5, "write": 0}}}})
            };
            vec![
                json!({"type": "step_start", "timestamp": 1767036059338_u64, "sessionID": "ses_1",
                    "part": {"type": "step-start"}}),
                json!({"type": "text", "timestamp": 1767036059339_u64, "sessionID": "ses_1",
                    "part": {"type": "text", "text": "Reading the input."}}),
                json!({"type": "tool_use", "timestamp": 1767036059340_u64, "sessionID": "ses_1",
                    "part": {"type": "tool", "tool": "read", "callID": "c1",
                        "state": {"status": "completed", "input": {"filePath": "a.txt"}, "output": "hello"}}}),
                step_finish(100, 10),
                json!({"type": "step_start", "timestamp": 1767036059341_u64, "sessionID": "ses_1",
                    "part": {"type": "step-start"}}),
                json!({"type": "text", "timestamp": 1767036059342_u64, "sessionID": "ses_1",
                    "part": {"type": "text", "text": final_text}}),
                step_finish(20, 20),
            ]
        }
    }
}

/// A fake CLI that saves its stdin and arguments beside it, then prints `events`.
fn fake(dir: &Path, agent: Agent, events: &[Value], after: &str) -> Result<Connector> {
    let body = format!(
        "cat > stdin.txt\nprintf '%s\\n' \"$@\" > args.txt\n{}{after}",
        print_events(events)
    );
    let mut connector = Connector::new(agent);
    connector.binary = script(dir, &format!("fake-{}", agent.name()), &body)?;
    connector.grace = Duration::from_millis(200);
    Ok(connector)
}

fn request(dir: &Path, deadline: Duration) -> Request {
    let prompt = Prompt {
        intent: "Classify the text.".into(),
        inputs: json!({"text": "hello"}),
        schema: Some(json!({"type": "object", "required": ["label", "confidence"]})),
        violations: Vec::new(),
    };
    let mut request = Request::new(prompt, dir, dir);
    request.deadline = deadline;
    request
}

#[tokio::test]
async fn a_valid_result_is_parsed_with_its_usage() -> Result {
    for agent in Agent::ALL {
        let dir = tempfile::tempdir()?;
        let connector = fake(dir.path(), agent, &events(agent, ANSWER), "")?;
        let run = connector
            .run(
                &request(dir.path(), Duration::from_secs(10)),
                &CancellationToken::new(),
            )
            .await?;
        let expected = json!({"label": "positive", "confidence": 0.9});
        assert_eq!(
            run.outcome,
            Outcome::Answered {
                object: expected.as_object().cloned().unwrap_or_default()
            },
            "{agent:?}"
        );
        assert_eq!(run.text, ANSWER);
        assert_eq!(run.exit.code, Some(0));
        let usage = &run.usage;
        match agent {
            Agent::Claude => {
                assert_eq!(
                    (usage.input_tokens, usage.output_tokens),
                    (Some(120), Some(30))
                );
                assert_eq!(
                    (usage.cache_read_tokens, usage.cache_write_tokens),
                    (Some(5), Some(7))
                );
                assert_eq!(usage.model.as_deref(), Some("claude-sonnet-4-6"));
                assert_eq!(usage.cost_usd, Some(0.0123));
            }
            Agent::Codex => {
                assert_eq!(
                    (usage.input_tokens, usage.output_tokens),
                    (Some(120), Some(30))
                );
                assert_eq!(usage.cache_read_tokens, Some(5));
            }
            Agent::OpenCode => {
                assert_eq!(
                    (usage.input_tokens, usage.output_tokens),
                    (Some(120), Some(30))
                );
                assert_eq!(usage.cache_read_tokens, Some(10));
                assert_eq!(usage.cost_usd, Some(0.01));
            }
        }
        // The prompt arrived on stdin, in the CLI's input format, and the working directory was
        // the one asked for (the fake wrote its files there).
        let stdin = std::fs::read_to_string(dir.path().join("stdin.txt"))?;
        let prompt = match agent {
            Agent::Claude => {
                let message: Value = serde_json::from_str(stdin.trim_end())?;
                assert_eq!(message["type"], "user");
                assert_eq!(message["message"]["role"], "user");
                message["message"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            }
            Agent::Codex | Agent::OpenCode => stdin,
        };
        assert!(
            prompt.starts_with("Classify the text.\n\nInputs (JSON):\n"),
            "{prompt}"
        );
        assert!(prompt.contains("\"required\": ["));
        let args = std::fs::read_to_string(dir.path().join("args.txt"))?;
        let expected_args = match agent {
            Agent::Claude => {
                "-p\n--output-format\nstream-json\n--verbose\n--input-format\nstream-json\n"
                    .to_owned()
            }
            Agent::Codex => format!(
                "exec\n--json\n--skip-git-repo-check\n-C\n{}\n-\n",
                dir.path().canonicalize()?.display()
            ),
            Agent::OpenCode => "run\n--format\njson\n".to_owned(),
        };
        assert_eq!(args, expected_args, "{agent:?}");
    }
    Ok(())
}

#[tokio::test]
async fn an_answer_without_json_is_no_json_never_an_empty_object() -> Result {
    for agent in Agent::ALL {
        let dir = tempfile::tempdir()?;
        let text = "I looked at it and it seems positive.";
        let connector = fake(dir.path(), agent, &events(agent, text), "")?;
        let run = connector
            .run(
                &request(dir.path(), Duration::from_secs(10)),
                &CancellationToken::new(),
            )
            .await?;
        assert_eq!(run.outcome, Outcome::NoJson, "{agent:?}");
        assert_eq!(run.text, text);
    }
    Ok(())
}

#[tokio::test]
async fn a_crash_is_not_an_answer_even_with_text() -> Result {
    for agent in Agent::ALL {
        let dir = tempfile::tempdir()?;
        let all = events(agent, ANSWER);
        let partial = all.get(..all.len() - 1).unwrap_or_default();
        let connector = fake(
            dir.path(),
            agent,
            partial,
            "echo 'segmentation fault' >&2\nexit 3",
        )?;
        let run = connector
            .run(
                &request(dir.path(), Duration::from_secs(10)),
                &CancellationToken::new(),
            )
            .await?;
        assert_eq!(run.outcome, Outcome::Crashed { message: None }, "{agent:?}");
        assert_eq!(run.exit.code, Some(3));
        assert_eq!(run.stderr.text(), "segmentation fault\n");
    }
    Ok(())
}

#[tokio::test]
async fn an_error_the_agent_reports_fails_the_run() -> Result {
    let error_event = |agent: Agent| match agent {
        Agent::Claude => json!({"type": "result", "subtype": "error_max_turns", "is_error": true,
            "result": "", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        Agent::Codex => json!({"type": "error", "message": "stream disconnected"}),
        Agent::OpenCode => json!({"type": "error", "sessionID": "ses_1",
            "error": {"name": "ProviderAuthError", "data": {"message": "no key"}}}),
    };
    for agent in Agent::ALL {
        let dir = tempfile::tempdir()?;
        let mut stream = events(agent, ANSWER);
        stream.push(error_event(agent));
        let connector = fake(dir.path(), agent, &stream, "")?;
        let run = connector
            .run(
                &request(dir.path(), Duration::from_secs(10)),
                &CancellationToken::new(),
            )
            .await?;
        assert!(
            matches!(run.outcome, Outcome::AgentError { .. }),
            "{agent:?}: {:?}",
            run.outcome
        );
    }
    Ok(())
}

/// Whether `pid` is gone: no such process, or a zombie (dead; the container's init may never
/// reap it).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn eventually_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A fake that ignores SIGTERM (so SIGKILL has to come), starts a grandchild that ignores it
/// too, records both pids and hangs.
const HANG: &str =
    "trap '' TERM\nsleep 60 &\necho $! > grandchild.pid\necho $$ > agent.pid\nsleep 60\n";

fn pids(dir: &Path) -> Result<(u32, u32)> {
    let read = |name: &str| -> Result<u32> {
        Ok(std::fs::read_to_string(dir.join(name))?.trim().parse()?)
    };
    Ok((read("agent.pid")?, read("grandchild.pid")?))
}

#[tokio::test]
async fn a_hang_past_the_deadline_ends_the_whole_group() -> Result {
    for agent in Agent::ALL {
        let dir = tempfile::tempdir()?;
        let all = events(agent, ANSWER);
        let connector = fake(dir.path(), agent, all.get(..1).unwrap_or_default(), HANG)?;
        let started = Instant::now();
        let run = connector
            .run(
                &request(dir.path(), Duration::from_secs(1)),
                &CancellationToken::new(),
            )
            .await?;
        assert_eq!(run.outcome, Outcome::TimedOut, "{agent:?}");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            run.exit.signal,
            Some(9),
            "SIGTERM is ignored, so SIGKILL ended it"
        );
        let (agent_pid, grandchild) = pids(dir.path())?;
        assert!(
            eventually_gone(agent_pid),
            "the agent {agent_pid} is still running"
        );
        assert!(
            eventually_gone(grandchild),
            "the grandchild {grandchild} is still running"
        );
    }
    Ok(())
}

#[tokio::test]
async fn cancel_ends_the_whole_group() -> Result {
    let dir = tempfile::tempdir()?;
    let connector = fake(dir.path(), Agent::Codex, &[], HANG)?;
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        canceller.cancel();
    });
    let run = connector
        .run(&request(dir.path(), Duration::from_secs(30)), &cancel)
        .await?;
    assert_eq!(run.outcome, Outcome::Cancelled);
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
    let (agent_pid, grandchild) = pids(dir.path())?;
    assert!(eventually_gone(agent_pid) && eventually_gone(grandchild));
    Ok(())
}

#[tokio::test]
async fn what_an_agent_leaves_running_is_ended_when_it_exits() -> Result {
    let dir = tempfile::tempdir()?;
    let after = "sleep 60 &\necho $! > grandchild.pid\necho $$ > agent.pid";
    let connector = fake(
        dir.path(),
        Agent::Claude,
        &events(Agent::Claude, ANSWER),
        after,
    )?;
    let run = connector
        .run(
            &request(dir.path(), Duration::from_secs(10)),
            &CancellationToken::new(),
        )
        .await?;
    assert!(
        matches!(run.outcome, Outcome::Answered { .. }),
        "{:?}",
        run.outcome
    );
    assert!(
        run.elapsed < Duration::from_secs(3),
        "the grandchild held stdout: {:?}",
        run.elapsed
    );
    let (_, grandchild) = pids(dir.path())?;
    assert!(eventually_gone(grandchild));
    Ok(())
}

#[tokio::test]
async fn fifty_megabytes_of_output_stay_within_the_bounds() -> Result {
    const LINE: usize = 1023; // bytes, without the newline
    const LINES: u64 = 51_200; // 51 200 × 1 024 bytes = 50 MiB
    let pad = "x".repeat(LINE - r#"{"type":"noise","pad":""}"#.len());
    let noise = format!(r#"{{"type":"noise","pad":"{pad}"}}"#);
    assert_eq!(noise.len(), LINE);
    for agent in Agent::ALL {
        let dir = tempfile::tempdir()?;
        let all = events(agent, ANSWER);
        let mut connector = fake(dir.path(), agent, &[], "")?;
        let finals = print_events(&all);
        let body = format!("cat > /dev/null\nyes '{noise}' | head -n {LINES}\n{finals}");
        connector.binary = script(dir.path(), "fake-big", &body)?;
        connector.limits = Limits {
            log_bytes: 64 * 1024,
            stderr_bytes: 1024,
            line_bytes: 4 * 1024 * 1024,
        };
        let run = connector
            .run(
                &request(dir.path(), Duration::from_secs(60)),
                &CancellationToken::new(),
            )
            .await?;
        assert!(
            matches!(run.outcome, Outcome::Answered { .. }),
            "{agent:?}: {:?}",
            run.outcome
        );
        let log = &run.log;
        let final_bytes: u64 = all.iter().map(|event| event.to_string().len() as u64).sum();
        assert!(log.kept_bytes() <= 64 * 1024);
        assert_eq!(log.lines_seen, LINES + all.len() as u64);
        assert_eq!(log.bytes_seen, LINES * LINE as u64 + final_bytes);
        let kept_lines = log.lines().count() as u64;
        assert_eq!(log.lines_dropped, log.lines_seen - kept_lines);
        assert_eq!(log.bytes_dropped, log.bytes_seen - log.kept_bytes() as u64);
        assert_eq!(log.lines_oversized, 0);
        // The newest lines are the ones kept: the stream's own final event is last.
        let last = all.last().map(Value::to_string);
        assert_eq!(log.lines().last().map(str::to_owned), last);
    }
    Ok(())
}

#[tokio::test]
async fn a_working_directory_outside_the_root_is_refused() -> Result {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("project");
    std::fs::create_dir(&root)?;
    let connector = fake(dir.path(), Agent::Codex, &events(Agent::Codex, ANSWER), "")?;
    let mut request = request(&root, Duration::from_secs(10));
    request.cwd = root.join("..");
    let err = connector.run(&request, &CancellationToken::new()).await;
    assert!(matches!(err, Err(Error::OutsideRoot { .. })), "{err:?}");
    assert!(
        !dir.path().join("stdin.txt").exists(),
        "nothing was started"
    );
    Ok(())
}

#[tokio::test]
async fn detection_reports_version_or_absence() -> Result {
    let dir = tempfile::tempdir()?;
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = script(dir.path(), "claude", "echo '2.1.76 (Claude Code)'")?;
    let found = connector.detect().await;
    assert_eq!(
        serde_json::to_value(&found)?["version"],
        "2.1.76 (Claude Code)"
    );
    assert_eq!(found.path.as_deref(), Some(connector.binary.as_path()));

    connector.binary = script(dir.path(), "broken", "echo 'no such option' >&2\nexit 2")?;
    let failed = serde_json::to_value(connector.detect().await)?;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("no such option"),
        "{failed}"
    );

    connector.binary = dir.path().join("missing");
    assert_eq!(
        serde_json::to_value(connector.detect().await)?["status"],
        "not_found"
    );
    Ok(())
}

/// The environment test runs in a child process of this test binary: setting variables in the
/// test process itself would need `unsafe` (`std::env::set_var`), which the workspace forbids.
#[test]
fn a_child_sees_only_its_allow_list() -> Result {
    let status = Command::new(std::env::current_exe()?)
        .args([
            "--exact",
            "environment_of_each_agent",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STRATUM_AGENTS_ENV_CHILD", "1")
        .env("STRATUM_TEST_SECRET", "do-not-leak")
        .env("OPENAI_API_KEY", "sk-openai-test")
        .env("ANTHROPIC_API_KEY", "sk-anthropic-test")
        .env("STRATUM_TEST_EXTRA", "added-by-operator")
        .env("LC_ALL", "C")
        .status()?;
    assert!(status.success());
    Ok(())
}

#[tokio::test]
async fn environment_of_each_agent() -> Result {
    if std::env::var_os("STRATUM_AGENTS_ENV_CHILD").is_none() {
        return Ok(()); // only meaningful under `a_child_sees_only_its_allow_list`
    }
    for agent in Agent::ALL {
        let dir = tempfile::tempdir()?;
        let mut connector = fake(dir.path(), agent, &events(agent, ANSWER), "env > env.txt")?;
        if agent == Agent::OpenCode {
            connector.extra_env = vec!["STRATUM_TEST_EXTRA".to_owned()];
        }
        let run = connector
            .run(
                &request(dir.path(), Duration::from_secs(10)),
                &CancellationToken::new(),
            )
            .await?;
        assert!(matches!(run.outcome, Outcome::Answered { .. }), "{agent:?}");
        let env = std::fs::read_to_string(dir.path().join("env.txt"))?;
        let names: Vec<&str> = env
            .lines()
            .filter_map(|line| line.split('=').next())
            .collect();
        let has = |name: &str| names.contains(&name);
        assert!(
            !has("STRATUM_TEST_SECRET") && !has("STRATUM_AGENTS_ENV_CHILD"),
            "{agent:?}: {env}"
        );
        assert!(has("PATH") && has("LC_ALL"), "{agent:?}: {env}");
        assert_eq!(
            has("ANTHROPIC_API_KEY"),
            agent == Agent::Claude,
            "{agent:?}: {env}"
        );
        assert_eq!(
            has("OPENAI_API_KEY"),
            agent == Agent::Codex,
            "{agent:?}: {env}"
        );
        assert_eq!(
            has("STRATUM_TEST_EXTRA"),
            agent == Agent::OpenCode,
            "{agent:?}: {env}"
        );
    }
    Ok(())
}
