//! Git for fanned-out tasks: a worktree per task, the task's diff, the diffs merged back into
//! the project's working tree, and the checks run before a merge. It takes paths and
//! revisions and returns commit ids, diffs (raw bytes) and a [`MergeReport`].
//!
//! Every git call goes through [`run_command`]: an argument vector (never a shell), a deadline
//! ([`Git::deadline`]), its own process group, and an environment of `PATH`, `HOME` and `LANG`
//! from this process plus `GIT_CONFIG_NOSYSTEM=1` and `GIT_TERMINAL_PROMPT=0`, nothing else.
//! Each call passes `-c core.hooksPath=/dev/null` (so no hook of the repository runs, e.g.
//! `post-checkout` on `worktree add`) and `-c core.fsmonitor=false` (so no configured monitor
//! command runs). Diffs are asked for with every option that the user's configuration could
//! turn the other way (`--no-color`, `--no-ext-diff`, `--no-textconv`, `--no-renames`,
//! `--no-relative`, explicit `a/` and `b/` prefixes), so what [`Git::capture_diff`] returns is
//! always something `git apply` takes back byte for byte.
//!
//! # How [`Git::apply_all`] merges
//!
//! `git apply --3way` on the working tree itself cannot be used: it implies `--index`, so it
//! refuses any file whose working-tree content differs from the index (`does not match index`,
//! i.e. every file the user is editing), and on a conflict it writes conflict markers into the
//! file. Instead, for each patch, in a scratch index of our own (`GIT_INDEX_FILE` in a
//! temporary directory; the target's index is never touched):
//!
//! 1. the files the patch touches (`git apply --numstat -z`) are staged there as they are in
//!    the working tree now (`update-index --add --remove`), and that is written as tree `T0`;
//! 2. `git apply --cached --3way --binary` merges the patch into the scratch index only:
//!    straight when its context matches, else three-way against the blobs named by the patch's
//!    `index` lines (which a task's worktree shares with the target's object store). Unmerged
//!    entries (`ls-files -u`) or a failure make the patch a [`Conflict`], and the working tree
//!    has not been written at all;
//! 3. when clean, the result is written as tree `T1`, and the exact difference `T0..T1` is
//!    applied to the working tree with a plain `git apply --binary`: its preimage is what the
//!    files hold now, so it applies exactly; git checks every file before writing any, so even
//!    if the tree changed meanwhile (another writer), it fails whole and the patch is reported
//!    as a conflict, never half applied.
//!
//! So a conflicting patch leaves the target exactly as it was, the target's uncommitted
//! changes take part in the merge, and the applied changes show in the target as unstaged
//! changes (new files as untracked ones), with the user's index as it was.
//!
//! Invariants: a task directory is always `<root>/<flow>/<step>/<attempt>/<task>` under the
//! canonical root, through no symbolic link; no git call outlives its deadline; a patch is
//! either applied whole or not at all; a process adds and removes its worktrees one at a time
//! (git does not lock its records of them; another process on the same repository is not
//! covered).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use stratum_agents::{CommandOutput, CommandSpec, run_command};

/// How long one git command may take by default.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);

/// How long one git command has after SIGTERM to exit.
const GRACE: Duration = Duration::from_secs(5);

/// What is kept of the output of a git command that prints no diff.
const OUTPUT_BYTES: usize = 16 * 1024 * 1024;

/// How many characters of git's stderr an error or a conflict quotes, and of a failed check's
/// output a [`VerifyFailure`] keeps.
const EXCERPT_CHARS: usize = 2048;

/// How long a verification command has after SIGTERM to exit.
const VERIFY_GRACE: Duration = Duration::from_secs(5);

/// The environment variables a git command gets from this process.
const ALLOWED_ENV: &[&str] = &["PATH", "HOME", "LANG"];

/// Held while this process adds or removes a worktree. git keeps its worktrees' records in
/// `.git/worktrees/<name>/` with no lock of its own: a `worktree add` (or `list`, or `prune`)
/// that reads them while another `worktree add` is writing one dies (`failed to read
/// .git/worktrees/<name>/commondir`) or prunes it half made, so tasks that start at once
/// would fail at random. One lock for every repository: these commands are short, and tasks
/// of one process share one project in practice.
static WORKTREE_RECORDS: Mutex<()> = Mutex::new(());

/// The git binary and how long each of its commands may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Git {
    /// A path, or a name looked up on `PATH`.
    pub program: PathBuf,
    pub deadline: Duration,
}

/// Why a git operation could not be done.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run `{command}`: {source}; install git, or set `Git::program` to its path")]
    Start {
        command: String,
        source: stratum_agents::Error,
    },
    #[error(
        "`{command}` did not finish within {seconds}s and was stopped; raise `Git::deadline` for a large repository"
    )]
    TimedOut { command: String, seconds: u64 },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        /// The end of git's stderr.
        stderr: String,
    },
    #[error(
        "`{revision}` cannot be given to git as a revision: use a commit id or a ref name that does not start with `-`"
    )]
    BadRevision { revision: String },
    #[error(
        "`{path}` exists and is not a worktree of `{repo}`: remove it, or choose another directory"
    )]
    NotAWorktree { path: PathBuf, repo: PathBuf },
    #[error(
        "the diff of `{worktree}` is larger than {max_bytes} bytes: the task changed too much to merge; split the task or raise the limit"
    )]
    DiffTooLarge { worktree: PathBuf, max_bytes: usize },
    #[error("git printed `{output}` where {expected} was expected: check that `{program}` is git")]
    Unexpected {
        program: PathBuf,
        expected: &'static str,
        output: String,
    },
    #[error("cannot use `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the {what} `{value}` cannot name a directory: use 1 to 64 letters, digits, `_`, `.` or `-`, starting with a letter or digit"
    )]
    BadComponent { what: &'static str, value: String },
    #[error(
        "`{path}` is a symbolic link (to `{target}`): task directories are made only through real directories; replace the link with a directory or give the directory it leads to"
    )]
    Symlink { path: PathBuf, target: PathBuf },
    #[error("`{path}` is not under `{root}`: a task directory must be inside the root")]
    OutsideRoot { path: PathBuf, root: PathBuf },
}

/// What [`Git::apply_all`] did with each patch, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// The tasks whose patch is now in the target (an empty patch included).
    pub applied: Vec<String>,
    /// The tasks whose patch was not applied; the target is as it was before each of them.
    pub conflicts: Vec<Conflict>,
}

/// A patch that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub task_id: String,
    /// The files that conflict, as git names them (relative to the top of the working tree);
    /// every file of the patch when git does not say which.
    pub files: Vec<String>,
    /// What git said (its last 2048 characters).
    pub message: String,
}

/// A verification command that did not pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the check `{command}` failed ({}): {excerpt}", self.describe())]
pub struct VerifyFailure {
    /// The command as it was given.
    pub command: String,
    /// Its exit code; 127 when the program was not found, 126 when it could not be run, `None`
    /// when it timed out, was killed by a signal, or could not be parsed.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The last 2048 characters of its stdout then stderr (lossy UTF-8), or why it did not run.
    pub excerpt: String,
}

impl VerifyFailure {
    fn describe(&self) -> String {
        match (self.timed_out, self.exit_code) {
            (true, _) => "timed out".to_owned(),
            (false, Some(code)) => format!("exit status {code}"),
            (false, None) => "no exit status".to_owned(),
        }
    }
}

impl Default for Git {
    fn default() -> Self {
        Git {
            program: PathBuf::from("git"),
            deadline: DEFAULT_DEADLINE,
        }
    }
}

impl Git {
    /// The full commit id of `HEAD` in `repo`.
    pub fn head(&self, repo: &Path) -> Result<String, GitError> {
        let out = self.run_ok(repo, &args(["rev-parse", "--verify", "HEAD^{commit}"]))?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if is_object_id(&id) {
            Ok(id)
        } else {
            Err(self.unexpected("a commit id", &id))
        }
    }

    /// Whether `dir` is in a git working tree (at its top or below). A directory git cannot
    /// look at, or a missing one, is not.
    pub fn is_repository(&self, dir: &Path) -> bool {
        self.run(
            dir,
            &args(["rev-parse", "--is-inside-work-tree"]),
            Input::default(),
        )
        .is_ok_and(|out| out.success() && out.stdout.trim_ascii() == b"true")
    }

    /// A worktree of `repo` at `dir`, its `HEAD` detached at `base`; `dir`'s parent is created.
    /// When `dir` already is a worktree of `repo` (at any commit: a crash left it), it is
    /// removed and added again; any other existing `dir`, unless an empty directory, is
    /// refused.
    pub fn add_worktree(&self, repo: &Path, dir: &Path, base: &str) -> Result<(), GitError> {
        check_revision(base)?;
        let _records = WORKTREE_RECORDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let dir = resolve(dir);
        if self.is_worktree_of(repo, &dir)? {
            self.remove_recorded_worktree(repo, &dir)?;
        } else if std::fs::symlink_metadata(&dir).is_ok() && !is_empty_dir(&dir) {
            return Err(GitError::NotAWorktree {
                path: dir,
                repo: repo.to_owned(),
            });
        }
        let mut argv = args(["worktree", "add", "--detach", "--end-of-options"]);
        argv.push(dir.into_os_string());
        argv.push(base.into());
        self.run_ok(repo, &argv)?;
        Ok(())
    }

    /// Removes the worktree of `repo` at `dir` with whatever it holds (`worktree remove
    /// --force --force`, which also removes a locked one), then prunes what git still records
    /// of worktrees that are gone (`worktree prune`). A `dir` already gone is fine; an
    /// existing `dir` that is not a worktree of `repo` is refused (an empty directory is
    /// removed).
    pub fn remove_worktree(&self, repo: &Path, dir: &Path) -> Result<(), GitError> {
        let _records = WORKTREE_RECORDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.remove_recorded_worktree(repo, dir)
    }

    /// Removes each of `dirs` as [`Git::remove_worktree`] does, with one `worktree list`
    /// before them all and one `worktree prune` after (three git commands a worktree become
    /// one): every directory is tried; the first error, if any.
    pub fn remove_worktrees(&self, repo: &Path, dirs: &[PathBuf]) -> Result<(), GitError> {
        let _records = WORKTREE_RECORDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let recorded = self.worktrees_of(repo)?;
        let mut first_error = None;
        for dir in dirs {
            if let Err(error) = self.remove_listed(repo, &resolve(dir), &recorded) {
                first_error.get_or_insert(error);
            }
        }
        self.run_ok(repo, &args(["worktree", "prune"]))?;
        first_error.map_or(Ok(()), Err)
    }

    /// [`Git::remove_worktree`], [`WORKTREE_RECORDS`] held by the caller.
    fn remove_recorded_worktree(&self, repo: &Path, dir: &Path) -> Result<(), GitError> {
        let dir = resolve(dir);
        if std::fs::symlink_metadata(&dir).is_ok() {
            let recorded = self.worktrees_of(repo)?;
            self.remove_listed(repo, &dir, &recorded)?;
        }
        self.run_ok(repo, &args(["worktree", "prune"]))?;
        Ok(())
    }

    /// Removes `dir` (resolved), given the worktrees `repo` records: a worktree with
    /// `worktree remove --force --force`, an empty directory with `rmdir`; a missing one is
    /// fine, anything else refused.
    fn remove_listed(&self, repo: &Path, dir: &Path, recorded: &[PathBuf]) -> Result<(), GitError> {
        if std::fs::symlink_metadata(dir).is_err() {
            return Ok(());
        }
        if recorded.iter().any(|path| path == dir) {
            let mut argv = args(["worktree", "remove", "--force", "--force"]);
            argv.push(dir.as_os_str().to_owned());
            self.run_ok(repo, &argv)?;
        } else if is_empty_dir(dir) {
            std::fs::remove_dir(dir).map_err(io(dir))?;
        } else {
            return Err(GitError::NotAWorktree {
                path: dir.to_owned(),
                repo: repo.to_owned(),
            });
        }
        Ok(())
    }

    /// Everything that changed in `worktree` since `base`, as one patch `git apply` takes:
    /// `add -A` (new files included, ignored ones not), then `diff --cached --binary
    /// --full-index <base>` (binary files as git binary patches). Over `max_bytes` it is
    /// [`GitError::DiffTooLarge`]; no more than `max_bytes` of it is ever held.
    pub fn capture_diff(
        &self,
        worktree: &Path,
        base: &str,
        max_bytes: usize,
    ) -> Result<Vec<u8>, GitError> {
        check_revision(base)?;
        self.run_ok(worktree, &args(["add", "-A"]))?;
        let mut argv = args(["diff", "--cached"]);
        argv.extend(args(DIFF_OPTIONS));
        argv.extend(args(["--end-of-options", base, "--"]));
        let out = self.run_checked(
            worktree,
            &argv,
            Input {
                output_bytes: max_bytes,
                ..Input::default()
            },
        )?;
        if out.stdout_truncated {
            return Err(GitError::DiffTooLarge {
                worktree: worktree.to_owned(),
                max_bytes,
            });
        }
        Ok(out.stdout)
    }

    /// Applies `patches` (task id, patch) in order onto the working tree `target`, three-way,
    /// each whole or not at all (see the module doc for how). A patch that conflicts is
    /// reported and leaves `target` as it was; the following patches are still tried. An
    /// empty patch is applied trivially. An error means nothing was tried: `target` is not a
    /// git working tree, or git cannot run.
    pub fn apply_all(
        &self,
        target: &Path,
        patches: &[(String, Vec<u8>)],
    ) -> Result<MergeReport, GitError> {
        let out = self.run_ok(target, &args(["rev-parse", "--show-toplevel"]))?;
        let top = PathBuf::from(OsStr::from_bytes(trim_newline(&out.stdout)));
        if !top.is_dir() {
            return Err(self.unexpected("the top of a working tree", &top.to_string_lossy()));
        }
        let scratch = tempfile::Builder::new()
            .prefix("stratum-apply-")
            .tempdir()
            .map_err(io(&std::env::temp_dir()))?;
        let index = scratch.path().join("index");
        let mut report = MergeReport::default();
        for (task_id, patch) in patches {
            if patch.is_empty() {
                report.applied.push(task_id.clone());
                continue;
            }
            match self.apply_one(&top, &index, patch) {
                Ok(Applied::Yes) => report.applied.push(task_id.clone()),
                Ok(Applied::No { files, message }) => report.conflicts.push(Conflict {
                    task_id: task_id.clone(),
                    files,
                    message,
                }),
                Err(err) => report.conflicts.push(Conflict {
                    task_id: task_id.clone(),
                    files: self.patch_files(&top, patch).unwrap_or_default(),
                    message: excerpt(&err.to_string()),
                }),
            }
        }
        Ok(report)
    }
}

/// The directory of one task's worktree: `<root>/<flow_id>/<step_id>/<attempt>/<task_id>`
/// under `root` canonicalised (`root` is created when missing). Each component must be 1 to
/// 64 of `[A-Za-z0-9_.-]`, starting with a letter or digit (so no separator, no `.` or `..`);
/// `root` itself, or any existing directory below it on the way, must not be a symbolic link.
/// Nothing below `root` is created.
pub fn task_dir(
    root: &Path,
    flow_id: &str,
    step_id: &str,
    attempt: u32,
    task_id: &str,
) -> Result<PathBuf, GitError> {
    let attempt = attempt.to_string();
    let components = [
        ("flow id", flow_id),
        ("step id", step_id),
        ("attempt", attempt.as_str()),
        ("task id", task_id),
    ];
    if let Some((what, value)) = components.iter().find(|(_, value)| !is_component(value)) {
        return Err(GitError::BadComponent {
            what,
            value: (*value).to_owned(),
        });
    }
    refuse_symlink(root)?;
    std::fs::create_dir_all(root).map_err(io(root))?;
    let canonical_root = root.canonicalize().map_err(io(root))?;
    let mut dir = canonical_root.clone();
    for (_, value) in components {
        dir.push(value);
        refuse_symlink(&dir)?;
    }
    // The components cannot climb out and none that exists is a link: checked once more, as
    // the invariant callers rely on.
    if !dir.starts_with(&canonical_root) {
        return Err(GitError::OutsideRoot {
            path: dir,
            root: canonical_root,
        });
    }
    Ok(dir)
}

/// Removes `<root>/<flow_id>` and everything in it: what a pruned flow left under the server's
/// home (its judge turns); whether there was one. The flow id must be one safe component, and
/// neither `root` nor the flow's directory may be a symbolic link: the directory removed is
/// always inside the canonical root, and links inside it are removed, never followed.
pub fn remove_flow_dir(root: &Path, flow_id: &str) -> Result<bool, GitError> {
    let Some(dir) = flow_dir(root, flow_id)? else {
        return Ok(false);
    };
    std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
    Ok(true)
}

/// `<root>/<flow_id>` resolved, through no symbolic link and checked to be under the canonical
/// root; `None` when it does not exist.
fn flow_dir(root: &Path, flow_id: &str) -> Result<Option<PathBuf>, GitError> {
    if !is_component(flow_id) {
        return Err(GitError::BadComponent {
            what: "flow id",
            value: flow_id.to_owned(),
        });
    }
    if std::fs::symlink_metadata(root).is_err() {
        return Ok(None);
    }
    refuse_symlink(root)?;
    let canonical_root = root.canonicalize().map_err(io(root))?;
    let dir = canonical_root.join(flow_id);
    match std::fs::symlink_metadata(&dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io(&dir)(error)),
        Ok(_) => refuse_symlink(&dir)?,
    }
    let canonical = dir.canonicalize().map_err(io(&dir))?;
    if !canonical.starts_with(&canonical_root) || canonical == canonical_root {
        return Err(GitError::OutsideRoot {
            path: canonical,
            root: canonical_root,
        });
    }
    Ok(Some(canonical))
}

/// The directories exactly `depth` levels below `dir`, reached through real directories only
/// (a link is not a directory here, so nothing outside is listed).
fn dirs_at_depth(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut level = vec![dir.to_owned()];
    for _ in 0..depth {
        level = level
            .iter()
            .filter_map(|parent| std::fs::read_dir(parent).ok())
            .flat_map(|entries| entries.filter_map(Result::ok))
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
            .map(|entry| entry.path())
            .collect();
    }
    level
}

/// The git directory of the repository that registered the worktree `dir`: read from its
/// `.git` file, and taken only when that repository's record of the worktree points back at
/// `dir` (an agent may have rewritten `.git`; it cannot make another repository claim it).
fn registering_repository(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    if !std::fs::symlink_metadata(&dot_git).is_ok_and(|meta| meta.is_file()) {
        return None;
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let record = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    let record = if record.is_absolute() {
        record
    } else {
        dir.join(record)
    };
    let back = std::fs::read_to_string(record.join("gitdir")).ok()?;
    if resolve(Path::new(back.trim())) != resolve(&dot_git) {
        return None;
    }
    let common = match std::fs::read_to_string(record.join("commondir")) {
        Ok(relative) => record.join(relative.trim()),
        Err(_) => record.join("..").join(".."),
    };
    common.canonicalize().ok()
}

impl Git {
    /// Removes the task worktrees of flow `flow_id` under `root`
    /// (`<root>/<flow>/<step>/<attempt>/<task>`, see [`task_dir`]) with the flow's directory,
    /// then prunes each registering repository's records of them (`git worktree prune`); how
    /// many task directories were removed. For `stratum-mcp prune`, which does not know the
    /// project a flow ran in: the repository is found from each worktree's `.git` file.
    pub fn remove_flow_worktrees(&self, root: &Path, flow_id: &str) -> Result<usize, GitError> {
        let Some(dir) = flow_dir(root, flow_id)? else {
            return Ok(0);
        };
        let tasks = dirs_at_depth(&dir, 3);
        let repositories: std::collections::BTreeSet<PathBuf> = tasks
            .iter()
            .filter_map(|task| registering_repository(task))
            .collect();
        let _records = WORKTREE_RECORDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
        let mut first_error = None;
        for repository in repositories {
            let mut git_dir = OsString::from("--git-dir=");
            git_dir.push(repository.as_os_str());
            let mut argv = vec![git_dir];
            argv.extend(args(["worktree", "prune"]));
            if let Err(error) = self.run_ok(&repository, &argv) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(tasks.len()), Err)
    }
}

/// Runs each of `commands` in `worktree`, in order, until one fails: each string is split into
/// words as a POSIX shell splits them (quotes and backslashes; no variables, globs or
/// redirections: no shell runs), its first word the program (looked up on `env`'s `PATH`, or
/// relative to `worktree` when it holds a `/`), with exactly `env`, within `deadline`.
pub fn verify(
    worktree: &Path,
    commands: &[String],
    env: Vec<(OsString, OsString)>,
    deadline: Duration,
) -> Result<(), VerifyFailure> {
    for command in commands {
        check(worktree, command, env.clone(), deadline)?;
    }
    Ok(())
}

/// The diff options that make a patch `git apply` takes back exactly, whatever the user's
/// configuration says.
const DIFF_OPTIONS: [&str; 10] = [
    "--binary",
    "--full-index",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--ignore-submodules=none",
];

/// What one git command gets besides its arguments.
struct Input {
    stdin: Vec<u8>,
    /// Added to the allow-listed environment (e.g. `GIT_INDEX_FILE`).
    env: Vec<(OsString, OsString)>,
    output_bytes: usize,
}

impl Default for Input {
    fn default() -> Self {
        Input {
            stdin: Vec::new(),
            env: Vec::new(),
            output_bytes: OUTPUT_BYTES,
        }
    }
}

impl Input {
    fn with_index(index: &Path) -> Self {
        Input {
            env: vec![("GIT_INDEX_FILE".into(), index.into())],
            ..Input::default()
        }
    }
}

/// How one patch went.
enum Applied {
    Yes,
    No { files: Vec<String>, message: String },
}

impl Git {
    /// Runs git with `argv` in `cwd`; how it ended is the caller's to judge.
    fn run(&self, cwd: &Path, argv: &[OsString], input: Input) -> Result<CommandOutput, GitError> {
        let mut full = args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ]);
        full.extend_from_slice(argv);
        let mut env = environment();
        env.extend(input.env);
        let out = run_command(CommandSpec {
            program: &self.program,
            args: &full,
            env,
            cwd,
            stdin: input.stdin,
            deadline: self.deadline,
            grace: GRACE,
            output_bytes: input.output_bytes,
        })
        .map_err(|source| GitError::Start {
            command: describe(argv),
            source,
        })?;
        if out.timed_out {
            return Err(GitError::TimedOut {
                command: describe(argv),
                seconds: self.deadline.as_secs(),
            });
        }
        Ok(out)
    }

    /// Runs git and requires it to succeed.
    fn run_checked(
        &self,
        cwd: &Path,
        argv: &[OsString],
        input: Input,
    ) -> Result<CommandOutput, GitError> {
        let out = self.run(cwd, argv, input)?;
        if out.success() {
            Ok(out)
        } else {
            Err(failed(argv, &out))
        }
    }

    fn run_ok(&self, cwd: &Path, argv: &[OsString]) -> Result<CommandOutput, GitError> {
        self.run_checked(cwd, argv, Input::default())
    }

    fn unexpected(&self, expected: &'static str, output: &str) -> GitError {
        GitError::Unexpected {
            program: self.program.clone(),
            expected,
            output: excerpt(output),
        }
    }

    /// Whether `dir` (resolved) is one of the worktrees `repo` records.
    fn is_worktree_of(&self, repo: &Path, dir: &Path) -> Result<bool, GitError> {
        Ok(self.worktrees_of(repo)?.iter().any(|path| path == dir))
    }

    /// The worktrees `repo` records (`worktree list`), resolved.
    fn worktrees_of(&self, repo: &Path) -> Result<Vec<PathBuf>, GitError> {
        let out = self.run_ok(repo, &args(["worktree", "list", "--porcelain", "-z"]))?;
        if out.stdout_truncated {
            return Err(self.unexpected("a list of worktrees", "(too long)"));
        }
        Ok(out
            .stdout
            .split(|&byte| byte == 0)
            .filter_map(|field| field.strip_prefix(b"worktree "))
            .map(|path| resolve(Path::new(OsStr::from_bytes(path))))
            .collect())
    }

    /// The paths a patch touches, old and new names of a rename both.
    fn patch_files(&self, top: &Path, patch: &[u8]) -> Result<Vec<String>, GitError> {
        let out = self.run_checked(
            top,
            &args(["apply", "--numstat", "-z", "-"]),
            Input {
                stdin: patch.to_vec(),
                ..Input::default()
            },
        )?;
        Ok(numstat_paths(&out.stdout))
    }

    /// Applies one non-empty patch to the working tree at `top` through the scratch `index`.
    fn apply_one(&self, top: &Path, index: &Path, patch: &[u8]) -> Result<Applied, GitError> {
        let files = self.patch_files(top, patch)?;
        match std::fs::remove_file(index) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(io(index)(err)),
            _ => {}
        }
        // 1. The touched files as they are now, and that as a tree.
        let mut paths = Vec::new();
        for file in &files {
            paths.extend_from_slice(file.as_bytes());
            paths.push(0);
        }
        self.run_checked(
            top,
            &args(["update-index", "--add", "--remove", "-z", "--stdin"]),
            Input {
                stdin: paths,
                ..Input::with_index(index)
            },
        )?;
        let before = self.write_tree(top, index)?;
        // 2. The patch merged into the scratch index only.
        let merge = self.run(
            top,
            &args([
                "apply",
                "--cached",
                "--3way",
                "--binary",
                "--whitespace=nowarn",
                "-",
            ]),
            Input {
                stdin: patch.to_vec(),
                ..Input::with_index(index)
            },
        )?;
        if !merge.success() {
            let unmerged = self.run_checked(
                top,
                &args(["ls-files", "--unmerged", "-z"]),
                Input::with_index(index),
            )?;
            let stderr = String::from_utf8_lossy(&merge.stderr);
            return Ok(Applied::No {
                files: conflicting(&unmerged.stdout, &stderr, files),
                message: excerpt(&stderr),
            });
        }
        // 3. Exactly the difference the merge made, onto the working tree.
        let after = self.write_tree(top, index)?;
        if after == before {
            return Ok(Applied::Yes);
        }
        let mut argv = args(["diff"]);
        argv.extend(args(DIFF_OPTIONS));
        argv.extend(args(["--end-of-options", &before, &after, "--"]));
        let limit = patch.len().saturating_mul(4).saturating_add(OUTPUT_BYTES);
        let exact = self.run_checked(
            top,
            &argv,
            Input {
                output_bytes: limit,
                ..Input::default()
            },
        )?;
        if exact.stdout_truncated {
            return Ok(Applied::No {
                files,
                message: format!("the merged change is larger than {limit} bytes"),
            });
        }
        let write = self.run(
            top,
            &args(["apply", "--binary", "--whitespace=nowarn", "-"]),
            Input {
                stdin: exact.stdout,
                ..Input::default()
            },
        )?;
        if !write.success() {
            let stderr = String::from_utf8_lossy(&write.stderr);
            return Ok(Applied::No {
                files: conflicting(&[], &stderr, files),
                message: excerpt(&format!(
                    "the merged patch could not be written to the working tree (did it change \
                     meanwhile?): {stderr}"
                )),
            });
        }
        Ok(Applied::Yes)
    }

    fn write_tree(&self, top: &Path, index: &Path) -> Result<String, GitError> {
        let out = self.run_checked(top, &args(["write-tree"]), Input::with_index(index))?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if is_object_id(&id) {
            Ok(id)
        } else {
            Err(self.unexpected("a tree id", &id))
        }
    }
}

/// Runs one verification command.
fn check(
    worktree: &Path,
    command: &str,
    env: Vec<(OsString, OsString)>,
    deadline: Duration,
) -> Result<(), VerifyFailure> {
    let failure = |exit_code, timed_out, excerpt| VerifyFailure {
        command: command.to_owned(),
        exit_code,
        timed_out,
        excerpt,
    };
    let Some(words) = shlex::split(command) else {
        return Err(failure(
            None,
            false,
            "cannot split the command into words: a quote is not closed, or it ends with a \
             backslash"
                .to_owned(),
        ));
    };
    let Some((program, rest)) = words.split_first() else {
        return Err(failure(None, false, "the command is empty".to_owned()));
    };
    let program = if program.contains('/') {
        worktree.join(program)
    } else {
        PathBuf::from(program)
    };
    let argv: Vec<OsString> = rest.iter().map(OsString::from).collect();
    let out = run_command(CommandSpec {
        program: &program,
        args: &argv,
        env,
        cwd: worktree,
        stdin: Vec::new(),
        deadline,
        grace: VERIFY_GRACE,
        output_bytes: EXCERPT_CHARS * 4,
    });
    match out {
        Ok(out) if out.success() => Ok(()),
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let code = if out.timed_out { None } else { out.exit.code };
            Err(failure(
                code,
                out.timed_out,
                last_chars(&text, EXCERPT_CHARS),
            ))
        }
        Err(stratum_agents::Error::Spawn { source, .. }) => {
            let code = if source.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            Err(failure(
                Some(code),
                false,
                format!("cannot run `{}`: {source}", program.display()),
            ))
        }
        Err(err) => Err(failure(None, false, err.to_string())),
    }
}

/// `PATH`, `HOME` and `LANG` of this process, and git told to read no system configuration
/// and never to prompt.
fn environment() -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = ALLOWED_ENV
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value)))
        .collect();
    env.push(("GIT_CONFIG_NOSYSTEM".into(), "1".into()));
    env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
    env
}

fn args<I, S>(items: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    items
        .into_iter()
        .map(|item| item.as_ref().to_owned())
        .collect()
}

/// `git <argv>` for a message, without the `-c` options every call has.
fn describe(argv: &[OsString]) -> String {
    let words: Vec<_> = argv.iter().map(|arg| arg.to_string_lossy()).collect();
    format!("git {}", words.join(" "))
}

fn failed(argv: &[OsString], out: &CommandOutput) -> GitError {
    let status = match (out.exit.code, out.exit.signal) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "no exit status".to_owned(),
    };
    GitError::Failed {
        command: describe(argv),
        status,
        stderr: excerpt(&String::from_utf8_lossy(&out.stderr)),
    }
}

/// The last [`EXCERPT_CHARS`] characters of `text`, trimmed.
fn excerpt(text: &str) -> String {
    last_chars(text.trim(), EXCERPT_CHARS)
}

fn last_chars(text: &str, n: usize) -> String {
    let skip = text.chars().count().saturating_sub(n);
    text.chars().skip(skip).collect()
}

fn trim_newline(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(b"\n").unwrap_or(bytes)
}

/// Refuses a revision git could take for an option (a leading `-`), besides passing it after
/// `--end-of-options`.
fn check_revision(revision: &str) -> Result<(), GitError> {
    if revision.is_empty() || revision.starts_with('-') || revision.contains('\0') {
        return Err(GitError::BadRevision {
            revision: revision.to_owned(),
        });
    }
    Ok(())
}

/// A full SHA-1 or SHA-256 object id.
fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// `dir` made absolute through its real parent (the same path git records for a worktree,
/// whether or not `dir` exists yet).
fn resolve(dir: &Path) -> PathBuf {
    if let Ok(real) = dir.canonicalize() {
        return real;
    }
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => match parent.canonicalize() {
            Ok(parent) => parent.join(name),
            Err(_) => absolute,
        },
        _ => absolute,
    }
}

fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |source| GitError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`, and not `.` or `..`.
fn is_component(value: &str) -> bool {
    let mut chars = value.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphanumeric())
        && value.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && value != "."
        && value != ".."
}

/// Refuses `path` when it is a symbolic link; a missing path is fine.
fn refuse_symlink(path: &Path) -> Result<(), GitError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(GitError::Symlink {
            path: path.to_owned(),
            target: std::fs::read_link(path).unwrap_or_default(),
        }),
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(io(path)(err)),
    }
}

/// The paths of `git apply --numstat -z`: `added\tdeleted\tpath\0`, or for a rename
/// `added\tdeleted\t\0old\0new\0`.
fn numstat_paths(out: &[u8]) -> Vec<String> {
    let mut paths = Vec::new();
    let mut fields = out.split(|&byte| byte == 0);
    while let Some(field) = fields.next() {
        let mut columns = field.splitn(3, |&byte| byte == b'\t');
        let (Some(_), Some(_), Some(path)) = (columns.next(), columns.next(), columns.next())
        else {
            continue;
        };
        if path.is_empty() {
            paths.extend(fields.next().map(lossy));
            paths.extend(fields.next().map(lossy));
        } else {
            paths.push(lossy(path));
        }
    }
    paths.retain(|path| !path.is_empty());
    paths.dedup();
    paths
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The files of a conflict: the unmerged paths (`ls-files --unmerged -z`: `mode id
/// stage\tpath\0`), else those of the patch that git's message names, else all of them.
fn conflicting(unmerged: &[u8], stderr: &str, files: Vec<String>) -> Vec<String> {
    let mut paths: Vec<String> = unmerged
        .split(|&byte| byte == 0)
        .filter_map(|entry| entry.splitn(2, |&byte| byte == b'\t').nth(1))
        .map(lossy)
        .collect();
    paths.dedup();
    if !paths.is_empty() {
        return paths;
    }
    let named: Vec<String> = files
        .iter()
        .filter(|file| {
            stderr.contains(&format!("{file}:")) || stderr.contains(&format!("'{file}'"))
        })
        .cloned()
        .collect();
    if named.is_empty() { files } else { named }
}

impl Git {
    /// Whether `patch` is already in `target`'s working tree: it applies cleanly in reverse.
    /// A driver that died between applying a task's patch and recording it finds out so, and
    /// does not apply it twice.
    pub fn is_applied(&self, target: &Path, patch: &[u8]) -> bool {
        let input = Input {
            stdin: patch.to_vec(),
            ..Input::default()
        };
        let check = args(["apply", "--check", "--reverse", "--binary", "-"]);
        matches!(self.run(target, &check, input), Ok(out) if out.exit.success() && !out.timed_out)
    }
}
