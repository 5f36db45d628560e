//! `GET /events`: server-sent events that tell the console's open pages which flows changed,
//! so that they refresh the parts that show them (the script in [`super::assets`]).
//!
//! One watcher per server, not one per page: while anyone listens, it waits for the store to
//! change ([`Store::wait_for_change`]: PostgreSQL's `NOTIFY` wakes it at once, SQLite is
//! polled every [`POLL`]), reads every flow's version ([`Store::flow_versions`], not the
//! headers), and broadcasts the ids whose version moved as one `change` event (`data`: the
//! ids, space-separated). With no listener it reads nothing. Another process's changes are
//! seen as well as this one's: the store is the truth.
//!
//! A stream lives no longer than the right to it: before each event and every [`RECHECK`] it
//! asks the store again for its caller ([`auth::still_admitted`]), so a token revoked or a
//! session signed out anywhere (another `serve`, the command line) ends its open streams
//! within that time, and they deliver nothing more.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast;

use crate::http::App;
use crate::http::auth::{self, Identity};
use crate::ids::FlowId;
use crate::store::Store;

/// How often a store without change notifications is read, and the longest wait for one.
pub const POLL: Duration = Duration::from_secs(1);

/// How often an open stream asks whether its caller is still let in (and so the longest a
/// stream outlives a revoked token or a closed session).
pub const RECHECK: Duration = Duration::from_secs(5);

/// The ids (space-separated) of the flows that changed together.
type Changed = Arc<str>;

/// The server's one watcher of the store, started by the first listener.
pub struct Feed {
    sender: broadcast::Sender<Changed>,
    started: std::sync::Once,
    /// Set when the server shuts down: every stream ends, so that no open page holds the
    /// graceful shutdown up.
    closing: tokio::sync::watch::Sender<bool>,
}

impl Default for Feed {
    fn default() -> Feed {
        let (sender, _) = broadcast::channel(64);
        Feed {
            sender,
            started: std::sync::Once::new(),
            closing: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl Feed {
    /// Ends every stream (the server is shutting down).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    fn subscribe(&self, store: &Arc<dyn Store>) -> broadcast::Receiver<Changed> {
        let receiver = self.sender.subscribe();
        self.started.call_once(|| {
            let sender = self.sender.clone();
            let store = store.clone();
            tokio::spawn(watch(store, sender));
        });
        receiver
    }
}

/// Broadcasts the flows whose version moved, for as long as the server runs.
async fn watch(store: Arc<dyn Store>, sender: broadcast::Sender<Changed>) {
    let mut seen: Option<HashMap<FlowId, u64>> = None;
    loop {
        if sender.receiver_count() == 0 {
            // Nobody listens: nothing is read. What changes meanwhile is announced when someone
            // does (against the versions last seen, which are kept).
            tokio::time::sleep(POLL).await;
            continue;
        }
        let reader = store.clone();
        let first = seen.is_none();
        let read = tokio::task::spawn_blocking(move || {
            if !first {
                reader.wait_for_change(POLL)?;
            }
            reader.flow_versions()
        })
        .await;
        let versions = match read {
            Ok(Ok(versions)) => versions,
            Ok(Err(error)) => {
                tracing::warn!("the console's change feed cannot read the store: {error}");
                tokio::time::sleep(POLL).await;
                continue;
            }
            Err(_) => continue,
        };
        let now: HashMap<FlowId, u64> = versions.into_iter().collect();
        let Some(before) = &seen else {
            // The first look: nothing to compare with, and a page may have read the store
            // before it (between its own refresh and now); every page looks again.
            let _ = sender.send(Arc::from("*"));
            seen = Some(now);
            continue;
        };
        let mut changed: Vec<String> = now
            .iter()
            .filter(|(id, version)| before.get(*id) != Some(*version))
            .map(|(id, _)| id.to_string())
            .chain(
                before
                    .keys()
                    .filter(|id| !now.contains_key(*id))
                    .map(ToString::to_string),
            )
            .collect();
        if !changed.is_empty() {
            changed.sort();
            // No receiver left between the check and now: nothing to do.
            let _ = sender.send(Arc::from(changed.join(" ")));
        }
        seen = Some(now);
    }
}

/// `GET /events`.
pub async fn stream(State(app): State<App>, _identity: Identity, headers: HeaderMap) -> Response {
    let feed = app.feed();
    let listener = Listener {
        receiver: feed.subscribe(app.store()),
        closing: feed.closing.subscribe(),
        recheck: tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK),
        app: app.clone(),
        headers,
    };
    let events = futures_util::stream::unfold(listener, |mut listener| async move {
        let event = listener.next_event().await?;
        Some((Ok::<Event, Infallible>(event), listener))
    });
    // nginx would otherwise hold the events back in its buffer.
    (
        [("x-accel-buffering", "no")],
        Sse::new(events).keep_alive(KeepAlive::default()),
    )
        .into_response()
}

/// One open stream: the feed it hears, and the request it came with (to ask again whether
/// its caller is let in).
struct Listener {
    receiver: broadcast::Receiver<Changed>,
    closing: tokio::sync::watch::Receiver<bool>,
    recheck: tokio::time::Interval,
    app: App,
    headers: HeaderMap,
}

/// What woke a stream.
enum Wake {
    Changed(Result<Changed, broadcast::error::RecvError>),
    Closing,
    Recheck,
}

impl Listener {
    /// The next event to send, or `None` when the stream ends: the server shuts down, or the
    /// caller's token or session is gone.
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            let wake = tokio::select! {
                changed = self.receiver.recv() => Wake::Changed(changed),
                _ = self.closing.wait_for(|closed| *closed) => Wake::Closing,
                _ = self.recheck.tick() => Wake::Recheck,
            };
            let changed = match wake {
                Wake::Closing => return None,
                Wake::Recheck => {
                    if !auth::still_admitted(&self.app, &self.headers).await {
                        return None;
                    }
                    continue;
                }
                Wake::Changed(changed) => changed,
            };
            let data: Changed = match changed {
                Ok(changed) => changed,
                // A page that fell behind refreshes anyway: say that everything changed.
                Err(broadcast::error::RecvError::Lagged(_)) => Arc::from("*"),
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            if !auth::still_admitted(&self.app, &self.headers).await {
                return None;
            }
            return Some(Event::default().event("change").data(data.as_ref()));
        }
    }
}
