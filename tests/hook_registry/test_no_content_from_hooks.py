"""A model called from inside a hook (to scrub a value) records no content, even with capture on.

A common redaction hook asks a small model to clean a tool result: it passes the *raw* result,
secret included, to ``LLMProvider.call``. The plugin gives that direct call a ``chat`` span (it
is a real LLM call, with a duration and tokens), but no input or output messages: what it
carries is the very value being redacted. The tool loop's own calls keep their content, and the
same direct call made by a custom agent's step, outside any hook, is content-recorded as usual.

A whole agent run a hook starts (``AgentRuntime.run`` of a small tool loop on the app's own
registry) is the same case: it is traced (agent, model call, tokens) without content, whichever
event's hook starts it (one the plugin subscribes to or not) and also from a task the hook
starts. The mechanism is ``IN_HOOKS``, set by the emit patch while any event's handlers run; the
paired negative replaces it with a variable that is never set and shows the raw value recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from contextvars import Token
from typing import Any

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, BeforeToolCallEvent, TextReasoningEvent, ToolLoopStatus
from flowra.llm import LLMRequest, SystemMessage, TextBlock, ToolResultBlock, UserMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import patches as otel_patches
from flowra_otel.adapters.hook_registry import span_book
from flowra_otel.core import semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests import span_tree
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with, wrapped_result
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    SummarizerAgent,
    SummarizeSpec,
    run_agent,
    run_tool_loop,
    specialist_runtime,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

MakeHooks = Callable[..., OtelHooks]

SECRET = "iban-DE89-3704-SECRET-0044"
SCRUBBED = "account [IBAN removed] is active"
OWNER = "Ada Lovelace, passport X-7788-SECRET"
SMALL_MODEL = "openai/gpt-4o-mini"

CONTENT_KEYS = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_TOOL_DEFINITIONS,
)


def lookup_account(owner: str) -> str:
    """Look up a customer's bank account."""
    return f"account {SECRET} of {owner} is active"


class ModelScrubber:
    """A hook that asks a small model to remove identifiers: from a tool result (AfterToolCallEvent,
    the loop's collect step) or from the tool's arguments (BeforeToolCallEvent, inside the very
    step whose own LLM call's ``chat`` span is still open)."""

    def __init__(self, provider: ScriptedProvider, *, on: str = "result") -> None:
        self.provider = provider
        self.on = on

    def register_hooks(self, registry: HookRegistry) -> None:
        if self.on == "result":
            registry.on(AfterToolCallEvent, self.scrub_result)
        else:
            registry.on(BeforeToolCallEvent, self.scrub_arguments)

    async def _clean(self, raw: str) -> str:
        response = await self.provider.call(
            LLMRequest(
                model=SMALL_MODEL,
                messages=[
                    SystemMessage(blocks=[TextBlock(text="Remove bank identifiers from the text.")]),
                    UserMessage(blocks=[TextBlock(text=raw)]),
                ],
            )
        )
        return "".join(b.text for b in response.message.blocks if isinstance(b, TextBlock))

    async def scrub_result(self, event: Event[AfterToolCallEvent]) -> None:
        raw = event.data.result
        text = await self._clean(raw.content)
        event.data.result = ToolResultBlock(tool_use_id=raw.tool_use_id, content=text, is_error=raw.is_error)

    async def scrub_arguments(self, event: Event[BeforeToolCallEvent]) -> None:
        tool_use = event.data.tool_use
        owner = await self._clean(tool_use.input["owner"])
        event.data.tool_use = dataclasses.replace(tool_use, input={"owner": owner})


def chats(exporter: InMemorySpanExporter, model: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == f"chat {model}"]


def wired(otel: OtelHooks, scrubber: ModelScrubber, *, plugin_first: bool) -> HookRegistry:
    if plugin_first:
        return hooks_with(otel, scrubber)
    registry = HookRegistry()
    registry.add(scrubber)
    registry.add(otel)
    return registry


@pytest.mark.parametrize("plugin_first", [True, False], ids=["plugin_first", "scrubber_first"])
async def test_a_model_called_from_a_hook_gets_a_chat_span_without_content(
    plugin_first: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    small = ScriptedProvider([text_response(SCRUBBED)])
    main = ScriptedProvider(
        [tool_calls_response([("c1", "lookup_account", {"owner": "Ada"})]), text_response("It is active.")]
    )
    async with tool_registry(lookup_account) as tools:
        registry = wired(make_otel_hooks(capture_content=True), ModelScrubber(small), plugin_first=plugin_first)
        runtime = tool_loop_runtime(main, tools, registry)
        result = await run_tool_loop(runtime, "Is Ada's account active?")
    assert result.status == ToolLoopStatus.COMPLETED
    main.assert_exhausted()
    small.assert_exhausted()
    assert_all_ended(ledger, span_exporter)
    # The small model really got the raw result, secret included.
    assert SECRET in str(small.requests[0].messages[-1].blocks[0])

    (hook_chat,) = chats(span_exporter, "gpt-4o-mini")
    hook_attrs = dict(hook_chat.attributes or {})
    assert hook_attrs[semconv.GEN_AI_OPERATION_NAME] == semconv.OP_CHAT
    assert hook_attrs[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    assert not set(hook_attrs) & set(CONTENT_KEYS)
    (agent,) = [s for s in span_exporter.get_finished_spans() if s.name == "invoke_agent assistant"]
    assert hook_chat.parent is not None and agent.context is not None
    assert hook_chat.parent.span_id == agent.context.span_id

    # The tool loop's own calls keep their content, with the scrubbed result.
    loop_chats = chats(span_exporter, "sonnet-4-5")
    assert len(loop_chats) == 2
    for chat in loop_chats:
        assert {semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES} <= set(chat.attributes or {})
    assert SCRUBBED in str((loop_chats[1].attributes or {})[semconv.GEN_AI_INPUT_MESSAGES])
    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool lookup_account"]
    assert (tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(SCRUBBED)

    assert_no_leak(span_exporter.get_finished_spans(), [SECRET])


@pytest.mark.parametrize("plugin_first", [True, False], ids=["plugin_first", "scrubber_first"])
async def test_a_model_called_from_a_before_tool_hook_gets_a_chat_span_without_content(
    plugin_first: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """The hook runs inside the loop's call_llm step, while that step's own chat span is open:
    its call is still its own chat span (never taken for the loop's call), without content."""
    small = ScriptedProvider([text_response("[name removed]")])
    main = ScriptedProvider(
        [tool_calls_response([("c1", "lookup_account", {"owner": OWNER})]), text_response("It is active.")]
    )
    async with tool_registry(lookup_account) as tools:
        registry = wired(
            make_otel_hooks(capture_content=True), ModelScrubber(small, on="arguments"), plugin_first=plugin_first
        )
        result = await run_tool_loop(tool_loop_runtime(main, tools, registry), "Is the account active?")
    assert result.status == ToolLoopStatus.COMPLETED
    small.assert_exhausted()
    assert_all_ended(ledger, span_exporter)
    (hook_chat,) = chats(span_exporter, "gpt-4o-mini")
    assert not set(hook_chat.attributes or {}) & set(CONTENT_KEYS)
    assert len(chats(span_exporter, "sonnet-4-5")) == 2  # the loop's own calls, each once
    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool lookup_account"]
    assert (tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"owner":"[name removed]"}'
    assert OWNER in str(small.requests[0].messages[-1].blocks[0])  # the model really got the raw name
    assert_no_leak(span_exporter.get_finished_spans(), [OWNER])


async def test_the_same_direct_call_from_an_agent_step_is_content_recorded(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    # Paired negative: outside any hook, a custom agent's direct call records its content.
    provider = ScriptedProvider([text_response(SCRUBBED)])
    runtime = specialist_runtime(provider, hooks_with(make_otel_hooks(capture_content=True)), model=SMALL_MODEL)
    result = await run_agent(runtime, SummarizerAgent, SummarizeSpec(text=f"account {SECRET} of Ada is active"))
    assert getattr(result, "summary", None) == SCRUBBED
    assert_all_ended(ledger, span_exporter)

    (chat,) = chats(span_exporter, "gpt-4o-mini")
    attrs = dict(chat.attributes or {})
    assert {semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES} <= set(attrs)
    assert SCRUBBED in str(attrs[semconv.GEN_AI_OUTPUT_MESSAGES])
    leaks = find_leaks([chat], [SECRET])
    assert [leak.where for leak in leaks] == [f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"]


# ==================================================================================== an agent run started by a hook
class AgentScrubber:
    """A redaction hook that scrubs by running a small flowra agent (``AgentRuntime.run`` of a
    tool loop on the app's own registry, so it is traced by the same ``OtelHooks``): the small
    model is given the raw value, secret included.

    ``on``: ``result`` scrubs a tool result (AfterToolCallEvent); ``reasoning`` has the model's
    reasoning text checked (TextReasoningEvent, an event the plugin does not subscribe to);
    ``task``: the result, scrubbed in a task the hook starts and awaits."""

    def __init__(self, provider: ScriptedProvider, registry: HookRegistry, *, on: str) -> None:
        self.provider = provider
        self.registry = registry
        self.on = on
        self.seen: list[str] = []

    def register_hooks(self, registry: HookRegistry) -> None:
        if self.on == "reasoning":
            registry.on(TextReasoningEvent, self.check_reasoning)
        else:
            registry.on(AfterToolCallEvent, self.scrub_result)

    async def _clean(self, raw: str) -> str:
        self.seen.append(raw)
        async with tool_registry() as no_tools:
            runtime = tool_loop_runtime(self.provider, no_tools, self.registry, model=SMALL_MODEL)
            result = await run_tool_loop(runtime, f"Remove bank identifiers: {raw}")
        message = result.result_message
        assert message is not None
        return "".join(b.text for b in message.blocks if isinstance(b, TextBlock))

    async def scrub_result(self, event: Event[AfterToolCallEvent]) -> None:
        raw = event.data.result
        if self.on == "task":
            text = await asyncio.ensure_future(self._clean(raw.content))
        else:
            text = await self._clean(raw.content)
        event.data.result = ToolResultBlock(tool_use_id=raw.tool_use_id, content=text, is_error=raw.is_error)

    async def check_reasoning(self, event: Event[TextReasoningEvent]) -> None:
        if SECRET in event.data.text.text:  # the small model's own answer carries none: no recursion
            await self._clean(event.data.text.text)


class _NeverInHooks:
    """Stands for ``IN_HOOKS`` in the negative: set and reset as usual, never seen set."""

    def set(self, value: bool) -> Token[bool] | None:
        return None

    def reset(self, token: Token[bool] | None) -> None:
        return None

    def get(self) -> bool:
        return False


def without_in_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    never = _NeverInHooks()
    monkeypatch.setattr(otel_patches, "IN_HOOKS", never)
    monkeypatch.setattr(span_book, "IN_HOOKS", never)


NESTED: list[Any] = [("invoke_agent assistant", [("chat gpt-4o-mini", [])])]


@pytest.mark.parametrize("in_hooks", [True, False], ids=["in_hooks_marked", "without_in_hooks"])
@pytest.mark.parametrize("on", ["result", "task", "reasoning"])
async def test_an_agent_run_started_by_a_hook_records_no_content(
    on: str,
    in_hooks: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not in_hooks:
        without_in_hooks(monkeypatch)
    registry = HookRegistry()
    registry.add(make_otel_hooks(capture_content=True))
    small = ScriptedProvider([text_response(SCRUBBED)])
    scrubber = AgentScrubber(small, registry, on=on)
    registry.add(scrubber)
    first = tool_calls_response(
        [("c1", "lookup_account", {"owner": "Ada"})],
        text=f"Checking {SECRET} first." if on == "reasoning" else None,
    )
    main = ScriptedProvider([first, text_response("It is active.")])
    async with tool_registry(lookup_account) as tools:
        result = await run_tool_loop(tool_loop_runtime(main, tools, registry), "Is Ada's account active?")
    assert result.status == ToolLoopStatus.COMPLETED
    main.assert_exhausted()
    small.assert_exhausted()
    assert SECRET in scrubber.seen[0]  # the small agent really was given the raw value
    assert_all_ended(ledger, span_exporter)

    tree = span_tree.build(span_exporter.get_finished_spans())
    # The hook's run is traced under the agent whose step ran the hook, in order.
    calls: list[Any] = [("chat sonnet-4-5", []), ("execute_tool lookup_account", []), ("chat sonnet-4-5", [])]
    calls.insert(1 if on == "reasoning" else 2, NESTED[0])
    assert span_tree.shape(tree) == [("invoke_agent assistant", calls)]
    inner = tree[0].children[1 if on == "reasoning" else 2]
    inner_spans = [inner, *inner.children]
    assert inner.children[0].attrs[semconv.GEN_AI_OPERATION_NAME] == semconv.OP_CHAT  # traced all the same
    if in_hooks:
        for node in inner_spans:
            assert not set(node.attrs) & {*CONTENT_KEYS, semconv.GEN_AI_TOOL_CALL_RESULT}, node.name
        # The outer run keeps its content (the scrubbed result, when the hook replaced it).
        outer_last = tree[0].children[-1]
        assert semconv.GEN_AI_INPUT_MESSAGES in outer_last.attrs
        if on != "reasoning":
            assert SCRUBBED in str(outer_last.attrs[semconv.GEN_AI_INPUT_MESSAGES])
            assert_no_leak(span_exporter.get_finished_spans(), [SECRET])
    else:  # the negative: the nested run records the raw value it was given
        inner_ids = {node.span.context.span_id for node in inner_spans if node.span and node.span.context}
        places = {
            (leak.span_name, leak.where)
            for leak in find_leaks(span_exporter.get_finished_spans(), [SECRET])
            if int(leak.span_id, 16) in inner_ids
        }
        assert places == {
            ("invoke_agent assistant", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
            ("chat gpt-4o-mini", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
        }
