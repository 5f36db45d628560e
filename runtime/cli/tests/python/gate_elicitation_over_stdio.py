"""A gate a person decides in the client's form, with the official Python MCP SDK as the client.

    python gate_elicitation_over_stdio.py STRATUM_MCP HOME WORKDIR

The SDK's `elicitation_callback` plays the person: the `stratum_step_done` that brings the
flow to its gate asks through `elicitation/create`, and so does `stratum_gate_wait`; the
form's answer resolves the gate, and the audit records `resolved_by: human`,
`via: elicitation` and the client. A declined form leaves the gate waiting: the step's answer
is the gate (`await_gate`), `stratum_gate_wait`'s is `gate_pending`. Prints one `ok CASE` line
per case; exits 1 on the first surprise.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import mcp.types as types

from release_spec import SPEC
from stratum_sdk import expect, over_stdio

ASKED: list[str] = []


def person(*decisions: str | None):
    """A person who answers the forms with `decisions` in turn (None: declines)."""
    queue = list(decisions)

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        ASKED.append(params.message)
        decision = queue.pop(0) if queue else None
        if decision is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(
            action="accept", content={"decision": decision, "rationale": "read it in the form"}
        )

    return answer


async def reach_gate(agent: Any) -> tuple[str, dict[str, Any]]:
    """Plans the flow and finishes the step before its gate: the flow and that answer."""
    planned = await agent.call("stratum_plan", {"spec": SPEC, "flow": "release", "inputs": {}})
    flow = planned["flow_id"]
    reached = await agent.call(
        "stratum_step_done",
        {"flow_id": flow, "step_id": "write", "result": {"text": "v1.2: faster gates"}},
    )
    return flow, reached


def decided_in_form(audit: dict[str, Any]) -> None:
    gates = [record for record in audit["trace"] if "outcome" in record]
    record = gates[0]
    if (record["resolved_by"], record.get("via")) != ("human", "elicitation"):
        raise AssertionError(f"the audit does not say a person decided in a form: {record}")
    if not record.get("client"):
        raise AssertionError(f"the audit does not name the client: {record}")


async def main(binary: str, home: str, work: str) -> None:
    async with over_stdio(binary, home, work, elicitation_callback=person("approve")) as agent:
        flow, done = await reach_gate(agent)
        expect(done, "complete", "the person asked when the gate is reached approves")
        if "v1.2: faster gates" not in ASKED[-1]:
            raise AssertionError(f"the form did not show the work: {ASKED[-1]}")
        decided_in_form(await agent.call("stratum_audit", {"flow_id": flow}))
        print("ok approve_when_reached")
    async with over_stdio(binary, home, work, elicitation_callback=person(None, "approve")) as agent:
        flow, reached = await reach_gate(agent)
        expect(reached, "await_gate", "declined when reached, the gate waits")
        done = await agent.call("stratum_gate_wait", {"flow_id": flow, "step_id": "review"})
        expect(done, "complete", "the person's approval in gate_wait's form ends the flow")
        decided_in_form(await agent.call("stratum_audit", {"flow_id": flow}))
        print("ok approve_in_gate_wait")
    async with over_stdio(binary, home, work, elicitation_callback=person(None, None)) as agent:
        flow, reached = await reach_gate(agent)
        expect(reached, "await_gate", "declined when reached, the gate waits")
        pending = await agent.call("stratum_gate_wait", {"flow_id": flow, "step_id": "review"})
        expect(pending, "gate_pending", "a declined form leaves the gate waiting")
        if pending["reason"] != "declined":
            raise AssertionError(f"reason: {pending}")
        still = await agent.call("stratum_resume", {"flow_id": flow})
        expect(still, "await_gate", "the gate still waits")
        print("ok declined")


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:4]))
    except Exception as error:  # noqa: BLE001 - any surprise fails the test with its reason
        print(f"FAIL {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
