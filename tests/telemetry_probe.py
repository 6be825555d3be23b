"""One probe of each signal through what ``configure_telemetry`` built: a metric, a span, and (when
asked) a content event, then a flush. Shared by the tests that watch what an export sends or logs
(tests/test_credentials_never_cross_an_origin.py, tests/test_credentials_stay_out_of_logs_and_errors.py).
"""

from __future__ import annotations

from flowra_otel.export import TelemetryHandles


def send_probes(handles: TelemetryHandles, *, logs: bool = False, timeout_millis: int = 5_000) -> bool:
    """Record one of each signal and flush; whether the flush reported success."""
    handles.meter_provider.get_meter("probe").create_counter("probe").add(1)
    with handles.tracer_provider.get_tracer("probe").start_as_current_span("probe"):
        pass
    if logs and handles.logger_provider is not None:
        from opentelemetry._logs import LogRecord

        handles.logger_provider.get_logger("probe").emit(LogRecord(body="probe"))
    return handles.force_flush(timeout_millis)
