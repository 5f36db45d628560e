//! The authoring tools' libraries: `stratum_list_workflows` (`workflows`) and
//! `stratum_draft_pipeline` (`draft`), on real temporary directories.

use std::path::Path;

use serde_json::{Value, json};
use stratum_authoring::draft::{self, DraftError, save_draft};
use stratum_authoring::workflows::{WorkflowList, list_workflows};

/// A clean spec registering workflow `name`, with one required input and one defaulted.
fn spec(name: &str) -> String {
    format!(
        r#"version: "0.2"
workflow:
  name: {name}
  description: "Review the {name} files"
  input:
    files: {{type: array, required: true}}
    depth: {{type: string, default: "standard"}}
contracts:
  Review:
    summary: {{type: string}}
flows:
  {name}:
    input: {{files: {{type: array}}, depth: {{type: string}}}}
    output: Review
    steps:
      - id: review
        intent: "Review the files"
        inputs: {{files: "$.input.files", depth: "$.input.depth"}}
        output_contract: Review
"#
    )
}

/// A clean spec without a `workflow:` block.
const NO_WORKFLOW: &str = r#"version: "0.2"
contracts:
  Out:
    ok: {type: boolean}
flows:
  run:
    input: {}
    output: Out
    steps:
      - id: s1
        intent: "Do it"
        output_contract: Out
"#;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("the test can write its temporary directory");
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("the test can create a temporary directory")
}

/// The listing as JSON, with the temporary directory's absolute path written `[dir]`.
fn listing(dir: &Path, list: &WorkflowList) -> String {
    let canonical = dir.canonicalize().expect("the directory exists");
    let json = serde_json::to_string_pretty(list).expect("a listing serializes");
    json.replace(&canonical.display().to_string(), "[dir]")
}

// ----- list_workflows --------------------------------------------------------------------

#[test]
fn lists_clean_workflows_in_name_order() {
    let dir = temp_dir();
    write(dir.path(), "b.stratum.yaml", &spec("beta"));
    write(dir.path(), "a.stratum.yaml", &spec("alpha"));
    write(dir.path(), "plain.stratum.yaml", NO_WORKFLOW);
    // Not specs by name, hidden, or not directly in the directory: never read.
    write(dir.path(), "c.stratum.yml", "not: [yaml");
    write(dir.path(), "d.yaml", "not: [yaml");
    write(dir.path(), "stratum.yaml.bak", "not: [yaml");
    write(dir.path(), ".hidden.stratum.yaml", "not: [yaml");
    std::fs::create_dir(dir.path().join("nested")).expect("mkdir");
    write(&dir.path().join("nested"), "e.stratum.yaml", "not: [yaml");

    let list = list_workflows(dir.path());
    insta::assert_snapshot!(listing(dir.path(), &list), @r#"
    {
      "workflows": [
        {
          "name": "alpha",
          "description": "Review the alpha files",
          "input": {
            "depth": {
              "type": "string",
              "default": "standard"
            },
            "files": {
              "type": "array",
              "required": true
            }
          },
          "path": "[dir]/a.stratum.yaml"
        },
        {
          "name": "beta",
          "description": "Review the beta files",
          "input": {
            "depth": {
              "type": "string",
              "default": "standard"
            },
            "files": {
              "type": "array",
              "required": true
            }
          },
          "path": "[dir]/b.stratum.yaml"
        }
      ],
      "errors": [],
      "problems": []
    }
    "#);
    // The path is absolute even when the directory was given relatively.
    let path = list
        .workflows
        .first()
        .map(|workflow| Path::new(&workflow.path).is_absolute());
    assert_eq!(path, Some(true));
}

#[test]
fn example_specs_list_with_their_inputs() {
    let list = list_workflows(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"));
    assert_eq!(list.errors, Vec::<String>::new());
    let names: Vec<&str> = list.workflows.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["code-review", "deploy", "parallel-feature"]);
    let input = list.workflows.first().map(|w| json!(w.input));
    assert_eq!(
        input,
        Some(json!({
            "files": {"type": "array", "required": true},
            "base_ref": {"type": "string", "required": false, "default": "main"},
            "depth": {"type": "string", "required": false, "default": "standard"},
        }))
    );
}

#[test]
fn an_invalid_spec_is_reported_by_its_first_error() {
    let dir = temp_dir();
    write(dir.path(), "a.stratum.yaml", &spec("alpha"));
    write(
        dir.path(),
        "c.stratum.yaml",
        &spec("gamma").replace(
            "intent: \"Review the files\"",
            "intent: \"Review\"\n        function: review",
        ),
    );
    write(
        dir.path(),
        "d.stratum.yaml",
        "version: \"0.2\"\nflows: [unclosed\n",
    );

    let list = list_workflows(dir.path());
    insta::assert_snapshot!(listing(dir.path(), &list));
    assert_eq!(list.workflows.len(), 1);
}

#[test]
fn a_duplicate_name_keeps_the_first_file() {
    let dir = temp_dir();
    write(dir.path(), "a.stratum.yaml", &spec("review"));
    write(dir.path(), "b.stratum.yaml", &spec("review"));
    write(dir.path(), "c.stratum.yaml", &spec("review"));

    let list = list_workflows(dir.path());
    insta::assert_snapshot!(listing(dir.path(), &list));
    let paths: Vec<&str> = list.workflows.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(paths.len(), 1);
    assert!(paths.iter().all(|path| path.ends_with("/a.stratum.yaml")));
}

#[test]
fn a_missing_directory_lists_nothing() {
    let dir = temp_dir();
    let list = list_workflows(&dir.path().join("absent"));
    assert_eq!(list, WorkflowList::default());
}

#[test]
fn a_file_is_not_a_directory() {
    let dir = temp_dir();
    write(dir.path(), "a.stratum.yaml", &spec("alpha"));
    let file = dir.path().join("a.stratum.yaml");

    let list = list_workflows(&file);
    assert_eq!(list.workflows, []);
    let shown = file.display().to_string();
    assert_eq!(
        list.errors,
        [format!(
            "{shown}: the path is not a directory; give the directory that holds the `.stratum.yaml` files"
        )]
    );
    assert_eq!(list.problems.len(), 1);
}

#[test]
fn files_that_cannot_be_specs_are_reported_without_being_read() {
    let dir = temp_dir();
    std::fs::create_dir(dir.path().join("folder.stratum.yaml")).expect("mkdir");
    let huge = std::fs::File::create(dir.path().join("huge.stratum.yaml")).expect("create");
    // Sparse: no 16 MiB are written, and none are read.
    huge.set_len(16 * 1024 * 1024 + 1).expect("set_len");
    write(dir.path(), "z.stratum.yaml", &spec("zeta"));

    let list = list_workflows(dir.path());
    insta::assert_snapshot!(listing(dir.path(), &list));
    assert_eq!(list.workflows.len(), 1);
}

#[cfg(unix)]
#[test]
fn a_file_name_that_is_not_utf8_is_reported() {
    use std::os::unix::ffi::OsStrExt;
    let dir = temp_dir();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.stratum.yaml");
    if std::fs::write(dir.path().join(name), spec("cafe")).is_err() {
        return; // a file system that refuses such names cannot hold one
    }
    write(dir.path(), "ok.stratum.yaml", &spec("ok"));

    let list = list_workflows(dir.path());
    assert_eq!(
        list.errors,
        ["caf\u{FFFD}.stratum.yaml: the file name is not valid UTF-8; rename the file"]
    );
    assert_eq!(list.workflows.len(), 1);
}

// ----- save_draft ------------------------------------------------------------------------

fn saved_text(project: &Path) -> String {
    std::fs::read_to_string(project.join(".stratum/pipeline-draft.json"))
        .expect("the draft was written")
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the directory exists")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_draft_is_saved_with_defaults_and_indent_2() {
    let project = temp_dir();
    let saved = save_draft(&json!({"description": "tbd"}), project.path()).expect("saved");

    let path = project
        .path()
        .canonicalize()
        .expect("exists")
        .join(".stratum/pipeline-draft.json");
    assert_eq!(
        json!(saved),
        json!({"status": "saved", "path": path.display().to_string(), "phases": 0})
    );
    insta::assert_snapshot!(saved_text(project.path()), @r#"
    {
      "description": "tbd",
      "name": "my-pipeline",
      "phases": []
    }
    "#);
    assert_eq!(
        entries(&project.path().join(".stratum")),
        ["pipeline-draft.json"]
    );
}

#[test]
fn a_draft_keeps_what_it_was_given_and_is_overwritten() {
    let project = temp_dir();
    save_draft(&json!({"name": "first"}), project.path()).expect("saved");
    let draft = json!({
        "name": "release",
        "phases": [
            {"id": "build", "name": "Build", "steps": [{"agent": "codex"}]},
            {"id": "ship", "gate": true},
            {"note": "no id"},
        ],
        "x-editor": {"zoom": 1.5},
    });
    let saved = save_draft(&draft, project.path()).expect("saved");

    assert_eq!(saved.phases, 3);
    let written: Value = serde_json::from_str(&saved_text(project.path())).expect("JSON");
    assert_eq!(written, draft);
    assert!(saved_text(project.path()).ends_with("}\n"));
    // The temporary file was renamed, not left behind.
    assert_eq!(
        entries(&project.path().join(".stratum")),
        ["pipeline-draft.json"]
    );
}

#[test]
fn a_null_name_or_phases_takes_the_default() {
    let project = temp_dir();
    let saved = save_draft(&json!({"name": null, "phases": null}), project.path()).expect("saved");
    assert_eq!(saved.phases, 0);
    let written: Value = serde_json::from_str(&saved_text(project.path())).expect("JSON");
    assert_eq!(written, json!({"name": "my-pipeline", "phases": []}));
}

#[test]
fn invalid_drafts_say_what_to_fix() {
    let nested = (0..draft::MAX_DEPTH).fold(json!(1), |inner, _| json!([inner]));
    let big = "x".repeat(draft::MAX_BYTES);
    let drafts = [
        json!(["not", "an", "object"]),
        json!({"name": 7}),
        json!({"name": "  "}),
        json!({"phases": "build, ship"}),
        json!({"phases": {"build": {}}}),
        json!({"phases": [{"id": "a"}, "b"]}),
        json!({"phases": [{"id": 1}]}),
        json!({"phases": [{"name": ["Build"]}]}),
        json!({"phases": [{"id": "a"}, {"id": "b"}, {"id": "a"}]}),
        json!({"layout": nested}),
        json!({"notes": big}),
    ];
    let project = temp_dir();
    let mut report = String::new();
    for draft in &drafts {
        let error = save_draft(draft, project.path()).err();
        let failure = error.as_ref().map(DraftError::failure);
        report.push_str(&format!(
            "{}\n",
            serde_json::to_string(&failure).expect("serializes")
        ));
    }
    insta::assert_snapshot!(report);
    // Nothing was written.
    assert_eq!(entries(project.path()), Vec::<String>::new());
}

#[test]
fn nesting_up_to_the_limit_is_accepted() {
    // The draft is level 1, so its fields may nest MAX_DEPTH - 1 levels.
    let nested = (0..draft::MAX_DEPTH - 1).fold(json!(1), |inner, _| json!([inner]));
    let project = temp_dir();
    assert!(save_draft(&json!({"layout": nested}), project.path()).is_ok());
}

#[test]
fn a_missing_project_directory_is_created_as_the_reference_does() {
    let project = temp_dir();
    let missing = project.path().join("absent/nested");
    let saved = save_draft(&json!({"name": "p"}), &missing).expect("saved");
    assert_eq!(saved.status, "saved");
    assert!(saved_text(&missing).contains("\"name\": \"p\""));

    write(project.path(), "file", "");
    let error = save_draft(&json!({}), &project.path().join("file")).err();
    assert_eq!(
        error.as_ref().map(DraftError::error_type),
        Some("directory_not_found")
    );
}

#[cfg(unix)]
#[test]
fn a_draft_directory_linked_out_of_the_root_is_refused_under_a_root() {
    let root = temp_dir();
    let outside = temp_dir();
    let project = root.path().join("p");
    std::fs::create_dir(&project).expect("created");
    std::os::unix::fs::symlink(outside.path(), project.join(".stratum")).expect("linked");
    let canonical = root.path().canonicalize().expect("canonical");
    let error = draft::save_draft_under(&json!({}), &project, Some(&canonical)).err();
    assert_eq!(
        error.as_ref().map(DraftError::error_type),
        Some("write_failed")
    );
    assert!(
        error
            .map(|error| error.to_string())
            .is_some_and(|message| message.contains("outside the server's root")),
    );
    assert!(
        !outside.path().join("pipeline-draft.json").exists(),
        "nothing was written through the link"
    );
}

#[test]
fn a_stratum_file_in_the_way_is_a_write_failure() {
    let project = temp_dir();
    write(project.path(), ".stratum", "");
    let error = save_draft(&json!({}), project.path()).err();
    assert_eq!(
        error.as_ref().map(DraftError::error_type),
        Some("write_failed")
    );
}
