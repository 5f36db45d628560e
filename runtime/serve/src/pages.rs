//! The pages outside the console: the sign-in form and its post, sign-out, the 404 page; and
//! what every page uses: [`escape`] for text in HTML (and [`escape_cut`] for text cut to a
//! length), [`layout`] for a whole page, [`form`] for a form that carries its CSRF token.
//!
//! Pages are server-rendered HTML strings; their only script and stylesheet are this
//! server's own ([`super::console::assets`]). Every
//! page answers `Cache-Control: no-store` (they show a signed-in person's state),
//! `Content-Security-Policy` forbids everything but this server's own resources (and any
//! `<base>`, which would redirect every relative link and form), `X-Content-Type-Options:
//! nosniff` keeps a browser from reading a page as anything but HTML, and `Referrer-Policy:
//! same-origin` keeps flow ids in the address out of the requests a link to another site
//! makes. Not `no-referrer`: under it a browser posts forms with `Origin: null`, and the
//! sign-in, which refuses a post from anywhere but this server's own page, would refuse them.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, SET_COOKIE, X_CONTENT_TYPE_OPTIONS,
};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use stratum_grammar::print::push_visible;

use super::auth::{Identity, SESSION_COOKIE, cookie, safe_next};
use super::{App, sessions};
use crate::cli::token::hash;

/// What every page sends besides its body.
const NO_STORE: &str = "no-store";
const POLICY: &str =
    "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";
const NO_SNIFF: &str = "nosniff";
const REFERRER: &str = "same-origin";

/// `text` safe inside HTML text and attribute values, and visible: control characters and
/// bidirectional overrides are written as escapes (`\x1b`, `\u202e`; the one function every
/// output for people uses, [`stratum_grammar::print::visible`]), so that a name cannot
/// disguise itself or another on the page. Line breaks stay: a multi-line value (a JSON value
/// in a `<pre>`) keeps its lines.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            '\n' => escaped.push('\n'),
            c => push_visible(&mut escaped, c),
        }
    }
    escaped
}

/// The first `max_chars` characters of `text`, [`escape`]d, and when that cut something, a
/// note of how much (`… (12,345 characters more)`): what a page shows of a text that can be
/// any length (a name from a spec, a rationale or a violation from an agent), so that one
/// value cannot make a page of megabytes.
pub fn escape_cut(text: &str, max_chars: usize) -> String {
    let cut_at = text.char_indices().nth(max_chars).map(|(at, _)| at);
    match cut_at.and_then(|at| text.get(..at)) {
        Some(shown) => format!(
            "{}… ({} characters more)",
            escape(shown),
            thousands(text.chars().count().saturating_sub(max_chars))
        ),
        None => escape(text),
    }
}

/// `n` with a comma between each group of three digits: `4,500`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

/// A whole page: `title` (text, escaped here) and `body` (HTML inside `<body>`, escaped by the
/// caller), with the console's stylesheet and script and the headers every page sends.
pub fn layout(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} · Stratum</title>\n<link rel=\"stylesheet\" href=\"/assets/console.css\">\n\
         <script src=\"/assets/console.js\" defer></script>\n</head>\n<body>\n{body}\n</body>\n</html>\n",
        escape(title)
    );
    (
        status,
        [
            (CACHE_CONTROL, NO_STORE),
            (CONTENT_SECURITY_POLICY, POLICY),
            (X_CONTENT_TYPE_OPTIONS, NO_SNIFF),
            (REFERRER_POLICY, REFERRER),
        ],
        Html(html),
    )
        .into_response()
}

/// A `POST` form to `action` with the caller's CSRF field and `fields` (HTML) inside.
pub fn form(identity: &Identity, action: &str, fields: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{}\">{}{fields}</form>",
        escape(action),
        identity.csrf_field()
    )
}

/// Where the sign-in form sends the person once signed in: `?next=PATH`, a page of this
/// server that sent them here ([`safe_next`] decides whether it is one).
#[derive(Deserialize)]
pub struct Next {
    #[serde(default)]
    next: Option<String>,
}

/// `GET /signin` (with `?next=PATH` when a page sent the person here).
pub async fn signin_form(Query(next): Query<Next>) -> Response {
    signin_page(StatusCode::OK, "", safe_next(next.next.as_deref()))
}

/// The sign-in form, with `problem` said above it, that goes on to `next` (already safe).
fn signin_page(status: StatusCode, problem: &str, next: &str) -> Response {
    let problem = if problem.is_empty() {
        String::new()
    } else {
        format!("<p role=\"alert\">{}</p>\n", escape(problem))
    };
    let next = if next == "/" {
        String::new()
    } else {
        format!(
            "<input type=\"hidden\" name=\"next\" value=\"{}\">\n",
            escape(next)
        )
    };
    layout(
        status,
        "Sign in",
        &format!(
            "<main class=\"signin\">\n<h1>Sign in to Stratum</h1>\n{problem}<form method=\"post\" action=\"/signin\">\n\
             <label for=\"token\">Access token</label>\n\
             <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>\n\
             {next}<button type=\"submit\">Sign in</button>\n</form>\n\
             <p>An operator makes a token with <code>stratum-mcp token create --name NAME</code>.</p>\n</main>"
        ),
    )
}

#[derive(Deserialize)]
pub struct SignIn {
    token: String,
    /// The page to go back to ([`safe_next`]).
    #[serde(default)]
    next: Option<String>,
}

/// `POST /signin` with `token` (and `next`): a session cookie and the page `next` names (the
/// flows when it names none of this server's), or the form again (401). A
/// post from another site's page is refused (403): it would sign the person in with someone
/// else's token (login CSRF), and no CSRF token can exist before a session does, so the
/// browser's own `Origin` and `Sec-Fetch-Site` headers decide.
pub async fn signin(
    State(app): State<App>,
    headers: HeaderMap,
    Form(signin): Form<SignIn>,
) -> Response {
    let next = safe_next(signin.next.as_deref());
    if let Some(why) = cross_site(&headers, &app.options().allowed_hosts) {
        return signin_page(StatusCode::FORBIDDEN, &why, next);
    }
    let token_hash = hash(signin.token.trim());
    match app.token(token_hash.clone()).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return signin_page(
                StatusCode::UNAUTHORIZED,
                "That token is not valid (unknown, or revoked).",
                next,
            );
        }
        Err(error) => {
            return signin_page(StatusCode::SERVICE_UNAVAILABLE, &error.to_string(), next);
        }
    }
    let (id, _) = match sessions::open(&app, token_hash).await {
        Ok(opened) => opened,
        Err(error) => {
            return signin_page(StatusCode::SERVICE_UNAVAILABLE, &error.to_string(), next);
        }
    };
    let secure = if app.options().secure_cookies {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{SESSION_COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        super::SESSION_LIFETIME.as_secs()
    );
    ([(SET_COOKIE, cookie)], Redirect::to(next)).into_response()
}

/// Why a sign-in post comes from another site's page, if it does: its `Origin` names another
/// host than the one it was sent to (or an `--allowed-host`), or `Sec-Fetch-Site` says
/// `cross-site` or `same-site`. A client that sends neither (a script, an old browser) is let
/// through.
fn cross_site(headers: &HeaderMap, allowed_hosts: &[String]) -> Option<String> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = header("sec-fetch-site")
        && matches!(site, "cross-site" | "same-site")
    {
        return Some(
            "This sign-in came from another site's page, and was refused. Sign in from this \
             server's own page."
                .to_owned(),
        );
    }
    let origin = header("origin")?;
    let host = header("host").unwrap_or_default();
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    // Behind a proxy that does not pass the public name on, the page's origin is that name,
    // given with --allowed-host (a `*` names no origin).
    let named = |allowed: &String| {
        let name = |authority: &str| authority.split(':').next().unwrap_or("").to_lowercase();
        allowed != "*"
            && (allowed.eq_ignore_ascii_case(origin_host)
                || (!allowed.contains(':') && name(allowed) == name(origin_host)))
    };
    let own = origin_host.eq_ignore_ascii_case(host) || allowed_hosts.iter().any(named);
    (origin == "null" || !own).then(|| {
        format!(
            "This sign-in came from {origin}, not from this server's page, and was refused. \
             Sign in from this server's own page."
        )
    })
}

/// `POST /signout`: the session closed and its cookie cleared. When the store cannot delete it,
/// the cookie is cleared all the same, but the answer (503) says the session still stands.
pub async fn signout(State(app): State<App>, request: axum::extract::Request) -> Response {
    let closed = match cookie(request.headers(), SESSION_COOKIE) {
        Some(id) => sessions::close(&app, &id).await,
        None => Ok(()),
    };
    let cleared = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    match closed {
        Ok(()) => ([(SET_COOKIE, cleared)], Redirect::to("/signin")).into_response(),
        Err(error) => {
            let page = layout(
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-out failed",
                &format!(
                    "<main>\n<h1>Sign-out failed</h1>\n<p role=\"alert\">The session could not be \
                     ended: {}. This browser no longer sends it, but it stays valid until it \
                     expires or its token is revoked.</p>\n</main>",
                    escape(&error.to_string())
                ),
            );
            ([(SET_COOKIE, cleared)], page).into_response()
        }
    }
}

/// Any path not routed (behind the guard, so only a caller with a token learns it is absent).
pub async fn not_found() -> Response {
    layout(
        StatusCode::NOT_FOUND,
        "Not found",
        "<main>\n<h1>Not found</h1>\n<p>There is no page here. <a href=\"/\">All flows</a></p>\n</main>",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_html() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn control_and_bidi_characters_are_shown_not_obeyed() {
        assert_eq!(
            escape("a\u{1b}[2K\rb\u{202e}c\nd"),
            "a\\x1b[2K\\rb\\u202ec\nd"
        );
    }

    #[test]
    fn long_text_is_cut_with_a_note() {
        assert_eq!(escape_cut("short", 10), "short");
        assert_eq!(escape_cut("<abcdef", 3), "&lt;ab… (4 characters more)");
        assert_eq!(
            escape_cut(&"é".repeat(1_234_567), 2).len(),
            "éé… (1,234,565 characters more)".len()
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
    }
}
