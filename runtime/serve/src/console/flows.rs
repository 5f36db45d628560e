//! `GET /`: every flow, newest first, with its status, name, current step, start and last
//! change; filtered by status and searched by id or name.
//!
//! Contract: `nav[aria-label="Filter flows"] a[data-filter=all|running|gate|failed|finished]`
//! (the chosen one `aria-current="page"`), `form[role=search]` with `input#search` (`q`),
//! `table#flows` with one `tbody tr[data-flow-id][data-status]` per flow (its first link
//! `/flows/ID`, `td.current-step` the current step id), `p#no-flows` when none matches. The
//! `tbody` is `data-live`: the script swaps it when a flow changes.

use std::fmt::Write;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::{Section, moment, page, status_badge, status_words, unavailable};
use crate::cli::Plans;
use crate::cli::query::{self, SummaryStatus};
use crate::http::App;
use crate::http::auth::Identity;
use crate::http::pages::escape;
use crate::state::FlowHeader;
use crate::store::{Store, StoreError};

/// Rows shown at most; the page says how many more matched.
pub const MAX_ROWS: usize = 500;

/// Which flows the list shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    All,
    /// Not finished (waiting on a gate included).
    Running,
    /// Waiting on a gate.
    Gate,
    /// Failed or out of budget.
    Failed,
    /// Finished, however it ended.
    Finished,
}

const FILTERS: [(Filter, &str, &str); 5] = [
    (Filter::All, "all", "All"),
    (Filter::Running, "running", "Running"),
    (Filter::Gate, "gate", "Waiting on a gate"),
    (Filter::Failed, "failed", "Failed"),
    (Filter::Finished, "finished", "Finished"),
];

impl Filter {
    fn parse(name: Option<&str>) -> Filter {
        FILTERS
            .iter()
            .find(|(_, key, _)| Some(*key) == name)
            .map_or(Filter::All, |(filter, _, _)| *filter)
    }

    fn key(self) -> &'static str {
        FILTERS
            .iter()
            .find(|(filter, _, _)| *filter == self)
            .map_or("all", |(_, key, _)| key)
    }

    fn admits(self, status: SummaryStatus) -> bool {
        match self {
            Filter::All => true,
            Filter::Running => {
                matches!(status, SummaryStatus::Running | SummaryStatus::AwaitingGate)
            }
            Filter::Gate => status == SummaryStatus::AwaitingGate,
            Filter::Failed => matches!(
                status,
                SummaryStatus::Failed | SummaryStatus::BudgetExhausted
            ),
            Filter::Finished => {
                !matches!(status, SummaryStatus::Running | SummaryStatus::AwaitingGate)
            }
        }
    }
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    status: Option<String>,
    q: Option<String>,
}

/// One line of the list.
pub struct Row {
    pub header: FlowHeader,
    pub status: SummaryStatus,
    pub current_step: Option<String>,
}

/// The flows `filter` and `search` (an id prefix or a piece of the name, any case) admit,
/// newest first, at most [`MAX_ROWS`]; and how many matched in all.
pub fn rows(
    store: &dyn Store,
    filter: Filter,
    search: &str,
) -> Result<(Vec<Row>, usize), StoreError> {
    let search = search.trim().to_lowercase();
    let mut plans = Plans::default();
    let mut rows = Vec::new();
    let mut matched = 0;
    for header in store.list_flows()? {
        let found = search.is_empty()
            || header.id.to_string().starts_with(&search)
            || header.flow_name.to_lowercase().contains(&search);
        if !found {
            continue;
        }
        let Some(plan) = plans.get(store, &header.plan)? else {
            continue;
        };
        let summary = query::summary(&header, &plan)?;
        if !filter.admits(summary.status) {
            continue;
        }
        matched += 1;
        if rows.len() < MAX_ROWS {
            rows.push(Row {
                status: summary.status,
                current_step: summary.current_step_id,
                header,
            });
        }
    }
    Ok((rows, matched))
}

/// `GET /`.
pub async fn list(
    State(app): State<App>,
    identity: Identity,
    Query(query): Query<ListQuery>,
) -> Response {
    let filter = Filter::parse(query.status.as_deref());
    let search = query.q.unwrap_or_default();
    let searched = search.clone();
    let found = app
        .blocking(move |store| rows(store, filter, &searched))
        .await;
    let (rows, matched) = match found {
        Ok(found) => found,
        Err(error) => return unavailable(&identity, &error),
    };
    let mut body = String::from("<h1>Flows</h1>\n");
    filters(&mut body, filter, &search);
    let _ = writeln!(
        body,
        "<form role=\"search\" method=\"get\" action=\"/\">\
         <input type=\"hidden\" name=\"status\" value=\"{}\">\
         <label for=\"search\">Search by id or name</label> \
         <input id=\"search\" name=\"q\" type=\"search\" value=\"{}\" autocomplete=\"off\"> \
         <button type=\"submit\">Search</button></form>",
        filter.key(),
        escape(&search)
    );
    body.push_str(&table(&rows, matched));
    page(&identity, Section::Flows, StatusCode::OK, "Flows", &body)
}

fn filters(body: &mut String, chosen: Filter, search: &str) {
    body.push_str("<nav aria-label=\"Filter flows\" class=\"filters\">");
    let q = if search.is_empty() {
        String::new()
    } else {
        format!("&amp;q={}", escape(&encode(search)))
    };
    for (filter, key, label) in FILTERS {
        let current = if filter == chosen {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(
            body,
            "<a data-filter=\"{key}\" href=\"/?status={key}{q}\"{current}>{label}</a>"
        );
    }
    body.push_str("</nav>\n");
}

/// The table (its live body included), or the note that nothing matched.
fn table(rows: &[Row], matched: usize) -> String {
    let mut html = String::from("<div data-live=\"flows\">");
    if rows.is_empty() {
        html.push_str("<p id=\"no-flows\">No flow matches.</p></div>");
        return html;
    }
    html.push_str(
        "<table id=\"flows\"><caption>Flows, newest first</caption><thead><tr>\
         <th scope=\"col\">Status</th><th scope=\"col\">Flow</th><th scope=\"col\">Current step</th>\
         <th scope=\"col\">Started</th><th scope=\"col\">Last change</th></tr></thead><tbody>",
    );
    for row in rows {
        let id = row.header.id.to_string();
        let short = id.get(..8).unwrap_or(&id);
        let parent = row
            .header
            .parent
            .as_ref()
            .map_or_else(String::new, |parent| {
                let parent = parent.flow.to_string();
                format!(
                    " <span class=\"sub\">sub-flow of <a href=\"/flows/{parent}\">{}</a></span>",
                    parent.get(..8).unwrap_or(&parent)
                )
            });
        let _ = write!(
            html,
            "<tr data-flow-id=\"{id}\" data-status=\"{status}\"><td>{badge}</td>\
             <td><a href=\"/flows/{id}\">{name}</a> <code class=\"id\">{short}</code>{parent}</td>\
             <td class=\"current-step\">{step}</td><td>{started}</td><td>{changed}</td></tr>",
            status = status_words(row.status).0,
            badge = status_badge(row.status),
            name = super::shown_name(&row.header.flow_name),
            step = super::shown_name(row.current_step.as_deref().unwrap_or_default()),
            started = moment(row.header.started_ms),
            changed = moment(row.header.updated_ms),
        );
    }
    html.push_str("</tbody></table>");
    if matched > rows.len() {
        let _ = write!(
            html,
            "<p class=\"more\">The newest {} of {matched} flows that match; narrow the list with a \
             filter or a search.</p>",
            rows.len()
        );
    }
    html.push_str("</div>");
    html
}

/// `text` for a URL's query string.
pub fn encode(text: &str) -> String {
    let mut encoded = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                encoded.push(char::from(byte));
            }
            _ => {
                let _ = write!(encoded, "%{byte:02X}");
            }
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_admit_the_statuses_they_name() {
        assert!(Filter::Running.admits(SummaryStatus::AwaitingGate));
        assert!(!Filter::Running.admits(SummaryStatus::Complete));
        assert!(Filter::Gate.admits(SummaryStatus::AwaitingGate));
        assert!(!Filter::Gate.admits(SummaryStatus::Running));
        assert!(Filter::Failed.admits(SummaryStatus::BudgetExhausted));
        assert!(Filter::Finished.admits(SummaryStatus::Killed));
        assert!(!Filter::Finished.admits(SummaryStatus::Running));
        assert_eq!(Filter::parse(Some("gate")), Filter::Gate);
        assert_eq!(Filter::parse(Some("bogus")), Filter::All);
    }

    #[test]
    fn searches_are_encoded_for_links() {
        assert_eq!(encode("a b&c/é"), "a%20b%26c%2F%C3%A9");
    }
}
