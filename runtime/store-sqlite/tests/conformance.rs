//! The store conformance suite (`stratum_runtime::testing`) on SQLite: each check on a fresh
//! database file.

use std::cell::Cell;
use std::sync::Arc;

use stratum_runtime::Store;
use stratum_store_sqlite::SqliteStore;

#[test]
fn the_sqlite_store_keeps_every_promise_of_a_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let opened = Cell::new(0);
    stratum_runtime::testing::run(&|| {
        opened.set(opened.get() + 1);
        let path = dir.path().join(format!("state-{}.db", opened.get()));
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path).expect("the database opens"));
        store
    });
}
