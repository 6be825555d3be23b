"""flowra 0.0.47 - 0.0.93 helpers: tracing a runtime, and the end-of-run check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowra.agent import AgentRuntime
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from tests.conftest import SpanLedger, wrapped_result

__all__ = ["SpanLedger", "assert_all_ended", "traced", "wrapped_result"]


def traced(make_otel_hooks: Callable[..., OtelHooks], runtime: AgentRuntime, **options: Any) -> AgentRuntime:
    """``runtime`` with an ``OtelHooks`` (the test's SDK providers, ``options``) installed."""
    make_otel_hooks(**options).install(runtime)
    return runtime


def assert_all_ended(ledger: SpanLedger, exporter: InMemorySpanExporter) -> None:
    """Every started span ended exactly once and was exported, and no span of the run is still
    the current one (every context the plugin attached was detached)."""
    assert ledger.started, "no span was started at all"
    assert ledger.open_spans() == []
    exported = {s.context.span_id for s in exporter.get_finished_spans() if s.context is not None}
    assert exported == set(ledger.started)
    assert not trace.get_current_span(otel_context.get_current()).is_recording()
