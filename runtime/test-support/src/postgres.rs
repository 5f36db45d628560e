//! PostgreSQL for the tests. [`database_url`] gives each caller a fresh, empty schema of its
//! own (the URL sets `search_path` to it), so tests that run at once never see each other's
//! tables, on one server per test binary: the one `STRATUM_TEST_DATABASE_URL` names, or else
//! one that `scripts/throwaway-postgres` starts (installing Debian's `postgresql` when it is
//! missing) for the process that ran this binary, normally `cargo`, so that every test binary
//! of one `cargo test` shares it and it goes away with `cargo`. When no server can be had, the
//! caller panics with the script's message: PostgreSQL tests are never skipped.
//!
//! The admin connection uses the synchronous `postgres` client on a thread of its own, since
//! that client runs a tokio runtime of its own and may not be called from inside one.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The variable naming the server the tests use, set by `scripts/throwaway-postgres run`.
pub const SERVER_ENV: &str = "STRATUM_TEST_DATABASE_URL";

/// A URL to a fresh, empty schema of its own, on the tests' server; panics (with what to do)
/// when there is no server.
pub fn database_url() -> String {
    let server = server_url();
    fresh_schema(server).unwrap_or_else(|error| {
        panic!("cannot create a schema for the test on the PostgreSQL server {server}: {error}")
    })
}

/// The server the tests of this binary use: `STRATUM_TEST_DATABASE_URL`, or one started once
/// with `scripts/throwaway-postgres start --owner <this process's parent>`.
pub fn server_url() -> &'static str {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    let server = SERVER.get_or_init(|| match std::env::var(SERVER_ENV) {
        Ok(url) if !url.trim().is_empty() => Ok(url.trim().to_owned()),
        _ => start_server(std::os::unix::process::parent_id(), &[]),
    });
    match server {
        Ok(url) => url,
        Err(message) => panic!(
            "the PostgreSQL tests need a server and none could be had; they are not skipped.\n\
             {message}"
        ),
    }
}

/// The throwaway server script.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/throwaway-postgres")
}

/// Runs `scripts/throwaway-postgres start --owner OWNER` with `envs` added: the server's URL,
/// or the script's message.
pub fn start_server(owner: u32, envs: &[(&str, &OsStr)]) -> Result<String, String> {
    let output = Command::new("bash")
        .arg(script())
        .args(["start", "--owner", &owner.to_string()])
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", script().display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let url = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || url.is_empty() {
        return Err(format!(
            "{} start failed ({}):\n{stderr}",
            script().display(),
            output.status
        ));
    }
    if !stderr.trim().is_empty() {
        eprintln!("{stderr}");
    }
    Ok(url)
}

/// Creates a new schema on `server`; a URL to it.
pub fn fresh_schema(server: &str) -> Result<String, String> {
    static CREATED: AtomicUsize = AtomicUsize::new(0);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis());
    // Unique on a server that outlives many runs: the time, this process, a counter.
    let schema = format!(
        "stratum_test_{millis}_{}_{}",
        std::process::id(),
        CREATED.fetch_add(1, Ordering::Relaxed)
    );
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_old_schemas(server, millis));
    admin(server, |client| {
        client.batch_execute(&format!("CREATE SCHEMA {schema}"))
    })?;
    Ok(with_search_path(server, &schema))
}

/// How old a test schema must be for a later run to drop it: no test run lasts that long.
const OLD_SCHEMA_MILLIS: u128 = 24 * 60 * 60 * 1000;

/// Drops the test schemas made more than a day before `now_millis` (their name starts with
/// the time they were made), so that a long-lived `STRATUM_TEST_DATABASE_URL` server does not
/// pile them up. Best effort: a schema another process drops first is no error.
pub fn sweep_old_schemas(server: &str, now_millis: u128) {
    let swept = admin(server, |client| {
        let names: Vec<String> = client
            .query(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'stratum\\_test\\_%'",
                &[],
            )?
            .iter()
            .map(|row| row.get(0))
            .collect();
        for name in names {
            let made = name
                .strip_prefix("stratum_test_")
                .and_then(|rest| rest.split('_').next())
                .and_then(|millis| millis.parse::<u128>().ok());
            if made.is_some_and(|made| now_millis.saturating_sub(made) > OLD_SCHEMA_MILLIS) {
                client.batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))?;
            }
        }
        Ok(())
    });
    if let Err(error) = swept {
        eprintln!("could not drop old test schemas (they stay; nothing else is affected): {error}");
    }
}

/// `server` with its connections' `search_path` set to `schema` (a plain lowercase name).
pub fn with_search_path(server: &str, schema: &str) -> String {
    let separator = if server.contains('?') { '&' } else { '?' };
    format!("{server}{separator}options=-c%20search_path%3D{schema}")
}

/// Runs `work` on a connection to `url`, on a thread of its own.
pub fn admin<T: Send>(
    url: &str,
    work: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send,
) -> Result<T, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut config: postgres::Config = url
                    .parse()
                    .map_err(|error| format!("not a PostgreSQL URL: {error}"))?;
                config.connect_timeout(Duration::from_secs(30));
                let mut client = config
                    .connect(postgres::NoTls)
                    .map_err(|error| format!("cannot connect: {error}"))?;
                work(&mut client).map_err(|error| error.to_string())
            })
            .join()
            .unwrap_or_else(|_| Err("the admin connection's thread panicked".to_owned()))
    })
}

/// The port of a throwaway server's URL (`postgres://postgres@127.0.0.1:PORT/postgres`).
pub fn port(url: &str) -> u16 {
    url.rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}
