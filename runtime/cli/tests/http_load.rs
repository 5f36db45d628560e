//! Issue 19's load over HTTP on each store: one `stratum-mcp serve` process and 50 agents,
//! each its own Streamable HTTP client with its own access token, driving its own 100-step
//! flow (a gate at the 50th step, which the agent approves over MCP); every flow completes
//! with every step exactly once, each gate recorded with the token that approved it, and
//! `serve` exits 0 on SIGTERM afterwards (the driver and its checks are in `load/`). The
//! figures (throughput, round trips) are the benchmark's,
//! `cargo bench -p stratum-mcp-cli --bench http_load`; here they are only printed.

mod load;
use stratum_test_support as support;

use load::{Load, StoreAt};

fn binary() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_stratum-mcp"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_served_over_http_to_fifty_agents_loses_and_repeats_no_step() {
    let home = tempfile::tempdir().expect("a temporary directory");
    let store = StoreAt::Sqlite(home.path().join("stratum.db"));
    let report = load::run(binary(), &store, home.path(), &Load::http()).await;
    eprintln!("{}", report.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_served_over_http_to_fifty_agents_loses_and_repeats_no_step() {
    let home = tempfile::tempdir().expect("a temporary directory");
    let store = StoreAt::Postgres(support::postgres::database_url());
    let report = load::run(binary(), &store, home.path(), &Load::http()).await;
    eprintln!("{}", report.summary());
}
