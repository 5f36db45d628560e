//! `stratum-mcp`: the Stratum runtime for coding agents. With no sub-command it is the MCP
//! server on standard input and output; its sub-commands are the operator's: query flows,
//! resolve gates, watch, prune, validate and compile specs, explain the runtime's differences.
//! Logs go to standard error (or `--log-file`), never to standard output, which is the
//! protocol.

mod agents;
mod doctor;
mod operator;
mod print;
mod setup;
mod unattended;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use stratum_mcp::cli::gate::{Decision, ResolvedBy};
use stratum_mcp::location::Location;
use stratum_mcp::{StoreChoice, StratumServer};
use stratum_runtime::Config;
use stratum_store_sqlite::{SqliteOptions, Synchronous};

const AFTER_HELP: &str = "\
With no command, stratum-mcp is the MCP server, on standard input and output. Register it with
an agent:
  Claude Code:  claude mcp add stratum -- stratum-mcp
  Codex:        [mcp_servers.stratum] command = \"stratum-mcp\"  (in ~/.codex/config.toml)

Examples:
  stratum-mcp query flows
  stratum-mcp query gates --json
  stratum-mcp gate approve 3f2a…-…  review --note \"looks good\"
  stratum-mcp watch
  stratum-mcp validate specs/
  stratum-mcp compile tasks/ --output build.stratum.yaml

State is kept in $STRATUM_HOME/stratum.db (default ~/.stratum/stratum.db), created on first use;
every server and command on one machine may share it, at the same time. A team shares one
PostgreSQL database instead: STRATUM_DATABASE_URL=postgres://USER@HOST:PORT/DATABASE (or
--database-url) for every server and command; copy a machine's state into it with
migrate-store.

Over HTTP, for agents on other machines and people in a browser: stratum-mcp token create --name
NAME, then stratum-mcp serve (MCP at http://127.0.0.1:7777/mcp, sign-in at /signin).

Exit status: 0 on success; 1 for an unknown flow or token, or a spec with errors; 2 for a gate
that is not waiting (a conflict), a duplicate token, or a usage error; 3 when the state database
cannot be used. The server exits 0 when its client closes the connection.";

/// The web console's address, for the link an `await_gate` dispatch gives people.
const CONSOLE_URL_ENV: &str = "STRATUM_CONSOLE_URL";

/// Runs Stratum flows for coding agents over MCP (stdio), and lets operators see and steer them.
#[derive(Parser)]
#[command(name = "stratum-mcp", version, about, after_help = AFTER_HELP)]
struct Cli {
    /// The state database (default: $STRATUM_HOME/stratum.db, or ~/.stratum/stratum.db).
    #[arg(long, value_name = "PATH", env = "STRATUM_DB", global = true)]
    db: Option<PathBuf>,
    /// The state database as a URL: postgres://USER@HOST:PORT/DATABASE for a team's shared
    /// PostgreSQL (over TLS: ?sslmode=verify-full, with &sslrootcert=CA.pem for a private
    /// authority), or sqlite:PATH (instead of --db).
    #[arg(
        long,
        value_name = "URL",
        env = "STRATUM_DATABASE_URL",
        global = true,
        hide_env_values = true
    )]
    database_url: Option<String>,
    /// The MCP server's: `normal` survives any crash of the process; `full` also a power loss,
    /// at about three times the cost of each call (the commands that write take it too).
    #[arg(long, value_enum, default_value_t = Durability::Normal)]
    synchronous: Durability,
    /// The MCP server's: the directory `file_exists` and `file_contains` in `ensure`
    /// expressions are confined to (default: the current directory; `serve` takes it too).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The servers' config file: `[gates] policy` and per gate function `[gates.functions.NAME]`
    /// approval rules (default: $STRATUM_HOME/config.toml when it exists); read by the MCP
    /// server, `serve` and `gate`.
    #[arg(long, value_name = "PATH", env = "STRATUM_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Append logs to this file instead of standard error.
    #[arg(long, value_name = "PATH", env = "STRATUM_LOG_FILE", global = true)]
    log_file: Option<PathBuf>,
    /// What to log: `error`, `warn`, `info`, `debug` or `trace` (or a tracing filter).
    #[arg(
        long,
        value_name = "FILTER",
        env = "STRATUM_LOG",
        default_value = "warn",
        global = true
    )]
    log: String,
    /// How log lines look: `text` for people, `json` (one object a line, the fields a shipper
    /// indexes: level, target, flow_id, step_id, tool, …) for log shippers.
    #[arg(
        long,
        value_enum,
        env = "STRATUM_LOG_FORMAT",
        default_value_t = LogFormat::Text,
        global = true
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Durability {
    Normal,
    Full,
}

/// The options of a command that writes to the state database (a read takes none of them).
#[derive(clap::Args)]
struct Writes {
    /// `normal` survives any crash of the process; `full` also a power loss, at about three
    /// times the cost of each write (SQLite only)
    #[arg(long, value_enum)]
    synchronous: Option<Durability>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a flow unattended: an agent process (Claude Code, Codex, OpenCode) for each step
    #[command(
        after_help = "Examples:\n  stratum-mcp run review.stratum.yaml --input file=src/lib.rs\n  stratum-mcp run review.stratum.yaml --flow triage --agent codex --model gpt-5\n  stratum-mcp run review.stratum.yaml --detach   # a worker drives it\n\nEach function or inline step is handed to the agent the step names (else --agent) with its intent, inputs and output contract; its answer goes through the checks an agent's stratum_step_done meets, and a rejected answer is retried with the violations. At a gate the run waits for a person (stratum-mcp gate, the console, or the agent's client). Ctrl-C once stops after the step under way, twice at once; the flow stays enrolled for a worker.\n\nExit status: 0 when the flow completes; 1 when it fails, is killed or stops at a step kind no agent runs; 130 when interrupted."
    )]
    Run {
        /// The spec file
        spec: PathBuf,
        /// The flow to run (default: the spec's entry flow)
        #[arg(long, value_name = "FLOW")]
        flow: Option<String>,
        /// An input, NAME=VALUE; a VALUE that is JSON is read as JSON (repeatable)
        #[arg(long = "input", value_name = "NAME=VALUE")]
        inputs: Vec<String>,
        /// Enroll the flow and exit: a worker drives it
        #[arg(long)]
        detach: bool,
        /// Print JSON even on a terminal
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        agents: unattended::AgentOptions,
    },
    /// Drive enrolled flows from the store's queue until SIGTERM (the step under way finishes)
    #[command(
        after_help = "Examples:\n  stratum-mcp worker\n  STRATUM_DATABASE_URL=postgres://stratum@db/stratum stratum-mcp worker --concurrency 4\n\nWorkers on one machine or many, on one store, take the flows `run --detach` and stratum_flow_run_bg enrolled, the longest-waiting first, one step per turn. Each flow has one driver at a time (a lease, renewed while it works); a worker killed mid-step loses its flows when its lease expires, and another takes them over and runs the step again. SIGTERM or SIGINT once: finish the step under way, then exit; twice: end the agent runs and hand their flows back now.\n\nExit status: 0 once stopped; 2 for a usage error; 3 when the state database cannot be used."
    )]
    Worker {
        /// How many flows this process drives at once
        #[arg(long, value_name = "N", default_value_t = 1)]
        concurrency: usize,
        #[command(flatten)]
        agents: unattended::AgentOptions,
    },
    /// Read flows and gates from the state database
    #[command(
        after_help = "Examples:\n  stratum-mcp query flows\n  stratum-mcp query flow 3f2a9c1e-…\n  stratum-mcp query gates --json | jq '.[].flow_id'\n  stratum-mcp query gates 3f2a9c1e review\n  stratum-mcp query gates --context\n\nOn a terminal the answer is a table (a gate's context with a flow, or --context); piped, or with --json, it is JSON in the reference's version-1 contracts (schemas: runtime/cli/schemas/query-*.schema.json).\n\nExit status: 0 on success, 1 for an unknown flow, 3 when the state database cannot be used."
    )]
    Query {
        #[command(subcommand)]
        what: Query,
        /// Print JSON even on a terminal
        #[arg(long, global = true)]
        json: bool,
    },
    /// Approve, revise or kill the gate a flow waits at
    #[command(
        after_help = "Examples:\n  stratum-mcp gate approve 3f2a9c1e-… review --note \"ship it\"\n  stratum-mcp gate revise 3f2a9c1e-… review --note \"add tests\"\n  stratum-mcp gate kill 3f2a9c1e-… review --note \"not this way\"\n\nA server running the flow sees the decision on its next call. The answer is JSON (schema: runtime/cli/schemas/gate.schema.json), or one line on a terminal.\n\nYou decide as the operating-system user running the command (`os:<user>`), which the gate function's approval rules in the config file judge (`[gates.functions.NAME]`: approvers, min_approvals, self_approval); an approval that is not yet the last one needed is recorded and the gate keeps waiting.\n\nExit status: 0 when the gate was resolved or the approval recorded, 1 for an unknown flow, 2 when the flow does not wait at that gate (another step is current, someone resolved it first, or the flow has finished), when the approval rules refuse the decision, or when the config file cannot be used, 3 when the state database cannot be used."
    )]
    Gate {
        /// What to decide (`kill` ends the flow, or runs its `on_kill` step; `reject` is accepted for `kill`)
        #[arg(value_enum)]
        decision: Decision,
        /// The flow's id
        flow: String,
        /// The gate step's id
        step: String,
        /// Why, recorded as the gate's rationale
        #[arg(long, value_name = "TEXT", default_value = "")]
        note: String,
        /// Who decided, as the audit records it
        #[arg(long, value_enum, default_value_t = ResolvedBy::Human)]
        resolved_by: ResolvedBy,
        /// The value approved with, as JSON, when the gate's function declares `output`
        /// (checked against that contract; it becomes the step's output)
        #[arg(long, value_name = "JSON", value_parser = parse_json)]
        value: Option<serde_json::Value>,
        /// Print JSON even on a terminal
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        writes: Writes,
    },
    /// Serve the MCP tools over HTTP (Streamable HTTP at /mcp) and the browser sign-in, to holders of an access token
    #[command(
        after_help = "Examples:\n  stratum-mcp token create --name alice && stratum-mcp serve\n  stratum-mcp serve --listen 0.0.0.0:7777 --allowed-host stratum.example.com --secure-cookies\n\nEvery request needs `Authorization: Bearer <token>` or a browser session opened at /signin with a token (`stratum-mcp token create`); a read-only token can call only the read-only tools. On a loopback address serve starts without any token (and says how to make one); on any other address it refuses to start until one exists. TLS is left to a reverse proxy (see the README). A connection whose request headers take over --header-timeout, or that idles over --idle-timeout with no request in progress, is closed; beyond --max-connections, new connections wait unaccepted. SIGTERM or Ctrl-C: stop accepting, finish the calls in flight, exit.\n\nExit status: 0 after a shutdown signal, 1 when the address cannot be listened on, 2 on a usage error or a non-loopback address without any token, 3 when the state database cannot be used."
    )]
    Serve {
        /// The address to listen on (port 0: any free port, printed at start)
        #[arg(long, value_name = "ADDR", default_value = stratum_serve::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// A `Host` clients reach the server by (a name, or name:port), besides the loopback
        /// names and the address listened on; repeatable; `*` accepts any
        #[arg(long, value_name = "HOST")]
        allowed_host: Vec<String>,
        /// Mark the session cookie Secure (sent over HTTPS only): behind a TLS reverse proxy
        #[arg(long)]
        secure_cookies: bool,
        /// Also serve GET /metrics (Prometheus) on this address, without a token, for a
        /// scraper on a private network (on --listen it needs a token, read-only will do)
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<std::net::SocketAddr>,
        /// Close a connection whose request headers are not complete this many seconds after
        /// their first byte
        #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        header_timeout: u64,
        /// Close a connection with no request in progress and nothing sent for this many
        /// seconds (a request being answered is never cut)
        #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        idle_timeout: u64,
        /// Hold at most this many connections at once; more wait, unaccepted, until one closes
        #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=65536))]
        max_connections: u64,
        /// The directory `file_exists` and `file_contains` in `ensure` expressions, and the
        /// authoring tools, are confined to (default: the current directory)
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Also drive enrolled flows in this process: N worker threads (as `stratum-mcp
        /// worker --concurrency N`, with the agent CLIs found on PATH); on shutdown their agent
        /// runs are ended and their flows handed back
        #[arg(long, value_name = "N", default_value_t = 0)]
        workers: usize,
        #[command(flatten)]
        writes: Writes,
    },
    /// Create, list and revoke the access tokens of `serve`
    #[command(
        after_help = "Examples:\n  stratum-mcp token create --name ci-agent\n  stratum-mcp token create --name dashboard --read-only\n  stratum-mcp token list\n  stratum-mcp token revoke ci-agent\n\nThe secret is printed once, by create, and stored only as its SHA-256. A read-only token can call the read-only MCP tools and see pages, and change nothing. A revoked token, and every browser session opened with it, is refused from its next request on. JSON with --json or when piped (schemas: runtime/cli/schemas/token-*.schema.json).\n\nExit status: 0 on success, 1 for an unknown name (revoke), 2 for an invalid or duplicate name, 3 when the state database cannot be used."
    )]
    Token {
        #[command(subcommand)]
        what: TokenCommand,
        /// Print JSON even on a terminal
        #[arg(long, global = true)]
        json: bool,
    },
    /// Follow flows as they move, one line per event, until interrupted
    #[command(
        after_help = "Examples:\n  stratum-mcp watch\n  stratum-mcp watch 3f2a9c1e-…\n  stratum-mcp watch --json | jq -c 'select(.kind == \"gate_waiting\")'\n\nEvents: started, dispatched, done, refused (an attempt failed its checks), failed, skipped, gate waiting, gate resolved, finished. Watching one flow (and its sub-flows) stops when it has finished.\n\nExit status: 0 when interrupted or the watched flow finished, 1 for an unknown flow, 3 when the state database cannot be used."
    )]
    Watch {
        /// Watch only this flow and its sub-flows
        flow: Option<String>,
        /// How often to look, in milliseconds
        #[arg(long, value_name = "MS", default_value_t = 250)]
        interval: u64,
        /// One JSON object per line (schema: runtime/cli/schemas/watch-event.schema.json)
        #[arg(long)]
        json: bool,
    },
    /// Remove finished flows from the state database (never a running one)
    #[command(
        after_help = "Examples:\n  stratum-mcp prune --older-than 30d\n  stratum-mcp prune --older-than 0s\n\nFinished flows are kept so that audits work after the end; prune removes those that finished longer ago than --older-than, each with its sub-flows, and the plans no flow left runs on. A flow with a running sub-flow (or parent) is kept.\n\nExit status: 0 on success, 3 when the state database cannot be used."
    )]
    Prune {
        /// Remove flows that finished longer ago than this (`7d`, `12h`, `30m`, `0s`)
        #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = stratum_mcp::cli::prune::parse_duration)]
        older_than: u64,
        /// Print JSON even on a terminal
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        writes: Writes,
    },
    /// Copy every flow, plan and audit record from one state database into another, empty one
    #[command(
        after_help = "Examples:\n  stratum-mcp migrate-store --from sqlite:$HOME/.stratum/stratum.db --to postgres://stratum@db.internal/stratum\n  stratum-mcp migrate-store --from postgres://stratum@db.internal/stratum --to sqlite:backup.db\n\nThe target must hold no flow and no plan. The copy is one transaction of the target; then the target is read back and verified: as many rows in every table as the source, and the same SHA-256 over all of them. Stop the servers that write to the source first: a flow that moves during the copy is copied as it stood when the copy began.\n\nExit status: 0 when the copy is verified, 1 when the target read back differs from the source, 2 on a usage error or a target that is not empty, 3 when either database cannot be used."
    )]
    MigrateStore {
        /// The state to copy: sqlite:PATH or postgres://USER@HOST:PORT/DATABASE
        #[arg(long, value_name = "URL")]
        from: String,
        /// Where to copy it (empty): sqlite:PATH or postgres://USER@HOST:PORT/DATABASE
        #[arg(long, value_name = "URL")]
        to: String,
        /// Print JSON even on a terminal
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        writes: Writes,
    },
    /// Check specs, as `stratumc check` does
    #[command(
        after_help = "Examples:\n  stratum-mcp validate examples/sentiment.stratum.yaml\n  stratum-mcp validate specs/ --format short\n\nExit status: 0 when no spec has errors, 1 when one has (or has warnings, with --deny-warnings), 2 on a usage or I/O error."
    )]
    Validate(stratum_compiler::cli::CheckArgs),
    /// Compile spec-kit task files (tasks/*.md) into a spec
    #[command(
        after_help = "Examples:\n  stratum-mcp compile tasks/\n  stratum-mcp compile tasks/ --output build.stratum.yaml --flow build\n\nThe spec is checked before it is written; one with errors is not written.\n\nExit status: 0 when the spec was written, 1 when the tasks cannot be compiled or the spec has errors, 2 on a usage or I/O error."
    )]
    Compile {
        /// The directory of task files
        tasks_dir: PathBuf,
        /// Where to write the spec (default: standard output)
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// The flow's name
        #[arg(long, value_name = "NAME", default_value = "tasks")]
        flow: String,
    },
    /// Set the current project up for Claude Code: the MCP server, the execution model in CLAUDE.md, a hook that checks specs, a skill
    #[command(
        after_help = "Examples:\n  stratum-mcp install\n  stratum-mcp install --codex\n\nWrites .mcp.json (the server), CLAUDE.md (the execution model, between <!-- stratum:begin --> and <!-- stratum:end -->), .claude/settings.json (a PostToolUse hook running `stratum-mcp hook post-tool-use` on every *.stratum.yaml the agent writes) and .claude/skills/stratum/SKILL.md; with --codex, [mcp_servers.stratum] in ~/.codex/config.toml. What is already in those files is kept byte for byte; running it twice changes nothing.\n\nExit status: 0 on success, 1 when a file cannot be read, parsed or written (nothing is changed then)."
    )]
    Install(stratum_mcp::setup::InstallArgs),
    /// Remove exactly what `install` added
    #[command(
        after_help = "Examples:\n  stratum-mcp uninstall\n  stratum-mcp uninstall --keep-skills --codex\n\nExit status: 0 on success, 1 when a file cannot be read, parsed or written (nothing is changed then)."
    )]
    Uninstall(stratum_mcp::setup::UninstallArgs),
    /// Hooks that agents run (installed by `install`)
    #[command(
        after_help = "Examples:\n  echo '{\"tool_input\": {\"file_path\": \"flow.stratum.yaml\"}}' | stratum-mcp hook post-tool-use\n\nExit status: 0 when there is nothing to report (any other file, a clean spec, warnings only, or input that is not a hook's), 2 when the spec has errors: Claude Code then shows the diagnostics on standard error to the agent."
    )]
    Hook {
        #[command(subcommand)]
        hook: Hook,
    },
    /// Explain where the runtime deliberately differs from the reference (all topics when none is given)
    #[command(
        after_help = "Examples:\n  stratum-mcp explain\n  stratum-mcp explain retries-exhausted\n\nExit status: 0 when the topic exists, 2 when it does not."
    )]
    Explain {
        /// A topic, as `stratum-mcp explain` lists them
        topic: Option<String>,
    },
    /// List the agent CLIs runs can launch (Claude Code, Codex, OpenCode): path and `--version`
    #[command(
        after_help = "Examples:\n  stratum-mcp agents\n  stratum-mcp agents --codex /opt/codex/bin/codex --json\n\nEach CLI is looked up on PATH (or taken from its flag) and run with `--version`, under the environment allow-list a run gets, within 5 seconds. JSON with --json or when piped: one object per agent with `agent`, `path`, `status` (found, not_found, failed) and `version` or `reason`.\n\nExit status: 0 (the report says what was found)."
    )]
    Agents {
        /// The `claude` binary (default: found on PATH)
        #[arg(long, value_name = "PATH")]
        claude: Option<PathBuf>,
        /// The `codex` binary (default: found on PATH)
        #[arg(long, value_name = "PATH")]
        codex: Option<PathBuf>,
        /// The `opencode` binary (default: found on PATH)
        #[arg(long, value_name = "PATH")]
        opencode: Option<PathBuf>,
        /// Print JSON even on a terminal
        #[arg(long)]
        json: bool,
    },
    /// Check the set-up: the binary, STRATUM_HOME, the store, the project, the agents, a serve URL
    #[command(
        after_help = "Examples:\n  stratum-mcp doctor\n  STRATUM_TOKEN=stratum_… stratum-mcp doctor --serve https://stratum.example.com --json\n\nChecks: the binary's version; STRATUM_HOME and its permissions; the store (--db, --database-url or the default) reachable and its schema version, read without creating or migrating anything; PostgreSQL's sslmode and whether the connection is encrypted; in the current directory, whether .mcp.json, the hook and the skill `stratum-mcp install` wrote are there and run a binary on PATH, and the same for ~/.codex/config.toml; the agent CLIs and their versions; a serve URL reachable, and the token in STRATUM_TOKEN accepted (a secret is never taken as an argument).\n\nEach check is one line (ok, warning, problem, skipped), and each problem or warning has a `fix:` line under it. JSON with --json or when piped.\n\nExit status: 0 no problem (warnings allowed); 1 a problem found."
    )]
    Doctor {
        /// A `stratum-mcp serve` URL to reach (the token, if any, in STRATUM_TOKEN)
        #[arg(long, value_name = "URL", env = "STRATUM_SERVE_URL")]
        serve: Option<String>,
        /// Print JSON even on a terminal
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script
    #[command(
        after_help = "Examples:\n  stratum-mcp completions bash > ~/.local/share/bash-completion/completions/stratum-mcp\n  stratum-mcp completions zsh > ~/.zfunc/_stratum-mcp\n  stratum-mcp completions fish > ~/.config/fish/completions/stratum-mcp.fish"
    )]
    Completions {
        /// The shell to complete in
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

impl Command {
    /// The write options of a command that writes (`None` for a read, and for a command that
    /// uses no state database).
    fn writes(&self) -> Option<&Writes> {
        match self {
            Command::Gate { writes, .. }
            | Command::Serve { writes, .. }
            | Command::Prune { writes, .. }
            | Command::MigrateStore { writes, .. } => Some(writes),
            _ => None,
        }
    }
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Make a token and print its secret (once)
    Create {
        /// Its name: what the audit records as who acted (letters, digits, `.`, `_`, `-`, `@`)
        #[arg(long, value_name = "NAME")]
        name: String,
        /// It may look, and change nothing
        #[arg(long)]
        read_only: bool,
    },
    /// Every token: name, access, created, last used (never a secret)
    List,
    /// Delete a token: requests carrying it, and its sessions, are refused
    Revoke {
        /// The token's name
        name: String,
    },
}

#[derive(Subcommand)]
enum Hook {
    /// Claude Code's PostToolUse: check the spec the agent just wrote (the hook's JSON on standard input)
    PostToolUse,
}

#[derive(Subcommand)]
enum Query {
    /// Every flow, newest first
    Flows,
    /// One flow's whole state: its steps, outputs and trace
    Flow {
        /// The flow's id
        id: String,
    },
    /// Every gate a running flow waits at; with a flow, its gate and what the person deciding
    /// it is shown (the flow's input, the work before the gate, earlier decisions, merged
    /// changes)
    Gates {
        /// Only this flow's gate (the start of its id will do), shown with its context
        flow: Option<String>,
        /// Only if it waits at this gate
        step: Option<String>,
        /// Show each gate's context below the table
        #[arg(long)]
        context: bool,
    },
    /// The agent runs the runtime launched, newest first (of one flow, or all)
    Runs {
        /// Only this flow's
        #[arg(long, value_name = "FLOW")]
        flow: Option<String>,
        /// At most this many
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: usize,
    },
    /// One agent run: its process, how it ended, its result and the tail of its events
    Run {
        /// The run's id (16 hex digits)
        id: String,
    },
    /// The flows enrolled for unattended driving: who drives each, or why it stopped
    Drives,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(message) = init_logging(&cli) {
        eprintln!("stratum-mcp: {message}");
        return ExitCode::FAILURE;
    }
    let synchronous = cli
        .command
        .as_ref()
        .and_then(Command::writes)
        .and_then(|writes| writes.synchronous)
        .unwrap_or(cli.synchronous);
    let options = SqliteOptions {
        synchronous: match synchronous {
            Durability::Normal => Synchronous::Normal,
            Durability::Full => Synchronous::Full,
        },
        ..SqliteOptions::default()
    };
    let location = match (&cli.db, cli.database_url.as_deref()) {
        (Some(_), Some(_)) => {
            eprintln!(
                "stratum-mcp: give the state database once: --db (STRATUM_DB) or \
                 --database-url (STRATUM_DATABASE_URL), not both"
            );
            return ExitCode::from(2);
        }
        (Some(path), None) => Some(Location::Sqlite(path.clone())),
        (None, Some(url)) => match Location::parse(url) {
            Ok(location) => Some(location),
            Err(message) => {
                eprintln!("stratum-mcp: --database-url: {message}");
                return ExitCode::from(2);
            }
        },
        (None, None) => None,
    };
    let store = operator::StoreAt { location, options };
    match cli.command {
        None => match settings(cli.config.as_deref()) {
            Some(settings) => serve(cli.root, store, settings),
            None => ExitCode::FAILURE,
        },
        Some(Command::Query { what, json }) => match what {
            Query::Flows => operator::query_flows(&store, json),
            Query::Flow { id } => operator::query_flow(&store, &id, json),
            Query::Gates {
                flow,
                step,
                context,
            } => operator::query_gates(&store, flow.as_deref(), step.as_deref(), context, json),
            Query::Runs { flow, limit } => {
                unattended::query_runs(&store, flow.as_deref(), limit, json)
            }
            Query::Run { id } => unattended::query_run(&store, &id, json),
            Query::Drives => unattended::query_drives(&store, json),
        },
        Some(Command::Gate {
            decision,
            flow,
            step,
            note,
            resolved_by,
            value,
            json,
            writes: _,
        }) => match settings(cli.config.as_deref()) {
            Some(settings) => operator::gate(
                &store,
                &operator::GateOrder {
                    flow: &flow,
                    step: &step,
                    decision,
                    note: &note,
                    resolved_by,
                    value,
                },
                &settings,
                json,
            ),
            // A config file that cannot be used is a usage error, as clap's are.
            None => ExitCode::from(2),
        },
        Some(Command::Watch {
            flow,
            interval,
            json,
        }) => operator::watch(&store, flow.as_deref(), interval, json),
        Some(Command::Serve {
            listen,
            allowed_host,
            secure_cookies,
            metrics_listen,
            header_timeout,
            idle_timeout,
            max_connections,
            root,
            workers,
            writes: _,
        }) => match settings(cli.config.as_deref()) {
            Some(settings) => operator::serve(
                &store,
                root.or(cli.root),
                workers,
                settings,
                stratum_serve::ServeOptions {
                    listen,
                    allowed_hosts: allowed_host,
                    secure_cookies,
                    metrics_listen,
                    connections: stratum_serve::ConnectionLimits {
                        header_timeout: std::time::Duration::from_secs(header_timeout),
                        idle_timeout: std::time::Duration::from_secs(idle_timeout),
                        max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
                    },
                },
            ),
            None => ExitCode::FAILURE,
        },
        Some(Command::Token { what, json }) => match what {
            TokenCommand::Create { name, read_only } => {
                operator::token_create(&store, &name, read_only, json)
            }
            TokenCommand::List => operator::token_list(&store, json),
            TokenCommand::Revoke { name } => operator::token_revoke(&store, &name, json),
        },
        Some(Command::Prune {
            older_than, json, ..
        }) => operator::prune(&store, older_than, json),
        Some(Command::MigrateStore { from, to, json, .. }) => {
            operator::migrate_store(&from, &to, options, json)
        }
        Some(Command::Validate(args)) => stratum_compiler::cli::check(&args),
        Some(Command::Compile {
            tasks_dir,
            output,
            flow,
        }) => operator::compile(&tasks_dir, output.as_deref(), &flow),
        Some(Command::Install(args)) => setup::install(&args),
        Some(Command::Uninstall(args)) => setup::uninstall(&args),
        Some(Command::Hook {
            hook: Hook::PostToolUse,
        }) => setup::post_tool_use(),
        Some(Command::Explain { topic }) => operator::explain(topic.as_deref()),
        Some(Command::Doctor { serve, json }) => doctor::doctor(&store, serve, json),
        Some(Command::Agents {
            claude,
            codex,
            opencode,
            json,
        }) => agents::agents(
            agents::Binaries {
                claude,
                codex,
                opencode,
            },
            json,
        ),
        Some(Command::Run {
            spec,
            flow,
            inputs,
            detach,
            json,
            agents,
        }) => unattended::run(
            &store,
            &unattended::RunArgs {
                spec: &spec,
                flow,
                inputs: &inputs,
                detach,
                json,
                options: &agents,
            },
        ),
        Some(Command::Worker {
            concurrency,
            agents,
        }) => unattended::worker(&store, concurrency, &agents),
        Some(Command::Completions { shell }) => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "stratum-mcp", &mut script);
            print::bytes(&script)
        }
    }
}

/// A `--value`: JSON text.
fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))
}

/// The servers' settings: of `--config`, else of `$STRATUM_HOME/config.toml`; `None` (said
/// on standard error) when the file cannot be used.
fn settings(explicit: Option<&std::path::Path>) -> Option<stratum_mcp::settings::Settings> {
    let home = stratum_store_sqlite::SqliteStore::default_path()
        .ok()
        .and_then(|path| path.parent().map(std::path::Path::to_owned));
    match stratum_mcp::settings::resolve(explicit, home.as_deref()) {
        Ok(settings) => Some(settings),
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            None
        }
    }
}

/// The MCP server on standard input and output.
fn serve(
    root: Option<PathBuf>,
    store: operator::StoreAt,
    settings: stratum_mcp::settings::Settings,
) -> ExitCode {
    let root = match root.map_or_else(std::env::current_dir, Ok) {
        Ok(root) => root,
        Err(error) => {
            eprintln!("stratum-mcp: cannot read the current directory: {error}");
            return ExitCode::FAILURE;
        }
    };
    let choice = match store.location {
        Some(Location::Sqlite(path)) => StoreChoice::Sqlite(path, store.options),
        Some(Location::Postgres(url)) => StoreChoice::Postgres(url),
        None => StoreChoice::Default(store.options),
    };
    let config = settings.apply(
        Config::default()
            .with_root(root)
            .with_console_url(std::env::var(CONSOLE_URL_ENV).ok()),
    );
    let server = StratumServer::new(choice, config);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("stratum-mcp: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(stratum_mcp::serve_stdio(server));
    // A read of standard input cannot be cancelled: do not wait for it at shutdown.
    runtime.shutdown_background();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(cli: &Cli) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log)
        .map_err(|error| format!("--log {}: {error}", cli.log))?;
    let writer = match &cli.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| format!("cannot open the log file {}: {error}", path.display()))?;
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::sync::Mutex::new(file))
        }
        None => tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(writer);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        // The span's fields (the call's tool, flow and step) on every line of the call.
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .flatten_event(true)
            .init(),
    }
    log_panics();
    Ok(())
}

/// A panic anywhere (a call's thread, a background job) is logged at `error` with where it
/// happened, then reported as before: a call that panicked answers `internal_error`, and the
/// log says which line.
fn log_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map_or_else(String::new, |at| format!("{}:{}", at.file(), at.line()));
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_owned();
        tracing::error!(%location, %thread, panic = %message, "a thread panicked");
        previous(info);
    }));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use std::sync::{Arc, Mutex};

    /// What the subscriber wrote.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_panic_is_logged_with_where_it_happened() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        super::log_panics();
        let thread = std::thread::Builder::new()
            .name("doomed".to_owned())
            .spawn(|| panic!("the sky fell"))
            .unwrap();
        assert!(thread.join().is_err());
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(line["level"], "ERROR", "{text}");
        assert_eq!(line["panic"], "the sky fell", "{text}");
        assert_eq!(line["thread"], "doomed", "{text}");
        assert!(
            line["location"]
                .as_str()
                .unwrap()
                .starts_with("runtime/cli/src/main.rs:"),
            "{text}"
        );
    }
}
