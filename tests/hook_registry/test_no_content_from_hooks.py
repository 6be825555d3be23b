"""A model called from inside a hook (to scrub a value) records no content, even with capture on.

A common redaction hook asks a small model to clean a tool result: it passes the *raw* result,
secret included, to ``LLMProvider.call``. The plugin gives that direct call a ``chat`` span (it
is a real LLM call, with a duration and tokens), but no input or output messages: what it
carries is the very value being redacted. The tool loop's own calls keep their content, and the
same direct call made by a custom agent's step, outside any hook, is content-recorded as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, BeforeToolCallEvent, ToolLoopStatus
from flowra.llm import LLMRequest, SystemMessage, TextBlock, ToolResultBlock, UserMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.testing import assert_no_leak, find_leaks
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
