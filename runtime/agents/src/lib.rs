//! Agent connectors: Claude Code, Codex and OpenCode launched as untrusted processes.
//!
//! A [`Connector`] takes a [`Request`] (the [`Prompt`], a working directory confined under a
//! root, a deadline) and returns a [`Run`]: what the agent answered, read from its CLI's event
//! stream, and how the process ended. The modules read in the order a run goes through them:
//!
//! - `connector`: the three CLIs behind one type, their binaries, detection (`--version`);
//! - `claude`, `codex`, `opencode`: each CLI's command line, stdin and event format;
//! - `prompt`: what the agent is told (intent, inputs, the contract, earlier violations);
//! - `env`: the environment allow-list (nothing else of the parent reaches a child);
//! - `workdir`: the working directory, canonicalised and refused outside its root;
//! - `process`: spawn in a process group, a deadline, cancellation, the group ended;
//! - `output`: stdout and stderr kept within fixed bounds however much the agent prints;
//! - `result`: the run's outcome, the JSON object of the final text, usage;
//! - `command`: [`run_command`], any bounded command (git, a check) for synchronous callers,
//!   through the same `process` code, its stdout kept as raw bytes.
//!
//! Invariants: a child sees only the allow-listed environment; every run has a deadline and
//! ends with its whole process group gone; memory per run is bounded by [`Limits`]; a run with
//! no JSON object is [`Outcome::NoJson`], never an empty object.

mod claude;
mod codex;
mod command;
mod connector;
mod env;
mod opencode;
mod output;
mod process;
mod prompt;
mod result;
mod workdir;

pub use command::{CommandOutput, CommandSpec, run_command};
pub use connector::{
    Agent, Connector, DEFAULT_DEADLINE, DETECT_DEADLINE, Detection, DetectionStatus, Request,
};
pub use env::{BASE_ALLOWED, allowed_environment};
pub use output::{EventLog, Limits, Tail};
pub use process::{DEFAULT_GRACE, Exit, GroupEnd, Watch, end_group, process_start};
pub use prompt::Prompt;
pub use result::{Outcome, Run, Usage, extract_object};
pub use workdir::confine;

/// What keeps a run from starting. How a started run ended is its [`Outcome`], not an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{name}` was not found on PATH: install it, or give the connector the binary's path")]
    BinaryNotFound { name: String },
    #[error("cannot use the working directory `{path}`: {source}; give an existing directory")]
    WorkingDirectory {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot use the root `{path}`: {source}; give an existing directory")]
    Root {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the working directory `{cwd}` is not under the root `{root}`: give a directory inside the project root"
    )]
    OutsideRoot {
        cwd: std::path::PathBuf,
        root: std::path::PathBuf,
    },
    #[error("cannot start `{program}`: {source}; check that it is an executable file")]
    Spawn {
        program: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode the prompt: {0}; the inputs and schema must be JSON")]
    Prompt(#[from] serde_json::Error),
    #[error("cannot start the event loop that runs a command: {0}")]
    Runtime(std::io::Error),
}
