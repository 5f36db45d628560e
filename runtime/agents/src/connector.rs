//! The three agent CLIs behind one type: which binary, which arguments, which environment,
//! which event format; a run from request to [`Run`]; detection with `--version`.
//!
//! `Connector` is a struct over the [`Agent`] enum rather than a trait: the three differ only
//! in data (arguments, stdin, credential names) and in their event parser, and a closed enum
//! keeps a connector plain data that configuration and the store can name.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::output::Limits;
use crate::process::{self, DEFAULT_GRACE, Fate, Launch, Timing};
use crate::prompt::Prompt;
use crate::result::{self, Run, Transcript};
use crate::{Error, claude, codex, env, opencode, workdir};

/// The deadline of a run when the step gives none: long enough for a real coding task, short
/// enough that a hung agent does not hold a flow for good.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// How long `<binary> --version` may take.
pub const DETECT_DEADLINE: Duration = Duration::from_secs(5);

/// An agent CLI we know how to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    Claude,
    Codex,
    OpenCode,
}

impl Agent {
    pub const ALL: [Agent; 3] = [Agent::Claude, Agent::Codex, Agent::OpenCode];

    /// The name in specs and on the command line, which is also the binary's name.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::OpenCode => "opencode",
        }
    }

    /// The agent's own environment variables (credentials, where its login lives).
    pub fn own_env(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => claude::OWN_ENV,
            Agent::Codex => codex::OWN_ENV,
            Agent::OpenCode => opencode::OWN_ENV,
        }
    }

    fn final_event(self) -> &'static str {
        match self {
            Agent::Claude => claude::FINAL_EVENT,
            Agent::Codex => codex::FINAL_EVENT,
            Agent::OpenCode => opencode::FINAL_EVENT,
        }
    }
}

impl std::str::FromStr for Agent {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Agent::ALL
            .into_iter()
            .find(|agent| agent.name() == name)
            .ok_or_else(|| format!("unknown agent `{name}`: use claude, codex or opencode"))
    }
}

/// How to launch one agent CLI.
#[derive(Debug, Clone, PartialEq)]
pub struct Connector {
    pub agent: Agent,
    /// The binary: a path, or a name looked up on `PATH`; by default the agent's name.
    pub binary: PathBuf,
    /// The model to ask for (`--model` / `-m`); the CLI's default when `None`.
    pub model: Option<String>,
    /// Arguments the operator adds before the prompt (e.g. Claude's `--permission-mode`,
    /// Codex's `--sandbox workspace-write`): the defaults grant the agent nothing extra.
    pub extra_args: Vec<String>,
    /// Environment variables the operator lets through, by name, besides the allow-list.
    pub extra_env: Vec<String>,
    /// Between SIGTERM and SIGKILL when a run is ended.
    pub grace: Duration,
    pub limits: Limits,
}

/// One run to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub prompt: Prompt,
    /// Where the agent works: must be at or under `root`.
    pub cwd: PathBuf,
    /// The project root the working directory is confined to.
    pub root: PathBuf,
    /// Past it the run's process group is ended and the run is
    /// [`Outcome::TimedOut`](crate::Outcome::TimedOut).
    pub deadline: Duration,
}

impl Request {
    /// A request with the [`DEFAULT_DEADLINE`].
    pub fn new(prompt: Prompt, cwd: impl Into<PathBuf>, root: impl Into<PathBuf>) -> Self {
        Request {
            prompt,
            cwd: cwd.into(),
            root: root.into(),
            deadline: DEFAULT_DEADLINE,
        }
    }
}

/// What `<binary> --version` said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detection {
    pub agent: Agent,
    /// The binary found, when it was.
    pub path: Option<PathBuf>,
    #[serde(flatten)]
    pub status: DetectionStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DetectionStatus {
    /// It ran and printed a version (its first line).
    Found { version: String },
    /// No such binary.
    NotFound,
    /// It is there but `--version` failed, hung or printed nothing.
    Failed { reason: String },
}

impl Connector {
    /// The agent's CLI found on `PATH`, with the default limits.
    pub fn new(agent: Agent) -> Self {
        Connector {
            agent,
            binary: PathBuf::from(agent.name()),
            model: None,
            extra_args: Vec::new(),
            extra_env: Vec::new(),
            grace: DEFAULT_GRACE,
            limits: Limits::default(),
        }
    }

    /// The binary's path: as given when it names a directory, else found on this process's
    /// `PATH` (which the child also gets).
    pub fn resolve(&self) -> Result<PathBuf, Error> {
        resolve_on(&self.binary, std::env::var_os("PATH").as_deref()).ok_or_else(|| {
            Error::BinaryNotFound {
                name: self.binary.display().to_string(),
            }
        })
    }

    /// The child's environment: the allow-list applied to this process's environment.
    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        env::allowed_environment(std::env::vars_os(), self.agent.own_env(), &self.extra_env)
    }

    /// Runs the agent on `request` to its end: its answer, or why there is none.
    pub async fn run(&self, request: &Request, cancel: &CancellationToken) -> Result<Run, Error> {
        self.run_watched(request, cancel, &mut ()).await
    }

    /// [`Connector::run`], telling `watch` the process's pid and every line it prints.
    pub async fn run_watched(
        &self,
        request: &Request,
        cancel: &CancellationToken,
        watch: &mut dyn process::Watch,
    ) -> Result<Run, Error> {
        let program = self.resolve()?;
        let cwd = workdir::confine(&request.cwd, &request.root)?;
        let prompt = request.prompt.render()?;
        let model = self.model.as_deref();
        let (args, stdin) = match self.agent {
            Agent::Claude => (
                claude::args(model, &self.extra_args),
                claude::stdin(&prompt),
            ),
            Agent::Codex => (
                codex::args(model, &cwd, &self.extra_args),
                prompt.into_bytes(),
            ),
            Agent::OpenCode => (opencode::args(model, &self.extra_args), prompt.into_bytes()),
        };
        let mut parser = Parser::new(self.agent);
        let launch = Launch {
            program: &program,
            args: &args,
            env: self.environment(),
            cwd: &cwd,
            stdin,
        };
        let timing = Timing {
            deadline: request.deadline,
            grace: self.grace,
        };
        let watch = std::sync::Mutex::new(watch);
        let finished = process::run(
            launch,
            self.limits,
            timing,
            cancel,
            &mut |pid| {
                if let Ok(mut watch) = watch.lock() {
                    watch.spawned(pid);
                }
            },
            &mut |line| {
                if let Ok(event) = serde_json::from_str::<Value>(line) {
                    parser.observe(&event);
                }
                if let Ok(mut watch) = watch.lock() {
                    watch.line(line);
                }
            },
        )
        .await?;
        let mut transcript = parser.finish();
        if transcript.usage.model.is_none() {
            transcript.usage.model = self.model.clone();
        }
        let outcome = result::decide(
            finished.fate,
            &finished.exit,
            &transcript,
            self.agent.final_event(),
        );
        Ok(Run {
            agent: self.agent,
            outcome,
            text: transcript.text.unwrap_or_default(),
            usage: transcript.usage,
            exit: finished.exit,
            log: finished.log,
            stderr: finished.stderr,
            elapsed: finished.elapsed,
        })
    }

    /// Runs `<binary> --version` under the same allow-list, in its own process group, within
    /// [`DETECT_DEADLINE`].
    pub async fn detect(&self) -> Detection {
        let path = match self.resolve() {
            Ok(path) => path,
            Err(_) => {
                return Detection {
                    agent: self.agent,
                    path: None,
                    status: DetectionStatus::NotFound,
                };
            }
        };
        let cwd = std::env::temp_dir();
        let args = [OsString::from("--version")];
        let launch = Launch {
            program: &path,
            args: &args,
            env: self.environment(),
            cwd: &cwd,
            stdin: Vec::new(),
        };
        let timing = Timing {
            deadline: DETECT_DEADLINE,
            grace: Duration::from_millis(200),
        };
        let limits = Limits {
            log_bytes: 4096,
            stderr_bytes: 1024,
            line_bytes: 1024,
        };
        let mut version: Option<String> = None;
        let finished = process::run(
            launch,
            limits,
            timing,
            &CancellationToken::new(),
            &mut |_| {},
            &mut |line| {
                if version.is_none() && !line.trim().is_empty() {
                    version = Some(line.trim().to_owned());
                }
            },
        )
        .await;
        let status = match finished {
            Err(err) => DetectionStatus::Failed {
                reason: err.to_string(),
            },
            Ok(finished) if finished.fate == Fate::TimedOut => DetectionStatus::Failed {
                reason: format!(
                    "`--version` did not finish within {}s",
                    DETECT_DEADLINE.as_secs()
                ),
            },
            Ok(finished) if !finished.exit.success() => DetectionStatus::Failed {
                reason: format!(
                    "`--version` failed ({}): {}",
                    describe_exit(&finished.exit),
                    finished.stderr.text().trim()
                ),
            },
            Ok(_) => match version {
                Some(version) => DetectionStatus::Found { version },
                None => DetectionStatus::Failed {
                    reason: "`--version` printed nothing".to_owned(),
                },
            },
        };
        Detection {
            agent: self.agent,
            path: Some(path),
            status,
        }
    }
}

fn describe_exit(exit: &process::Exit) -> String {
    match (exit.code, exit.signal) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "no exit status".to_owned(),
    }
}

/// `binary` itself when it names a directory (`./claude`, `/opt/bin/claude`), else the first
/// executable file of that name in `path`.
fn resolve_on(binary: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    if binary.components().count() > 1 {
        return is_executable(binary).then(|| binary.to_owned());
    }
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(binary))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The event parser of each agent.
enum Parser {
    Claude(claude::Events),
    Codex(codex::Events),
    OpenCode(opencode::Events),
}

impl Parser {
    fn new(agent: Agent) -> Self {
        match agent {
            Agent::Claude => Parser::Claude(claude::Events::default()),
            Agent::Codex => Parser::Codex(codex::Events::default()),
            Agent::OpenCode => Parser::OpenCode(opencode::Events::default()),
        }
    }

    fn observe(&mut self, event: &Value) {
        match self {
            Parser::Claude(events) => events.observe(event),
            Parser::Codex(events) => events.observe(event),
            Parser::OpenCode(events) => events.observe(event),
        }
    }

    fn finish(self) -> Transcript {
        match self {
            Parser::Claude(events) => events.finish(),
            Parser::Codex(events) => events.finish(),
            Parser::OpenCode(events) => events.finish(),
        }
    }
}
