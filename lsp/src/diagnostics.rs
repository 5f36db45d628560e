//! The compiler's diagnostics as the protocol's: the same codes, messages and spans as
//! `stratumc check`, secondary labels as related information, tags where they fit, and each
//! code linked to its explanation.

use std::path::PathBuf;

use stratum_compiler::diagnostic::{Code, Diagnostic, Severity};
use tower_lsp_server::ls_types::{
    self as lsp, CodeDescription, DiagnosticRelatedInformation, DiagnosticSeverity, DiagnosticTag,
    Location, NumberOrString, Uri,
};

use crate::analysis::Analysis;

/// Where the explanation of each code can be opened: a Markdown file per code, written once
/// into a cache directory (the explanations are compiled into the server).
#[derive(Clone, Debug, Default)]
pub struct ExplanationLinks {
    dir: Option<PathBuf>,
}

impl ExplanationLinks {
    /// Writes every explanation under `dir`; without a writable `dir`, codes get no link.
    pub fn write_to(dir: PathBuf) -> ExplanationLinks {
        let written = std::fs::create_dir_all(&dir).is_ok()
            && Code::ALL.iter().all(|code| {
                std::fs::write(dir.join(format!("{code}.md")), code.explanation()).is_ok()
            });
        ExplanationLinks {
            dir: written.then_some(dir),
        }
    }

    /// The default place: the user's cache directory, per server version.
    pub fn default_dir() -> PathBuf {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("stratum-lsp")
            .join(env!("CARGO_PKG_VERSION"))
            .join("explain")
    }

    fn href(&self, code: Code) -> Option<Uri> {
        Uri::from_file_path(self.dir.as_ref()?.join(format!("{code}.md")))
    }
}

/// The document's diagnostics, in the compiler's order.
pub fn to_lsp(analysis: &Analysis, uri: &Uri, links: &ExplanationLinks) -> Vec<lsp::Diagnostic> {
    analysis
        .compilation
        .diagnostics
        .iter()
        .map(|diagnostic| convert(analysis, uri, links, diagnostic))
        .collect()
}

/// One diagnostic. The message is the compiler's, with its `help` on a line of its own, as
/// `stratumc check --format short` has it and editors show it.
pub fn convert(
    analysis: &Analysis,
    uri: &Uri,
    links: &ExplanationLinks,
    diagnostic: &Diagnostic,
) -> lsp::Diagnostic {
    let mut message = diagnostic.message.clone();
    if let Some(help) = &diagnostic.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    let related: Vec<DiagnosticRelatedInformation> = diagnostic
        .secondary
        .iter()
        .map(|label| DiagnosticRelatedInformation {
            location: Location {
                uri: uri.clone(),
                range: analysis.range(label.span),
            },
            message: label.message.clone(),
        })
        .collect();
    lsp::Diagnostic {
        range: analysis.range(diagnostic.primary.span),
        severity: Some(match diagnostic.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(diagnostic.code.as_str().to_owned())),
        code_description: links
            .href(diagnostic.code)
            .map(|href| CodeDescription { href }),
        source: Some("stratumc".to_owned()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: tags(diagnostic.code),
        data: None,
    }
}

/// `Unnecessary` for what is declared or written but has no effect: editors fade it out.
fn tags(code: Code) -> Option<Vec<DiagnosticTag>> {
    match code {
        // Unused contract, unused function, unreachable step, a key nothing reads, a timeout
        // nothing reads, a default that never applies, a null gate route on a step that is not
        // a gate, a skip reason without its condition, `max_rounds` without a gate.
        Code::W0010
        | Code::W0011
        | Code::W0012
        | Code::W0001
        | Code::W0005
        | Code::W0006
        | Code::W0007
        | Code::W0008
        | Code::W0020 => Some(vec![DiagnosticTag::UNNECESSARY]),
        _ => None,
    }
}
