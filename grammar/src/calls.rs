//! The built-in functions and the methods of strings, lists and objects, with Python's
//! semantics (the catalogue the checker has: nothing more).

use std::rc::Rc;

use crate::eval_error::EvalErrorKind;
use crate::files;
use crate::limits::Limits;
use crate::planning;
use crate::program::{Builtin, Method};
use crate::value::{self, Fault, Meter, Res, SeqKind, Val, is_py_space};
use crate::vocabulary;

fn arity(name: &str, args: usize, min: usize, max: usize) -> Res<()> {
    if (min..=max).contains(&args) {
        return Ok(());
    }
    let expected = match (min, max) {
        (0, 0) => "no arguments".to_owned(),
        (1, 1) => "exactly 1 argument".to_owned(),
        (a, b) if a == b => format!("exactly {a} arguments"),
        (0, 1) => "at most 1 argument".to_owned(),
        (0, b) | (1, b) if args > b => format!("at most {b} arguments"),
        (a, _) => format!("at least {a} argument{}", if a == 1 { "" } else { "s" }),
    };
    Err(Fault::type_error(format!(
        "`{name}` takes {expected} ({args} given)"
    )))
}

fn arg<'s, 'a>(args: &'s [Val<'a>], i: usize) -> Res<&'s Val<'a>> {
    args.get(i)
        .ok_or_else(|| Fault::type_error("missing argument"))
}

/// Calls a built-in function.
pub(crate) fn call<'a>(
    builtin: Builtin,
    args: &[Val<'a>],
    meter: &mut Meter,
    limits: &Limits,
) -> Res<Val<'a>> {
    let name = builtin.name();
    match builtin {
        Builtin::Len => {
            arity(name, args.len(), 1, 1)?;
            let value = arg(args, 0)?;
            let len = if let Some(text) = value.as_str() {
                meter.charge_bytes(text.len())?;
                text.chars().count()
            } else if let Some((kind, items)) = value.as_seq()
                && kind != SeqKind::Gen
            {
                items.len()
            } else if let Some(map) = value.as_object() {
                map.len()
            } else {
                return Err(Fault::type_error(format!(
                    "`len` of `{}` is not defined",
                    value.type_name()
                )));
            };
            Ok(Val::Int(i64::try_from(len).unwrap_or(i64::MAX)))
        }
        Builtin::Bool => {
            arity(name, args.len(), 0, 1)?;
            Ok(Val::Bool(args.first().is_some_and(Val::truthy)))
        }
        Builtin::Int => {
            arity(name, args.len(), 0, 1)?;
            match args.first() {
                None => Ok(Val::Int(0)),
                Some(value) => to_int(value, meter),
            }
        }
        Builtin::Str => {
            arity(name, args.len(), 0, 1)?;
            match args.first() {
                None => Ok(Val::string(String::new())),
                Some(value) => value::to_str(value, meter),
            }
        }
        Builtin::Any | Builtin::All => {
            arity(name, args.len(), 1, 1)?;
            let items = value::elements(arg(args, 0)?, name, meter)?;
            let any = builtin == Builtin::Any;
            Ok(Val::Bool(if any {
                items.iter().any(Val::truthy)
            } else {
                items.iter().all(Val::truthy)
            }))
        }
        Builtin::Min | Builtin::Max => {
            if args.is_empty() {
                return Err(Fault::type_error(format!(
                    "`{name}` takes at least 1 argument (0 given)"
                )));
            }
            let items = match args {
                [single] => value::elements(single, name, meter)?,
                many => many.to_vec(),
            };
            let (op, wanted) = if builtin == Builtin::Min {
                ("<", std::cmp::Ordering::Less)
            } else {
                (">", std::cmp::Ordering::Greater)
            };
            let mut best: Option<Val<'a>> = None;
            for item in items {
                best = Some(match best {
                    None => item,
                    Some(current) => {
                        if value::compare(&item, &current, op, meter)? == Some(wanted) {
                            item
                        } else {
                            current
                        }
                    }
                });
            }
            best.ok_or_else(|| Fault::value_error(format!("`{name}` of an empty sequence")))
        }
        Builtin::FileExists => {
            arity(name, args.len(), 1, 1)?;
            let path = path_arg(name, arg(args, 0)?)?;
            meter.charge(100)?;
            files::file_exists(limits, path).map(Val::Bool)
        }
        Builtin::FileContains => {
            arity(name, args.len(), 2, 2)?;
            let path = path_arg(name, arg(args, 0)?)?;
            let Some(needle) = arg(args, 1)?.as_str() else {
                return Err(Fault::type_error(format!(
                    "`file_contains` needs a `str` to look for, not `{}`",
                    arg(args, 1)?.type_name()
                )));
            };
            meter.charge(100)?;
            files::file_contains(limits, path, needle, meter).map(Val::Bool)
        }
        Builtin::NoFileConflicts => {
            arity(name, args.len(), 1, 1)?;
            planning::no_file_conflicts(arg(args, 0)?, meter)
        }
        Builtin::PlanCompletion => {
            arity(name, args.len(), 2, 3)?;
            planning::plan_completion(arg(args, 0)?, arg(args, 1)?, args.get(2), meter)
        }
        Builtin::VocabularyCompliance => {
            arity(name, args.len(), 2, 4)?;
            vocabulary::vocabulary_compliance(args, meter, limits)
        }
    }
}

fn path_arg<'s>(name: &str, value: &'s Val<'_>) -> Res<&'s str> {
    value.as_str().ok_or_else(|| {
        Fault::type_error(format!(
            "`{name}` needs a `str` path, not `{}`",
            value.type_name()
        ))
    })
}

/// Python's `int(x)`.
fn to_int<'a>(value: &Val<'a>, meter: &mut Meter) -> Res<Val<'a>> {
    match value {
        Val::Int(i) => Ok(Val::Int(*i)),
        Val::Bool(b) => Ok(Val::Int(i64::from(*b))),
        Val::Float(f) => {
            let t = f.trunc();
            // Every float in [-2^63, 2^63) truncates to an i64.
            if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&t) {
                Ok(Val::Int(t as i64))
            } else {
                Err(Fault::msg(
                    EvalErrorKind::Overflow,
                    format!(
                        "`int` of {} does not fit in 64 bits",
                        crate::print::float_literal(*f)
                    ),
                ))
            }
        }
        other => match other.as_str() {
            Some(text) => {
                meter.charge_bytes(text.len())?;
                parse_int(text).map(Val::Int).map_err(|overflow| {
                    let shown = value::short_repr(other, 60);
                    if overflow {
                        Fault::msg(
                            EvalErrorKind::Overflow,
                            format!("`int` of {shown} does not fit in 64 bits"),
                        )
                    } else {
                        Fault::value_error(format!(
                            "`int` cannot read {shown} as a base-10 integer"
                        ))
                    }
                })
            }
            None => Err(Fault::type_error(format!(
                "`int` of `{}` is not defined",
                other.type_name()
            ))),
        },
    }
}

/// Python's `int(str)` in base 10: surrounding whitespace, a sign, digits with single
/// underscores between them. `Err(true)` on overflow, `Err(false)` on bad syntax.
fn parse_int(text: &str) -> Result<i64, bool> {
    let body = text.trim_matches(is_py_space);
    let (negative, digits) = match body.as_bytes().first() {
        Some(b'-') => (true, body.get(1..).unwrap_or("")),
        Some(b'+') => (false, body.get(1..).unwrap_or("")),
        _ => (false, body),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') {
        return Err(false);
    }
    let mut value: i64 = 0;
    let mut previous_underscore = false;
    for c in digits.chars() {
        if c == '_' {
            if previous_underscore {
                return Err(false);
            }
            previous_underscore = true;
            continue;
        }
        previous_underscore = false;
        let digit = c.to_digit(10).ok_or(false)?;
        // Accumulate negatively so that i64::MIN parses.
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_sub(i64::from(digit)))
            .ok_or(true)?;
    }
    if negative {
        Ok(value)
    } else {
        value.checked_neg().ok_or(true)
    }
}

/// A sub-slice of a string receiver: the receiver itself when the slice is all of it.
fn slice_of<'a>(receiver: &Val<'a>, f: impl FnOnce(&str) -> &str) -> Val<'a> {
    let text = receiver.as_str().unwrap_or("");
    let part = f(text);
    if part.len() == text.len() {
        receiver.clone()
    } else {
        Val::string(part.to_owned())
    }
}

fn no_method(receiver: &Val<'_>, method: Method) -> Fault {
    Fault::type_error(format!(
        "`{}` has no method `{}`",
        receiver.type_name(),
        method.name()
    ))
}

fn str_arg<'s>(method: Method, args: &'s [Val<'_>], i: usize) -> Res<&'s str> {
    let value = arg(args, i)?;
    value.as_str().ok_or_else(|| {
        Fault::type_error(format!(
            "`{}` needs a `str` argument, not `{}`",
            method.name(),
            value.type_name()
        ))
    })
}

/// Calls a method.
pub(crate) fn method<'a>(
    method: Method,
    receiver: &Val<'a>,
    args: &[Val<'a>],
    meter: &mut Meter,
) -> Res<Val<'a>> {
    if let Some(text) = receiver.as_str() {
        return string_method(method, receiver, text, args, meter);
    }
    if let Some((kind, items)) = receiver.as_seq()
        && kind != SeqKind::Gen
    {
        let name = method.name();
        return match method {
            Method::Count => {
                arity(name, args.len(), 1, 1)?;
                let needle = arg(args, 0)?;
                let mut count = 0i64;
                for item in items.iter() {
                    if value::equal(&item, needle, meter)? {
                        count += 1;
                    }
                }
                Ok(Val::Int(count))
            }
            Method::Index => {
                arity(name, args.len(), 1, 1)?;
                let needle = arg(args, 0)?;
                for (i, item) in items.iter().enumerate() {
                    if value::equal(&item, needle, meter)? {
                        return Ok(Val::Int(i64::try_from(i).unwrap_or(i64::MAX)));
                    }
                }
                Err(Fault::value_error(format!(
                    "`index`: {} is not in the {}",
                    value::short_repr(needle, 60),
                    receiver.type_name()
                )))
            }
            _ => Err(no_method(receiver, method)),
        };
    }
    if let Some(map) = receiver.as_object() {
        let name = method.name();
        return match method {
            Method::Get => {
                arity(name, args.len(), 1, 2)?;
                let key = arg(args, 0)?;
                if let Val::List(_) | Val::Json(_) | Val::Gen(_) = key {
                    return Err(Fault::type_error(format!(
                        "a `{}` cannot be a key of a `dict`",
                        key.type_name()
                    )));
                }
                meter.charge(1)?;
                match key.as_str().and_then(|k| map.get(k)) {
                    Some(value) => Ok(Val::from_json(value)),
                    None => Ok(args.get(1).cloned().unwrap_or(Val::None)),
                }
            }
            Method::Keys => {
                arity(name, args.len(), 0, 0)?;
                Ok(Val::List(Rc::new(value::keys(map, meter)?)))
            }
            Method::Values => {
                arity(name, args.len(), 0, 0)?;
                meter.charge(map.len() as u64)?;
                Ok(Val::List(Rc::new(
                    map.values().map(Val::from_json).collect(),
                )))
            }
            _ => Err(no_method(receiver, method)),
        };
    }
    Err(no_method(receiver, method))
}

fn string_method<'a>(
    method: Method,
    receiver: &Val<'a>,
    text: &str,
    args: &[Val<'a>],
    meter: &mut Meter,
) -> Res<Val<'a>> {
    let name = method.name();
    match method {
        Method::Lower | Method::Upper => {
            arity(name, args.len(), 0, 0)?;
            meter.check_size(text.len() as u128, "the string")?;
            meter.charge_bytes(text.len())?;
            let out = if method == Method::Lower {
                text.to_lowercase()
            } else {
                text.to_uppercase()
            };
            meter.check_size(out.len() as u128, "the string")?;
            Ok(Val::string(out))
        }
        Method::Strip | Method::Lstrip | Method::Rstrip => {
            arity(name, args.len(), 0, 1)?;
            meter.charge_bytes(text.len())?;
            let chars: Option<Vec<char>> = match args.first() {
                None | Some(Val::None) => None,
                Some(value) => match value.as_str() {
                    Some(set) => Some(set.chars().collect()),
                    None => {
                        return Err(Fault::type_error(format!(
                            "`{name}` needs a `str` of characters or None, not `{}`",
                            value.type_name()
                        )));
                    }
                },
            };
            let strip = |c: char| match &chars {
                None => is_py_space(c),
                Some(set) => set.contains(&c),
            };
            Ok(slice_of(receiver, |s| match method {
                Method::Lstrip => s.trim_start_matches(strip),
                Method::Rstrip => s.trim_end_matches(strip),
                _ => s.trim_matches(strip),
            }))
        }
        Method::Startswith | Method::Endswith => {
            arity(name, args.len(), 1, 1)?;
            let test = |affix: &str| {
                if method == Method::Startswith {
                    text.starts_with(affix)
                } else {
                    text.ends_with(affix)
                }
            };
            let affixes = arg(args, 0)?;
            if let Some(affix) = affixes.as_str() {
                return Ok(Val::Bool(test(affix)));
            }
            if let Some((SeqKind::Tuple, items)) = affixes.as_seq() {
                meter.charge(items.len() as u64)?;
                for item in items.iter() {
                    match item.as_str() {
                        Some(affix) => {
                            if test(affix) {
                                return Ok(Val::Bool(true));
                            }
                        }
                        None => {
                            return Err(Fault::type_error(format!(
                                "`{name}` needs a tuple of `str`, not one holding `{}`",
                                item.type_name()
                            )));
                        }
                    }
                }
                return Ok(Val::Bool(false));
            }
            Err(Fault::type_error(format!(
                "`{name}` needs a `str` or a tuple of `str`, not `{}`",
                affixes.type_name()
            )))
        }
        Method::Split => {
            arity(name, args.len(), 0, 2)?;
            let separator = match args.first() {
                None | Some(Val::None) => None,
                Some(value) => match value.as_str() {
                    Some("") => return Err(Fault::value_error("`split` with an empty separator")),
                    Some(sep) => Some(sep),
                    None => {
                        return Err(Fault::type_error(format!(
                            "`split` needs a `str` separator or None, not `{}`",
                            value.type_name()
                        )));
                    }
                },
            };
            let max_split = optional_count(args.get(1), "`split` needs an `int` maximum")?;
            meter.charge_bytes(text.len())?;
            let parts: Vec<&str> = match separator {
                Some(sep) => match max_split {
                    Some(n) => text.splitn(n.saturating_add(1), sep).collect(),
                    None => text.split(sep).collect(),
                },
                None => split_whitespace(text, max_split),
            };
            let bytes: u128 = parts.iter().map(|p| 16 + p.len() as u128).sum();
            meter.check_size(bytes, "the list")?;
            meter.charge(parts.len() as u64)?;
            let base = text.as_ptr() as usize;
            let items = parts
                .into_iter()
                .map(|part| {
                    let start = (part.as_ptr() as usize).saturating_sub(base);
                    slice_of(receiver, |s| s.get(start..start + part.len()).unwrap_or(""))
                })
                .collect();
            Ok(Val::List(Rc::new(items)))
        }
        Method::Count => {
            arity(name, args.len(), 1, 1)?;
            let sub = str_arg(method, args, 0)?;
            meter.charge_bytes(text.len())?;
            let count = if sub.is_empty() {
                text.chars().count() + 1
            } else {
                text.matches(sub).count()
            };
            Ok(Val::Int(i64::try_from(count).unwrap_or(i64::MAX)))
        }
        Method::Find => {
            arity(name, args.len(), 1, 1)?;
            let sub = str_arg(method, args, 0)?;
            meter.charge_bytes(text.len())?;
            Ok(Val::Int(match text.find(sub) {
                Some(at) => {
                    let chars = text.get(..at).map_or(0, |s| s.chars().count());
                    i64::try_from(chars).unwrap_or(i64::MAX)
                }
                None => -1,
            }))
        }
        Method::Replace => {
            arity(name, args.len(), 2, 3)?;
            let old = str_arg(method, args, 0)?;
            let new = str_arg(method, args, 1)?;
            let limit = optional_count(args.get(2), "`replace` needs an `int` count")?;
            meter.charge_bytes(text.len())?;
            let found = if old.is_empty() {
                text.chars().count() + 1
            } else {
                text.matches(old).count()
            };
            let count = limit.map_or(found, |l| l.min(found));
            let size =
                text.len() as i128 + (count as i128) * (new.len() as i128 - old.len() as i128);
            meter.check_size(u128::try_from(size.max(0)).unwrap_or(0), "the string")?;
            meter.charge_bytes(usize::try_from(size.max(0)).unwrap_or(usize::MAX))?;
            Ok(Val::string(text.replacen(old, new, count)))
        }
        Method::Join => {
            arity(name, args.len(), 1, 1)?;
            let items = value::elements(arg(args, 0)?, "join", meter)?;
            let mut size: u128 = 0;
            for (i, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(part) => {
                        size += part.len() as u128 + if i > 0 { text.len() as u128 } else { 0 }
                    }
                    None => {
                        return Err(Fault::type_error(format!(
                            "`join` needs strings: item {i} is `{}`",
                            item.type_name()
                        )));
                    }
                }
            }
            meter.check_size(size, "the string")?;
            meter.charge_bytes(usize::try_from(size).unwrap_or(usize::MAX))?;
            let mut out = String::with_capacity(usize::try_from(size).unwrap_or(0));
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(text);
                }
                out.push_str(item.as_str().unwrap_or(""));
            }
            Ok(Val::string(out))
        }
        Method::Isdigit | Method::Isalpha | Method::Isspace | Method::Isupper | Method::Islower => {
            arity(name, args.len(), 0, 0)?;
            meter.charge_bytes(text.len())?;
            Ok(Val::Bool(match method {
                Method::Isdigit => !text.is_empty() && text.chars().all(is_digit),
                Method::Isalpha => !text.is_empty() && text.chars().all(char::is_alphabetic),
                Method::Isspace => !text.is_empty() && text.chars().all(is_py_space),
                Method::Isupper => {
                    !text.chars().any(char::is_lowercase) && text.chars().any(char::is_uppercase)
                }
                _ => !text.chars().any(char::is_uppercase) && text.chars().any(char::is_lowercase),
            }))
        }
        Method::Index | Method::Get | Method::Keys | Method::Values => {
            Err(no_method(receiver, method))
        }
    }
}

/// Python's `str.isdigit` (approximately: decimal and digit characters, not fractions or
/// numerals of letter form).
fn is_digit(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    c.is_numeric()
        && !matches!(c, '\u{bc}'..='\u{be}' | '\u{2150}'..='\u{218b}' | '\u{3007}' | '\u{3021}'..='\u{3029}')
}

/// Python's `str.split()` without a separator: runs of whitespace separate, leading and
/// trailing whitespace is dropped; after `max_split` splits the rest (left-trimmed) is the
/// last part.
fn split_whitespace(text: &str, max_split: Option<usize>) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text.trim_start_matches(is_py_space);
    while !rest.is_empty() {
        if max_split.is_some_and(|n| parts.len() >= n) {
            parts.push(rest);
            break;
        }
        match rest.find(is_py_space) {
            Some(end) => {
                parts.push(rest.get(..end).unwrap_or(""));
                rest = rest
                    .get(end..)
                    .unwrap_or("")
                    .trim_start_matches(is_py_space);
            }
            None => {
                parts.push(rest);
                break;
            }
        }
    }
    parts
}

/// An optional count argument as Python reads it: absent or negative means no limit.
fn optional_count(arg: Option<&Val<'_>>, needs: &str) -> Result<Option<usize>, Fault> {
    match arg {
        None => Ok(None),
        Some(Val::Int(n)) if *n < 0 => Ok(None),
        Some(Val::Int(n)) => Ok(Some(usize::try_from(*n).unwrap_or(usize::MAX))),
        Some(Val::Bool(b)) => Ok(Some(usize::from(*b))),
        Some(other) => Err(Fault::type_error(format!(
            "{needs}, not `{}`",
            other.type_name()
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn int_parsing_follows_python() {
        assert_eq!(parse_int(" 42 "), Ok(42));
        assert_eq!(parse_int("-1_000"), Ok(-1000));
        assert_eq!(parse_int("+7"), Ok(7));
        assert_eq!(parse_int("007"), Ok(7));
        assert_eq!(parse_int("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_int("9223372036854775808"), Err(true));
        assert_eq!(parse_int("1__0"), Err(false));
        assert_eq!(parse_int("_1"), Err(false));
        assert_eq!(parse_int("1.5"), Err(false));
        assert_eq!(parse_int(""), Err(false));
        assert_eq!(parse_int("- 1"), Err(false));
    }

    #[test]
    fn whitespace_split_follows_python() {
        assert_eq!(split_whitespace("  a b  c  ", None), vec!["a", "b", "c"]);
        assert_eq!(split_whitespace("  a b  c  ", Some(1)), vec!["a", "b  c  "]);
        assert_eq!(split_whitespace("   ", None), Vec::<&str>::new());
        assert_eq!(split_whitespace("a", Some(0)), vec!["a"]);
    }
}
