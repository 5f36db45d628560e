//! `stratumc check`: reads specs, checks them, renders their diagnostics.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use stratum_compiler::diagnostic::{Levels, Severity};
use stratum_compiler::input::MAX_FILE_SIZE;
use stratum_compiler::render::{self, human};
use stratum_compiler::source::SourceMap;
use stratum_compiler::{Compilation, check_bytes, check_workflow_names};

use crate::{CheckArgs, Format, USAGE_OR_IO_ERROR, human_style};

pub(crate) fn check(args: &CheckArgs) -> ExitCode {
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
    let levels = Levels {
        deny: args.deny.clone(),
        allow: args.allow.clone(),
    };
    for compilation in &mut compilations {
        levels.apply(&mut compilation.diagnostics);
    }

    let reports = render::reports(&sources, &compilations);
    let output = match args.format {
        Format::Human => human::render(&sources, &reports, human_style(args.color)),
        Format::Short => render::short::render(&sources, &reports),
        Format::Json => render::json::render(&sources, &reports),
        Format::Github => render::github::render(&sources, &reports),
        Format::Sarif => render::sarif::render(&sources, &reports),
    };
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(output.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(USAGE_OR_IO_ERROR);
    }

    let count = |severity| {
        compilations
            .iter()
            .flat_map(|c| &c.diagnostics)
            .filter(|d| d.severity == severity)
            .count()
    };
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    if matches!(args.format, Format::Human) {
        eprintln!("{}", summary(compilations.len(), errors, warnings));
    }
    if io_failed {
        ExitCode::from(USAGE_OR_IO_ERROR)
    } else if errors > 0 || (args.deny_warnings && warnings > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn summary(files: usize, errors: usize, warnings: usize) -> String {
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

enum Input {
    Stdin,
    File(PathBuf),
}

impl Input {
    fn display(&self) -> String {
        match self {
            Input::Stdin => "<stdin>".to_owned(),
            Input::File(path) => path.display().to_string(),
        }
    }
}

/// Files as given, and every `*.stratum.yaml` below the directories given, in sorted order.
fn collect_inputs(paths: &[PathBuf]) -> Result<Vec<Input>, String> {
    let default = [PathBuf::from(".")];
    let paths = if paths.is_empty() {
        &default[..]
    } else {
        paths
    };
    let mut inputs = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            inputs.push(Input::Stdin);
            continue;
        }
        let metadata = std::fs::metadata(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        if metadata.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            if found.is_empty() {
                return Err(format!("no *.stratum.yaml files under {}", path.display()));
            }
            found.sort();
            inputs.extend(found.into_iter().map(Input::File));
        } else {
            inputs.push(Input::File(path.clone()));
        }
    }
    Ok(inputs)
}

/// Finds spec files below `dir`, skipping hidden directories, `target` and `node_modules`,
/// and never following symbolic links to directories (so a link cycle cannot trap it).
fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                walk(&path, found)?;
            }
        } else if name.ends_with(".stratum.yaml") && (file_type.is_file() || path.is_file()) {
            found.push(path);
        }
    }
    Ok(())
}

/// Reads at most one byte more than the size limit, so a huge file costs no more than that.
fn read_input(input: &Input) -> std::io::Result<Vec<u8>> {
    let limit = MAX_FILE_SIZE as u64 + 1;
    let mut bytes = Vec::new();
    match input {
        Input::Stdin => {
            std::io::stdin()
                .lock()
                .take(limit)
                .read_to_end(&mut bytes)?;
        }
        Input::File(path) => {
            std::fs::File::open(path)?
                .take(limit)
                .read_to_end(&mut bytes)?;
        }
    }
    Ok(bytes)
}
