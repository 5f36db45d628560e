#![allow(clippy::indexing_slicing, clippy::unwrap_used)]
//! `stratum_driver::git` against real git in temporary repositories: worktrees, diffs that
//! round-trip byte for byte, merges with conflicts and local changes, task directories and
//! verification commands.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use stratum_driver::git::{Git, GitError, task_dir, verify};

/// Runs the test's own git in `dir` (an identity given per command) and returns its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Lines `1` to `20`, one per line.
fn numbers() -> String {
    (1..=20).map(|n| format!("{n}\n")).collect()
}

/// A repository with one commit: `f.txt` (the numbers), `gone.txt`, `keep/old.bin`.
fn repo() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("keep")).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("f.txt"), numbers()).unwrap();
    std::fs::write(repo.join("gone.txt"), "to be deleted\n").unwrap();
    std::fs::write(repo.join("keep/old.bin"), [0_u8, 1, 2, 3, 255, 0, 10, 13]).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    (tmp, repo)
}

/// `text` with line `n` (1-based) replaced by `line`.
fn with_line(text: &str, n: usize, line: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(i, old)| format!("{}\n", if i + 1 == n { line } else { old }))
        .collect()
}

/// A worktree of `repo` at `HEAD` under `tmp`, changed by `edit`, and its diff.
fn task_patch(git_: &Git, repo: &Path, dir: &Path, edit: impl FnOnce(&Path)) -> (String, Vec<u8>) {
    let base = git_.head(repo).unwrap();
    git_.add_worktree(repo, dir, &base).unwrap();
    edit(dir);
    let patch = git_.capture_diff(dir, &base, 1 << 20).unwrap();
    (base, patch)
}

/// Every file under `dir` (but `.git`), with its bytes and whether it is executable.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, bool)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>, bool)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_name() == ".git" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let mode = std::fs::metadata(&path).unwrap().permissions().mode();
                out.push((
                    path.strip_prefix(root).unwrap().to_owned(),
                    std::fs::read(&path).unwrap(),
                    mode & 0o100 != 0,
                ));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn no_markers(dir: &Path) {
    for (path, bytes, _) in snapshot(dir) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("<<<<<<<") && !text.contains(">>>>>>>"),
            "conflict markers in {}",
            path.display()
        );
    }
}

#[test]
fn head_and_is_repository() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let head = git_.head(&repo).unwrap();
    assert_eq!(head, git(&repo, &["rev-parse", "HEAD"]).trim());
    assert!(git_.is_repository(&repo));
    assert!(git_.is_repository(&repo.join("keep")));
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert!(!git_.is_repository(&plain));
    assert!(!git_.is_repository(&tmp.path().join("absent")));
    assert!(matches!(git_.head(&plain), Err(GitError::Failed { .. })));
}

#[test]
fn worktrees_are_added_removed_and_added_again_after_a_crash() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let base = git_.head(&repo).unwrap();
    // A hook that would leave a mark: no git call of ours may run it.
    let mark = tmp.path().join("hook-ran");
    let hook = repo.join(".git/hooks/post-checkout");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", mark.display())).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let probe = tmp.path().join("probe");
    git(
        &repo,
        &["worktree", "add", "-q", "--detach", probe.to_str().unwrap()],
    );
    assert!(mark.exists(), "the hook should run for plain git");
    std::fs::remove_file(&mark).unwrap();

    let dir = tmp.path().join("tasks/flow/step/1/t1");
    git_.add_worktree(&repo, &dir, &base).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("f.txt")).unwrap(),
        numbers()
    );
    assert_eq!(git_.head(&dir).unwrap(), base);
    assert!(!mark.exists(), "a hook ran");

    // Again, over a worktree left dirty at another commit: it comes back clean at `base`.
    std::fs::write(dir.join("f.txt"), "dirty\n").unwrap();
    git(&dir, &["commit", "-qam", "moved on"]);
    std::fs::write(dir.join("stray"), "x").unwrap();
    git_.add_worktree(&repo, &dir, &base).unwrap();
    assert_eq!(git_.head(&dir).unwrap(), base);
    assert_eq!(
        std::fs::read_to_string(dir.join("f.txt")).unwrap(),
        numbers()
    );
    assert!(!dir.join("stray").exists());

    // A worktree whose directory vanished (git still records it) is added again too.
    std::fs::remove_dir_all(&dir).unwrap();
    git_.add_worktree(&repo, &dir, &base).unwrap();
    assert!(dir.join("f.txt").exists());

    git_.remove_worktree(&repo, &dir).unwrap();
    assert!(!dir.exists());
    assert!(!git(&repo, &["worktree", "list"]).contains("t1"));
    git_.remove_worktree(&repo, &dir).unwrap();

    // A directory that is not a worktree is never clobbered.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("mine"), "x").unwrap();
    let refused = git_.add_worktree(&repo, &other, &base);
    assert!(
        matches!(refused, Err(GitError::NotAWorktree { .. })),
        "{refused:?}"
    );
    assert!(other.join("mine").exists());
    let option = git_.add_worktree(&repo, &tmp.path().join("o"), "--orphan");
    assert!(
        matches!(option, Err(GitError::BadRevision { .. })),
        "{option:?}"
    );
}

/// Tasks that run at once add and remove their worktrees at once: git's own bookkeeping
/// (`.git/worktrees/<name>`, half written while another `worktree add` reads it) must never
/// make one of them fail.
#[test]
fn worktrees_added_and_removed_at_once_all_succeed() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let base = git_.head(&repo).unwrap();
    let root = tmp.path().join("tasks");
    std::thread::scope(|scope| {
        for thread in 0..6 {
            let (git_, repo, base, root) = (&git_, &repo, &base, &root);
            scope.spawn(move || {
                for round in 0..6 {
                    let dir = root.join(format!("t{thread}-{round}"));
                    git_.add_worktree(repo, &dir, base).unwrap();
                    assert!(dir.join("f.txt").exists());
                    if round % 2 == 1 {
                        git_.remove_worktree(repo, &dir).unwrap();
                    }
                }
            });
        }
    });
    let list = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        list.lines()
            .filter(|line| line.starts_with("worktree "))
            .count(),
        1 + 6 * 3,
        "{list}"
    );
}

#[test]
fn worktrees_are_removed_together_with_one_list_and_one_prune() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let base = git_.head(&repo).unwrap();
    let root = tmp.path().join("tasks");
    let dirs: Vec<PathBuf> = ["a", "b", "c"].iter().map(|id| root.join(id)).collect();
    for dir in &dirs {
        git_.add_worktree(&repo, dir, &base).unwrap();
        std::fs::write(dir.join("new.txt"), "x").unwrap();
    }
    // A directory that is not a worktree is refused, and the others are removed all the same.
    let other = root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("mine"), "x").unwrap();
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let mut all = vec![other.clone(), empty.clone(), root.join("never-made")];
    all.extend(dirs.iter().cloned());
    let removed = git_.remove_worktrees(&repo, &all);
    assert!(
        matches!(&removed, Err(GitError::NotAWorktree { path, .. }) if path.ends_with("other")),
        "{removed:?}"
    );
    assert!(other.join("mine").exists());
    assert!(!empty.exists());
    for dir in &dirs {
        assert!(!dir.exists(), "{}", dir.display());
    }
    let list = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        list.lines()
            .filter(|line| line.starts_with("worktree "))
            .count(),
        1,
        "{list}"
    );
    // Nothing left to remove: fine.
    git_.remove_worktrees(&repo, &dirs).unwrap();
}

#[test]
fn a_diff_round_trips_exactly_through_apply_all() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let all_bytes: Vec<u8> = (0..=255_u8).collect();
    let (_, patch) = task_patch(&git_, &repo, &tmp.path().join("w"), |dir| {
        std::fs::write(dir.join("new.txt"), "a new file\nwithout a final newline").unwrap();
        std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
        std::fs::write(dir.join("sub/deeper/all.bin"), &all_bytes).unwrap();
        std::fs::write(dir.join("f.txt"), with_line(&numbers(), 5, "five\r")).unwrap();
        std::fs::remove_file(dir.join("gone.txt")).unwrap();
        let mut old: Vec<u8> = std::fs::read(dir.join("keep/old.bin")).unwrap();
        old.extend([0, 0, 7]);
        std::fs::write(dir.join("keep/old.bin"), old).unwrap();
        let script = dir.join("run.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    });
    assert!(patch.windows(13).any(|w| w == b"GIT binary pa"));

    let report = git_.apply_all(&repo, &[("t1".to_owned(), patch)]).unwrap();
    assert_eq!(report.applied, ["t1"]);
    assert!(report.conflicts.is_empty(), "{:?}", report.conflicts);
    assert_eq!(snapshot(&repo), snapshot(&tmp.path().join("w")));
    assert_eq!(
        std::fs::read(repo.join("sub/deeper/all.bin")).unwrap(),
        all_bytes
    );
    assert!(!repo.join("gone.txt").exists());
    // The target's index is the user's: the change shows as unstaged.
    assert_eq!(git(&repo, &["diff", "--cached", "--name-only"]), "");
}

#[test]
fn a_second_patch_on_the_same_line_conflicts_and_changes_nothing() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let (_, first) = task_patch(&git_, &repo, &tmp.path().join("a"), |dir| {
        std::fs::write(dir.join("f.txt"), with_line(&numbers(), 10, "ten from a")).unwrap();
    });
    let (_, second) = task_patch(&git_, &repo, &tmp.path().join("b"), |dir| {
        std::fs::write(dir.join("f.txt"), with_line(&numbers(), 10, "ten from b")).unwrap();
        std::fs::write(dir.join("b-only.txt"), "b\n").unwrap();
    });
    let (_, third) = task_patch(&git_, &repo, &tmp.path().join("c"), |dir| {
        std::fs::write(dir.join("c.txt"), "c\n").unwrap();
    });
    // Local work in the target that no patch touches, and an untracked file.
    std::fs::write(repo.join("gone.txt"), "edited locally\n").unwrap();
    std::fs::write(repo.join("notes.txt"), "mine\n").unwrap();

    let report = git_
        .apply_all(
            &repo,
            &[
                ("a".to_owned(), first),
                ("b".to_owned(), second),
                ("c".to_owned(), third),
            ],
        )
        .unwrap();
    assert_eq!(report.applied, ["a", "c"]);
    assert_eq!(report.conflicts.len(), 1);
    let conflict = &report.conflicts[0];
    assert_eq!(conflict.task_id, "b");
    assert_eq!(conflict.files, ["f.txt"]);
    assert!(conflict.message.contains("f.txt"), "{}", conflict.message);

    assert_eq!(
        std::fs::read_to_string(repo.join("f.txt")).unwrap(),
        with_line(&numbers(), 10, "ten from a")
    );
    assert!(!repo.join("b-only.txt").exists(), "half of b was applied");
    assert_eq!(std::fs::read_to_string(repo.join("c.txt")).unwrap(), "c\n");
    assert_eq!(
        std::fs::read_to_string(repo.join("gone.txt")).unwrap(),
        "edited locally\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "mine\n"
    );
    no_markers(&repo);
    assert_eq!(git(&repo, &["ls-files", "--unmerged"]), "");
}

#[test]
fn a_patch_merges_with_a_local_change_nearby_three_way() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let (_, patch) = task_patch(&git_, &repo, &tmp.path().join("w"), |dir| {
        std::fs::write(dir.join("f.txt"), with_line(&numbers(), 10, "ten")).unwrap();
    });
    // Line 8 is in the patch's context: a plain apply fails, the three-way merge does not.
    std::fs::write(repo.join("f.txt"), with_line(&numbers(), 8, "eight, local")).unwrap();
    let plain = Command::new("git")
        .args(["apply", "--check", "-"])
        .current_dir(&repo)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(&patch)?;
            child.wait()
        })
        .unwrap();
    assert!(!plain.success(), "the context should not match");

    let report = git_.apply_all(&repo, &[("w".to_owned(), patch)]).unwrap();
    assert_eq!(report.applied, ["w"], "{:?}", report.conflicts);
    let expected = with_line(&with_line(&numbers(), 8, "eight, local"), 10, "ten");
    assert_eq!(
        std::fs::read_to_string(repo.join("f.txt")).unwrap(),
        expected
    );
}

#[test]
fn an_empty_patch_is_applied() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let (_, patch) = task_patch(&git_, &repo, &tmp.path().join("w"), |_| {});
    assert!(patch.is_empty());
    let before = snapshot(&repo);
    let report = git_.apply_all(&repo, &[("w".to_owned(), patch)]).unwrap();
    assert_eq!(report.applied, ["w"]);
    assert_eq!(snapshot(&repo), before);
}

#[test]
fn a_diff_over_the_limit_is_refused() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let base = git_.head(&repo).unwrap();
    let dir = tmp.path().join("w");
    git_.add_worktree(&repo, &dir, &base).unwrap();
    std::fs::write(dir.join("big.txt"), "line\n".repeat(10_000)).unwrap();
    let refused = git_.capture_diff(&dir, &base, 1000);
    assert!(
        matches!(
            refused,
            Err(GitError::DiffTooLarge {
                max_bytes: 1000,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(git_.capture_diff(&dir, &base, 1 << 20).is_ok());
}

#[test]
fn task_dirs_stay_under_their_root() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("runs");
    let flow = "0123456789abcdef0123456789abcdef";
    let dir = task_dir(&root, flow, "fan_out", 2, "task-1.a").unwrap();
    assert_eq!(
        dir,
        root.canonicalize()
            .unwrap()
            .join(flow)
            .join("fan_out/2/task-1.a")
    );
    assert!(task_dir(&root, flow, "s", 0, &"x".repeat(64)).is_ok());

    for bad in [
        "../../x",
        "a/b",
        "..",
        ".",
        "",
        &"x".repeat(65),
        "-x",
        "a b",
    ] {
        let refused = task_dir(&root, flow, "s", 1, bad);
        assert!(
            matches!(&refused, Err(GitError::BadComponent { what: "task id", value }) if value == bad),
            "{bad:?}: {refused:?}"
        );
        assert!(refused.unwrap_err().to_string().contains("task id"));
    }
    let refused = task_dir(&root, "../x", "s", 1, "t");
    assert!(matches!(
        refused,
        Err(GitError::BadComponent {
            what: "flow id",
            ..
        })
    ));

    // A root that is a link elsewhere, and a link below the root.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let refused = task_dir(&link, flow, "s", 1, "t");
    assert!(
        matches!(refused, Err(GitError::Symlink { .. })),
        "{refused:?}"
    );
    std::os::unix::fs::symlink(&elsewhere, root.join("linked")).unwrap();
    let refused = task_dir(&root, "linked", "s", 1, "t");
    assert!(
        matches!(refused, Err(GitError::Symlink { .. })),
        "{refused:?}"
    );
}

fn path_env() -> Vec<(OsString, OsString)> {
    vec![("PATH".into(), "/usr/bin:/bin".into())]
}

#[test]
fn verify_passes_and_fails_with_the_exit_code_and_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let deadline = Duration::from_secs(20);
    std::fs::create_dir(dir.join("scripts")).unwrap();
    let script = dir.join("scripts/check.sh");
    std::fs::write(&script, "#!/bin/sh\ntest \"$1\" = 'two words'\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pass = [
        "true".to_owned(),
        "sh -c 'test \"$0\" = x' x".to_owned(),
        "./scripts/check.sh 'two words'".to_owned(),
    ];
    verify(dir, &pass, path_env(), deadline).unwrap();

    let commands = [
        "true".to_owned(),
        "sh -c 'echo \"to out\"; echo to err >&2; exit 3'".to_owned(),
        "touch ran".to_owned(),
    ];
    let failure = verify(dir, &commands, path_env(), deadline).unwrap_err();
    assert_eq!(failure.command, commands[1]);
    assert_eq!((failure.exit_code, failure.timed_out), (Some(3), false));
    assert_eq!(failure.excerpt, "to out\nto err\n");
    assert!(!dir.join("ran").exists(), "a command after the failure ran");

    let long = ["sh -c 'seq 1 5000; exit 1'".to_owned()];
    let failure = verify(dir, &long, path_env(), deadline).unwrap_err();
    assert_eq!(failure.excerpt.chars().count(), 2048);
    assert!(failure.excerpt.ends_with("4999\n5000\n"));
}

#[test]
fn verify_reports_not_found_unparsable_and_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let deadline = Duration::from_secs(20);
    let missing = ["no-such-program-here --flag".to_owned()];
    let failure = verify(dir, &missing, path_env(), deadline).unwrap_err();
    assert_eq!(failure.exit_code, Some(127));
    assert!(failure.excerpt.contains("no-such-program-here"));

    let unbalanced = ["echo 'open".to_owned()];
    let failure = verify(dir, &unbalanced, path_env(), deadline).unwrap_err();
    assert_eq!((failure.exit_code, failure.timed_out), (None, false));
    assert!(failure.excerpt.contains("quote"), "{}", failure.excerpt);

    let started = Instant::now();
    let sleep = ["sleep 100".to_owned()];
    let failure = verify(dir, &sleep, path_env(), Duration::from_millis(300)).unwrap_err();
    assert!(failure.timed_out);
    assert_eq!(failure.exit_code, None);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn verify_gives_exactly_the_environment_given() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = path_env();
    env.push(("MARK".into(), "given".into()));
    let commands = ["sh -c 'env; exit 1'".to_owned()];
    let failure = verify(tmp.path(), &commands, env, Duration::from_secs(20)).unwrap_err();
    let names: Vec<&str> = failure
        .excerpt
        .lines()
        .filter_map(|line| line.split('=').next())
        .collect();
    assert!(
        failure.excerpt.contains("MARK=given\n"),
        "{}",
        failure.excerpt
    );
    // What the shell sets itself (`PWD`, and `OLDPWD`, `SHLVL`, `_` for some) is all there is
    // besides what was given: nothing of the test's environment (`CARGO_*`, `HOME`).
    for name in names {
        assert!(
            ["PATH", "MARK", "PWD", "OLDPWD", "SHLVL", "_"].contains(&name),
            "{name} reached the command: {}",
            failure.excerpt
        );
    }
}

#[test]
fn a_new_file_the_target_already_has_is_a_conflict() {
    let (tmp, repo) = repo();
    let git_ = Git::default();
    let (_, patch) = task_patch(&git_, &repo, &tmp.path().join("w"), |dir| {
        std::fs::write(dir.join("f.txt"), with_line(&numbers(), 2, "two")).unwrap();
        std::fs::write(dir.join("both.txt"), "theirs\n").unwrap();
    });
    std::fs::write(repo.join("both.txt"), "ours, untracked\n").unwrap();
    let before = snapshot(&repo);
    let report = git_.apply_all(&repo, &[("w".to_owned(), patch)]).unwrap();
    assert!(report.applied.is_empty());
    assert_eq!(report.conflicts[0].files, ["both.txt"]);
    assert_eq!(snapshot(&repo), before);

    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert!(git_.apply_all(&plain, &[]).is_err());
}

#[test]
fn a_patch_already_in_the_tree_is_known_as_applied() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = stratum_driver::git::Git::default();
    let run = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["init", "-q"]);
    std::fs::write(repo.join("f.txt"), "one\n").unwrap();
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "base"]);
    let base = git.head(&repo).unwrap();
    let tree = dir.path().join("wt");
    git.add_worktree(&repo, &tree, &base).unwrap();
    std::fs::write(tree.join("f.txt"), "two\n").unwrap();
    let patch = git.capture_diff(&tree, &base, 1 << 20).unwrap();
    assert!(!git.is_applied(&repo, &patch), "not yet");
    let merged = git
        .apply_all(&repo, &[("t".to_owned(), patch.clone())])
        .unwrap();
    assert!(merged.conflicts.is_empty());
    assert!(
        git.is_applied(&repo, &patch),
        "applied once: a restart does not apply it again"
    );
}
