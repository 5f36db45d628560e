//! YAML text → a spanned tree of plain data.
//!
//! Takes a [`SourceFile`]; gives its single document as a [`Node`] tree in which every mapping,
//! sequence, key and scalar has its byte [`Span`], plain scalars are typed as PyYAML's
//! `safe_load` types them (the reference implementation's loader), and quoted and block scalars
//! keep their style and raw token span so that offsets inside them can be mapped back to the
//! source. Anchors and aliases are expanded (and `<<` merge keys applied) within an expansion
//! budget.
//!
//! Invariants: loading never panics and never fails as a whole; every problem is a diagnostic.
//! Time and memory are linear in the input: nesting is capped at [`MAX_DEPTH`] and alias
//! expansion at [`MAX_ALIAS_EXPANSION`] nodes. Where a subtree had to be dropped, an
//! [`NodeKind::Invalid`] node stands in its place so that later stages stay silent about it.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScanError, Tag};

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{SourceFile, Span};
use crate::syntax::scalar::ScalarStyle;

/// Deepest nesting of mappings and sequences accepted.
pub const MAX_DEPTH: usize = 128;
/// Most nodes that aliases may add to the document in total.
pub const MAX_ALIAS_EXPANSION: usize = 100_000;
/// Most nodes kept as copies of anchored content, for aliases to expand later.
pub const MAX_ANCHORED_NODES: usize = 1_000_000;

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub span: Span,
    pub kind: NodeKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Str),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
    /// Stands where a subtree was dropped after a diagnostic; later stages accept it silently.
    Invalid,
}

/// A string scalar: its decoded value and how it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Str {
    pub value: String,
    pub style: ScalarStyle,
    /// The raw token as the parser reports it: quotes included; for block scalars from the first
    /// content character to the next token. A tagged scalar's `Node::span` includes the tag,
    /// this does not.
    pub token: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub key: Node,
    pub value: Node,
}

impl Node {
    fn new(span: Span, kind: NodeKind) -> Node {
        Node { span, kind }
    }

    /// Python's truthiness of a value written as is (`judge`, `output_schema`,
    /// `reasoning_template`), which is what the reference implementation tests. A dropped value
    /// counts as set: it was reported already, and nothing should follow from it.
    pub fn is_truthy(&self) -> bool {
        match &self.kind {
            NodeKind::Null => false,
            NodeKind::Bool(value) => *value,
            NodeKind::Int(value) => *value != 0,
            NodeKind::Float(value) => *value != 0.0,
            NodeKind::Str(value) => !value.value.is_empty(),
            NodeKind::Seq(items) => !items.is_empty(),
            NodeKind::Map(entries) => !entries.is_empty(),
            NodeKind::Invalid => true,
        }
    }

    /// The string value of a string scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Str(s) => Some(&s.value),
            _ => None,
        }
    }

    /// What the node is, for messages: "a string", "a mapping", ….
    pub fn kind_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "a boolean",
            NodeKind::Int(_) => "an integer",
            NodeKind::Float(_) => "a number",
            NodeKind::Str(_) => "a string",
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a mapping",
            NodeKind::Invalid => "an invalid value",
        }
    }

    /// Counts this node and all below it, giving up (`None`) past `limit` so that the count
    /// costs at most `limit` steps.
    fn size_within(&self, limit: usize) -> Option<usize> {
        let mut count = 1usize;
        let add = |child: &Node, count: &mut usize| -> Option<()> {
            *count += child.size_within(limit.checked_sub(*count)?)?;
            (*count <= limit).then_some(())
        };
        match &self.kind {
            NodeKind::Seq(items) => {
                for item in items {
                    add(item, &mut count)?;
                }
            }
            NodeKind::Map(entries) => {
                for entry in entries {
                    add(&entry.key, &mut count)?;
                    add(&entry.value, &mut count)?;
                }
            }
            _ => {}
        }
        (count <= limit).then_some(count)
    }
}

/// The loaded document: `None` when there is no usable document (empty file, syntax error).
pub struct Loaded {
    pub root: Option<Node>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses the file's single YAML document into a tree.
pub fn load(src: &SourceFile) -> Loaded {
    let mut loader = Loader::new(src);
    let root = loader.run();
    Loaded {
        root,
        diagnostics: loader.diagnostics,
    }
}

/// A collection being built: its start, its children so far, and the anchor to register it under.
enum Frame {
    Seq {
        start: Span,
        flow: bool,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        start: Span,
        flow: bool,
        anchor: usize,
        entries: Vec<Entry>,
        pending_key: Option<Node>,
    },
}

/// What an anchor names: a copy of its content and the content's size, or nothing because the
/// copies would have passed [`MAX_ANCHORED_NODES`].
enum Anchored {
    Stored { node: Node, size: usize },
    TooLarge,
}

struct Loader<'a> {
    src: &'a SourceFile,
    chars: CharToByte<'a>,
    diagnostics: Vec<Diagnostic>,
    anchors: HashMap<usize, Anchored>,
    /// Nodes copied into `anchors` so far.
    anchored: usize,
    /// Nodes added by aliases so far.
    expanded: usize,
    /// How many levels of collections are being skipped because they were too deep.
    skipping: usize,
    alias_budget_reported: bool,
}

impl<'a> Loader<'a> {
    fn new(src: &'a SourceFile) -> Loader<'a> {
        Loader {
            src,
            chars: CharToByte::new(src.text()),
            diagnostics: Vec::new(),
            anchors: HashMap::new(),
            anchored: 0,
            expanded: 0,
            skipping: 0,
            alias_budget_reported: false,
        }
    }

    fn span(&self, sp: saphyr_parser::Span) -> Span {
        let start = self.chars.byte(sp.start.index());
        let end = self.chars.byte(sp.end.index());
        self.src.span(start..end)
    }

    fn run(&mut self) -> Option<Node> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut root: Option<Node> = None;
        let mut documents = 0usize;
        for event in Parser::new_from_str(self.src.text()) {
            let (event, raw_span) = match event {
                Ok(ok) => ok,
                Err(error) => {
                    self.syntax_error(&error);
                    return None;
                }
            };
            let span = self.span(raw_span);
            if self.skipping > 0 {
                self.skip(&event);
                continue;
            }
            let node = match event {
                Event::DocumentStart(_) => {
                    documents += 1;
                    if documents > 1 {
                        self.push(
                            Diagnostic::new(
                                Code::E0010,
                                "a spec holds exactly one YAML document",
                                span,
                                "a second document starts here",
                            )
                            .help("move the second document into a file of its own"),
                        );
                        return root;
                    }
                    continue;
                }
                Event::SequenceStart(anchor, tag) => {
                    self.open(&mut stack, &mut root, anchor, tag.as_deref(), span, false);
                    continue;
                }
                Event::MappingStart(anchor, tag) => {
                    self.open(&mut stack, &mut root, anchor, tag.as_deref(), span, true);
                    continue;
                }
                Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                    Some(frame) => self.finish_collection(frame, span),
                    None => continue,
                },
                Event::Scalar(value, style, anchor, tag) => {
                    let node = self.scalar(&value, style, tag.as_deref(), span);
                    self.register(anchor, &node);
                    node
                }
                Event::Alias(anchor) => self.alias(anchor, span),
                Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {
                    continue;
                }
            };
            self.complete(&mut stack, &mut root, node);
        }
        root
    }

    /// Starts a mapping or sequence, or skips it when it is nested too deep.
    fn open(
        &mut self,
        stack: &mut Vec<Frame>,
        root: &mut Option<Node>,
        anchor: usize,
        tag: Option<&Tag>,
        span: Span,
        is_map: bool,
    ) {
        self.check_collection_tag(tag, is_map, span);
        if stack.len() >= MAX_DEPTH {
            self.push(
                Diagnostic::new(
                    Code::E0006,
                    format!("nesting is deeper than {MAX_DEPTH} levels"),
                    span,
                    format!("level {} starts here", MAX_DEPTH + 1),
                )
                .help("flatten the structure; no spec needs this depth"),
            );
            self.skipping = 1;
            self.complete(stack, root, Node::new(span, NodeKind::Invalid));
            return;
        }
        // Block collections start with an empty span; flow ones at their bracket.
        let flow = !span.is_empty();
        stack.push(if is_map {
            Frame::Map {
                start: span,
                flow,
                anchor,
                entries: Vec::new(),
                pending_key: None,
            }
        } else {
            Frame::Seq {
                start: span,
                flow,
                anchor,
                items: Vec::new(),
            }
        });
    }

    /// Consumes the events of a collection that is too deep, keeping count of its nesting.
    fn skip(&mut self, event: &Event<'_>) {
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => self.skipping += 1,
            Event::SequenceEnd | Event::MappingEnd => self.skipping -= 1,
            _ => {}
        }
    }

    /// Hands a finished node to the collection being built, or makes it the root.
    fn complete(&mut self, stack: &mut [Frame], root: &mut Option<Node>, node: Node) {
        match stack.last_mut() {
            None => *root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                pending_key,
                ..
            }) => match pending_key.take() {
                None => *pending_key = Some(node),
                Some(key) => entries.push(Entry { key, value: node }),
            },
        }
    }

    fn finish_collection(&mut self, frame: Frame, end: Span) -> Node {
        match frame {
            Frame::Seq {
                start,
                flow,
                anchor,
                items,
            } => {
                let last = items.last().map(|n| n.span);
                let span = collection_span(start, flow, last, end);
                let node = Node::new(span, NodeKind::Seq(items));
                self.register(anchor, &node);
                node
            }
            Frame::Map {
                start,
                flow,
                anchor,
                entries,
                pending_key,
            } => {
                debug_assert!(pending_key.is_none(), "the parser pairs every key");
                let last = entries.last().map(|e| e.value.span.to(e.key.span));
                let span = collection_span(start, flow, last, end);
                let entries = self.merge_and_dedupe(entries);
                let node = Node::new(span, NodeKind::Map(entries));
                self.register(anchor, &node);
                node
            }
        }
    }

    /// Applies `<<` merge keys (explicit keys win, earlier merged mappings win over later ones)
    /// and reports duplicate keys, keeping the first of each.
    fn merge_and_dedupe(&mut self, entries: Vec<Entry>) -> Vec<Entry> {
        let mut own: Vec<Entry> = Vec::with_capacity(entries.len());
        let mut merges: Vec<Node> = Vec::new();
        let mut seen: HashMap<KeyIdentity, Span> = HashMap::new();
        for entry in entries {
            if is_merge_key(&entry.key) {
                merges.push(entry.value);
                continue;
            }
            if let Some(identity) = KeyIdentity::of(&entry.key) {
                if let Some(first) = seen.get(&identity) {
                    self.push(duplicate_key(
                        &entry.key,
                        self.src.slice(entry.key.span),
                        *first,
                    ));
                    continue;
                }
                seen.insert(identity, entry.key.span);
            }
            own.push(entry);
        }
        for merge in merges {
            for source in self.merge_sources(merge) {
                for entry in source {
                    if let Some(identity) = KeyIdentity::of(&entry.key) {
                        if seen.contains_key(&identity) {
                            continue;
                        }
                        seen.insert(identity, entry.key.span);
                    }
                    own.push(entry);
                }
            }
        }
        own
    }

    /// The mappings a `<<` value names: one mapping, or a list of them.
    fn merge_sources(&mut self, value: Node) -> Vec<Vec<Entry>> {
        match value.kind {
            NodeKind::Map(entries) => vec![entries],
            NodeKind::Seq(items) => {
                let mut sources = Vec::new();
                for item in items {
                    match item.kind {
                        NodeKind::Map(entries) => sources.push(entries),
                        NodeKind::Invalid => {}
                        _ => self.push(bad_merge(item.span, item.kind_name())),
                    }
                }
                sources
            }
            NodeKind::Invalid => Vec::new(),
            _ => {
                let kind = value.kind_name();
                self.push(bad_merge(value.span, kind));
                Vec::new()
            }
        }
    }

    /// Keeps a copy of anchored content for later aliases. The copies are bounded, since
    /// nested anchors would otherwise copy the same nodes once per level.
    fn register(&mut self, anchor: usize, node: &Node) {
        if anchor == 0 {
            return;
        }
        let room = MAX_ANCHORED_NODES - self.anchored;
        let anchored = match node.size_within(room) {
            Some(size) => {
                self.anchored += size;
                Anchored::Stored {
                    node: node.clone(),
                    size,
                }
            }
            None => Anchored::TooLarge,
        };
        self.anchors.insert(anchor, anchored);
    }

    fn alias(&mut self, anchor: usize, span: Span) -> Node {
        let (target, size) = match self.anchors.get(&anchor) {
            Some(Anchored::Stored { node, size }) => (node, *size),
            Some(Anchored::TooLarge) => {
                self.alias_limit(
                    span,
                    format!("anchored content is larger than {MAX_ANCHORED_NODES} nodes in total"),
                    "this alias names too much".to_owned(),
                );
                return Node::new(span, NodeKind::Invalid);
            }
            // The parser rejects unknown anchors itself; this is only a guard.
            None => return Node::new(span, NodeKind::Invalid),
        };
        if self.expanded + size > MAX_ALIAS_EXPANSION {
            self.alias_limit(
                span,
                format!("aliases expand to more than {MAX_ALIAS_EXPANSION} nodes"),
                format!("this alias would add {size} more"),
            );
            return Node::new(span, NodeKind::Invalid);
        }
        self.expanded += size;
        let mut node = target.clone();
        node.span = span;
        node
    }

    /// Reports the first alias past a budget; the rest are dropped silently.
    fn alias_limit(&mut self, span: Span, message: String, label: String) {
        if self.alias_budget_reported {
            return;
        }
        self.alias_budget_reported = true;
        self.push(Diagnostic::new(Code::E0005, message, span, label).help(
            "write the repeated parts out, or share less through aliases; nested aliases multiply",
        ));
    }

    fn scalar(
        &mut self,
        value: &str,
        style: saphyr_parser::ScalarStyle,
        tag: Option<&Tag>,
        span: Span,
    ) -> Node {
        let style = ScalarStyle::from(style);
        let mut token = match tag {
            // The event's span takes in the tag; the token is what follows it.
            Some(_) => self.untagged_token(span),
            None => span,
        };
        if matches!(style, ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted) {
            // The parser's span of a quoted scalar runs on over blanks and a trailing comment;
            // cut it at the closing quote.
            if let Some(end) = closing_quote_end(self.src.text(), token.start as usize, style) {
                token.end = token.end.min(u32::try_from(end).unwrap_or(u32::MAX));
            }
        }
        let span = match tag {
            Some(_) => span.with_end(token.end),
            None => token,
        };
        let string = || {
            NodeKind::Str(Str {
                value: value.to_owned(),
                style,
                token,
            })
        };
        let kind = match tag {
            None if style == ScalarStyle::Plain => resolve_plain(value).unwrap_or_else(string),
            None => string(),
            Some(tag) => match core_tag(tag) {
                Some("str") => string(),
                Some("null") => NodeKind::Null,
                Some(suffix @ ("int" | "float" | "bool")) => match resolve_plain(value) {
                    Some(NodeKind::Int(i)) if suffix == "int" => NodeKind::Int(i),
                    Some(NodeKind::Int(i)) if suffix == "float" => NodeKind::Float(i as f64),
                    Some(NodeKind::Float(f)) if suffix == "float" => NodeKind::Float(f),
                    Some(NodeKind::Bool(b)) if suffix == "bool" => NodeKind::Bool(b),
                    _ => {
                        self.push(
                            Diagnostic::new(
                                Code::E0012,
                                format!("`{value}` is not a valid `!!{suffix}`"),
                                span,
                                format!("not {}", article_for(suffix)),
                            )
                            .help("remove the tag, or write a value of the tagged type"),
                        );
                        NodeKind::Invalid
                    }
                },
                _ => {
                    self.unsupported_tag(tag, span);
                    NodeKind::Invalid
                }
            },
        };
        Node::new(span, kind)
    }

    /// The token of a tagged scalar: its span without the leading tag and the blanks after it.
    fn untagged_token(&self, span: Span) -> Span {
        let text = self.src.slice(span);
        let tag_len = text.find(char::is_whitespace).unwrap_or(text.len());
        let rest = text.get(tag_len..).unwrap_or("");
        let blanks = rest.len() - rest.trim_start().len();
        let start = span.start as usize + tag_len + blanks;
        self.src.span(start..span.end as usize)
    }

    fn check_collection_tag(&mut self, tag: Option<&Tag>, is_map: bool, span: Span) {
        let Some(tag) = tag else { return };
        let expected = if is_map { "map" } else { "seq" };
        if core_tag(tag) != Some(expected) {
            self.unsupported_tag(tag, span);
        }
    }

    fn unsupported_tag(&mut self, tag: &Tag, span: Span) {
        let shown = match core_tag(tag) {
            Some(suffix) => format!("!!{suffix}"),
            None => tag.to_string(),
        };
        self.push(
            Diagnostic::new(
                Code::E0024,
                format!("the YAML tag `{shown}` is not supported"),
                span,
                "unsupported tag",
            )
            .help("specs use plain YAML data; the only tags accepted are `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!seq` and `!!map`"),
        );
    }

    fn syntax_error(&mut self, error: &ScanError) {
        let offset = self.chars.byte(error.marker().index());
        let span = self.src.span(offset..offset);
        let info = error.info();
        if info == "recursion limit exceeded" {
            // The scanner allows 255 levels of flow collections; deeper is our E0006, which was
            // already reported at level 129 unless this is where the skipping began.
            if self.skipping == 0 {
                self.push(
                    Diagnostic::new(
                        Code::E0006,
                        format!("nesting is deeper than {MAX_DEPTH} levels"),
                        span,
                        "nested too deep",
                    )
                    .help("flatten the structure; no spec needs this depth"),
                );
            }
            return;
        }
        let message = match info.split_once(", ") {
            // saphyr says "while parsing a block mapping, did not find expected key": keep the
            // part that names the problem, then the context.
            Some((context, problem)) if context.starts_with("while ") => {
                format!("{problem} ({context})")
            }
            _ => info.to_owned(),
        };
        let closing_bracket = matches!(
            self.src
                .text()
                .get(offset..)
                .and_then(|rest| rest.chars().next()),
            Some(']' | '}')
        );
        let help = if info == "invalid indentation" && closing_bracket {
            "indent the closing bracket further than the key it belongs to: YAML wants the lines of a flow `[...]` or `{...}` indented more than their parent (PyYAML tolerates this; stratumc does not)"
        } else {
            "check indentation (spaces, not tabs), colons after keys, and that every quote and bracket is closed"
        };
        self.push(
            Diagnostic::new(
                Code::E0004,
                format!("invalid YAML: {message}"),
                span,
                "here",
            )
            .help(help),
        );
    }

    fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

/// The byte just past the closing quote of the quoted scalar that starts at `start`.
fn closing_quote_end(text: &str, start: usize, style: ScalarStyle) -> Option<usize> {
    let quote = if style == ScalarStyle::DoubleQuoted {
        '"'
    } else {
        '\''
    };
    let body = text.get(start..)?;
    let mut chars = body.char_indices();
    if chars.next()?.1 != quote {
        return None;
    }
    while let Some((offset, c)) = chars.next() {
        match c {
            '\\' if quote == '"' => {
                chars.next();
            }
            c if c == quote => {
                // In single quotes, `''` is an escaped quote, not the end.
                if quote == '\''
                    && body
                        .get(offset + 1..)
                        .is_some_and(|rest| rest.starts_with('\''))
                {
                    chars.next();
                    continue;
                }
                return Some(start + offset + 1);
            }
            _ => {}
        }
    }
    None
}

/// A block collection spans from its first to its last child; a flow one from its opening to
/// its closing bracket.
fn collection_span(start: Span, flow: bool, last_child: Option<Span>, end: Span) -> Span {
    if flow {
        start.to(end)
    } else {
        match last_child {
            Some(last) => start.to(last),
            None => start,
        }
    }
}

fn is_merge_key(key: &Node) -> bool {
    matches!(&key.kind, NodeKind::Str(s) if s.value == "<<" && s.style == ScalarStyle::Plain)
}

fn bad_merge(span: Span, kind: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E0012,
        format!("a `<<` merge key takes a mapping or a list of mappings, not {kind}"),
        span,
        "not a mapping",
    )
    .help("write `<<: *anchor` where the anchor names a mapping")
}

fn duplicate_key(key: &Node, text: &str, first: Span) -> Diagnostic {
    let name = key.as_str().unwrap_or(text);
    Diagnostic::new(
        Code::E0007,
        format!("duplicate key `{name}`"),
        key.span,
        "defined again here",
    )
    .secondary(first, "first defined here")
    .help("remove one of the two; YAML keys are unique, and the reference implementation would silently keep only the last")
}

/// What makes two keys the same key: their type and value.
#[derive(PartialEq, Eq, Hash)]
enum KeyIdentity {
    Null,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(String),
}

impl KeyIdentity {
    fn of(key: &Node) -> Option<KeyIdentity> {
        Some(match &key.kind {
            NodeKind::Null => KeyIdentity::Null,
            NodeKind::Bool(b) => KeyIdentity::Bool(*b),
            NodeKind::Int(i) => KeyIdentity::Int(*i),
            NodeKind::Float(f) => KeyIdentity::Float(f.to_bits()),
            NodeKind::Str(s) => KeyIdentity::Str(s.value.clone()),
            NodeKind::Seq(_) | NodeKind::Map(_) | NodeKind::Invalid => return None,
        })
    }
}

/// The suffix of a core-schema tag (`!!str` → `str`), or `None` for any other tag.
fn core_tag(tag: &Tag) -> Option<&str> {
    tag.is_yaml_core_schema().then_some(tag.suffix.as_str())
}

fn article_for(suffix: &str) -> &'static str {
    match suffix {
        "int" => "an integer",
        "float" => "a number",
        _ => "a boolean",
    }
}

/// Types a plain scalar as PyYAML's `safe_load` does (YAML 1.1 core types); `None` for a string.
/// Dates and timestamps, which PyYAML would also resolve, stay strings.
pub fn resolve_plain(text: &str) -> Option<NodeKind> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Some(NodeKind::Null),
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Some(NodeKind::Bool(true));
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Some(NodeKind::Bool(false));
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Some(NodeKind::Float(f64::INFINITY));
        }
        "-.inf" | "-.Inf" | "-.INF" => return Some(NodeKind::Float(f64::NEG_INFINITY)),
        ".nan" | ".NaN" | ".NAN" => return Some(NodeKind::Float(f64::NAN)),
        _ => {}
    }
    resolve_int(text)
        .map(NodeKind::Int)
        .or_else(|| resolve_float(text).map(NodeKind::Float))
}

fn resolve_int(text: &str) -> Option<i64> {
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, text.get(1..)?),
        b'+' => (false, text.get(1..)?),
        _ => (false, text),
    };
    let first = *body.as_bytes().first()?;
    if !first.is_ascii_digit() || body.ends_with('_') {
        return None;
    }
    let digits: String = body.chars().filter(|&c| c != '_').collect();
    let (radix, digits) = if let Some(hex) = digits.strip_prefix("0x") {
        (16, hex)
    } else if let Some(binary) = digits.strip_prefix("0b") {
        (2, binary)
    } else if let Some(octal) = digits.strip_prefix("0o") {
        (8, octal)
    } else if digits.len() > 1 && digits.starts_with('0') {
        // YAML 1.1 reads `017` as octal, as PyYAML does.
        (8, digits.get(1..)?)
    } else {
        (10, digits.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// YAML 1.1 floats as PyYAML resolves them: digits with a `.`, optional exponent.
fn resolve_float(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (body.get(..i)?, Some(body.get(i + 1..)?)),
        None => (body, None),
    };
    let (whole, fraction) = mantissa.split_once('.')?;
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit() || c == '_');
    let valid_mantissa = digits(whole)
        && digits(fraction)
        && !(whole.is_empty() && fraction.is_empty())
        && !whole.starts_with('_');
    let valid_exponent = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    if !(valid_mantissa && valid_exponent) {
        return None;
    }
    text.replace('_', "").parse().ok()
}

/// Converts saphyr's character indices into byte offsets in linear time and little memory:
/// a checkpoint every [`CharToByte::STRIDE`] characters, then a short walk.
struct CharToByte<'a> {
    text: &'a str,
    ascii: bool,
    checkpoints: Vec<usize>,
}

impl<'a> CharToByte<'a> {
    const STRIDE: usize = 64;

    fn new(text: &'a str) -> CharToByte<'a> {
        let ascii = text.is_ascii();
        let checkpoints = if ascii {
            Vec::new()
        } else {
            text.char_indices()
                .step_by(Self::STRIDE)
                .map(|(byte, _)| byte)
                .collect()
        };
        CharToByte {
            text,
            ascii,
            checkpoints,
        }
    }

    fn byte(&self, char_index: usize) -> usize {
        if self.ascii {
            return char_index.min(self.text.len());
        }
        let Some(&base) = self.checkpoints.get(char_index / Self::STRIDE) else {
            return self.text.len();
        };
        let rest = char_index % Self::STRIDE;
        self.text
            .get(base..)
            .and_then(|tail| tail.char_indices().nth(rest).map(|(i, _)| base + i))
            .unwrap_or(self.text.len())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::source::FileId;

    fn load_text(text: &str) -> (SourceFile, Loaded) {
        let file = SourceFile::new(FileId(0), "t.yaml", text);
        let loaded = load(&file);
        (file, loaded)
    }

    fn codes(loaded: &Loaded) -> Vec<Code> {
        loaded.diagnostics.iter().map(|d| d.code).collect()
    }

    #[test]
    fn plain_scalars_are_typed_like_pyyaml() {
        assert_eq!(resolve_plain("yes"), Some(NodeKind::Bool(true)));
        assert_eq!(resolve_plain("Off"), Some(NodeKind::Bool(false)));
        assert_eq!(resolve_plain("~"), Some(NodeKind::Null));
        assert_eq!(resolve_plain("42"), Some(NodeKind::Int(42)));
        assert_eq!(resolve_plain("-0x1F"), Some(NodeKind::Int(-31)));
        assert_eq!(resolve_plain("017"), Some(NodeKind::Int(15)));
        assert_eq!(resolve_plain("1_000"), Some(NodeKind::Int(1000)));
        assert_eq!(resolve_plain("0.5"), Some(NodeKind::Float(0.5)));
        assert_eq!(resolve_plain("1.5e+3"), Some(NodeKind::Float(1500.0)));
        assert_eq!(resolve_plain("1e3"), None, "PyYAML needs a dot in a float");
        assert_eq!(resolve_plain("0.2.1"), None);
        assert_eq!(resolve_plain("99999999999999999999"), None);
        assert_eq!(resolve_plain("claude"), None);
        assert_eq!(resolve_plain("."), None);
        assert_eq!(resolve_plain("-"), None);
    }

    #[test]
    fn spans_are_bytes_even_after_multibyte_text() {
        let (file, loaded) = load_text("# é😀\nname: \"héllo\"\n");
        let root = loaded.root.unwrap();
        let NodeKind::Map(entries) = &root.kind else {
            panic!("not a map")
        };
        assert_eq!(file.slice(entries[0].key.span), "name");
        assert_eq!(file.slice(entries[0].value.span), "\"héllo\"");
    }

    #[test]
    fn quoted_scalars_end_at_their_closing_quote() {
        let (file, loaded) = load_text("a: \"3\"  # c\nb: 'it''s'   # d\nc: [ \"x\\\"\" , y ]\n");
        let root = loaded.root.unwrap();
        let NodeKind::Map(entries) = &root.kind else {
            panic!("not a map")
        };
        assert_eq!(file.slice(entries[0].value.span), "\"3\"");
        assert_eq!(file.slice(entries[1].value.span), "'it''s'");
        let NodeKind::Seq(items) = &entries[2].value.kind else {
            panic!("not a list")
        };
        assert_eq!(file.slice(items[0].span), "\"x\\\"\"");
    }

    #[test]
    fn a_bom_is_skipped() {
        let (file, loaded) = load_text("\u{feff}a: 1\n");
        let root = loaded.root.unwrap();
        let NodeKind::Map(entries) = &root.kind else {
            panic!("not a map")
        };
        assert_eq!(file.slice(entries[0].key.span), "a");
    }

    #[test]
    fn duplicate_keys_name_both_places() {
        let (file, loaded) = load_text("a: 1\nb: 2\na: 3\n");
        assert_eq!(codes(&loaded), [Code::E0007]);
        let diagnostic = &loaded.diagnostics[0];
        assert_eq!(diagnostic.primary_span().start, 10);
        assert_eq!(file.slice(diagnostic.secondary[0].span), "a");
        assert_eq!(diagnostic.secondary[0].span.start, 0);
    }

    #[test]
    fn merge_keys_fill_in_missing_keys_only() {
        let (_, loaded) = load_text("base: &b {x: 1, y: 2}\nthing:\n  <<: *b\n  y: 3\n");
        assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
        let root = loaded.root.unwrap();
        let NodeKind::Map(entries) = &root.kind else {
            panic!()
        };
        let NodeKind::Map(thing) = &entries[1].value.kind else {
            panic!()
        };
        let pairs: Vec<(&str, &NodeKind)> = thing
            .iter()
            .map(|e| (e.key.as_str().unwrap(), &e.value.kind))
            .collect();
        assert_eq!(pairs, [("y", &NodeKind::Int(3)), ("x", &NodeKind::Int(1))]);
    }

    #[test]
    fn alias_bombs_stop_at_the_budget() {
        let mut text = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 9].join(",");
            text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let (_, loaded) = load_text(&text);
        assert_eq!(codes(&loaded), [Code::E0005]);
    }

    #[test]
    fn nested_anchors_copy_a_bounded_number_of_nodes() {
        // Each level's anchor would copy the whole list again; past the budget, anchors keep
        // no copy and an alias to one is reported.
        let items = vec!["x"; 150_000].join(", ");
        let opens: String = (0..20).map(|level| format!("&a{level} [")).collect();
        let text = format!("a: {opens}[{items}]{}\nb: *a0\n", "]".repeat(20));
        let (_, loaded) = load_text(&text);
        assert_eq!(codes(&loaded), [Code::E0005]);
        assert!(loaded.diagnostics[0].message.contains("anchored content"));
    }

    #[test]
    fn deep_nesting_is_cut_off_with_one_diagnostic() {
        // Flow collections: the scanner itself gives up at 255 levels, after our limit.
        let flow = format!("a: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(codes(&load_text(&flow).1), [Code::E0006]);
        // Block sequences on one line (`- - - x`): only our limit stops them.
        let block = format!("a:\n{}x\n", "- ".repeat(10_000));
        let (_, loaded) = load_text(&block);
        assert_eq!(codes(&loaded), [Code::E0006]);
        assert!(loaded.root.is_some());
    }

    #[test]
    fn a_second_document_is_reported() {
        let (file, loaded) = load_text("a: 1\n---\nb: 2\n");
        assert_eq!(codes(&loaded), [Code::E0010]);
        assert_eq!(file.slice(loaded.diagnostics[0].primary_span()), "---");
    }

    #[test]
    fn syntax_errors_point_into_the_file() {
        let (_, loaded) = load_text("a:\n  b: c: d\n");
        assert_eq!(codes(&loaded), [Code::E0004]);
        assert!(loaded.root.is_none());
    }

    #[test]
    fn tags_other_than_the_core_schema_are_rejected() {
        let (_, loaded) = load_text("a: !include other.yaml\nb: !!str 3\nc: !!int x\n");
        assert_eq!(codes(&loaded), [Code::E0024, Code::E0012]);
        let root = loaded.root.unwrap();
        let NodeKind::Map(entries) = &root.kind else {
            panic!()
        };
        assert_eq!(entries[1].value.as_str(), Some("3"));
    }
}
