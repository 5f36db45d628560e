"""Small flows driven over stdio by the official Python MCP SDK, output validation on.

    python flows_over_stdio.py STRATUM_MCP HOME WORKDIR

Runs the sentiment example (a refused result, its retry, completion) and the reviewed-work
example (a checkpoint, the gate approved, completion, the audit), and a refused call. Prints
one line per call (`tool -> status`); exits 1 with the reason on the first surprise.
To add a case: write an `async def` taking an `Agent`, and list it in `CASES`.
"""

from __future__ import annotations

import asyncio
import sys

from stratum_sdk import Agent, example, expect, over_stdio


async def sentiment(agent: Agent) -> None:
    spec = example("sentiment.stratum.yaml")
    step = expect(
        await agent.call("stratum_plan", {"spec": spec, "flow": "run", "inputs": {"text": "I love it"}}),
        "execute_step",
        "plan",
    )
    flow = step["flow_id"]
    refused = await agent.call(
        "stratum_step_done",
        {"flow_id": flow, "step_id": "s1", "result": {"label": "positive", "confidence": 0.5}},
    )
    expect(refused, "ensure_failed", "a result under the ensure")
    if not refused.get("violations"):
        raise AssertionError(f"a refused result says why: {refused}")
    done = await agent.call(
        "stratum_step_done",
        {"flow_id": flow, "step_id": "s1", "result": {"label": "positive", "confidence": 0.92}},
    )
    expect(done, "complete", "the retried result")
    if done.get("output") != {"label": "positive", "confidence": 0.92}:
        raise AssertionError(f"the flow's output is the step's result: {done}")


async def reviewed_work(agent: Agent) -> None:
    spec = example("reviewed-work.stratum.yaml")
    step = expect(
        await agent.call("stratum_plan", {"spec": spec, "flow": "reviewed_work", "inputs": {"text": "t"}}),
        "execute_step",
        "plan",
    )
    flow = step["flow_id"]
    expect(await agent.call("stratum_commit", {"flow_id": flow, "label": "start"}), "committed", "commit")
    gate = await agent.call(
        "stratum_step_done",
        {"flow_id": flow, "step_id": "work", "result": {"result": "r1", "quality_score": 0.9}},
    )
    expect(gate, "await_gate", "the work step's result")
    done = await agent.call(
        "stratum_gate_resolve",
        {"flow_id": flow, "step_id": "review", "outcome": "approve", "rationale": "fine", "resolved_by": "agent"},
    )
    expect(done, "complete", "the gate approved")
    expect(await agent.call("stratum_audit", {"flow_id": flow}), "complete", "audit")


async def refused_calls(agent: Agent) -> None:
    error = await agent.refused("stratum_step_done", {"flow_id": "x", "step_id": "s1", "result": "done"})
    expect(error, "error", "a result that is not an object")
    if error.get("error_type") != "invalid_argument":
        raise AssertionError(f"a bad argument is invalid_argument: {error}")
    unknown = await agent.call("stratum_audit", {"flow_id": "00000000-0000-4000-8000-000000000000"})
    expect(unknown, "error", "an unknown flow")


CASES = [sentiment, reviewed_work, refused_calls]


async def main(binary: str, home: str, cwd: str) -> None:
    async with over_stdio(binary, home, cwd) as agent:
        for case in CASES:
            await case(agent)
            print(f"ok {case.__name__}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    asyncio.run(main(*sys.argv[1:]))
