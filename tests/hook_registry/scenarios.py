"""The scenarios of ``tests/both_lines/`` on flowra 0.0.3 - 0.0.8: ``ToolLoopAgent`` runs with the
plugin in the agent's ``HookRegistry`` (the same names as ``tests/runtime_hooks/scenarios.py``;
the protocol is ``tests.both_lines.line.Scenarios``)."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import (
    AfterToolCallEvent,
    BeforeLLMCallEvent,
    BeforeToolCallEvent,
    MessageAcceptedEvent,
    ToolLoopStatus,
)
from flowra.llm import LLMProvider, LLMRequest, SystemMessage, ToolResultBlock, Usage
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolResult
from openai import AsyncOpenAI

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry._flowra import handler_map as registry_handler_map
from flowra_otel.adapters.hook_registry.messages import MESSAGES as _MESSAGES
from flowra_otel.core.content import MessageReader
from flowra_otel.redaction import map_result_text
from tests.both_lines.line import HistoryEdit, ToolRun
from tests.hook_registry import conftest as line_conftest
from tests.hook_registry.conftest import hooks_with
from tests.hook_registry.flowra_support import (
    FLOWRA_VERSION,
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    ScriptStep,
    create_tool_registry,
    final_text,
    get_weather,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    tool_results,
    usage,
)

assert_all_ended = line_conftest.assert_all_ended
LINE = "hook_registry"
AGENT_PATH = "assistant"
RESEARCH_AGENT_PATHS = frozenset({"assistant", "research/tool_loop"})
METADATA_EVENTS = 1
"""The tool loop's start event carries the spec (and its metadata)."""
MESSAGES: MessageReader = _MESSAGES
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hook_registry"
EXAMPLES_SKIP = None if HAS_AGENT_TOOLS else f"the examples use the flowra >= 0.0.6 API; installed: {FLOWRA_VERSION}"
HOOK_ORDERS: tuple[bool, ...] = (False, True)
"""The app's hooks in the ``HookRegistry`` after the plugin, and before it."""

SSN = "123-45-6789"
CARD = "4111 1111 1111 1111"


# ----------------------------------------------------------------------------------- responses
def answer(text: str, *, usage: Usage | None = None) -> ScriptStep:
    return text_response(text, usage=usage)


def tool_calls(
    *calls: tuple[str, str, dict[str, Any]], text: str | None = None, usage: Usage | None = None
) -> ScriptStep:
    return tool_calls_response(list(calls), text=text, usage=usage)


def tool_result_block(tool_use_id: str, text: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=tool_use_id, content=text)


def tool_result_text(block: Any) -> str:
    assert isinstance(block, ToolResultBlock)
    return block.content


# --------------------------------------------------------------------------------------- tools
def card_on_file(owner: str) -> str:
    """The card on file for a customer."""
    return f"{owner}: card {CARD}"


def lookup_customer(name: str) -> str:
    """A customer's record (it holds secrets)."""
    return f"{name}: SSN {SSN}, card {CARD}"


def note_tools(count: int, rng: random.Random | None = None) -> list[Any]:
    async def note(ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult(content=str(ctx.input.get("note", "")))

    made = []
    for i in range(count):
        words = rng.randint(1, 60) if rng is not None else 8
        definition = ToolDefinition(
            name=f"tool_{i:03d}",
            description=" ".join(["Keeps a note about the customer account."] * words),
            input_schema={"type": "object", "properties": {"note": {"type": "string"}}},
        )
        made.append(LocalTool(definition=definition, handler=note))
    return made


def openai_provider(client: AsyncOpenAI) -> LLMProvider:
    """flowra's own ``OpenAIProvider``."""
    from flowra.llm.providers.openai import OpenAIProvider

    return OpenAIProvider(client=client)


# ---------------------------------------------------------------------------------------- runs
async def weather_run(
    otel: OtelHooks, *steps: ScriptStep, text: str = "Weather in Paris?", metadata: Mapping[str, Any] | None = None
) -> str | None:
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(ScriptedProvider(steps), tools, hooks_with(otel))
        result = await run_tool_loop(runtime, text, metadata=dict(metadata) if metadata else None)
    assert result.status == ToolLoopStatus.COMPLETED
    return final_text(result)


weather_turn_run = weather_run  # the tool loop is the agent that does the work


async def plain_run(otel: OtelHooks, *steps: ScriptStep, text: str) -> str | None:
    async with tool_registry() as tools:
        return final_text(await run_tool_loop(tool_loop_runtime(ScriptedProvider(steps), tools, otel), text))


async def card_run(otel: OtelHooks, **metadata: Any) -> str | None:
    return await _run_with(otel, card_on_file, tool_calls(("c1", "card_on_file", {"owner": "Ada"})), "Card?", metadata)


async def customer_run(
    otel: OtelHooks, final: ScriptStep, *, mask: Callable[[str], str] | None, text: str = "Look up Ada"
) -> str | None:
    call = tool_calls(("c1", "lookup_customer", {"name": "Ada"}), usage=usage(10, 5))
    registry = HookRegistry()
    registry.add(otel)
    if mask is not None:
        masking = mask

        def masked_result(event: Event[AfterToolCallEvent]) -> None:
            """The app's own redaction hook: it rewrites the tool result flowra hands on, the way
            docs/redaction.md writes one (``map_result_text``)."""
            event.data.result = map_result_text(event.data.result, masking)

        registry.on(AfterToolCallEvent, masked_result)
    async with tool_registry(lookup_customer) as tools:
        runtime = tool_loop_runtime(
            ScriptedProvider([call, final]), tools, registry, system_prompt="You are a helpful assistant."
        )
        return final_text(await run_tool_loop(runtime, text))


async def research_run(otel: OtelHooks) -> str | None:
    if not HAS_AGENT_TOOLS:
        pytest.skip("agents as tools (make_agent_tool) need flowra 0.0.6+")
    main = ScriptedProvider([tool_calls_response([("c1", "research", {"query": "Why?"})]), text_response("Because.")])
    researcher = ScriptedProvider([text_response("Found it.")])
    async with tool_registry(research_tool()) as main_tools, tool_registry() as researcher_tools:
        runtime = tool_loop_runtime(
            main,
            main_tools,
            hooks_with(otel),
            researcher=ResearcherSetup(provider=researcher, registry=researcher_tools),
        )
        return final_text(await run_tool_loop(runtime, "Research this"))


async def tool_hook_run(
    otel: OtelHooks,
    *calls: tuple[str, str, dict[str, Any]],
    handlers: Sequence[Callable[[Any], None]] = (),
    handlers_first: bool = False,
    text: str = "Pay the bill, then weather?",
    final: str = "Done.",
) -> ToolRun:
    registry = HookRegistry()
    if not handlers_first:
        registry.add(otel)
    for handler in handlers:
        registry.on(BeforeToolCallEvent, handler)
    if handlers_first:
        registry.add(otel)
    provider = ScriptedProvider([tool_calls(*calls), answer(final)])
    async with tool_registry(get_weather) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), text)
    assert result.status == ToolLoopStatus.COMPLETED
    provider.assert_exhausted()
    return ToolRun(
        errors=[r.is_error for r in tool_results(result)], requests=[list(r.messages) for r in provider.requests]
    )


async def budget_run(otel: OtelHooks, steps: Sequence[ScriptStep], offered: list[Any], text: str, prompt: str) -> None:
    async with tool_registry(*offered) as tools:
        runtime = tool_loop_runtime(
            ScriptedProvider(steps), tools, hooks_with(otel), system_prompt=prompt, max_llm_calls=20
        )
        await run_tool_loop(runtime, text)


async def provider_weather_run(
    provider: LLMProvider, otel: OtelHooks | None, *, model: str, after_install: Callable[[], None] = lambda: None
) -> str | None:
    async with tool_registry(get_weather) as tools:
        hooks = [otel] if otel is not None else []
        after_install()
        return final_text(
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks, model=model), "Weather in Paris?")
        )


async def history_edit_run(otel: OtelHooks, cities: Sequence[str], edit: HistoryEdit) -> list[list[Any]]:
    seen: list[list[Any]] = []

    def step(response: Any) -> Callable[[LLMRequest], Any]:
        def answer_with(request: LLMRequest) -> Any:
            seen.append(copy.deepcopy([m for m in request.messages if not isinstance(m, SystemMessage)]))
            return response

        return answer_with

    calls = [tool_calls((f"c{i}", "get_weather", {"city": city})) for i, city in enumerate(cities)]
    registry = hooks_with(otel)

    def before_call(event: Event[BeforeLLMCallEvent]) -> None:
        edit([m for m in event.data.request.messages if not isinstance(m, SystemMessage)], len(seen))

    registry.on(BeforeLLMCallEvent, before_call)
    async with tool_registry(get_weather) as tools:
        script = ScriptedProvider([step(c) for c in [*calls, answer("Done.")]])
        runtime = tool_loop_runtime(script, tools, registry, max_llm_calls=len(calls) + 2)
        result = await run_tool_loop(runtime, "Weather, city by city?")
    assert result.status == ToolLoopStatus.COMPLETED
    return seen


async def _run_with(
    otel: OtelHooks, tool: Callable[..., Any], call: ScriptStep, text: str, metadata: Mapping[str, Any]
) -> str | None:
    async with tool_registry(tool) as tools:
        runtime = tool_loop_runtime(ScriptedProvider([call, text_response("Ok.")]), tools, hooks_with(otel))
        result = await run_tool_loop(runtime, text, metadata=dict(metadata) if metadata else None)
    assert result.status == ToolLoopStatus.COMPLETED
    return final_text(result)


TELLS_A_RUN = False  # flowra 0.0.3 - 0.0.8 keep no run in progress on the runtime


async def kept_runtime(*steps: ScriptStep) -> Any:
    return tool_loop_runtime(ScriptedProvider(steps), await create_tool_registry())  # no tools: nothing to close


async def kept_run(runtime: Any) -> str | None:
    return final_text(await run_tool_loop(runtime, "Hello"))


def on_message_accepted(runtime: Any, handler: Callable[[Any], None]) -> None:
    runtime._AgentRuntime__services[HookRegistry].on(MessageAcceptedEvent, handler)


def handler_storage(runtime: Any) -> tuple[Any, dict[type, list[Any]] | None]:
    registry = runtime._AgentRuntime__services.get(HookRegistry)
    handlers = registry_handler_map(registry) if registry is not None else None
    return registry, None if handlers is None else {key: list(entries) for key, entries in handlers.items()}


if TYPE_CHECKING:  # mypy, on this line: this module is what tests/both_lines/ expects
    import tests.hook_registry.scenarios as _this  # noqa: PLW0406 - checked against the protocol
    from tests.both_lines.line import Scenarios

    _: Scenarios = _this
