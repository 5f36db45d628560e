//! The store conformance suite (`stratum_runtime::testing`) on the memory store.

use std::sync::Arc;

use stratum_runtime::MemoryStore;

#[test]
fn the_memory_store_keeps_every_promise_of_a_store() {
    stratum_runtime::testing::run(&|| Arc::new(MemoryStore::new()));
}
