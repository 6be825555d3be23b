"""``configure_telemetry`` sets up logs (for the content events) when they are asked for, and only then.

Asked for: ``logs=True``, a ``log_exporter``, or by default the environment
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` with events, ``OTEL_LOGS_EXPORTER``). The
exporter: OTLP when a logs endpoint is set (both protocols, to the suite's receiver), else the
console; shutdown stays bounded with the endpoint hanging.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator

import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter, InMemoryLogRecordExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core.export import TelemetryHandles, configure_telemetry
from tests.otlp_receiver import OtlpReceiver

DETAILS = "gen_ai.client.inference.operation.details"
ENVIRONMENT = (
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "OTEL_LOGS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_METRICS_EXPORTER",
    "FLOWRA_OTEL_TRACES_FILE",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


def configure(**kwargs: object) -> TelemetryHandles:
    return configure_telemetry(
        set_global=False,
        register_atexit=False,
        span_exporter=InMemorySpanExporter(),
        metrics=False,
        console=False,
        **kwargs,  # type: ignore[arg-type]
    )


def emit(handles: TelemetryHandles, text: str = "hello") -> None:
    assert handles.logger_provider is not None
    handles.logger_provider.get_logger("test").emit(
        LogRecord(event_name=DETAILS, attributes={"gen_ai.operation.name": "chat", "app.text": text})
    )


@pytest.mark.parametrize(
    "environment",
    [
        pytest.param({}, id="nothing-set"),
        pytest.param({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}, id="content-on-spans-only"),
        pytest.param(
            {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY", "OTEL_LOGS_EXPORTER": "none"},
            id="events-but-logs-exporter-none",
        ),
        pytest.param({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, id="an-endpoint-alone"),
    ],
)
def test_no_logger_provider_unless_logs_are_asked_for(
    environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    handles = configure()
    try:
        assert handles.logger_provider is None
    finally:
        handles.shutdown()


def test_events_in_the_content_mode_ask_for_logs_and_without_an_endpoint_they_print(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    stream = io.StringIO()
    handles = configure(console_stream=stream)
    try:
        emit(handles, "printed")
        assert handles.force_flush()
    finally:
        handles.shutdown()
    printed = json.loads(stream.getvalue())
    assert (printed["event_name"], printed["attributes"]["app.text"]) == (DETAILS, "printed")


def test_logs_false_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    handles = configure(logs=False)
    try:
        assert handles.logger_provider is None
    finally:
        handles.shutdown()


def test_a_log_exporter_of_ones_own_is_used_as_is() -> None:
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    handles = configure(log_exporter=exporter)
    try:
        emit(handles, "in memory")
        (record,) = exporter.get_finished_logs()
        assert record.log_record.event_name == DETAILS
    finally:
        handles.shutdown()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_an_otlp_logs_endpoint_gets_the_records(
    protocol: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", protocol)
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_logs_endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", endpoint)
    handles = configure(logs=True)
    try:
        assert not any(isinstance(e, ConsoleLogRecordExporter) for e in handles._logs.exporters)  # type: ignore[union-attr]
        emit(handles, "over the wire")
        assert handles.force_flush()
        (record,) = receiver.wait_for_log_records(1)
    finally:
        handles.shutdown()
    assert record.event_name == DETAILS
    assert record.attributes == {"gen_ai.operation.name": "chat", "app.text": "over the wire"}
    assert record.protocol == ("grpc" if protocol == "grpc" else "http")


def test_an_unknown_logs_exporter_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "syslog")
    with pytest.raises(ValueError, match="OTEL_LOGS_EXPORTER='syslog'"):
        configure()


def test_shutdown_is_bounded_with_the_logs_endpoint_hanging(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.mode = "hang"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.http_logs_endpoint)
    handles = configure(logs=True)
    emit(handles, "never delivered")
    started = time.monotonic()
    assert handles.shutdown(timeout_millis=300) is False
    assert time.monotonic() - started < 2.0
