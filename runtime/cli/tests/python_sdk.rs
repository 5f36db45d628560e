//! `stratum-mcp` driven by a second client: the official Python MCP SDK, the one many agent
//! frameworks build on, with its default output validation on (every answer checked against
//! its tool's `outputSchema`). The cases are Python scripts in `tests/python/`, over the
//! helpers of `tests/python/stratum_sdk.py`: flows, agent runs and background flows, fan-outs
//! the client runs and fan-outs the server runs (fake agents editing a temporary git
//! repository), `stratum_judge`, and gates the person decides in the client's form: with the
//! pinned 1.x over 2025-11-25 (`elicitation/create`), and with the SDK 2.x over 2026-07-28 on
//! stdio and HTTP (`input_required` rounds). `scripts/ensure-python-mcp` installs each SDK
//! from the registry into its own environment when it is missing (the tests are never
//! skipped).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The SDK 2.x, which speaks 2026-07-28 (`server/discover`, `InputRequiredResult` rounds), in
/// an environment of its own.
const SDK_2: (&str, &str) = ("mcp==2.3.0", "target/python-mcp-2.3.0");

/// The Python interpreter with the pinned SDK, from `scripts/ensure-python-mcp`.
fn python() -> PathBuf {
    python_with(None)
}

/// The Python interpreter with `(package, venv)` instead of the pinned SDK (`venv` relative to
/// the repository), from `scripts/ensure-python-mcp`.
fn python_with(sdk: Option<(&str, &str)>) -> PathBuf {
    let script = repository().join("scripts/ensure-python-mcp");
    let mut command = Command::new(&script);
    if let Some((package, venv)) = sdk {
        command
            .env("ENSURE_PYTHON_MCP_PACKAGE", package)
            .env("ENSURE_PYTHON_MCP_VENV", repository().join(venv));
    }
    let output = command.output().expect("scripts/ensure-python-mcp runs");
    assert!(
        output.status.success(),
        "scripts/ensure-python-mcp could not provide the Python MCP SDK:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        !path.is_empty(),
        "scripts/ensure-python-mcp printed no interpreter"
    );
    PathBuf::from(path)
}

/// Runs `tests/python/SCRIPT ARGS` with the SDK's interpreter; panics with its output unless
/// it exits 0.
fn run_python(script: &str, args: &[&Path]) -> Output {
    run_python_with_path(script, args, None)
}

/// [`run_python`] with `PATH` set to `path` when given (the server inherits it).
fn run_python_with_path(script: &str, args: &[&Path], path: Option<&std::ffi::OsStr>) -> Output {
    run_script(python(), script, args, path)
}

/// Runs `tests/python/SCRIPT ARGS` with `interpreter`; panics with its output unless it exits 0.
fn run_script(
    interpreter: PathBuf,
    script: &str,
    args: &[&Path],
    path: Option<&std::ffi::OsStr>,
) -> Output {
    let script_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let mut command = Command::new(interpreter);
    command
        .arg(&script_path)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{script}: {error}"));
    assert!(
        output.status.success(),
        "{script} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn the_python_sdk_drives_flows_over_stdio_with_output_validation_on() {
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let output = run_python(
        "flows_over_stdio.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            work.path(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok sentiment\nok reviewed_work\nok refused_calls\n"
    );
}

#[test]
fn the_python_sdk_runs_agents_and_background_flows_over_stdio() {
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let bin = tempfile::tempdir().expect("fake agent dir");
    stratum_test_support::fake_agent::claude(bin.path(), &["```json\n{\"n\": 1}\n```"]);
    let mut path = std::ffi::OsString::from(bin.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let output = run_python_with_path(
        "agents_over_stdio.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            work.path(),
        ],
        Some(&path),
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok agent_run\nok flow_run_bg\nok refused_calls\n"
    );
}

#[test]
fn the_python_sdk_reports_a_fan_out_the_agent_runs_over_stdio() {
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let output = run_python(
        "fan_out_over_stdio.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            work.path(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok consumer_dispatch\nok refused_reports\n"
    );
}

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_python_sdk_follows_a_fan_out_the_server_runs_over_stdio() {
    use stratum_test_support::fake_agent::{Format, TaskAction, task_agent};
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let agents = tempfile::tempdir().expect("fake agent dir");
    let root = work.path().canonicalize().expect("work dir is canonical");
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("shared.txt"), "base\n").expect("a file to commit");
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    // Each task writes `<id>.txt` in its worktree and answers its summary.
    let script: Vec<(&str, Vec<TaskAction>)> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|task| {
            let answer = format!("Done.\n```json\n{{\"summary\": \"{task}\"}}\n```");
            let action = TaskAction::edit(&format!("{task}.txt"), &format!("from {task}"), &answer);
            (task, vec![action])
        })
        .collect();
    task_agent(agents.path(), Format::Claude, &script);
    let mut path = std::ffi::OsString::from(agents.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let output = run_python_with_path(
        "server_dispatch_over_stdio.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            &root,
        ],
        Some(&path),
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok sequential_apply\nok manual_merge\n"
    );
    // Every task ran once, in a worktree the server made under its home.
    let calls = std::fs::read_to_string(agents.path().join("calls")).expect("the agent ran");
    let worktrees = home
        .path()
        .join("worktrees")
        .canonicalize()
        .expect("the server made its worktrees directory");
    let mut ran: Vec<&str> = calls
        .lines()
        .filter_map(|line| line.split(' ').next())
        .collect();
    ran.sort_unstable();
    assert_eq!(ran, ["a", "b", "c", "d"], "{calls}");
    for line in calls.lines() {
        let cwd = line.splitn(3, ' ').nth(2).unwrap_or_default();
        assert!(Path::new(cwd).starts_with(&worktrees), "{cwd}");
    }
}

#[test]
fn the_python_sdk_gets_a_binding_verdict_from_stratum_judge_over_stdio() {
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let output = run_python(
        "judge_over_stdio.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            work.path(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok not_met_then_met\nok refused_calls\n"
    );
}

#[test]
fn the_python_sdk_answers_a_gate_s_form_as_the_person_over_stdio() {
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let output = run_python(
        "gate_elicitation_over_stdio.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            work.path(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok approve_when_reached\nok approve_in_gate_wait\nok declined\n"
    );
}

#[test]
fn the_python_sdk_2_answers_a_gate_s_form_on_2026_07_28_over_stdio_and_http() {
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let output = run_script(
        python_with(Some(SDK_2)),
        "gate_form_round_trip.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            work.path(),
        ],
        None,
    );
    // Each line names the version the SDK negotiated in its default mode (`server/discover`).
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok approve_in_form 2026-07-28\n\
         ok declined 2026-07-28\n\
         ok altered_state 2026-07-28\n\
         ok http_approve_in_form 2026-07-28\n"
    );
}
