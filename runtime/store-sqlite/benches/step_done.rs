//! What one `step_done` costs on the SQLite store, commit included, in flows of 10 to 10,000
//! steps (it must not grow with the flow), with `synchronous=NORMAL` against `FULL`, and a
//! 1,000-step flow driven from start to finish, with the size of the database it leaves.
//!
//! Each timed iteration is one real transition: the current step of a linear flow completed,
//! the next one dispatched. The flow's last step (which ends the flow and returns its whole
//! trace, so grows with it by design) and the start of the next flow run outside the timing.
//! The databases live under Cargo's target directory, on the disk a real state directory
//! would be on (a tmpfs would make `FULL` look free).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a benchmark may unwrap what it built

use stratum_test_support::linear;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use stratum_compiler::plan::Plan;
use stratum_runtime::{Command, Config, Context, execute};
use stratum_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};

/// A store, a plan, and a flow of it in progress.
struct Driver {
    store: SqliteStore,
    plan: Arc<Plan>,
    steps: usize,
    config: Arc<Config>,
    seed: u128,
    flow: String,
    next: usize,
}

impl Driver {
    fn new(path: &Path, steps: usize, synchronous: Synchronous) -> Driver {
        let options = SqliteOptions {
            synchronous,
            ..SqliteOptions::default()
        };
        let plan = stratum_runtime::compile::plan_from_spec(
            "linear.stratum.yaml",
            &linear::linear_spec(steps),
        )
        .unwrap_or_else(|_| panic!("the {steps}-step spec compiles"));
        let mut driver = Driver {
            store: SqliteStore::open_with(path, options).unwrap(),
            plan: Arc::new(plan),
            steps,
            config: Arc::new(Config::default()),
            seed: 0,
            flow: String::new(),
            next: 0,
        };
        driver.start();
        driver
    }

    fn call(&mut self, command: &Command) -> stratum_runtime::Response {
        self.seed += 1;
        let ctx = Context::new(1_767_225_600_000, self.seed, self.config.clone());
        execute(&self.store, command, &ctx).unwrap()
    }

    fn start(&mut self) {
        let response = self.call(&Command::Start {
            plan: self.plan.clone(),
            flow: None,
            inputs: linear::inputs(),
            started_by: None,
        });
        assert_eq!(response.status(), "execute_step");
        self.flow = response.to_json()["flow_id"].as_str().unwrap().to_owned();
        self.next = 0;
    }

    /// Completes the current step; the status of the answer.
    fn step(&mut self) -> String {
        let command = Command::StepDone {
            flow_id: self.flow.clone(),
            step_id: linear::step_id(self.next),
            result: linear::result(self.next),
            usage: None,
        };
        let response = self.call(&command);
        self.next += 1;
        response.status().to_owned()
    }

    /// `iters` transitions, each timed alone; flows are finished and started untimed.
    fn timed_steps(&mut self, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            if self.next + 1 >= self.steps {
                if self.next + 1 == self.steps {
                    assert_eq!(self.step(), "complete");
                }
                self.start();
            }
            let began = Instant::now();
            let status = self.step();
            total += began.elapsed();
            assert_eq!(status, "execute_step");
        }
        total
    }
}

/// The sizes of the database file and of its write-ahead log, as text: first as they stand,
/// then with the log checkpointed into the database and truncated.
fn database_size(path: &Path) -> String {
    let before = sizes(path);
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    format!("{before}; checkpointed: {}", sizes(path))
}

fn sizes(path: &Path) -> String {
    let size = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::fs::metadata(name).map_or(0, |meta| meta.len())
    };
    format!("{} bytes, with a WAL of {} bytes", size(""), size("-wal"))
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn step_done_by_flow_size(c: &mut Criterion) {
    let mut group = c.benchmark_group("step_done");
    for steps in [10, 100, 1_000, 10_000] {
        let dir = scratch();
        let compiled = Instant::now();
        let mut driver = Driver::new(&dir.path().join("stratum.db"), steps, Synchronous::Normal);
        eprintln!(
            "{steps} steps: compiled and started in {:?}",
            compiled.elapsed()
        );
        group.bench_function(BenchmarkId::new("normal", steps), |b| {
            b.iter_custom(|iters| driver.timed_steps(iters));
        });
    }
    group.finish();
}

fn step_done_by_synchronous(c: &mut Criterion) {
    let mut group = c.benchmark_group("step_done_synchronous");
    for (name, synchronous) in [("normal", Synchronous::Normal), ("full", Synchronous::Full)] {
        let dir = scratch();
        let mut driver = Driver::new(&dir.path().join("stratum.db"), 1_000, synchronous);
        group.bench_function(BenchmarkId::new(name, 1_000), |b| {
            b.iter_custom(|iters| driver.timed_steps(iters));
        });
    }
    group.finish();
}

fn whole_flow(c: &mut Criterion) {
    const STEPS: usize = 1_000;
    let mut group = c.benchmark_group("whole_flow");
    group.sample_size(10);
    for (name, synchronous) in [("normal", Synchronous::Normal), ("full", Synchronous::Full)] {
        let dir = scratch();
        let path = dir.path().join("stratum.db");
        let mut driver = Driver::new(&path, STEPS, synchronous);
        // One flow alone first, for the size of the database it leaves.
        let began = Instant::now();
        driver.start();
        while driver.step() != "complete" {}
        eprintln!(
            "{STEPS}-step flow ({name}): started and driven to the end in {:?}; database {}",
            began.elapsed(),
            database_size(&path)
        );
        group.bench_function(BenchmarkId::new(name, STEPS), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let began = Instant::now();
                    driver.start();
                    while driver.step() != "complete" {}
                    total += began.elapsed();
                }
                total
            });
        });
        eprintln!(
            "after the benchmark's flows: database {}",
            database_size(&path)
        );
    }
    group.finish();
}

criterion_group!(
    benches,
    step_done_by_flow_size,
    step_done_by_synchronous,
    whole_flow
);
criterion_main!(benches);
