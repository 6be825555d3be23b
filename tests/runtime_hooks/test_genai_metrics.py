"""Metrics of real flowra 0.0.86+ runs, read back from the SDK's ``InMemoryMetricReader``.

One scripted chat (two LLM calls with cache tokens and cost, a tool that works and one that
fails) is checked as the exact set of data points it produces: every instrument, every attribute
set, every count (and every sum that does not depend on the clock). Then the advisory buckets,
an agent used as a tool (each agent's records under its own name), a failing provider, a tracer
that records nothing, and the metric options: ``metrics=False``, ``OTEL_METRICS_EXPORTER=none``
and ``metric_attributes_from_metadata`` (the allow-listed spec metadata on every record of the run,
nested agents included, and on none of a run without it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from flowra.agent import Event
from flowra.lib.observability import TextDeltaEvent
from flowra.lib.turn.hook_events import AfterToolCallEvent, BeforeToolCallEvent
from flowra.llm import LLMResponse
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
from flowra_otel.core.environment_variables import OTEL_METRICS_EXPORTER
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import (
    ScriptedProvider,
    append_result_text,
    chat_runtime,
    explode,
    get_weather,
    research_runtime,
    result_block,
    result_text,
    run_chat,
    text_response,
    tool_calls_response,
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
INPUT = {semconv.GEN_AI_TOKEN_TYPE: "input"}
OUTPUT = {semconv.GEN_AI_TOKEN_TYPE: "output"}
UNCLASSIFIED = {semconv.FLOWRA_ERROR_KIND: "unknown"}
"""A failure that is no provider's (test_provider_failures.py covers the classified ones)."""

TOKENS = instruments.GEN_AI_CLIENT_TOKEN_USAGE
CHAT_DURATION = instruments.GEN_AI_CLIENT_OPERATION_DURATION
AGENT_DURATION = instruments.GEN_AI_INVOKE_AGENT_DURATION
INFERENCE_CALLS = instruments.GEN_AI_INVOKE_AGENT_INFERENCE_CALLS
TOOL_CALLS = instruments.GEN_AI_INVOKE_AGENT_TOOL_CALLS
TOOL_DURATION = instruments.GEN_AI_EXECUTE_TOOL_DURATION
TOOL_ERRORS = instruments.FLOWRA_TOOL_ERRORS
COST = instruments.FLOWRA_COST
REDACTIONS = instruments.FLOWRA_REDACTIONS
CLOCKED = {CHAT_DURATION, AGENT_DURATION, TOOL_DURATION}
"""Histograms whose sums are measured times: compared by attributes and count only."""
ALL_INSTRUMENTS = {
    TOKENS,
    CHAT_DURATION,
    instruments.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
    instruments.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK,
    AGENT_DURATION,
    INFERENCE_CALLS,
    TOOL_CALLS,
    TOOL_DURATION,
    TOOL_ERRORS,
    COST,
    REDACTIONS,
}


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


type Point = tuple[Any, ...]


def attrs(*parts: Mapping[str, Any], **more: Any) -> frozenset[tuple[str, Any]]:
    merged: dict[str, Any] = {}
    for part in parts:
        merged.update(part)
    merged.update(more)
    return frozenset(merged.items())


def snapshot(reader: InMemoryMetricReader) -> set[Point]:
    """Every data point as ``(metric, attributes, count[, sum])`` for histograms (no sum for the
    measured times) and ``(metric, attributes, value)`` for counters."""
    out: set[Point] = set()
    for name, metric in collect(reader).items():
        for point in metric.data.data_points:
            key = frozenset((point.attributes or {}).items())
            if isinstance(point, HistogramDataPoint):
                out.add((name, key, point.count) if name in CLOCKED else (name, key, point.count, point.sum))
            else:
                out.add((name, key, round(float(point.value), 9)))
    return out


def points(reader: InMemoryMetricReader) -> list[tuple[str, dict[str, Any]]]:
    """(metric name, attributes) of every data point the reader holds."""
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        (metric.name, dict(point.attributes or {}))
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        for point in metric.data.data_points
    ]


# --------------------------------------------------------------------------------- the reference run
def main_script() -> list[LLMResponse]:
    first = tool_calls_response(
        ("c1", "get_weather", {"city": "Paris"}), ("c2", "explode", {"city": "Oslo"}), text="Checking."
    )
    final = text_response("Sunny in Paris.")
    return [
        dataclasses.replace(
            first, usage=usage(10, 5, cache_read_input_tokens=3, cache_creation_input_tokens=2, cost_usd=0.10)
        ),
        dataclasses.replace(final, usage=usage(20, 7, cache_read_input_tokens=4, cost_usd=0.25)),
    ]


def mark_reviewed(event: Event[AfterToolCallEvent]) -> None:
    """Changes a working tool's result: one ``flowra.redactions`` point."""
    result = event.data.result
    if not result_block(result).is_error:
        event.data.result = append_result_text(result, " (reviewed)")


async def run_main(
    hooks: OtelHooks, *, metadata: Mapping[str, Any] | None = None, streaming: bool = False, redacting: bool = False
) -> None:
    provider = ScriptedProvider(*main_script())
    runtime = chat_runtime(provider, get_weather, explode)
    hooks.install(runtime)
    if streaming:
        runtime.hooks.on(TextDeltaEvent, lambda event: None)
    if redacting:
        runtime.hooks.on(AfterToolCallEvent, mark_reviewed)
    result = await run_chat(runtime, "Weather in Paris?", **(metadata or {}))
    assert result.response == "Sunny in Paris."
    assert provider.script == []


AGENT_ONLY = {semconv.GEN_AI_AGENT_NAME: "assistant"}
TOOL_BASE = {semconv.GEN_AI_TOOL_TYPE: "function", semconv.GEN_AI_AGENT_NAME: "assistant"}
MAIN_POINTS: set[Point] = {
    # Tokens: input counts cache reads and writes, as the conventions want (15 + 24; 5 + 7).
    (TOKENS, attrs(CHAT_BASE, INPUT), 2, 39),
    (TOKENS, attrs(CHAT_BASE, OUTPUT), 2, 12),
    (CHAT_DURATION, attrs(CHAT_BASE), 2),  # one point per call, no error.type
    (AGENT_DURATION, attrs(AGENT_ONLY, {semconv.GEN_AI_REQUEST_MODEL: MODEL}), 1),
    (INFERENCE_CALLS, attrs(AGENT_ONLY), 1, 2),
    (TOOL_CALLS, attrs(AGENT_ONLY), 1, 2),
    (TOOL_DURATION, attrs(TOOL_BASE, {semconv.GEN_AI_TOOL_NAME: "get_weather"}), 1),
    (TOOL_DURATION, attrs(TOOL_BASE, {semconv.GEN_AI_TOOL_NAME: "explode", semconv.ERROR_TYPE: "tool_error"}), 1),
    (TOOL_ERRORS, attrs({semconv.GEN_AI_TOOL_NAME: "explode"}), 1.0),
    (COST, attrs(CHAT_BASE), 0.35),
}


async def test_every_data_point_of_a_scripted_run(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    await run_main(make_otel_hooks())
    assert snapshot(metric_reader) == MAIN_POINTS  # no first chunk (not streaming), no redaction
    metrics = collect(metric_reader)
    assert {name: m.unit for name, m in metrics.items()} == {
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

    tokens_in = point_with(histogram_points(metrics[TOKENS]), {**CHAT_BASE, **INPUT})
    assert (tokens_in.min, tokens_in.max) == (15, 24)
    tokens_out = point_with(histogram_points(metrics[TOKENS]), {**CHAT_BASE, **OUTPUT})
    assert (tokens_out.min, tokens_out.max) == (5, 7)
    (duration,) = histogram_points(metrics[CHAT_DURATION])
    assert 0 <= duration.min <= duration.max < 5
    (agent_duration,) = histogram_points(metrics[AGENT_DURATION])
    assert agent_duration.sum >= duration.sum  # the agent's run contains both LLM calls
    cost_data = metrics[COST].data
    assert isinstance(cost_data, Sum)
    assert cost_data.aggregation_temporality == AggregationTemporality.CUMULATIVE
    (cost,) = sum_points(metrics[COST])
    assert cost.value == pytest.approx(0.35)


async def test_advisory_bucket_boundaries_are_applied(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    await run_main(make_otel_hooks())
    metrics = collect(metric_reader)
    expected: dict[str, Sequence[float]] = {
        TOKENS: instruments.TOKEN_BUCKETS,
        CHAT_DURATION: instruments.DURATION_BUCKETS,
        AGENT_DURATION: instruments.AGENT_DURATION_BUCKETS,
        INFERENCE_CALLS: instruments.COUNT_BUCKETS,
        TOOL_CALLS: instruments.COUNT_BUCKETS,
        TOOL_DURATION: instruments.DURATION_BUCKETS,
    }
    for name, bounds in expected.items():
        for point in histogram_points(metrics[name]):
            assert list(point.explicit_bounds) == list(bounds), name
            assert len(point.bucket_counts) == len(bounds) + 1, name
    # The SDK default would be [0, 5, 10, 25, ...]: the token points land in the 16 and 64 buckets.
    tokens_in = point_with(histogram_points(metrics[TOKENS]), {**CHAT_BASE, **INPUT})
    buckets = dict(zip([*instruments.TOKEN_BUCKETS, "inf"], tokens_in.bucket_counts, strict=True))
    assert (buckets[16], buckets[64]) == (1, 1)  # 15 tokens, 24 tokens
    assert sum(tokens_in.bucket_counts) == 2


async def test_each_agent_of_a_nested_run_records_under_its_own_name(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    main = ScriptedProvider(
        tool_calls_response(("r1", "research", {"question": "Why?"}), ("w1", "get_weather", {"city": "Oslo"})),
        text_response("All done."),
    )
    researcher = ScriptedProvider(tool_calls_response(("rw", "get_weather", {"city": "Rome"})), text_response("So."))
    await run_chat(traced(make_otel_hooks, research_runtime(main, researcher, get_weather)), "Research")
    inner = {semconv.GEN_AI_AGENT_NAME: "researcher/turn"}
    inner_chat = {**CHAT_BASE, **inner}
    assert snapshot(metric_reader) == {
        (TOKENS, attrs(CHAT_BASE, INPUT), 2, 20),
        (TOKENS, attrs(CHAT_BASE, OUTPUT), 2, 10),
        (TOKENS, attrs(inner_chat, INPUT), 2, 20),
        (TOKENS, attrs(inner_chat, OUTPUT), 2, 10),
        (CHAT_DURATION, attrs(CHAT_BASE), 2),
        (CHAT_DURATION, attrs(inner_chat), 2),
        (AGENT_DURATION, attrs(AGENT_ONLY, {semconv.GEN_AI_REQUEST_MODEL: MODEL}), 1),
        (AGENT_DURATION, attrs(inner, {semconv.GEN_AI_REQUEST_MODEL: MODEL}), 1),
        # The researcher itself makes no call: no model of its own, zero calls.
        (AGENT_DURATION, attrs({semconv.GEN_AI_AGENT_NAME: "researcher"}), 1),
        (INFERENCE_CALLS, attrs(AGENT_ONLY), 1, 2),
        (INFERENCE_CALLS, attrs(inner), 1, 2),
        (INFERENCE_CALLS, attrs({semconv.GEN_AI_AGENT_NAME: "researcher"}), 1, 0),
        (TOOL_CALLS, attrs(AGENT_ONLY), 1, 2),
        (TOOL_CALLS, attrs(inner), 1, 1),
        (TOOL_CALLS, attrs({semconv.GEN_AI_AGENT_NAME: "researcher"}), 1, 0),
        (TOOL_DURATION, attrs(TOOL_BASE, {semconv.GEN_AI_TOOL_NAME: "research"}), 1),
        (TOOL_DURATION, attrs(TOOL_BASE, {semconv.GEN_AI_TOOL_NAME: "get_weather"}), 1),
        (TOOL_DURATION, attrs(TOOL_BASE, inner, {semconv.GEN_AI_TOOL_NAME: "get_weather"}), 1),
    }


# --------------------------------------------------------------------------------- errors
class ProviderDownError(RuntimeError):
    pass


ERROR_POINTS: set[Point] = {
    (
        CHAT_DURATION,
        attrs(CHAT_BASE, UNCLASSIFIED, {semconv.ERROR_TYPE: f"{__name__}.ProviderDownError"}),
        1,
    ),
    (
        AGENT_DURATION,
        attrs(
            AGENT_ONLY,
            UNCLASSIFIED,
            {semconv.GEN_AI_REQUEST_MODEL: MODEL, semconv.ERROR_TYPE: f"{__name__}.ProviderDownError"},
        ),
        1,
    ),
    (INFERENCE_CALLS, attrs(AGENT_ONLY), 1, 1),
    (TOOL_CALLS, attrs(AGENT_ONLY), 1, 0),
    # The call never answered: no tokens, no cost.
}


async def run_failing(hooks: OtelHooks) -> None:
    runtime = chat_runtime(ScriptedProvider(ProviderDownError("503 from upstream")), get_weather)
    hooks.install(runtime)
    with pytest.raises(ProviderDownError):
        await run_chat(runtime, "q")


async def test_error_type_on_durations_matches_the_spans(
    make_otel_hooks: MakeHooks,
    metric_reader: InMemoryMetricReader,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    await run_failing(make_otel_hooks())
    assert_all_ended(ledger, span_exporter)
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    agent_etype = (spans["invoke_agent assistant"].attributes or {})[semconv.ERROR_TYPE]
    chat_etype = (spans[f"chat {MODEL}"].attributes or {})[semconv.ERROR_TYPE]
    assert agent_etype == chat_etype == f"{__name__}.ProviderDownError"
    assert snapshot(metric_reader) == ERROR_POINTS


# --------------------------------------------------------------------------------- not sampled
async def test_metrics_are_recorded_when_spans_are_not(
    meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    await run_main(OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=meter_provider))
    assert snapshot(metric_reader) == MAIN_POINTS


async def test_metrics_are_recorded_with_an_error_when_spans_are_not(
    meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    await run_failing(OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=meter_provider))
    assert snapshot(metric_reader) == ERROR_POINTS


# --------------------------------------------------------------------------------- redactions
def upper_city(event: Event[BeforeToolCallEvent]) -> None:
    """Changes a call's arguments: one ``flowra.redactions`` point for ``arguments``."""
    tool_use = event.data.tool_use
    if tool_use.name == "get_weather" and isinstance(tool_use.input, dict):
        event.data.tool_use = dataclasses.replace(tool_use, input={"city": str(tool_use.input["city"]).upper()})


async def test_a_redaction_point_per_changed_field_and_none_for_unchanged_ones(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    await run_main(make_otel_hooks(), redacting=True)
    assert {p for p in snapshot(metric_reader) if p[0] == REDACTIONS} == {
        (REDACTIONS, attrs({semconv.GEN_AI_TOOL_NAME: "get_weather", "flowra.redaction.field": "result"}), 1.0)
    }  # explode's error result was left alone: no point for it

    provider = ScriptedProvider(tool_calls_response(("c1", "get_weather", {"city": "Paris"})), text_response())
    runtime = traced(make_otel_hooks, chat_runtime(provider, get_weather))
    runtime.hooks.on(BeforeToolCallEvent, upper_city)
    await run_chat(runtime)
    assert result_text(provider.requests[1].messages[-1].blocks[0]) == "Sunny in PARIS"
    # Counters are cumulative: the result point is still the first run's 1 (this run changed no
    # result), and the arguments point is this run's.
    assert {p for p in snapshot(metric_reader) if p[0] == REDACTIONS} == {
        (REDACTIONS, attrs({semconv.GEN_AI_TOOL_NAME: "get_weather", "flowra.redaction.field": "result"}), 1.0),
        (REDACTIONS, attrs({semconv.GEN_AI_TOOL_NAME: "get_weather", "flowra.redaction.field": "arguments"}), 1.0),
    }


# ----------------------------------------------------------------------------- metrics off
TIMING = {semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK}
"""The one span attribute whose value differs from one run to the next (a measured time)."""


def comparable_tree(exporter: InMemorySpanExporter) -> list[Any]:
    """The span tree with measured times left out and siblings in a canonical order."""

    def norm(nodes: list[span_tree.Node]) -> list[Any]:
        return sorted(
            (
                (n.name, n.kind, n.status, {k: v for k, v in n.attrs.items() if k not in TIMING}, norm(n.children))
                for n in nodes
            ),
            key=repr,
        )

    return norm(span_tree.build(exporter.get_finished_spans()))


async def run_everything(hooks: OtelHooks, metadata: Mapping[str, Any] | None = None) -> None:
    """The reference run, streaming (the app's delta handler) and with a result redacted: every
    instrument gets a point."""
    await run_main(hooks, metadata=metadata, streaming=True, redacting=True)


async def test_the_full_reference_run_uses_every_instrument(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    await run_everything(make_otel_hooks())
    assert {name for name, _ in points(metric_reader)} == ALL_INSTRUMENTS


async def test_metrics_false_records_no_point_and_leaves_spans_unchanged(
    make_otel_hooks: MakeHooks,
    metric_reader: InMemoryMetricReader,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    await run_everything(make_otel_hooks(metrics=False, capture_content=True))
    assert points(metric_reader) == []
    assert_all_ended(ledger, span_exporter)
    without_metrics = comparable_tree(span_exporter)

    # Paired: the same run with metrics on records every instrument and the very same spans.
    span_exporter.clear()
    await run_everything(make_otel_hooks(capture_content=True))
    assert {name for name, _ in points(metric_reader)} == ALL_INSTRUMENTS
    assert comparable_tree(span_exporter) == without_metrics
    assert len(without_metrics) == 1 and without_metrics[0][0] == "invoke_agent assistant"


async def test_otel_metrics_exporter_none_records_no_point(
    make_otel_hooks: MakeHooks,
    metric_reader: InMemoryMetricReader,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OTEL_METRICS_EXPORTER, "none")
    assert OTEL_METRICS_EXPORTER == "OTEL_METRICS_EXPORTER"
    await run_everything(make_otel_hooks(capture_content=True))
    assert points(metric_reader) == []
    env_none = comparable_tree(span_exporter)
    assert env_none  # spans are still recorded

    # Paired: the same run with the variable gone records metrics and the same spans.
    monkeypatch.delenv(OTEL_METRICS_EXPORTER)
    span_exporter.clear()
    await run_everything(make_otel_hooks(capture_content=True))
    assert {name for name, _ in points(metric_reader)} == ALL_INSTRUMENTS
    assert comparable_tree(span_exporter) == env_none


async def test_explicit_metrics_true_wins_over_the_environment(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OTEL_METRICS_EXPORTER, "none")
    await run_everything(make_otel_hooks(metrics=True))
    assert {name for name, _ in points(metric_reader)} == ALL_INSTRUMENTS


# ----------------------------------------------------------------------------- attributes from metadata
async def test_every_point_of_a_run_carries_the_allow_listed_metadata(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    await run_everything(
        make_otel_hooks(metric_attributes_from_metadata=("tenant",)),
        metadata={"tenant": "acme", "user": "bob@example.com"},
    )
    recorded = points(metric_reader)
    assert {name for name, _ in recorded} == ALL_INSTRUMENTS
    assert [(name, a) for name, a in recorded if a.get("tenant") != "acme"] == []
    # Only the allow-listed key: never another metadata value.
    assert all("user" not in a and "bob@example.com" not in a.values() for _, a in recorded)


async def test_the_metadata_reaches_the_points_of_nested_agents(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    main = ScriptedProvider(tool_calls_response(("r1", "research", {"question": "Why?"})), text_response("Done."))
    researcher = ScriptedProvider(tool_calls_response(("rw", "get_weather", {"city": "Rome"})), text_response("So."))
    runtime = traced(
        make_otel_hooks,
        research_runtime(main, researcher, get_weather),
        metric_attributes_from_metadata=("tenant",),
    )
    await run_chat(runtime, "Research", tenant="acme")
    recorded = points(metric_reader)
    agents = {a[semconv.GEN_AI_AGENT_NAME] for _, a in recorded if semconv.GEN_AI_AGENT_NAME in a}
    assert agents == {"assistant", "researcher", "researcher/turn"}
    assert [(name, a) for name, a in recorded if a.get("tenant") != "acme"] == []


async def test_a_run_without_the_metadata_key_gets_no_such_attribute(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    hooks = make_otel_hooks(metric_attributes_from_metadata=("tenant",))
    await run_everything(hooks, metadata={"user": "bob@example.com"})
    recorded = points(metric_reader)
    assert {name for name, _ in recorded} == ALL_INSTRUMENTS
    assert [a for _, a in recorded if "tenant" in a] == []


async def test_two_runs_two_tenants_two_series(make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader) -> None:
    hooks = make_otel_hooks(metric_attributes_from_metadata=("tenant",))
    await run_main(hooks, metadata={"tenant": "acme"})
    await run_main(hooks, metadata={"tenant": "globex"})
    tenants = {
        tenant: {p for p in snapshot(metric_reader) if ("tenant", tenant) in p[1]} for tenant in ("acme", "globex")
    }
    for tenant, found in tenants.items():
        # Each tenant's series is the reference run's, plus its tenant: nothing mixed.
        assert {(p[0], p[1] - {("tenant", tenant)}, *p[2:]) for p in found} == MAIN_POINTS
    assert len(snapshot(metric_reader)) == 2 * len(MAIN_POINTS)


BAD_OPTIONS = [
    pytest.param("metric_attributes_from_metadata", "tenant", TypeError, id="metadata-keys-a-str"),
    pytest.param("metric_attributes_from_metadata", 42, TypeError, id="metadata-keys-not-iterable"),
    pytest.param("metric_attributes_from_metadata", ("gen_ai.tenant",), ValueError, id="metadata-key-gen_ai"),
    pytest.param("metric_attributes_from_metadata", ("error.kind",), ValueError, id="metadata-key-error"),
    pytest.param("metric_attributes_from_metadata", [f"k{i}" for i in range(9)], ValueError, id="metadata-9-keys"),
    pytest.param("metric_attributes_from_metadata", ("tenant", 7), ValueError, id="metadata-key-not-str"),
    pytest.param("metric_attributes_from_metadata", ("tenant", "tenant"), ValueError, id="metadata-key-duplicate"),
    pytest.param("metric_attributes_from_metadata", ("",), ValueError, id="metadata-key-empty"),
    pytest.param("metrics", "yes", TypeError, id="metrics-a-str"),
]


@pytest.mark.parametrize(("option", "value", "error"), BAD_OPTIONS)
def test_bad_metric_option_values_fail_at_construction_naming_the_option(
    option: str, value: Any, error: type[Exception], make_otel_hooks: MakeHooks
) -> None:
    with pytest.raises(error) as caught:
        make_otel_hooks(**{option: value})
    assert type(caught.value) is error
    assert option in str(caught.value)


@pytest.mark.parametrize(
    "value",
    [["tenant", "region"], (f"k{i}" for i in range(8)), None],
    ids=["metadata-keys-list", "metadata-8-keys-generator", "metadata-keys-none"],
)
def test_good_metric_option_values_are_accepted(value: Any, make_otel_hooks: MakeHooks) -> None:
    # Paired with the bad values: the validation rejects what it should, not everything.
    assert isinstance(make_otel_hooks(metric_attributes_from_metadata=value), OtelHooks)
