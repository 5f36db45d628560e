"""A gate a person decides in the client's form: the official Python MCP SDK 2.x, on 2026-07-28.

    python gate_form_round_trip.py STRATUM_MCP HOME WORKDIR

The SDK (`mcp` 2.3) connects in its default `mode="auto"`: it probes `server/discover` and
must settle on 2026-07-28. There `stratum_gate_wait` answers `tools/call` with an
`InputRequiredResult` whose `gate_decision` is an `elicitation/create`; the SDK's
`Client.call_tool` hands it to the `elicitation_callback` (the person) and calls again with
`inputResponses` and the echoed `requestState`, and the gate is decided.

Over stdio (`STRATUM_MCP` as a child, its state in `HOME`, run in `WORKDIR`):
  approve_in_form  the person approves: `complete`; the audit's gate record says
                   `resolved_by: human`, `via: elicitation`, `client: "<name> <version>"`
  declined         the person declines: `gate_pending` with `reason: declined`, the gate waits
  altered_state    a round driven by hand (`session.call_tool(..., allow_input_required=True)`):
                   one character of `requestState` changed is refused (`isError`,
                   `error_type: invalid_request_state`) and the gate still waits; the state as
                   issued then decides it
Over HTTP (`STRATUM_MCP serve` on a free port of 127.0.0.1, same HOME, a token from
`STRATUM_MCP token create`, sent as `Authorization: Bearer`):
  http_approve_in_form  as approve_in_form, and the record's `actor` is the token's name

The calls that bring the flow to its gate (`stratum_step_done`, `stratum_resume`) are made by
hand and any form they answer with is left unanswered, so the cases hold whether or not the
server also asks when a gate is reached (`[gates] ask_when_reached`).

Prints one `ok CASE PROTOCOL` line per case (PROTOCOL: the version the connection
negotiated); exits 1 on the first surprise. Needs `mcp==2.3.0` (not the 1.x of stratum_sdk.py,
whose `initialize` handshake stops at 2025-11-25).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any, AsyncIterator

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import DEFAULT_CLIENT_INFO
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from release_spec import SPEC

PROTOCOL = "2026-07-28"
TOKEN_NAME = "py-sdk-agent"

WORK = "v1.2: faster gates"


class Surprise(AssertionError):
    """Something the server or the SDK did that the case did not expect."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Surprise(what)


class Person:
    """Answers every form with `decision` (None: declines); remembers what it was asked."""

    def __init__(self, decision: str | None) -> None:
        self.decision = decision
        self.asked: list[tuple[Any, types.ElicitRequestParams]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append((context.request_id, params))
        if self.decision is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(
            action="accept", content={"decision": self.decision, "rationale": "read it in the form"}
        )


def answer_of(tool: str, result: types.CallToolResult) -> dict[str, Any]:
    """The structured answer, checked equal to the JSON of its text block."""
    answer = result.structured_content
    check(answer is not None, f"{tool}: no structuredContent")
    text = next((block.text for block in result.content if block.type == "text"), None)
    check(
        text is not None and json.loads(text) == answer,
        f"{tool}: the text block is not the structured answer",
    )
    return answer


class Agent:
    """A connected `mcp.Client` and the calls the cases make with it."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A call that must answer (the SDK drives any input rounds and validates the answer)."""
        result = await self.client.call_tool(tool, arguments)
        check(not result.is_error, f"{tool} refused: {result.structured_content}")
        return answer_of(tool, result)

    async def at_gate(self) -> str:
        planned = await self.call("stratum_plan", {"spec": SPEC, "flow": "release", "inputs": {}})
        flow = planned["flow_id"]
        # By hand, so that no form is answered here (see `waits`).
        done = {"flow_id": flow, "step_id": "write", "result": {"text": WORK}}
        await self.waits("stratum_step_done", done)
        return flow

    async def waits(self, tool: str, arguments: dict[str, Any]) -> None:
        """`tool` (a call that reaches the gate) shows the gate waiting, no form answered.

        A server that asks as soon as a call reaches a gate (`[gates] ask_when_reached`)
        answers `input_required` with the gate's form, left unanswered here; one that does not
        answers `await_gate`. Either way the gate waits for stratum_gate_wait.
        """
        reached = await self.client.session.call_tool(tool, arguments, allow_input_required=True)
        if isinstance(reached, types.InputRequiredResult):
            asked = list(reached.input_requests or {})
            check(asked == ["gate_decision"], f"{tool} asked for {asked}")
        else:
            check(not reached.is_error, f"{tool} refused: {reached.structured_content}")
            expect(answer_of(tool, reached), "await_gate", f"{tool}: the gate waits")

    async def gate_record(self, flow: str) -> dict[str, Any]:
        audit = await self.call("stratum_audit", {"flow_id": flow})
        gates = [record for record in audit["trace"] if record.get("type") == "gate"]
        check(len(gates) == 1, f"expected one gate record: {json.dumps(audit)[:800]}")
        return gates[0]


def expect(answer: dict[str, Any], status: str, what: str) -> dict[str, Any]:
    if answer.get("status") != status:
        raise Surprise(f"{what}: expected status {status}, got {json.dumps(answer)[:600]}")
    return answer


@contextlib.asynccontextmanager
async def connected(server: Any, person: Person) -> AsyncIterator[Agent]:
    """An `mcp.Client` on `server` in the SDK's default negotiation, which must reach 2026-07-28."""
    async with Client(server, elicitation_callback=person) as client:
        check(
            client.protocol_version == PROTOCOL,
            f"negotiated {client.protocol_version}, not {PROTOCOL}",
        )
        # Lists the tools: the SDK validates each answer against its tool's outputSchema.
        tools = (await client.list_tools()).tools
        missing = [tool.name for tool in tools if tool.output_schema is None]
        check(not missing, f"tools without an outputSchema: {missing}")
        yield Agent(client)


def server_env(home: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("STRATUM_DB", "STRATUM_DATABASE_URL", "STRATUM_CONFIG")
    }
    env["STRATUM_HOME"] = home
    return env


def decided_in_form(record: dict[str, Any], person: Person) -> None:
    """The gate record says a person decided in this client's form."""
    check(
        (record.get("resolved_by"), record.get("via")) == ("human", "elicitation"),
        f"the audit does not say a person decided in a form: {record}",
    )
    client = f"{DEFAULT_CLIENT_INFO.name} {DEFAULT_CLIENT_INFO.version}"
    check(record.get("client") == client, f"the audit does not name the client {client}: {record}")
    check(record.get("rationale") == "read it in the form", f"rationale: {record}")
    # The form came as an InputRequiredResult's `gate_decision`, not as a request of its own.
    keys = [key for key, _ in person.asked]
    check(keys == ["gate_decision"], f"the form was not the result's input request: {keys}")
    message = person.asked[0][1].message
    check(WORK in message, f"the form did not show the work: {message}")


async def over_stdio(binary: str, home: str, work: str) -> None:
    server = StdioServerParameters(command=binary, args=[], env=server_env(home), cwd=work)

    person = Person("approve")
    async with connected(server, person) as agent:
        flow = await agent.at_gate()
        done = await agent.call("stratum_gate_wait", {"flow_id": flow, "step_id": "review"})
        expect(done, "complete", "the person's approval ends the flow")
        decided_in_form(await agent.gate_record(flow), person)
        print(f"ok approve_in_form {agent.client.protocol_version}", flush=True)

    person = Person(None)
    async with connected(server, person) as agent:
        flow = await agent.at_gate()
        pending = await agent.call("stratum_gate_wait", {"flow_id": flow, "step_id": "review"})
        expect(pending, "gate_pending", "a declined form leaves the gate waiting")
        check(pending.get("reason") == "declined", f"reason: {pending}")
        check(len(person.asked) == 1, f"asked {len(person.asked)} times")
        await agent.waits("stratum_resume", {"flow_id": flow})
        print(f"ok declined {agent.client.protocol_version}", flush=True)

    person = Person("approve")
    async with connected(server, person) as agent:
        flow = await agent.at_gate()
        session = agent.client.session
        arguments = {"flow_id": flow, "step_id": "review"}
        first = await session.call_tool("stratum_gate_wait", arguments, allow_input_required=True)
        check(isinstance(first, types.InputRequiredResult), f"not input_required: {first}")
        requests = first.input_requests or {}
        check(list(requests) == ["gate_decision"], f"input requests: {list(requests)}")
        form = requests["gate_decision"]
        check(isinstance(form, types.ElicitRequest), f"not elicitation/create: {form}")
        schema = form.params.requested_schema
        check(
            schema["properties"]["decision"]["enum"] == ["approve", "revise", "kill"],
            f"requestedSchema: {schema}",
        )
        state = first.request_state
        check(bool(state), f"no requestState: {first}")
        chars = list(state)
        middle = len(chars) // 2
        chars[middle] = "B" if chars[middle] == "A" else "A"
        altered = "".join(chars)
        approve = {
            "gate_decision": types.ElicitResult(
                action="accept", content={"decision": "approve", "rationale": "read it in the form"}
            )
        }
        refused = await session.call_tool(
            "stratum_gate_wait",
            arguments,
            input_responses=approve,
            request_state=altered,
            allow_input_required=True,
        )
        check(isinstance(refused, types.CallToolResult), f"not a tool result: {refused}")
        check(refused.is_error is True, f"an altered state was not refused: {refused}")
        error = answer_of("stratum_gate_wait", refused)
        check(error.get("error_type") == "invalid_request_state", f"error_type: {error}")
        await agent.waits("stratum_resume", {"flow_id": flow})
        decided = await session.call_tool(
            "stratum_gate_wait",
            arguments,
            input_responses=approve,
            request_state=state,
            allow_input_required=True,
        )
        check(isinstance(decided, types.CallToolResult), f"not a tool result: {decided}")
        check(not decided.is_error, f"the state as issued was refused: {decided}")
        expect(answer_of("stratum_gate_wait", decided), "complete", "the state as issued decides")
        check(person.asked == [], "the manual rounds went through the callback")
        print(f"ok altered_state {agent.client.protocol_version}", flush=True)


def operator(binary: str, home: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [binary, *args], env=server_env(home), capture_output=True, text=True, timeout=60
    )
    check(done.returncode == 0, f"{' '.join(args)} exited {done.returncode}: {done.stderr}")
    return json.loads(done.stdout)


@contextlib.contextmanager
def serve(binary: str, home: str, work: str) -> Any:
    """`STRATUM_MCP serve` on a free port of 127.0.0.1: its base URL. Its process group is
    killed at the end; on a surprise its standard error is shown."""
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0"],
        env=server_env(home),
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        seen = []
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if "listening on http://" in line:
                address = line.split("listening on http://", 1)[1].split(" ", 1)[0]
                break
        else:
            raise Surprise(f"serve exited {process.wait()} before listening: {''.join(seen)}")
        # Keep reading its standard error so that it never blocks on a full pipe.
        threading.Thread(target=seen.extend, args=(process.stderr,), daemon=True).start()
        try:
            yield f"http://{address}"
        except BaseException:
            print(f"--- serve's standard error\n{''.join(seen[-40:])}---", file=sys.stderr)
            raise
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def over_http(binary: str, home: str, work: str) -> None:
    created = operator(binary, home, "token", "create", "--name", TOKEN_NAME, "--json")
    secret = created["secret"]
    with serve(binary, home, work) as base:
        person = Person("approve")
        headers = {"Authorization": f"Bearer {secret}"}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(f"{base}/mcp", http_client=http)
            async with connected(transport, person) as agent:
                flow = await agent.at_gate()
                arguments = {"flow_id": flow, "step_id": "review"}
                done = await agent.call("stratum_gate_wait", arguments)
                expect(done, "complete", "the person's approval over HTTP ends the flow")
                record = await agent.gate_record(flow)
                decided_in_form(record, person)
                actor = record.get("actor")
                check(actor == TOKEN_NAME, f"the audit does not name the token: {record}")
                print(f"ok http_approve_in_form {agent.client.protocol_version}", flush=True)


async def main(binary: str, home: str, work: str) -> None:
    # The servers run in WORKDIR and the operator commands here: one store for all of them.
    home, work = os.path.abspath(home), os.path.abspath(work)
    if os.sep in binary:
        binary = os.path.abspath(binary)
    await over_stdio(binary, home, work)
    await over_http(binary, home, work)


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside `error` (the SDK's task groups wrap them in groups)."""
    inner = getattr(error, "exceptions", None)  # an ExceptionGroup (a builtin from Python 3.11)
    if isinstance(inner, (list, tuple)):
        return [leaf for each in inner for leaf in leaves(each)]
    return [error]


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, *sys.argv[1:4])
    except BaseException as error:  # noqa: BLE001 - any surprise fails the test with its reason
        if isinstance(error, (SystemExit, KeyboardInterrupt)):
            raise
        for leaf in leaves(error):
            print(f"FAIL {type(leaf).__name__}: {leaf}", file=sys.stderr)
        sys.exit(1)
