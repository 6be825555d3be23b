"""The scenarios of ``tests/both_lines/`` on flowra 0.0.47 - 0.0.93: flowra's ``ChatAgent`` /
``TurnAgent`` on an ``AgentRuntime`` with the plugin installed on it (the same names as
``tests/hook_registry/scenarios.py``; the protocol is ``tests.both_lines.line.Scenarios``)."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowra.agent import AgentRuntime, Event
from flowra.lib.observability import LLMCallSpan
from flowra.lib.turn import TurnAgent, TurnConfig, TurnResult
from flowra.lib.turn.hook_events import AfterToolCallEvent, BeforeToolCallEvent, MessageAcceptedEvent
from flowra.llm import (
    AssistantMessage,
    ContentComplete,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    StreamEvent,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from flowra.tools import tool
from openai import AsyncOpenAI

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks.messages import MESSAGES as _MESSAGES
from flowra_otel.core.content import MessageReader
from flowra_otel.redaction import map_result_text
from tests.both_lines.line import HistoryEdit, ToolRun
from tests.runtime_hooks import conftest as line_conftest
from tests.runtime_hooks import support
from tests.runtime_hooks.support import (
    HANDLER_STORAGE,
    HAS_RESULT_BLOCKS,
    CustomerParams,
    Script,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    llm_config,
    lookup_customer,
    provider_services,
    registry,
    research_runtime,
    run_chat,
    run_turn,
    system,
    turn_runtime,
    usage,
)

assert_all_ended = line_conftest.assert_all_ended
LINE = "runtime_hooks"
AGENT_PATH = "assistant/turn"
"""The ``ChatAgent`` ``assistant`` has its ``TurnAgent`` child do the work: that one's span is
``invoke_agent assistant``."""
RESEARCH_AGENT_PATHS = frozenset({"assistant/turn", "researcher", "researcher/turn"})
METADATA_EVENTS = len(support.METADATA_EVENT_TYPES)
"""``StartTurnEvent`` and ``MessageAcceptedEvent`` carry the spec's metadata (0.0.47: the latter alone)."""
MESSAGES: MessageReader = _MESSAGES
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES_SKIP = (
    None
    if support.PROVIDER_IN_CONFIG
    else f"the examples use the flowra >= 0.0.56 API (LLMConfig.provider); installed: {support.FLOWRA_VERSION}"
)
HOOK_ORDERS: tuple[bool, ...] = (False, True)
"""The app's hooks after the plugin, and before it (``runtime.hooks.on`` before ``otel.install``):
the tracing acts after every handler whatever the order."""
SSN = support.SSN
CARD = support.CARD


# ----------------------------------------------------------------------------------- responses
def answer(text: str, *, usage: Usage | None = None) -> Script:
    return _response([TextBlock(text=text)], StopReason.END_TURN, usage)


def tool_calls(*calls: tuple[str, str, dict[str, Any]], text: str | None = None, usage: Usage | None = None) -> Script:
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(id=call_id, name=name, input=arguments) for call_id, name, arguments in calls]
    return _response(blocks, StopReason.TOOL_USE, usage)


def _response(blocks: list[Any], stop_reason: StopReason, given: Usage | None) -> LLMResponse:
    return LLMResponse(
        messages=[AssistantMessage(blocks=blocks)],
        stop_reason=stop_reason,
        usage=given if given is not None else usage(),
    )


def tool_result_block(tool_use_id: str, text: str) -> ToolResultBlock:
    """A result of this release's shape (its content is text before 0.0.86)."""
    content: Any = [TextBlock(text=text)] if HAS_RESULT_BLOCKS else text
    return ToolResultBlock(tool_use_id=tool_use_id, content=content)


def tool_result_text(block: Any) -> str:
    assert isinstance(block, ToolResultBlock)
    content: Any = block.content  # text before 0.0.86
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if isinstance(b, TextBlock))


# --------------------------------------------------------------------------------------- tools
@tool("card_on_file")
async def card_on_file(params: CustomerParams) -> str:
    """The card on file for a customer."""
    return f"{params.name}: card {CARD}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NoteParams:
    note: str = ""


def note_tools(count: int, rng: random.Random | None = None) -> list[Any]:
    made = []
    for i in range(count):
        words = rng.randint(1, 60) if rng is not None else 8

        async def note(params: NoteParams) -> str:
            return params.note

        made.append(tool(f"tool_{i:03d}", " ".join(["Keeps a note about the customer account."] * words))(note))
    return made


class OpenAIChatProvider(LLMProvider):
    """A minimal app-written provider on the real openai client (flowra 0.0.93's own OpenAI
    provider needs httpx2, which this environment lacks): one ``chat.completions.create`` per
    call, the SDK call inside the LLM call as flowra's providers make it."""

    def __init__(self, client: AsyncOpenAI) -> None:
        self.client = client

    async def call(self, request: LLMRequest) -> LLMResponse:
        completion = await self.client.chat.completions.create(
            model=request.model, messages=[{"role": "user", "content": "Weather in Paris?"}]
        )
        choice = completion.choices[0]
        blocks: list[Any] = [
            ToolUseBlock(id=c.id, name=c.function.name, input=json.loads(c.function.arguments))
            for c in choice.message.tool_calls or ()
            if c.type == "function"
        ]
        if choice.message.content:
            blocks.append(TextBlock(text=choice.message.content))
        usage = completion.usage
        return LLMResponse(
            messages=[AssistantMessage(blocks=blocks)],
            stop_reason=StopReason.TOOL_USE if choice.finish_reason == "tool_calls" else StopReason.END_TURN,
            usage=Usage(
                input_tokens=usage.prompt_tokens if usage else 0, output_tokens=usage.completion_tokens if usage else 0
            ),
        )

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        yield ContentComplete(response=await self.call(request))


def openai_provider(client: AsyncOpenAI) -> LLMProvider:
    return OpenAIChatProvider(client)


# ---------------------------------------------------------------------------------------- runs
async def weather_run(
    otel: OtelHooks, *steps: Script, text: str = "Weather in Paris?", metadata: Mapping[str, Any] | None = None
) -> str | None:
    runtime = chat_runtime(ScriptedProvider(*steps), get_weather)
    otel.install(runtime)
    return (await run_chat(runtime, text, **(metadata or {}))).response


async def weather_turn_run(
    otel: OtelHooks, *steps: Script, text: str, metadata: Mapping[str, Any] | None = None
) -> str | None:
    runtime = turn_runtime(ScriptedProvider(*steps), get_weather)
    otel.install(runtime)
    return _text(await run_turn(runtime, text, **(metadata or {})))


async def plain_run(otel: OtelHooks, *steps: Script, text: str) -> str | None:
    runtime = chat_runtime(ScriptedProvider(*steps))
    otel.install(runtime)
    return (await run_chat(runtime, text)).response


async def card_run(otel: OtelHooks, **metadata: Any) -> str | None:
    runtime = chat_runtime(
        ScriptedProvider(tool_calls(("c1", "card_on_file", {"name": "Ada"})), answer("Ok.")), card_on_file
    )
    otel.install(runtime)
    return (await run_chat(runtime, "Card?", **metadata)).response


async def customer_run(
    otel: OtelHooks, final: Script, *, mask: Callable[[str], str] | None, text: str = "Look up Ada"
) -> str | None:
    runtime = chat_runtime(
        ScriptedProvider(tool_calls(("c1", "lookup_customer", {"name": "Ada"})), final), lookup_customer
    )
    if mask is not None:
        masking = mask

        def masked_result(event: Event[AfterToolCallEvent]) -> None:
            """The app's own redaction hook: it rewrites the tool result flowra hands on, the way
            docs/redaction.md writes one (``map_result_text``)."""
            event.data.result = map_result_text(event.data.result, masking)

        runtime.hooks.on(AfterToolCallEvent, masked_result)
    otel.install(runtime)
    return (await run_chat(runtime, text)).response


async def research_run(otel: OtelHooks) -> str | None:
    provider = ScriptedProvider(tool_calls(("c1", "research", {"question": "Why?"})), answer("Because."))
    runtime = research_runtime(provider, ScriptedProvider(answer("Found it.")))
    otel.install(runtime)
    return (await run_chat(runtime, "Research this")).response


async def tool_hook_run(
    otel: OtelHooks,
    *calls: tuple[str, str, dict[str, Any]],
    handlers: Sequence[Callable[[Any], None]] = (),
    handlers_first: bool = False,
    text: str = "Pay the bill, then weather?",
    final: str = "Done.",
) -> ToolRun:
    provider = ScriptedProvider(tool_calls(*calls), answer(final))
    runtime = chat_runtime(provider, get_weather)
    if not handlers_first:
        otel.install(runtime)
    for handler in handlers:
        runtime.hooks.on(BeforeToolCallEvent, handler)
    if handlers_first:
        otel.install(runtime)
    await run_chat(runtime, text)
    assert not provider.script, provider.script
    given = provider.requests[1].messages
    return ToolRun(
        errors=[b.is_error for m in given for b in m.blocks if isinstance(b, ToolResultBlock)],
        requests=[list(r.messages) for r in provider.requests],
    )


async def budget_run(otel: OtelHooks, steps: Sequence[Script], offered: list[Any], text: str, prompt: str) -> None:
    provider = ScriptedProvider(*steps)
    config = TurnConfig(llm_config=llm_config(provider), system=system(prompt), history=[], tools=registry(*offered))
    runtime = AgentRuntime(
        agents={"assistant": TurnAgent}, services={TurnConfig: config, **provider_services(provider)}
    )
    otel.install(runtime)
    await run_turn(runtime, text)


async def provider_weather_run(
    provider: LLMProvider, otel: OtelHooks | None, *, model: str, after_install: Callable[[], None] = lambda: None
) -> str | None:
    runtime = chat_runtime(provider, get_weather, model=model)
    if otel is not None:
        otel.install(runtime)
    after_install()
    return (await run_chat(runtime, "Weather in Paris?")).response


async def history_edit_run(otel: OtelHooks, cities: Sequence[str], edit: HistoryEdit) -> list[list[Any]]:
    seen: list[list[Any]] = []

    def step(response: Script) -> Callable[[LLMRequest], Any]:
        def answer_with(request: LLMRequest) -> Any:
            seen.append(copy.deepcopy(list(request.messages)))
            return response

        return answer_with

    calls = [tool_calls((f"c{i}", "get_weather", {"city": city})) for i, city in enumerate(cities)]
    runtime = chat_runtime(
        ScriptedProvider(*[step(c) for c in [*calls, answer("Done.")]]), get_weather, max_llm_calls=len(calls) + 2
    )
    otel.install(runtime)

    def before_call(event: Event[LLMCallSpan]) -> None:
        edit(event.data.request.messages, len(seen))

    runtime.hooks.on_span(LLMCallSpan, before_call)  # after the plugin's: flowra runs it first
    await run_chat(runtime, "Weather, city by city?")
    return seen


def _text(result: TurnResult) -> str | None:
    message = result.result_message
    if message is None:
        return None
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))


TELLS_A_RUN = hasattr(AgentRuntime, "_AgentRuntime__root")  # 0.0.49+: what _flowra.root_node_id reads


async def kept_runtime(*steps: Script) -> AgentRuntime:
    return chat_runtime(ScriptedProvider(*steps))


async def kept_run(runtime: AgentRuntime) -> str | None:
    return (await run_chat(runtime, "Hello")).response


def on_message_accepted(runtime: AgentRuntime, handler: Callable[[Any], None]) -> None:
    runtime.hooks.on(MessageAcceptedEvent, handler)


def handler_storage(runtime: AgentRuntime) -> list[dict[type, list[Any]]]:
    root = runtime.hooks._root  # type: ignore[attr-defined]
    return [
        {key: list(entries) for key, entries in getattr(group, HANDLER_STORAGE[0]).items()}
        for group in (root._events, root._spans)
    ]


if TYPE_CHECKING:  # mypy, on this line: this module is what tests/both_lines/ expects
    import tests.runtime_hooks.scenarios as _this  # noqa: PLW0406 - checked against the protocol
    from tests.both_lines.line import Scenarios

    _: Scenarios = _this
