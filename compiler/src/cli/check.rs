//! `stratumc check`: reads specs, checks them, renders their diagnostics on stdout.

use std::process::ExitCode;

use crate::source::SourceMap;
use crate::{Compilation, check_bytes, check_workflow_names};

use super::inputs::{collect_inputs, read_input};
use super::report::{Stream, report};
use super::{CheckArgs, SPEC_ERRORS, USAGE_OR_IO_ERROR};

pub fn check(args: &CheckArgs) -> ExitCode {
    let mut io_failed = false;
    let inputs = match collect_inputs(&args.paths) {
        Ok(inputs) => inputs,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(USAGE_OR_IO_ERROR);
        }
    };
    let mut sources = SourceMap::new();
    let mut compilations: Vec<Compilation> = Vec::with_capacity(inputs.len());
    for input in &inputs {
        match read_input(input) {
            Ok(bytes) => compilations.push(check_bytes(&mut sources, &input.display(), &bytes)),
            Err(error) => {
                eprintln!("error: cannot read {}: {error}", input.display());
                io_failed = true;
            }
        }
    }
    check_workflow_names(&mut compilations);
    let outcome = report(
        &sources,
        &mut compilations,
        &args.diagnostics,
        args.format,
        Stream::Stdout,
    );
    if io_failed || outcome.write_failed {
        ExitCode::from(USAGE_OR_IO_ERROR)
    } else if outcome.passed(&args.diagnostics) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(SPEC_ERRORS)
    }
}
