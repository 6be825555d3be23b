"""Every number and value the plugin records reaches a real OTLP/HTTP receiver whole.

OTLP carries ints as int64. One value beyond it costs more than itself: an int in a metric
*exemplar* (recorded inside a sampled span, such as the app's request span) makes the protobuf
encoder fail the whole metrics export of that interval (the receiver gets nothing, and
``force_flush()`` still returns True); an int span or metric attribute is dropped from every span
or point, with an encoder error each time. So, exported through
``OTLPSpanExporter`` / ``OTLPMetricExporter`` (HTTP) to ``tests.otlp_receiver``:

* token counts of ``2**64 - 1`` (input, output, cache read and write) are capped to int64 on the
  spans, in the histograms and in their exemplars, and every instrument's points arrive;
* costs of ``1e308`` per call sum to a finite total; a negative cost is never added to the
  ``flowra.usage.cost`` counter (which refuses it with a warning);
* a ``metric_attributes_from_metadata`` value beyond int64 is kept as its decimal text;
* whatever a ``conversation_id`` callable returns (a huge int, an object whose ``str()`` raises, a
  lone surrogate) becomes text a span carries.

The option values themselves are checked when ``OtelHooks`` is built (``tests/
test_option_values_fit_otlp.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flowra.llm import Usage
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from flowra_otel import OtelHooks
from flowra_otel.core import attributes, instruments, options, safety, semconv
from tests.both_lines.line import S
from tests.otlp_receiver import MetricsRequest, OtlpReceiver

BIG = 2**64 - 1
INT64_MAX = 2**63 - 1
CHAT = "chat sonnet-4-5"
INSTRUMENTS = {
    instruments.GEN_AI_CLIENT_TOKEN_USAGE,
    instruments.GEN_AI_CLIENT_OPERATION_DURATION,
    instruments.GEN_AI_INVOKE_AGENT_DURATION,
    instruments.GEN_AI_INVOKE_AGENT_INFERENCE_CALLS,
    instruments.GEN_AI_INVOKE_AGENT_TOOL_CALLS,
    instruments.GEN_AI_EXECUTE_TOOL_DURATION,
    instruments.FLOWRA_COST,
}


@dataclass
class Pipeline:
    rx: OtlpReceiver
    tracer_provider: TracerProvider
    meter_provider: MeterProvider


@pytest.fixture
def pipeline() -> Iterator[Pipeline]:
    """Real OTLP/HTTP exporters to an in-process receiver (metrics exported on flush only)."""
    with OtlpReceiver() as rx:
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=rx.http_metrics_endpoint), export_interval_millis=3_600_000
        )
        meter_provider = MeterProvider(metric_readers=[reader])
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=rx.http_traces_endpoint)))
        yield Pipeline(rx, tracer_provider, meter_provider)
        meter_provider.shutdown()
        tracer_provider.shutdown()


@pytest.fixture
def encoder_errors(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """ERROR records of the OTLP exporters and their encoder."""
    caplog.set_level(logging.WARNING, logger="opentelemetry")
    return lambda: [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("opentelemetry.exporter") and r.levelno >= logging.ERROR
    ]


def huge_usage(cost: float = 1e308) -> Usage:
    return Usage(
        input_tokens=BIG,
        output_tokens=BIG,
        cache_read_input_tokens=BIG,
        cache_creation_input_tokens=BIG,
        cost_usd=cost,
    )


async def run_in_app_span(p: Pipeline, hooks: OtelHooks, usage: Usage, metadata: dict[str, Any] | None = None) -> None:
    """One run (a tool call, then an answer) of the agent that does the work, inside the app's
    sampled request span."""
    call = S.tool_calls(("c1", "get_weather", {"city": "Oslo"}), usage=usage)
    with p.tracer_provider.get_tracer("app").start_as_current_span("request"):
        answer = await S.weather_turn_run(hooks, call, S.answer("Cold.", usage=usage), text="Oslo?", metadata=metadata)
    assert answer == "Cold."


def exemplar_values(request: MetricsRequest) -> dict[str, list[int | float]]:
    """Every exemplar's value, by metric name."""
    out: dict[str, list[int | float]] = {}
    for resource in request.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                for point in getattr(metric, kind).data_points:
                    for exemplar in point.exemplars:
                        value = getattr(exemplar, exemplar.WhichOneof("value"))
                        out.setdefault(metric.name, []).append(value)
    return out


async def test_huge_counts_inside_an_app_span_reach_the_receiver_capped(
    pipeline: Pipeline, encoder_errors: Callable[[], list[str]]
) -> None:
    hooks = OtelHooks(tracer_provider=pipeline.tracer_provider, meter_provider=pipeline.meter_provider)
    await run_in_app_span(pipeline, hooks, huge_usage())
    assert pipeline.meter_provider.force_flush()
    rx = pipeline.rx
    assert len(rx.metrics_requests) == 1  # the interval's export arrived, whole
    assert {p.name for p in rx.metric_points()} == INSTRUMENTS
    exemplars = exemplar_values(rx.metrics_requests[0].request)
    # One exemplar per bucket of each point (input, output): the capped count.
    assert exemplars[instruments.GEN_AI_CLIENT_TOKEN_USAGE] == [INT64_MAX, INT64_MAX]
    assert set(exemplars) == INSTRUMENTS  # every instrument's record was made inside the app's span
    ints = [v for values in exemplars.values() for v in values if isinstance(v, int)]
    assert all(-(2**63) <= v <= INT64_MAX for v in ints)
    (cost,) = rx.metric_points(instruments.FLOWRA_COST)
    assert cost.value == float("inf")  # the SDK's own sum of two finite costs: a valid OTLP double
    chats = rx.spans_named(CHAT)
    assert [s.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] for s in chats] == [INT64_MAX, INT64_MAX]
    assert [s.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] for s in chats] == [INT64_MAX, INT64_MAX]
    assert [s.attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] for s in chats] == [INT64_MAX, INT64_MAX]
    assert [s.attributes[semconv.FLOWRA_USAGE_COST_USD] for s in chats] == [1e308, 1e308]
    (agent,) = rx.spans_named("invoke_agent assistant")
    assert agent.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == INT64_MAX
    assert encoder_errors() == []


@pytest.mark.parametrize(
    ("count", "recorded"),
    [(float("inf"), 0), (float("-inf"), 0), (float("nan"), 0), (1e300, INT64_MAX), ("12", 12)],
    ids=["inf", "-inf", "nan", "1e300", "text"],
)
async def test_non_finite_and_odd_counts_never_raise_and_still_export(
    count: Any, recorded: int, pipeline: Pipeline, encoder_errors: Callable[[], list[str]]
) -> None:
    """A count that is ``inf``, ``nan``, beyond any int, or text: the run's answer is unchanged,
    every span and every instrument's points reach the receiver, and each count on the spans is
    an int64 (0 for what is no finite number)."""
    usage = Usage(input_tokens=count, output_tokens=count, cache_read_input_tokens=count, cost_usd=count)
    hooks = OtelHooks(tracer_provider=pipeline.tracer_provider, meter_provider=pipeline.meter_provider)
    await run_in_app_span(pipeline, hooks, usage)
    assert pipeline.meter_provider.force_flush()
    rx = pipeline.rx
    assert len(rx.metrics_requests) == 1
    assert {p.name for p in rx.metric_points()} >= INSTRUMENTS - {instruments.FLOWRA_COST}
    chats = rx.spans_named(CHAT)
    assert len(chats) == 2
    for span in chats:
        assert span.attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, 0) == recorded
        tokens = span.attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS, 0)
        assert isinstance(tokens, int) and 0 <= tokens <= INT64_MAX
    assert encoder_errors() == []


async def test_without_the_int64_cap_the_whole_metrics_export_is_lost(
    pipeline: Pipeline, encoder_errors: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: the cap removed (``safety.INT64_MAX`` and ``attributes.INT64_MAX`` raised
    beyond any count): the token-usage exemplar overflows int64, the encoder fails the whole
    metrics export, the receiver gets no request, and ``force_flush()`` still says True (what was
    observed); every span loses its usage attributes with an encoder error."""
    monkeypatch.setattr(safety, "INT64_MAX", 2**80)
    monkeypatch.setattr(attributes, "INT64_MAX", 2**80)
    hooks = OtelHooks(tracer_provider=pipeline.tracer_provider, meter_provider=pipeline.meter_provider)
    await run_in_app_span(pipeline, hooks, huge_usage())
    assert pipeline.meter_provider.force_flush()
    assert pipeline.rx.metrics_requests == []
    assert all(semconv.GEN_AI_USAGE_INPUT_TOKENS not in s.attributes for s in pipeline.rx.spans_named(CHAT))
    assert encoder_errors()


def test_costs_sum_to_a_finite_total() -> None:
    """The run's usage (an ``invoke_agent`` span when flowra gives no total) sums its calls'
    costs; a sum beyond the largest float stays the largest float, never ``inf``."""
    total = attributes.TokenUsage()
    for _ in range(3):
        call = attributes.TokenUsage.of(huge_usage())
        assert call is not None
        total.add(call)
    assert total.cost_usd == 1.7976931348623157e308
    assert total.input == INT64_MAX


async def test_a_negative_cost_is_not_added_to_the_cost_counter(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="opentelemetry")
    hooks = OtelHooks(tracer_provider=pipeline.tracer_provider, meter_provider=pipeline.meter_provider)
    await run_in_app_span(pipeline, hooks, Usage(input_tokens=3, output_tokens=2, cost_usd=-1.0))
    assert pipeline.meter_provider.force_flush()
    assert pipeline.rx.metric_points(instruments.FLOWRA_COST) == []
    assert not [r for r in caplog.records if "non-negative" in r.getMessage()]  # the SDK had nothing to refuse


async def test_a_metadata_metric_attribute_beyond_int64_is_kept_as_text(
    pipeline: Pipeline, encoder_errors: Callable[[], list[str]]
) -> None:
    hooks = OtelHooks(
        tracer_provider=pipeline.tracer_provider,
        meter_provider=pipeline.meter_provider,
        metric_attributes_from_metadata=["tenant", "shard"],
    )
    await run_in_app_span(pipeline, hooks, Usage(input_tokens=3, output_tokens=2), {"tenant": BIG, "shard": -7})
    assert pipeline.meter_provider.force_flush()
    points = pipeline.rx.metric_points()
    assert {p.name for p in points} == INSTRUMENTS - {instruments.FLOWRA_COST}
    assert {(p.attributes["tenant"], p.attributes["shard"]) for p in points} == {(str(BIG), -7)}
    assert encoder_errors() == []


async def test_without_the_text_form_the_encoder_drops_the_attribute_from_every_point(
    pipeline: Pipeline, encoder_errors: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: ``options.INT64_MAX`` raised beyond the value, so it is passed on as an
    int: every point loses ``tenant``, with an encoder error each."""
    monkeypatch.setattr(options, "INT64_MAX", 2**80)
    hooks = OtelHooks(
        tracer_provider=pipeline.tracer_provider,
        meter_provider=pipeline.meter_provider,
        metric_attributes_from_metadata=["tenant"],
    )
    await run_in_app_span(pipeline, hooks, Usage(input_tokens=3, output_tokens=2), {"tenant": BIG})
    assert pipeline.meter_provider.force_flush()
    assert all("tenant" not in p.attributes for p in pipeline.rx.metric_points())
    assert any("tenant" in message for message in encoder_errors())


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(
    ("returned", "stamped"),
    [
        (BIG, str(BIG)),
        (Unprintable(), "<Unprintable: str() failed>"),
        ("conv-\udcff", "conv-\ufffd"),
        (b"conv", "b'conv'"),
        ("", None),
        (None, None),
    ],
    ids=["int_beyond_int64", "str_raises", "lone_surrogate", "bytes", "empty", "none"],
)
async def test_whatever_a_conversation_id_callable_returns_is_text_a_span_carries(
    returned: object, stamped: str | None, pipeline: Pipeline, encoder_errors: Callable[[], list[str]]
) -> None:
    hooks = OtelHooks(
        tracer_provider=pipeline.tracer_provider,
        conversation_id=lambda metadata: returned,  # type: ignore[arg-type,return-value]
    )
    await run_in_app_span(pipeline, hooks, Usage(input_tokens=3, output_tokens=2))
    spans = [s for s in pipeline.rx.spans() if s.name != "request"]
    assert len(spans) == 4
    assert {s.attributes.get(semconv.GEN_AI_CONVERSATION_ID) for s in spans} == {stamped}
    assert encoder_errors() == []


async def test_without_safe_text_an_unprintable_conversation_id_is_an_internal_error(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Paired negative: ``options.safe_str`` made plain ``str``: the callable's value raises in
    the plugin (logged as an internal error, once per event that carries the metadata; the run
    is unaffected) and no span gets an id."""
    monkeypatch.setattr(options, "safe_str", str)
    caplog.flowra_otel_expected_errors = S.METADATA_EVENTS  # type: ignore[attr-defined]
    hooks = OtelHooks(
        tracer_provider=pipeline.tracer_provider,
        conversation_id=lambda metadata: Unprintable(),  # type: ignore[arg-type,return-value]
    )
    await run_in_app_span(pipeline, hooks, Usage(input_tokens=3, output_tokens=2))
    assert all(semconv.GEN_AI_CONVERSATION_ID not in s.attributes for s in pipeline.rx.spans())


async def test_user_attributes_at_the_int64_edge_reach_every_span(
    pipeline: Pipeline, encoder_errors: Callable[[], list[str]]
) -> None:
    """The largest ``attributes=`` values ``OtelHooks`` accepts arrive on every span it starts."""
    stamp: dict[str, Any] = {"app.build_id": INT64_MAX, "app.floor": -(2**63), "app.ratio": 0.5, "app.tags": ["a", "b"]}
    hooks = OtelHooks(tracer_provider=pipeline.tracer_provider, attributes=stamp)
    await run_in_app_span(pipeline, hooks, Usage(input_tokens=3, output_tokens=2))
    spans = [s for s in pipeline.rx.spans() if s.name != "request"]
    assert len(spans) == 4
    assert [{k: s.attributes[k] for k in stamp} for s in spans] == [{**stamp, "app.tags": ("a", "b")}] * 4
    assert encoder_errors() == []


@pytest.mark.parametrize(
    ("returned", "stamped"),
    [(BIG, str(BIG)), (Unprintable(), "<Unprintable: str() failed>"), ("ada-\udcff", "ada-\ufffd"), ("", None)],
    ids=["int_beyond_int64", "str_raises", "lone_surrogate", "empty"],
)
async def test_whatever_a_user_id_callable_returns_is_text_a_span_carries(
    returned: object, stamped: str | None, pipeline: Pipeline, encoder_errors: Callable[[], list[str]]
) -> None:
    """``user_id=`` is the sibling of ``conversation_id=``: the same rule for what it returns."""
    hooks = OtelHooks(
        tracer_provider=pipeline.tracer_provider,
        user_id=lambda metadata: returned,  # type: ignore[arg-type,return-value]
    )
    await run_in_app_span(pipeline, hooks, Usage(input_tokens=3, output_tokens=2))
    spans = [s for s in pipeline.rx.spans() if s.name != "request"]
    assert len(spans) == 4
    assert {s.attributes.get("user.id") for s in spans} == {stamped}
    assert encoder_errors() == []
