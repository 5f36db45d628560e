//! The agent-run and background-flow tools over stdio with rmcp's client, a fake `claude` on
//! the server's PATH (`stratum_test_support::fake_agent`): a run answered, a background run
//! cancelled with its process group, a flow the server drives (the agent fenced out while it
//! does, the flow taken back with a cancel), and a flow driven to its end and polled.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

mod mcp;

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use mcp::{McpServer, Protocol, error_type, status};
use serde_json::{Value, json};
use stratum_test_support::fake_agent;
use stratum_test_support::unattended::process_gone as gone;

const SPEC: &str = r#"version: "0.2"
contracts:
  Part:
    n: {type: integer}
flows:
  main:
    input: {}
    output: Part
    steps:
      - id: one
        intent: "First"
        output_contract: Part
      - id: two
        intent: "Second"
        output_contract: Part
        depends_on: [one]
"#;

fn path_with(dir: &Path) -> OsString {
    let mut path = OsString::from(dir);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

async fn poll_until(
    server: &mut McpServer,
    tool: &str,
    arguments: Value,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = server.call(tool, arguments.clone()).await;
        if done(&answer) {
            return answer;
        }
        assert!(Instant::now() < until, "{tool} never got there: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn agent_runs_answer_and_background_runs_cancel_with_their_process_group() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    fake_agent::claude(
        bin.path(),
        &[
            "Sure.\n```json\n{\"answer\": 42}\n```",
            "HANG",
            "no json here",
        ],
    );
    let path = path_with(bin.path());
    let mut server =
        McpServer::start_with_path(home.path(), work.path(), Protocol::Handshake, Some(&path))
            .await;

    let answered = server
        .call(
            "stratum_agent_run",
            json!({"prompt": "What is the answer?", "schema": {"type": "object"}}),
        )
        .await;
    assert_eq!(status(&answered), "answered", "{answered}");
    assert_eq!(answered["result"], json!({"answer": 42}));
    assert_eq!(answered["usage"]["input_tokens"], 100);
    let prompts = std::fs::read_to_string(bin.path().join("prompts")).unwrap();
    assert!(prompts.contains("What is the answer?"), "{prompts}");

    let started = server
        .call(
            "stratum_agent_run",
            json!({"prompt": "Think forever", "background": true}),
        )
        .await;
    assert_eq!(status(&started), "bg_started", "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    let running = poll_until(
        &mut server,
        "stratum_agent_poll",
        json!({"run_id": run_id}),
        |answer| answer["pid"].is_u64() && bin.path().join("hung.pid").exists(),
    )
    .await;
    assert_eq!(status(&running), "running", "{running}");
    let pid = running["pid"].as_u64().unwrap();
    let cancelled = server
        .call("stratum_cancel_agent_run", json!({"run_id": run_id}))
        .await;
    assert_eq!(status(&cancelled), "cancelled", "{cancelled}");
    let ended = poll_until(
        &mut server,
        "stratum_agent_poll",
        json!({"run_id": run_id}),
        |answer| answer["status"] != "running",
    )
    .await;
    assert_eq!(status(&ended), "cancelled", "{ended}");
    assert!(gone(pid), "the agent's process {pid} is gone");

    let no_json = server
        .call("stratum_agent_run", json!({"prompt": "Answer badly"}))
        .await;
    assert_eq!(status(&no_json), "no_json", "{no_json}");
    assert_eq!(no_json["result"], Value::Null, "never an empty object");

    for (arguments, argument) in [
        (json!({"prompt": "  "}), "prompt"),
        (json!({"prompt": "x", "agent": "gemini"}), "agent"),
        (json!({"prompt": "x", "timeout": 0}), "timeout"),
    ] {
        let refused = server.refused("stratum_agent_run", arguments).await;
        assert_eq!(refused["argument"], argument, "{refused}");
    }
    let unknown = server
        .refused("stratum_agent_poll", json!({"run_id": "../../etc/passwd"}))
        .await;
    assert_eq!(error_type(&unknown), "run_not_found");
    let outside = server
        .call("stratum_agent_run", json!({"prompt": "x", "cwd": "/"}))
        .await;
    assert_eq!(status(&outside), "crashed", "{outside}");
    assert!(
        outside["reason"]
            .as_str()
            .unwrap()
            .contains("not under the root"),
        "{outside}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_flow_the_server_drives_fences_the_agent_out_until_taken_back() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    fake_agent::claude(bin.path(), &["HANG", "```json\n{\"n\": 1}\n```"]);
    let path = path_with(bin.path());
    let mut server =
        McpServer::start_with_path(home.path(), work.path(), Protocol::Handshake, Some(&path))
            .await;
    let first = server.call("stratum_plan", json!({"spec": SPEC})).await;
    let flow = first["flow_id"].as_str().unwrap().to_owned();
    let started = server
        .call("stratum_flow_run_bg", json!({"flow_id": flow}))
        .await;
    assert_eq!(status(&started), "bg_started", "{started}");
    assert_eq!(started["total_steps"], 2);
    let again = server
        .call("stratum_flow_run_bg", json!({"flow_id": flow}))
        .await;
    assert_eq!(status(&again), "bg_already_running", "{again}");

    let running = poll_until(
        &mut server,
        "stratum_flow_bg_poll",
        json!({"flow_id": flow}),
        |answer| answer["run"]["pid"].is_u64() && bin.path().join("hung.pid").exists(),
    )
    .await;
    assert_eq!(status(&running), "running", "{running}");
    assert_eq!(running["current_step"], "one");
    let pid = running["run"]["pid"].as_u64().unwrap();

    // While the server drives it, the agent's own report is refused and changes nothing.
    let fenced = server
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "one", "result": {"n": 5}}),
        )
        .await;
    assert_eq!(error_type(&fenced), "flow_leased", "{fenced}");

    let cancelled = server
        .call("stratum_flow_cancel_bg", json!({"flow_id": flow}))
        .await;
    assert_eq!(status(&cancelled), "cancelled", "{cancelled}");
    let until = Instant::now() + Duration::from_secs(30);
    while !gone(pid) {
        assert!(Instant::now() < until, "the agent {pid} was never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let polled = poll_until(
        &mut server,
        "stratum_flow_bg_poll",
        json!({"flow_id": flow}),
        |answer| answer["owner"].is_null(),
    )
    .await;
    assert_eq!(status(&polled), "cancelled", "{polled}");
    // Taken back: the agent reports the step itself.
    let next = poll_until(
        &mut server,
        "stratum_step_done",
        json!({"flow_id": flow, "step_id": "one", "result": {"n": 5}}),
        |answer| answer["status"] != "error",
    )
    .await;
    assert_eq!(next["step_id"], "two", "{next}");

    // Handed to the server again, the flow is driven to its end; the poll gives the audit.
    let started = server
        .call("stratum_flow_run_bg", json!({"flow_id": flow}))
        .await;
    assert_eq!(status(&started), "bg_started", "{started}");
    let done = poll_until(
        &mut server,
        "stratum_flow_bg_poll",
        json!({"flow_id": flow}),
        |answer| answer["status"] == "complete",
    )
    .await;
    assert_eq!(done["output"], json!({"n": 1}), "{done}");
    assert_eq!(done["audit"]["status"], "complete", "{done}");
    assert_eq!(done["steps_completed"], 2);
    server.stop().await;
}

/// One JSON-RPC line out, the one line that answers it back.
fn ask(
    stdin: &mut std::process::ChildStdin,
    lines: &std::sync::mpsc::Receiver<String>,
    message: Value,
) -> Value {
    use std::io::Write;
    writeln!(stdin, "{message}").unwrap();
    stdin.flush().unwrap();
    let line = lines
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no answer to {message}"));
    serde_json::from_str(&line).unwrap()
}

#[test]
fn a_server_whose_client_leaves_ends_its_background_work_and_records_it_interrupted() {
    use std::io::{BufRead, Write};
    use stratum_runtime::Store;
    use stratum_runtime::store::{DriveState, RunStatus};
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    fake_agent::claude(bin.path(), &["HANG", "```json\n{\"n\": 1}\n```"]);
    let mut child = std::process::Command::new(mcp::binary())
        .env("STRATUM_HOME", home.path())
        .env_remove("STRATUM_DB")
        .env("PATH", path_with(bin.path()))
        .current_dir(work.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
    };
    ask(
        &mut stdin,
        &lines,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let planned = ask(
        &mut stdin,
        &lines,
        call(1, "stratum_plan", json!({"spec": SPEC})),
    );
    let flow = planned["result"]["structuredContent"]["flow_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let started = ask(
        &mut stdin,
        &lines,
        call(2, "stratum_flow_run_bg", json!({"flow_id": flow})),
    );
    assert_eq!(
        started["result"]["structuredContent"]["status"], "bg_started",
        "{started}"
    );
    let hung = bin.path().join("hung.pid");
    let until = Instant::now() + Duration::from_secs(30);
    while !hung.exists() {
        assert!(Instant::now() < until, "the agent never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let agent: u64 = std::fs::read_to_string(&hung)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    // The client leaves: the server ends the agent, records why, hands the flow back, exits.
    drop(stdin);
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert!(gone(agent), "the agent {agent} was ended");
    let store = stratum_store_sqlite::SqliteStore::open(home.path().join("stratum.db")).unwrap();
    let id = stratum_runtime::ids::FlowId::parse(&flow).unwrap();
    let runs = store.agent_runs(Some(&id), 5).unwrap();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].status, RunStatus::Interrupted, "{runs:#?}");
    let drive = store.drive(&id).unwrap().unwrap();
    assert_eq!(
        drive.state,
        DriveState::Active,
        "still enrolled: a worker takes it over"
    );
    assert_eq!(drive.owner, None, "handed back, not left to its lease");
}
