//! `stratumc graph`: draws a spec's flows as Graphviz or Mermaid. A spec with errors is not
//! drawn: its diagnostics go to stderr as `check` prints them, and the exit status is 1.
//! Warnings are printed too, as `build` prints them.

use std::path::PathBuf;
use std::process::ExitCode;

use stratum_compiler::graph::{self, Format};

use stratum_compiler::cli::output::write_product;
use stratum_compiler::cli::report::check_single;
use stratum_compiler::cli::{DiagnosticArgs, MessageFormat, USAGE_OR_IO_ERROR};

#[derive(clap::Args)]
pub(crate) struct GraphArgs {
    /// The spec to draw, or `-` for stdin
    spec: PathBuf,
    /// Draw this flow and the flows it runs, instead of every flow
    #[arg(long, value_name = "NAME")]
    flow: Option<String>,
    /// The picture's language
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    format: GraphFormat,
    /// Where to write the picture (`-`: stdout, the default)
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// How to print diagnostics (on stderr)
    #[arg(long, value_enum, default_value_t = MessageFormat::Human)]
    message_format: MessageFormat,
    #[command(flatten)]
    diagnostics: DiagnosticArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GraphFormat {
    /// Graphviz: pipe it to `dot -Tsvg`
    Dot,
    /// A Mermaid flowchart, for Markdown
    Mermaid,
}

pub(crate) fn graph(args: &GraphArgs) -> ExitCode {
    let (_sources, compilation) = match check_single(
        &args.spec,
        &args.diagnostics,
        args.message_format,
        "nothing drawn",
    ) {
        Ok(checked) => checked,
        Err(status) => return status,
    };
    let format = match args.format {
        GraphFormat::Dot => Format::Dot,
        GraphFormat::Mermaid => Format::Mermaid,
    };
    let picture = match graph::draw(&compilation, args.flow.as_deref(), format) {
        Ok(picture) => picture,
        Err(unknown) => {
            eprintln!("error: {unknown}");
            return ExitCode::from(USAGE_OR_IO_ERROR);
        }
    };
    match write_product(args.output.as_deref(), &picture) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: cannot write the picture: {error}");
            ExitCode::from(USAGE_OR_IO_ERROR)
        }
    }
}
