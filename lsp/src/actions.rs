//! Code actions: every machine-applicable fix the compiler offers on a diagnostic in the
//! requested range (did-you-mean renames, a missing required key, a key that must go).

use std::collections::HashMap;

use tower_lsp_server::ls_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, Range, TextEdit, Uri, WorkspaceEdit,
};

use crate::analysis::Analysis;
use crate::diagnostics::{ExplanationLinks, convert};

/// The quick fixes of the diagnostics whose primary range touches `range`.
pub fn code_actions(
    analysis: &Analysis,
    uri: &Uri,
    range: Range,
    links: &ExplanationLinks,
) -> Vec<CodeActionOrCommand> {
    let start = analysis.offset(range.start);
    let end = analysis.offset(range.end);
    analysis
        .compilation
        .diagnostics
        .iter()
        .filter(|diagnostic| {
            let span = diagnostic.primary.span;
            (span.start as usize) <= end && start <= (span.end as usize)
        })
        .filter_map(|diagnostic| {
            let fix = diagnostic.fix.as_ref()?;
            let edits: Vec<TextEdit> = fix
                .edits
                .iter()
                .map(|edit| TextEdit {
                    range: analysis.range(edit.span),
                    new_text: edit.replacement.clone(),
                })
                .collect();
            Some(CodeActionOrCommand::CodeAction(CodeAction {
                title: fix.message.clone(),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![convert(analysis, uri, links, diagnostic)]),
                edit: Some(WorkspaceEdit {
                    changes: Some(HashMap::from([(uri.clone(), edits)])),
                    ..WorkspaceEdit::default()
                }),
                is_preferred: Some(true),
                ..CodeAction::default()
            }))
        })
        .collect()
}
