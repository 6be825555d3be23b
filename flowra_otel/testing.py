"""For your own tests: the leak checks (``assert_no_leak``; the implementation lives in
``flowra_otel.core.testing``) and ``TraceCapture``, what the pytest fixture ``flowra_otel_capture``
gives (``flowra_otel.pytest_plugin``): the OpenTelemetry SDK's tracer, meter and logger providers with
an in-memory span exporter, metric reader and log exporter, an installer for your runtime, and the
finished spans as SDK spans and as plain dicts for snapshot asserts.

    def test_cards_never_reach_traces(flowra_otel_capture):
        runtime = my_runtime()
        flowra_otel_capture.install(runtime)                  # OtelHooks(capture_content=True, ...)
        ...                                                   # run your agent
        assert_no_leak(flowra_otel_capture.spans, ["4111 1111 1111 1111"])
        assert "**** 1111" in flowra_otel_capture.span("execute_tool charge_card").attributes["gen_ai.tool.call.result"]

Nothing here sets a global provider: the spans of one test are that test's alone, whatever else
runs in the process (the anchor: Logfire's ``capfire``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .core.testing import Leak, assert_no_leak, assert_no_log_leak, find_leaks, find_log_leaks, secret_forms

if TYPE_CHECKING:
    from .hooks import Installation, OtelHooks

__all__ = [
    "VARYING_ATTRIBUTES",
    "Leak",
    "TraceCapture",
    "assert_no_leak",
    "assert_no_log_leak",
    "find_leaks",
    "find_log_leaks",
    "secret_forms",
]

VARYING_ATTRIBUTES: Final = frozenset({"gen_ai.response.time_to_first_chunk"})
"""Span attributes that hold a measured time: ``span_dicts`` shows them as ``"<varies>"``."""


class TraceCapture:
    """In-memory OpenTelemetry for one test: what ``OtelHooks`` records, kept for asserts.

    ``tracer_provider`` / ``meter_provider`` / ``logger_provider`` are SDK providers of this capture
    alone (never installed globally); ``exporter``, ``metric_reader`` and ``log_exporter`` hold what
    they recorded. ``install(runtime)`` traces your runtime into them (content capture on unless
    you say otherwise: a redaction test needs the content to check); ``shutdown()`` takes every
    such installation off its runtime again, so a runtime shared with other tests is left as it was."""

    def __init__(self, *, service_name: str = "test") -> None:
        resource = Resource.create({"service.name": service_name})
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[self.metric_reader])
        self.log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))
        self.installations: list[Installation] = []
        """What ``install`` did, in order; ``shutdown`` undoes it."""

    # ------------------------------------------------------------------ setting up
    def hooks(self, **options: Any) -> OtelHooks:
        """An ``OtelHooks`` recording into this capture: ``options`` as ``OtelHooks`` takes them,
        ``capture_content=True`` unless given (on flowra 0.0.3 - 0.0.8: ``hooks.add(capture.hooks())``)."""
        from .hooks import OtelHooks

        options.setdefault("capture_content", True)
        return OtelHooks(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            logger_provider=self.logger_provider,
            **options,
        )

    def install(self, runtime: Any, **options: Any) -> OtelHooks:
        """Trace every run of ``runtime`` into this capture (``hooks(**options).install(runtime)``),
        until ``shutdown()`` (the fixture's teardown) uninstalls it."""
        otel = self.hooks(**options)
        self.installations.append(otel.install(runtime))
        return otel

    # ------------------------------------------------------------------ what was recorded
    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        """The finished spans, in the order they ended (SDK ``ReadableSpan``s)."""
        return tuple(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        """The one finished span called ``name`` (``AssertionError`` for none or several)."""
        found = [s for s in self.spans if s.name == name]
        if len(found) != 1:
            names = sorted({s.name for s in self.spans})
            msg = f"expected one span {name!r}, found {len(found)}; the spans are {names}"
            raise AssertionError(msg)
        return found[0]

    def span_dicts(self) -> list[dict[str, Any]]:
        """The finished spans as plain dicts, for snapshot asserts: in the order they started, ids
        and timestamps replaced by stable numbers (``span_id`` / ``parent_id`` / ``trace_id``: the
        order of first appearance), measured times (``VARYING_ATTRIBUTES``) by ``"<varies>"``,
        arrays by lists. Each: ``name``, ``kind``, ``span_id``, ``parent_id``, ``trace_id``,
        ``attributes``, ``status`` (``{"code", "description"}``), ``events`` (``{"name",
        "attributes"}``) and ``links`` (``{"span_id", "attributes"}``, the linked span's number
        when it is here, else ``None``)."""
        spans = sorted(self.spans, key=lambda s: (s.start_time or 0, s.end_time or 0))
        numbers: dict[int, int] = {}
        traces: dict[int, int] = {}

        def number(span_id: int | None) -> int | None:
            return None if span_id is None else numbers.setdefault(span_id, len(numbers) + 1)

        for span in spans:
            if span.context is not None:
                number(span.context.span_id)
        out: list[dict[str, Any]] = []
        for span in spans:
            context = span.context
            parent = span.parent.span_id if span.parent is not None else None
            out.append(
                {
                    "name": span.name,
                    "kind": span.kind.name,
                    "span_id": number(context.span_id) if context is not None else None,
                    "parent_id": numbers.get(parent) if parent is not None else None,
                    "trace_id": traces.setdefault(context.trace_id, len(traces) + 1) if context is not None else None,
                    "attributes": _plain(span.attributes, varying=VARYING_ATTRIBUTES),
                    "status": {"code": span.status.status_code.name, "description": span.status.description},
                    "events": [{"name": e.name, "attributes": _plain(e.attributes)} for e in span.events],
                    "links": [
                        {"span_id": numbers.get(link.context.span_id), "attributes": _plain(link.attributes)}
                        for link in span.links
                    ],
                }
            )
        return out

    @property
    def logs(self) -> tuple[Any, ...]:
        """The log records (the content events of ``capture_content="event_only"`` /
        ``"span_and_event"``), as the SDK's in-memory log exporter keeps them."""
        return tuple(self.log_exporter.get_finished_logs())

    def metrics(self) -> MetricsData | None:
        """The metrics recorded so far (a collection by the in-memory reader)."""
        return self.metric_reader.get_metrics_data()

    def metric_points(self, name: str) -> list[Any]:
        """Every data point of the metric ``name`` (each has ``attributes``, and ``sum`` / ``count``
        for a histogram or ``value`` for a counter)."""
        data = self.metrics()
        points: list[Any] = []
        for resource_metrics in data.resource_metrics if data is not None else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points

    def assert_no_leak(self, secrets: str | Iterable[str], *, allowed: Iterable[str] = ()) -> None:
        """``assert_no_leak`` over the finished spans (``allowed``: places that may hold a
        secret), and ``assert_no_log_leak`` over the log records when there are any."""
        assert_no_leak(self.spans, secrets, allowed=allowed)
        if self.logs:
            assert_no_log_leak(self.logs, secrets)

    def clear(self) -> None:
        """Forget what was recorded so far (spans and log records)."""
        self.exporter.clear()
        self.log_exporter.clear()

    def shutdown(self) -> None:
        """Take every ``install`` off its runtime (the last first), then shut the three providers
        down (the fixture does it after the test). Why both: a runtime shared by several tests (a
        module-level one) must not stay traced into providers that are shut down (its next runs
        would log "already shutdown" and refuse the next test's ``install``)."""
        try:
            while self.installations:
                self.installations.pop().uninstall()
        finally:
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown()
            self.logger_provider.shutdown()


def _plain(attributes: Mapping[str, Any] | None, *, varying: frozenset[str] = frozenset()) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if key in varying:
            plain[key] = "<varies>"
        elif isinstance(value, tuple | list):
            plain[key] = list(value)
        else:
            plain[key] = value
    return plain
