//! `stratum-mcp`: the Stratum runtime's MCP server for coding agents, on standard input and
//! output. Logs go to standard error (or `--log-file`), never to standard output, which is
//! the protocol.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use stratum_runtime::mcp::{StoreChoice, StratumServer};
use stratum_runtime::{Config, SqliteOptions, Synchronous};

const AFTER_HELP: &str = "\
Register it with an agent (it speaks MCP on standard input and output):
  Claude Code:  claude mcp add stratum -- stratum-mcp
  Codex:        [mcp_servers.stratum] command = \"stratum-mcp\"  (in ~/.codex/config.toml)

State is kept in $STRATUM_HOME/stratum.db (default ~/.stratum/stratum.db), created on first use;
every server and command on one machine may share it.

Exit status: 0 when the client closed the connection, 1 when the server could not run.";

/// Runs Stratum flows for coding agents over MCP (stdio).
#[derive(Parser)]
#[command(name = "stratum-mcp", version, about, after_help = AFTER_HELP)]
struct Cli {
    /// The state database (default: $STRATUM_HOME/stratum.db, or ~/.stratum/stratum.db).
    #[arg(long, value_name = "PATH", env = "STRATUM_DB")]
    db: Option<PathBuf>,
    /// `normal` survives any crash of the process; `full` also a power loss, at about three
    /// times the cost of each call.
    #[arg(long, value_enum, default_value_t = Durability::Normal)]
    synchronous: Durability,
    /// The directory `file_exists` and `file_contains` in `ensure` expressions are confined
    /// to (default: the current directory).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Append logs to this file instead of standard error.
    #[arg(long, value_name = "PATH")]
    log_file: Option<PathBuf>,
    /// What to log: `error`, `warn`, `info`, `debug` or `trace` (or a tracing filter).
    #[arg(
        long,
        value_name = "FILTER",
        env = "STRATUM_LOG",
        default_value = "warn"
    )]
    log: String,
}

#[derive(Clone, Copy, ValueEnum)]
enum Durability {
    Normal,
    Full,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(message) = init_logging(&cli) {
        eprintln!("stratum-mcp: {message}");
        return ExitCode::FAILURE;
    }
    let root = match cli.root.clone().map_or_else(std::env::current_dir, Ok) {
        Ok(root) => root,
        Err(error) => {
            eprintln!("stratum-mcp: cannot read the current directory: {error}");
            return ExitCode::FAILURE;
        }
    };
    let options = SqliteOptions {
        synchronous: match cli.synchronous {
            Durability::Normal => Synchronous::Normal,
            Durability::Full => Synchronous::Full,
        },
        ..SqliteOptions::default()
    };
    let choice = match cli.db {
        Some(path) => StoreChoice::Sqlite(path, options),
        None => StoreChoice::Default(options),
    };
    let server = StratumServer::new(choice, Config::default().with_root(root));
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
    let served = runtime.block_on(stratum_runtime::mcp::serve_stdio(server));
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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    match &cli.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| format!("cannot open the log file {}: {error}", path.display()))?;
            builder.with_writer(std::sync::Mutex::new(file)).init();
        }
        None => builder.with_writer(std::io::stderr).init(),
    }
    Ok(())
}
