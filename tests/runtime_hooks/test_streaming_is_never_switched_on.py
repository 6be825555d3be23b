"""Streaming on flowra 0.0.86+: tracing never switches it on, and measures it when the app does.

flowra's ``LLMCaller`` streams exactly when the calling agent's hooks have a ``TextDeltaEvent`` or
``ThinkingDeltaEvent`` handler that would fire (``llm_caller.py``: ``hooks.has_handlers``). A
tracer that subscribed to the delta events would therefore change how every call of the app is
made. ``OtelHooks`` never subscribes to them: its patched ``emit`` watches the chunks flowra emits
anyway (time to first chunk, time per output chunk) and ``gen_ai.request.stream`` says whether the
call's own agent streams.

Each test records which provider method flowra used (``call`` or ``stream``), so "never switched
on" is observed, not inferred; the paired negatives show that a delta handler (the app's, or one
the adapter would register) does make flowra call ``stream``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from flowra.agent import AgentRuntime
from flowra.lib.observability import TextDeltaEvent, ThinkingDeltaEvent
from flowra.llm import LLMRequest, LLMResponse, StreamEvent
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import _flowra
from flowra_otel.core import instruments, semconv
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import (
    Script,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    research_runtime,
    run_chat,
    run_turn,
    scoped_hook,
    subscribed,
    text_response,
    tool_calls_response,
    turn_runtime,
)

MakeHooks = Callable[..., OtelHooks]

MODEL = "sonnet-4-5"
CHAT_BASE: dict[str, Any] = {
    semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
    semconv.GEN_AI_PROVIDER_NAME: "anthropic",
    semconv.GEN_AI_REQUEST_MODEL: MODEL,
    semconv.GEN_AI_AGENT_NAME: "assistant",
}
STREAM_KEYS = (semconv.GEN_AI_REQUEST_STREAM, semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
CHUNK_METRICS = {instruments.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK, instruments.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK}
FIRST_TEXT = "Checking the weather."  # 21 characters: 6 chunks of 4
FINAL_TEXT = "Sunny, 21 C in Paris today."  # 27 characters: 7 chunks of 4
CHUNK = 4  # ScriptedProvider.stream cuts text into pieces of 4 characters


class RecordingProvider(ScriptedProvider):
    """A ``ScriptedProvider`` that notes which method flowra used for each request."""

    def __init__(self, *script: Script) -> None:
        super().__init__(*script)
        self.methods: list[str] = []

    async def call(self, request: LLMRequest) -> LLMResponse:
        self.methods.append("call")
        return await super().call(request)

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.methods.append("stream")
        return super().stream(request)


def weather_script() -> list[Script]:
    return [
        tool_calls_response(("c1", "get_weather", {"city": "Paris"}), text=FIRST_TEXT),
        text_response(FINAL_TEXT),
    ]


def chats(exporter: InMemorySpanExporter) -> list[span_tree.Node]:
    return [n for n in span_tree.walk(span_tree.build(exporter.get_finished_spans())) if n.name.startswith("chat ")]


def metric_names(reader: InMemoryMetricReader) -> set[str]:
    data = reader.get_metrics_data()
    if data is None:
        return set()
    return {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def histogram(reader: InMemoryMetricReader, name: str) -> list[HistogramDataPoint]:
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
        if isinstance(point, HistogramDataPoint)
    ]


def no_delta_handler(runtime: AgentRuntime) -> bool:
    return not any(subscribed(runtime.hooks, t) for t in (TextDeltaEvent, ThinkingDeltaEvent))


# ----------------------------------------------------------------------------- never switched on
async def run_untouched_chat(hooks: OtelHooks | None) -> tuple[RecordingProvider, AgentRuntime]:
    provider = RecordingProvider(*weather_script())
    runtime = chat_runtime(provider, get_weather)
    if hooks is not None:
        hooks.install(runtime)
    result = await run_chat(runtime, "Weather in Paris?")
    assert result.response == FINAL_TEXT
    return provider, runtime


@pytest.mark.parametrize("capture_content", [False, True])
async def test_a_traced_chat_calls_the_provider_without_streaming(
    capture_content: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    provider, runtime = await run_untouched_chat(make_otel_hooks(capture_content=capture_content))
    assert provider.methods == ["call", "call"]
    assert no_delta_handler(runtime)  # the adapter subscribed to no delta event
    found = chats(span_exporter)
    assert len(found) == 2
    assert [{k: c.attrs[k] for k in STREAM_KEYS if k in c.attrs} for c in found] == [{}, {}]
    names = metric_names(metric_reader)
    assert instruments.GEN_AI_CLIENT_OPERATION_DURATION in names  # the run was measured
    assert names & CHUNK_METRICS == set()
    assert_all_ended(ledger, span_exporter)


async def test_a_traced_bare_turn_and_an_agent_used_as_a_tool_call_without_streaming(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    turn = RecordingProvider(text_response("Hi."))
    await run_turn(traced(make_otel_hooks, turn_runtime(turn)), "Hi?")
    main = RecordingProvider(tool_calls_response(("r1", "research", {"question": "Why?"})), text_response("Done."))
    researcher = RecordingProvider(tool_calls_response(("w", "get_weather", {"city": "Rome"})), text_response("So."))
    await run_chat(traced(make_otel_hooks, research_runtime(main, researcher, get_weather)))
    assert (turn.methods, main.methods, researcher.methods) == (["call"], ["call", "call"], ["call", "call"])
    found = chats(span_exporter)
    assert len(found) == 5
    assert all(semconv.GEN_AI_REQUEST_STREAM not in c.attrs for c in found)


async def test_paired_an_app_delta_handler_does_make_flowra_stream() -> None:
    """The negative of the tests above: the provider records ``stream`` once a handler exists, so
    they would see an adapter that switched streaming on (this run is not traced at all)."""
    provider = RecordingProvider(*weather_script())
    runtime = chat_runtime(provider, get_weather)
    seen: list[str] = []
    runtime.hooks.on(TextDeltaEvent, lambda event: seen.append(event.data.text))
    await run_chat(runtime, "Weather in Paris?")
    assert provider.methods == ["stream", "stream"]
    assert "".join(seen) == FIRST_TEXT + FINAL_TEXT


async def test_paired_an_adapter_subscribed_to_deltas_would_switch_streaming_on(
    make_otel_hooks: MakeHooks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mechanism removed: an adapter whose subscriptions include the delta events (as a naive
    tracer's would, to time chunks) makes flowra stream every call of an app that never asked."""
    monkeypatch.setattr(_flowra, "CONTENT_EVENTS", _flowra.CONTENT_EVENTS | _flowra.DELTA_EVENTS)
    provider, runtime = await run_untouched_chat(make_otel_hooks())
    assert provider.methods == ["stream", "stream"]
    assert not no_delta_handler(runtime)


# ----------------------------------------------------------------------------- measured when the app streams
async def run_streaming(
    hooks: OtelHooks, script: list[Script], *, delta: type[Any] = TextDeltaEvent
) -> tuple[RecordingProvider, list[str]]:
    provider = RecordingProvider(*script)
    runtime = traced(lambda **_: hooks, chat_runtime(provider, get_weather))
    seen: list[str] = []
    runtime.hooks.on(delta, lambda event: seen.append(event.data.text))
    await run_chat(runtime, "Weather in Paris?")
    return provider, seen


@pytest.mark.parametrize("delta", [TextDeltaEvent, ThinkingDeltaEvent], ids=["text-delta", "thinking-delta"])
async def test_time_to_first_chunk_on_spans_and_metric_when_the_app_streams(
    delta: type[Any],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    provider, _ = await run_streaming(make_otel_hooks(), weather_script(), delta=delta)
    assert provider.methods == ["stream", "stream"]  # either delta handler switches flowra to streaming
    found = chats(span_exporter)
    assert len(found) == 2
    for chat in found:
        assert chat.attrs[semconv.GEN_AI_REQUEST_STREAM] is True
        ttfc = chat.attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
        assert isinstance(ttfc, float)
        assert chat.span is not None and chat.span.start_time is not None and chat.span.end_time is not None
        assert 0 <= ttfc <= (chat.span.end_time - chat.span.start_time) / 1e9

    (point,) = histogram(metric_reader, instruments.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
    assert dict(point.attributes or {}) == CHAT_BASE
    assert point.count == 2
    assert list(point.explicit_bounds) == instruments.DURATION_BUCKETS
    assert point.sum == pytest.approx(sum(c.attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] for c in found))
    # Streaming changes nothing else in the metrics: the operation duration has the same attributes.
    (duration,) = histogram(metric_reader, instruments.GEN_AI_CLIENT_OPERATION_DURATION)
    assert (dict(duration.attributes or {}), duration.count) == (CHAT_BASE, 2)
    assert_all_ended(ledger, span_exporter)


async def test_one_time_per_output_chunk_point_per_chunk_after_the_first_of_each_call(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    _, seen = await run_streaming(make_otel_hooks(), weather_script())
    chunks_per_call = [math.ceil(len(FIRST_TEXT) / CHUNK), math.ceil(len(FINAL_TEXT) / CHUNK)]
    assert len(seen) == sum(chunks_per_call)
    (point,) = histogram(metric_reader, instruments.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    assert dict(point.attributes or {}) == CHAT_BASE
    assert point.count == sum(n - 1 for n in chunks_per_call)  # 5 + 6 gaps
    assert point.min >= 0
    # Every gap lies inside its call: the sum of the gaps is at most the sum of the call durations.
    total = sum(((c.span.end_time or 0) - (c.span.start_time or 0)) / 1e9 for c in chats(span_exporter) if c.span)
    assert point.sum <= total


async def test_a_call_that_streams_no_text_has_no_first_chunk_and_no_gap(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    script: list[Script] = [tool_calls_response(("c1", "get_weather", {"city": "Paris"})), text_response(FINAL_TEXT)]
    provider, _ = await run_streaming(make_otel_hooks(), script)
    assert provider.methods == ["stream", "stream"]
    first, second = chats(span_exporter)
    # Both calls streamed; only the second yielded a chunk.
    assert first.attrs[semconv.GEN_AI_REQUEST_STREAM] is True
    assert semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in first.attrs
    assert semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in second.attrs
    (ttfc,) = histogram(metric_reader, instruments.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
    assert ttfc.count == 1
    (gaps,) = histogram(metric_reader, instruments.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    assert gaps.count == math.ceil(len(FINAL_TEXT) / CHUNK) - 1  # never -1 or +1 for the empty call


def comparable(nodes: list[span_tree.Node]) -> list[Any]:
    """The tree minus the two streaming attributes; siblings in a canonical order."""
    return sorted(
        (
            (
                n.name,
                n.kind,
                n.status,
                {k: v for k, v in n.attrs.items() if k not in STREAM_KEYS},
                comparable(n.children),
            )
            for n in nodes
        ),
        key=repr,
    )


async def test_the_span_tree_is_the_same_with_and_without_streaming(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = make_otel_hooks(capture_content=True)
    provider, _ = await run_untouched_chat(hooks)
    assert provider.methods == ["call", "call"]
    plain = span_tree.build(span_exporter.get_finished_spans())
    span_exporter.clear()
    provider, _ = await run_streaming(hooks, weather_script())
    assert provider.methods == ["stream", "stream"]
    streamed = span_tree.build(span_exporter.get_finished_spans())

    assert all(not set(STREAM_KEYS) & set(n.attrs) for n in span_tree.walk(plain) if n.name.startswith("chat "))
    assert all(set(STREAM_KEYS) <= set(n.attrs) for n in span_tree.walk(streamed) if n.name.startswith("chat "))
    assert comparable(streamed) == comparable(plain)
    assert span_tree.shape(plain) == [
        (
            "invoke_agent assistant",
            [(f"chat {MODEL}", []), ("execute_tool get_weather", []), (f"chat {MODEL}", [])],
        )
    ]
    assert semconv.GEN_AI_OUTPUT_MESSAGES in plain[0].children[0].attrs  # content compared too


async def test_only_the_agent_that_streams_says_so(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    """A delta handler scoped to the researcher makes flowra stream the researcher's calls only:
    ``gen_ai.request.stream`` follows the calling agent, not "some handler exists somewhere"."""
    main = RecordingProvider(tool_calls_response(("r1", "research", {"question": "Why?"})), text_response("Done."))
    researcher = RecordingProvider(text_response("Because."))
    runtime = traced(make_otel_hooks, research_runtime(main, researcher))
    seen: list[str] = []
    scoped_hook(runtime, TextDeltaEvent, lambda event: seen.append(event.data.text), "researcher")
    await run_chat(runtime, "Research")
    assert (main.methods, researcher.methods, "".join(seen)) == (["call", "call"], ["stream"], "Because.")

    by_agent: dict[str, list[dict[str, Any]]] = {}
    for chat in chats(span_exporter):
        by_agent.setdefault(chat.attrs[semconv.GEN_AI_AGENT_NAME], []).append(
            {k: type(chat.attrs[k]).__name__ for k in STREAM_KEYS if k in chat.attrs}
        )
    assert by_agent == {
        "assistant": [{}, {}],
        "researcher/turn": [
            {semconv.GEN_AI_REQUEST_STREAM: "bool", semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: "float"}
        ],
    }
    (ttfc,) = histogram(metric_reader, instruments.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
    assert (ttfc.attributes or {})[semconv.GEN_AI_AGENT_NAME] == "researcher/turn"
    assert ttfc.count == 1
