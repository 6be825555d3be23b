"""The in-situ SDK floor: the plugin's spans and metric records, made by plain hook handlers.

A tight loop of ``tracer.start_span(...).end()`` underestimates what the OpenTelemetry SDK costs
inside a flowra run (cold caches, interleaved with flowra's own work: about 2x). The honest
yardstick for the plugin is therefore *bare flowra plus plain hook handlers that make exactly the
plugin's spans and metric records with the raw SDK*: what any instrumentation that emits this
telemetry must pay, with nothing of the plugin's own (no patches, no book-keeping beyond a dict).

How it is built, using only public API of the plugin (an ``OtelHooks`` added to a registry, and
the providers it is given), so that it survives any rewrite of the plugin's internals:

1. :func:`capture` runs one traced run of the workload. A ``SpanProcessor`` notes each span's
   attributes at start (what was passed to ``start_span``) and at end, its parent and links; a
   meter provider that wraps a real SDK ``MeterProvider`` (with an ``InMemoryMetricReader``) notes
   every ``record``/``add`` made on its instruments; and a plain hook handler, put first on the
   registry, notes every tool-loop event. All three write into one timeline, so each span start,
   span end and metric record is tied to the event being handled when it happened (actions before
   the first event go with the first event, e.g. the agent span that starts when the run does).
2. :class:`Floor` replays that :class:`Plan` in a bare flowra run: one plain handler per event type
   that has work, which starts spans (start attributes passed to ``start_span``), sets the rest
   once and ends them, and records the metric records, at the matching event. Per run it keeps one
   dict (open spans and the event count), found through a ``ContextVar`` that the run function
   sets, so concurrent runs each replay their own copy.

This module never imports ``flowra_otel``: the floor must run in processes that never did.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable
from typing import Any

import workload
from flowra.agent import Event, HookProvider, HookRegistry
from flowra.lib.tool_loop import hook_events
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode
from sdk_tap import InstrumentSpec, RecordSpec, TapMeterProvider, Timeline, create_instrument

# Streaming deltas are left out: a handler for them switches flowra's tool loop to streaming.
EVENT_TYPES: tuple[type[Any], ...] = tuple(
    getattr(hook_events, name) for name in hook_events.__all__ if not name.endswith("DeltaEvent")
)

START, END, RECORD = 0, 1, 2
type Action = tuple[int, int]  # (START | END | RECORD, span or record index)


@dataclasses.dataclass(frozen=True)
class SpanSpec:
    name: str
    kind: SpanKind
    parent: int | None  # index of the parent span in the run; None for the run's root
    start_attributes: dict[str, Any]  # what the plugin passed to start_span
    end_attributes: dict[str, Any]  # set later (final minus start): set once, before end
    links: tuple[tuple[int | SpanContext, dict[str, Any]], ...]  # in-run links by index
    status: tuple[StatusCode, str | None] | None
    events: tuple[tuple[str, dict[str, Any]], ...]
    has_children: bool


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything one traced run made, tied to the events of the run (in order)."""

    iterations: int
    tracer_scope: tuple[str, str | None, str | None]  # name, version, schema URL
    meter_scope: tuple[str, str | None, str | None]
    spans: tuple[SpanSpec, ...]
    instruments: tuple[InstrumentSpec, ...]
    records: tuple[RecordSpec, ...]
    events: tuple[tuple[type[Any], tuple[Action, ...]], ...]  # every event of a type that has work

    def signature(self, *, values: bool = False) -> tuple[Any, ...]:
        """What must match between the plugin's run and the floor's: shapes, not timings."""
        spans = tuple(
            (
                s.name,
                s.kind,
                s.parent,
                sorted(s.start_attributes.items()),
                sorted(s.end_attributes.items()),
                len(s.links),
                s.status,
                s.events,
            )
            for s in self.spans
        )
        records = tuple(
            (self.instruments[r.instrument].name, sorted(r.attributes.items()), r.value if values else None)
            for r in self.records
        )
        events = tuple((t.__name__, actions) for t, actions in self.events)
        instruments = tuple(sorted(dataclasses.astuple(i) for i in self.instruments))
        return (spans, records, events, instruments)

    def describe(self) -> str:
        kinds = {START: "start", END: "end", RECORD: "record"}
        lines = []
        for event_type, actions in self.events:
            parts = [
                f"{kinds[k]} {self.spans[i].name if k != RECORD else self.instruments[self.records[i].instrument].name}"
                for k, i in actions
            ]
            lines.append(f"{event_type.__name__}: {', '.join(parts) or '-'}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------ capture


class _SpanTap(SpanProcessor):
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


class Recorder:
    """Captures the telemetry of runs of a runtime whose registry has ``hooks`` (see :func:`capture`)."""

    def __init__(self) -> None:
        self.timeline = Timeline()
        self.spans = _SpanTap(self.timeline)
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(self.spans)
        self.meter_provider = TapMeterProvider(self.timeline)

    def register(self, registry: HookRegistry) -> None:
        """Put the event handler first, so it notes each event before any other handler acts."""

        def note(event: Event[Any]) -> None:
            self.timeline.entries.append(("event", type(event.data)))

        for event_type in EVENT_TYPES:
            registry.on(event_type, note, prepend=True)

    def plan(self, iterations: int) -> Plan:
        entries = self.timeline.entries
        order = [value for kind, value in entries if kind == "start"]
        index = {span_id: i for i, span_id in enumerate(order)}
        spans: list[SpanSpec] = []
        for span_id in order:
            span = self.spans.ended.get(span_id)
            if span is None:
                raise RuntimeError("a span of the captured run never ended")
            start = self.spans.start_attributes[span_id]
            final = dict(span.attributes or {})
            parent = index.get(span.parent.span_id) if span.parent is not None else None
            links = tuple(
                (index.get(link.context.span_id, link.context), dict(link.attributes or {})) for link in span.links
            )
            status = (
                (span.status.status_code, span.status.description)
                if span.status.status_code is not StatusCode.UNSET
                else None
            )
            spans.append(
                SpanSpec(
                    name=span.name,
                    kind=span.kind,
                    parent=parent,
                    start_attributes=start,
                    end_attributes={k: v for k, v in final.items() if k not in start or start[k] != v},
                    links=links,
                    status=status,
                    events=tuple((e.name, dict(e.attributes or {})) for e in span.events),
                    has_children=False,
                )
            )
        parents = {s.parent for s in spans if s.parent is not None}
        spans = [dataclasses.replace(s, has_children=i in parents) for i, s in enumerate(spans)]
        records: list[RecordSpec] = []
        # Tie every action to the event being handled (actions before the first event: the first).
        events: list[tuple[type[Any], list[Action]]] = []
        pending: list[Action] = []
        for kind, value in entries:
            if kind == "event":
                events.append((value, pending))
                pending = []
                continue
            if kind == "start":
                action = (START, index[value])
            elif kind == "end":
                action = (END, index[value])
            else:
                instrument, amount, attributes, _current = value  # exemplars: not modelled on this line
                records.append(RecordSpec(instrument, amount, attributes))
                action = (RECORD, len(records) - 1)
            (events[-1][1] if events else pending).append(action)
        if pending:
            raise RuntimeError("the captured run emitted no tool-loop event")
        busy = {t for t, actions in events if actions}
        first = spans[0] if spans else None
        scope = self.spans.ended[order[0]].instrumentation_scope if order else None
        return Plan(
            iterations=iterations,
            tracer_scope=(scope.name, scope.version, scope.schema_url) if scope and first else ("floor", None, None),
            meter_scope=self.meter_provider.scopes[0] if self.meter_provider.scopes else ("floor", None, None),
            spans=tuple(spans),
            instruments=tuple(self.meter_provider.specs),
            records=tuple(records),
            events=tuple((t, tuple(actions)) for t, actions in events if t in busy),
        )

    def reset(self) -> None:
        self.timeline.entries.clear()
        self.spans.start_attributes.clear()
        self.spans.ended.clear()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.inner.shutdown()


async def capture(
    make_hooks: Callable[[trace.TracerProvider, metrics.MeterProvider], HookProvider], iterations: int
) -> Plan:
    """The plan of one traced run: ``make_hooks(tracer_provider, meter_provider)`` is put on the
    registry (e.g. ``OtelHooks(tracer_provider=..., meter_provider=...)``), a warm-up run is made,
    then the second run is captured."""
    recorder = Recorder()
    registry = HookRegistry()
    registry.add(make_hooks(recorder.tracer_provider, recorder.meter_provider))
    recorder.register(registry)
    runtime = await workload.build_runtime(registry, iterations)
    await workload.check_run(runtime, iterations)
    recorder.reset()
    await workload.run_once(runtime)
    plan = recorder.plan(iterations)
    recorder.shutdown()
    return plan


# ------------------------------------------------------------------------------------------ replay


_RUN: contextvars.ContextVar[dict[Any, Any]] = contextvars.ContextVar("floor_run")
_COUNT = "n"  # key of the run's event count in its dict (span indexes are ints)


class Floor(HookProvider):
    """Plain hook handlers that make a :class:`Plan`'s spans and records with the raw SDK.

    Each run must start with :meth:`begin_run` (the benchmark's run function calls it before
    ``runtime.run``): it gives the run the one dict in which its open spans are kept.
    """

    def __init__(
        self,
        plan: Plan,
        tracer_provider: trace.TracerProvider,
        meter_provider: metrics.MeterProvider | None,
    ) -> None:
        self.plan = plan
        self.tracer = tracer_provider.get_tracer(
            plan.tracer_scope[0], plan.tracer_scope[1], schema_url=plan.tracer_scope[2]
        )
        # Per record: the bound record/add method of its instrument, its value, its attributes.
        self.records: list[tuple[Callable[..., None], float, dict[str, Any]]] = []
        if meter_provider is not None:
            meter = meter_provider.get_meter(plan.meter_scope[0], plan.meter_scope[1], schema_url=plan.meter_scope[2])
            made = [create_instrument(meter, spec) for spec in plan.instruments]
            self.records = [(made[r.instrument], r.value, r.attributes) for r in plan.records]
        # Per event of a busy type, in run order: its actions, records left out without a meter.
        self.steps: list[tuple[Action, ...]] = [
            tuple(a for a in actions if a[0] != RECORD or self.records) for _, actions in plan.events
        ]

    def register_hooks(self, registry: HookRegistry) -> None:
        for event_type in dict.fromkeys(t for t, _ in self.plan.events):
            registry.on(event_type, self._on_event)

    @staticmethod
    def begin_run() -> None:
        _RUN.set({_COUNT: 0})

    def _on_event(self, event: Event[Any]) -> None:
        run = _RUN.get()
        step = run[_COUNT]
        run[_COUNT] = step + 1
        for kind, index in self.steps[step]:
            if kind == START:
                spec = self.plan.spans[index]
                links = None
                if spec.links:
                    links = [
                        Link(run[ref].get_span_context() if isinstance(ref, int) else ref, attrs)
                        for ref, attrs in spec.links
                    ]
                span = self.tracer.start_span(
                    spec.name,
                    context=run[(spec.parent, "ctx")] if spec.parent is not None else None,
                    kind=spec.kind,
                    attributes=spec.start_attributes,
                    links=links,
                )
                run[index] = span
                if spec.has_children:
                    run[(index, "ctx")] = trace.set_span_in_context(span)
            elif kind == END:
                spec = self.plan.spans[index]
                span = run.pop(index)
                if spec.end_attributes:
                    span.set_attributes(spec.end_attributes)
                for name, attrs in spec.events:
                    span.add_event(name, attrs)
                if spec.status is not None:
                    span.set_status(Status(*spec.status))
                span.end()
            else:
                record, value, attributes = self.records[index]
                record(value, attributes)


async def verify(plan: Plan) -> None:
    """Replay ``plan`` once under a :class:`Recorder`: the floor must make the very same telemetry."""
    recorder = Recorder()
    registry = HookRegistry()
    registry.add(Floor(plan, recorder.tracer_provider, recorder.meter_provider))
    recorder.register(registry)
    runtime = await workload.build_runtime(registry, plan.iterations)
    Floor.begin_run()
    await workload.check_run(runtime, plan.iterations)
    replayed = recorder.plan(plan.iterations)
    recorder.shutdown()
    if replayed.signature() != plan.signature():
        raise RuntimeError(
            "the floor's telemetry differs from the plugin's run:\n--- plugin\n"
            + plan.describe()
            + "\n--- floor\n"
            + replayed.describe()
        )
