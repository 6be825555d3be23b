"""An in-process OTLP receiver for end-to-end export tests: the real wire protocol, no mock exporter.

One :class:`OtlpReceiver` listens on 127.0.0.1 (ephemeral ports) for

* OTLP/gRPC: ``TraceService/Export``, ``MetricsService/Export`` and ``LogsService/Export``
  (servicers from ``opentelemetry.proto.collector.*.v1.*_pb2_grpc`` on a ``grpc.server``);
* OTLP/HTTP protobuf: ``POST /v1/traces``, ``POST /v1/metrics`` and ``POST /v1/logs`` (a
  ``ThreadingHTTPServer`` in a thread; ``Content-Encoding: gzip`` / ``deflate`` are decoded),

keeps every accepted ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` /
``ExportLogsServiceRequest`` and flattens them into plain records (:class:`SpanRecord`,
:class:`MetricPoint`, :class:`LogRecordRecord`) that tests can assert on::

    with OtlpReceiver() as rx:
        exporter = OTLPSpanExporter(endpoint=rx.grpc_endpoint, insecure=True)
        ...
        (span,) = rx.wait_for_spans(1)
        assert span.attributes["gen_ai.operation.name"] == "chat"

Fault modes (settable at any time through :attr:`OtlpReceiver.mode`):

* ``"ok"``: accept and record;
* ``"error"``: refuse: gRPC status ``grpc_error`` (default ``UNAVAILABLE``) and HTTP
  ``http_error_status`` (default 503); nothing is recorded except the attempt;
* ``"hang"``: hold the request without answering until the client gives up (gRPC: its deadline
  passes), ``hang_seconds`` elapse, or the receiver closes, whichever is first, so a test never
  hangs on it.

Every attempt, accepted or not, is counted in :attr:`OtlpReceiver.attempts`; that is how a test
sees an exporter's retries.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal, Self

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

__all__ = [
    "AttrValue",
    "EventRecord",
    "ExportAttempt",
    "LinkRecord",
    "LogRecordRecord",
    "MetricPoint",
    "Mode",
    "OtlpReceiver",
    "Protocol",
    "ReceivedRequest",
    "Signal",
    "SpanRecord",
    "decode_any_value",
    "decode_attributes",
    "flatten_logs",
    "flatten_metrics",
    "flatten_spans",
]

Mode = Literal["ok", "error", "hang"]
Protocol = Literal["grpc", "http"]
Signal = Literal["traces", "metrics", "logs"]
MetricType = Literal["gauge", "sum", "histogram", "exponential_histogram", "summary"]

type AttrValue = str | bool | int | float | bytes | tuple[AttrValue, ...] | dict[str, AttrValue] | None
"""A decoded OTLP ``AnyValue``: arrays become tuples (as in the SDK's own attributes), kvlists dicts."""

TraceRequest = trace_service_pb2.ExportTraceServiceRequest
MetricsRequest = metrics_service_pb2.ExportMetricsServiceRequest
LogsRequest = logs_service_pb2.ExportLogsServiceRequest

_MAX_HTTP_BODY: Final = 64 * 1024 * 1024
_MAX_GRPC_MESSAGE: Final = 64 * 1024 * 1024
_POLL_SECONDS: Final = 0.02
_STOP_SECONDS: Final = 2.0


# --- decoded records --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventRecord:
    name: str
    time_unix_nano: int
    attributes: dict[str, AttrValue]


@dataclass(frozen=True, slots=True)
class LinkRecord:
    trace_id: str
    span_id: str
    attributes: dict[str, AttrValue]
    trace_state: str = ""


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span as received, with ids in lowercase hex and attributes decoded."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    """``None`` for a root span (empty ``parent_span_id`` on the wire)."""
    name: str
    kind: str
    """``INTERNAL``, ``SERVER``, ``CLIENT``, ``PRODUCER``, ``CONSUMER`` or ``UNSPECIFIED``."""
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: dict[str, AttrValue]
    status_code: str
    """``UNSET``, ``OK`` or ``ERROR``."""
    status_message: str
    events: tuple[EventRecord, ...]
    links: tuple[LinkRecord, ...]
    resource_attributes: dict[str, AttrValue]
    scope_name: str
    scope_version: str
    trace_state: str = ""
    dropped_attributes_count: int = 0
    protocol: Protocol | None = None

    @property
    def is_root(self) -> bool:
        return self.parent_span_id is None

    @property
    def duration_ns(self) -> int:
        return self.end_time_unix_nano - self.start_time_unix_nano


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One data point of one metric, flattened with its metric's identity."""

    name: str
    description: str
    unit: str
    type: MetricType
    attributes: dict[str, AttrValue]
    value: int | float | None = None
    """Gauge and sum points only."""
    count: int | None = None
    """Histogram, exponential histogram and summary points only."""
    sum: float | None = None
    bucket_counts: tuple[int, ...] = ()
    explicit_bounds: tuple[float, ...] = ()
    min: float | None = None
    max: float | None = None
    is_monotonic: bool | None = None
    temporality: str | None = None
    """``CUMULATIVE`` or ``DELTA`` for sums and histograms, else ``None``."""
    start_time_unix_nano: int = 0
    time_unix_nano: int = 0
    resource_attributes: dict[str, AttrValue] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    protocol: Protocol | None = None


@dataclass(frozen=True, slots=True)
class LogRecordRecord:
    """One log record as received (an event when ``event_name`` is set), ids in lowercase hex."""

    event_name: str
    body: AttrValue
    attributes: dict[str, AttrValue]
    trace_id: str | None
    span_id: str | None
    time_unix_nano: int
    severity_number: int
    severity_text: str
    resource_attributes: dict[str, AttrValue]
    scope_name: str
    scope_version: str
    protocol: Protocol | None = None


@dataclass(frozen=True, slots=True)
class ReceivedRequest[T]:
    """An accepted export request, with how it came and its headers (gRPC metadata, lowercased keys)."""

    protocol: Protocol
    request: T
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class ExportAttempt:
    """Every export call that reached the receiver, whatever the mode answered."""

    protocol: Protocol
    signal: Signal
    mode: Mode
    monotonic_time: float
    headers: dict[str, str]


# --- decoding ---------------------------------------------------------------------------------


def decode_any_value(value: AnyValue) -> AttrValue:
    """Decode an OTLP ``AnyValue`` (recursively for arrays and kvlists); an empty value is ``None``."""
    match value.WhichOneof("value"):
        case "string_value":
            return value.string_value
        case "bool_value":
            return value.bool_value
        case "int_value":
            return value.int_value
        case "double_value":
            return value.double_value
        case "bytes_value":
            return value.bytes_value
        case "array_value":
            return tuple(decode_any_value(item) for item in value.array_value.values)
        case "kvlist_value":
            return decode_attributes(value.kvlist_value.values)
        case _:
            return None


def decode_attributes(attributes: Iterable[KeyValue]) -> dict[str, AttrValue]:
    return {kv.key: decode_any_value(kv.value) for kv in attributes}


def _hex_or_none(raw: bytes) -> str | None:
    return raw.hex() if raw else None


def _enum_suffix(full_name: str, prefix: str) -> str:
    return full_name.removeprefix(prefix)


def _span_record(
    span: trace_pb2.Span,
    resource_attributes: dict[str, AttrValue],
    scope_name: str,
    scope_version: str,
    protocol: Protocol | None,
) -> SpanRecord:
    return SpanRecord(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=_hex_or_none(span.parent_span_id),
        name=span.name,
        kind=_enum_suffix(trace_pb2.Span.SpanKind.Name(span.kind), "SPAN_KIND_"),
        start_time_unix_nano=span.start_time_unix_nano,
        end_time_unix_nano=span.end_time_unix_nano,
        attributes=decode_attributes(span.attributes),
        status_code=_enum_suffix(trace_pb2.Status.StatusCode.Name(span.status.code), "STATUS_CODE_"),
        status_message=span.status.message,
        events=tuple(
            EventRecord(name=ev.name, time_unix_nano=ev.time_unix_nano, attributes=decode_attributes(ev.attributes))
            for ev in span.events
        ),
        links=tuple(
            LinkRecord(
                trace_id=link.trace_id.hex(),
                span_id=link.span_id.hex(),
                attributes=decode_attributes(link.attributes),
                trace_state=link.trace_state,
            )
            for link in span.links
        ),
        resource_attributes=resource_attributes,
        scope_name=scope_name,
        scope_version=scope_version,
        trace_state=span.trace_state,
        dropped_attributes_count=span.dropped_attributes_count,
        protocol=protocol,
    )


def flatten_spans(
    requests: Iterable[TraceRequest | ReceivedRequest[TraceRequest]],
) -> list[SpanRecord]:
    """Every span of the given requests, in arrival order."""
    out: list[SpanRecord] = []
    for item in requests:
        protocol: Protocol | None
        if isinstance(item, ReceivedRequest):
            request, protocol = item.request, item.protocol
        else:
            request, protocol = item, None
        for rs in request.resource_spans:
            resource_attributes = decode_attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    out.append(_span_record(span, dict(resource_attributes), ss.scope.name, ss.scope.version, protocol))
    return out


def flatten_logs(requests: Iterable[LogsRequest | ReceivedRequest[LogsRequest]]) -> list[LogRecordRecord]:
    """Every log record of the given requests, in arrival order."""
    out: list[LogRecordRecord] = []
    for item in requests:
        protocol: Protocol | None
        if isinstance(item, ReceivedRequest):
            request, protocol = item.request, item.protocol
        else:
            request, protocol = item, None
        for rl in request.resource_logs:
            resource_attributes = decode_attributes(rl.resource.attributes)
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    out.append(
                        LogRecordRecord(
                            event_name=record.event_name,
                            body=decode_any_value(record.body),
                            attributes=decode_attributes(record.attributes),
                            trace_id=_hex_or_none(record.trace_id),
                            span_id=_hex_or_none(record.span_id),
                            time_unix_nano=record.time_unix_nano,
                            severity_number=int(record.severity_number),
                            severity_text=record.severity_text,
                            resource_attributes=dict(resource_attributes),
                            scope_name=sl.scope.name,
                            scope_version=sl.scope.version,
                            protocol=protocol,
                        )
                    )
    return out


def _temporality(value: int) -> str:
    return _enum_suffix(metrics_pb2.AggregationTemporality.Name(value), "AGGREGATION_TEMPORALITY_")


def _number_value(point: metrics_pb2.NumberDataPoint) -> int | float | None:
    match point.WhichOneof("value"):
        case "as_int":
            return point.as_int
        case "as_double":
            return point.as_double
        case _:
            return None


def _metric_points(metric: metrics_pb2.Metric, common: dict[str, Any]) -> list[MetricPoint]:
    ident: dict[str, Any] = {"name": metric.name, "description": metric.description, "unit": metric.unit, **common}
    points: list[MetricPoint] = []
    match metric.WhichOneof("data"):
        case "gauge":
            points.extend(
                MetricPoint(
                    type="gauge",
                    attributes=decode_attributes(p.attributes),
                    value=_number_value(p),
                    start_time_unix_nano=p.start_time_unix_nano,
                    time_unix_nano=p.time_unix_nano,
                    **ident,
                )
                for p in metric.gauge.data_points
            )
        case "sum":
            points.extend(
                MetricPoint(
                    type="sum",
                    attributes=decode_attributes(p.attributes),
                    value=_number_value(p),
                    is_monotonic=metric.sum.is_monotonic,
                    temporality=_temporality(metric.sum.aggregation_temporality),
                    start_time_unix_nano=p.start_time_unix_nano,
                    time_unix_nano=p.time_unix_nano,
                    **ident,
                )
                for p in metric.sum.data_points
            )
        case "histogram":
            points.extend(
                MetricPoint(
                    type="histogram",
                    attributes=decode_attributes(p.attributes),
                    count=p.count,
                    sum=p.sum if p.HasField("sum") else None,
                    bucket_counts=tuple(p.bucket_counts),
                    explicit_bounds=tuple(p.explicit_bounds),
                    min=p.min if p.HasField("min") else None,
                    max=p.max if p.HasField("max") else None,
                    temporality=_temporality(metric.histogram.aggregation_temporality),
                    start_time_unix_nano=p.start_time_unix_nano,
                    time_unix_nano=p.time_unix_nano,
                    **ident,
                )
                for p in metric.histogram.data_points
            )
        case "exponential_histogram":
            points.extend(
                MetricPoint(
                    type="exponential_histogram",
                    attributes=decode_attributes(p.attributes),
                    count=p.count,
                    sum=p.sum if p.HasField("sum") else None,
                    min=p.min if p.HasField("min") else None,
                    max=p.max if p.HasField("max") else None,
                    temporality=_temporality(metric.exponential_histogram.aggregation_temporality),
                    start_time_unix_nano=p.start_time_unix_nano,
                    time_unix_nano=p.time_unix_nano,
                    **ident,
                )
                for p in metric.exponential_histogram.data_points
            )
        case "summary":
            points.extend(
                MetricPoint(
                    type="summary",
                    attributes=decode_attributes(p.attributes),
                    count=p.count,
                    sum=p.sum,
                    start_time_unix_nano=p.start_time_unix_nano,
                    time_unix_nano=p.time_unix_nano,
                    **ident,
                )
                for p in metric.summary.data_points
            )
        case _:
            pass
    return points


def flatten_metrics(
    requests: Iterable[MetricsRequest | ReceivedRequest[MetricsRequest]],
) -> list[MetricPoint]:
    """Every data point of every metric of the given requests, in arrival order."""
    out: list[MetricPoint] = []
    for item in requests:
        protocol: Protocol | None
        if isinstance(item, ReceivedRequest):
            request, protocol = item.request, item.protocol
        else:
            request, protocol = item, None
        for rm in request.resource_metrics:
            resource_attributes = decode_attributes(rm.resource.attributes)
            for sm in rm.scope_metrics:
                common: dict[str, Any] = {
                    "resource_attributes": resource_attributes,
                    "scope_name": sm.scope.name,
                    "scope_version": sm.scope.version,
                    "protocol": protocol,
                }
                for metric in sm.metrics:
                    out.extend(_metric_points(metric, common))
    return out


# --- gRPC side --------------------------------------------------------------------------------


def _grpc_headers(context: Any) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in context.invocation_metadata():
        headers[str(key).lower()] = value if isinstance(value, str) else repr(value)
    return headers


class _TraceServicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._rx = receiver

    def Export(self, request: TraceRequest, context: Any) -> trace_service_pb2.ExportTraceServiceResponse:  # noqa: N802
        self._rx._grpc_export("traces", request, context)
        return trace_service_pb2.ExportTraceServiceResponse()


class _MetricsServicer(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._rx = receiver

    def Export(self, request: MetricsRequest, context: Any) -> metrics_service_pb2.ExportMetricsServiceResponse:  # noqa: N802
        self._rx._grpc_export("metrics", request, context)
        return metrics_service_pb2.ExportMetricsServiceResponse()


class _LogsServicer(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._rx = receiver

    def Export(self, request: LogsRequest, context: Any) -> logs_service_pb2.ExportLogsServiceResponse:  # noqa: N802
        self._rx._grpc_export("logs", request, context)
        return logs_service_pb2.ExportLogsServiceResponse()


# --- HTTP side --------------------------------------------------------------------------------


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    receiver: OtlpReceiver


class _HttpHandler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so no idle keep-alive thread outlives a test.
    protocol_version = "HTTP/1.0"
    timeout = 10.0  # a client that connects and sends nothing cannot hold a thread forever
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the default writes every request to stderr."""

    def _reply(self, status: int, body: bytes = b"", content_type: str = "text/plain; charset=utf-8") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            retry_after = self.server.receiver.http_retry_after
            if retry_after is not None and status in (HTTPStatus.SERVICE_UNAVAILABLE, HTTPStatus.TOO_MANY_REQUESTS):
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            if body:
                self.wfile.write(body)
        except OSError:
            pass  # the client gave up (hang mode, timeouts): nobody to answer

    def do_POST(self) -> None:
        signal: Signal
        if self.path.split("?", 1)[0] == "/v1/traces":
            signal = "traces"
        elif self.path.split("?", 1)[0] == "/v1/metrics":
            signal = "metrics"
        elif self.path.split("?", 1)[0] == "/v1/logs":
            signal = "logs"
        else:
            self._reply(HTTPStatus.NOT_FOUND, b"unknown OTLP path")
            return
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/x-protobuf":
            self._reply(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, b"only application/x-protobuf is supported")
            return
        try:
            length = int(self.headers.get("Content-Length") or "-1")
        except ValueError:
            length = -1
        if length < 0:
            self._reply(HTTPStatus.LENGTH_REQUIRED, b"Content-Length required")
            return
        if length > _MAX_HTTP_BODY:
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"body too large")
            return
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            elif encoding not in ("identity", "none", ""):
                self._reply(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, b"unsupported Content-Encoding")
                return
        except (OSError, EOFError, zlib.error):
            self._reply(HTTPStatus.BAD_REQUEST, b"bad compressed body")
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        status, payload = self.server.receiver._http_export(signal, body, headers)
        content = "application/x-protobuf" if status == HTTPStatus.OK else "text/plain; charset=utf-8"
        self._reply(status, payload, content)


# --- the receiver -----------------------------------------------------------------------------


class OtlpReceiver:
    """OTLP/gRPC + OTLP/HTTP receiver on 127.0.0.1 for tests. Use as a context manager."""

    def __init__(
        self,
        *,
        mode: Mode = "ok",
        grpc_error: Any = None,
        http_error_status: int = HTTPStatus.SERVICE_UNAVAILABLE,
        http_retry_after: str | None = None,
        hang_seconds: float = 10.0,
        grpc_workers: int = 8,
        grpc_port: int = 0,
        http_port: int = 0,
    ) -> None:
        """
        Args:
            mode: initial fault mode (``ok``, ``error``, ``hang``); change it later through :attr:`mode`.
            grpc_error: the ``grpc.StatusCode`` of ``error`` mode (default ``UNAVAILABLE``, which the
                exporter retries; ``INTERNAL`` is not retried).
            http_error_status: the HTTP status of ``error`` mode (503 is retried by the exporter, 500 not).
            http_retry_after: if set, the ``Retry-After`` header sent with 503/429 (e.g. ``"0"``).
            hang_seconds: upper bound of one ``hang``; closing the receiver ends every hang at once.
            grpc_workers: threads of the gRPC server (hung requests hold one each).
            grpc_port, http_port: the ports to listen on (0, the default: any free one; OTLP's
                own 4317 / 4318 only for a test about them, as they may be taken).
        """
        self._mode: Mode = mode
        self.grpc_error: Any = grpc_error if grpc_error is not None else grpc.StatusCode.UNAVAILABLE
        self.http_error_status = int(http_error_status)
        self.http_retry_after = http_retry_after
        self.hang_seconds = hang_seconds
        self._grpc_workers = grpc_workers

        self._cond = threading.Condition()
        self._closing = threading.Event()
        self._traces: list[ReceivedRequest[TraceRequest]] = []
        self._metrics: list[ReceivedRequest[MetricsRequest]] = []
        self._logs: list[ReceivedRequest[LogsRequest]] = []
        self._attempts: list[ExportAttempt] = []
        self._span_count = 0
        self._point_count = 0
        self._log_count = 0

        self._executor: ThreadPoolExecutor | None = None
        self._grpc_server: Any = None
        self._http_server: _HttpServer | None = None
        self._http_thread: threading.Thread | None = None
        self._grpc_port = grpc_port
        self._http_port = http_port
        self._started = False
        self._closed = False

    # -- lifecycle --

    def start(self) -> Self:
        if self._started:
            raise RuntimeError("OtlpReceiver already started")
        self._started = True
        try:
            self._start_grpc()
            self._start_http()
        except BaseException:
            self.close()
            raise
        return self

    def _start_grpc(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=self._grpc_workers, thread_name_prefix="otlp-rx-grpc")
        server = grpc.server(
            self._executor,
            options=[
                ("grpc.so_reuseport", 0),
                ("grpc.max_receive_message_length", _MAX_GRPC_MESSAGE),
            ],
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceServicer(self), server)  # type: ignore[no-untyped-call]
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_MetricsServicer(self), server)  # type: ignore[no-untyped-call]
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsServicer(self), server)  # type: ignore[no-untyped-call]
        port = server.add_insecure_port(f"127.0.0.1:{self._grpc_port}")
        if not port:
            raise RuntimeError("could not bind the OTLP/gRPC receiver on 127.0.0.1")
        server.start()
        self._grpc_server = server
        self._grpc_port = int(port)

    def _start_http(self) -> None:
        server = _HttpServer(("127.0.0.1", self._http_port), _HttpHandler)
        server.receiver = self
        self._http_server = server
        self._http_port = int(server.server_address[1])
        self._http_thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="otlp-rx-http", daemon=True
        )
        self._http_thread.start()

    def close(self) -> None:
        """Stop both servers; ends any hang at once. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        with self._cond:
            self._cond.notify_all()
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=0.5).wait(_STOP_SECONDS)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self._http_server is not None:
            if self._http_thread is not None and self._http_thread.is_alive():
                self._http_server.shutdown()
            self._http_server.server_close()
        if self._http_thread is not None:
            self._http_thread.join(_STOP_SECONDS)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- endpoints --

    @property
    def grpc_endpoint(self) -> str:
        """``http://127.0.0.1:PORT``: give it to the gRPC exporters (with ``insecure=True``)."""
        self._require_started()
        return f"http://127.0.0.1:{self._grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """``http://127.0.0.1:PORT``: the base URL; the HTTP exporters want ``+ "/v1/traces"`` etc."""
        self._require_started()
        return f"http://127.0.0.1:{self._http_port}"

    @property
    def http_traces_endpoint(self) -> str:
        return self.http_endpoint + "/v1/traces"

    @property
    def http_metrics_endpoint(self) -> str:
        return self.http_endpoint + "/v1/metrics"

    @property
    def http_logs_endpoint(self) -> str:
        return self.http_endpoint + "/v1/logs"

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("OtlpReceiver not started: use `with OtlpReceiver() as rx:` or .start()")

    # -- mode --

    @property
    def mode(self) -> Mode:
        return self._mode

    @mode.setter
    def mode(self, value: Mode) -> None:
        if value not in ("ok", "error", "hang"):
            raise ValueError(f"unknown mode {value!r}")
        self._mode = value

    # -- what arrived --

    @property
    def trace_requests(self) -> list[ReceivedRequest[TraceRequest]]:
        with self._cond:
            return list(self._traces)

    @property
    def metrics_requests(self) -> list[ReceivedRequest[MetricsRequest]]:
        with self._cond:
            return list(self._metrics)

    @property
    def logs_requests(self) -> list[ReceivedRequest[LogsRequest]]:
        with self._cond:
            return list(self._logs)

    @property
    def attempts(self) -> list[ExportAttempt]:
        """Every export call received, in order, in whatever mode (retries show up here)."""
        with self._cond:
            return list(self._attempts)

    def attempt_count(self, *, protocol: Protocol | None = None, signal: Signal | None = None) -> int:
        return sum(
            1
            for a in self.attempts
            if (protocol is None or a.protocol == protocol) and (signal is None or a.signal == signal)
        )

    def spans(self, *, protocol: Protocol | None = None) -> list[SpanRecord]:
        return [s for s in flatten_spans(self.trace_requests) if protocol is None or s.protocol == protocol]

    def spans_named(self, name: str) -> list[SpanRecord]:
        return [s for s in self.spans() if s.name == name]

    def metric_points(self, name: str | None = None, *, protocol: Protocol | None = None) -> list[MetricPoint]:
        return [
            p
            for p in flatten_metrics(self.metrics_requests)
            if (name is None or p.name == name) and (protocol is None or p.protocol == protocol)
        ]

    def log_records(self, *, protocol: Protocol | None = None) -> list[LogRecordRecord]:
        return [r for r in flatten_logs(self.logs_requests) if protocol is None or r.protocol == protocol]

    def clear(self) -> None:
        """Forget everything received so far (requests and attempts)."""
        with self._cond:
            self._traces.clear()
            self._metrics.clear()
            self._logs.clear()
            self._attempts.clear()
            self._span_count = 0
            self._point_count = 0
            self._log_count = 0

    # -- waiting --

    def _wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate() or self._closing.is_set(), timeout) and predicate()

    def wait_for_spans(self, n: int, timeout: float = 5.0) -> list[SpanRecord]:
        """All spans once at least ``n`` have arrived; ``AssertionError`` after ``timeout`` seconds."""
        if not self._wait(lambda: self._span_count >= n, timeout):
            got = self.spans()
            raise AssertionError(
                f"expected at least {n} span(s) within {timeout}s, got {len(got)}: {[s.name for s in got]}"
            )
        return self.spans()

    def wait_for_log_records(self, n: int, timeout: float = 5.0) -> list[LogRecordRecord]:
        """All log records once at least ``n`` have arrived; ``AssertionError`` after ``timeout`` seconds."""
        if not self._wait(lambda: self._log_count >= n, timeout):
            got = self.log_records()
            raise AssertionError(
                f"expected at least {n} log record(s) within {timeout}s, got {len(got)}: {[r.event_name for r in got]}"
            )
        return self.log_records()

    def wait_for_metric_points(self, name: str | None = None, n: int = 1, timeout: float = 5.0) -> list[MetricPoint]:
        """Points (of metric ``name``, or any) once at least ``n`` have arrived; ``AssertionError`` on timeout."""

        def enough() -> bool:
            if name is None:
                return self._point_count >= n
            return len([p for p in flatten_metrics(self._metrics) if p.name == name]) >= n

        if not self._wait(enough, timeout):
            got = sorted({p.name for p in self.metric_points()})
            raise AssertionError(
                f"expected at least {n} point(s) of {name or 'any metric'} within {timeout}s; metrics seen: {got}"
            )
        return self.metric_points(name)

    def wait_for_attempts(
        self, n: int, timeout: float = 5.0, *, protocol: Protocol | None = None, signal: Signal | None = None
    ) -> list[ExportAttempt]:
        def matching() -> list[ExportAttempt]:
            return [
                a
                for a in self._attempts
                if (protocol is None or a.protocol == protocol) and (signal is None or a.signal == signal)
            ]

        if not self._wait(lambda: len(matching()) >= n, timeout):
            raise AssertionError(f"expected at least {n} export attempt(s) within {timeout}s, got {len(matching())}")
        with self._cond:
            return matching()

    # -- request handling (called from server threads) --

    def _note_attempt(self, protocol: Protocol, signal: Signal, headers: dict[str, str]) -> Mode:
        mode = self._mode
        with self._cond:
            self._attempts.append(ExportAttempt(protocol, signal, mode, time.monotonic(), headers))
            self._cond.notify_all()
        return mode

    def _record(self, protocol: Protocol, signal: Signal, request: Any, headers: dict[str, str]) -> None:
        with self._cond:
            if signal == "traces":
                self._traces.append(ReceivedRequest(protocol, request, headers))
                self._span_count += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
            elif signal == "logs":
                self._logs.append(ReceivedRequest(protocol, request, headers))
                self._log_count += sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
            else:
                self._metrics.append(ReceivedRequest(protocol, request, headers))
                self._point_count += len(flatten_metrics([request]))
            self._cond.notify_all()

    def _hang(self, still_wanted: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.hang_seconds
        while not self._closing.is_set() and time.monotonic() < deadline and still_wanted():
            self._closing.wait(_POLL_SECONDS)

    def _grpc_export(self, signal: Signal, request: Any, context: Any) -> None:
        headers = _grpc_headers(context)
        mode = self._note_attempt("grpc", signal, headers)
        if mode == "error":
            context.abort(self.grpc_error, f"otlp test receiver: error mode ({signal})")  # raises
            return
        if mode == "hang":
            self._hang(context.is_active)
            context.abort(grpc.StatusCode.UNAVAILABLE, "otlp test receiver: hang ended")  # raises
            return
        self._record("grpc", signal, request, headers)

    def _http_export(self, signal: Signal, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        mode = self._note_attempt("http", signal, headers)
        if mode == "error":
            return self.http_error_status, f"otlp test receiver: error mode ({signal})".encode()
        if mode == "hang":
            self._hang(lambda: True)
            return HTTPStatus.SERVICE_UNAVAILABLE, b"otlp test receiver: hang ended"
        request: TraceRequest | MetricsRequest | LogsRequest
        kinds: dict[Signal, tuple[Any, Any]] = {
            "traces": (TraceRequest, trace_service_pb2.ExportTraceServiceResponse),
            "metrics": (MetricsRequest, metrics_service_pb2.ExportMetricsServiceResponse),
            "logs": (LogsRequest, logs_service_pb2.ExportLogsServiceResponse),
        }
        request_type, response_type = kinds[signal]
        try:
            request = request_type.FromString(body)
        except Exception:  # google.protobuf.message.DecodeError (protobuf ships no type stubs here)
            return HTTPStatus.BAD_REQUEST, b"body is not a valid OTLP protobuf request"
        self._record("http", signal, request, headers)
        return HTTPStatus.OK, response_type().SerializeToString()
