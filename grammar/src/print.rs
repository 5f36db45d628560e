//! AST → canonical source: `parse(print(e))` gives `e` back, spans aside.
//!
//! Parentheses are written exactly where the tree's shape needs them, from the operators'
//! precedence, so `(a or b) or c` prints as `a or b or c` but `a or (b or c)` keeps its
//! parentheses. [`string_literal`] and [`float_literal`] are Python's `repr`, character for
//! character, because the evaluator's `str()` uses them too. [`visible`] writes text for a
//! person with `repr`'s escapes and no quotes: what every output for people (the operator
//! commands, the web console) shows of a name or a note that a spec, an agent or a person
//! wrote, so that none of it acts on a terminal or disguises itself on a page.

mod printable;

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::ast::{BinaryOp, Expr, ExprKind, Generator, LogicalOp, RefRoot, UnaryOp};

/// `expr` as canonical source text.
pub fn print(expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr, Level::Lowest);
    out
}

/// Python's precedence levels, lowest first; an operand below the level its position needs is
/// parenthesised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Lowest,
    Or,
    And,
    Not,
    Compare,
    Sum,
    Product,
    Prefix,
    Atom,
}

fn level(expr: &Expr) -> Level {
    match &expr.kind {
        ExprKind::Conditional { .. } => Level::Lowest,
        ExprKind::Logical {
            op: LogicalOp::Or, ..
        } => Level::Or,
        ExprKind::Logical {
            op: LogicalOp::And, ..
        } => Level::And,
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => Level::Not,
        ExprKind::Compare { .. } => Level::Compare,
        ExprKind::Binary {
            op: BinaryOp::Add | BinaryOp::Sub,
            ..
        } => Level::Sum,
        ExprKind::Binary { .. } => Level::Product,
        ExprKind::Unary { .. } => Level::Prefix,
        // A negative number (only built by hand, never parsed) prints with its sign.
        ExprKind::Int(value) if *value < 0 => Level::Prefix,
        ExprKind::Float(value) if value.is_sign_negative() => Level::Prefix,
        _ => Level::Atom,
    }
}

fn write_expr(out: &mut String, expr: &Expr, min: Level) {
    let parenthesise = level(expr) < min;
    if parenthesise {
        out.push('(');
    }
    write_bare(out, expr);
    if parenthesise {
        out.push(')');
    }
}

fn write_bare(out: &mut String, expr: &Expr) {
    match &expr.kind {
        ExprKind::None => out.push_str("None"),
        ExprKind::Bool(true) => out.push_str("True"),
        ExprKind::Bool(false) => out.push_str("False"),
        ExprKind::Int(value) => {
            let _ = write!(out, "{value}");
        }
        ExprKind::Float(value) => out.push_str(&float_literal(*value)),
        ExprKind::Str(value) => out.push_str(&string_literal(value)),
        ExprKind::List(items) => {
            out.push('[');
            write_list(out, items);
            out.push(']');
        }
        ExprKind::Tuple(items) => {
            out.push('(');
            write_list(out, items);
            if items.len() == 1 {
                out.push(',');
            }
            out.push(')');
        }
        ExprKind::Name(ident) => out.push_str(&ident.name),
        ExprKind::Ref(reference) => {
            match &reference.root {
                RefRoot::Input => out.push_str("$.input"),
                RefRoot::StepOutput { step } => {
                    let _ = write!(out, "$.steps.{}.output", step.name);
                }
            }
            for field in &reference.path {
                out.push('.');
                out.push_str(&field.name);
            }
        }
        ExprKind::Attr { base, name } => {
            // `$.input.a` is a reference with a path; an attribute of the reference itself
            // keeps the shape only in parentheses.
            if matches!(base.kind, ExprKind::Ref(_)) {
                out.push('(');
                write_bare(out, base);
                out.push(')');
            } else {
                write_receiver(out, base);
            }
            out.push('.');
            out.push_str(&name.name);
        }
        ExprKind::Index { base, index } => {
            write_expr(out, base, Level::Atom);
            out.push('[');
            write_expr(out, index, Level::Lowest);
            out.push(']');
        }
        ExprKind::Call { func, args } => {
            out.push_str(&func.name);
            write_args(out, args);
        }
        ExprKind::Method {
            receiver,
            name,
            args,
        } => {
            write_receiver(out, receiver);
            out.push('.');
            out.push_str(&name.name);
            write_args(out, args);
        }
        ExprKind::Generator(generator) => {
            // Bare only as a call's sole argument (see `write_args`).
            out.push('(');
            write_generator(out, generator);
            out.push(')');
        }
        ExprKind::ListComp(generator) => {
            out.push('[');
            write_generator(out, generator);
            out.push(']');
        }
        ExprKind::Unary { op, operand } => match op {
            UnaryOp::Not => {
                out.push_str("not ");
                write_expr(out, operand, Level::Not);
            }
            UnaryOp::Neg | UnaryOp::Pos => {
                out.push_str(op.as_str());
                let mut operand_text = String::new();
                write_expr(&mut operand_text, operand, Level::Prefix);
                // `--x` would read the same, but `- -x` shows that there are two operators.
                if operand_text.starts_with(['-', '+']) {
                    out.push(' ');
                }
                out.push_str(&operand_text);
            }
        },
        ExprKind::Binary { op, lhs, rhs } => {
            let (left, right) = match op {
                BinaryOp::Add | BinaryOp::Sub => (Level::Sum, Level::Product),
                _ => (Level::Product, Level::Prefix),
            };
            write_expr(out, lhs, left);
            let _ = write!(out, " {} ", op.as_str());
            write_expr(out, rhs, right);
        }
        ExprKind::Logical { op, lhs, rhs } => {
            let (left, right) = match op {
                LogicalOp::Or => (Level::Or, Level::And),
                LogicalOp::And => (Level::And, Level::Not),
            };
            write_expr(out, lhs, left);
            let _ = write!(out, " {} ", op.as_str());
            write_expr(out, rhs, right);
        }
        ExprKind::Compare { first, rest } => {
            // Comparisons chain, so a comparison operand of a comparison needs parentheses.
            write_expr(out, first, Level::Sum);
            for comparison in rest {
                let _ = write!(out, " {} ", comparison.op.as_str());
                write_expr(out, &comparison.rhs, Level::Sum);
            }
        }
        ExprKind::Conditional {
            then,
            condition,
            otherwise,
        } => {
            write_expr(out, then, Level::Or);
            out.push_str(" if ");
            write_expr(out, condition, Level::Or);
            out.push_str(" else ");
            write_expr(out, otherwise, Level::Lowest);
        }
        ExprKind::Error => out.push_str("<error>"),
    }
}

/// The base of `.name`: an integer needs parentheses, or `1.real` would read as `1.` `real`.
fn write_receiver(out: &mut String, base: &Expr) {
    if matches!(base.kind, ExprKind::Int(_)) {
        out.push('(');
        write_bare(out, base);
        out.push(')');
    } else {
        write_expr(out, base, Level::Atom);
    }
}

fn write_list(out: &mut String, items: &[Expr]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(out, item, Level::Lowest);
    }
}

fn write_args(out: &mut String, args: &[Expr]) {
    out.push('(');
    match args {
        [
            Expr {
                kind: ExprKind::Generator(generator),
                ..
            },
        ] => write_generator(out, generator),
        _ => write_list(out, args),
    }
    out.push(')');
}

fn write_generator(out: &mut String, generator: &Generator) {
    write_expr(out, &generator.element, Level::Lowest);
    let _ = write!(out, " for {} in ", generator.var.name);
    write_expr(out, &generator.iter, Level::Or);
    for condition in &generator.conditions {
        out.push_str(" if ");
        write_expr(out, condition, Level::Or);
    }
}

/// `value` as Python's `repr(value)` writes it.
pub fn string_literal(value: &str) -> String {
    let quote = if value.contains('\'') && !value.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(value.len() + 2);
    out.push(quote);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            _ if c == quote => {
                out.push('\\');
                out.push(c);
            }
            _ => push_visible(&mut out, c),
        }
    }
    out.push(quote);
    out
}

/// `text` for a person to read: every character Python's `str.isprintable()` rejects is
/// written as `repr` writes it (`\t`, `\n`, `\r`, `\x1b`, `\x85`, `\u202e`, …), without
/// quotes. That covers the control characters (C0 with ESC, BEL and CR, DEL, C1), the
/// bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069) and the other
/// invisible format characters: shown this way, a name cannot move a terminal's cursor, set
/// its title, or print itself backwards. Backslashes stay as they are (this is for reading,
/// not for parsing back). Borrowed when there is nothing to escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    if text.chars().all(is_printable) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_visible(&mut out, c);
    }
    Cow::Owned(out)
}

/// Pushes `c` onto `out`, or its escape when it is not printable (see [`visible`]).
pub fn push_visible(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        _ if is_printable(c) => out.push(c),
        _ => {
            let code = u32::from(c);
            let _ = match code {
                0..=0xff => write!(out, "\\x{code:02x}"),
                0x100..=0xffff => write!(out, "\\u{code:04x}"),
                _ => write!(out, "\\U{code:08x}"),
            };
        }
    }
}

fn is_printable(c: char) -> bool {
    let code = u32::from(c);
    let ranges = printable::NOT_PRINTABLE;
    let after = ranges.partition_point(|&(start, _)| start <= code);
    match after.checked_sub(1).and_then(|i| ranges.get(i)) {
        Some(&(_, end)) => code > end,
        None => true,
    }
}

/// `value` as Python's `repr(value)` writes it: the shortest digits that read back as the same
/// float, in positional notation for decimal exponents from -4 to 15 and scientific otherwise.
pub fn float_literal(value: f64) -> String {
    if value.is_nan() {
        return "nan".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits as Python's repr; only the
    // layout differs.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if value.is_sign_negative() { "-" } else { "" };
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exponent_sign}{:02}",
            exponent.abs()
        );
    }
    let point = exponent + 1;
    let text = if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        format!("0.{zeros}{digits}")
    } else {
        let point = point as usize;
        if digits.len() > point {
            let (whole, fraction) = digits.split_at(point);
            format!("{whole}.{fraction}")
        } else {
            format!("{digits}{}.0", "0".repeat(point - digits.len()))
        }
    };
    format!("{sign}{text}")
}

#[cfg(test)]
mod tests {
    use super::{string_literal, visible};

    #[test]
    fn visible_escapes_what_would_act_on_a_terminal_or_reorder_text() {
        assert_eq!(visible("name, ünïcode → ok"), "name, ünïcode → ok");
        assert_eq!(
            visible("rw\u{1b}]0;PWNED\u{7}\r\n\t"),
            r"rw\x1b]0;PWNED\x07\r\n\t"
        );
        assert_eq!(
            visible("a\u{85}b\u{7f}\u{202e}c\u{2066}\u{1f600}"),
            r"a\x85b\x7f\u202ec\u2066\u{1f600}".replace(r"\u{1f600}", "\u{1f600}")
        );
        assert_eq!(string_literal("it's\u{1b}"), r#""it's\x1b""#);
    }
}
