//! Hostile input: each yields a diagnostic, never a panic, in bounded time and memory. Also a
//! short property test: random bytes and random mutations of the examples never panic.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use proptest::prelude::*;
use stratum_compiler::diagnostic::Code;
use stratum_grammar::Type;
use stratum_tests::check_one;

fn codes(bytes: &[u8]) -> Vec<Code> {
    let (_, compilation) = check_one("hostile.stratum.yaml", bytes);
    compilation.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn a_50_mb_file_is_refused_before_parsing() {
    let bytes = vec![b'#'; 50 * 1024 * 1024];
    assert_eq!(codes(&bytes), [Code::E0002]);
    let (sources, compilation) = check_one("huge.stratum.yaml", &bytes);
    insta::assert_snapshot!(stratum_tests::render_snapshot(&sources, &[compilation]));
}

#[test]
fn non_utf8_and_nul_bytes_are_diagnosed() {
    assert_eq!(codes(b"version: \"0.2\"\nflows: \xff\xfe\n"), [Code::E0001]);
    assert_eq!(codes(b"\xff\xfev\x00e\x00r\x00"), [Code::E0001]);
    assert_eq!(codes(b"version: \"0.2\"\x00\n"), [Code::E0003]);
    assert_eq!(codes(b"version: \"0.2\"\n\x1b[31m\n"), [Code::E0003]);
}

#[test]
fn a_billion_laughs_stops_at_the_alias_budget() {
    let mut spec = String::from(
        "version: \"0.2\"\nflows:\n  bomb:\n    input: {}\n    steps: []\nx0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for level in 1..30 {
        let refs = vec![format!("*x{}", level - 1); 10].join(", ");
        spec.push_str(&format!("x{level}: &x{level} [{refs}]\n"));
    }
    let found = codes(spec.as_bytes());
    assert!(found.contains(&Code::E0005), "{found:?}");
}

#[test]
fn a_cycle_through_twenty_thousand_steps_is_one_short_diagnostic() {
    let steps = 20_000;
    let mut spec = String::from("version: \"0.2\"\nflows:\n  ring:\n    input: {}\n    steps:\n");
    for index in 0..steps {
        let previous = (index + steps - 1) % steps;
        spec.push_str(&format!(
            "      - {{id: s{index}, intent: \"Step {index}\", depends_on: [s{previous}]}}\n"
        ));
    }
    let (_, compilation) = check_one("ring.stratum.yaml", spec.as_bytes());
    let found: Vec<Code> = compilation.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(found, [Code::E0040]);
    let cycle = &compilation.diagnostics[0];
    assert!(cycle.secondary.len() < 12, "{}", cycle.secondary.len());
    assert!(cycle.message.len() < 200, "{}", cycle.message);
    assert!(cycle.help.as_ref().unwrap().contains("19988 more"));
}

#[test]
fn a_chain_of_twenty_thousand_flows_running_each_other_is_one_recursion() {
    let flows = 20_000;
    let mut spec = String::from("version: \"0.2\"\nflows:\n");
    for index in 0..flows {
        let next = (index + 1) % flows;
        spec.push_str(&format!(
            "  f{index}:\n    input: {{}}\n    steps:\n      - {{id: call, flow: f{next}}}\n"
        ));
    }
    let found = codes(spec.as_bytes());
    assert_eq!(found, [Code::E0042]);
}

#[test]
fn a_typo_in_every_step_stays_linear() {
    // Each unknown name would be compared with every step id for a did-you-mean: quadratic.
    // Suggestions stop once they would cost too much; every error is still reported.
    let steps = 5_000;
    let mut spec = String::from("version: \"0.2\"\nflows:\n  f:\n    input: {}\n    steps:\n");
    for index in 0..steps {
        spec.push_str(&format!(
            "      - {{id: step_{index}, intent: \"x\", inputs: {{a: \"$.steps.stap_{index}.output\"}}, depends_on: [stepp_{index}]}}\n"
        ));
    }
    let (_, compilation) = check_one("typos.stratum.yaml", spec.as_bytes());
    let diagnostics = &compilation.diagnostics;
    assert_eq!(diagnostics.len(), 2 * steps);
    let suggested = |d: &&stratum_compiler::diagnostic::Diagnostic| d.fix.is_some();
    let with_suggestion = diagnostics.iter().filter(suggested).count();
    assert!(
        with_suggestion > 0 && with_suggestion < steps / 10,
        "{with_suggestion}"
    );
}

#[test]
fn a_large_contract_read_by_every_step_is_shared_not_copied() {
    // 2,000 fields and a 2,000-value enum, produced and read by 5,000 steps: a copy of the
    // contract's type per step and per expression took 17 GB and 84 s at 20,000 steps.
    let mut spec = String::from("version: \"0.2\"\ncontracts:\n  C:\n");
    for field in 0..2_000 {
        spec.push_str(&format!("    f{field}: integer\n"));
    }
    let values: Vec<String> = (0..2_000).map(|value| format!("v{value}")).collect();
    spec.push_str(&format!(
        "    level: {{type: string, values: [{}]}}\nflows:\n  main:\n    input: {{}}\n    steps:\n",
        values.join(", ")
    ));
    for index in 0..5_000 {
        let skip = match index {
            0 => String::new(),
            _ => format!(", skip_if: \"$.steps.s{}.output.level == 'v2'\"", index - 1),
        };
        spec.push_str(&format!(
            "      - {{id: s{index}, intent: \"x\", output_contract: C, ensure: [\"result.f1 > 0 and result.level != 'v1'\"]{skip}}}\n"
        ));
    }
    let (_, compilation) = check_one("large.stratum.yaml", spec.as_bytes());
    assert_eq!(compilation.diagnostics, []);
    let steps = &compilation.model.flows[0].steps;
    let (Type::Record(first), Type::Record(last)) = (&steps[0].result, &steps[4_999].result) else {
        panic!("results are records");
    };
    assert!(std::sync::Arc::ptr_eq(first, last));
}

#[test]
fn ten_thousand_levels_of_nesting_are_cut_off() {
    let flow = format!(
        "version: \"0.2\"\nx: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_eq!(codes(flow.as_bytes()), [Code::E0006]);
    let mapping = format!(
        "version: \"0.2\"\nx: {}1{}\n",
        "{a: ".repeat(10_000),
        "}".repeat(10_000)
    );
    assert_eq!(codes(mapping.as_bytes()), [Code::E0006]);
    let block = format!("version: \"0.2\"\nflows:\n{}1\n", "- ".repeat(10_000));
    // `flows` holding a list is a mistake of its own; the depth is reported once, inside it.
    assert_eq!(codes(block.as_bytes()), [Code::E0012, Code::E0006]);
}

#[test]
fn a_one_megabyte_line_is_diagnosed() {
    let spec = format!("version: \"0.2\"\nflows: {}\n", "x".repeat(1024 * 1024));
    assert_eq!(codes(spec.as_bytes()), [Code::E0012]);
    let quoted = format!(
        "version: \"0.2\"\nflows: {{run: {{input: {{}}, steps: [{{id: a, intent: \"{}\", retries: 0}}]}}}}\n",
        "é".repeat(512 * 1024)
    );
    assert_eq!(codes(quoted.as_bytes()), [Code::E0020]);
}

const EXAMPLES: &[&str] = &[
    include_str!("../../examples/sentiment.stratum.yaml"),
    include_str!("../../examples/reviewed-work.stratum.yaml"),
    include_str!("../../examples/code-review.stratum.yaml"),
    include_str!("../../examples/test-fix-loop.stratum.yaml"),
    include_str!("../../examples/deploy.stratum.yaml"),
];

/// An edit to a spec: replace, insert or delete a run of bytes at a relative position.
#[derive(Debug, Clone)]
enum Mutation {
    Replace(f64, Vec<u8>),
    Insert(f64, Vec<u8>),
    Delete(f64, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Bytes YAML cares about, so that mutations reach the parser's corners, plus any byte.
    let interesting = prop::sample::select(b" \n\t:-[]{},&*!|>'\"#%@`?~\\x".to_vec());
    let byte = prop_oneof![interesting, any::<u8>()];
    prop_oneof![
        (0.0..1.0, prop::collection::vec(byte.clone(), 1..8))
            .prop_map(|(at, b)| Mutation::Replace(at, b)),
        (0.0..1.0, prop::collection::vec(byte, 1..8)).prop_map(|(at, b)| Mutation::Insert(at, b)),
        (0.0..1.0, 1usize..40).prop_map(|(at, n)| Mutation::Delete(at, n)),
    ]
}

fn apply(spec: &mut Vec<u8>, mutation: &Mutation) {
    let position = |at: f64, len: usize| ((at * len as f64) as usize).min(len);
    match mutation {
        Mutation::Replace(at, bytes) => {
            let start = position(*at, spec.len());
            let end = (start + bytes.len()).min(spec.len());
            spec.splice(start..end, bytes.iter().copied());
        }
        Mutation::Insert(at, bytes) => {
            let start = position(*at, spec.len());
            spec.splice(start..start, bytes.iter().copied());
        }
        Mutation::Delete(at, count) => {
            let start = position(*at, spec.len());
            let end = (start + count).min(spec.len());
            spec.drain(start..end);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = check_one("random.stratum.yaml", &bytes);
    }

    #[test]
    fn mutated_examples_never_panic(example in 0..EXAMPLES.len(), mutations in prop::collection::vec(mutation(), 1..6)) {
        let mut spec = EXAMPLES.get(example).map(|s| s.as_bytes().to_vec()).unwrap_or_default();
        for mutation in &mutations {
            apply(&mut spec, mutation);
        }
        let (sources, compilation) = check_one("mutated.stratum.yaml", &spec);
        // Whatever the input, the diagnostics render and their spans lie inside the file.
        let file = sources.get(compilation.file).map(|f| f.text().len()).unwrap_or_default();
        for diagnostic in &compilation.diagnostics {
            prop_assert!(diagnostic.primary.span.end as usize <= file);
        }
        let _ = stratum_tests::render_snapshot(&sources, std::slice::from_ref(&compilation));
    }
}

/// Names come into messages from the spec, and a double-quoted YAML key can hold any
/// character through its escapes (E0003 sees only the file's own bytes): a flow named
/// `"a\e[2J\a\u202Eb"` must not clear the terminal, ring it, or print the rest of the line
/// backwards in any report a person reads. Its characters are shown as escapes.
#[test]
fn names_with_terminal_escapes_are_shown_not_obeyed() {
    use stratum_compiler::render::{self, github, human, short};
    let spec = "version: \"0.1\"\nflows:\n  \"a\\e[2J\\a\\u202Eb\":\n    input: {}\n    steps:\n      - id: s\n        intent: \"x\"\n";
    let (sources, compilation) = check_one("hostile.stratum.yaml", spec.as_bytes());
    let compilations = [compilation];
    let reports = render::reports(&sources, &compilations);
    for (format, out) in [
        (
            "human",
            human::render(&sources, &reports, human::Style::PLAIN),
        ),
        ("short", short::render(&sources, &reports)),
        ("github", github::render(&sources, &reports)),
    ] {
        assert!(
            out.contains(r"a\x1b[2J\x07\u202eb"),
            "{format}: the name is shown escaped:\n{out}"
        );
        let obeyed: Vec<char> = out
            .chars()
            .filter(|c| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c))
            .collect();
        assert!(obeyed.is_empty(), "{format} writes {obeyed:?}:\n{out}");
    }
}
