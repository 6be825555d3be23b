"""The metric options of ``OtelHooks``: switching metrics off, and metric attributes from metadata.

* ``metrics=False`` records no metric point at all and leaves the spans exactly as they are;
  ``OTEL_METRICS_EXPORTER=none`` (the SDK's own "no metrics" setting) does the same when the
  option is left at its default, and an explicit ``metrics=True`` wins over it.
* ``metric_attributes_from_metadata=("tenant",)`` copies the run's ``metadata["tenant"]`` onto
  every metric point of that run, every instrument included, and onto none of a run without it.
* Bad values fail at construction with an error naming the option, never mid-run; so do async
  callables for the options the plugin calls inline (``redact``, ``agent_name``,
  ``provider_name``, ``conversation_id``), however they are wrapped.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, ToolLoopStatus
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import instruments, semconv
from flowra_otel.core.environment_variables import OTEL_METRICS_EXPORTER
from tests import span_tree
from tests.hook_registry.conftest import DeltaCollector, SpanLedger, assert_all_ended
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
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

ALL_INSTRUMENTS = {
    instruments.GEN_AI_CLIENT_TOKEN_USAGE,
    instruments.GEN_AI_CLIENT_OPERATION_DURATION,
    instruments.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
    instruments.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK,
    instruments.GEN_AI_INVOKE_AGENT_DURATION,
    instruments.GEN_AI_INVOKE_AGENT_INFERENCE_CALLS,
    instruments.GEN_AI_INVOKE_AGENT_TOOL_CALLS,
    instruments.GEN_AI_EXECUTE_TOOL_DURATION,
    instruments.FLOWRA_TOOL_ERRORS,
    instruments.FLOWRA_COST,
    instruments.FLOWRA_REDACTIONS,
}


# ----------------------------------------------------------------------------- a run using every instrument
def mark_reviewed(event: Event[AfterToolCallEvent]) -> None:
    """Changes a tool result: one ``flowra.redactions`` point."""
    result = event.data.result
    if not result.is_error:
        event.data.result = dataclasses.replace(result, content=f"{result.content} (reviewed)")


def script() -> list[Any]:
    return [
        tool_calls_response(
            [("c1", "get_weather", {"city": "Paris"}), ("c2", "fail_tool", {"reason": "kaput"})],
            text="Checking the weather.",
            usage=usage(10, 5, cost_usd=0.10),
        ),
        text_response("Sunny in Paris today.", usage=usage(20, 7, cost_usd=0.25)),
    ]


async def run(
    otel: OtelHooks, *, metadata: dict[str, Any] | None = None, streaming: bool = True, redacting: bool = True
) -> None:
    registry = HookRegistry()
    registry.add(otel)
    if streaming:
        registry.add(DeltaCollector())
    if redacting:
        registry.on(AfterToolCallEvent, mark_reviewed)
    provider = ScriptedProvider(script(), chunk_size=4)
    async with tool_registry(get_weather, fail_tool) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Weather?", metadata=metadata)
    assert result.status == ToolLoopStatus.COMPLETED
    provider.assert_exhausted()


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


# ----------------------------------------------------------------------------- metrics off
async def test_the_reference_run_uses_every_instrument(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    await run(make_otel_hooks())
    assert {name for name, _ in points(metric_reader)} == ALL_INSTRUMENTS


async def test_metrics_false_records_no_point_and_leaves_spans_unchanged(
    make_otel_hooks: MakeHooks,
    metric_reader: InMemoryMetricReader,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    await run(make_otel_hooks(metrics=False, capture_content=True))
    assert points(metric_reader) == []
    assert_all_ended(ledger, span_exporter)
    without_metrics = comparable_tree(span_exporter)

    span_exporter.clear()
    await run(make_otel_hooks(capture_content=True))
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
    await run(make_otel_hooks(capture_content=True))
    assert points(metric_reader) == []
    env_none = comparable_tree(span_exporter)
    assert env_none  # spans are still recorded

    # Paired: the same run with the variable gone records metrics and the same spans.
    monkeypatch.delenv(OTEL_METRICS_EXPORTER)
    span_exporter.clear()
    await run(make_otel_hooks(capture_content=True))
    assert {name for name, _ in points(metric_reader)} == ALL_INSTRUMENTS
    assert comparable_tree(span_exporter) == env_none


async def test_explicit_metrics_true_wins_over_the_environment(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OTEL_METRICS_EXPORTER, "none")
    await run(make_otel_hooks(metrics=True))
    assert {name for name, _ in points(metric_reader)} == ALL_INSTRUMENTS


# ----------------------------------------------------------------------------- attributes from metadata
async def test_every_point_of_a_run_carries_the_allow_listed_metadata(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    otel = make_otel_hooks(metric_attributes_from_metadata=("tenant",))
    await run(otel, metadata={"tenant": "acme", "user": "bob@example.com"})
    recorded = points(metric_reader)
    assert {name for name, _ in recorded} == ALL_INSTRUMENTS
    missing = [(name, attrs) for name, attrs in recorded if attrs.get("tenant") != "acme"]
    assert missing == []
    # Only the allow-listed key: never another metadata value.
    assert all("user" not in attrs and "bob@example.com" not in attrs.values() for _, attrs in recorded)


async def test_a_run_without_the_metadata_key_gets_no_such_attribute(
    make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader
) -> None:
    otel = make_otel_hooks(metric_attributes_from_metadata=("tenant",))
    await run(otel, metadata={"user": "bob@example.com"})
    await run(otel)
    recorded = points(metric_reader)
    assert {name for name, _ in recorded} == ALL_INSTRUMENTS
    assert [attrs for _, attrs in recorded if "tenant" in attrs] == []


async def test_two_runs_two_tenants_two_series(make_otel_hooks: MakeHooks, metric_reader: InMemoryMetricReader) -> None:
    otel = make_otel_hooks(metric_attributes_from_metadata=("tenant",))
    await run(otel, metadata={"tenant": "acme"}, streaming=False, redacting=False)
    await run(otel, metadata={"tenant": "globex"}, streaming=False, redacting=False)
    durations = [a for name, a in points(metric_reader) if name == instruments.GEN_AI_INVOKE_AGENT_DURATION]
    assert sorted(a["tenant"] for a in durations) == ["acme", "globex"]


# ----------------------------------------------------------------------------- construction errors
async def async_redact(text: str) -> str:
    return text


async def async_name(value: str) -> str | None:
    return None


async def async_conversation(metadata: Mapping[str, Any]) -> str | None:
    return None


class AsyncCallable:
    async def __call__(self, value: Any) -> Any:
        return value


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
    pytest.param("openinference", None, TypeError, id="openinference-none"),
    pytest.param("redact", async_redact, TypeError, id="redact-async-def"),
    pytest.param("redact", functools.partial(async_redact), TypeError, id="redact-partial-of-async"),
    pytest.param("redact", AsyncCallable(), TypeError, id="redact-async-__call__"),
    pytest.param("agent_name", async_name, TypeError, id="agent_name-async-def"),
    pytest.param("agent_name", functools.partial(functools.partial(async_name)), TypeError, id="agent_name-partial"),
    pytest.param("agent_name", AsyncCallable(), TypeError, id="agent_name-async-__call__"),
    pytest.param("provider_name", async_name, TypeError, id="provider_name-async-def"),
    pytest.param("provider_name", functools.partial(async_name), TypeError, id="provider_name-partial"),
    pytest.param("provider_name", AsyncCallable(), TypeError, id="provider_name-async-__call__"),
    pytest.param("conversation_id", async_conversation, TypeError, id="conversation_id-async-def"),
    pytest.param("conversation_id", functools.partial(async_conversation), TypeError, id="conversation_id-partial"),
    pytest.param("conversation_id", AsyncCallable(), TypeError, id="conversation_id-async-__call__"),
]


@pytest.mark.parametrize(("option", "value", "error"), BAD_OPTIONS)
def test_bad_option_values_fail_at_construction_naming_the_option(
    option: str, value: Any, error: type[Exception], make_otel_hooks: MakeHooks
) -> None:
    with pytest.raises(error) as caught:
        make_otel_hooks(**{option: value})
    assert type(caught.value) is error
    assert option in str(caught.value)


GOOD_OPTIONS = [
    pytest.param("metric_attributes_from_metadata", ["tenant", "region"], id="metadata-keys-list"),
    pytest.param("metric_attributes_from_metadata", (f"k{i}" for i in range(8)), id="metadata-8-keys-generator"),
    pytest.param("metric_attributes_from_metadata", None, id="metadata-keys-none"),
    pytest.param("redact", functools.partial(str.upper), id="redact-sync-partial"),
    pytest.param("agent_name", lambda path: None, id="agent_name-sync-lambda"),
    pytest.param("conversation_id", lambda metadata: "c-1", id="conversation_id-sync-lambda"),
]


@pytest.mark.parametrize(("option", "value"), GOOD_OPTIONS)
def test_good_option_values_are_accepted(option: str, value: Any, make_otel_hooks: MakeHooks) -> None:
    # Paired with the bad values: the validation rejects what it should, not everything.
    assert isinstance(make_otel_hooks(**{option: value}), OtelHooks)
