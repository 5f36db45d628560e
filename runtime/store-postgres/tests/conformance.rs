//! The store conformance suite (`stratum_runtime::testing`) on PostgreSQL: each check on a
//! fresh schema of the tests' server (`stratum_test_support::postgres`).

use std::sync::Arc;

use stratum_runtime::Store;
use stratum_store_postgres::PostgresStore;
use stratum_test_support::postgres::database_url;

#[test]
fn the_postgres_store_keeps_every_promise_of_a_store() {
    stratum_runtime::testing::run(&|| {
        let store: Arc<dyn Store> =
            Arc::new(PostgresStore::connect(&database_url()).expect("the database opens"));
        store
    });
}
