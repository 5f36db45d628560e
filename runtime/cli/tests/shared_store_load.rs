//! Issue 18's load on each store: 4 `stratum-mcp` server processes and 8 agents each driving
//! its own 200-step flow (a gate every 50 steps) through them, the operator's CLI approving
//! the gates meanwhile; every flow completes with every step exactly once (the driver and its
//! checks are in `load/`). The figures (throughput, round trips) are the benchmark's,
//! `cargo bench -p stratum-mcp-cli --bench shared_store_load`; here they are only printed.

mod load;
use stratum_test_support as support;

use load::{Load, StoreAt};

fn binary() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_stratum-mcp"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_shared_by_four_servers_and_the_cli_loses_and_repeats_no_step() {
    let home = tempfile::tempdir().expect("a temporary directory");
    let store = StoreAt::Sqlite(home.path().join("stratum.db"));
    let report = load::run(binary(), &store, home.path(), &Load::default()).await;
    eprintln!("{}", report.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_shared_by_four_servers_and_the_cli_loses_and_repeats_no_step() {
    let home = tempfile::tempdir().expect("a temporary directory");
    let store = StoreAt::Postgres(support::postgres::database_url());
    let report = load::run(binary(), &store, home.path(), &Load::default()).await;
    eprintln!("{}", report.summary());
}
