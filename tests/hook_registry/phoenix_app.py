"""The multi-agent app the Phoenix end-to-end test runs, in its own process.

    python -m tests.hook_registry.phoenix_app CONVERSATION_ID     (OTEL_* variables say where the traces go)

Why a separate process: ``configure_telemetry()`` installs the global tracer provider, which can be
set once per process; running it inside pytest would leak into every later test.

The app: an ``assistant`` tool loop whose first answer calls three tools in parallel --
``research`` (a whole sub-agent with its own tool loop: agent as tool), ``lookup_account`` (its
result holds an API key that the user's redaction hook replaces) and ``get_weather`` -- then
answers. Content capture is on, the conversation id comes from the spec's metadata. It prints
one JSON line with what the test needs to know about the run.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Final

from flowra.agent import HookRegistry
from flowra.lib.tool_loop import ToolLoopStatus

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry
from tests.hook_registry.flowra_support import (
    ResearcherSetup,
    ScriptedProvider,
    final_text,
    get_weather,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    usage,
)
from tests.hook_registry.test_otlp_export_end_to_end import RedactionHooks, lookup_account

QUESTION: Final = "Research Rome's weather, check Alice's account and Paris' weather."
RESEARCH_QUERY: Final = "weather in Rome"
RESEARCH_ANSWER: Final = "Rome: warm and dry."
FINAL_ANSWER: Final = "Rome is warm, Alice is on the pro plan, Paris is sunny."
PARALLEL_CALLS: Final = (
    ("call_research", "research", {"query": RESEARCH_QUERY}),
    ("call_account", "lookup_account", {"user": "alice"}),
    ("call_weather", "get_weather", {"city": "Paris"}),
)
PARENT_USAGE: Final = ((31, 12), (95, 17))
"""(input, output) tokens of the assistant's two chat calls."""
CHILD_USAGE: Final = ((22, 8), (40, 6))
"""(input, output) tokens of the researcher's two chat calls."""


async def run_app(conversation_id: str) -> dict[str, object]:
    handles = configure_telemetry()
    try:
        registry = HookRegistry()
        registry.add(OtelHooks(capture_content=True, openinference=True))
        registry.add(RedactionHooks())
        parent = ScriptedProvider(
            [
                tool_calls_response(list(PARALLEL_CALLS), usage=usage(*PARENT_USAGE[0])),
                text_response(FINAL_ANSWER, usage=usage(*PARENT_USAGE[1])),
            ]
        )
        child = ScriptedProvider(
            [
                tool_calls_response([("call_rome", "get_weather", {"city": "Rome"})], usage=usage(*CHILD_USAGE[0])),
                text_response(RESEARCH_ANSWER, usage=usage(*CHILD_USAGE[1])),
            ]
        )
        async with (
            tool_registry(research_tool(), lookup_account, get_weather) as parent_tools,
            tool_registry(get_weather) as child_tools,
        ):
            runtime = tool_loop_runtime(
                parent, parent_tools, registry, researcher=ResearcherSetup(provider=child, registry=child_tools)
            )
            result = await run_tool_loop(runtime, QUESTION, metadata={"conversation_id": conversation_id})
        parent.assert_exhausted()
        child.assert_exhausted()
        return {
            "status": str(result.status),
            "completed": result.status == ToolLoopStatus.COMPLETED,
            "answer": final_text(result),
        }
    finally:
        handles.shutdown()


def main() -> int:
    summary = asyncio.run(run_app(sys.argv[1]))
    print(json.dumps(summary))
    return 0 if summary["completed"] else 1


if __name__ == "__main__":
    sys.exit(main())
