//! `stratum_commit` and `stratum_revert`: named snapshots of a flow's steps (outputs,
//! attempts, iteration state, child links), cursor, round and trace position. A revert
//! restores them, marks the trace written since as reverted, and dispatches as any move does
//! (gate policies apply). A finished flow cannot be reverted: what ended stays ended.

use super::dispatch::{self, Note};
use super::{Run, already_finished, current};
use crate::response::{Committed, ErrorResponse, Response};
use crate::state::Checkpoint;
use crate::store::StoreError;

use super::work::Work;

pub(crate) fn commit(
    work: &mut Work<'_>,
    run: &Run<'_>,
    label: &str,
) -> Result<Response, StoreError> {
    let label = label.trim();
    if label.is_empty() {
        return Ok(
            ErrorResponse::new("invalid_label", "label must be a non-empty string")
                .flow(run.id.as_str())
                .into_response(),
        );
    }
    let header = work.get(&run.id)?;
    if header.status.is_finished() {
        return Ok(already_finished(&header));
    }
    let mut steps = Vec::new();
    for index in work.steps_from(&run.id, 0)? {
        steps.push((index, work.step(&run.id, index)?));
    }
    work.put_checkpoint(
        &run.id,
        Checkpoint {
            label: label.to_owned(),
            cursor: header.cursor,
            killing: header.killing,
            round: header.round,
            round_start: header.round_start,
            active_iteration: header.active_iteration,
            children: header.children,
            events: header.events,
            steps,
        },
    )?;
    // In the order the labels were first committed, as the reference lists them.
    let checkpoints = work.checkpoint_labels(&run.id)?;
    let index = current(&header);
    Ok(Response::Committed(Committed {
        status: "committed",
        flow_id: run.id.to_string(),
        label: label.to_owned(),
        step_number: index.map(|index| index + 1),
        current_step_id: run.step_id(index),
        checkpoints,
    }))
}

pub(crate) fn revert(
    work: &mut Work<'_>,
    run: &Run<'_>,
    label: &str,
) -> Result<Response, StoreError> {
    let header = work.get(&run.id)?;
    if header.status.is_finished() {
        return Ok(already_finished(&header));
    }
    let Some(checkpoint) = work.checkpoint(&run.id, label.trim())? else {
        let available = work.checkpoint_labels(&run.id)?;
        let mut error = ErrorResponse::new(
            "checkpoint_not_found",
            format!("No checkpoint '{label}' on flow '{}'", run.id),
        )
        .flow(run.id.as_str());
        error.available = Some(available);
        return Ok(error.into_response());
    };
    // Children the restored steps do not wait for are cancelled; those they do are kept.
    for index in work.steps_from(&run.id, 0)? {
        let Some(child) = work.step(&run.id, index)?.child else {
            continue;
        };
        let kept = checkpoint
            .steps
            .iter()
            .any(|(at, state)| *at == index && state.child.as_ref() == Some(&child));
        if !kept {
            dispatch::cancel_child(work, run.ctx.now_ms, child)?;
        }
    }
    work.replace_steps(&run.id, checkpoint.steps)?;
    work.revert_events(&run.id, checkpoint.events)?;
    work.update(&run.id, |header| {
        header.cursor = checkpoint.cursor;
        header.killing = checkpoint.killing;
        header.round = checkpoint.round;
        header.round_start = checkpoint.round_start;
        header.active_iteration = checkpoint.active_iteration;
        header.dispatched_ms = None;
    })?;
    let response = dispatch::advance(
        work,
        run,
        Note {
            reverted_to: Some(checkpoint.label.clone()),
            ..Note::default()
        },
    )?;
    Ok(match response {
        crate::response::Response::Finished(mut finished) => {
            finished.reverted_to = Some(checkpoint.label);
            crate::response::Response::Finished(finished)
        }
        other => other,
    })
}
