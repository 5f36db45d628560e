//! The result cache of `cache: true` steps: keyed by the plan, the flow, the step and its
//! canonical inputs; a hit is checked again like a fresh result before it stands in for a
//! dispatch, and shows in the trace as `cache_hit`.

use stratum_compiler::plan::Step;

use super::dispatch::{self, Move};
use super::{Run, inputs, validate};
use crate::response::{Record, Response, StepRecord};
use crate::state::{EventBody, FlowHeader};
use crate::store::StoreError;

use super::work::Work;

/// Serves a `cache: true` step from the result cache: `Some(None)` when a cached result
/// passed the step's checks again and the walk goes on, `Some(Some(response))` when that ended
/// the flow, `None` on a miss (or a cached result that no longer passes).
pub(crate) fn serve_from_cache(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    step: &Step,
) -> Result<Option<Option<Response>>, StoreError> {
    let header = work.get(&run.id)?;
    let key = cache_key(work, run, &header, index, step)?;
    let Some(result) = work.cached(&key)? else {
        return Ok(None);
    };
    let verdict = validate::check_step_result(work, run, &header, step, &result)?;
    if !verdict.passed() {
        return Ok(None);
    }
    work.update_step(&run.id, index, |state| {
        state.output = Some(result);
        state.skipped = false;
    })?;
    let (function_name, agent, step_mode) = dispatch::record_identity(step);
    work.push_event(
        &run.id,
        EventBody::Record(Record::Step(StepRecord {
            step_id: step.id.clone(),
            function_name,
            attempts: 0,
            duration_ms: 0,
            round: header.round,
            round_start_step_id: run.step_id(header.round_start),
            agent,
            step_mode,
            child_flow_id: None,
            cache_hit: true,
            cache_key: Some(key),
            at_ms: run.ctx.now_ms,
            violations: Vec::new(),
        })),
    )?;
    Ok(Some(dispatch::move_to(
        work,
        run,
        index,
        step.next,
        Move::Forward,
    )?))
}

/// The result-cache key of a step: the plan, the flow, the step and its canonical inputs.
pub(crate) fn cache_key(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    index: u32,
    step: &Step,
) -> Result<String, StoreError> {
    let inputs = inputs::resolve_inputs(work, run, header, step)?;
    let material = serde_json::json!({
        "plan": run.plan.checksum,
        "flow": run.flow,
        "step": index,
        "inputs": inputs,
    });
    Ok(stratum_compiler::plan::sha256(
        validate::canonical_json(&material).as_bytes(),
    ))
}
