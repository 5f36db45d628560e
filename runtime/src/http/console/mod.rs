//! The web console: where people follow flows and resolve gates, in a browser, on the same
//! store as the agents and the operator CLI.
//!
//! In reading order: [`flows`] (`/`, every flow, filtered and searched), [`flow`]
//! (`/flows/{id}`, one flow: its graph, dispatch, attempts, rounds, iterations, budget,
//! children, checkpoints, timeline; read by [`view`], drawn by [`dag`] and [`timeline`]),
//! [`gates`] (`/gates`, every waiting gate with its decision form, and the form's post),
//! [`events`] (`/events`, server-sent events that tell open pages a flow changed), and
//! [`assets`] (the stylesheet and the script, compiled into the binary).
//!
//! Invariants:
//! - pages are HTML rendered here, every value from a spec or a flow escaped; they work
//!   without the script, which only keeps them current (it refetches the page and swaps the
//!   parts marked `data-live`);
//! - a page reads the store in one read transaction per view, on the blocking pool, and never
//!   writes; the only write is a gate decision, through the CLI's own command
//!   ([`crate::cli::gate::resolve_as`]), with the token's name as the actor;
//! - markup that browser tests select (ids, classes, `data-` attributes) is a contract,
//!   written down in the module of each page.

pub mod assets;
pub mod dag;
pub mod events;
pub mod flow;
pub mod flows;
pub mod gates;
pub mod timeline;
pub mod view;

use axum::http::StatusCode;
use axum::response::Response;

use super::auth::Identity;
use super::pages::{escape, form, layout};
use crate::cli::query::SummaryStatus;
use crate::store::StoreError;

/// Which view a page is, for the navigation's `aria-current`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Flows,
    Gates,
    Other,
}

/// A console page: the navigation, then `body`.
pub fn page(
    identity: &Identity,
    section: Section,
    status: StatusCode,
    title: &str,
    body: &str,
) -> Response {
    let current = |link: Section| {
        if link == section {
            " aria-current=\"page\""
        } else {
            ""
        }
    };
    let signout = form(
        identity,
        "/signout",
        "<button type=\"submit\" class=\"link\">Sign out</button>",
    );
    let access = if identity.read_only {
        " <span class=\"badge\">read-only</span>"
    } else {
        ""
    };
    let nav = format!(
        "<header class=\"top\"><nav aria-label=\"Console\"><a class=\"brand\" href=\"/\">Stratum</a>\
         <a href=\"/\"{}>Flows</a><a href=\"/gates\"{}>Gates</a></nav>\
         <div class=\"who\"><span>{}</span>{access}{signout}</div>\
         <p id=\"live\" aria-live=\"polite\"></p></header>",
        current(Section::Flows),
        current(Section::Gates),
        escape(&identity.name),
    );
    layout(status, title, &format!("{nav}\n<main>\n{body}\n</main>"))
}

/// The page for a store that failed to answer.
pub fn unavailable(identity: &Identity, error: &StoreError) -> Response {
    page(
        identity,
        Section::Other,
        StatusCode::SERVICE_UNAVAILABLE,
        "Store unavailable",
        &format!(
            "<h1>The store did not answer</h1>\n<p role=\"alert\">{}</p>\n\
             <p>Reload the page in a moment; if it persists, check the server's log.</p>",
            escape(&error.to_string())
        ),
    )
}

/// A status as its badge says it, with the class that colours it.
pub fn status_badge(status: SummaryStatus) -> String {
    let (name, text) = status_words(status);
    format!("<span class=\"badge status-{name}\">{text}</span>")
}

/// The status's name in the contract (`awaiting_gate`) and in words (`waiting on a gate`).
pub fn status_words(status: SummaryStatus) -> (&'static str, &'static str) {
    match status {
        SummaryStatus::Running => ("running", "running"),
        SummaryStatus::AwaitingGate => ("awaiting_gate", "waiting on a gate"),
        SummaryStatus::Complete => ("complete", "complete"),
        SummaryStatus::Killed => ("killed", "killed"),
        SummaryStatus::BudgetExhausted => ("budget_exhausted", "budget exhausted"),
        SummaryStatus::Failed => ("failed", "failed"),
        SummaryStatus::Cancelled => ("cancelled", "cancelled"),
    }
}

/// A moment as the console shows it: `<time>` with the UTC date and time.
pub fn moment(ms: u64) -> String {
    let iso = crate::cli::watch::utc(ms);
    let shown = iso.replacen('T', " ", 1).replacen('Z', " UTC", 1);
    format!("<time datetime=\"{iso}\">{shown}</time>")
}
