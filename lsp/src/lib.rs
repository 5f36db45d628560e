//! `stratum-lsp`: the language server for Stratum workflow specs (`.stratum.yaml`).
//!
//! The server holds each open document's text and its latest [`analysis::Analysis`] (the
//! compiler's `Compilation` of that text), and answers every request with a pure function of
//! an analysis: the modules below. It has no parser and no rules of its own: diagnostics,
//! fixes, symbols and types all come from `stratum-compiler`.

pub mod actions;
pub mod analysis;
pub mod complete;
pub mod diagnostics;
pub mod hover;
pub mod index;
pub mod key_docs;
pub mod navigate;
pub mod placeholders;
pub mod server;
pub mod symbols;
