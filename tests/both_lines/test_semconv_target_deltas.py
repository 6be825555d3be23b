"""The conventions as they stand now: each change since fe5608e, and the option that keeps the old names.

The target (tests/semconv/PROVENANCE.md) is fe5608e plus the merged #440, #469, #410 and #363. Per
change, a real run shows the new form and the absence of the old one by default; then the
compatibility mode (``OtelHooks(semconv_compat=True)``, or ``OTEL_SEMCONV_STABILITY_OPT_IN`` holding
``gen_ai_latest_experimental/dup``) writes the replaced names too, and the conformance checker
reports exactly those, nothing else. (#410 allows ``gen_ai.conversation.id`` on ``invoke_workflow``:
flowra has no workflow span, so only the checker's model shows it: test_semconv_conformance.py.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from flowra.llm import Usage
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core import semconv
from tests.both_lines.line import MakeHooks, S, Step
from tests.semconv_conformance import check_spans

CACHE_WRITE = semconv.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS
CACHE_READ = semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
OLD_CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"


def cached_answer() -> Step:
    """The final answer, 20 fresh input tokens, 3 read from the provider's cache and 2 written to it."""
    cached = Usage(input_tokens=20, output_tokens=7, cache_read_input_tokens=3, cache_creation_input_tokens=2)
    return S.answer("Sunny.", usage=cached)


async def run(make_otel_hooks: MakeHooks, **options: Any) -> None:
    """The assistant calls a tool once (10 in, 5 out), then gives the cached answer."""
    call = S.tool_calls(("call_1", "get_weather", {"city": "Paris"}), usage=Usage(input_tokens=10, output_tokens=5))
    await S.weather_run(make_otel_hooks(**options), call, cached_answer())


def spans_by_operation(exporter: InMemorySpanExporter, operation: str) -> list[dict[str, Any]]:
    return [
        dict(s.attributes or {})
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get(semconv.GEN_AI_OPERATION_NAME) == operation
    ]


async def test_cache_writes_are_reported_as_cache_write_on_the_chat_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """#440: ``gen_ai.usage.cache_creation.input_tokens`` became ``gen_ai.usage.cache_write.input_tokens``."""
    await run(make_otel_hooks)
    _, answer = spans_by_operation(span_exporter, "chat")
    usage_keys = {k: v for k, v in answer.items() if k.startswith("gen_ai.usage.")}
    assert usage_keys == {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 25,  # 20 + 3 read + 2 written: the cache counts are subsets
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
        CACHE_READ: 3,
        CACHE_WRITE: 2,
    }
    assert OLD_CACHE_CREATION not in answer


async def test_the_internal_agent_span_keeps_the_totals_without_cache_counts(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """#469: no cache read or write counts on the internal ``invoke_agent`` span; the totals stay."""
    await run(make_otel_hooks)
    (agent,) = spans_by_operation(span_exporter, "invoke_agent")
    assert {k: v for k, v in agent.items() if k.startswith("gen_ai.usage.")} == {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10 + 25,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 5 + 7,
    }


async def test_the_finish_reason_is_on_the_span_not_inside_the_output_message(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """#363: ``finish_reason`` inside ``gen_ai.output.messages`` is deprecated in favour of
    ``gen_ai.response.finish_reasons``: by default the messages carry none."""
    await run(make_otel_hooks, capture_content=True)
    call, answer = spans_by_operation(span_exporter, "chat")
    (agent,) = spans_by_operation(span_exporter, "invoke_agent")
    assert json.loads(call[semconv.GEN_AI_OUTPUT_MESSAGES]) == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}],
        }
    ]
    assert call[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_call",)
    expected = [{"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}]}]
    assert json.loads(answer[semconv.GEN_AI_OUTPUT_MESSAGES]) == expected
    assert answer[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert json.loads(agent[semconv.GEN_AI_OUTPUT_MESSAGES]) == expected
    assert agent[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


@pytest.mark.semconv_exempt  # the replaced names are not in the target: checked below, exactly
@pytest.mark.parametrize("how", ["option", "environment"])
async def test_compatibility_mode_also_writes_the_replaced_names(
    how: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    if how == "environment":
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental/dup")
        options: dict[str, Any] = {}
    else:
        monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
        options = {"semconv_compat": True}
    await run(make_otel_hooks, capture_content=True, **options)
    call, answer = spans_by_operation(span_exporter, "chat")
    (agent,) = spans_by_operation(span_exporter, "invoke_agent")
    # The new names stay; the old ones come beside them.
    assert (answer[CACHE_READ], answer[CACHE_WRITE], answer[OLD_CACHE_CREATION]) == (3, 2, 2)
    assert (agent[CACHE_READ], agent[OLD_CACHE_CREATION]) == (3, 2)
    assert CACHE_WRITE not in agent  # the internal agent span never had the new name
    assert json.loads(call[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["finish_reason"] == "tool_call"
    assert json.loads(answer[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["finish_reason"] == "stop"
    assert json.loads(agent[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["finish_reason"] == "stop"
    # Against the current target: exactly the replaced names are findings, nothing else.
    assert sorted(set(check_spans(span_exporter.get_finished_spans()))) == [
        "span 'chat sonnet-4-5' (chat): unknown attribute gen_ai.usage.cache_creation.input_tokens "
        "(not in the registry)",
        "span 'invoke_agent assistant' (invoke_agent): gen_ai.usage.cache_read.input_tokens is not part of the "
        "gen_ai.invoke_agent.internal definition",
        "span 'invoke_agent assistant' (invoke_agent): unknown attribute gen_ai.usage.cache_creation.input_tokens "
        "(not in the registry)",
    ]


@pytest.mark.parametrize("value", ["gen_ai_latest_experimental", "http/dup", "database/dup,http"])
async def test_other_opt_in_values_write_the_current_names_only(
    value: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", value)
    await run(make_otel_hooks, capture_content=True)
    _, answer = spans_by_operation(span_exporter, "chat")
    (agent,) = spans_by_operation(span_exporter, "invoke_agent")
    assert OLD_CACHE_CREATION not in answer and answer[CACHE_WRITE] == 2
    assert not any(k.startswith("gen_ai.usage.cache") for k in agent)
    assert "finish_reason" not in json.loads(answer[semconv.GEN_AI_OUTPUT_MESSAGES])[0]


async def test_the_option_wins_over_the_environment(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental/dup")
    await run(make_otel_hooks, semconv_compat=False)
    _, answer = spans_by_operation(span_exporter, "chat")
    assert OLD_CACHE_CREATION not in answer and answer[CACHE_WRITE] == 2


async def test_the_schema_url_is_that_of_the_target(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """The four changes left the target's schema version as it was (PROVENANCE.md)."""
    await run(make_otel_hooks)
    assert semconv.SCHEMA_URL == "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
    scopes = {s.instrumentation_scope for s in span_exporter.get_finished_spans()}
    assert {(s.name, s.schema_url) for s in scopes if s is not None} == {("flowra_otel", semconv.SCHEMA_URL)}
