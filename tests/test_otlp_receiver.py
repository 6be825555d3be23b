"""The in-process OTLP receiver, proven against the real OpenTelemetry SDK exporters (gRPC and HTTP)."""

from __future__ import annotations

import gzip
import http.client
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from tests.otlp_receiver import OtlpReceiver, SpanRecord, decode_any_value, decode_attributes

Transport = Literal["grpc", "http", "http-gzip"]
TRANSPORTS: tuple[Transport, ...] = ("grpc", "http", "http-gzip")

# Each test proves a bound: nothing here may take long, whatever the exporters' retry logic does.
TEST_BUDGET_S = 5.0


@pytest.fixture
def rx() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(autouse=True)
def _time_budget() -> Iterator[None]:
    start = time.monotonic()
    yield
    elapsed = time.monotonic() - start
    assert elapsed < TEST_BUDGET_S, f"test took {elapsed:.2f}s (budget {TEST_BUDGET_S}s)"


def make_span_exporter(
    transport: Transport, rx: OtlpReceiver, *, timeout: float = 2.0, headers: dict[str, str] | None = None
) -> SpanExporter:
    if transport == "grpc":
        return GrpcSpanExporter(endpoint=rx.grpc_endpoint, insecure=True, timeout=timeout, headers=headers)
    return HttpSpanExporter(
        endpoint=rx.http_endpoint + "/v1/traces",
        timeout=timeout,
        headers=headers,
        compression=Compression.Gzip if transport == "http-gzip" else Compression.NoCompression,
    )


def make_metric_exporter(transport: Transport, rx: OtlpReceiver, *, timeout: float = 2.0) -> MetricExporter:
    if transport == "grpc":
        return GrpcMetricExporter(endpoint=rx.grpc_endpoint, insecure=True, timeout=timeout)
    return HttpMetricExporter(
        endpoint=rx.http_metrics_endpoint,
        timeout=timeout,
        compression=Compression.Gzip if transport == "http-gzip" else Compression.NoCompression,
    )


def expected_protocol(transport: Transport) -> str:
    return "grpc" if transport == "grpc" else "http"


def one_finished_span() -> Sequence[ReadableSpan]:
    """A real SDK span, captured in memory, to hand to an exporter's ``export`` directly."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
        pass
    provider.shutdown()
    return memory.get_finished_spans()


def by_name(spans: Sequence[SpanRecord], name: str) -> SpanRecord:
    matches = [s for s in spans if s.name == name]
    assert len(matches) == 1, f"{name!r}: {len(matches)} spans among {[s.name for s in spans]}"
    return matches[0]


# --- traces -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nested_spans_arrive_intact(rx: OtlpReceiver, transport: Transport) -> None:
    provider = TracerProvider(
        resource=Resource.create({"service.name": "rx-test", "deployment.environment.name": "ci"}),
        shutdown_on_exit=False,
    )
    provider.add_span_processor(SimpleSpanProcessor(make_span_exporter(transport, rx, headers={"x-tenant": "t1"})))
    tracer = provider.get_tracer("flowra_otel.test", "9.9.9")

    with tracer.start_as_current_span("linked-target") as target:
        pass
    with (
        tracer.start_as_current_span(
            "invoke_agent demo", attributes={"gen_ai.operation.name": "invoke_agent"}
        ) as agent,
        tracer.start_as_current_span(
            "chat claude",
            kind=SpanKind.CLIENT,
            links=[Link(target.get_span_context(), {"link.kind": "retry-of"})],
            attributes={
                "s": "text",
                "b": True,
                "i": 42,
                "f": 0.25,
                "ss": ["a", "b"],
                "bs": [True, False],
                "is": [1, 2, 3],
                "fs": [0.5, 1.5],
                "empty": [],
            },
        ) as chat,
    ):
        chat.add_event("gen_ai.choice", {"index": 0, "finish": "stop"})
        with tracer.start_as_current_span("execute_tool search") as tool:
            tool.set_status(Status(StatusCode.ERROR, "tool blew up"))
    provider.shutdown()

    spans = rx.wait_for_spans(4)
    assert len(spans) == 4
    assert {s.protocol for s in spans} == {expected_protocol(transport)}

    r_target, r_agent = by_name(spans, "linked-target"), by_name(spans, "invoke_agent demo")
    r_chat, r_tool = by_name(spans, "chat claude"), by_name(spans, "execute_tool search")

    agent_ctx, chat_ctx = agent.get_span_context(), chat.get_span_context()
    trace_hex = format(agent_ctx.trace_id, "032x")
    assert r_agent.trace_id == r_chat.trace_id == r_tool.trace_id == trace_hex
    assert r_agent.span_id == format(agent_ctx.span_id, "016x")
    assert r_agent.is_root and r_target.is_root
    assert r_chat.parent_span_id == r_agent.span_id
    assert r_tool.parent_span_id == r_chat.span_id == format(chat_ctx.span_id, "016x")
    assert r_tool.span_id == format(tool.get_span_context().span_id, "016x")
    assert r_target.trace_id != trace_hex

    assert r_chat.kind == "CLIENT" and r_agent.kind == "INTERNAL"
    assert r_chat.attributes == {
        "s": "text",
        "b": True,
        "i": 42,
        "f": 0.25,
        "ss": ("a", "b"),
        "bs": (True, False),
        "is": (1, 2, 3),
        "fs": (0.5, 1.5),
        "empty": (),
    }
    assert type(r_chat.attributes["i"]) is int and type(r_chat.attributes["b"]) is bool
    assert r_agent.attributes == {"gen_ai.operation.name": "invoke_agent"}

    (event,) = r_chat.events
    assert event.name == "gen_ai.choice" and event.attributes == {"index": 0, "finish": "stop"}
    assert r_chat.start_time_unix_nano <= event.time_unix_nano <= r_chat.end_time_unix_nano
    (link,) = r_chat.links
    assert (link.trace_id, link.span_id) == (r_target.trace_id, r_target.span_id)
    assert link.attributes == {"link.kind": "retry-of"}

    assert (r_tool.status_code, r_tool.status_message) == ("ERROR", "tool blew up")
    assert (r_agent.status_code, r_agent.status_message) == ("UNSET", "")
    assert r_tool.duration_ns >= 0 and r_agent.duration_ns >= r_chat.duration_ns

    for s in spans:
        assert s.resource_attributes["service.name"] == "rx-test"
        assert s.resource_attributes["deployment.environment.name"] == "ci"
        assert (s.scope_name, s.scope_version) == ("flowra_otel.test", "9.9.9")

    requests = rx.trace_requests
    assert requests and all(r.headers.get("x-tenant") == "t1" for r in requests)
    if transport == "http-gzip":
        assert all(r.headers.get("content-encoding") == "gzip" for r in requests)
    assert rx.attempt_count(signal="traces") == len(requests) == 4  # SimpleSpanProcessor: one export per span
    assert rx.spans_named("chat claude") == [r_chat]


def test_both_protocols_into_one_receiver(rx: OtlpReceiver) -> None:
    for transport in ("grpc", "http"):
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(SimpleSpanProcessor(make_span_exporter(transport, rx)))
        with provider.get_tracer("t").start_as_current_span(f"span via {transport}"):
            pass
        provider.shutdown()
    rx.wait_for_spans(2)
    assert [s.name for s in rx.spans(protocol="grpc")] == ["span via grpc"]
    assert [s.name for s in rx.spans(protocol="http")] == ["span via http"]
    rx.clear()
    assert rx.spans() == [] and rx.attempts == []


# --- metrics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_metrics_arrive(rx: OtlpReceiver, transport: Transport) -> None:
    reader = PeriodicExportingMetricReader(make_metric_exporter(transport, rx), export_interval_millis=60_000)
    provider = MeterProvider(
        metric_readers=[reader], resource=Resource.create({"service.name": "rx-test"}), shutdown_on_exit=False
    )
    meter = provider.get_meter("flowra_otel.test")
    tokens = meter.create_counter("gen_ai.client.token.usage.test", unit="{token}", description="tokens")
    duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s")
    tokens.add(3, {"gen_ai.token.type": "input"})
    tokens.add(4, {"gen_ai.token.type": "input"})
    tokens.add(5, {"gen_ai.token.type": "output"})
    duration.record(0.5, {"gen_ai.operation.name": "chat"})
    duration.record(2.0, {"gen_ai.operation.name": "chat"})

    assert provider.force_flush(timeout_millis=3_000)
    provider.shutdown(timeout_millis=3_000)

    points = rx.wait_for_metric_points("gen_ai.client.operation.duration")
    counter = {p.attributes["gen_ai.token.type"]: p for p in rx.metric_points("gen_ai.client.token.usage.test")}
    assert {k: p.value for k, p in counter.items()} == {"input": 7, "output": 5}
    first = counter["input"]
    assert (first.type, first.unit, first.description) == ("sum", "{token}", "tokens")
    assert first.is_monotonic is True and first.temporality == "CUMULATIVE"
    assert first.resource_attributes["service.name"] == "rx-test"
    assert first.scope_name == "flowra_otel.test"
    assert first.protocol == expected_protocol(transport)

    hist = points[0]
    assert hist.type == "histogram" and hist.unit == "s"
    assert hist.attributes == {"gen_ai.operation.name": "chat"}
    assert (hist.count, hist.sum, hist.min, hist.max) == (2, 2.5, 0.5, 2.0)
    assert hist.explicit_bounds and len(hist.bucket_counts) == len(hist.explicit_bounds) + 1
    assert sum(hist.bucket_counts) == 2


# --- faults -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transport", "grpc_code", "http_status", "max_attempts"),
    [
        pytest.param("grpc", grpc.StatusCode.INTERNAL, 500, 1, id="grpc-internal-not-retried"),
        pytest.param("grpc", grpc.StatusCode.UNAVAILABLE, 500, 2, id="grpc-unavailable-retried"),
        pytest.param("http", grpc.StatusCode.INTERNAL, 500, 1, id="http-500-not-retried"),
        pytest.param("http", grpc.StatusCode.INTERNAL, 503, 2, id="http-503-retried"),
    ],
)
def test_error_mode_gives_failure_quickly(
    transport: Transport, grpc_code: Any, http_status: int, max_attempts: int
) -> None:
    spans = one_finished_span()
    with OtlpReceiver(mode="error", grpc_error=grpc_code, http_error_status=http_status) as rx:
        exporter = make_span_exporter(transport, rx, timeout=1.0)
        start = time.monotonic()
        result = exporter.export(spans)
        elapsed = time.monotonic() - start
        exporter.shutdown()

        assert result is SpanExportResult.FAILURE
        # The exporters retry only within their own timeout: a 1 s timeout bounds the whole call.
        assert elapsed < 2.5, f"export took {elapsed:.2f}s"
        attempts = rx.attempts
        assert 1 <= len(attempts) <= max_attempts
        assert {a.mode for a in attempts} == {"error"}
        assert rx.trace_requests == []


def test_http_retry_after_drives_the_exporter_retries() -> None:
    """A 503 with ``Retry-After: 0`` is retried at once: several attempts, still one quick FAILURE."""
    spans = one_finished_span()
    with OtlpReceiver(mode="error", http_error_status=503, http_retry_after="0") as rx:
        exporter = make_span_exporter("http", rx, timeout=2.0)
        start = time.monotonic()
        result = exporter.export(spans)
        elapsed = time.monotonic() - start
        exporter.shutdown()
        assert result is SpanExportResult.FAILURE
        assert elapsed < 2.5, f"export took {elapsed:.2f}s"
        assert rx.attempt_count(protocol="http", signal="traces") >= 3  # the SDK gives up after its max retries


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_error_mode_never_raises_into_the_caller(transport: Transport) -> None:
    with OtlpReceiver(mode="error", grpc_error=grpc.StatusCode.INTERNAL, http_error_status=500) as rx:
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(SimpleSpanProcessor(make_span_exporter(transport, rx, timeout=1.0)))
        with provider.get_tracer("t").start_as_current_span("refused"):
            pass  # span.end() exports synchronously and must swallow the failure
        rx.wait_for_attempts(1)

        rx.mode = "ok"  # the receiver recovers: the next span gets through
        with provider.get_tracer("t").start_as_current_span("accepted"):
            pass
        provider.shutdown()
        assert [s.name for s in rx.wait_for_spans(1)] == ["accepted"]


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_hang_mode_times_out_the_client_and_close_releases_it(transport: Transport) -> None:
    spans = one_finished_span()
    rx = OtlpReceiver(mode="hang", hang_seconds=30.0).start()
    try:
        exporter = make_span_exporter(transport, rx, timeout=1.0)
        start = time.monotonic()
        result = exporter.export(spans)
        elapsed = time.monotonic() - start
        exporter.shutdown()
        assert result is SpanExportResult.FAILURE
        assert 0.8 <= elapsed < 2.5, f"export took {elapsed:.2f}s"
        assert {a.mode for a in rx.attempts} == {"hang"}
    finally:
        start = time.monotonic()
        rx.close()
        closing = time.monotonic() - start
    assert closing < 1.5, f"close() took {closing:.2f}s with a hung request"
    assert rx.trace_requests == []


def test_closed_receiver_refuses_connections() -> None:
    spans = one_finished_span()
    with OtlpReceiver() as rx:
        exporter = make_span_exporter("http", rx, timeout=1.0)
    rx.close()  # idempotent
    assert exporter.export(spans) is SpanExportResult.FAILURE
    exporter.shutdown()


# --- raw HTTP edges ---------------------------------------------------------------------------


def _post(rx: OtlpReceiver, path: str, body: bytes, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", int(rx.http_endpoint.rsplit(":", 1)[1]), timeout=2)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_http_edges(rx: OtlpReceiver) -> None:
    proto = {"Content-Type": "application/x-protobuf"}
    request = ExportTraceServiceRequest().SerializeToString()
    assert _post(rx, "/v1/profiles", request, proto) == 404
    assert _post(rx, "/v1/logs", b"", proto) == 200  # an empty ExportLogsServiceRequest
    assert rx.log_records() == [] and len(rx.logs_requests) == 1
    assert _post(rx, "/v1/traces", b"{}", {"Content-Type": "application/json"}) == 415
    assert _post(rx, "/v1/traces", b"\xff\xff\xff", proto) == 400
    assert _post(rx, "/v1/traces", b"not gzip", {**proto, "Content-Encoding": "gzip"}) == 400
    assert _post(rx, "/v1/traces", request, {**proto, "Content-Encoding": "br"}) == 415
    assert _post(rx, "/v1/traces", gzip.compress(request), {**proto, "Content-Encoding": "gzip"}) == 200
    assert _post(rx, "/v1/traces", request, proto) == 200
    assert len(rx.trace_requests) == 2 and rx.spans() == []


# --- decoding ---------------------------------------------------------------------------------


def test_decode_any_value_covers_every_kind() -> None:
    nested = AnyValue(
        kvlist_value=KeyValueList(
            values=[
                KeyValue(key="k", value=AnyValue(string_value="v")),
                KeyValue(key="arr", value=AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1)]))),
            ]
        )
    )
    assert decode_any_value(nested) == {"k": "v", "arr": (1,)}
    assert decode_any_value(AnyValue(bytes_value=b"\x00\x01")) == b"\x00\x01"
    assert decode_any_value(AnyValue(double_value=1.5)) == 1.5
    assert decode_any_value(AnyValue(bool_value=False)) is False
    assert decode_any_value(AnyValue()) is None
    assert decode_attributes([KeyValue(key="x", value=AnyValue(int_value=-7))]) == {"x": -7}


def test_wait_for_spans_times_out_with_a_clear_message(rx: OtlpReceiver) -> None:
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"expected at least 1 span\(s\) within 0.2s, got 0"):
        rx.wait_for_spans(1, timeout=0.2)
    assert time.monotonic() - start < 1.0


def test_endpoints_need_a_started_receiver() -> None:
    receiver = OtlpReceiver()
    with pytest.raises(RuntimeError, match="not started"):
        _ = receiver.grpc_endpoint
    with pytest.raises(ValueError, match="unknown mode"):
        receiver.mode = "flaky"  # type: ignore[assignment]
    with receiver as rx:
        assert rx.grpc_endpoint.startswith("http://127.0.0.1:")
        assert rx.http_traces_endpoint == rx.http_endpoint + "/v1/traces"
        assert rx.grpc_endpoint != rx.http_endpoint
