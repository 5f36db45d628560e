//! Everything above the core, until it is split by room.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub mod cli;
pub mod confined;
pub mod differences;
pub mod draft;
pub mod http;
pub mod mcp;
pub mod setup;
pub mod speckit;
pub mod store;
pub mod workflows;

pub use store::{SqliteOptions, SqliteStore, Synchronous};
pub use stratum_runtime::*;
