//! What the SQLite and PostgreSQL stores promise under crashes and races, tested with real
//! processes: every test runs once on each.
//!
//! - `kill -9`: a child process drives a long flow and prints `ack <step>` after each
//!   `step_done` returned; the parent kills it at a random moment, reopens the database and
//!   finds every acknowledged step recorded with its output, then lets the next child resume
//!   the flow where it stands; at the end the trace has every step exactly once.
//! - Races: two processes (and, in-process, four threads over three handles) submit the same
//!   step at the same instant; exactly one gets the next step and the others `wrong_step`.
//!
//! The children are this test binary run again: a driver test does nothing unless its
//! environment variable is set, and the parent runs it alone with `--exact`.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use stratum_test_support as support;
use stratum_test_support::linear;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command as Process, Stdio};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use stratum_mcp::location::Location;
use stratum_runtime::store::Snapshot;
use stratum_runtime::{Command, Config, FlowId, Runtime, Store};
use stratum_store_sqlite::SqliteOptions;
use support::Scenario;

const KILL_DRIVER: &str = "STRATUM_DURABILITY_DRIVER";
const RACE_DRIVER: &str = "STRATUM_RACE_DRIVER";
/// The flow the kill test's children drive.
const KILL_STEPS: usize = 200;
const KILL_ROUNDS: usize = 8;
const RACE_STEPS: usize = 20;

fn status(response: &Value) -> &str {
    response
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn error_type(response: &Value) -> &str {
    response
        .get("error_type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn step_index(step: &str) -> usize {
    step.strip_prefix('s')
        .and_then(|n| n.parse().ok())
        .expect("a step of the linear spec")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

/// xorshift64, seeded from the clock (the seed is printed).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |t| t.as_nanos() as u64)
            | 1;
        eprintln!("xorshift seed {seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// A new, empty database of each kind: a SQLite file in `dir`, or a PostgreSQL schema.
fn sqlite_in(dir: &tempfile::TempDir) -> Location {
    Location::Sqlite(dir.path().join("stratum.db"))
}

fn postgres() -> Location {
    Location::Postgres(support::postgres::database_url())
}

fn open(location: &Location) -> Arc<dyn Store> {
    location
        .open(SqliteOptions::default())
        .unwrap_or_else(|error| panic!("the store at {location} opens: {error}"))
}

/// The location a child was given.
fn given(variable: &str) -> Option<Location> {
    let text = std::env::var(variable).ok()?;
    Some(Location::parse(&text).expect("a location"))
}

/// The location as a child reads it back.
fn passed(location: &Location) -> String {
    match location {
        Location::Sqlite(path) => format!("sqlite:{}", path.display()),
        Location::Postgres(url) => url.clone(),
    }
}

/// Starts a linear flow of `steps` steps in a new database; its id.
fn start_flow(location: &Location, steps: usize) -> String {
    let store = open(location);
    let mut s = Scenario::with(&linear::linear_spec(steps), store, Config::default());
    let first = s.start(None, linear::inputs());
    assert_eq!(first.get("step_id"), Some(&json!("s0")), "{first:#}");
    s.flow(1)
}

/// The child's line from `marker` on: libtest prints `test NAME ... ` before the test's own
/// first line, without a newline.
fn ours<'l>(line: &'l str, marker: &str) -> Option<&'l str> {
    line.find(marker).and_then(|at| line.get(at..))
}

fn child(test: &str) -> Process {
    let mut process = Process::new(std::env::current_exe().expect("the test binary"));
    process.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    process
}

/// The child of the kill test: resumes the flow and completes steps until killed, printing
/// `ack <step>` once each `step_done` has returned (and so committed).
#[test]
fn kill_driver() {
    let Some(location) = given(KILL_DRIVER) else {
        return;
    };
    let flow = std::env::var("STRATUM_DURABILITY_FLOW").expect("the flow to drive");
    let runtime = Runtime::new(open(&location), Config::default());
    let mut out = std::io::stdout().lock();
    let mut response = runtime
        .call(&Command::Resume {
            flow_id: flow.clone(),
        })
        .expect("resume")
        .to_json();
    loop {
        match status(&response) {
            "execute_step" => {
                let step = response["step_id"].as_str().expect("a step").to_owned();
                response = runtime
                    .call(&Command::StepDone {
                        flow_id: flow.clone(),
                        step_id: step.clone(),
                        result: linear::result(step_index(&step)),
                        usage: None,
                    })
                    .expect("step_done")
                    .to_json();
                writeln!(out, "ack {step}").expect("stdout");
                out.flush().expect("stdout");
            }
            "complete" => {
                writeln!(out, "complete").expect("stdout");
                out.flush().expect("stdout");
                return;
            }
            _ => panic!("unexpected answer: {response:#}"),
        }
    }
}

/// What the database says of the flow: its current step (None when finished) and every
/// step's output.
fn stored(location: &Location, flow: &str) -> (Option<usize>, BTreeMap<usize, Value>) {
    let store = open(location);
    let id = FlowId::parse(flow).expect("a flow id");
    let mut current = None;
    let mut outputs = BTreeMap::new();
    store
        .read(&mut |snapshot: &mut dyn Snapshot| {
            let header = snapshot.flow(&id)?.expect("the flow exists");
            current = match header.cursor {
                stratum_runtime::state::Cursor::Step(at) if !header.status.is_finished() => {
                    Some(at as usize)
                }
                _ => None,
            };
            for (index, state) in snapshot.steps_from(&id, 0)? {
                if let Some(output) = state.output {
                    outputs.insert(index as usize, output);
                }
            }
            Ok(())
        })
        .expect("a read");
    (current, outputs)
}

/// The step records of the flow's audit, in order.
fn traced_steps(location: &Location, flow: &str) -> Vec<String> {
    let runtime = Runtime::new(open(location), Config::default());
    let audit = runtime
        .call(&Command::Audit {
            flow_id: flow.to_owned(),
        })
        .expect("audit")
        .to_json();
    audit["trace"]
        .as_array()
        .expect("a trace")
        .iter()
        .map(|record| record["step_id"].as_str().expect("a step id").to_owned())
        .collect()
}

#[test]
fn kill_9_loses_no_acknowledged_step_on_sqlite() {
    if std::env::var_os(KILL_DRIVER).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    kill_9_loses_no_acknowledged_step(&sqlite_in(&dir));
}

#[test]
fn kill_9_loses_no_acknowledged_step_on_postgres() {
    if std::env::var_os(KILL_DRIVER).is_some() {
        return;
    }
    kill_9_loses_no_acknowledged_step(&postgres());
}

fn kill_9_loses_no_acknowledged_step(at: &Location) {
    let flow = start_flow(at, KILL_STEPS);
    let mut rng = Rng::new();
    let mut acked: Vec<usize> = Vec::new();
    let mut finished = false;
    for round in 0..KILL_ROUNDS {
        let mut process = child("kill_driver")
            .env(KILL_DRIVER, passed(at))
            .env("STRATUM_DURABILITY_FLOW", &flow)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the child starts");
        let stdout = process.stdout.take().expect("a pipe");
        let (lines, from_child) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(ours) = ours(&line, "ack ").or_else(|| ours(&line, "complete")) {
                    let _ = lines.send(ours.to_owned());
                }
            }
        });
        // Kill it at a random moment once it is under way: between, inside or just after
        // transactions.
        let first = from_child
            .recv_timeout(Duration::from_secs(60))
            .expect("the child acknowledges a step");
        let delay = rng.below(25_000);
        std::thread::sleep(Duration::from_micros(delay));
        process.kill().expect("SIGKILL");
        let _ = process.wait();
        reader.join().expect("the reader ends");
        let round_lines: Vec<String> = std::iter::once(first)
            .chain(from_child.try_iter())
            .collect();
        let mut round_acks = 0;
        for line in &round_lines {
            match line.strip_prefix("ack ") {
                Some(step) => {
                    acked.push(step_index(step));
                    round_acks += 1;
                }
                None => finished = true,
            }
        }
        let (current, outputs) = stored(at, &flow);
        eprintln!(
            "round {round}: killed after {delay} us, {round_acks} steps acknowledged, now at {current:?}"
        );
        for index in &acked {
            assert_eq!(
                outputs.get(index),
                Some(&linear::result(*index)),
                "acknowledged step s{index} lost its output"
            );
        }
        let last = acked.iter().max().copied();
        // The flow stands just after the last acknowledged step, or one further: the child may
        // have died between a commit and its `ack`.
        if let (Some(last), Some(current)) = (last, current) {
            assert!(
                current == last + 1 || current == last + 2,
                "at s{current} after s{last} was acknowledged"
            );
        }
        if finished || current.is_none() {
            break;
        }
    }
    // Acknowledgements are in order and each step was acknowledged once.
    assert!(
        acked
            .windows(2)
            .all(|pair| pair[1] == pair[0] + 1 || pair[1] == pair[0] + 2),
        "{acked:?}"
    );

    // Resume in-process where the last child stopped, and finish.
    let runtime = Runtime::new(open(at), Config::default());
    let mut response = runtime
        .call(&Command::Resume {
            flow_id: flow.clone(),
        })
        .expect("resume")
        .to_json();
    while status(&response) == "execute_step" {
        let step = response["step_id"].as_str().expect("a step").to_owned();
        response = runtime
            .call(&Command::StepDone {
                flow_id: flow.clone(),
                step_id: step.clone(),
                result: linear::result(step_index(&step)),
                usage: None,
            })
            .expect("step_done")
            .to_json();
    }
    assert_eq!(status(&response), "complete", "{response:#}");
    let expected: Vec<String> = (0..KILL_STEPS).map(linear::step_id).collect();
    assert_eq!(
        traced_steps(at, &flow),
        expected,
        "every step once, in order"
    );
    let (_, outputs) = stored(at, &flow);
    assert_eq!(outputs.len(), KILL_STEPS);
}

/// A child of the race test: at each agreed instant, submits the agreed step.
#[test]
fn race_driver() {
    let Some(location) = given(RACE_DRIVER) else {
        return;
    };
    let flow = std::env::var("STRATUM_RACE_FLOW").expect("the flow");
    let start: u64 = std::env::var("STRATUM_RACE_AT")
        .expect("the start")
        .parse()
        .expect("ms");
    let interval: u64 = std::env::var("STRATUM_RACE_INTERVAL")
        .expect("the interval")
        .parse()
        .expect("ms");
    let runtime = Runtime::new(open(&location), Config::default());
    let mut out = std::io::stdout().lock();
    for index in 0..RACE_STEPS {
        let at = start + index as u64 * interval;
        while now_ms() < at {
            std::thread::sleep(Duration::from_micros(200));
        }
        let sent = Instant::now();
        let response = runtime
            .call(&Command::StepDone {
                flow_id: flow.clone(),
                step_id: linear::step_id(index),
                result: linear::result(index),
                usage: None,
            })
            .expect("step_done")
            .to_json();
        let took = sent.elapsed().as_micros();
        writeln!(out, "race {index} {took} {response}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// For each step, exactly one of `answers` moved the flow on and every other was told
/// `wrong_step`.
fn exactly_one_winner(index: usize, answers: &[Value]) {
    let winners: Vec<&Value> = answers
        .iter()
        .filter(|answer| status(answer) == "execute_step")
        .collect();
    assert_eq!(winners.len(), 1, "s{index}: {answers:#?}");
    assert_eq!(
        winners[0]["step_id"],
        json!(linear::step_id(index + 1)),
        "s{index}"
    );
    for answer in answers
        .iter()
        .filter(|answer| status(answer) != "execute_step")
    {
        assert_eq!(error_type(answer), "wrong_step", "s{index}: {answer:#}");
    }
}

#[test]
fn two_processes_racing_for_a_step_one_wins_on_sqlite() {
    if std::env::var_os(RACE_DRIVER).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    two_processes_racing_for_a_step_one_wins(&sqlite_in(&dir));
}

#[test]
fn two_processes_racing_for_a_step_one_wins_on_postgres() {
    if std::env::var_os(RACE_DRIVER).is_some() {
        return;
    }
    two_processes_racing_for_a_step_one_wins(&postgres());
}

fn two_processes_racing_for_a_step_one_wins(at: &Location) {
    let flow = start_flow(at, RACE_STEPS + 1);
    let start = now_ms() + 1_500;
    let children: Vec<_> = (0..2)
        .map(|_| {
            child("race_driver")
                .env(RACE_DRIVER, passed(at))
                .env("STRATUM_RACE_FLOW", &flow)
                .env("STRATUM_RACE_AT", start.to_string())
                .env("STRATUM_RACE_INTERVAL", "50")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the child starts")
        })
        .collect();
    let mut answers: BTreeMap<usize, Vec<Value>> = BTreeMap::new();
    let mut waited = Vec::new();
    for process in children {
        let output = process.wait_with_output().expect("the child ends");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for line in stdout
            .lines()
            .filter_map(|line| ours(line, "race "))
            .filter_map(|line| line.strip_prefix("race "))
        {
            let mut parts = line.splitn(3, ' ');
            let index: usize = parts.next().and_then(|n| n.parse().ok()).expect("a step");
            let took: u64 = parts
                .next()
                .and_then(|n| n.parse().ok())
                .expect("a duration");
            let answer: Value =
                serde_json::from_str(parts.next().expect("an answer")).expect("json");
            answers.entry(index).or_default().push(answer);
            waited.push(took);
        }
    }
    assert_eq!(answers.len(), RACE_STEPS);
    for (index, answers) in &answers {
        assert_eq!(answers.len(), 2);
        exactly_one_winner(*index, answers);
    }
    waited.sort_unstable();
    eprintln!(
        "step_done under contention, us: median {}, max {}",
        waited[waited.len() / 2],
        waited[waited.len() - 1]
    );
    let expected: Vec<String> = (0..RACE_STEPS).map(linear::step_id).collect();
    assert_eq!(traced_steps(at, &flow), expected, "every step once");
}

#[test]
fn threads_racing_for_a_step_one_wins_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    threads_racing_for_a_step_one_wins(&sqlite_in(&dir));
}

#[test]
fn threads_racing_for_a_step_one_wins_on_postgres() {
    threads_racing_for_a_step_one_wins(&postgres());
}

fn threads_racing_for_a_step_one_wins(at: &Location) {
    let flow = start_flow(at, RACE_STEPS + 1);
    // Two threads share one handle, two have their own (as other processes would): the
    // store's transaction serialises them.
    let shared = open(at);
    let stores: Vec<Arc<dyn Store>> = vec![shared.clone(), shared, open(at), open(at)];
    let barrier = Arc::new(Barrier::new(stores.len()));
    let threads: Vec<_> = stores
        .into_iter()
        .map(|store| {
            let barrier = barrier.clone();
            let flow = flow.clone();
            std::thread::spawn(move || {
                let runtime = Runtime::new(store, Config::default());
                (0..RACE_STEPS)
                    .map(|index| {
                        barrier.wait();
                        runtime
                            .call(&Command::StepDone {
                                flow_id: flow.clone(),
                                step_id: linear::step_id(index),
                                result: linear::result(index),
                                usage: None,
                            })
                            .expect("step_done")
                            .to_json()
                    })
                    .collect::<Vec<Value>>()
            })
        })
        .collect();
    let answers: Vec<Vec<Value>> = threads
        .into_iter()
        .map(|thread| thread.join().expect("the thread ends"))
        .collect();
    for index in 0..RACE_STEPS {
        let round: Vec<Value> = answers
            .iter()
            .map(|answers| answers[index].clone())
            .collect();
        exactly_one_winner(index, &round);
    }
    let expected: Vec<String> = (0..RACE_STEPS).map(linear::step_id).collect();
    assert_eq!(traced_steps(at, &flow), expected, "every step once");
}
