"""A model called from inside a hook (to scrub a value) records no content, even with capture on.

A common redaction hook asks a small model to clean a tool result: it passes the *raw* result,
secret included, to ``LLMProvider.call``. The plugin gives that direct call a ``chat`` span (it
is a real LLM call, with a duration and tokens), but no input or output messages: what it
carries is the very value being redacted. The tool loop's own calls keep their content, and the
same direct call made by a custom agent's step, outside any hook, is content-recorded as usual.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, ToolLoopStatus
from flowra.llm import LLMRequest, SystemMessage, TextBlock, ToolResultBlock, UserMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks, semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.conftest import SpanLedger, assert_all_ended, hooks_with, wrapped_result
from tests.flowra_support import (
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
    """An AfterToolCallEvent hook that asks a small model to remove identifiers from a result."""

    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(AfterToolCallEvent, self.scrub)

    async def scrub(self, event: Event[AfterToolCallEvent]) -> None:
        raw = event.data.result
        response = await self.provider.call(
            LLMRequest(
                model=SMALL_MODEL,
                messages=[
                    SystemMessage(blocks=[TextBlock(text="Remove bank identifiers from the text.")]),
                    UserMessage(blocks=[TextBlock(text=raw.content)]),
                ],
            )
        )
        text = "".join(b.text for b in response.message.blocks if isinstance(b, TextBlock))
        event.data.result = ToolResultBlock(tool_use_id=raw.tool_use_id, content=text, is_error=raw.is_error)


def chats(exporter: InMemorySpanExporter, model: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == f"chat {model}"]


@pytest.mark.parametrize("plugin_first", [True, False], ids=["plugin_first", "scrubber_first"])
async def test_a_model_called_from_a_hook_gets_a_chat_span_without_content(
    plugin_first: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    small = ScriptedProvider([text_response(SCRUBBED)])
    main = ScriptedProvider(
        [tool_calls_response([("c1", "lookup_account", {"owner": "Ada"})]), text_response("It is active.")]
    )
    async with tool_registry(lookup_account) as tools:
        runtime = tool_loop_runtime(
            main, tools, hooks_with(make_otel_hooks(capture_content=True), ModelScrubber(small))
        )
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
