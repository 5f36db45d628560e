//! `stratumc migrate` end to end: the exact bytes it writes (only the version changes), where
//! the diff and the spec go, what it refuses, and its exit codes.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

mod support;

use std::path::{Path, PathBuf};

use support::{stderr, stdout, stratumc_in};

/// A fresh directory under the target directory holding `spec.stratum.yaml` with `text`.
fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("migrate-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(SPEC), text).unwrap();
    dir
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

const SPEC: &str = "spec.stratum.yaml";

/// A version 0.1 spec with comments, blank lines and a trailing comment on the version line.
const V01: &str = r#"# Sentiment, as first written: comments and blank lines must survive a migration.
version: "0.1"   # the original format

contracts:
  SentimentResult:
    label: {type: string}
    confidence: {type: number}

functions:
  classify:
    mode: infer
    intent: "Classify the sentiment of this text"
    input: {text: {type: string}}
    output: SentimentResult
    ensure:
      - "result.confidence > 0.7"
    retries: 2

# The only flow.
flows:
  run:
    input: {text: {type: string}}
    output: SentimentResult
    steps:
      - id: s1
        function: classify
        inputs: {text: "$.input.text"}
"#;

fn at(version: &str) -> String {
    V01.replace("version: \"0.1\"", &format!("version: \"{version}\""))
}

const DIFF_01_TO_02: &str = r#"--- a/spec.stratum.yaml
+++ b/spec.stratum.yaml
@@ -1,5 +1,5 @@
 # Sentiment, as first written: comments and blank lines must survive a migration.
-version: "0.1"   # the original format
+version: "0.2"   # the original format
 
 contracts:
   SentimentResult:
"#;

#[test]
fn in_place_only_the_version_changes_and_the_diff_shows_it() {
    let dir = scratch("in-place", V01);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(read(&dir, SPEC), at("0.2"));
    assert_eq!(stdout(&output), DIFF_01_TO_02);
    assert_eq!(stderr(&output), "migrated spec.stratum.yaml: 0.1 -> 0.2\n");
    assert!(!dir.join("spec.stratum.yaml.bak").exists());
}

#[test]
fn crlf_line_endings_stay_crlf() {
    let crlf = V01.replace('\n', "\r\n");
    let dir = scratch("crlf", &crlf);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(read(&dir, SPEC), at("0.2").replace('\n', "\r\n"));
    assert!(
        stdout(&output).contains("-version: \"0.1\"   # the original format\r\n+version: \"0.2\""),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_single_quoted_version_stays_single_quoted() {
    let dir = scratch("single-quoted", &V01.replace("\"0.1\"", "'0.1'"));
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(read(&dir, SPEC), V01.replace("\"0.1\"", "'0.2'"));
}

#[test]
fn a_flow_mapping_spec_without_a_final_newline_keeps_its_shape() {
    let spec = r#"{version: "0.1", contracts: {R: {label: {type: string}}}, functions: {f: {mode: infer, intent: "Label it", input: {}, output: R, ensure: ["result.label != ''"]}}, flows: {run: {input: {}, output: R, steps: [{id: s1, function: f, inputs: {}}]}}}"#;
    let dir = scratch("flow-mapping", spec);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(read(&dir, SPEC), spec.replacen("\"0.1\"", "\"0.2\"", 1));
    assert!(
        stdout(&output).ends_with("\n\\ No newline at end of file\n"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let dir = scratch("dry-run", V01);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2", "--dry-run"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), DIFF_01_TO_02);
    assert_eq!(
        stderr(&output),
        "would migrate spec.stratum.yaml: 0.1 -> 0.2 (dry run: nothing written)\n"
    );
    assert_eq!(read(&dir, SPEC), V01);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no other file");
}

#[test]
fn backup_keeps_the_old_bytes_beside_the_spec() {
    let dir = scratch("backup", V01);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2", "--backup"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(read(&dir, "spec.stratum.yaml.bak"), V01);
    assert_eq!(read(&dir, SPEC), at("0.2"));
}

#[cfg(unix)]
#[test]
fn the_spec_keeps_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("permissions", V01);
    let path = dir.join(SPEC);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
    assert_eq!(read(&dir, SPEC), at("0.2"));
}

#[test]
fn output_goes_elsewhere_and_an_existing_file_needs_force() {
    let dir = scratch("output", V01);
    let new = stratumc_in(
        &dir,
        &["migrate", SPEC, "--to", "0.2", "-o", "new.stratum.yaml"],
        None,
    );
    assert_eq!(new.status.code(), Some(0), "{}", stderr(&new));
    assert_eq!(read(&dir, "new.stratum.yaml"), at("0.2"));
    assert_eq!(read(&dir, SPEC), V01, "the spec itself is left alone");
    assert_eq!(stdout(&new), DIFF_01_TO_02);
    assert_eq!(
        stderr(&new),
        "migrated spec.stratum.yaml: 0.1 -> 0.2, written to new.stratum.yaml\n"
    );

    std::fs::write(dir.join("taken.stratum.yaml"), "mine\n").unwrap();
    let refused = stratumc_in(
        &dir,
        &["migrate", SPEC, "--to", "0.2", "-o", "taken.stratum.yaml"],
        None,
    );
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        stderr(&refused),
        "error: taken.stratum.yaml exists; pass --force to overwrite it\n"
    );
    assert_eq!(stdout(&refused), "");
    assert_eq!(read(&dir, "taken.stratum.yaml"), "mine\n");

    let forced = stratumc_in(
        &dir,
        &[
            "migrate",
            SPEC,
            "--to",
            "0.2",
            "-o",
            "taken.stratum.yaml",
            "--force",
        ],
        None,
    );
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    assert_eq!(read(&dir, "taken.stratum.yaml"), at("0.2"));
}

#[test]
fn output_dash_puts_the_spec_on_stdout_and_the_diff_on_stderr() {
    let dir = scratch("output-dash", V01);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2", "-o", "-"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), at("0.2"));
    assert_eq!(
        stderr(&output),
        format!(
            "{DIFF_01_TO_02}migrated spec.stratum.yaml: 0.1 -> 0.2, written to standard output\n"
        )
    );
    assert_eq!(read(&dir, SPEC), V01);
}

#[test]
fn stdin_needs_an_output_or_a_dry_run() {
    let dir = scratch("stdin", V01);
    let refused = stratumc_in(&dir, &["migrate", "-", "--to", "0.2"], Some(V01.as_bytes()));
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("pass -o OUT (`-o -` for standard output) or --dry-run"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(stdout(&refused), "");

    let piped = stratumc_in(
        &dir,
        &["migrate", "-", "--to", "0.2", "-o", "-"],
        Some(V01.as_bytes()),
    );
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    assert_eq!(stdout(&piped), at("0.2"));
    assert!(stderr(&piped).starts_with("--- a/<stdin>\n+++ b/<stdin>\n"));

    let dry = stratumc_in(
        &dir,
        &["migrate", "-", "--to", "0.2", "--dry-run"],
        Some(V01.as_bytes()),
    );
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    assert!(stdout(&dry).contains("+version: \"0.2\""));
}

#[test]
fn a_spec_already_at_the_version_is_left_alone() {
    let dir = scratch("already", &at("0.2"));
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "spec.stratum.yaml: already at version 0.2\n"
    );
    assert_eq!(read(&dir, SPEC), at("0.2"));
}

#[test]
fn an_unknown_version_exits_3_and_names_the_known_ones() {
    let dir = scratch("unknown", V01);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.9"], None);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        stderr(&output),
        "error: unknown version \"0.9\"; known: 0.1, 0.2, 0.3\n"
    );
    assert_eq!(read(&dir, SPEC), V01);
}

#[test]
fn a_downgrade_exits_3() {
    let dir = scratch("downgrade", &at("0.2"));
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.1"], None);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        stderr(&output),
        "error: no transform from 0.2 to 0.1: migrate only raises a spec's version (known: 0.1, 0.2, 0.3)\n"
    );
    assert_eq!(read(&dir, SPEC), at("0.2"));
}

#[test]
fn a_spec_with_errors_is_refused_with_checks_diagnostics_and_left_untouched() {
    let broken = V01.replace("mode: infer", "mode: infer\n    retires: 2");
    let dir = scratch("errors", &broken);
    let output = stratumc_in(&dir, &["migrate", SPEC], None);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    let check = stratumc_in(&dir, &["check", SPEC], None);
    assert_eq!(check.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "{}error: nothing migrated: the spec has errors\n",
            stdout(&check)
        )
    );
    assert_eq!(read(&dir, SPEC), broken);
}

#[test]
fn a_spec_without_a_version_is_refused() {
    let unversioned = V01.replace("version: \"0.1\"   # the original format\n", "");
    let dir = scratch("no-version", &unversioned);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.2"], None);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("E0014"), "{}", stderr(&output));
    assert_eq!(read(&dir, SPEC), unversioned);
}

#[test]
fn an_unreadable_spec_exits_2() {
    let dir = scratch("unreadable", V01);
    let output = stratumc_in(&dir, &["migrate", "missing.stratum.yaml"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with("error: cannot read missing.stratum.yaml: "),
        "{}",
        stderr(&output)
    );
}

// ----- version 0.3: these pass once the compiler checks 0.3 specs --------------------------

#[test]
fn migrates_0_2_to_0_3_by_default() {
    let dir = scratch("to-0-3", &at("0.2"));
    let output = stratumc_in(&dir, &["migrate", SPEC], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(read(&dir, SPEC), at("0.3"));
    assert_eq!(
        stdout(&output),
        DIFF_01_TO_02
            .replace("\"0.2\"", "\"0.3\"")
            .replace("\"0.1\"", "\"0.2\"")
    );
    assert_eq!(stderr(&output), "migrated spec.stratum.yaml: 0.2 -> 0.3\n");
}

#[test]
fn migrates_0_1_to_0_3_in_two_hops() {
    let dir = scratch("two-hops", V01);
    let output = stratumc_in(&dir, &["migrate", SPEC, "--to", "0.3"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(read(&dir, SPEC), at("0.3"));
    assert_eq!(stdout(&output), DIFF_01_TO_02.replace("\"0.2\"", "\"0.3\""));
    assert_eq!(stderr(&output), "migrated spec.stratum.yaml: 0.1 -> 0.3\n");
}

#[test]
fn a_spec_at_0_3_is_already_at_the_latest_version() {
    let dir = scratch("already-latest", &at("0.3"));
    let output = stratumc_in(&dir, &["migrate", SPEC], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "spec.stratum.yaml: already at version 0.3\n"
    );
    assert_eq!(read(&dir, SPEC), at("0.3"));
}
