//! Who calls, checked in one place for every route: [`check_host`] (the `Host` header, before
//! anything), [`guard`] (a token, from `Authorization: Bearer` or a session cookie, looked up
//! in the store; the body's declared size; the CSRF token of a state-changing request that
//! came with a cookie) and [`require_write`] (no read-only token on a route that changes
//! state). Handlers get the caller as an [`Identity`] extractor.
//!
//! Why a bearer request needs no CSRF token: a browser attaches cookies to a forged
//! cross-site request, never an `Authorization` header (that would need a CORS preflight,
//! which this server never grants). A cookie-borne request must prove it comes from one of
//! this server's own pages, whose forms carry the session's token.

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{
    ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST,
};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, Uri, uri::Authority};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::{App, MAX_FORM_BODY_BYTES, MAX_MCP_BODY_BYTES, pages, sessions};
use crate::cli::token::hash;

/// The cookie that names a browser session.
pub const SESSION_COOKIE: &str = "stratum_session";

/// The form field, and the header, that carry a session's CSRF token.
pub const CSRF_FIELD: &str = "csrf";
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The caller of a request that passed [`guard`]: the access token it carried or signed in
/// with. Take it as an argument of a handler; a request without one is refused (401).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The token's name: who the audit records.
    pub name: String,
    pub read_only: bool,
    /// The session's CSRF token, for a browser signed in with a cookie; `None` for a bearer
    /// request. Forms put it in a hidden field ([`Identity::csrf_field`]).
    pub csrf: Option<String>,
}

impl Identity {
    /// The hidden form field that carries the CSRF token (empty for a bearer request).
    pub fn csrf_field(&self) -> String {
        match &self.csrf {
            Some(token) => format!(
                r#"<input type="hidden" name="{CSRF_FIELD}" value="{}">"#,
                pages::escape(token)
            ),
            None => String::new(),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Identity {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Identity, Response> {
        parts
            .extensions
            .get::<Identity>()
            .cloned()
            .ok_or_else(|| unauthorized("this page needs an access token"))
    }
}

/// 401, saying how to authenticate (a browser asking for a page is sent to the sign-in form
/// instead, by [`guard`]).
pub fn unauthorized(why: &str) -> Response {
    let body = format!(
        "401 Unauthorized: {why}. Send `Authorization: Bearer <token>` (make one with \
         `stratum-mcp token create --name NAME`), or sign in at /signin.\n"
    );
    (
        StatusCode::UNAUTHORIZED,
        [
            ("www-authenticate", r#"Bearer realm="stratum""#),
            ("content-type", "text/plain; charset=utf-8"),
            ("cache-control", "no-store"),
        ],
        body,
    )
        .into_response()
}

fn refuse(status: StatusCode, message: String) -> Response {
    (
        status,
        [
            ("content-type", "text/plain; charset=utf-8"),
            ("cache-control", "no-store"),
        ],
        format!(
            "{} {}: {message}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        ),
    )
        .into_response()
}

/// Refuses a request whose `Host` the server does not answer to: the loopback names, the
/// address it listens on, and `--allowed-host`s. A page of another site that rebinds its name
/// to this machine's address would otherwise reach it with the browser's credentials.
pub async fn check_host(State(app): State<App>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    let Some(host) = host else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the request has no Host header".to_owned(),
        );
    };
    let Ok(authority) = host.parse::<Authority>() else {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("the Host header `{host}` is not a host name"),
        );
    };
    if !host_allowed(&app, &authority) {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "this server does not answer to the host `{host}`; if that is its name, start \
                 it with --allowed-host {}",
                authority.host()
            ),
        );
    }
    next.run(request).await
}

fn host_allowed(app: &App, authority: &Authority) -> bool {
    let name = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16();
    let listen = app.options().listen;
    let matches = |allowed: &str| -> bool {
        if allowed == "*" {
            return true;
        }
        allowed_entry(allowed).is_some_and(|(entry_name, entry_port)| {
            same_host(&entry_name, name) && entry_port.is_none_or(|wanted| Some(wanted) == port)
        })
    };
    ["localhost", "127.0.0.1", "::1"]
        .iter()
        .any(|loopback| matches(loopback))
        || (!listen.ip().is_unspecified() && matches(&listen.ip().to_string()))
        || app
            .options()
            .allowed_hosts
            .iter()
            .any(|allowed| matches(allowed))
}

/// An allowed host as a name (brackets removed) and an optional port. A bare IPv6 address
/// (`::1`, as the loopback entry and an IPv6 listen address are written) is not an authority
/// (it would need brackets), so it is taken as an address first: parsed as an authority, it
/// never matched, and `serve --listen [::1]:PORT` refused its own URL.
fn allowed_entry(allowed: &str) -> Option<(String, Option<u16>)> {
    if let Ok(address) = allowed.parse::<std::net::IpAddr>() {
        return Some((address.to_string(), None));
    }
    let entry = allowed.parse::<Authority>().ok()?;
    let name = entry.host().trim_start_matches('[').trim_end_matches(']');
    Some((name.to_owned(), entry.port_u16()))
}

/// Whether two host names are the same host: addresses compared as addresses (`::1` is
/// `0:0:0:0:0:0:0:1`), names without regard to case.
fn same_host(entry: &str, name: &str) -> bool {
    match (
        entry.parse::<std::net::IpAddr>(),
        name.parse::<std::net::IpAddr>(),
    ) {
        (Ok(entry), Ok(name)) => entry == name,
        _ => entry.eq_ignore_ascii_case(name),
    }
}

/// Every route but sign-in: who calls (401 without a valid token; a browser asking for a
/// page is sent to the sign-in form instead, see [`wants_a_page`]), the body's declared size
/// (413), the CSRF token of a state-changing request that came with a session cookie (403).
/// The caller goes on as an [`Identity`] in the request's extensions.
pub async fn guard(State(app): State<App>, mut request: Request, next: Next) -> Response {
    let identity = match identify(&app, request.headers()).await {
        Ok(identity) => identity,
        Err(refused) if refused.status() == StatusCode::UNAUTHORIZED && wants_a_page(&request) => {
            return to_signin(request.uri());
        }
        Err(refused) => return refused,
    };
    if let Some(length) = declared_length(request.headers())
        && length > MAX_MCP_BODY_BYTES as u64
    {
        return too_large(MAX_MCP_BODY_BYTES);
    }
    let changes_state = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if changes_state && let Some(expected) = &identity.csrf {
        request = match check_csrf(request, expected).await {
            Ok(request) => request,
            Err(refused) => return refused,
        };
    }
    tracing::debug!(
        method = %request.method(),
        path = %request.uri().path(),
        caller = %identity.name,
        "request"
    );
    request.extensions_mut().insert(identity);
    next.run(request).await
}

/// Whether a request refused for want of a token is a person's browser asking for a page:
/// a `GET` (or `HEAD`) that accepts `text/html` and carries no `Authorization` header. A
/// script (no `text/html` in its `Accept`, or a bearer token, even a wrong one) and the
/// console's event stream (`text/event-stream`) keep their 401.
fn wants_a_page(request: &Request) -> bool {
    matches!(*request.method(), Method::GET | Method::HEAD)
        && !request.headers().contains_key(AUTHORIZATION)
        && request
            .headers()
            .get_all(ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|media| {
                media
                    .split(';')
                    .next()
                    .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("text/html"))
            })
}

/// What a `next` query value may not leave as it is: everything but letters, digits and `/`,
/// `-`, `_`, `.`, `~`.
const NEXT_ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// 303 to `/signin?next=PATH`, `PATH` the page asked for (its query included), where the
/// sign-in sends the person back ([`safe_next`]).
fn to_signin(uri: &Uri) -> Response {
    let asked = uri.path_and_query().map_or("/", |path| path.as_str());
    let location = format!("/signin?next={}", utf8_percent_encode(asked, NEXT_ENCODED));
    ([(CACHE_CONTROL, "no-store")], Redirect::to(&location)).into_response()
}

/// The page to go to after signing in: `next` if it is a path of this server (ASCII, one `/`
/// first and not two, no `\`, no control character or space, at most 2,048 bytes), else
/// `/`. Anything else could send a person who just signed in to another site (an open
/// redirect): `//evil.example` and `/\evil.example` are another host to a browser, and a
/// browser drops tabs and line breaks from a URL, so `/\t/evil.example` is one too.
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && path.len() <= 2048
                && path
                    .bytes()
                    .all(|byte| byte.is_ascii_graphic() && byte != b'\\') =>
        {
            path
        }
        _ => "/",
    }
}

/// A route that changes state: refused (403) to a read-only token.
pub async fn require_write(identity: Identity, request: Request, next: Next) -> Response {
    if identity.read_only {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "the access token `{}` is read-only: it can look, not change anything",
                identity.name
            ),
        );
    }
    next.run(request).await
}

/// Whether the caller of a request that stays open (the console's event stream) is still let
/// in, asked again of the store: its token not revoked, its session not signed out or
/// expired. A store that cannot answer now is no refusal: the stream goes on and asks again.
pub async fn still_admitted(app: &App, headers: &HeaderMap) -> bool {
    match identify(app, headers).await {
        Ok(_) => true,
        Err(refused) => refused.status() != StatusCode::UNAUTHORIZED,
    }
}

/// The caller: a bearer token if the request has an `Authorization` header (and only then:
/// a wrong one is not overlooked for a cookie), else a session cookie.
async fn identify(app: &App, headers: &HeaderMap) -> Result<Identity, Response> {
    if let Some(value) = headers.get(AUTHORIZATION) {
        let secret = value
            .to_str()
            .ok()
            .and_then(|text| {
                let (scheme, rest) = text.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .filter(|secret| !secret.is_empty())
            .ok_or_else(|| unauthorized("the Authorization header is not `Bearer <token>`"))?;
        let token = app
            .token(hash(secret))
            .await
            .map_err(store_unavailable)?
            .ok_or_else(|| unauthorized("that token is not valid (unknown, or revoked)"))?;
        return Ok(Identity {
            name: token.name,
            read_only: token.read_only,
            csrf: None,
        });
    }
    let Some(id) = cookie(headers, SESSION_COOKIE) else {
        return Err(unauthorized("no access token"));
    };
    let Some(session) = sessions::find(app, &id).await.map_err(store_unavailable)? else {
        return Err(unauthorized("the session has ended; sign in again"));
    };
    let Some(token) = app
        .token(session.token_hash.clone())
        .await
        .map_err(store_unavailable)?
    else {
        // Revoking the token deleted its sessions; this one was opened while it was being
        // revoked. Refused either way: deleting it is only cleanup, so a failure is no answer.
        if let Err(error) = sessions::close(app, &id).await {
            tracing::debug!(%error, "a session of a revoked token could not be deleted");
        }
        return Err(unauthorized(
            "the token this session signed in with was revoked; sign in again",
        ));
    };
    Ok(Identity {
        name: token.name,
        read_only: token.read_only,
        csrf: Some(session.csrf),
    })
}

fn store_unavailable(error: crate::store::StoreError) -> Response {
    refuse(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
}

/// The value of the cookie `name`, if the request has it.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"').to_owned())
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse().ok())
}

pub(crate) fn too_large(limit: usize) -> Response {
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the request body is larger than this endpoint's limit of {limit} bytes ({} KiB)",
            limit / 1024
        ),
    )
}

/// The request again if it carries `expected` in the `x-csrf-token` header or in the `csrf`
/// field of its URL-encoded form; else 403. The form is read (at most
/// [`MAX_FORM_BODY_BYTES`]) and put back for the handler.
async fn check_csrf(request: Request, expected: &str) -> Result<Request, Response> {
    let forbidden = || {
        refuse(
            StatusCode::FORBIDDEN,
            "this request changes state but does not carry the session's CSRF token (form \
             field `csrf` or header `x-csrf-token`); reload the page and submit it again"
                .to_owned(),
        )
    };
    if let Some(sent) = request.headers().get(CSRF_HEADER) {
        return if equal(sent.as_bytes(), expected.as_bytes()) {
            Ok(request)
        } else {
            Err(forbidden())
        };
    }
    let is_form = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Err(forbidden());
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_FORM_BODY_BYTES)
        .await
        .map_err(|_| too_large(MAX_FORM_BODY_BYTES))?;
    // The token is hex, so it is the same encoded or not: no decoding is needed to compare.
    let sent = bytes
        .split(|byte| *byte == b'&')
        .filter_map(|pair| {
            let at = pair.iter().position(|byte| *byte == b'=')?;
            Some(pair.split_at(at))
        })
        .find(|(key, _)| *key == CSRF_FIELD.as_bytes())
        .map(|(_, value)| value.get(1..).unwrap_or_default());
    match sent {
        Some(sent) if equal(sent, expected.as_bytes()) => {
            Ok(Request::from_parts(parts, Body::from(bytes)))
        }
        _ => Err(forbidden()),
    }
}

/// Compares in time independent of where the first difference is.
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
