//! E0092 `ambiguous-reasoning-template`: what the reference accepts in a reasoning template
//! and then reads otherwise than it says. Keys nothing reads (a misspelt
//! `require_citation: true` requires no citation), a `require_citations` that is not a
//! boolean, and sections that share an id or a label (one `## <label>` heading would satisfy
//! both). The reference's own rejections (no sections, a section lacking a key) are E0069, in
//! `steps.rs`; a key that misspells a missing one is reported there, once.

use std::collections::HashMap;

use crate::diagnostic::{Code, Diagnostic, backticked, did_you_mean};
use crate::source::Span;
use crate::syntax::keys::{self, Shape};
use crate::syntax::tree::{Entry, Node, NodeKind};

/// The checks of one template's mapping; `what` names it ("the reasoning template of step
/// `review`").
pub(super) fn check(what: &str, entries: &[Entry], diagnostics: &mut Vec<Diagnostic>) {
    unknown_keys(what, entries, &keys::CERTIFICATE, &[], diagnostics);
    for entry in entries {
        match (entry.key.as_str(), &entry.value.kind) {
            (Some("require_citations"), NodeKind::Bool(_) | NodeKind::Invalid) => {}
            (Some("require_citations"), _) => diagnostics.push(
                Diagnostic::new(
                    Code::E0092,
                    format!("`require_citations` of {what} is not `true` or `false`"),
                    entry.value.span,
                    "not a boolean",
                )
                .help("write `require_citations: true` to require cited premises, or remove it"),
            ),
            (Some("sections"), NodeKind::Seq(sections)) => {
                sections_apart(what, sections, diagnostics)
            }
            _ => {}
        }
    }
}

/// Unknown keys of a template (`missing` empty) or of a section (`missing`: its required keys
/// that are absent, whose misspellings E0069 reports).
pub(super) fn unknown_keys(
    what: &str,
    entries: &[Entry],
    shape: &Shape,
    missing: &[&str],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let valid: Vec<&str> = shape.keys.iter().map(|key| key.name).collect();
    for entry in entries {
        let Some(written) = entry.key.as_str() else {
            continue;
        };
        if valid.contains(&written) || did_you_mean(written, missing.iter().copied()).is_some() {
            continue;
        }
        let diagnostic = Diagnostic::new(
            Code::E0092,
            format!("{what} has the unknown key `{written}`"),
            entry.key.span,
            "nothing reads it",
        );
        diagnostics.push(match did_you_mean(written, valid.iter().copied()) {
            Some(best) => diagnostic
                .help(format!(
                    "did you mean `{best}`? The keys of {} are {}",
                    shape.what,
                    backticked(&valid)
                ))
                .fix(
                    format!("replace `{written}` with `{best}`"),
                    entry.key.span,
                    best,
                ),
            None => diagnostic.help(format!(
                "the keys of {} are {}; remove this one",
                shape.what,
                backticked(&valid)
            )),
        });
    }
}

/// Two sections with one `id` or one `label`.
fn sections_apart(what: &str, sections: &[Node], diagnostics: &mut Vec<Diagnostic>) {
    for key in ["id", "label"] {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for section in sections {
            let NodeKind::Map(fields) = &section.kind else {
                continue;
            };
            let Some(value) = fields
                .iter()
                .find(|field| field.key.as_str() == Some(key))
                .map(|field| &field.value)
            else {
                continue;
            };
            let Some(text) = value.as_str() else {
                continue;
            };
            match seen.get(text.trim()) {
                Some(&first) => diagnostics.push(
                    Diagnostic::new(
                        Code::E0092,
                        format!("two sections of {what} have the {key} `{}`", text.trim()),
                        value.span,
                        "used again here",
                    )
                    .secondary(first, "first used here")
                    .help(if key == "label" {
                        "the answer is checked for one `## <label>` heading per section, so one \
                         heading would satisfy both; give each section its own label"
                    } else {
                        "each section needs its own id; rename one of them"
                    }),
                ),
                None => {
                    seen.insert(text.trim(), value.span);
                }
            }
        }
    }
}
