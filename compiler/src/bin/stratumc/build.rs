//! `stratumc build`: checks one spec and writes its execution plan, or refuses with the same
//! diagnostics as `check` when the spec has errors.

use std::process::ExitCode;

use stratum_compiler::lower::{self, LowerError, Options};

use stratum_compiler::cli::output::write_product;
use stratum_compiler::cli::report::check_single;
use stratum_compiler::cli::{SPEC_ERRORS, USAGE_OR_IO_ERROR};

use crate::BuildArgs;

pub(crate) fn build(args: &BuildArgs) -> ExitCode {
    let (sources, compilation) = match check_single(
        &args.spec,
        &args.diagnostics,
        args.message_format,
        "no plan written",
    ) {
        Ok(checked) => checked,
        Err(status) => return status,
    };
    let Some(src) = sources.iter().next() else {
        return ExitCode::from(USAGE_OR_IO_ERROR);
    };
    let options = Options {
        flow: args.flow.clone(),
    };
    let plan = match lower::lower(&compilation, src, &options) {
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
