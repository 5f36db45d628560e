//! Reporting diagnostics, the same way for every command: the chosen format, warnings denied
//! or allowed, and the exit status they imply.

use std::io::{IsTerminal, Write};

use crate::Compilation;
use crate::diagnostic::{Levels, Severity};
use crate::render::{self, human};
use crate::source::SourceMap;

use super::{DiagnosticArgs, MessageFormat, human_style};

/// What the diagnostics of a run came to.
pub struct Outcome {
    pub errors: usize,
    pub warnings: usize,
    /// The diagnostics could not be written.
    pub write_failed: bool,
}

impl Outcome {
    /// Whether the specs may be used: no errors, and no warnings under `--deny-warnings`.
    pub fn passed(&self, args: &DiagnosticArgs) -> bool {
        self.errors == 0 && !(args.deny_warnings && self.warnings > 0)
    }
}

/// Where diagnostics go.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// `check`: diagnostics are its product; a human report ends with a count on stderr.
    Stdout,
    /// Commands whose stdout is their product: nothing is printed for a clean spec.
    Stderr,
}

/// Applies `--deny` / `--allow`, renders every diagnostic in `format` to `stream` and counts
/// them.
pub fn report(
    sources: &SourceMap,
    compilations: &mut [Compilation],
    args: &DiagnosticArgs,
    format: MessageFormat,
    stream: Stream,
) -> Outcome {
    let summary = stream == Stream::Stdout;
    let levels = Levels {
        deny: args.deny.clone(),
        allow: args.allow.clone(),
    };
    for compilation in compilations.iter_mut() {
        levels.apply(&mut compilation.diagnostics);
    }
    let count = |severity| {
        compilations
            .iter()
            .flat_map(|c| &c.diagnostics)
            .filter(|d| d.severity == severity)
            .count()
    };
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    let reports = render::reports(sources, compilations);
    // Commands other than `check` print nothing for a clean spec, but in the formats that
    // tools parse, which always have a document.
    let quiet = !summary
        && errors == 0
        && warnings == 0
        && matches!(
            format,
            MessageFormat::Human | MessageFormat::Short | MessageFormat::Github
        );
    let output = match format {
        _ if quiet => String::new(),
        MessageFormat::Human => {
            let terminal = match stream {
                Stream::Stdout => std::io::stdout().is_terminal(),
                Stream::Stderr => std::io::stderr().is_terminal(),
            };
            human::render(sources, &reports, human_style(args.color, terminal))
        }
        MessageFormat::Short => render::short::render(sources, &reports),
        MessageFormat::Json => render::json::render(sources, &reports),
        MessageFormat::Github => render::github::render(sources, &reports),
        MessageFormat::Sarif => render::sarif::render(sources, &reports),
    };
    // A reader that closed the stream early (`| head`) took what it wanted: not a failure.
    let write =
        |out: &mut dyn Write| match out.write_all(output.as_bytes()).and_then(|()| out.flush()) {
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            written => written,
        };
    let write_failed = match stream {
        Stream::Stdout => write(&mut std::io::stdout().lock()),
        Stream::Stderr => write(&mut std::io::stderr().lock()),
    }
    .is_err();
    if summary && matches!(format, MessageFormat::Human) {
        eprintln!("{}", summary_line(compilations.len(), errors, warnings));
    }
    Outcome {
        errors,
        warnings,
        write_failed,
    }
}

/// Reads and checks the one spec a command works on, reporting its diagnostics on stderr.
/// `Err` is the exit status when the spec cannot be used: unreadable (2), or with errors (1;
/// `refusal` says what was not done).
pub fn check_single(
    spec: &std::path::Path,
    args: &DiagnosticArgs,
    format: MessageFormat,
    refusal: &str,
) -> Result<(SourceMap, Compilation), std::process::ExitCode> {
    let input = super::inputs::Input::single(spec);
    let bytes = super::inputs::read_input(&input).map_err(|error| {
        eprintln!("error: cannot read {}: {error}", input.display());
        std::process::ExitCode::from(super::USAGE_OR_IO_ERROR)
    })?;
    let mut sources = SourceMap::new();
    let mut compilations = vec![crate::check_bytes(&mut sources, &input.display(), &bytes)];
    let outcome = report(&sources, &mut compilations, args, format, Stream::Stderr);
    if !outcome.passed(args) {
        eprintln!("error: {refusal}: the spec has errors");
        return Err(std::process::ExitCode::from(super::SPEC_ERRORS));
    }
    let compilation = compilations
        .pop()
        .ok_or(std::process::ExitCode::from(super::USAGE_OR_IO_ERROR))?;
    Ok((sources, compilation))
}

fn summary_line(files: usize, errors: usize, warnings: usize) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let checked = plural(files, "spec");
    match (errors, warnings) {
        (0, 0) => format!("checked {checked}: no problems"),
        _ => format!(
            "checked {checked}: {} and {}",
            plural(errors, "error"),
            plural(warnings, "warning")
        ),
    }
}
