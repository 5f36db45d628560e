"""The agent-run and background-flow tools driven over stdio by the official Python MCP SDK,
output validation on. A fake `claude` must be first on PATH (the Rust test puts it there).

    python agents_over_stdio.py STRATUM_MCP HOME WORKDIR

Runs an agent on a prompt (answered), hands a started flow to the server and polls it to its
end, and checks that a bad run id is refused. Prints one `ok CASE` line per case; exits 1 with
the reason on the first surprise.
"""

from __future__ import annotations

import asyncio
import sys

from stratum_sdk import Agent, expect, over_stdio

SPEC = """version: "0.2"
contracts:
  Part:
    n: {type: integer}
flows:
  main:
    input: {}
    output: Part
    steps:
      - id: one
        intent: "First"
        output_contract: Part
      - id: two
        intent: "Second"
        output_contract: Part
        depends_on: [one]
"""


async def agent_run(agent: Agent) -> None:
    answer = expect(
        await agent.call("stratum_agent_run", {"prompt": "Give n", "schema": {"type": "object"}}),
        "answered",
        "a run",
    )
    if answer.get("result") != {"n": 1}:
        raise AssertionError(f"the run's result is the agent's JSON object: {answer}")
    polled = expect(
        await agent.call("stratum_agent_poll", {"run_id": answer["run_id"]}), "answered", "poll"
    )
    if polled.get("pid") is None:
        raise AssertionError(f"a run records its process: {polled}")


async def flow_run_bg(agent: Agent) -> None:
    first = expect(await agent.call("stratum_plan", {"spec": SPEC}), "execute_step", "plan")
    flow = first["flow_id"]
    expect(await agent.call("stratum_flow_run_bg", {"flow_id": flow}), "bg_started", "run_bg")
    for _ in range(600):
        polled = await agent.call("stratum_flow_bg_poll", {"flow_id": flow})
        if polled["status"] == "complete":
            if polled.get("output") != {"n": 1} or polled.get("steps_completed") != 2:
                raise AssertionError(f"the completed flow's output and steps: {polled}")
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the flow never completed: {polled}")


async def refused_calls(agent: Agent) -> None:
    error = await agent.refused("stratum_agent_poll", {"run_id": "../x"})
    if error.get("error_type") != "run_not_found":
        raise AssertionError(f"a malformed run id is refused as not found: {error}")


CASES = [agent_run, flow_run_bg, refused_calls]


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
