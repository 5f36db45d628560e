//! What the runtime adds to each task of a server-run `parallel_dispatch` step, and what the
//! sequential merge costs.
//!
//! `drive`: one flow whose only step fans out 50 independent tasks (`isolation: worktree`,
//! `merge: sequential_apply`, `capture_diff: true`), driven to its end with `max_concurrent`
//! 4 and 1, on SQLite (`synchronous=NORMAL`) then PostgreSQL, in a git repository of a handful
//! of committed files. Each task's agent is an instant fake Claude CLI (a shell script that
//! reads its prompt, writes one small file of its own and prints one result event). Each
//! configuration is driven [`REPS`] times after a warm-up, each time in a fresh repository and
//! store: the median and the spread (min–max) of the drive's wall time, split where the last
//! task's result was recorded (its `finished_ms` in the store) into the run phase (worktrees,
//! agents, diffs) and the merge phase (the sequential merge, the worktrees removed, the step
//! evaluated). The runtime's share per task is `run phase / 50` minus the agent alone. Wall
//! time follows whatever else the machine runs, so the CPU time of the drive is given too
//! (`/proc/self/stat`): this process's own (the runtime: scheduling, the store, spawning) and
//! its children's (git and the agents; a PostgreSQL server's is in neither).
//!
//! `breakdown`: the same work done standalone, one task after another, each part timed on its
//! own: the agent spawned as a bare process, through its connector, and through
//! `run_recorded` (its agent-run rows in SQLite); one git command; `git worktree add`, the
//! diff's capture, one patch merged with `Git::apply_all` (and the 50 in one call), a worktree
//! removed (one by one, and the 50 in one `Git::remove_worktrees` as the driver does); and the
//! store commands of a task (`TaskUpdate` running, finished, merging, merged) for 50 and 200
//! tasks on SQLite and PostgreSQL, with the size of the step's row (the whole fan-out state,
//! which every task event rewrites).
//!
//! Run with `cargo bench -p stratum-driver --bench fan_out`; prints a table, then the figures
//! as a Markdown snippet.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a benchmark may unwrap what it built

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stratum_agents::{Agent, Connector, Outcome, Prompt, Request};
use stratum_driver::git::Git;
use stratum_driver::{Driver, Ended, MAX_DIFF_BYTES, StopSignal, Turn, run_recorded};
use stratum_runtime::ids::FlowId;
use stratum_runtime::response::Response;
use stratum_runtime::state::StepState;
use stratum_runtime::store::drives::mint_run_id;
use stratum_runtime::store::{AgentRun, RunStatus};
use stratum_runtime::{Command, Config, Runtime, Store, TaskReport, fresh_seed, now_ms};
use stratum_test_support::unattended::start_enrolled;
use tokio_util::sync::CancellationToken;

/// The tasks of the fan-out.
const TASKS: usize = 50;

/// Measured drives of each configuration (after one warm-up).
const REPS: usize = 5;

/// The concurrency limits compared.
const LIMITS: [u32; 2] = [4, 1];

// ---------------------------------------------------------------------------------------------
// The workload.

/// A spec of one flow per concurrency limit, `fan<limit>`, whose only step fans out
/// `$.input.tasks`.
fn spec() -> String {
    let mut text = String::from(
        "version: \"0.3\"\ncontracts:\n  Change:\n    summary: {type: string}\nflows:\n",
    );
    for limit in LIMITS {
        text.push_str(&format!(
            "  fan{limit}:
    input: {{tasks: {{type: array}}}}
    steps:
      - id: work
        type: parallel_dispatch
        source: \"$.input.tasks\"
        intent_template: \"Task TASK[{{id}}]: {{description}}\"
        agent: claude
        output_contract: Change
        max_concurrent: {limit}
        isolation: worktree
        merge: sequential_apply
        capture_diff: true
        task_timeout: 60
"
        ));
    }
    text
}

fn task_ids(count: usize) -> Vec<String> {
    (0..count).map(|at| format!("t{at:03}")).collect()
}

fn tasks(count: usize) -> Value {
    let tasks: Vec<Value> = task_ids(count)
        .into_iter()
        .map(|id| json!({"description": format!("write task-{id}.txt"), "id": id}))
        .collect();
    json!({ "tasks": tasks })
}

/// A fake `claude` that finds its task in the prompt (`TASK[<id>]`, by the shell's own
/// pattern matching: no other process), writes `task-<id>.txt` where it runs, and answers.
fn instant_agent(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let line = json!({"type": "result", "subtype": "success", "is_error": false,
        "result": "Done.\n```json\n{\"summary\": \"wrote its file\"}\n```",
        "usage": {"input_tokens": 100, "output_tokens": 20}})
    .to_string();
    let path = dir.join("claude");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprompt=$(cat)\nid=${{prompt#*TASK\\[}}\nid=${{id%%\\]*}}\n\
             printf 'written by task %s\\n' \"$id\" > \"task-$id.txt\"\n\
             printf '%s\\n' '{line}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The prompt a task's agent gets, as the driver builds it.
fn prompt(id: &str) -> Prompt {
    Prompt {
        intent: format!("Task TASK[{id}]: write task-{id}.txt"),
        inputs: Value::Null,
        schema: Some(
            json!({"type": "object", "properties": {"summary": {"type": "string"}},
            "required": ["summary"]}),
        ),
        violations: Vec::new(),
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Process::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@example.com"])
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

/// A git repository at `dir/project` with a handful of files committed; its canonical path.
fn project(dir: &Path) -> PathBuf {
    let root = dir.join("project");
    std::fs::create_dir_all(root.join("src")).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(
        root.join("README.md"),
        "# Bench\n\nA project to fan out on.\n",
    )
    .unwrap();
    std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"bench\"\n").unwrap();
    for name in ["lib", "parse", "check", "lower", "run"] {
        let body: String = (0..40).map(|line| format!("// {name} {line}\n")).collect();
        std::fs::write(root.join("src").join(format!("{name}.rs")), body).unwrap();
    }
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    root.canonicalize().unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "SQLite",
            Kind::Postgres => "PostgreSQL",
        }
    }

    fn open(self, dir: &Path) -> Arc<dyn Store> {
        match self {
            Kind::Sqlite => {
                Arc::new(stratum_store_sqlite::SqliteStore::open(dir.join("stratum.db")).unwrap())
            }
            Kind::Postgres => Arc::new(
                stratum_store_postgres::PostgresStore::connect(
                    &stratum_test_support::postgres::database_url(),
                )
                .unwrap(),
            ),
        }
    }
}

fn driver(store: Arc<dyn Store>, root: &Path, worktrees: &Path, claude: &Path) -> Driver {
    let mut driver = Driver::new(Runtime::new(store, Config::default()), root.to_owned());
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = claude.to_owned();
    driver.connectors.insert(Agent::Claude, connector);
    driver.worktrees = worktrees.to_owned();
    driver
}

fn step_state(store: &dyn Store, flow: &FlowId) -> StepState {
    let mut found = None;
    store
        .read(&mut |snapshot| {
            found = snapshot.step(flow, 0)?;
            Ok(())
        })
        .unwrap();
    found.unwrap()
}

// ---------------------------------------------------------------------------------------------
// Clocks.

/// Wall time and CPU time: this process's own (every thread), and that of its children that
/// ended and were waited for (with theirs).
#[derive(Clone, Copy, Default)]
struct Cost {
    wall: Duration,
    own: Duration,
    children: Duration,
}

impl Cost {
    fn per(self, count: usize) -> Cost {
        let count = count as u32;
        Cost {
            wall: self.wall / count,
            own: self.own / count,
            children: self.children / count,
        }
    }

    fn cpu(self) -> Duration {
        self.own + self.children
    }
}

struct Meter {
    wall: Instant,
    own: Duration,
    children: Duration,
}

impl Meter {
    fn start() -> Meter {
        let (own, children) = cpu_times();
        Meter {
            wall: Instant::now(),
            own,
            children,
        }
    }

    fn stop(&self) -> Cost {
        let wall = self.wall.elapsed();
        let (own, children) = cpu_times();
        Cost {
            wall,
            own: own.saturating_sub(self.own),
            children: children.saturating_sub(self.children),
        }
    }
}

/// `utime + stime` and `cutime + cstime` of `/proc/self/stat`, in clock ticks of 10 ms (Linux
/// reports them in `USER_HZ`, which is 100 on every architecture it runs on).
fn cpu_times() -> (Duration, Duration) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // After the command name (in parentheses, which may hold spaces): field 3 onwards.
    let fields: Vec<u64> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .skip(1)
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    let tick = |ticks: u64| Duration::from_millis(ticks * 10);
    // utime, stime, cutime, cstime: fields 14 to 17.
    (tick(fields[10] + fields[11]), tick(fields[12] + fields[13]))
}

/// The mean cost of `each` over `ids`, after a few unmeasured calls.
fn per_task(ids: &[String], mut each: impl FnMut(&str)) -> Cost {
    for id in ids.iter().take(5) {
        each(id);
    }
    let meter = Meter::start();
    for id in ids {
        each(id);
    }
    meter.stop().per(ids.len())
}

/// Median, min and max.
#[derive(Clone, Copy)]
struct Spread {
    median: Duration,
    min: Duration,
    max: Duration,
}

fn spread(mut samples: Vec<Duration>) -> Spread {
    samples.sort();
    Spread {
        median: samples[samples.len() / 2],
        min: samples[0],
        max: samples[samples.len() - 1],
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.median >= Duration::from_secs(1) {
            write!(
                f,
                "{:.2} s ({:.2}–{:.2})",
                self.median.as_secs_f64(),
                self.min.as_secs_f64(),
                self.max.as_secs_f64()
            )
        } else {
            write!(
                f,
                "{:.0} ms ({:.0}–{:.0})",
                ms(self.median),
                ms(self.min),
                ms(self.max)
            )
        }
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

// ---------------------------------------------------------------------------------------------
// The drives.

/// One measured drive.
struct Drive {
    cost: Cost,
    /// From the drive's start to the last task's result recorded.
    run_phase: Duration,
    /// The mean of each task's `finished_ms - started_ms` (worktree, agent, diff).
    in_task: Duration,
    /// The step's row at the end, serialised.
    row_bytes: usize,
}

/// Drives the 50-task fan-out once, in a fresh repository and store under `dir`.
fn drive_once(dir: &Path, kind: Kind, limit: u32, claude: &Path) -> Drive {
    let scratch = tempfile::tempdir_in(dir).unwrap();
    let root = project(scratch.path());
    let store = kind.open(scratch.path());
    let driver = driver(
        store.clone(),
        &root,
        &scratch.path().join("worktrees"),
        claude,
    );
    let flow = start_enrolled(
        &driver.runtime,
        &spec(),
        Some(&format!("fan{limit}")),
        &tasks(TASKS),
        1,
    )
    .remove(0);
    let began_ms = now_ms();
    let meter = Meter::start();
    let ended = driver
        .drive(&flow, Turn::Whole, &StopSignal::new(), &mut ())
        .unwrap();
    let cost = meter.stop();
    let state = step_state(&*store, &flow);
    let fan = state.fan_out.as_ref().unwrap();
    assert_eq!(
        ended,
        Ended::Finished {
            status: "complete".to_owned()
        },
        "{:?}",
        fan.tasks
            .iter()
            .filter(|task| !task.violations.is_empty())
            .map(|task| (&task.id, &task.violations))
            .collect::<Vec<_>>()
    );
    assert_eq!(fan.tasks.len(), TASKS);
    for id in task_ids(TASKS) {
        let file = root.join(format!("task-{id}.txt"));
        assert!(file.exists(), "{} was merged", file.display());
    }
    let last_ms = fan
        .tasks
        .iter()
        .filter_map(|task| task.finished_ms)
        .max()
        .unwrap();
    let in_task_ms: u64 = fan
        .tasks
        .iter()
        .map(|task| task.finished_ms.unwrap() - task.started_ms.unwrap())
        .sum();
    Drive {
        cost,
        run_phase: Duration::from_millis(last_ms.saturating_sub(began_ms)).min(cost.wall),
        in_task: Duration::from_millis(in_task_ms) / TASKS as u32,
        row_bytes: serde_json::to_string(&state).unwrap().len(),
    }
}

/// The figures of one configuration.
struct Row {
    kind: Kind,
    limit: u32,
    total: Spread,
    run_phase: Spread,
    merge_phase: Spread,
    /// Per task, medians.
    run_per_task: Duration,
    in_task: Duration,
    cpu_own: Duration,
    cpu_children: Duration,
    row_bytes: usize,
}

fn measure(dir: &Path, kind: Kind, limit: u32, claude: &Path) -> Row {
    drive_once(dir, kind, limit, claude); // warm-up
    let drives: Vec<Drive> = (0..REPS)
        .map(|_| drive_once(dir, kind, limit, claude))
        .collect();
    let median = |of: &dyn Fn(&Drive) -> Duration| spread(drives.iter().map(of).collect());
    let run_phase = median(&|drive| drive.run_phase);
    let row = Row {
        kind,
        limit,
        total: median(&|drive| drive.cost.wall),
        run_phase,
        merge_phase: median(&|drive| drive.cost.wall.saturating_sub(drive.run_phase)),
        run_per_task: run_phase.median / TASKS as u32,
        in_task: median(&|drive| drive.in_task).median,
        cpu_own: median(&|drive| drive.cost.own).median / TASKS as u32,
        cpu_children: median(&|drive| drive.cost.children).median / TASKS as u32,
        row_bytes: drives[0].row_bytes,
    };
    println!(
        "fan_out/drive/{}/max_concurrent={limit}: total {}, run phase {}, merge phase {}; \
         per task {:.1} ms of the run phase, {:.1} ms from its start to its result, CPU {:.1} ms \
         own + {:.1} ms children",
        kind.name(),
        row.total,
        row.run_phase,
        row.merge_phase,
        ms(row.run_per_task),
        ms(row.in_task),
        ms(row.cpu_own),
        ms(row.cpu_children),
    );
    row
}

// ---------------------------------------------------------------------------------------------
// The breakdown.

/// One part of a task's work, done standalone: its mean cost.
struct Part {
    name: String,
    cost: Cost,
}

/// The store commands of one fan-out size.
struct StoreCost {
    kind: Kind,
    tasks: usize,
    /// Running + Finished, per task.
    run_events: Cost,
    /// Merging + Merged, per task.
    merge_events: Cost,
    row_bytes: usize,
}

struct Breakdown {
    parts: Vec<Part>,
    store: Vec<StoreCost>,
}

impl Breakdown {
    fn part(&self, prefix: &str) -> Cost {
        self.parts
            .iter()
            .find(|part| part.name.starts_with(prefix))
            .unwrap()
            .cost
    }
}

fn breakdown(dir: &Path, claude: &Path) -> Breakdown {
    let scratch = tempfile::tempdir_in(dir).unwrap();
    let cwd = scratch.path().join("agent-cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let cwd = cwd.canonicalize().unwrap();
    let ids = task_ids(TASKS);
    let mut parts = Vec::new();
    let mut part = |name: &str, cost: Cost| {
        println!(
            "fan_out/breakdown/{name}: {:.1} ms ({:.1} ms CPU)",
            ms(cost.wall),
            ms(cost.cpu())
        );
        parts.push(Part {
            name: name.to_owned(),
            cost,
        });
    };

    // The agent as a bare process: spawned, fed its prompt, read to its end.
    part(
        "agent alone (the fake CLI spawned, fed, read)",
        per_task(&ids, |id| {
            let mut child = Process::new(claude)
                .current_dir(&cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = prompt(id).render().unwrap();
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin.as_bytes()).unwrap();
            assert!(child.wait_with_output().unwrap().status.success());
        }),
    );
    // Through its connector, on a current-thread runtime of its own as the driver does it.
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = claude.to_owned();
    part(
        "agent through its connector",
        per_task(&ids, |id| {
            let request = Request::new(prompt(id), &cwd, &cwd);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let run = runtime
                .block_on(connector.run(&request, &CancellationToken::new()))
                .unwrap();
            assert!(
                matches!(run.outcome, Outcome::Answered { .. }),
                "{:?}",
                run.outcome
            );
        }),
    );
    // Through `run_recorded`: its agent-run row written as it starts, spawns and ends.
    let store: Arc<dyn Store> =
        Arc::new(stratum_store_sqlite::SqliteStore::open(scratch.path().join("runs.db")).unwrap());
    part(
        "agent through run_recorded (its agent-run rows in SQLite)",
        per_task(&ids, |id| {
            let request = Request::new(prompt(id), &cwd, &cwd);
            let row = AgentRun::starting(
                mint_run_id(fresh_seed()),
                "claude",
                "bench-owner",
                "bench-host",
                now_ms(),
            );
            let (row, _) =
                run_recorded(&store, &connector, &request, row, &CancellationToken::new()).unwrap();
            assert_eq!(row.status, RunStatus::Answered, "{id}");
        }),
    );

    let root = project(scratch.path());
    let git = Git::default();
    let base = git.head(&root).unwrap();
    // One git command, as a bare process and through `Git` (`run_command`: its own process
    // group, a pidfd, a tokio runtime, the deadline).
    part(
        "one git command (rev-parse), a bare process",
        per_task(&ids, |_| {
            let out = Process::new("git")
                .args([
                    "-c",
                    "core.hooksPath=/dev/null",
                    "-c",
                    "core.fsmonitor=false",
                ])
                .args(["rev-parse", "--verify", "HEAD^{commit}"])
                .current_dir(&root)
                .output()
                .unwrap();
            assert!(out.status.success());
        }),
    );
    part(
        "one git command (rev-parse), through Git",
        per_task(&ids, |_| {
            git.head(&root).unwrap();
        }),
    );

    // The git of each task, in the driver's order: every worktree added (they all exist until
    // the merge is done), each task's change captured, each patch merged onto the project on
    // its own, every worktree removed.
    let worktrees = scratch.path().join("worktrees");
    let dir_of = |id: &str| worktrees.join(id);
    let meter = Meter::start();
    for id in &ids {
        git.add_worktree(&root, &dir_of(id), &base).unwrap();
    }
    part(
        "git worktree add (up to 50 worktrees)",
        meter.stop().per(TASKS),
    );
    for id in &ids {
        let file = dir_of(id).join(format!("task-{id}.txt"));
        std::fs::write(file, format!("written by task {id}\n")).unwrap();
    }
    let meter = Meter::start();
    let diffs: Vec<Vec<u8>> = ids
        .iter()
        .map(|id| {
            git.capture_diff(&dir_of(id), &base, MAX_DIFF_BYTES)
                .unwrap()
        })
        .collect();
    part(
        "diff captured (add -A, diff --cached)",
        meter.stop().per(TASKS),
    );
    let meter = Meter::start();
    for (id, diff) in ids.iter().zip(&diffs) {
        let merged = git.apply_all(&root, &[(id.clone(), diff.clone())]).unwrap();
        assert!(merged.conflicts.is_empty(), "{:?}", merged.conflicts);
    }
    part(
        "one patch merged (Git::apply_all, 8 git commands)",
        meter.stop().per(TASKS),
    );
    // The same patches in one call, onto a fresh copy: what a call per patch adds.
    let copy = project(&scratch.path().join("copy"));
    let patches: Vec<(String, Vec<u8>)> = ids.iter().cloned().zip(diffs.iter().cloned()).collect();
    let meter = Meter::start();
    let merged = git.apply_all(&copy, &patches).unwrap();
    assert!(merged.conflicts.is_empty(), "{:?}", merged.conflicts);
    part(
        "the 50 patches merged in one Git::apply_all, per patch",
        meter.stop().per(TASKS),
    );
    let meter = Meter::start();
    for id in &ids {
        git.remove_worktree(&root, &dir_of(id)).unwrap();
    }
    part(
        "git worktree remove (list, remove, prune)",
        meter.stop().per(TASKS),
    );
    // Added again, then removed in one call (one list, one prune), as the driver does.
    let dirs: Vec<PathBuf> = ids.iter().map(|id| dir_of(id)).collect();
    for dir in &dirs {
        git.add_worktree(&root, dir, &base).unwrap();
    }
    let meter = Meter::start();
    git.remove_worktrees(&root, &dirs).unwrap();
    part(
        "the 50 worktrees removed in one Git::remove_worktrees, per worktree",
        meter.stop().per(TASKS),
    );

    let diff = String::from_utf8(diffs[0].clone()).unwrap();
    let store = [TASKS, 4 * TASKS]
        .into_iter()
        .flat_map(|count| [Kind::Sqlite, Kind::Postgres].map(|kind| (kind, count)))
        .map(|(kind, count)| store_cost(scratch.path(), kind, count, &diff))
        .collect();
    Breakdown { parts, store }
}

/// The store commands of a fan-out of `count` tasks, sent as the driver sends them with
/// `max_concurrent: 1` (each task running then finished, then each merging then merged), with
/// no git and no agent: their cost per task.
fn store_cost(dir: &Path, kind: Kind, count: usize, diff: &str) -> StoreCost {
    let scratch = tempfile::tempdir_in(dir).unwrap();
    let store = kind.open(scratch.path());
    let runtime = Runtime::new(store.clone(), Config::default());
    let flow = start_enrolled(&runtime, &spec(), Some("fan1"), &tasks(count), 1).remove(0);
    let owner = "bench-owner";
    store
        .claim(owner, now_ms(), 600_000, Some(&flow))
        .unwrap()
        .unwrap();
    let call = |command: Command| {
        let answer = runtime.call_as_driver(&command, owner).unwrap();
        assert!(
            matches!(answer, Response::FanOut(_)),
            "{}",
            answer.to_json()
        );
    };
    call(Command::ParallelStart {
        flow_id: flow.to_string(),
        step_id: "work".to_owned(),
        base: Some("0".repeat(40)),
    });
    let update = |task: &str, report: TaskReport| {
        call(Command::TaskUpdate {
            flow_id: flow.to_string(),
            step_id: "work".to_owned(),
            attempt: 1,
            task_id: task.to_owned(),
            report,
        });
    };
    let ids = task_ids(count);
    let meter = Meter::start();
    for id in &ids {
        let run_id = Some(mint_run_id(fresh_seed()));
        update(id, TaskReport::Running { run_id });
        let finished = TaskReport::Finished {
            result: json!({"summary": "wrote its file"}),
            diff: Some(diff.replace("t000", id)),
            usage: Some(json!({"input_tokens": 100, "output_tokens": 20})),
        };
        update(id, finished);
    }
    let run_events = meter.stop().per(count);
    let meter = Meter::start();
    for id in &ids {
        update(id, TaskReport::Merging);
        update(id, TaskReport::Merged);
    }
    let merge_events = meter.stop().per(count);
    let cost = StoreCost {
        kind,
        tasks: count,
        run_events,
        merge_events,
        row_bytes: serde_json::to_string(&step_state(&*store, &flow))
            .unwrap()
            .len(),
    };
    println!(
        "fan_out/breakdown/store/{}/{count} tasks: {:.1} ms (running, finished) + {:.1} ms \
         (merging, merged) per task, step row {} KB",
        kind.name(),
        ms(cost.run_events.wall),
        ms(cost.merge_events.wall),
        cost.row_bytes / 1024
    );
    cost
}

// ---------------------------------------------------------------------------------------------
// The report.

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The load average over 1, 5 and 15 minutes: other work on the machine skews wall times.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The rows of both tables: the drives, then the parts.
struct Tables {
    drives: Vec<[String; 8]>,
    parts: Vec<[String; 3]>,
}

const DRIVE_HEADER: [&str; 8] = [
    "store",
    "max_concurrent",
    "drive",
    "run phase",
    "merge phase",
    "per task",
    "runtime per task",
    "CPU per task: own + children",
];

const PART_HEADER: [&str; 3] = ["per task, standalone, one at a time", "wall", "CPU"];

fn tables(rows: &[Row], breakdown: &Breakdown) -> Tables {
    let agent = breakdown.part("agent alone").wall;
    let drives = rows
        .iter()
        .map(|row| {
            [
                row.kind.name().to_owned(),
                row.limit.to_string(),
                row.total.to_string(),
                row.run_phase.to_string(),
                row.merge_phase.to_string(),
                format!("{:.1} ms", ms(row.run_per_task)),
                format!("{:.1} ms", ms(row.run_per_task) - ms(agent)),
                format!("{:.1} + {:.1} ms", ms(row.cpu_own), ms(row.cpu_children)),
            ]
        })
        .collect();
    let line = |name: String, cost: Cost| {
        [
            name,
            format!("{:.1} ms", ms(cost.wall)),
            format!("{:.1} ms", ms(cost.cpu())),
        ]
    };
    let mut parts: Vec<[String; 3]> = breakdown
        .parts
        .iter()
        .map(|part| line(part.name.clone(), part.cost))
        .collect();
    for cost in &breakdown.store {
        parts.push(line(
            format!(
                "{}: running + finished ({} tasks; step row {} KB at the end)",
                cost.kind.name(),
                cost.tasks,
                cost.row_bytes / 1024
            ),
            cost.run_events,
        ));
        parts.push(line(
            format!(
                "{}: merging + merged ({} tasks)",
                cost.kind.name(),
                cost.tasks
            ),
            cost.merge_events,
        ));
    }
    let sum = |costs: &[Cost]| {
        costs.iter().fold(Cost::default(), |sum, cost| Cost {
            wall: sum.wall + cost.wall,
            own: sum.own + cost.own,
            children: sum.children + cost.children,
        })
    };
    let store = &breakdown.store[0];
    parts.push(line(
        "sum for the run phase: add, run_recorded, capture, 2 SQLite commands".to_owned(),
        sum(&[
            breakdown.part("git worktree add"),
            breakdown.part("agent through run_recorded"),
            breakdown.part("diff captured"),
            store.run_events,
        ]),
    ));
    parts.push(line(
        "sum for the merge phase: apply_all, 2 SQLite commands, removed together".to_owned(),
        sum(&[
            breakdown.part("one patch merged"),
            store.merge_events,
            breakdown.part("the 50 worktrees removed"),
        ]),
    ));
    if let Some(serial) = rows
        .iter()
        .find(|row| row.kind == Kind::Sqlite && row.limit == 1)
    {
        parts.push([
            "measured in the drive (SQLite, max_concurrent 1): run phase / merge phase".to_owned(),
            format!(
                "{:.1} / {:.1} ms",
                ms(serial.run_per_task),
                ms(serial.merge_phase.median / TASKS as u32)
            ),
            String::new(),
        ]);
        parts.push([
            format!(
                "measured in the drive: a task's start to its result (step row {} KB at the end)",
                serial.row_bytes / 1024
            ),
            format!("{:.1} ms", ms(serial.in_task)),
            String::new(),
        ]);
    }
    Tables { drives, parts }
}

fn print_table<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(|name| name.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(at, (cell, width))| {
                let pad = " ".repeat(width - cell.chars().count());
                if at == 0 {
                    format!("{cell}{pad}")
                } else {
                    format!("{pad}{cell}")
                }
            })
            .collect();
        println!("  {}", padded.join("  "));
    };
    line(header.iter().map(|name| (*name).to_owned()).collect());
    for row in rows {
        line(row.to_vec());
    }
}

fn print_markdown<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    println!("| {} |", header.join(" | "));
    let align: Vec<&str> = (0..N)
        .map(|at| if at == 0 { "---" } else { "---:" })
        .collect();
    println!("|{}|", align.join("|"));
    for row in rows {
        println!("| {} |", row.join(" | "));
    }
}

fn report(rows: &[Row], breakdown: &Breakdown, load_before: &str) {
    let tables = tables(rows, breakdown);
    let agent = breakdown.part("agent alone").wall;
    let setting = format!(
        "{TASKS} tasks, `isolation: worktree`, `merge: sequential_apply`, instant fake agents; \
         {} cores, load average {load_before} before and {} after; median (min–max) of {REPS} \
         drives",
        cores(),
        load()
    );
    let notes = format!(
        "per task: the run phase / {TASKS}; runtime per task: that minus the agent alone \
         ({:.1} ms); with max_concurrent 4 the tasks overlap, so it is a share of wall time. \
         The merge phase: the sequential merge, the worktrees removed, the step evaluated. CPU: \
         this process's own (the runtime) and its children's (git, the agents; not PostgreSQL's \
         server)",
        ms(agent)
    );
    println!();
    println!("{setting}");
    print_table(DRIVE_HEADER, &tables.drives);
    println!("  ({notes})");
    println!();
    print_table(PART_HEADER, &tables.parts);
    println!();
    println!("--- Markdown ---");
    println!();
    println!("{setting}:");
    println!();
    print_markdown(DRIVE_HEADER, &tables.drives);
    println!();
    println!("{notes}.");
    println!();
    print_markdown(PART_HEADER, &tables.parts);
}

fn main() {
    // `cargo test --benches` runs this with `--bench`-less arguments: stay quick then.
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let load_before = load();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let claude = instant_agent(dir.path());
    let breakdown = breakdown(dir.path(), &claude);
    let mut rows = Vec::new();
    for kind in [Kind::Sqlite, Kind::Postgres] {
        for limit in LIMITS {
            rows.push(measure(dir.path(), kind, limit, &claude));
        }
    }
    report(&rows, &breakdown, &load_before);
}
