//! The protocol side: open documents, their versions, debounced analysis, and the handlers
//! that answer with the pure functions of the other modules.
//!
//! Concurrency: the transport runs one message at a time (`concurrency_level(1)`, set in
//! `main`), so notifications apply in order and a request sees every change sent before it.
//! Analysis runs off that loop: a change schedules a task that waits out the debounce delay,
//! checks the text on a blocking thread and publishes the diagnostics only if no later change
//! arrived meanwhile; a stale result is dropped. A request on a document whose latest change is
//! not analysed yet analyses it first, so answers always match the text the client has.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer};

use crate::analysis::{self, Analysis};
use crate::complete::{self, CompletionKind};
use crate::diagnostics::{self, ExplanationLinks};
use crate::{actions, hover, navigate, symbols};
use stratum_compiler::source::LineIndex;

/// How long a change waits for the next one before it is analysed, unless the client says
/// otherwise (`initializationOptions: {"debounceMs": N}`).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(120);

/// One open document.
struct Document {
    text: String,
    version: i32,
    /// The analysis of `version`, once made.
    analysis: Option<(i32, Arc<Analysis>)>,
    /// The latest analysis whose YAML was read (its AST is not empty): what completion uses
    /// to know where the cursor is while the current text is half-typed.
    last_good: Option<Arc<Analysis>>,
}

#[derive(Default)]
struct State {
    documents: HashMap<Uri, Document>,
    debounce: Option<Duration>,
}

pub struct Backend {
    client: Client,
    state: Arc<Mutex<State>>,
    links: ExplanationLinks,
}

impl Backend {
    pub fn new(client: Client, links: ExplanationLinks) -> Backend {
        Backend {
            client,
            state: Arc::default(),
            links,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Analyses `uri` at `version` after `delay`, unless a later change supersedes it, and
    /// publishes its diagnostics.
    fn schedule(&self, uri: Uri, version: i32, delay: Duration) {
        let state = Arc::clone(&self.state);
        let client = self.client.clone();
        let links = self.links.clone();
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let text = match lock(&state).documents.get(&uri) {
                Some(document) if document.version == version => document.text.clone(),
                _ => return,
            };
            let name = display_name(&uri);
            let Ok(analysis) =
                tokio::task::spawn_blocking(move || Arc::new(Analysis::new(&name, &text))).await
            else {
                return;
            };
            let diagnostics = diagnostics::to_lsp(&analysis, &uri, &links);
            {
                let mut state = lock(&state);
                let Some(document) = state.documents.get_mut(&uri) else {
                    return;
                };
                if document.version != version {
                    return;
                }
                store(document, version, analysis);
            }
            client
                .publish_diagnostics(uri, diagnostics, Some(version))
                .await;
        });
    }

    /// The analysis of the document's current text: the stored one, or a new one.
    async fn analysis(&self, uri: &Uri) -> Option<Arc<Analysis>> {
        let (text, version) = {
            let state = self.state();
            let document = state.documents.get(uri)?;
            match &document.analysis {
                Some((version, analysis)) if *version == document.version => {
                    return Some(Arc::clone(analysis));
                }
                _ => (document.text.clone(), document.version),
            }
        };
        let name = display_name(uri);
        let analysis = tokio::task::spawn_blocking(move || Arc::new(Analysis::new(&name, &text)))
            .await
            .ok()?;
        if let Some(document) = self.state().documents.get_mut(uri)
            && document.version == version
        {
            store(document, version, Arc::clone(&analysis));
        }
        Some(analysis)
    }

    fn last_good(&self, uri: &Uri) -> Option<Arc<Analysis>> {
        self.state()
            .documents
            .get(uri)
            .and_then(|document| document.last_good.clone())
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A handler that panicked left nothing half-done that matters more than answering.
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn store(document: &mut Document, version: i32, analysis: Arc<Analysis>) {
    if !analysis.compilation.ast.flows.is_empty()
        || !analysis.compilation.ast.contracts.is_empty()
        || !analysis.compilation.ast.functions.is_empty()
    {
        document.last_good = Some(Arc::clone(&analysis));
    }
    document.analysis = Some((version, analysis));
}

/// The name diagnostics carry: the file's path when it has one.
fn display_name(uri: &Uri) -> String {
    uri.to_file_path()
        .map(|path| path.display().to_string())
        .unwrap_or_else(|| uri.as_str().to_owned())
}

/// Applies one change of `didChange` to `text`: the whole text, or a range of it.
fn apply_change(text: &mut String, change: TextDocumentContentChangeEvent) {
    match change.range {
        None => *text = change.text,
        Some(range) => {
            // Each change applies to the text the previous one left, so it needs its own index.
            let lines = LineIndex::new(text);
            let start = analysis::offset(&lines, text, range.start);
            let end = analysis::offset(&lines, text, range.end).max(start);
            text.replace_range(start..end, &change.text);
        }
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let debounce = params
            .initialization_options
            .as_ref()
            .and_then(|options| options.get("debounceMs"))
            .and_then(serde_json::Value::as_u64)
            .map(Duration::from_millis);
        self.state().debounce = debounce;
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(PositionEncodingKind::UTF16),
                text_document_sync: Some(TextDocumentSyncCapability::Kind(
                    TextDocumentSyncKind::INCREMENTAL,
                )),
                document_symbol_provider: Some(OneOf::Left(true)),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                completion_provider: Some(CompletionOptions {
                    // Quotes for bracket access (`result['`); `{` opens a template placeholder.
                    trigger_characters: Some(
                        [".", "$", " ", "[", ",", "'", "\"", "{"]
                            .map(str::to_owned)
                            .to_vec(),
                    ),
                    ..CompletionOptions::default()
                }),
                definition_provider: Some(OneOf::Left(true)),
                references_provider: Some(OneOf::Left(true)),
                rename_provider: Some(OneOf::Right(RenameOptions {
                    prepare_provider: Some(true),
                    work_done_progress_options: WorkDoneProgressOptions::default(),
                })),
                folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                        ..CodeActionOptions::default()
                    },
                )),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "stratum-lsp".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            offset_encoding: None,
        })
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let document = params.text_document;
        self.state().documents.insert(
            document.uri.clone(),
            Document {
                text: document.text,
                version: document.version,
                analysis: None,
                last_good: None,
            },
        );
        self.schedule(document.uri, document.version, Duration::ZERO);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let version = params.text_document.version;
        let delay = {
            let mut state = self.state();
            let delay = state.debounce.unwrap_or(DEFAULT_DEBOUNCE);
            let Some(document) = state.documents.get_mut(&uri) else {
                return;
            };
            for change in params.content_changes {
                apply_change(&mut document.text, change);
            }
            document.version = version;
            delay
        };
        self.schedule(uri, version, delay);
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        self.state().documents.remove(&uri);
        self.client.publish_diagnostics(uri, Vec::new(), None).await;
    }

    async fn document_symbol(
        &self,
        params: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        let Some(analysis) = self.analysis(&params.text_document.uri).await else {
            return Ok(None);
        };
        Ok(Some(DocumentSymbolResponse::Nested(
            symbols::document_symbols(&analysis),
        )))
    }

    async fn folding_range(&self, params: FoldingRangeParams) -> Result<Option<Vec<FoldingRange>>> {
        let Some(analysis) = self.analysis(&params.text_document.uri).await else {
            return Ok(None);
        };
        Ok(Some(symbols::folding_ranges(&analysis)))
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let Some(analysis) = self.analysis(&uri).await else {
            return Ok(None);
        };
        Ok(Some(actions::code_actions(
            &analysis,
            &uri,
            params.range,
            &self.links,
        )))
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let at = params.text_document_position_params;
        let Some(analysis) = self.analysis(&at.text_document.uri).await else {
            return Ok(None);
        };
        let offset = analysis.offset(at.position);
        Ok(
            hover::hover_in(&analysis, analysis.index(), offset).map(|(span, markdown)| Hover {
                contents: HoverContents::Markup(MarkupContent {
                    kind: MarkupKind::Markdown,
                    value: markdown,
                }),
                range: Some(analysis.range(span)),
            }),
        )
    }

    async fn goto_definition(
        &self,
        params: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let at = params.text_document_position_params;
        let uri = at.text_document.uri;
        let Some(analysis) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let offset = analysis.offset(at.position);
        Ok(
            navigate::definition_in(&analysis, analysis.index(), offset).map(|span| {
                GotoDefinitionResponse::Scalar(Location {
                    uri,
                    range: analysis.range(span),
                })
            }),
        )
    }

    async fn references(&self, params: ReferenceParams) -> Result<Option<Vec<Location>>> {
        let at = params.text_document_position;
        let uri = at.text_document.uri;
        let Some(analysis) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let offset = analysis.offset(at.position);
        let spans = navigate::references_in(
            &analysis,
            analysis.index(),
            offset,
            params.context.include_declaration,
        );
        Ok((!spans.is_empty()).then(|| {
            spans
                .into_iter()
                .map(|span| Location {
                    uri: uri.clone(),
                    range: analysis.range(span),
                })
                .collect()
        }))
    }

    async fn prepare_rename(
        &self,
        params: TextDocumentPositionParams,
    ) -> Result<Option<PrepareRenameResponse>> {
        let Some(analysis) = self.analysis(&params.text_document.uri).await else {
            return Ok(None);
        };
        let offset = analysis.offset(params.position);
        Ok(
            navigate::prepare_rename_in(&analysis, analysis.index(), offset).map(
                |(span, placeholder)| PrepareRenameResponse::RangeWithPlaceholder {
                    range: analysis.range(span),
                    placeholder,
                },
            ),
        )
    }

    async fn rename(&self, params: RenameParams) -> Result<Option<WorkspaceEdit>> {
        let at = params.text_document_position;
        let uri = at.text_document.uri;
        let Some(analysis) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let offset = analysis.offset(at.position);
        match navigate::rename_in(&analysis, analysis.index(), offset, &params.new_name) {
            Ok(edits) => {
                let edits = edits
                    .into_iter()
                    .map(|(span, new_text)| TextEdit {
                        range: analysis.range(span),
                        new_text,
                    })
                    .collect();
                Ok(Some(WorkspaceEdit {
                    changes: Some(HashMap::from([(uri, edits)])),
                    ..WorkspaceEdit::default()
                }))
            }
            // The client shows the message and changes nothing.
            Err(error) => Err(Error::invalid_params(error.to_string())),
        }
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let at = params.text_document_position;
        let uri = at.text_document.uri;
        let Some(analysis) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let last_good = self.last_good(&uri);
        let offset = analysis.offset(at.position);
        let items = complete::complete(&analysis, last_good.as_deref(), offset)
            .into_iter()
            .enumerate()
            .map(|(rank, item)| {
                let new_text = item
                    .insert_text
                    .clone()
                    .unwrap_or_else(|| item.label.clone());
                CompletionItem {
                    kind: Some(match item.kind {
                        CompletionKind::Key => CompletionItemKind::PROPERTY,
                        CompletionKind::Contract => CompletionItemKind::STRUCT,
                        CompletionKind::Function => CompletionItemKind::FUNCTION,
                        CompletionKind::Flow => CompletionItemKind::MODULE,
                        CompletionKind::Step => CompletionItemKind::REFERENCE,
                        CompletionKind::Field => CompletionItemKind::FIELD,
                        CompletionKind::Variable => CompletionItemKind::VARIABLE,
                        CompletionKind::Value => CompletionItemKind::ENUM_MEMBER,
                    }),
                    detail: item.detail,
                    documentation: item.documentation.map(|value| {
                        Documentation::MarkupContent(MarkupContent {
                            kind: MarkupKind::Markdown,
                            value,
                        })
                    }),
                    // The server's order: required keys first, then the format's order.
                    sort_text: Some(format!("{rank:05}")),
                    filter_text: Some(item.label.clone()),
                    text_edit: item.replace.map(|span| {
                        CompletionTextEdit::Edit(TextEdit {
                            range: analysis.range(span),
                            new_text: new_text.clone(),
                        })
                    }),
                    insert_text: Some(new_text),
                    label: item.label,
                    ..CompletionItem::default()
                }
            })
            .collect();
        Ok(Some(CompletionResponse::Array(items)))
    }
}
