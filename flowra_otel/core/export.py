"""One call to get traces and metrics out of the process, configured the standard OTel way.

Why this exists: the plugin only needs *a* tracer and meter provider, but a quickstart should
not make people learn ten SDK classes first. `configure_telemetry` reads the standard
environment variables, so the same program prints a tree on a laptop and ships OTLP in
production without code changes:

* ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` -> the `Resource` (via ``Resource.create``).
* ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT`` -> OTLP export
  of that signal: ``BatchSpanProcessor`` for spans, ``PeriodicExportingMetricReader`` for metrics.
* ``OTEL_EXPORTER_OTLP_PROTOCOL`` or ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL`` -> ``grpc`` or
  ``http/protobuf`` (the default, as the OTel specification says), for a signal that has an
  endpoint. Anything else is then a ``ValueError``: a typo must not silently send nothing (with no
  endpoint nothing is sent by OTLP, and the variable is not read).
* ``FLOWRA_OTEL_TRACES_FILE`` (or ``traces_file=``) -> every span also appended to that file as
  OTLP JSON lines, the Collector file exporter's format, which ``flowra-otel audit`` reads
  (`OtlpJsonFileSpanExporter`, through a ``BatchSpanProcessor``).
* No trace endpoint and no traces file -> the `ConsoleTreeExporter` through a
  ``SimpleSpanProcessor``, so the demo prints each trace the moment it ends. No metric endpoint
  -> no metric reader: the instruments still work (and cost next to nothing), but nothing is
  collected or printed. An in-memory
  reader was considered and rejected: nobody would read it, and its cumulative storage grows
  with attribute cardinality for the life of the process.
* Metrics are exported only when asked for, because many trace backends (Jaeger, Tempo, Phoenix)
  take no metrics and refuse every metric export (HTTP 405, gRPC UNIMPLEMENTED), which logs an
  error per batch: ``OTEL_METRICS_EXPORTER`` (``otlp``, ``console``, ``none``; unset means
  ``otlp`` when an endpoint for metrics is set), a trace-only endpoint
  (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` alone) means no metric exporter, and
  ``configure_telemetry(metrics=False)`` turns metric export off in code.
* A metrics endpoint that refuses metrics for good (HTTP 404, 405 or 501; gRPC UNIMPLEMENTED:
  what a traces-only backend such as Phoenix or MLflow answers when only the base
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set) gets ONE warning naming the fix
  (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_METRICS_EXPORTER=none``) in place of the
  exporter's error, and metric export stops until the process exits (`_MetricsRefusalGuard`),
  instead of one logged error per export interval. Other failures (a collector down, 503,
  UNAVAILABLE) are the exporter's to retry and report, as before.
  That warning says traces are unaffected only once a trace export of the same configuration
  has succeeded (`_TraceDelivery`): a base endpoint that refuses metrics may refuse traces too.
* Endpoint variables that cannot work as written (a traces URL without ``/v1/traces``, a base URL
  ending in it, HTTP to port 4317 or gRPC to 4318, no scheme) get one warning each, naming the
  variable, its value and the fix, before the first export (``endpoint_check``): those of every
  signal about to go over OTLP, the content events' logs included.

* Logs, only for the content events (``gen_ai.client.inference.operation.details``):
  ``configure_telemetry(logs=True)``, or by default when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
  asks for events (``EVENT_ONLY``, ``SPAN_AND_EVENT``) or ``OTEL_LOGS_EXPORTER`` is set: a logger
  provider (installed globally like the others) with OTLP (``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` or
  the base endpoint) or the console (see ``export_logs``).

Shutdown and flush are bounded in time even when the backend is down or never answers: the OTLP
exporters retry with backoff for up to ``OTEL_EXPORTER_OTLP_TIMEOUT`` (10 s) per batch and the
SDK's batch processor ignores the flush timeout it is given, so `TelemetryHandles` runs the SDK's
flush and shutdown on a helper thread, waits at most ``timeout_millis`` (2 s by default, also at
process exit), and then stops its exporters' retries. Data not delivered by then is dropped: a
program's exit must not wait on an unreachable collector.

Everything else (headers, timeouts, TLS, compression, batch sizes, export interval, temporality,
``OTEL_SDK_DISABLED``) is read by the OpenTelemetry exporters and processors themselves, which
also resolve endpoints exactly as the specification says (a base ``OTEL_EXPORTER_OTLP_ENDPOINT``
gets ``/v1/traces`` appended for HTTP; a signal-specific one is used as is). This module only
decides *which* classes to build, so it cannot disagree with them.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO

from opentelemetry import metrics, trace
from opentelemetry.environment_variables import OTEL_METRICS_EXPORTER
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult

from .console import ConsoleTreeExporter
from .endpoint_check import Signal, endpoint_problems
from .otlp_json_file import FLOWRA_OTEL_TRACES_FILE, OtlpJsonFileSpanExporter

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
    from opentelemetry.sdk._logs.export import LogRecordExporter

    from .export_logs import LogsSetup

__all__ = [
    "DEFAULT_TIMEOUT_MILLIS",
    "OtlpProtocol",
    "TelemetryHandles",
    "configure_telemetry",
    "resolve_metrics_exporters",
    "resolve_otlp_protocol",
]

_logger = logging.getLogger("flowra_otel.export")

OtlpProtocol = Literal["grpc", "http/protobuf"]
_PROTOCOLS: Final[tuple[OtlpProtocol, ...]] = ("grpc", "http/protobuf")
_DEFAULT_PROTOCOL: Final[OtlpProtocol] = "http/protobuf"


DEFAULT_TIMEOUT_MILLIS: Final = 2_000
"""Default budget of `TelemetryHandles.force_flush` and `TelemetryHandles.shutdown`, and of the
shutdown at process exit. A healthy collector takes milliseconds for a batch; a dead one would
otherwise hold the program for the exporters' retries (about 7 s per signal and batch)."""

MetricsExporterName = Literal["otlp", "console"]
_METRICS_EXPORTERS: Final[tuple[MetricsExporterName, ...]] = ("otlp", "console")


class _Outcome:
    """The result of a job on a `_DeadlineRunner`, once it has finished."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._ok = False

    def set(self, ok: bool) -> None:
        self._ok = ok
        self._done.set()

    def wait(self, timeout_s: float) -> bool:
        """``True`` if the job finished within ``timeout_s`` and succeeded."""
        return self._done.wait(max(0.0, timeout_s)) and self._ok


class _TraceDelivery:
    """Whether an OTLP trace export of this configuration has succeeded yet: the metrics refusal
    warning may say traces are unaffected only then (a base endpoint that refuses metrics may be
    refusing traces too: ``OTEL_EXPORTER_OTLP_ENDPOINT=.../v1/traces`` gets a 404 for both)."""

    def __init__(self) -> None:
        self.succeeded = False


class _StopOnceSpanExporter(SpanExporter):
    """Sits between a batch processor and an OTLP span exporter so that `TelemetryHandles` can
    stop the exporter's retries when a shutdown runs out of time, and the processor's own
    ``shutdown`` of it later is not a second one (which the exporters log a warning about).
    It also notes a successful export in ``delivery``."""

    def __init__(self, exporter: SpanExporter, delivery: _TraceDelivery | None = None) -> None:
        self._exporter = exporter
        self._lock = threading.Lock()
        self._stopped = False
        self._delivery = delivery

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._exporter.export(spans)
        if result is SpanExportResult.SUCCESS and self._delivery is not None:
            self._delivery.succeeded = True
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._exporter.shutdown()


REFUSING_HTTP_STATUSES: Final = frozenset({404, 405, 501})
"""HTTP answers to ``POST .../v1/metrics`` that mean "no metrics here, ever" (MLflow: 404,
Phoenix: 405), as opposed to a collector that is down or busy (503, 429: retried)."""
REFUSING_GRPC_STATUS: Final = "UNIMPLEMENTED"
"""The gRPC status of a server without the OTLP MetricsService (Phoenix, Jaeger, Tempo)."""


def _refusal_in(record: logging.LogRecord) -> str | None:
    """``"HTTP 405"`` / ``"gRPC UNIMPLEMENTED"`` when ``record`` is an OTLP exporter's error about
    a refusing status, else None. The exporters log the status as an argument of the record (an
    ``int`` for HTTP, a ``grpc.StatusCode`` for gRPC), in every SDK release this package supports."""
    if record.levelno < logging.ERROR:
        return None
    args = record.args if isinstance(record.args, tuple) else ()
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and arg in REFUSING_HTTP_STATUSES:
            return f"HTTP {arg}"
        if type(arg).__name__ == "StatusCode" and getattr(arg, "name", None) == REFUSING_GRPC_STATUS:
            return f"gRPC {REFUSING_GRPC_STATUS}"
    return None


class _RefusalFilter(logging.Filter):
    """On the OTLP exporters' loggers: while a `_MetricsRefusalGuard` exports on this thread,
    an error record about a refusing status is noted for the guard and not emitted (the guard's
    own warning replaces it). Every other record, and every record of other threads, passes."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    @contextlib.contextmanager
    def watching(self) -> Iterator[list[str]]:
        seen: list[str] = []
        previous = getattr(self._local, "seen", None)
        self._local.seen = seen
        try:
            yield seen
        finally:
            self._local.seen = previous

    def filter(self, record: logging.LogRecord) -> bool:
        seen: list[str] | None = getattr(self._local, "seen", None)
        if seen is None:
            return True
        refusal = _refusal_in(record)
        if refusal is None:
            return True
        seen.append(refusal)
        return False


_REFUSAL_FILTER: Final = _RefusalFilter()
_filter_lock = threading.Lock()


def _watch_exporter_loggers(exporter: MetricExporter) -> None:
    """Put `_REFUSAL_FILTER` (once) on the loggers of the modules that define ``exporter``'s
    class and its OTLP bases: where the HTTP and gRPC metric exporters log their errors."""
    names = {cls.__module__ for cls in type(exporter).__mro__ if cls.__module__.startswith("opentelemetry.exporter.")}
    with _filter_lock:
        for name in sorted(names):
            exporter_logger = logging.getLogger(name)
            if _REFUSAL_FILTER not in exporter_logger.filters:
                # First: the gRPC exporter's logger has the SDK's DuplicateFilter, which drops a
                # record repeating the previous one's format (a trace export's error, say).
                exporter_logger.filters.insert(0, _REFUSAL_FILTER)


class _MetricsRefusalGuard(MetricExporter):
    """Sits between the periodic reader and an OTLP metric exporter: once the endpoint refuses
    metrics for good (`REFUSING_HTTP_STATUSES`, gRPC UNIMPLEMENTED), it warns once, naming the
    fix, and exports nothing more; the reader goes on collecting (cheaply) and nothing else
    changes. Any other outcome is the exporter's, untouched.

    The warning says traces are unaffected only when ``traces`` (the OTLP trace export of the
    same configuration, if any) has delivered something by then; otherwise it says the traces
    have not got through either, so nobody is told to look away from the real problem."""

    def __init__(self, exporter: MetricExporter, traces: _TraceDelivery | None = None) -> None:
        super().__init__(
            preferred_temporality=getattr(exporter, "_preferred_temporality", None),
            preferred_aggregation=getattr(exporter, "_preferred_aggregation", None),
        )
        self._exporter = exporter
        self._refused: str | None = None
        self._traces = traces
        _watch_exporter_loggers(exporter)

    @property
    def exporter(self) -> MetricExporter:
        return self._exporter

    @property
    def refused(self) -> str | None:
        """``"HTTP 405"`` and the like once the endpoint refused metrics; None before."""
        return self._refused

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        if self._refused is not None:
            return MetricExportResult.FAILURE  # dropped: the endpoint takes no metrics
        with _REFUSAL_FILTER.watching() as seen:
            result = self._exporter.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        if seen and result is not MetricExportResult.SUCCESS:
            self._refused = seen[0]
            _logger.warning(
                "the OTLP endpoint %s refused metrics (%s): it takes traces only (Jaeger, Tempo, Phoenix, "
                "MLflow and Langfuse do), or it is not the right URL. Metric export is off until the process "
                "exits; %s. To silence this, give the traces endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) "
                "instead of OTEL_EXPORTER_OTLP_ENDPOINT, or set OTEL_METRICS_EXPORTER=none; to keep the "
                "metrics, send them to an OpenTelemetry Collector (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)",
                getattr(self._exporter, "_endpoint", "?"),
                self._refused,
                self._traces_note(),
            )
        return result

    def _traces_note(self) -> str:
        if self._traces is None:
            return "spans are not exported over OTLP by this configuration"
        if self._traces.succeeded:
            return "traces are unaffected (a trace export to the same backend succeeded)"
        return (
            "no trace export has succeeded yet either, so check the endpoint for traces too "
            "(the exporter's errors, and any endpoint warning at start-up, say why)"
        )

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._exporter.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._exporter.shutdown(timeout_millis=timeout_millis, **kwargs)


class _DeadlineRunner:
    """Runs flush/shutdown work on one daemon thread so the caller can stop waiting for it.

    The thread is started when the handles are made, not when a shutdown is asked for: Python
    3.12 refuses to start threads in `atexit` handlers, which is exactly where the shutdown of
    most programs runs. After a fork the thread is gone; a new one is started on first use.
    A job that overruns its caller's deadline keeps the thread; later jobs queue behind it.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = -1
        self._ensure_thread()

    def _ensure_thread(self) -> bool:
        if self._thread is not None and self._pid == os.getpid() and self._thread.is_alive():
            return True
        thread = threading.Thread(target=self._loop, name="flowra-otel-telemetry-shutdown", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # interpreter shutting down (and the thread lost to a fork)
            return False
        self._thread, self._pid = thread, os.getpid()
        return True

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def submit(self, work: Callable[[], bool]) -> _Outcome:
        """Queue ``work`` (exceptions are logged as a failure); wait on the returned outcome."""
        outcome = _Outcome()

        def job() -> None:
            ok = False
            try:
                ok = work()
            except Exception:  # the SDK raises a bare Exception when a metric reader fails
                _logger.warning("flushing or shutting down the telemetry providers failed", exc_info=True)
            finally:
                outcome.set(ok)

        if self._ensure_thread():
            self._jobs.put(job)
        else:
            job()  # no thread to be had: unbounded, but better than dropping everything
        return outcome

    def stop(self) -> None:
        """Let the thread end once it has run what is queued (it may still be stuck in an export)."""
        self._jobs.put(None)


class TelemetryHandles:
    """What `configure_telemetry` built, and the two calls a program needs at the end.

    ``shutdown()`` is registered with `atexit` (once, and unregistered when called by hand),
    because a ``BatchSpanProcessor`` that is not shut down loses its last batch, which is
    usually the trace of the run that just finished.

    Both calls honour their ``timeout_millis``, also with the backend down or never answering
    (see the module documentation): they return ``False`` when it ran out and what was not sent
    by then is dropped.

    Providers that were already installed globally by someone else (``opentelemetry-instrument``)
    are reused but not owned: ``shutdown()`` only flushes them and leaves shutting them down
    to their owner.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        span_processors: Sequence[SpanProcessor] = (),
        span_exporters: Sequence[SpanExporter] = (),
        metric_readers: Sequence[MetricReader] = (),
        metric_exporters: Sequence[MetricExporter] = (),
        owns_tracer_provider: bool = True,
        owns_meter_provider: bool = True,
        exit_timeout_millis: int = DEFAULT_TIMEOUT_MILLIS,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._span_processors = tuple(span_processors)
        self._span_exporters = tuple(span_exporters)
        self._metric_readers = tuple(metric_readers)
        self._metric_exporters = tuple(metric_exporters)
        self._owns_tracer_provider = owns_tracer_provider
        self._owns_meter_provider = owns_meter_provider
        self._exit_timeout_millis = _check_timeout("exit_timeout_millis", exit_timeout_millis)
        self._lock = threading.Lock()
        self._shut_down = False
        self._atexit_registered = False
        self._runners = (_DeadlineRunner(), _DeadlineRunner())  # spans, metrics
        self._stoppable: tuple[SpanExporter, ...] = ()
        """The span exporters (behind `_StopOnceSpanExporter`) to stop when shutdown overruns."""
        self._logs: LogsSetup | None = None
        """The logger provider of the content events, when logs were asked for."""

    @property
    def tracer_provider(self) -> TracerProvider:
        return self._tracer_provider

    @property
    def meter_provider(self) -> MeterProvider:
        return self._meter_provider

    @property
    def logger_provider(self) -> SdkLoggerProvider | None:
        """The logger provider for the content events (``OtelHooks(logger_provider=...)``), or
        None when no logs were asked for."""
        return self._logs.provider if self._logs is not None else None

    @property
    def resource(self) -> Resource:
        """The tracer provider's resource (a meter provider built by the same call has the same)."""
        return self._tracer_provider.resource

    @property
    def span_processors(self) -> tuple[SpanProcessor, ...]:
        """The span processors this call added (empty when an existing provider was reused)."""
        return self._span_processors

    @property
    def span_exporters(self) -> tuple[SpanExporter, ...]:
        """The span exporters behind `span_processors`, in the same order."""
        return self._span_exporters

    @property
    def metric_readers(self) -> tuple[MetricReader, ...]:
        return self._metric_readers

    @property
    def metric_exporters(self) -> tuple[MetricExporter, ...]:
        """The push exporters behind `metric_readers` (an explicit pull reader has none)."""
        return self._metric_exporters

    def force_flush(self, timeout_millis: int = DEFAULT_TIMEOUT_MILLIS) -> bool:
        """Export everything buffered now; ``False`` if that did not finish within
        ``timeout_millis`` (the export then goes on in the background) or a metric reader raised.

        ``True`` does not mean the backend accepted the data: the SDK's processors and readers
        report only whether the export calls finished in time, and the exporters log a refused
        or failed delivery (after their retries) instead of reporting it here.

        Worth calling before a short-lived program (a CLI, a serverless handler) returns, as
        the batch processor otherwise waits up to ``OTEL_BSP_SCHEDULE_DELAY`` to send.
        """
        timeout_millis = _check_timeout("timeout_millis", timeout_millis)
        if self._shut_down:
            return False  # as the SDK's processors answer after shutdown
        logs = self._logs
        spans_ok, metrics_ok = self._run_both(
            # The content events (logs) share the spans' side: both are the traces' content.
            lambda: self._tracer_provider.force_flush(timeout_millis) and (logs is None or logs.flush(timeout_millis)),
            lambda: self._meter_provider.force_flush(timeout_millis),
            timeout_millis,
        )
        return spans_ok and metrics_ok

    def shutdown(self, timeout_millis: int = DEFAULT_TIMEOUT_MILLIS) -> bool:
        """Flush and stop both providers within ``timeout_millis``; ``False`` if that ran out
        (or a provider raised). Idempotent (later calls return ``True`` at once); errors are
        logged, never raised.

        When the time runs out, the span exporters built by `configure_telemetry` are shut
        down, which ends their retries, and what they had not delivered is dropped with a
        warning. (The SDK's metric reader bounds its own shutdown by the same timeout.) Never
        raising matters because this runs from `atexit`, where an exception would only add a
        traceback to the end of the user's program output.
        """
        timeout_millis = _check_timeout("timeout_millis", timeout_millis)
        with self._lock:
            if self._shut_down:
                return True
            self._shut_down = True
            if self._atexit_registered:
                atexit.unregister(self._shutdown_at_exit)
                self._atexit_registered = False

        logs = self._logs

        def stop_spans() -> bool:
            if self._owns_tracer_provider:
                self._tracer_provider.shutdown()  # the SDK's batch processor bounds this by nothing
                ok = True
            else:
                ok = self._tracer_provider.force_flush(timeout_millis)
            return (logs is None or logs.shutdown(timeout_millis)) and ok

        def stop_metrics() -> bool:
            if self._owns_meter_provider:
                self._meter_provider.shutdown(timeout_millis)
                return True
            return self._meter_provider.force_flush(timeout_millis)

        spans_ok, metrics_ok = self._run_both(stop_spans, stop_metrics, timeout_millis)
        for runner in self._runners:
            runner.stop()
        if not (spans_ok and metrics_ok):
            _logger.warning(
                "telemetry shutdown did not finish within %d ms (is the OTLP endpoint reachable?); "
                "spans and metrics not delivered by then are dropped",
                timeout_millis,
            )
            for exporter in self._stoppable:
                exporter.shutdown()
            if logs is not None:
                logs.stop()
        return spans_ok and metrics_ok

    def _run_both(
        self, spans: Callable[[], bool], metrics: Callable[[], bool], timeout_millis: int
    ) -> tuple[bool, bool]:
        """Run the span and the metric side in parallel, each on its own runner, and wait for
        both until one deadline. ``(spans_ok, metrics_ok)``: finished in time and reported success."""
        deadline = time.monotonic() + timeout_millis / 1000
        traces_runner, metrics_runner = self._runners
        spans_done = traces_runner.submit(spans)
        metrics_done = metrics_runner.submit(metrics)
        return (
            spans_done.wait(deadline - time.monotonic()),
            metrics_done.wait(deadline - time.monotonic()),
        )

    def _shutdown_at_exit(self) -> None:
        self.shutdown(self._exit_timeout_millis)

    def _register_atexit(self) -> None:
        with self._lock:
            if not self._atexit_registered and not self._shut_down:
                atexit.register(self._shutdown_at_exit)
                self._atexit_registered = True


def _check_timeout(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int of milliseconds, got {value!r}")
    return value


_global_lock = threading.Lock()
_global_handles: TelemetryHandles | None = None
"""The handles of the one ``set_global=True`` configuration of this process."""


def configure_telemetry(
    *,
    service_name: str | None = None,
    console: bool | None = None,
    console_stream: TextIO | None = None,
    span_exporter: SpanExporter | None = None,
    traces_file: str | os.PathLike[str] | None = None,
    metric_reader: MetricReader | None = None,
    metrics: bool = True,
    logs: bool | None = None,
    log_exporter: LogRecordExporter | None = None,
    set_global: bool = True,
    register_atexit: bool = True,
    exit_timeout_millis: int = DEFAULT_TIMEOUT_MILLIS,
) -> TelemetryHandles:
    """Build a tracer and a meter provider (and a logger provider for content events, when asked
    for) from the standard ``OTEL_*`` environment.

    Args:
        service_name: Used as ``service.name`` only when neither ``OTEL_SERVICE_NAME`` nor
            ``OTEL_RESOURCE_ATTRIBUTES`` sets one. Deliberately a default and not an override:
            the name written in a demo's code must not stop an operator renaming the service
            from the environment.
        console: ``None`` prints traces as a tree when spans have nowhere else to go (no trace
            endpoint, no traces file and no ``span_exporter``); ``True`` always adds the tree
            printer (next to OTLP, say); ``False`` never does.
        console_stream: Stream for the tree printer (and the console log exporter); default ``sys.stdout``.
        span_exporter: Replaces the environment's choice of span exporter (tests pass an
            ``InMemorySpanExporter``). It is wired through a ``SimpleSpanProcessor``, so spans
            are there as soon as they end.
        traces_file: Also append every span to this file as OTLP JSON lines (one
            ``ExportTraceServiceRequest`` per line, as the Collector's file exporter writes them),
            the input of ``flowra-otel audit``, whatever else is configured. ``None`` (the default)
            reads ``FLOWRA_OTEL_TRACES_FILE``; unset or empty there means no file.
        metric_reader: Replaces the environment's choice of metric reader (tests pass an
            ``InMemoryMetricReader``).
        metrics: ``False`` exports no metrics whatever the environment says (the instruments
            still work, and cost next to nothing). ``True`` leaves the choice to the
            environment: ``OTEL_METRICS_EXPORTER`` (``otlp``, ``console``, ``none``, or a
            comma-separated list), and when that is unset, OTLP only if
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` is set,
            so a trace-only endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) means no metrics.
        logs: ``True`` builds a logger provider for the content events
            (``gen_ai.client.inference.operation.details``; ``handles.logger_provider``);
            ``False`` never; ``None`` (the default) when the environment asks for events
            (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY`` / ``SPAN_AND_EVENT``)
            or sets ``OTEL_LOGS_EXPORTER``. Its exporter: ``OTEL_LOGS_EXPORTER`` (``otlp``,
            ``console``, ``none``), else OTLP when ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` or
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else the console.
        log_exporter: Replaces the environment's choice of log exporter (and asks for logs),
            through a ``SimpleLogRecordProcessor``.
        set_global: Install the providers as the process-wide OpenTelemetry providers. The
            OTel API allows that once per process, so with ``True`` the first call configures
            and every later one returns the same handles (its arguments are ignored, and a
            debug message says so). If another party installed SDK providers first (e.g.
            ``opentelemetry-instrument``), they are reused and nothing is added to them. Pass
            ``False`` for independent providers, as tests do.
        register_atexit: Call `TelemetryHandles.shutdown` at interpreter exit.
        exit_timeout_millis: The most that shutdown at interpreter exit may take. With the
            backend down, what is not delivered by then is dropped.

    Raises:
        ValueError: An ``OTEL_EXPORTER_OTLP_*PROTOCOL`` variable that a configured endpoint
            would use holds something other than ``grpc`` or ``http/protobuf``; an
            ``OTEL_METRICS_EXPORTER`` value other than ``otlp``, ``console`` or ``none``;
            ``metrics=False`` together with a ``metric_reader``; a negative timeout; a traces
            file that cannot be opened for appending.
    """
    if not isinstance(metrics, bool):
        raise ValueError(f"metrics must be True or False, got {metrics!r}")
    if not metrics and metric_reader is not None:
        raise ValueError("metrics=False and a metric_reader contradict each other: pass one or the other")
    _check_timeout("exit_timeout_millis", exit_timeout_millis)
    global _global_handles  # noqa: PLW0603 -- the OTel globals are process-wide; so is this

    def build(install_global: bool) -> TelemetryHandles:
        handles = _build(
            service_name=service_name,
            console=console,
            console_stream=console_stream,
            span_exporter=span_exporter,
            traces_file=traces_file,
            metric_reader=metric_reader,
            export_metrics=metrics,
            logs=logs,
            log_exporter=log_exporter,
            install_global=install_global,
            exit_timeout_millis=exit_timeout_millis,
        )
        if register_atexit:
            handles._register_atexit()
        return handles

    if not set_global:
        return build(install_global=False)

    with _global_lock:
        if _global_handles is not None:
            _logger.debug(
                "configure_telemetry(set_global=True) already ran in this process; "
                "returning the existing handles and ignoring the new arguments"
            )
            return _global_handles
        _global_handles = build(install_global=True)
        return _global_handles


def resolve_otlp_protocol(signal: Literal["traces", "metrics"]) -> OtlpProtocol:
    """The OTLP protocol for ``signal``: the signal's variable, else the general one, else
    ``http/protobuf``. Empty values count as unset, as the specification says.

    Raises:
        ValueError: The value is not ``grpc`` or ``http/protobuf``. (``http/json`` is a valid
            OTLP protocol, but the Python exporters do not implement it.)
    """
    specific = OTEL_EXPORTER_OTLP_TRACES_PROTOCOL if signal == "traces" else OTEL_EXPORTER_OTLP_METRICS_PROTOCOL
    for name in (specific, OTEL_EXPORTER_OTLP_PROTOCOL):
        raw = os.environ.get(name, "").strip()
        if not raw:
            continue
        value = raw.lower()
        for protocol in _PROTOCOLS:
            if value == protocol:
                return protocol
        hint = " (the Python OTLP exporters do not implement http/json)" if value == "http/json" else ""
        raise ValueError(f"{name}={raw!r} is not a supported OTLP protocol: use 'grpc' or 'http/protobuf'{hint}")
    return _DEFAULT_PROTOCOL


def resolve_metrics_exporters() -> tuple[MetricsExporterName, ...]:
    """The metric exporters the environment asks for: ``OTEL_METRICS_EXPORTER`` when set
    (``none`` -> none), else ``("otlp",)`` if a metrics or generic OTLP endpoint is set, else none.

    The unset case deliberately differs from the SDK's default (``otlp`` to localhost): a program
    given only a trace endpoint is talking to a trace backend, and most of those refuse metrics.

    Raises:
        ValueError: A value other than ``otlp``, ``console`` or ``none`` (``prometheus`` needs a
            pull reader: pass ``metric_reader=PrometheusMetricReader()``).
    """
    raw = os.environ.get(OTEL_METRICS_EXPORTER, "").strip()
    if not raw:
        return ("otlp",) if _endpoint_set("metrics") else ()
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    if names == ["none"]:
        return ()
    kinds: list[MetricsExporterName] = []
    for name in names:
        kind = next((k for k in _METRICS_EXPORTERS if k == name), None)
        if kind is None:
            hint = ": pass metric_reader=PrometheusMetricReader() instead" if name == "prometheus" else ""
            raise ValueError(
                f"{OTEL_METRICS_EXPORTER}={raw!r}: configure_telemetry supports 'otlp', 'console' or 'none'{hint}"
            )
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


# --- building ---------------------------------------------------------------------------------


def _build(
    *,
    service_name: str | None,
    console: bool | None,
    console_stream: TextIO | None,
    span_exporter: SpanExporter | None,
    traces_file: str | os.PathLike[str] | None,
    metric_reader: MetricReader | None,
    export_metrics: bool,
    install_global: bool,
    exit_timeout_millis: int,
    logs: bool | None = None,
    log_exporter: LogRecordExporter | None = None,
) -> TelemetryHandles:
    existing_tp: TracerProvider | None = None
    existing_mp: MeterProvider | None = None
    if install_global:
        current_tp = trace.get_tracer_provider()
        existing_tp = current_tp if isinstance(current_tp, TracerProvider) else None
        current_mp = metrics.get_meter_provider()
        existing_mp = current_mp if isinstance(current_mp, MeterProvider) else None

    # Decide and validate everything before starting any exporter thread.
    trace_otlp: OtlpProtocol | None = None
    if existing_tp is None and span_exporter is None and _endpoint_set("traces"):
        trace_otlp = resolve_otlp_protocol("traces")
    metric_kinds: tuple[MetricsExporterName, ...] = ()
    if existing_mp is None and metric_reader is None and export_metrics:
        metric_kinds = resolve_metrics_exporters()
    metric_otlp = resolve_otlp_protocol("metrics") if "otlp" in metric_kinds else None
    _warn_about_endpoints(trace_otlp, metric_otlp, _logs_otlp(logs, log_exporter))
    resource = _resource(service_name)
    if traces_file is None:
        traces_file = os.environ.get(FLOWRA_OTEL_TRACES_FILE, "").strip() or None
    file_exporter = OtlpJsonFileSpanExporter(traces_file) if existing_tp is None and traces_file else None

    processors: list[SpanProcessor] = []
    exporters: list[SpanExporter] = []
    stoppable: list[SpanExporter] = []
    delivery = _TraceDelivery() if trace_otlp is not None else None
    if existing_tp is None:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        _add_span_exporters(
            tracer_provider,
            processors,
            exporters,
            stoppable,
            span_exporter,
            trace_otlp,
            file_exporter,
            console,
            console_stream,
            delivery,
        )
    else:
        tracer_provider = existing_tp

    # The batch processor's thread is running now; do not leak it if the metric side fails
    # (a bad OTEL_METRIC_EXPORT_* value, unreadable TLS files, ...).
    readers: list[MetricReader] = []
    metric_exporters: list[MetricExporter] = []
    try:
        if existing_mp is None:
            if metric_reader is not None:
                readers.append(metric_reader)
            metric_exporters.extend(_metric_exporters(metric_kinds, metric_otlp))
            # The OTLP exporter (the first, when asked for) behind the refusal guard.
            readers.extend(
                PeriodicExportingMetricReader(
                    _MetricsRefusalGuard(exporter, delivery) if metric_otlp is not None and index == 0 else exporter
                )
                for index, exporter in enumerate(metric_exporters)
            )
            meter_provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
        else:
            meter_provider = existing_mp
        logs_setup = _prepare_logs(logs, log_exporter, resource, install_global, console_stream)
    except BaseException:
        if existing_tp is None:
            tracer_provider.shutdown()
        raise

    if install_global:
        _install_global(
            tracer_provider, meter_provider, reused_tp=existing_tp is not None, reused_mp=existing_mp is not None
        )
    handles = TelemetryHandles(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        span_processors=processors,
        span_exporters=exporters,
        metric_readers=readers,
        metric_exporters=metric_exporters,
        owns_tracer_provider=existing_tp is None,
        owns_meter_provider=existing_mp is None,
        exit_timeout_millis=exit_timeout_millis,
    )
    handles._stoppable = tuple(stoppable)
    handles._logs = logs_setup
    return handles


def _prepare_logs(
    logs: bool | None,
    log_exporter: LogRecordExporter | None,
    resource: Resource,
    install_global: bool,
    console_stream: TextIO | None,
) -> LogsSetup | None:
    """``export_logs.prepare_logs``, imported only when logs may be wanted (the SDK's logs
    classes are still experimental and renamed between releases)."""
    if logs is False and log_exporter is None:
        return None
    from .export_logs import prepare_logs

    return prepare_logs(logs, log_exporter, resource, install_global=install_global, console_stream=console_stream)


def _add_span_exporters(
    tracer_provider: TracerProvider,
    processors: list[SpanProcessor],
    exporters: list[SpanExporter],
    stoppable: list[SpanExporter],
    span_exporter: SpanExporter | None,
    trace_otlp: OtlpProtocol | None,
    file_exporter: OtlpJsonFileSpanExporter | None,
    console: bool | None,
    console_stream: TextIO | None,
    delivery: _TraceDelivery | None,
) -> None:
    if span_exporter is not None:
        exporters.append(span_exporter)
        processors.append(SimpleSpanProcessor(span_exporter))
    elif trace_otlp is not None:
        exporters.append(_otlp_span_exporter(trace_otlp))
        stoppable.append(_StopOnceSpanExporter(exporters[0], delivery))
        processors.append(BatchSpanProcessor(stoppable[0]))
    if file_exporter is not None:
        exporters.append(file_exporter)
        processors.append(BatchSpanProcessor(file_exporter))
    if console or (console is None and not exporters):
        exporters.append(ConsoleTreeExporter(console_stream))
        processors.append(SimpleSpanProcessor(exporters[-1]))
    for processor in processors:
        tracer_provider.add_span_processor(processor)


def _metric_exporters(
    kinds: tuple[MetricsExporterName, ...], otlp_protocol: OtlpProtocol | None
) -> list[MetricExporter]:
    exporters: list[MetricExporter] = []
    if otlp_protocol is not None:
        exporters.append(_otlp_metric_exporter(otlp_protocol))
    if "console" in kinds:
        exporters.append(ConsoleMetricExporter())
    return exporters


def _install_global(
    tracer_provider: TracerProvider, meter_provider: MeterProvider, *, reused_tp: bool, reused_mp: bool
) -> None:
    if reused_tp:
        _logger.info(
            "a global OpenTelemetry TracerProvider is already installed (opentelemetry-instrument?); "
            "using it as is, without adding exporters"
        )
    else:
        trace.set_tracer_provider(tracer_provider)
    if reused_mp:
        _logger.info("a global OpenTelemetry MeterProvider is already installed; using it as is")
    else:
        metrics.set_meter_provider(meter_provider)
    if trace.get_tracer_provider() is not tracer_provider or metrics.get_meter_provider() is not meter_provider:
        _logger.warning(
            "could not install the OpenTelemetry providers globally (a non-SDK provider was set first); "
            "pass handles.tracer_provider / handles.meter_provider to the code that needs them"
        )


def _logs_otlp(logs: bool | None, log_exporter: LogRecordExporter | None) -> OtlpProtocol | None:
    """The OTLP protocol of the content events' log exporter this call would build, or None
    (``export_logs`` is imported only when logs may be wanted, as in `_prepare_logs`)."""
    if logs is False or log_exporter is not None:
        return None
    from .export_logs import otlp_logs_protocol

    return otlp_logs_protocol(logs, log_exporter)


def _warn_about_endpoints(
    traces: OtlpProtocol | None, metrics: OtlpProtocol | None, logs: OtlpProtocol | None = None
) -> None:
    """One warning per endpoint mistake of the signals about to be exported over OTLP
    (`endpoint_check`): before any export, so it comes ahead of the exporters' raw errors."""
    chosen: tuple[tuple[Signal, OtlpProtocol | None], ...] = (("traces", traces), ("metrics", metrics), ("logs", logs))
    protocols = {signal: protocol for signal, protocol in chosen if protocol is not None}
    for problem in endpoint_problems(protocols, os.environ):
        _logger.warning("%s", problem)


def _endpoint_set(signal: Literal["traces", "metrics"]) -> bool:
    specific = OTEL_EXPORTER_OTLP_TRACES_ENDPOINT if signal == "traces" else OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
    return any(os.environ.get(name, "").strip() for name in (specific, OTEL_EXPORTER_OTLP_ENDPOINT))


def _resource(service_name: str | None) -> Resource:
    attributes: dict[str, str] = {}
    if service_name is not None and SERVICE_NAME not in OTELResourceDetector().detect().attributes:
        attributes[SERVICE_NAME] = service_name
    return Resource.create(attributes)


def _otlp_span_exporter(protocol: OtlpProtocol) -> SpanExporter:
    # Imported here: each transport pulls in its own stack (grpcio or requests), and a process
    # should load only the one it uses. Both read endpoint, headers, TLS, ... from the env.
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

        return GrpcSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    return HttpSpanExporter()


def _otlp_metric_exporter(protocol: OtlpProtocol) -> MetricExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter

        return GrpcMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter

    return HttpMetricExporter()
