//! The flow's budget: caps on wall time (`ms`), dollars (`usd`), agent dispatches and tokens,
//! debited from the `usage` a `step_done` reports (`{tokens, dollars}`, or `{input_tokens,
//! output_tokens, model}` priced from the [`Pricing`](crate::Pricing) table). When anything
//! spent reaches its cap the flow ends `budget_exhausted`, before it dispatches again.

use serde_json::Value;
use stratum_compiler::plan::Budget;

use super::{Run, finish};
use crate::response::Response;
use crate::state::{BudgetCaps, BudgetConsumed, BudgetLedger, Cursor, FlowStatus};
use crate::store::StoreError;

use super::work::Work;

/// A ledger for a flow with any cap set.
pub(crate) fn ledger(budget: Option<&Budget>) -> Option<BudgetLedger> {
    let budget = budget?;
    let caps = BudgetCaps {
        ms: budget.ms,
        usd: budget.usd,
        max_agent_dispatches: budget.max_agent_dispatches,
        max_tokens: budget.max_tokens,
    };
    (caps != BudgetCaps::default()).then(|| BudgetLedger {
        caps,
        consumed: BudgetConsumed::default(),
    })
}

pub(crate) fn count_dispatch(work: &mut Work<'_>, run: &Run<'_>) -> Result<(), StoreError> {
    if work.get(&run.id)?.budget.is_none() {
        return Ok(());
    }
    work.update(&run.id, |header| {
        if let Some(ledger) = &mut header.budget {
            ledger.consumed.dispatches += 1;
        }
    })
}

/// Debits a step's reported usage.
pub(crate) fn debit(work: &mut Work<'_>, run: &Run<'_>, usage: &Value) -> Result<(), StoreError> {
    if work.get(&run.id)?.budget.is_none() {
        return Ok(());
    }
    let number = |key: &str| {
        usage
            .get(key)
            .and_then(Value::as_f64)
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    let (tokens, dollars) = match (number("tokens"), number("dollars")) {
        (tokens @ Some(_), dollars) | (tokens, dollars @ Some(_)) => {
            (tokens.unwrap_or(0.0), dollars.unwrap_or(0.0))
        }
        (None, None) => {
            let input = number("input_tokens").unwrap_or(0.0);
            let output = number("output_tokens").unwrap_or(0.0);
            let price = usage
                .get("model")
                .and_then(Value::as_str)
                .and_then(|model| run.ctx.config.pricing.price(model));
            let dollars = price.map_or(0.0, |price| {
                (input * price.input + output * price.output) / 1_000_000.0
            });
            (input + output, dollars)
        }
    };
    work.update(&run.id, |header| {
        if let Some(ledger) = &mut header.budget {
            ledger.consumed.tokens = ledger.consumed.tokens.saturating_add(tokens as u64);
            ledger.consumed.dollars += dollars;
        }
    })
}

/// Whether anything spent has reached its cap (wall time brought up to now first). The cap on
/// agent dispatches counts only when `agent_dispatch_next`: reaching it forbids another
/// dispatch, it does not undo the work of the last one (a cap of N dispatches allows N).
fn spent(
    work: &mut Work<'_>,
    run: &Run<'_>,
    agent_dispatch_next: bool,
) -> Result<bool, StoreError> {
    let header = work.get(&run.id)?;
    let Some(ledger) = &header.budget else {
        return Ok(false);
    };
    let wall_s = run.ctx.now_ms.saturating_sub(header.started_ms) as f64 / 1000.0;
    if ledger.caps.ms.is_some() && (wall_s - ledger.consumed.wall_s).abs() > f64::EPSILON {
        work.update(&run.id, |header| {
            if let Some(ledger) = &mut header.budget {
                ledger.consumed.wall_s = wall_s;
            }
        })?;
    }
    let caps = &ledger.caps;
    let consumed = &ledger.consumed;
    Ok(caps.ms.is_some_and(|ms| wall_s * 1000.0 >= ms as f64)
        || caps.usd.is_some_and(|usd| consumed.dollars >= usd)
        || (agent_dispatch_next
            && caps
                .max_agent_dispatches
                .is_some_and(|max| consumed.dispatches >= max))
        || caps.max_tokens.is_some_and(|max| consumed.tokens >= max))
}

/// Ends the flow `budget_exhausted` if it has spent a cap.
pub(crate) fn exhausted_after(
    work: &mut Work<'_>,
    run: &Run<'_>,
) -> Result<Option<Response>, StoreError> {
    exhaust_if_spent(work, run, false)
}

fn exhaust_if_spent(
    work: &mut Work<'_>,
    run: &Run<'_>,
    agent_dispatch_next: bool,
) -> Result<Option<Response>, StoreError> {
    if !spent(work, run, agent_dispatch_next)? {
        return Ok(None);
    }
    let (_, output) = finish::final_output(work, run)?;
    work.update(&run.id, |header| {
        header.output = Some(output);
        header.status = FlowStatus::BudgetExhausted;
        header.cursor = Cursor::End;
        header.finished_ms = Some(run.ctx.now_ms);
        header.dispatched_ms = None;
        header.active_iteration = None;
    })?;
    finish::envelope(work, run, None).map(Some)
}

/// Before a dispatch: the flow may not start more work past a cap. The dispatch about to
/// happen is not counted yet, so a cap of N dispatches allows N; a gate or a sub-flow
/// (`agent: false`) is not an agent dispatch and is not held back by that cap.
pub(crate) fn exhausted_before_dispatch(
    work: &mut Work<'_>,
    run: &Run<'_>,
    agent: bool,
) -> Result<Option<Response>, StoreError> {
    let header = work.get(&run.id)?;
    if header.budget.is_none() || header.dispatched_ms.is_some() {
        return Ok(None);
    }
    exhaust_if_spent(work, run, agent)
}
