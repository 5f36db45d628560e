//! The operator commands of the real `stratum-mcp` binary, beside a real server process on
//! the same state database: each command's success and error paths and exit statuses, every
//! JSON answer validated against its published schema (`runtime/cli/schemas/`), and a gate
//! approved from the command line while a server holds the flow at it.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

mod mcp;
mod terminal;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mcp::{McpServer, Protocol, error_type, example, os_user, status};
use serde_json::{Value, json};
#[cfg(unix)]
use terminal::{assert_inert, cli_on_terminal};

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

/// Runs `stratum-mcp ARGS` with its state in `home`, standard input closed.
fn cli(home: &Path, args: &[&str]) -> Output {
    Command::new(mcp::binary())
        .args(args)
        .env("STRATUM_HOME", home)
        .env_remove("STRATUM_DB")
        .env_remove("STRATUM_LOG")
        .current_dir(if home.is_dir() {
            home.to_path_buf()
        } else {
            std::env::temp_dir()
        })
        .stdin(Stdio::null())
        .output()
        .expect("stratum-mcp runs")
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The JSON a command printed, checked against the published schema `file`.
fn json_of(output: &Output, file: &str) -> Value {
    let value: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {}\nstderr: {}",
            stdout(output),
            stderr(output)
        )
    });
    assert_valid(&value, file);
    value
}

fn assert_valid(value: &Value, file: &str) {
    let text = std::fs::read_to_string(schemas_dir().join(file)).expect("published schema");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let problems: Vec<String> = validator
        .iter_errors(value)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect();
    assert!(problems.is_empty(), "{file}: {problems:#?}\n{value:#}");
}

#[test]
fn published_schemas_are_the_generated_ones() {
    for (file, schema) in stratum_mcp::cli::schemas::all() {
        let path = schemas_dir().join(file);
        let generated = format!("{}\n", serde_json::to_string_pretty(&schema).expect("json"));
        if std::env::var_os("STRATUM_UPDATE_SCHEMAS").is_some() {
            std::fs::create_dir_all(schemas_dir()).expect("schemas dir");
            std::fs::write(&path, &generated).expect("write schema");
            continue;
        }
        let published = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            published == generated,
            "{} is not what the types generate; run `STRATUM_UPDATE_SCHEMAS=1 cargo test -p \
             stratum-mcp-cli --test operator_cli` and review the diff",
            path.display()
        );
        jsonschema::draft202012::meta::validate(&schema)
            .unwrap_or_else(|error| panic!("{file} is not a valid schema: {error}"));
    }
}

/// A server with a `reviewed_work` flow waiting at its `review` gate.
async fn flow_at_gate(home: &Path, work: &Path) -> (McpServer, String) {
    let mut server = McpServer::start(home, work, Protocol::Handshake).await;
    let planned = server
        .call(
            "stratum_plan",
            json!({"spec": example("reviewed-work.stratum.yaml"), "flow": "reviewed_work",
                   "inputs": {"text": "t"}}),
        )
        .await;
    let flow = planned["flow_id"].as_str().expect("flow id").to_owned();
    let gate = server
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work",
                   "result": {"result": "r1", "quality_score": 0.9}}),
        )
        .await;
    assert_eq!(status(&gate), "await_gate");
    (server, flow)
}

#[tokio::test]
async fn a_gate_approved_from_the_cli_is_seen_by_the_server() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut server, flow) = flow_at_gate(home.path(), work.path()).await;

    let flows = json_of(
        &cli(home.path(), &["query", "flows"]),
        "query-flows.schema.json",
    );
    assert_eq!(flows[0]["flow_id"], json!(flow));
    assert_eq!(flows[0]["status"], "awaiting_gate");
    assert_eq!(flows[0]["current_step_id"], "review");
    assert_eq!(flows[0]["completed_steps"], 1);
    assert_eq!(flows[0]["_schema_version"], "1");

    let mut gates = json_of(
        &cli(home.path(), &["query", "gates"]),
        "query-gates.schema.json",
    );
    let mut context = gates[0]["context"].take();
    gates[0].as_object_mut().unwrap().remove("context");
    assert_eq!(
        gates,
        json!([{"_schema_version": "1", "flow_id": flow, "flow_name": "reviewed_work",
                "step_id": "review", "function": "review_gate", "on_approve": null,
                "on_revise": "work", "on_kill": null, "timeout": 3600}])
    );
    // With what the person deciding it is shown (the clock's fields aside).
    for clock in ["waiting_since_ms", "remaining_s"] {
        assert!(context[clock].is_u64(), "{context:#}");
        context.as_object_mut().unwrap().remove(clock);
    }
    assert_eq!(
        context,
        json!({"flow_id": flow, "flow_name": "reviewed_work",
               "input": {"text": "{\n  \"text\": \"t\"\n}", "more_chars": 0},
               "step_id": "review", "function": "review_gate", "round": 0,
               "on_approve": null, "on_revise": "work", "on_kill": null, "timeout_s": 3600,
               "outputs": [{"step_id": "work", "skipped": false, "output": {
                   "text": "{\n  \"quality_score\": 0.9,\n  \"result\": \"r1\"\n}",
                   "more_chars": 0}}],
               "outputs_left_out": 0, "decisions": [], "decisions_left_out": 0, "diffs": []})
    );

    // The short id `watch`, `query flows` and the console show names the flow too.
    let short = flow.get(..8).unwrap().to_uppercase();
    let state = json_of(
        &cli(home.path(), &["query", "flow", &short]),
        "query-flow.schema.json",
    );
    assert_eq!(state["flow_id"], flow.as_str(), "{state:#}");
    assert_eq!(state["current_idx"], 1);
    assert_eq!(
        state["ordered_steps"],
        json!([{"id": "work", "function": "do_work", "mode": "step"},
               {"id": "review", "function": "review_gate", "mode": "gate"}])
    );
    assert_eq!(state["step_outputs"]["work"]["result"], "r1");
    assert_eq!(state["records"][0]["type"], "step");

    let approved = cli(
        home.path(),
        &["gate", "approve", &short, "review", "--note", "lgtm"],
    );
    assert_eq!(code(&approved), 0, "{}", stderr(&approved));
    let approved = json_of(&approved, "gate.schema.json");
    assert_eq!(
        approved,
        json!({"_schema_version": "1", "ok": true, "flow_id": flow, "step_id": "review",
               "outcome": "approve", "result": "complete", "actor": os_user()})
    );

    // The server, holding the flow at the gate a moment ago, sees it moved on.
    let again = server
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": flow, "step_id": "review", "outcome": "approve",
                   "rationale": "me too", "resolved_by": "agent"}),
        )
        .await;
    assert_eq!(error_type(&again), "flow_already_complete");
    let resumed = server
        .call("stratum_resume", json!({"flow_id": flow}))
        .await;
    assert_eq!(status(&resumed), "complete");
    let audit = server.call("stratum_audit", json!({"flow_id": flow})).await;
    let gate_record = &audit["trace"][1];
    assert_eq!(
        (
            &gate_record["outcome"],
            &gate_record["rationale"],
            &gate_record["resolved_by"],
            &gate_record["actor"]
        ),
        (
            &json!("approve"),
            &json!("lgtm"),
            &json!("human"),
            &json!(os_user())
        ),
        "the terminal decides as the operating-system user running it"
    );
    assert_eq!(
        audit["started_by"],
        os_user(),
        "a stdio server's flows are its user's"
    );

    // Resolving it again from the command line is a conflict, and changes nothing (`kill`, and
    // `reject`, the reference CLI's word for it).
    let conflict = cli(home.path(), &["gate", "kill", &flow, "review"]);
    assert_eq!(code(&conflict), 2);
    assert_eq!(json_of(&conflict, "gate.schema.json")["conflict"], true);
    let conflict = cli(home.path(), &["gate", "reject", &flow, "review"]);
    assert_eq!(code(&conflict), 2);
    let conflict = json_of(&conflict, "gate.schema.json");
    assert_eq!(conflict["conflict"], true);
    assert_eq!(conflict["error_type"], "flow_already_complete");

    let flows = json_of(
        &cli(home.path(), &["query", "flows"]),
        "query-flows.schema.json",
    );
    assert_eq!(flows[0]["status"], "complete");
    assert_eq!(flows[0]["terminal_status"], "complete");
    assert_eq!(flows[0]["current_step_id"], Value::Null);
    server.stop().await;
}

/// Writes the config file every process on `home` reads (`$STRATUM_HOME/config.toml`).
fn configure(home: &Path, text: &str) {
    std::fs::write(home.join("config.toml"), text).unwrap();
}

/// `gate` under the approval rules of the config file, as the operating-system user running it:
/// refused when that user is not among the approvers or started the flow (self-approval off),
/// counted towards `min_approvals` once, and refused to start on a rule no one could meet.
#[tokio::test]
async fn the_cli_decides_as_the_os_user_under_the_gate_function_s_approval_rules() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let me = os_user();
    configure(
        home.path(),
        "[gates.functions.review_gate]\napprovers = [\"bob\", \"carol\"]\n",
    );
    let (mut server, flow) = flow_at_gate(home.path(), work.path()).await;

    // The agent, over stdio, has no identity the server can vouch for.
    let agent = server
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": flow, "step_id": "review", "outcome": "approve",
                   "rationale": "I checked", "resolved_by": "human"}),
        )
        .await;
    assert_eq!(error_type(&agent), "identity_required", "{agent:#}");
    assert!(
        agent["message"]
            .as_str()
            .unwrap()
            .contains("stratum_gate_wait")
    );

    let refused = cli(home.path(), &["gate", "approve", &flow, "review"]);
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    let refused = json_of(&refused, "gate.schema.json");
    assert_eq!(refused["error_type"], "not_an_approver", "{refused:#}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("`{me}` may not decide")),
        "{message}"
    );
    assert!(message.contains("bob, carol"), "{message}");

    // The user started the flow (through the stdio server): with self-approval off they may
    // send it back, not approve it.
    configure(
        home.path(),
        "[gates.functions.review_gate]\nself_approval = false\n",
    );
    let own = cli(home.path(), &["gate", "approve", &flow, "review"]);
    assert_eq!(code(&own), 2);
    assert_eq!(
        json_of(&own, "gate.schema.json")["error_type"],
        "self_approval"
    );
    let revised = cli(
        home.path(),
        &["gate", "revise", &flow, "review", "--note", "add a summary"],
    );
    assert_eq!(code(&revised), 0, "{}", stderr(&revised));
    assert_eq!(
        json_of(&revised, "gate.schema.json")["result"],
        "execute_step"
    );
    let back = server
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work",
                   "result": {"result": "r2", "quality_score": 0.9}}),
        )
        .await;
    assert_eq!(status(&back), "await_gate", "{back:#}");

    // Two identities must approve: the user's approval is recorded, once.
    configure(
        home.path(),
        "[gates.functions.review_gate]\nmin_approvals = 2\n",
    );
    let first = cli(
        home.path(),
        &["gate", "approve", &flow, "review", "--note", "ok"],
    );
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    assert_eq!(
        json_of(&first, "gate.schema.json"),
        json!({"_schema_version": "1", "ok": true, "flow_id": flow, "step_id": "review",
               "outcome": "approve", "result": "approval_recorded", "actor": me,
               "approvals": 1, "approvals_needed": 1, "counted": true})
    );
    let again = cli(home.path(), &["gate", "approve", &flow, "review"]);
    assert_eq!(code(&again), 0);
    let again = json_of(&again, "gate.schema.json");
    assert_eq!(
        (&again["counted"], &again["approvals"]),
        (&json!(false), &json!(1))
    );
    let still = server
        .call("stratum_resume", json!({"flow_id": flow}))
        .await;
    assert_eq!(status(&still), "await_gate", "{still:#}");
    let state = json_of(
        &cli(home.path(), &["query", "flow", &flow]),
        "query-flow.schema.json",
    );
    assert_eq!(state["started_by"], json!(me), "{state:#}");
    let approval = state["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "approval")
        .unwrap_or_else(|| panic!("no approval record: {state:#}"));
    assert_eq!(
        (
            &approval["identity"],
            &approval["round"],
            &approval["rationale"]
        ),
        (&json!(me), &json!(1), &json!("ok"))
    );

    // A rule no one could meet stops the command before it touches the store.
    configure(
        home.path(),
        "[gates.functions.review_gate]\nmin_approvals = 3\napprovers = [\"bob\"]\n",
    );
    let broken = cli(home.path(), &["gate", "kill", &flow, "review"]);
    assert_eq!(code(&broken), 2);
    assert!(
        stderr(&broken).contains("min_approvals is 3, but only 1 approver is listed"),
        "{}",
        stderr(&broken)
    );
    let still = server
        .call("stratum_resume", json!({"flow_id": flow}))
        .await;
    assert_eq!(status(&still), "await_gate", "{still:#}");
    server.stop().await;
}

#[tokio::test]
async fn the_wrong_gate_or_an_unknown_flow_is_refused_with_its_status() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (server, flow) = flow_at_gate(home.path(), work.path()).await;

    let wrong = cli(home.path(), &["gate", "approve", &flow, "work"]);
    assert_eq!(code(&wrong), 2);
    assert_eq!(
        json_of(&wrong, "gate.schema.json")["error_type"],
        "wrong_step"
    );

    let unknown = "00000000-0000-4000-8000-000000000000";
    let missing = cli(home.path(), &["gate", "approve", unknown, "review"]);
    assert_eq!(code(&missing), 1);
    assert_eq!(
        json_of(&missing, "gate.schema.json"),
        json!({"error": {"code": "NOT_FOUND", "message": format!("Flow '{unknown}' not found")}})
    );
    let missing = cli(home.path(), &["query", "flow", "not-a-uuid"]);
    assert_eq!(code(&missing), 1);
    json_of(&missing, "query-flow.schema.json");

    // A revise sends the flow back; the server's next dispatch is the work step again.
    let revised = cli(
        home.path(),
        &[
            "gate",
            "revise",
            &flow,
            "review",
            "--note",
            "more",
            "--resolved-by",
            "agent",
        ],
    );
    assert_eq!(code(&revised), 0, "{}", stderr(&revised));
    assert_eq!(
        json_of(&revised, "gate.schema.json")["result"],
        "execute_step"
    );
    let usage = cli(home.path(), &["gate", "maybe", &flow, "review"]);
    assert_eq!(code(&usage), 2);
    assert!(
        stderr(&usage).contains("invalid value 'maybe'"),
        "{}",
        stderr(&usage)
    );
    server.stop().await;
}

#[test]
fn queries_on_a_fresh_machine_create_nothing() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let flows = cli(&state, &["query", "flows"]);
    assert_eq!(code(&flows), 0, "{}", stderr(&flows));
    assert_eq!(json_of(&flows, "query-flows.schema.json"), json!([]));
    assert!(!state.exists(), "a query created the state directory");
    let gates = cli(&state, &["query", "gates", "--json"]);
    assert_eq!(json_of(&gates, "query-gates.schema.json"), json!([]));
}

#[tokio::test]
async fn watch_follows_a_flow_until_it_finishes() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (server, flow) = flow_at_gate(home.path(), work.path()).await;
    let watch = Command::new(mcp::binary())
        .args(["watch", &flow, "--json", "--interval", "20"])
        .env("STRATUM_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch starts");
    // Let the watch see the gate waiting before it is resolved.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let approved = cli(home.path(), &["gate", "approve", &flow, "review"]);
    assert_eq!(code(&approved), 0);
    let output = watch.wait_with_output().expect("watch ends by itself");
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let kinds: Vec<String> = stdout(&output)
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).expect("one JSON object a line");
            assert_valid(&event, "watch-event.schema.json");
            format!(
                "{} {}",
                event["kind"].as_str().unwrap_or(""),
                event["step_id"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        ["gate_waiting review", "gate_resolved review", "finished -"]
    );
    let unknown = cli(
        home.path(),
        &["watch", "00000000-0000-4000-8000-000000000000"],
    );
    assert_eq!(code(&unknown), 1);
    server.stop().await;
}

#[tokio::test]
async fn prune_removes_finished_flows_only() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut server, running) = flow_at_gate(home.path(), work.path()).await;
    let finished = server
        .call(
            "stratum_plan",
            json!({"spec": example("sentiment.stratum.yaml"), "flow": "run",
                   "inputs": {"text": "t"}}),
        )
        .await["flow_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let done = server
        .call(
            "stratum_step_done",
            json!({"flow_id": finished, "step_id": "s1",
                   "result": {"label": "positive", "confidence": 0.9}}),
        )
        .await;
    assert_eq!(status(&done), "complete");

    let kept = cli(home.path(), &["prune", "--older-than", "1h"]);
    assert_eq!(code(&kept), 0);
    assert_eq!(
        json_of(&kept, "prune.schema.json")["removed_flows"],
        json!([])
    );

    // What the flows left on disk: judge turns and task worktrees of a real repository, a link
    // out of the home inside a pruned flow's turn, and the running flow's own.
    let outside = work.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), "not the home's").unwrap();
    let turn = home
        .path()
        .join("judge")
        .join(&finished)
        .join("s1")
        .join("turn-1");
    std::fs::create_dir_all(&turn).unwrap();
    std::fs::write(turn.join("verdict.json"), "{}").unwrap();
    std::os::unix::fs::symlink(&outside, turn.join("link")).unwrap();
    let running_turn = home.path().join("judge").join(&running).join("review");
    std::fs::create_dir_all(&running_turn).unwrap();
    let project = work.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("a.txt"), "a\n").unwrap();
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "base"]);
    let worktrees = home.path().join("worktrees");
    for task in ["a", "b"] {
        let dir = worktrees.join(&finished).join("work").join("1").join(task);
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        git(
            &project,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                dir.to_str().unwrap(),
                "HEAD",
            ],
        );
        std::fs::write(dir.join("changed.txt"), task).unwrap();
    }
    let running_tree = worktrees.join(&running).join("work").join("1").join("a");
    std::fs::create_dir_all(&running_tree).unwrap();
    assert_eq!(worktree_count(&project), 3);

    let pruned = cli(home.path(), &["prune", "--older-than", "0s"]);
    assert_eq!(code(&pruned), 0, "{}", stderr(&pruned));
    let pruned = json_of(&pruned, "prune.schema.json");
    assert_eq!(pruned["removed_flows"], json!([finished]));
    assert_eq!(pruned["removed_plans"], 1);
    assert_eq!(pruned["removed_judge_dirs"], 1, "{pruned}");
    assert_eq!(pruned["removed_worktrees"], 2, "{pruned}");
    assert!(pruned.get("problems").is_none(), "{pruned}");
    assert!(!home.path().join("judge").join(&finished).exists());
    assert!(!worktrees.join(&finished).exists());
    assert_eq!(
        worktree_count(&project),
        1,
        "the project's records are pruned"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("keep.txt")).unwrap(),
        "not the home's",
        "a link is removed, never followed"
    );
    assert!(running_turn.is_dir(), "the running flow's turns stay");
    assert!(running_tree.is_dir(), "the running flow's worktrees stay");
    let flows = json_of(
        &cli(home.path(), &["query", "flows"]),
        "query-flows.schema.json",
    );
    assert_eq!(flows.as_array().map(Vec::len), Some(1));
    assert_eq!(flows[0]["flow_id"], json!(running));
    let audit = server
        .call("stratum_audit", json!({"flow_id": finished}))
        .await;
    assert_eq!(error_type(&audit), "flow_not_found");
    let bad = cli(home.path(), &["prune", "--older-than", "soon"]);
    assert_eq!(code(&bad), 2);
    server.stop().await;
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
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

/// How many worktrees `project` records, its own included.
fn worktree_count(project: &Path) -> usize {
    git(project, &["worktree", "list", "--porcelain"])
        .lines()
        .filter(|line| line.starts_with("worktree "))
        .count()
}

#[test]
fn validate_answers_as_stratumc_check() {
    let home = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let clean = cli(
        home.path(),
        &[
            "validate",
            examples.join("sentiment.stratum.yaml").to_str().unwrap(),
        ],
    );
    assert_eq!(code(&clean), 0, "{}", stderr(&clean));
    let broken = home.path().join("broken.stratum.yaml");
    std::fs::write(
        &broken,
        "version: \"0.2\"\nflows:\n  main:\n    steps:\n      - id: a\n        intnet: x\n",
    )
    .unwrap();
    let errors = cli(
        home.path(),
        &["validate", broken.to_str().unwrap(), "--format", "short"],
    );
    assert_eq!(code(&errors), 1);
    assert!(
        stdout(&errors).contains("broken.stratum.yaml:6:9: error[E0011]"),
        "{}",
        stdout(&errors)
    );
    let missing = cli(home.path(), &["validate", "no-such.stratum.yaml"]);
    assert_eq!(code(&missing), 2);
}

#[test]
fn compile_writes_a_spec_that_checks() {
    let home = tempfile::tempdir().unwrap();
    let tasks = home.path().join("tasks");
    std::fs::create_dir(&tasks).unwrap();
    std::fs::write(
        tasks.join("01-notes.md"),
        "# Write the notes\n\n## Acceptance criteria\n- file docs/notes.md exists\n- tests pass\n",
    )
    .unwrap();
    let spec = home.path().join("build.stratum.yaml");
    let compiled = cli(
        home.path(),
        &[
            "compile",
            "tasks",
            "--output",
            spec.to_str().unwrap(),
            "--flow",
            "build",
        ],
    );
    assert_eq!(code(&compiled), 0, "{}", stderr(&compiled));
    let checked = cli(home.path(), &["validate", spec.to_str().unwrap()]);
    assert_eq!(code(&checked), 0, "{}", stdout(&checked));
    let to_stdout = cli(home.path(), &["compile", "tasks"]);
    assert!(stdout(&to_stdout).contains("flows:"));
    let missing = cli(home.path(), &["compile", "nowhere"]);
    assert_eq!(code(&missing), 1);
    assert!(stderr(&missing).contains("nowhere"), "{}", stderr(&missing));
}

#[test]
fn explain_lists_topics_and_explains_each() {
    let home = tempfile::tempdir().unwrap();
    let list = cli(home.path(), &["explain"]);
    assert_eq!(code(&list), 0);
    let topics: Vec<String> = stdout(&list)
        .lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    assert_eq!(topics.len(), stratum_mcp::differences::DIFFERENCES.len());
    for topic in &topics {
        let one = cli(home.path(), &["explain", topic]);
        assert_eq!(code(&one), 0);
        assert!(stdout(&one).contains("The reference:"), "{topic}");
    }
    let unknown = cli(home.path(), &["explain", "retries-exausted"]);
    assert_eq!(code(&unknown), 2);
    assert!(stderr(&unknown).contains("did you mean `retries-exhausted`?"));
}

/// The hook and every diagnostic name codes; a person who installed only the server reads them
/// here, with no `stratumc` at hand.
#[test]
fn explain_explains_diagnostic_codes_too() {
    let home = tempfile::tempdir().unwrap();
    let list = cli(home.path(), &["explain"]);
    assert!(stdout(&list).contains("stratum-mcp explain E0011"));
    for asked in ["E0011", "e0011", "unknown-key"] {
        let one = cli(home.path(), &["explain", asked]);
        assert_eq!(code(&one), 0, "{asked}: {}", stderr(&one));
        let text = stdout(&one);
        assert!(text.starts_with("E0011 (unknown-key): "), "{asked}: {text}");
        assert!(
            text.contains(stratum_compiler::diagnostic::Code::E0011.explanation()),
            "{asked}: the compiler's own explanation"
        );
    }
}

#[test]
fn output_closed_early_ends_quietly() {
    let home = tempfile::tempdir().unwrap();
    for args in [&["explain"][..], &["completions", "bash"], &["--help"]] {
        let mut child = Command::new(mcp::binary())
            .args(args)
            .env("STRATUM_HOME", home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts");
        // Close the reading end at once, as `| head -0` would.
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("ends");
        assert!(
            !stderr(&output).contains("panicked"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn every_command_has_help_with_examples_and_exit_statuses() {
    let home = tempfile::tempdir().unwrap();
    for command in [
        "query",
        "gate",
        "watch",
        "prune",
        "validate",
        "compile",
        "explain",
        "completions",
    ] {
        let help = cli(home.path(), &[command, "--help"]);
        assert_eq!(code(&help), 0, "{command}");
        let text = stdout(&help);
        assert!(text.contains("Examples:"), "{command}: {text}");
        if command != "completions" {
            assert!(text.contains("Exit status"), "{command}: {text}");
        }
    }
    let bash = cli(home.path(), &["completions", "bash"]);
    assert!(stdout(&bash).contains("stratum-mcp"));
}

/// A read takes no write option: `--synchronous` (durability of writes) and `--root` (where
/// `ensure`s may read files) are offered by the commands they change, not by `query` or
/// `watch`; the forms the README documents keep working.
#[test]
fn reads_are_not_offered_options_that_only_writes_use() {
    let home = tempfile::tempdir().unwrap();
    let help_of = |args: &[&str]| {
        let help = cli(home.path(), args);
        assert_eq!(code(&help), 0, "{args:?}");
        stdout(&help)
    };
    for read in [
        &["query", "flow", "--help"][..],
        &["query", "flows", "--help"],
        &["query", "--help"],
        &["watch", "--help"],
        &["validate", "--help"],
    ] {
        let text = help_of(read);
        assert!(!text.contains("--synchronous"), "{read:?}: {text}");
        assert!(!text.contains("--root"), "{read:?}: {text}");
    }
    for (write, options) in [
        (&["gate", "--help"][..], &["--synchronous"][..]),
        (&["prune", "--help"], &["--synchronous"]),
        (&["serve", "--help"], &["--synchronous", "--root"]),
        (&["--help"], &["--synchronous", "--root"]),
    ] {
        let text = help_of(write);
        for option in options {
            assert!(text.contains(option), "{write:?} {option}: {text}");
        }
    }
    let refused = cli(home.path(), &["query", "flows", "--synchronous", "full"]);
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    for works in [
        &["--synchronous", "full", "query", "flows", "--json"][..],
        &["--root", ".", "query", "flows", "--json"],
        &["prune", "--synchronous", "full", "--json"],
    ] {
        let output = cli(home.path(), works);
        assert_eq!(code(&output), 0, "{works:?}: {}", stderr(&output));
    }
}

#[test]
fn install_then_uninstall_leaves_a_project_as_it_was() {
    let project = tempfile::tempdir().unwrap();
    let files = [
        (
            ".mcp.json",
            "{\r\n  // our servers\r\n  \"mcpServers\": {\"other\": {\"command\": \"x\"}}\r\n}",
        ),
        ("CLAUDE.md", "# Rules\n\nBe kind.\n"),
        (
            ".claude/settings.json",
            "{\n\t\"hooks\": {\"PostToolUse\": [{\"matcher\": \"Bash\", \"hooks\": []}]},\n\t\"model\": \"x\"\n}\n",
        ),
    ];
    std::fs::create_dir(project.path().join(".claude")).unwrap();
    for (path, text) in files {
        std::fs::write(project.path().join(path), text).unwrap();
    }
    let installed = cli(project.path(), &["install", "--json"]);
    assert_eq!(code(&installed), 0, "{}", stderr(&installed));
    let report: Value = serde_json::from_slice(&installed.stdout).unwrap();
    assert_eq!(report["changed"], true);
    let mcp = std::fs::read_to_string(project.path().join(".mcp.json")).unwrap();
    assert!(
        mcp.contains("\"stratum\"") && mcp.contains("our servers"),
        "{mcp}"
    );
    let again = cli(project.path(), &["install", "--json"]);
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["changed"], false, "a second install changes nothing");

    // Claude Code starts `stratum-mcp` by name: install says so when PATH has none.
    let binary = Path::new(mcp::binary());
    let its_dir = binary.parent().unwrap();
    for (path_var, warned) in [
        (std::ffi::OsString::from("/nonexistent"), true),
        (std::env::join_paths([its_dir]).unwrap(), false),
    ] {
        let installed = Command::new(binary)
            .args(["install", "--json"])
            .env("PATH", &path_var)
            .current_dir(project.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(code(&installed), 0, "{}", stderr(&installed));
        assert_eq!(
            stderr(&installed).contains("`stratum-mcp` is not on PATH"),
            warned,
            "PATH={path_var:?}: {}",
            stderr(&installed)
        );
        if warned {
            assert!(
                stderr(&installed).contains(&its_dir.display().to_string()),
                "the warning names this program's directory: {}",
                stderr(&installed)
            );
        }
    }

    // The hook it registered, run as Claude Code runs it.
    let spec = project.path().join("flow.stratum.yaml");
    std::fs::write(
        &spec,
        "version: \"0.2\"\nflows:\n  m:\n    steps:\n      - id: a\n        intnet: x\n",
    )
    .unwrap();
    let event = json!({"tool_name": "Write", "tool_input": {"file_path": spec}}).to_string();
    let mut hook = Command::new(mcp::binary())
        .args(["hook", "post-tool-use"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut hook.stdin.take().unwrap(), event.as_bytes()).unwrap();
    let hooked = hook.wait_with_output().unwrap();
    assert_eq!(code(&hooked), 2);
    assert!(
        stderr(&hooked).contains("error[E0011]: unknown key `intnet`"),
        "{}",
        stderr(&hooked)
    );

    let removed = cli(project.path(), &["uninstall"]);
    assert_eq!(code(&removed), 0, "{}", stderr(&removed));
    for (path, text) in files {
        assert_eq!(
            std::fs::read_to_string(project.path().join(path)).unwrap(),
            text,
            "{path} is not as it was"
        );
    }
    assert!(!project.path().join(".claude/skills").exists());
}

/// A spec whose names would drive a terminal if printed raw: a flow named to set the window
/// title, erase its own row and print another name over it; a gate step that hides the text
/// after it; a function named with a right-to-left override.
const TERMINAL_ESCAPES_SPEC: &str = r#"version: "0.2"
contracts:
  WorkOutput:
    result: {type: string}
functions:
  "do\u202Ework":
    mode: infer
    intent: "Produce the deliverable"
    input: {text: {type: string}}
    output: WorkOutput
  review_gate:
    mode: gate
flows:
  "rw\e]0;PWNED\a\e[2K\rOTHER-FLOW":
    input: {text: {type: string}}
    output: WorkOutput
    steps:
      - id: work
        function: "do\u202Ework"
        inputs: {text: "$.input.text"}
      - id: "re\e[8mview"
        function: review_gate
        on_approve: ~
        on_revise: work
        on_kill: ~
"#;
const ESCAPING_FLOW: &str = "rw\u{1b}]0;PWNED\u{7}\u{1b}[2K\rOTHER-FLOW";
const ESCAPING_GATE: &str = "re\u{1b}[8mview";

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_notes_reach_a_terminal_as_text_never_as_control_sequences() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut server = McpServer::start(home.path(), work.path(), Protocol::Handshake).await;
    let planned = server
        .call(
            "stratum_plan",
            json!({"spec": TERMINAL_ESCAPES_SPEC, "flow": ESCAPING_FLOW,
                   "inputs": {"text": "t"}}),
        )
        .await;
    let flow = planned["flow_id"].as_str().expect("flow id").to_owned();
    let gate = server
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work", "result": {"result": "r"}}),
        )
        .await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");

    let visible_flow = r"rw\x1b]0;PWNED\x07\x1b[2K\rOTHER-FLOW";
    let queries: [&[&str]; 5] = [
        &["query", "flows"],
        &["query", "gates"],
        &["query", "gates", "--context"],
        &["query", "gates", &flow],
        &["query", "flow", &flow],
    ];
    for args in queries {
        let (code, shown) = cli_on_terminal(home.path(), args);
        assert_eq!(code, 0, "{args:?}: {shown}");
        assert_inert(&format!("{args:?}"), &shown);
        assert!(shown.contains(visible_flow), "{args:?}: {shown}");
    }
    let (_, shown) = cli_on_terminal(home.path(), &["query", "flow", &flow]);
    assert!(shown.contains(r"do\u202ework"), "{shown}");
    assert!(shown.contains(r"re\x1b[8mview"), "{shown}");

    // `watch` follows the flow while its gate is approved with a note that would clear the
    // screen, and stops when the flow finishes.
    let watched = {
        let (home, flow) = (home.path().to_owned(), flow.clone());
        std::thread::spawn(move || cli_on_terminal(&home, &["watch", &flow, "--interval", "100"]))
    };
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (code, shown) = cli_on_terminal(
        home.path(),
        &[
            "gate",
            "approve",
            &flow,
            ESCAPING_GATE,
            "--note",
            "fine\u{1b}[2J\rforged",
        ],
    );
    assert_eq!(code, 0, "{shown}");
    assert_inert("gate approve", &shown);
    let (code, shown) = watched.join().unwrap();
    assert_eq!(code, 0, "{shown}");
    assert_inert("watch", &shown);
    assert!(shown.contains(visible_flow), "{shown}");
    assert!(shown.contains(r"fine\x1b[2J\rforged"), "{shown}");
    server.stop().await;
}

/// `stratum-mcp doctor --json` in `project` (its state in `home`, `PATH` set to `path`).
fn doctor(home: &Path, project: &Path, path: &std::ffi::OsStr) -> (i32, Value) {
    let output = Command::new(mcp::binary())
        .args(["doctor", "--json"])
        .env("STRATUM_HOME", home)
        .env("HOME", project)
        .env("PATH", path)
        .env_remove("STRATUM_DB")
        .env_remove("STRATUM_DATABASE_URL")
        .env_remove("STRATUM_SERVE_URL")
        .env_remove("STRATUM_TOKEN")
        .current_dir(project)
        .stdin(Stdio::null())
        .output()
        .expect("stratum-mcp runs");
    (code(&output), json_of(&output, "doctor.schema.json"))
}

fn check<'v>(report: &'v Value, name: &str) -> &'v Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))
}

#[test]
fn doctor_checks_a_set_up_project_and_says_how_to_fix_what_is_wrong() {
    let project = tempfile::tempdir().unwrap();
    let home = project.path().join("state");
    let binary = Path::new(mcp::binary());
    let on_path = std::env::join_paths([binary.parent().unwrap()]).unwrap();
    let installed = Command::new(binary)
        .args(["install", "--codex", "--json"])
        .env("HOME", project.path())
        .env("PATH", &on_path)
        .current_dir(project.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(&installed), 0, "{}", stderr(&installed));
    // A store a server made: the current schema.
    let queried = cli(
        &home,
        &["token", "create", "--name", "doctor-test", "--json"],
    );
    assert_eq!(code(&queried), 0, "{}", stderr(&queried));

    let (status, report) = doctor(&home, project.path(), &on_path);
    assert_eq!(status, 0, "{report:#}");
    assert_eq!(report["ok"], true);
    for name in ["home", "store", "mcp_json", "hook", "skill", "codex"] {
        assert_eq!(check(&report, name)["status"], "ok", "{name}: {report:#}");
    }
    assert!(
        check(&report, "store")["detail"]
            .as_str()
            .unwrap()
            .contains("(current)"),
        "{report:#}"
    );

    // The registered binary off PATH, the state readable by others: problems with their fixes.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (status, report) = doctor(&home, project.path(), std::ffi::OsStr::new("/nonexistent"));
    assert_eq!(status, 1, "{report:#}");
    assert_eq!(report["ok"], false);
    for name in ["mcp_json", "hook", "codex"] {
        let found = check(&report, name);
        assert_eq!(found["status"], "problem", "{name}: {report:#}");
        assert!(found["fix"].as_str().unwrap().contains("PATH"), "{found:#}");
    }
    #[cfg(unix)]
    assert_eq!(
        check(&report, "home")["fix"],
        format!("chmod 700 {}", home.display()),
        "{report:#}"
    );
}

/// `text` with each of `values` replaced by its name, so that a snapshot holds no id or time.
fn redacted(text: &str, values: &[(&str, &str)]) -> String {
    let mut text = text.replace("\r\n", "\n");
    for (value, name) in values {
        text = text.replace(value, name);
    }
    // The seconds left change while the test runs.
    let mut out = String::new();
    for line in text.lines() {
        match line.split_once("times out in ") {
            Some((before, after)) => {
                let rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
                out.push_str(&format!("{before}times out in N{rest}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(unix)]
#[tokio::test]
async fn query_gates_shows_the_work_before_a_gate_and_why_it_came_back() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut server, flow) = flow_at_gate(home.path(), work.path()).await;
    let revised = cli(
        home.path(),
        &[
            "gate",
            "revise",
            &flow,
            "review",
            "--note",
            "say what r1 is \u{1b}[2J for",
        ],
    );
    assert_eq!(code(&revised), 0, "{}", stderr(&revised));
    let again = server
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work",
                   "result": {"result": "r2: the summary, \u{202e}reversed", "quality_score": 0.95}}),
        )
        .await;
    assert_eq!(status(&again), "await_gate", "{again:#}");

    let gates = json_of(
        &cli(home.path(), &["query", "gates", "--json"]),
        "query-gates.schema.json",
    );
    let context = &gates[0]["context"];
    assert_eq!(context["round"], 1, "{context:#}");
    assert!(
        context["outputs"][0]["output"]["text"]
            .as_str()
            .unwrap()
            .contains("r2: the summary"),
        "{context:#}"
    );
    let decision = &context["decisions"][0];
    assert_eq!(
        (
            &decision["step_id"],
            &decision["round"],
            &decision["outcome"],
            &decision["resolved_by"],
            &decision["rationale"]["text"]
        ),
        (
            &json!("review"),
            &json!(0),
            &json!("revise"),
            &json!("human"),
            &json!("say what r1 is \u{1b}[2J for")
        ),
        "{context:#}"
    );
    // One flow's gate, by the start of its id (and at that step); none at another step; an
    // unknown flow is not found.
    let one = cli(
        home.path(),
        &["query", "gates", &flow[..8], "review", "--json"],
    );
    assert_eq!(code(&one), 0, "{}", stderr(&one));
    assert_eq!(json_of(&one, "query-gates.schema.json"), gates);
    let other = cli(home.path(), &["query", "gates", &flow, "work", "--json"]);
    assert_eq!(json_of(&other, "query-gates.schema.json"), json!([]));
    let unknown = cli(
        home.path(),
        &["query", "gates", "00000000-0000-4000-8000-000000000000"],
    );
    assert_eq!(code(&unknown), 1, "{}", stdout(&unknown));

    // For a person: the context, every name and value inert.
    let (code, shown) = cli_on_terminal(home.path(), &["query", "gates", &flow]);
    assert_eq!(code, 0, "{shown}");
    assert_inert("query gates FLOW", &shown);
    let since = stratum_mcp::cli::watch::utc(context["waiting_since_ms"].as_u64().unwrap());
    let decided = stratum_mcp::cli::watch::utc(decision["at_ms"].as_u64().unwrap());
    let user = os_user();
    insta::assert_snapshot!(redacted(
        &shown,
        // The two may fall in the same second: one name for both. The operator is whoever
        // runs the tests.
        &[
            (&flow, "FLOW"),
            (&since, "TIME"),
            (&decided, "TIME"),
            (&user, "OS_USER")
        ]
    ));
    let (_, listed) = cli_on_terminal(home.path(), &["query", "gates", "--context"]);
    assert!(listed.contains("ON APPROVE"), "the table first: {listed}");
    assert!(listed.contains("Earlier decisions:"), "{listed}");
    server.stop().await;
}
