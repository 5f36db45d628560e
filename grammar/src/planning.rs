//! The reference's planning built-ins of `ensure`, with its semantics down to Python's sets,
//! truthiness and `str()`:
//!
//! - `no_file_conflicts(tasks)`: no two tasks that are independent (neither reaches the other
//!   through `depends_on`, transitively) own the same file in `files_owned`. The first conflict
//!   is a `ValueError` whose text the reference's violation carries: "File ownership conflict
//!   between independent tasks 'a' and 'b': ['x.py']".
//! - `plan_completion(plan_items, files_changed, threshold=90)`: the items with a `file` that
//!   `files_changed` does not hold are missing; a missing `critical` item, or a completion
//!   (items not missing, in percent) below `threshold`, fails with one violation per line
//!   ([`Fault::violations`]), which the runtime reports separately, as the reference passes a
//!   `ValueError` of a list of strings through.
//!
//! What the reference raises a `TypeError` for (a task that is not a record, an unhashable
//! file, a threshold that is not a number) is an error here too, in this crate's words. Two
//! things are not copied: the reference follows `depends_on` by recursion, which fails on a
//! chain about a thousand tasks deep (this walks any depth), and it has no instruction budget
//! (this charges per pair of tasks and per file compared).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::value::{self, Fault, Meter, Res, SeqKind, Val, elements};

/// A value as a member of a Python set: two keys are equal when Python finds the values equal
/// (`1 == 1.0 == True`, a tuple element by element). Lists and records have none (they are
/// unhashable).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    None,
    Int(i64),
    /// A float with a fractional part (an integral float is an `Int`), by its bits.
    Float(u64),
    Str(String),
    Tuple(Vec<Key>),
}

impl Key {
    fn of(value: &Val<'_>) -> Option<Key> {
        Some(match value {
            Val::None => Key::None,
            Val::Bool(b) => Key::Int(i64::from(*b)),
            Val::Int(i) => Key::Int(*i),
            Val::Float(f) => {
                // Every float in [-2^63, 2^63) with no fraction is an i64, and equal to it.
                if f.fract() == 0.0
                    && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(f)
                {
                    Key::Int(*f as i64)
                } else {
                    Key::Float(f.to_bits())
                }
            }
            Val::Str(_) | Val::BStr(_) => Key::Str(value.as_str().unwrap_or("").to_owned()),
            Val::Tuple(items) => Key::Tuple(items.iter().map(Key::of).collect::<Option<_>>()?),
            Val::Json(_) | Val::List(_) | Val::Gen(_) => return None,
        })
    }
}

/// A Python set built from an iterable: each member once, as first met, in the order met
/// (so that what is built from it does not depend on hashing).
struct Set<'a> {
    members: Vec<Val<'a>>,
    keys: Vec<Key>,
    index: HashSet<Key>,
}

impl<'a> Set<'a> {
    fn empty() -> Set<'a> {
        Set {
            members: Vec::new(),
            keys: Vec::new(),
            index: HashSet::new(),
        }
    }

    /// `set(value)`: the elements of a list, tuple or generator, the characters of a string,
    /// the keys of a record. `what` names the value in messages.
    fn of(value: &Val<'a>, what: &dyn Fn() -> String, meter: &mut Meter) -> Res<Set<'a>> {
        if !matches!(
            value,
            Val::Json(_) | Val::List(_) | Val::Tuple(_) | Val::Gen(_)
        ) && value.as_str().is_none()
        {
            return Err(Fault::type_error(format!(
                "{} must be a list, not `{}`",
                what(),
                value.type_name()
            )));
        }
        let items = elements(value, "set", meter)?;
        let mut set = Set::empty();
        for item in items {
            let Some(key) = Key::of(&item) else {
                return Err(Fault::type_error(format!(
                    "{} holds a `{}`, which cannot be a member of a set",
                    what(),
                    item.type_name()
                )));
            };
            meter.charge(1)?;
            if set.index.insert(key.clone()) {
                set.keys.push(key);
                set.members.push(item);
            }
        }
        Ok(set)
    }

    fn len(&self) -> usize {
        self.members.len()
    }

    fn contains(&self, key: &Key) -> bool {
        self.index.contains(key)
    }

    /// `self & other`: the members of both, each as the smaller set holds it (the second's
    /// when they are as large), as CPython builds an intersection.
    fn intersection(&self, other: &Set<'a>, meter: &mut Meter) -> Res<Vec<Val<'a>>> {
        let (small, large) = if other.len() > self.len() {
            (self, other)
        } else {
            (other, self)
        };
        meter.charge(small.len() as u64)?;
        Ok(small
            .keys
            .iter()
            .zip(&small.members)
            .filter(|(key, _)| large.contains(key))
            .map(|(_, value)| value.clone())
            .collect())
    }
}

/// A record field as `dict.get(name, default)` reads it.
fn get<'a>(map: &'a Map<String, Value>, name: &str) -> Option<Val<'a>> {
    map.get(name).map(Val::from_json)
}

/// Python's `str(value)` as a Rust string.
fn text(value: &Val<'_>, meter: &mut Meter) -> Res<String> {
    let shown = value::to_str(value, meter)?;
    Ok(shown.as_str().unwrap_or("").to_owned())
}

/// `no_file_conflicts(tasks)`.
pub(crate) fn no_file_conflicts<'a>(tasks: &Val<'a>, meter: &mut Meter) -> Res<Val<'a>> {
    let items = elements(tasks, "no_file_conflicts", meter)?;
    let mut records: Vec<&'a Map<String, Value>> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match item.as_object() {
            Some(record) => records.push(record),
            None => {
                return Err(Fault::type_error(format!(
                    "`no_file_conflicts` needs task records (with `id`, `files_owned` and \
                     `depends_on`): task {index} is a `{}`",
                    item.type_name()
                )));
            }
        }
    }

    // Each task id's direct dependencies; a later task with the same id replaces an earlier.
    let mut order: Vec<Key> = Vec::with_capacity(records.len());
    let mut direct: HashMap<Key, HashSet<Key>> = HashMap::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        let depends_on = get(record, "depends_on").unwrap_or(Val::List(Rc::new(Vec::new())));
        let what = || format!("the `depends_on` of task {index}");
        let depends_on: HashSet<Key> = Set::of(&depends_on, &what, meter)?.index;
        let id = get(record, "id").unwrap_or(Val::string(String::new()));
        let Some(id) = Key::of(&id) else {
            return Err(Fault::type_error(format!(
                "the `id` of task {index} is a `{}`, which cannot name a task",
                id.type_name()
            )));
        };
        if direct.insert(id.clone(), depends_on).is_none() {
            order.push(id);
        }
    }

    // What each id reaches through `depends_on`, directly or not.
    let mut reaches: HashMap<&Key, HashSet<Key>> = HashMap::with_capacity(order.len());
    for id in &order {
        let mut reached: HashSet<Key> = HashSet::new();
        let mut visited: HashSet<&Key> = HashSet::from([id]);
        let mut pending: Vec<&Key> = vec![id];
        while let Some(at) = pending.pop() {
            for next in direct.get(at).into_iter().flatten() {
                meter.charge(1)?;
                reached.insert(next.clone());
                if visited.insert(next) {
                    pending.push(next);
                }
            }
        }
        reaches.insert(id, reached);
    }
    let ordered = |a: &Key, b: &Key| {
        reaches.get(a).is_some_and(|reached| reached.contains(b))
            || reaches.get(b).is_some_and(|reached| reached.contains(a))
    };

    // Every pair of independent tasks, in order; each task's files read when first needed,
    // so that a malformed `files_owned` fails where the reference's would.
    let ids: Vec<Option<(Val<'a>, Key)>> = records
        .iter()
        .map(|record| {
            let id = get(record, "id")?;
            let key = Key::of(&id)?;
            Some((id, key))
        })
        .collect();
    let mut owned: Vec<Option<Set<'a>>> = (0..records.len()).map(|_| None).collect();
    for i in 0..records.len() {
        // The reference names a task without an id after its place, `task-<i>`, and the
        // second of a pair after the first's place plus one.
        let unnamed = |n: usize| {
            let name = format!("task-{n}");
            (Val::string(name.clone()), Key::Str(name))
        };
        let first = ids.get(i).cloned().flatten().unwrap_or_else(|| unnamed(i));
        let second_unnamed = unnamed(i + 1);
        for j in i + 1..records.len() {
            meter.charge(1)?;
            let second = match ids.get(j) {
                Some(Some(named)) => named,
                _ => &second_unnamed,
            };
            if ordered(&first.1, &second.1) {
                continue;
            }
            for index in [i, j] {
                if owned.get(index).is_some_and(Option::is_none) {
                    let files = records
                        .get(index)
                        .and_then(|record| get(record, "files_owned"))
                        .unwrap_or(Val::List(Rc::new(Vec::new())));
                    let what = || format!("the `files_owned` of task {index}");
                    let set = Set::of(&files, &what, meter)?;
                    if let Some(slot) = owned.get_mut(index) {
                        *slot = Some(set);
                    }
                }
            }
            let (Some(Some(files_a)), Some(Some(files_b))) = (owned.get(i), owned.get(j)) else {
                continue;
            };
            let shared = files_a.intersection(files_b, meter)?;
            if shared.is_empty() {
                continue;
            }
            let shared = Val::List(Rc::new(sorted(shared, meter)?));
            return Err(Fault::value_error(format!(
                "File ownership conflict between independent tasks '{}' and '{}': {}",
                text(&first.0, meter)?,
                text(&second.0, meter)?,
                text(&shared, meter)?
            )));
        }
    }
    Ok(Val::Bool(true))
}

/// Python's `sorted` of set members: numbers with numbers, strings with strings; a mix is an
/// error. (Which pair the reference's error names depends on its set's order, which Python's
/// string hashing makes differ from run to run.)
fn sorted<'a>(mut values: Vec<Val<'a>>, meter: &mut Meter) -> Res<Vec<Val<'a>>> {
    for pair in values.windows(2) {
        if let [a, b] = pair {
            value::compare(b, a, "<", meter)?;
        }
    }
    let mut failure = None;
    values.sort_by(|a, b| match value::compare(a, b, "<", meter) {
        Ok(Some(order)) => order,
        Ok(None) => std::cmp::Ordering::Equal,
        Err(fault) => {
            failure.get_or_insert(fault);
            std::cmp::Ordering::Equal
        }
    });
    match failure {
        Some(fault) => Err(fault),
        None => Ok(values),
    }
}

/// `plan_completion(plan_items, files_changed, threshold=90)`.
pub(crate) fn plan_completion<'a>(
    plan_items: &Val<'a>,
    files_changed: &Val<'a>,
    threshold: Option<&Val<'a>>,
    meter: &mut Meter,
) -> Res<Val<'a>> {
    if !plan_items.truthy() {
        return Ok(Val::Bool(true));
    }
    let changed = if files_changed.truthy() {
        Set::of(files_changed, &|| "`files_changed`".to_owned(), meter)?
    } else {
        Set::empty()
    };
    let items = elements(plan_items, "plan_completion", meter)?;
    let mut missing: Vec<&'a Map<String, Value>> = Vec::new();
    for item in &items {
        meter.charge(1)?;
        // An item that is not a record has no `file`: it counts as done, as in the reference.
        let Some(record) = item.as_object() else {
            continue;
        };
        let Some(file) = get(record, "file").filter(Val::truthy) else {
            continue;
        };
        let Some(key) = Key::of(&file) else {
            return Err(Fault::type_error(format!(
                "the `file` of a plan item is a `{}`, which cannot name a file",
                file.type_name()
            )));
        };
        if !changed.contains(&key) {
            missing.push(record);
        }
    }
    if let Some((SeqKind::Gen, _)) = plan_items.as_seq() {
        return Err(Fault::type_error(
            "`plan_completion` needs the plan items as a list: a generator has no length",
        ));
    }
    let total = items.len();
    let done = total - missing.len();
    let completion = done as f64 / total as f64 * 100.0;

    let line = |prefix: &str, record: &Map<String, Value>, meter: &mut Meter| -> Res<String> {
        let empty = Val::string(String::new());
        let text_of = |name: &str| get(record, name).unwrap_or_else(|| empty.clone());
        Ok(format!(
            "{prefix}: {} (expected in {})",
            text(&text_of("text"), meter)?,
            text(&text_of("file"), meter)?
        ))
    };
    let mut violations = Vec::new();
    for record in &missing {
        if get(record, "critical").is_some_and(|critical| critical.truthy()) {
            violations.push(line("Missing critical item", record, meter)?);
        }
    }
    if !violations.is_empty() {
        return Err(Fault::violations(violations));
    }

    let default = Val::Int(90);
    let threshold = threshold.unwrap_or(&default);
    if !threshold.is_number() {
        return Err(Fault::type_error(format!(
            "the `threshold` of `plan_completion` must be a number, not `{}`",
            threshold.type_name()
        )));
    }
    let below = value::compare(&Val::Float(completion), threshold, "<", meter)?
        == Some(std::cmp::Ordering::Less);
    if !below {
        return Ok(Val::Bool(true));
    }
    let percent = match threshold {
        Val::Int(i) => *i as f64,
        Val::Bool(b) => f64::from(u8::from(*b)),
        Val::Float(f) => *f,
        _ => f64::NAN,
    };
    let mut violations = vec![format!(
        "Plan completion {completion:.0}% is below threshold {percent:.0}%"
    )];
    for record in &missing {
        violations.push(line("Missing item", record, meter)?);
    }
    Err(Fault::violations(violations))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_equal_where_python_finds_the_values_equal() {
        assert_eq!(Key::of(&Val::Int(1)), Key::of(&Val::Float(1.0)));
        assert_eq!(Key::of(&Val::Bool(true)), Key::of(&Val::Int(1)));
        assert_eq!(Key::of(&Val::Float(-0.0)), Key::of(&Val::Int(0)));
        assert_ne!(Key::of(&Val::Float(1.5)), Key::of(&Val::Int(1)));
        assert_ne!(Key::of(&Val::string("1".into())), Key::of(&Val::Int(1)));
        assert_eq!(Key::of(&Val::List(Rc::new(Vec::new()))), None);
        assert_eq!(
            Key::of(&Val::Tuple(Rc::new(vec![Val::Int(1), Val::None]))),
            Some(Key::Tuple(vec![Key::Int(1), Key::None]))
        );
    }
}
