//! The route table: [`table`] lists every route `serve` answers, each added through
//! [`Routes`], which registers it with axum and records its method, path and [`Access`] in
//! the same call. [`Routes::list`] is therefore the router's own list (the security tests ask
//! every route in it for a 401 without a token), and a route cannot be added unseen.
//!
//! To add a page: write a handler (`async fn(State<App>, Identity, …) -> impl IntoResponse`)
//! and add `.page("/flows/{id}", flow_page)` to [`table`]; a form that changes state is
//! `.action("/gates/{flow}/{step}", resolve_gate)`: its CSRF token is checked by
//! [`auth::guard`], and a read-only token is refused by [`auth::require_write`], before the
//! handler runs.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::middleware;
use axum::routing::{MethodRouter, get, post};

use super::{App, MAX_FORM_BODY_BYTES, auth, console, mcp, metrics, pages};

/// Who may reach a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone: only the sign-in form and its post, and the console's stylesheet and script.
    Public,
    /// Any valid token, read-only included (pages, `/mcp` whose tools check read-only
    /// themselves, sign-out).
    Read,
    /// A token that is not read-only (forms that change flows).
    Write,
}

/// One route as registered: a method, an axum path (`/flows/{id}`) and its access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteInfo {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}

/// Every route `serve` answers.
pub fn table(app: &App) -> Routes {
    Routes::default()
        .public_get("/signin", pages::signin_form)
        .public_post("/signin", pages::signin)
        .public_get("/assets/{name}", console::assets::asset)
        .page("/", console::flows::list)
        .page("/flows/{id}", console::flow::show)
        .page("/gates", console::gates::list)
        .action("/gates/{flow}/{step}", console::gates::decide)
        .page("/events", console::events::stream)
        .page("/metrics", metrics::exposition)
        .post("/signout", pages::signout, Access::Read)
        .mcp(
            "/mcp",
            &["POST", "GET", "DELETE"],
            mcp::service(app.clone()),
        )
}

/// Routes being registered, with their list.
#[derive(Default)]
pub struct Routes {
    public: Router<App>,
    protected: Router<App>,
    list: Vec<RouteInfo>,
}

impl Routes {
    /// Every route registered so far.
    pub fn list(&self) -> &[RouteInfo] {
        &self.list
    }

    /// A page: `GET` (and `HEAD`), for any token.
    pub fn page<H, T>(self, path: &'static str, handler: H) -> Routes
    where
        H: Handler<T, App>,
        T: 'static,
    {
        self.protected(path, "GET", Access::Read, get(handler))
    }

    /// A form that changes state: `POST`, for a token that is not read-only, with the
    /// session's CSRF token when it comes from a browser.
    pub fn action<H, T>(self, path: &'static str, handler: H) -> Routes
    where
        H: Handler<T, App>,
        T: 'static,
    {
        self.post(path, handler, Access::Write)
    }

    /// A `POST` with the access given ([`Access::Read`] for one that changes no flow, as
    /// sign-out).
    pub fn post<H, T>(self, path: &'static str, handler: H, access: Access) -> Routes
    where
        H: Handler<T, App>,
        T: 'static,
    {
        let route = post(handler).layer(DefaultBodyLimit::max(MAX_FORM_BODY_BYTES));
        let route = match access {
            Access::Write => route.route_layer(middleware::from_fn(auth::require_write)),
            Access::Read | Access::Public => route,
        };
        self.protected(path, "POST", access, route)
    }

    /// The MCP endpoint (rmcp's service answers its methods itself), for any token.
    fn mcp(
        mut self,
        path: &'static str,
        methods: &[&'static str],
        service: mcp::Service,
    ) -> Routes {
        let endpoint = Router::new()
            .route_service(path, service)
            .layer(middleware::from_fn(mcp::malformed_as_json_rpc));
        self.protected = self.protected.merge(endpoint);
        self.list.extend(methods.iter().map(|method| RouteInfo {
            method,
            path,
            access: Access::Read,
        }));
        self
    }

    fn protected(
        mut self,
        path: &'static str,
        method: &'static str,
        access: Access,
        route: MethodRouter<App>,
    ) -> Routes {
        self.protected = self.protected.route(path, route);
        self.list.push(RouteInfo {
            method,
            path,
            access,
        });
        self
    }

    fn public_get<H, T>(mut self, path: &'static str, handler: H) -> Routes
    where
        H: Handler<T, App>,
        T: 'static,
    {
        self.public = self.public.route(path, get(handler));
        self.list.push(RouteInfo {
            method: "GET",
            path,
            access: Access::Public,
        });
        self
    }

    fn public_post<H, T>(mut self, path: &'static str, handler: H) -> Routes
    where
        H: Handler<T, App>,
        T: 'static,
    {
        self.public = self.public.route(
            path,
            post(handler).layer(DefaultBodyLimit::max(MAX_FORM_BODY_BYTES)),
        );
        self.list.push(RouteInfo {
            method: "POST",
            path,
            access: Access::Public,
        });
        self
    }

    /// The router: the public routes as they are; every other route, and any path not
    /// routed, behind [`auth::guard`]; all of it behind the `Host` check.
    pub fn into_router(self, app: App) -> Router {
        let protected = self
            .protected
            .fallback(pages::not_found)
            .layer(middleware::from_fn_with_state(app.clone(), auth::guard));
        self.public
            .merge(protected)
            .layer(middleware::from_fn_with_state(
                app.clone(),
                auth::check_host,
            ))
            .with_state(app)
    }
}
