//! Writing expressions, types and lists of names into messages.

use std::fmt;

use crate::ast::{Expr, RefRoot};
use crate::types::Type;

/// Source text longer than this is not quoted in a message: "this value" reads better.
const MAX_QUOTED: usize = 40;
/// Types written longer than this are abbreviated in messages.
const MAX_TYPE: usize = 60;
/// Lists of names in a help line stop after this many.
const MAX_LISTED: usize = 12;

/// The expression as canonical source text.
pub(super) fn source(expr: &Expr) -> String {
    crate::print::print(expr)
}

/// The expression for a message: its source in backticks when short (`` `result.score` ``),
/// `this value` otherwise.
pub(super) fn subject(expr: &Expr) -> String {
    let text = source(expr);
    if text.chars().count() <= MAX_QUOTED && !text.contains('\n') {
        format!("`{text}`")
    } else {
        "this value".to_owned()
    }
}

/// The text of a `$`-reference's prefix: `$.input.a` for the root and the first `fields`.
pub(super) fn reference_prefix(root: &RefRoot, fields: &[crate::ast::Ident]) -> String {
    let mut text = match root {
        RefRoot::Input => "$.input".to_owned(),
        RefRoot::StepOutput { step } => format!("$.steps.{}.output", step.name),
    };
    for field in fields {
        text.push('.');
        text.push_str(&field.name);
    }
    text
}

/// A type in backticks, abbreviated when long: `` `{confidence: float, items: list<…>, …}` ``.
pub(super) fn ty(ty: &Type) -> String {
    // Written only up to the length that can be shown: a contract's type may have thousands
    // of fields or values, and this runs for every message that names one.
    let mut full = Bounded {
        text: String::new(),
        limit: MAX_TYPE * 4,
    };
    let complete = fmt::write(&mut full, format_args!("{ty}")).is_ok();
    if complete && full.text.chars().count() <= MAX_TYPE {
        format!("`{}`", full.text)
    } else {
        format!("`{}`", abbreviated(ty, 0))
    }
}

/// A string that refuses to grow past `limit` bytes, so that writing into it stops early.
struct Bounded {
    text: String,
    limit: usize,
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        if self.text.len() + piece.len() > self.limit {
            return Err(fmt::Error);
        }
        self.text.push_str(piece);
        Ok(())
    }
}

fn abbreviated(ty: &Type, depth: usize) -> String {
    match ty {
        Type::Record(record) if depth > 0 && !record.fields.is_empty() => "{…}".to_owned(),
        Type::Record(record) => {
            let mut text = String::from("{");
            for (i, field) in record.fields.iter().enumerate() {
                let item = format!("{}: {}", field.name, abbreviated(&field.ty, depth + 1));
                if i > 0 && text.chars().count() + item.chars().count() > MAX_TYPE - 8 {
                    text.push_str(", …");
                    break;
                }
                if i > 0 {
                    text.push_str(", ");
                }
                text.push_str(&item);
            }
            if record.open {
                text.push_str(", ...");
            }
            text.push('}');
            text
        }
        Type::List(item) => format!("list<{}>", abbreviated(item, depth + 1)),
        Type::Optional(inner) => match inner.as_ref() {
            Type::Enum(_) => format!("({})?", abbreviated(inner, depth + 1)),
            _ => format!("{}?", abbreviated(inner, depth + 1)),
        },
        Type::Enum(values) if values.len() > 4 => {
            let shown: Vec<String> = values.iter().take(4).map(ToString::to_string).collect();
            format!("{} | …", shown.join(" | "))
        }
        other => other.to_string(),
    }
}

/// `` `a`, `b` and `c` ``; past [`MAX_LISTED`] items, `` `a`, `b`, … and 7 more ``.
pub(super) fn listing<S: AsRef<str>>(items: &[S]) -> String {
    listing_of(items.iter(), items.len())
}

/// [`listing`] of the first items of an iterator of `count` items, reading no more of it than
/// it shows.
pub(super) fn listing_of<S: AsRef<str>>(items: impl Iterator<Item = S>, count: usize) -> String {
    let quoted: Vec<String> = items
        .take(MAX_LISTED)
        .map(|item| format!("`{}`", item.as_ref()))
        .collect();
    let hidden = count.saturating_sub(MAX_LISTED);
    if hidden > 0 {
        return format!("{} and {hidden} more", quoted.join(", "));
    }
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `` `'positive'`, `'negative'` ``: the values of an enum, comma-separated.
pub(super) fn values(values: &[crate::types::Literal]) -> String {
    let mut shown: Vec<String> = values
        .iter()
        .take(MAX_LISTED)
        .map(|value| format!("`{value}`"))
        .collect();
    if values.len() > MAX_LISTED {
        shown.push(format!("… ({} more)", values.len() - MAX_LISTED));
    }
    shown.join(", ")
}

/// "1 argument", "2 arguments", "no arguments".
pub(super) fn arguments(count: usize) -> String {
    match count {
        0 => "no arguments".to_owned(),
        1 => "1 argument".to_owned(),
        n => format!("{n} arguments"),
    }
}

/// How many arguments a callee takes, for "`len` takes 1 argument, found 2".
pub(super) fn arity(min: usize, max: Option<usize>) -> String {
    match max {
        Some(max) if max == min => arguments(min),
        Some(max) if min == 0 => format!("at most {}", arguments(max)),
        Some(max) if max == min + 1 => format!("{min} or {max} arguments"),
        Some(max) => format!("{min} to {max} arguments"),
        None => format!("at least {}", arguments(min)),
    }
}
