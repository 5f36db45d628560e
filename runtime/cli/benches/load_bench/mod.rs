//! What the load benchmarks (`shared_store_load.rs`, `http_load.rs`) share: the stores chosen
//! from the command line, a fresh SQLite file or PostgreSQL schema for each run, and the
//! figures printed.
//!
//! SQLite is a database file under Cargo's target directory, with the binary's default
//! `--synchronous normal`. PostgreSQL is the server `STRATUM_TEST_DATABASE_URL` names, or one
//! `scripts/throwaway-postgres` starts for this run with PostgreSQL's durable defaults
//! (`THROWAWAY_POSTGRES_DURABLE`: `fsync`, `synchronous_commit` and `full_page_writes` on,
//! where the tests' server turns them off); each run gets a fresh schema.

use std::ffi::OsStr;
use std::path::Path;

use crate::load::{self, Load, StoreAt};
use crate::test_postgres;

/// The PostgreSQL server: the tests' variable, or a durable throwaway one.
fn postgres_server() -> String {
    if let Ok(url) = std::env::var(test_postgres::SERVER_ENV)
        && !url.trim().is_empty()
    {
        println!("PostgreSQL: the server of {}", test_postgres::SERVER_ENV);
        return url.trim().to_owned();
    }
    println!("PostgreSQL: a throwaway server with the durable defaults");
    test_postgres::start_server(
        std::os::unix::process::parent_id(),
        &[("THROWAWAY_POSTGRES_DURABLE", OsStr::new("1"))],
    )
    .unwrap_or_else(|message| panic!("no PostgreSQL server for the benchmark:\n{message}"))
}

/// Runs `load` on each store the command line selects (`sqlite`, `postgres`; both when none
/// is named) and prints its summary.
pub fn main(load: &Load) {
    // `cargo bench` passes `--bench`; any other word selects stores by name.
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .map(|arg| arg.to_lowercase())
        .collect();
    let selected = |name: &str| wanted.is_empty() || wanted.iter().any(|w| name.contains(w));
    let binary = Path::new(env!("CARGO_BIN_EXE_stratum-mcp"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for name in ["sqlite", "postgres"]
        .into_iter()
        .filter(|name| selected(name))
    {
        let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let store =
            match name {
                "sqlite" => StoreAt::Sqlite(home.path().join("stratum.db")),
                _ => {
                    let server = postgres_server();
                    StoreAt::Postgres(test_postgres::fresh_schema(&server).unwrap_or_else(
                        |error| panic!("cannot create a schema on {server}: {error}"),
                    ))
                }
            };
        let report = runtime.block_on(load::run(binary, &store, home.path(), load));
        println!("{}", report.summary());
        if report.resumes > 0 {
            println!(
                "  ({} stratum_resume polls by agents waiting at gates)",
                report.resumes
            );
        }
    }
}
