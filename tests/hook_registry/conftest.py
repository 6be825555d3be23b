"""flowra 0.0.3 - 0.0.8 helpers: the registry helper, a streaming hook, and the end-of-run check."""

from __future__ import annotations

from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import TextDeltaEvent
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import patches as otel_patches
from tests.conftest import SpanLedger, wrapped_result

__all__ = ["DeltaCollector", "SpanLedger", "assert_all_ended", "hooks_with", "wrapped_result"]


def assert_all_ended(ledger: SpanLedger, exporter: InMemorySpanExporter) -> None:
    """Every started span ended exactly once, was exported, and no run's book is still current."""
    assert ledger.started, "no span was started at all"
    assert ledger.open_spans() == []
    exported = {s.context.span_id for s in exporter.get_finished_spans() if s.context is not None}
    assert exported == set(ledger.started)
    assert otel_patches.current_book() is None


def hooks_with(otel: OtelHooks, *providers: object) -> HookRegistry:
    """A registry carrying ``otel`` (and any further hook providers, in order)."""
    registry = HookRegistry()
    registry.add(otel)
    for provider in providers:
        registry.add(provider)  # type: ignore[arg-type]
    return registry


class DeltaCollector:
    """A user's streaming hook: registering it makes flowra call ``provider.stream`` (time to
    first chunk, time per output chunk); it keeps the text deltas it saw."""

    def __init__(self) -> None:
        self.chunks: list[str] = []

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(TextDeltaEvent, self.on_delta)

    def on_delta(self, event: Event[TextDeltaEvent]) -> None:
        self.chunks.append(event.data.text)
