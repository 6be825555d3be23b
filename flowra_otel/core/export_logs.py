"""The logs side of ``configure_telemetry``: where the content events go.

Why only on demand: the plugin writes log records for one purpose, each model call's
``gen_ai.client.inference.operation.details`` event when content is asked for in events
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY`` / ``SPAN_AND_EVENT``, or
``OtelHooks(capture_content="event_only")``). Without that, a logger provider would only add a
thread and an endpoint that most trace backends refuse. So ``configure_telemetry`` builds one
when ``logs=True``, or (``logs=None``, the default) when the environment asks for events or sets
``OTEL_LOGS_EXPORTER``:

* ``OTEL_LOGS_EXPORTER``: ``otlp``, ``console`` (one JSON document per record on stdout) or
  ``none`` (a comma-separated list; anything else is a ``ValueError``). Unset: OTLP when
  ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else the console.
* ``OTEL_EXPORTER_OTLP_LOGS_PROTOCOL`` or ``OTEL_EXPORTER_OTLP_PROTOCOL``: ``grpc`` or
  ``http/protobuf`` (default), as for the other signals.
* ``log_exporter=`` replaces the environment's choice (tests pass an in-memory exporter or an
  OTLP exporter of their own), through a ``SimpleLogRecordProcessor``.

OTLP records go through a ``BatchLogRecordProcessor``; the exporter sits behind
``_StopOnceLogExporter`` so that a shutdown that runs out of time can stop its retries.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import Final, Literal, TextIO

from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource

from .modes import content_mode_from_env

__all__ = ["LogsSetup", "build_logs", "logs_wanted", "otlp_logs_protocol", "prepare_logs", "resolve_logs_exporters"]

_logger = logging.getLogger("flowra_otel.export")

OTEL_LOGS_EXPORTER: Final = "OTEL_LOGS_EXPORTER"
OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
_OTEL_EXPORTER_OTLP_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
_OTEL_EXPORTER_OTLP_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"

type LogsExporterName = Literal["otlp", "console"]
type OtlpProtocol = Literal["grpc", "http/protobuf"]


def logs_wanted(logs: bool | None) -> bool:
    """``logs`` if given; else whether the environment asks for content events or a logs exporter."""
    if logs is not None:
        return logs
    if os.environ.get(OTEL_LOGS_EXPORTER, "").strip():
        return resolve_logs_exporters() != ()
    return content_mode_from_env().in_events


def resolve_logs_exporters() -> tuple[LogsExporterName, ...]:
    """``OTEL_LOGS_EXPORTER`` when set (``none`` -> none); else OTLP with a logs (or generic)
    endpoint, the console without one.

    Raises:
        ValueError: a value other than ``otlp``, ``console`` or ``none``.
    """
    raw = os.environ.get(OTEL_LOGS_EXPORTER, "").strip()
    if not raw:
        endpoint = any(
            os.environ.get(name, "").strip()
            for name in (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, _OTEL_EXPORTER_OTLP_ENDPOINT)
        )
        return ("otlp",) if endpoint else ("console",)
    kinds: list[LogsExporterName] = []
    for name in (n.strip().lower() for n in raw.split(",") if n.strip()):
        if name == "none":
            continue
        if name not in ("otlp", "console"):
            msg = f"{OTEL_LOGS_EXPORTER}={raw!r}: configure_telemetry supports 'otlp', 'console' or 'none'"
            raise ValueError(msg)
        kind: LogsExporterName = "otlp" if name == "otlp" else "console"
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


def otlp_logs_protocol(logs: bool | None, log_exporter: LogRecordExporter | None) -> OtlpProtocol | None:
    """The protocol of the OTLP log exporter `build_logs` would make for these arguments, or None
    when it would make none (for `configure_telemetry`'s endpoint check, before anything is built).

    Raises:
        ValueError: as `resolve_logs_exporters` and the protocol variables do.
    """
    if log_exporter is not None or not logs_wanted(logs):
        return None
    return _logs_protocol() if "otlp" in resolve_logs_exporters() else None


def _logs_protocol() -> OtlpProtocol:
    for name in (OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, _OTEL_EXPORTER_OTLP_PROTOCOL):
        raw = os.environ.get(name, "").strip()
        if not raw:
            continue
        value = raw.lower()
        if value == "grpc":
            return "grpc"
        if value == "http/protobuf":
            return "http/protobuf"
        msg = f"{name}={raw!r} is not a supported OTLP protocol: use 'grpc' or 'http/protobuf'"
        raise ValueError(msg)
    return "http/protobuf"


class _StopOnceLogExporter(LogRecordExporter):
    """Between a batch processor and an OTLP log exporter: lets a late shutdown stop the
    exporter's retries, and makes the processor's own shutdown of it later a no-op."""

    def __init__(self, exporter: LogRecordExporter) -> None:
        self._exporter = exporter
        self._lock = threading.Lock()
        self._stopped = False

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return self._exporter.export(batch)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))

    def shutdown(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._exporter.shutdown()  # type: ignore[no-untyped-call]  # untyped in the SDK


class LogsSetup:
    """What ``build_logs`` made (or the global provider reused): the provider, its processors and
    exporters, and the OTLP exporters to stop when a shutdown overruns."""

    def __init__(self, provider: LoggerProvider, *, owned: bool = True) -> None:
        self.provider = provider
        self.owned = owned
        self.processors: list[LogRecordProcessor] = []
        self.exporters: list[LogRecordExporter] = []
        self.stoppable: list[LogRecordExporter] = []

    def flush(self, timeout_millis: int) -> bool:
        return bool(self.provider.force_flush(timeout_millis))

    def shutdown(self, timeout_millis: int) -> bool:
        """Shut the provider down if this call built it, else only flush it."""
        if not self.owned:
            return self.flush(timeout_millis)
        self.provider.shutdown()
        return True

    def stop(self) -> None:
        """Stop the OTLP exporters' retries (a shutdown ran out of time)."""
        for exporter in self.stoppable:
            exporter.shutdown()  # type: ignore[no-untyped-call]  # untyped in the SDK


def prepare_logs(
    logs: bool | None,
    log_exporter: LogRecordExporter | None,
    resource: Resource,
    *,
    install_global: bool,
    console_stream: TextIO | None = None,
) -> LogsSetup | None:
    """The logs side of one ``configure_telemetry`` call, or None when no logs are wanted. With
    ``install_global``, an SDK logger provider already installed is reused (not owned) and a new
    one is installed globally."""
    if log_exporter is None and not logs_wanted(logs):
        return None
    if install_global:
        current = _logs.get_logger_provider()
        if isinstance(current, LoggerProvider):
            _logger.info("a global OpenTelemetry LoggerProvider is already installed; using it as is")
            return LogsSetup(current, owned=False)
    setup = build_logs(resource, log_exporter, console_stream)
    if install_global:
        _logs.set_logger_provider(setup.provider)
        if _logs.get_logger_provider() is not setup.provider:
            _logger.warning(
                "could not install the OpenTelemetry LoggerProvider globally (another was set first); "
                "pass handles.logger_provider to OtelHooks(logger_provider=...)"
            )
    return setup


def build_logs(
    resource: Resource, log_exporter: LogRecordExporter | None, console_stream: TextIO | None = None
) -> LogsSetup:
    """A logger provider for ``resource``: ``log_exporter`` (simple processor), or the
    environment's exporters (the console one writes to ``console_stream``, default stdout).
    Validates everything before building anything."""
    kinds = () if log_exporter is not None else resolve_logs_exporters()
    protocol = _logs_protocol() if "otlp" in kinds else None
    setup = LogsSetup(LoggerProvider(resource=resource, shutdown_on_exit=False))
    if log_exporter is not None:
        setup.exporters.append(log_exporter)
        setup.processors.append(SimpleLogRecordProcessor(log_exporter))
    if protocol is not None:
        exporter = _otlp_log_exporter(protocol)
        setup.exporters.append(exporter)
        guarded = _StopOnceLogExporter(exporter)
        setup.stoppable.append(guarded)
        setup.processors.append(BatchLogRecordProcessor(guarded))
    if "console" in kinds:
        setup.exporters.append(ConsoleLogRecordExporter(out=console_stream or sys.stdout))
        setup.processors.append(SimpleLogRecordProcessor(setup.exporters[-1]))
    for processor in setup.processors:
        setup.provider.add_log_record_processor(processor)
    return setup


def _otlp_log_exporter(protocol: OtlpProtocol) -> LogRecordExporter:
    # As for spans: each transport's stack is imported only when used. Both read the endpoint
    # (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, else the base one + /v1/logs), headers, TLS from the env.
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter

        return GrpcLogExporter()
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter

    from .same_origin_http import otlp_http_session

    return HttpLogExporter(session=otlp_http_session("logs"))
