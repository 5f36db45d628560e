//! Shared helpers of the workspace's integration tests and benchmarks: the rendering used by
//! snapshots, the `# error: CODE` markers of the invalid corpus, and a generator of large
//! specs for benchmarks and stress tests.

use std::fmt::Write;

use stratum_compiler::diagnostic::{Code, Diagnostic};
use stratum_compiler::render::{self, human};
use stratum_compiler::source::SourceMap;
use stratum_compiler::{Compilation, check_bytes};

/// Checks one file's bytes on its own.
pub fn check_one(name: &str, bytes: &[u8]) -> (SourceMap, Compilation) {
    let mut sources = SourceMap::new();
    let compilation = check_bytes(&mut sources, name, bytes);
    (sources, compilation)
}

/// The snapshot of a checked file: its source, then its diagnostics as people see them
/// (no colour, 80 columns). Control characters are made visible so the snapshot stays text.
pub fn render_snapshot(sources: &SourceMap, compilations: &[Compilation]) -> String {
    let mut out = String::new();
    for compilation in compilations {
        if let Some(file) = sources.get(compilation.file) {
            let _ = writeln!(out, "----- SOURCE {}", file.name());
            out.push_str(file.text());
            if !file.text().ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out.push_str("----- DIAGNOSTICS\n");
    let reports = render::reports(sources, compilations);
    out.push_str(&human::render(sources, &reports, human::Style::PLAIN));
    visible(&out)
}

/// Replaces control characters (other than line breaks and tabs) by their visible symbols.
pub fn visible(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('?'),
            '\u{7f}' => '␡',
            c => c,
        })
        .collect()
}

/// An expected diagnostic, from a `# error: E0007` or `# warning: W0001` comment.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    pub line: usize,
    pub code: String,
}

/// Reads the markers of a corpus file. A marker alone on its line applies to the next line
/// that is not a marker (or to its own line when none follows); a marker after content applies
/// to its own line.
pub fn expected_diagnostics(text: &str) -> Vec<Expected> {
    let lines: Vec<&str> = text.lines().collect();
    let mut expected = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let Some((before, code)) = marker(line) else {
            continue;
        };
        let target = if before.trim().is_empty() {
            (index + 1..lines.len())
                .find(|&next| {
                    lines
                        .get(next)
                        .is_some_and(|l| marker(l).is_none_or(|(b, _)| !b.trim().is_empty()))
                })
                .unwrap_or(index)
        } else {
            index
        };
        expected.push(Expected {
            line: target + 1,
            code: code.to_owned(),
        });
    }
    expected.sort();
    expected
}

fn marker(line: &str) -> Option<(&str, &str)> {
    for tag in ["# error: ", "# warning: "] {
        if let Some(at) = line.find(tag) {
            let code = line.get(at + tag.len()..)?.split_whitespace().next()?;
            return Some((line.get(..at)?, code));
        }
    }
    None
}

/// The (line, code) of each diagnostic, as the markers would state them.
pub fn actual_diagnostics(sources: &SourceMap, diagnostics: &[Diagnostic]) -> Vec<Expected> {
    let mut actual: Vec<Expected> = diagnostics
        .iter()
        .map(|d| Expected {
            line: sources
                .get(d.primary.span.file)
                .map_or(0, |file| file.line_col(d.primary.span.start as usize).line),
            code: d.code.as_str().to_owned(),
        })
        .collect();
    actual.sort();
    actual
}

/// Codes whose trigger cannot live in a single corpus file, and where they are tested instead.
pub const CODES_TESTED_ELSEWHERE: &[(Code, &str)] = &[
    (
        Code::E0002,
        "needs a file over 16 MiB: compiler/tests/cli.rs and tests/tests/hostile.rs",
    ),
    (
        Code::E0015,
        "retired: every known version (0.1, 0.2, 0.3) is supported, so nothing reports it",
    ),
    (
        Code::E0018,
        "needs two files: compiler/tests/cli.rs (with its snapshot)",
    ),
    (
        Code::E0034,
        "needs values to evaluate with: `stratumc eval` in compiler/tests/cli.rs (with its snapshot)",
    ),
    (
        Code::E0049,
        "dormant: every built-in of the reference's `ensure` is supported today (the last, \
         `vocabulary_compliance`, joined them), so nothing reports it; the checker's path stays \
         for the next one",
    ),
    (
        Code::W0002,
        "retired: a literal outside an enum's values is now the error E0047, so nothing reports it",
    ),
];

/// A valid version 0.2 spec with `steps` steps: contracts, functions, a gate, and a flow whose
/// steps chain through `$.steps` references, `depends_on`, ensures and `skip_if`s, as real
/// specs do. About 300 bytes a step.
pub fn generated_spec(steps: usize) -> String {
    generate(steps, false)
}

/// [`generated_spec`] with one warning in every step but the gates (every 100th): each step
/// calls `analyse` and passes it an input it does not declare (W0021). For measuring how
/// diagnostics are rendered; about 280 bytes a step.
pub fn generated_spec_with_warnings(steps: usize) -> String {
    generate(steps, true)
}

fn generate(steps: usize, warn: bool) -> String {
    let mut spec = String::from(
        "version: \"0.2\"\n\
         contracts:\n\
         \x20 Finding:\n\
         \x20   summary: {type: string}\n\
         \x20   severity: {type: string, values: [low, medium, high]}\n\
         \x20   confidence: {type: number}\n\
         \x20   items: {type: array}\n\
         functions:\n\
         \x20 analyse:\n\
         \x20   mode: infer\n\
         \x20   intent: \"Analyse one part of the change\"\n\
         \x20   input: {text: {type: string}}\n\
         \x20   output: Finding\n\
         \x20   ensure:\n\
         \x20     - \"result.confidence >= 0.5\"\n\
         \x20     - \"len(result.items) < 100\"\n\
         \x20   retries: 2\n\
         \x20 approve:\n\
         \x20   mode: gate\n\
         \x20   timeout: 3600\n\
         flows:\n\
         \x20 main:\n\
         \x20   input: {text: {type: string}}\n\
         \x20   output: Finding\n\
         \x20   max_rounds: 3\n\
         \x20   steps:\n",
    );
    for index in 0..steps {
        let _ = writeln!(spec, "      - id: step_{index}");
        if index > 0 && index % 100 == 0 {
            let _ = writeln!(spec, "        function: approve");
            // Approval goes on to the next step: `~` would end the flow there.
            let approve = match index + 1 < steps {
                true => format!("step_{}", index + 1),
                false => "~".to_owned(),
            };
            let _ = writeln!(spec, "        on_approve: {approve}");
            let _ = writeln!(spec, "        on_revise: step_{}", index - 1);
            let _ = writeln!(spec, "        on_kill: ~");
            continue;
        }
        if index % 2 == 0 || warn {
            let _ = writeln!(spec, "        function: analyse");
        } else {
            let _ = writeln!(
                spec,
                "        intent: \"Review part {index} of the change\""
            );
            let _ = writeln!(spec, "        output_contract: Finding");
            let _ = writeln!(
                spec,
                "        ensure: [\"result.severity != 'high' or result.confidence > 0.9\"]"
            );
        }
        let extra = if warn { ", note: \"$.input.text\"" } else { "" };
        match index {
            0 => {
                let _ = writeln!(spec, "        inputs: {{text: \"$.input.text\"{extra}}}");
            }
            _ => {
                let _ = writeln!(
                    spec,
                    "        inputs: {{text: \"$.steps.step_{}.output.summary\"{extra}}}",
                    index - 1
                );
                let _ = writeln!(spec, "        depends_on: [step_{}]", index - 1);
                let _ = writeln!(
                    spec,
                    "        skip_if: \"$.steps.step_{}.output.severity == 'low'\"",
                    index - 1
                );
            }
        }
    }
    spec
}

/// A valid version 0.3 spec with `steps` steps: every tenth a decompose step whose task graph
/// the next four fan out over with `parallel_dispatch` (typed templates), the three after them
/// with three-stage pipelines (`when`, `exit_when`, `{prev}`), and two inline steps that read
/// the fan-outs' outcomes. About 350 bytes a step.
pub fn generated_v03_spec(steps: usize) -> String {
    let mut spec = String::from(
        "version: \"0.3\"\n\
         contracts:\n\
         \x20 Task:\n\
         \x20   id: {type: string}\n\
         \x20   description: {type: string}\n\
         \x20   files_owned: {type: \"string[]\"}\n\
         \x20 TaskGraph:\n\
         \x20   tasks: {type: \"Task[]\"}\n\
         \x20 Note:\n\
         \x20   text: {type: string}\n\
         flows:\n\
         \x20 main:\n\
         \x20   input: {feature: {type: string}}\n\
         \x20   steps:\n",
    );
    let mut plan = 0;
    for index in 0..steps {
        let _ = writeln!(spec, "      - id: step_{index}");
        if index > 0 {
            let _ = writeln!(spec, "        depends_on: [step_{}]", index - 1);
        }
        match index % 10 {
            0 => {
                plan = index;
                let _ = writeln!(spec, "        type: decompose");
                let _ = writeln!(spec, "        agent: claude");
                let _ = writeln!(spec, "        intent: \"Split part {index} into tasks\"");
                let _ = writeln!(spec, "        inputs: {{feature: \"$.input.feature\"}}");
                let _ = writeln!(spec, "        output_contract: TaskGraph");
                let _ = writeln!(
                    spec,
                    "        ensure: [\"len(result.tasks) > 0\", \"no_file_conflicts(result.tasks)\"]"
                );
            }
            1..=4 => {
                let _ = writeln!(spec, "        type: parallel_dispatch");
                let _ = writeln!(spec, "        source: \"$.steps.step_{plan}.output.tasks\"");
                let _ = writeln!(
                    spec,
                    "        intent_template: \"Implement {{description}} ({{task.id}}), owning {{files_owned}}\""
                );
                let _ = writeln!(spec, "        max_concurrent: 2");
                let _ = writeln!(spec, "        ensure: [\"len(result.failed) == 0\"]");
            }
            5..=7 => {
                let _ = writeln!(spec, "        type: pipeline");
                let _ = writeln!(spec, "        source: \"$.steps.step_{plan}.output.tasks\"");
                let _ = writeln!(spec, "        require: any");
                let _ = writeln!(spec, "        stages:");
                let _ = writeln!(
                    spec,
                    "          - intent_template: \"Reproduce {{item.description}}\""
                );
                let _ = writeln!(
                    spec,
                    "          - {{intent_template: \"Decide on {{id}}: {{prev}}\", exit_when: \"'skip' in result\"}}"
                );
                let _ = writeln!(
                    spec,
                    "          - {{intent_template: \"Fix {{description}}: {{prev}}\", when: \"len(item.files_owned) > 0\"}}"
                );
            }
            9 => {
                let _ = writeln!(spec, "        judge:");
                let _ = writeln!(spec, "          predicates:");
                let _ = writeln!(
                    spec,
                    "            - {{id: built, type: deterministic, statement: \"file_contains('artifacts/build_{index}.txt', 'ok')\"}}"
                );
                let _ = writeln!(
                    spec,
                    "            - {{id: reported, type: verified, statement: \"The report names every task\"}}"
                );
            }
            _ => {
                let _ = writeln!(spec, "        intent: \"Report on part {index}\"");
                let _ = writeln!(
                    spec,
                    "        inputs: {{outcome: \"$.steps.step_{}.output.outcome\"}}",
                    plan + 7
                );
                let _ = writeln!(spec, "        output_contract: Note");
            }
        }
    }
    spec
}

/// An expression fixture (`corpus/expressions/*.expr`): a header of `#` lines, then the
/// expression. `# expect: E0029 E0047` lists the codes it must report (none: it must be
/// clean); `# let NAME: TYPE` declares a name, `# let $.input: TYPE` and
/// `# let $.steps.ID.output: TYPE` the `$`-references, in the type notation of
/// `stratum_grammar::Type`. Other header lines are prose.
pub struct ExpressionFixture {
    pub expect: Vec<String>,
    pub env: stratum_grammar::Env,
    pub expression: String,
}

impl ExpressionFixture {
    pub fn parse(text: &str) -> Result<ExpressionFixture, String> {
        let mut expect = Vec::new();
        let mut env = stratum_grammar::Env::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next_if(|line| line.starts_with('#')) {
            let line = line.trim_start_matches('#').trim();
            if let Some(codes) = line.strip_prefix("expect:") {
                expect.extend(codes.split_whitespace().map(str::to_owned));
            } else if let Some(declaration) = line.strip_prefix("let ") {
                let (name, ty) = declaration
                    .split_once(':')
                    .ok_or_else(|| format!("`# let {declaration}` needs `NAME: TYPE`"))?;
                let ty: stratum_grammar::Type = ty
                    .trim()
                    .parse()
                    .map_err(|error| format!("bad type in `# let {declaration}`: {error}"))?;
                let name = name.trim();
                if name == "$.input" {
                    env.input = Some(ty);
                } else if let Some(step) = name
                    .strip_prefix("$.steps.")
                    .and_then(|rest| rest.strip_suffix(".output"))
                {
                    env.steps.insert(step.to_owned(), ty);
                } else {
                    env.names.insert(name.to_owned(), ty);
                }
            }
        }
        let expression: Vec<&str> = lines.collect();
        Ok(ExpressionFixture {
            expect,
            env,
            expression: expression.join("\n"),
        })
    }

    /// Parses and (when it parses) type-checks the expression, as diagnostics on a file named
    /// `name` that holds only the expression.
    pub fn diagnose(&self, name: &str) -> (SourceMap, Vec<Diagnostic>) {
        let mut sources = SourceMap::new();
        // The line break gives a span at the very end of the expression a character to point
        // at; miette draws no label past the last byte.
        let file = sources.add(name, format!("{}\n", self.expression));
        let locate = |span: stratum_grammar::Span| file.span(span.range());
        let parsed = stratum_grammar::parse(&self.expression);
        let mut problems = parsed.problems;
        if let (Some(expr), true) = (&parsed.expr, problems.is_empty()) {
            problems.extend(stratum_grammar::check(expr, &self.env).problems);
        }
        let mut diagnostics: Vec<Diagnostic> = problems
            .iter()
            .map(|problem| {
                stratum_compiler::expression::diagnostic(problem, &self.expression, locate)
            })
            .collect();
        stratum_compiler::diagnostic::sort(&mut diagnostics);
        (sources, diagnostics)
    }
}

/// The snapshot of an expression fixture: the expression, then its diagnostics as people see
/// them (no colour, 80 columns).
pub fn render_expression_snapshot(sources: &SourceMap, diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    let reports: Vec<render::FileReport<'_>> = sources
        .iter()
        .map(|file| {
            let _ = write!(out, "----- EXPRESSION {}\n{}", file.name(), file.text());
            render::FileReport { file, diagnostics }
        })
        .collect();
    out.push_str("----- DIAGNOSTICS\n");
    out.push_str(&human::render(sources, &reports, human::Style::PLAIN));
    visible(&out)
}

/// Every `*.stratum.yaml` in `dir` (relative to the workspace root), by name, sorted. For
/// tests: it panics on a directory it cannot read.
#[allow(clippy::unwrap_used)]
pub fn specs_in(dir: &str) -> Vec<(String, String)> {
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(dir),
    )
    .expect("the directory exists")
    .map(|entry| entry.expect("readable").path())
    .filter(|path| path.to_string_lossy().ends_with(".stratum.yaml"))
    .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
            (name, std::fs::read_to_string(&path).expect("readable"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_apply_to_the_next_line_or_their_own() {
        let text = "a: 1\n# error: E0007\n# warning: W0001\nb: 2  # error: E0011\n";
        assert_eq!(
            expected_diagnostics(text),
            [
                Expected {
                    line: 4,
                    code: "E0007".into()
                },
                Expected {
                    line: 4,
                    code: "E0011".into()
                },
                Expected {
                    line: 4,
                    code: "W0001".into()
                },
            ]
        );
        assert_eq!(
            expected_diagnostics("# error: E0008\n"),
            [Expected {
                line: 1,
                code: "E0008".into()
            }]
        );
    }

    #[test]
    fn generated_specs_check_clean() {
        let (sources, compilation) =
            check_one("generated.stratum.yaml", generated_spec(250).as_bytes());
        let file = sources.get(compilation.file).map(|f| f.name().to_owned());
        assert!(
            compilation.diagnostics.is_empty(),
            "{file:?}: {:?}",
            compilation.diagnostics
        );
        assert_eq!(
            compilation
                .ast
                .flows
                .first()
                .and_then(|f| f.steps.as_ref())
                .map(|s| s.value.len()),
            Some(250)
        );
    }

    #[test]
    fn the_generated_v03_spec_is_valid() {
        let spec = generated_v03_spec(120);
        let (sources, compilation) = check_one("generated-v03.stratum.yaml", spec.as_bytes());
        assert!(
            compilation.diagnostics.is_empty(),
            "{}",
            render_snapshot(&sources, std::slice::from_ref(&compilation))
        );
        let steps = compilation
            .ast
            .flows
            .first()
            .and_then(|flow| flow.steps.as_ref())
            .map(|steps| steps.value.len());
        assert_eq!(steps, Some(120));
    }
}
