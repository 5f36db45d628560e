//! `stratumc eval`: runs one expression the way the runtime will, for people debugging their
//! postconditions. Exit status: 0 (the value was printed; with `--ensure`, it was truthy),
//! 1 (with `--ensure`: falsy, with the explanation), 2 (a syntax, type or evaluation error,
//! printed as a diagnostic on the expression; or bad arguments).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;
use stratum_compiler::diagnostic::{self, Code, Diagnostic};
use stratum_compiler::expression;
use stratum_compiler::render::{FileReport, human};
use stratum_compiler::source::{SourceFile, SourceMap};
use stratum_grammar::{Bindings, Env, EvalErrorKind, Limits, ProblemKind, Type};

use stratum_compiler::cli::{Color, USAGE_OR_IO_ERROR, human_style};

#[derive(clap::Args)]
pub(crate) struct EvalArgs {
    /// The expression, e.g. "result.confidence > 0.7" (one starting with `-`, such as
    /// "-7 % 3", is an expression too, not a flag)
    #[arg(allow_hyphen_values = true)]
    expression: String,
    /// The value of `result`, as JSON
    #[arg(long, value_name = "JSON", conflicts_with = "result_file")]
    result: Option<String>,
    /// Read the value of `result` from a JSON file (`-` for stdin)
    #[arg(long, value_name = "FILE")]
    result_file: Option<PathBuf>,
    /// The flow's input, bound to `$.input`, as a JSON object
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// Step outputs, bound to `$.steps.<id>.output`, as a JSON object keyed by step id
    #[arg(long, value_name = "JSON")]
    steps: Option<String>,
    /// Bind another name, e.g. `--var item='{"id": 3}'` or `--var dry_streak=2` (repeatable)
    #[arg(long = "var", value_name = "NAME=JSON")]
    vars: Vec<String>,
    /// The directory `file_exists` and `file_contains` resolve paths against
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Treat the expression as an `ensure`: exit 1 when its value is falsy, and say why
    #[arg(long)]
    ensure: bool,
    /// When to colour diagnostics (`auto`: on a terminal, unless NO_COLOR is set)
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
}

/// The name of the pseudo-file that holds the expression in diagnostics.
const EXPRESSION_FILE: &str = "<expression>";

pub(crate) fn eval(args: &EvalArgs) -> ExitCode {
    let values = match Values::read(args) {
        Ok(values) => values,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(USAGE_OR_IO_ERROR);
        }
    };
    let mut sources = SourceMap::new();
    // The line break gives a span at the very end of the expression a character to point at;
    // miette draws no label past the last byte.
    let id = sources
        .add(EXPRESSION_FILE, format!("{}\n", args.expression))
        .id();
    let sources = sources;
    let Some(file) = sources.get(id) else {
        return ExitCode::from(USAGE_OR_IO_ERROR);
    };
    let source = &args.expression;
    let locate = |span: stratum_grammar::Span| file.span(span.range());

    let parsed = stratum_grammar::parse(source);
    let mut diagnostics: Vec<Diagnostic> = parsed
        .problems
        .iter()
        .map(|problem| expression::diagnostic(problem, source, locate))
        .collect();
    let Some(expr) = parsed.expr.filter(|_| diagnostics.is_empty()) else {
        return report_failure(&sources, file, diagnostics, args.color);
    };

    let checked = stratum_grammar::check(&expr, &values.env());
    for problem in &checked.problems {
        let mut diagnostic = expression::diagnostic(problem, source, locate);
        if problem.kind == ProblemKind::UnknownName && problem.replacement.is_none() {
            let name = source.get(problem.span.range()).unwrap_or_default();
            diagnostic.help = Some(binding_help(name));
        }
        diagnostics.push(diagnostic);
    }
    if diagnostics.iter().any(Diagnostic::is_error) {
        return report_failure(&sources, file, diagnostics, args.color);
    }
    if !diagnostics.is_empty() {
        print_diagnostics(&sources, file, diagnostics, args.color);
    }

    let program = stratum_grammar::compile(&expr, source);
    let bindings = values.bindings();
    let limits = Limits {
        root: args.root.clone(),
        vocabulary: Some(stratum_compiler::vocabulary::READER),
        ..Limits::default()
    };
    // One traced run gives the value, its truthiness and, for a failed ensure, the operands.
    let explanation = program.explain(&bindings, &limits);
    let value = match &explanation.outcome {
        Ok(value) => value,
        // A built-in that reports several violations (`plan_completion`) fails the `ensure`
        // with each of them, as the runtime reports them.
        Err(error) if args.ensure && error.kind == EvalErrorKind::Violations => {
            let mut text = format!(
                "ensure `{source}` failed with {} violation{}:\n",
                error.violations.len(),
                if error.violations.len() == 1 { "" } else { "s" }
            );
            for violation in &error.violations {
                text.push_str(&format!("  {violation}\n"));
            }
            eprint!("{text}");
            return ExitCode::from(1);
        }
        Err(error) => {
            let diagnostic = Diagnostic::new(
                Code::E0034,
                error.message.clone(),
                locate(error.span),
                "evaluating this failed",
            )
            .help(evaluation_help(error.kind));
            return report_failure(&sources, file, vec![diagnostic], args.color);
        }
    };
    if args.ensure && !explanation.held() {
        let status = crate::printed(&format!("{value}\n"), ExitCode::from(1));
        eprintln!("{explanation}");
        return status;
    }
    crate::printed(&format!("{value}\n"), ExitCode::SUCCESS)
}

fn print_diagnostics(
    sources: &SourceMap,
    file: &SourceFile,
    mut diagnostics: Vec<Diagnostic>,
    color: Color,
) {
    diagnostic::sort(&mut diagnostics);
    let reports = [FileReport {
        file,
        diagnostics: &diagnostics,
    }];
    eprint!(
        "{}",
        human::render(
            sources,
            &reports,
            human_style(color, std::io::stderr().is_terminal()),
        )
    );
}

fn report_failure(
    sources: &SourceMap,
    file: &SourceFile,
    diagnostics: Vec<Diagnostic>,
    color: Color,
) -> ExitCode {
    print_diagnostics(sources, file, diagnostics, color);
    ExitCode::from(USAGE_OR_IO_ERROR)
}

/// The values given on the command line, parsed.
struct Values {
    names: BTreeMap<String, Value>,
    input: Option<Value>,
    steps: BTreeMap<String, Value>,
}

impl Values {
    fn read(args: &EvalArgs) -> Result<Values, String> {
        let mut names = BTreeMap::new();
        let result = match (&args.result, &args.result_file) {
            (Some(text), _) => Some(json("--result", text)?),
            (None, Some(path)) => Some(json_file(path)?),
            (None, None) => None,
        };
        if let Some(result) = result {
            names.insert("result".to_owned(), result);
        }
        for var in &args.vars {
            let Some((name, text)) = var.split_once('=') else {
                return Err(format!(
                    "`--var {var}` needs the form NAME=JSON, e.g. `--var dry_streak=2`"
                ));
            };
            let name = name.trim();
            let identifier = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !identifier {
                return Err(format!("`{name}` in `--var` is not a name"));
            }
            names.insert(name.to_owned(), json(&format!("--var {name}"), text)?);
        }
        let input = args
            .input
            .as_deref()
            .map(|text| json("--input", text))
            .transpose()?;
        let steps = match args
            .steps
            .as_deref()
            .map(|text| json("--steps", text))
            .transpose()?
        {
            None => BTreeMap::new(),
            Some(Value::Object(steps)) => steps.into_iter().collect(),
            Some(_) => {
                return Err(
                    "`--steps` needs a JSON object keyed by step id, e.g. '{\"s1\": {\"label\": \"ok\"}}'"
                        .to_owned(),
                );
            }
        };
        Ok(Values {
            names,
            input,
            steps,
        })
    }

    /// Every bound value is `any` to the checker: a sample value is not a contract, so its
    /// shape is checked when the expression runs, as the runtime would.
    fn env(&self) -> Env {
        Env {
            names: self
                .names
                .keys()
                .map(|name| (name.clone(), Type::Any))
                .collect(),
            input: self.input.as_ref().map(|_| Type::Any),
            steps: self
                .steps
                .keys()
                .map(|id| (id.clone(), Type::Any))
                .collect(),
            ..Env::default()
        }
    }

    fn bindings(&self) -> Bindings<'_> {
        let mut bindings = Bindings::new();
        for (name, value) in &self.names {
            bindings = bindings.name(name, value);
        }
        if let Some(input) = &self.input {
            bindings = bindings.input(input);
        }
        for (id, value) in &self.steps {
            bindings = bindings.step(id, value);
        }
        bindings
    }
}

/// How to give an unbound name a value on the command line.
fn binding_help(name: &str) -> String {
    if name == "result" {
        "pass its value with `--result JSON` or `--result-file FILE`".to_owned()
    } else if name.starts_with("$.input") {
        "pass the flow's input with `--input JSON`".to_owned()
    } else if name.starts_with("$.steps") {
        "pass step outputs with `--steps '{\"<step id>\": <output>}'`".to_owned()
    } else {
        format!("bind it with `--var {name}=JSON`")
    }
}

/// What to do about each kind of evaluation failure.
fn evaluation_help(kind: EvalErrorKind) -> &'static str {
    match kind {
        EvalErrorKind::UnboundName => {
            "bind the value with `--result`, `--var`, `--input` or `--steps`"
        }
        EvalErrorKind::MissingField => {
            "check the field's name; if it may be absent, guard the access: `'f' in x and x.f …`"
        }
        EvalErrorKind::IndexOutOfRange => "guard the index with `len(…)`",
        EvalErrorKind::DivisionByZero => "guard the division: `b != 0 and a / b …`",
        EvalErrorKind::Overflow => {
            "integers are 64-bit here; compute with floats (`x * 1.0`) for larger values"
        }
        EvalErrorKind::NotFinite => "the result must be a finite number",
        EvalErrorKind::Budget | EvalErrorKind::ValueSize => {
            "the expression does too much work; expressions are meant to test values, not to compute large ones"
        }
        EvalErrorKind::File => "file built-ins take paths inside the root given by `--root`",
        EvalErrorKind::Type => {
            "the value given has another type than the expression expects; print it with `stratumc eval` on the sub-expression"
        }
        EvalErrorKind::Value => "guard the operation against this value",
        EvalErrorKind::Invalid => "fix the expression as the other diagnostics say",
        EvalErrorKind::Violations => {
            "in an `ensure`, each of these is a violation of its own; run with `--ensure` to see them one by one"
        }
    }
}

fn json(flag: &str, text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|error| format!("`{flag}` is not valid JSON: {error}"))
}

fn json_file(path: &std::path::Path) -> Result<Value, String> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin().lock())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    json(&format!("--result-file {}", path.display()), &text)
}
