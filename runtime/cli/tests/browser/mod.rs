//! Headless Chromium for the tests, driven over WebDriver with fantoccini. Debian's `chromium`
//! and `chromedriver` come from `scripts/ensure-chromium`, which installs them when missing
//! (the browser tests are never skipped). Each [`Browser`] runs its own chromedriver on a free
//! port of 127.0.0.1, in a process group of its own, with a fresh profile directory; dropping
//! it kills that group, chromedriver and the Chromium it started, even when the test panics.
//!
//! Pages are read through CSS selectors only (the console's markup contract), and every wait
//! finds its element again on each try, since the live pages replace their parts in place.

#![allow(dead_code)]

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// The size of the window, and so of every screenshot.
pub const WIDTH: u32 = 1280;
pub const HEIGHT: u32 = 800;

/// How long a wait for the page lasts before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// With this variable set to `1`, screenshots are saved to `docs/console/NAME.png`.
pub const SCREENSHOTS_ENV: &str = "STRATUM_SCREENSHOTS";

/// Chromium's flags: headless, as root in a container (no sandbox, no GPU), and with nothing
/// that reaches out to Google's services, which this machine's closed network refuses (and
/// Chromium slows down retrying).
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
];

/// A headless Chromium with its chromedriver. The fields drop in order: the processes are
/// gone before their profile directory is removed.
pub struct Browser {
    pub client: Client,
    _driver: Driver,
    _profile: tempfile::TempDir,
}

/// A running chromedriver, killed with its process group when dropped.
struct Driver {
    child: Child,
    /// What chromedriver printed.
    log: Arc<Mutex<String>>,
}

impl Browser {
    /// Starts chromedriver and a Chromium session with a 1280x800 window; panics (saying what
    /// to do) when there is no Chromium to be had.
    pub async fn start() -> Browser {
        let (chromium, chromedriver) = ensure_chromium();
        let mut child = Command::new(&chromedriver)
            .arg("--port=0")
            // Its own process group, so that Chromium (its child) is killed with it.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", chromedriver.display()));
        let stdout = child.stdout.take().expect("chromedriver's stdout is piped");
        let driver = Driver {
            child,
            log: Arc::new(Mutex::new(String::new())),
        };
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = String::new();
        let port: u16 = loop {
            let Some(Ok(line)) = lines.next() else {
                panic!("chromedriver exited before listening:\n{seen}");
            };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                break rest
                    .trim_end_matches('.')
                    .trim()
                    .parse()
                    .unwrap_or_else(|error| {
                        panic!("chromedriver's port in {line:?}: {error}");
                    });
            }
        };
        driver
            .log
            .lock()
            .expect("the log's lock is not poisoned")
            .push_str(&seen);
        let sink = driver.log.clone();
        // Drained, so that chromedriver never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut sink = sink.lock().expect("the log's lock is not poisoned");
                sink.push_str(&line);
                sink.push('\n');
            }
        });
        let profile = tempfile::tempdir().expect("a temporary profile directory");
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|flag| flag.to_string()).collect();
        args.push(format!("--window-size={WIDTH},{HEIGHT}"));
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("capabilities are an object")
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "no Chromium session: {error}\nchromedriver said:\n{}",
                    driver.log.lock().expect("the log's lock is not poisoned")
                )
            });
        let browser = Browser {
            client,
            _driver: driver,
            _profile: profile,
        };
        browser.fit_window().await;
        browser
    }

    /// Makes the page's viewport (what a screenshot shows) exactly [`WIDTH`] x [`HEIGHT`].
    async fn fit_window(&self) {
        for _ in 0..3 {
            let inner = self
                .client
                .execute("return [window.innerWidth, window.innerHeight];", vec![])
                .await
                .expect("the viewport's size");
            let size = |n: usize| inner.get(n).and_then(Value::as_u64).unwrap_or(0) as u32;
            let (width, height) = (size(0), size(1));
            if (width, height) == (WIDTH, HEIGHT) {
                return;
            }
            let (outer_width, outer_height) = self
                .client
                .get_window_size()
                .await
                .expect("the window's size");
            self.client
                .set_window_size(
                    (outer_width as u32 + WIDTH).saturating_sub(width),
                    (outer_height as u32 + HEIGHT).saturating_sub(height),
                )
                .await
                .expect("the window resizes");
        }
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|error| panic!("cannot open {url}: {error}"));
    }

    /// The path of the page shown.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("the current URL");
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    /// The first element `css` selects, once there is one.
    pub async fn find(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(error) => panic!(
                "no `{css}` on {} after {PATIENCE:?}: {error}\n{}",
                self.path().await,
                self.text_of_page().await
            ),
        }
    }

    /// Every element `css` selects now (perhaps none).
    pub async fn all(&self, css: &str) -> Vec<Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("cannot look for `{css}`: {error}"))
    }

    /// The attribute `name` of the first element `css` selects, once there is one.
    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        let element = self.find(css).await;
        element
            .attr(name)
            .await
            .unwrap_or_else(|error| panic!("cannot read `{name}` of `{css}`: {error}"))
    }

    /// The text of the first element `css` selects, once there is one, trimmed. A live page
    /// may swap the element between finding it and reading it (the script refreshes a page
    /// as soon as its event stream opens): it is then found again.
    pub async fn text(&self, css: &str) -> String {
        let until = Instant::now() + PATIENCE;
        loop {
            let element = self.find(css).await;
            match element.text().await {
                Ok(text) => return text.trim().to_owned(),
                Err(error)
                    if error.to_string().contains("stale element") && Instant::now() < until =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("cannot read the text of `{css}`: {error}"),
            }
        }
    }

    /// Waits until `check` holds of the page (asked again every 100 ms, for [`PATIENCE`]);
    /// `what` names the awaited state in the failure.
    pub async fn until<F>(&self, what: &str, mut check: impl FnMut() -> F)
    where
        F: Future<Output = bool>,
    {
        let until = Instant::now() + PATIENCE;
        while !check().await {
            if Instant::now() > until {
                panic!(
                    "{what}: not so after {PATIENCE:?} on {}\n{}",
                    self.path().await,
                    self.text_of_page().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the first element `css` selects has `name="value"` (looking the element up
    /// on every try, since the live pages replace their parts).
    pub async fn until_attr(&self, css: &str, name: &str, value: &str) {
        self.until(&format!("`{css}` with {name}={value:?}"), || async {
            match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.attr(name).await.ok().flatten().as_deref() == Some(value),
                Err(_) => false,
            }
        })
        .await;
    }

    /// A 1280x800 PNG of the page shown, saved as `docs/console/NAME.png` when
    /// `STRATUM_SCREENSHOTS=1` (and only checked otherwise).
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        assert_eq!(
            png_size(&png),
            Some((WIDTH, HEIGHT)),
            "the screenshot of {name} is a {WIDTH}x{HEIGHT} PNG"
        );
        if std::env::var(SCREENSHOTS_ENV).is_ok_and(|value| value == "1") {
            let dir = screenshots_dir();
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
            let path = dir.join(format!("{name}.png"));
            std::fs::write(&path, png)
                .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
        }
    }

    /// The page's visible text, for failure messages (at most 4000 characters).
    pub async fn text_of_page(&self) -> String {
        let text = match self.client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(error) => format!("(no body: {error})"),
        };
        let shown: String = text.chars().take(4000).collect();
        format!("--- the page says:\n{shown}\n---")
    }

    /// Ends the session (Chromium exits), then chromedriver.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver, and Chromium with its helper processes.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The paths of chromium and chromedriver, from `scripts/ensure-chromium` (which installs them
/// when missing), asked once per test binary so that its tests never install at once; panics
/// with the script's message when they cannot be had.
pub fn ensure_chromium() -> (PathBuf, PathBuf) {
    static PATHS: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    match PATHS.get_or_init(run_ensure_chromium) {
        Ok(paths) => paths.clone(),
        Err(message) => panic!("{message}"),
    }
}

fn run_ensure_chromium() -> Result<(PathBuf, PathBuf), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ensure-chromium");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", script.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut paths = stdout.lines().map(PathBuf::from);
    match (output.status.success(), paths.next(), paths.next()) {
        (true, Some(chromium), Some(chromedriver)) => {
            if !stderr.trim().is_empty() {
                eprintln!("{stderr}");
            }
            Ok((chromium, chromedriver))
        }
        _ => Err(format!(
            "the browser tests need Chromium and ChromeDriver and none could be had; they are \
             not skipped.\n{} failed ({}):\n{stderr}",
            script.display(),
            output.status
        )),
    }
}

/// Where screenshots go with `STRATUM_SCREENSHOTS=1`.
pub fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/console")
}

/// The width and height in a PNG's header.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if !png.starts_with(SIGNATURE) {
        return None;
    }
    let number = |at: usize| -> Option<u32> {
        let bytes: [u8; 4] = png.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_be_bytes(bytes))
    };
    Some((number(16)?, number(20)?))
}
