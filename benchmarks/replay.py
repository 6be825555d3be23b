"""The exact floor: the plugin's own telemetry of one run, replayed per run beside bare flowra.

What any instrumentation that emits this telemetry must pay, with nothing of the plugin's own:
bare flowra plus plain hook handlers that make exactly the spans the plugin made (same names,
kinds, scope, parents, links, events, status, start and end attributes, content strings
included) and exactly its metric measurements (instrument, value, attribute set, and the span
current at the time, which decides the exemplar), through the same SDK set-up, at the same hook
points of the run, from values built before the measured runs (no parsing, no rendering inside
them). See docs/performance.md ("The exact floor").

1. :func:`capture`: one traced run of the plugin (after a warm-up run). A span processor and a
   meter provider wrapping a real SDK one (``sdk.SpanTap``, ``sdk.TapMeterProvider``) note every
   span start and end and every measurement; markers note every hook point (the line module
   subscribes them: span opens and exits and turn events on flowra 0.0.56+, the tool loop's
   events on 0.0.3 - 0.0.8). One timeline ties each action to the hook point during which it
   happened; a span ended with a time taken at an earlier hook point gets that point as a NOTE
   (the floor takes the time there and ends the span later with it, as the plugin does).
2. :class:`Floor` replays the :class:`Plan` in a bare flowra run: one plain handler per hook-point
   type with work, a per-run dict (open spans, their contexts, noted times, the point count)
   found through a ``ContextVar`` that the run function sets.
3. :func:`check`: the floor's own run, captured the same way, must equal the plugin's: every span
   field, every measurement, every hook point's actions, and the data points the SDK aggregated
   (counts, sums, buckets, exemplars). Any difference is printed and fails the benchmark.

Line-neutral: the hook points come from the line's module (``Line``); nothing here imports
flowra or ``flowra_otel``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from opentelemetry import metrics, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode
from sdk import (
    InstrumentSpec,
    PointKey,
    RecordSpec,
    SpanTap,
    TapMeterProvider,
    Timeline,
    create_instrument,
    data_points,
)

OPEN, EXIT, EVENT = "open", "exit", "event"
type HookKind = tuple[str, str]
"""(OPEN | EXIT | EVENT, the name of flowra's span or event type)."""

START, END, RECORD, NOTE = 0, 1, 2, 3
type Action = tuple[int, int]
"""(START | END | RECORD | NOTE, a span's or a record's index). NOTE: take the time a span ends
at (it ends at a later hook point, with this time)."""

type Note = Callable[[str, str, object], None]
"""``note(kind, type name, key)``: a marker saw a hook point (``key`` pairs a span's open and exit)."""


class Target(Protocol):
    """One built workload of a line (``modern_line.Bench``, ``old_line.Bench``)."""

    async def run(self) -> object: ...

    async def check(self) -> None: ...


class Line(Protocol):
    """What the replay needs of a flowra line's module."""

    def subscribe_markers(self, bench: Any, note: Note, *, before: bool) -> None:
        """Markers on every hook point: ``before`` the telemetry's own subscriptions (their exit
        callbacks run first), else after them (they run first at an open, and before the
        plugin acts on an event)."""
        ...

    def subscribe_floor(self, bench: Any, floor: Floor) -> None:
        """``floor.open`` / ``floor.step`` on the hook points of ``floor.plan.subscribed()``, and
        ``Floor.begin_run`` before each run."""
        ...


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
    scope: tuple[str, str | None, str | None]  # the instrumentation scope: name, version, schema URL


@dataclasses.dataclass(frozen=True)
class Point:
    """One hook point of the run with work to replay (or counted: an open of a type that has)."""

    kind: HookKind
    actions: tuple[Action, ...]
    exits: bool = False  # an OPEN whose span's EXIT has work: the floor returns an exit callback there


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything one traced run made, tied to the hook points of the run (in order)."""

    workload: str
    meter_scope: tuple[str, str | None, str | None]
    spans: tuple[SpanSpec, ...]
    instruments: tuple[InstrumentSpec, ...]
    records: tuple[RecordSpec, ...]
    points: tuple[Point, ...]
    """In run order: every event of a type with work, every open of a span type with work at some
    open or exit, and the exits with work (their opens say so: ``exits``)."""
    data_points: dict[PointKey, tuple[Any, ...]]
    """What the SDK aggregated from the run's measurements (per instrument and attribute set)."""
    order: tuple[tuple[int, int], ...]
    """Span starts and ends in the order they happened: (START | END, span index)."""

    def subscribed(self) -> set[HookKind]:
        """The span types (``OPEN``) and event types (``EVENT``) the floor subscribes to."""
        return {p.kind for p in self.points if p.kind[0] != EXIT}

    def describe(self, *, spans_only: bool = False) -> list[str]:
        """Every fact the check compares, one line each: a difference shows as a diff of these
        (``spans_only``: the spans and their order alone)."""
        lines = []
        for i, s in enumerate(self.spans):
            lines.append(
                f"span {i}: {s.name!r} {s.kind.name} scope={s.scope} parent={s.parent} status={s.status} "
                f"noted_end={s.noted_end}"
            )
            lines.extend(f"  start {k}={v!r}" for k, v in sorted(s.start_attributes.items()))
            lines.extend(f"  end {k}={v!r}" for k, v in sorted(s.end_attributes.items()))
            lines.extend(f"  link {r if isinstance(r, int) else 'external'} {sorted(a.items())}" for r, a in s.links)
            lines.extend(f"  event {name} {sorted(a.items())}" for name, a in s.events)
        lines.append("span order " + " ".join(f"{'+' if a == START else '-'}{i}" for a, i in self.order))
        if spans_only:
            return lines
        for r in self.records:
            spec = self.instruments[r.instrument]
            lines.append(
                f"measurement {spec.kind} {spec.name} [{spec.unit}] value={r.value!r} current={r.current} "
                f"{sorted(r.attributes.items())}"
            )
        lines.extend(f"instrument {dataclasses.astuple(i)}" for i in sorted(self.instruments, key=dataclasses.astuple))
        lines.append(f"meter scope {self.meter_scope}")
        lines.extend(f"data point {k}: {v}" for k, v in sorted(self.data_points.items(), key=repr))
        names = {START: "start", END: "end", RECORD: "record", NOTE: "note"}
        lines.extend(
            f"point {p.kind[0]} {p.kind[1]}{' (exit has work)' if p.exits else ''}: "
            + ", ".join(f"{names[a]} {i}" for a, i in p.actions)
            for p in self.points
        )
        return lines

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for point in self.points:
            key = f"{point.kind[0]} {point.kind[1]}"
            kinds[key] = kinds.get(key, 0) + 1
        values = [v for s in self.spans for v in (*s.start_attributes.values(), *s.end_attributes.values())]
        return {
            "spans": len(self.spans),
            "attributes": len(values),
            "string_chars": sum(len(v) for v in values if isinstance(v, str)),
            "measurements": len(self.records),
            "hook_points": kinds,
        }


# ------------------------------------------------------------------------------------------ capture


class Recorder:
    """Captures the telemetry of one run of a bench, tied to its hook points (see :func:`capture`)."""

    def __init__(self) -> None:
        self.timeline = Timeline()
        self.spans = SpanTap(self.timeline)
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(self.spans)
        self.meter_provider = TapMeterProvider(self.timeline)

    def note(self, kind: str, name: str, key: object = None) -> None:
        self.timeline.entries.append(("point", (kind, name, id(key), time.time_ns())))

    async def record(self, bench: Target, workload: str) -> Plan:
        """A warm-up run (checked), then the run whose telemetry is the plan."""
        await bench.check()
        self.timeline.entries.clear()
        self.spans.start_attributes.clear()
        self.spans.ended.clear()
        data_points(self.meter_provider.reader)  # a delta reader: collected, the next read is one run's
        await bench.run()
        plan = self._plan(workload)
        self.tracer_provider.shutdown()
        self.meter_provider.inner.shutdown()
        return plan

    def _plan(self, workload: str) -> Plan:
        entries = self.timeline.entries
        starts = [value for kind, value in entries if kind == "start"]
        index = {span_id: i for i, span_id in enumerate(starts)}
        ended: dict[int, ReadableSpan] = {}
        for span_id in starts:
            span = self.spans.ended.get(span_id)
            if span is None:
                raise RuntimeError("a span of the captured run never ended")
            ended[span_id] = span
        # Hook points in order, with their marker times; every action goes to the current one
        # (actions before the first: to the first, as they happen when the run starts).
        points: list[tuple[HookKind, list[Action]]] = []
        times: list[int] = []
        open_of: dict[int, int] = {}  # an EXIT point -> the OPEN point of its span
        opened: dict[tuple[str, int], int] = {}  # (span type, id of flowra's span) -> its OPEN point
        records: list[RecordSpec] = []
        noted: set[int] = set()
        order: list[tuple[int, int]] = []
        early: list[Action] = []  # before the first hook point: done at it (the old line's run span)
        for kind, value in entries:
            if kind == "point":
                point_kind, name, key, at = value
                if point_kind == OPEN:
                    opened[(name, key)] = len(points)
                elif point_kind == EXIT:
                    open_of[len(points)] = opened.pop((name, key))
                points.append(((point_kind, name), early))
                early = []
                times.append(at)
                continue
            actions = points[-1][1] if points else early
            if kind == "start":
                actions.append((START, index[value]))
                order.append((START, index[value]))
            elif kind == "end":
                end_time = ended[value].end_time or 0
                if times and end_time < times[-1]:  # ended with a time taken at an earlier hook point
                    earlier = max((i for i, t in enumerate(times) if t <= end_time), default=0)
                    points[earlier][1].append((NOTE, index[value]))
                    noted.add(index[value])
                actions.append((END, index[value]))
                order.append((END, index[value]))
            else:
                instrument, amount, attributes, current = value
                records.append(RecordSpec(instrument, amount, attributes, index.get(current)))
                actions.append((RECORD, len(records) - 1))
        if early:
            raise RuntimeError("the captured run made telemetry but passed no hook point")
        spans: list[SpanSpec] = []
        for i, span_id in enumerate(starts):
            span = ended[span_id]
            start = self.spans.start_attributes[span_id]
            final = dict(span.attributes or {})
            status = span.status
            scope = span.instrumentation_scope
            spans.append(
                SpanSpec(
                    name=span.name,
                    kind=span.kind,
                    parent=index.get(span.parent.span_id) if span.parent is not None else None,
                    start_attributes=start,
                    end_attributes={k: v for k, v in final.items() if k not in start or start[k] != v},
                    links=tuple(
                        (index.get(link.context.span_id, link.context), dict(link.attributes or {}))
                        for link in span.links
                    ),
                    status=(status.status_code, status.description)
                    if status.status_code is not StatusCode.UNSET
                    else None,
                    events=tuple((e.name, dict(e.attributes or {})) for e in span.events),
                    needs_context=False,
                    noted_end=i in noted,
                    scope=(scope.name, scope.version, scope.schema_url) if scope is not None else ("", None, None),
                )
            )
        contexts = {s.parent for s in spans} | {r.current for r in records}
        spans = [dataclasses.replace(s, needs_context=i in contexts) for i, s in enumerate(spans)]
        # Kept: every hook point the floor's handlers see (events of a type with work, opens of a
        # span type with work at an open or an exit) and the exits with work.
        busy_exits = {i for i, (kind, actions) in enumerate(points) if kind[0] == EXIT and actions}
        exits_at = {open_of[i] for i in busy_exits}
        busy = {kind for kind, actions in points if actions}
        subscribed = {(OPEN, name) for kind, name in busy if kind != EVENT} | {k for k in busy if k[0] == EVENT}
        kept = [
            Point(kind, tuple(actions), exits=i in exits_at)
            for i, (kind, actions) in enumerate(points)
            if kind in subscribed or i in busy_exits
        ]
        return Plan(
            workload=workload,
            meter_scope=self.meter_provider.scopes[0] if self.meter_provider.scopes else ("floor", None, None),
            spans=tuple(spans),
            instruments=tuple(self.meter_provider.specs),
            records=tuple(records),
            points=tuple(kept),
            data_points=data_points(self.meter_provider.reader),
            order=tuple(order),
        )


async def capture(
    line: Line,
    build: Callable[[], Awaitable[Any]],
    install: Callable[[Any, trace.TracerProvider, metrics.MeterProvider], object],
    workload: str,
) -> Plan:
    """The plan of one run of ``build()``'s bench with ``install(bench, tracer_provider,
    meter_provider)``'s telemetry on it (the plugin as an app installs it, or a :class:`Floor`):
    markers subscribed before and after it, a warm-up run, then the captured run."""
    recorder = Recorder()
    bench = await build()
    line.subscribe_markers(bench, recorder.note, before=True)
    install(bench, recorder.tracer_provider, recorder.meter_provider)
    line.subscribe_markers(bench, recorder.note, before=False)
    return await recorder.record(bench, workload)


# ------------------------------------------------------------------------------------------ replay


_RUN: contextvars.ContextVar[dict[Any, Any]] = contextvars.ContextVar("floor_run")
_COUNT = "n"  # key of the run's hook-point count in its dict (span indexes are ints)


class Floor:
    """Plain handlers that make a :class:`Plan`'s spans and measurements with the raw SDK.

    Each run must start with :meth:`begin_run` (the line's ``subscribe_floor`` makes the bench
    call it before flowra's ``run``): it gives the run the one dict in which its open spans are kept.
    """

    def __init__(
        self, plan: Plan, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider | None
    ) -> None:
        self.plan = plan
        tracers: dict[tuple[str, str | None, str | None], trace.Tracer] = {}
        for spec in plan.spans:
            if spec.scope not in tracers:
                tracers[spec.scope] = tracer_provider.get_tracer(spec.scope[0], spec.scope[1], schema_url=spec.scope[2])
        # Per span: its tracer, built once.
        self.tracers = [tracers[s.scope] for s in plan.spans]
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

    @staticmethod
    def begin_run() -> None:
        _RUN.set({_COUNT: 0})

    def open(self, event: Any) -> Callable[[BaseException | None], None] | None:
        """A span handler (``on_span``): its exit callback is ``step`` itself when the exit has work."""
        return cast("Callable[[BaseException | None], None]", self.step) if self.step(event) else None

    def step(self, event: Any) -> bool:
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
                span = self.tracers[index].start_span(
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
                span = run[index]  # kept: a later span may link to it (the run's dict dies with the run)
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


async def check(line: Line, build: Callable[[], Awaitable[Any]], plan: Plan, *, metrics_on: bool = True) -> Plan:
    """Replay ``plan`` once under a :class:`Recorder`: the floor must make the very same telemetry
    (with ``metrics_on`` False: the same spans and no measurement). Prints every difference and
    raises if there is one; returns the replay's plan."""

    def install(bench: Any, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider) -> None:
        line.subscribe_floor(bench, Floor(plan, tracer_provider, meter_provider if metrics_on else None))

    replayed = await capture(line, build, install, plan.workload)
    if metrics_on:
        compare(plan.describe(), replayed.describe(), "the floor")
    else:
        compare(plan.describe(spans_only=True), replayed.describe(spans_only=True), "the floor without metrics")
        if replayed.records:
            raise RuntimeError("self-check failed: the floor without metrics made measurements")
    return replayed


def compare(expected: list[str], actual: list[str], what: str) -> None:
    """Raise, with a diff printed, unless ``actual`` (``what``'s telemetry) equals ``expected``."""
    if expected == actual:
        return
    diff = list(difflib.unified_diff(expected, actual, "plugin", what, lineterm="", n=2))
    shown = "\n".join(diff[:400]) + ("\n..." if len(diff) > 400 else "")
    raise RuntimeError(f"self-check failed: {what}'s telemetry differs from the plugin's run:\n{shown}")


__all__ = ["EVENT", "EXIT", "OPEN", "Floor", "Line", "Plan", "Recorder", "Target", "capture", "check", "compare"]
