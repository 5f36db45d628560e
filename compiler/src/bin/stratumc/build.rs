//! `stratumc build`: checks one spec and writes its execution plan, or refuses with the same
//! diagnostics as `check` when the spec has errors.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use stratum_compiler::check_bytes;
use stratum_compiler::lower::{self, LowerError, Options};
use stratum_compiler::source::SourceMap;

use crate::inputs::{Input, read_input};
use crate::report::report;
use crate::{BuildArgs, SPEC_ERRORS, USAGE_OR_IO_ERROR};

pub(crate) fn build(args: &BuildArgs) -> ExitCode {
    let input = Input::single(&args.spec);
    let bytes = match read_input(&input) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("error: cannot read {}: {error}", input.display());
            return ExitCode::from(USAGE_OR_IO_ERROR);
        }
    };
    let mut sources = SourceMap::new();
    let mut compilations = vec![check_bytes(&mut sources, &input.display(), &bytes)];
    let outcome = report(
        &sources,
        &mut compilations,
        &args.diagnostics,
        args.message_format,
        &mut std::io::stderr().lock(),
        false,
    );
    if !outcome.passed(&args.diagnostics) {
        eprintln!("error: no plan written: the spec has errors");
        return ExitCode::from(SPEC_ERRORS);
    }
    let (Some(compilation), Some(src)) = (compilations.first(), sources.iter().next()) else {
        return ExitCode::from(USAGE_OR_IO_ERROR);
    };
    let options = Options {
        flow: args.flow.clone(),
    };
    let plan = match lower::lower(compilation, src, &options) {
        Ok(plan) => plan,
        Err(error @ LowerError::SpecHasErrors) => {
            eprintln!("error: {error}");
            return ExitCode::from(SPEC_ERRORS);
        }
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(USAGE_OR_IO_ERROR);
        }
    };
    let json = plan.to_json(args.pretty);
    let written = match args.output.as_deref() {
        None => write_stdout(&json),
        Some(path) if path.as_os_str() == "-" => write_stdout(&json),
        Some(path) => write_file(path, &json),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: cannot write the plan: {error}");
            ExitCode::from(USAGE_OR_IO_ERROR)
        }
    }
}

fn write_stdout(json: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(json.as_bytes())?;
    stdout.flush()
}

/// Writes beside the target and renames over it, so that a runtime never reads half a plan
/// and a failed build leaves the previous plan in place.
fn write_file(path: &Path, json: &str) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} is not a file name", path.display())))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(name);
    temporary_name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary_name);
    let result = std::fs::write(&temporary, json).and_then(|()| std::fs::rename(&temporary, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.map_err(|error| std::io::Error::other(format!("{}: {error}", path.display())))
}
