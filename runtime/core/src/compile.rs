//! Spec text to plan, with the compiler: what `stratum_plan` does before it starts a flow.

use stratum_compiler::diagnostic::Diagnostic;
use stratum_compiler::lower::{self, LowerError, Options};
use stratum_compiler::plan::Plan;
use stratum_compiler::source::SourceMap;

/// Why a spec gave no plan.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("the spec has {} error(s)", .diagnostics.iter().filter(|d| d.is_error()).count())]
    Spec {
        sources: SourceMap,
        diagnostics: Vec<Diagnostic>,
    },
    #[error(transparent)]
    Lower(#[from] LowerError),
}

/// Checks and lowers a spec's text (named `name` in diagnostics).
pub fn plan_from_spec(name: &str, text: &str) -> Result<Plan, CompileError> {
    let mut sources = SourceMap::new();
    let compilation = stratum_compiler::check_bytes(&mut sources, name, text.as_bytes());
    if compilation.has_errors() {
        return Err(CompileError::Spec {
            diagnostics: compilation.diagnostics,
            sources,
        });
    }
    let Some(src) = sources.iter().next() else {
        return Err(CompileError::Lower(LowerError::Internal(
            "the spec was not kept".to_owned(),
        )));
    };
    Ok(lower::lower(&compilation, src, &Options::default())?)
}
