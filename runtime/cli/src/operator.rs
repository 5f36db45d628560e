//! The operator commands: each opens the state database, runs one function of
//! `stratum_mcp::cli`, and prints its answer as a table for a person or as JSON for a
//! program.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use stratum_compiler::source::SourceMap;
use stratum_grammar::print::visible;
use stratum_mcp::cli::flow_ref::{self, FlowRef};
use stratum_mcp::cli::gate::{self, Decision, ResolvedBy};
use stratum_mcp::cli::{migrate, prune as pruning, query, table, token, watch as watching};
use stratum_mcp::location::Location;
use stratum_runtime::{Config, MemoryStore, Runtime, Store, StoreError};
use stratum_store_sqlite::{SqliteOptions, SqliteStore};

use crate::print;

/// An unknown flow, or a spec with errors.
const NOT_FOUND: u8 = 1;
/// A usage error, or a target store that is not empty.
const USAGE: u8 = 2;
/// The state database cannot be used.
const STORE_UNAVAILABLE: u8 = 3;
/// A copied store, read back, differs from its source. (1, as "not what was asked".)
const MISMATCH: u8 = 1;

/// Where the state database is.
pub struct StoreAt {
    /// `None`: the default SQLite file ($STRATUM_HOME/stratum.db).
    pub location: Option<Location>,
    pub options: SqliteOptions,
}

impl StoreAt {
    /// The store, opened; for SQLite, an empty store when the file does not exist yet, since
    /// an operator's look should not create the state an agent's server will.
    pub fn open(&self) -> Result<Arc<dyn Store>, StoreError> {
        match self.location()? {
            Location::Sqlite(path) if !path.exists() => Ok(Arc::new(MemoryStore::new())),
            location => location.open(self.options),
        }
    }

    /// The store, opened and created if need be: for what must be kept (a token) or served.
    pub fn open_or_create(&self) -> Result<Arc<dyn Store>, StoreError> {
        self.location()?.open(self.options)
    }

    pub fn location(&self) -> Result<Location, StoreError> {
        match &self.location {
            Some(location) => Ok(location.clone()),
            None => SqliteStore::default_path().map(Location::Sqlite),
        }
    }

    fn exists(&self) -> bool {
        match self.location() {
            Ok(Location::Sqlite(path)) => path.exists(),
            Ok(Location::Postgres(_)) => true,
            Err(_) => false,
        }
    }
}

/// Runs `command` on the store, or reports why the store cannot be used.
fn with_store(
    at: &StoreAt,
    command: impl FnOnce(Arc<dyn Store>) -> Result<ExitCode, StoreError>,
) -> ExitCode {
    match at.open().and_then(command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            ExitCode::from(STORE_UNAVAILABLE)
        }
    }
}

/// JSON when asked for, or when standard output is not a terminal.
fn wants_json(json: bool) -> bool {
    json || !std::io::stdout().is_terminal()
}

fn to_json(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

pub fn query_flows(at: &StoreAt, json: bool) -> ExitCode {
    with_store(at, |store| {
        let flows = query::flows(store.as_ref())?;
        Ok(if wants_json(json) {
            print::json_with(&to_json(&flows), 0)
        } else {
            print::text_with(&table::flows(&flows), 0)
        })
    })
}

/// The whole id of the flow `given` names (a start of it will do), or the exit for a name that
/// fits no flow or several, said on standard error (and as JSON with `json`).
fn named_flow(
    store: &dyn Store,
    given: &str,
    json: bool,
) -> Result<Result<String, ExitCode>, StoreError> {
    Ok(match flow_ref::resolve(store, given)? {
        FlowRef::One(id) => Ok(id.to_string()),
        // The caller's own lookup reports the unknown flow in its usual words.
        FlowRef::None => Ok(given.to_owned()),
        FlowRef::Many { shown, total } => {
            let mut answer = gate::not_found(given);
            answer.error.message = flow_ref::ambiguous(given, &shown, total);
            Err(if wants_json(json) {
                print::json_with(&to_json(&answer), NOT_FOUND)
            } else {
                eprintln!("error: {}", answer.error.message);
                ExitCode::from(NOT_FOUND)
            })
        }
    })
}

pub fn query_flow(at: &StoreAt, id: &str, json: bool) -> ExitCode {
    with_store(at, |store| {
        let id = match named_flow(store.as_ref(), id, json)? {
            Ok(id) => id,
            Err(exit) => return Ok(exit),
        };
        let id = id.as_str();
        let Some(state) = query::flow(store.as_ref(), id)? else {
            let missing = gate::not_found(id);
            return Ok(if wants_json(json) {
                print::json_with(&to_json(&missing), NOT_FOUND)
            } else {
                eprintln!("error: {}", missing.error.message);
                ExitCode::from(NOT_FOUND)
            });
        };
        Ok(if wants_json(json) {
            print::json_with(&to_json(&state), 0)
        } else {
            print::text_with(&table::flow(&state), 0)
        })
    })
}

/// `query gates [FLOW [STEP]] [--context]`: every waiting gate, or one flow's (at `step`,
/// when given); for a person a table, then each gate's context when asked for or when one
/// flow is named.
pub fn query_gates(
    at: &StoreAt,
    flow: Option<&str>,
    step: Option<&str>,
    context: bool,
    json: bool,
) -> ExitCode {
    with_store(at, |store| {
        let gates = match flow {
            None => query::gates(store.as_ref())?,
            Some(given) => {
                let id = match flow_ref::resolve(store.as_ref(), given)? {
                    FlowRef::One(id) => id,
                    FlowRef::None if wants_json(json) => {
                        return Ok(print::json_with(
                            &to_json(&gate::not_found(given)),
                            NOT_FOUND,
                        ));
                    }
                    FlowRef::None => return Ok(unknown_flow(given)),
                    FlowRef::Many { .. } => match named_flow(store.as_ref(), given, json)? {
                        Err(exit) => return Ok(exit),
                        Ok(_) => return Ok(unknown_flow(given)),
                    },
                };
                match query::gate(store.as_ref(), &id)? {
                    query::FlowGate::Unknown if wants_json(json) => {
                        let missing = gate::not_found(id.as_str());
                        return Ok(print::json_with(&to_json(&missing), NOT_FOUND));
                    }
                    query::FlowGate::Unknown => return Ok(unknown_flow(id.as_str())),
                    query::FlowGate::NotAtGate => Vec::new(),
                    query::FlowGate::At(gate) => [*gate]
                        .into_iter()
                        .filter(|gate| step.is_none_or(|step| gate.step_id == step))
                        .collect(),
                }
            }
        };
        Ok(if wants_json(json) {
            print::json_with(&to_json(&gates), 0)
        } else if let Some(given) = flow {
            let text = if gates.is_empty() {
                format!(
                    "flow {} is not waiting at {}\n",
                    visible(given),
                    step.map_or_else(
                        || "a gate".to_owned(),
                        |step| format!("gate {}", visible(step))
                    )
                )
            } else {
                table::gate_contexts(&gates)
            };
            print::text_with(&text, 0)
        } else if context && !gates.is_empty() {
            let text = format!("{}\n{}", table::gates(&gates), table::gate_contexts(&gates));
            print::text_with(&text, 0)
        } else {
            print::text_with(&table::gates(&gates), 0)
        })
    })
}

/// What `gate approve|revise|kill` was asked.
pub struct GateOrder<'a> {
    pub flow: &'a str,
    pub step: &'a str,
    pub decision: Decision,
    pub note: &'a str,
    pub resolved_by: ResolvedBy,
    /// `--value`: the value approved with (JSON), for a gate whose function declares `output`.
    pub value: Option<serde_json::Value>,
}

/// `gate`: under the config file's settings, so that a gate function's approval rules hold
/// for a decision from the terminal as for any other.
pub fn gate(
    at: &StoreAt,
    order: &GateOrder<'_>,
    settings: &stratum_mcp::settings::Settings,
    json: bool,
) -> ExitCode {
    with_store(at, |store| {
        let flow = match named_flow(store.as_ref(), order.flow, json)? {
            Ok(id) => id,
            Err(exit) => return Ok(exit),
        };
        let runtime = Runtime::new(store, settings.apply(Config::default()));
        let answer = gate::resolve(
            &runtime,
            &flow,
            order.step,
            order.decision,
            order.note,
            order.resolved_by,
            order.value.clone(),
        )?;
        let code = answer.exit_code();
        Ok(if wants_json(json) {
            print::json_with(&answer.to_json(), code)
        } else if code == 0 {
            print::text_with(&format!("{}\n", answer.to_text()), code)
        } else {
            eprintln!("{}", answer.to_text());
            ExitCode::from(code)
        })
    })
}

pub fn watch(at: &StoreAt, flow: Option<&str>, interval_ms: u64, json: bool) -> ExitCode {
    with_store(at, |mut store| {
        let only = match flow {
            Some(text) => match flow_ref::resolve(store.as_ref(), text)? {
                FlowRef::One(id) => Some(id),
                FlowRef::None => return Ok(unknown_flow(text)),
                FlowRef::Many { shown, total } => {
                    eprintln!("error: {}", flow_ref::ambiguous(text, &shown, total));
                    return Ok(ExitCode::from(NOT_FOUND));
                }
            },
            None => None,
        };
        if let Some(id) = &only
            && store.flow_versions()?.iter().all(|(known, _)| known != id)
        {
            return Ok(unknown_flow(id.as_str()));
        }
        let mut watcher = watching::Watcher::new(only.clone());
        let mut existed = at.exists();
        let interval = Duration::from_millis(interval_ms.max(10));
        loop {
            for happening in watcher.poll(store.as_ref(), stratum_runtime::now_ms())? {
                let line = if json {
                    to_json(&happening).to_string()
                } else {
                    happening.to_line()
                };
                if print::write(format!("{line}\n").as_bytes()).is_err() {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            if only.is_some() && watcher.all_finished() {
                return Ok(ExitCode::SUCCESS);
            }
            // PostgreSQL wakes the watch at every commit; the interval is the fallback.
            store.wait_for_change(interval)?;
            // A server may create the database after the watch began.
            if !existed && at.exists() {
                store = at.open()?;
                existed = true;
            }
        }
    })
}

pub fn migrate_store(from: &str, to: &str, options: SqliteOptions, json: bool) -> ExitCode {
    let parse = |flag: &str, text: &str| {
        Location::parse(text).map_err(|message| {
            eprintln!("stratum-mcp: {flag}: {message}");
            ExitCode::from(USAGE)
        })
    };
    let (from, to) = match (parse("--from", from), parse("--to", to)) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    if from == to {
        eprintln!("stratum-mcp: --from and --to name the same database ({from})");
        return ExitCode::from(USAGE);
    }
    // Copying from a file that is not there would copy nothing, silently.
    if let Location::Sqlite(path) = &from
        && !path.exists()
    {
        eprintln!(
            "stratum-mcp: --from: there is no database at {}",
            path.display()
        );
        return ExitCode::from(USAGE);
    }
    let copied = from.open(options).and_then(|source| {
        let target = to.open(options)?;
        migrate::migrate(
            source.as_ref(),
            from.to_string(),
            target.as_ref(),
            to.to_string(),
        )
    });
    let report = match copied {
        Ok(report) => report,
        Err(error @ StoreError::NotEmpty { .. }) => {
            eprintln!("stratum-mcp: {to}: {error}");
            return ExitCode::from(USAGE);
        }
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::from(STORE_UNAVAILABLE);
        }
    };
    let code = if report.verified { 0 } else { MISMATCH };
    if wants_json(json) {
        return print::json_with(&to_json(&report), code);
    }
    let counts = &report.source;
    let mut text = format!(
        "copied {} flow(s), {} plan(s), {} step record(s), {} audit record(s), {} checkpoint(s) \
         and {} cached result(s)\nfrom {}\nto   {}\n",
        counts.flows,
        counts.plans,
        counts.steps,
        counts.events,
        counts.checkpoints,
        counts.cache,
        report.from,
        report.to
    );
    if report.verified {
        text.push_str(&format!(
            "verified: the same rows, SHA-256 {}\n",
            report.source_checksum
        ));
    } else {
        text.push_str(&format!(
            "NOT verified: the target read back differs (source SHA-256 {}, target {}; target \
             rows {:?})\n",
            report.source_checksum, report.target_checksum, report.target
        ));
    }
    print::text_with(&text, code)
}

fn unknown_flow(id: &str) -> ExitCode {
    eprintln!("error: {}", gate::not_found(id).error.message);
    ExitCode::from(NOT_FOUND)
}

pub fn prune(at: &StoreAt, older_than_ms: u64, json: bool) -> ExitCode {
    with_store(at, |store| {
        let dirs = pruning::Dirs::of_home();
        let report = pruning::prune(
            store.as_ref(),
            stratum_runtime::now_ms(),
            older_than_ms,
            Some(&dirs),
        )?;
        // The flows are gone from the store either way; what stayed on disk is told, not fatal.
        for problem in &report.problems {
            eprintln!("warning: could not remove {problem}");
        }
        Ok(if wants_json(json) {
            print::json_with(&to_json(&report), 0)
        } else {
            print::text_with(
                &format!(
                    "removed {} finished flow(s), {} plan(s) no flow runs on, the judge turns \
                     of {} flow(s) and {} task worktree(s)\n",
                    report.removed_flows.len(),
                    report.removed_plans,
                    report.removed_judge_dirs,
                    report.removed_worktrees
                ),
                0,
            )
        })
    })
}

/// `compile`: the task compiler, its spec checked before it is written.
pub fn compile(tasks_dir: &Path, output: Option<&Path>, flow: &str) -> ExitCode {
    let compiled = match stratum_authoring::speckit::compile_tasks_dir(tasks_dir, flow) {
        Ok(compiled) => compiled,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(NOT_FOUND);
        }
    };
    let mut sources = SourceMap::new();
    let name = output.map_or_else(|| "<stdout>".to_owned(), |path| path.display().to_string());
    let compilations = vec![stratum_compiler::check_bytes(
        &mut sources,
        &name,
        compiled.yaml.as_bytes(),
    )];
    let errors = compilations
        .iter()
        .flat_map(|compilation| &compilation.diagnostics)
        .any(|diagnostic| diagnostic.severity == stratum_compiler::diagnostic::Severity::Error);
    if errors {
        let reports = stratum_compiler::render::reports(&sources, &compilations);
        eprint!(
            "{}",
            stratum_compiler::render::short::render(&sources, &reports)
        );
        eprintln!("error: the compiled spec has errors; nothing was written");
        return ExitCode::from(NOT_FOUND);
    }
    match stratum_compiler::cli::output::write_product(output, &compiled.yaml) {
        Ok(()) => {
            if let Some(path) = output {
                eprintln!(
                    "wrote {} ({} step(s), flow `{}`)",
                    path.display(),
                    compiled.steps.len(),
                    compiled.flow_name
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: cannot write the spec: {error}");
            ExitCode::from(stratum_compiler::cli::USAGE_OR_IO_ERROR)
        }
    }
}

/// `explain`: the runtime's deliberate differences from the reference, and the compiler's
/// diagnostic codes (which `stratumc explain` also prints), so that a person who installed only
/// the server can read what a code in a diagnostic means.
pub fn explain(topic: Option<&str>) -> ExitCode {
    use stratum_mcp::differences::{DIFFERENCES, find};
    let Some(topic) = topic else {
        let width = DIFFERENCES
            .iter()
            .map(|difference| difference.topic.len())
            .max()
            .unwrap_or(0);
        let list: String = DIFFERENCES
            .iter()
            .map(|difference| format!("{:<width$}  {}\n", difference.topic, difference.summary))
            .collect();
        let list = format!(
            "{list}\nDiagnostic codes are explained too: `stratum-mcp explain E0011` (or a slug \
             such as `unknown-key`).\n"
        );
        return print::text_with(&list, 0);
    };
    let code = stratum_compiler::diagnostic::Code::parse(topic.trim());
    match (find(topic), code) {
        (Ok(difference), _) => print::text_with(&difference.text(), 0),
        (Err(_), Some(code)) => print::text_with(
            &format!(
                "{code} ({}): {}\n\n{}",
                code.slug(),
                code.summary(),
                code.explanation()
            ),
            0,
        ),
        (Err(message), None) => {
            eprintln!("error: {message}");
            ExitCode::from(stratum_compiler::cli::USAGE_OR_IO_ERROR)
        }
    }
}

/// Runs `command` on the store opened (and created) for writing.
fn with_store_created(
    at: &StoreAt,
    command: impl FnOnce(Arc<dyn Store>) -> Result<ExitCode, StoreError>,
) -> ExitCode {
    match at.open_or_create().and_then(command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            ExitCode::from(STORE_UNAVAILABLE)
        }
    }
}

fn print_token(answer: &token::TokenAnswer, json: bool) -> ExitCode {
    let code = answer.exit_code();
    if wants_json(json) {
        print::json_with(&answer.to_json(), code)
    } else if code == 0 {
        print::text_with(&answer.to_text(), code)
    } else {
        eprint!("{}", answer.to_text());
        ExitCode::from(code)
    }
}

pub fn token_create(at: &StoreAt, name: &str, read_only: bool, json: bool) -> ExitCode {
    with_store_created(at, |store| {
        let answer = token::create(store.as_ref(), name, read_only, stratum_runtime::now_ms())?;
        Ok(print_token(&answer, json))
    })
}

pub fn token_list(at: &StoreAt, json: bool) -> ExitCode {
    with_store(at, |store| {
        Ok(print_token(&token::list(store.as_ref())?, json))
    })
}

pub fn token_revoke(at: &StoreAt, name: &str, json: bool) -> ExitCode {
    with_store(at, |store| {
        Ok(print_token(&token::revoke(store.as_ref(), name)?, json))
    })
}

/// The console's address as `serve` knows it before it listens: its first `--allowed-host`
/// name (over HTTPS with `--secure-cookies`, which says a TLS proxy is in front), else the
/// address it listens on, unless that is any address or any port (`0.0.0.0`, port 0).
fn console_url(options: &stratum_serve::ServeOptions) -> Option<String> {
    let scheme = if options.secure_cookies {
        "https"
    } else {
        "http"
    };
    if let Some(host) = options
        .allowed_hosts
        .iter()
        .find(|host| host.as_str() != "*")
    {
        return Some(format!("{scheme}://{host}"));
    }
    let listen = options.listen;
    (!listen.ip().is_unspecified() && listen.port() != 0).then(|| format!("http://{listen}"))
}

/// `serve`: the MCP tools over HTTP and the browser sign-in, until SIGTERM or Ctrl-C.
pub fn serve(
    at: &StoreAt,
    root: Option<std::path::PathBuf>,
    workers: usize,
    settings: stratum_mcp::settings::Settings,
    options: stratum_serve::ServeOptions,
) -> ExitCode {
    use stratum_serve::{self as http, App, ServeError};
    let root = match root.map_or_else(std::env::current_dir, Ok) {
        Ok(root) => root,
        Err(error) => {
            eprintln!("stratum-mcp: cannot read the current directory: {error}");
            return ExitCode::FAILURE;
        }
    };
    let store = match at.open_or_create() {
        Ok(store) => store,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::from(STORE_UNAVAILABLE);
        }
    };
    let no_token = match store.tokens() {
        Ok(tokens) => tokens.is_empty(),
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::from(STORE_UNAVAILABLE);
        }
    };
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
    let console = std::env::var(crate::CONSOLE_URL_ENV)
        .ok()
        .or_else(|| console_url(&options));
    let config = settings.apply(
        Config::default()
            .with_root(root.clone())
            .with_console_url(console),
    );
    let pool = (workers > 0).then(|| {
        let root = root.canonicalize().unwrap_or(root);
        let driver = stratum_driver::Driver::new(
            stratum_runtime::Runtime::new(store.clone(), config.clone()),
            root,
        );
        eprintln!("stratum-mcp serve: {workers} worker(s) drive enrolled flows");
        stratum_driver::Worker::start(driver, workers)
    });
    let app = App::new(store, config, options);
    let served = runtime.block_on(http::serve(app, shutdown_signal(), |address| {
        eprintln!(
            "stratum-mcp serve: listening on http://{address} (MCP at /mcp, sign-in at /signin)"
        );
        if no_token {
            eprintln!(
                "stratum-mcp serve: no access token exists yet, so every request is refused; \
                 make one with `stratum-mcp token create --name NAME` (it works at once, \
                 without a restart)"
            );
        }
    }));
    // Calls whose client went away still run on the blocking pool: let them commit.
    runtime.shutdown_timeout(Duration::from_secs(10));
    if let Some(pool) = pool {
        // Hand the flows back now rather than wait out agent runs of up to their deadline.
        pool.stop_signal().stop_now();
        pool.stop_and_join();
    }
    match served {
        Ok(()) => {
            eprintln!("stratum-mcp serve: stopped");
            ExitCode::SUCCESS
        }
        Err(error @ ServeError::NoToken(_)) => {
            eprintln!("stratum-mcp: {error}");
            ExitCode::from(USAGE)
        }
        Err(ServeError::Store(error)) => {
            eprintln!("stratum-mcp: {error}");
            ExitCode::from(STORE_UNAVAILABLE)
        }
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
