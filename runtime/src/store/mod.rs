//! The database stores.

pub use stratum_runtime::store::*;

mod location;
pub mod postgres;
pub mod sqlite;
mod sqlite_errors;

pub use location::{Location, redact};
pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
