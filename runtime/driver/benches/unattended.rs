//! What the runtime adds to each unattended step, and how workers scale.
//!
//! `overhead`: one flow of 100 inline steps driven to its end on SQLite (`synchronous=NORMAL`)
//! with an instant fake Claude CLI (a shell script that reads its prompt and prints one result
//! event): the time per step, the process spawn included, against the same script spawned
//! alone (what the agent itself costs), so the runtime's own share is the difference.
//!
//! `workers`: 24 flows of 10 steps enrolled on PostgreSQL, driven by 1, 2 and 4 workers (a
//! worker is a thread taking flows from the store's queue, as `stratum-mcp worker` runs them):
//! steps per second.
//!
//! Run with `cargo bench -p stratum-driver --bench unattended`; prints one line per figure.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a benchmark may unwrap what it built

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use stratum_agents::{Agent, Connector};
use stratum_driver::{Driver, Ended, StopSignal, Turn, Worker};
use stratum_runtime::ids::FlowId;
use stratum_runtime::{Config, Runtime, Store};
use stratum_test_support::unattended::{chain_spec, start_enrolled};

/// A fake `claude` that answers at once.
fn instant_claude(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let line = json!({"type": "result", "subtype": "success", "is_error": false,
        "result": "```json\n{\"n\": 1}\n```", "usage": {"input_tokens": 10, "output_tokens": 5}})
    .to_string();
    let path = dir.join("claude");
    std::fs::write(
        &path,
        format!("#!/bin/sh\ncat > /dev/null\nprintf '%s\\n' '{line}'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn driver(store: Arc<dyn Store>, root: &Path, claude: PathBuf) -> Driver {
    let mut driver = Driver::new(Runtime::new(store, Config::default()), root.to_owned());
    let mut connector = Connector::new(Agent::Claude);
    connector.binary = claude;
    driver.connectors.insert(Agent::Claude, connector);
    driver
}

fn enroll(driver: &Driver, steps: usize, count: usize) -> Vec<FlowId> {
    start_enrolled(&driver.runtime, &chain_spec(steps), None, &json!({}), count)
}

fn overhead(dir: &Path) {
    const STEPS: usize = 100;
    let claude = instant_claude(dir);
    // The agent alone: the same script spawned, fed and read, STEPS times.
    let started = Instant::now();
    for _ in 0..STEPS {
        let mut child = std::process::Command::new(&claude)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdin.take());
        child.wait_with_output().unwrap();
    }
    let agent_alone = started.elapsed() / STEPS as u32;

    let store: Arc<dyn Store> =
        Arc::new(stratum_store_sqlite::SqliteStore::open(dir.join("overhead.db")).unwrap());
    let driver = driver(store, dir, claude);
    // One warm-up flow, then the measured one.
    for measured in [false, true] {
        let flow = enroll(&driver, STEPS, 1).remove(0);
        let started = Instant::now();
        let ended = driver
            .drive(&flow, Turn::Whole, &StopSignal::new(), &mut ())
            .unwrap();
        assert_eq!(
            ended,
            Ended::Finished {
                status: "complete".to_owned()
            }
        );
        if measured {
            let per_step = started.elapsed() / STEPS as u32;
            println!(
                "unattended/overhead: {:.2} ms per step, the agent's spawn included ({:.2} ms of \
                 it the fake agent alone; the runtime's share {:.2} ms), {STEPS} steps on SQLite",
                ms(per_step),
                ms(agent_alone),
                ms(per_step.saturating_sub(agent_alone))
            );
        }
    }
}

fn workers(dir: &Path) {
    const FLOWS: usize = 24;
    const STEPS: usize = 10;
    let claude = instant_claude(dir);
    for count in [1, 2, 4] {
        let url = stratum_test_support::postgres::database_url();
        let store: Arc<dyn Store> =
            Arc::new(stratum_store_postgres::PostgresStore::connect(&url).unwrap());
        let driver = driver(store.clone(), dir, claude.clone());
        let flows = enroll(&driver, STEPS, FLOWS);
        let started = Instant::now();
        let pool = Worker::start(driver.clone(), count);
        let until = Instant::now() + Duration::from_secs(600);
        loop {
            let drives = store.drives().unwrap();
            if drives
                .iter()
                .filter(|drive| flows.contains(&drive.flow))
                .all(|drive| drive.state == stratum_runtime::store::DriveState::Done)
            {
                break;
            }
            assert!(Instant::now() < until, "the workers never finished");
            std::thread::sleep(Duration::from_millis(20));
        }
        let elapsed = started.elapsed();
        pool.stop_and_join();
        let steps = (FLOWS * STEPS) as f64;
        println!(
            "unattended/workers/{count}: {:.0} steps/s ({FLOWS} flows of {STEPS} steps in {:.2} s, \
             PostgreSQL)",
            steps / elapsed.as_secs_f64(),
            elapsed.as_secs_f64()
        );
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    // `cargo test --benches` runs this with `--bench`-less arguments: stay quick then.
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    overhead(dir.path());
    workers(dir.path());
}
