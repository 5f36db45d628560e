//! `stratum-mcp run` and `stratum-mcp worker` as real processes, with a fake Claude CLI
//! (`stratum_test_support::fake_agent`): a flow run to its end; a worker killed with `kill -9`
//! mid-step, its flow taken over once the lease expires, its agent's process group ended, and
//! every step in the audit exactly once; three workers on one PostgreSQL driving 30 flows of
//! 20 steps with no step done twice.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

mod terminal;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stratum_runtime::ids::FlowId;
use stratum_runtime::store::RunStatus;
use stratum_runtime::{Config, Runtime, Store};
use stratum_test_support::fake_agent;

const BIN: &str = env!("CARGO_BIN_EXE_stratum-mcp");

/// Where a process finds the store: `--db PATH` or `--database-url URL`.
#[derive(Clone)]
enum At {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl At {
    fn args(&self) -> Vec<String> {
        match self {
            At::Sqlite(path) => vec!["--db".to_owned(), path.display().to_string()],
            At::Postgres(url) => vec!["--database-url".to_owned(), url.clone()],
        }
    }

    fn open(&self) -> Arc<dyn Store> {
        match self {
            At::Sqlite(path) => Arc::new(stratum_store_sqlite::SqliteStore::open(path).unwrap()),
            At::Postgres(url) => {
                Arc::new(stratum_store_postgres::PostgresStore::connect(url).unwrap())
            }
        }
    }
}

fn stores(dir: &Path) -> Vec<(&'static str, At)> {
    vec![
        ("sqlite", At::Sqlite(dir.join("stratum.db"))),
        (
            "postgres",
            At::Postgres(stratum_test_support::postgres::database_url()),
        ),
    ]
}

use stratum_test_support::unattended::{chain_spec as spec, process_gone};

fn worker(at: &At, dir: &Path, lease_s: u64) -> Child {
    Command::new(BIN)
        .args(at.args())
        .args(["worker", "--lease", &lease_s.to_string(), "--claude"])
        .arg(dir.join("claude"))
        .arg("--root")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts `count` flows of `spec` and enrolls them for workers.
fn enroll(store: &Arc<dyn Store>, spec: &str, count: usize) -> Vec<FlowId> {
    let runtime = Runtime::new(store.clone(), Config::default());
    stratum_test_support::unattended::start_enrolled(&runtime, spec, None, &json!({}), count)
}

fn audit(store: &Arc<dyn Store>, id: &FlowId) -> Value {
    Runtime::new(store.clone(), Config::default())
        .call(&stratum_runtime::Command::Audit {
            flow_id: id.to_string(),
        })
        .unwrap()
        .to_json()
}

/// Waits until every flow finished; panics past `limit`.
fn wait_finished(store: &Arc<dyn Store>, flows: &[FlowId], limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        let open: Vec<&FlowId> = flows
            .iter()
            .filter(|id| audit(store, id)["status"] == "in_progress")
            .collect();
        if open.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "{} flow(s) still running after {limit:?}",
            open.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each step of the audit's trace exactly once, in order, each at its first attempt unless
/// `retried` says otherwise.
fn steps_once(audit: &Value, steps: usize) {
    let ids: Vec<&str> = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["step_id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..steps).map(|at| format!("s{at}")).collect();
    assert_eq!(ids, expected, "{audit}");
}

fn gone(pid: u32) -> bool {
    process_gone(u64::from(pid))
}

fn terminate(child: Child) -> String {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let output = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn run_drives_a_flow_to_its_end_and_prints_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    fake_agent::claude(dir.path(), &["```json\n{\"n\": 1}\n```"]);
    std::fs::write(dir.path().join("flow.stratum.yaml"), spec(3)).unwrap();
    for (kind, at) in stores(dir.path()) {
        let output = Command::new(BIN)
            .args(at.args())
            .arg("run")
            .arg(dir.path().join("flow.stratum.yaml"))
            .arg("--claude")
            .arg(dir.path().join("claude"))
            .arg("--root")
            .arg(dir.path())
            .arg("--json")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{kind}: {stderr}");
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(answer["status"], "complete", "{kind}: {answer}");
        steps_once(&answer["audit"], 3);
        let id = FlowId::parse(answer["flow_id"].as_str().unwrap()).unwrap();
        let runs = at.open().agent_runs(Some(&id), 10).unwrap();
        assert_eq!(runs.len(), 3, "{kind}");

        // The operator sees the runs and the drive.
        let query = |args: &[&str]| -> Value {
            let output = Command::new(BIN)
                .args(at.args())
                .arg("query")
                .args(args)
                .output()
                .unwrap();
            assert!(output.status.success(), "{kind}: {args:?}");
            serde_json::from_slice(&output.stdout).unwrap()
        };
        let listed = query(&["runs", "--flow", id.as_str()]);
        assert_eq!(listed.as_array().unwrap().len(), 3, "{kind}: {listed}");
        assert_eq!(listed[0]["step"], "s2", "newest first: {listed}");
        let one = query(&["run", listed[2]["id"].as_str().unwrap()]);
        assert_eq!(one["status"], "answered");
        assert_eq!(one["result"], json!({"n": 1}));
        let drives = query(&["drives"]);
        assert_eq!(drives[0]["state"], "done", "{kind}: {drives}");
        assert_eq!(drives[0]["note"], "complete");
    }
}

#[test]
fn a_worker_killed_mid_step_is_taken_over_once_its_lease_expires() {
    for (kind, at) in stores(tempfile::tempdir().unwrap().keep().as_path()) {
        let dir = tempfile::tempdir().unwrap();
        // The second step's first run hangs; every other run answers at once.
        fake_agent::claude(
            dir.path(),
            &[
                "```json\n{\"n\": 1}\n```",
                "HANG",
                "```json\n{\"n\": 2}\n```",
            ],
        );
        let store = at.open();
        let flows = enroll(&store, &spec(4), 1);
        let first = worker(&at, dir.path(), 2);
        let hung = dir.path().join("hung.pid");
        let until = Instant::now() + Duration::from_secs(60);
        while !hung.exists() {
            assert!(Instant::now() < until, "{kind}: the agent never hung");
            std::thread::sleep(Duration::from_millis(50));
        }
        let agent: u32 = std::fs::read_to_string(&hung)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // kill -9 of the worker: its lease stops being renewed; its agent keeps running.
        let mut first = first;
        first.kill().unwrap();
        first.wait().unwrap();
        assert!(!gone(agent), "{kind}: the orphaned agent still runs");

        let second = worker(&at, dir.path(), 2);
        wait_finished(&store, &flows, Duration::from_secs(60));
        let log = terminate(second);
        let audit = audit(&store, &flows[0]);
        assert_eq!(audit["status"], "complete", "{kind}: {audit}\n{log}");
        steps_once(&audit, 4);
        // The taker-over ended the dead driver's agent and recorded why.
        let until = Instant::now() + Duration::from_secs(15);
        while !gone(agent) {
            assert!(
                Instant::now() < until,
                "{kind}: the orphaned agent {agent} was never ended: {:#?}",
                store.agent_runs(Some(&flows[0]), 20).unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let runs = store.agent_runs(Some(&flows[0]), 20).unwrap();
        let abandoned: Vec<_> = runs
            .iter()
            .filter(|run| run.status == RunStatus::Abandoned)
            .collect();
        assert_eq!(abandoned.len(), 1, "{kind}: {runs:#?}");
        assert_eq!(abandoned[0].step.as_deref(), Some("s1"));
        assert!(
            abandoned[0]
                .reason
                .as_deref()
                .unwrap()
                .contains("ended the process group"),
            "{kind}: {:?}",
            abandoned[0].reason
        );
        assert_eq!(
            runs.iter()
                .filter(|run| run.status == RunStatus::Answered)
                .count(),
            4,
            "{kind}: one answered run per step"
        );
    }
}

#[test]
fn three_workers_on_one_postgres_drive_thirty_flows_of_twenty_steps_once_each() {
    let dir = tempfile::tempdir().unwrap();
    fake_agent::claude(dir.path(), &["```json\n{\"n\": 1}\n```"]);
    let at = At::Postgres(stratum_test_support::postgres::database_url());
    let store = at.open();
    let flows = enroll(&store, &spec(20), 30);
    let workers: Vec<Child> = (0..3).map(|_| worker(&at, dir.path(), 10)).collect();
    wait_finished(&store, &flows, Duration::from_secs(600));
    let logs: Vec<String> = workers.into_iter().map(terminate).collect();
    for id in &flows {
        let audit = audit(&store, id);
        assert_eq!(audit["status"], "complete", "{audit}\n{logs:?}");
        steps_once(&audit, 20);
        assert!(
            audit["trace"]
                .as_array()
                .unwrap()
                .iter()
                .all(|record| record["attempts"] == 1),
            "{audit}"
        );
    }
    let runs = store.agent_runs(None, 10_000).unwrap();
    assert_eq!(runs.len(), 600, "one agent run per step, none twice");
    assert!(runs.iter().all(|run| run.status == RunStatus::Answered));
    // Every worker took part.
    let owners: std::collections::BTreeSet<&str> = runs
        .iter()
        .map(|run| {
            run.owner
                .rsplit_once('/')
                .map_or("", |(process, _)| process)
        })
        .collect();
    assert_eq!(owners.len(), 3, "{owners:?}");
}

#[test]
fn serve_runs_workers_in_process() {
    let dir = tempfile::tempdir().unwrap();
    fake_agent::claude(dir.path(), &["```json\n{\"n\": 3}\n```"]);
    let at = At::Sqlite(dir.path().join("stratum.db"));
    let store = at.open();
    let flows = enroll(&store, &spec(3), 2);
    let mut path = std::ffi::OsString::from(dir.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let serve = Command::new(BIN)
        .args(at.args())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--root",
        ])
        .arg(dir.path())
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_finished(&store, &flows, Duration::from_secs(60));
    let log = terminate(serve);
    assert!(log.contains("2 worker(s) drive enrolled flows"), "{log}");
    for id in &flows {
        let audit = audit(&store, id);
        assert_eq!(audit["status"], "complete", "{audit}\n{log}");
        steps_once(&audit, 3);
    }
}

#[test]
fn watch_tells_each_agent_run_as_it_starts_and_ends() {
    let dir = tempfile::tempdir().unwrap();
    fake_agent::claude(dir.path(), &["```json\n{\"n\": 1}\n```"]);
    let at = At::Sqlite(dir.path().join("stratum.db"));
    let store = at.open();
    let flows = enroll(&store, &spec(2), 1);
    let watch = Command::new(BIN)
        .args(at.args())
        .args(["watch", "--json", "--interval", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let worker = worker(&at, dir.path(), 10);
    wait_finished(&store, &flows, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));
    terminate(worker);
    let _ = Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status();
    let output = watch.wait_with_output().unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let agents: Vec<(String, String)> = lines
        .iter()
        .filter(|line| line["kind"].as_str().unwrap().starts_with("agent"))
        .map(|line| {
            (
                line["kind"].as_str().unwrap().to_owned(),
                line["step_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("agent_started", "s0"),
        ("agent_ended", "s0"),
        ("agent_started", "s1"),
        ("agent_ended", "s1"),
    ]
    .iter()
    .map(|(kind, step)| ((*kind).to_owned(), (*step).to_owned()))
    .collect();
    assert_eq!(agents, expected, "{lines:#?}");
    let ended = lines
        .iter()
        .find(|line| line["kind"] == "agent_ended")
        .unwrap();
    assert!(
        ended["detail"]
            .as_str()
            .unwrap()
            .starts_with("answered run "),
        "{ended}"
    );
    // In the order things happened: a step's agent ends before the step is done.
    let kinds: Vec<&str> = lines
        .iter()
        .filter(|line| line["step_id"] == "s0")
        .map(|line| line["kind"].as_str().unwrap())
        .collect();
    let ended_at = kinds
        .iter()
        .position(|kind| *kind == "agent_ended")
        .unwrap();
    let done_at = kinds.iter().position(|kind| *kind == "done").unwrap();
    assert!(ended_at < done_at, "{kinds:?}");
}

#[test]
fn sigterm_lets_a_worker_finish_its_step_then_hand_the_flow_back() {
    let dir = tempfile::tempdir().unwrap();
    fake_agent::claude(
        dir.path(),
        &["SLOW:```json\n{\"n\": 1}\n```", "```json\n{\"n\": 2}\n```"],
    );
    let at = At::Sqlite(dir.path().join("stratum.db"));
    let store = at.open();
    let flows = enroll(&store, &spec(2), 1);
    let first = worker(&at, dir.path(), 30);
    let slow = dir.path().join("slow.pid");
    let until = Instant::now() + Duration::from_secs(10);
    while !slow.exists() {
        if Instant::now() > until {
            let log = terminate(first);
            panic!(
                "the agent never started: {log}\n{:#?}",
                store.agent_runs(None, 5).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGTERM mid-step: the step under way finishes and is reported, then the worker exits.
    let started = Instant::now();
    let log = terminate(first);
    assert!(started.elapsed() < Duration::from_secs(20), "{log}");
    assert!(log.contains("stopping after the step under way"), "{log}");
    let midway = audit(&store, &flows[0]);
    assert_eq!(midway["status"], "in_progress", "{midway}");
    steps_once(&midway, 1);
    let drive = store.drive(&flows[0]).unwrap().unwrap();
    assert_eq!(
        drive.owner, None,
        "handed back at once, not left to its lease"
    );
    // Another worker goes on from there.
    let second = worker(&at, dir.path(), 30);
    wait_finished(&store, &flows, Duration::from_secs(60));
    terminate(second);
    steps_once(&audit(&store, &flows[0]), 2);
}

#[test]
fn what_agents_wrote_reaches_a_terminal_as_text_never_as_control_sequences() {
    use stratum_runtime::store::AgentRun;
    let home = tempfile::tempdir().unwrap();
    let store = stratum_store_sqlite::SqliteStore::open(home.path().join("stratum.db")).unwrap();
    let mut run = AgentRun::starting(
        "00000000000000e1".to_owned(),
        "claude",
        "vm/1/0000beef",
        "vm",
        stratum_runtime::now_ms(),
    );
    run.status = RunStatus::AgentError;
    run.reason = Some("boom \u{1b}]0;PWNED\u{7}\u{1b}[2K\rfake".to_owned());
    run.stderr_tail = "warn \u{1b}[8mhidden\u{202e}desrever\nnext line".to_owned();
    run.events = vec!["{\"type\":\"x\u{1b}[31m\"}".to_owned()];
    run.step = Some("st\u{1b}[1mep".to_owned());
    run.finished_ms = Some(run.started_ms);
    store.put_run(&run).unwrap();
    for args in [
        &["query", "run", "00000000000000e1"][..],
        &["query", "runs"][..],
    ] {
        let (code, shown) = terminal::cli_on_terminal(home.path(), args);
        assert_eq!(code, 0, "{args:?}: {shown}");
        terminal::assert_inert(&format!("{args:?}"), &shown);
        assert!(shown.contains("boom"), "{args:?}: {shown}");
    }
}

/// One parallel step over four tasks, each appending a line to a file of its own.
const FAN_OUT: &str = r#"version: "0.3"
contracts:
  Change:
    summary: {type: string}
flows:
  main:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        output_contract: Change
        max_concurrent: 4
        task_timeout: 120
        retries: 2
"#;

fn git(dir: &Path, args: &[&str]) {
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
}

fn fan_out_worker(at: &At, agents: &Path, root: &Path, home: &Path) -> Child {
    Command::new(BIN)
        .args(at.args())
        .args(["worker", "--lease", "2", "--claude"])
        .arg(agents.join("claude"))
        .arg("--root")
        .arg(root)
        .env("STRATUM_HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn fan_out_poll(store: &Arc<dyn Store>, id: &FlowId) -> Value {
    Runtime::new(store.clone(), Config::default())
        .call(&stratum_runtime::Command::ParallelPoll {
            flow_id: id.to_string(),
            step_id: "work".to_owned(),
        })
        .unwrap()
        .to_json()
}

#[test]
fn a_worker_killed_in_the_middle_of_a_fan_out_leaves_every_task_applied_exactly_once() {
    use fake_agent::{Format, TaskAction, task_agent, task_calls};
    for (kind, at) in stores(tempfile::tempdir().unwrap().keep().as_path()) {
        let dir = tempfile::tempdir().unwrap();
        let (root, agents, home) = (
            dir.path().join("project"),
            dir.path().join("agents"),
            dir.path().join("home"),
        );
        for made in [&root, &agents, &home] {
            std::fs::create_dir_all(made).unwrap();
        }
        git(&root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("README"), "base\n").unwrap();
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-q", "-m", "base"]);
        let append = |id: &str| TaskAction::Answer {
            shell: format!("printf 'from {id}\\n' >> {id}.txt"),
            text: format!("```json\n{{\"summary\": \"{id}\"}}\n```"),
        };
        // c hangs on its first run: the worker is killed while it runs and a, b, d are done.
        task_agent(
            &agents,
            Format::Claude,
            &[
                ("a", vec![append("a")]),
                ("b", vec![append("b")]),
                ("c", vec![TaskAction::Hang, append("c")]),
                ("d", vec![append("d")]),
            ],
        );
        let store = at.open();
        let runtime = Runtime::new(store.clone(), Config::default());
        let list: Vec<Value> = ["a", "b", "c", "d"]
            .iter()
            .map(|id| json!({"id": id, "description": id}))
            .collect();
        let tasks = json!({ "tasks": list });
        let flows =
            stratum_test_support::unattended::start_enrolled(&runtime, FAN_OUT, None, &tasks, 1);
        let first = fan_out_worker(&at, &agents, &root, &home);
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let polled = fan_out_poll(&store, &flows[0]);
            if polled["summary"]["complete"] == 3 && agents.join("hung.c").exists() {
                break;
            }
            assert!(
                Instant::now() < until,
                "{kind}: the fan-out never got going: {polled}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let hung: u32 = std::fs::read_to_string(agents.join("hung.c"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let child: u32 = std::fs::read_to_string(agents.join("child.c"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut first = first;
        first.kill().unwrap();
        first.wait().unwrap();
        assert!(!gone(hung), "{kind}: the orphaned task agent still runs");

        let second = fan_out_worker(&at, &agents, &root, &home);
        wait_finished(&store, &flows, Duration::from_secs(90));
        let log = terminate(second);
        let audit = audit(&store, &flows[0]);
        assert_eq!(audit["status"], "complete", "{kind}: {audit}\n{log}");
        for id in ["a", "b", "c", "d"] {
            let text = std::fs::read_to_string(root.join(format!("{id}.txt"))).unwrap_or_default();
            assert_eq!(
                text,
                format!("from {id}\n"),
                "{kind}: {id} applied exactly once"
            );
        }
        assert_eq!(
            task_calls(&agents, "a"),
            1,
            "{kind}: a finished before the kill and was adopted"
        );
        assert_eq!(
            task_calls(&agents, "c"),
            2,
            "{kind}: c ran again under the new worker"
        );
        assert!(
            gone(hung) && gone(child),
            "{kind}: the dead worker's task agent was ended"
        );
        let runs = store.agent_runs(Some(&flows[0]), 20).unwrap();
        assert!(
            runs.iter().any(|run| run.status == RunStatus::Abandoned),
            "{kind}: {runs:#?}"
        );
    }
}
