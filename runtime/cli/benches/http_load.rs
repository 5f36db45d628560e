//! Issue 19's load over HTTP as a benchmark: one `stratum-mcp serve` process and 50 agents,
//! each its own Streamable HTTP client (rmcp's) with its own access token, driving its own
//! 100-step flow (a gate at the 50th step, approved by the agent over MCP), on SQLite and on
//! PostgreSQL (see `load_bench/`). For each store it prints the throughput (steps completed,
//! gates included, per second from the first `stratum_plan` to the last completion) and the
//! `stratum_step_done` round trips (p50, p99, max), after the same checks as the test
//! (`tests/http_load.rs`; the driver is `tests/load/`).
//!
//! `cargo bench -p stratum-mcp-cli --bench http_load [-- sqlite|postgres]`
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a benchmark may unwrap what it built

#[path = "../tests/load/mod.rs"]
mod load;
mod load_bench;
use stratum_test_support::postgres as test_postgres;

fn main() {
    load_bench::main(&load::Load::http());
}
