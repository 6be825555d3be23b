"""One call to get traces and metrics out of the process, configured the standard OTel way.

Why this exists: the plugin only needs *a* tracer and meter provider, but a quickstart should
not make people learn ten SDK classes first. `configure_telemetry` reads the standard
environment variables, so the same program prints a tree on a laptop and ships OTLP in
production without code changes:

* ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` -> the `Resource` (via ``Resource.create``).
* ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT`` -> OTLP export
  of that signal: ``BatchSpanProcessor`` for spans, ``PeriodicExportingMetricReader`` for metrics.
* ``OTEL_EXPORTER_OTLP_PROTOCOL`` or ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL`` -> ``grpc`` or
  ``http/protobuf`` (the default, as the OTel specification says). Anything else is a
  ``ValueError``: a typo must not silently send nothing.
* No trace endpoint -> the `ConsoleTreeExporter` through a ``SimpleSpanProcessor``, so the demo
  prints each trace the moment it ends. No metric endpoint -> no metric reader: the instruments
  still work (and cost next to nothing), but nothing is collected or printed. An in-memory
  reader was considered and rejected: nobody would read it, and its cumulative storage grows
  with attribute cardinality for the life of the process.

Everything else (headers, timeouts, TLS, compression, batch sizes, export interval, temporality,
``OTEL_SDK_DISABLED``) is read by the OpenTelemetry exporters and processors themselves, which
also resolve endpoints exactly as the specification says (a base ``OTEL_EXPORTER_OTLP_ENDPOINT``
gets ``/v1/traces`` appended for HTTP; a signal-specific one is used as is). This module only
decides *which* classes to build, so it cannot disagree with them.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Final, Literal, TextIO

from opentelemetry import metrics, trace
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from flowra_otel.console import ConsoleTreeExporter

__all__ = ["OtlpProtocol", "TelemetryHandles", "configure_telemetry", "resolve_otlp_protocol"]

_logger = logging.getLogger(__name__)

OtlpProtocol = Literal["grpc", "http/protobuf"]
_PROTOCOLS: Final[tuple[OtlpProtocol, ...]] = ("grpc", "http/protobuf")
_DEFAULT_PROTOCOL: Final[OtlpProtocol] = "http/protobuf"


class TelemetryHandles:
    """What `configure_telemetry` built, and the two calls a program needs at the end.

    ``shutdown()`` is registered with `atexit` (once, and unregistered when called by hand),
    because a ``BatchSpanProcessor`` that is not shut down loses its last batch, which is
    usually the trace of the run that just finished.

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
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._span_processors = tuple(span_processors)
        self._span_exporters = tuple(span_exporters)
        self._metric_readers = tuple(metric_readers)
        self._metric_exporters = tuple(metric_exporters)
        self._owns_tracer_provider = owns_tracer_provider
        self._owns_meter_provider = owns_meter_provider
        self._lock = threading.Lock()
        self._shut_down = False
        self._atexit_registered = False

    @property
    def tracer_provider(self) -> TracerProvider:
        return self._tracer_provider

    @property
    def meter_provider(self) -> MeterProvider:
        return self._meter_provider

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

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything buffered now; ``False`` if either signal timed out (or a metric
        reader raised).

        ``True`` does not mean the backend accepted the data: the SDK's processors and readers
        report only whether the export calls finished in time, and the exporters log a refused
        or failed delivery (after their retries) instead of reporting it here.

        Worth calling before a short-lived program (a CLI, a serverless handler) returns, as
        the batch processor otherwise waits up to ``OTEL_BSP_SCHEDULE_DELAY`` to send.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        ok = self._tracer_provider.force_flush(timeout_millis)
        remaining = max(0, int((deadline - time.monotonic()) * 1000))
        try:
            ok = self._meter_provider.force_flush(remaining) and ok
        except Exception:  # the SDK raises a bare Exception when a reader fails
            _logger.warning("flushing metrics failed", exc_info=True)
            ok = False
        return ok

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Flush and stop both providers. Idempotent; errors are logged, never raised.

        Never raising matters because this runs from `atexit`, where an exception would only
        add a traceback to the end of the user's program output.
        """
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
            if self._atexit_registered:
                atexit.unregister(self.shutdown)
                self._atexit_registered = False
        try:
            if self._owns_tracer_provider:
                self._tracer_provider.shutdown()
            else:
                self._tracer_provider.force_flush(timeout_millis)
        except Exception:
            _logger.warning("shutting down the tracer provider failed", exc_info=True)
        try:
            if self._owns_meter_provider:
                self._meter_provider.shutdown(timeout_millis)
            else:
                self._meter_provider.force_flush(timeout_millis)
        except Exception:
            _logger.warning("shutting down the meter provider failed", exc_info=True)

    def _register_atexit(self) -> None:
        with self._lock:
            if not self._atexit_registered and not self._shut_down:
                atexit.register(self.shutdown)
                self._atexit_registered = True


_global_lock = threading.Lock()
_global_handles: TelemetryHandles | None = None
"""The handles of the one ``set_global=True`` configuration of this process."""


def configure_telemetry(
    *,
    service_name: str | None = None,
    console: bool | None = None,
    console_stream: TextIO | None = None,
    span_exporter: SpanExporter | None = None,
    metric_reader: MetricReader | None = None,
    set_global: bool = True,
    register_atexit: bool = True,
) -> TelemetryHandles:
    """Build a tracer and a meter provider from the standard ``OTEL_*`` environment.

    Args:
        service_name: Used as ``service.name`` only when neither ``OTEL_SERVICE_NAME`` nor
            ``OTEL_RESOURCE_ATTRIBUTES`` sets one. Deliberately a default and not an override:
            the name written in a demo's code must not stop an operator renaming the service
            from the environment.
        console: ``None`` prints traces as a tree when spans have nowhere else to go (no trace
            endpoint and no ``span_exporter``); ``True`` always adds the tree printer (next to
            OTLP, say); ``False`` never does.
        console_stream: Stream for the tree printer; default ``sys.stdout``.
        span_exporter: Replaces the environment's choice of span exporter (tests pass an
            ``InMemorySpanExporter``). It is wired through a ``SimpleSpanProcessor``, so spans
            are there as soon as they end.
        metric_reader: Replaces the environment's choice of metric reader (tests pass an
            ``InMemoryMetricReader``).
        set_global: Install both providers as the process-wide OpenTelemetry providers. The
            OTel API allows that once per process, so with ``True`` the first call configures
            and every later one returns the same handles (its arguments are ignored, and a
            debug message says so). If another party installed SDK providers first (e.g.
            ``opentelemetry-instrument``), they are reused and nothing is added to them. Pass
            ``False`` for independent providers, as tests do.
        register_atexit: Call `TelemetryHandles.shutdown` at interpreter exit.

    Raises:
        ValueError: An ``OTEL_EXPORTER_OTLP_*PROTOCOL`` variable that a configured endpoint
            would use holds something other than ``grpc`` or ``http/protobuf``.
    """
    global _global_handles  # noqa: PLW0603 -- the OTel globals are process-wide; so is this

    def build(install_global: bool) -> TelemetryHandles:
        handles = _build(
            service_name=service_name,
            console=console,
            console_stream=console_stream,
            span_exporter=span_exporter,
            metric_reader=metric_reader,
            install_global=install_global,
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


# --- building ---------------------------------------------------------------------------------


def _build(
    *,
    service_name: str | None,
    console: bool | None,
    console_stream: TextIO | None,
    span_exporter: SpanExporter | None,
    metric_reader: MetricReader | None,
    install_global: bool,
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
    metric_otlp: OtlpProtocol | None = None
    if existing_mp is None and metric_reader is None and _endpoint_set("metrics"):
        metric_otlp = resolve_otlp_protocol("metrics")
    resource = _resource(service_name)

    processors: list[SpanProcessor] = []
    exporters: list[SpanExporter] = []
    if existing_tp is None:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        if span_exporter is not None:
            exporters.append(span_exporter)
            processors.append(SimpleSpanProcessor(span_exporter))
        elif trace_otlp is not None:
            exporters.append(_otlp_span_exporter(trace_otlp))
            processors.append(BatchSpanProcessor(exporters[0]))
        if console or (console is None and not exporters):
            exporters.append(ConsoleTreeExporter(console_stream))
            processors.append(SimpleSpanProcessor(exporters[-1]))
        for processor in processors:
            tracer_provider.add_span_processor(processor)
    else:
        tracer_provider = existing_tp

    # The batch processor's thread is running now; do not leak it if the metric side fails
    # (a bad OTEL_METRIC_EXPORT_* value, unreadable TLS files, ...).
    try:
        readers: list[MetricReader] = []
        metric_exporters: list[MetricExporter] = []
        if existing_mp is None:
            if metric_reader is not None:
                readers.append(metric_reader)
            elif metric_otlp is not None:
                metric_exporters.append(_otlp_metric_exporter(metric_otlp))
                readers.append(PeriodicExportingMetricReader(metric_exporters[0]))
            meter_provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
        else:
            meter_provider = existing_mp
    except BaseException:
        if existing_tp is None:
            tracer_provider.shutdown()
        raise

    if install_global:
        _install_global(
            tracer_provider, meter_provider, reused_tp=existing_tp is not None, reused_mp=existing_mp is not None
        )
    return TelemetryHandles(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        span_processors=processors,
        span_exporters=exporters,
        metric_readers=readers,
        metric_exporters=metric_exporters,
        owns_tracer_provider=existing_tp is None,
        owns_meter_provider=existing_mp is None,
    )


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
