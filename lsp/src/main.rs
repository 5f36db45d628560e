//! `stratum-lsp`: the language server for `.stratum.yaml`, on stdin and stdout.

use stratum_lsp::diagnostics::ExplanationLinks;
use stratum_lsp::server::Backend;
use tower_lsp_server::{LspService, Server};

#[tokio::main]
async fn main() {
    if std::env::args().any(|arg| arg == "--version") {
        println!("stratum-lsp {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    let links = ExplanationLinks::write_to(ExplanationLinks::default_dir());
    let (service, socket) = LspService::new(|client| Backend::new(client, links));
    // One message at a time: changes apply in order, and every handler is quick (analysis runs
    // on blocking threads, off this loop).
    Server::new(tokio::io::stdin(), tokio::io::stdout(), socket)
        .concurrency_level(1)
        .serve(service)
        .await;
}
