//! A bounded command for synchronous callers: git, a verification command. It takes a
//! [`CommandSpec`] (an argument vector, never a shell string; exactly the environment given;
//! a deadline) and returns a [`CommandOutput`] with the raw bytes of its output.
//!
//! The child goes through the same `process` code as an agent: its own process group, the
//! deadline, SIGTERM, the grace, SIGKILL to the whole group, a pidfd so that no recycled pid is
//! signalled. Its stdout is read as raw bytes (a diff is binary-safe text that must come back
//! exactly), and each stream keeps only its last `output_bytes`.
//!
//! Invariants: the child sees only `env`; when [`run_command`] returns, the child's whole
//! process group is gone (or was sent SIGKILL); memory is bounded by twice `output_bytes`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::output::Tail;
use crate::process::{self, Exit, Fate, Launch, Timing};

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec<'a> {
    /// A path, or a bare name looked up on the `PATH` of `env` as [`std::process::Command`]
    /// does (without `PATH` in `env`, the C library's default path).
    pub program: &'a Path,
    pub args: &'a [OsString],
    /// The child's whole environment: nothing of this process's is inherited.
    pub env: Vec<(OsString, OsString)>,
    /// Must be an existing directory.
    pub cwd: &'a Path,
    /// Written to the child's stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Past it the process group gets SIGTERM, then SIGKILL after `grace`.
    pub deadline: Duration,
    pub grace: Duration,
    /// How much of stdout, and of stderr, is kept: the last bytes of each.
    pub output_bytes: usize,
}

/// How a command ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    pub exit: Exit,
    /// The deadline passed and the command's group was ended.
    pub timed_out: bool,
    /// The last `output_bytes` of stdout, exactly as printed.
    pub stdout: Vec<u8>,
    /// The last `output_bytes` of stderr.
    pub stderr: Vec<u8>,
    /// stdout was longer than `output_bytes`: its beginning is missing.
    pub stdout_truncated: bool,
    /// stderr was longer than `output_bytes`.
    pub stderr_truncated: bool,
    pub elapsed: Duration,
}

impl CommandOutput {
    /// Whether the command exited by itself with status 0.
    pub fn success(&self) -> bool {
        !self.timed_out && self.exit.success()
    }
}

/// Runs `spec` to its end and blocks until then. It drives the child on a current-thread
/// tokio runtime of its own; called from inside a tokio runtime (where a nested runtime may
/// not block), it does so on a thread of its own instead, and still blocks the caller.
///
/// Errors are only what keeps the command from starting (no such program, a bad working
/// directory, no runtime); how it ended is in the [`CommandOutput`].
pub fn run_command(spec: CommandSpec<'_>) -> Result<CommandOutput, Error> {
    if !spec.cwd.is_dir() {
        return Err(Error::WorkingDirectory {
            path: spec.cwd.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    if tokio::runtime::Handle::try_current().is_err() {
        return block_on(spec);
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("stratum-command".to_owned())
            .spawn_scoped(scope, || block_on(spec))
            .map_err(Error::Runtime)?
            .join()
            .unwrap_or_else(|_| {
                Err(Error::Runtime(std::io::Error::other(
                    "the command's thread panicked",
                )))
            })
    })
}

fn block_on(spec: CommandSpec<'_>) -> Result<CommandOutput, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(run(spec))
}

async fn run(spec: CommandSpec<'_>) -> Result<CommandOutput, Error> {
    let program = on_path(spec.program, &spec.env);
    let launch = Launch {
        program: &program,
        args: spec.args,
        env: spec.env,
        cwd: spec.cwd,
        stdin: spec.stdin,
    };
    let timing = Timing {
        deadline: spec.deadline,
        grace: spec.grace,
    };
    let mut stdout = Tail::new(spec.output_bytes);
    let ended = process::run_bytes(
        launch,
        spec.output_bytes,
        timing,
        &CancellationToken::new(),
        &mut |_| {},
        &mut |chunk| stdout.push(chunk),
    )
    .await?;
    Ok(CommandOutput {
        exit: ended.exit,
        timed_out: ended.fate == Fate::TimedOut,
        stdout: stdout.to_bytes(),
        stderr: ended.stderr.to_bytes(),
        stdout_truncated: stdout.truncated(),
        stderr_truncated: ended.stderr.truncated(),
        elapsed: ended.elapsed,
    })
}

/// `program` as the child's own `PATH` search would find it: a bare name looked up here on the
/// `PATH` of `env`. The standard library starts a child with `posix_spawn` (no copy of this
/// process's page tables) only when it need not search a `PATH` given in the child's
/// environment itself; otherwise it forks, which costs a millisecond or more per git command
/// in a large process. A name this cannot settle exactly as `execvp` would (no `PATH` in
/// `env`, an empty or relative entry before a match, no match) is left as it is, for the
/// child's own search.
fn on_path(program: &Path, env: &[(OsString, OsString)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bare = program.components().count() == 1 && !program.is_absolute();
    let path = env.iter().rev().find(|(name, _)| name == "PATH");
    let (true, Some((_, path))) = (bare, path) else {
        return program.to_owned();
    };
    for dir in std::env::split_paths(path) {
        if !dir.is_absolute() {
            break;
        }
        let candidate = dir.join(program);
        let executable = std::fs::metadata(&candidate)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
        if executable {
            return candidate;
        }
    }
    program.to_owned()
}
