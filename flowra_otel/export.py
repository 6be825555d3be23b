"""Public home of ``configure_telemetry`` (``from flowra_otel.export import configure_telemetry``).

The implementation is framework-neutral and lives in ``flowra_otel.core.export``.
"""

from .core.export import (
    DEFAULT_TIMEOUT_MILLIS,
    OtlpProtocol,
    TelemetryHandles,
    configure_telemetry,
    resolve_metrics_exporters,
    resolve_otlp_protocol,
)
from .core.otlp_json_file import FLOWRA_OTEL_TRACES_FILE, OtlpJsonFileSpanExporter

__all__ = [
    "DEFAULT_TIMEOUT_MILLIS",
    "FLOWRA_OTEL_TRACES_FILE",
    "OtlpJsonFileSpanExporter",
    "OtlpProtocol",
    "TelemetryHandles",
    "configure_telemetry",
    "resolve_metrics_exporters",
    "resolve_otlp_protocol",
]
