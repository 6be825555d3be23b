"""An agent whose tool is served by the real MCP server (tests/mcp_tool_server.py), for the
backend read-backs of the MCP trace (Jaeger through the Collector, Phoenix): the server's work
must show inside the agent's trace there, as it does in tests/runtime_hooks/test_mcp_trace_continues_on_server.py
on a plain OTLP receiver.

One run: ``invoke_agent assistant`` (a ``TurnAgent`` whose tools are the server's, flowra's own
``McpConnection.snapshot()``) asks ``forecast`` for ``SECRET``'s forecast; the server's SERVER span
``tools/call forecast`` and the tool's ``lookup_forecast`` continue the trace under
``execute_tool forecast``. Content capture is on, and the app's ``AfterToolCallEvent`` hook masks
the city in the tool's result (``Sunny in SECRET`` -> ``Sunny in [CITY]``), so the secret is an
argument the model chose (recorded only in content attributes) and the redaction ledger marks the
run (which is also what makes the shipped tail sampler keep it whole).

Loaded by name (``importlib``) from tests that run on both lines: only this line has the MCP client.
"""

from __future__ import annotations

from typing import Any, Final

from flowra.agent import AgentRuntime, Event
from flowra.lib.turn import TurnAgent, TurnConfig, TurnResult
from flowra.lib.turn.hook_events import AfterToolCallEvent
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import mcp_client
from tests.runtime_hooks.support import (
    ScriptedProvider,
    llm_config,
    provider_services,
    replace_result_text,
    run_turn,
    system,
    text_response,
    tool_calls_response,
)

CONTEXT_SENT: Final = mcp_client.CALL_TAKES_META
"""flowra's MCP client sends ``params._meta`` (0.0.79+): only then can the server continue the trace."""
SECRET: Final = "Hammerfest-4711-secret"
"""The city the model asks about: it reaches the server as the tool's argument, is recorded only
where content capture puts it, and is masked in the tool's result by the app's hook."""
MASK: Final = "[CITY]"
QUESTION: Final = "What is the weather up north?"
ANSWER: Final = "It is sunny."
CALL_ID: Final = "call-forecast"
RESULT: Final = f"Sunny in {MASK}"
"""The tool's result after the app's hook (the server answered ``Sunny in SECRET``)."""
AGENT_SPANS: Final = 4
"""invoke_agent assistant; its 2 chats and execute_tool forecast."""
SERVER_SPANS: Final = 2
"""tools/call forecast (SERVER) and the tool's lookup_forecast."""
SERVER_SERVICE: Final = "mcp-tool-server"


def mask_city(event: Event[AfterToolCallEvent]) -> None:
    """The app's redaction hook: the city never leaves a tool result."""
    event.data.result = replace_result_text(event.data.result, lambda text: text.replace(SECRET, MASK))


async def mcp_tool_run(
    tracer_provider: TracerProvider, url: str, *, conversation_id: str, **options: Any
) -> TurnResult:
    """One run against the MCP server at ``url``, traced by ``OtelHooks`` (capture on, ``options``)."""
    from flowra.tools import McpConnection

    provider = ScriptedProvider(
        tool_calls_response((CALL_ID, "forecast", {"city": SECRET})), text_response(ANSWER, tokens=(30, 4))
    )
    connection = await McpConnection.connect(url)
    try:
        turn = TurnConfig(llm_config=llm_config(provider), system=system(), history=[], tools=connection.snapshot())
        runtime = AgentRuntime(
            agents={"assistant": TurnAgent}, services={TurnConfig: turn, **provider_services(provider)}
        )
        OtelHooks(tracer_provider=tracer_provider, capture_content=True, **options).install(runtime)
        runtime.hooks.on(AfterToolCallEvent, mask_city)
        result = await run_turn(runtime, QUESTION, conversation_id=conversation_id)
    finally:
        await connection.close()
    assert not provider.script, "every scripted answer used"
    # what the model was given back: the server's answer, masked by the app's hook
    assert RESULT in repr(provider.requests[-1].messages) and SECRET not in repr(provider.requests[-1].messages[-1])
    return result
