"""Shared by both lines' cooperation tests: reading what a provider instrumentation and the plugin recorded.

``token_sums`` / ``duration_counts`` split the GenAI client metrics by instrumentation scope (the
plugin's ``flowra_otel``, the google-genai instrumentation's own), ``model_spans`` lists the
inference spans of either, so a test sees at once whether a model call was recorded once or twice.
"""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["GOOGLE_GENAI_SCOPE", "OUR_SCOPE", "duration_counts", "model_spans", "ours", "token_sums"]

GOOGLE_GENAI_SCOPE = "opentelemetry.instrumentation.google_genai"
OUR_SCOPE = "flowra_otel"


def _scope(span: ReadableSpan) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope is not None else ""


def token_sums(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    """``gen_ai.client.token.usage`` summed per (instrumentation scope, token type)."""
    sums: dict[tuple[str, str], int] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data is not None else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name != "gen_ai.client.token.usage":
                    continue
                for point in metric.data.data_points:
                    key = (scope_metrics.scope.name, str((point.attributes or {})["gen_ai.token.type"]))
                    sums[key] = sums.get(key, 0) + int(point.sum)  # type: ignore[union-attr]
    return sums


def duration_counts(reader: InMemoryMetricReader) -> dict[str, int]:
    """``gen_ai.client.operation.duration`` records per instrumentation scope."""
    counts: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data is not None else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == "gen_ai.client.operation.duration":
                    for point in metric.data.data_points:
                        name = scope_metrics.scope.name
                        counts[name] = counts.get(name, 0) + int(point.count)  # type: ignore[union-attr]
    return counts


def model_spans(exporter: InMemorySpanExporter) -> list[tuple[str, str]]:
    """(scope, name) of every inference span, in end order."""
    return [
        (_scope(s), s.name)
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get("gen_ai.operation.name") in ("chat", "generate_content")
    ]


def ours(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The plugin's spans."""
    return [s for s in exporter.get_finished_spans() if _scope(s) == OUR_SCOPE]
