//! Reading a plan back: what the runtime calls before it executes one.
//!
//! [`load`] refuses, each with an error that says what to do: a file too large to be a plan,
//! bytes that are not a plan at all, a plan of another format (from an older or newer
//! compiler), a plan whose checksum does not match its content (damaged or edited by hand),
//! and a plan whose indices point at nothing. What it accepts is safe to index: every step,
//! flow, contract and path index in it exists.

use serde::Deserialize;
use thiserror::Error;

use super::{
    Action, Binding, FORMAT, FanOut, Plan, READABLE_FORMATS, Target, Template, TemplatePart, Verify,
};

/// The largest plan [`load`] reads: far above any real spec's (a 10,000-step spec gives a
/// plan of about 16 MiB).
pub const MAX_PLAN_BYTES: usize = 512 * 1024 * 1024;

/// The deepest nesting [`load`] reads. A spec nests at most 128 levels, so the JSON values a
/// plan copies from it (`output_schema`s, defaults, judge configurations) sit at most a few
/// levels deeper than that: deeper than `serde_json`'s own limit of 128, which is why the
/// depth is checked here, without recursion, and that limit lifted.
pub const MAX_PLAN_DEPTH: usize = 256;

/// Why a plan cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LoadError {
    #[error("the plan is {size} bytes, more than the {max} a plan may have")]
    TooLarge { size: usize, max: usize },
    #[error("this is not a stratumc plan ({reason}); build one with `stratumc build SPEC -o PLAN`")]
    NotAPlan { reason: String },
    #[error(
        "the plan has format {found} (written by {compiler}), but this runtime reads format \
         {expected}; rebuild it from its spec with this version's `stratumc build`"
    )]
    IncompatibleFormat {
        found: u64,
        expected: u32,
        compiler: String,
    },
    #[error(
        "the plan is damaged ({reason}); it was written by {compiler}: rebuild it from its spec \
         with `stratumc build`"
    )]
    Corrupted { reason: String, compiler: String },
    #[error(
        "the plan's checksum does not match its content: it was changed after `stratumc build` \
         wrote it; rebuild it from its spec"
    )]
    ChecksumMismatch,
    #[error("the plan is inconsistent: {reason}; rebuild it from its spec with `stratumc build`")]
    Inconsistent { reason: String },
}

/// What every plan format has: read first, so that a plan of another format is told apart
/// from a damaged one.
#[derive(Deserialize)]
struct Header {
    format: Option<serde_json::Value>,
    compiler: Option<HeaderCompiler>,
}

#[derive(Deserialize)]
struct HeaderCompiler {
    name: Option<String>,
    version: Option<String>,
}

/// Reads a plan from its JSON and checks that this runtime can execute it.
pub fn load(bytes: &[u8]) -> Result<Plan, LoadError> {
    if bytes.len() > MAX_PLAN_BYTES {
        return Err(LoadError::TooLarge {
            size: bytes.len(),
            max: MAX_PLAN_BYTES,
        });
    }
    if let Some(depth) = nesting_beyond(bytes, MAX_PLAN_DEPTH) {
        return Err(LoadError::NotAPlan {
            reason: format!("it nests deeper than {depth} levels"),
        });
    }
    let header: Header = deserialize(bytes).map_err(|error| LoadError::NotAPlan {
        reason: error.to_string(),
    })?;
    let compiler = header
        .compiler
        .map(|compiler| {
            format!(
                "{} {}",
                compiler.name.as_deref().unwrap_or("an unknown compiler"),
                compiler.version.as_deref().unwrap_or("(version unknown)")
            )
        })
        .unwrap_or_else(|| "an unknown compiler".to_owned());
    match header.format {
        None => {
            return Err(LoadError::NotAPlan {
                reason: "it has no `format`".to_owned(),
            });
        }
        Some(serde_json::Value::Number(number)) => match number.as_u64() {
            Some(found) if READABLE_FORMATS.iter().any(|&f| u64::from(f) == found) => {}
            Some(found) => {
                return Err(LoadError::IncompatibleFormat {
                    found,
                    expected: FORMAT,
                    compiler,
                });
            }
            None => {
                return Err(LoadError::NotAPlan {
                    reason: format!("its `format` is {number}, not a version number"),
                });
            }
        },
        Some(other) => {
            return Err(LoadError::NotAPlan {
                reason: format!("its `format` is {other}, not a version number"),
            });
        }
    }
    let mut plan: Plan = deserialize(bytes).map_err(|error| LoadError::Corrupted {
        reason: error.to_string(),
        compiler: compiler.clone(),
    })?;
    let expected = plan.compute_checksum();
    if plan.checksum != expected {
        return Err(LoadError::ChecksumMismatch);
    }
    check_indices(&plan).map_err(|reason| LoadError::Inconsistent { reason })?;
    Ok(plan)
}

/// Reads JSON whose nesting [`nesting_beyond`] has bounded.
fn deserialize<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// `Some(limit)` when the brackets of the JSON text nest deeper than `limit` (strings
/// skipped); a scan, so that nothing recurses over a hostile file.
pub fn nesting_beyond(bytes: &[u8], limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(limit);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Every index in the plan points at something that exists.
fn check_indices(plan: &Plan) -> Result<(), String> {
    let flows = plan.flows.len();
    let in_range = |index: u32, len: usize| (index as usize) < len;
    if let Some(entry) = plan.entry
        && !in_range(entry, flows)
    {
        return Err(format!("its entry flow {entry} does not exist"));
    }
    for flow in &plan.flows {
        let steps = flow.steps.len();
        let name = &flow.name;
        let target = |target: Target, what: &str| match target {
            Target::Step(step) if !in_range(step, steps) => Err(format!(
                "{what} in flow `{name}` goes to step {step}, but the flow has {steps}"
            )),
            _ => Ok(()),
        };
        let contract = |index: Option<u32>, what: &str| match index {
            Some(index) if !in_range(index, plan.contracts.len()) => Err(format!(
                "{what} in flow `{name}` names contract {index}, which does not exist"
            )),
            _ => Ok(()),
        };
        target(flow.start, "the start")?;
        contract(flow.output, "the output")?;
        for (level, members) in flow.levels.iter().enumerate() {
            if let Some(step) = members.iter().find(|&&step| !in_range(step, steps)) {
                return Err(format!(
                    "level {level} of flow `{name}` lists step {step}, which does not exist"
                ));
            }
        }
        for step in &flow.steps {
            let what = format!("step `{}`", step.id);
            target(step.next, &what)?;
            if let Some(on_fail) = step.on_fail {
                target(on_fail, &what)?;
            }
            contract(step.output.contract, &what)?;
            if let Some(dependency) = step.depends_on.iter().find(|&&d| !in_range(d, steps)) {
                return Err(format!(
                    "{what} in flow `{name}` depends on step {dependency}, which does not exist"
                ));
            }
            match &step.action {
                Action::Gate {
                    on_approve,
                    on_revise,
                    on_kill,
                    ..
                } => {
                    target(*on_approve, &what)?;
                    target(*on_revise, &what)?;
                    target(*on_kill, &what)?;
                }
                Action::Flow { flow } if !in_range(*flow, flows) => {
                    return Err(format!(
                        "{what} in flow `{name}` runs flow {flow}, which does not exist"
                    ));
                }
                _ => {}
            }
            let mut bindings: Vec<(String, &Binding)> = step
                .inputs
                .iter()
                .map(|input| (format!("input `{}`", input.name), &input.value))
                .collect();
            let mut template_paths: Vec<u32> = Vec::new();
            match &step.action {
                Action::Parallel {
                    fan_out,
                    template,
                    task_contract,
                } => {
                    contract(*task_contract, &what)?;
                    fan_out_bindings(fan_out, &mut bindings);
                    template_paths.extend(template_part_paths(template));
                }
                Action::Pipeline { fan_out, stages } => {
                    fan_out_bindings(fan_out, &mut bindings);
                    for stage in stages {
                        template_paths.extend(template_part_paths(&stage.template));
                    }
                }
                _ => {}
            }
            if let Some(path) = template_paths
                .into_iter()
                .find(|&path| !in_range(path, plan.paths.len()))
            {
                return Err(format!(
                    "a template of {what} in flow `{name}` reads path {path}, which does not exist"
                ));
            }
            for (label, binding) in bindings {
                let (path, step_index) = match binding {
                    Binding::Input { path } => (*path, None),
                    Binding::Step { step, path } => (*path, Some(*step)),
                    Binding::Const(_) => continue,
                };
                if !in_range(path, plan.paths.len()) {
                    return Err(format!(
                        "{label} of {what} in flow `{name}` reads path {path}, which does not \
                         exist"
                    ));
                }
                if let Some(index) = step_index.filter(|&index| !in_range(index, steps)) {
                    return Err(format!(
                        "{label} of {what} in flow `{name}` reads step {index}, which does not \
                         exist"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The bindings a fan-out step reads when it starts.
fn fan_out_bindings<'p>(fan_out: &'p FanOut, bindings: &mut Vec<(String, &'p Binding)>) {
    bindings.push(("the source".to_owned(), &fan_out.source));
    if let Some(Verify::Binding(binding)) = &fan_out.pre_merge_verify {
        bindings.push(("`pre_merge_verify`".to_owned(), binding));
    }
}

fn template_part_paths(template: &Template) -> impl Iterator<Item = u32> + '_ {
    template.parts.iter().filter_map(|part| match part {
        TemplatePart::Value { path, .. } => Some(*path),
        TemplatePart::Text(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_measured_outside_strings() {
        assert_eq!(nesting_beyond(br#"{"a": [[1]]}"#, 3), None);
        assert_eq!(nesting_beyond(br#"{"a": [[[1]]]}"#, 3), Some(3));
        assert_eq!(nesting_beyond(br#"{"a": "[[[[\"[[[["}"#, 1), None);
    }

    #[test]
    fn a_deeply_nested_file_is_refused_without_recursing() {
        let bomb = "[".repeat(1_000_000);
        assert_eq!(
            load(bomb.as_bytes()),
            Err(LoadError::NotAPlan {
                reason: format!("it nests deeper than {MAX_PLAN_DEPTH} levels")
            })
        );
    }
}
