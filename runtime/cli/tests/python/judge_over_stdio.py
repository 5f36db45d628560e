"""`stratum_judge` driven over stdio by the official Python MCP SDK, output validation on.

    python judge_over_stdio.py STRATUM_MCP HOME WORKDIR

A judge step with two deterministic predicates (one reads a staged artifact, one a project file
staged from WORKDIR): `stratum_step_done` on it is refused (`judge_required`), before and after
a verdict; the server's first verdict is not met (the attempt fails with the findings as
violations), its second is met and the flow moves on; a call whose stakes are not the step's is
refused. Besides the SDK's own check, each answer is checked here against its tool's
`outputSchema`. Prints one `ok CASE` line per case; exits 1 with the reason on the first
surprise.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import jsonschema

from stratum_sdk import Agent, expect, over_stdio

SPEC = """version: "0.3"
flows:
  main:
    input: {}
    steps:
      - id: check
        retries: 3
        judge:
          predicates:
            - {id: tests, type: deterministic, statement: "file_contains('artifacts/log.txt', ' passed')"}
            - {id: notes, type: deterministic, statement: "file_contains('modified/notes.md', 'reviewed')", applied_gate: 9}
        ensure: ["result.met == True"]
      - id: ship
        intent: "Ship it"
"""

PREDICATES = [
    {"id": "tests", "type": "deterministic", "statement": "file_contains('artifacts/log.txt', ' passed')"},
    {"id": "notes", "type": "deterministic", "statement": "file_contains('modified/notes.md', 'reviewed')"},
]


async def checked(agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`agent.call`, and the answer validated against the tool's declared `outputSchema`."""
    answer = await agent.call(tool, arguments)
    jsonschema.validate(answer, agent.tools[tool].outputSchema)
    return answer


async def judge_required(agent: Agent, flow: str) -> None:
    refused = expect(
        await checked(
            agent,
            "stratum_step_done",
            {"flow_id": flow, "step_id": "check", "result": {"met": True, "clean": True}},
        ),
        "error",
        "step_done on the judge step",
    )
    if refused.get("error_type") != "judge_required" or "stratum_judge" not in refused.get("message", ""):
        raise AssertionError(f"a judge step's verdict is the server's: {refused}")


def judging(flow: str, log: str) -> dict[str, Any]:
    return {
        "flow_id": flow,
        "step_id": "check",
        "artifacts": {"log": log},
        "modified_files": ["notes.md"],
    }


def tiers(predicate: dict[str, Any]) -> list[tuple[str, str]]:
    return [(tier["tier"], tier["verdict"]) for tier in predicate["tier_history"]]


async def not_met_then_met(agent: Agent, cwd: str) -> None:
    Path(cwd, "notes.md").write_text("# Notes\nreviewed by a person\n")
    planned = expect(await checked(agent, "stratum_plan", {"spec": SPEC, "flow": "main"}), "execute_step", "plan")
    if (planned.get("step_mode"), planned.get("step_id"), planned.get("stakes")) != ("judge", "check", "default"):
        raise AssertionError(f"the judge step is dispatched with its stakes: {planned}")
    sent = [{key: predicate[key] for key in ("id", "type", "statement")} for predicate in planned["predicates"]]
    if sent != PREDICATES:
        raise AssertionError(f"the judge step is dispatched with its predicates: {planned}")
    flow = planned["flow_id"]
    await judge_required(agent, flow)

    unmet = expect(await checked(agent, "stratum_judge", judging(flow, "3 failed")), "judged", "a failing log")
    verdict = unmet["verdict"]
    if (verdict.get("met"), verdict.get("clean"), unmet.get("step_id")) != (False, False, "check"):
        raise AssertionError(f"one predicate not met: the verdict is not met: {unmet}")
    verdicts = [(predicate["id"], predicate["verdict"], predicate["confidence"]) for predicate in verdict["predicates"]]
    if verdicts != [("tests", "not_met", 10), ("notes", "met", 10)]:
        raise AssertionError(f"each predicate decided by the first tier: {verdicts}")
    if tiers(verdict["predicates"][0]) != [("T1", "not_met")] or verdict["predicates"][1]["applied_gate"] != 9:
        raise AssertionError(f"the tiers and gates recorded: {verdict['predicates']}")
    findings = [(finding["lens"], finding["severity"]) for finding in verdict["findings"]]
    if findings != [("judge", "must-fix")] or "' passed'" not in verdict["findings"][0]["finding"]:
        raise AssertionError(f"a not-met predicate is a must-fix finding: {verdict['findings']}")
    if verdict["budget_consumed"]["turns"] != 2 or verdict["tier_disagreements"] != []:
        raise AssertionError(f"two first-tier turns, nothing to disagree on: {verdict}")
    if verdict["meta"]["t3_summary"] != {"reached": 0, "by_mode": {}, "all_jailed": False, "any_degraded": False}:
        raise AssertionError(f"no cold read at default stakes: {verdict['meta']}")
    turn = Path(verdict["meta"]["turn_dir"])
    if (turn / "artifacts" / "log.txt").read_text() != "3 failed" or not (turn / "modified" / "notes.md").is_file():
        raise AssertionError(f"the turn directory holds what was judged: {turn}")
    retry = unmet["next"]
    if (retry.get("status"), retry.get("step_id")) != ("ensure_failed", "check"):
        raise AssertionError(f"a verdict not met fails the attempt: {unmet}")
    if not any("predicate 'tests' not met" in violation for violation in retry.get("violations", [])):
        raise AssertionError(f"the findings are the attempt's violations: {retry}")
    await judge_required(agent, flow)

    met = expect(await checked(agent, "stratum_judge", judging(flow, "12 passed")), "judged", "a passing log")
    if met["verdict"].get("met") is not True or [p["verdict"] for p in met["verdict"]["predicates"]] != ["met", "met"]:
        raise AssertionError(f"both predicates met: {met}")
    if not met["verdict"]["meta"]["turn_dir"].endswith("turn-2"):
        raise AssertionError(f"each call is a turn of its own: {met['verdict']['meta']}")
    moved = met["next"]
    if (moved.get("status"), moved.get("step_id")) != ("execute_step", "ship"):
        raise AssertionError(f"a met verdict completes the judge step: {met}")
    done = expect(
        await checked(agent, "stratum_step_done", {"flow_id": flow, "step_id": "ship", "result": {"shipped": True}}),
        "complete",
        "ship",
    )
    judged = next((entry for entry in done["trace"] if entry.get("step_id") == "check"), {})
    if (judged.get("step_mode"), judged.get("attempts")) != ("judge", 2):
        raise AssertionError(f"the trace records the judge step and its two verdicts: {done}")


async def refused_calls(agent: Agent, cwd: str) -> None:
    flow = expect(await checked(agent, "stratum_plan", {"spec": SPEC, "flow": "main"}), "execute_step", "plan")[
        "flow_id"
    ]
    stakes = expect(
        await checked(agent, "stratum_judge", {**judging(flow, "12 passed"), "stakes": "cheap"}),
        "error",
        "stakes that are not the step's",
    )
    if stakes.get("error_type") != "stakes_mismatch":
        raise AssertionError(f"the stakes are the plan's: {stakes}")
    escape = expect(
        await checked(agent, "stratum_judge", {**judging(flow, "x"), "modified_files": ["../outside.md"]}),
        "error",
        "a file out of the project",
    )
    if (escape.get("error_type"), escape.get("argument")) != ("invalid_argument", "modified_files"):
        raise AssertionError(f"a path out of the project is refused: {escape}")
    # Neither refusal spent an attempt or judged anything.
    resumed = expect(await checked(agent, "stratum_resume", {"flow_id": flow}), "execute_step", "resume")
    if (resumed.get("step_id"), resumed.get("retries_remaining")) != ("check", 3):
        raise AssertionError(f"a refused call changes nothing: {resumed}")


async def main(binary: str, home: str, cwd: str) -> None:
    async with over_stdio(binary, home, cwd) as agent:
        for case in (not_met_then_met, refused_calls):
            await case(agent, cwd)
            print(f"ok {case.__name__}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    asyncio.run(main(*sys.argv[1:]))
