//! `stratumc migrate`: raises a spec to a newer spec version by editing its text, one hop at a
//! time (`stratum_compiler::migrate`), and shows the edits as a unified diff. The spec is
//! checked first and again after every hop: a spec with errors is refused with `check`'s
//! diagnostics, as `build` refuses one, and a result with errors is never written.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use stratum_compiler::Compilation;
use stratum_compiler::check_bytes;
use stratum_compiler::cli::output::{print, replace_file};
use stratum_compiler::cli::report::{Stream, check_single, report};
use stratum_compiler::cli::{DiagnosticArgs, MessageFormat, SPEC_ERRORS, USAGE_OR_IO_ERROR};
use stratum_compiler::migrate::{self, LATEST, MigrateError};
use stratum_compiler::source::SourceMap;

/// Exit status when `--to` is not a version, or one the spec cannot be migrated to.
const NO_MIGRATION: u8 = 3;

#[derive(clap::Args)]
pub(crate) struct MigrateArgs {
    /// The spec to migrate, or `-` for stdin (which needs -o or --dry-run)
    spec: PathBuf,
    /// The version to raise the spec to
    #[arg(long, value_name = "VERSION", default_value = LATEST)]
    to: String,
    /// Print the diff and write nothing
    #[arg(long)]
    dry_run: bool,
    /// Copy the spec to SPEC.bak before rewriting it in place
    #[arg(long, conflicts_with = "output")]
    backup: bool,
    /// Write the migrated spec to OUT instead of over SPEC (`-`: stdout; the diff then goes to stderr)
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Overwrite OUT when it exists
    #[arg(long, requires = "output")]
    force: bool,
    #[command(flatten)]
    diagnostics: DiagnosticArgs,
}

/// Where the migrated spec goes.
enum Target<'a> {
    InPlace(&'a Path),
    File(&'a Path),
    Stdout,
}

pub(crate) fn migrate(args: &MigrateArgs) -> ExitCode {
    match run(args) {
        Ok(status) | Err(status) => status,
    }
}

fn run(args: &MigrateArgs) -> Result<ExitCode, ExitCode> {
    migrate::known(&args.to).map_err(no_migration)?;
    let target = target(args)?;
    let (sources, compilation) = check_single(
        &args.spec,
        &args.diagnostics,
        MessageFormat::Human,
        "nothing migrated",
    )?;
    let src = sources
        .iter()
        .next()
        .ok_or(ExitCode::from(USAGE_OR_IO_ERROR))?;
    let (name, original) = (src.name(), src.text());
    // A clean spec has a version: a missing one is an error (E0014) that `check_single` refused.
    let from = compilation
        .ast
        .version
        .as_ref()
        .map(|version| version.value.as_str())
        .ok_or_else(|| spec_errors(&MigrateError::NoVersion))?;
    let hops = migrate::path(from, &args.to).map_err(no_migration)?;
    if hops.is_empty() {
        eprintln!("{name}: already at version {}", args.to);
        // Asked for a copy elsewhere, the caller gets one, so `-o` works the same in a script.
        return match target {
            Target::File(_) | Target::Stdout if !args.dry_run => write(&target, original),
            _ => Ok(ExitCode::SUCCESS),
        };
    }
    let mut text = original.to_owned();
    let mut compilation = compilation;
    for hop in hops {
        let edits = (hop.edits)(&compilation.ast, &text).map_err(|error| spec_errors(&error))?;
        text = migrate::apply(&text, &edits);
        compilation = check_hop(name, &text, hop.to, &args.diagnostics)?;
    }
    let diff = similar::TextDiff::from_lines(original, text.as_str())
        .unified_diff()
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string();
    if args.dry_run {
        print_diff(&diff, false)?;
        eprintln!(
            "would migrate {name}: {from} -> {} (dry run: nothing written)",
            args.to
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.backup {
        backup(&args.spec)?;
    }
    write(&target, &text)?;
    print_diff(&diff, matches!(target, Target::Stdout))?;
    let written = match target {
        Target::InPlace(_) => String::new(),
        Target::File(path) => format!(", written to {}", path.display()),
        Target::Stdout => ", written to standard output".to_owned(),
    };
    eprintln!("migrated {name}: {from} -> {}{written}", args.to);
    Ok(ExitCode::SUCCESS)
}

/// Where the result goes, refusing before anything is read when it cannot go anywhere: stdin
/// has no file to rewrite, and an existing OUT is kept unless `--force` says otherwise.
fn target(args: &MigrateArgs) -> Result<Target<'_>, ExitCode> {
    let stdin = args.spec.as_os_str() == "-";
    match args.output.as_deref() {
        Some(path) if path.as_os_str() == "-" => Ok(Target::Stdout),
        Some(path) => {
            let exists = std::fs::symlink_metadata(path).is_ok();
            if exists && !args.force && !args.dry_run {
                eprintln!(
                    "error: {} exists; pass --force to overwrite it",
                    path.display()
                );
                return Err(ExitCode::from(USAGE_OR_IO_ERROR));
            }
            Ok(Target::File(path))
        }
        None if stdin && !args.dry_run => {
            eprintln!(
                "error: a spec read from standard input cannot be migrated in place; pass -o OUT (`-o -` for standard output) or --dry-run"
            );
            Err(ExitCode::from(USAGE_OR_IO_ERROR))
        }
        None => Ok(Target::InPlace(&args.spec)),
    }
}

/// Checks the text a hop gave. A hop never leaves errors, but if one did, its diagnostics are
/// printed and nothing is written: a broken spec must not replace a working one.
fn check_hop(
    name: &str,
    text: &str,
    version: &str,
    args: &DiagnosticArgs,
) -> Result<Compilation, ExitCode> {
    let mut sources = SourceMap::new();
    let compilation = check_bytes(&mut sources, name, text.as_bytes());
    // Warnings are the spec's own and were reported already; only errors stop the migration.
    if !compilation.has_errors() {
        return Ok(compilation);
    }
    let mut compilations = vec![compilation];
    report(
        &sources,
        &mut compilations,
        args,
        MessageFormat::Human,
        Stream::Stderr,
    );
    eprintln!(
        "error: nothing written: the spec has errors once migrated to {version}; a migration should never cause one, so please report it"
    );
    Err(ExitCode::from(SPEC_ERRORS))
}

/// Copies the spec, byte for byte and with its permissions, to `SPEC.bak`.
fn backup(spec: &Path) -> Result<(), ExitCode> {
    let mut name = spec.as_os_str().to_owned();
    name.push(".bak");
    let copy = PathBuf::from(name);
    std::fs::copy(spec, &copy).map(drop).map_err(|error| {
        eprintln!(
            "error: cannot write the backup {}: {error}; nothing migrated",
            copy.display()
        );
        ExitCode::from(USAGE_OR_IO_ERROR)
    })
}

fn write(target: &Target<'_>, text: &str) -> Result<ExitCode, ExitCode> {
    let written = match target {
        Target::InPlace(path) | Target::File(path) => replace_file(path, text.as_bytes()),
        Target::Stdout => print(text),
    };
    written.map(|()| ExitCode::SUCCESS).map_err(|error| {
        eprintln!("error: cannot write the migrated spec: {error}");
        ExitCode::from(USAGE_OR_IO_ERROR)
    })
}

/// Prints the diff on stdout, or on stderr when stdout carries the spec itself.
fn print_diff(diff: &str, to_stderr: bool) -> Result<(), ExitCode> {
    if to_stderr {
        eprint!("{diff}");
        return Ok(());
    }
    print(diff).map_err(|error| {
        eprintln!("error: cannot write to standard output: {error}");
        ExitCode::from(USAGE_OR_IO_ERROR)
    })
}

fn no_migration(error: MigrateError) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::from(NO_MIGRATION)
}

fn spec_errors(error: &MigrateError) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::from(SPEC_ERRORS)
}
