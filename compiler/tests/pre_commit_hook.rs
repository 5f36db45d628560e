//! The repository's `.pre-commit-hooks.yaml`: the `stratumc-check` hook picks exactly the spec
//! files and runs a real `stratumc` command line, as pre-commit would (its entry, then the
//! staged file names). pre-commit itself is not needed.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use stratum_compiler::sema::schema::to_json;
use stratum_compiler::source::{FileId, SourceFile};
use stratum_compiler::syntax::tree;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The hook, read with the compiler's own YAML loader.
fn hook() -> Value {
    let text = std::fs::read_to_string(workspace().join(".pre-commit-hooks.yaml"))
        .expect(".pre-commit-hooks.yaml is at the repository root");
    let src = SourceFile::new(FileId(0), ".pre-commit-hooks.yaml", &text);
    let loaded = tree::load(&src);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let hooks = to_json(&loaded.root.expect("a YAML document")).expect("JSON values only");
    let hooks = hooks.as_array().expect("a list of hooks");
    hooks
        .iter()
        .find(|hook| hook["id"] == "stratumc-check")
        .expect("a hook `stratumc-check`")
        .clone()
}

#[test]
fn the_hook_picks_exactly_the_spec_files() {
    let hook = hook();
    let files = hook["files"].as_str().expect("`files` is a regex");
    // pre-commit applies `files` with Python's `re.search`; a JSON Schema `pattern` is searched
    // for the same way (unanchored), and this regex means the same in both dialects.
    let schema = json!({"type": "string", "pattern": files});
    let matches = jsonschema::validator_for(&schema).expect("the regex compiles");
    for path in [
        "a.stratum.yaml",
        "x/b.stratum.yml",
        "examples/deploy.stratum.yaml",
    ] {
        assert!(matches.is_valid(&json!(path)), "`{files}` misses {path}");
    }
    for path in [
        "a.yaml",
        "a.stratum.yaml.bak",
        "stratum.yaml",
        "x/a.stratum.json",
    ] {
        assert!(!matches.is_valid(&json!(path)), "`{files}` picks {path}");
    }
    // `system`: the hook runs the installed stratumc (see the file's comment and the README).
    assert_eq!(hook["language"], "system");
}

#[test]
fn the_hook_entry_is_a_stratumc_command_that_works() {
    let hook = hook();
    let entry = hook["entry"].as_str().expect("`entry` is a command line");
    let mut words = entry.split_whitespace();
    assert_eq!(words.next(), Some("stratumc"));
    let args: Vec<&str> = words.collect();
    let run = |files: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_stratumc"))
            .args(&args)
            .args(files)
            .current_dir(workspace())
            .output()
            .expect("stratumc runs")
    };
    // A clean spec passes (so the sub-command and every flag exist: clap would exit with 2),
    // a spec with errors fails the commit with the diagnostics on the terminal.
    let clean = run(&[
        "examples/sentiment.stratum.yaml",
        "examples/deploy.stratum.yaml",
    ]);
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    let broken = run(&["tests/corpus/invalid/E0011_unknown_key.stratum.yaml"]);
    assert_eq!(broken.status.code(), Some(1));
}
