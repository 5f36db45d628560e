//! `stratumc`: the command line. Reads specs, runs the compiler, renders its diagnostics and
//! sets the exit code: 0 when no spec has errors, 1 when one has (or has warnings under
//! `--deny-warnings`), 2 on a usage or I/O error.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use stratum_compiler::diagnostic::{Code, Severity, did_you_mean};
use stratum_compiler::input::MAX_FILE_SIZE;
use stratum_compiler::render::{self, human};
use stratum_compiler::source::SourceMap;
use stratum_compiler::{Compilation, check_bytes, check_workflow_names};

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
    /// When to colour human output (`auto`: on a terminal, unless NO_COLOR is set)
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
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
        Command::Check(args) => check(&args),
        Command::Explain { code } => explain(code.as_deref()),
    }
}

const USAGE_OR_IO_ERROR: u8 = 2;

fn check(args: &CheckArgs) -> ExitCode {
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

fn human_style(color: Color) -> human::Style {
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
