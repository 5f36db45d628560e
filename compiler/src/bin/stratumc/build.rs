//! `stratumc build`: checks one spec and writes its execution plan, or refuses with the same
//! diagnostics as `check` when the spec has errors.

use std::process::ExitCode;

use stratum_compiler::check_bytes;
use stratum_compiler::lower::{self, LowerError, Options};
use stratum_compiler::source::SourceMap;

use crate::inputs::{Input, read_input};
use crate::output::write_product;
use crate::report::{Stream, report};
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
        Stream::Stderr,
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
    match write_product(args.output.as_deref(), &json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: cannot write the plan: {error}");
            ExitCode::from(USAGE_OR_IO_ERROR)
        }
    }
}
