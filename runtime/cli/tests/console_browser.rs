//! The web console in a real browser: `stratum-mcp serve` on a free port, agents driving flows
//! over MCP HTTP with rmcp's client, and a person in headless Chromium (WebDriver, through
//! fantoccini) signing in with a token, finding a flow at its gate, approving it, and watching
//! the flow move on while the agent gets its next dispatch. Pages are read only through the
//! ids, classes and data attributes of the console's markup contract.
//!
//! Chromium and ChromeDriver are Debian's, installed by `scripts/ensure-chromium` when missing.
//! With `STRATUM_SCREENSHOTS=1` the gate story saves a 1280x800 screenshot of each view to
//! `docs/console/`.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod browser;
mod mcp;
mod merged;
mod serve;

use browser::Browser;
use mcp::{
    McpServer, Protocol, drive, drive_to_gate, example, examples, start_reviewed_work, status,
};
use serde_json::{Value, json};
use serve::{Serve, State};

/// Signs in at `/signin` with `secret` as a person does: type it, press the button, land on
/// the flows with a session cookie the page's scripts cannot read.
async fn sign_in(browser: &Browser, serve: &Serve, secret: &str) {
    browser.goto(&serve.url("/signin")).await;
    sign_in_here(browser, secret, "/").await;
}

/// Signs in on the sign-in form the browser shows, and waits to land on `landing`.
async fn sign_in_here(browser: &Browser, secret: &str, landing: &str) {
    browser
        .find("input#token")
        .await
        .send_keys(secret)
        .await
        .unwrap();
    browser
        .find("button[type=submit]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .until(&format!("signed in, on {landing}"), || async {
            browser.path().await == landing
        })
        .await;
    let cookie = browser
        .client
        .get_named_cookie("stratum_session")
        .await
        .unwrap_or_else(|error| panic!("no session cookie after signing in: {error}"));
    assert_eq!(cookie.http_only(), Some(true), "{cookie}");
    assert!(
        browser.all("input#token").await.is_empty(),
        "not the sign-in form again"
    );
    // Every signed-in page has a sign-out form.
    browser.find("form[action=\"/signout\"]").await;
}

/// A connected agent, as the token `secret`.
async fn agent(serve: &Serve, state: &State, secret: &str) -> McpServer {
    McpServer::start_http(
        &serve.url("/mcp"),
        secret,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await
}

/// The `examples()` entry for `file`: its flow, inputs and script.
fn scripted(file: &str) -> (&'static str, Value, Value) {
    let (_, flow, inputs, script) = examples()
        .into_iter()
        .find(|(name, ..)| *name == file)
        .unwrap();
    (flow, inputs, script)
}

/// Starts `file`'s flow over MCP and plays its agent until the flow waits at a gate; the
/// `await_gate` dispatch.
async fn flow_at_gate(server: &mut McpServer, file: &str) -> Value {
    let (flow, inputs, script) = scripted(file);
    let first = server
        .call(
            "stratum_plan",
            json!({"spec": example(file), "flow": flow, "inputs": inputs}),
        )
        .await;
    let gate = drive_to_gate(server, first, &script).await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");
    gate
}

/// The row of flow `id` in `table#flows`.
fn row(id: &str) -> String {
    format!("table#flows tbody tr[data-flow-id=\"{id}\"]")
}

#[tokio::test]
async fn a_reviewer_approves_a_gate_in_the_browser_and_the_agent_gets_the_next_step() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let mut server = agent(&serve, &state, &secret).await;
    // A flow that finished, beside the one that will wait.
    let (flow, inputs, script) = scripted("sentiment.stratum.yaml");
    let first = server
        .call(
            "stratum_plan",
            json!({"spec": example("sentiment.stratum.yaml"), "flow": flow, "inputs": inputs}),
        )
        .await;
    let done = drive(&mut server, first, &script).await;
    assert_eq!(status(&done), "complete");
    let finished = done["flow_id"].as_str().unwrap().to_owned();
    // `deploy` builds, runs its integration tests in a sub-flow, then waits at `approve`.
    let gate = flow_at_gate(&mut server, "deploy.stratum.yaml").await;
    assert_eq!(gate["step_id"], "approve");
    let id = gate["flow_id"].as_str().unwrap().to_owned();

    let browser = Browser::start().await;
    browser.goto(&serve.url("/signin")).await;
    browser.find("input#token").await;
    browser.screenshot("signin").await;
    sign_in(&browser, &serve, &secret).await;

    // The flows: the waiting one, at its gate, and the finished one.
    browser
        .find("nav[aria-label=\"Console\"] a[href=\"/gates\"]")
        .await;
    let waiting = row(&id);
    browser
        .until_attr(&waiting, "data-status", "awaiting_gate")
        .await;
    assert_eq!(
        browser.text(&format!("{waiting} td.current-step")).await,
        "approve"
    );
    browser
        .until_attr(&row(&finished), "data-status", "complete")
        .await;
    browser.screenshot("flows").await;

    // Its page: the DAG shows the gate waiting, after the steps that are done.
    browser
        .find(&format!("{waiting} a[href=\"/flows/{id}\"]"))
        .await
        .click()
        .await
        .unwrap();
    browser
        .until_attr("#flow-status", "data-status", "awaiting_gate")
        .await;
    assert_eq!(browser.path().await, format!("/flows/{id}"));
    assert!(browser.text("h1").await.contains("deploy"));
    for (step, state) in [
        ("current", "done"),
        ("build", "done"),
        ("test", "done"),
        ("approve", "gate"),
        ("release", "pending"),
    ] {
        browser
            .until_attr(
                &format!("svg#dag g.step[data-step-id=\"{step}\"]"),
                "data-state",
                state,
            )
            .await;
    }
    browser.find("section#dispatch").await;
    browser.screenshot("flow").await;

    // The gates: approve this one with a rationale.
    browser
        .find("nav[aria-label=\"Console\"] a[href=\"/gates\"]")
        .await
        .click()
        .await
        .unwrap();
    let article = format!("article.gate[data-flow-id=\"{id}\"][data-step-id=\"approve\"]");
    browser.find(&article).await;
    assert_eq!(browser.all("article.gate").await.len(), 1, "one gate waits");
    browser.screenshot("gates").await;
    let form = format!("{article} form[method=post][action=\"/gates/{id}/approve\"]");
    browser
        .find(&format!("{form} textarea[name=\"rationale\"]"))
        .await
        .send_keys("integration tests pass; ship it")
        .await
        .unwrap();
    browser
        .find(&format!(
            "{form} button[name=\"decision\"][value=\"approve\"]"
        ))
        .await
        .click()
        .await
        .unwrap();
    let said = browser.text("p[role=\"status\"]").await;
    assert!(
        said.to_lowercase().contains(&format!(
            "approved the gate approve of flow {id}; the flow moves on"
        )),
        "{said}"
    );
    assert!(browser.path().await.starts_with("/gates?decided=approve&"));
    assert!(
        browser.all(&article).await.is_empty(),
        "the gate is decided"
    );

    // The agent's next dispatch is the step after the gate.
    let next = server.call("stratum_resume", json!({"flow_id": id})).await;
    assert_eq!(
        (status(&next), next["step_id"].as_str()),
        ("execute_step", Some("release")),
        "{next:#}"
    );
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    let decided = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "gate")
        .unwrap()
        .clone();
    assert_eq!(
        (
            &decided["outcome"],
            &decided["rationale"],
            &decided["actor"]
        ),
        (
            &json!("approve"),
            &json!("integration tests pass; ship it"),
            &json!("alice")
        ),
        "{decided:#}"
    );

    // The flow moved on; and when the agent reports the release, the open list shows the flow
    // finish without a reload.
    browser
        .find("nav[aria-label=\"Console\"] a[href=\"/\"]")
        .await
        .click()
        .await
        .unwrap();
    browser.until_attr(&waiting, "data-status", "running").await;
    assert_eq!(
        browser.text(&format!("{waiting} td.current-step")).await,
        "release"
    );
    browser
        .client
        .execute("window.stratumNotReloaded = true;", vec![])
        .await
        .unwrap();
    let release = server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "release", "result": script_result("release")}),
        )
        .await;
    assert_eq!(status(&release), "complete", "{release:#}");
    browser
        .until_attr(&waiting, "data-status", "complete")
        .await;
    assert_eq!(
        browser.text(&format!("{waiting} td.current-step")).await,
        ""
    );
    let kept = browser
        .client
        .execute("return window.stratumNotReloaded === true;", vec![])
        .await
        .unwrap();
    assert_eq!(
        kept,
        json!(true),
        "the list changed in place, not by a reload"
    );

    // The complete flow's page draws each step as what it is: the approved gate approved, the
    // rollback its `skip_if` skipped; and counts them so.
    browser.goto(&serve.url(&format!("/flows/{id}"))).await;
    browser
        .until_attr("#flow-status", "data-status", "complete")
        .await;
    for (step, state) in [
        ("current", "done"),
        ("build", "done"),
        ("test", "done"),
        ("approve", "approved"),
        ("release", "done"),
        ("rollback", "skipped"),
    ] {
        browser
            .until_attr(
                &format!("svg#dag g.step[data-step-id=\"{step}\"]"),
                "data-state",
                state,
            )
            .await;
    }
    assert_eq!(browser.text("dd#steps-done").await, "5 of 6, 1 skipped");
    assert_eq!(browser.text("tr#step-3 .key").await, "approved");

    browser.close().await;
    server.stop().await;
}

/// The scripted result of `deploy`'s step `step`.
fn script_result(step: &str) -> Value {
    scripted("deploy.stratum.yaml").2[step].clone()
}

#[tokio::test]
async fn a_failed_ensure_shows_its_violation_on_the_flow_page() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let mut server = agent(&serve, &state, &secret).await;
    let id = start_reviewed_work(&mut server).await;
    let failed = server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "work",
                   "result": {"result": "draft", "quality_score": 0.5}}),
        )
        .await;
    assert_eq!(status(&failed), "ensure_failed", "{failed:#}");
    let violation = failed["violations"][0].as_str().unwrap().to_owned();
    assert!(
        violation.contains("result.quality_score >= 0.8"),
        "{violation}"
    );

    // The person opens the flow's link before signing in: the console sends them to the
    // sign-in form, and back to the flow once signed in.
    let browser = Browser::start().await;
    browser.goto(&serve.url(&format!("/flows/{id}"))).await;
    assert_eq!(browser.path().await, format!("/signin?next=/flows/{id}"));
    sign_in_here(&browser, &secret, &format!("/flows/{id}")).await;
    browser
        .until_attr("#flow-status", "data-status", "running")
        .await;
    browser
        .until_attr(
            "svg#dag g.step[data-step-id=\"work\"]",
            "data-state",
            "current",
        )
        .await;
    let shown = browser.all("section#attempts li.violation").await;
    assert_eq!(shown.len(), 1, "one failed attempt with one violation");
    assert_eq!(
        browser.text("section#attempts li.violation").await,
        violation
    );
    for section in [
        "dispatch",
        "rounds",
        "iterations",
        "budget",
        "children",
        "checkpoints",
        "timeline",
    ] {
        browser.find(&format!("section#{section}")).await;
    }

    browser.close().await;
    server.stop().await;
}

#[tokio::test]
async fn a_read_only_token_sees_the_gates_without_their_forms() {
    let state = State::new();
    let writer = state.token("agent", false);
    let reader = state.token("dashboard", true);
    let serve = Serve::start(&state, &[]);
    let mut server = agent(&serve, &state, &writer).await;
    let gate = flow_at_gate(&mut server, "reviewed-work.stratum.yaml").await;
    let id = gate["flow_id"].as_str().unwrap().to_owned();

    // A link that would send the person elsewhere after signing in lands on the flows.
    let browser = Browser::start().await;
    browser
        .goto(&serve.url("/signin?next=%2F%2Fevil.example%2F"))
        .await;
    sign_in_here(&browser, &reader, "/").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(
        url.host_str(),
        Some(serve.address.ip().to_string().as_str())
    );
    browser
        .find("nav[aria-label=\"Console\"] a[href=\"/gates\"]")
        .await
        .click()
        .await
        .unwrap();
    let article = format!("article.gate[data-flow-id=\"{id}\"][data-step-id=\"review\"]");
    browser.find(&article).await;
    browser.find("p.read-only").await;
    assert!(
        browser.all("article.gate form").await.is_empty(),
        "no gate form for a read-only token"
    );
    assert!(browser.all("button[name=\"decision\"]").await.is_empty());
    assert!(browser.all("textarea[name=\"rationale\"]").await.is_empty());
    let (_, gates) = state.cli(&["query", "gates", "--json"]);
    assert_eq!(gates[0]["flow_id"], json!(id), "the gate still waits");

    browser.close().await;
    server.stop().await;
}

#[tokio::test]
async fn a_gate_card_shows_the_work_before_it_and_after_a_revise_why_it_came_back() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let mut server = agent(&serve, &state, &secret).await;
    let id = start_reviewed_work(&mut server).await;
    let work = |result: &str| {
        json!({"flow_id": id, "step_id": "work",
               "result": {"result": result, "quality_score": 0.9}})
    };
    let gate = server
        .call("stratum_step_done", work("a first draft <em>"))
        .await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");

    let browser = Browser::start().await;
    sign_in(&browser, &serve, &secret).await;
    browser.goto(&serve.url("/gates")).await;
    let article = format!("article.gate[data-flow-id=\"{id}\"][data-step-id=\"review\"]");
    browser.until_attr(&article, "data-round", "0").await;
    // The work before the gate: a preview, and the whole (folded) value on opening it.
    let output = format!("{article} ul.gate-outputs li[data-step-id=\"work\"]");
    let preview = browser.text(&format!("{output} .preview")).await;
    assert!(preview.contains("a first draft <em>"), "{preview}");
    browser
        .find(&format!("{output} summary"))
        .await
        .click()
        .await
        .unwrap();
    let whole = browser.text(&format!("{output} pre")).await;
    assert!(
        whole.contains("\"result\": \"a first draft <em>\""),
        "{whole}"
    );
    let input = browser
        .text(&format!("{article} details.gate-input .preview"))
        .await;
    assert_eq!(input, "{ \"text\": \"t\" }");
    assert!(
        browser
            .all(&format!("{article} ol.gate-decisions"))
            .await
            .is_empty(),
        "no decision yet"
    );

    // Sent back with a reason.
    let form = format!("{article} form");
    browser
        .find(&format!("{form} textarea[name=\"rationale\"]"))
        .await
        .send_keys("say what the draft is for")
        .await
        .unwrap();
    browser
        .find(&format!(
            "{form} button[name=\"decision\"][value=\"revise\"]"
        ))
        .await
        .click()
        .await
        .unwrap();
    browser.find("p[role=\"status\"]").await;
    browser
        .client
        .execute("window.stratumNotReloaded = true;", vec![])
        .await
        .unwrap();

    // The agent works again; the open page shows the gate in its new round, with the new work
    // and why it came back, without a reload.
    let again = server
        .call(
            "stratum_step_done",
            work("a second draft, for the release notes"),
        )
        .await;
    assert_eq!(status(&again), "await_gate", "{again:#}");
    browser.until_attr(&article, "data-round", "1").await;
    let decision = format!(
        "{article} ol.gate-decisions li[data-step-id=\"review\"][data-round=\"0\"][data-outcome=\"revise\"]"
    );
    let rationale = browser.text(&format!("{decision} q.rationale")).await;
    assert!(
        rationale.contains("say what the draft is for"),
        "{rationale}"
    );
    let said = browser.text(&decision).await;
    assert!(said.contains("by human (token alice)"), "{said}");
    let preview = browser.text(&format!("{output} .preview")).await;
    assert!(preview.contains("a second draft"), "{preview}");
    let kept = browser
        .client
        .execute("return window.stratumNotReloaded === true;", vec![])
        .await
        .unwrap();
    assert_eq!(
        kept,
        json!(true),
        "the card changed in place, not by a reload"
    );

    browser.close().await;
    server.stop().await;
}

#[tokio::test]
async fn a_gate_after_a_parallel_step_shows_the_diff_it_merged() {
    let state = State::new();
    let secret = state.token("alice", false);
    let at_gate = merged::at_gate(&state, &secret).await;
    let browser = Browser::start().await;
    sign_in(&browser, &at_gate.serve, &secret).await;
    browser.goto(&at_gate.serve.url("/gates")).await;
    let diff = format!(
        "article.gate[data-flow-id=\"{}\"] div.gate-diff[data-step-id=\"work\"]",
        at_gate.flow
    );
    browser.find(&diff).await;
    assert_eq!(browser.all(&format!("{diff} ul.files li")).await.len(), 2);
    let file = browser
        .text(&format!("{diff} ul.files li[data-path=\"a.rs\"]"))
        .await;
    assert_eq!(file, "a.rs +3 −0");
    browser
        .find(&format!("{diff} details summary"))
        .await
        .click()
        .await
        .unwrap();
    // Shown as text: the markup in the diff is not run (an alert would stop the session).
    let text = browser.text(&format!("{diff} pre.diff")).await;
    assert!(
        text.contains("println!(\"<script>alert(1)</script>\");"),
        "{text}"
    );
    assert!(text.contains("+from b"), "{text}");
    let title = browser.client.title().await.unwrap();
    assert!(title.contains("Gates"), "{title}");

    browser.close().await;
    at_gate.agent.stop().await;
}
