"""The multi-agent app the Phoenix end-to-end test of flowra 0.0.56 - 0.0.93 runs, in its own process.

    python -m tests.runtime_hooks.phoenix_app CONVERSATION_ID     (OTEL_* variables say where the traces go)

Why a separate process: ``configure_telemetry()`` installs the global tracer provider, which can be
set once per process; running it inside pytest would leak into every later test.

The app (the scenario of ``tests/hook_registry/phoenix_app.py``, written the way an app on today's
flowra is): an ``assistant`` chat whose first answer calls three tools in parallel --
``research`` (a whole ``ResearcherAgent`` with its own ``TurnAgent``: agent as tool, which calls
``get_weather`` itself), ``lookup_account`` (its result holds an API key that the app's
redaction hook on ``AfterToolCallEvent`` replaces) and ``get_weather`` -- then answers. Tracing
is set up the way a user does it: ``configure_telemetry()`` from the ``OTEL_*`` variables, then
``OtelHooks(capture_content=True, openinference=True).install(runtime)``; the conversation id
comes from the spec's metadata. It prints one JSON line with what the test needs to know.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from typing import Final

from flowra.agent import Event
from flowra.lib.turn.hook_events import AfterToolCallEvent
from flowra.llm import LLMRequest, TextBlock, ToolResultBlock
from flowra.tools import tool

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry
from tests.runtime_hooks.support import (
    ResearcherAgent,
    ResearcherSetup,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    research_tool,
    run_chat,
    text_response,
    tool_calls_response,
)

SECRET_KEY: Final = "sk-live-" + "7Hq2Z" * 6
"""What ``lookup_account`` returns: an API-key-shaped secret the built-in ``api_key`` pattern finds."""
REDACTED: Final = "[redacted-key]"

QUESTION: Final = "Research Rome's weather, check Alice's account and Paris' weather."
RESEARCH_QUESTION: Final = "weather in Rome"
RESEARCH_ANSWER: Final = "Rome: warm and dry."
FINAL_ANSWER: Final = "Rome is warm, Alice is on the pro plan, Paris is sunny."
PARALLEL_CALLS: Final = (
    ("call_research", "research", {"question": RESEARCH_QUESTION}),
    ("call_account", "lookup_account", {"user": "alice"}),
    ("call_weather", "get_weather", {"city": "Paris"}),
)
RESEARCH_CALLS: Final = (("call_rome", "get_weather", {"city": "Rome"}),)
PARENT_USAGE: Final = ((31, 12), (95, 17))
"""(input, output) tokens of the assistant's two chat calls."""
CHILD_USAGE: Final = ((22, 8), (40, 6))
"""(input, output) tokens of the researcher's two chat calls."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AccountParams:
    user: str


@tool("lookup_account")
async def lookup_account(params: AccountParams) -> str:
    """Look up a customer's account."""
    return f"account of {params.user}: plan=pro, api key {SECRET_KEY}"


def redact_api_keys(event: Event[AfterToolCallEvent]) -> None:
    """The app's redaction hook: no API key leaves a tool result."""
    result = event.data.result
    blocks = [
        dataclasses.replace(b, text=b.text.replace(SECRET_KEY, REDACTED)) if isinstance(b, TextBlock) else b
        for b in result.content
    ]
    event.data.result = dataclasses.replace(result, content=blocks)


def tool_result_given(request: LLMRequest, call_id: str) -> str:
    """The text of call ``call_id``'s result as ``request`` gives it to the model."""
    return "".join(
        c.text
        for m in request.messages
        for b in m.blocks
        if isinstance(b, ToolResultBlock) and b.tool_use_id == call_id
        for c in b.content
        if isinstance(c, TextBlock)
    )


async def run_app(conversation_id: str) -> dict[str, object]:
    handles = configure_telemetry()
    try:
        parent = ScriptedProvider(
            tool_calls_response(*PARALLEL_CALLS, tokens=PARENT_USAGE[0]),
            text_response(FINAL_ANSWER, tokens=PARENT_USAGE[1]),
        )
        child = ScriptedProvider(
            tool_calls_response(*RESEARCH_CALLS, tokens=CHILD_USAGE[0]),
            text_response(RESEARCH_ANSWER, tokens=CHILD_USAGE[1]),
        )
        runtime = chat_runtime(
            parent,
            research_tool,
            lookup_account,
            get_weather,
            agents={"researcher": ResearcherAgent},
            services={ResearcherSetup: ResearcherSetup(provider=child, tools=(get_weather,))},
        )
        OtelHooks(capture_content=True, openinference=True).install(runtime)
        runtime.hooks.on(AfterToolCallEvent, redact_api_keys)
        result = await run_chat(runtime, QUESTION, conversation_id=conversation_id)
        return {
            "answer": result.response,
            "scripts_left": len(parent.script) + len(child.script),
            "account_given_to_the_model": tool_result_given(parent.requests[-1], "call_account"),
            "secret_given_to_a_model": any(SECRET_KEY in repr(r) for r in parent.requests + child.requests),
        }
    finally:
        handles.shutdown()


def main() -> int:
    summary = asyncio.run(run_app(sys.argv[1]))
    print(json.dumps(summary))
    return 0 if summary["answer"] == FINAL_ANSWER and not summary["scripts_left"] else 1


if __name__ == "__main__":
    sys.exit(main())
