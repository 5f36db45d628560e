"""The Python MCP SDK's cost per call against `stratum-mcp`, over stdio and over HTTP.

    python bench_sdk.py STRATUM_MCP [--clients 1,20] [--flows 2] [--steps 10]
                        [--validate-against served|full] [--transports stdio,http]

Run by `cargo bench -p stratum-mcp-cli --bench python_sdk` (release build, SDK installed by
scripts/ensure-python-mcp). Each client is its own process with its own SDK session, default
output validation on, and runs FLOWS flows of a STEPS-step spec: stratum_plan, a
stratum_commit, then stratum_step_done per step to completion. Over stdio each client starts
its own `stratum-mcp` (all on one store, as agents on one machine do); over HTTP all share one
`stratum-mcp serve` (one access token). Prints, per transport and client count: throughput
(steps per second, all clients together), the client's time per call (p50, p99), and the CPU
time the SDK's `jsonschema.validate` took per call of each tool.

`--validate-against full` makes the SDK check answers against the full documented schemas of
runtime/cli/schemas/tools/ (what `tools/list` served before issue 25) instead of the served ones:
the before and after of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema

from stratum_sdk import over_http, over_stdio

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "tools"


def spec(steps: int) -> str:
    """A linear flow of `steps` infer steps, each reading the one before, with an ensure."""
    lines = [
        'version: "0.1"',
        "contracts:",
        "  Out: {value: {type: number}}",
        "functions:",
        "  work:",
        "    mode: infer",
        '    intent: "Produce the next value"',
        "    input: {n: {type: number}}",
        "    output: Out",
        '    ensure: ["result.value >= 0"]',
        "    retries: 2",
        "flows:",
        "  run:",
        "    input: {n: {type: number}}",
        "    output: Out",
        "    steps:",
    ]
    for index in range(1, steps + 1):
        source = '"$.input.n"' if index == 1 else f'"$.steps.s{index - 1}.output.value"'
        lines += [f"      - id: s{index}", "        function: work", f"        inputs: {{n: {source}}}"]
    return "\n".join(lines) + "\n"


class ValidationClock:
    """Wraps `jsonschema.validate`, which the SDK imports at each call, to sum its CPU time."""

    def __init__(self) -> None:
        self.spent: list[float] = []
        original = jsonschema.validate

        def timed(*args: Any, **kwargs: Any) -> None:
            started = time.thread_time()
            try:
                original(*args, **kwargs)
            finally:
                self.spent.append(time.thread_time() - started)

        jsonschema.validate = timed

    def last(self) -> float:
        return self.spent[-1] if self.spent else 0.0


async def client_work(job: dict[str, Any]) -> dict[str, Any]:
    clock = ValidationClock()
    calls: dict[str, list[tuple[float, float]]] = {}
    text = spec(job["steps"])
    if job["transport"] == "stdio":
        session = over_stdio(job["binary"], job["home"], job["cwd"])
    else:
        session = over_http(job["url"], job["token"])
    async with session as agent:
        if job["validate_against"] == "full":
            for name in agent.tools:
                full = json.loads((SCHEMAS / f"{name}.output.schema.json").read_text())
                agent.session._tool_output_schemas[name] = full  # what was served before

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            before = len(clock.spent)
            started = time.perf_counter()
            answer = await agent.call(tool, arguments)
            elapsed = time.perf_counter() - started
            validation = clock.last() if len(clock.spent) > before else 0.0
            calls.setdefault(tool, []).append((elapsed, validation))
            return answer

        started = time.perf_counter()
        steps = 0
        for _ in range(job["flows"]):
            answer = await call("stratum_plan", {"spec": text, "flow": "run", "inputs": {"n": 1}})
            flow = answer["flow_id"]
            await call("stratum_commit", {"flow_id": flow, "label": "start"})
            while answer["status"] == "execute_step":
                answer = await call(
                    "stratum_step_done",
                    {"flow_id": flow, "step_id": answer["step_id"], "result": {"value": steps}},
                )
                steps += 1
            if answer["status"] != "complete":
                raise AssertionError(f"the flow did not complete: {answer}")
        return {"calls": calls, "steps": steps, "seconds": time.perf_counter() - started}


def run_client(job: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(client_work(job))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(transport: str, clients: int, results: list[dict[str, Any]], wall: float) -> None:
    steps = sum(result["steps"] for result in results)
    every: list[float] = []
    per_tool: dict[str, list[tuple[float, float]]] = {}
    for result in results:
        for tool, samples in result["calls"].items():
            per_tool.setdefault(tool, []).extend(samples)
            every.extend(elapsed for elapsed, _ in samples)
    print(
        f"{transport:5} {clients:2} client(s): {steps / wall:7.1f} steps/s, call p50 "
        f"{percentile(every, 0.5) * 1e3:6.1f} ms, p99 {percentile(every, 0.99) * 1e3:6.1f} ms"
        f" ({len(every)} calls in {wall:.1f} s)"
    )
    for tool in ("stratum_plan", "stratum_step_done", "stratum_commit"):
        samples = per_tool.get(tool, [])
        if samples:
            validation = statistics.mean(v for _, v in samples) * 1e3
            elapsed = percentile([e for e, _ in samples], 0.5) * 1e3
            print(f"      {tool:18} call p50 {elapsed:6.1f} ms, of which validation {validation:6.2f} ms CPU")
    sys.stdout.flush()


def cli(binary: str, home: str, *args: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != "STRATUM_DB"}
    env["STRATUM_HOME"] = home
    return subprocess.run([binary, *args], env=env, check=True, capture_output=True, text=True).stdout


class Serve:
    """`stratum-mcp serve` on a free port of 127.0.0.1, with one access token."""

    def __init__(self, binary: str, home: str, cwd: str) -> None:
        created = json.loads(cli(binary, home, "token", "create", "--name", "bench", "--json"))
        self.token = created["secret"]
        env = {key: value for key, value in os.environ.items() if key != "STRATUM_DB"}
        env["STRATUM_HOME"] = home
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0"],
            env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].split(" ", 1)[0].strip() + "/mcp"
                break
        else:
            raise RuntimeError("stratum-mcp serve exited before listening")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--clients", default="1,20")
    parser.add_argument("--flows", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--validate-against", choices=["served", "full"], default="served")
    parser.add_argument("--transports", default="stdio,http")
    options = parser.parse_args()
    print(
        f"Python MCP SDK against {options.validate_against} output schemas: {options.flows} flows "
        f"of {options.steps} steps per client (plan, commit, step_done per step)"
    )
    for transport in options.transports.split(","):
        for clients in (int(count) for count in options.clients.split(",")):
            with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as cwd:
                serve = Serve(options.binary, home, cwd) if transport == "http" else None
                job = {
                    "transport": transport, "binary": options.binary, "home": home, "cwd": cwd,
                    "url": serve.url if serve else "", "token": serve.token if serve else "",
                    "flows": options.flows, "steps": options.steps,
                    "validate_against": options.validate_against,
                }
                try:
                    with ProcessPoolExecutor(max_workers=clients) as pool:
                        # Start every worker first, so that process start-up is not timed.
                        list(pool.map(abs, range(clients)))
                        started = time.perf_counter()
                        results = list(pool.map(run_client, [job] * clients))
                        wall = time.perf_counter() - started
                finally:
                    if serve:
                        serve.stop()
                report(transport, clients, results, wall)


if __name__ == "__main__":
    main()
