//! Pictures of a spec's flows for people: Graphviz `dot` or a Mermaid flowchart.
//!
//! Takes a [`Compilation`] (its AST and what the middle end resolved) and returns text. Every
//! flow is a cluster of its steps in execution order, each labelled with its id and kind.
//! Data edges (`depends_on`, `$.steps` references in inputs and `skip_if`) are solid, one per
//! pair of steps; routing edges (`next`, `on_fail`, a gate's outcomes) are dashed and labelled,
//! a gate's `~` going to the flow's `end` or `killed` node; a flow step has a bold edge to the
//! cluster of the flow it runs.
//!
//! Invariants: the same spec gives the same text (flows in declaration order, steps in
//! execution order, nothing iterated in hash order); everything the spec wrote appears only in
//! escaped labels, never in an identifier; a name that does not resolve draws no edge.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use petgraph::visit::EdgeRef;

use crate::{Compilation, UnknownFlow};

use crate::sema::dag::EdgeKind;
use crate::sema::resolve::StepKind;
use crate::sema::symbols::flow_steps;
use crate::syntax::ast::{Ast, Field, Step};

/// The text format of a picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Graphviz: `dot -Tsvg` draws it.
    Dot,
    /// A Mermaid flowchart, which GitHub and many Markdown viewers draw.
    Mermaid,
}

/// Draws the flow named `flow` and every flow it runs, directly or not; every flow without a
/// name.
pub fn draw(
    compilation: &Compilation,
    flow: Option<&str>,
    format: Format,
) -> Result<String, UnknownFlow> {
    let flows = compilation.select_flows(flow)?;
    let picture = picture(compilation, &flows);
    Ok(match format {
        Format::Dot => dot(&picture),
        Format::Mermaid => mermaid(&picture),
    })
}

/// What a picture shows, whatever its format.
struct Picture {
    clusters: Vec<Cluster>,
    calls: Vec<Call>,
}

/// One flow: its steps, the terminals its gates route to, and the edges among them.
struct Cluster {
    flow: usize,
    name: String,
    nodes: Vec<Node>,
    links: Vec<Link>,
}

struct Node {
    id: String,
    /// The step it draws, by declaration index; `None` for a terminal or placeholder.
    step: Option<usize>,
    /// The step's id or the terminal's name, unescaped.
    title: String,
    /// What the step is (`function build`, `inline`, …); `None` for a terminal.
    kind: Option<String>,
    shape: Shape,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Function,
    Gate,
    Inline,
    Flow,
    Judge,
    /// A decompose step: an agent that splits the work into tasks.
    Decompose,
    /// A parallel_dispatch step: a fan of tasks.
    Fan,
    /// A pipeline step: each item through its stages.
    Pipeline,
    Unknown,
    /// Where a gate's `on_approve: ~` goes: the flow is complete.
    End,
    /// Where a gate's `on_kill: ~` goes: the flow is terminated.
    Killed,
    /// Stands in for a flow without steps, so that its cluster is still drawn.
    Empty,
}

impl Shape {
    const ALL: [Shape; 12] = [
        Shape::Function,
        Shape::Gate,
        Shape::Inline,
        Shape::Flow,
        Shape::Judge,
        Shape::Decompose,
        Shape::Fan,
        Shape::Pipeline,
        Shape::Unknown,
        Shape::End,
        Shape::Killed,
        Shape::Empty,
    ];
}

struct Link {
    from: String,
    to: String,
    routing: bool,
    /// Goes to a step that runs no later than its source: a loop back, such as a revision.
    backward: bool,
    label: Option<&'static str>,
}

/// A flow step running a flow: an edge to the called flow's cluster, drawn into its first node.
struct Call {
    from: String,
    cluster: usize,
    first: String,
}

// Identifiers come from indices, never from names: no format then needs them escaped, and none
// can spell a Mermaid keyword such as `end`.
fn step_id(flow: usize, step: usize) -> String {
    format!("f{flow}_s{step}")
}

fn end_id(flow: usize) -> String {
    format!("f{flow}_end")
}

fn killed_id(flow: usize) -> String {
    format!("f{flow}_killed")
}

fn empty_id(flow: usize) -> String {
    format!("f{flow}_empty")
}

fn picture(compilation: &Compilation, flows: &[usize]) -> Picture {
    let clusters: Vec<Cluster> = flows
        .iter()
        .filter_map(|&flow| cluster(compilation, flow))
        .collect();
    let mut calls = Vec::new();
    for cluster in &clusters {
        let Some(model) = compilation.model.flows.get(cluster.flow) else {
            continue;
        };
        for node in &cluster.nodes {
            let Some(step) = node.step else {
                continue;
            };
            let Some(StepKind::Flow(callee)) = model.steps.get(step).map(|info| info.kind) else {
                continue;
            };
            if let Some(called) = clusters.iter().find(|c| c.flow == callee)
                && let Some(first) = called.nodes.first()
            {
                calls.push(Call {
                    from: node.id.clone(),
                    cluster: callee,
                    first: first.id.clone(),
                });
            }
        }
    }
    Picture { clusters, calls }
}

fn cluster(compilation: &Compilation, flow_index: usize) -> Option<Cluster> {
    let Compilation { ast, model, .. } = compilation;
    let flow = ast.flows.get(flow_index)?;
    let steps = flow_steps(flow);
    let flow_model = model.flows.get(flow_index);
    let table = model.symbols.steps.get(flow_index);
    let order = execution_order(steps.len(), flow_model.map(|m| m.dag.order.as_slice()));
    let mut position = vec![0; steps.len()];
    for (at, &step) in order.iter().enumerate() {
        if let Some(slot) = position.get_mut(step) {
            *slot = at;
        }
    }

    let mut nodes = Vec::with_capacity(steps.len() + 2);
    for &index in &order {
        let Some(step) = steps.get(index) else {
            continue;
        };
        let kind = flow_model
            .and_then(|m| m.steps.get(index))
            .map_or(StepKind::Unknown, |info| info.kind);
        nodes.push(step_node(ast, flow_index, index, step, kind));
    }

    let mut links = Vec::new();
    // Several references between one pair of steps are one dependency to a reader.
    let mut data: BTreeMap<(usize, usize), BTreeSet<EdgeKind>> = BTreeMap::new();
    if let Some(flow_model) = flow_model {
        for edge in flow_model.dag.graph.edge_references() {
            let (from, to) = (edge.source().index(), edge.target().index());
            let (Some(&from_at), Some(&to_at)) = (position.get(from), position.get(to)) else {
                continue;
            };
            data.entry((from_at, to_at))
                .or_default()
                .insert(edge.weight().kind);
        }
    }
    for ((from_at, to_at), kinds) in data {
        let (Some(&from), Some(&to)) = (order.get(from_at), order.get(to_at)) else {
            continue;
        };
        links.push(Link {
            from: step_id(flow_index, from),
            to: step_id(flow_index, to),
            routing: false,
            backward: false,
            // Only `skip_if` changes what happens; the other kinds just order the steps.
            label: kinds.contains(&EdgeKind::SkipIf).then_some("skip_if"),
        });
    }

    let (mut ends, mut killed) = (false, false);
    for &index in &order {
        let Some(step) = steps.get(index) else {
            continue;
        };
        let from = step_id(flow_index, index);
        let at = position.get(index).copied().unwrap_or_default();
        let resolve = |name: &str| {
            let to = table?.get(name)?;
            let backward = position.get(to).is_some_and(|&to_at| to_at <= at);
            Some((step_id(flow_index, to), backward))
        };
        let mut route = |to: Option<(String, bool)>, label: &'static str| {
            if let Some((to, backward)) = to {
                links.push(Link {
                    from: from.clone(),
                    to,
                    routing: true,
                    backward,
                    label: Some(label),
                });
            }
        };
        route(step.next.as_ref().and_then(|f| resolve(&f.value)), "next");
        route(
            step.on_fail.as_ref().and_then(|f| resolve(&f.value)),
            "on_fail",
        );
        let gate = |field: &Option<Field<Option<String>>>| {
            field.as_ref().map(|f| f.value.as_deref().map(resolve))
        };
        // `Some(None)` is `~`, which completes the flow on approval and terminates it on a kill.
        match gate(&step.on_approve) {
            Some(Some(to)) => route(to, "approve"),
            Some(None) => {
                ends = true;
                route(Some((end_id(flow_index), false)), "approve");
            }
            None => {}
        }
        if let Some(Some(to)) = gate(&step.on_revise) {
            route(to, "revise");
        }
        match gate(&step.on_kill) {
            Some(Some(to)) => route(to, "kill"),
            Some(None) => {
                killed = true;
                route(Some((killed_id(flow_index), false)), "kill");
            }
            None => {}
        }
    }

    if nodes.is_empty() {
        nodes.push(terminal(empty_id(flow_index), "no steps", Shape::Empty));
    }
    if ends {
        nodes.push(terminal(end_id(flow_index), "end", Shape::End));
    }
    if killed {
        nodes.push(terminal(killed_id(flow_index), "killed", Shape::Killed));
    }
    Some(Cluster {
        flow: flow_index,
        name: flow.name.value.clone(),
        nodes,
        links,
    })
}

fn terminal(id: String, title: &str, shape: Shape) -> Node {
    Node {
        id,
        step: None,
        title: title.to_owned(),
        kind: None,
        shape,
    }
}

/// The DAG's execution order, completed with any step it lacks so that every step is drawn.
fn execution_order(n_steps: usize, order: Option<&[usize]>) -> Vec<usize> {
    let mut seen = vec![false; n_steps];
    let mut complete = Vec::with_capacity(n_steps);
    let given = order.unwrap_or_default().iter().copied();
    for step in given.chain(0..n_steps) {
        if let Some(slot) = seen.get_mut(step)
            && !*slot
        {
            *slot = true;
            complete.push(step);
        }
    }
    complete
}

fn step_node(ast: &Ast, flow: usize, index: usize, step: &Step, kind: StepKind) -> Node {
    let id = step
        .id
        .as_ref()
        .map_or_else(|| format!("step {}", index + 1), |id| id.value.clone());
    let function = |function: usize| {
        ast.functions
            .get(function)
            .map_or("?", |f| f.name.value.as_str())
    };
    let (kind_line, shape) = match kind {
        StepKind::Function(f) => (format!("function {}", function(f)), Shape::Function),
        StepKind::Gate(f) => (format!("gate {}", function(f)), Shape::Gate),
        StepKind::Inline => ("inline".to_owned(), Shape::Inline),
        StepKind::Flow(called) => (
            format!(
                "flow {}",
                ast.flows.get(called).map_or("?", |f| f.name.value.as_str())
            ),
            Shape::Flow,
        ),
        StepKind::Judge => ("judge".to_owned(), Shape::Judge),
        StepKind::Decompose => ("decompose".to_owned(), Shape::Decompose),
        StepKind::Parallel => (fan_line(step), Shape::Fan),
        StepKind::Pipeline => (pipeline_line(step), Shape::Pipeline),
        StepKind::Unknown => ("unknown".to_owned(), Shape::Unknown),
    };
    Node {
        id: step_id(flow, index),
        step: Some(index),
        title: id,
        kind: Some(kind_line),
        shape,
    }
}

/// Graphviz, top to bottom, one `cluster_<flow index>` per flow. Node labels are HTML-like
/// (bold id over a smaller kind), so their text is escaped as HTML, not as a quoted string.
fn dot(picture: &Picture) -> String {
    let mut out = String::new();
    out.push_str("digraph stratum {\n");
    out.push_str(concat!(
        "  graph [rankdir=TB, compound=true, newrank=true, fontname=\"Helvetica\", fontsize=12, ",
        "nodesep=0.4, ranksep=0.45];\n",
        "  node [fontname=\"Helvetica\", fontsize=11, style=filled, color=\"#555555\", ",
        "penwidth=1.2, margin=\"0.12,0.05\"];\n",
        "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\", arrowsize=0.7];\n",
    ));
    for cluster in &picture.clusters {
        let _ = writeln!(out, "  subgraph cluster_{} {{", cluster.flow);
        let _ = writeln!(
            out,
            "    label=<flow <B>{}</B>>; labeljust=l; style=\"rounded,dashed\"; color=\"#999999\";",
            dot_html(&cluster.name)
        );
        for node in &cluster.nodes {
            let label = match &node.kind {
                Some(kind) => format!(
                    "<B>{}</B><BR/><FONT POINT-SIZE=\"9\" COLOR=\"#444444\">{}</FONT>",
                    dot_html(&node.title),
                    dot_html(kind)
                ),
                None => dot_html(&node.title),
            };
            let _ = writeln!(
                out,
                "    {} [label=<{label}>, {}];",
                node.id,
                dot_shape(node.shape)
            );
        }
        for link in &cluster.links {
            let mut attributes = Vec::new();
            if link.routing {
                let color = dot_route_color(link.label);
                attributes.push(format!(
                    "style=dashed, color=\"{color}\", fontcolor=\"{color}\""
                ));
            }
            if link.backward {
                // A loop back must not pull its target below its source: the picture keeps
                // the execution order from top to bottom.
                attributes.push("constraint=false".to_owned());
            }
            if let Some(label) = link.label {
                attributes.push(format!("label={}", dot_string(label)));
            }
            let _ = write!(out, "    {} -> {}", link.from, link.to);
            if !attributes.is_empty() {
                let _ = write!(out, " [{}]", attributes.join(", "));
            }
            out.push_str(";\n");
        }
        out.push_str("  }\n");
    }
    for call in &picture.calls {
        let _ = writeln!(
            out,
            "  {} -> {} [lhead=cluster_{}, style=bold, penwidth=1.6, color=\"#7a4f9e\", fontcolor=\"#7a4f9e\", label=\"runs\"];",
            call.from, call.first, call.cluster
        );
    }
    out.push_str("}\n");
    out
}

/// Failure paths in red, revisions in orange, the rest in blue: all dashed, so colour only
/// helps to tell them apart.
fn dot_route_color(label: Option<&str>) -> &'static str {
    match label {
        Some("on_fail" | "kill") => "#b03030",
        Some("revise") => "#c06000",
        _ => "#1f5fa8",
    }
}

fn dot_shape(shape: Shape) -> String {
    let (fill, stroke) = colors(shape);
    let outline = match shape {
        Shape::Function => "shape=box",
        Shape::Gate => "shape=hexagon, margin=\"0.02,0.04\"",
        Shape::Inline => "shape=box, style=\"rounded,filled\"",
        Shape::Flow => "shape=box, peripheries=2",
        Shape::Judge => "shape=parallelogram",
        Shape::Decompose => "shape=invtrapezium",
        Shape::Fan => "shape=box3d",
        Shape::Pipeline => "shape=cds",
        Shape::Unknown => "shape=box, style=\"dashed,filled\"",
        Shape::End => "shape=circle, fontsize=10, margin=0",
        Shape::Killed => "shape=octagon, fontsize=10, margin=0",
        Shape::Empty => return "shape=plaintext, style=\"\", fontcolor=\"#777777\"".to_owned(),
    };
    if stroke == STROKE {
        format!("{outline}, fillcolor=\"{fill}\"")
    } else {
        format!("{outline}, fillcolor=\"{fill}\", color=\"{stroke}\"")
    }
}

/// The outline of most nodes; dot's output sets it once, as the default.
const STROKE: &str = "#555555";

/// Fill and outline of each kind of node, the same in both formats.
fn colors(shape: Shape) -> (&'static str, &'static str) {
    match shape {
        Shape::Function => ("#dbe9f6", STROKE),
        Shape::Gate => ("#fff1c2", STROKE),
        Shape::Inline => ("#e3f2e1", STROKE),
        Shape::Flow => ("#eadcf4", STROKE),
        Shape::Judge => ("#f6e3cf", STROKE),
        Shape::Decompose => ("#e3f2e1", STROKE),
        Shape::Fan => ("#d7efec", STROKE),
        Shape::Pipeline => ("#dfe6f7", STROKE),
        Shape::Unknown | Shape::Empty => ("#ffffff", "#999999"),
        Shape::End => ("#eeeeee", STROKE),
        Shape::Killed => ("#f6d5d5", "#a33333"),
    }
}

/// The kind line of a parallel_dispatch step: what it fans out over, and how wide.
fn fan_line(step: &crate::syntax::ast::Step) -> String {
    let source = step
        .source
        .as_ref()
        .map_or("?", |source| source.value.value.as_str());
    let at_once = step.max_concurrent.as_ref().map_or(3, |max| max.value);
    format!("parallel over {source} ({at_once} at once)")
}

/// The kind line of a pipeline step: its source and its stages, the fan-out region marked.
fn pipeline_line(step: &crate::syntax::ast::Step) -> String {
    let source = step
        .source
        .as_ref()
        .map_or("?", |source| source.value.value.as_str());
    let stages: Vec<String> = step
        .stages
        .iter()
        .flat_map(|stages| &stages.value)
        .enumerate()
        .map(|(index, stage)| {
            if stage.fanout.is_some() {
                format!("{index}⇉")
            } else if stage.join.as_ref().is_some_and(|join| join.value) {
                format!("⇶{index}")
            } else {
                index.to_string()
            }
        })
        .collect();
    format!("pipeline over {source}: stages {}", stages.join(" → "))
}

/// A quoted Graphviz string. Backslashes are escaped too, since dot reads `\n`, `\N`, `\G`
/// and the like in labels as escapes of its own.
fn dot_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text inside a Graphviz HTML-like label: markup characters as entities.
fn dot_html(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A Mermaid flowchart, top to bottom, one `subgraph` per flow.
fn mermaid(picture: &Picture) -> String {
    let mut out = String::from("flowchart TB\n");
    for cluster in &picture.clusters {
        let _ = writeln!(
            out,
            "  subgraph f{}[\"flow {}\"]",
            cluster.flow,
            mermaid_text(&cluster.name)
        );
        for node in &cluster.nodes {
            let mut text = mermaid_text(&node.title);
            if let Some(kind) = &node.kind {
                text.push_str("<br>");
                text.push_str(&mermaid_text(kind));
            }
            let (open, close, class) = mermaid_shape(node.shape);
            let _ = writeln!(out, "    {}{open}\"{text}\"{close}:::{class}", node.id);
        }
        for link in &cluster.links {
            let arrow = if link.routing { "-.->" } else { "-->" };
            match link.label {
                Some(label) => {
                    let _ = writeln!(
                        out,
                        "    {} {arrow}|\"{}\"| {}",
                        link.from,
                        mermaid_text(label),
                        link.to
                    );
                }
                None => {
                    let _ = writeln!(out, "    {} {arrow} {}", link.from, link.to);
                }
            }
        }
        out.push_str("  end\n");
    }
    for call in &picture.calls {
        let _ = writeln!(out, "  {} ==>|\"runs\"| f{}", call.from, call.cluster);
    }
    // Only the classes in use, in a fixed order, so a small flow gives a small text.
    for shape in Shape::ALL {
        let used = picture
            .clusters
            .iter()
            .flat_map(|cluster| &cluster.nodes)
            .any(|node| node.shape == shape);
        if used {
            let (fill, stroke) = colors(shape);
            let (_, _, class) = mermaid_shape(shape);
            let dashed = match shape {
                Shape::Unknown | Shape::Empty => ",stroke-dasharray:4",
                _ => "",
            };
            let _ = writeln!(
                out,
                "  classDef {class} fill:{fill},stroke:{stroke}{dashed}"
            );
        }
    }
    out
}

fn mermaid_shape(shape: Shape) -> (&'static str, &'static str, &'static str) {
    match shape {
        Shape::Function => ("[", "]", "function"),
        Shape::Gate => ("{{", "}}", "gate"),
        Shape::Inline => ("(", ")", "inline"),
        Shape::Flow => ("[[", "]]", "flowstep"),
        Shape::Judge => ("[/", "/]", "judge"),
        Shape::Decompose => ("[\\", "/]", "decompose"),
        Shape::Fan => ("[/", "\\]", "fan"),
        Shape::Pipeline => (">", "]", "pipeline"),
        Shape::Unknown => ("[", "]", "unknown"),
        Shape::Empty => ("[", "]", "empty"),
        Shape::End => ("((", "))", "terminal"),
        Shape::Killed => ("(((", ")))", "killed"),
    }
}

/// Text inside a quoted Mermaid label. Mermaid decodes `#name;` and
/// `#code;` entities in labels, so every character that could end the quotes, start an entity
/// or a directive (`%%{`), or be read as Markdown or HTML is written as one; brackets and pipes
/// are safe inside the quotes.
fn mermaid_text(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' | '%' | ';' | '`' | '&' | '<' | '>' => {
                let _ = write!(out, "#{};", u32::from(c));
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceMap;

    fn compile(text: &str) -> Compilation {
        let mut sources = SourceMap::new();
        crate::check_bytes(&mut sources, "test.stratum.yaml", text.as_bytes())
    }

    const NESTED: &str = r#"version: "0.2"
flows:
  leaf:
    input: {}
    steps:
      - id: a
        intent: "Do a"
  middle:
    input: {}
    steps:
      - id: call_leaf
        flow: leaf
        inputs: {}
  top:
    input: {}
    steps:
      - id: call_middle
        flow: middle
        inputs: {}
  other:
    input: {}
    steps:
      - id: b
        intent: "Do b"
"#;

    #[test]
    fn a_named_flow_brings_the_flows_it_runs_transitively_and_no_others() {
        let compilation = compile(NESTED);
        assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
        assert_eq!(compilation.select_flows(None), Ok(vec![0, 1, 2, 3]));
        assert_eq!(compilation.select_flows(Some("top")), Ok(vec![0, 1, 2]));
        assert_eq!(compilation.select_flows(Some("middle")), Ok(vec![0, 1]));
        assert_eq!(compilation.select_flows(Some("leaf")), Ok(vec![0]));
        assert_eq!(compilation.select_flows(Some("other")), Ok(vec![3]));
        let drawn = draw(&compilation, Some("middle"), Format::Dot).unwrap_or_default();
        assert!(drawn.contains("subgraph cluster_0 {"));
        assert!(drawn.contains("subgraph cluster_1 {"));
        assert!(!drawn.contains("cluster_2"));
        assert!(drawn.contains("f1_s0 -> f0_s0 [lhead=cluster_0,"));
        let mermaid = draw(&compilation, Some("middle"), Format::Mermaid).unwrap_or_default();
        assert!(mermaid.contains("  f1_s0 ==>|\"runs\"| f0\n"));
    }

    #[test]
    fn an_unknown_flow_is_an_error_with_a_suggestion() {
        let compilation = compile(NESTED);
        let error = compilation.select_flows(Some("midle")).err();
        assert_eq!(
            error.as_ref().map(ToString::to_string).as_deref(),
            Some("no flow named `midle`; did you mean `middle`?")
        );
        let error = compilation.select_flows(Some("zzzzzz")).err();
        assert_eq!(
            error.map(|e| e.to_string()).as_deref(),
            Some("no flow named `zzzzzz`; the spec declares `leaf`, `middle`, `top` and `other`")
        );
    }

    #[test]
    fn dot_strings_escape_quotes_and_backslashes() {
        assert_eq!(dot_string("plain"), r#""plain""#);
        assert_eq!(dot_string(r#"a "b" c\nd"#), r#""a \"b\" c\\nd""#);
        assert_eq!(dot_string("tab\there\r"), r#""tab here ""#);
        assert_eq!(dot_string("<html> {rec|ord}"), r#""<html> {rec|ord}""#);
    }

    #[test]
    fn dot_html_escapes_markup() {
        assert_eq!(dot_html("plain_id"), "plain_id");
        assert_eq!(
            dot_html(r#"<B>"a" & b</B>"#),
            "&lt;B&gt;&quot;a&quot; &amp; b&lt;/B&gt;"
        );
        assert_eq!(dot_html("line\nbreak"), "line break");
    }

    #[test]
    fn mermaid_text_leaves_nothing_mermaid_would_read() {
        assert_eq!(mermaid_text("function f"), "function f");
        assert_eq!(
            mermaid_text(r#"say "hi"; #1 <b>"#),
            "say #quot;hi#quot;#59; #35;1 #60;b#62;"
        );
        assert_eq!(
            mermaid_text("%%{init: {}}%% a|b [c] (d) `e` &f"),
            "#37;#37;{init: {}}#37;#37; a|b [c] (d) #96;e#96; #38;f"
        );
    }

    #[test]
    fn labels_with_special_characters_are_escaped_and_ids_stay_generated() {
        let compilation = compile(
            r#"version: "0.2"
flows:
  "we\"ird <flow>":
    input: {}
    steps:
      - id: "say \"hi\" & go"
        intent: "Greet"
"#,
        );
        let dot = draw(&compilation, None, Format::Dot).unwrap_or_default();
        assert!(
            dot.contains("label=<flow <B>we&quot;ird &lt;flow&gt;</B>>;"),
            "{dot}"
        );
        assert!(
            dot.contains("f0_s0 [label=<<B>say &quot;hi&quot; &amp; go</B><BR/>"),
            "{dot}"
        );
        let mermaid = draw(&compilation, None, Format::Mermaid).unwrap_or_default();
        assert!(
            mermaid.contains("subgraph f0[\"flow we#quot;ird #60;flow#62;\"]"),
            "{mermaid}"
        );
        assert!(
            mermaid.contains("f0_s0(\"say #quot;hi#quot; #38; go<br>inline\"):::inline"),
            "{mermaid}"
        );
    }

    #[test]
    fn gate_outcomes_of_tilde_go_to_the_flows_terminals() {
        let compilation = compile(
            r#"version: "0.2"
functions:
  check:
    mode: gate
flows:
  main:
    input: {}
    steps:
      - id: work
        intent: "Work"
      - id: review
        function: check
        depends_on: [work]
        on_approve: ~
        on_revise: work
        on_kill: ~
"#,
        );
        assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
        let dot = draw(&compilation, None, Format::Dot).unwrap_or_default();
        for line in [
            "    f0_s0 -> f0_s1;\n",
            "    f0_end [label=<end>, shape=circle,",
            "    f0_killed [label=<killed>, shape=octagon,",
            "    f0_s1 -> f0_end [style=dashed, color=\"#1f5fa8\", fontcolor=\"#1f5fa8\", label=\"approve\"];\n",
            "    f0_s1 -> f0_s0 [style=dashed, color=\"#c06000\", fontcolor=\"#c06000\", constraint=false, label=\"revise\"];\n",
            "    f0_s1 -> f0_killed [style=dashed, color=\"#b03030\", fontcolor=\"#b03030\", label=\"kill\"];\n",
        ] {
            assert!(dot.contains(line), "{line} in {dot}");
        }
        let mermaid = draw(&compilation, None, Format::Mermaid).unwrap_or_default();
        for line in [
            "    f0_end((\"end\")):::terminal\n",
            "    f0_s1 -.->|\"approve\"| f0_end\n",
            "    f0_s1 -.->|\"kill\"| f0_killed\n",
        ] {
            assert!(mermaid.contains(line), "{line} in {mermaid}");
        }
    }

    #[test]
    fn references_between_two_steps_are_one_edge() {
        let compilation = compile(
            r#"version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: a
        intent: "A"
      - id: b
        intent: "B"
        depends_on: [a]
        inputs: {x: "$.steps.a.output.x", y: "$.steps.a.output.y"}
      - id: c
        intent: "C"
        inputs: {x: "$.steps.a.output.x"}
        skip_if: "$.steps.a.output.x == 1"
"#,
        );
        assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
        let dot = draw(&compilation, None, Format::Dot).unwrap_or_default();
        assert_eq!(dot.matches("f0_s0 -> f0_s1").count(), 1, "{dot}");
        assert!(dot.contains("    f0_s0 -> f0_s1;\n"), "{dot}");
        assert_eq!(dot.matches("f0_s0 -> f0_s2").count(), 1, "{dot}");
        assert!(
            dot.contains("    f0_s0 -> f0_s2 [label=\"skip_if\"];\n"),
            "{dot}"
        );
    }

    #[test]
    fn a_spec_with_errors_draws_what_resolves() {
        let compilation = compile(
            r#"version: "0.2"
flows:
  main:
    input: {}
    steps:
      - id: a
        function: nowhere
        next: nobody
      - id: b
        intent: "B"
        on_fail: a
  empty:
    input: {}
    steps: []
"#,
        );
        assert!(compilation.has_errors());
        for format in [Format::Dot, Format::Mermaid] {
            let drawn = draw(&compilation, None, format).unwrap_or_default();
            assert!(!drawn.contains("next"), "{drawn}");
            assert!(drawn.contains("on_fail"), "{drawn}");
            assert!(drawn.contains("unknown"), "{drawn}");
            assert!(drawn.contains("f1_empty"), "{drawn}");
            assert_eq!(draw(&compilation, None, format).unwrap_or_default(), drawn);
        }
    }
}
