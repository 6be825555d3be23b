"""The in-situ SDK floor on flowra 0.0.86 - 0.0.93: the plugin's spans and metric records, made by
plain ``runtime.hooks`` handlers.

The same yardstick as ``floor.py`` (flowra 0.0.8; see docs/performance.md): bare flowra plus plain
handlers that make exactly the spans (same names, kinds, parents, start and final attributes,
links, status, events) and exactly the metric records the plugin makes, with the raw SDK on the
same providers and processors: what any instrumentation emitting this telemetry must pay, with
nothing of the plugin's own (no emit patch, no flowing frame, no bookkeeping beyond one dict).

On today's flowra the plugin acts at *hook points* rather than at tool-loop events: when a span
of flowra's opens (``AgentSpan``, ``LLMCallSpan``, ``ToolCallSpan``: the ``on_span`` handler),
when it closes (the exit callback that handler returns), and after a turn event's handlers ran
(``BeforeToolCallEvent``, ``AfterToolCallEvent``, ...). And it does not always finish a span at
the hook point that closes flowra's: an ``execute_tool`` span ends (with the time its tool
returned) only when the value the model is given is known, at the next ``LLMCallSpan``'s open;
a ``chat`` span ends (with the time its response arrived) when the call's tool calls start. So:

1. :func:`capture` runs one traced run of the workload. A ``SpanProcessor`` notes each span's
   start and end (attributes at start and at end, parent, links, end time); a meter provider
   wrapping a real SDK ``MeterProvider`` notes every ``record``/``add``; plain markers note every
   hook point (two ``on_span`` handlers per span type, one subscribed before the plugin, whose
   exit callback runs before the plugin's, one after it, which runs before the plugin's at open;
   and a handler per turn event, which runs before the plugin acts on the event). One timeline
   ties every span start, span end and metric record to the hook point during which it happened;
   a span ended with an end time earlier than its hook point gets the hook point that time was
   taken in (the last one whose marker time is not later).
2. :class:`Floor` replays that :class:`Plan` in a bare flowra run: one plain handler per span
   type and event type that has work. At each hook point it starts spans (``start_span`` with
   the start attributes, parent context, links), notes end times, sets the remaining attributes
   once and ends spans, and makes the metric records. Per run it keeps one dict (open spans,
   noted times, the hook-point count), found through a ``ContextVar`` the run function sets.
3. :func:`verify` captures the floor's own run the same way: it must give the very same
   signature (spans, records, and the hook point of every action and noted end time).

This module never imports ``flowra_otel``: the floor runs in processes that never did.
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
from collections.abc import Callable
from typing import Any, cast

import modern_workload
import support_workload
from flowra.agent import AgentRuntime, AgentSpan
from flowra.lib.observability import LLMCallSpan, ToolCallSpan
from flowra.lib.turn import hook_events
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode
from sdk_tap import InstrumentSpec, RecordSpec, TapMeterProvider, Timeline, create_instrument

WORKLOADS: dict[str, Any] = {"tool_loop": modern_workload, "support": support_workload}
"""The workloads by name (``--workload``): each module has ``build_runtime``, ``run_once``,
``check_run`` and ``spans_per_run``, with ``iterations`` as its unit of repetition."""

SPAN_TYPES: tuple[type[Any], ...] = (AgentSpan, LLMCallSpan, ToolCallSpan)
"""flowra's spans whose open and close are hook points (the plugin subscribes to these three)."""

# Turn events (streaming deltas left out: a handler for them switches flowra to streaming).
EVENT_TYPES: tuple[type[Any], ...] = tuple(
    getattr(hook_events, name)
    for name in hook_events.__all__
    if isinstance(getattr(hook_events, name), type) and not name.endswith("DeltaEvent")
)

OPEN, EXIT, EVENT = "open", "exit", "event"
type HookKind = tuple[str, type[Any]]  # (OPEN | EXIT | EVENT, span or event type)

START, END, RECORD, NOTE = 0, 1, 2, 3
type Action = tuple[int, int]  # (START | END | RECORD | NOTE, span or record index)
"""NOTE: take the time a span ends at (it ends at a later hook point, with this time)."""


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
    needs_context: bool  # the parent of a span, or current while a record was made (its exemplar)
    noted_end: bool  # ends with a time noted at an earlier hook point (a NOTE action)


@dataclasses.dataclass(frozen=True)
class Point:
    """One hook point of the run with work to replay (or counted, as an open of a span type that has)."""

    kind: HookKind
    actions: tuple[Action, ...]
    exits: bool = False  # an OPEN whose span's EXIT has work: the floor returns an exit callback there


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything one traced run made, tied to the hook points of the run (in order)."""

    iterations: int
    tracer_scope: tuple[str, str | None, str | None]  # name, version, schema URL
    meter_scope: tuple[str, str | None, str | None]
    spans: tuple[SpanSpec, ...]
    instruments: tuple[InstrumentSpec, ...]
    records: tuple[RecordSpec, ...]
    points: tuple[Point, ...]
    """In run order: every event of a type with work, every open of a span type with work at some
    open or exit, and the exits with work (their opens say so: ``exits``)."""
    workload: str = "tool_loop"
    """The workload it was captured on (a key of ``WORKLOADS``)."""

    def subscribed(self) -> set[HookKind]:
        """The span types (``OPEN``) and event types (``EVENT``) the floor subscribes to."""
        return {p.kind for p in self.points if p.kind[0] != EXIT}

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
                s.noted_end,
            )
            for s in self.spans
        )
        records = tuple(
            (self.instruments[r.instrument].name, sorted(r.attributes.items()), r.current, r.value if values else None)
            for r in self.records
        )
        points = tuple((p.kind[0], p.kind[1].__name__, p.actions, p.exits) for p in self.points)
        instruments = tuple(sorted(dataclasses.astuple(i) for i in self.instruments))
        return (spans, records, points, instruments)

    def describe(self) -> str:
        names = {START: "start", END: "end", RECORD: "record", NOTE: "note end time of"}
        lines = []
        for point in self.points:
            parts = [
                f"{names[a]} {self.spans[i].name if a != RECORD else self.instruments[self.records[i].instrument].name}"
                for a, i in point.actions
            ]
            kind, cls = point.kind
            lines.append(f"{kind} {cls.__name__}{' (exit has work)' if point.exits else ''}: {', '.join(parts) or '-'}")
        return "\n".join(lines)

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for point in self.points:
            key = f"{point.kind[0]} {point.kind[1].__name__}"
            kinds[key] = kinds.get(key, 0) + 1
        return {"spans": len(self.spans), "metric_records": len(self.records), "hook_points": kinds}


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
    """Captures the telemetry of runs of a runtime, tied to its hook points (see :func:`capture`).

    Subscribe with :meth:`subscribe_before`, then the telemetry's own handlers (the plugin's
    ``install`` or a :class:`Floor`), then :meth:`subscribe_after`."""

    def __init__(self) -> None:
        self.timeline = Timeline()
        self.spans = _SpanTap(self.timeline)
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(self.spans)
        self.meter_provider = TapMeterProvider(self.timeline)

    def _note(self, kind: str, cls: type[Any], span: object = None) -> None:
        self.timeline.entries.append(("point", (kind, cls, id(span), time.time_ns())))

    def subscribe_before(self, runtime: AgentRuntime) -> None:
        """Span handlers subscribed before the telemetry's: their exit callbacks run first."""
        for span_type in SPAN_TYPES:

            def on_open(event: Any, span_type: type[Any] = span_type) -> Callable[[BaseException | None], None]:
                span = event.data

                def on_exit(error: BaseException | None) -> None:
                    self._note(EXIT, span_type, span)

                return on_exit

            runtime.hooks.on_span(span_type, on_open)

    def subscribe_after(self, runtime: AgentRuntime) -> None:
        """Span handlers subscribed after the telemetry's (they run first at open: flowra runs span
        handlers latest first) and the event handlers (before the plugin acts: after all of them)."""
        for span_type in SPAN_TYPES:

            def on_open(event: Any, span_type: type[Any] = span_type) -> None:
                self._note(OPEN, span_type, event.data)

            runtime.hooks.on_span(span_type, on_open)
        for event_type in EVENT_TYPES:

            def on_event(event: Any, event_type: type[Any] = event_type) -> None:
                self._note(EVENT, event_type)

            runtime.hooks.on(event_type, on_event)

    def plan(self, iterations: int, workload: str = "tool_loop") -> Plan:
        entries = self.timeline.entries
        order = [value for kind, value in entries if kind == "start"]
        index = {span_id: i for i, span_id in enumerate(order)}
        ended: dict[int, ReadableSpan] = {}
        for span_id in order:
            span = self.spans.ended.get(span_id)
            if span is None:
                raise RuntimeError("a span of the captured run never ended")
            ended[span_id] = span
        # Hook points in order, with their marker times; every action goes to the current one.
        points: list[tuple[HookKind, list[Action]]] = []
        times: list[int] = []
        open_of: dict[int, int] = {}  # an EXIT point -> the OPEN point of its span
        opened: dict[tuple[type[Any], int], int] = {}  # (span type, id of flowra's span) -> its OPEN point
        records: list[RecordSpec] = []
        noted: set[int] = set()
        for kind, value in entries:
            if kind == "point":
                point_kind, cls, key, at = value
                if point_kind == OPEN:
                    opened[(cls, key)] = len(points)
                elif point_kind == EXIT:
                    open_of[len(points)] = opened.pop((cls, key))
                points.append(((point_kind, cls), []))
                times.append(at)
                continue
            if not points:
                raise RuntimeError(f"telemetry before the run's first hook point: {kind}")
            actions = points[-1][1]
            if kind == "start":
                actions.append((START, index[value]))
            elif kind == "end":
                span = ended[value]
                end_time = span.end_time or 0
                if end_time < times[-1]:  # ended with a time taken at an earlier hook point
                    earlier = max(i for i, t in enumerate(times) if t <= end_time)
                    points[earlier][1].append((NOTE, index[value]))
                    noted.add(index[value])
                actions.append((END, index[value]))
            else:
                instrument, amount, attributes, current = value
                records.append(RecordSpec(instrument, amount, attributes, index.get(current)))
                actions.append((RECORD, len(records) - 1))
        spans: list[SpanSpec] = []
        for i, span_id in enumerate(order):
            span = ended[span_id]
            start = self.spans.start_attributes[span_id]
            final = dict(span.attributes or {})
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
                    parent=index.get(span.parent.span_id) if span.parent is not None else None,
                    start_attributes=start,
                    end_attributes={k: v for k, v in final.items() if k not in start or start[k] != v},
                    links=links,
                    status=status,
                    events=tuple((e.name, dict(e.attributes or {})) for e in span.events),
                    needs_context=False,
                    noted_end=i in noted,
                )
            )
        contexts = {s.parent for s in spans} | {r.current for r in records}
        spans = [dataclasses.replace(s, needs_context=i in contexts) for i, s in enumerate(spans)]
        # Kept: every hook point the floor's handlers see (events of a type with work, opens of a
        # span type with work at an open or an exit) and the exits with work.
        busy_exits = {i for i, (kind, actions) in enumerate(points) if kind[0] == EXIT and actions}
        exits_at = {open_of[i] for i in busy_exits}
        busy = {kind for kind, actions in points if actions}
        subscribed = {(OPEN, cls) for kind, cls in busy if kind != EVENT} | {k for k in busy if k[0] == EVENT}
        kept = [
            Point(kind, tuple(actions), exits=i in exits_at)
            for i, (kind, actions) in enumerate(points)
            if kind in subscribed or i in busy_exits
        ]
        scope = ended[order[0]].instrumentation_scope if order else None
        return Plan(
            iterations=iterations,
            workload=workload,
            tracer_scope=(scope.name, scope.version, scope.schema_url) if scope else ("floor", None, None),
            meter_scope=self.meter_provider.scopes[0] if self.meter_provider.scopes else ("floor", None, None),
            spans=tuple(spans),
            instruments=tuple(self.meter_provider.specs),
            records=tuple(records),
            points=tuple(kept),
        )

    def reset(self) -> None:
        self.timeline.entries.clear()
        self.spans.start_attributes.clear()
        self.spans.ended.clear()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.inner.shutdown()


async def capture(
    install: Callable[[AgentRuntime, trace.TracerProvider, metrics.MeterProvider], object],
    iterations: int,
    workload_name: str = "tool_loop",
) -> Plan:
    """The plan of one traced run: ``install(runtime, tracer_provider, meter_provider)`` puts the
    telemetry on the runtime (e.g. ``OtelHooks(tracer_provider=..., meter_provider=...).install``);
    a first run warms up, the second is captured."""
    workload = WORKLOADS[workload_name]
    recorder = Recorder()
    runtime = workload.build_runtime(iterations)
    recorder.subscribe_before(runtime)
    install(runtime, recorder.tracer_provider, recorder.meter_provider)
    recorder.subscribe_after(runtime)
    await workload.check_run(runtime, iterations)
    recorder.reset()
    await workload.run_once(runtime)
    plan = recorder.plan(iterations, workload_name)
    recorder.shutdown()
    return plan


# ------------------------------------------------------------------------------------------ replay


_RUN: contextvars.ContextVar[dict[Any, Any]] = contextvars.ContextVar("modern_floor_run")
_COUNT = "n"  # key of the run's hook-point count in its dict (span indexes are ints)


class Floor:
    """Plain ``runtime.hooks`` handlers that make a :class:`Plan`'s spans and records with the raw SDK.

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
        # Per record: the bound record/add method of its instrument, its value, its attributes, and
        # the span whose context it is made in (None: no span is current, as for the plugin's).
        self.records: list[tuple[Callable[..., None], float, dict[str, Any], int | None]] = []
        if meter_provider is not None:
            meter = meter_provider.get_meter(plan.meter_scope[0], plan.meter_scope[1], schema_url=plan.meter_scope[2])
            made = [create_instrument(meter, spec) for spec in plan.instruments]
            self.records = [(made[r.instrument], r.value, r.attributes, r.current) for r in plan.records]
        # Per hook point, in run order: its actions (records left out without a meter), and for an
        # open whether its span's exit has work (the handler then returns the exit callback).
        self.steps: list[tuple[tuple[Action, ...], bool]] = [
            (tuple(a for a in p.actions if a[0] != RECORD or self.records), p.exits) for p in plan.points
        ]

    def install(self, runtime: AgentRuntime) -> None:
        subscribed = self.plan.subscribed()
        for span_type in SPAN_TYPES:
            if (OPEN, span_type) in subscribed:
                runtime.hooks.on_span(span_type, self._open)
        for event_type in EVENT_TYPES:
            if (EVENT, event_type) in subscribed:
                runtime.hooks.on(event_type, self._step)

    @staticmethod
    def begin_run() -> None:
        _RUN.set({_COUNT: 0})

    def _open(self, event: Any) -> Callable[[BaseException | None], None] | None:
        # The exit callback is ``_step`` itself (no layer of its own; flowra ignores its result).
        return cast("Callable[[BaseException | None], None]", self._step) if self._step(event) else None

    def _step(self, event: Any) -> bool:
        """Replay the run's next hook point; True when it is an open whose exit has work."""
        run = _RUN.get()
        step: int = run[_COUNT]
        run[_COUNT] = step + 1
        actions, exits = self.steps[step]
        for kind, index in actions:
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
                if spec.needs_context:
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
                span.end(run.pop((index, "t")) if spec.noted_end else None)
            elif kind == NOTE:
                run[(index, "t")] = time.time_ns()
            else:
                record, value, attributes, current = self.records[index]
                record(value, attributes, run[(current, "ctx")] if current is not None else None)
        return exits


async def verify(plan: Plan) -> None:
    """Replay ``plan`` once under a :class:`Recorder`: the floor must make the very same telemetry."""
    workload = WORKLOADS[plan.workload]
    recorder = Recorder()
    runtime = workload.build_runtime(plan.iterations)
    recorder.subscribe_before(runtime)
    Floor(plan, recorder.tracer_provider, recorder.meter_provider).install(runtime)
    recorder.subscribe_after(runtime)
    Floor.begin_run()
    await workload.check_run(runtime, plan.iterations)
    replayed = recorder.plan(plan.iterations, plan.workload)
    recorder.shutdown()
    if replayed.signature() != plan.signature():
        raise RuntimeError(
            "the floor's telemetry differs from the plugin's run:\n--- plugin\n"
            + plan.describe()
            + "\n--- floor\n"
            + replayed.describe()
        )


__all__ = ["Floor", "Plan", "Recorder", "capture", "verify"]
