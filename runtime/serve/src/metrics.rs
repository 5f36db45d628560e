//! `GET /metrics`: [`stratum_mcp::metrics`]'s exposition, for Prometheus. On the main address it
//! is a page like any other (any token, a read-only one included); `--metrics-listen ADDR`
//! serves it alone on another address without a token, for a scraper on a private network.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::App;

/// The exposition, read from the store now.
pub async fn exposition(State(app): State<App>) -> Response {
    let rendered = app
        .blocking(|store| stratum_mcp::metrics::render(store, crate::now_ms()))
        .await;
    match rendered {
        Ok(text) => (
            StatusCode::OK,
            [(CONTENT_TYPE, stratum_mcp::metrics::CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store cannot be read: {error}"),
        )
            .into_response(),
    }
}

/// The router of the metrics address: `/metrics` and nothing else.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/metrics", get(exposition))
        .with_state(app)
}
