//! One DAG per flow: which steps must finish before which.
//!
//! Takes a flow's steps and the parsed expressions; builds a petgraph graph whose node `i` is
//! step `i` and whose edges run from a step to the steps that need it, each keeping the span
//! that created it: a `depends_on` entry, a `$.steps.<id>` reference in an input, or one in a
//! `skip_if`. Step inputs that start with `$` are parsed here as references (`E0039` when they
//! are not one). Reports every cycle once, with each of its edges labelled where it was
//! written (`E0040`), and gives the deterministic topological order (ties broken by declaration
//! order) and each step's level (its longest chain of dependencies).
//!
//! Invariant: a name that does not resolve adds no edge (resolution reported it); steps caught
//! in a cycle come last in the order, in declaration order, so later passes still see them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use petgraph::Direction;
use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use stratum_grammar::ast::{Expr, ExprKind, Ident, RefRoot, Reference};

use crate::diagnostic::{Code, Diagnostic};
use crate::expression::{self, Expressions};
use crate::sema::resolve::listing;
use crate::sema::symbols::{Table, flow_steps};
use crate::source::Span;
use crate::syntax::ast::{Flow, InputValue, PreMergeVerify, Step, Text};

/// How many edges of a cycle get a label; a longer cycle is elided in the middle.
pub(crate) const MAX_CYCLE_LABELS: usize = 12;

/// Why one step must run before another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EdgeKind {
    /// The later step names the earlier one in `depends_on`.
    DependsOn,
    /// An input of the later step reads the earlier one's output.
    Input,
    /// The later step's `skip_if` reads the earlier one's output.
    SkipIf,
    /// The later step fans out over the earlier one's output (`source`, version 0.3).
    Source,
}

/// An edge of a flow's DAG and the span that created it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    pub kind: EdgeKind,
    pub span: Span,
}

/// A flow's dependencies: node `i` (weight `i`) is the flow's step `i`.
pub type Dag = DiGraph<usize, Edge>;

/// The DAG of one flow, its execution order and its levels.
#[derive(Clone, Debug, Default)]
pub struct FlowDag {
    pub graph: Dag,
    /// Step indices in execution order: topological, ties broken by declaration order.
    pub order: Vec<usize>,
    /// Per step, the length of its longest chain of dependencies: steps of one level are
    /// independent of each other.
    pub levels: Vec<usize>,
}

/// Builds the DAG of `flow`. `steps` is the flow's symbol table; the input references that
/// parse are added to `expressions`.
pub fn build(
    flow: &Flow,
    steps: &Table,
    expressions: &mut Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) -> FlowDag {
    let all = flow_steps(flow);
    let mut graph = Dag::with_capacity(all.len(), all.len());
    for index in 0..all.len() {
        graph.add_node(index);
    }
    for (index, step) in all.iter().enumerate() {
        let to = NodeIndex::new(index);
        let add = |graph: &mut Dag, id: &str, kind: EdgeKind, span: Span| {
            if let Some(from) = steps.get(id) {
                graph.add_edge(NodeIndex::new(from), to, Edge { kind, span });
            }
        };
        for name in step.depends_on.iter().flat_map(|names| &names.value) {
            add(&mut graph, &name.value, EdgeKind::DependsOn, name.span);
        }
        for text in input_texts(step) {
            if let Some(expr) = input_reference(text, diagnostics) {
                for id in step_references(&expr) {
                    add(
                        &mut graph,
                        &id.name,
                        EdgeKind::Input,
                        text.span_of(id.span.range()),
                    );
                }
                expressions.insert(text, expr);
            }
        }
        // A fan-out step's `source` is read when the step starts, so its step runs first
        // (the reference resolves it without an edge, and fails when the order is wrong).
        for text in reference_texts(step) {
            let Some(expr) = input_reference(text, diagnostics) else {
                continue;
            };
            if step
                .source
                .as_ref()
                .is_some_and(|source| std::ptr::eq(&source.value, text))
            {
                for id in step_references(&expr) {
                    add(
                        &mut graph,
                        &id.name,
                        EdgeKind::Source,
                        text.span_of(id.span.range()),
                    );
                }
            }
            expressions.insert(text, expr);
        }
        if let Some(skip_if) = &step.skip_if
            && let Some(expr) = expressions.get(&skip_if.value)
        {
            for id in step_references(expr) {
                add(
                    &mut graph,
                    &id.name,
                    EdgeKind::SkipIf,
                    skip_if.value.span_of(id.span.range()),
                );
            }
        }
    }
    report_cycles(flow, &graph, diagnostics);
    let (order, levels) = topological_order(&graph);
    FlowDag {
        graph,
        order,
        levels,
    }
}

/// The step's inputs that are written as `$`-references.
pub fn input_texts(step: &Step) -> impl Iterator<Item = &Text> {
    step.inputs
        .iter()
        .flat_map(|inputs| &inputs.value)
        .filter_map(|input| match &input.value {
            InputValue::Text(text) if text.value.starts_with('$') => Some(text),
            _ => None,
        })
}

/// The `$`-references of a version 0.3 step outside its inputs: `source`, and a
/// `pre_merge_verify` written as a reference.
pub fn reference_texts(step: &Step) -> impl Iterator<Item = &Text> {
    let verify = step
        .pre_merge_verify
        .as_ref()
        .and_then(|field| match &field.value {
            PreMergeVerify::Reference(text) => Some(text),
            PreMergeVerify::Commands(_) => None,
        });
    step.source
        .as_ref()
        .map(|field| &field.value)
        .into_iter()
        .chain(verify)
        .filter(|text| text.value.starts_with('$'))
}

/// Parses a step input that starts with `$`: it must be exactly one `$`-reference, as the
/// runtime resolves it whole. Anything else is `E0039`.
fn input_reference(text: &Text, diagnostics: &mut Vec<Diagnostic>) -> Option<Expr> {
    if let Some(expr) = plain_reference(&text.value) {
        return Some(expr);
    }
    let parsed = stratum_grammar::parse(&text.value);
    if let Some(problem) = parsed.problems.first() {
        let mut diagnostic =
            expression::diagnostic(problem, &text.value, |span| text.span_of(span.range()));
        diagnostic.code = Code::E0039;
        diagnostic.severity = Code::E0039.severity();
        diagnostics.push(diagnostic);
        return None;
    }
    let expr = parsed.expr?;
    if matches!(expr.kind, ExprKind::Ref(_)) {
        return Some(expr);
    }
    diagnostics.push(
        Diagnostic::new(
            Code::E0039,
            "a step input that starts with `$` must be a single `$`-reference",
            text.span,
            "not a plain reference",
        )
        .help(
            "write `$.input.<field>` or `$.steps.<step id>.output[.<field>]`; inputs are passed as \
             they are, never evaluated, so compute the value in the step instead",
        ),
    );
    None
}

/// A well-formed reference read without the expression parser, which costs far more: nearly
/// every input is one. `None` for anything else, which the parser then reads and reports.
fn plain_reference(text: &str) -> Option<Expr> {
    let rest = text.strip_prefix("$.")?;
    let mut names = Vec::new();
    let mut start = 2;
    for name in rest.split('.') {
        let mut chars = name.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid || name.contains("__") {
            return None;
        }
        names.push(Ident {
            name: name.to_owned(),
            span: stratum_grammar::Span::new(start, start + name.len()),
        });
        start += name.len() + 1;
    }
    let mut names = names.into_iter();
    let root = match names.next()?.name.as_str() {
        "input" => RefRoot::Input,
        "steps" => {
            let step = names.next()?;
            if names.next()?.name != "output" {
                return None;
            }
            RefRoot::StepOutput { step }
        }
        _ => return None,
    };
    let span = stratum_grammar::Span::new(0, text.len());
    let path = names.collect();
    Some(Expr::new(ExprKind::Ref(Reference { root, path }), span))
}

/// Every `$.steps.<id>` in `expr`: the step ids, as written.
pub fn step_references(expr: &Expr) -> Vec<&Ident> {
    let mut found = Vec::new();
    let mut pending = vec![expr];
    while let Some(expr) = pending.pop() {
        if let ExprKind::Ref(reference) = &expr.kind
            && let RefRoot::StepOutput { step } = &reference.root
        {
            found.push(step);
        }
        pending.extend(expr.children());
    }
    found.sort_by_key(|ident| ident.span);
    found
}

/// Kahn's algorithm with the ready steps in a min-heap of declaration indices, so the order is
/// the declaration order wherever that is a valid order. Steps left in cycles follow, in
/// declaration order.
fn topological_order(graph: &Dag) -> (Vec<usize>, Vec<usize>) {
    let n_steps = graph.node_count();
    let mut waiting: Vec<usize> = (0..n_steps)
        .map(|index| {
            graph
                .edges_directed(NodeIndex::new(index), Direction::Incoming)
                .count()
        })
        .collect();
    let mut levels = vec![0; n_steps];
    let mut ready: BinaryHeap<Reverse<usize>> = waiting
        .iter()
        .enumerate()
        .filter(|&(_, &count)| count == 0)
        .map(|(index, _)| Reverse(index))
        .collect();
    let mut order = Vec::with_capacity(n_steps);
    let mut placed = vec![false; n_steps];
    while let Some(Reverse(index)) = ready.pop() {
        order.push(index);
        if let Some(done) = placed.get_mut(index) {
            *done = true;
        }
        let level = levels.get(index).copied().unwrap_or(0);
        for edge in graph.edges(NodeIndex::new(index)) {
            let next = edge.target().index();
            if let Some(next_level) = levels.get_mut(next) {
                *next_level = (*next_level).max(level + 1);
            }
            if let Some(count) = waiting.get_mut(next) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    ready.push(Reverse(next));
                }
            }
        }
    }
    order.extend((0..n_steps).filter(|&index| !placed.get(index).copied().unwrap_or(true)));
    (order, levels)
}

/// Reports each cycle of the flow once (see [`cycles`]).
fn report_cycles(flow: &Flow, graph: &Dag, diagnostics: &mut Vec<Diagnostic>) {
    for cycle in cycles(graph, |edge| edge.span) {
        diagnostics.push(dependency_cycle(flow, graph, &cycle));
    }
}

/// One cycle per strongly connected component that has one (several nodes, or a node with an
/// edge to itself): the shortest through the component's first node, as its edges in order.
/// Components come in the order of their first nodes; among edges of equal length, those to
/// lower nodes, then with lower `key`s, are taken first, so the result is deterministic.
pub(crate) fn cycles<E>(
    graph: &DiGraph<usize, E>,
    key: impl Fn(&E) -> Span,
) -> Vec<Vec<EdgeIndex>> {
    // kosaraju_scc walks with explicit stacks; petgraph 0.8's tarjan_scc recurses once per
    // node of a chain and overflows the stack on long ones.
    let mut components = kosaraju_scc(graph);
    for component in &mut components {
        component.sort();
    }
    components.sort();
    components
        .iter()
        .filter_map(|component| {
            let &start = component.first()?;
            let cyclic = component.len() > 1 || graph.find_edge(start, start).is_some();
            cyclic
                .then(|| shortest_cycle(graph, start, component, &key))
                .flatten()
        })
        .collect()
}

/// The edges of a shortest cycle from `start` back to it, staying inside `component`.
fn shortest_cycle<E>(
    graph: &DiGraph<usize, E>,
    start: NodeIndex,
    component: &[NodeIndex],
    key: &impl Fn(&E) -> Span,
) -> Option<Vec<EdgeIndex>> {
    let mut reached_by: HashMap<NodeIndex, EdgeIndex> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        let mut edges: Vec<_> = graph
            .edges(node)
            .filter(|edge| component.binary_search(&edge.target()).is_ok())
            .map(|edge| (edge.target(), key(edge.weight()), edge.id()))
            .collect();
        edges.sort();
        for (target, _, edge) in edges {
            if target == start {
                let mut cycle = vec![edge];
                let mut at = node;
                while at != start {
                    let back = *reached_by.get(&at)?;
                    cycle.push(back);
                    at = graph.edge_endpoints(back)?.0;
                }
                cycle.reverse();
                return Some(cycle);
            }
            reached_by.entry(target).or_insert_with(|| {
                queue.push_back(target);
                edge
            });
        }
    }
    None
}

/// E0040: steps that need each other, so none of them can ever start.
fn dependency_cycle(flow: &Flow, graph: &Dag, cycle: &[EdgeIndex]) -> Diagnostic {
    let steps = flow_steps(flow);
    let id = |node: NodeIndex| {
        steps
            .get(node.index())
            .and_then(|step| step.id.as_ref())
            .map_or("?", |id| id.value.as_str())
    };
    let labelled: Vec<(Span, String)> = cycle
        .iter()
        .filter_map(|&edge| {
            let (from, to) = graph.edge_endpoints(edge)?;
            let weight = graph.edge_weight(edge)?;
            let (from, to) = (id(from), id(to));
            let label = match weight.kind {
                EdgeKind::DependsOn => format!("`{to}` depends on `{from}` here"),
                EdgeKind::Input => format!("`{to}` reads the output of `{from}` here"),
                EdgeKind::SkipIf => format!("the `skip_if` of `{to}` reads `{from}` here"),
                EdgeKind::Source => format!("`{to}` fans out over the output of `{from}` here"),
            };
            Some((weight.span, label))
        })
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for &edge in cycle {
        if let Some((from, _)) = graph.edge_endpoints(edge) {
            names.push(id(from));
        }
    }
    let message = match names.as_slice() {
        [one] => format!("step `{one}` depends on itself"),
        _ => format!("steps {} depend on each other in a cycle", listing(&names)),
    };
    // A long cycle is shown by its first edges; the message says how many steps it has.
    let mut labels = labelled.into_iter().take(MAX_CYCLE_LABELS);
    let Some((span, label)) = labels.next() else {
        return Diagnostic::new(Code::E0040, message, flow.name.span, "in this flow");
    };
    let mut diagnostic = Diagnostic::new(Code::E0040, message, span, label);
    for (span, label) in labels {
        diagnostic = diagnostic.secondary(span, label);
    }
    if let [one] = names.as_slice() {
        return diagnostic.help(format!(
            "a step starts only after every step it depends on, so a step that depends on \
             itself never starts; remove `{one}` from its own dependencies"
        ));
    }
    diagnostic.help(format!(
        "a step starts only after every step it depends on ({}), so none of these can ever \
         start; remove one of these dependencies, and loop back with `next`, `on_fail` or a \
         gate's `on_revise` instead",
        cycle_path(&names)
    ))
}

/// `a` → `b` → `a`; the middle of a long cycle elided.
pub(crate) fn cycle_path(names: &[&str]) -> String {
    let shown: Vec<String> = if names.len() > MAX_CYCLE_LABELS {
        let head = names.iter().take(MAX_CYCLE_LABELS / 2);
        let tail = names.iter().skip(names.len() - MAX_CYCLE_LABELS / 2);
        head.map(|name| format!("`{name}`"))
            .chain(std::iter::once(format!(
                "… {} more …",
                names.len() - MAX_CYCLE_LABELS
            )))
            .chain(tail.map(|name| format!("`{name}`")))
            .collect()
    } else {
        names.iter().map(|name| format!("`{name}`")).collect()
    };
    let back = names.first().map(|name| format!("`{name}`"));
    shown
        .into_iter()
        .chain(back)
        .collect::<Vec<_>>()
        .join(" → ")
}

/// Whether a step may read another's output: it must be an ancestor, so that it has run.
/// Each step's ancestors are found once, when first asked for.
#[derive(Debug)]
pub struct Ancestors<'g> {
    graph: &'g Dag,
    known: HashMap<usize, Vec<bool>>,
}

impl<'g> Ancestors<'g> {
    pub fn new(graph: &'g Dag) -> Ancestors<'g> {
        Ancestors {
            graph,
            known: HashMap::new(),
        }
    }

    /// Whether `ancestor` must have finished before `step` starts.
    pub fn is_ancestor(&mut self, ancestor: usize, step: usize) -> bool {
        let graph = self.graph;
        let reached = self.known.entry(step).or_insert_with(|| {
            let mut reached = vec![false; graph.node_count()];
            let mut pending = vec![NodeIndex::new(step)];
            while let Some(node) = pending.pop() {
                for edge in graph.edges_directed(node, Direction::Incoming) {
                    let source = edge.source();
                    if let Some(seen) = reached.get_mut(source.index())
                        && !*seen
                    {
                        *seen = true;
                        pending.push(source);
                    }
                }
            }
            reached
        });
        reached.get(ancestor).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut must read exactly what the parser reads, spans included.
    #[test]
    fn plain_references_read_as_the_parser_reads_them() {
        for text in [
            "$.input",
            "$.input.text",
            "$.input.a.b_c.d9",
            "$.steps.scan.output",
            "$.steps.scan.output.summary",
            "$.steps.s_1.output.a.b",
        ] {
            let parsed = stratum_grammar::parse(text).expr;
            assert_eq!(plain_reference(text), parsed, "{text}");
        }
        for text in [
            "$.inputs.a",
            "$.steps.scan",
            "$.steps.scan.result.a",
            "$.input.a + 1",
            "$.input..a",
            "$.input.a.",
            "$.input.__class__",
            "$input",
            "$.input.é",
        ] {
            assert_eq!(plain_reference(text), None, "{text}");
        }
    }
}
