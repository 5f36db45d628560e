//! `stratum-mcp`'s MCP server: the tools agents drive flows with, over rmcp.
//!
//! In reading order: [`tools`] (the tool table: names, descriptions, annotations, schemas),
//! [`compact`] (the folded `outputSchema` that `tools/list` declares), [`args`] (each tool's
//! arguments) and [`limits`] (the bounds on them), [`server`] (the handler that runs a call on
//! the runtime), [`diagnostics`] and [`outputs`] (the answers that are not flow responses), and
//! [`transport`] (newline-delimited JSON-RPC with answered bounds).

pub mod args;
pub mod compact;
pub mod diagnostics;
pub mod limits;
pub mod outputs;
pub mod paths;
pub mod server;
pub mod tools;
pub mod transport;

pub use paths::PathScope;
pub use server::{Caller, StoreChoice, StratumServer, validate};

use rmcp::ServiceExt;

/// Serves MCP on standard input and output until the client closes them.
pub async fn serve_stdio(server: StratumServer) -> Result<(), Box<dyn std::error::Error>> {
    let transport = transport::LineTransport::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        limits::MAX_MESSAGE_BYTES,
    );
    let running = server.serve(transport).await?;
    running.waiting().await?;
    Ok(())
}
