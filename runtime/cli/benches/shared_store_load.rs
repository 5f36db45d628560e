//! Issue 18's shared-store load as a benchmark: 4 `stratum-mcp` server processes and 8 agents
//! each driving its own 200-step flow (a gate every 50 steps) through them, the operator's
//! CLI approving the gates meanwhile, on SQLite and on PostgreSQL (see `load_bench/`). For
//! each store it prints the throughput (steps completed, gates included, per second of the
//! whole run) and the `stratum_step_done` round trips (p50, p99, max), after the same checks
//! as the test (`tests/shared_store_load.rs`; the driver is `tests/load/`).
//!
//! `cargo bench -p stratum-mcp-cli --bench shared_store_load [-- sqlite|postgres]`
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a benchmark may unwrap what it built

#[path = "../tests/load/mod.rs"]
mod load;
mod load_bench;
use stratum_test_support::postgres as test_postgres;

fn main() {
    load_bench::main(&load::Load::default());
}
