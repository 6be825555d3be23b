"""``gen_ai.client.operation.time_per_output_chunk``: one point per chunk after the first, per call.

flowra streams only when a delta handler is registered (``TextDeltaEvent``); the scripted
provider then cuts each text block into ``chunk_size`` pieces. A call with ``n`` chunks records
``n - 1`` gaps (none for a call with one chunk or none), under the chat metric attributes; a run
that does not stream records none.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import ToolLoopStatus
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import instruments, semconv
from tests.hook_registry.conftest import DeltaCollector
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

MakeHooks = Callable[..., OtelHooks]

CHAT_BASE: dict[str, Any] = {
    semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
    semconv.GEN_AI_PROVIDER_NAME: "anthropic",
    semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
    semconv.GEN_AI_AGENT_NAME: "assistant",
}
FIRST_TEXT = "Checking the weather."  # 21 characters
FINAL_TEXT = "Sunny, 21 C in Paris today."  # 27 characters


def chunk_points(reader: InMemoryMetricReader) -> list[HistogramDataPoint]:
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == instruments.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK
        for point in metric.data.data_points
        if isinstance(point, HistogramDataPoint)
    ]


async def run(otel: OtelHooks, steps: list[Any], *, streaming: bool, chunk_size: int) -> DeltaCollector:
    collector = DeltaCollector()
    registry = HookRegistry()
    registry.add(otel)
    if streaming:
        registry.add(collector)
    provider = ScriptedProvider(steps, chunk_size=chunk_size)
    async with tool_registry(get_weather) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Weather in Paris?")
    assert result.status == ToolLoopStatus.COMPLETED
    assert [c.streamed for c in provider.calls] == [streaming] * len(steps)
    return collector


def two_calls(first_text: str | None) -> list[Any]:
    return [
        tool_calls_response([("c1", "get_weather", {"city": "Paris"})], text=first_text),
        text_response(FINAL_TEXT),
    ]


@pytest.mark.parametrize("chunk_size", [3, 5, 30])
async def test_one_point_per_chunk_after_the_first_of_each_call(
    chunk_size: int,
    make_otel_hooks: MakeHooks,
    metric_reader: InMemoryMetricReader,
    span_exporter: InMemorySpanExporter,
) -> None:
    collector = await run(make_otel_hooks(), two_calls(FIRST_TEXT), streaming=True, chunk_size=chunk_size)
    chunks_per_call = [math.ceil(len(FIRST_TEXT) / chunk_size), math.ceil(len(FINAL_TEXT) / chunk_size)]
    assert len(collector.chunks) == sum(chunks_per_call)
    expected = sum(n - 1 for n in chunks_per_call)  # e.g. size 3: 7 + 9 chunks -> 6 + 8 gaps

    found = chunk_points(metric_reader)
    if expected == 0:
        assert found == []  # one chunk per call: no gap to measure
        return
    (point,) = found
    assert dict(point.attributes or {}) == CHAT_BASE
    assert point.count == expected
    assert point.min >= 0
    # Every gap lies inside its call: the sum of the gaps is at most the sum of the call durations.
    chats = [s for s in span_exporter.get_finished_spans() if s.name == "chat sonnet-4-5"]
    total = sum(((s.end_time or 0) - (s.start_time or 0)) / 1e9 for s in chats)
    assert point.sum <= total


async def test_a_call_without_text_adds_no_point(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    # The first call streams nothing (a tool call only): it must not count as -1 or +1 gaps.
    await run(make_otel_hooks(), two_calls(None), streaming=True, chunk_size=4)
    (point,) = chunk_points(metric_reader)
    assert point.count == math.ceil(len(FINAL_TEXT) / 4) - 1


async def test_no_point_without_streaming(make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader) -> None:
    collector = await run(make_otel_hooks(), two_calls(FIRST_TEXT), streaming=False, chunk_size=3)
    assert collector.chunks == []
    assert chunk_points(metric_reader) == []
    data = metric_reader.get_metrics_data()
    assert data is not None  # other metrics were recorded: the run was traced
