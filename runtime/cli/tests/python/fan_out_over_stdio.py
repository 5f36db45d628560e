"""A version 0.3 fan-out the agent runs itself, driven over stdio by the official Python MCP
SDK, output validation on.

    python fan_out_over_stdio.py STRATUM_MCP HOME WORKDIR

Plans a spec whose decompose step is answered with a task graph, reads the parallel_dispatch
envelope (each task with its rendered `prompt`), sends reports the server refuses (an unknown
task, a task twice, a `merge_status` that is neither clean nor conflict, `stratum_step_done` on
the parallel step), then a partial report whose retry lists only the missing task, then the
rest: the flow completes. Besides the SDK's own check, each answer is checked here against the
`outputSchema` its tool declared in `tools/list`. Prints one `ok CASE` line per case; exits 1
with the reason on the first surprise.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import jsonschema

from stratum_sdk import Agent, expect, over_stdio

SPEC = """version: "0.3"
contracts:
  TaskGraph:
    tasks: {type: array}
  Change:
    summary: {type: string}
flows:
  feature:
    input: {feature: {type: string}}
    steps:
      - id: plan
        type: decompose
        agent: claude
        intent: "Split the feature into tasks"
        inputs: {feature: "$.input.feature"}
        output_contract: TaskGraph
        ensure: ["no_file_conflicts(result.tasks)"]
      - id: work
        type: parallel_dispatch
        source: "$.steps.plan.output.tasks"
        intent_template: "Do {description} (id {id})"
        output_contract: Change
        retries: 2
"""

TASKS = [
    {"id": "a", "description": "A", "depends_on": [], "files_owned": ["x.py"]},
    {"id": "b", "description": "B", "files_owned": ["y.py"]},
]


async def checked(agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`agent.call`, and the answer validated against the tool's declared `outputSchema`."""
    answer = await agent.call(tool, arguments)
    jsonschema.validate(answer, agent.tools[tool].outputSchema)
    return answer


def done(task: str) -> dict[str, Any]:
    return {"task_id": task, "status": "complete", "result": {"summary": f"did {task}"}}


def ids(envelope: dict[str, Any]) -> list[str]:
    return [task["id"] for task in envelope["tasks"]]


async def at_fan_out(agent: Agent) -> tuple[str, dict[str, Any]]:
    planned = expect(
        await checked(
            agent, "stratum_plan", {"spec": SPEC, "flow": "feature", "inputs": {"feature": "search"}}
        ),
        "execute_step",
        "plan",
    )
    if planned.get("step_mode") != "decompose":
        raise AssertionError(f"the first step is the decompose step: {planned}")
    flow = planned["flow_id"]
    envelope = expect(
        await checked(
            agent,
            "stratum_step_done",
            {"flow_id": flow, "step_id": "plan", "result": {"tasks": TASKS}},
        ),
        "parallel_dispatch",
        "the task graph",
    )
    return flow, envelope


async def consumer_dispatch(agent: Agent) -> None:
    flow, envelope = await at_fan_out(agent)
    if ids(envelope) != ["a", "b"] or envelope["tasks"][0].get("prompt") != "Do A (id a)":
        raise AssertionError(f"every task with its rendered prompt: {envelope}")
    if (envelope.get("require"), envelope.get("attempt"), envelope.get("dispatch")) != ("all", 1, "consumer"):
        raise AssertionError(f"require, attempt and dispatch: {envelope}")
    if envelope.get("intent_template") != "Do {description} (id {id})":
        raise AssertionError(f"the template as written: {envelope}")

    def report(results: list[dict[str, Any]]) -> dict[str, Any]:
        return {"flow_id": flow, "step_id": "work", "task_results": results, "merge_status": "clean"}

    retry = expect(
        await checked(agent, "stratum_parallel_done", report([done("a")])),
        "ensure_failed",
        "a partial report",
    )
    if ids(retry) != ["b"] or retry.get("kept") != ["a"] or retry.get("attempt") != 2:
        raise AssertionError(f"the retry runs only the missing task: {retry}")
    if "task 'b' was not reported" not in retry["tasks"][0]["prompt"]:
        raise AssertionError(f"the retried task's prompt says why: {retry}")
    complete = expect(
        await checked(agent, "stratum_parallel_done", report([done("b")])),
        "complete",
        "the rest",
    )
    completed = [entry["task_id"] for entry in complete["output"]["completed"]]
    if completed != ["a", "b"] or complete["output"]["outcome"] != "complete":
        raise AssertionError(f"the aggregate counts both tasks: {complete}")
    expect(await checked(agent, "stratum_audit", {"flow_id": flow}), "complete", "audit")


async def refused_reports(agent: Agent) -> None:
    flow, _ = await at_fan_out(agent)
    cases = [
        ("stratum_parallel_done", [done("zz")], "clean", "unknown_task"),
        ("stratum_parallel_done", [done("a"), done("a")], "clean", "duplicate_task"),
        ("stratum_parallel_done", [done("a")], "merged-ish", "invalid_merge_status"),
    ]
    for tool, results, merge, error_type in cases:
        refused = expect(
            await checked(
                agent,
                tool,
                {"flow_id": flow, "step_id": "work", "task_results": results, "merge_status": merge},
            ),
            "error",
            error_type,
        )
        if refused.get("error_type") != error_type:
            raise AssertionError(f"expected {error_type}: {refused}")
    whole = expect(
        await checked(
            agent,
            "stratum_step_done",
            {"flow_id": flow, "step_id": "work", "result": {"outcome": "complete"}},
        ),
        "error",
        "step_done on a parallel step",
    )
    if whole.get("error_type") != "wrong_step_type":
        raise AssertionError(f"a parallel step is reported with stratum_parallel_done: {whole}")
    resumed = expect(
        await checked(agent, "stratum_resume", {"flow_id": flow}), "parallel_dispatch", "resume"
    )
    if resumed.get("attempt") != 1:
        raise AssertionError(f"no refusal spent an attempt: {resumed}")


CASES = [consumer_dispatch, refused_reports]


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
