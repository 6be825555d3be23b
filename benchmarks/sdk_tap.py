"""The metric side of the in-situ floor, shared by both flowra lines (``floor.py``, ``modern_floor.py``).

A meter provider that wraps a real SDK ``MeterProvider`` (with an ``InMemoryMetricReader``) and
notes every ``record``/``add``/``set`` made on its instruments into a timeline, then makes it for
real; and ``create_instrument``, which makes the same instrument again for a replay. No flowra
import: both lines' floors use it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackT, Counter, Histogram, Meter, UpDownCounter, _Gauge
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.util.types import Attributes


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
    """The span current when it was recorded (its index in the run; ``modern_floor`` only): the
    SDK's default exemplar filter keeps an exemplar of a record made while a sampled span is
    current, so the floor makes the record in that span's context too."""


class Timeline:
    """One ordered log of events, span starts and ends, and metric records."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any]] = []


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
        self.reader = InMemoryMetricReader()
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
