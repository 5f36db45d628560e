//! `stratumc graph` end to end: what it writes where, and its exit codes.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn stratumc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stratumc"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .env_remove("NO_COLOR")
        .env("COLUMNS", "80")
        .stdin(Stdio::null())
        .output()
        .expect("stratumc runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const DEPLOY: &str = "examples/deploy.stratum.yaml";
const MISTAKES: &str = "tests/corpus/invalid/multi_five_mistakes.stratum.yaml";

#[test]
fn both_formats_go_to_stdout() {
    let dot = stratumc(&["graph", DEPLOY]);
    assert_eq!(dot.status.code(), Some(0), "{}", stderr(&dot));
    assert!(stdout(&dot).starts_with("digraph stratum {\n"));
    assert_eq!(stderr(&dot), "");
    let explicit = stratumc(&["graph", DEPLOY, "--format", "dot"]);
    assert_eq!(stdout(&explicit), stdout(&dot));
    let mermaid = stratumc(&["graph", DEPLOY, "--format", "mermaid"]);
    assert_eq!(mermaid.status.code(), Some(0), "{}", stderr(&mermaid));
    assert!(stdout(&mermaid).starts_with("flowchart TB\n"));
}

#[test]
fn output_goes_to_a_file_with_o() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("graph-output");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("deploy.mmd");
    let output = stratumc(&[
        "graph",
        DEPLOY,
        "--format",
        "mermaid",
        "--flow",
        "integration_tests",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("subgraph f0[\"flow integration_tests\"]"));
    assert!(!written.contains("flow deploy"), "{written}");
}

#[test]
fn a_spec_with_errors_is_not_drawn_and_exits_1_with_checks_diagnostics() {
    let output = stratumc(&["graph", MISTAKES, "--format", "mermaid"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    let check = stratumc(&["check", MISTAKES]);
    assert_eq!(
        stderr(&output),
        format!(
            "{}error: nothing drawn: the spec has errors\n",
            stdout(&check)
        )
    );
}

#[test]
fn an_unknown_flow_exits_2_with_a_suggestion() {
    let output = stratumc(&["graph", DEPLOY, "--flow", "deplyo"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "error: no flow named `deplyo`; did you mean `deploy`?\n"
    );
    let far = stratumc(&["graph", DEPLOY, "--flow", "zzz"]);
    assert_eq!(far.status.code(), Some(2));
    assert_eq!(
        stderr(&far),
        "error: no flow named `zzz`; the spec declares `integration_tests` and `deploy`\n"
    );
}

#[test]
fn io_and_usage_errors_exit_2() {
    let missing = stratumc(&["graph", "no/such/spec.stratum.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).starts_with("error: cannot read no/such/spec.stratum.yaml: "));
    let unwritable = stratumc(&["graph", DEPLOY, "-o", "no/such/dir/out.dot"]);
    assert_eq!(unwritable.status.code(), Some(2));
    assert!(
        stderr(&unwritable).starts_with("error: cannot write the picture: no/such/dir/out.dot: ")
    );
    let format = stratumc(&["graph", DEPLOY, "--format", "svg"]);
    assert_eq!(format.status.code(), Some(2));
}
