"""A benchmark-only build of the modern adapter: one mechanism switched off, to count what it costs.

``bench.py --knockouts`` counts the plugin with each of these switched off (``worker.py runs
--knockout NAME``, applied in the worker's process before anything is installed); the plugin's
count minus the knockout's is what the mechanism costs per run. A knockout gives up the
guarantee its mechanism keeps (that is the point): it exists here, never in the package.

Where switching a mechanism off also drops telemetry (the tool spans), the floor's share of that
telemetry is counted the same way: ``floor_plan`` takes it out of the exact floor's plan, and the
driver prints the floor's difference beside the plugin's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import Any, Final

import replay

KNOCKOUTS: Final = {
    "flowing": "the flowing value's context: the frame's span made current around every step (on_enter/on_exit)",
    "emit_patch": "the emit patch: flowra's own emit, the tracing acts in the handler loop (before later hooks)",
    "ledger": "the redaction ledger (a FieldTracker watching each handler of a content event)",
    "settle": "AgentScope.settle's search of the next request for the results the model is given",
    "tool_spans": "tool-span opening: no execute_tool span and no frame for a tool call (floor: without them)",
    "attributes": "attribute building: each attribute builder returns what it built first (the SDK sets as many)",
    "content": "content rendering: each renderer method returns what it rendered first (the SDK sets as many)",
}


def apply(names: Iterable[str]) -> None:
    """Switch the named mechanisms off in this process (before the plugin is installed)."""
    for name in names:
        if name not in KNOCKOUTS:
            raise ValueError(f"unknown knockout {name!r} (known: {', '.join(KNOCKOUTS)})")
        globals()[f"_{name}"]()


def floor_plan(plan: replay.Plan, names: Iterable[str]) -> replay.Plan:
    """The floor of the plugin with ``names`` switched off: the plan without the telemetry they drop."""
    if "tool_spans" in names:
        return without_spans(plan, lambda s: s.start_attributes.get("gen_ai.operation.name") == "execute_tool")
    return plan


def without_spans(plan: replay.Plan, drop: Callable[[replay.SpanSpec], bool]) -> replay.Plan:
    """``plan`` without the spans ``drop`` names and their measurements (those made with one of
    them current, or named for its operation); their children parent under their parent."""
    gone = {i for i, s in enumerate(plan.spans) if drop(s)}
    names = {plan.spans[i].start_attributes.get("gen_ai.operation.name") for i in gone}

    def parent(i: int | None) -> int | None:
        while i is not None and i in gone:
            i = plan.spans[i].parent
        return i

    spans = tuple(
        dataclasses.replace(s, parent=parent(s.parent), links=tuple(link for link in s.links if link[0] not in gone))
        if i not in gone
        else s
        for i, s in enumerate(plan.spans)
    )
    records = {
        i
        for i, r in enumerate(plan.records)
        if r.current not in gone and r.attributes.get("gen_ai.operation.name") not in names
    }
    points = tuple(
        dataclasses.replace(
            p,
            actions=tuple(
                a
                for a in p.actions
                if (a[0] == replay.RECORD and a[1] in records) or (a[0] != replay.RECORD and a[1] not in gone)
            ),
        )
        for p in plan.points
    )
    contexts = {s.parent for i, s in enumerate(spans) if i not in gone}
    spans = tuple(dataclasses.replace(s, needs_context=s.needs_context or i in contexts) for i, s in enumerate(spans))
    return dataclasses.replace(plan, spans=spans, points=points)


# ------------------------------------------------------------------------------------------ the switches


def _flowing() -> None:
    from flowra_otel.adapters.runtime_hooks import tracing

    setattr(tracing, "enter", None)  # noqa: B010  # create_var(on_enter=None, on_exit=None)
    setattr(tracing, "exit_", None)  # noqa: B010


def _emit_patch() -> None:
    from flowra_otel.adapters.runtime_hooks import emit_patch, tracing

    emit_patch.install = lambda owner=None: None

    def on_event(self: Any, event: Any) -> None:  # a plain handler: acts where flowra calls it
        self.event_done(event, None, 0, None)

    tracing.RuntimeTracing.on_event = on_event  # type: ignore[method-assign]


def _ledger() -> None:
    from flowra_otel.adapters.runtime_hooks import emit_patch

    emit_patch._tracker = lambda field, data: None


def _settle() -> None:
    from flowra_otel.adapters.runtime_hooks import frames

    settle = frames.AgentScope.settle

    def settle_as_left(self: Any, messages: Any, tools: Any = None) -> None:
        settle(self, None, tools)

    frames.AgentScope.settle = settle_as_left  # type: ignore[method-assign]


def _tool_spans() -> None:
    from flowra_otel.adapters.runtime_hooks import tracing

    tracing.RuntimeTracing._open_tool = lambda self, tool_use, stack: None  # type: ignore[method-assign]


def _first(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` that builds once and then returns a copy of what it built first."""
    built: list[Any] = []

    @functools.wraps(function)
    def first(*args: Any, **kwargs: Any) -> Any:
        if not built:
            built.append(function(*args, **kwargs))
        value = built[0]
        return dict(value) if isinstance(value, dict) else value

    return first


def _attributes() -> None:
    from flowra_otel.core import attributes

    for name in ("chat_start_attributes", "chat_response_attributes", "usage_attributes", "loop_result_attributes"):
        setattr(attributes, name, _first(getattr(attributes, name)))


def _content() -> None:
    from flowra_otel.core.content import ContentRenderer

    for name in (
        "request_messages",
        "request_system",
        "conversation",
        "tool_definitions",
        "output_messages",
        "tool_arguments",
        "tool_result",
        "result_text",
        "text",
    ):
        original = getattr(ContentRenderer, name)
        setattr(ContentRenderer, name, _first(original))


__all__ = ["KNOCKOUTS", "apply", "floor_plan", "without_spans"]
