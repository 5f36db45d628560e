//! `/mcp`: the stdio server's tools ([`StratumServer`], the same table, arguments and answers)
//! over rmcp's Streamable HTTP transport, each call made as the request's [`Identity`]: its
//! name is the actor a gate's audit records, and a read-only token may call only the tools
//! annotated read-only.
//!
//! The transport runs stateless (no `Mcp-Session-Id`; each POST is answered on its own, as
//! JSON), since the server keeps no state between calls anyway: any `serve` process on the same
//! store can answer any request, and shutdown has no idle stream to wait for. Clients of both
//! protocols work (2025-11-25's `initialize` is answered, 2026-07-28 is stateless by design).
//! rmcp's own `Host` check is off: [`super::auth::check_host`] applies the same rule to every
//! route.
//!
//! A POST whose body is not a JSON-RPC message is answered by [`malformed_as_json_rpc`] with a
//! JSON-RPC error (400, -32700 or -32600, `"id": null` unless an id can be read), as the
//! Streamable HTTP transport asks: rmcp answers any body it cannot read with a bare 415, which
//! is meant for a wrong `Content-Type` and tells a client nothing it can act on.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};

use super::auth::Identity;
use super::{App, MAX_MCP_BODY_BYTES};
use stratum_mcp::{Caller, StratumServer};

/// The MCP endpoint as axum mounts it.
pub type Service = StreamableHttpService<HttpTools, NeverSessionManager>;

/// rmcp's Streamable HTTP service over the app's tools.
pub fn service(app: App) -> Service {
    let tools = HttpTools {
        server: app.tools().clone(),
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_MCP_BODY_BYTES);
    StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// Answers a POST whose JSON body is not a JSON-RPC message with a JSON-RPC error instead of
/// rmcp's 415. The body is handed to rmcp as read (its bytes shared, not copied) and examined
/// only when rmcp refused it; a refusal of a request that was not declared JSON stays rmcp's
/// 415, which is right for it.
pub async fn malformed_as_json_rpc(request: Request, next: Next) -> Response {
    let declared_json = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    if request.method() != Method::POST || !declared_json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_MCP_BODY_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than the limit of {MAX_MCP_BODY_BYTES} bytes: send \
                 a smaller spec or result (large artifacts belong in files)"
            ),
        )
            .into_response();
    };
    let answer = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if answer.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return answer;
    }
    let error = stratum_mcp::transport::malformed_message_error(&bytes);
    (
        StatusCode::BAD_REQUEST,
        [(CONTENT_TYPE, "application/json")],
        error.to_string(),
    )
        .into_response()
}

/// The tools, for callers known by their token.
#[derive(Clone)]
pub struct HttpTools {
    server: StratumServer,
}

/// The caller of an MCP request: the [`Identity`] that [`super::auth::guard`] put in the HTTP
/// request, which rmcp hands on in the request's extensions.
fn identity(context: &RequestContext<RoleServer>) -> Option<Identity> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Identity>())
        .cloned()
}

impl ServerHandler for HttpTools {
    fn get_info(&self) -> ServerConfig {
        self.server.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.server.list_tools(request, context).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.server.get_tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Fails closed: a call that somehow arrived without a caller runs nothing.
        let Some(identity) = identity(&context) else {
            return Err(ErrorData::invalid_request(
                "the request carries no access token",
                None,
            ));
        };
        let caller = Caller {
            actor: Some(identity.name),
            os_user: None,
            read_only: identity.read_only,
            paths: stratum_mcp::PathScope::UnderRoot,
        };
        // Stateless HTTP has no way to answer a request the server sends during a call.
        let progress = stratum_mcp::progress::Progress::of(&context).without_asking();
        self.server.call_tool_as(request, caller, progress).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(stratum_mcp::server::custom_request_error(&request))
    }
}
