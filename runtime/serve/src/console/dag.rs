//! A flow's graph as SVG, drawn by the server from the plan: one box per step, top to bottom
//! in execution order (the order the cursor walks), coloured by how the step stands.
//!
//! Data edges (`depends_on`, which the compiler resolved from `$.steps` references, inputs and
//! `skip_if`) are solid arcs on the left; routing that leaves the order (`next` elsewhere,
//! `on_fail`, a gate's outcomes) is dashed, labelled arcs on the right; the step after a step
//! in order is a short arrow between their boxes. Two end boxes close the graph: `end`, and
//! `killed` when some route leads there.
//!
//! Why this layout rather than a layered one: this runtime runs one step at a time in that
//! order, so the order is the truth a reader needs first; and it stays readable at hundreds
//! of steps, where a layered drawing of a flow with few `depends_on` becomes one wide row.
//!
//! A huge flow is drawn as a window of its steps (the page picks it, at most
//! [`super::MAX_STEPS_SHOWN`]): arcs that leave the window are left out, and the end boxes are
//! drawn only when the window reaches the last step.
//!
//! Invariants: everything from the spec is escaped; the same plan and states give the same
//! SVG; no script, no style attribute (the page's policy allows neither), only classes.

use std::fmt::Write;
use std::ops::Range;

use stratum_compiler::plan::{Action, Flow, Target};

use super::shown_name;
use super::view::StepLook;
use crate::http::pages::escape;

const BOX_WIDTH: u32 = 260;
const BOX_HEIGHT: u32 = 38;
/// The width of the `end` and `killed` boxes.
const END_WIDTH: u32 = 100;
const PITCH: u32 = 58;
const TOP: u32 = 16;
/// Room on the left for data arcs, on the right for routing arcs and their labels.
const LEFT: u32 = 96;
const RIGHT: u32 = 170;
/// Characters of a step id shown in its box (the whole id is in its tooltip).
const ID_CHARS: usize = 26;

/// The SVG of `flow`'s steps in `window` (indices), each coloured by `look(index)`; every box
/// links to `#step-INDEX`.
pub fn draw(flow: &Flow, look: impl Fn(u32) -> StepLook, window: Range<u32>) -> String {
    let total = u32::try_from(flow.steps.len()).unwrap_or(u32::MAX);
    let window = window.start.min(total)..window.end.min(total);
    let first = window.start;
    let count = window.end - window.start;
    let drawn = || {
        (0u32..)
            .zip(&flow.steps)
            .skip(first as usize)
            .take(count as usize)
    };
    let reaches_end = window.end == total;
    let kill_used = reaches_end
        && drawn().any(|(_, step)| targets(step).any(|(_, target)| target == Target::Kill));
    let end_rows = if reaches_end {
        1 + u32::from(kill_used)
    } else {
        0
    };
    let rows = count.saturating_add(end_rows);
    let width = LEFT + BOX_WIDTH + RIGHT;
    let height = TOP * 2 + rows.saturating_mul(PITCH);
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg id=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" \
         width=\"{width}\" height=\"{height}\" role=\"img\" aria-labelledby=\"dag-title\">\
         <title id=\"dag-title\">The steps of flow {name}, in execution order, coloured by state</title>\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>",
        name = shown_name(&flow.name)
    );
    let end_row = count;
    let kill_row = count.saturating_add(1);
    // The row a target is drawn on; none when it lies outside the window.
    let row_of = |target: Target| match target {
        Target::Step(index) => window.contains(&index).then(|| index - first),
        Target::End => reaches_end.then_some(end_row),
        Target::Kill => kill_used.then_some(kill_row),
    };
    for (index, step) in drawn() {
        let row = index - first;
        for &dependency in &step.depends_on {
            if window.contains(&dependency) {
                data_arc(&mut svg, dependency - first, row);
            }
        }
        let in_order = row.saturating_add(1);
        for (label, target) in targets(step) {
            let Some(to) = row_of(target) else {
                continue;
            };
            if to == in_order && matches!(label, "next" | "approve") {
                arrow_down(&mut svg, row);
            } else {
                // The end boxes are narrower than a step's.
                let edge = match target {
                    Target::Step(_) => LEFT + BOX_WIDTH,
                    Target::End | Target::Kill => LEFT + BOX_WIDTH / 2 + END_WIDTH / 2,
                };
                route_arc(&mut svg, row, to, edge, label);
            }
        }
    }
    for (index, step) in drawn() {
        let state = look(index);
        let (kind, detail) = kind_of(&step.action);
        let shown: String = step.id.chars().take(ID_CHARS).collect();
        let shown = if shown.len() < step.id.len() {
            format!("{shown}…")
        } else {
            shown
        };
        let y = row_y(index - first);
        let _ = write!(
            svg,
            "<g class=\"step state-{state}\" data-step-id=\"{id}\" data-state=\"{state}\">\
             <a href=\"#step-{index}\"><title>{id}: {kind}{detail}, {state}</title>\
             <rect x=\"{LEFT}\" y=\"{y}\" width=\"{BOX_WIDTH}\" height=\"{BOX_HEIGHT}\" rx=\"6\"/>\
             <text class=\"id\" x=\"{tx}\" y=\"{ty}\">{shown}</text>\
             <text class=\"kind\" x=\"{kx}\" y=\"{ty}\" text-anchor=\"end\">{kind}</text></a></g>",
            state = state.as_str(),
            id = shown_name(&step.id),
            detail = shown_name(&detail),
            shown = escape(&shown),
            tx = LEFT + 12,
            kx = LEFT + BOX_WIDTH - 10,
            ty = y + 24,
        );
    }
    if reaches_end {
        end_box(&mut svg, end_row, "end", "terminal");
    }
    if kill_used {
        end_box(&mut svg, kill_row, "killed", "terminal killed");
    }
    svg.push_str("</svg>");
    svg
}

/// Where a step may go next, with the word a reader knows it by.
fn targets(step: &stratum_compiler::plan::Step) -> impl Iterator<Item = (&'static str, Target)> {
    let gate = match &step.action {
        Action::Gate {
            on_approve,
            on_revise,
            on_kill,
            ..
        } => vec![
            ("approve", *on_approve),
            ("revise", *on_revise),
            ("kill", *on_kill),
        ],
        _ => vec![("next", step.next)],
    };
    gate.into_iter()
        .chain(step.on_fail.map(|target| ("on_fail", target)))
}

fn kind_of(action: &Action) -> (&'static str, String) {
    match action {
        Action::Function { function, .. } => ("function", format!(" {function}")),
        Action::Inline { .. } => ("inline", String::new()),
        Action::Flow { .. } => ("flow", String::new()),
        Action::Gate { function, .. } => ("gate", format!(" {function}")),
        Action::Judge { .. } => ("judge", String::new()),
        Action::Decompose { .. } => ("decompose", String::new()),
        Action::Parallel { .. } => ("parallel_dispatch", String::new()),
        Action::Pipeline { .. } => ("pipeline", String::new()),
    }
}

fn row_y(row: u32) -> u32 {
    TOP + row.saturating_mul(PITCH)
}

fn arrow_down(svg: &mut String, from: u32) {
    let x = LEFT + BOX_WIDTH / 2;
    let _ = write!(
        svg,
        "<line class=\"edge order\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" marker-end=\"url(#arrow)\"/>",
        row_y(from) + BOX_HEIGHT,
        row_y(from.saturating_add(1)) - 2
    );
}

/// How far an arc between two rows bulges out: further for rows further apart.
fn bulge(from: u32, to: u32) -> u32 {
    14 + 11 * from.abs_diff(to).min(6)
}

fn data_arc(svg: &mut String, from: u32, to: u32) {
    let x = LEFT;
    let (y1, y2) = (
        row_y(from) + BOX_HEIGHT / 2 + 6,
        row_y(to) + BOX_HEIGHT / 2 - 6,
    );
    let out = x.saturating_sub(bulge(from, to));
    let _ = write!(
        svg,
        "<path class=\"edge data\" d=\"M{x},{y1} C{out},{y1} {out},{y2} {x},{y2}\" \
         marker-end=\"url(#arrow)\"/>"
    );
}

/// A dashed arc from the right side of row `from` to `x_to` on row `to`.
fn route_arc(svg: &mut String, from: u32, to: u32, x_to: u32, label: &str) {
    let x = LEFT + BOX_WIDTH;
    let (y1, y2) = (row_y(from) + BOX_HEIGHT / 2, row_y(to) + BOX_HEIGHT / 2);
    // A step routing to itself still needs a visible loop.
    let (y1, y2) = if from == to {
        (y1 - 8, y2 + 8)
    } else {
        (y1, y2)
    };
    let out = x + bulge(from, to) + 10;
    let _ = write!(
        svg,
        "<g class=\"route route-{label}\"><path class=\"edge\" d=\"M{x},{y1} C{out},{y1} {out},{y2} {x_to},{y2}\" \
         marker-end=\"url(#arrow)\"/><text x=\"{}\" y=\"{}\">{label}</text></g>",
        out - 4,
        (y1 + y2) / 2 + 4
    );
}

fn end_box(svg: &mut String, row: u32, label: &str, class: &str) {
    let y = row_y(row);
    let x = LEFT + BOX_WIDTH / 2 - END_WIDTH / 2;
    let _ = write!(
        svg,
        "<g class=\"{class}\"><rect x=\"{x}\" y=\"{y}\" width=\"{END_WIDTH}\" height=\"{BOX_HEIGHT}\" rx=\"19\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text></g>",
        LEFT + BOX_WIDTH / 2,
        y + 24
    );
}
