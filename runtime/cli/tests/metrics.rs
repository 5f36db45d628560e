//! `/metrics`: a real Prometheus (Debian's, installed by `scripts/ensure-prometheus` when
//! missing) scrapes `stratum-mcp serve` on its `--metrics-listen` address while an agent
//! drives a flow over MCP, and answers queries for our series; on the main address the same
//! exposition needs a token.

#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

mod mcp;
mod serve;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp::{McpServer, Protocol, status};
use serde_json::{Value, json};
use serve::{Serve, State, http};

/// Prometheus, from `scripts/ensure-prometheus`.
fn prometheus() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ensure-prometheus");
    let output = Command::new(&script)
        .output()
        .expect("ensure-prometheus runs");
    assert!(
        output.status.success(),
        "scripts/ensure-prometheus could not provide Prometheus:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus process, ended when dropped.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Prometheus scraping `target` every second, its data in `dir`.
    fn start(dir: &Path, target: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: stratum\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new(prometheus())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts");
        Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// The samples of `query` once there are any (within a minute).
    async fn query(&self, query: &str) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let answer = http()
                .post(format!("{}/api/v1/query", self.url))
                .form(&[("query", query)])
                .send()
                .await;
            if let Ok(answer) = answer
                && let Ok(text) = answer.text().await
                && let Ok(body) = serde_json::from_str::<Value>(&text)
                && let Some(result) = body["data"]["result"].as_array()
                && !result.is_empty()
            {
                return result.clone();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "Prometheus has no samples of {query} after a minute"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

fn value(sample: &Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_scrapes_serve_and_answers_for_our_series() {
    let state = State::new();
    let secret = state.token("agent", false);
    let metrics = format!("127.0.0.1:{}", free_port());
    let serve = Serve::start(&state, &["--metrics-listen", &metrics]);

    // An agent's flow: a refused result (its ensure fails), an accepted one, the gate approved.
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await;
    let flow = mcp::start_reviewed_work(&mut agent).await;
    let work = |score: f64| {
        json!({"flow_id": flow, "step_id": "work",
               "result": {"result": "r", "quality_score": score}})
    };
    let refused = agent.call("stratum_step_done", work(0.1)).await;
    assert_eq!(status(&refused), "ensure_failed", "{refused:#}");
    let gate = agent.call("stratum_step_done", work(0.9)).await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");
    // A second flow left waiting at its gate.
    let waiting = mcp::flow_at_gate(&mut agent).await;
    agent
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": flow, "step_id": "review", "outcome": "approve",
                   "rationale": "fine", "resolved_by": "human"}),
        )
        .await;
    agent.stop().await;

    // On the main address the exposition needs a token (a read-only one will do).
    let anonymous = http().get(serve.url("/metrics")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let reader = state.token("dashboard", true);
    let shown = http()
        .get(serve.url("/metrics"))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), 200);
    assert!(
        shown.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = shown.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(
        stratum_mcp::metrics::sample(&text, "stratum_gates_pending", ""),
        Some(1.0),
        "{text}"
    );

    let data = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(data.path(), &metrics);
    let attempts = prometheus
        .query(r#"stratum_step_attempts_total{flow="reviewed_work",step="work"}"#)
        .await;
    let by_outcome = |outcome: &str| {
        attempts
            .iter()
            .filter(|sample| sample["metric"]["outcome"] == outcome)
            .map(value)
            .sum::<f64>()
    };
    assert_eq!(by_outcome("refused"), 1.0, "{attempts:#?}");
    assert_eq!(by_outcome("accepted"), 2.0, "{attempts:#?}");
    let violations = prometheus
        .query(r#"stratum_ensure_violations_total{step="work"}"#)
        .await;
    assert_eq!(value(&violations[0]), 1.0, "{violations:#?}");
    let complete = prometheus
        .query(r#"stratum_flows{status="complete"}"#)
        .await;
    assert_eq!(value(&complete[0]), 1.0, "{complete:#?}");
    let pending = prometheus.query("stratum_gates_pending").await;
    assert_eq!(value(&pending[0]), 1.0, "{pending:#?} ({waiting})");
    let decided = prometheus
        .query(r#"stratum_gate_decisions_total{outcome="approve",resolved_by="human"}"#)
        .await;
    assert_eq!(value(&decided[0]), 1.0, "{decided:#?}");
    let calls = prometheus
        .query(r#"sum(stratum_mcp_call_duration_seconds_count{tool="stratum_step_done"})"#)
        .await;
    assert_eq!(value(&calls[0]), 3.0, "{calls:#?}");
    let commands = prometheus
        .query(r#"sum(stratum_store_command_duration_seconds_count{store="sqlite"})"#)
        .await;
    assert!(value(&commands[0]) >= 5.0, "{commands:#?}");
    drop(serve);
}
