"""A ``HookRegistry`` subclass traces, and keeps the redaction ledger, exactly as flowra's own.

Apps subclass ``HookRegistry`` (to log events, to wrap handlers, to give it slots of their
own). Whatever registry an agent is given, or a ``child_registry`` forwards to, the plugin
records the same spans and the same ledger: ``flowra.redaction.*`` on the ``execute_tool`` span
naming the hook that scrubbed the result (never flowra's ``propagate_to`` forwarder, never the
wrapper a subclass put around it), and one ``flowra.redactions`` metric point. Two ``OtelHooks``
on one subclass registry trace each event once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, ToolLoopStatus
from flowra.llm import ToolResultBlock
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import span_book
from flowra_otel.adapters.hook_registry.hooks import HookRegistryAdapter
from flowra_otel.core import semconv
from tests import span_tree
from tests.hook_registry.conftest import SpanLedger, assert_all_ended
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

MakeHooks = Callable[..., OtelHooks]
SSN = "123-45-6789"
CHAT = "chat sonnet-4-5"
SCRUB = f"{__name__}.scrub_ssn"


def lookup_customer(name: str) -> str:
    """A customer's record (it holds a secret)."""
    return f"{name}: SSN {SSN}"


def scrub_ssn(event: Event[AfterToolCallEvent]) -> None:
    """The app's redaction hook: the model never sees the SSN."""
    result = event.data.result
    event.data.result = ToolResultBlock(
        tool_use_id=result.tool_use_id, content=str(result.content).replace(SSN, "[SSN]"), is_error=result.is_error
    )


# ------------------------------------------------------------------------------ registry shapes
class PlainSubclass(HookRegistry):
    """No override at all (and, having no ``__slots__``, a ``__dict__`` of its own)."""


class SlottedSubclass(HookRegistry):
    __slots__ = ("label",)

    def __init__(self) -> None:
        super().__init__()
        self.label = "slotted"


class CountingEmit(HookRegistry):
    """Overrides ``emit``: counts the events, then flowra's own emit."""

    def __init__(self) -> None:
        super().__init__()
        self.emitted = 0

    async def emit[T](self, data: T) -> T:
        self.emitted += 1
        return await super().emit(data)


class WrappingOn(HookRegistry):
    """Overrides ``on``: wraps every handler (as a timing or error-logging registry would)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def on[E](self, event_type: type[E], handler: Callable[[Event[E]], Any], *, prepend: bool = False) -> None:
        @functools.wraps(handler)
        def wrapped(event: Event[E]) -> Any:
            self.calls += 1
            return handler(event)

        super().on(event_type, wrapped, prepend=prepend)


SHAPES: dict[str, Callable[[], HookRegistry]] = {
    "plain_registry": HookRegistry,
    "plain_subclass": PlainSubclass,
    "slotted_subclass": SlottedSubclass,
    "overridden_emit": CountingEmit,
    "overridden_on": WrappingOn,
}


def _registry(shape: str, hooks: OtelHooks, *, target: bool) -> HookRegistry:
    """The agent's registry: ``shape`` itself, or (``target``) a ``child_registry`` forwarding to it."""
    registry = SHAPES[shape]()
    registry.add(hooks)
    registry.on(AfterToolCallEvent, scrub_ssn)
    return OtelHooks.child_registry(registry, agent_path="assistant") if target else registry


async def _run(registry: HookRegistry) -> None:
    provider = ScriptedProvider(
        [tool_calls_response([("c1", "lookup_customer", {"name": "Ada"})]), text_response("Done.")]
    )
    async with tool_registry(lookup_customer) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Look up Ada")
    assert result.status == ToolLoopStatus.COMPLETED
    # The model was given the scrubbed result: the hook ran, once, whatever the registry.
    assert [str(b.content) for b in _results(provider)] == ["Ada: SSN [SSN]"]


def _results(provider: ScriptedProvider) -> list[ToolResultBlock]:
    return [b for m in provider.requests[-1].messages for b in m.blocks if isinstance(b, ToolResultBlock)]


def _redaction_points(reader: InMemoryMetricReader) -> list[tuple[dict[str, Any], int | float]]:
    data = reader.get_metrics_data()
    out: list[tuple[dict[str, Any], int | float]] = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "flowra.redactions":
                    out += [
                        (dict(p.attributes or {}), p.value)
                        for p in metric.data.data_points
                        if isinstance(p, NumberDataPoint)
                    ]
    return out


LEDGER = {
    "flowra.redaction.applied": True,
    "flowra.redaction.fields": ["result"],
    "flowra.redaction.result.handlers": [SCRUB],
    "flowra.redaction.result.original_length": len(f"Ada: SSN {SSN}"),
    "flowra.redaction.result.final_length": len("Ada: SSN [SSN]"),
}


@pytest.mark.parametrize("target", [False, True], ids=["agent_registry", "child_registry_target"])
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_every_registry_shape_gets_the_same_spans_and_ledger(
    shape: str,
    target: bool,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    registry = _registry(shape, make_otel_hooks(), target=target)
    await _run(registry)

    roots = span_tree.build(span_exporter.get_finished_spans(), tuple(LEDGER))
    assert span_tree.shape(roots) == [
        ("invoke_agent assistant", [(CHAT, []), ("execute_tool lookup_customer", []), (CHAT, [])])
    ]
    attrs = {n.name: n.attrs for n in span_tree.walk(roots)}
    assert attrs["execute_tool lookup_customer"] == LEDGER
    assert attrs["invoke_agent assistant"] == {}
    assert _redaction_points(metric_reader) == [
        ({semconv.GEN_AI_TOOL_NAME: "lookup_customer", "flowra.redaction.field": "result"}, 1)
    ]
    assert_all_ended(ledger, span_exporter)


async def test_two_otel_hooks_on_a_subclass_trace_each_event_once(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    registry = CountingEmit()
    registry.add(make_otel_hooks())
    registry.add(make_otel_hooks())
    registry.on(AfterToolCallEvent, scrub_ssn)
    await _run(registry)
    assert registry.emitted > 0
    roots = span_tree.build(span_exporter.get_finished_spans(), tuple(LEDGER))
    assert span_tree.shape(roots) == [
        ("invoke_agent assistant", [(CHAT, []), ("execute_tool lookup_customer", []), (CHAT, [])])
    ]
    assert {n.name: n.attrs for n in span_tree.walk(roots)}["execute_tool lookup_customer"] == LEDGER
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize("target", [False, True], ids=["agent_registry", "child_registry_target"])
async def test_without_the_ledger_loop_for_subclasses_the_redaction_is_lost_or_misnamed(
    target: bool,
    monkeypatch: pytest.MonkeyPatch,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    """Paired negative: ``SpanBook.emit`` made to run a subclass's handlers through flowra's own
    emit (``span_book.runs_handlers_itself`` false for every subclass), as before: the ledger
    misses the scrub on a subclass registry, and names flowra's ``propagate_to`` forwarder
    when the subclass is a ``child_registry`` target."""
    monkeypatch.setattr(span_book, "runs_handlers_itself", lambda registry: type(registry) is HookRegistry)
    await _run(_registry("plain_subclass", make_otel_hooks(), target=target))
    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool lookup_customer"]
    attrs = dict(tool.attributes or {})
    if target:
        (handler,) = attrs["flowra.redaction.result.handlers"]  # type: ignore[misc]
        assert str(handler).endswith("_forward")
    else:
        assert "flowra.redaction.applied" not in attrs
        assert _redaction_points(metric_reader) == []


async def test_without_registering_as_is_a_wrapping_on_hides_every_event(
    monkeypatch: pytest.MonkeyPatch, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """Paired negative: ``HookRegistryAdapter._register_as_is`` made a no-op: behind a subclass
    whose ``on`` wraps every handler, no handler is recognisably the plugin's, so no step or
    event is traced at all (the run itself is unaffected)."""
    monkeypatch.setattr(HookRegistryAdapter, "_register_as_is", lambda self, registry, event_type: None)
    registry = _registry("overridden_on", make_otel_hooks(), target=False)
    await _run(registry)
    assert isinstance(registry, WrappingOn) and registry.calls > 0
    assert span_exporter.get_finished_spans() == ()


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_uninstall_leaves_every_registry_shape_untraced(
    shape: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """``Installation.uninstall()`` on a runtime whose registry is a subclass: nothing of the
    plugin stays in its handler lists (a wrapper a subclass's ``on`` put around a handler, by
    ``functools.wraps``, goes with it), and the next run makes no span; the app's hook still runs."""
    provider = ScriptedProvider(
        [tool_calls_response([("c1", "lookup_customer", {"name": "Ada"})]), text_response("Done.")] * 2
    )
    registry = SHAPES[shape]()
    registry.on(AfterToolCallEvent, scrub_ssn)
    async with tool_registry(lookup_customer) as tools:
        runtime = tool_loop_runtime(provider, tools, registry)
        installation = make_otel_hooks().install(runtime)
        await run_tool_loop(runtime, "Look up Ada")
        traced = len(span_exporter.get_finished_spans())
        installation.uninstall()
        handlers = registry._HookRegistry__handlers  # type: ignore[attr-defined]
        assert list(handlers) == [AfterToolCallEvent]
        assert [getattr(h, "__wrapped__", h) for h in handlers[AfterToolCallEvent]] == [scrub_ssn]
        result = await run_tool_loop(runtime, "Look up Ada")
    assert result.status == ToolLoopStatus.COMPLETED
    assert traced == 4 and len(span_exporter.get_finished_spans()) == traced
    assert [str(b.content) for b in _results(provider)] == ["Ada: SSN [SSN]"]
