"""Metrics of real flowra runs, read back from the SDK's ``InMemoryMetricReader``.

Every instrument is checked by name, unit, attributes and value for one scripted run (two LLM
calls with cache tokens and cost, a tool that works and one that fails), plus the advisory
bucket boundaries, the error path, streaming (time to first chunk, and the span tree being
otherwise identical with and without it) and a tracer provider that records nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import ToolLoopStatus
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
    Sum,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from flowra_otel import OtelHooks
from flowra_otel.core import instruments, semconv
from tests import span_tree
from tests.hook_registry.conftest import DeltaCollector
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    ScriptStep,
    fail_tool,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    usage,
)

MakeHooks = Callable[..., OtelHooks]

PROVIDER = "anthropic"
MODEL = "sonnet-4-5"
CHAT_BASE: dict[str, Any] = {
    semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
    semconv.GEN_AI_PROVIDER_NAME: PROVIDER,
    semconv.GEN_AI_REQUEST_MODEL: MODEL,
    semconv.GEN_AI_AGENT_NAME: "assistant",  # which agent spent the tokens and the time
}
UNCLASSIFIED = {semconv.FLOWRA_ERROR_KIND: "unknown"}
"""A failure that is no provider SDK's (tests/test_provider_errors.py covers the classified ones)."""


# --------------------------------------------------------------------------------- reading metrics
@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    description: str
    data: Histogram | Sum


def collect(reader: InMemoryMetricReader) -> dict[str, Metric]:
    """Every metric the reader holds, by name (one scope: the plugin's)."""
    data = reader.get_metrics_data()
    out: dict[str, Metric] = {}
    if data is None:
        return out
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            assert scope_metrics.scope.name == semconv.INSTRUMENTATION_NAME
            for metric in scope_metrics.metrics:
                assert isinstance(metric.data, Histogram | Sum), metric
                out[metric.name] = Metric(metric.name, metric.unit or "", metric.description or "", metric.data)
    return out


def histogram_points(metric: Metric) -> list[HistogramDataPoint]:
    assert isinstance(metric.data, Histogram), f"{metric.name} is not a histogram"
    return list(metric.data.data_points)


def sum_points(metric: Metric) -> list[NumberDataPoint]:
    assert isinstance(metric.data, Sum), f"{metric.name} is not a sum"
    assert metric.data.is_monotonic
    return list(metric.data.data_points)


def point_with(points: Sequence[Any], attributes: Mapping[str, Any]) -> Any:
    matching = [p for p in points if dict(p.attributes or {}) == dict(attributes)]
    assert len(matching) == 1, f"no single point with {attributes}; points: {[dict(p.attributes) for p in points]}"
    return matching[0]


def hooks_with(otel: OtelHooks, *providers: Any) -> HookRegistry:
    registry = HookRegistry()
    registry.add(otel)
    for provider in providers:
        registry.add(provider)
    return registry


def main_script() -> list[ScriptStep]:
    return [
        tool_calls_response(
            [("c1", "get_weather", {"city": "Paris"}), ("c2", "fail_tool", {"reason": "kaput"})],
            text="Checking.",
            usage=usage(10, 5, cache_read=3, cache_creation=2, cost_usd=0.10),
        ),
        text_response("Sunny in Paris.", usage=usage(20, 7, cache_read=4, cost_usd=0.25)),
    ]


async def run_main_script(registry: HookRegistry) -> None:
    provider = ScriptedProvider(main_script())
    async with tool_registry(get_weather, fail_tool) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Weather in Paris?")
    assert result.status == ToolLoopStatus.COMPLETED
    provider.assert_exhausted()


# --------------------------------------------------------------------------------- the whole set
async def test_every_instrument_for_a_scripted_run(otel_hooks: OtelHooks, metric_reader: InMemoryMetricReader) -> None:
    await run_main_script(hooks_with(otel_hooks))
    metrics = collect(metric_reader)
    assert set(metrics) == {
        instruments.GEN_AI_CLIENT_TOKEN_USAGE,
        instruments.GEN_AI_CLIENT_OPERATION_DURATION,
        instruments.GEN_AI_INVOKE_AGENT_DURATION,
        instruments.GEN_AI_INVOKE_AGENT_INFERENCE_CALLS,
        instruments.GEN_AI_INVOKE_AGENT_TOOL_CALLS,
        instruments.GEN_AI_EXECUTE_TOOL_DURATION,
        instruments.FLOWRA_TOOL_ERRORS,
        instruments.FLOWRA_COST,
    }  # no time to first chunk (not streaming), no redactions (no hook changed anything)
    units = {name: m.unit for name, m in metrics.items()}
    assert units == {
        "gen_ai.client.token.usage": "{token}",
        "gen_ai.client.operation.duration": "s",
        "gen_ai.invoke_agent.duration": "s",
        "gen_ai.invoke_agent.inference_calls": "{inference_call}",
        "gen_ai.invoke_agent.tool_calls": "{tool_call}",
        "gen_ai.execute_tool.duration": "s",
        "flowra.tool.errors": "{tool_call}",
        "flowra.usage.cost": "USD",
    }
    assert all(m.description for m in metrics.values())

    # Tokens: input counts cache reads and writes, as the conventions want.
    tokens = histogram_points(metrics[instruments.GEN_AI_CLIENT_TOKEN_USAGE])
    assert len(tokens) == 2
    tokens_in = point_with(tokens, {**CHAT_BASE, semconv.GEN_AI_TOKEN_TYPE: "input"})
    assert (tokens_in.count, tokens_in.sum, tokens_in.min, tokens_in.max) == (2, (10 + 3 + 2) + (20 + 4), 15, 24)
    tokens_out = point_with(tokens, {**CHAT_BASE, semconv.GEN_AI_TOKEN_TYPE: "output"})
    assert (tokens_out.count, tokens_out.sum, tokens_out.min, tokens_out.max) == (2, 12, 5, 7)

    # One duration point per LLM call, under one attribute set without error.type.
    (duration,) = histogram_points(metrics[instruments.GEN_AI_CLIENT_OPERATION_DURATION])
    assert dict(duration.attributes or {}) == CHAT_BASE
    assert duration.count == 2
    assert 0 <= duration.min <= duration.max < 5

    (agent_duration,) = histogram_points(metrics[instruments.GEN_AI_INVOKE_AGENT_DURATION])
    assert dict(agent_duration.attributes or {}) == {
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_REQUEST_MODEL: MODEL,
    }
    assert agent_duration.count == 1
    assert agent_duration.sum >= duration.sum  # the agent's run contains both LLM calls

    agent_only = {semconv.GEN_AI_AGENT_NAME: "assistant"}
    (inference,) = histogram_points(metrics[instruments.GEN_AI_INVOKE_AGENT_INFERENCE_CALLS])
    assert (dict(inference.attributes or {}), inference.count, inference.sum) == (agent_only, 1, 2)
    (tool_calls,) = histogram_points(metrics[instruments.GEN_AI_INVOKE_AGENT_TOOL_CALLS])
    assert (dict(tool_calls.attributes or {}), tool_calls.count, tool_calls.sum) == (agent_only, 1, 2)

    tool_points = histogram_points(metrics[instruments.GEN_AI_EXECUTE_TOOL_DURATION])
    tool_base = {semconv.GEN_AI_TOOL_TYPE: "function", semconv.GEN_AI_AGENT_NAME: "assistant"}
    ok = point_with(tool_points, {**tool_base, semconv.GEN_AI_TOOL_NAME: "get_weather"})
    failed = point_with(
        tool_points, {**tool_base, semconv.GEN_AI_TOOL_NAME: "fail_tool", semconv.ERROR_TYPE: "tool_error"}
    )
    assert (ok.count, failed.count, len(tool_points)) == (1, 1, 2)

    (errors,) = sum_points(metrics[instruments.FLOWRA_TOOL_ERRORS])
    assert (dict(errors.attributes or {}), errors.value) == ({semconv.GEN_AI_TOOL_NAME: "fail_tool"}, 1)

    (cost,) = sum_points(metrics[instruments.FLOWRA_COST])
    assert dict(cost.attributes or {}) == CHAT_BASE
    assert cost.value == pytest.approx(0.35)
    cost_data = metrics[instruments.FLOWRA_COST].data
    assert isinstance(cost_data, Sum)
    assert cost_data.aggregation_temporality == AggregationTemporality.CUMULATIVE


async def test_advisory_bucket_boundaries_are_applied(
    otel_hooks: OtelHooks, metric_reader: InMemoryMetricReader
) -> None:
    await run_main_script(hooks_with(otel_hooks))
    metrics = collect(metric_reader)
    expected: dict[str, Sequence[float]] = {
        instruments.GEN_AI_CLIENT_TOKEN_USAGE: instruments.TOKEN_BUCKETS,
        instruments.GEN_AI_CLIENT_OPERATION_DURATION: instruments.DURATION_BUCKETS,
        instruments.GEN_AI_INVOKE_AGENT_DURATION: instruments.AGENT_DURATION_BUCKETS,
        instruments.GEN_AI_INVOKE_AGENT_INFERENCE_CALLS: instruments.COUNT_BUCKETS,
        instruments.GEN_AI_INVOKE_AGENT_TOOL_CALLS: instruments.COUNT_BUCKETS,
        instruments.GEN_AI_EXECUTE_TOOL_DURATION: instruments.DURATION_BUCKETS,
    }
    for name, bounds in expected.items():
        for point in histogram_points(metrics[name]):
            assert list(point.explicit_bounds) == list(bounds), name
            assert len(point.bucket_counts) == len(bounds) + 1, name
    # The SDK default would be [0, 5, 10, 25, ...]: the token points land in the 16 and 64 buckets.
    tokens_in = point_with(
        histogram_points(metrics[instruments.GEN_AI_CLIENT_TOKEN_USAGE]),
        {**CHAT_BASE, semconv.GEN_AI_TOKEN_TYPE: "input"},
    )
    buckets = dict(zip([*instruments.TOKEN_BUCKETS, "inf"], tokens_in.bucket_counts, strict=True))
    assert (buckets[16], buckets[64]) == (1, 1)  # 15 tokens, 24 tokens
    assert sum(tokens_in.bucket_counts) == 2


# --------------------------------------------------------------------------------- errors
class ProviderDownError(RuntimeError):
    pass


async def test_error_type_on_durations_matches_the_spans(
    otel_hooks: OtelHooks, metric_reader: InMemoryMetricReader, span_exporter: InMemorySpanExporter
) -> None:
    provider = ScriptedProvider([ProviderDownError("503 from upstream")])
    async with tool_registry(get_weather) as tools:
        with pytest.raises(ProviderDownError):
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    agent_etype = (spans["invoke_agent assistant"].attributes or {})[semconv.ERROR_TYPE]
    chat_etype = (spans[f"chat {MODEL}"].attributes or {})[semconv.ERROR_TYPE]
    assert agent_etype == chat_etype == f"{__name__}.ProviderDownError"

    metrics = collect(metric_reader)
    (duration,) = histogram_points(metrics[instruments.GEN_AI_CLIENT_OPERATION_DURATION])
    assert dict(duration.attributes or {}) == {**CHAT_BASE, semconv.ERROR_TYPE: chat_etype, **UNCLASSIFIED}
    assert duration.count == 1
    (agent_duration,) = histogram_points(metrics[instruments.GEN_AI_INVOKE_AGENT_DURATION])
    assert dict(agent_duration.attributes or {}) == {
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_REQUEST_MODEL: MODEL,
        semconv.ERROR_TYPE: agent_etype,
        **UNCLASSIFIED,
    }
    # The call never answered: no tokens, no cost.
    assert instruments.GEN_AI_CLIENT_TOKEN_USAGE not in metrics
    assert instruments.FLOWRA_COST not in metrics


# --------------------------------------------------------------------------------- streaming
STREAM_ONLY = (semconv.GEN_AI_REQUEST_STREAM, semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)


def _without_stream_keys(nodes: list[span_tree.Node]) -> list[Any]:
    """The tree minus the two streaming attributes; siblings in a canonical order (parallel
    tool calls may start in either order from one run to the next)."""
    return sorted(
        (
            (
                n.name,
                n.kind,
                n.status,
                {k: v for k, v in n.attrs.items() if k not in STREAM_ONLY},
                _without_stream_keys(n.children),
            )
            for n in nodes
        ),
        key=repr,
    )


async def _run_for_parity(hooks: OtelHooks, exporter: InMemorySpanExporter, *, streaming: bool) -> list[span_tree.Node]:
    exporter.clear()
    collector = DeltaCollector()
    registry = hooks_with(hooks, collector) if streaming else hooks_with(hooks)
    provider = ScriptedProvider(main_script(), chunk_size=3)
    async with tool_registry(get_weather, fail_tool) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Weather in Paris?")
    assert [c.streamed for c in provider.calls] == [streaming, streaming]
    assert ("".join(collector.chunks) == "Checking.Sunny in Paris.") is streaming
    return span_tree.build(exporter.get_finished_spans())


async def test_streaming_records_time_to_first_chunk(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader, span_exporter: InMemorySpanExporter
) -> None:
    spans = await _run_for_parity(make_otel_hooks(), span_exporter, streaming=True)
    chats = [n for n in span_tree.walk(spans) if n.name == f"chat {MODEL}"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.attrs[semconv.GEN_AI_REQUEST_STREAM] is True
        ttfc = chat.attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
        assert isinstance(ttfc, float)
        assert chat.span is not None and chat.span.start_time is not None and chat.span.end_time is not None
        assert 0 <= ttfc <= (chat.span.end_time - chat.span.start_time) / 1e9

    metrics = collect(metric_reader)
    ttfc_metric = metrics[instruments.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK]
    assert ttfc_metric.unit == "s"
    (point,) = histogram_points(ttfc_metric)
    assert dict(point.attributes or {}) == CHAT_BASE
    assert point.count == 2
    assert list(point.explicit_bounds) == instruments.DURATION_BUCKETS
    assert point.sum == pytest.approx(sum(c.attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] for c in chats))
    # Streaming changes nothing else in the metrics: the operation duration has the same attributes.
    (duration,) = histogram_points(metrics[instruments.GEN_AI_CLIENT_OPERATION_DURATION])
    assert dict(duration.attributes or {}) == CHAT_BASE


async def test_span_tree_is_identical_with_and_without_streaming(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    hooks = make_otel_hooks(capture_content=True)
    plain = await _run_for_parity(hooks, span_exporter, streaming=False)
    streamed = await _run_for_parity(hooks, span_exporter, streaming=True)

    plain_chats = [n for n in span_tree.walk(plain) if n.name.startswith("chat ")]
    assert all(not set(STREAM_ONLY) & set(n.attrs) for n in plain_chats)
    streamed_chats = [n for n in span_tree.walk(streamed) if n.name.startswith("chat ")]
    assert all(set(STREAM_ONLY) <= set(n.attrs) for n in streamed_chats)

    assert _without_stream_keys(streamed) == _without_stream_keys(plain)
    # And the tree really is the full one (with content, so messages are compared too).
    (agent,) = plain
    assert agent.name == "invoke_agent assistant"
    assert sorted(c.name for c in agent.children) == [
        f"chat {MODEL}",
        f"chat {MODEL}",
        "execute_tool fail_tool",
        "execute_tool get_weather",
    ]
    assert semconv.GEN_AI_OUTPUT_MESSAGES in plain_chats[0].attrs


# --------------------------------------------------------------------------------- not sampled
async def test_metrics_are_recorded_when_spans_are_not(
    meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    hooks = OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=meter_provider)
    await run_main_script(hooks_with(hooks))
    metrics = collect(metric_reader)
    (duration,) = histogram_points(metrics[instruments.GEN_AI_CLIENT_OPERATION_DURATION])
    assert (dict(duration.attributes or {}), duration.count) == (CHAT_BASE, 2)
    tokens_in = point_with(
        histogram_points(metrics[instruments.GEN_AI_CLIENT_TOKEN_USAGE]),
        {**CHAT_BASE, semconv.GEN_AI_TOKEN_TYPE: "input"},
    )
    assert tokens_in.sum == 39
    (agent_duration,) = histogram_points(metrics[instruments.GEN_AI_INVOKE_AGENT_DURATION])
    assert agent_duration.count == 1
    tool_points = histogram_points(metrics[instruments.GEN_AI_EXECUTE_TOOL_DURATION])
    assert sorted(str((p.attributes or {}).get(semconv.ERROR_TYPE)) for p in tool_points) == ["None", "tool_error"]
    (errors,) = sum_points(metrics[instruments.FLOWRA_TOOL_ERRORS])
    assert errors.value == 1
    (cost,) = sum_points(metrics[instruments.FLOWRA_COST])
    assert cost.value == pytest.approx(0.35)


async def test_metrics_are_recorded_with_an_error_when_spans_are_not(
    meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    hooks = OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=meter_provider)
    provider = ScriptedProvider([ProviderDownError("down")])
    async with tool_registry(get_weather) as tools:
        with pytest.raises(ProviderDownError):
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(hooks)), "q")
    metrics = collect(metric_reader)
    (duration,) = histogram_points(metrics[instruments.GEN_AI_CLIENT_OPERATION_DURATION])
    assert (duration.attributes or {})[semconv.ERROR_TYPE] == f"{__name__}.ProviderDownError"
    (agent_duration,) = histogram_points(metrics[instruments.GEN_AI_INVOKE_AGENT_DURATION])
    assert (agent_duration.attributes or {})[semconv.ERROR_TYPE] == f"{__name__}.ProviderDownError"
