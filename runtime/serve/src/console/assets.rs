//! The console's stylesheet and script, compiled into the binary (the server needs no files
//! and no network), served at `/assets/NAME` to anyone: they hold nothing secret, and the
//! sign-in page needs its style before anyone has signed in.
//!
//! A name is looked up in a fixed table, never on a file system, so no path can reach
//! anything else (`/assets/../x` is just a name the table lacks: 404).

use axum::extract::Path;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::response::{IntoResponse, Response};

/// Every asset: its name, media type and bytes.
pub const ASSETS: [(&str, &str, &str); 2] = [
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../../assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/console.js"),
    ),
];

/// `GET /assets/{name}`.
pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(known, _, _)| *known == name) {
        Some((_, media_type, body)) => (
            [
                (CONTENT_TYPE, *media_type),
                (CACHE_CONTROL, "no-cache"),
                (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *body,
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            "404 Not Found: no such asset\n",
        )
            .into_response(),
    }
}
