//! `scripts/throwaway-postgres` and the tests' PostgreSQL harness (`support/postgres.rs`): a
//! started server accepts connections and gives isolated schemas, a second start for the same
//! owner gets the same server, the server and its directory are gone once the owner dies (or,
//! under `run`, once the command ends), and without PostgreSQL and a way to install it the
//! script fails with a message naming Debian's package.
//!
//! Each test keeps its instances under a temporary directory of its own
//! (`THROWAWAY_POSTGRES_ROOT`) and owns its server through a `sleep` it spawns, so that it can
//! watch the directory and end the owner.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up

use stratum_test_support as support;

use std::ffi::OsStr;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::postgres::{admin, fresh_schema, port, script, start_server};

/// A temporary directory for instances, searchable by the `postgres` user the server runs as
/// when the tests run as root.
fn instances_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    root
}

/// The instance directories under `root`.
fn instances(root: &Path) -> Vec<PathBuf> {
    let Ok(users) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    users
        .flatten()
        .filter_map(|user| std::fs::read_dir(user.path()).ok())
        .flat_map(|entries| entries.flatten().map(|entry| entry.path()))
        .filter(|path| path.is_dir())
        .collect()
}

fn owner() -> Child {
    Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

fn refuses(url: &str) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port(url)).into(), Duration::from_secs(2)).is_err()
}

/// Waits until `done` holds, for at most `seconds`.
fn eventually(seconds: u64, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

#[test]
fn a_server_serves_its_owner_and_is_gone_once_the_owner_dies() {
    let root = instances_root();
    let mut owner = owner();
    let envs = [("THROWAWAY_POSTGRES_ROOT", root.path().as_os_str())];
    let url = start_server(owner.id(), &envs).unwrap();
    assert!(
        url.starts_with("postgres://postgres@127.0.0.1:") && url.ends_with("/postgres"),
        "{url}"
    );
    let started = instances(root.path());
    assert_eq!(started.len(), 1, "{started:?}");

    // A second start for the same owner (another test binary of the same cargo run) gets
    // the same server, not a second initdb.
    assert_eq!(start_server(owner.id(), &envs).unwrap(), url);
    assert_eq!(instances(root.path()), started);

    // Each schema URL sees its own tables only.
    let (first, second) = (fresh_schema(&url).unwrap(), fresh_schema(&url).unwrap());
    assert_ne!(first, second);
    admin(&first, |client| {
        client.batch_execute("CREATE TABLE flows (id text); INSERT INTO flows VALUES ('a')")
    })
    .unwrap();
    let seen = |url: &str| {
        admin(url, |client| {
            let row = client.query_one("SELECT to_regclass('flows') IS NOT NULL", &[])?;
            Ok(row.get::<_, bool>(0))
        })
        .unwrap()
    };
    assert!(seen(&first));
    assert!(!seen(&second), "a fresh schema is empty");

    owner.kill().unwrap();
    owner.wait().unwrap();
    assert!(
        eventually(30, || instances(root.path()).is_empty()),
        "the directory outlived its owner: {:?}",
        instances(root.path())
    );
    assert!(eventually(10, || refuses(&url)), "{url} still answers");
}

#[test]
fn run_exports_the_url_passes_the_status_on_and_stops_the_server() {
    let root = instances_root();
    let output = Command::new("bash")
        .arg(script())
        .args(["run", "--", "sh", "-c"])
        .arg("echo \"$STRATUM_TEST_DATABASE_URL\"; exit 3")
        .env("THROWAWAY_POSTGRES_ROOT", root.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let url = stdout.trim();
    assert!(url.starts_with("postgres://postgres@127.0.0.1:"), "{url}");
    assert_eq!(instances(root.path()), Vec::<PathBuf>::new());
    assert!(refuses(url), "{url} still answers");
}

#[test]
fn without_postgresql_and_no_way_to_install_it_the_message_names_the_package() {
    let root = instances_root();
    let owner = std::process::id();
    let message = start_server(
        owner,
        &[
            ("THROWAWAY_POSTGRES_ROOT", root.path().as_os_str()),
            ("THROWAWAY_POSTGRES_BIN", OsStr::new("/nonexistent")),
            ("THROWAWAY_POSTGRES_NO_INSTALL", OsStr::new("1")),
        ],
    )
    .unwrap_err();
    assert!(
        message.contains("Debian's package `postgresql`")
            && message.contains("apt-get install -y postgresql")
            && message.contains("STRATUM_TEST_DATABASE_URL"),
        "{message}"
    );
    assert_eq!(instances(root.path()), Vec::<PathBuf>::new());
}
