"""Content capture renders each message once per agent, whatever else the run does.

flowra appends to a tool loop's history, so re-rendering it at every call would make a long run
quadratic. Each agent has its own renderer (its cache follows that agent's history): an agent
used as a tool, with its own short history, must not make its parent render its long history
again. The count of ``redact=`` calls on one leaf is the number of times that leaf was rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flowra_otel import OtelHooks
from tests.hook_registry.conftest import hooks_with
from tests.hook_registry.flowra_support import (
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    get_weather,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

MakeHooks = Callable[..., OtelHooks]
FIRST = "PARENT-FIRST-MESSAGE"


def echo(word: str) -> str:
    """Repeat the word."""
    return f"echo {word}"


@pytest.mark.skipif(not HAS_AGENT_TOOLS, reason="agents as tools need flowra >= 0.0.6")
async def test_a_sub_agent_does_not_make_its_parent_render_its_history_again(make_otel_hooks: MakeHooks) -> None:
    seen: list[str] = []

    def counting_redact(text: str) -> str:
        if text == FIRST:
            seen.append(text)
        return text

    calls: list[Any] = [tool_calls_response([(f"e{i}", "echo", {"word": str(i)})]) for i in range(40)]
    calls.append(tool_calls_response([("r", "research", {"query": "q"})]))
    calls += [tool_calls_response([(f"f{i}", "echo", {"word": str(i)})]) for i in range(3)]
    parent = ScriptedProvider([*calls, text_response("done")])
    child = ScriptedProvider.by_first_user_text({"q": [text_response("answer")]})
    hooks = make_otel_hooks(capture_content=True, redact=counting_redact)
    async with tool_registry(echo, research_tool()) as tools, tool_registry(get_weather) as child_tools:
        runtime = tool_loop_runtime(
            parent,
            tools,
            hooks_with(hooks),
            researcher=ResearcherSetup(provider=child, registry=child_tools),
            max_llm_calls=60,
        )
        await run_tool_loop(runtime, FIRST)
    parent.assert_exhausted()
    # 45 chats carry the first message; it is rendered once (on the run's input, then cached).
    assert len(seen) == 1
