//! PostgreSQL for tests: a fresh schema of its own per call. (Placeholder until the
//! throwaway-server harness lands: needs STRATUM_TEST_DATABASE_URL.)

use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A URL to a fresh, empty schema.
pub fn database_url() -> String {
    let server = std::env::var("STRATUM_TEST_DATABASE_URL")
        .expect("STRATUM_TEST_DATABASE_URL names the test server");
    let schema = format!(
        "t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).expect("connects");
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .expect("creates the schema");
    let separator = if server.contains('?') { '&' } else { '?' };
    format!("{server}{separator}options=-c%20search_path%3D{schema}")
}
