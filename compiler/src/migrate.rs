//! Spec migration: a checked spec's text and [`Ast`] → the edits that raise it one spec version.
//!
//! Each hop between neighbouring versions is a [`Transform`], a function from the text and its
//! AST to byte edits; [`path`] chains the hops from one version to another, and [`apply`] makes
//! the edits. Invariant: an edit replaces exactly the bytes that must change, so everything
//! else in the file (comments, order, blank lines, line endings, the final newline) is kept
//! byte for byte. Every version 0.1 spec is valid 0.2 and every 0.2 spec valid 0.3, so today's
//! hops only change the `version` value; a hop that must rewrite more adds its edits here.
//! The caller checks the text after each hop, so a hop never has to prove its own result.

use std::ops::Range;

use crate::syntax::ast::Ast;

/// The spec versions, oldest first. A spec migrates only forwards, one hop at a time.
pub const VERSIONS: &[&str] = &["0.1", "0.2", "0.3"];

/// The newest version: what `stratumc migrate` raises a spec to unless told otherwise.
pub const LATEST: &str = "0.3";

/// One hop, from a version to the next one.
pub struct Transform {
    pub from: &'static str,
    pub to: &'static str,
    /// The edits that turn a clean spec at `from` into one at `to`.
    pub edits: fn(&Ast, &str) -> Result<Vec<Edit>, MigrateError>,
}

/// Replaces the bytes of `range` with `replacement`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub replacement: String,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    #[error("unknown version \"{0}\"; known: {known}", known = VERSIONS.join(", "))]
    UnknownVersion(String),
    #[error(
        "no transform from {from} to {to}: migrate only raises a spec's version (known: {known})",
        known = VERSIONS.join(", ")
    )]
    NoPath { from: String, to: String },
    /// A hop was given a spec without a `version` value; checking the spec first rules it out.
    #[error("the spec has no `version` value to change; check it with `stratumc check`")]
    NoVersion,
}

/// The hops, in version order: hop `i` goes from `VERSIONS[i]` to `VERSIONS[i + 1]`.
pub const TRANSFORMS: &[Transform] = &[
    Transform {
        from: "0.1",
        to: "0.2",
        edits: to_v0_2,
    },
    Transform {
        from: "0.2",
        to: "0.3",
        edits: to_v0_3,
    },
];

/// The hops from `from` to `to`, in the order they apply; none when the two are the same.
pub fn path(from: &str, to: &str) -> Result<&'static [Transform], MigrateError> {
    let start = position(from)?;
    let end = position(to)?;
    if end < start {
        return Err(MigrateError::NoPath {
            from: from.to_owned(),
            to: to.to_owned(),
        });
    }
    TRANSFORMS
        .get(start..end)
        .ok_or_else(|| MigrateError::UnknownVersion(to.to_owned()))
}

/// Whether the migrations know `version`.
pub fn known(version: &str) -> Result<(), MigrateError> {
    position(version).map(|_| ())
}

/// Applies non-overlapping edits to `text`, in any order.
pub fn apply(text: &str, edits: &[Edit]) -> String {
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by_key(|edit| edit.range.start);
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for edit in sorted {
        out.push_str(text.get(copied..edit.range.start).unwrap_or(""));
        out.push_str(&edit.replacement);
        copied = edit.range.end;
    }
    out.push_str(text.get(copied..).unwrap_or(""));
    out
}

fn position(version: &str) -> Result<usize, MigrateError> {
    VERSIONS
        .iter()
        .position(|known| *known == version)
        .ok_or_else(|| MigrateError::UnknownVersion(version.to_owned()))
}

/// 0.1 → 0.2: every 0.1 spec is valid 0.2 (0.2 only adds keys and relaxes requirements).
fn to_v0_2(ast: &Ast, text: &str) -> Result<Vec<Edit>, MigrateError> {
    set_version(ast, text, "0.2")
}

/// 0.2 → 0.3: every 0.2 spec is valid 0.3 (0.3 only adds step kinds).
fn to_v0_3(ast: &Ast, text: &str) -> Result<Vec<Edit>, MigrateError> {
    set_version(ast, text, "0.3")
}

/// Changes the `version` value to `to`. Only the version's characters are replaced, inside
/// whatever quotes (and tag) it was written with, so `'0.1'` becomes `'0.2'`; a value written
/// some other way (with escapes, say) is replaced whole by `"0.2"`.
fn set_version(ast: &Ast, text: &str, to: &str) -> Result<Vec<Edit>, MigrateError> {
    let field = ast.version.as_ref().ok_or(MigrateError::NoVersion)?;
    let range = field.span.range();
    let from = field.value.as_str();
    let written = text.get(range.clone()).unwrap_or("");
    let quote = ["\"", "'", ""]
        .into_iter()
        .find(|quote| written.ends_with(&format!("{from}{quote}")));
    let edit = match quote {
        Some(quote) => {
            let end = range.end - quote.len();
            Edit {
                range: end - from.len()..end,
                replacement: to.to_owned(),
            }
        }
        None => Edit {
            range,
            replacement: format!("\"{to}\""),
        },
    };
    Ok(vec![edit])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)] // windows(2) gives pairs
    use super::*;
    use crate::source::{SourceFile, SourceMap};

    fn migrated(text: &str) -> String {
        let mut sources = SourceMap::new();
        let src: &SourceFile = sources.add("spec.stratum.yaml", text);
        let compilation = crate::check(src);
        let edits =
            (TRANSFORMS.first().expect("there is a first hop").edits)(&compilation.ast, text)
                .expect("the spec has a version");
        apply(text, &edits)
    }

    #[test]
    fn the_hops_chain_through_every_version_in_order() {
        let hops: Vec<(&str, &str)> = TRANSFORMS.iter().map(|t| (t.from, t.to)).collect();
        let pairs: Vec<(&str, &str)> = VERSIONS.windows(2).map(|w| (w[0], w[1])).collect();
        assert_eq!(hops, pairs);
        assert_eq!(VERSIONS.last(), Some(&LATEST));
    }

    #[test]
    fn a_path_is_the_hops_between_two_versions() {
        let hops = |from, to| path(from, to).map(|hops| hops.iter().map(|t| t.to).collect());
        assert_eq!(hops("0.1", "0.3"), Ok(vec!["0.2", "0.3"]));
        assert_eq!(hops("0.2", "0.3"), Ok(vec!["0.3"]));
        assert_eq!(hops("0.2", "0.2"), Ok(vec![]));
        assert_eq!(
            hops("0.3", "0.1"),
            Err(MigrateError::NoPath {
                from: "0.3".into(),
                to: "0.1".into()
            })
        );
        assert_eq!(
            hops("0.1", "0.9"),
            Err(MigrateError::UnknownVersion("0.9".into()))
        );
        assert_eq!(
            MigrateError::UnknownVersion("0.9".into()).to_string(),
            "unknown version \"0.9\"; known: 0.1, 0.2, 0.3"
        );
    }

    #[test]
    fn only_the_version_characters_change_whatever_the_quotes() {
        let spec = "flows: {}\n";
        for (before, after) in [
            ("version: \"0.1\"\n", "version: \"0.2\"\n"),
            ("version: '0.1'\n", "version: '0.2'\n"),
            (
                "version: !!str \"0.1\"  # old\n",
                "version: !!str \"0.2\"  # old\n",
            ),
            ("version: \"0\\x2e1\"\n", "version: \"0.2\"\n"),
        ] {
            assert_eq!(
                migrated(&format!("{before}{spec}")),
                format!("{after}{spec}"),
                "{before}"
            );
        }
        assert_eq!(
            migrated("{version: '0.1', flows: {}}"),
            "{version: '0.2', flows: {}}"
        );
    }

    #[test]
    fn edits_apply_in_any_order_and_keep_the_rest() {
        let edits = [
            Edit {
                range: 4..5,
                replacement: "E".into(),
            },
            Edit {
                range: 0..1,
                replacement: "A".into(),
            },
        ];
        assert_eq!(apply("abcdef\r\n", &edits), "AbcdEf\r\n");
    }
}
