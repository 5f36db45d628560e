//! Server dispatch of parallel_dispatch steps with real processes, on SQLite and PostgreSQL:
//! fake agents (shell scripts speaking Claude Code's events) edit files in their own git
//! worktrees of a temporary repository; the driver captures each diff, runs the pre-merge
//! check, merges in dependency order onto the project, bounces a conflict to the retry, and
//! ends a task that hangs past its `task_timeout` with its children.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::sync::Arc;

use serde_json::{Value, json};
use stratum_agents::{Agent, Connector};
use stratum_driver::{Driver, Ended, StopSignal, Turn};
use stratum_runtime::ids::FlowId;
use stratum_runtime::{Command, Config, Runtime, Store};
use stratum_test_support::fake_agent::{Format, TaskAction, task_agent, task_calls};
use stratum_test_support::unattended::{process_gone, start_enrolled};

const SPEC: &str = r#"version: "0.3"
contracts:
  Change:
    summary: {type: string}
flows:
  build:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        agent: claude
        output_contract: Change
        max_concurrent: 2
        task_timeout: 60
        retries: 3
  quick:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        require: any
        task_timeout: 2
        retries: 1
  strict:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        output_contract: Change
        task_timeout: 120
        retries: 1
  pipe:
    input: {items: {type: array}}
    steps:
      - id: work
        type: pipeline
        source: "$.input.items"
        max_concurrent: 3
        stages:
          - {intent_template: "Task TASK[{id}]: split {item}", fanout: {max: 2, require: all}}
          - {intent_template: "Task TASK[{id}]: summarise {item}"}
          - {intent_template: "Task TASK[{id}]: join {prevs}", join: true, exit_when: "'stop' in result"}
          - {intent_template: "Task TASK[{id}]: finish {item}", when: "'skip' not in prev"}
  plain:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        task_timeout: 60
        retries: 2
  checked:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        pre_merge_verify: ["test -f ok.txt"]
        retries: 3
"#;

use stratum_test_support::unattended::STORES;

/// A temporary project: a git repository with `shared.txt` committed.
struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    agents: PathBuf,
    worktrees: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Process::new("git")
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

fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let agents = dir.path().join("agents");
    let worktrees = dir.path().join("home").join("worktrees");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&agents).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("shared.txt"), "base\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    Project {
        root: root.canonicalize().unwrap(),
        agents,
        worktrees,
        _dir: dir,
    }
}

fn driver(store: Arc<dyn Store>, project: &Project, claude: PathBuf) -> Driver {
    let runtime = Runtime::new(store, Config::default());
    let mut driver = Driver::new(runtime, project.root.clone());
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = claude;
    driver.connectors.insert(Agent::Claude, connector);
    driver.worktrees = project.worktrees.clone();
    driver
}

fn start(driver: &Driver, flow: &str, tasks: Value) -> FlowId {
    start_enrolled(
        &driver.runtime,
        SPEC,
        Some(flow),
        &json!({"tasks": tasks}),
        1,
    )
    .remove(0)
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

fn poll(driver: &Driver, id: &FlowId) -> Value {
    driver
        .runtime
        .call(&Command::ParallelPoll {
            flow_id: id.to_string(),
            step_id: "work".to_owned(),
        })
        .unwrap()
        .to_json()
}

fn drive(driver: &Driver, id: &FlowId) -> Ended {
    driver
        .drive(id, Turn::Whole, &StopSignal::new(), &mut ())
        .unwrap()
}

fn read(root: &Path, file: &str) -> String {
    std::fs::read_to_string(root.join(file)).unwrap_or_default()
}

fn done(summary: &str) -> String {
    format!("Done.\n```json\n{{\"summary\": \"{summary}\"}}\n```")
}

/// No worktree of ours is left registered in the project.
fn only_main_worktree(root: &Path) {
    let list = git(root, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        list.lines()
            .filter(|line| line.starts_with("worktree "))
            .count(),
        1,
        "{list}"
    );
}

#[test]
fn tasks_run_in_their_worktrees_in_dependency_order_and_merge_into_the_project() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[
                ("a", vec![TaskAction::edit("a.txt", "from a", &done("a"))]),
                ("b", vec![TaskAction::edit("b.txt", "from b", &done("b"))]),
            ],
        );
        let driver = driver(open(), &project, claude);
        let tasks = json!([
            {"id": "a", "description": "write a"},
            {"id": "b", "description": "write b", "depends_on": ["a"]}
        ]);
        let id = start(&driver, "build", tasks);
        let ended = drive(&driver, &id);
        assert_eq!(
            ended,
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        assert_eq!(read(&project.root, "a.txt"), "from a\n", "{kind}");
        assert_eq!(read(&project.root, "b.txt"), "from b\n", "{kind}");
        // b ran after a, each in its own worktree under the server's directory.
        let calls = std::fs::read_to_string(project.agents.join("calls")).unwrap();
        let order: Vec<&str> = calls
            .lines()
            .map(|line| line.split(' ').next().unwrap())
            .collect();
        assert_eq!(order, ["a", "b"], "{kind}: {calls}");
        let worktrees = project.worktrees.canonicalize().unwrap();
        for line in calls.lines() {
            let cwd = line.splitn(3, ' ').nth(2).unwrap();
            assert!(Path::new(cwd).starts_with(&worktrees), "{kind}: {cwd}");
        }
        only_main_worktree(&project.root);
        let polled = poll(&driver, &id);
        assert_eq!(polled["tasks"][0]["merge"], "merged", "{kind}: {polled}");
        let diff = polled["tasks"][1]["diff"].as_str().unwrap();
        assert!(diff.contains("+from b"), "{kind}: {diff}");
        let output = &audit(&driver, &id)["output"];
        assert_eq!(output["outcome"], "complete", "{kind}: {output}");
    }
}

#[test]
fn a_conflicting_task_is_bounced_and_retried_alone() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[
                (
                    "a",
                    vec![TaskAction::edit("shared.txt", "by a", &done("a"))],
                ),
                (
                    "b",
                    vec![
                        TaskAction::edit("shared.txt", "by b", &done("b")),
                        TaskAction::edit("b.txt", "b elsewhere", &done("b again")),
                    ],
                ),
            ],
        );
        let driver = driver(open(), &project, claude);
        let tasks = json!([
            {"id": "a", "description": "edit the shared line"},
            {"id": "b", "description": "edit it too"}
        ]);
        let id = start(&driver, "build", tasks);
        let ended = drive(&driver, &id);
        assert_eq!(
            ended,
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        assert_eq!(
            task_calls(&project.agents, "a"),
            1,
            "{kind}: a was accepted and kept"
        );
        assert_eq!(task_calls(&project.agents, "b"), 2, "{kind}");
        let shared = read(&project.root, "shared.txt");
        assert_eq!(shared, "by a\n", "{kind}: no conflict markers: {shared}");
        assert_eq!(read(&project.root, "b.txt"), "b elsewhere\n", "{kind}");
        let prompts = std::fs::read_to_string(project.agents.join("prompts.b")).unwrap();
        assert!(
            prompts.contains("task 'b' merge conflict on shared.txt"),
            "{kind}: the retry's prompt names the conflict: {prompts}"
        );
        only_main_worktree(&project.root);
    }
}

#[test]
fn a_task_without_a_result_is_re_run_alone_with_its_violation() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[
                (
                    "a",
                    vec![
                        TaskAction::answer("I could not do it."),
                        TaskAction::edit("a.txt", "at last", &done("a")),
                    ],
                ),
                ("b", vec![TaskAction::edit("b.txt", "b", &done("b"))]),
            ],
        );
        let driver = driver(open(), &project, claude);
        let tasks = json!([{"id": "a", "description": "a"}, {"id": "b", "description": "b"}]);
        let id = start(&driver, "build", tasks);
        assert_eq!(
            drive(&driver, &id),
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        assert_eq!(task_calls(&project.agents, "a"), 2, "{kind}");
        assert_eq!(task_calls(&project.agents, "b"), 1, "{kind}");
        assert_eq!(read(&project.root, "a.txt"), "at last\n", "{kind}");
        let prompts = std::fs::read_to_string(project.agents.join("prompts.a")).unwrap();
        assert!(
            prompts.contains("previous attempt at this task was refused"),
            "{kind}: {prompts}"
        );
    }
}

#[test]
fn an_empty_answer_without_a_contract_fails_the_task_and_its_retry_runs_it_again() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[
                (
                    "a",
                    vec![TaskAction::answer(""), TaskAction::answer("a done")],
                ),
                (
                    "b",
                    vec![TaskAction::answer("   "), TaskAction::answer("b done")],
                ),
                ("c", vec![TaskAction::answer("c done")]),
            ],
        );
        let driver = driver(open(), &project, claude);
        let tasks = json!([
            {"id": "a", "description": "a"},
            {"id": "b", "description": "b"},
            {"id": "c", "description": "c"}
        ]);
        let id = start(&driver, "plain", tasks);
        assert_eq!(
            drive(&driver, &id),
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        assert_eq!(task_calls(&project.agents, "a"), 2, "{kind}");
        assert_eq!(task_calls(&project.agents, "b"), 2, "{kind}");
        assert_eq!(task_calls(&project.agents, "c"), 1, "{kind}: c was kept");
        for task in ["a", "b"] {
            let prompts =
                std::fs::read_to_string(project.agents.join(format!("prompts.{task}"))).unwrap();
            assert!(
                prompts.contains(&format!("task '{task}': the agent answered nothing")),
                "{kind}: the retry's prompt says why: {prompts}"
            );
        }
        let polled = poll(&driver, &id);
        let results: Vec<&Value> = polled["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|task| &task["result"])
            .collect();
        assert_eq!(
            results,
            [&json!("a done"), &json!("b done"), &json!("c done")],
            "{kind}: {polled}"
        );
    }
}

#[test]
fn a_task_that_hangs_is_ended_at_its_deadline_with_its_children() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[
                ("a", vec![TaskAction::Hang]),
                ("b", vec![TaskAction::answer(&done("b"))]),
            ],
        );
        let driver = driver(open(), &project, claude);
        let tasks = json!([{"id": "a", "description": "hang"}, {"id": "b", "description": "b"}]);
        let id = start(&driver, "quick", tasks);
        assert_eq!(
            drive(&driver, &id),
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        let child: u64 = read(&project.agents, "child.a").trim().parse().unwrap();
        let leader: u64 = read(&project.agents, "hung.a").trim().parse().unwrap();
        assert!(
            process_gone(child) && process_gone(leader),
            "{kind}: the group was ended"
        );
        let polled = poll(&driver, &id);
        assert_eq!(polled["tasks"][0]["state"], "failed", "{kind}: {polled}");
        let why = polled["tasks"][0]["violations"].to_string();
        assert!(why.contains("time"), "{kind}: {why}");
        only_main_worktree(&project.root);
    }
}

#[test]
fn a_failing_pre_merge_check_bounces_the_task_until_it_passes() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[(
                "a",
                vec![
                    TaskAction::edit("x.txt", "first", "Done, no summary needed."),
                    TaskAction::Answer {
                        shell: "printf 'second\\n' > x.txt; touch ok.txt".to_owned(),
                        text: "Done again.".to_owned(),
                    },
                ],
            )],
        );
        let driver = driver(open(), &project, claude);
        let id = start(&driver, "checked", json!([{"id": "a", "description": "x"}]));
        assert_eq!(
            drive(&driver, &id),
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        assert_eq!(task_calls(&project.agents, "a"), 2, "{kind}");
        assert_eq!(
            read(&project.root, "x.txt"),
            "second\n",
            "{kind}: only the passing diff merged"
        );
        assert!(project.root.join("ok.txt").exists(), "{kind}");
        let prompts = std::fs::read_to_string(project.agents.join("prompts.a")).unwrap();
        assert!(
            prompts.contains("failed pre-merge gate `test -f ok.txt` (exit 1)"),
            "{kind}: {prompts}"
        );
    }
}

#[test]
fn once_require_cannot_be_met_in_the_last_attempt_the_running_siblings_are_ended() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[
                // a fails a second in, once b is surely running.
                (
                    "a",
                    vec![TaskAction::Answer {
                        shell: "sleep 1".to_owned(),
                        text: "No JSON from me.".to_owned(),
                    }],
                ),
                ("b", vec![TaskAction::Hang]),
            ],
        );
        let driver = driver(open(), &project, claude);
        let tasks = json!([{"id": "a", "description": "fail"}, {"id": "b", "description": "hang"}]);
        let id = start(&driver, "strict", tasks);
        let began = std::time::Instant::now();
        let ended = drive(&driver, &id);
        assert_eq!(
            ended,
            Ended::Finished {
                status: "failed".to_owned()
            },
            "{kind}"
        );
        assert!(
            began.elapsed() < std::time::Duration::from_secs(60),
            "{kind}: b was ended, not waited for ({:?})",
            began.elapsed()
        );
        let child: u64 = read(&project.agents, "child.b").trim().parse().unwrap();
        assert!(process_gone(child), "{kind}: b's whole group was ended");
        let polled = poll(&driver, &id);
        assert_eq!(polled["tasks"][1]["state"], "cancelled", "{kind}: {polled}");
        only_main_worktree(&project.root);
    }
}

#[test]
fn a_pipeline_runs_its_fan_out_region_and_decides_when_and_exit_when_between_stages() {
    for (kind, open) in STORES {
        let project = project();
        let mut script: Vec<(String, Vec<TaskAction>)> = Vec::new();
        for item in 0..3 {
            script.push((
                format!("item{item}.stage0"),
                vec![TaskAction::answer("[\"p\", \"q\"]")],
            ));
            for lane in 0..2 {
                script.push((
                    format!("item{item}.stage1.lane{lane}"),
                    vec![TaskAction::answer(&format!("summary {lane}"))],
                ));
            }
        }
        script.push(("item0.stage2".to_owned(), vec![TaskAction::answer("go on")]));
        script.push((
            "item1.stage2".to_owned(),
            vec![TaskAction::answer("stop here")],
        ));
        script.push((
            "item2.stage2".to_owned(),
            vec![TaskAction::answer("skip the rest")],
        ));
        script.push((
            "item0.stage3".to_owned(),
            vec![TaskAction::edit("final.txt", "finished", "Finished.")],
        ));
        let borrowed: Vec<(&str, Vec<TaskAction>)> = script
            .iter()
            .map(|(id, actions)| (id.as_str(), actions.clone()))
            .collect();
        let claude = task_agent(&project.agents, Format::Claude, &borrowed);
        let driver = driver(open(), &project, claude);
        let id = start_enrolled(
            &driver.runtime,
            SPEC,
            Some("pipe"),
            &json!({"items": ["x", "y", "z"]}),
            1,
        )
        .remove(0);
        assert_eq!(
            drive(&driver, &id),
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        assert_eq!(task_calls(&project.agents, "item0.stage3"), 1, "{kind}");
        assert_eq!(
            task_calls(&project.agents, "item1.stage3"),
            0,
            "{kind}: exit_when ended item1"
        );
        assert_eq!(
            task_calls(&project.agents, "item2.stage3"),
            0,
            "{kind}: when skipped item2's stage"
        );
        assert_eq!(read(&project.root, "final.txt"), "finished\n", "{kind}");
        let prompts = std::fs::read_to_string(project.agents.join("prompts.item0.stage2")).unwrap();
        assert!(
            prompts.contains("join [\\\"summary 0\\\",\\\"summary 1\\\"]"),
            "{kind}: {prompts}"
        );
        let output = &audit(&driver, &id)["output"];
        assert_eq!(output["require_satisfied"], true, "{kind}: {output}");
        let states: Vec<String> = poll(&driver, &id)["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|task| {
                format!(
                    "{}={}",
                    task["task_id"].as_str().unwrap(),
                    task["state"].as_str().unwrap()
                )
            })
            .collect();
        assert!(
            states.contains(&"item1.stage3=skipped".to_owned()),
            "{kind}: {states:?}"
        );
        assert!(
            states.contains(&"item2.stage3=skipped".to_owned()),
            "{kind}: {states:?}"
        );
        only_main_worktree(&project.root);
    }
}

const CHAIN_SPEC: &str = r#"version: "0.3"
contracts:
  Change:
    summary: {type: string}
flows:
  chain:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description} after <{prev}>"
        agent: claude
        output_contract: Change
        isolation: none
        task_timeout: 60
"#;

#[test]
fn a_task_reads_its_dependency_s_result_as_prev_when_the_server_runs_it() {
    for (kind, open) in STORES {
        let project = project();
        let claude = task_agent(
            &project.agents,
            Format::Claude,
            &[
                ("a", vec![TaskAction::answer(&done("parsed"))]),
                ("b", vec![TaskAction::answer(&done("printed"))]),
            ],
        );
        let driver = driver(open(), &project, claude);
        let id = start_enrolled(
            &driver.runtime,
            CHAIN_SPEC,
            Some("chain"),
            &json!({"tasks": [
                {"id": "a", "description": "parse"},
                {"id": "b", "description": "print", "depends_on": ["a"]}
            ]}),
            1,
        )
        .remove(0);
        let ended = drive(&driver, &id);
        assert_eq!(
            ended,
            Ended::Finished {
                status: "complete".to_owned()
            },
            "{kind}"
        );
        let first = std::fs::read_to_string(project.agents.join("prompts.a")).unwrap();
        assert!(
            first.contains("Task TASK[a]: parse after <>"),
            "{kind}: {first}"
        );
        // Claude Code reads its prompt as a stream-json event: the quotes are escaped.
        let second = std::fs::read_to_string(project.agents.join("prompts.b")).unwrap();
        assert!(
            second.contains(r#"Task TASK[b]: print after <{\"summary\":\"parsed\"}>"#),
            "{kind}: {second}"
        );
    }
}
