//! `stratumc graph`: draws a spec's flows as Graphviz or Mermaid. A spec with errors is not
//! drawn: its diagnostics go to stderr as `check` prints them, and the exit status is 1.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use stratum_compiler::check_bytes;
use stratum_compiler::graph::{self, Format};
use stratum_compiler::input::MAX_FILE_SIZE;
use stratum_compiler::render::{self, human};
use stratum_compiler::source::SourceMap;

use crate::{Color, USAGE_OR_IO_ERROR, human_style};

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
    /// Write the picture to FILE instead of stdout (`-` is stdout)
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// When to colour the diagnostics of a spec with errors (`auto`: on a terminal, unless
    /// NO_COLOR is set)
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GraphFormat {
    /// Graphviz: pipe it to `dot -Tsvg`
    Dot,
    /// A Mermaid flowchart, for Markdown
    Mermaid,
}

pub(crate) fn graph(args: &GraphArgs) -> ExitCode {
    let stdin = args.spec.as_os_str() == "-";
    let name = if stdin {
        "<stdin>".to_owned()
    } else {
        args.spec.display().to_string()
    };
    let bytes = match read(args, stdin) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("error: cannot read {name}: {error}");
            return ExitCode::from(USAGE_OR_IO_ERROR);
        }
    };
    let mut sources = SourceMap::new();
    let compilation = check_bytes(&mut sources, &name, &bytes);
    if compilation.has_errors() {
        let compilations = [compilation];
        let reports = render::reports(&sources, &compilations);
        eprint!(
            "{}",
            human::render(&sources, &reports, human_style(args.color))
        );
        eprintln!("error: {name} has errors; nothing was drawn");
        return ExitCode::from(1);
    }
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
    write(args, &picture)
}

/// Reads at most one byte more than the size limit, as `check` does.
fn read(args: &GraphArgs, stdin: bool) -> std::io::Result<Vec<u8>> {
    let limit = MAX_FILE_SIZE as u64 + 1;
    let mut bytes = Vec::new();
    if stdin {
        std::io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)?;
    } else {
        std::fs::File::open(&args.spec)?
            .take(limit)
            .read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

fn write(args: &GraphArgs, picture: &str) -> ExitCode {
    match args.output.as_ref().filter(|path| path.as_os_str() != "-") {
        Some(path) => {
            if let Err(error) = std::fs::write(path, picture) {
                eprintln!("error: cannot write {}: {error}", path.display());
                return ExitCode::from(USAGE_OR_IO_ERROR);
            }
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(picture.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::from(USAGE_OR_IO_ERROR);
            }
        }
    }
    ExitCode::SUCCESS
}
