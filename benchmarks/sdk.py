"""The SDK set-up every traced variant shares, and the taps that record what telemetry makes.

* ``RecordingSdk``: a recording ``TracerProvider`` with a ``BatchSpanProcessor`` into an exporter
  that drops spans (the whole span pipeline runs, the network is left out), and a
  ``MeterProvider`` whose ``InMemoryMetricReader`` makes every measurement really aggregated (a
  provider without readers would skip that work). The plugin, ``flowra.ext.otel`` and the floor
  get the very same set-up.
* ``SpanTap`` / ``TapMeterProvider``: a span processor and a meter provider (wrapping a real SDK
  one) that note, in one ``Timeline``, every span start and end and every measurement (with the
  span current when it was made, which decides its exemplar); ``create_instrument`` makes an
  instrument again for a replay. ``data_points`` reads what a reader aggregated, to compare two
  runs' output.

No flowra import: both lines' benchmarks use it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackT, Counter, Histogram, Meter, UpDownCounter, _Gauge
from opentelemetry.sdk import metrics as sdk_metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.types import Attributes


class DropSpanExporter(SpanExporter):
    """Exports nowhere: the SDK's whole span pipeline runs, the network is left out. Counts spans."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


@dataclasses.dataclass
class RecordingSdk:
    """Every traced variant's set-up (see the module's docstring)."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: DropSpanExporter
    metric_reader: InMemoryMetricReader

    @classmethod
    def create(cls) -> RecordingSdk:
        exporter = DropSpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        return cls(tracer_provider, MeterProvider(metric_readers=[reader]), exporter, reader)

    def exported_spans(self) -> int:
        self.tracer_provider.force_flush()
        return self.exporter.exported

    def flush(self) -> None:
        self.tracer_provider.force_flush()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@dataclasses.dataclass(frozen=True)
class InstrumentSpec:
    kind: str  # create_<kind> on a Meter: histogram, counter, up_down_counter, gauge
    name: str
    unit: str
    description: str
    advisory: tuple[float, ...] | None  # explicit_bucket_boundaries_advisory of a histogram


@dataclasses.dataclass(frozen=True)
class RecordSpec:
    instrument: int
    value: float
    attributes: dict[str, Any]
    current: int | None = None
    """The span current when it was recorded (its index in the run): the SDK's default exemplar
    filter keeps an exemplar of a record made while a sampled span is current, so the floor makes
    the record in that span's context too."""


class Timeline:
    """One ordered log of hook points, span starts and ends, and metric records."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any]] = []


class SpanTap(SpanProcessor):
    """Notes each span's start (with the attributes it was started with) and end in the timeline."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.start_attributes: dict[int, dict[str, Any]] = {}
        self.ended: dict[int, ReadableSpan] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        span_id = span.get_span_context().span_id
        self.start_attributes[span_id] = dict(span.attributes or {})
        self.timeline.entries.append(("start", span_id))

    def on_end(self, span: ReadableSpan) -> None:
        span_id = span.context.span_id if span.context is not None else 0
        self.ended[span_id] = span
        self.timeline.entries.append(("end", span_id))


class _Tapped:
    """Wraps one SDK instrument: notes each record/add, then makes it for real."""

    def __init__(self, timeline: Timeline, index: int, inner: Any) -> None:
        self._timeline = timeline
        self._index = index
        self._inner = inner

    def _note(self, value: float, attributes: Attributes, context: Context | None) -> None:
        current = trace.get_current_span(context).get_span_context()
        span_id = current.span_id if current.is_valid else None  # the span an exemplar would name
        self._timeline.entries.append(("record", (self._index, value, dict(attributes or {}), span_id)))


class _TappedHistogram(_Tapped, Histogram):
    def record(self, amount: float, attributes: Attributes = None, context: Context | None = None) -> None:
        self._note(amount, attributes, context)
        self._inner.record(amount, attributes, context)


class _TappedCounter(_Tapped, Counter):
    def add(self, amount: float, attributes: Attributes = None, context: Context | None = None) -> None:
        self._note(amount, attributes, context)
        self._inner.add(amount, attributes, context)


class _TappedUpDownCounter(_Tapped, UpDownCounter):
    def add(self, amount: float, attributes: Attributes = None, context: Context | None = None) -> None:
        self._note(amount, attributes, context)
        self._inner.add(amount, attributes, context)


class _TappedGauge(_Tapped, _Gauge):
    def set(self, amount: float, attributes: Attributes = None, context: Context | None = None) -> None:
        self._note(amount, attributes, context)
        self._inner.set(amount, attributes, context)


class _TapMeter(Meter):
    """A meter that hands out tapped SDK instruments; observable instruments pass through."""

    def __init__(self, inner: Meter, timeline: Timeline, specs: list[InstrumentSpec]) -> None:
        super().__init__(inner.name, inner.version, inner.schema_url)
        self._inner = inner
        self._timeline = timeline
        self._specs = specs

    def _tap(self, kind: str, cls: type[_Tapped], name: str, unit: str, description: str, **kw: Any) -> Any:
        advisory = kw.get("explicit_bucket_boundaries_advisory")
        self._specs.append(
            InstrumentSpec(kind, name, unit, description, tuple(advisory) if advisory is not None else None)
        )
        inner = getattr(self._inner, f"create_{kind}")(name, unit=unit, description=description, **kw)
        return cls(self._timeline, len(self._specs) - 1, inner)

    def create_histogram(self, name: str, unit: str = "", description: str = "", **kw: Any) -> Histogram:
        tapped: Histogram = self._tap("histogram", _TappedHistogram, name, unit, description, **kw)
        return tapped

    def create_counter(self, name: str, unit: str = "", description: str = "") -> Counter:
        tapped: Counter = self._tap("counter", _TappedCounter, name, unit, description)
        return tapped

    def create_up_down_counter(self, name: str, unit: str = "", description: str = "") -> UpDownCounter:
        tapped: UpDownCounter = self._tap("up_down_counter", _TappedUpDownCounter, name, unit, description)
        return tapped

    def create_gauge(self, name: str, unit: str = "", description: str = "") -> _Gauge:
        tapped: _Gauge = self._tap("gauge", _TappedGauge, name, unit, description)
        return tapped

    def create_observable_counter(
        self, name: str, callbacks: Sequence[CallbackT] | None = None, unit: str = "", description: str = ""
    ) -> Any:
        return self._inner.create_observable_counter(name, callbacks, unit, description)

    def create_observable_gauge(
        self, name: str, callbacks: Sequence[CallbackT] | None = None, unit: str = "", description: str = ""
    ) -> Any:
        return self._inner.create_observable_gauge(name, callbacks, unit, description)

    def create_observable_up_down_counter(
        self, name: str, callbacks: Sequence[CallbackT] | None = None, unit: str = "", description: str = ""
    ) -> Any:
        return self._inner.create_observable_up_down_counter(name, callbacks, unit, description)


class TapMeterProvider(metrics.MeterProvider):
    """A real SDK ``MeterProvider`` (with an ``InMemoryMetricReader``) whose instruments are tapped."""

    def __init__(self, timeline: Timeline) -> None:
        # Deltas: each collection gives what was measured since the last one (one run's points).
        delta = AggregationTemporality.DELTA
        temporality: dict[type, AggregationTemporality] = dict.fromkeys(
            (sdk_metrics.Counter, sdk_metrics.UpDownCounter, sdk_metrics.Histogram), delta
        )
        self.reader = InMemoryMetricReader(preferred_temporality=temporality)
        self.inner = MeterProvider(metric_readers=[self.reader])
        self.timeline = timeline
        self.specs: list[InstrumentSpec] = []
        self.scopes: list[tuple[str, str | None, str | None]] = []

    def get_meter(
        self, name: str, version: str | None = None, schema_url: str | None = None, *args: Any, **kwargs: Any
    ) -> Meter:
        self.scopes.append((name, version, schema_url))
        return _TapMeter(self.inner.get_meter(name, version, schema_url, *args, **kwargs), self.timeline, self.specs)


def create_instrument(meter: Meter, spec: InstrumentSpec) -> Callable[..., None]:
    if spec.kind == "histogram":
        kw: dict[str, Any] = {}
        if spec.advisory is not None:
            kw["explicit_bucket_boundaries_advisory"] = list(spec.advisory)
        return meter.create_histogram(spec.name, unit=spec.unit, description=spec.description, **kw).record
    if spec.kind == "counter":
        return meter.create_counter(spec.name, unit=spec.unit, description=spec.description).add
    if spec.kind == "up_down_counter":
        return meter.create_up_down_counter(spec.name, unit=spec.unit, description=spec.description).add
    if spec.kind == "gauge":
        return meter.create_gauge(spec.name, unit=spec.unit, description=spec.description).set
    raise ValueError(f"unknown instrument kind {spec.kind!r}")


type PointKey = tuple[str, tuple[tuple[str, Any], ...]]


def data_points(reader: InMemoryMetricReader) -> dict[PointKey, tuple[Any, ...]]:
    """What ``reader`` aggregated since its last collection (a ``TapMeterProvider``'s reader reads
    deltas), per instrument and attribute set: a histogram's count, sum, bucket counts and number
    of exemplars; a sum's or gauge's value and number of exemplars."""
    points: dict[PointKey, tuple[Any, ...]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted((point.attributes or {}).items())))
                    if isinstance(point, HistogramDataPoint):
                        points[key] = (point.count, point.sum, tuple(point.bucket_counts), len(point.exemplars))
                    elif isinstance(point, NumberDataPoint):
                        points[key] = (point.value, len(point.exemplars))
    return points
