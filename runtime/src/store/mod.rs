//! The database stores.

pub use stratum_runtime::store::*;
pub use stratum_store_postgres as postgres;
pub use stratum_store_sqlite as sqlite;

mod location;

pub use location::{Location, redact};
pub use stratum_store_postgres::{PostgresOptions, PostgresStore};
pub use stratum_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};
