//! The web console over plain HTTP, as scripts and browsers without JavaScript meet it: the
//! real `stratum-mcp serve`, flows driven by an agent over MCP HTTP, and the pages read back
//! by the markup contract each page module documents (ids, classes, `data-` attributes).
//! The browser tests (`console_browser.rs`) drive the same pages in Chromium.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod mcp;
mod merged;
mod serve;

use std::time::{Duration, Instant};

use mcp::{McpServer, Protocol, example, flow_at_gate, status};
use reqwest::StatusCode;
use serde_json::{Value, json};
use serve::{Serve, State, csrf_of, http, sign_in};

/// An agent over MCP HTTP with three flows: one running (`sentiment`, at `s1`), one waiting at
/// its gate (`reviewed_work`, at `review`), one complete (`sentiment`).
struct Fixture {
    state: State,
    serve: Serve,
    secret: String,
    agent: McpServer,
    running: String,
    at_gate: String,
    complete: String,
}

impl Fixture {
    async fn new() -> Fixture {
        let state = State::new();
        let secret = state.token("alice", false);
        let serve = Serve::start(&state, &[]);
        let mut agent = McpServer::start_http(
            &serve.url("/mcp"),
            &secret,
            Protocol::Stateless,
            state.dir.path(),
        )
        .await;
        let complete = start_sentiment(&mut agent).await;
        let done = agent
            .call(
                "stratum_step_done",
                json!({"flow_id": complete, "step_id": "s1",
                       "result": {"label": "positive", "confidence": 0.9}}),
            )
            .await;
        assert_eq!(status(&done), "complete");
        let at_gate = flow_at_gate(&mut agent).await;
        let running = start_sentiment(&mut agent).await;
        Fixture {
            state,
            serve,
            secret,
            agent,
            running,
            at_gate,
            complete,
        }
    }

    /// A page fetched with the bearer token: its status and HTML.
    async fn get(&self, path: &str) -> (StatusCode, String) {
        get_with(&self.serve, path, &format!("Bearer {}", self.secret)).await
    }
}

async fn start_sentiment(agent: &mut McpServer) -> String {
    let planned = agent
        .call(
            "stratum_plan",
            json!({"spec": example("sentiment.stratum.yaml"), "flow": "run",
                   "inputs": {"text": "I love it"}}),
        )
        .await;
    planned["flow_id"].as_str().unwrap().to_owned()
}

async fn get_with(serve: &Serve, path: &str, authorization: &str) -> (StatusCode, String) {
    let answer = http()
        .get(serve.url(path))
        .header("authorization", authorization)
        .send()
        .await
        .unwrap();
    (answer.status(), answer.text().await.unwrap())
}

/// The flow ids of the list's rows, with their `data-status`, in order.
fn rows(page: &str) -> Vec<(String, String)> {
    page.split("<tr data-flow-id=\"")
        .skip(1)
        .map(|row| {
            let id = row.split('"').next().unwrap().to_owned();
            let status = row
                .split("data-status=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_owned();
            (id, status)
        })
        .collect()
}

/// The `data-state` of step `step`'s box in the graph.
fn step_state<'p>(page: &'p str, step: &str) -> &'p str {
    let node = page
        .split("<g class=\"step state-")
        .find(|node| node.contains(&format!("data-step-id=\"{step}\"")))
        .unwrap_or_else(|| panic!("no box for step {step}"));
    node.split("data-state=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flow_list_shows_every_flow_and_filters_and_searches_them() {
    let fixture = Fixture::new().await;
    let (code, page) = fixture.get("/").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        rows(&page),
        [
            (fixture.running.clone(), "running".to_owned()),
            (fixture.at_gate.clone(), "awaiting_gate".to_owned()),
            (fixture.complete.clone(), "complete".to_owned()),
        ],
        "newest first"
    );
    assert!(
        page.contains("<td class=\"current-step\">review</td>"),
        "{page}"
    );
    assert!(page.contains(&format!("href=\"/flows/{}\"", fixture.running)));
    assert!(page.contains("data-filter=\"all\" href=\"/?status=all\" aria-current=\"page\""));
    for (query, expected) in [
        ("/?status=gate", vec![&fixture.at_gate]),
        ("/?status=running", vec![&fixture.running, &fixture.at_gate]),
        ("/?status=finished", vec![&fixture.complete]),
        ("/?status=failed", vec![]),
        ("/?q=REVIEWED", vec![&fixture.at_gate]),
        (
            &format!("/?q={}", &fixture.complete[..8]),
            vec![&fixture.complete],
        ),
        ("/?status=finished&q=reviewed", vec![]),
    ] {
        let (code, page) = fixture.get(query).await;
        assert_eq!(code, StatusCode::OK, "{query}");
        let ids: Vec<String> = rows(&page).into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids.iter().collect::<Vec<_>>(), expected, "{query}");
        if expected.is_empty() {
            assert!(page.contains("<p id=\"no-flows\">"), "{query}");
        }
    }
    // What a search shows is escaped, in the field and in the filters' links.
    let (_, page) = fixture.get("/?q=%3Cscript%3E").await;
    assert!(!page.contains("<script>"), "{page}");
    assert!(page.contains("value=\"&lt;script&gt;\""));
    fixture.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_page_draws_its_graph_and_shows_every_failed_attempt() {
    let mut fixture = Fixture::new().await;
    let refused = fixture
        .agent
        .call(
            "stratum_step_done",
            json!({"flow_id": fixture.running, "step_id": "s1",
                   "result": {"label": "positive", "confidence": 0.2}}),
        )
        .await;
    assert_eq!(status(&refused), "ensure_failed");
    let violation = refused["violations"][0].as_str().unwrap().to_owned();

    let (code, page) = fixture.get(&format!("/flows/{}", fixture.running)).await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        page.contains("<h1>Flow <span class=\"name\">run</span></h1>"),
        "{page}"
    );
    assert!(page.contains("id=\"flow-status\" data-status=\"running\""));
    assert!(page.contains("<svg id=\"dag\""));
    assert_eq!(step_state(&page, "s1"), "current");
    let attempts = page.split("<section id=\"attempts\"").nth(1).unwrap();
    let attempts = attempts.split("</section>").next().unwrap();
    assert!(
        attempts.contains(&format!(
            "<li class=\"violation\">{}</li>",
            stratum_serve::pages::escape(&violation)
        )),
        "{attempts}"
    );
    assert!(attempts.contains("attempt 1"), "{attempts}");
    assert!(attempts.contains("has 1 attempt left"), "{attempts}");
    let dispatch = page.split("<section id=\"dispatch\"").nth(1).unwrap();
    assert!(dispatch.contains("&quot;execute_step&quot;"), "{dispatch}");
    for section in [
        "rounds",
        "iterations",
        "budget",
        "children",
        "checkpoints",
        "timeline",
        "steps",
    ] {
        assert!(
            page.contains(&format!("<section id=\"{section}\"")),
            "{section}"
        );
    }
    // Looking at a flow changes nothing: the agent's dispatch is as it was.
    let resumed = fixture
        .agent
        .call("stratum_resume", json!({"flow_id": fixture.running}))
        .await;
    assert_eq!(resumed["retries_remaining"], 1, "{resumed:#}");

    let (_, page) = fixture.get(&format!("/flows/{}", fixture.at_gate)).await;
    assert_eq!(step_state(&page, "work"), "done");
    assert_eq!(step_state(&page, "review"), "gate");
    assert!(page.contains("data-status=\"awaiting_gate\""));
    let (_, page) = fixture.get(&format!("/flows/{}", fixture.complete)).await;
    assert_eq!(step_state(&page, "s1"), "done");
    assert!(page.contains("<section id=\"output\""));
    assert!(page.contains("<svg class=\"timeline\""));

    for missing in [
        "/flows/not-an-id",
        "/flows/00000000000000000000000000000000",
    ] {
        let (code, page) = fixture.get(missing).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{missing}");
        assert!(page.contains("No such flow"), "{missing}");
    }
    fixture.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_is_decided_from_the_console_once_and_the_audit_names_the_token() {
    let mut fixture = Fixture::new().await;
    let client = http();
    let cookie = sign_in(&fixture.serve, &fixture.secret).await;
    let page = client
        .get(fixture.serve.url("/gates"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!(
            "data-flow-id=\"{}\" data-step-id=\"review\"",
            fixture.at_gate
        )),
        "{page}"
    );
    let action = format!("/gates/{}/review", fixture.at_gate);
    assert!(page.contains(&format!("action=\"{action}\"")));
    for decision in ["approve", "revise", "kill"] {
        assert!(page.contains(&format!("name=\"decision\" value=\"{decision}\"")));
    }
    let csrf = csrf_of(&page);
    let post = |form: Vec<(&'static str, String)>| {
        client
            .post(fixture.serve.url(&action))
            .header("cookie", &cookie)
            .form(&form)
            .send()
    };

    let unknown = post(vec![
        ("decision", "maybe".to_owned()),
        ("csrf", csrf.clone()),
    ])
    .await
    .unwrap();
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
    let forged = post(vec![("decision", "approve".to_owned())])
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN, "no CSRF token");

    // A revise or a kill needs a reason: the form says so (an approval may go without), and the
    // server refuses one without, the gate still waiting.
    assert!(
        page.contains("name=\"rationale\" rows=\"2\" maxlength=\"4000\" required"),
        "{page}"
    );
    assert!(page.contains("value=\"approve\" class=\"approve\" formnovalidate>"));
    for (decision, rationale) in [("revise", "   "), ("kill", "")] {
        let refused = post(vec![
            ("decision", decision.to_owned()),
            ("rationale", rationale.to_owned()),
            ("csrf", csrf.clone()),
        ])
        .await
        .unwrap();
        assert_eq!(
            refused.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{decision}"
        );
        let refused = refused.text().await.unwrap();
        assert!(
            refused.contains(&format!(
                "<p role=\"alert\" class=\"problem\">The gate review of flow {} was not \
                 decided: to {decision} it, say why in the rationale",
                fixture.at_gate
            )),
            "{refused}"
        );
        assert!(
            refused.contains(&format!("data-flow-id=\"{}\"", fixture.at_gate)),
            "the gate still waits: {refused}"
        );
    }

    let approved = post(vec![
        ("decision", "approve".to_owned()),
        ("rationale", "  reads well  ".to_owned()),
        ("csrf", csrf.clone()),
    ])
    .await
    .unwrap();
    assert_eq!(approved.status(), StatusCode::SEE_OTHER);
    let location = approved.headers()["location"].to_str().unwrap().to_owned();
    let told = client
        .get(fixture.serve.url(&location))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        told.contains(&format!(
            "<p role=\"status\" class=\"notice\">Approved the gate review of flow {}",
            fixture.at_gate
        )),
        "{told}"
    );
    assert!(
        told.contains("<p id=\"no-gates\""),
        "no gate waits any more: {told}"
    );

    let again = post(vec![
        ("decision", "kill".to_owned()),
        ("rationale", "too late".to_owned()),
        ("csrf", csrf.clone()),
    ])
    .await
    .unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let again = again.text().await.unwrap();
    assert!(
        again.contains("<p role=\"alert\" class=\"problem\">The gate review of flow"),
        "{again}"
    );
    assert!(
        !again.contains("stratum_plan") && !again.contains("stratum_step_done"),
        "a person is not given an agent's advice: {again}"
    );

    let (code, flow) = fixture
        .state
        .cli(&["query", "flow", &fixture.at_gate, "--json"]);
    assert_eq!(code, 0);
    let gates: Vec<&Value> = flow["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|round| round["steps"].as_array().unwrap())
        .chain(flow["records"].as_array().unwrap())
        .filter(|record| record["type"] == "gate")
        .collect();
    assert_eq!(gates.len(), 1, "decided once: {flow:#}");
    assert_eq!(gates[0]["outcome"], "approve");
    assert_eq!(gates[0]["resolved_by"], "human");
    assert_eq!(gates[0]["actor"], "alice");
    assert_eq!(gates[0]["rationale"], "reads well");
    let next = fixture
        .agent
        .call("stratum_resume", json!({"flow_id": fixture.at_gate}))
        .await;
    assert_ne!(status(&next), "await_gate", "{next:#}");
    fixture.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_sees_the_gates_but_no_form() {
    let fixture = Fixture::new().await;
    let reader = fixture.state.token("viewer", true);
    let (code, page) = get_with(&fixture.serve, "/gates", &format!("Bearer {reader}")).await;
    assert_eq!(code, StatusCode::OK);
    assert!(page.contains("class=\"gate\""), "{page}");
    assert!(page.contains("<p class=\"read-only\">"));
    assert!(!page.contains("name=\"decision\""));
    let refused = http()
        .post(
            fixture
                .serve
                .url(&format!("/gates/{}/review", fixture.at_gate)),
        )
        .bearer_auth(&reader)
        .form(&[("decision", "approve")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let (_, gates) = fixture.state.cli(&["query", "gates", "--json"]);
    assert_eq!(gates.as_array().unwrap().len(), 1, "the gate still waits");
    fixture.agent.stop().await;
}

/// A person deciding in the console decides as their token, under the gate function's
/// approval rules: the flow's starter is refused an approval, an approval before the last one
/// needed is counted and said so, the last one resolves the gate, and the flow's page says who
/// started it and who approved.
#[tokio::test]
async fn the_console_decides_as_the_token_under_the_approval_rules() {
    let state = State::new();
    let alice = state.token("alice", false);
    let bob = state.token("bob", false);
    let carol = state.token("carol", false);
    let config = state.dir.path().join("rules.toml");
    std::fs::write(
        &config,
        "[gates.functions.review_gate]\nmin_approvals = 2\nself_approval = false\n",
    )
    .unwrap();
    let serve = Serve::start(&state, &["--config", config.to_str().unwrap()]);
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        &alice,
        Protocol::Stateless,
        state.dir.path(),
    )
    .await;
    let flow = flow_at_gate(&mut agent).await;
    let client = http();
    let action = format!("/gates/{flow}/review");
    let approve = |secret: String| {
        let (client, serve, action) = (&client, &serve, &action);
        async move {
            let cookie = sign_in(serve, &secret).await;
            let page = client
                .get(serve.url("/gates"))
                .header("cookie", &cookie)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let answer = client
                .post(serve.url(action))
                .header("cookie", &cookie)
                .form(&[
                    ("decision", "approve".to_owned()),
                    ("rationale", "fine".to_owned()),
                    ("csrf", csrf_of(&page)),
                ])
                .send()
                .await
                .unwrap();
            let status = answer.status();
            let body = match answer.headers().get("location") {
                Some(location) => client
                    .get(serve.url(location.to_str().unwrap()))
                    .header("cookie", &cookie)
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap(),
                None => answer.text().await.unwrap(),
            };
            (status, body)
        }
    };

    let (status_code, page) = approve(alice).await;
    assert_eq!(status_code, StatusCode::CONFLICT, "{page}");
    assert!(page.contains("(self_approval)"), "{page}");
    let (status_code, page) = approve(bob).await;
    assert_eq!(status_code, StatusCode::SEE_OTHER);
    assert!(
        page.contains(&format!(
            "Approved the gate review of flow {flow}; your approval is counted, and the gate \
             waits for other approvers."
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!("data-flow-id=\"{flow}\"")),
        "still waiting: {page}"
    );
    let (status_code, page) = approve(carol).await;
    assert_eq!(status_code, StatusCode::SEE_OTHER);
    assert!(page.contains("the flow is complete"), "{page}");

    let cookie = sign_in(&serve, &state.token("dave", true)).await;
    let shown = client
        .get(serve.url(&format!("/flows/{flow}")))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(shown.contains(" by alice</dd>"), "{shown}");
    assert!(shown.contains("approval 1 of 2"), "{shown}");
    assert!(shown.contains("human (token bob)"), "{shown}");
    assert!(shown.contains("approve (bob, carol)"), "{shown}");
    agent.stop().await;
}

#[tokio::test]
async fn assets_are_served_to_anyone_and_no_path_leads_elsewhere() {
    let state = State::new();
    let serve = Serve::start(&state, &[]);
    for (name, media_type) in [
        ("console.css", "text/css"),
        ("console.js", "text/javascript"),
    ] {
        let answer = http()
            .get(serve.url(&format!("/assets/{name}")))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{name}");
        let served = answer.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(served.starts_with(media_type), "{name}: {served}");
        assert_eq!(answer.headers()["x-content-type-options"], "nosniff");
    }
    for path in [
        "/assets/nope.css",
        "/assets/..%2F..%2FCargo.toml",
        "/assets/console.css%00",
    ] {
        let answer = http().get(serve.url(path)).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{path}");
    }
    // Paths as written, which a client would tidy up first: a name the table lacks, or a
    // route that is not the assets' (and needs a token).
    for path in [
        "/assets/../../Cargo.toml",
        "/assets/%2e%2e/%2e%2e/Cargo.toml",
        "/assets/..%5c..%5cCargo.toml",
        "/assets//etc/passwd",
    ] {
        let raw = raw_get(serve.address, path);
        let status = raw.split(' ').nth(1).unwrap_or("");
        assert!(status == "404" || status == "401", "{path}: {raw}");
        assert!(
            !raw.contains("[workspace]") && !raw.contains("root:"),
            "{raw}"
        );
    }
}

fn raw_get(address: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_pages_hear_of_each_change_and_do_not_hold_a_shutdown() {
    let mut fixture = Fixture::new().await;
    let mut events = http()
        .get(fixture.serve.url("/events"))
        .bearer_auth(&fixture.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    assert!(
        events.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    // The feed starts with its first listener: give it a moment to read the store once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    fixture
        .agent
        .call(
            "stratum_step_done",
            json!({"flow_id": fixture.running, "step_id": "s1",
                   "result": {"label": "positive", "confidence": 0.95}}),
        )
        .await;
    let until = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    while !seen.contains(&fixture.running) {
        let left = until.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, events.chunk())
            .await
            .unwrap_or_else(|_| panic!("no change event in 30 s: {seen}"))
            .unwrap()
            .expect("the stream stays open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("event: change"), "{seen}");

    // SIGTERM with the stream still open: the server ends it and exits at once.
    fixture.serve.signal("TERM");
    let started = Instant::now();
    assert_eq!(fixture.serve.wait(Duration::from_secs(30)), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "an open event stream held the shutdown up"
    );
    fixture.agent.stop().await;
}

#[tokio::test]
async fn pages_forbid_sniffing_a_referrer_and_a_base() {
    let state = State::new();
    let secret = state.token("alice", true);
    let serve = Serve::start(&state, &[]);
    let signin = http().get(serve.url("/signin")).send().await.unwrap();
    let flows = http()
        .get(serve.url("/"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    for (page, answer) in [("/signin", signin), ("/", flows)] {
        assert_eq!(answer.status(), StatusCode::OK, "{page}");
        let headers = answer.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{page}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{page}");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("base-uri 'none'"), "{page}: {policy}");
        assert!(policy.contains("default-src 'self'"), "{page}: {policy}");
    }
}

/// A spec whose names would mislead a reader if drawn as they are: a flow named with
/// terminal escapes and a carriage return, a gate step with a right-to-left override.
const MISLEADING_NAMES_SPEC: &str = r#"version: "0.2"
contracts:
  WorkOutput:
    result: {type: string}
functions:
  do_work:
    mode: infer
    intent: "Produce the deliverable"
    input: {}
    output: WorkOutput
  review_gate:
    mode: gate
flows:
  "rw\e]0;PWNED\a\e[2K\rOTHER-FLOW":
    input: {}
    output: WorkOutput
    steps:
      - id: work
        function: do_work
        inputs: {}
      - id: "review\u202Egnp.exe"
        function: review_gate
        on_approve: ~
        on_revise: work
        on_kill: ~
"#;

/// Fails when `html` holds a control character other than a line break, or a bidirectional
/// override or isolate: each is drawn visibly (`\x1b`, `\u202e`) instead.
fn assert_no_invisible(what: &str, html: &str) {
    for c in html.chars() {
        let invisible = (c.is_control() && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(!invisible, "{what}: {c:?} is in the page raw");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_rationales_are_drawn_visibly_and_cut() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Stateless,
        state.dir.path(),
    )
    .await;
    let planned = agent
        .call(
            "stratum_plan",
            json!({"spec": MISLEADING_NAMES_SPEC,
                   "flow": "rw\u{1b}]0;PWNED\u{7}\u{1b}[2K\rOTHER-FLOW", "inputs": {}}),
        )
        .await;
    let flow = planned["flow_id"].as_str().unwrap().to_owned();
    let gate = agent
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work", "result": {"result": "r"}}),
        )
        .await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");
    let (code, gates) = get_with(&serve, "/gates", &format!("Bearer {secret}")).await;
    assert_eq!(code, StatusCode::OK);
    assert_no_invisible("/gates", &gates);
    assert!(
        gates.contains(r"rw\x1b]0;PWNED\x07\x1b[2K\rOTHER-FLOW"),
        "{gates}"
    );
    assert!(gates.contains(r"review\u202egnp.exe"), "{gates}");

    // A 3 MB rationale, sent by an agent (the console's own form cuts at 4,000 characters).
    let rationale = format!("looks good\u{1b}[2J{}", "x".repeat(3_000_000));
    let resolved = agent
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": flow, "step_id": "review\u{202e}gnp.exe", "outcome": "approve",
                   "rationale": rationale, "resolved_by": "human"}),
        )
        .await;
    assert_eq!(status(&resolved), "complete", "{resolved:#}");
    let (code, page) = get_with(
        &serve,
        &format!("/flows/{flow}"),
        &format!("Bearer {secret}"),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert_no_invisible("the flow's page", &page);
    assert!(
        page.contains(r"looks good\x1b[2J"),
        "the rationale is shown"
    );
    assert!(
        page.len() < 100_000,
        "the flow's page is {} bytes: the rationale was not cut",
        page.len()
    );
    assert!(page.contains("characters more"), "the cut is said");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_flow_is_drawn_in_a_bounded_page() {
    const STEPS: usize = 5_000;
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Stateless,
        state.dir.path(),
    )
    .await;
    let steps: Vec<String> = (0..STEPS)
        .map(|index| format!("{{id: step_with_a_long_name_{index}, function: w, inputs: {{}}}}"))
        .collect();
    let spec = format!(
        "version: \"0.2\"\ncontracts:\n  Out:\n    v: {{type: string}}\nfunctions:\n  w:\n    \
         mode: infer\n    intent: \"w\"\n    input: {{}}\n    output: Out\nflows:\n  huge:\n    \
         input: {{}}\n    output: Out\n    steps: [{}]\n",
        steps.join(", ")
    );
    let planned = agent
        .call(
            "stratum_plan",
            json!({"spec": spec, "flow": "huge", "inputs": {}}),
        )
        .await;
    let flow = planned["flow_id"].as_str().unwrap().to_owned();
    let (code, page) = get_with(
        &serve,
        &format!("/flows/{flow}"),
        &format!("Bearer {secret}"),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        page.len() < 1_000_000,
        "a {STEPS}-step flow's page is {} bytes",
        page.len()
    );
    let boxes = page.matches("<g class=\"step state-").count();
    assert_eq!(boxes, 500, "the graph draws the first 500 steps");
    let rows = page.matches("<tr id=\"step-").count();
    assert_eq!(rows, 500, "the step table lists the first 500 steps");
    assert!(
        page.contains("4,500 more steps"),
        "the page says how many are left out"
    );
    assert_eq!(step_state(&page, "step_with_a_long_name_0"), "current");
    agent.stop().await;
}

/// Reads `events` until the server ends it; panics when it is still open after `bound`.
async fn ends_within(what: &str, events: &mut reqwest::Response, bound: Duration) {
    let until = Instant::now() + bound;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.chunk()).await {
            Err(_) => panic!("{what}: the event stream is still open after {bound:?}"),
            Ok(Ok(None) | Err(_)) => return,
            Ok(Ok(Some(_))) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_end_when_their_session_or_token_does() {
    let state = State::new();
    let (alice, bob) = (state.token("alice", true), state.token("bob", true));
    let serve = Serve::start(&state, &[]);
    let open = |authorization: (&'static str, String)| {
        let request = http()
            .get(serve.url("/events"))
            .header(authorization.0, authorization.1);
        async move {
            let answer = request.send().await.unwrap();
            assert_eq!(answer.status(), StatusCode::OK);
            answer
        }
    };

    // Signed out: the stream of that session ends; another session's stays open.
    let cookie = sign_in(&serve, &alice).await;
    let other = sign_in(&serve, &alice).await;
    let mut signed_out = open(("cookie", cookie.clone())).await;
    let mut stays = open(("cookie", other.clone())).await;
    let page = http()
        .get(serve.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let out = http()
        .post(serve.url("/signout"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf_of(&page))])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    ends_within("signed out", &mut signed_out, Duration::from_secs(15)).await;
    let still = tokio::time::timeout(Duration::from_secs(1), stays.chunk()).await;
    assert!(
        !matches!(still, Ok(Ok(None) | Err(_))),
        "another session's stream ended"
    );

    // Revoked from the command line: the streams of its bearer and of its sessions end.
    let mut by_bearer = open(("authorization", format!("Bearer {bob}"))).await;
    let bob_cookie = sign_in(&serve, &bob).await;
    let mut by_cookie = open(("cookie", bob_cookie)).await;
    let (code, revoked) = state.cli(&["token", "revoke", "bob", "--json"]);
    assert_eq!(code, 0, "{revoked}");
    ends_within("bearer, revoked", &mut by_bearer, Duration::from_secs(15)).await;
    ends_within("session, revoked", &mut by_cookie, Duration::from_secs(15)).await;
    drop(stays);
}

/// The text of the element with `id` (its first text, up to the next tag).
fn text_of<'p>(page: &'p str, id: &str) -> &'p str {
    let at = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}"));
    let rest = &page[at..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest[start..].find('<').unwrap();
    &rest[start..start + end]
}

/// A flow's page draws and counts each step as what it is: a gate approved or killed as
/// decided (a gate has no output, and was drawn "not yet"), a skipped step as skipped; "Steps
/// done" counts the approved gate and names the skipped and killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_decided_and_steps_skipped_are_drawn_and_counted_as_what_they_are() {
    let mut fixture = Fixture::new().await;
    let approved = fixture.at_gate.clone();
    let (code, _) = fixture.state.cli(&[
        "gate", "approve", &approved, "review", "--note", "fine", "--json",
    ]);
    assert_eq!(code, 0);
    let killed = flow_at_gate(&mut fixture.agent).await;
    let (code, _) = fixture
        .state
        .cli(&["gate", "kill", &killed, "review", "--note", "no", "--json"]);
    assert_eq!(code, 0);
    let skipped = mcp::start_reviewed_work(&mut fixture.agent).await;
    let at_gate = fixture
        .agent
        .call(
            "stratum_skip_step",
            json!({"flow_id": skipped, "step_id": "work", "reason": "already done"}),
        )
        .await;
    assert_eq!(status(&at_gate), "await_gate", "{at_gate:#}");

    for (flow, status, states, done) in [
        (
            &approved,
            "complete",
            &[("work", "done"), ("review", "approved")][..],
            "2 of 2",
        ),
        (
            &killed,
            "killed",
            &[("work", "done"), ("review", "killed")][..],
            "1 of 2, 1 killed",
        ),
        (
            &skipped,
            "awaiting_gate",
            &[("work", "skipped"), ("review", "gate")][..],
            "0 of 2, 1 skipped",
        ),
        (
            &fixture.complete,
            "complete",
            &[("s1", "done")][..],
            "1 of 1",
        ),
    ] {
        let (code, page) = fixture.get(&format!("/flows/{flow}")).await;
        assert_eq!(code, StatusCode::OK);
        assert!(
            page.contains(&format!("data-status=\"{status}\"")),
            "{page}"
        );
        for (index, (step, state)) in states.iter().enumerate() {
            assert_eq!(step_state(&page, step), *state, "{flow} {step}");
            let row = page
                .split(&format!("<tr id=\"step-{index}\">"))
                .nth(1)
                .unwrap();
            let row = row.split("</tr>").next().unwrap();
            assert!(
                row.contains(&format!("<span class=\"key state-{state}\">{state}</span>")),
                "{flow} {step}: {row}"
            );
        }
        assert_eq!(text_of(&page, "steps-done"), done, "{flow}");
    }
    fixture.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_page_shows_its_drive_and_the_live_tail_of_a_running_agent() {
    use stratum_runtime::Store;
    use stratum_runtime::ids::FlowId;
    use stratum_runtime::store::{AgentRun, Drive};
    let fixture = Fixture::new().await;
    let store = stratum_store_sqlite::SqliteStore::open(fixture.state.db()).unwrap();
    let flow = FlowId::parse(&fixture.running).unwrap();
    let now = stratum_runtime::now_ms();
    store.enroll(&Drive::new(flow.clone(), now)).unwrap();
    store
        .claim("vm/42/cafe0001", now, 60_000, Some(&flow))
        .unwrap()
        .unwrap();
    let mut run = AgentRun::starting(
        "00000000000000c1".to_owned(),
        "claude",
        "vm/42/cafe0001",
        "vm",
        now,
    );
    run.flow = Some(flow.clone());
    run.step = Some("s1".to_owned());
    run.attempt = Some(1);
    run.model = Some("claude-sonnet-4-6".to_owned());
    run.pid = Some(4242);
    run.process_start = Some(7);
    run.deadline_ms = now + 60_000;
    run.events = vec![
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"<b>reading</b>"}]}}"#
            .to_owned(),
    ];
    run.events_seen = 1;
    store.put_run(&run).unwrap();

    let (code, page) = fixture.get(&format!("/flows/{}", fixture.running)).await;
    assert_eq!(code, StatusCode::OK);
    let start = page
        .find("<section id=\"agent-runs\"")
        .expect("an agent-runs section");
    let section = &page[start..start + page[start..].find("</section>").unwrap()];
    assert!(
        section.contains("Driven unattended by <code>vm/42/cafe0001</code>"),
        "{section}"
    );
    assert!(section.contains("data-running-agent"), "{section}");
    assert!(section.contains("pid 4242 on vm"), "{section}");
    assert!(
        section.contains("&lt;b&gt;reading&lt;/b&gt;"),
        "the tail is escaped: {section}"
    );
    assert!(!section.contains("<b>reading"), "{section}");

    // A flow no agent run touched has no such section.
    let (_, other) = fixture.get(&format!("/flows/{}", fixture.complete)).await;
    assert!(!other.contains("id=\"agent-runs\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_page_lists_each_fan_out_task_with_its_state_and_why_it_failed() {
    let mut fixture = Fixture::new().await;
    let spec = r#"version: "0.3"
flows:
  build:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Do {description}"
        retries: 3
"#;
    let envelope = fixture
        .agent
        .call(
            "stratum_plan",
            json!({"spec": spec, "flow": "build", "inputs": {"tasks": [
                {"id": "a", "description": "the parser"},
                {"id": "b", "description": "the <printer>"}
            ]}}),
        )
        .await;
    assert_eq!(status(&envelope), "parallel_dispatch", "{envelope}");
    let flow = envelope["flow_id"].as_str().unwrap().to_owned();
    let retry = fixture
        .agent
        .call(
            "stratum_parallel_done",
            json!({"flow_id": flow, "step_id": "work", "merge_status": "clean",
                   "task_results": [{"task_id": "a", "status": "complete", "result": {"ok": true}}]}),
        )
        .await;
    assert_eq!(status(&retry), "ensure_failed", "{retry}");
    let (code, page) = fixture.get(&format!("/flows/{flow}")).await;
    assert_eq!(code, StatusCode::OK);
    let start = page.find("<section id=\"tasks\"").expect("a tasks section");
    let section = &page[start..start + page[start..].find("</section>").unwrap()];
    assert!(section.contains("attempt 2"), "{section}");
    assert!(
        section.contains("<code class=\"id\">a</code></td><td>complete</td><td>1</td>"),
        "a was accepted in attempt 1: {section}"
    );
    assert!(
        section.contains("<code class=\"id\">b</code></td><td>pending</td><td>2</td>"),
        "{section}"
    );
    assert!(
        section.contains("task &#39;b&#39; was not reported")
            || section.contains("task 'b' was not reported"),
        "{section}"
    );
}

/// The part of `page` from the element that opens with `start` to the end of its `end` tag.
fn part<'p>(page: &'p str, start: &str, end: &str) -> &'p str {
    let from = page
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {page}"));
    let rest = &page[from..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_shows_the_work_before_it_and_why_it_came_back_escaped() {
    let mut fixture = Fixture::new().await;
    let planned = fixture
        .agent
        .call(
            "stratum_plan",
            json!({"spec": example("reviewed-work.stratum.yaml"), "flow": "reviewed_work",
                   "inputs": {"text": "<script>alert('input')</script>"}}),
        )
        .await;
    let flow = planned["flow_id"].as_str().unwrap().to_owned();
    let work = |result: &str| {
        json!({"flow_id": flow, "step_id": "work",
               "result": {"result": result, "quality_score": 0.9}})
    };
    let gate = fixture
        .agent
        .call("stratum_step_done", work("<img src=x onerror=alert(1)>"))
        .await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");
    let revised = fixture
        .agent
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": flow, "step_id": "review", "outcome": "revise",
                   "rationale": "</q><b>bold</b>\u{1b}[2J say more", "resolved_by": "human"}),
        )
        .await;
    assert_eq!(status(&revised), "execute_step", "{revised:#}");
    let long = format!("second\tdraft {}", "y".repeat(10_000));
    let again = fixture.agent.call("stratum_step_done", work(&long)).await;
    assert_eq!(status(&again), "await_gate", "{again:#}");

    let (code, gates) = fixture.get("/gates").await;
    assert_eq!(code, StatusCode::OK);
    assert_no_invisible("/gates", &gates);
    let card = part(
        &gates,
        &format!("<article class=\"gate\" id=\"gate-{flow}-review\""),
        "</article>",
    );
    let (_, flow_page) = fixture.get(&format!("/flows/{flow}")).await;
    assert_no_invisible("the flow's page", &flow_page);
    let section = part(&flow_page, "<section id=\"gate\"", "</section>");
    for (what, html) in [("card", card), ("flow page", section)] {
        assert!(
            html.contains("<div class=\"gate-context\" data-round=\"1\">"),
            "{what}: {html}"
        );
        // The flow's input, escaped.
        assert!(
            html.contains("&lt;script&gt;alert(&#39;input&#39;)&lt;/script&gt;"),
            "{what}: {html}"
        );
        // The work before the gate: this round's, previewed on one line, folded.
        let output = part(html, "<li data-step-id=\"work\">", "</li>");
        assert!(
            output.contains(
                "<span class=\"preview\">{ &quot;quality_score&quot;: 0.9, \
                 &quot;result&quot;: &quot;second\\tdraft yyy"
            ),
            "{what}: {output}"
        );
        assert!(
            output.contains("more characters; the whole is in the audit"),
            "{what}: {output}"
        );
        assert!(output.len() < 12_000, "{what}: {} bytes", output.len());
        // Why it came back: the revise's rationale, escaped.
        let decision = part(
            html,
            "<li data-step-id=\"review\" data-round=\"0\" data-outcome=\"revise\">",
            "</li>",
        );
        assert!(
            decision.contains(
                "<q class=\"rationale\">&lt;/q&gt;&lt;b&gt;bold&lt;/b&gt;\\x1b[2J say more</q>"
            ),
            "{what}: {decision}"
        );
        assert!(decision.contains("by human"), "{what}: {decision}");
        for raw in ["<script>", "<img", "<b>bold"] {
            assert!(!html.contains(raw), "{what}: {raw} in {html}");
        }
    }
    // The earlier round's output is not the work before the gate any more.
    assert!(!card.contains("onerror"), "{card}");
    fixture.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_after_a_parallel_step_shows_the_diff_it_merged() {
    let state = State::new();
    let secret = state.token("alice", false);
    let at_gate = merged::at_gate(&state, &secret).await;
    let (code, gates) = get_with(&at_gate.serve, "/gates", &format!("Bearer {secret}")).await;
    assert_eq!(code, StatusCode::OK);
    assert_no_invisible("/gates", &gates);
    let card = part(
        &gates,
        &format!(
            "<article class=\"gate\" id=\"gate-{}-review\"",
            at_gate.flow
        ),
        "</article>",
    );
    let diff = part(
        card,
        "<div class=\"gate-diff\" data-step-id=\"work\">",
        "</div>",
    );
    assert!(
        diff.contains("tasks <code>a</code>, <code>b</code>: 2 files"),
        "{diff}"
    );
    assert!(
        diff.contains(
            "<li data-path=\"a.rs\"><code>a.rs</code> <span class=\"add\">+3</span> \
             <span class=\"del\">−0</span></li>"
        ),
        "{diff}"
    );
    assert!(diff.contains("<li data-path=\"b.txt\">"), "{diff}");
    // The diff itself, escaped, its tab kept as a tab.
    assert!(
        diff.contains(
            "<span class=\"add\">+&#9;println!(&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;);</span>"
        ),
        "{diff}"
    );
    assert!(!card.contains("<script>"), "{card}");
    // The work before the gate: the parallel step's output.
    assert!(card.contains("<li data-step-id=\"work\">"), "{card}");
    // The flow's page shows the same.
    let (_, page) = get_with(
        &at_gate.serve,
        &format!("/flows/{}", at_gate.flow),
        &format!("Bearer {secret}"),
    )
    .await;
    let section = part(&page, "<section id=\"gate\"", "</section>");
    assert!(
        section.contains("<div class=\"gate-diff\" data-step-id=\"work\">"),
        "{section}"
    );
    // And `query gates` the same, as JSON.
    let (_, gates) = state.cli(&["query", "gates", "--json"]);
    let diff = &gates[0]["context"]["diffs"][0];
    assert_eq!(diff["tasks"], json!(["a", "b"]), "{diff:#}");
    assert_eq!(
        (diff["added"].as_u64(), diff["removed"].as_u64()),
        (Some(4), Some(0))
    );
    at_gate.agent.stop().await;
}
