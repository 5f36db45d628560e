//! The PostgreSQL store over TLS, against real servers: one this binary starts with `ssl=on`
//! that takes TLS connections only (`THROWAWAY_POSTGRES_SSL_DIR`), with a certificate
//! authority and a server certificate made here; and a server without TLS (the tests' shared
//! one). What `sslmode` and `sslrootcert` promise: a connection that requires TLS is made only
//! to a server whose certificate verifies, and each refusal says what to fix, without the
//! password.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up

use stratum_test_support as support;
use stratum_test_support::linear;

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::json;
use stratum_runtime::store::Store;
use stratum_runtime::{Command, Config, Runtime};
use stratum_store_postgres::PostgresStore;
use support::postgres::{admin, script, start_server};

/// The name the server's certificate carries, besides the address 127.0.0.1; reached through
/// `hostaddr`, so that no name is looked up.
const SERVER_NAME: &str = "db.test";

/// A PostgreSQL server of this test's own, stopped when the value is dropped, as a failing
/// test unwinds; should the process die first, the script's watchdog stops it.
struct OwnServer {
    /// `127.0.0.1:PORT`.
    address: String,
    /// Where the script keeps the instance: the test's alone.
    root: tempfile::TempDir,
}

impl OwnServer {
    /// Starts a server; with `ssl_dir` (holding `server.crt` and `server.key`), one that takes
    /// TLS connections only.
    fn start(ssl_dir: Option<&Path>) -> OwnServer {
        let root = tempfile::tempdir().unwrap();
        // The postgres user the server runs as, when the tests run as root, must reach it.
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut envs = vec![("THROWAWAY_POSTGRES_ROOT", root.path().as_os_str())];
        if let Some(dir) = ssl_dir {
            envs.push(("THROWAWAY_POSTGRES_SSL_DIR", dir.as_os_str()));
        }
        // Owned by this process: a second server of the same owner needs another root.
        let url = start_server(std::process::id(), &envs).unwrap_or_else(|error| panic!("{error}"));
        let address = url
            .strip_prefix("postgres://postgres@")
            .and_then(|rest| rest.strip_suffix("/postgres"))
            .unwrap_or_else(|| panic!("an unexpected URL from the script: {url}"))
            .to_owned();
        OwnServer { address, root }
    }

    /// A URL to the server by its address, with `params`. The password is never asked (trust
    /// authentication): it is there to be kept out of every message.
    fn by_address(&self, params: &str) -> String {
        format!(
            "postgres://postgres:secret@{}/postgres?{params}",
            self.address
        )
    }

    /// A URL to the server by the host name `name` (what the certificate is checked against),
    /// reached at its address (`hostaddr`), so that no name is looked up.
    fn by_name(&self, name: &str, params: &str) -> String {
        let port = self.address.rsplit_once(':').unwrap().1;
        format!("postgres://postgres:secret@{name}:{port}/postgres?hostaddr=127.0.0.1&{params}")
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let stopped = Process::new("bash")
            .arg(script())
            .args(["stop", "--owner", &std::process::id().to_string()])
            .env("THROWAWAY_POSTGRES_ROOT", self.root.path())
            .stdin(Stdio::null())
            .output();
        if let Err(error) = stopped {
            eprintln!("could not stop the test's server (its watchdog will): {error}");
        }
    }
}

/// A certificate authority, and a server certificate it signed for `db.test` and 127.0.0.1:
/// `server.crt` and `server.key` (for the server) and `ca.pem` (for the client) in `dir`.
fn certificates(dir: &Path) {
    let authority = authority("Stratum test authority");
    let key = KeyPair::generate().unwrap();
    let mut server =
        CertificateParams::new(vec![SERVER_NAME.to_owned(), "127.0.0.1".to_owned()]).unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, SERVER_NAME);
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let certificate = server.signed_by(&key, &authority).unwrap();
    std::fs::write(dir.join("server.crt"), certificate.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("ca.pem"), authority.pem()).unwrap();
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// Starts a flow of two steps and completes its first: the store reads and writes.
fn run_a_flow(store: Arc<dyn Store>) {
    let plan = Arc::new(support::plan(&linear::linear_spec(2)));
    let runtime = Runtime::new(store, Config::default());
    let started = runtime
        .call(&Command::Start {
            plan,
            flow: None,
            inputs: linear::inputs(),
            started_by: None,
        })
        .unwrap()
        .to_json();
    let flow = started["flow_id"].as_str().unwrap().to_owned();
    let done = runtime
        .call(&Command::StepDone {
            flow_id: flow,
            step_id: linear::step_id(0),
            result: linear::result(0),
            usage: None,
        })
        .unwrap()
        .to_json();
    assert_eq!(done["step_id"], json!("s1"), "{done:#}");
}

/// The error `url` gets, which must not show the password `secret`.
fn refusal(url: &str) -> String {
    let message = PostgresStore::connect(url)
        .err()
        .unwrap_or_else(|| panic!("{url} connected"))
        .to_string();
    assert!(!message.contains("secret"), "{message}");
    message
}

#[test]
fn a_server_that_takes_only_tls_is_reached_when_its_certificate_verifies() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let ca = certs.path().join("ca.pem");
    let server = OwnServer::start(Some(certs.path()));
    let by_address = |params: &str| server.by_address(params);
    let by_name = |name: &str, params: &str| server.by_name(name, params);
    let ca_param = format!("sslrootcert={}", ca.display());

    // require with the authority: the pool's connections and the LISTEN one both use TLS
    // (the server takes nothing else), and a flow runs.
    let store = Arc::new(
        PostgresStore::connect(&by_address(&format!("sslmode=require&{ca_param}"))).unwrap(),
    );
    run_a_flow(store.clone());
    store.wait_for_change(Duration::from_millis(1)).unwrap();
    drop(store);

    // verify-full by the name the certificate carries.
    PostgresStore::connect(&by_name(
        SERVER_NAME,
        &format!("sslmode=verify-full&{ca_param}"),
    ))
    .unwrap();

    // Another name: verify-full (and require) refuse it, verify-ca checks the authority alone.
    let message = refusal(&by_name(
        "elsewhere.test",
        &format!("sslmode=verify-full&{ca_param}"),
    ));
    assert!(
        message.contains("not issued for the host name \"elsewhere.test\"")
            && message.contains("sslmode=verify-ca"),
        "{message}"
    );
    PostgresStore::connect(&by_name(
        "elsewhere.test",
        &format!("sslmode=verify-ca&{ca_param}"),
    ))
    .unwrap();

    // Without the authority the certificate verifies against no public one.
    let message = refusal(&by_address("sslmode=require"));
    assert!(
        message.contains("not signed by a public certificate authority")
            && message.contains("sslrootcert=PATH"),
        "{message}"
    );
    // Nor against another authority's file.
    let other = certs.path().join("other.pem");
    std::fs::write(&other, authority("Another authority").pem()).unwrap();
    let message = refusal(&by_address(&format!(
        "sslmode=verify-ca&sslrootcert={}",
        other.display()
    )));
    assert!(
        message.contains(&format!("nor one in sslrootcert={}", other.display())),
        "{message}"
    );
    // A file that is not there is named before anything is connected.
    let message = refusal(&by_address(
        "sslmode=require&sslrootcert=/nonexistent/ca.pem",
    ));
    assert!(
        message.contains("cannot read sslrootcert=/nonexistent/ca.pem"),
        "{message}"
    );

    // prefer (the default) encrypts without checking the certificate, as libpq does.
    PostgresStore::connect(&by_address("application_name=tls-test")).unwrap();

    // disable is refused by this server: so the connections above did use TLS.
    let message = refusal(&by_address("sslmode=disable"));
    assert!(message.contains("no encryption"), "{message}");

    // The binary takes the same URL from --database-url.
    let output = Process::new(env!("CARGO_BIN_EXE_stratum-mcp"))
        .args(["query", "flows", "--json", "--database-url"])
        .arg(by_address(&format!("sslmode=verify-full&{ca_param}")))
        .env_remove("STRATUM_DB")
        .env_remove("STRATUM_DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let flows: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(flows.as_array().map(Vec::len), Some(1), "{flows:#}");
}

#[test]
fn a_self_signed_certificate_verifies_when_named_unless_it_is_an_authoritys() {
    // A self-signed server certificate: named as sslrootcert, it is its own authority.
    let certs = tempfile::tempdir().unwrap();
    let key = KeyPair::generate().unwrap();
    let names = vec![SERVER_NAME.to_owned(), "127.0.0.1".to_owned()];
    let certificate = CertificateParams::new(names.clone())
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(certs.path().join("server.crt"), certificate.pem()).unwrap();
    std::fs::write(certs.path().join("server.key"), key.serialize_pem()).unwrap();
    let server = OwnServer::start(Some(certs.path()));
    let own = format!("sslrootcert={}", certs.path().join("server.crt").display());
    PostgresStore::connect(&server.by_name(SERVER_NAME, &format!("sslmode=verify-full&{own}")))
        .unwrap();
    drop(server);

    // One marked as an authority (CA:TRUE, as `openssl req -x509` makes by default) cannot be
    // a server's: the message says so rather than blame the authority.
    let authorities = tempfile::tempdir().unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(names).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let certificate = params.self_signed(&key).unwrap();
    std::fs::write(authorities.path().join("server.crt"), certificate.pem()).unwrap();
    std::fs::write(authorities.path().join("server.key"), key.serialize_pem()).unwrap();
    let server = OwnServer::start(Some(authorities.path()));
    let named = format!(
        "sslrootcert={}",
        authorities.path().join("server.crt").display()
    );
    let message = refusal(&server.by_address(&format!("sslmode=verify-ca&{named}")));
    assert!(
        message.contains("the server's certificate is an authority's"),
        "{message}"
    );
}

#[test]
fn a_server_without_tls_is_refused_under_require_and_reached_under_disable() {
    // The tests' shared server, when it has no TLS (the throwaway one never has); else a
    // plain server of this test's own.
    let shared = support::postgres::server_url();
    let ssl: Result<String, String> = admin(shared, |client| {
        client.query_one("SHOW ssl", &[]).map(|row| row.get(0))
    });
    let own;
    let url = if ssl.as_deref() == Ok("off") {
        support::postgres::database_url()
    } else {
        own = OwnServer::start(None);
        format!("postgres://postgres@{}/postgres", own.address)
    };
    let separator = if url.contains('?') { '&' } else { '?' };
    let with_password = url.replacen("://postgres@", "://postgres:secret@", 1);

    let message = refusal(&format!("{with_password}{separator}sslmode=require"));
    assert!(
        message.contains("does not accept TLS connections")
            && message.contains("sslmode=require requires TLS")
            && message.contains("sslmode=disable"),
        "{message}"
    );

    let store =
        PostgresStore::connect(&format!("{with_password}{separator}sslmode=disable")).unwrap();
    run_a_flow(Arc::new(store));
}

/// The script's own check: a directory without the certificate is refused before initdb.
#[test]
fn the_script_refuses_an_ssl_directory_without_a_certificate() {
    let empty = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let envs: [(&str, &OsStr); 2] = [
        ("THROWAWAY_POSTGRES_ROOT", root.path().as_os_str()),
        ("THROWAWAY_POSTGRES_SSL_DIR", empty.path().as_os_str()),
    ];
    let message = start_server(std::process::id(), &envs).unwrap_err();
    assert!(message.contains("has no readable server.crt"), "{message}");
    let instances: Vec<PathBuf> = std::fs::read_dir(root.path())
        .unwrap()
        .flatten()
        .filter_map(|user| std::fs::read_dir(user.path()).ok())
        .flat_map(|entries| entries.flatten().map(|entry| entry.path()))
        .filter(|path| path.is_dir())
        .collect();
    assert!(instances.is_empty(), "{instances:?}");
}
