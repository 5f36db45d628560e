//! What the `stratum-mcp` binary costs an agent, measured from the other end of its standard
//! input and output with rmcp's client, as an agent meets it:
//!
//! - `startup`: spawning the process and opening the conversation, until the client is ready
//!   for its first call: with the `initialize` handshake (2025-11-25), and with the stateless
//!   `server/discover` (2026-07-28). Closing the connection and waiting for the process to
//!   exit run outside the timing.
//! - `step_done_round_trip`: one `stratum_step_done` call, from the request written to the
//!   answer read and parsed, in flows of 10, 100 and 1,000 steps (it must not grow with the
//!   flow). Each timed iteration is one real transition: the current step of a linear flow
//!   completed, the next one dispatched. The flow's last step (which ends the flow and returns
//!   its whole trace) and the `stratum_plan` of the next flow run outside the timing.
//! - The server's resident memory (`VmRSS` of `/proc/<pid>/status`), idle right after
//!   `initialize`, and with 100 live flows (100 `stratum_plan` calls of a 10-step linear spec,
//!   each with one step done): printed once, since criterion measures only time.
//!
//! The client runs on a single-threaded tokio runtime, so that on a small machine it leaves
//! the other cores to the server. Each server keeps its state in a fresh `STRATUM_HOME` under
//! Cargo's target directory, on the disk a real state directory would be on.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a benchmark may unwrap what it built

use stratum_test_support::linear;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// How the client opens the conversation.
#[derive(Clone, Copy)]
enum Protocol {
    /// `initialize` then `notifications/initialized`.
    Handshake,
    /// `server/discover`; every request then carries its version.
    Stateless,
}

/// A running server, its process id, and the client talking to it.
struct Server {
    client: RunningService<RoleClient, ()>,
    pid: u32,
}

impl Server {
    /// Spawns `stratum-mcp` with its state in `home` and opens the conversation.
    async fn start(home: &Path, protocol: Protocol) -> Server {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_stratum-mcp"));
        command
            .env("STRATUM_HOME", home)
            .env_remove("STRATUM_DB")
            .current_dir(home)
            .stderr(Stdio::inherit());
        let transport = TokioChildProcess::new(command).unwrap();
        let pid = transport.id().expect("the child has just been spawned");
        let client = match protocol {
            Protocol::Handshake => ().serve(transport).await.unwrap(),
            Protocol::Stateless => ()
                .serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    },
                )
                .await
                .unwrap(),
        };
        Server { client, pid }
    }

    /// Calls a tool that must answer, and returns its structured answer.
    async fn call(&self, tool: &'static str, arguments: Value) -> Value {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object");
        };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{tool} refused: {result:?}");
        result.structured_content.unwrap()
    }

    /// Closes the connection; the server exits when its input ends, and is waited for.
    async fn stop(self) {
        self.client.cancel().await.unwrap();
    }

    /// The server's resident memory (`VmRSS`) and its peak (`VmHWM`), as `/proc` gives them.
    fn memory(&self) -> String {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .map_or_else(|| "?".to_owned(), |value| value.trim().to_owned())
        };
        format!("VmRSS {} (peak VmHWM {})", field("VmRSS:"), field("VmHWM:"))
    }
}

/// A server with a linear flow of it in progress.
struct Driver {
    server: Server,
    spec: String,
    steps: usize,
    flow: String,
    next: usize,
}

impl Driver {
    /// Starts a flow of a `steps`-step linear spec on `server`.
    async fn new(server: Server, steps: usize) -> Driver {
        let mut driver = Driver {
            server,
            spec: linear::linear_spec(steps),
            steps,
            flow: String::new(),
            next: 0,
        };
        driver.start().await;
        driver
    }

    /// Starts a flow of the spec with `stratum_plan`.
    async fn start(&mut self) {
        let arguments = json!({"spec": self.spec, "inputs": linear::inputs()});
        let answer = self.server.call("stratum_plan", arguments).await;
        assert_eq!(answer["status"], "execute_step", "{answer:#}");
        self.flow = answer["flow_id"].as_str().unwrap().to_owned();
        self.next = 0;
    }

    /// The arguments of `stratum_step_done` for the current step.
    fn step_done(&self) -> Value {
        json!({
            "flow_id": self.flow,
            "step_id": linear::step_id(self.next),
            "result": linear::result(self.next),
        })
    }

    /// Completes the current step; the status of the answer.
    async fn step(&mut self) -> String {
        let answer = self
            .server
            .call("stratum_step_done", self.step_done())
            .await;
        self.next += 1;
        answer["status"].as_str().unwrap().to_owned()
    }

    /// `iters` transitions, each timed alone; flows are finished and started untimed.
    async fn timed_steps(&mut self, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            if self.next + 1 >= self.steps {
                if self.next + 1 == self.steps {
                    assert_eq!(self.step().await, "complete");
                }
                self.start().await;
            }
            let arguments = self.step_done();
            let began = Instant::now();
            let answer = self.server.call("stratum_step_done", arguments).await;
            total += began.elapsed();
            assert_eq!(answer["status"], "execute_step", "{answer:#}");
            self.next += 1;
        }
        total
    }
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// The client's runtime: one thread, so that the server has the other cores.
fn client_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn startup(c: &mut Criterion) {
    let runtime = client_runtime();
    let mut group = c.benchmark_group("startup");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(5));
    for (name, protocol) in [
        ("initialize", Protocol::Handshake),
        ("discover", Protocol::Stateless),
    ] {
        // One state directory for all the starts, as an agent's machine has.
        let home = scratch();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let began = Instant::now();
                        let server = Server::start(home.path(), protocol).await;
                        total += began.elapsed();
                        server.stop().await;
                    }
                    total
                })
            });
        });
    }
    group.finish();
}

fn step_done_round_trip(c: &mut Criterion) {
    let runtime = client_runtime();
    let mut group = c.benchmark_group("step_done_round_trip");
    group.measurement_time(Duration::from_secs(5));
    for steps in [10, 100, 1_000] {
        let home = scratch();
        let planned = Instant::now();
        let mut driver = runtime.block_on(async {
            Driver::new(Server::start(home.path(), Protocol::Handshake).await, steps).await
        });
        eprintln!(
            "{steps} steps: server started, spec compiled and flow started in {:?}",
            planned.elapsed()
        );
        group.bench_function(BenchmarkId::from_parameter(steps), |b| {
            b.iter_custom(|iters| runtime.block_on(driver.timed_steps(iters)));
        });
        runtime.block_on(driver.server.stop());
    }
    group.finish();
}

/// Not a criterion measurement: the server's resident memory, printed once.
fn resident_memory(_: &mut Criterion) {
    const FLOWS: usize = 100;
    const STEPS: usize = 10;
    let runtime = client_runtime();
    let home = scratch();
    runtime.block_on(async {
        let server = Server::start(home.path(), Protocol::Handshake).await;
        eprintln!(
            "stratum-mcp resident memory, idle right after initialize: {}",
            server.memory()
        );
        let mut driver = Driver::new(server, STEPS).await;
        assert_eq!(driver.step().await, "execute_step");
        for _ in 1..FLOWS {
            driver.start().await;
            assert_eq!(driver.step().await, "execute_step");
        }
        eprintln!(
            "stratum-mcp resident memory, {FLOWS} live flows ({STEPS}-step linear spec, one step done each): {}",
            driver.server.memory()
        );
        driver.server.stop().await;
    });
}

criterion_group!(benches, resident_memory, startup, step_done_round_trip);
criterion_main!(benches);
