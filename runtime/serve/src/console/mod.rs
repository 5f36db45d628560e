//! The web console: where people follow flows and resolve gates, in a browser, on the same
//! store as the agents and the operator CLI.
//!
//! In reading order: [`flows`] (`/`, every flow, filtered and searched), [`flow`]
//! (`/flows/{id}`, one flow: its graph, dispatch, attempts, rounds, iterations, budget,
//! children, checkpoints, timeline; read by [`view`], drawn by [`dag`] and [`timeline`]),
//! [`gates`] (`/gates`, every waiting gate with its decision form, and the form's post),
//! [`gate_context`] (what a person deciding a gate is shown, on its card and its flow's page),
//! [`events`] (`/events`, server-sent events that tell open pages a flow changed), and
//! [`assets`] (the stylesheet and the script, compiled into the binary).
//!
//! Invariants:
//! - pages are HTML rendered here, every value from a spec or a flow escaped and made
//!   visible (control characters and bidirectional overrides as escapes); they work
//!   without the script, which only keeps them current (it refetches the page and swaps the
//!   parts marked `data-live`);
//! - a page is bounded whatever the store holds: names are cut at [`MAX_NAME_CHARS`], texts
//!   at [`MAX_TEXT_CHARS`], a flow's lists at their newest [`MAX_LIST_ENTRIES`], its graph
//!   and step details at [`MAX_STEPS_SHOWN`] steps, each cut said on the page;
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
pub mod gate_context;
pub mod gates;
pub mod timeline;
pub mod view;

use axum::http::StatusCode;
use axum::response::Response;

use super::auth::Identity;
use super::pages::{escape, escape_cut, form, layout};
use crate::cli::query::SummaryStatus;
use crate::store::StoreError;

/// Characters of a name shown (a flow's, a step's, a function's, a checkpoint's); the rest is
/// cut, with a note. Specs are up to 4 MiB, and nothing else bounds a name.
pub const MAX_NAME_CHARS: usize = 200;
/// Characters of a text shown (a rationale, a violation), as the gate form's own limit; an
/// agent may send megabytes through `stratum_gate_resolve`, and the audit keeps them all.
pub const MAX_TEXT_CHARS: usize = 4_000;
/// Entries of each of a flow's lists shown (failed attempts, gate decisions, iteration
/// reports, sub-flows, checkpoints): the newest; the page says how many are left out.
pub const MAX_LIST_ENTRIES: usize = 200;
/// Violations shown per failed attempt.
pub const MAX_VIOLATIONS_SHOWN: usize = 20;
/// Steps a flow's page draws in its graph and lists in its step details: a window from just
/// before the current step; the page says how many are left out.
pub const MAX_STEPS_SHOWN: usize = 500;

/// A name for a page: escaped, visible, cut at [`MAX_NAME_CHARS`].
pub fn shown_name(name: &str) -> String {
    escape_cut(name, MAX_NAME_CHARS)
}

/// A text for a page: escaped, visible, cut at [`MAX_TEXT_CHARS`].
pub fn shown_text(text: &str) -> String {
    escape_cut(text, MAX_TEXT_CHARS)
}

/// The newest `max` of `entries` (the last ones), and how many older ones are left out.
pub fn newest<T>(entries: &[T], max: usize) -> (&[T], usize) {
    let left_out = entries.len().saturating_sub(max);
    (entries.get(left_out..).unwrap_or_default(), left_out)
}

/// The note under a list cut by [`newest`] (empty when nothing was left out).
pub fn left_out_note(left_out: usize, what: &str) -> String {
    if left_out == 0 {
        String::new()
    } else {
        format!(
            "<p class=\"more\">The oldest {} {what} are left out; the whole audit has them \
             (<code>stratum_audit</code>, <code>stratum-mcp query flow ID --json</code>).</p>",
            super::pages::thousands(left_out)
        )
    }
}

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
