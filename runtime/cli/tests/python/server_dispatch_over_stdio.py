"""Version 0.3 fan-outs the server runs itself, driven over stdio by the official Python MCP SDK,
output validation on. WORKDIR must be a git repository with a commit, and a fake `claude` that
finds its task as `TASK[<id>]` in the prompt must be first on PATH (the Rust test sets both up;
it writes `<id>.txt` containing `from <id>` in its worktree and answers `{"summary": "<id>"}`).

    python server_dispatch_over_stdio.py STRATUM_MCP HOME WORKDIR

`sequential_apply`: stratum_parallel_start, then stratum_parallel_poll until the server settled
and evaluated the step; each task's change is merged into WORKDIR and the poll's `outcome` is
the next step. `manual`: the server runs the tasks and records their diffs; once the poll says
`can_advance` the client applies the diffs itself and calls stratum_parallel_advance. Besides
the SDK's own check, each answer is checked here against its tool's `outputSchema`. Prints one
`ok CASE` line per case; exits 1 with the reason on the first surprise.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema

from stratum_sdk import Agent, expect, over_stdio

STEPS = """
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        agent: claude
        output_contract: Change
        max_concurrent: 2
        task_timeout: 60
        retries: 2%s
      - id: report
        intent: "Say what changed"
        output_contract: Change
"""

SPEC = (
    """version: "0.3"
contracts:
  Change:
    summary: {type: string}
flows:
  build:
    input: {tasks: {type: array}}"""
    + STEPS % ""
    + """  manual:
    input: {tasks: {type: array}}"""
    + STEPS
    % """
        merge: manual
        capture_diff: true
        defer_advance: true"""
)


async def checked(agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`agent.call`, and the answer validated against the tool's declared `outputSchema`."""
    answer = await agent.call(tool, arguments)
    jsonschema.validate(answer, agent.tools[tool].outputSchema)
    return answer


def git(cwd: str, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


async def started(agent: Agent, cwd: str, flow_name: str, ids: list[str]) -> tuple[str, dict[str, Any]]:
    """A flow of `flow_name` over tasks `ids` (the second depends on the first), its tasks
    handed to the server; the flow id and the step's arguments."""
    tasks = [{"id": ids[0], "description": f"write {ids[0]}"}]
    tasks.append({"id": ids[1], "description": f"write {ids[1]}", "depends_on": [ids[0]]})
    envelope = expect(
        await checked(agent, "stratum_plan", {"spec": SPEC, "flow": flow_name, "inputs": {"tasks": tasks}}),
        "parallel_dispatch",
        "plan",
    )
    if envelope.get("dispatch") != "consumer":
        raise AssertionError(f"nobody took the tasks yet: {envelope}")
    flow = envelope["flow_id"]
    step = {"flow_id": flow, "step_id": "work"}
    start = expect(await checked(agent, "stratum_parallel_start", step), "started", "start")
    head = git(cwd, "rev-parse", "HEAD").strip()
    listed = [task["task_id"] for task in start["tasks"]]
    if (start.get("dispatch"), start.get("attempt"), start.get("base"), listed) != ("server", 1, head, ids):
        raise AssertionError(f"the server took both tasks of attempt 1 at HEAD: {start}")
    if start["tasks"][1]["prompt"] != f"Task TASK[{ids[1]}]: write {ids[1]}":
        raise AssertionError(f"each task with its rendered prompt: {start}")
    if start["tasks"][1]["depends_on"] != [ids[0]] or start["tasks"][1]["task_timeout"] != 60:
        raise AssertionError(f"dependencies and deadlines as written: {start}")
    return flow, step


async def settled(agent: Agent, step: dict[str, Any]) -> dict[str, Any]:
    """Polls until the server stops working on the tasks; the last poll."""
    until = time.monotonic() + 90
    while True:
        polled = expect(await checked(agent, "stratum_parallel_poll", step), "parallel_status", "poll")
        if polled.get("running") is False:
            return polled
        if time.monotonic() > until:
            raise AssertionError(f"the tasks never settled: {polled}")
        await asyncio.sleep(0.2)


def completed(polled: dict[str, Any], ids: list[str], merge: str) -> None:
    """Every task of `ids` complete with its result, in merge state `merge`."""
    states = [(task["task_id"], task["state"], task["merge"], task.get("result")) for task in polled["tasks"]]
    wanted = [(task, "complete", merge, {"summary": task}) for task in ids]
    if states != wanted:
        raise AssertionError(f"expected {wanted}, got {states}: {polled}")
    summary = polled["summary"]
    if summary.get("complete") != 2 or summary.get("failed") != 0 or polled.get("task_count") != 2:
        raise AssertionError(f"the summary counts both tasks complete: {polled}")
    if polled.get("require_satisfied") is not True or polled.get("can_advance") is not True:
        raise AssertionError(f"require is met and nothing is left to settle: {polled}")


async def finish(agent: Agent, flow: str, summary: str) -> None:
    done = expect(
        await checked(
            agent,
            "stratum_step_done",
            {"flow_id": flow, "step_id": "report", "result": {"summary": summary}},
        ),
        "complete",
        "the report step",
    )
    if done.get("output") != {"summary": summary}:
        raise AssertionError(f"the flow's output is the report: {done}")


def only_main_worktree(cwd: str) -> None:
    listed = git(cwd, "worktree", "list", "--porcelain")
    if sum(line.startswith("worktree ") for line in listed.splitlines()) != 1:
        raise AssertionError(f"every task worktree is removed: {listed}")


async def sequential_apply(agent: Agent, cwd: str) -> None:
    flow, step = await started(agent, cwd, "build", ["a", "b"])
    polled = await settled(agent, step)
    completed(polled, ["a", "b"], "merged")
    outcome = polled.get("outcome") or {}
    if (outcome.get("status"), outcome.get("step_id")) != ("execute_step", "report"):
        raise AssertionError(f"the server evaluated the step; the flow is at report: {polled}")
    for task in ("a", "b"):
        if (Path(cwd) / f"{task}.txt").read_text() != f"from {task}\n":
            raise AssertionError(f"task {task}'s change is merged into the project")
    only_main_worktree(cwd)
    refused = expect(await checked(agent, "stratum_parallel_advance", step), "error", "advance after the server did")
    if (refused.get("error_type"), refused.get("step_id")) != ("wrong_step", "report"):
        raise AssertionError(f"a step the server already evaluated is not advanced twice: {refused}")
    await finish(agent, flow, "a and b")
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", "a and b")


async def manual_merge(agent: Agent, cwd: str) -> None:
    flow, step = await started(agent, cwd, "manual", ["c", "d"])
    polled = await settled(agent, step)
    completed(polled, ["c", "d"], "unmerged")
    # With defer_advance the server leaves the evaluation to the client: what it ended with is
    # the tasks' report, not a move of the flow.
    ended = polled.get("outcome")
    if ended is not None and ended.get("status") != "parallel_status":
        raise AssertionError(f"with defer_advance the server does not evaluate the step: {polled}")
    for task in ("c", "d"):
        if (Path(cwd) / f"{task}.txt").exists():
            raise AssertionError(f"with merge: manual the server leaves the project alone ({task})")
    # The client merges: each recorded diff, in dependency order, onto the project.
    for task in polled["tasks"]:
        diff = task.get("diff") or ""
        if f"+from {task['task_id']}" not in diff or diff.startswith("base64:"):
            raise AssertionError(f"the task's diff is recorded as text: {task}")
        git(cwd, "apply", "--index", "-", stdin=diff)
    advanced = expect(
        await checked(agent, "stratum_parallel_advance", {**step, "merge_status": "clean"}),
        "execute_step",
        "advance",
    )
    if advanced.get("step_id") != "report":
        raise AssertionError(f"the advanced step moves the flow to report: {advanced}")
    for task in ("c", "d"):
        if (Path(cwd) / f"{task}.txt").read_text() != f"from {task}\n":
            raise AssertionError(f"task {task}'s diff applied by the client")
    await finish(agent, flow, "c and d")
    audit = expect(await checked(agent, "stratum_audit", {"flow_id": flow}), "complete", "audit")
    work = next((entry for entry in audit["trace"] if entry.get("step_id") == "work"), {})
    if (work.get("step_mode"), work.get("attempts")) != ("parallel_dispatch", 1):
        raise AssertionError(f"the audit records the parallel step, done in one attempt: {audit}")


async def main(binary: str, home: str, cwd: str) -> None:
    async with over_stdio(binary, home, cwd) as agent:
        for case in (sequential_apply, manual_merge):
            await case(agent, cwd)
            print(f"ok {case.__name__}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    asyncio.run(main(*sys.argv[1:]))
