//! What the tools that are not flow commands answer, and the errors of the MCP layer itself.
//! Flow commands answer with [`Response`](crate::Response).

use schemars::JsonSchema;
use serde::Serialize;

use super::diagnostics::SpecDiagnostic;

/// `stratum_validate`: every problem of the spec, not only the first.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Validation {
    /// Whether the spec has no errors (warnings do not make it invalid).
    pub valid: bool,
    pub errors: Vec<SpecDiagnostic>,
    pub warnings: Vec<SpecDiagnostic>,
    /// How many diagnostics are not listed: an answer lists at most 200 (errors first);
    /// `stratumc check` lists every one. Absent when all are listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_diagnostics: Option<usize>,
}

/// `stratum_plan` of a spec with errors: the first error in the reference's shape, and
/// every diagnostic beside it.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct SpecRejected {
    #[schemars(extend("const" = "error"))]
    pub status: &'static str,
    pub success: bool,
    /// The first error's `error_type`: `ir_parse_error`, `ir_validation_error` or
    /// `ir_semantic_error`.
    pub error_type: String,
    pub path: String,
    pub message: String,
    pub suggestion: Option<String>,
    /// Every error and warning, in source order: fix all the errors in one edit (at most 200;
    /// `omitted_diagnostics` counts the rest).
    pub diagnostics: Vec<SpecDiagnostic>,
    /// How many diagnostics are not listed beyond the first 200; `stratumc check` lists every
    /// one. Absent when all are listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_diagnostics: Option<usize>,
}

/// A call the server could not run as sent: an argument of the wrong type or shape, an
/// oversized value, a file it could not read, a store it could not open.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ToolError {
    #[schemars(extend("const" = "error"))]
    pub status: &'static str,
    /// `invalid_argument`, `store_unavailable`, `internal_error`, `forbidden` (a read-only
    /// access token of `stratum-mcp serve` called a tool that changes state), or a tool's own
    /// type.
    pub error_type: String,
    pub message: String,
    /// The argument at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
}

impl ToolError {
    pub fn new(error_type: &str, message: impl Into<String>) -> ToolError {
        ToolError {
            status: "error",
            error_type: error_type.to_owned(),
            message: message.into(),
            argument: None,
        }
    }
}
