//! A fan-out step's task set, read from a list of task objects (a `source` element each, or a
//! decompose step's task graph) and checked as a graph: ids are safe names, unique, every
//! dependency is known and none is circular; the tasks come out in dependency order.
//!
//! A task id may end up in a path (its worktree), so the rule is strict: an ASCII letter or
//! digit, then letters, digits, `_`, `.` or `-`, at most [`MAX_TASK_ID`] characters. No
//! separator, no `..`, nothing a shell or git could read as an option.

use serde_json::Value;

/// The most tasks one step fans out to.
pub(crate) const MAX_TASKS: usize = 256;
/// The longest task id.
pub(crate) const MAX_TASK_ID: usize = 64;

/// Whether `id` is a safe task id.
pub(crate) fn is_safe_id(id: &str) -> bool {
    let mut chars = id.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    id.len() <= MAX_TASK_ID
        && first.is_ascii_alphanumeric()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// One task as read: its id, dependencies and the element it came from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TaskSpec {
    pub(crate) id: String,
    pub(crate) depends_on: Vec<String>,
    pub(crate) element: Value,
}

/// Reads `list` (what `what` names, for the messages) as a task graph. `allow_empty`: a
/// decompose step may find nothing to do (its ensures decide); a fan-out needs a task.
pub(crate) fn read_graph(
    list: &Value,
    what: &str,
    allow_empty: bool,
) -> Result<Vec<TaskSpec>, Vec<String>> {
    let Some(items) = list.as_array() else {
        return Err(vec![format!(
            "{what} must be a list of task objects, got {}",
            type_name(list)
        )]);
    };
    if items.is_empty() && !allow_empty {
        return Err(vec![format!(
            "{what} is an empty list: there is no task to run"
        )]);
    }
    if items.len() > MAX_TASKS {
        return Err(vec![format!(
            "{what} has {} tasks, more than the {MAX_TASKS} one step may run; split the work",
            items.len()
        )]);
    }
    let mut problems = Vec::new();
    let mut tasks: Vec<TaskSpec> = Vec::with_capacity(items.len());
    for (at, item) in items.iter().enumerate() {
        let Some(object) = item.as_object() else {
            problems.push(format!(
                "{what}[{at}] must be an object with an `id`, got {}",
                type_name(item)
            ));
            continue;
        };
        let id = match object.get("id") {
            Some(Value::String(id)) if is_safe_id(id) => id.clone(),
            Some(Value::String(id)) => {
                problems.push(format!(
                    "{what}[{at}] has the id {}, which is not a safe task id: use 1 to {MAX_TASK_ID} letters, digits, '_', '.' or '-', starting with a letter or digit (no '/' and no '..')",
                    quoted(id)
                ));
                continue;
            }
            Some(other) => {
                problems.push(format!(
                    "{what}[{at}] has an `id` that is {}, not a string",
                    type_name(other)
                ));
                continue;
            }
            None => {
                problems.push(format!("{what}[{at}] has no `id`"));
                continue;
            }
        };
        if tasks.iter().any(|task| task.id == id) {
            problems.push(format!("{what} has the task id '{id}' twice"));
            continue;
        }
        let depends_on = match object.get("depends_on") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(ids)) => {
                let mut names = Vec::with_capacity(ids.len());
                for dependency in ids {
                    match dependency.as_str() {
                        Some(name) if !names.iter().any(|known: &String| known == name) => {
                            names.push(name.to_owned())
                        }
                        Some(_) => {}
                        None => problems.push(format!(
                            "task '{id}' has a `depends_on` entry that is {}, not a task id",
                            type_name(dependency)
                        )),
                    }
                }
                names
            }
            Some(other) => {
                problems.push(format!(
                    "task '{id}' has a `depends_on` that is {}, not a list of task ids",
                    type_name(other)
                ));
                Vec::new()
            }
        };
        tasks.push(TaskSpec {
            id,
            depends_on,
            element: item.clone(),
        });
    }
    for task in &tasks {
        for dependency in &task.depends_on {
            if dependency == &task.id {
                problems.push(format!("task '{}' depends on itself", task.id));
            } else if !tasks.iter().any(|other| &other.id == dependency) {
                problems.push(format!(
                    "task '{}' depends on '{}', which is not a task of {what}",
                    task.id,
                    shown(dependency)
                ));
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    order(tasks).map_err(|cycle| vec![format!("dependency cycle: {cycle}")])
}

/// The tasks in dependency order (stable: among tasks ready together, the list's order), or
/// the cycle that prevents one, as `a -> b -> a`.
fn order(tasks: Vec<TaskSpec>) -> Result<Vec<TaskSpec>, String> {
    let mut left = tasks;
    let mut ordered: Vec<TaskSpec> = Vec::with_capacity(left.len());
    loop {
        let ready = left.iter().position(|task| {
            task.depends_on
                .iter()
                .all(|dependency| ordered.iter().any(|done| &done.id == dependency))
        });
        match ready {
            Some(at) => ordered.push(left.remove(at)),
            None if left.is_empty() => return Ok(ordered),
            None => return Err(cycle(&left)),
        }
    }
}

/// A cycle among `left` (tasks none of which is ready): follow a dependency still left until
/// a task comes round again.
fn cycle(left: &[TaskSpec]) -> String {
    let mut path: Vec<&str> = Vec::new();
    let mut at = left.first();
    while let Some(task) = at {
        if let Some(start) = path.iter().position(|id| *id == task.id) {
            let mut names: Vec<&str> = path.get(start..).unwrap_or_default().to_vec();
            names.push(&task.id);
            return names.join(" -> ");
        }
        path.push(&task.id);
        at = task
            .depends_on
            .iter()
            .find_map(|dependency| left.iter().find(|other| &other.id == dependency));
    }
    path.join(" -> ")
}

/// The structural rules of a decompose step's result: an object whose `tasks` is a task
/// graph. Its own `ensure`s (`no_file_conflicts`) come after.
pub(crate) fn task_graph_violations(result: &Value) -> Vec<String> {
    match result.get("tasks") {
        Some(tasks) => read_graph(tasks, "result.tasks", true)
            .err()
            .unwrap_or_default(),
        None => vec![format!(
            "a decompose step's result must be an object with `tasks` (a list of {{id, description, depends_on, files_owned, files_read}}), got {}",
            if result.is_object() {
                "an object without `tasks`"
            } else {
                type_name(result)
            }
        )],
    }
}

pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A hostile id, shown bounded and with its control characters escaped.
fn quoted(id: &str) -> String {
    format!("'{}'", shown(id))
}

fn shown(id: &str) -> String {
    let mut text: String = id.chars().take(80).flat_map(char::escape_default).collect();
    if id.chars().count() > 80 {
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn safe_ids_are_names_not_paths() {
        for good in ["a", "task-1", "A.b_c", "0"] {
            assert!(is_safe_id(good), "{good}");
        }
        for bad in [
            "",
            "..",
            ".a",
            "../../x",
            "a/b",
            "a\\b",
            "-rf",
            "a b",
            &"x".repeat(65),
        ] {
            assert!(!is_safe_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_graph_comes_out_in_dependency_order() {
        let tasks = read_graph(
            &json!([{"id": "c", "depends_on": ["b"]}, {"id": "a"}, {"id": "b", "depends_on": ["a"]}]),
            "source",
            false,
        )
        .unwrap();
        let ids: Vec<&str> = tasks.iter().map(|task| task.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
    }

    #[test]
    fn every_structural_problem_is_named() {
        let problems = read_graph(
            &json!([{"id": "../../x"}, {"id": "a"}, {"id": "a"}, {"id": "b", "depends_on": ["zz"]}, 3]),
            "source",
            false,
        )
        .unwrap_err();
        let text = problems.join("\n");
        assert!(
            text.contains("'../../x', which is not a safe task id"),
            "{text}"
        );
        assert!(text.contains("the task id 'a' twice"), "{text}");
        assert!(text.contains("depends on 'zz'"), "{text}");
        assert!(text.contains("source[4] must be an object"), "{text}");
        let cycle = read_graph(
            &json!([{"id": "a", "depends_on": ["b"]}, {"id": "b", "depends_on": ["a"]}]),
            "source",
            false,
        )
        .unwrap_err();
        assert_eq!(cycle, ["dependency cycle: a -> b -> a"]);
        assert!(read_graph(&json!([]), "source", false).is_err());
        assert!(read_graph(&json!([]), "source", true).unwrap().is_empty());
    }
}
