"""Content modes: content on spans, in each model call's details event, both, or nowhere.

``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` takes opentelemetry-util-genai's four values
(and true/false as before), ``capture_content=`` the same names. With events, each model call's
``gen_ai.client.inference.operation.details`` event goes out through the OpenTelemetry logs API:
here end to end, through the logger provider ``configure_telemetry`` builds for it and the real
OTLP log exporters (HTTP and gRPC) to the suite's receiver. The event carries the very content the
span would: after every hook (a redaction hook's value, not the tool's), through ``redact=`` and
the secret patterns, within ``max_content_length``; event-only mode puts none on any span. The
leak checks run over the received log records as over the spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flowra.llm import LLMRequest, ToolResultBlock, Usage, UserMessage
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.core.export import TelemetryHandles, configure_telemetry
from flowra_otel.testing import find_leaks, find_log_leaks
from tests.both_lines.line import MakeHooks, S, Step
from tests.otlp_receiver import OtlpReceiver
from tests.semconv_conformance import check_log_records

SSN, CARD = S.SSN, S.CARD
DETAILS = "gen_ai.client.inference.operation.details"
MASK = "[MASKED]"
SECRETS = (SSN, CARD)
CONTENT_KEYS = frozenset(
    {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_DEFINITIONS,
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
    }
)
ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


# ------------------------------------------------------------------------------------ the scenario
def masked(text: str) -> str:
    """The app's redaction hook: the customer record's SSN and card number masked."""
    return text.replace(SSN, MASK).replace(CARD, MASK)


def echo_record(request: LLMRequest) -> Step:
    """The model's answer quotes the record it was given (so the output carries it too)."""
    (given,) = [
        b
        for m in request.messages
        if isinstance(m, UserMessage)
        for b in m.blocks
        if isinstance(b, ToolResultBlock) and b.tool_use_id == "c1"
    ]
    return S.answer(f"On file: {S.tool_result_text(given)}", usage=Usage(input_tokens=10, output_tokens=5))


async def run_customer(hooks: OtelHooks, *, redact: bool = True) -> str | None:
    """The assistant looks the customer up (the app's redaction hook on its hooks) and quotes the record."""
    return await S.customer_run(hooks, echo_record, mask=masked if redact else None)


EXPECTED_ANSWER = f"On file: Ada: SSN {MASK}, card {MASK}"


# ------------------------------------------------------------------------------------ plumbing
@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


def configure_with_logs_to(
    receiver: OtlpReceiver, protocol: str, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> TelemetryHandles:
    """``configure_telemetry`` as an app calls it, the logs endpoint (and the content mode, set by
    the caller) in the environment; spans into the test's exporter, no metric export."""
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_LOGS_EXPORTER", "FLOWRA_OTEL_TRACES_FILE"):
        monkeypatch.delenv(name, raising=False)
    if protocol == "grpc":
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "grpc")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.grpc_endpoint)
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.http_logs_endpoint)
    return configure_telemetry(
        set_global=False, register_atexit=False, span_exporter=span_exporter, metrics=False, console=False
    )


def chat_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )


def content_on_spans(exporter: InMemorySpanExporter) -> dict[str, set[str]]:
    """Span name -> the content keys it carries (and ``status`` for a status description)."""
    found: dict[str, set[str]] = {}
    for span in exporter.get_finished_spans():
        keys = set(span.attributes or {}) & CONTENT_KEYS
        if span.status.description:
            keys.add("status")
        if keys:
            found.setdefault(span.name, set()).update(keys)
    return found


def plain(value: Any) -> Any:
    """A received structure with the decoder's tuples as lists (JSON's shape)."""
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def parts(messages: Any, part_type: str) -> list[dict[str, Any]]:
    return [p for m in plain(messages) for p in m["parts"] if p["type"] == part_type]


def memory_logs() -> tuple[LoggerProvider, InMemoryLogRecordExporter]:
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider, exporter


# ------------------------------------------------------------------------------------ end to end
@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_event_only_puts_every_content_in_the_events_and_none_on_any_span(
    protocol: str,
    receiver: OtlpReceiver,
    span_exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, "EVENT_ONLY")
    handles = configure_with_logs_to(receiver, protocol, span_exporter, monkeypatch)
    try:
        assert handles.logger_provider is not None  # asked for by the content mode
        hooks = OtelHooks(
            tracer_provider=handles.tracer_provider,
            meter_provider=meter_provider,
            logger_provider=handles.logger_provider,
        )
        assert await run_customer(hooks) == EXPECTED_ANSWER
        assert handles.force_flush()
        records = receiver.wait_for_log_records(2)
    finally:
        handles.shutdown()

    assert content_on_spans(span_exporter) == {}  # event-only: no content on any span
    assert {r.protocol for r in records} == {"grpc" if protocol == "grpc" else "http"}
    call, answer = chat_spans(span_exporter)
    assert [r.event_name for r in records] == [DETAILS, DETAILS]
    assert [(r.trace_id, r.span_id) for r in records] == [
        (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in (call, answer) if s.context
    ]
    first, second = (r.attributes for r in records)
    start = {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "anthropic",
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        semconv.FLOWRA_LLM_MODEL: "anthropic/sonnet-4-5",
        semconv.GEN_AI_AGENT_NAME: "assistant",
    }
    assert {k: v for k, v in second.items() if k not in CONTENT_KEYS} == {
        **start,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
    }
    assert set(first) & CONTENT_KEYS == {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_DEFINITIONS,
    }
    assert plain(first[semconv.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Look up Ada"}]}
    ]
    assert parts(first[semconv.GEN_AI_OUTPUT_MESSAGES], "tool_call") == [
        {"type": "tool_call", "id": "c1", "name": "lookup_customer", "arguments": {"name": "Ada"}}
    ]
    # The second call was given the record as the redaction hook left it, and quoted it.
    assert parts(second[semconv.GEN_AI_INPUT_MESSAGES], "tool_call_response") == [
        {"type": "tool_call_response", "id": "c1", "response": f"Ada: SSN {MASK}, card {MASK}"}
    ]
    assert plain(second[semconv.GEN_AI_OUTPUT_MESSAGES]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": EXPECTED_ANSWER}]}
    ]
    assert find_log_leaks(records, SECRETS) == []
    assert find_leaks(span_exporter.get_finished_spans(), SECRETS) == []
    assert check_log_records(records) == []


async def test_without_the_redaction_hook_the_leak_check_finds_the_secret_in_the_events(
    receiver: OtlpReceiver,
    span_exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The paired negative of the leak checks on log records: the same run without the app's
    redaction hook, so the secrets are content; the check finds them in the received events
    (the input the model was given, and its answer quoting it), and on no span."""
    monkeypatch.setenv(ENV, "EVENT_ONLY")
    handles = configure_with_logs_to(receiver, "http", span_exporter, monkeypatch)
    try:
        hooks = OtelHooks(
            tracer_provider=handles.tracer_provider,
            meter_provider=meter_provider,
            logger_provider=handles.logger_provider,
        )
        await run_customer(hooks, redact=False)
        assert handles.force_flush()
        records = receiver.wait_for_log_records(2)
    finally:
        handles.shutdown()
    places = {(leak.span_name, leak.where, leak.secret) for leak in find_log_leaks(records, SECRETS)}
    assert places == {
        (f"log {DETAILS}", f"attribute {key}", secret)
        for key in (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES)
        for secret in SECRETS
    }
    assert find_leaks(span_exporter.get_finished_spans(), SECRETS) == []  # still none on spans


async def test_span_and_event_records_the_same_content_in_both(
    receiver: OtlpReceiver,
    span_exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, "span_and_event")
    handles = configure_with_logs_to(receiver, "grpc", span_exporter, monkeypatch)
    try:
        hooks = OtelHooks(
            tracer_provider=handles.tracer_provider,
            meter_provider=meter_provider,
            logger_provider=handles.logger_provider,
        )
        await run_customer(hooks)
        assert handles.force_flush()
        records = receiver.wait_for_log_records(2)
    finally:
        handles.shutdown()
    # Content on spans too (so the event-only test's "none on any span" is not vacuous).
    assert set(content_on_spans(span_exporter)) == {
        "invoke_agent assistant",
        "chat sonnet-4-5",
        "execute_tool lookup_customer",
    }
    for span, record in zip(chat_spans(span_exporter), records, strict=True):
        attrs = dict(span.attributes or {})
        for key in (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES, semconv.GEN_AI_SYSTEM_INSTRUCTIONS):
            assert plain(record.attributes[key]) == json.loads(str(attrs[key])), key
        # Every non-content attribute of the span is on the event, with the same value.
        assert {k: v for k, v in attrs.items() if k not in CONTENT_KEYS} == {
            k: v for k, v in record.attributes.items() if k not in CONTENT_KEYS
        }
    assert find_log_leaks(records, SECRETS) == []
    assert find_leaks(span_exporter.get_finished_spans(), SECRETS) == []
    assert check_log_records(records) == []


# ------------------------------------------------------------------------------------ the modes
MODES: list[Any] = [
    pytest.param({ENV: "NO_CONTENT"}, {}, False, False, id="env-NO_CONTENT"),
    pytest.param({ENV: "SPAN_ONLY"}, {}, True, False, id="env-SPAN_ONLY"),
    pytest.param({ENV: "EVENT_ONLY"}, {}, False, True, id="env-EVENT_ONLY"),
    pytest.param({ENV: "SPAN_AND_EVENT"}, {}, True, True, id="env-SPAN_AND_EVENT"),
    pytest.param({ENV: " event_only "}, {}, False, True, id="env-lowercase-spaces"),
    pytest.param({ENV: "true"}, {}, True, False, id="env-true"),
    pytest.param({ENV: "false"}, {}, False, False, id="env-false"),
    pytest.param({}, {}, False, False, id="unset"),
    pytest.param({ENV: "SPAN_ONLY"}, {"capture_content": "event_only"}, False, True, id="option-wins"),
    pytest.param({ENV: "EVENT_ONLY"}, {"capture_content": True}, True, False, id="option-true"),
    pytest.param({ENV: "SPAN_AND_EVENT"}, {"capture_content": False}, False, False, id="option-false"),
    pytest.param({}, {"capture_content": "SPAN_AND_EVENT"}, True, True, id="option-upper"),
]


@pytest.mark.parametrize(("env", "options", "on_spans", "events"), MODES)
async def test_each_content_mode_puts_content_where_it_says(
    env: dict[str, str],
    options: dict[str, Any],
    on_spans: bool,
    events: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    logger_provider, log_exporter = memory_logs()
    await run_customer(make_otel_hooks(logger_provider=logger_provider, **options))
    records = log_exporter.get_finished_logs()
    assert bool(content_on_spans(span_exporter)) is on_spans
    assert [r.log_record.event_name for r in records] == ([DETAILS, DETAILS] if events else [])
    if events:
        assert all(semconv.GEN_AI_INPUT_MESSAGES in (r.log_record.attributes or {}) for r in records)
        assert find_log_leaks(records, SECRETS) == []
        assert check_log_records(records) == []


def test_an_unknown_content_mode_fails_at_construction(make_otel_hooks: MakeHooks) -> None:
    with pytest.raises(ValueError, match=r"capture_content='events' is not a content mode; use one of \['event_only'"):
        make_otel_hooks(capture_content="events")


async def test_an_unknown_environment_value_warns_and_records_no_content(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(ENV, "EVENTS_PLEASE")
    logger_provider, log_exporter = memory_logs()
    await run_customer(make_otel_hooks(logger_provider=logger_provider))
    assert content_on_spans(span_exporter) == {}
    assert log_exporter.get_finished_logs() == ()
    assert any("EVENTS_PLEASE" in r.getMessage() for r in caplog.records if r.name == "flowra_otel.options")


# ------------------------------------------------------------------------------------ the same pipeline
async def test_event_content_goes_through_redact_the_secret_patterns_and_the_size_budget(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    key = "sk-" + "a1b2c3d4" * 4
    long_text = "word " * 400
    logger_provider, log_exporter = memory_logs()
    hooks = make_otel_hooks(
        capture_content="event_only",
        logger_provider=logger_provider,
        redact=lambda text: text.replace("Ada", "[NAME]"),
        redact_secrets=True,
        max_content_length=400,
    )
    await S.plain_run(hooks, S.answer(f"Your key {key} works. {long_text}"), text=f"I am Ada, my key is {key}")
    (record,) = log_exporter.get_finished_logs()
    attrs = dict(record.log_record.attributes or {})
    inputs = plain(attrs[semconv.GEN_AI_INPUT_MESSAGES])
    assert inputs == [
        {"role": "user", "parts": [{"type": "text", "content": "I am [NAME], my key is [REDACTED:api_key]"}]}
    ]
    (answer,) = parts(attrs[semconv.GEN_AI_OUTPUT_MESSAGES], "text")
    assert answer["content"].startswith("Your key [REDACTED:api_key] works. word word")
    assert re.search(r"…\[flowra_otel: truncated \d+ of \d+ chars\]$", answer["content"])
    rendered = json.dumps(plain(attrs[semconv.GEN_AI_OUTPUT_MESSAGES]), ensure_ascii=False, separators=(",", ":"))
    assert len(rendered) <= 400
    assert find_log_leaks([record], [key, "Ada"]) == []
    assert content_on_spans(span_exporter) == {}


async def test_a_failed_call_has_an_event_with_its_input_and_error_type(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    logger_provider, log_exporter = memory_logs()
    hooks = make_otel_hooks(capture_content="event_only", logger_provider=logger_provider)
    with pytest.raises(RuntimeError, match="model down"):
        await S.plain_run(hooks, RuntimeError("model down"), text="Hello")
    (chat,) = chat_spans(span_exporter)
    (record,) = log_exporter.get_finished_logs()
    attrs = dict(record.log_record.attributes or {})
    assert attrs[semconv.ERROR_TYPE] == (chat.attributes or {})[semconv.ERROR_TYPE]
    assert plain(attrs[semconv.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Hello"}]}
    ]
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in attrs
    assert not chat.status.description  # event-only: not even the exception's message on the span
    assert record.log_record.span_id == chat.context.span_id if chat.context else False


def nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"a": [value]}
    return value


HUGE = 2**70


@pytest.mark.parametrize("capture", ["event_only", "span_and_event"])
async def test_event_content_that_json_holds_but_otlp_cannot_is_recorded_not_dropped(
    capture: str,
    receiver: OtlpReceiver,
    span_exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool call whose arguments hold an integer beyond int64 and a value nested 30 levels
    deep: the event (over real OTLP/HTTP to the receiver) keeps its output messages, the integer
    as its digits and the deep part as JSON text below ``MAX_EVENT_DEPTH``. Paired negative below."""
    records = await run_odd_arguments(capture, receiver, span_exporter, meter_provider, monkeypatch)
    first = records[0].attributes
    assert semconv.GEN_AI_OUTPUT_MESSAGES in first, "the OTLP encoder dropped the event's output messages"
    (call,) = parts(first[semconv.GEN_AI_OUTPUT_MESSAGES], "tool_call")
    assert call["arguments"]["count"] == str(HUGE)
    deep = call["arguments"]["deep"]
    depth = 0
    while isinstance(deep, dict | list):
        deep = deep["a"] if isinstance(deep, dict) else deep[0]
        depth += 1
    assert isinstance(deep, str) and json.loads(deep)  # the rest, as JSON text
    assert '"bottom"' in deep
    assert 0 < depth < 30


async def test_without_making_event_values_encodable_the_exporter_drops_them(
    receiver: OtlpReceiver,
    span_exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flowra_otel.core import details_event

    monkeypatch.setattr(details_event, "loggable", json.loads)
    records = await run_odd_arguments("event_only", receiver, span_exporter, meter_provider, monkeypatch)
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in records[0].attributes


async def run_odd_arguments(
    capture: str,
    receiver: OtlpReceiver,
    span_exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> list[Any]:
    monkeypatch.setenv(ENV, capture.upper())
    handles = configure_with_logs_to(receiver, "http", span_exporter, monkeypatch)
    try:
        assert handles.logger_provider is not None
        hooks = OtelHooks(
            tracer_provider=handles.tracer_provider,
            meter_provider=meter_provider,
            logger_provider=handles.logger_provider,
            capture_content=capture,
        )
        arguments = {"city": "Oslo", "count": HUGE, "deep": nested(30)}
        await S.tool_hook_run(hooks, ("c1", "get_weather", arguments))
        assert handles.force_flush()
        return receiver.wait_for_log_records(2)
    finally:
        handles.shutdown()
