"""What a program configured with only the base OTLP endpoint logs when the backend takes traces
but refuses metrics (Phoenix: HTTP 405 / gRPC UNIMPLEMENTED; MLflow: HTTP 404): the check the
traces-only backend tests share (tests/test_metrics_refused_by_traces_only_backends.py against
the suite's receiver, and the Phoenix and MLflow end-to-end tests against the real servers).

``configure_telemetry`` runs in-process with ``set_global=False``; the program records a metric
and a span, flushes several times (each flush is one metric export, as each export interval
would be) and shuts down. What it logged is returned for the test to judge.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import pytest

from flowra_otel.export import configure_telemetry
from tests.otlp_receiver import Mode, OtlpReceiver, Protocol, Signal

FLUSHES: Final = 3
REFUSAL_PHRASE: Final = "refused metrics"
FIXES: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_METRICS_EXPORTER=none")


class TracesOnlyReceiver(OtlpReceiver):
    """Accepts traces; refuses metrics with ``grpc_error`` / ``http_error_status``."""

    def _note_attempt(self, protocol: Protocol, signal: Signal, headers: dict[str, str]) -> Mode:
        super()._note_attempt(protocol, signal, headers)
        return "error" if signal == "metrics" else "ok"


@dataclass
class Logged:
    warnings: list[str] = field(default_factory=list)
    """``flowra_otel.export`` warnings about refused metrics."""
    errors: list[str] = field(default_factory=list)
    """ERROR records of the OpenTelemetry SDK and exporters (``opentelemetry.*``)."""
    trace_id: str = ""
    flushed: list[bool] = field(default_factory=list)

    def assert_one_clear_warning(self) -> None:
        assert self.errors == [], f"errors logged: {self.errors}"
        assert len(self.warnings) == 1, self.warnings
        assert all(fix in self.warnings[0] for fix in FIXES), self.warnings[0]


def export_with_base_endpoint(
    env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> Logged:
    """Configure from ``env`` only (every other ``OTEL_*`` variable removed), record, flush
    ``FLUSHES`` times, shut down; what the SDK and flowra_otel logged meanwhile."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.WARNING)
    first = len(caplog.records)
    handles = configure_telemetry(
        service_name="flowra-otel-refusal", set_global=False, register_atexit=False, console=False
    )
    logged = Logged()
    try:
        assert handles.metric_exporters, "the base endpoint selects OTLP metric export"
        counter = handles.meter_provider.get_meter("flowra-otel-refusal").create_counter("flowra.refusal.probe")
        with handles.tracer_provider.get_tracer("flowra-otel-refusal").start_as_current_span("probe") as span:
            logged.trace_id = f"{span.get_span_context().trace_id:032x}"
        for _ in range(FLUSHES):
            counter.add(1)
            logged.flushed.append(handles.force_flush(10_000))
    finally:
        handles.shutdown(10_000)
    for record in caplog.records[first:]:
        if record.name == "flowra_otel.export" and REFUSAL_PHRASE in record.getMessage():
            logged.warnings.append(record.getMessage())
        elif record.name.startswith("opentelemetry") and record.levelno >= logging.ERROR:
            logged.errors.append(f"{record.name}: {record.getMessage()}")
    return logged
