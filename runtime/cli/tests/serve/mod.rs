//! `stratum-mcp serve` as tests start it: the real binary on a free port of 127.0.0.1 over a
//! state directory of its own (with its SQLite database, or a PostgreSQL URL), its operator CLI
//! on the same store, and what a browser does (sign in, find a form's CSRF token).

#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command as Process, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_stratum-mcp")
}

/// A state directory with its database (or a PostgreSQL store).
pub struct State {
    pub dir: tempfile::TempDir,
    /// The PostgreSQL store every process uses instead of the directory's SQLite file.
    pub database_url: Option<String>,
}

impl State {
    pub fn new() -> State {
        State {
            dir: tempfile::tempdir().unwrap(),
            database_url: None,
        }
    }

    /// A state directory whose processes use the PostgreSQL store at `url`.
    pub fn postgres(url: String) -> State {
        State {
            database_url: Some(url),
            ..State::new()
        }
    }

    /// The SQLite database (unused with [`State::postgres`]).
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("state.db")
    }

    /// The binary's global options that choose the store.
    pub fn store_args(&self) -> Vec<OsString> {
        match &self.database_url {
            Some(url) => vec!["--database-url".into(), url.into()],
            None => vec!["--db".into(), self.db().into()],
        }
    }

    /// Runs an operator command on the store; its exit status and JSON answer.
    pub fn cli(&self, args: &[&str]) -> (i32, Value) {
        let output = Process::new(binary())
            .args(self.store_args())
            .args(args)
            .env_remove("STRATUM_DATABASE_URL")
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        )
    }

    /// A new token's secret.
    pub fn token(&self, name: &str, read_only: bool) -> String {
        let mut args = vec!["token", "create", "--name", name, "--json"];
        if read_only {
            args.push("--read-only");
        }
        let (code, created) = self.cli(&args);
        assert_eq!(code, 0, "{created}");
        created["secret"].as_str().unwrap().to_owned()
    }
}

/// A running `stratum-mcp serve`.
pub struct Serve {
    pub child: Child,
    pub address: SocketAddr,
    pub stderr: Arc<Mutex<String>>,
    /// The thread that copies the server's standard error into `stderr`, until it ends.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Serve {
    pub fn start(state: &State, args: &[&str]) -> Serve {
        Serve::try_start(state, args).unwrap_or_else(|(code, stderr)| {
            panic!("serve exited {code:?} before listening: {stderr}")
        })
    }

    /// The server on `listen` (`[::1]:0`, ...) instead of a free port of 127.0.0.1.
    pub fn start_on(state: &State, listen: &str, args: &[&str]) -> Serve {
        Serve::try_start_on(state, listen, args).unwrap_or_else(|(code, stderr)| {
            panic!("serve exited {code:?} before listening on {listen}: {stderr}")
        })
    }

    /// The server once it listens, or its exit status and standard error.
    pub fn try_start(state: &State, args: &[&str]) -> Result<Serve, (Option<i32>, String)> {
        Serve::try_start_on(state, "127.0.0.1:0", args)
    }

    /// The server with these variables added to its environment.
    pub fn start_with_env(state: &State, env: &[(&str, &str)], args: &[&str]) -> Serve {
        Serve::try_start_with(state, "127.0.0.1:0", env, args)
            .unwrap_or_else(|(code, stderr)| panic!("serve exited {code:?}: {stderr}"))
    }

    fn try_start_on(
        state: &State,
        listen: &str,
        args: &[&str],
    ) -> Result<Serve, (Option<i32>, String)> {
        Serve::try_start_with(state, listen, &[], args)
    }

    fn try_start_with(
        state: &State,
        listen: &str,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Result<Serve, (Option<i32>, String)> {
        let mut child = Process::new(binary())
            .args(state.store_args())
            .args(["serve", "--listen", listen])
            .args(args)
            .env_remove("STRATUM_DATABASE_URL")
            .env("STRATUM_LOG", "info,stratum_serve=debug")
            .envs(env.iter().copied())
            .current_dir(state.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let address = loop {
            let Some(Ok(line)) = lines.next() else {
                let code = child.wait().ok().and_then(|status| status.code());
                return Err((code, seen));
            };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest.split(' ').next().unwrap().parse().unwrap();
            }
        };
        let stderr = Arc::new(Mutex::new(seen));
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut sink = sink.lock().unwrap();
                sink.push_str(&line);
                sink.push('\n');
            }
        });
        Ok(Serve {
            child,
            address,
            stderr,
            reader: Some(reader),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub fn signal(&self, name: &str) {
        let status = Process::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The exit status once the process ends (within `timeout`).
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its last lines may still be in the pipe: `stderr` is complete once the
                // reader has seen the pipe close.
                if let Some(reader) = self.reader.take() {
                    reader.join().unwrap();
                }
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "serve still runs after {timeout:?}: {}",
            self.stderr.lock().unwrap()
        );
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP client that shows redirects instead of following them and keeps no cookies.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Signs in with `secret`: the session cookie (`name=value`).
pub async fn sign_in(serve: &Serve, secret: &str) -> String {
    let answer = http()
        .post(serve.url("/signin"))
        .form(&[("token", secret)])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    let cookie = answer.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    cookie.split(';').next().unwrap().to_owned()
}

/// The CSRF token in a page's forms.
pub fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}
