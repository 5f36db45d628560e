//! What every command line that checks specs shares: the arguments that say how diagnostics
//! are reported, where specs come from, the report itself and its exit statuses. `stratumc`
//! and `stratum-mcp validate` both run [`check()`], so the two answer alike.
//!
//! Exit statuses: 0 on success, [`SPEC_ERRORS`] when a spec has errors (or warnings, under
//! `--deny-warnings`), [`USAGE_OR_IO_ERROR`] on a usage or I/O error.

pub mod check;
pub mod inputs;
pub mod output;
pub mod report;

use std::path::PathBuf;

use clap::ValueEnum;

use crate::diagnostic::{Code, Severity};
use crate::render::human;

pub use check::check;

/// Exit status when a spec has errors (or warnings, under `--deny-warnings`).
pub const SPEC_ERRORS: u8 = 1;

/// Exit status of a usage or I/O error (and, for `eval`, of an expression that cannot run).
pub const USAGE_OR_IO_ERROR: u8 = 2;

/// How diagnostics are reported: shared by every command that checks specs.
#[derive(clap::Args)]
pub struct DiagnosticArgs {
    /// Fail when there are warnings, too
    #[arg(long)]
    pub deny_warnings: bool,
    /// Report this warning as an error (a code such as W0010 or its name; repeatable)
    #[arg(long, value_name = "WARNING", value_parser = parse_warning)]
    pub deny: Vec<Code>,
    /// Do not report this warning at all (a code such as W0012 or its name; repeatable)
    #[arg(long, value_name = "WARNING", value_parser = parse_warning)]
    pub allow: Vec<Code>,
    /// When to colour human output (`auto`: on a terminal, unless NO_COLOR is set)
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
}

/// `stratumc check` (and `stratum-mcp validate`).
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Spec files, directories to search for *.stratum.yaml, or `-` for stdin [default: .]
    pub paths: Vec<PathBuf>,
    /// How to print diagnostics
    #[arg(long, visible_alias = "message-format", value_enum, default_value_t = MessageFormat::Human)]
    pub format: MessageFormat,
    #[command(flatten)]
    pub diagnostics: DiagnosticArgs,
}

/// A warning code for `--deny` and `--allow`: errors cannot be allowed, and are errors already.
fn parse_warning(text: &str) -> Result<Code, String> {
    match Code::parse(text) {
        Some(code) if code.severity() == Severity::Warning => Ok(code),
        Some(code) => Err(format!("{code} is an error, not a warning")),
        None => Err(format!(
            "unknown code `{text}`; `stratumc explain` lists every code"
        )),
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum MessageFormat {
    /// Graphical reports with the source underlined
    Human,
    /// One line each: path:line:col: severity[code]: message
    Short,
    /// A JSON document (schema: compiler/schemas/check-output.schema.json)
    Json,
    /// GitHub Actions annotations
    Github,
    /// SARIF 2.1.0
    Sarif,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// The style of human output to a stream that is (or is not) a terminal.
pub fn human_style(color: Color, terminal: bool) -> human::Style {
    let color = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.parse().ok())
        .unwrap_or(100);
    human::Style { color, width }
}
