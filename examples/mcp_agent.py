"""An agent whose tool is served by an MCP server: one trace across both processes.

    # terminal 1: the server (its own environment: see examples/mcp_server.py)
    mcp-env/bin/python examples/mcp_server.py --port 8931 --traces-file spans.jsonl
    # terminal 2: the agent
    .venv/bin/python examples/mcp_agent.py --url http://127.0.0.1:8931/mcp --traces-file spans.jsonl

(``./dev demo`` or ``./dev setup`` builds ``.venv``; any Python >= 3.12 environment with flowra
0.0.79 - 0.0.93 and this package installed works too: from 0.0.79 flowra's MCP client can carry the
trace context. On 0.0.56 - 0.0.78 it runs, and the server starts a trace of its own.)

The agent (flowra's ``ChatAgent``, a scripted model: no network, same output every run) gets its
tools from the server through flowra's own MCP client, ``McpConnection.connect(url)`` and
``snapshot()``, and asks for Oslo's forecast. ``OtelHooks().install(runtime)`` is all the tracing
code: the ``execute_tool forecast`` span's W3C context travels with the call (in the request's
``params._meta`` and its HTTP headers), and the server's ``tools/call forecast`` span continues it.

Both processes append their spans to the same traces file (OTLP JSON lines; here
``configure_telemetry(traces_file=...)``, or ``FLOWRA_OTEL_TRACES_FILE``), and the example ends by
auditing it, as ``flowra-otel audit spans.jsonl`` does: one tool call, and the server's span of it
with ``continues=span_id=<the execute_tool span>`` (the report counts two traces: the server's
``tools/list`` span, when the agent connected, has no agent span above it). The agent's side is
also printed as a tree.
With OTLP instead (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` for both, and no ``--traces-file``), a
backend shows the two services in one trace (docs/mcp.md).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from flowra.agent import AgentRuntime
from flowra.lib import LLMConfig
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult, ChatSpec
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
)
from flowra.tools import McpConnection

from flowra_otel import OtelHooks
from flowra_otel.core.audit import audit_file, render_text
from flowra_otel.export import configure_telemetry


class ScriptedLLM(LLMProvider):
    """Asks the server's ``forecast`` tool, then answers with what it said."""

    def __init__(self) -> None:
        self._asked = False

    async def call(self, request: LLMRequest) -> LLMResponse:
        if not self._asked:
            self._asked = True
            call = ToolUseBlock(id="call_1", name="forecast", input={"city": "Oslo"})
            return LLMResponse(messages=[AssistantMessage(blocks=[call])], stop_reason=StopReason.TOOL_USE)
        answer = TextBlock(text="It is sunny and 24°C in Oslo.")
        return LLMResponse(messages=[AssistantMessage(blocks=[answer])], stop_reason=StopReason.END_TURN)


async def main(url: str, traces_file: Path) -> int:
    telemetry = configure_telemetry(service_name="weather-agent", traces_file=traces_file, console=True)
    connection = await McpConnection.connect(url)  # lists the server's tools
    try:
        runtime = AgentRuntime(
            agents={"assistant": ChatAgent},
            services={
                ChatConfig: ChatConfig(
                    llm_config=LLMConfig(provider=ScriptedLLM(), model="openai/gpt-4o"),
                    system=[SystemMessage(blocks=[TextBlock(text="You answer weather questions.")])],
                    tools=connection.snapshot(),  # the server's tools, as flowra tools
                )
            },
        )
        OtelHooks().install(runtime)  # the one line: the MCP calls carry the trace too
        result = await runtime.run(agent=ChatAgent, spec=ChatSpec.text("What is the weather in Oslo?"))
        assert isinstance(result, ChatResult)
        print("agent answered:", result.response)
    finally:
        await connection.close()
    telemetry.shutdown()  # the agent's spans are in the file now; the server's went there as they ended

    report = audit_file(traces_file)
    print(render_text(report), end="")
    return report.exit_code


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default="http://127.0.0.1:8931/mcp", help="the MCP server's Streamable HTTP URL")
    parser.add_argument("--traces-file", type=Path, default=Path("spans.jsonl"), help="OTLP JSON lines, shared")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.url, args.traces_file)))
