//! `stratum-mcp`'s MCP server: the tools agents drive flows with, over rmcp.
//!
//! In reading order: [`tools`] (the tool table: names, descriptions, annotations, schemas),
//! [`compact`] (the folded `outputSchema` that `tools/list` declares), [`args`] (each tool's
//! arguments) and [`limits`] (the bounds on them), [`server`] (the handler that runs a call on
//! the runtime), [`diagnostics`] and [`outputs`] (the answers that are not flow responses), and
//! [`transport`] (newline-delimited JSON-RPC with answered bounds).
//!
//! [`gate_context`] is what a person deciding a gate is shown, in the form of [`gate_wait`], in
//! `query gates` and in the console.
//!
//! Beside the server: [`cli`], the operator commands (query, gate, watch, prune, migrate,
//! token) whose answers the binary prints and `serve`'s console shows; [`setup`] (install,
//! uninstall, the hook); [`location`], which store a URL names; [`differences`], what
//! `stratum-mcp explain` prints.

pub mod args;
pub mod background;
pub mod cli;
pub mod compact;
pub mod diagnostics;
pub mod differences;
pub mod gate_context;
pub mod gate_wait;
pub mod identity;
pub mod judge;
pub mod limits;
pub mod location;
pub mod metrics;
pub mod outputs;
pub mod paths;
pub mod progress;
pub mod request_state;
pub mod server;
pub mod settings;
pub mod setup;
pub mod tools;
pub mod transport;

pub use paths::PathScope;
pub use server::{Caller, StoreChoice, StratumServer, validate};

use rmcp::ServiceExt;

// The core's and the authoring crate's modules under the names this code used when it was part
// of one runtime crate (`crate::state`, `crate::speckit`, …); new code may name them either way.
use stratum_authoring::{confined, draft, speckit, workflows};
#[cfg(test)]
use stratum_runtime::MemoryStore;
use stratum_runtime::{
    Config, Runtime, command, compile, exec, ids, now_ms, plan_cache, response, state,
};

/// The core's store items with the two database stores beside them.
mod store {
    pub use stratum_runtime::store::*;
    pub use stratum_store_postgres::PostgresStore;
    pub use stratum_store_sqlite::{SqliteOptions, SqliteStore};
}

/// Serves MCP on standard input and output until the client closes them.
pub async fn serve_stdio(server: StratumServer) -> Result<(), Box<dyn std::error::Error>> {
    let transport = transport::LineTransport::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        limits::MAX_MESSAGE_BYTES,
    );
    let running = server.clone().serve(transport).await?;
    let waited = running.waiting().await;
    // Off the async workers: it waits for agent processes to end.
    let stopping = server.clone();
    let _ = tokio::task::spawn_blocking(move || stopping.stop_background()).await;
    waited?;
    Ok(())
}
