//! `stratumc`: the command line. Reads specs, runs the compiler, renders its diagnostics and
//! sets the exit code: 0 when no spec has errors, 1 when one has (or has warnings under
//! `--deny-warnings`), 2 on a usage or I/O error.

mod check;
mod eval;
mod graph;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use stratum_compiler::diagnostic::{Code, Severity, did_you_mean};
use stratum_compiler::render::human;

#[derive(Parser)]
#[command(
    name = "stratumc",
    version,
    about = "Checks Stratum workflow specs (.stratum.yaml) and reports every problem with its exact place",
    after_help = "Examples:\n  stratumc check examples/sentiment.stratum.yaml\n  stratumc check specs/ --format short\n  cat spec.stratum.yaml | stratumc check - --format json\n  stratumc explain E0007"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check specs: files, directories (every *.stratum.yaml below them) or `-` for stdin
    #[command(
        after_help = "Exit status: 0 when no spec has errors, 1 when one has (or has warnings, with --deny-warnings), 2 on a usage or I/O error."
    )]
    Check(CheckArgs),
    /// Evaluate one expression the way the runtime will, with values given as JSON
    #[command(
        after_help = "Examples:\n  stratumc eval 'result.confidence > 0.7' --result '{\"confidence\": 0.42}' --ensure\n  stratumc eval 'len($.steps.s1.output.items)' --steps '{\"s1\": {\"items\": [1, 2]}}'\n  stratumc eval 'dry_streak >= 2' --var dry_streak=1\n  stratumc eval \"file_exists('README.md')\" --root .\n\nExit status: 0 when the value was printed (with --ensure: it is truthy), 1 with --ensure when it is falsy, 2 on a syntax, type or evaluation error."
    )]
    Eval(eval::EvalArgs),
    /// Draw a spec's flows as Graphviz (dot) or Mermaid: steps by kind, data and routing edges
    #[command(
        after_help = "Solid edges are data (depends_on, $.steps references in inputs and skip_if); dashed ones are routing (next, on_fail, a gate's approve, revise and kill); a bold edge runs a sub-flow, drawn as its own cluster.\n\nExamples:\n  stratumc graph examples/deploy.stratum.yaml | dot -Tsvg > deploy.svg\n  stratumc graph examples/deploy.stratum.yaml --flow integration_tests\n  stratumc graph examples/code-review.stratum.yaml --format mermaid -o review.mmd\n\nExit status: 0 when the picture was written, 1 when the spec has errors (printed as `check` prints them; nothing is drawn), 2 on an unknown --flow, a usage or I/O error."
    )]
    Graph(graph::GraphArgs),
    /// Print the long explanation of a diagnostic code (all codes when none is given)
    Explain {
        /// A code such as E0007, or its name such as duplicate-key
        code: Option<String>,
    },
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Spec files, directories to search for *.stratum.yaml, or `-` for stdin [default: .]
    paths: Vec<PathBuf>,
    /// How to print diagnostics
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Exit with status 1 when there are warnings, too
    #[arg(long)]
    deny_warnings: bool,
    /// Report this warning as an error (a code such as W0010 or its name; repeatable)
    #[arg(long, value_name = "WARNING", value_parser = parse_warning)]
    deny: Vec<Code>,
    /// Do not report this warning at all (a code such as W0012 or its name; repeatable)
    #[arg(long, value_name = "WARNING", value_parser = parse_warning)]
    allow: Vec<Code>,
    /// When to colour human output (`auto`: on a terminal, unless NO_COLOR is set)
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
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
enum Format {
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
enum Color {
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::check(&args),
        Command::Eval(args) => eval::eval(&args),
        Command::Graph(args) => graph::graph(&args),
        Command::Explain { code } => explain(code.as_deref()),
    }
}

/// Exit status of a usage or I/O error (and, for `eval`, of an expression that cannot run).
pub(crate) const USAGE_OR_IO_ERROR: u8 = 2;

pub(crate) fn human_style(color: Color) -> human::Style {
    let terminal = std::io::stdout().is_terminal();
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

fn explain(code: Option<&str>) -> ExitCode {
    let Some(text) = code else {
        for code in Code::ALL {
            println!("{code}  {:<30} {}", code.slug(), code.summary());
        }
        return ExitCode::SUCCESS;
    };
    match Code::parse(text) {
        Some(code) => {
            print!("{}", code.explanation());
            ExitCode::SUCCESS
        }
        None => {
            let names: Vec<&str> = Code::ALL.iter().map(|code| code.as_str()).collect();
            let suggestion = did_you_mean(&text.to_uppercase(), names.iter().copied())
                .map(|best| format!("; did you mean {best}?"))
                .unwrap_or_default();
            eprintln!(
                "error: unknown diagnostic code `{text}`{suggestion} (`stratumc explain` lists them all)"
            );
            ExitCode::from(USAGE_OR_IO_ERROR)
        }
    }
}
