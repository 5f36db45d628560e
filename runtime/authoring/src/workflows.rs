//! `stratum_list_workflows`: the specs of a directory that register a workflow.
//!
//! Takes a directory; gives every `*.stratum.yaml` file directly in it (not in subdirectories,
//! hidden files left out, in name order) that checks clean and has a `workflow:` block, and a
//! problem for every file that does not check, cannot be read, or registers a name an earlier
//! file already took (the first one wins). Each problem is reported twice: as a line in
//! `errors`, the reference server's shape, and as a structured entry in `problems`, in the
//! same order. Specs without a `workflow:` block are neither listed nor problems.
//!
//! For a caller confined to a root (over HTTP), each file must resolve under it: a spec that
//! is a symbolic link leading out of the root is a problem, never read, and its resolved path
//! is not shown.
//!
//! Invariants: listing never panics and never fails as a whole (a missing directory lists
//! nothing); the work is bounded, since at most [`MAX_SPECS`] files are checked and a file
//! over the compiler's [`MAX_FILE_SIZE`] is never read whole; special files (FIFOs, sockets)
//! are never opened.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::Path;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use stratum_compiler::diagnostic::{Code, Diagnostic};
use stratum_compiler::input::{MAX_FILE_SIZE, Reason};
use stratum_compiler::source::SourceMap;
use stratum_compiler::syntax::ast::{Workflow, WorkflowParam};

use crate::confined::ResolveError;

/// The most spec files one listing checks: the first ones in name order.
pub const MAX_SPECS: usize = 10_000;

/// What a file's name ends with to be listed.
pub const SPEC_SUFFIX: &str = ".stratum.yaml";

/// The answer of `stratum_list_workflows`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
pub struct WorkflowList {
    /// The workflows, in the order of their files' names.
    pub workflows: Vec<WorkflowEntry>,
    /// One line per problem, as the reference server writes them:
    /// `<file>:<line>:<column>: <message> [<code>]` for a spec with errors,
    /// `duplicate workflow name '<name>': <first path> and <second path>` for a name taken twice.
    pub errors: Vec<String>,
    /// The same problems, in the same order, structured.
    pub problems: Vec<Problem>,
}

/// One registered workflow.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct WorkflowEntry {
    pub name: String,
    pub description: String,
    /// The workflow's inputs by name, each with the keys its spec wrote.
    pub input: BTreeMap<String, InputParam>,
    /// The spec's absolute path, symbolic links resolved.
    pub path: String,
}

/// One workflow input, as written: a key the spec left out is left out here.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct InputParam {
    /// `string`, `boolean`, `integer`, `number`, `array` or `object`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// The default as JSON (a written `default: null` is `null`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// A file (or the directory) that gave no workflow, or a workflow name taken twice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Problem {
    /// The absolute path of the file, or the directory as given.
    pub path: String,
    /// 1-based; `null` when the problem has no place in a file (it could not be read).
    pub line: Option<usize>,
    /// 1-based, in characters; `null` with `line`.
    pub column: Option<usize>,
    /// The diagnostic's code (`E0004`), for problems the compiler found.
    pub code: Option<String>,
    pub message: String,
}

/// Lists the workflows of the specs directly in `dir`.
pub fn list_workflows(dir: &Path) -> WorkflowList {
    list_workflows_under(dir, None)
}

/// [`list_workflows`] for a caller confined to `root` (canonical; over HTTP): a spec that does
/// not resolve under it is a problem, not read.
pub fn list_workflows_under(dir: &Path, root: Option<&Path>) -> WorkflowList {
    let mut list = WorkflowList::default();
    let shown = dir.display().to_string();
    let dir = match std::fs::canonicalize(dir) {
        Ok(dir) => dir,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return list,
        Err(error) => {
            list.unreadable(
                &shown,
                &shown,
                format!("cannot open the directory: {error}"),
            );
            return list;
        }
    };
    if !dir.is_dir() {
        list.unreadable(
            &shown,
            &shown,
            "the path is not a directory; give the directory that holds the `.stratum.yaml` files"
                .to_owned(),
        );
        return list;
    }
    let names = match spec_names(&dir) {
        Ok(names) => names,
        Err(error) => {
            list.unreadable(
                &shown,
                &shown,
                format!("cannot read the directory: {error}"),
            );
            return list;
        }
    };
    let mut taken = HashMap::new();
    for name in names.iter().take(MAX_SPECS) {
        list.add_file(&dir, name, root, &mut taken);
    }
    if names.len() > MAX_SPECS {
        list.unreadable(
            &shown,
            &shown,
            format!(
                "the directory holds {} spec files; only the first {MAX_SPECS} in name order were checked",
                names.len()
            ),
        );
    }
    list
}

/// The names of the directory's entries that look like specs, sorted by their bytes (which
/// for UTF-8 names is the reference's order, by code points). Hidden files are left out, as
/// the reference's glob leaves them out.
fn spec_names(dir: &Path) -> std::io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let bytes = name.as_encoded_bytes();
        if bytes.ends_with(SPEC_SUFFIX.as_bytes()) && !bytes.starts_with(b".") {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

impl WorkflowList {
    /// Checks one file and adds its workflow or its problem. `taken` maps each workflow name
    /// listed so far to its path.
    fn add_file(
        &mut self,
        dir: &Path,
        name: &OsString,
        root: Option<&Path>,
        taken: &mut HashMap<String, String>,
    ) {
        let joined = dir.join(name);
        let shown = joined.display().to_string();
        let Some(name) = name.to_str() else {
            self.unreadable(
                &name.to_string_lossy(),
                &shown,
                "the file name is not valid UTF-8; rename the file".to_owned(),
            );
            return;
        };
        // Resolved before anything else is looked at, so that nothing is learnt about a file
        // outside the root, not even its kind.
        let resolved = match crate::confined::resolve_under(&joined, root) {
            Ok(resolved) => resolved,
            Err(ResolveError::OutsideRoot) => {
                self.unreadable(
                    name,
                    &shown,
                    "leads outside the server's root (a symbolic link?), so not read; over \
                     HTTP only specs under the directory the server runs in are listed"
                        .to_owned(),
                );
                return;
            }
            Err(ResolveError::Io(error)) => {
                self.unreadable(name, &shown, format!("cannot read the file: {error}"));
                return;
            }
        };
        let metadata = match std::fs::metadata(&resolved) {
            Ok(metadata) => metadata,
            Err(error) => {
                self.unreadable(name, &shown, format!("cannot read the file: {error}"));
                return;
            }
        };
        if !metadata.is_file() {
            self.unreadable(
                name,
                &shown,
                "not a regular file, so not read as a spec".to_owned(),
            );
            return;
        }
        let Some(path) = resolved.to_str().map(str::to_owned) else {
            self.unreadable(
                name,
                &shown,
                "the file's absolute path is not valid UTF-8".to_owned(),
            );
            return;
        };
        let mut sources = SourceMap::new();
        if metadata.len() > MAX_FILE_SIZE as u64 {
            // Not read at all: the compiler would refuse it anyway.
            let file = sources.add(name, String::new());
            let size = usize::try_from(metadata.len()).unwrap_or(usize::MAX);
            let diagnostic = Reason::TooLarge { size }.diagnostic(file);
            self.invalid(name, &path, &sources, &diagnostic);
            return;
        }
        // One byte past the limit, so that a file that grew after it was measured is still
        // refused without being read whole.
        let compilation = match crate::confined::read_regular(&resolved, MAX_FILE_SIZE as u64 + 1) {
            Ok(bytes) => stratum_compiler::check_bytes(&mut sources, name, &bytes),
            Err(error) => {
                self.unreadable(name, &path, format!("cannot read the file: {error}"));
                return;
            }
        };
        if let Some(error) = compilation.diagnostics.iter().find(|d| d.is_error()) {
            self.invalid(name, &path, &sources, error);
            return;
        }
        let Some(workflow) = compilation.ast.workflow.as_ref().map(|field| &field.value) else {
            return;
        };
        let Some(workflow_name) = &workflow.name else {
            return; // a clean spec always names its workflow
        };
        if let Some(first) = taken.get(&workflow_name.value) {
            let message = format!(
                "duplicate workflow name '{}': {first} and {path}",
                workflow_name.value
            );
            let at = sources
                .get(workflow_name.span.file)
                .map(|file| file.line_col(workflow_name.span.start as usize));
            self.errors.push(message.clone());
            self.problems.push(Problem {
                path,
                line: at.map(|at| at.line),
                column: at.map(|at| at.column),
                code: Some(Code::E0018.as_str().to_owned()),
                message,
            });
            return;
        }
        taken.insert(workflow_name.value.clone(), path.clone());
        self.workflows
            .push(entry(workflow_name.value.clone(), workflow, path));
    }

    /// A spec with errors: reported by its first error.
    fn invalid(&mut self, name: &str, path: &str, sources: &SourceMap, error: &Diagnostic) {
        let span = error.primary_span();
        let at = sources
            .get(span.file)
            .map(|file| file.line_col(span.start as usize));
        let code = error.code.as_str();
        self.errors.push(match at {
            Some(at) => format!(
                "{name}:{}:{}: {} [{code}]",
                at.line, at.column, error.message
            ),
            None => format!("{name}: {} [{code}]", error.message),
        });
        self.problems.push(Problem {
            path: path.to_owned(),
            line: at.map(|at| at.line),
            column: at.map(|at| at.column),
            code: Some(code.to_owned()),
            message: error.message.clone(),
        });
    }

    /// A file or directory that could not be checked: `<shown>: <message>`.
    fn unreadable(&mut self, shown: &str, path: &str, message: String) {
        self.errors.push(format!("{shown}: {message}"));
        self.problems.push(Problem {
            path: path.to_owned(),
            line: None,
            column: None,
            code: None,
            message,
        });
    }
}

fn entry(name: String, workflow: &Workflow, path: String) -> WorkflowEntry {
    WorkflowEntry {
        name,
        description: workflow
            .description
            .as_ref()
            .map(|description| description.value.clone())
            .unwrap_or_default(),
        input: workflow
            .input
            .iter()
            .flat_map(|input| &input.value)
            .map(|param| (param.name.value.clone(), input_param(param)))
            .collect(),
        path,
    }
}

fn input_param(param: &WorkflowParam) -> InputParam {
    InputParam {
        ty: param.ty.as_ref().map(|ty| ty.value.as_str().to_owned()),
        required: param.required.as_ref().map(|required| required.value),
        default: param
            .default
            .as_ref()
            .and_then(|default| stratum_compiler::sema::schema::to_json(&default.value)),
    }
}
