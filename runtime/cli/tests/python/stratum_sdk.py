"""Drives `stratum-mcp` with the official Python MCP SDK (`mcp`), as a Python agent does.

Shared by the Python SDK tests (runtime/tests/python_sdk.rs runs them) and the benchmark
(runtime/benches/python_sdk.rs). The SDK's default output validation stays on: its
`ClientSession.call_tool` checks every result's `structuredContent` against the tool's
`outputSchema` with `jsonschema.validate` and raises when it does not fit, so a call here
that returns has passed that check.

The interpreter comes from scripts/ensure-python-mcp, which installs the pinned SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, AsyncIterator

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


class Refused(AssertionError):
    """A call that answered with `isError` where an answer was expected, or the reverse."""


@contextlib.asynccontextmanager
async def over_stdio(
    binary: str, home: str, cwd: str, elicitation_callback: Any = None
) -> AsyncIterator["Agent"]:
    """`stratum-mcp` started as a child with its state in `home`, initialized; with an
    `elicitation_callback`, the client declares elicitation and answers forms with it."""
    env = {key: value for key, value in os.environ.items() if key != "STRATUM_DB"}
    env["STRATUM_HOME"] = home
    params = StdioServerParameters(command=binary, args=[], env=env, cwd=cwd)
    async with stdio_client(params) as (read, write):
        async with ClientSession(
            read, write, elicitation_callback=elicitation_callback
        ) as session:
            await session.initialize()
            yield await Agent.ready(session)


@contextlib.asynccontextmanager
async def over_http(url: str, token: str) -> AsyncIterator["Agent"]:
    """A session with `stratum-mcp serve` at `url` (its `/mcp`), `token` as the bearer."""
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield await Agent.ready(session)


class Agent:
    """One client session and what it learned from `tools/list`."""

    def __init__(self, session: ClientSession, tools: dict[str, Any]) -> None:
        self.session = session
        self.tools = tools

    @classmethod
    async def ready(cls, session: ClientSession) -> "Agent":
        listed = await session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        missing = [name for name, tool in tools.items() if tool.outputSchema is None]
        # Without an outputSchema the SDK validates nothing, and these tests would prove nothing.
        if missing:
            raise AssertionError(f"tools without an outputSchema: {missing}")
        return cls(session, tools)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Calls a tool that must answer; the SDK has validated the answer. Returns it."""
        result = await self.session.call_tool(tool, arguments)
        if result.isError:
            raise Refused(f"{tool} refused: {result.content}")
        return answer_of(tool, result)

    async def refused(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Calls a tool that must refuse the call (`isError`); returns its structured error."""
        result = await self.session.call_tool(tool, arguments)
        if not result.isError:
            raise Refused(f"{tool} did not refuse: {result.structuredContent}")
        return answer_of(tool, result)


def answer_of(tool: str, result: Any) -> dict[str, Any]:
    """The structured answer, checked equal to the JSON of its text block."""
    answer = result.structuredContent
    if answer is None:
        raise AssertionError(f"{tool}: no structuredContent")
    text = next((block.text for block in result.content if block.type == "text"), None)
    if text is None or json.loads(text) != answer:
        raise AssertionError(f"{tool}: the text block is not the structured answer")
    return answer


def expect(answer: dict[str, Any], status: str, what: str) -> dict[str, Any]:
    """`answer` when its `status` is `status`; an AssertionError naming `what` otherwise."""
    if answer.get("status") != status:
        raise AssertionError(f"{what}: expected status {status}, got {json.dumps(answer)[:600]}")
    return answer


def example(name: str) -> str:
    """The text of one of the repository's example specs."""
    return (Path(__file__).resolve().parents[4] / "examples" / name).read_text()


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)
