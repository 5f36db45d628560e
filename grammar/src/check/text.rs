//! Writing expressions, types and lists of names into messages.

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
    // TEMPORARY until the printer lands: a local printer that parenthesises every compound
    // operand.
    let mut out = String::new();
    write_expr(&mut out, expr);
    out
}

fn write_expr(out: &mut String, expr: &Expr) {
    use crate::ast::ExprKind as K;
    let operand = |out: &mut String, e: &Expr| {
        let compound = matches!(
            e.kind,
            K::Unary { .. }
                | K::Binary { .. }
                | K::Logical { .. }
                | K::Compare { .. }
                | K::Conditional { .. }
        );
        if compound {
            out.push('(');
        }
        write_expr(out, e);
        if compound {
            out.push(')');
        }
    };
    let list = |out: &mut String, items: &[Expr]| {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_expr(out, item);
        }
    };
    match &expr.kind {
        K::None => out.push_str("None"),
        K::Bool(true) => out.push_str("True"),
        K::Bool(false) => out.push_str("False"),
        K::Int(n) => out.push_str(&n.to_string()),
        K::Float(x) => out.push_str(&crate::print::float_literal(*x)),
        K::Str(s) => out.push_str(&crate::print::string_literal(s)),
        K::List(items) => {
            out.push('[');
            list(out, items);
            out.push(']');
        }
        K::Tuple(items) => {
            out.push('(');
            list(out, items);
            if items.len() == 1 {
                out.push(',');
            }
            out.push(')');
        }
        K::Name(ident) => out.push_str(&ident.name),
        K::Ref(reference) => {
            out.push_str(&reference_prefix(&reference.root, &reference.path));
        }
        K::Attr { base, name } => {
            operand(out, base);
            out.push('.');
            out.push_str(&name.name);
        }
        K::Index { base, index } => {
            operand(out, base);
            out.push('[');
            write_expr(out, index);
            out.push(']');
        }
        K::Call { func, args } => {
            out.push_str(&func.name);
            out.push('(');
            list(out, args);
            out.push(')');
        }
        K::Method {
            receiver,
            name,
            args,
        } => {
            operand(out, receiver);
            out.push('.');
            out.push_str(&name.name);
            out.push('(');
            list(out, args);
            out.push(')');
        }
        K::Generator(generator) | K::ListComp(generator) => {
            let brackets = matches!(expr.kind, K::ListComp(_));
            if brackets {
                out.push('[');
            }
            write_expr(out, &generator.element);
            out.push_str(" for ");
            out.push_str(&generator.var.name);
            out.push_str(" in ");
            operand(out, &generator.iter);
            for condition in &generator.conditions {
                out.push_str(" if ");
                operand(out, condition);
            }
            if brackets {
                out.push(']');
            }
        }
        K::Unary { op, operand: inner } => {
            out.push_str(op.as_str());
            if matches!(op, crate::ast::UnaryOp::Not) {
                out.push(' ');
            }
            operand(out, inner);
        }
        K::Binary { op, lhs, rhs } => {
            operand(out, lhs);
            out.push_str(&format!(" {} ", op.as_str()));
            operand(out, rhs);
        }
        K::Logical { op, lhs, rhs } => {
            operand(out, lhs);
            out.push_str(&format!(" {} ", op.as_str()));
            operand(out, rhs);
        }
        K::Compare { first, rest } => {
            operand(out, first);
            for comparison in rest {
                out.push_str(&format!(" {} ", comparison.op.as_str()));
                operand(out, &comparison.rhs);
            }
        }
        K::Conditional {
            then,
            condition,
            otherwise,
        } => {
            operand(out, then);
            out.push_str(" if ");
            operand(out, condition);
            out.push_str(" else ");
            operand(out, otherwise);
        }
        K::Error => out.push_str("<error>"),
    }
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
    let full = ty.to_string();
    if full.chars().count() <= MAX_TYPE {
        format!("`{full}`")
    } else {
        format!("`{}`", abbreviated(ty, 0))
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
    let quoted: Vec<String> = items
        .iter()
        .take(MAX_LISTED)
        .map(|item| format!("`{}`", item.as_ref()))
        .collect();
    let hidden = items.len().saturating_sub(MAX_LISTED);
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
