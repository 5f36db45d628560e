//! `stratum-mcp serve`: the runtime over HTTP, for agents on other machines (the MCP tools over
//! Streamable HTTP at `/mcp`) and for people in a browser (pages, signed in with a token).
//!
//! In reading order: [`routes`] (the route table: every route with its method and the access
//! it needs, built together with the axum router so the list cannot drift from what is
//! served), [`auth`] (who calls: a bearer token or a session cookie, checked on every route
//! but the sign-in form; the CSRF check of every form post; the write check), [`sessions`]
//! (browser sessions, in the store), [`mcp`] (rmcp's Streamable HTTP service over the stdio
//! server's tools, with the caller's token), [`pages`] (sign-in, sign-out, and what pages
//! share: HTML escaping, the layout, forms with their CSRF field), [`console`] (the web
//! console: flows, one flow, gates, live updates, its embedded assets).
//!
//! Invariants:
//! - every request but `GET`/`POST /signin` and the console's assets is refused with 401 unless it carries a valid
//!   token (`Authorization: Bearer`) or the cookie of a session opened with one; the token is
//!   looked up in the store on every request, so a revoked token (and every session opened
//!   with it) stops working at once;
//! - a request whose `Host` is not one the server answers to is refused (403) before anything
//!   else (DNS rebinding);
//! - a read-only token changes nothing: it may call only the MCP tools annotated read-only,
//!   and no [`Access::Write`] route;
//! - a state-changing request that comes with a session cookie must carry the session's CSRF
//!   token (form field `csrf` or header `x-csrf-token`), checked in one place ([`auth`]);
//! - a browser session lives in the store, as the tokens do: every `serve` process on one
//!   store accepts the cookie of any of them, before and after a restart;
//! - a connection is held only while it is used: [`connections`] closes one whose request
//!   headers are slow to arrive or that idles with no request in progress, and accepts no more
//!   than a set number at once;
//! - the server holds no flow state (as the stdio server): every call is one store command,
//!   run on tokio's blocking pool, and its answer is sent after it committed. On SIGTERM or
//!   Ctrl-C it stops accepting connections, lets the requests in flight finish, and exits.

pub mod auth;
pub mod connections;
pub mod console;
pub mod mcp;
pub mod metrics;
pub mod pages;
pub mod routes;
pub mod sessions;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;

use crate::store::{Store, StoreError, Token};
use stratum_mcp::StratumServer;
use stratum_runtime::{Config, Runtime};

// The names this code used when it was the runtime crate's `http` module (`crate::http::…`,
// `crate::cli::…`, `crate::state::…`); new code may name the crates directly.
extern crate self as http;
use stratum_mcp::cli;
use stratum_runtime::{command, exec, ids, now_ms, response, state, store};

pub use auth::Identity;
pub use connections::ConnectionLimits;
pub use routes::{Access, RouteInfo, Routes};

/// Where `serve` listens by default: this machine only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7777";

/// The largest request body of `/mcp`: one JSON-RPC message, as on stdio
/// ([`stratum_mcp::limits::MAX_MESSAGE_BYTES`]). Beyond it: 413.
pub const MAX_MCP_BODY_BYTES: usize = stratum_mcp::limits::MAX_MESSAGE_BYTES;

/// The largest body of a form post (sign-in, the console's forms). Beyond it: 413.
pub const MAX_FORM_BODY_BYTES: usize = 64 * 1024;

/// How long a browser session lasts from sign-in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// How long shutdown waits for the requests in flight before it gives up on them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(60);

/// How `serve` runs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on (port 0: any free port, printed at start).
    pub listen: SocketAddr,
    /// The `Host` names (or `name:port`) requests may carry besides the loopback ones and
    /// the address listened on; `*` accepts any.
    pub allowed_hosts: Vec<String>,
    /// Mark the session cookie `Secure` (browsers then send it over HTTPS only): for a server
    /// behind a TLS reverse proxy.
    pub secure_cookies: bool,
    /// How many connections are held at once, and how long a slow or idle client may hold one.
    pub connections: ConnectionLimits,
    /// Another address that serves `/metrics` alone, without a token (a scraper's).
    pub metrics_listen: Option<SocketAddr>,
}

/// Why `serve` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "no access token exists, and {0} can be reached from other machines: create one first \
         with `stratum-mcp token create --name NAME` (the same --db or --database-url as \
         serve), or listen on a loopback address (127.0.0.1)"
    )]
    NoToken(SocketAddr),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {address}: {reason}")]
    Listen { address: SocketAddr, reason: String },
}

/// What every handler shares: the store, the MCP tools over it, the console's event feed and
/// the options. Cheap to clone.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    config: Config,
    tools: StratumServer,
    feed: console::events::Feed,
    options: ServeOptions,
    /// When each token's use was last written to the store (by hash): at most once a minute.
    used: Mutex<HashMap<String, u64>>,
}

impl App {
    /// The server's state over an open store. `config` is the runtime's (its `--root`).
    pub fn new(store: Arc<dyn Store>, config: Config, options: ServeOptions) -> App {
        let tools = StratumServer::new(
            stratum_mcp::StoreChoice::Open(store.clone()),
            config.clone(),
        );
        App {
            inner: Arc::new(Inner {
                store,
                config,
                tools,
                feed: console::events::Feed::default(),
                options,
                used: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The runtime over the store, for pages that act on flows: a gate resolved from the
    /// console goes through [`crate::cli::gate::resolve_as`] with `Some(&identity.name)` (the
    /// CLI's transaction and conflict answers, the token in the audit), on a blocking thread.
    pub fn runtime(&self) -> Runtime {
        let store = self.inner.store.clone();
        Runtime::new(store.clone(), self.inner.config.clone())
            .observed_by(Arc::new(stratum_mcp::metrics::CommandMetrics::new(store)))
    }

    /// The runtime's settings (its root, its bounds).
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub(crate) fn feed(&self) -> &console::events::Feed {
        &self.inner.feed
    }

    pub fn options(&self) -> &ServeOptions {
        &self.inner.options
    }

    pub(crate) fn tools(&self) -> &StratumServer {
        &self.inner.tools
    }

    /// Runs `work` on the store on tokio's blocking pool (the store is synchronous): every
    /// store call of a handler goes through here, never on an async thread.
    pub async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.inner.store.clone();
        tokio::task::spawn_blocking(move || work(store.as_ref()))
            .await
            .unwrap_or_else(|panic| {
                Err(StoreError::Database(format!(
                    "a store call failed unexpectedly: {panic}"
                )))
            })
    }

    /// The token whose secret has this hash, recording its use (at most once a minute).
    pub(crate) async fn token(&self, hash: String) -> Result<Option<Token>, StoreError> {
        let now = crate::now_ms();
        let due = {
            let used = self
                .inner
                .used
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            now.saturating_sub(used.get(&hash).copied().unwrap_or(0)) >= 60_000
        };
        let looked_up = hash.clone();
        let token = self
            .blocking(move |store| {
                let token = store.token_by_hash(&looked_up)?;
                if due && token.is_some() {
                    store.token_used(&looked_up, now)?;
                }
                Ok(token)
            })
            .await?;
        // Only real tokens are remembered: guessed secrets must not grow the map.
        if due && token.is_some() {
            self.inner
                .used
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(hash, now);
        }
        Ok(token)
    }
}

/// The whole server: every route of [`routes::table`], behind the `Host` check.
pub fn router(app: App) -> (Router, Vec<RouteInfo>) {
    let routes = routes::table(&app);
    let list = routes.list().to_vec();
    (routes.into_router(app), list)
}

/// The listener of `--metrics-listen`, with its address printed as the main one is.
async fn metrics_listener(address: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| ServeError::Listen {
            address,
            reason: error.to_string(),
        })?;
    if let Ok(bound) = listener.local_addr() {
        eprintln!("stratum-mcp serve: metrics at http://{bound}/metrics");
    }
    Ok(listener)
}

/// Serves until `shutdown` completes, then stops accepting, lets the requests in flight finish
/// (at most [`SHUTDOWN_GRACE`]) and returns. `ready` is told the address listened on.
pub async fn serve(
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let address = app.options().listen;
    if !address.ip().is_loopback() {
        let store = app.store().clone();
        let tokens = tokio::task::spawn_blocking(move || store.tokens())
            .await
            .unwrap_or_else(|panic| Err(StoreError::Database(panic.to_string())))?;
        if tokens.is_empty() {
            return Err(ServeError::NoToken(address));
        }
    }
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| ServeError::Listen {
            address,
            reason: error.to_string(),
        })?;
    let bound = listener.local_addr().map_err(|error| ServeError::Listen {
        address,
        reason: error.to_string(),
    })?;
    let metrics = match app.options().metrics_listen {
        Some(address) => Some(metrics_listener(address).await?),
        None => None,
    };
    ready(bound);
    if let Some(listener) = metrics {
        let router = metrics::router(app.clone());
        // It ends with the process; a scrape in flight at shutdown is of no consequence.
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::warn!("the metrics address stopped: {error}");
            }
        });
    }
    let listener = connections::Connections::new(listener, app.options().connections);
    let (router, _) = router(app.clone());
    // Outermost, so that a request is in progress (and no timeout cuts it) from its start.
    let router = router.layer(axum::middleware::from_fn(connections::track_requests));
    let stopping = Arc::new(tokio::sync::Notify::new());
    let signal = stopping.clone();
    let service = router.into_make_service_with_connect_info::<connections::ConnectionActivity>();
    let served = axum::serve(listener, service).with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; finishing the requests in flight");
        // Open console pages' event streams would otherwise hold the shutdown up.
        app.feed().close();
        signal.notify_one();
    });
    let served = async move {
        served.await.map_err(|error| ServeError::Listen {
            address: bound,
            reason: error.to_string(),
        })
    };
    let deadline = async move {
        stopping.notified().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = served => served,
        () = deadline => {
            tracing::warn!(
                "requests still in flight {} s after the shutdown signal were abandoned",
                SHUTDOWN_GRACE.as_secs()
            );
            Ok(())
        }
    }
}
