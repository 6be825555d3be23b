"""Content of a whole agent run on its ``invoke_agent`` span (opt-in), and the OpenInference aliases.

With content capture on, ``invoke_agent`` carries the run's input as every ``UserMessageEvent``
hook left it (``gen_ai.input.messages``), the agent's system prompt (``gen_ai.system_instructions``)
and its final answer (``gen_ai.output.messages``), each valid against the GenAI JSON schemas.
A hook that rewrites the user's input (a redaction hook) must win: the original text is recorded
nowhere. With capture off none of these exist.

``OtelHooks(openinference=True)`` adds ``input.value`` / ``output.value`` (and their mime types)
under the same content rule, and a zero ``llm.token_count.*`` on ``invoke_agent`` spans whatever
the capture setting, so Phoenix does not count the run's tokens twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flowra.agent import Event
from flowra.lib.tool_loop import ToolLoopStatus, UserMessageEvent
from flowra.llm import TextBlock, UserMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    first_user_text,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)
from tests.hook_registry.test_content_pipeline import valid

MakeHooks = Callable[..., OtelHooks]

ORIGINAL_INPUT = "my card is 4111-ORIGINAL-7731, weather in Paris?"
REWRITTEN_INPUT = "my card is [CARD], weather in Paris?"
SYSTEM_PROMPT = "You answer weather questions in one short sentence."
ANSWER = "Sunny, 21 C in Paris."

RUN_CONTENT_KEYS = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_OUTPUT_MESSAGES,
)
OI_CONTENT_KEYS = (
    semconv.OI_INPUT_VALUE,
    semconv.OI_INPUT_MIME_TYPE,
    semconv.OI_OUTPUT_VALUE,
    semconv.OI_OUTPUT_MIME_TYPE,
)
OI_TOKEN_KEYS = ("llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total")


class RewriteUserInput:
    """A redaction hook on the run's input: replaces the user message before the loop uses it."""

    def register_hooks(self, registry: Any) -> None:
        registry.on(UserMessageEvent, self.rewrite)

    def rewrite(self, event: Event[UserMessageEvent]) -> None:
        event.data.messages = [UserMessage(blocks=[TextBlock(text=REWRITTEN_INPUT)])]


async def run(hooks: OtelHooks, *extra: object) -> ScriptedProvider:
    provider = ScriptedProvider(
        [tool_calls_response([("c1", "get_weather", {"city": "Paris"})]), text_response(ANSWER)]
    )
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(hooks, *extra), system_prompt=SYSTEM_PROMPT)
        result = await run_tool_loop(runtime, ORIGINAL_INPUT)
    assert result.status == ToolLoopStatus.COMPLETED
    provider.assert_exhausted()
    return provider


def agent_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent assistant"]
    return span


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def expected_input(text: str) -> list[Any]:
    return [{"role": "user", "parts": [{"type": "text", "content": text}]}]


EXPECTED_SYSTEM = [{"type": "text", "content": SYSTEM_PROMPT}]
EXPECTED_OUTPUT = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]  # no finish_reason (#363)


async def test_capture_on_records_the_rewritten_input_the_system_prompt_and_the_answer(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = await run(make_otel_hooks(capture_content=True), RewriteUserInput())
    assert_all_ended(ledger, span_exporter)
    # The hook really rewrote what the model got.
    assert first_user_text(provider.requests[0]) == REWRITTEN_INPUT

    attrs = attrs_of(agent_span(span_exporter))
    assert valid("input-messages", attrs[semconv.GEN_AI_INPUT_MESSAGES]) == expected_input(REWRITTEN_INPUT)
    assert valid("system-instructions", attrs[semconv.GEN_AI_SYSTEM_INSTRUCTIONS]) == EXPECTED_SYSTEM
    assert valid("output-messages", attrs[semconv.GEN_AI_OUTPUT_MESSAGES]) == EXPECTED_OUTPUT
    # The original input is recorded nowhere (not on the agent, not on any chat).
    assert_no_leak(span_exporter.get_finished_spans(), ["4111-ORIGINAL-7731"])


async def test_without_the_rewrite_hook_the_original_input_is_recorded(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    # Paired negative of the test above: the same run without the hook shows the original,
    # so "the original appears nowhere" there is the hook's doing, not an empty trace.
    await run(make_otel_hooks(capture_content=True))
    attrs = attrs_of(agent_span(span_exporter))
    assert valid("input-messages", attrs[semconv.GEN_AI_INPUT_MESSAGES]) == expected_input(ORIGINAL_INPUT)
    leaks = find_leaks([agent_span(span_exporter)], ["4111-ORIGINAL-7731"])
    assert [leak.where for leak in leaks] == [f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"]


async def test_capture_off_records_no_run_content(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    await run(make_otel_hooks(capture_content=False), RewriteUserInput())
    for span in span_exporter.get_finished_spans():
        keys = set(span.attributes or {})
        assert not keys & set(RUN_CONTENT_KEYS), span.name
    assert_no_leak(span_exporter.get_finished_spans(), [REWRITTEN_INPUT, "4111-ORIGINAL-7731", SYSTEM_PROMPT, ANSWER])


@pytest.mark.parametrize("capture", [True, False], ids=["capture_on", "capture_off"])
async def test_openinference_aliases_follow_the_content_rule_and_count_zero_tokens(
    capture: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    await run(make_otel_hooks(capture_content=capture, openinference=True), RewriteUserInput())
    attrs = attrs_of(agent_span(span_exporter))
    assert {k: attrs[k] for k in OI_TOKEN_KEYS} == dict.fromkeys(OI_TOKEN_KEYS, 0)
    if capture:
        assert attrs[semconv.OI_INPUT_VALUE] == attrs[semconv.GEN_AI_INPUT_MESSAGES]
        assert valid("input-messages", attrs[semconv.OI_INPUT_VALUE]) == expected_input(REWRITTEN_INPUT)
        assert attrs[semconv.OI_OUTPUT_VALUE] == attrs[semconv.GEN_AI_OUTPUT_MESSAGES]
        # with openinference=True the output keeps the finish_reason Phoenix needs to show it
        assert valid("output-messages", attrs[semconv.OI_OUTPUT_VALUE]) == [
            {**EXPECTED_OUTPUT[0], "finish_reason": "stop"}
        ]
        assert attrs[semconv.OI_INPUT_MIME_TYPE] == attrs[semconv.OI_OUTPUT_MIME_TYPE] == "application/json"
    else:
        assert not set(attrs) & set(OI_CONTENT_KEYS)
        assert_no_leak(span_exporter.get_finished_spans(), [REWRITTEN_INPUT, ANSWER])
    # Token counts are an agent-span alias only: chat and tool spans get none. A tool span's
    # arguments (what the hooks left) are its input.value, for Phoenix's Input panel.
    for span in span_exporter.get_finished_spans():
        if span.name == "invoke_agent assistant":
            continue
        attrs = attrs_of(span)
        assert not set(attrs) & set(OI_TOKEN_KEYS), span.name
        if capture and span.name == "execute_tool get_weather":
            assert attrs[semconv.OI_INPUT_VALUE] == attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"city":"Paris"}'
            assert attrs[semconv.OI_INPUT_MIME_TYPE] == "application/json"
            assert not set(attrs) & {semconv.OI_OUTPUT_VALUE, semconv.OI_OUTPUT_MIME_TYPE}
        else:
            assert not set(attrs) & set(OI_CONTENT_KEYS), span.name


async def test_no_openinference_keys_without_the_option(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    await run(make_otel_hooks(capture_content=True), RewriteUserInput())
    for span in span_exporter.get_finished_spans():
        assert not set(span.attributes or {}) & {*OI_TOKEN_KEYS, *OI_CONTENT_KEYS}, span.name
    assert semconv.GEN_AI_INPUT_MESSAGES in attrs_of(agent_span(span_exporter))  # content itself is there
