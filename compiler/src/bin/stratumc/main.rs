//! `stratumc`: the command line. Reads specs, runs the compiler, renders its diagnostics and
//! sets the exit code, the same for every command: 0 on success, 1 when a spec has errors (or
//! warnings, under `--deny-warnings`), 2 on a usage or I/O error; `migrate` adds 3, for a
//! version it cannot migrate to.

mod build;
mod eval;
mod graph;
mod migrate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use stratum_compiler::cli::{self, CheckArgs, DiagnosticArgs, MessageFormat, USAGE_OR_IO_ERROR};
use stratum_compiler::diagnostic::{Code, did_you_mean};

#[derive(Parser)]
#[command(
    name = "stratumc",
    version,
    about = "Checks Stratum workflow specs (.stratum.yaml), reports every problem with its exact place, and builds them into execution plans",
    after_help = "Examples:\n  stratumc check examples/sentiment.stratum.yaml\n  stratumc check specs/ --format short\n  cat spec.stratum.yaml | stratumc check - --format json\n  stratumc build examples/deploy.stratum.yaml -o deploy.plan.json\n  stratumc migrate old.stratum.yaml --dry-run\n  stratumc explain E0007\n  stratumc schema > stratum-spec.schema.json\n\nExit status (every command): 0 on success, 1 when a spec has errors (or warnings, with --deny-warnings), 2 on a usage or I/O error (migrate: 3 when it cannot reach the version asked for)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check specs: files, directories (every *.stratum.yaml below them) or `-` for stdin
    #[command(
        after_help = "Examples:\n  stratumc check examples/deploy.stratum.yaml\n  stratumc check specs/ --format short --deny-warnings\n  stratumc check spec.stratum.yaml --allow W0012\n\nExit status: 0 when no spec has errors, 1 when one has (or has warnings, with --deny-warnings), 2 on a usage or I/O error."
    )]
    Check(CheckArgs),
    /// Check one spec and write its execution plan as JSON (refused when the spec has errors)
    #[command(
        after_help = "Examples:\n  stratumc build examples/deploy.stratum.yaml -o deploy.plan.json\n  stratumc build examples/deploy.stratum.yaml --flow integration_tests --pretty\n  cat spec.stratum.yaml | stratumc build - > spec.plan.json\n\nDiagnostics go to stderr, the plan to stdout or to -o. The plan's JSON Schema is compiler/schemas/plan.schema.json.\n\nExit status: 0 when the plan was written, 1 when the spec has errors (or warnings, with --deny-warnings) and no plan was written, 2 on a usage or I/O error."
    )]
    Build(BuildArgs),
    /// Evaluate one expression the way the runtime will, with values given as JSON
    #[command(
        after_help = "Examples:\n  stratumc eval 'result.confidence > 0.7' --result '{\"confidence\": 0.42}' --ensure\n  stratumc eval 'len($.steps.s1.output.items)' --steps '{\"s1\": {\"items\": [1, 2]}}'\n  stratumc eval 'dry_streak >= 2' --var dry_streak=1\n  stratumc eval \"file_exists('README.md')\" --root .\n\nExit status: 0 when the value was printed (with --ensure: it is truthy), 1 with --ensure when it is falsy, 2 on a syntax, type or evaluation error."
    )]
    Eval(eval::EvalArgs),
    /// Draw a spec's flows as Graphviz (dot) or Mermaid: steps by kind, data and routing edges
    #[command(
        after_help = "Solid edges are data (depends_on, $.steps references in inputs and skip_if); dashed ones are routing (next, on_fail, a gate's approve, revise and kill); a bold edge runs a sub-flow, drawn as its own cluster.\n\nExamples:\n  stratumc graph examples/deploy.stratum.yaml | dot -Tsvg > deploy.svg\n  stratumc graph examples/deploy.stratum.yaml --flow integration_tests\n  stratumc graph examples/code-review.stratum.yaml --format mermaid -o review.mmd\n\nExit status: 0 when the picture was written, 1 when the spec has errors (printed as `check` prints them; nothing is drawn), 2 on an unknown --flow, a usage or I/O error."
    )]
    Graph(graph::GraphArgs),
    /// Raise a spec to a newer spec version by editing its text, and show the edits as a diff
    #[command(
        after_help = "Only what the new version needs changes (today, the `version` value, in its own quotes); comments, order, blank lines and line endings are kept byte for byte. The spec is checked first: one with errors is refused, with `check`'s diagnostics on stderr. The result is checked too and never written with errors. The diff goes to stdout (to stderr with `-o -`), a `migrated` line to stderr. Versions: 0.1, 0.2, 0.3; each hop is a step up, so 0.1 -> 0.3 goes through 0.2.\n\nExamples:\n  stratumc migrate examples/sentiment.stratum.yaml --dry-run\n  stratumc migrate specs/review.stratum.yaml --to 0.2 --backup\n  stratumc migrate old.stratum.yaml -o new.stratum.yaml --force\n  cat old.stratum.yaml | stratumc migrate - -o - > new.stratum.yaml\n\nExit status: 0 when the spec was written, was already at the version, or with --dry-run; 1 when the spec (or its migrated text) has errors and nothing was written; 2 on a usage or I/O error (an unreadable spec, an existing OUT without --force, `-` without -o or --dry-run); 3 when --to is not a known version or is older than the spec's."
    )]
    Migrate(migrate::MigrateArgs),
    /// Print the long explanation of a diagnostic code (all codes when none is given)
    #[command(
        after_help = "Examples:\n  stratumc explain\n  stratumc explain E0029\n  stratumc explain unknown-field\n\nExit status: 0 when the code exists, 2 when it does not."
    )]
    Explain {
        /// A code such as E0007, or its name such as duplicate-key
        code: Option<String>,
    },
    /// Print the JSON Schema of the spec format, for editors without the language server
    #[command(
        after_help = "The schema is generated from the compiler's key tables; the published copy is compiler/schemas/stratum-spec.schema.json. Point an editor's YAML support at it with a first line such as\n  # yaml-language-server: $schema=<path or URL of stratum-spec.schema.json>\nIt catches misspelt keys, wrong value types and missing keys; `stratumc check` checks the rest.\n\nExamples:\n  stratumc schema > stratum-spec.schema.json\n  stratumc schema | jq '.[\"$defs\"].step.properties | keys'\n\nExit status: 0 when the schema was printed, 2 on a usage or I/O error."
    )]
    Schema,
    /// Print a shell completion script
    #[command(
        after_help = "Examples:\n  stratumc completions bash > ~/.local/share/bash-completion/completions/stratumc\n  stratumc completions zsh > ~/.zfunc/_stratumc\n  stratumc completions fish > ~/.config/fish/completions/stratumc.fish"
    )]
    Completions {
        /// The shell to complete in
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args)]
struct BuildArgs {
    /// The spec, or `-` for stdin
    spec: PathBuf,
    /// Where to write the plan (`-`: stdout, the default)
    #[arg(short, long, value_name = "PLAN")]
    output: Option<PathBuf>,
    /// Build only this flow and the flows it runs; it becomes the plan's entry flow
    #[arg(long, value_name = "NAME")]
    flow: Option<String>,
    /// Indent the JSON
    #[arg(long)]
    pretty: bool,
    /// How to print diagnostics (on stderr)
    #[arg(long, value_enum, default_value_t = MessageFormat::Human)]
    message_format: MessageFormat,
    #[command(flatten)]
    diagnostics: DiagnosticArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => cli::check(&args),
        Command::Build(args) => build::build(&args),
        Command::Eval(args) => eval::eval(&args),
        Command::Graph(args) => graph::graph(&args),
        Command::Migrate(args) => migrate::migrate(&args),
        Command::Explain { code } => explain(code.as_deref()),
        Command::Schema => schema(),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "stratumc", &mut script);
            printed(&String::from_utf8_lossy(&script), ExitCode::SUCCESS)
        }
    }
}

/// `status` once `text` is on stdout (or its reader has gone); an I/O error otherwise.
pub(crate) fn printed(text: &str, status: ExitCode) -> ExitCode {
    match cli::output::print(text) {
        Ok(()) => status,
        Err(error) => {
            eprintln!("error: cannot write to standard output: {error}");
            ExitCode::from(USAGE_OR_IO_ERROR)
        }
    }
}

/// Prints the spec schema.
fn schema() -> ExitCode {
    printed(
        &stratum_compiler::spec_schema::spec_schema_text(),
        ExitCode::SUCCESS,
    )
}

fn explain(code: Option<&str>) -> ExitCode {
    let Some(text) = code else {
        let list: String = Code::ALL
            .iter()
            .map(|code| format!("{code}  {:<30} {}\n", code.slug(), code.summary()))
            .collect();
        return printed(&list, ExitCode::SUCCESS);
    };
    match Code::parse(text) {
        Some(code) => printed(code.explanation(), ExitCode::SUCCESS),
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
