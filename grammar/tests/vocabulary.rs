//! `vocabulary_compliance`, case by case, in a project root of its own. The vocabulary's YAML is
//! the host's to read (the compiler's reader has its own tests): here a stub reader takes one
//! `canonical = alias alias ; reason` per line. Expected messages are the reference's
//! (stratum-mcp, `spec.vocabulary_compliance`) on the same files.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stratum_grammar::{
    Bindings, Canonical, EvalError, EvalErrorKind, Limits, Vocabulary, VocabularyReader, compile,
};

/// `canonical = alias alias ; reason` per line; a line `!message` fails with that message.
fn stub_reader(text: &str) -> Result<Vocabulary, String> {
    let mut vocabulary = Vocabulary::default();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        if let Some(message) = line.strip_prefix('!') {
            return Err(message.to_owned());
        }
        let (name, rest) = line.split_once('=').unwrap();
        let (aliases, reason) = rest.split_once(';').unwrap_or((rest, ""));
        vocabulary.entries.push(Canonical {
            name: name.trim().to_owned(),
            reject: aliases.split_whitespace().map(str::to_owned).collect(),
            reason: reason.trim().to_owned(),
        });
    }
    Ok(vocabulary)
}

/// A fresh project root under the system temp dir, removed on drop.
struct Project(PathBuf);

impl Project {
    fn new(name: &str) -> Project {
        let dir = std::env::temp_dir().join(format!(
            "stratum-vocabulary-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(dir.join("contracts")).unwrap();
        std::fs::create_dir_all(dir.join("src")).unwrap();
        Project(dir)
    }

    fn write(&self, path: &str, text: impl AsRef<[u8]>) -> &Project {
        std::fs::write(self.0.join(path), text).unwrap();
        self
    }

    fn limits(&self) -> Limits {
        Limits::default()
            .with_root(&self.0)
            .with_vocabulary_reader(VocabularyReader(stub_reader))
    }

    fn eval(&self, source: &str, result: &Value) -> Result<Value, EvalError> {
        eval(source, result, &self.limits())
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn eval(source: &str, result: &Value, limits: &Limits) -> Result<Value, EvalError> {
    let parsed = stratum_grammar::parse(source);
    let expr = parsed.expr.expect("the expression parses");
    compile(&expr, source).evaluate(&Bindings::new().name("result", result), limits)
}

fn violations(result: Result<Value, EvalError>) -> Vec<String> {
    let error = result.expect_err("violations");
    assert_eq!(error.kind, EvalErrorKind::Violations, "{}", error.message);
    error.violations
}

const CALL: &str = "vocabulary_compliance('contracts/vocabulary.yaml', result.files)";

fn files(files: &[&str]) -> Value {
    json!({ "files": files })
}

#[test]
fn each_whole_word_use_of_a_rejected_alias_is_a_violation() {
    let project = Project::new("uses");
    project
        .write(
            "contracts/vocabulary.yaml",
            "color = colour hue ; US spelling\nsize = sz\n",
        )
        .write(
            "src/a.py",
            "x = 1\nhue = colour + colour_x\r\nsz(colour2, sz)\n",
        )
        .write("src/b.py", "sizes and hues\n");
    assert_eq!(
        violations(project.eval(CALL, &files(&["src/a.py", "./src/b.py"]))),
        vec![
            // Line by line; in a line, alias by alias in the vocabulary's order, then by place.
            "vocabulary violation: src/a.py:2 uses 'colour' — canonical is 'color' (reason: US spelling)",
            "vocabulary violation: src/a.py:2 uses 'hue' — canonical is 'color' (reason: US spelling)",
            "vocabulary violation: src/a.py:3 uses 'sz' — canonical is 'size'",
            "vocabulary violation: src/a.py:3 uses 'sz' — canonical is 'size'",
        ]
    );
}

#[test]
fn clean_files_missing_files_and_no_files_pass() {
    let project = Project::new("clean");
    project
        .write("contracts/vocabulary.yaml", "color = colour\n")
        .write("src/a.py", "color = 'colour-ish'.upper()  # colours\n")
        .write("src/b.py", "color\n");
    // `colour-ish`: `-` ends a word, so this one is a use.
    assert_eq!(
        violations(project.eval(CALL, &files(&["src/a.py"]))),
        vec!["vocabulary violation: src/a.py:1 uses 'colour' — canonical is 'color'"]
    );
    assert_eq!(project.eval(CALL, &files(&["src/b.py"])), Ok(json!(true)));
    // A deleted file, a directory, nothing at all: nothing to scan.
    assert_eq!(
        project.eval(CALL, &files(&["src/gone.py", "src"])),
        Ok(json!(true))
    );
    assert_eq!(project.eval(CALL, &files(&[])), Ok(json!(true)));
    assert_eq!(
        project.eval(CALL, &json!({ "files": null })),
        Ok(json!(true))
    );
    // The same file twice, by two spellings, is scanned once.
    project.write("src/c.py", "colour\n");
    assert_eq!(
        violations(project.eval(CALL, &files(&["src/c.py", "src/../src/c.py"]))).len(),
        1
    );
}

#[test]
fn a_missing_or_empty_vocabulary_checks_nothing() {
    let project = Project::new("novocab");
    project.write("src/a.py", "colour\n");
    assert_eq!(project.eval(CALL, &files(&["src/a.py"])), Ok(json!(true)));
    project.write("contracts/vocabulary.yaml", "\n");
    assert_eq!(project.eval(CALL, &files(&["src/a.py"])), Ok(json!(true)));
}

#[test]
fn a_malformed_vocabulary_is_the_readers_violation_word_for_word() {
    let project = Project::new("malformed");
    project
        .write(
            "contracts/vocabulary.yaml",
            "!vocabulary.yaml schema error: top-level must be a mapping\n",
        )
        .write("src/a.py", "colour\n");
    assert_eq!(
        violations(project.eval(CALL, &files(&["src/a.py"]))),
        vec!["vocabulary.yaml schema error: top-level must be a mapping"]
    );
    project.write("contracts/vocabulary.yaml", b"color = colour\xff\n");
    assert_eq!(
        violations(project.eval(CALL, &files(&[]))),
        vec![
            "vocabulary.yaml malformed: cannot read contracts/vocabulary.yaml: it is not UTF-8 text"
        ]
    );
}

#[test]
fn paths_stay_inside_the_root_and_big_files_are_skipped() {
    let project = Project::new("bounds");
    project
        .write("contracts/vocabulary.yaml", "color = colour\n")
        .write("src/big.py", "colour\n".repeat(100));
    let error = project
        .eval(CALL, &files(&["../outside.py"]))
        .expect_err("outside the root");
    assert_eq!(error.kind, EvalErrorKind::File, "{}", error.message);
    let small = Limits {
        max_file_bytes: 64,
        ..project.limits()
    };
    assert_eq!(
        eval(CALL, &files(&["src/big.py"]), &small),
        Ok(json!(true)),
        "a file over the size limit is skipped, as in the reference"
    );
    let tight = Limits {
        instructions: 50,
        ..project.limits()
    };
    let error = eval(CALL, &files(&["src/big.py"]), &tight).expect_err("the budget");
    assert_eq!(error.kind, EvalErrorKind::Budget);
    // Without a reader, the host cannot read the vocabulary: an error that says so.
    let bare = Limits::default().with_root(&project.0);
    let error = eval(CALL, &files(&["src/big.py"]), &bare).expect_err("no reader");
    assert!(
        error.message.contains("no vocabulary reader"),
        "{}",
        error.message
    );
}

fn git(root: &Path, args: &[&str]) -> bool {
    std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(root)
        .output()
        .is_ok_and(|output| output.status.success())
}

#[test]
fn the_git_fallback_scans_what_git_sees_changed() {
    let project = Project::new("git");
    project
        .write("contracts/vocabulary.yaml", "color = colour\n")
        .write("src/old.py", "color\n");
    if !git(&project.0, &["init", "-q"])
        || !git(&project.0, &["add", "."])
        || !git(&project.0, &["commit", "-q", "-m", "start"])
    {
        eprintln!("git is not available: the fallback is not tested here");
        return;
    }
    project
        .write("src/old.py", "colour\n")
        .write("src/new.py", "x\ncolour\n");
    let fallback = "vocabulary_compliance('contracts/vocabulary.yaml', [], True)";
    assert_eq!(
        violations(project.eval(fallback, &json!({}))),
        vec![
            "vocabulary violation: src/old.py:1 uses 'colour' — canonical is 'color'",
            "vocabulary violation: src/new.py:2 uses 'colour' — canonical is 'color'",
        ]
    );
    // Without the fallback, no files is nothing to check; an unknown base is git failing.
    assert_eq!(
        project.eval(
            "vocabulary_compliance('contracts/vocabulary.yaml', [])",
            &json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        project.eval(
            "vocabulary_compliance('contracts/vocabulary.yaml', [], True, 'no-such-branch')",
            &json!({})
        ),
        Ok(json!(true))
    );
    // A base that git would read as an option is refused before anything runs.
    let error = project
        .eval(
            "vocabulary_compliance('contracts/vocabulary.yaml', [], True, '--output=x')",
            &json!({}),
        )
        .expect_err("an option");
    assert_eq!(error.kind, EvalErrorKind::Value, "{}", error.message);
    assert!(!project.0.join("x").exists());
}
