//! One child process (an agent, or a bounded command of [`crate::run_command`]): spawned in
//! its own process group, given its stdin, read as it runs (as lines, or as raw bytes), and
//! ended with its whole group at the deadline, on cancel, or when it exits.
//!
//! How the group is ended without ever signalling a recycled pid: the group's id is the
//! leader's pid, and Linux does not reuse a pid while any process, a zombie included, still
//! holds it as its pid or process group. So the leader is never reaped until its group has been
//! signalled for the last time. A pidfd tells us that the leader exited without reaping it
//! (it becomes readable); then the group is signalled, and only then is the leader reaped.
//! On kernels without pidfd (before Linux 5.3) the fallback waits on the leader, which reaps
//! it, and signals the group afterwards: if every member of the group had also gone by then,
//! the id could in principle have been reused by a new group. That window is documented, not
//! closed.
//!
//! The order at the end of every run: past the deadline or on cancel, SIGTERM to the group,
//! [`DEFAULT_GRACE`] (or the caller's grace), SIGKILL to the group; when the agent exits by
//! itself, SIGKILL at once to whatever it left behind in its group. Then stdout and stderr are
//! drained for at most [`DRAIN`] (a process that escaped the group could hold them open), and
//! the leader is reaped.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, PidfdFlags, Signal};
use serde::Serialize;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::output::{EventLog, Limits, Line, Lines, Tail};

/// How long an agent has between SIGTERM and SIGKILL to save its work and exit.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How long the pipes are drained once the group is gone.
const DRAIN: Duration = Duration::from_secs(1);

/// How the agent's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Exit {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl From<ExitStatus> for Exit {
    fn from(status: ExitStatus) -> Self {
        Exit {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

/// Why the wait for the agent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    Exited,
    TimedOut,
    Cancelled,
}

/// A process to start: an argument vector, never a shell string.
pub(crate) struct Launch<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub env: Vec<(OsString, OsString)>,
    pub cwd: &'a Path,
    pub stdin: Vec<u8>,
}

/// The deadline of a run and the grace between SIGTERM and SIGKILL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub deadline: Duration,
    pub grace: Duration,
}

/// A run's process once it is gone, with what was kept of its output.
pub(crate) struct Finished {
    pub fate: Fate,
    pub exit: Exit,
    pub log: EventLog,
    pub stderr: Tail,
    pub elapsed: Duration,
}

/// What a caller sees of a run while it goes: the group leader's pid once it started, and
/// every whole stdout line as it arrives (to record where a run is, and show its live tail).
/// `spawned` is called before the agent is given its stdin: a caller that records the pid
/// there knows of the process before the agent can act on its prompt.
pub trait Watch: Send {
    fn spawned(&mut self, _pid: u32) {}
    fn line(&mut self, _line: &str) {}
}

/// Watches nothing.
impl Watch for () {}

/// A run's process once it is gone, with the tail of its stderr (stdout went to the caller).
pub(crate) struct Ended {
    pub fate: Fate,
    pub exit: Exit,
    pub stderr: Tail,
    pub elapsed: Duration,
}

/// Runs `launch` to its end; `on_spawn` sees the leader's pid, `on_line` every whole stdout
/// line as it arrives.
pub(crate) async fn run(
    launch: Launch<'_>,
    limits: Limits,
    timing: Timing,
    cancel: &CancellationToken,
    on_spawn: &mut (dyn FnMut(u32) + Send),
    on_line: &mut (dyn FnMut(&str) + Send),
) -> Result<Finished, Error> {
    let mut log = EventLog::new(limits.log_bytes);
    let mut lines = Lines::new(limits.line_bytes);
    let ended = run_bytes(
        launch,
        limits.stderr_bytes,
        timing,
        cancel,
        on_spawn,
        &mut |chunk| lines.feed(chunk, &mut |line| keep(line, &mut log, on_line)),
    )
    .await?;
    lines.end(&mut |line| keep(line, &mut log, on_line));
    Ok(Finished {
        fate: ended.fate,
        exit: ended.exit,
        log,
        stderr: ended.stderr,
        elapsed: ended.elapsed,
    })
}

/// Runs `launch` to its end; `on_spawn` sees the leader's pid, `on_stdout` every chunk of
/// stdout as read, raw bytes (no line splitting, nothing dropped), and stderr's last
/// `stderr_bytes` are kept.
pub(crate) async fn run_bytes(
    launch: Launch<'_>,
    stderr_bytes: usize,
    timing: Timing,
    cancel: &CancellationToken,
    on_spawn: &mut (dyn FnMut(u32) + Send),
    on_stdout: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<Ended, Error> {
    let started = Instant::now();
    let mut command = Command::new(launch.program);
    command
        .args(launch.args)
        .env_clear()
        .envs(launch.env)
        .current_dir(launch.cwd)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = spawn(&mut command).map_err(|source| Error::Spawn {
        program: launch.program.to_owned(),
        source,
    })?;
    // Declared after `child`, so dropped before it: a run dropped half-way kills the group
    // while the leader is still unreaped.
    let mut group = Group::new(&child);
    if let Some(pid) = child.id() {
        on_spawn(pid);
    }

    let mut tail = Tail::new(stderr_bytes);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let input = launch.stdin;
    let mut reading = Box::pin(async {
        let write = async move {
            if let Some(mut stdin) = stdin {
                // An agent that exits without reading its prompt closes the pipe: not our error.
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            }
        };
        let out = read_chunks(stdout, |chunk| on_stdout(chunk));
        let err = read_chunks(stderr, |chunk| tail.push(chunk));
        tokio::join!(write, out, err);
    });
    let mut read = false;

    let deadline = tokio::time::Instant::now() + timing.deadline;
    let fate = loop {
        tokio::select! {
            () = &mut reading, if !read => read = true,
            () = group.exited(&mut child) => break Fate::Exited,
            () = tokio::time::sleep_until(deadline) => break Fate::TimedOut,
            () = cancel.cancelled() => break Fate::Cancelled,
        }
    };
    match fate {
        Fate::Exited => group.signal(Signal::KILL),
        Fate::TimedOut | Fate::Cancelled => {
            group.signal(Signal::TERM);
            let grace = tokio::time::Instant::now() + timing.grace;
            loop {
                tokio::select! {
                    () = &mut reading, if !read => read = true,
                    () = group.exited(&mut child) => break,
                    () = tokio::time::sleep_until(grace) => break,
                }
            }
            group.signal(Signal::KILL);
        }
    }
    if !read {
        let _ = tokio::time::timeout(DRAIN, &mut reading).await;
    }
    drop(reading);
    let exit = group.reap(&mut child).await;
    Ok(Ended {
        fate,
        exit,
        stderr: tail,
        elapsed: started.elapsed(),
    })
}

fn keep(line: Line, log: &mut EventLog, on_line: &mut (dyn FnMut(&str) + Send)) {
    match line {
        Line::Whole(text) => {
            on_line(&text);
            log.push(text);
        }
        Line::Oversized(len) => log.push_oversized(len),
    }
}

async fn read_chunks<R: AsyncRead + Unpin>(pipe: Option<R>, mut each: impl FnMut(&[u8])) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0_u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => each(buf.get(..n).unwrap_or_default()),
        }
    }
}

/// Spawns, retrying briefly while the file is busy: a script written a moment ago by another
/// thread of this process may still be open for writing in a child forked meanwhile (ETXTBSY).
fn spawn(command: &mut Command) -> std::io::Result<Child> {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(err)
                if err.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error())
                    && tries < 5 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// The agent's process group, signalled only while its leader is unreaped (see the module doc).
struct Group {
    pid: Option<Pid>,
    pidfd: Option<AsyncFd<OwnedFd>>,
    /// The leader's status once the fallback (no pidfd) reaped it.
    status: Option<ExitStatus>,
    /// Whether the leader has been reaped: from then on, `Drop` leaves the group alone.
    reaped: bool,
}

impl Group {
    fn new(child: &Child) -> Self {
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        let pidfd = pid
            .and_then(|pid| rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok())
            .and_then(watch);
        Group {
            pid,
            pidfd,
            status: None,
            reaped: false,
        }
    }

    /// Resolves when the leader has exited; with a pidfd, without reaping it.
    async fn exited(&mut self, child: &mut Child) {
        if let Some(pidfd) = &self.pidfd {
            let _ = pidfd.readable().await;
            return;
        }
        if self.status.is_none() {
            match child.wait().await {
                Ok(status) => {
                    self.status = Some(status);
                    self.reaped = true;
                }
                // The status cannot be read: the process is not ours to wait on any more.
                Err(_) => std::future::pending::<()>().await,
            }
        }
    }

    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid {
            // ESRCH: the group is already empty, which is what we want.
            let _ = rustix::process::kill_process_group(pid, signal);
        }
    }

    /// Reaps the leader (after its group was signalled for the last time).
    async fn reap(&mut self, child: &mut Child) -> Exit {
        let status = match self.status {
            Some(status) => Ok(status),
            None => child.wait().await,
        };
        self.reaped = true;
        match status {
            Ok(status) => status.into(),
            Err(_) => Exit {
                code: None,
                signal: None,
            },
        }
    }
}

/// The pidfd registered with the reactor (readable once the process exited); `None` where the
/// runtime has no IO driver, which falls back to waiting on the child.
// Tokio 1.54 deprecates the safe `AsyncFd::new` because an arbitrary `AsRawFd` type may change
// or close its descriptor; its replacement, `register`, is `unsafe`, which the workspace forbids.
// An `OwnedFd` owned by the `AsyncFd` is exactly what `register` asks for: open, unchanged, for
// the `AsyncFd`'s whole life.
#[allow(deprecated)]
fn watch(pidfd: OwnedFd) -> Option<AsyncFd<OwnedFd>> {
    AsyncFd::new(pidfd).ok()
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.reaped {
            self.signal(Signal::KILL);
        }
    }
}

/// When process `pid` started, in clock ticks since boot (field 22 of `/proc/<pid>/stat`):
/// with the pid, what names one process for ever. `None` when it is gone (or no `/proc`).
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = stat.get(stat.rfind(')')? + 1..)?;
    after.split_whitespace().nth(19)?.parse().ok()
}

/// What [`end_group`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupEnd {
    /// The leader was gone (or is another process now): nothing was signalled.
    AlreadyGone,
    /// The group was signalled (TERM, then KILL after the grace if the leader lingered).
    Ended,
}

/// Ends the process group of a run another process launched (a driver that died): only if
/// `pid` still is the process that started at `start` and leads its group, so a recycled pid
/// is never signalled. TERM, up to `grace` for the leader to go, then KILL.
pub fn end_group(pid: u32, start: u64, grace: Duration) -> GroupEnd {
    let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return GroupEnd::AlreadyGone;
    };
    let same = || process_start(pid) == Some(start);
    let leads = rustix::process::getpgid(Some(raw)).is_ok_and(|group| group == raw);
    if !same() || !leads {
        return GroupEnd::AlreadyGone;
    }
    let _ = rustix::process::kill_process_group(raw, Signal::TERM);
    let until = Instant::now() + grace;
    while Instant::now() < until && same() && !is_zombie(pid) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if same() {
        let _ = rustix::process::kill_process_group(raw, Signal::KILL);
    }
    GroupEnd::Ended
}

/// Whether `pid` has exited but not been reaped (its parent is gone or slow).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.get(stat.rfind(')')? + 1..)?.to_owned();
            after.split_whitespace().next().map(|state| state == "Z")
        })
        .unwrap_or(false)
}
