//! Completion at a position of a document: the keys valid there, the names a value may take,
//! and the fields an expression may read.
//!
//! [`complete`] is a pure function of the current [`Analysis`], the last analysis whose YAML
//! parsed, and a byte offset. Where the cursor stands (which mapping, which key's value, which
//! list item) is read from the current text's indentation, so that a half-typed line that makes
//! the YAML fail still completes; what the names mean (a step's kind, a contract's fields, a
//! flow's input) comes from the compiler's model of the current text when it parsed, else of
//! `last_good`. The keys themselves come from the compiler's shapes (`syntax::keys`), so they
//! cannot drift from what the front end accepts, and their details are the first sentence of
//! the documentation hover shows (`key_docs`).
//!
//! Inside an expression the free names are those `sema::typecheck` gives its place: `result`,
//! the iteration names in an `exit_criterion` whose step writes `score_expr` or `accumulate`,
//! `item` alone in `accumulate_key`; a name the checker would reject is never offered. After
//! `[` and a quote (`result['`) the fields come closed (`confidence']`). Inside an open
//! placeholder of a v0.3 `intent_template` (`{`, `{task.`) the names and fields are those
//! `sema::fan_out` binds in that template (a task's, or a stage's by its role).
//!
//! Results are in a meaningful order (required keys and the format's order first, names in
//! declaration order); they are not filtered by the word typed so far, which is the client's
//! job (clients match fuzzily), but they are capped at [`MAX_COMPLETIONS`].
//!
//! Work is linear in the text: one pass over the lines above the cursor and over the
//! enclosing mapping, and every detail is cut at [`MAX_DETAIL`] characters.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Display, Write as _};

use stratum_compiler::sema::dag::Ancestors;
use stratum_compiler::sema::fan_out::{self, TemplateOf};
use stratum_compiler::sema::resolve::StepInfo;
use stratum_compiler::sema::symbols::flow_steps;
use stratum_compiler::sema::types::FieldType;
use stratum_compiler::source::Span;
use stratum_compiler::syntax::ast::{Ast, Flow, Function, Mode, Version};
use stratum_compiler::syntax::keys::{self, Required, Shape};
use stratum_grammar::Problem;
use stratum_grammar::types::Type;

use crate::analysis::Analysis;
use crate::key_docs::{self, KeyPlace};
use crate::placeholders;

/// Most completions returned for one request.
pub const MAX_COMPLETIONS: usize = 2_000;
/// Longest `detail`, in characters (a longer one ends with `…`).
pub const MAX_DETAIL: usize = 120;

/// One completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// What the list shows, and what is inserted when `insert_text` is `None`.
    pub label: String,
    pub kind: CompletionKind,
    /// A type, a step's kind, `required`, or a one-line description of a key.
    pub detail: Option<String>,
    /// A line of Markdown on what the name means (the iteration names, `result`).
    pub documentation: Option<String>,
    /// What to insert instead of the label (`depends_on: ` for a key).
    pub insert_text: Option<String>,
    /// The word typed so far, which the completion replaces (empty at the cursor when nothing
    /// is typed yet); in the current text's byte offsets.
    pub replace: Option<Span>,
}

/// What a completion names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompletionKind {
    /// A key of the spec format (`depends_on`, `mode`).
    Key,
    Contract,
    Function,
    Flow,
    /// A step id.
    Step,
    /// A field of a contract or record, an input parameter.
    Field,
    /// A name an expression starts from: `input`, `steps`, `output`, `result`.
    Variable,
    /// A fixed value of a key: `infer`, `gate`, `~`, a type name.
    Value,
}

/// Completions at byte `offset` of `current`. `last_good` is the most recent analysis of the
/// same document whose YAML parsed; it tells what the names meant when the current text does
/// not parse. Never panics; any offset is clamped to the text.
pub fn complete(
    current: &Analysis,
    last_good: Option<&Analysis>,
    offset: usize,
) -> Vec<Completion> {
    let text = current.text.as_str();
    let mut offset = offset.min(text.len());
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let sem = if parsed(&current.compilation.ast) {
        current
    } else {
        last_good.unwrap_or(current)
    };
    let lines = split_lines(text);
    let cursor_line = lines
        .partition_point(|line| line.start <= offset)
        .saturating_sub(1);
    let Some(line) = lines.get(cursor_line) else {
        return Vec::new();
    };
    let column = offset.saturating_sub(line.start).min(line.text.len());
    let prefix = line.text.get(..column).unwrap_or("");
    let suffix = line.text.get(column..).unwrap_or("");
    let cx = Cx {
        current,
        sem,
        lines,
        cursor_line,
        offset,
        prefix,
        suffix,
        version: sem
            .compilation
            .ast
            .version
            .as_ref()
            .map_or(Version::V0_2, |version| version.value),
    };
    let mut out = cx.run();
    out.truncate(MAX_COMPLETIONS);
    out
}

/// Whether the YAML of a compilation gave an AST at all.
fn parsed(ast: &Ast) -> bool {
    ast.version.is_some()
        || !ast.contracts.is_empty()
        || !ast.functions.is_empty()
        || !ast.flows.is_empty()
        || ast.workflow.is_some()
}

// ----- lines and their tokens -------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct Line<'t> {
    /// Byte offset of the line in the text.
    start: usize,
    /// The line without its line break.
    text: &'t str,
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut at = 0;
    while at < bytes.len() {
        match bytes.get(at) {
            Some(b'\n') => {
                lines.push(Line {
                    start,
                    text: text.get(start..at).unwrap_or(""),
                });
                start = at + 1;
            }
            Some(b'\r') => {
                lines.push(Line {
                    start,
                    text: text.get(start..at).unwrap_or(""),
                });
                if bytes.get(at + 1) == Some(&b'\n') {
                    at += 1;
                }
                start = at + 1;
            }
            _ => {}
        }
        at += 1;
    }
    lines.push(Line {
        start,
        text: text.get(start..).unwrap_or(""),
    });
    lines
}

/// A block-structure token at the start of a line: a sequence dash or a mapping key.
#[derive(Clone, Copy, Debug)]
struct Token<'t> {
    /// Byte column (only spaces and dashes stand before a token, so it is also the character
    /// column).
    col: usize,
    /// The key; `None` for a dash.
    key: Option<&'t str>,
    /// Byte column where the value after `key:` or `- ` starts.
    value: usize,
    /// Whether that value is a block scalar indicator (`|`, `>-`).
    block: bool,
}

/// The dashes and the key a line starts with: `    - id: a` is a dash at 4 and `id` at 6.
fn tokenize(line: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut at = skip_spaces(line, 0);
    loop {
        let rest = line.get(at..).unwrap_or("");
        if rest.is_empty() || rest.starts_with('#') {
            break;
        }
        if rest == "-" || rest.starts_with("- ") || rest.starts_with("-\t") {
            let value = skip_spaces(line, at + 1);
            tokens.push(Token {
                col: at,
                key: None,
                value,
                block: is_block(line.get(value..).unwrap_or("")),
            });
            at = value;
            continue;
        }
        if let Some((key, after)) = key_at(rest) {
            let value = skip_spaces(line, at + after);
            tokens.push(Token {
                col: at,
                key: Some(key),
                value,
                block: is_block(line.get(value..).unwrap_or("")),
            });
        }
        break;
    }
    tokens
}

fn skip_spaces(line: &str, from: usize) -> usize {
    let rest = line.get(from..).unwrap_or("");
    from + (rest.len() - rest.trim_start_matches([' ', '\t']).len())
}

/// A key at the start of `rest` and the length up to and including its colon.
fn key_at(rest: &str) -> Option<(&str, usize)> {
    let colon_ends = |after: &str| after.is_empty() || after.starts_with([' ', '\t']);
    if let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let inner = rest.get(1..)?;
        let close = inner.find(quote)?;
        let key = inner.get(..close)?;
        let after = inner.get(close + 1..)?;
        let after = after.strip_prefix(':')?;
        return colon_ends(after).then_some((key, close + 3));
    }
    if rest.starts_with(['[', '{', '|', '>', '!', '&', '*', '%', '@', '`', '?']) {
        return None;
    }
    let mut previous = ' ';
    for (at, c) in rest.char_indices() {
        if c == '#' && previous == ' ' && at > 0 {
            return None;
        }
        if c == ':' && colon_ends(rest.get(at + 1..).unwrap_or("")) {
            let key = rest.get(..at)?.trim_end();
            return (!key.is_empty()).then_some((key, at + 1));
        }
        previous = c;
    }
    None
}

/// `|`, `>`, `|-`, `>+2`, optionally followed by a comment.
fn is_block(value: &str) -> bool {
    let value = value.split(" #").next().unwrap_or("").trim_end();
    let mut chars = value.chars();
    matches!(chars.next(), Some('|' | '>')) && chars.all(|c| matches!(c, '+' | '-' | '0'..='9'))
}

/// A scalar value as written on its line: comment, quotes and flow brackets taken off.
fn scalar(value: &str) -> &str {
    let value = value.split(" #").next().unwrap_or("").trim();
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value)
}

// ----- where the cursor stands ------------------------------------------------------------------

/// A token of an enclosing line, with the line it stands on.
#[derive(Clone, Copy, Debug)]
struct Frame<'t> {
    line: usize,
    token: Token<'t>,
}

impl Frame<'_> {
    fn key(&self) -> Option<&str> {
        self.token.key
    }
}

/// What the cursor completes.
#[derive(Debug)]
enum Slot<'c, 't> {
    /// A key of the mapping that `path` leads to (the mapping's owner is `path`'s last frame).
    Key { path: &'c [Frame<'t>] },
    /// The value of the last frame of `path` (a key); `typed` is the text before the cursor.
    Value {
        path: &'c [Frame<'t>],
        typed: &'t str,
    },
    /// An item of the list under the key before the last frame (a dash) of `path`.
    Item {
        path: &'c [Frame<'t>],
        typed: &'t str,
    },
}

struct Cx<'a> {
    current: &'a Analysis,
    /// The analysis whose model gives names their meaning.
    sem: &'a Analysis,
    lines: Vec<Line<'a>>,
    cursor_line: usize,
    offset: usize,
    /// The cursor's line before and after the cursor.
    prefix: &'a str,
    suffix: &'a str,
    version: Version,
}

impl<'a> Cx<'a> {
    fn run(&self) -> Vec<Completion> {
        let (chain, here) = self.chain();
        let Some(slot) = self.slot(&chain, here) else {
            return Vec::new();
        };
        self.slot_completions(&slot)
    }

    /// The frames enclosing the cursor, outermost first, and where the cursor's own text starts:
    /// `Ok(col)` for a word at `col`, `Err(())` when the cursor is in the value of the last
    /// frame, which stands on the cursor's line.
    fn chain(&self) -> (Vec<Frame<'a>>, Here) {
        let own: Vec<Frame<'a>> = tokenize(self.prefix)
            .into_iter()
            .map(|token| Frame {
                line: self.cursor_line,
                token,
            })
            .collect();
        let here = match own.last() {
            Some(frame) if frame.token.key.is_some() => Here::Value,
            Some(frame) => Here::Word(frame.token.value),
            None => Here::Word(skip_spaces(self.prefix, 0)),
        };
        let (mut limit, mut dash) = match (own.first(), here) {
            (Some(first), _) => (first.token.col, first.token.key.is_none()),
            (None, Here::Word(col)) => (col, false),
            (None, Here::Value | Here::Block) => (0, false),
        };
        let mut above = Vec::new();
        for index in (0..self.cursor_line).rev() {
            if limit == 0 && !dash {
                break;
            }
            let Some(line) = self.lines.get(index) else {
                break;
            };
            for token in tokenize(line.text).into_iter().rev() {
                let parent =
                    token.col < limit || (token.col == limit && dash && token.key.is_some());
                if parent {
                    above.push(Frame { line: index, token });
                    limit = token.col;
                    dash = token.key.is_none();
                }
            }
        }
        above.reverse();
        // Inside a block scalar: the lines between its key and the cursor are its text.
        if let Some(block) = above.iter().position(|frame| frame.token.block) {
            above.truncate(block + 1);
            return (above, Here::Block);
        }
        above.extend(own);
        (above, here)
    }

    fn slot<'c>(&self, chain: &'c [Frame<'a>], here: Here) -> Option<Slot<'c, 'a>> {
        let last = chain.last();
        match here {
            Here::Value => {
                let last = last?;
                let typed = self.prefix.get(last.token.value..).unwrap_or("");
                Some(Slot::Value { path: chain, typed })
            }
            Here::Block => {
                let typed = self.prefix;
                if last?.token.key.is_some() {
                    Some(Slot::Value { path: chain, typed })
                } else {
                    Some(Slot::Item { path: chain, typed })
                }
            }
            Here::Word(_) => match last {
                Some(frame) if frame.token.key.is_none() => {
                    // A dash: a key of a new item of a list of mappings, or an item of a list
                    // of scalars.
                    let list = chain.len().checked_sub(2).and_then(|at| chain.get(at));
                    if matches!(
                        list.and_then(Frame::key),
                        Some("steps" | "stages" | "predicates" | "sections")
                    ) {
                        Some(Slot::Key { path: chain })
                    } else {
                        let typed = self.prefix.get(frame.token.value..).unwrap_or("");
                        Some(Slot::Item { path: chain, typed })
                    }
                }
                _ => Some(Slot::Key { path: chain }),
            },
        }
    }

    fn slot_completions(&self, slot: &Slot<'_, 'a>) -> Vec<Completion> {
        match *slot {
            Slot::Key { path } => self.keys(path),
            Slot::Value { path, typed } => {
                let Some((key_frame, owner)) = path.split_last() else {
                    return Vec::new();
                };
                self.value(owner, key_frame, typed)
            }
            Slot::Item { path, typed } => {
                let Some((_dash, rest)) = path.split_last() else {
                    return Vec::new();
                };
                let Some((key_frame, owner)) = rest.split_last() else {
                    return Vec::new();
                };
                self.item(owner, key_frame, typed)
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Here {
    /// A word (a key, a list item) starting at this byte column of the cursor's line.
    Word(usize),
    /// The value of the key the cursor's line starts with.
    Value,
    /// The text of a block scalar.
    Block,
}

/// The path of an enclosing mapping, matched against the places of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place<'t> {
    Root,
    Contract,
    ContractField,
    Function(&'t str),
    FunctionInput,
    Flow(&'t str),
    FlowInput,
    /// A step of the flow with this name; the frame is the step's dash.
    Step(&'t str),
    /// The `inputs` of a step.
    StepInputs(&'t str),
    /// A stage of a pipeline step of the flow with this name; the frame is the stage's dash.
    Stage(&'t str),
    /// A stage's `fanout`.
    Fanout,
    /// A judge step's `judge:` block, its predicates and its budget.
    Judge,
    Predicate,
    JudgeBudget,
    /// A reasoning template (`reasoning_template`, `task_reasoning_template`), and one of its
    /// sections.
    Certificate,
    Section,
    Budget,
    Workflow,
    WorkflowParam,
    Other,
}

/// The place a mapping is, from the keys of its path (`None` standing for a list item).
fn place<'t>(path: &[Frame<'t>]) -> Place<'t> {
    let keys: Vec<Option<&'t str>> = path.iter().map(|frame| frame.token.key).collect();
    match keys.as_slice() {
        [] => Place::Root,
        [Some("contracts")] => Place::Other,
        [Some("contracts"), Some(_)] => Place::Contract,
        [Some("contracts"), Some(_), Some(_)] => Place::ContractField,
        [Some("functions"), Some(name)] => Place::Function(name),
        [Some("functions"), Some(_), Some("input"), Some(_)] => Place::FunctionInput,
        [Some("functions"), Some(_), Some("budget")] => Place::Budget,
        [Some("flows"), Some(name)] => Place::Flow(name),
        [Some("flows"), Some(_), Some("input"), Some(_)] => Place::FlowInput,
        [Some("flows"), Some(_), Some("budget")] => Place::Budget,
        [Some("flows"), Some(name), Some("steps"), None] => Place::Step(name),
        [Some("flows"), Some(_), Some("steps"), None, Some("budget")] => Place::Budget,
        [
            Some("flows"),
            Some(name),
            Some("steps"),
            None,
            Some("inputs"),
        ] => Place::StepInputs(name),
        [
            Some("flows"),
            Some(name),
            Some("steps"),
            None,
            Some("stages"),
            None,
        ] => Place::Stage(name),
        [
            Some("flows"),
            Some(_),
            Some("steps"),
            None,
            Some("stages"),
            None,
            Some("fanout"),
        ] => Place::Fanout,
        [Some("workflow")] => Place::Workflow,
        [Some("workflow"), Some("input"), Some(_)] => Place::WorkflowParam,
        [Some("flows"), Some(_), Some("steps"), None, inside @ ..] => inside_step(inside),
        _ => Place::Other,
    }
}

/// The places inside a step that hold no names of their own: a judge block and a reasoning
/// template (a step's, or a stage's).
fn inside_step<'t>(path: &[Option<&'t str>]) -> Place<'t> {
    const TEMPLATES: [&str; 2] = ["reasoning_template", "task_reasoning_template"];
    match path {
        [Some("judge")] => Place::Judge,
        [Some("judge"), Some("predicates"), None] => Place::Predicate,
        [Some("judge"), Some("budget")] => Place::JudgeBudget,
        [Some(key)] | [Some("stages"), None, Some(key)] if TEMPLATES.contains(key) => {
            Place::Certificate
        }
        [Some(key), Some("sections"), None]
        | [Some("stages"), None, Some(key), Some("sections"), None]
            if TEMPLATES.contains(key) =>
        {
            Place::Section
        }
        _ => Place::Other,
    }
}

/// A key written in a mapping, with its value's text as written on the key's line.
#[derive(Clone, Copy, Debug)]
struct Entry<'t> {
    key: &'t str,
    value: &'t str,
    line: usize,
}

/// What a step is, as far as which keys it may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepSort {
    Function {
        compute: bool,
    },
    Gate,
    Inline,
    Flow,
    Judge,
    /// `type: parallel_dispatch`.
    Parallel,
    /// `type: pipeline`.
    Pipeline,
    Unknown,
}

/// The keys that make a step a kind of step: one only.
const KIND_KEYS: [&str; 4] = ["function", "intent", "flow", "judge"];
/// Keys only a gate step takes (`sema::rules::steps`, E0058).
const GATE_KEYS: [&str; 5] = [
    "on_approve",
    "on_revise",
    "on_kill",
    "policy",
    "policy_fallback",
];
/// Keys a gate step cannot take (E0053).
const NOT_ON_GATE: [&str; 15] = [
    "output_schema",
    "max_iterations",
    "exit_criterion",
    "score_expr",
    "accumulate",
    "accumulate_key",
    "on_fail",
    "next",
    "ensure",
    "retries",
    "output_contract",
    "model",
    "budget",
    "guardrails",
    "reasoning_template",
];
/// Keys a function step leaves to its function (E0059).
const NOT_ON_FUNCTION: [&str; 7] = [
    "ensure",
    "retries",
    "output_contract",
    "model",
    "budget",
    "guardrails",
    "reasoning_template",
];
/// Keys a flow step leaves to its flow's steps (E0060).
const NOT_ON_FLOW: [&str; 6] = [
    "agent",
    "retries",
    "model",
    "budget",
    "guardrails",
    "reasoning_template",
];

/// Keys only parallel_dispatch and pipeline steps read (`sema::rules::fan_out`, E0081).
const FAN_OUT_KEYS: [&str; 12] = [
    "source",
    "intent_template",
    "stages",
    "max_concurrent",
    "isolation",
    "require",
    "merge",
    "task_timeout",
    "task_reasoning_template",
    "capture_diff",
    "defer_advance",
    "pre_merge_verify",
];
/// Keys a fan-out step does not read: it is not iterated, and its tasks follow
/// `task_reasoning_template` (E0081).
const NOT_ON_FAN_OUT: [&str; 6] = [
    "max_iterations",
    "exit_criterion",
    "score_expr",
    "accumulate",
    "accumulate_key",
    "reasoning_template",
];

/// Whether the rules of the middle end refuse `key` on a step of this sort (`cache` only on
/// steps of compute functions, E0063).
fn refused_on(sort: StepSort, key: &str) -> bool {
    let fan_out = matches!(sort, StepSort::Parallel | StepSort::Pipeline);
    if !fan_out && sort != StepSort::Unknown && FAN_OUT_KEYS.contains(&key) {
        return true;
    }
    match sort {
        StepSort::Unknown => false,
        StepSort::Parallel | StepSort::Pipeline => {
            let misplaced = if sort == StepSort::Parallel {
                "stages"
            } else {
                "intent_template"
            };
            key == misplaced
                || NOT_ON_FAN_OUT.contains(&key)
                || KIND_KEYS.contains(&key)
                || GATE_KEYS.contains(&key)
                || key == "cache"
        }
        StepSort::Gate => NOT_ON_GATE.contains(&key) || key == "cache",
        StepSort::Function { compute } => {
            NOT_ON_FUNCTION.contains(&key)
                || GATE_KEYS.contains(&key)
                || (key == "cache" && !compute)
        }
        StepSort::Flow => NOT_ON_FLOW.contains(&key) || GATE_KEYS.contains(&key) || key == "cache",
        StepSort::Inline | StepSort::Judge => GATE_KEYS.contains(&key) || key == "cache",
    }
}

/// What an expression may name: free names (`result`, the iteration names, `item`) with their
/// types, `$.input`, `$.steps`.
#[derive(Clone, Debug)]
struct Scope {
    names: Vec<Name>,
    /// The flow (index into the semantic AST) for `$.input` and `$.steps`.
    flow: Option<usize>,
    /// The step the expression belongs to.
    step: Option<usize>,
    steps: StepsAllowed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepsAllowed {
    /// No `$` at all (a function's `ensure`).
    NoDollar,
    /// Every other step (inputs and `skip_if` add a dependency).
    All,
    /// Only steps that have run (`ensure`, `exit_criterion`, …).
    Ancestors,
}

/// A free name of an expression.
#[derive(Clone, Debug)]
struct Name {
    name: &'static str,
    members: Members,
    /// One line of Markdown: what the name holds when the expression runs.
    doc: &'static str,
}

/// A name the runtime binds in an iteration, with its type and documentation.
struct Bound {
    name: &'static str,
    /// A function because `Type`s are not constants.
    ty: fn() -> Type,
    doc: &'static str,
}

impl Bound {
    fn name(&self) -> Name {
        Name {
            name: self.name,
            members: Members::Type((self.ty)()),
            doc: self.doc,
        }
    }
}

/// The names an `exit_criterion` gains when its step has a `score_expr`, with their types, as
/// `sema::typecheck` declares them; the docs say what the runtime binds (`exec/iterations.rs`).
const SCORE_NAMES: [Bound; 3] = [
    Bound {
        name: "best_score",
        ty: || Type::Float.optional(),
        doc: "The highest `score_expr` value so far, this iteration's included; `None` before any scored.",
    },
    Bound {
        name: "prior_scores",
        ty: || Type::list(Type::Float),
        doc: "The scores of the earlier iterations, oldest first.",
    },
    Bound {
        name: "iteration",
        ty: || Type::Int,
        doc: "This iteration's number, from 1.",
    },
];
/// The names an `exit_criterion` gains when its step has an `accumulate`, but `accumulator`,
/// whose type depends on the accumulated items.
const ACCUMULATE_NAMES: [Bound; 3] = [
    Bound {
        name: "accumulated_count",
        ty: || Type::Int,
        doc: "How many distinct items the accumulator holds.",
    },
    Bound {
        name: "new_count",
        ty: || Type::Int.optional(),
        doc: "How many new items this iteration added; `None` when its `accumulate` failed.",
    },
    Bound {
        name: "dry_streak",
        ty: || Type::Int,
        doc: "How many iterations in a row added no new item.",
    },
];

/// What can follow a `.`: the fields of a contract (named, so nested contracts keep their
/// names) or of a record type.
#[derive(Clone, Debug)]
enum Members {
    Contract(String),
    Type(Type),
}

impl<'a> Cx<'a> {
    fn file_span(&self, start: usize) -> Span {
        Span::new(self.current.file_id(), start.min(self.offset)..self.offset)
    }

    /// The span of the word before the cursor made of `allowed` characters.
    fn word(&self, allowed: fn(char) -> bool) -> Span {
        let kept = self
            .prefix
            .char_indices()
            .rev()
            .take_while(|&(_, c)| allowed(c))
            .last()
            .map_or(self.prefix.len(), |(at, _)| at);
        self.file_span(self.offset - (self.prefix.len() - kept))
    }

    fn name_word(&self) -> Span {
        self.word(|c| c.is_alphanumeric() || c == '_' || c == '-')
    }

    /// Whether the cursor stands in a comment.
    fn in_comment(&self) -> bool {
        let mut quote = None;
        let mut previous = ' ';
        for c in self.prefix.chars() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(open), _) if c == open => quote = None,
                (None, '#') if previous.is_whitespace() => return true,
                _ => {}
            }
            previous = c;
        }
        false
    }

    fn ast(&self) -> &'a Ast {
        &self.sem.compilation.ast
    }

    // ----- the entries of a mapping ------------------------------------------------------------

    /// The keys written in the mapping owned by `owner` (the root mapping for `None`), in the
    /// current text, with the value on each key's line.
    fn entries(&self, owner: Option<&Frame<'a>>) -> Vec<Entry<'a>> {
        let mut out = Vec::new();
        let mut col = None;
        let mut first = 0;
        if let Some(owner) = owner {
            first = owner.line + 1;
            // `- id: a`: the dash's mapping starts on the dash's line.
            if owner.token.key.is_none()
                && let Some(line) = self.lines.get(owner.line)
                && let Some(token) = tokenize(line.text)
                    .into_iter()
                    .find(|token| token.col > owner.token.col)
                && let Some(key) = token.key
            {
                col = Some(token.col);
                out.push(Entry {
                    key,
                    value: line.text.get(token.value..).unwrap_or(""),
                    line: owner.line,
                });
            }
        } else {
            col = Some(0);
        }
        let floor = owner.map(|owner| owner.token.col);
        for index in first..self.lines.len() {
            let Some(line) = self.lines.get(index) else {
                break;
            };
            let tokens = tokenize(line.text);
            let Some(token) = tokens.first() else {
                continue;
            };
            if floor.is_some_and(|floor| token.col <= floor) {
                break;
            }
            let col = *col.get_or_insert(token.col);
            if token.col != col {
                continue;
            }
            if let Some(key) = token.key {
                out.push(Entry {
                    key,
                    value: line.text.get(token.value..).unwrap_or(""),
                    line: index,
                });
            }
        }
        out
    }

    /// The items of the block list under the key `owner`, as written.
    fn list_items(&self, owner: &Frame<'a>) -> Vec<&'a str> {
        let mut out = Vec::new();
        let mut col = None;
        for index in owner.line + 1..self.lines.len() {
            let Some(line) = self.lines.get(index) else {
                break;
            };
            let Some(token) = tokenize(line.text).into_iter().next() else {
                continue;
            };
            if token.col < owner.token.col || (token.col == owner.token.col && token.key.is_some())
            {
                break;
            }
            let col = *col.get_or_insert(token.col);
            if token.col == col && token.key.is_none() && index != self.cursor_line {
                out.push(scalar(line.text.get(token.value..).unwrap_or("")));
            }
        }
        out
    }

    // ----- keys --------------------------------------------------------------------------------

    fn keys(&self, path: &[Frame<'a>]) -> Vec<Completion> {
        if self.in_comment() {
            return Vec::new();
        }
        let place = place(path);
        let shape: &Shape = match place {
            Place::Root => &keys::ROOT,
            Place::ContractField => &keys::CONTRACT_FIELD,
            Place::Function(_) => &keys::FUNCTION,
            Place::FunctionInput | Place::FlowInput => &keys::INPUT_PARAM,
            Place::Flow(_) => &keys::FLOW,
            Place::Step(_) => &keys::STEP,
            Place::Stage(_) => &keys::STAGE,
            Place::Fanout => &keys::FANOUT,
            Place::Judge => &keys::JUDGE,
            Place::Predicate => &keys::PREDICATE,
            Place::JudgeBudget => &keys::JUDGE_BUDGET,
            Place::Certificate => &keys::CERTIFICATE,
            Place::Section => &keys::SECTION,
            Place::Budget => &keys::BUDGET,
            Place::Workflow => &keys::WORKFLOW,
            Place::WorkflowParam => &keys::WORKFLOW_PARAM,
            Place::StepInputs(_) => return self.input_names(path),
            Place::Contract | Place::Other => return Vec::new(),
        };
        let entries: Vec<Entry<'a>> = self
            .entries(path.last())
            .into_iter()
            .filter(|entry| entry.line != self.cursor_line)
            .collect();
        let written: HashSet<&str> = entries.iter().map(|entry| entry.key).collect();
        let sort = match place {
            Place::Step(_) => Some(self.step_sort(&entries)),
            _ => None,
        };
        let has_kind = KIND_KEYS.iter().any(|key| written.contains(key));
        let replace = self.name_word();
        let insert = self.key_insert();
        let mut required = Vec::new();
        let mut optional = Vec::new();
        for key in shape.keys {
            if written.contains(key.name) || key.since > self.version {
                continue;
            }
            if let Some(sort) = sort {
                let dependent_missing = (key.name == "accumulate_key"
                    && !written.contains("accumulate"))
                    || (key.name == "policy_fallback" && !written.contains("policy"));
                if refused_on(sort, key.name)
                    || (has_kind && KIND_KEYS.contains(&key.name))
                    || dependent_missing
                {
                    continue;
                }
            }
            let is_required = match key.required {
                Required::Always => true,
                Required::InV01 => self.version == Version::V0_1,
                Required::No => false,
            };
            let completion = Completion {
                label: key.name.to_owned(),
                kind: CompletionKind::Key,
                detail: key_detail(place, key.name, is_required),
                documentation: None,
                insert_text: insert.then(|| format!("{}: ", key.name)),
                replace: Some(replace),
            };
            if is_required {
                required.push(completion);
            } else {
                optional.push(completion);
            }
        }
        required.extend(optional);
        required
    }

    /// Whether a key completion should bring its `: ` (not when the line already has one).
    fn key_insert(&self) -> bool {
        let rest = self
            .suffix
            .trim_start_matches(|c: char| c.is_alphanumeric() || c == '_' || c == '-');
        !rest.trim_start().starts_with(':')
    }

    /// What a step is, from its fan-out `type` or the kind key its mapping writes.
    fn step_sort(&self, entries: &[Entry<'a>]) -> StepSort {
        let fan_out = entries
            .iter()
            .filter(|entry| entry.key == "type")
            .find_map(|entry| match scalar(entry.value) {
                "parallel_dispatch" => Some(StepSort::Parallel),
                "pipeline" => Some(StepSort::Pipeline),
                _ => None,
            });
        if let Some(sort) = fan_out {
            return sort;
        }
        let mut sorts = entries.iter().filter_map(|entry| match entry.key {
            "function" => Some(
                self.function(scalar(entry.value))
                    .and_then(|function| function.mode.as_ref())
                    .map_or(StepSort::Unknown, |mode| match mode.value {
                        Mode::Gate => StepSort::Gate,
                        Mode::Compute => StepSort::Function { compute: true },
                        Mode::Infer => StepSort::Function { compute: false },
                    }),
            ),
            "intent" => Some(StepSort::Inline),
            "flow" => Some(StepSort::Flow),
            "judge" => Some(StepSort::Judge),
            _ => None,
        });
        match (sorts.next(), sorts.next()) {
            (Some(sort), None) => sort,
            _ => StepSort::Unknown,
        }
    }

    fn function(&self, name: &str) -> Option<&'a Function> {
        self.sem
            .compilation
            .model
            .symbols
            .function(self.ast(), name)
    }

    fn flow(&self, name: &str) -> Option<(usize, &'a Flow)> {
        let index = self.sem.compilation.model.symbols.flows.get(name)?;
        Some((index, self.ast().flows.get(index)?))
    }

    /// The parameters a step's `inputs` may name: its function's `input`, or its flow's.
    fn input_names(&self, path: &[Frame<'a>]) -> Vec<Completion> {
        let Some(step) = path.get(3) else {
            return Vec::new();
        };
        let Some(inputs) = path.last() else {
            return Vec::new();
        };
        let step_entries = self.entries(Some(step));
        let params = step_entries.iter().find_map(|entry| match entry.key {
            "function" => self
                .function(scalar(entry.value))
                .and_then(|function| function.input.as_ref()),
            "flow" => self
                .flow(scalar(entry.value))
                .and_then(|(_, flow)| flow.input.as_ref()),
            _ => None,
        });
        let Some(params) = params else {
            return Vec::new();
        };
        let written: HashSet<&str> = self
            .entries(Some(inputs))
            .iter()
            .filter(|entry| entry.line != self.cursor_line)
            .map(|entry| entry.key)
            .collect();
        let ty = self.sem.compilation.model.contracts.record(&params.value);
        let replace = self.name_word();
        let insert = self.key_insert();
        members_of(self, &Members::Type(ty))
            .into_iter()
            .filter(|(name, _)| !written.contains(name.as_str()))
            .map(|(name, detail)| Completion {
                documentation: None,
                insert_text: insert.then(|| format!("{name}: ")),
                label: name,
                kind: CompletionKind::Field,
                detail: Some(detail),
                replace: Some(replace),
            })
            .collect()
    }
}

/// The keys whose values are expressions, on a step.
const STEP_EXPRESSIONS: [&str; 6] = [
    "ensure",
    "skip_if",
    "exit_criterion",
    "score_expr",
    "accumulate",
    "accumulate_key",
];
/// The routing keys of a step: each names a step.
const ROUTES: [&str; 5] = ["on_fail", "next", "on_approve", "on_revise", "on_kill"];

impl<'a> Cx<'a> {
    // ----- values ------------------------------------------------------------------------------

    fn value(&self, owner: &[Frame<'a>], key_frame: &Frame<'a>, typed: &str) -> Vec<Completion> {
        let key = key_frame.key().unwrap_or("");
        let in_string = typed.trim_start().starts_with(['"', '\'']);
        if self.in_comment() && !in_string {
            return Vec::new();
        }
        let place = place(owner);
        match (place, key) {
            (Place::Root, "version") => self.fixed(
                &[
                    (
                        "\"0.3\"",
                        "adds decompose, parallel_dispatch and pipeline steps",
                    ),
                    ("\"0.2\"", "adds gates, inline steps, flows and iterations"),
                    ("\"0.1\"", "the first format"),
                ],
                |c| c == '"' || c == '.' || c.is_ascii_digit(),
            ),
            (Place::Function(_), "mode") => {
                let mut modes = vec![
                    ("infer", "an agent produces the output"),
                    ("compute", "code computes the output"),
                ];
                if self.version != Version::V0_1 {
                    modes.push(("gate", "a human approves, revises or kills"));
                }
                self.fixed(&modes, is_name_char)
            }
            (Place::Function(_) | Place::Flow(_), "output")
            | (Place::Step(_), "output_contract") => self.contracts(),
            (Place::Step(_), "function") => self.functions(),
            (Place::Step(flow), "flow") => self.flows(Some(flow)),
            (Place::Step(flow), "depends_on") if typed.trim_start().starts_with('[') => {
                let listed: Vec<&str> = typed
                    .trim_start()
                    .trim_start_matches('[')
                    .split(',')
                    .map(scalar)
                    .collect();
                self.step_ids(owner, flow, &listed, false)
            }
            (Place::Step(flow), route) if ROUTES.contains(&route) => {
                let mut out = self.step_ids(owner, flow, &[], false);
                if matches!(route, "on_approve" | "on_kill") {
                    out.push(Completion {
                        label: "~".to_owned(),
                        kind: CompletionKind::Value,
                        detail: Some(if route == "on_approve" {
                            "complete the flow".to_owned()
                        } else {
                            "end the flow".to_owned()
                        }),
                        documentation: None,
                        insert_text: None,
                        replace: Some(self.name_word()),
                    });
                }
                out
            }
            (Place::Step(_), "policy" | "policy_fallback") => self.fixed(
                &[
                    ("gate", "wait for a human decision"),
                    ("flag", "approve and flag the run for review"),
                    ("skip", "approve without review"),
                ],
                is_name_char,
            ),
            (Place::Step(_), "type") => self.fixed(
                &[
                    ("inline", "an agent runs the step's `intent`"),
                    ("function", "runs the step's `function`"),
                    ("flow", "runs the step's `flow`"),
                    ("decompose", "an agent splits the work into tasks"),
                    (
                        "parallel_dispatch",
                        "one task per element of `source`, in parallel",
                    ),
                    ("pipeline", "each element of `source` goes through `stages`"),
                ],
                is_name_char,
            ),
            // `branch` is refused by the checks (E0089): not offered.
            (Place::Step(_), "isolation") => self.fixed(
                &[
                    (
                        "worktree",
                        "each task in its own git worktree (the default)",
                    ),
                    ("none", "the tasks share the project root"),
                ],
                is_name_char,
            ),
            (Place::Step(_), "merge") => self.fixed(
                &[
                    (
                        "sequential_apply",
                        "merge the tasks' changes in task order (the default)",
                    ),
                    ("manual", "leave the merge to the client"),
                ],
                is_name_char,
            ),
            (Place::Judge, "stakes") => self.fixed(
                &[
                    ("cheap", "deterministic predicates only"),
                    ("default", "an agent reads the evidence (the default)"),
                    ("paranoid", "an agent's `met` gets a second, cold read"),
                ],
                is_name_char,
            ),
            (Place::Predicate, "type") => self.fixed(
                &[
                    ("deterministic", "an expression over the staged files"),
                    ("verified", "an agent quotes the evidence"),
                    ("judged", "an agent weighs the evidence"),
                ],
                is_name_char,
            ),
            (Place::Step(_) | Place::Fanout, "require") => self.fixed(
                &[
                    ("all", "every one must complete (the default)"),
                    ("any", "one is enough"),
                ],
                is_name_char,
            ),
            (Place::Step(flow), "source") => {
                self.expression(typed, self.step_scope(owner, flow, "inputs"))
            }
            (Place::Step(flow), "intent_template") => {
                self.placeholder_names(owner, flow, TemplateOf::Step, typed)
            }
            (Place::Stage(flow), "intent_template") => {
                let stage = self.stage_index(owner);
                self.placeholder_names(owner, flow, TemplateOf::Stage(stage), typed)
            }
            (Place::Step(flow), expression) if STEP_EXPRESSIONS.contains(&expression) => {
                self.expression(typed, self.step_scope(owner, flow, expression))
            }
            (Place::StepInputs(flow), _) => {
                self.expression(typed, self.step_scope(owner, flow, "inputs"))
            }
            (Place::Step(flow), "inputs") if typed.trim_start().starts_with('{') => {
                self.expression(typed, self.step_scope(owner, flow, "inputs"))
            }
            (Place::Function(name), "ensure") => self.expression(typed, self.function_scope(name)),
            (Place::ContractField | Place::FunctionInput | Place::FlowInput, "type") => {
                let mut out = self.fixed(
                    &[
                        ("string", "text"),
                        ("number", "a number"),
                        ("integer", "a whole number"),
                        ("boolean", "true or false"),
                        ("array", "a list (`items` gives its type)"),
                        ("object", "any mapping"),
                    ],
                    is_name_char,
                );
                out.extend(self.contracts());
                out
            }
            (Place::WorkflowParam, "type") => self.fixed(
                &[
                    ("string", "text"),
                    ("boolean", "true or false"),
                    ("integer", "a whole number"),
                    ("number", "a number"),
                    ("array", "a list"),
                    ("object", "a mapping"),
                ],
                is_name_char,
            ),
            _ => Vec::new(),
        }
    }

    /// An item of a block list.
    fn item(&self, owner: &[Frame<'a>], key_frame: &Frame<'a>, typed: &str) -> Vec<Completion> {
        let key = key_frame.key().unwrap_or("");
        let in_string = typed.trim_start().starts_with(['"', '\'']);
        if self.in_comment() && !in_string && !matches!(key, "ensure") {
            return Vec::new();
        }
        match (place(owner), key) {
            (Place::Step(flow), "depends_on") => {
                let listed = self.list_items(key_frame);
                self.step_ids(owner, flow, &listed, false)
            }
            (Place::Step(flow), "ensure") => {
                self.expression(typed, self.step_scope(owner, flow, "ensure"))
            }
            (Place::Function(name), "ensure") => self.expression(typed, self.function_scope(name)),
            _ => Vec::new(),
        }
    }

    fn fixed(&self, values: &[(&str, &str)], word: fn(char) -> bool) -> Vec<Completion> {
        let replace = self.word(word);
        values
            .iter()
            .map(|(label, detail)| Completion {
                label: (*label).to_owned(),
                kind: CompletionKind::Value,
                detail: Some((*detail).to_owned()),
                documentation: None,
                insert_text: None,
                replace: Some(replace),
            })
            .collect()
    }

    // ----- placeholders ------------------------------------------------------------------------

    /// The position of the stage whose dash ends `path` among its pipeline's stages.
    fn stage_index(&self, path: &[Frame<'a>]) -> usize {
        let (Some(stages_key), Some(dash)) = (path.get(4), path.get(5)) else {
            return 0;
        };
        (stages_key.line + 1..dash.line)
            .filter(|&at| {
                self.lines.get(at).is_some_and(|line| {
                    tokenize(line.text)
                        .first()
                        .is_some_and(|token| token.col == dash.token.col && token.key.is_none())
                })
            })
            .count()
    }

    /// Inside an intent template's open placeholder: the names bound there (after `{`), or the
    /// fields of what the placeholder reads so far (after `{task.`), as `sema::fan_out` scopes
    /// them.
    fn placeholder_names(
        &self,
        path: &[Frame<'a>],
        flow: &str,
        template: TemplateOf,
        typed: &str,
    ) -> Vec<Completion> {
        let Some((segments, partial)) = open_placeholder(typed) else {
            return Vec::new();
        };
        let (Some(flow_index), Some(step_index), _) = self.locate_step(path, flow) else {
            return Vec::new();
        };
        let compilation = &self.sem.compilation;
        let Some(step) = self
            .ast()
            .flows
            .get(flow_index)
            .and_then(|flow| flow_steps(flow).get(step_index))
        else {
            return Vec::new();
        };
        let Some(mut env) = placeholders::flow_env(compilation, flow_index) else {
            return Vec::new();
        };
        let Some(scope) =
            fan_out::template_names(step, template, &mut env, &compilation.model.expressions)
        else {
            return Vec::new();
        };
        let replace = self.file_span(self.offset - partial.len());
        let item = |label: &str, kind, detail: String, documentation: Option<String>| Completion {
            label: label.to_owned(),
            kind,
            detail: Some(detail),
            documentation,
            insert_text: None,
            replace: Some(replace),
        };
        let spread = scope.spread.as_ref().map_or_else(Vec::new, |element| {
            members_of(self, &Members::Type(element.clone()))
        });
        let Some((first, rest)) = segments.split_first() else {
            let mut out: Vec<Completion> = scope
                .names
                .iter()
                .map(|(name, ty)| {
                    let element = scope.spread.as_ref() == Some(ty)
                        && matches!(*name, "task" | "item" | "source");
                    item(
                        name,
                        CompletionKind::Variable,
                        bounded(ty),
                        Some(placeholders::name_doc(name, element).to_owned()),
                    )
                })
                .collect();
            for (name, detail) in spread {
                if !out.iter().any(|completion| completion.label == name) {
                    out.push(item(&name, CompletionKind::Field, detail, None));
                }
            }
            return out;
        };
        let root = scope
            .names
            .iter()
            .find(|(name, _)| name == first)
            .map(|(_, ty)| ty.clone())
            .or_else(|| {
                let element = scope.spread.as_ref()?;
                fan_out::template_field(element, first)
            });
        let mut ty = root;
        for name in rest {
            ty = ty.and_then(|ty| fan_out::template_field(&ty, name));
        }
        ty.map_or_else(Vec::new, |ty| {
            members_of(self, &Members::Type(ty))
                .into_iter()
                .map(|(name, detail)| item(&name, CompletionKind::Field, detail, None))
                .collect()
        })
    }

    // ----- names -------------------------------------------------------------------------------

    fn contracts(&self) -> Vec<Completion> {
        let replace = self.name_word();
        let types = &self.sem.compilation.model.contracts;
        self.sem
            .compilation
            .model
            .symbols
            .contracts
            .iter()
            .map(|(name, index, _)| {
                let count = types.fields(name).map_or_else(
                    || {
                        self.ast()
                            .contracts
                            .get(index)
                            .map_or(0, |c| c.fields.len())
                    },
                    <[_]>::len,
                );
                Completion {
                    label: name.to_owned(),
                    kind: CompletionKind::Contract,
                    detail: Some(if count == 1 {
                        "1 field".to_owned()
                    } else {
                        format!("{count} fields")
                    }),
                    documentation: None,
                    insert_text: None,
                    replace: Some(replace),
                }
            })
            .collect()
    }

    fn functions(&self) -> Vec<Completion> {
        let replace = self.name_word();
        self.sem
            .compilation
            .model
            .symbols
            .functions
            .iter()
            .map(|(name, index, _)| {
                let function = self.ast().functions.get(index);
                let mode = function
                    .and_then(|f| f.mode.as_ref())
                    .map(|mode| match mode.value {
                        Mode::Infer => "infer",
                        Mode::Compute => "compute",
                        Mode::Gate => "gate",
                    });
                let output = function.and_then(|f| f.output.as_ref());
                let detail = match (mode, output) {
                    (Some(mode), Some(output)) => format!("{mode} → {}", output.value),
                    (Some(mode), None) => mode.to_owned(),
                    (None, Some(output)) => format!("→ {}", output.value),
                    (None, None) => "function".to_owned(),
                };
                Completion {
                    label: name.to_owned(),
                    kind: CompletionKind::Function,
                    detail: Some(bounded(&detail)),
                    documentation: None,
                    insert_text: None,
                    replace: Some(replace),
                }
            })
            .collect()
    }

    /// Flows, except `except` (a flow step cannot run its own flow).
    fn flows(&self, except: Option<&str>) -> Vec<Completion> {
        let replace = self.name_word();
        self.sem
            .compilation
            .model
            .symbols
            .flows
            .iter()
            .filter(|(name, _, _)| Some(*name) != except)
            .map(|(name, index, _)| {
                let flow = self.ast().flows.get(index);
                let input = flow
                    .and_then(|flow| flow.input.as_ref())
                    .map(|input| self.sem.compilation.model.contracts.record(&input.value))
                    .map_or_else(|| "{}".to_owned(), |ty| bounded(&ty));
                let detail = match flow.and_then(|flow| flow.output.as_ref()) {
                    Some(output) => format!("{input} → {}", output.value),
                    None => input,
                };
                Completion {
                    label: name.to_owned(),
                    kind: CompletionKind::Flow,
                    detail: Some(bounded(&detail)),
                    documentation: None,
                    insert_text: None,
                    replace: Some(replace),
                }
            })
            .collect()
    }

    /// The flow and step the step mapping at `path.get(3)` is, in the semantic analysis.
    fn locate_step(
        &self,
        path: &[Frame<'a>],
        flow: &str,
    ) -> (Option<usize>, Option<usize>, Option<&'a str>) {
        let Some((flow_index, _)) = self.flow(flow) else {
            return (None, None, None);
        };
        let Some(dash) = path.get(3) else {
            return (Some(flow_index), None, None);
        };
        let id = self
            .entries(Some(dash))
            .iter()
            .find(|entry| entry.key == "id")
            .map(|entry| scalar(entry.value))
            .filter(|id| !id.is_empty());
        let table = self.sem.compilation.model.symbols.steps.get(flow_index);
        let by_id = id.and_then(|id| table?.get(id));
        let index = by_id.or_else(|| {
            // A step without an id yet: its position among the list's items.
            let steps_key = path.get(2)?;
            let before = (steps_key.line + 1..dash.line)
                .filter(|&at| {
                    self.lines.get(at).is_some_and(|line| {
                        tokenize(line.text)
                            .first()
                            .is_some_and(|token| token.col == dash.token.col && token.key.is_none())
                    })
                })
                .count();
            let count = self
                .ast()
                .flows
                .get(flow_index)
                .map_or(0, |f| flow_steps(f).len());
            (id.is_none() && before < count).then_some(before)
        });
        (Some(flow_index), index, id)
    }

    fn step_info(&self, flow: Option<usize>, step: Option<usize>) -> Option<&'a StepInfo> {
        self.sem
            .compilation
            .model
            .flows
            .get(flow?)?
            .steps
            .get(step?)
    }

    /// The step ids of the flow a step belongs to, except that step's and `except`.
    fn step_ids(
        &self,
        path: &[Frame<'a>],
        flow: &str,
        except: &[&str],
        ancestors: bool,
    ) -> Vec<Completion> {
        let (flow_index, step_index, id) = self.locate_step(path, flow);
        let replace = self.name_word();
        self.steps_of(flow_index, step_index, id, except, ancestors)
            .into_iter()
            .map(|(name, detail)| Completion {
                label: name,
                kind: CompletionKind::Step,
                detail: Some(detail),
                documentation: None,
                insert_text: None,
                replace: Some(replace),
            })
            .collect()
    }

    /// `(id, detail)` of the steps of a flow, except `step` (and `id`) and `except`; only the
    /// ancestors of `step` when asked.
    fn steps_of(
        &self,
        flow: Option<usize>,
        step: Option<usize>,
        id: Option<&str>,
        except: &[&str],
        ancestors: bool,
    ) -> Vec<(String, String)> {
        let Some(flow) = flow else {
            return Vec::new();
        };
        let model = &self.sem.compilation.model;
        let Some(table) = model.symbols.steps.get(flow) else {
            return Vec::new();
        };
        let flow_model = model.flows.get(flow);
        let mut walk = flow_model.map(|flow| Ancestors::new(&flow.dag.graph));
        table
            .iter()
            .filter(|&(name, index, _)| {
                Some(index) != step && Some(name) != id && !except.contains(&name)
            })
            .filter(|&(_, index, _)| {
                !ancestors
                    || match (step, walk.as_mut()) {
                        (Some(step), Some(walk)) => walk.is_ancestor(index, step),
                        _ => true,
                    }
            })
            .take(MAX_COMPLETIONS)
            .map(|(name, index, _)| {
                let detail = self
                    .step_info(Some(flow), Some(index))
                    .map_or_else(|| "step".to_owned(), step_detail);
                (name.to_owned(), detail)
            })
            .collect()
    }

    // ----- expressions -------------------------------------------------------------------------

    /// What an expression of the step at `path` may name under `key`, as `sema::typecheck`
    /// scopes it: `result` in `ensure`, `score_expr`, `accumulate` and `exit_criterion`; the
    /// iteration names in `exit_criterion` when the step's mapping writes the key that binds
    /// them; only `item` in `accumulate_key`.
    fn step_scope(&self, path: &[Frame<'a>], flow: &str, key: &str) -> Scope {
        let (flow_index, step_index, _) = self.locate_step(path, flow);
        let info = self.step_info(flow_index, step_index);
        let mut names = Vec::new();
        if matches!(
            key,
            "ensure" | "exit_criterion" | "score_expr" | "accumulate"
        ) && let Some(info) = info
        {
            names.push(Name {
                name: "result",
                members: self.result_members(info),
                doc: "The step's result.",
            });
        }
        if matches!(key, "exit_criterion" | "accumulate_key") {
            // The current text says which keys are written, so that a half-typed step still
            // gets its names; the types come from the semantic analysis.
            let written: HashSet<&str> = path
                .get(3)
                .map(|dash| self.entries(Some(dash)))
                .unwrap_or_default()
                .into_iter()
                .map(|entry| entry.key)
                .collect();
            let item = || {
                self.accumulated_item(flow_index, step_index)
                    .unwrap_or(Type::Any)
            };
            if key == "accumulate_key" {
                names.push(Name {
                    name: "item",
                    members: Members::Type(item()),
                    doc: "One item of the list `accumulate` gives, to derive its key from.",
                });
            } else {
                if written.contains("score_expr") {
                    names.extend(SCORE_NAMES.iter().map(Bound::name));
                }
                if written.contains("accumulate") {
                    names.push(Name {
                        name: "accumulator",
                        members: Members::Type(Type::list(item())),
                        doc: "The distinct items accumulated so far, this iteration's included.",
                    });
                    names.extend(ACCUMULATE_NAMES.iter().map(Bound::name));
                }
            }
        }
        Scope {
            names,
            flow: flow_index,
            step: step_index,
            steps: if matches!(key, "inputs" | "skip_if") {
                StepsAllowed::All
            } else {
                StepsAllowed::Ancestors
            },
        }
    }

    /// `result` of a step: its contract by name when it has one, else its type.
    fn result_members(&self, info: &StepInfo) -> Members {
        match &info.contract {
            Some(name) if self.sem.compilation.model.contracts.fields(name).is_some() => {
                Members::Contract(name.clone())
            }
            _ => Members::Type(info.result.clone()),
        }
    }

    /// The type of an item of a step's `accumulate` list: the expression checked in the
    /// environment `sema::typecheck` gives it (`result`, `$.input`, `$.steps`). The compiler
    /// keeps no per-expression types, so this asks the same checker again; `None` when the
    /// step has no `accumulate`, it does not check clean, or it is not a list.
    fn accumulated_item(&self, flow: Option<usize>, step: Option<usize>) -> Option<Type> {
        let flow = flow?;
        let model = &self.sem.compilation.model;
        let ast_flow = self.ast().flows.get(flow)?;
        let accumulate = flow_steps(ast_flow).get(step?)?.accumulate.as_ref()?;
        let expr = model.expressions.get(&accumulate.value)?;
        let info = self.step_info(Some(flow), step)?;
        let mut env = placeholders::flow_env(&self.sem.compilation, flow)?;
        env.names.insert("result".to_owned(), info.result.clone());
        let checked = stratum_grammar::check(expr, &env);
        if checked.problems.iter().any(Problem::is_error) {
            return None;
        }
        match checked.ty.non_optional() {
            Type::List(item) => Some((**item).clone()),
            _ => None,
        }
    }

    fn function_scope(&self, name: &str) -> Scope {
        let result = self
            .function(name)
            .and_then(|function| function.output.as_ref())
            .map(|output| output.value.as_str())
            .filter(|output| {
                self.sem
                    .compilation
                    .model
                    .contracts
                    .fields(output)
                    .is_some()
            })
            .map(|output| Name {
                name: "result",
                members: Members::Contract(output.to_owned()),
                doc: "The function's output.",
            });
        Scope {
            names: result.into_iter().collect(),
            flow: None,
            step: None,
            steps: StepsAllowed::NoDollar,
        }
    }

    /// Completes the reference before the cursor: `$.`, `$.input.…`, `$.steps.<id>.output.…`,
    /// `result.…`, a free name's fields, or a bare name; after `[` and a quote, the fields of
    /// the value before it, closed (`result['a']`).
    fn expression(&self, typed: &str, scope: Scope) -> Vec<Completion> {
        let Some(access) = access(typed) else {
            return Vec::new();
        };
        let partial = access.partial;
        let replace = self.file_span(self.offset - partial.len());
        let item = |label: &str, kind, detail: String| Completion {
            label: label.to_owned(),
            kind,
            detail: Some(detail),
            documentation: None,
            insert_text: None,
            replace: Some(replace),
        };
        let fields = |members: Option<Members>, path: &[&str]| -> Vec<Completion> {
            let mut members = members;
            for name in path {
                members = members.and_then(|m| member(self, &m, name));
            }
            members.map_or_else(Vec::new, |members| {
                members_of(self, &members)
                    .into_iter()
                    .map(|(name, detail)| item(&name, CompletionKind::Field, detail))
                    .collect()
            })
        };
        let dollar = scope.steps != StepsAllowed::NoDollar;
        let out = match access.segments.as_slice() {
            [] if partial.starts_with('$') => Vec::new(),
            [] => scope
                .names
                .iter()
                .map(|name| Completion {
                    documentation: Some(name.doc.to_owned()),
                    ..item(
                        name.name,
                        CompletionKind::Variable,
                        describe_members(&name.members),
                    )
                })
                .collect(),
            ["$"] if dollar => {
                let input = self.flow_input(scope.flow);
                vec![
                    item(
                        "input",
                        CompletionKind::Variable,
                        input
                            .as_ref()
                            .map_or_else(|| "the flow's input".to_owned(), bounded),
                    ),
                    item(
                        "steps",
                        CompletionKind::Variable,
                        "the outputs of earlier steps".to_owned(),
                    ),
                ]
            }
            ["$", "input", rest @ ..] if dollar => {
                fields(self.flow_input(scope.flow).map(Members::Type), rest)
            }
            ["$", "steps"] if dollar => self
                .steps_of(
                    scope.flow,
                    scope.step,
                    None,
                    &[],
                    scope.steps == StepsAllowed::Ancestors,
                )
                .into_iter()
                .map(|(name, detail)| item(&name, CompletionKind::Step, detail))
                .collect(),
            ["$", "steps", id] if dollar => {
                let info = self.step_by_id(scope.flow, id);
                vec![item(
                    "output",
                    CompletionKind::Variable,
                    info.map_or_else(|| "the step's output".to_owned(), output_detail),
                )]
            }
            ["$", "steps", id, "output", rest @ ..] if dollar => {
                let members = self
                    .step_by_id(scope.flow, id)
                    .map(|info| match &info.contract {
                        Some(name)
                            if self.sem.compilation.model.contracts.fields(name).is_some() =>
                        {
                            Members::Contract(name.clone())
                        }
                        _ => Members::Type(info.output.clone()),
                    });
                fields(members, rest)
            }
            [first, rest @ ..] => {
                let members = scope
                    .names
                    .iter()
                    .find(|name| name.name == *first)
                    .map(|name| name.members.clone());
                fields(members, rest)
            }
        };
        let Some(quote) = access.quote else {
            return out;
        };
        // In brackets only a field can follow; the completion closes what the quote opened
        // and takes in what an editor may have closed already after the cursor.
        let replace = Span::new(
            self.current.file_id(),
            replace.start as usize..self.offset + bracket_tail(self.suffix, quote),
        );
        out.into_iter()
            .filter(|completion| completion.kind == CompletionKind::Field)
            .map(|completion| Completion {
                insert_text: Some(format!("{}{quote}]", completion.label)),
                replace: Some(replace),
                ..completion
            })
            .collect()
    }

    fn flow_input(&self, flow: Option<usize>) -> Option<Type> {
        let flow = self.ast().flows.get(flow?)?;
        let input = flow.input.as_ref()?;
        Some(self.sem.compilation.model.contracts.record(&input.value))
    }

    fn step_by_id(&self, flow: Option<usize>, id: &str) -> Option<&'a StepInfo> {
        let flow = flow?;
        let index = self
            .sem
            .compilation
            .model
            .symbols
            .steps
            .get(flow)?
            .get(id)?;
        self.step_info(Some(flow), Some(index))
    }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// The placeholder open at the end of `typed` (an intent template's text before the cursor):
/// the identifiers before the last dot and the one typed so far. `None` outside a
/// placeholder, after `{{` (a literal brace), or when what is typed cannot be a placeholder.
fn open_placeholder(typed: &str) -> Option<(Vec<&str>, &str)> {
    let open = typed.rfind('{')?;
    let inner = typed.get(open + 1..)?;
    let braces = typed
        .get(..=open)?
        .chars()
        .rev()
        .take_while(|c| *c == '{')
        .count();
    if braces % 2 == 0 || inner.contains('}') {
        return None;
    }
    if !inner
        .chars()
        .all(|c| c == '_' || c == '.' || c.is_ascii_alphanumeric())
    {
        return None;
    }
    let mut parts: Vec<&str> = inner.split('.').collect();
    let partial = parts.pop()?;
    if parts.iter().any(|part| part.is_empty()) {
        return None;
    }
    Some((parts, partial))
}

// ----- the access chain before the cursor -------------------------------------------------------

/// A reference being typed in an expression: `$.steps.a.output.sc`, `result['a']['co`.
#[derive(Debug, PartialEq, Eq)]
struct Access<'t> {
    /// The names before the one being typed, outermost first: `["result", "a"]`.
    segments: Vec<&'t str>,
    /// The name typed so far.
    partial: &'t str,
    /// In brackets, the quote as written (`'`, `"`, or inside a quoted YAML scalar `\"` and
    /// `''`), which the completion closes.
    quote: Option<&'static str>,
}

/// The quotes a bracket access may open with, as the YAML text writes them: two-character
/// escapes first, so that `[''` is not read as `['` followed by a quote.
const QUOTES: [&str; 4] = ["\\\"", "''", "'", "\""];

/// The reference that ends `typed`; `None` when what stands before a `.` or `[` is not one
/// (nothing is offered then, not even the free names: the cursor is after an access).
fn access(typed: &str) -> Option<Access<'_>> {
    if let Some((head, quote, partial)) = bracket(typed) {
        return Some(Access {
            segments: chain(head)?,
            partial,
            quote: Some(quote),
        });
    }
    let start = name_start(typed);
    let partial = typed.get(start..)?;
    let segments = match typed.get(..start)?.strip_suffix('.') {
        Some(head) => chain(head)?,
        None => Vec::new(),
    };
    Some(Access {
        segments,
        partial,
        quote: None,
    })
}

/// `head['na` with the cursor after the name so far: `head`, the quote and the name so far.
fn bracket(typed: &str) -> Option<(&str, &'static str, &str)> {
    let open = typed.rfind(['\'', '"'])?;
    let partial = typed.get(open + 1..)?;
    if partial.contains(['[', ']', '\\']) {
        return None;
    }
    let upto = typed.get(..=open)?;
    QUOTES.iter().find_map(|&quote| {
        let head = upto.strip_suffix(quote)?.strip_suffix('[')?;
        Some((head, quote, partial))
    })
}

/// The names of the reference that ends `head`, outermost first: `$.steps.a['b']` gives `$`,
/// `steps`, `a`, `b`. `None` when `head` does not end with a name or a quoted index.
fn chain(mut head: &str) -> Option<Vec<&str>> {
    let mut segments = Vec::new();
    loop {
        if let Some(inside) = head.strip_suffix(']') {
            let open = inside.rfind('[')?;
            let quoted = inside.get(open + 1..)?;
            let name = QUOTES
                .iter()
                .find_map(|&quote| quoted.strip_prefix(quote)?.strip_suffix(quote))?;
            segments.push(name);
            head = inside.get(..open)?;
            continue;
        }
        let start = name_start(head);
        let name = head.get(start..).filter(|name| !name.is_empty())?;
        segments.push(name);
        head = head.get(..start)?;
        match head.strip_suffix('.') {
            Some(rest) => head = rest,
            None => break,
        }
    }
    segments.reverse();
    Some(segments)
}

/// Where the name (or `$`) that ends `text` starts.
fn name_start(text: &str) -> usize {
    text.char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphanumeric() || c == '_' || c == '$')
        .last()
        .map_or(text.len(), |(at, _)| at)
}

/// How much of the text after the cursor a bracket completion replaces: the rest of the name,
/// then the closing `quote` and `]` when they are there (an editor that closes brackets and
/// quotes has typed them already).
fn bracket_tail(suffix: &str, quote: &str) -> usize {
    let name = suffix
        .find(|c: char| matches!(c, '\'' | '"' | '[' | ']' | '\\') || c.is_whitespace())
        .unwrap_or(suffix.len());
    let mut end = name;
    let rest = suffix.get(end..).unwrap_or("");
    if let Some(after) = rest.strip_prefix(quote) {
        end += quote.len();
        if after.starts_with(']') {
            end += 1;
        }
    } else if rest.starts_with(']') {
        end += 1;
    }
    end
}

fn step_detail(info: &StepInfo) -> String {
    match &info.contract {
        Some(contract) => format!("{} → {contract}", info.kind.noun()),
        None => info.kind.noun().to_owned(),
    }
}

fn output_detail(info: &StepInfo) -> String {
    match &info.contract {
        Some(contract) if info.output.is_optional() => format!("{contract}?"),
        Some(contract) => contract.clone(),
        None => bounded(&info.output),
    }
}

// ----- members of contracts and records ---------------------------------------------------------

/// `(name, type)` of each field.
fn members_of(cx: &Cx<'_>, members: &Members) -> Vec<(String, String)> {
    match members {
        Members::Contract(name) => cx
            .sem
            .compilation
            .model
            .contracts
            .fields(name)
            .unwrap_or(&[])
            .iter()
            .take(MAX_COMPLETIONS)
            .map(|field| (field.name.clone(), describe(&field.ty)))
            .collect(),
        Members::Type(ty) => match ty.non_optional() {
            Type::Record(record) => record
                .fields
                .iter()
                .take(MAX_COMPLETIONS)
                .map(|field| (field.name.clone(), bounded(&field.ty)))
                .collect(),
            _ => Vec::new(),
        },
    }
}

/// The members of the field `name`.
fn member(cx: &Cx<'_>, members: &Members, name: &str) -> Option<Members> {
    match members {
        Members::Contract(contract) => {
            let fields = cx.sem.compilation.model.contracts.fields(contract)?;
            let field = fields.iter().find(|field| field.name == name)?;
            match field.ty.required() {
                FieldType::Contract(nested) => Some(Members::Contract(nested.clone())),
                other => Some(Members::Type(other.to_type(&HashMap::new()))),
            }
        }
        Members::Type(ty) => match ty.non_optional() {
            Type::Record(record) => record.field(name).cloned().map(Members::Type),
            _ => None,
        },
    }
}

fn describe_members(members: &Members) -> String {
    match members {
        Members::Contract(name) => name.clone(),
        Members::Type(ty) => bounded(ty),
    }
}

/// A contract field's type in the expression language's notation, nested contracts by name.
fn describe(ty: &FieldType) -> String {
    match ty {
        FieldType::Contract(name) => name.clone(),
        FieldType::Optional(inner) => match inner.as_ref() {
            FieldType::Enum(_) => format!("({})?", describe(inner)),
            _ => format!("{}?", describe(inner)),
        },
        FieldType::Array(Some(item)) => format!("list<{}>", describe(item)),
        FieldType::Enum(values) => {
            let mut out = Capped::default();
            for (at, value) in values.iter().enumerate() {
                let separator = if at > 0 { " | " } else { "" };
                if write!(out, "{separator}{value}").is_err() {
                    break;
                }
            }
            out.finish()
        }
        other => bounded(&other.to_type(&HashMap::new())),
    }
}

/// `value` displayed, cut at [`MAX_DETAIL`] characters.
fn bounded(value: &(impl Display + ?Sized)) -> String {
    let mut out = Capped::default();
    let _ = write!(out, "{value}");
    out.finish()
}

/// A string that refuses to grow past [`MAX_DETAIL`] characters, so that displaying a huge
/// type stops early.
#[derive(Default)]
struct Capped {
    text: String,
    chars: usize,
    cut: bool,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            if self.chars >= MAX_DETAIL {
                self.cut = true;
                return Err(fmt::Error);
            }
            self.text.push(c);
            self.chars += 1;
        }
        Ok(())
    }
}

impl Capped {
    fn finish(mut self) -> String {
        if self.cut {
            self.text.push('…');
        }
        self.text
    }
}

// ----- key documentation ------------------------------------------------------------------------

/// A key's detail: `required` and the first sentence of its documentation (`key_docs`, the
/// lines hover shows), without the version mark.
fn key_detail(place: Place<'_>, key: &str, required: bool) -> Option<String> {
    let doc_place = match place {
        Place::Root => KeyPlace::Root,
        Place::ContractField => KeyPlace::ContractField,
        Place::FunctionInput | Place::FlowInput => KeyPlace::InputParam,
        Place::Function(_) => KeyPlace::Function,
        Place::Budget => KeyPlace::Budget,
        Place::Flow(_) => KeyPlace::Flow,
        Place::Step(_) => KeyPlace::Step,
        Place::Stage(_) => KeyPlace::Stage,
        Place::Fanout => KeyPlace::Fanout,
        Place::Judge => KeyPlace::Judge,
        Place::Predicate => KeyPlace::Predicate,
        Place::JudgeBudget => KeyPlace::JudgeBudget,
        Place::Certificate => KeyPlace::Certificate,
        Place::Section => KeyPlace::Section,
        Place::Workflow => KeyPlace::Workflow,
        Place::WorkflowParam => KeyPlace::WorkflowParam,
        Place::Contract | Place::StepInputs(_) | Place::Other => return None,
    };
    let line = key_docs::doc(doc_place, key).map(|doc| {
        let doc = doc.trim_start_matches("Required. ");
        // `(v0.2)`, `(v0.2, inline steps)`: the filters above already applied them.
        let doc = match doc
            .strip_prefix("(v0.")
            .and_then(|rest| rest.split_once(") "))
        {
            Some((_, rest)) => rest,
            None => doc,
        };
        let sentence = doc.split(". ").next().unwrap_or(doc);
        sentence.trim_end_matches('.')
    });
    match (required, line) {
        (true, Some(line)) => Some(bounded(&format!("required: {line}"))),
        (true, None) => Some("required".to_owned()),
        (false, Some(line)) => Some(bounded(line)),
        (false, None) => None,
    }
}

#[cfg(test)]
mod tests;
