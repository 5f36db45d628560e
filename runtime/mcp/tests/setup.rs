//! `stratum-mcp install` / `uninstall` (`stratum_mcp::setup`) on real temporary project
//! and home directories: a user's files come back byte for byte, install is idempotent, an
//! unusable file is left untouched with an error naming it, and the PostToolUse hook.

#![allow(clippy::unwrap_used)] // a test fails on the first unexpected error

use std::fs;
use std::path::Path;

use stratum_mcp::setup::{
    self, Action, InstallArgs, Report, SetupError, UninstallArgs, post_tool_use_hook,
};

const SPEC: &str = include_str!("../../../examples/sentiment.stratum.yaml");

/// A `.mcp.json` with other servers, four-space indentation, a comment, CRLF line endings and
/// no newline at the end.
const MCP_JSON: &str = "{\r\n    // servers of this project\r\n    \"mcpServers\": {\r\n        \"github\": {\r\n            \"command\": \"gh-mcp\",\r\n            \"args\": [\"--readonly\"]\r\n        },\r\n        \"db\": { \"command\": \"db-mcp\" }\r\n    },\r\n    \"other\": true\r\n}";

/// A `CLAUDE.md` of the project's own, without a newline at the end.
const CLAUDE_MD: &str = "# Project notes\n\nRun `make test` before committing.\nUse tabs.";

/// A `.claude/settings.json` with other hooks (one PostToolUse group), permissions, comments
/// and a trailing comma, indented with tabs.
const SETTINGS: &str = r#"{
	// team settings
	"permissions": {
		"allow": ["Bash(make test)"]
	},
	"hooks": {
		"PreToolUse": [
			{ "matcher": "Bash", "hooks": [{ "type": "command", "command": "guard.sh" }] }
		],
		"PostToolUse": [
			{
				"matcher": "Write",
				"hooks": [{ "type": "command", "command": "prettier --write" }] /* formats */
			},
		]
	}
}
"#;

/// A Codex configuration with comments and another server.
const CODEX: &str = r#"# my codex settings
model = "o4-mini"  # the fast one

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "9000"]

# keep this last
[profiles.work]
model = "o3"
"#;

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, text).unwrap();
}

fn read(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name)).unwrap()
}

fn install(cwd: &Path, home: &Path, codex: bool) -> Report {
    let args = InstallArgs { codex, json: false };
    setup::install(&args, cwd, home).unwrap()
}

fn uninstall(cwd: &Path, home: &Path, codex: bool, keep_skills: bool) -> Report {
    let args = UninstallArgs {
        keep_skills,
        codex,
        json: false,
    };
    setup::uninstall(&args, cwd, home).unwrap()
}

fn actions(report: &Report) -> Vec<(String, Action)> {
    report
        .entries
        .iter()
        .map(|entry| (entry.path.clone(), entry.action))
        .collect()
}

/// Every file under `dir`, with its bytes, sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                out.push((format!("{name}/"), Vec::new()));
                walk(root, &path, out);
            } else {
                out.push((name, fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn install_then_uninstall_gives_back_the_users_files_byte_for_byte() {
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (cwd, home) = (project.path(), home.path());
    write(cwd, ".mcp.json", MCP_JSON);
    write(cwd, "CLAUDE.md", CLAUDE_MD);
    write(cwd, ".claude/settings.json", SETTINGS);
    write(home, ".codex/config.toml", CODEX);
    let before = (tree(cwd), tree(home));

    let report = install(cwd, home, true);
    assert!(report.changed());
    insta::assert_snapshot!("installed_mcp_json", read(cwd, ".mcp.json"));
    insta::assert_snapshot!(
        "installed_settings_json",
        read(cwd, ".claude/settings.json")
    );
    insta::assert_snapshot!("installed_codex_config", read(home, ".codex/config.toml"));
    let claude_md = read(cwd, "CLAUDE.md");
    assert!(claude_md.starts_with(&format!("{CLAUDE_MD}\n\n<!-- stratum:begin -->\n")));
    assert!(
        claude_md.ends_with("<!-- stratum:end -->"),
        "no newline at the end, as before"
    );
    assert_eq!(read(cwd, ".claude/skills/stratum/SKILL.md"), setup::SKILL);

    let installed = (tree(cwd), tree(home));
    let again = install(cwd, home, true);
    assert!(!again.changed(), "{again}");
    assert_eq!((tree(cwd), tree(home)), installed);

    let report = uninstall(cwd, home, true, false);
    assert!(report.changed());
    assert_eq!((tree(cwd), tree(home)), before);
}

#[test]
fn each_kind_of_ending_and_indentation_round_trips() {
    let mcp_variants = [
        "{}",
        "{}\n",
        "{ \"mcpServers\": { \"x\": { \"command\": \"x\" } } }\n",
        "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"x\"},\n  },\n}\n",
        "{\n\t\"mcpServers\": {\n\t}\n}",
        "{\r\n  \"a\": 1 // trailing comment\r\n}\r\n",
        "{\n  \"mcpServers\": {\n    /* nothing yet */\n  }\n}\n",
    ];
    let claude_variants = [
        "",
        "\n",
        "text",
        "text\n",
        "text\n\n",
        "text\r\n\r\nmore\r\n",
    ];
    for (mcp, claude) in mcp_variants.iter().zip(claude_variants.iter().cycle()) {
        let project = tempfile::tempdir().unwrap();
        let cwd = project.path();
        write(cwd, ".mcp.json", mcp);
        write(cwd, "CLAUDE.md", claude);
        write(cwd, ".claude/settings.json", mcp);
        let before = tree(cwd);
        install(cwd, cwd, false);
        let installed = tree(cwd);
        assert!(!install(cwd, cwd, false).changed(), "{mcp:?}");
        assert_eq!(tree(cwd), installed);
        uninstall(cwd, cwd, false, false);
        let after = tree(cwd);
        // Today a JSON file left as exactly `{}\n` is taken for one install created and is
        // deleted (with `.claude/` when that leaves it empty), and so is a CLAUDE.md left
        // empty: uninstall keeps no record of what existed before install.
        let deleted = |name: &str, bytes: &[u8]| {
            (name.ends_with(".json") && bytes == b"{}\n")
                || (name == "CLAUDE.md" && bytes.is_empty())
                || (name == ".claude/" && *mcp == "{}\n")
        };
        let expected: Vec<_> = before
            .iter()
            .filter(|(name, bytes)| !deleted(name, bytes))
            .cloned()
            .collect();
        assert_eq!(after, expected, "{mcp:?} / {claude:?}");
    }
}

#[test]
fn claude_md_endings_round_trip() {
    for original in ["a", "a\n", "a\n\n", "a\n\n\n", "\n", "a\r\nb\r\n", "a\r\nb"] {
        let project = tempfile::tempdir().unwrap();
        let cwd = project.path();
        write(cwd, "CLAUDE.md", original);
        install(cwd, cwd, false);
        let installed = read(cwd, "CLAUDE.md");
        assert!(installed.starts_with(original), "{original:?}");
        let blank = if original.contains("\r\n") {
            "\r\n\r\n"
        } else {
            "\n\n"
        };
        assert!(
            installed.contains(&format!("{blank}<!-- stratum:begin -->")),
            "one blank line before the block: {installed:?}"
        );
        install(cwd, cwd, false);
        assert_eq!(read(cwd, "CLAUDE.md"), installed);
        uninstall(cwd, cwd, false, false);
        assert_eq!(read(cwd, "CLAUDE.md"), original);
    }
}

#[test]
fn a_project_without_files_gets_them_and_loses_them_again() {
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (cwd, home) = (project.path(), home.path());
    let report = install(cwd, home, true);
    insta::assert_snapshot!("install_report_text", report.to_string());
    insta::assert_json_snapshot!("install_report_json", report.to_json());
    assert_eq!(
        read(cwd, ".mcp.json"),
        "{\n  \"mcpServers\": {\n    \"stratum\": {\n      \"command\": \"stratum-mcp\"\n    }\n  }\n}\n"
    );
    assert_eq!(
        read(home, ".codex/config.toml"),
        "[mcp_servers.stratum]\ncommand = \"stratum-mcp\"\n"
    );
    let again = install(cwd, home, true);
    insta::assert_snapshot!("install_again_report_text", again.to_string());

    let report = uninstall(cwd, home, true, false);
    insta::assert_snapshot!("uninstall_report_text", report.to_string());
    assert_eq!(tree(cwd), vec![]);
    assert_eq!(tree(home), vec![(".codex/".to_owned(), vec![])]);
}

#[test]
fn keep_skills_leaves_the_skill() {
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    install(cwd, cwd, false);
    let report = uninstall(cwd, cwd, false, true);
    assert!(actions(&report).contains(&(
        ".claude/skills/stratum/SKILL.md".to_owned(),
        Action::Unchanged
    )));
    assert_eq!(
        tree(cwd)
            .into_iter()
            .map(|(name, _)| name)
            .collect::<Vec<_>>(),
        vec![
            ".claude/",
            ".claude/skills/",
            ".claude/skills/stratum/",
            ".claude/skills/stratum/SKILL.md"
        ]
    );
}

#[test]
fn an_edited_skill_is_neither_overwritten_nor_removed() {
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    write(cwd, ".claude/skills/stratum/SKILL.md", "my own version\n");
    let report = install(cwd, cwd, false);
    assert!(actions(&report).contains(&(
        ".claude/skills/stratum/SKILL.md".to_owned(),
        Action::Skipped
    )));
    uninstall(cwd, cwd, false, false);
    assert_eq!(
        read(cwd, ".claude/skills/stratum/SKILL.md"),
        "my own version\n"
    );
}

#[test]
fn a_malformed_mcp_json_is_left_untouched_and_nothing_is_written() {
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let broken = "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"x\" }\n    \"y\": { \"command\": \"y\" }\n  }\n}\n";
    write(cwd, ".mcp.json", broken);
    let error = setup::install(&InstallArgs::default(), cwd, cwd).unwrap_err();
    assert!(
        matches!(error, SetupError::InvalidJson { line: 3, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(".mcp.json is not valid JSON"), "{message}");
    assert!(message.contains("line 3, column 28"), "{message}");
    assert!(message.contains("left untouched"), "{message}");
    assert_eq!(read(cwd, ".mcp.json"), broken);
    // Planned first, written only if every file could be: no CLAUDE.md, no .claude/.
    assert_eq!(tree(cwd).len(), 1);

    let error = setup::uninstall(&UninstallArgs::default(), cwd, cwd).unwrap_err();
    assert!(matches!(error, SetupError::InvalidJson { .. }));
}

#[test]
fn wrong_shapes_are_refused_by_name() {
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    write(cwd, ".mcp.json", "[1, 2]\n");
    let error = setup::install(&InstallArgs::default(), cwd, cwd).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the top level is not a JSON object"),
        "{error}"
    );
    write(cwd, ".mcp.json", "{\"mcpServers\": []}");
    let error = setup::install(&InstallArgs::default(), cwd, cwd).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`mcpServers` is not a JSON object"),
        "{error}"
    );
    fs::remove_file(cwd.join(".mcp.json")).unwrap();
    write(
        cwd,
        ".claude/settings.json",
        "{\"hooks\": {\"PostToolUse\": {}}}",
    );
    let error = setup::install(&InstallArgs::default(), cwd, cwd).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`PostToolUse` is not a JSON array"),
        "{error}"
    );
    fs::remove_file(cwd.join(".claude/settings.json")).unwrap();
    write(
        cwd,
        "CLAUDE.md",
        "intro\n<!-- stratum:begin -->\nhalf a block\n",
    );
    let error = setup::install(&InstallArgs::default(), cwd, cwd).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("on line 2 but no `<!-- stratum:end -->`"),
        "{error}"
    );
}

#[test]
fn a_stratum_server_that_is_not_ours_is_left_alone() {
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let theirs = "{\"mcpServers\": {\"stratum\": {\"command\": \"python\", \"args\": [\"-m\", \"stratum\"]}}}\n";
    write(cwd, ".mcp.json", theirs);
    let report = install(cwd, cwd, false);
    let entry = report.entries.first().unwrap();
    assert_eq!(entry.action, Action::Skipped);
    assert!(entry.detail.contains("\"python\""), "{}", entry.detail);
    assert_eq!(read(cwd, ".mcp.json"), theirs);
    uninstall(cwd, cwd, false, false);
    assert_eq!(read(cwd, ".mcp.json"), theirs);

    // Ours with settings of the user's: registered, so left by install and by uninstall.
    let customised = "{\"mcpServers\": {\"stratum\": {\"command\": \"stratum-mcp\", \"args\": [\"--db\", \"x.db\"]}}}";
    write(cwd, ".mcp.json", customised);
    assert_eq!(
        install(cwd, cwd, false).entries.first().unwrap().action,
        Action::Unchanged
    );
    assert_eq!(
        uninstall(cwd, cwd, false, false)
            .entries
            .first()
            .unwrap()
            .action,
        Action::Skipped
    );
    assert_eq!(read(cwd, ".mcp.json"), customised);
}

#[test]
fn an_older_block_is_replaced_in_place() {
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let old = "intro\n\n<!-- stratum:begin -->\nold advice\n<!-- stratum:end -->\n\nafter\n";
    write(cwd, "CLAUDE.md", old);
    install(cwd, cwd, false);
    let text = read(cwd, "CLAUDE.md");
    assert!(text.starts_with("intro\n\n<!-- stratum:begin -->\n## Stratum execution model"));
    assert!(text.ends_with("<!-- stratum:end -->\n\nafter\n"));
    uninstall(cwd, cwd, false, false);
    assert_eq!(read(cwd, "CLAUDE.md"), "intro\n\nafter\n");
}

#[test]
fn codex_config_with_comments_and_another_server() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let (cwd, home) = (project.path(), home.path());
    write(home, ".codex/config.toml", CODEX);
    install(cwd, home, true);
    let installed = read(home, ".codex/config.toml");
    // toml_edit puts the table after its sibling `[mcp_servers.docs]`.
    assert!(
        installed.contains("args = [\"--port\", \"9000\"]\n\n[mcp_servers.stratum]\ncommand = \"stratum-mcp\"\n\n# keep this last"),
        "{installed}"
    );
    // Without --codex, uninstall leaves Codex alone.
    uninstall(cwd, home, false, false);
    assert_eq!(read(home, ".codex/config.toml"), installed);
    uninstall(cwd, home, true, false);
    assert_eq!(read(home, ".codex/config.toml"), CODEX);

    write(
        home,
        ".codex/config.toml",
        "[mcp_servers.stratum]\ncommand = \"uvx\"\n",
    );
    let report = install(cwd, home, true);
    assert_eq!(report.entries.last().unwrap().action, Action::Skipped);
    write(home, ".codex/config.toml", "model = [unclosed\n");
    let error = setup::install(
        &InstallArgs {
            codex: true,
            json: false,
        },
        cwd,
        home,
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("config.toml is not valid TOML"),
        "{error}"
    );
}

#[test]
fn the_claude_md_block() {
    insta::assert_snapshot!("claude_md_block", setup::claude_md_block("\n"));
}

fn hook_input(path: &str, cwd: &Path) -> String {
    serde_json::json!({
        "session_id": "s",
        "cwd": cwd,
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": path, "content": "…"},
        "tool_response": {"success": true}
    })
    .to_string()
}

#[test]
fn the_hook_passes_a_clean_spec_silently() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "flows/ok.stratum.yaml", SPEC);
    let absolute = dir.path().join("flows/ok.stratum.yaml");
    let outcome = post_tool_use_hook(&hook_input(absolute.to_str().unwrap(), dir.path()));
    assert_eq!((outcome.exit_code, outcome.stderr.as_str()), (0, ""));
    // A relative path is taken from the input's `cwd`.
    let outcome = post_tool_use_hook(&hook_input("flows/ok.stratum.yaml", dir.path()));
    assert_eq!((outcome.exit_code, outcome.stderr.as_str()), (0, ""));
}

#[test]
fn the_hook_feeds_back_a_specs_errors() {
    let dir = tempfile::tempdir().unwrap();
    let broken = SPEC
        .replace("intent:", "intnet:")
        .replace("function: classify", "function: clasify");
    write(dir.path(), "bad.stratum.yml", &broken);
    let outcome = post_tool_use_hook(&hook_input("bad.stratum.yml", dir.path()));
    assert_eq!(outcome.exit_code, 2);
    insta::assert_snapshot!("hook_errors", outcome.stderr);
}

#[test]
fn the_hook_ignores_what_it_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "notes.yaml", "intnet: [");
    for stdin in [
        hook_input("notes.yaml", dir.path()),
        hook_input("missing.stratum.yaml", dir.path()),
        "not json at all".to_owned(),
        "{\"tool_input\": {\"file_path\": 42}}".to_owned(),
        "{}".to_owned(),
        String::new(),
    ] {
        let outcome = post_tool_use_hook(&stdin);
        assert_eq!(
            (outcome.exit_code, outcome.stderr.as_str()),
            (0, ""),
            "{stdin}"
        );
    }
}

/// The `yaml` code blocks of a text, each with its indentation taken off.
fn yaml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(indent) = line.strip_suffix("```yaml").map(str::len) else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|line| line.trim() != "```")
            .map(|line| line.get(indent..).unwrap_or(""))
            .collect();
        blocks.push(body.join("\n"));
    }
    blocks
}

#[test]
fn the_skill_and_the_claude_md_block_show_a_spec_that_checks_clean() {
    for (what, text) in [
        ("the skill", setup::SKILL.to_owned()),
        ("the CLAUDE.md block", setup::claude_md_block("\n")),
    ] {
        let blocks = yaml_blocks(&text);
        assert_eq!(blocks.len(), 1, "{what} shows one example spec");
        for spec in blocks {
            let mut sources = stratum_compiler::source::SourceMap::new();
            let compilation = stratum_compiler::check_bytes(
                &mut sources,
                "example.stratum.yaml",
                spec.as_bytes(),
            );
            let problems: Vec<String> = compilation
                .diagnostics
                .iter()
                .map(|d| format!("{:?}: {}", d.code, d.message))
                .collect();
            assert_eq!(problems, Vec::<String>::new(), "{what}'s example:\n{spec}");
            for key in ["output_contract", "ensure", "mode: gate"] {
                assert!(spec.contains(key), "{what}'s example shows `{key}`");
            }
        }
    }
}

#[cfg(unix)]
#[test]
fn uninstall_edits_a_linked_file_where_it_points_and_keeps_the_link() {
    // A CLAUDE.md and a .mcp.json kept elsewhere (a dotfiles repository), linked into the
    // project, empty before install: install writes through the links, and uninstall must take
    // its text out of the files they point to, not delete the links and leave it there.
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dotfiles = tempfile::tempdir().unwrap();
    write(dotfiles.path(), "CLAUDE.md", "");
    write(dotfiles.path(), "mcp.json", "{}\n");
    for (name, target) in [("CLAUDE.md", "CLAUDE.md"), (".mcp.json", "mcp.json")] {
        std::os::unix::fs::symlink(dotfiles.path().join(target), project.path().join(name))
            .unwrap();
    }
    install(project.path(), home.path(), false);
    assert!(read(dotfiles.path(), "CLAUDE.md").contains("<!-- stratum:begin -->"));
    assert!(read(dotfiles.path(), "mcp.json").contains("stratum"));

    let report = uninstall(project.path(), home.path(), false, false);
    assert_eq!(read(dotfiles.path(), "CLAUDE.md"), "", "{report}");
    assert_eq!(read(dotfiles.path(), "mcp.json"), "{}\n", "{report}");
    for name in ["CLAUDE.md", ".mcp.json"] {
        let link = project.path().join(name);
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{name}: the link is the user's and stays: {report}"
        );
    }
    let claude_md = report
        .entries
        .iter()
        .find(|entry| entry.path == "CLAUDE.md")
        .unwrap();
    assert_eq!(claude_md.action, Action::Updated, "{report}");
    assert!(claude_md.detail.contains("symbolic link"), "{report}");
}

#[cfg(unix)]
#[test]
fn the_hook_does_not_open_a_fifo_named_like_a_spec() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.stratum.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo failed");
    let stdin = hook_input("pipe.stratum.yaml", dir.path());
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(post_tool_use_hook(&stdin));
    });
    let answered = outcome.recv_timeout(std::time::Duration::from_secs(10));
    if answered.is_err() {
        // Lets a hook blocked in `open` go (a writer arrives), so that the process can end.
        let _ = fs::OpenOptions::new().write(true).open(&fifo);
    }
    let outcome = answered.expect("the hook answered within 10 s instead of waiting on the FIFO");
    assert_eq!((outcome.exit_code, outcome.stderr.as_str()), (0, ""));
}
