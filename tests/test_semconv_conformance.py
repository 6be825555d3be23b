"""The conformance checker itself: a conformant set of spans and metrics passes, each planted flaw is caught.

Spans and metrics are made with the real OpenTelemetry SDK (the same objects the plugin's tests
collect), so the checker is tested on what it will read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from tests.semconv_conformance import BUCKET_ADVICE, check_metrics, check_spans, load_model

Attrs = dict[str, Any]

INPUT = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
OUTPUT = [{"role": "assistant", "parts": [{"type": "text", "content": "Rainy."}]}]
TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]


def chat_attrs() -> Attrs:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "server.address": "api.openai.com",
        "server.port": 443,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.input.messages": json.dumps(INPUT),
        "gen_ai.output.messages": json.dumps(OUTPUT),
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.tool.definitions": json.dumps(TOOLS),
    }


def agent_attrs() -> Attrs:
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Helper", "gen_ai.usage.output_tokens": 3}


def tool_attrs() -> Attrs:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.type": "function"}


@pytest.fixture
def record_spans() -> Iterator[Callable[..., list[ReadableSpan]]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    def record(*specs: tuple[str, SpanKind, Attrs], error: bool = False) -> list[ReadableSpan]:
        for name, kind, attrs in specs:
            with tracer.start_as_current_span(name, kind=kind, attributes=attrs) as span:
                if error:
                    span.set_status(Status(StatusCode.ERROR))
        return list(exporter.get_finished_spans())

    yield record
    provider.shutdown()


def good_spans() -> list[tuple[str, SpanKind, Attrs]]:
    return [
        ("chat gpt-4o", SpanKind.CLIENT, chat_attrs()),
        ("invoke_agent Helper", SpanKind.INTERNAL, agent_attrs()),
        ("execute_tool get_weather", SpanKind.INTERNAL, tool_attrs()),
    ]


def test_the_model_loads_with_the_definitions_the_plugin_targets() -> None:
    model = load_model()
    assert {"gen_ai.inference.client", "gen_ai.invoke_agent.internal", "gen_ai.execute_tool.internal"} <= set(
        model.spans
    )
    chat = model.spans["gen_ai.inference.client"]
    assert chat.kind == "client"
    assert chat.attributes["gen_ai.provider.name"].level == "required"
    assert chat.attributes["error.type"].level == "conditionally_required"  # through ref_group
    assert model.metrics["gen_ai.client.token.usage"].attributes["gen_ai.token.type"].level == "required"
    assert set(BUCKET_ADVICE) <= set(model.metrics) | {"gen_ai.workflow.duration"}


def test_conformant_spans_pass(record_spans: Callable[..., list[ReadableSpan]]) -> None:
    assert check_spans(record_spans(*good_spans())) == []
    assert check_spans(record_spans(*good_spans()), extras=True) == []


def test_an_agent_without_name_is_named_by_the_operation_alone(record_spans: Callable[..., list[ReadableSpan]]) -> None:
    nameless = {"gen_ai.operation.name": "invoke_agent"}
    assert check_spans(record_spans(("invoke_agent", SpanKind.INTERNAL, nameless))) == []
    assert check_spans(record_spans(("invoke_agent Helper", SpanKind.INTERNAL, nameless))[-1:]) == [
        "span 'invoke_agent Helper' (invoke_agent): span name should be 'invoke_agent' "
        "('{gen_ai.operation.name} {gen_ai.agent.name}')"
    ]


def test_spans_without_an_operation_are_not_checked(record_spans: Callable[..., list[ReadableSpan]]) -> None:
    assert check_spans(record_spans(("anything", SpanKind.SERVER, {"gen_ai.bogus": 1}))) == []


def _with(attrs: Attrs, **changes: Any) -> Attrs:
    out = dict(attrs)
    for key, value in changes.items():
        real = key.replace("__", ".")
        if value is None:
            out.pop(real, None)
        else:
            out[real] = value
    return out


SPAN_FLAWS: list[Any] = [
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__request__max_tokens="100")),
        "gen_ai.request.max_tokens must be an int, got str",
        id="wrong-type-int",
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__request__temperature=1)),
        "gen_ai.request.temperature must be a double, got int",
        id="wrong-type-double",
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__usage__cache_creation__input_tokens=5)),
        "unknown attribute gen_ai.usage.cache_creation.input_tokens",  # renamed cache_write by #440
        id="unknown-gen_ai-key",
    ),
    pytest.param(
        ("invoke_agent Helper", SpanKind.INTERNAL, _with(agent_attrs(), gen_ai__usage__cache_read__input_tokens=5)),
        "gen_ai.usage.cache_read.input_tokens is not part of the gen_ai.invoke_agent.internal definition",
        id="cache-count-on-internal-agent",  # #469
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__provider__name="_OTHER")),
        "'_OTHER' is not a member",
        id="enum-_OTHER",
    ),
    pytest.param(
        ("Chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__operation__name="Chat")),
        "'Chat' misspells the well-known value 'chat'",
        id="enum-near-miss",
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__provider__name=None)),
        "missing required attribute gen_ai.provider.name",
        id="missing-required",
    ),
    pytest.param(
        ("execute_tool", SpanKind.INTERNAL, _with(tool_attrs(), gen_ai__tool__name=None)),
        "missing required attribute gen_ai.tool.name",
        id="missing-required-tool-name",
    ),
    pytest.param(
        ("chat", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__request__model=None)),
        "missing gen_ai.request.model",
        id="missing-conditionally-required-model",
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), server__port=None)),
        "server.address without server.port",
        id="missing-server-port",
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.INTERNAL, chat_attrs()),
        "span kind INTERNAL, the conventions want CLIENT",
        id="wrong-kind",
    ),
    pytest.param(
        ("chat sonnet", SpanKind.CLIENT, chat_attrs()),
        "span name should be 'chat gpt-4o'",
        id="wrong-name",
    ),
    pytest.param(
        ("invoke_agent Helper", SpanKind.INTERNAL, _with(agent_attrs(), error__type="TimeoutError")),
        "error.type set but the status is not ERROR",
        id="error-type-on-success",
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__input__messages="[{not json")),
        "gen_ai.input.messages is not valid JSON",
        id="content-invalid-json",
    ),
    pytest.param(
        (
            "chat gpt-4o",
            SpanKind.CLIENT,
            _with(chat_attrs(), gen_ai__output__messages=json.dumps([{"role": "assistant"}])),
        ),
        "gen_ai.output.messages does not validate against gen-ai-output-messages.json",
        id="content-schema",
    ),
    pytest.param(
        (
            "chat gpt-4o",
            SpanKind.CLIENT,
            _with(chat_attrs(), gen_ai__tool__definitions=json.dumps([{"type": "function"}])),
        ),
        "gen_ai.tool.definitions does not validate against gen-ai-tool-definitions.json",
        id="tool-definitions-schema",
    ),
    pytest.param(
        ("chat gpt-4o", SpanKind.CLIENT, _with(chat_attrs(), gen_ai__response__finish_reasons="stop")),
        "gen_ai.response.finish_reasons must be a string array",
        id="wrong-type-array",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), SPAN_FLAWS)
def test_a_planted_span_flaw_is_reported(
    spec: tuple[str, SpanKind, Attrs], expected: str, record_spans: Callable[..., list[ReadableSpan]]
) -> None:
    problems = check_spans(record_spans(spec))
    assert len(problems) == 1, problems
    assert expected in problems[0]


def test_status_error_without_error_type_is_reported(record_spans: Callable[..., list[ReadableSpan]]) -> None:
    problems = check_spans(record_spans(("execute_tool get_weather", SpanKind.INTERNAL, tool_attrs()), error=True))
    assert problems == [
        "span 'execute_tool get_weather' (execute_tool): status ERROR but no error.type "
        "(conditionally required on errors)"
    ]
    fixed = _with(tool_attrs(), error__type="TimeoutError")
    assert check_spans(record_spans(("execute_tool get_weather", SpanKind.INTERNAL, fixed), error=True)[-1:]) == []


def test_extras_reports_registered_keys_the_definition_does_not_list(
    record_spans: Callable[..., list[ReadableSpan]],
) -> None:
    attrs = _with(agent_attrs(), gen_ai__provider__name="openai")  # only the CLIENT agent span lists it
    spans = record_spans(("invoke_agent Helper", SpanKind.INTERNAL, attrs))
    assert check_spans(spans) == []
    assert check_spans(spans, extras=True) == [
        "span 'invoke_agent Helper' (invoke_agent): gen_ai.provider.name is not part of the "
        "gen_ai.invoke_agent.internal definition"
    ]


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------

DURATION = "gen_ai.client.operation.duration"
TOKENS = "gen_ai.client.token.usage"
METRIC_BASE: Mapping[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}


def record_metrics(
    name: str,
    *,
    unit: str,
    attributes: Mapping[str, Any],
    counter: bool = False,
    buckets: list[float] | None = None,
) -> list[str]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("test")
    if counter:
        meter.create_counter(name, unit=unit).add(1, attributes)
    else:
        advice = buckets if buckets is not None else list(BUCKET_ADVICE[name])
        meter.create_histogram(name, unit=unit, explicit_bucket_boundaries_advisory=advice).record(1, attributes)
    try:
        return check_metrics(reader.get_metrics_data())
    finally:
        provider.shutdown()


def test_conformant_metrics_pass() -> None:
    assert record_metrics(DURATION, unit="s", attributes=METRIC_BASE) == []
    assert record_metrics(TOKENS, unit="{token}", attributes={**METRIC_BASE, "gen_ai.token.type": "input"}) == []
    assert record_metrics("flowra.usage.cost", unit="USD", attributes={"x": 1}, counter=True) == []


METRIC_FLAWS: list[Any] = [
    pytest.param({"name": DURATION, "unit": "ms", "attributes": METRIC_BASE}, "unit 'ms'", id="wrong-unit"),
    pytest.param(
        {"name": DURATION, "unit": "s", "attributes": METRIC_BASE, "counter": True},
        "instrument counter, the conventions want histogram",
        id="wrong-instrument",
    ),
    pytest.param(
        {"name": DURATION, "unit": "s", "attributes": METRIC_BASE, "buckets": [1.0, 2.0]},
        "bucket boundaries [1.0, 2.0]",
        id="wrong-buckets",
    ),
    pytest.param(
        {"name": TOKENS, "unit": "{token}", "attributes": METRIC_BASE},
        "missing required attribute gen_ai.token.type",
        id="missing-required",
    ),
    pytest.param(
        {"name": TOKENS, "unit": "{token}", "attributes": {**METRIC_BASE, "gen_ai.token.type": "cached"}},
        "'cached' is not one of ['input', 'output']",
        id="closed-enum",
    ),
    pytest.param(
        {"name": DURATION, "unit": "s", "attributes": {**METRIC_BASE, "gen_ai.agent.nme": "x"}},
        "unknown attribute gen_ai.agent.nme",
        id="unknown-gen_ai-key",
    ),
    pytest.param(
        {"name": DURATION, "unit": "s", "attributes": {**METRIC_BASE, "server.port": "443"}},
        "server.port must be an int",
        id="wrong-type",
    ),
    pytest.param(
        {"name": "gen_ai.client.operation.time_per_token", "unit": "s", "attributes": METRIC_BASE, "buckets": [1.0]},
        "not a metric of the conventions",
        id="unknown-metric",
    ),
]


@pytest.mark.parametrize(("kwargs", "expected"), METRIC_FLAWS)
def test_a_planted_metric_flaw_is_reported(kwargs: dict[str, Any], expected: str) -> None:
    problems = record_metrics(**kwargs)
    assert len(problems) == 1, problems
    assert expected in problems[0]


MCP_METRIC_BASE: Final[dict[str, Any]] = {
    "mcp.method.name": "tools/call",
    "gen_ai.tool.name": "forecast",
    "network.transport": "tcp",
}


def test_the_model_knows_the_mcp_attributes_and_metrics() -> None:
    model = load_model()
    assert {"mcp.method.name", "mcp.session.id", "mcp.protocol.version", "mcp.resource.uri"} <= set(model.registry)
    assert "tools/call" in model.registry["mcp.method.name"].members
    operation = model.metrics["mcp.client.operation.duration"]
    assert (operation.instrument, operation.unit) == ("histogram", "s")
    assert operation.attributes["mcp.method.name"].level == "required"
    assert "mcp.client.session.duration" in model.metrics
    assert record_metrics("mcp.client.operation.duration", unit="s", attributes=MCP_METRIC_BASE) == []
    session = {"mcp.protocol.version": "2025-06-18", "server.address": "127.0.0.1", "server.port": 80}
    assert record_metrics("mcp.client.session.duration", unit="s", attributes=session) == []
    failed = {**MCP_METRIC_BASE, "error.type": "-32602", "rpc.response.status_code": "-32602"}
    assert record_metrics("mcp.client.operation.duration", unit="s", attributes=failed) == []


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"unit": "ms", "attributes": MCP_METRIC_BASE}, "unit 'ms'"),
        ({"unit": "s", "attributes": {"gen_ai.tool.name": "forecast"}}, "missing required attribute mcp.method.name"),
        ({"unit": "s", "attributes": MCP_METRIC_BASE, "buckets": [1.0]}, "bucket boundaries [1.0]"),
        ({"unit": "s", "attributes": {**MCP_METRIC_BASE, "mcp.session.id": "abc"}}, "mcp.session.id is not a metric"),
        ({"unit": "s", "attributes": {**MCP_METRIC_BASE, "rpc.response.status_code": -32602}}, "status_code"),
    ],
)
def test_a_planted_mcp_metric_flaw_is_reported(kwargs: dict[str, Any], expected: str) -> None:
    problems = record_metrics("mcp.client.operation.duration", **kwargs)
    assert len(problems) == 1, problems
    assert expected in problems[0]


MCP_SPAN: Final[dict[str, Any]] = {
    "mcp.method.name": "initialize",
    "mcp.protocol.version": "2025-06-18",
    "jsonrpc.request.id": "7",
    "server.address": "127.0.0.1",
    "server.port": 8000,
    "network.transport": "tcp",
}


def test_conformant_mcp_spans_pass(record_spans: Callable[..., list[ReadableSpan]]) -> None:
    combined = {**tool_attrs(), **MCP_SPAN, "mcp.method.name": "tools/call", "gen_ai.tool.name": "get_weather"}
    assert check_spans(record_spans(("initialize", SpanKind.CLIENT, MCP_SPAN))) == []
    assert check_spans(record_spans(("execute_tool get_weather", SpanKind.INTERNAL, combined))) == []


@pytest.mark.parametrize(
    ("name", "kind", "changes", "expected"),
    [
        ("initialize", SpanKind.INTERNAL, {}, "should be CLIENT"),
        ("initialize 2025", SpanKind.CLIENT, {}, "span name should be 'initialize'"),
        ("initialize", SpanKind.CLIENT, {"gen_ai.operation.name": "execute_tool"}, "only for a tool call"),
        ("initialize", SpanKind.CLIENT, {"error.type": "500"}, "error.type and an ERROR status"),
        ("initialize", SpanKind.CLIENT, {"jsonrpc.request.id": 7}, "jsonrpc.request.id"),
        ("initialize", SpanKind.CLIENT, {"server.port": None}, "server.address without server.port"),
        ("initialize", SpanKind.CLIENT, {"mcp.protocol.version": "2026-07-28", "mcp.session.id": "s"}, "stateless"),
        ("initialize", SpanKind.CLIENT, {"rpc.response.status_code": "-32602"}, "without error.type"),
        (
            "notifications/initialized",
            SpanKind.CLIENT,
            {"mcp.method.name": "notifications/initialized"},
            "a notification has no jsonrpc.request.id",
        ),
    ],
)
def test_a_planted_mcp_span_flaw_is_reported(
    record_spans: Callable[..., list[ReadableSpan]], name: str, kind: SpanKind, changes: dict[str, Any], expected: str
) -> None:
    attrs = {k: v for k, v in {**MCP_SPAN, **changes}.items() if v is not None}
    problems = [p for p in check_spans(record_spans((name, kind, attrs))) if "(MCP " in p]  # the GenAI checks aside
    assert len(problems) == 1, problems
    assert expected in problems[0]


# ---------------------------------------------------------------------------------------------
# The target: fe5608e + #440, #469, #410, #363 (tests/semconv/PROVENANCE.md)
# ---------------------------------------------------------------------------------------------


def test_the_target_carries_the_four_merged_changes() -> None:
    model = load_model()
    # #440: the rename (no alias) and the per-modality counts, on inference and client agent spans.
    assert "gen_ai.usage.cache_write.input_tokens" in model.registry
    assert "gen_ai.usage.cache_creation.input_tokens" not in model.registry
    modality = {f"gen_ai.usage.{m}.{k}" for m in ("text", "image", "audio") for k in ("input_tokens", "output_tokens")}
    modality |= {f"gen_ai.usage.{m}.cache_read.input_tokens" for m in ("text", "image", "audio")}
    assert modality <= set(model.registry)
    for span_type in ("gen_ai.inference.client", "gen_ai.invoke_agent.client"):
        listed = set(model.spans[span_type].attributes)
        assert modality | {"gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_write.input_tokens"} <= listed
    # #469: the internal agent span keeps the totals only.
    internal = {k for k in model.spans["gen_ai.invoke_agent.internal"].attributes if k.startswith("gen_ai.usage.")}
    assert internal == {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"}
    # #410: the conversation id on the workflow span.
    assert model.spans["gen_ai.invoke_workflow.internal"].attributes["gen_ai.conversation.id"].level == (
        "conditionally_required"
    )
    # #363: a message without finish_reason (or with null) is valid output; one without a role is not.
    output = model.registry["gen_ai.output.messages"]
    message = {"role": "assistant", "parts": [{"type": "text", "content": "Rainy."}]}
    for document in ([message], [{**message, "finish_reason": None}], [{**message, "finish_reason": "stop"}]):
        assert _value_ok(model, output, json.dumps(document)), document
    assert not _value_ok(model, output, json.dumps([{"parts": message["parts"], "finish_reason": "stop"}]))


def _value_ok(model: Any, definition: Any, value: Any) -> bool:
    from tests.semconv_conformance import _value_problem

    return _value_problem(model, definition, value) is None


# ---------------------------------------------------------------------------------------------
# Events (log records)
# ---------------------------------------------------------------------------------------------


def record_events(*records: tuple[str, Attrs]) -> list[Any]:
    """SDK log records (``ReadableLogRecord``) as an in-memory exporter collects them."""
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("test")
    for name, attrs in records:
        logger.emit(LogRecord(event_name=name, attributes=attrs))
    provider.shutdown()
    return list(exporter.get_finished_logs())


def details_attrs() -> Attrs:
    """A conformant details event: the inference span's attributes, content as structures."""
    attrs = {k: v for k, v in chat_attrs().items() if k not in ("gen_ai.input.messages", "gen_ai.output.messages")}
    return {**attrs, "gen_ai.input.messages": INPUT, "gen_ai.output.messages": OUTPUT, "gen_ai.tool.definitions": TOOLS}


DETAILS = "gen_ai.client.inference.operation.details"


def test_a_conformant_details_event_passes() -> None:
    from tests.semconv_conformance import check_log_records

    details = details_attrs()
    details["gen_ai.system_instructions"] = [{"type": "text", "content": "Be brief."}]
    assert check_log_records(record_events((DETAILS, details))) == []
    assert check_log_records(record_events(("app.something", {"gen_ai.bogus": 1}))) == []  # not a gen_ai event


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        pytest.param(
            ("gen_ai.client.inference.operation.detail", details_attrs()),
            "event gen_ai.client.inference.operation.detail: not an event of the conventions",
            id="unknown-event",
        ),
        pytest.param(
            (
                "gen_ai.client.inference.operation.details",
                {**details_attrs(), "gen_ai.usage.cache_creation.input_tokens": 1},
            ),
            "unknown attribute gen_ai.usage.cache_creation.input_tokens",
            id="unknown-key",
        ),
        pytest.param(
            (
                "gen_ai.client.inference.operation.details",
                {**details_attrs(), "gen_ai.output.messages": [{"parts": []}]},
            ),
            "gen_ai.output.messages does not validate against gen-ai-output-messages.json",
            id="content-schema",
        ),
        pytest.param(
            (DETAILS, {**details_attrs(), "gen_ai.operation.name": None}),
            "missing required attribute gen_ai.operation.name",
            id="missing-required",
        ),
        pytest.param(
            (DETAILS, {**details_attrs(), "gen_ai.request.model": None}),
            "missing gen_ai.request.model",
            id="missing-model",
        ),
    ],
)
def test_a_planted_event_flaw_is_reported(record: tuple[str, Attrs], expected: str) -> None:
    from tests.semconv_conformance import check_log_records

    name, attrs = record
    problems = check_log_records(record_events((name, {k: v for k, v in attrs.items() if v is not None})))
    assert len(problems) == 1, problems
    assert expected in problems[0]


def test_only_the_reference_implementations_content_references_pass_outside_the_registry(
    record_spans: Callable[..., list[ReadableSpan]],
) -> None:
    refs = {
        f"gen_ai.{k}_ref": "file:///tmp/x.json" for k in ("input.messages", "output.messages", "system_instructions")
    }
    attrs = {**chat_attrs(), **refs, "gen_ai.tool.definitions_ref": "file:///tmp/t.json"}
    assert check_spans(record_spans(("chat gpt-4o", SpanKind.CLIENT, attrs))) == []
    typo = {**chat_attrs(), "gen_ai.input.messages_refs": "file:///tmp/x.json"}
    assert check_spans(record_spans(("chat gpt-4o", SpanKind.CLIENT, typo))[-1:]) == [
        "span 'chat gpt-4o' (chat): unknown attribute gen_ai.input.messages_refs (not in the registry)"
    ]
