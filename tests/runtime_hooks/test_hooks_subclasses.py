"""A ``HooksImpl`` subclass traces, and keeps the redaction ledger, exactly as flowra's own.

flowra 0.0.86+ uses the ``HookSubscription`` service as ``runtime.hooks`` when it is a
``HooksImpl`` (a subclass included; ``AgentRuntime.__init__``), and gives agents views of it
(``for_agent``). The counterpart of ``tests/hook_registry/test_registry_subclasses.py``: whatever
the subclass overrides (nothing, ``for_agent`` with an ``emit`` of its own, ``on``/``on_span``
wrapping every handler), the spans, the ``flowra.redaction.*`` ledger naming the app's hook and
the ``flowra.redactions`` point are those of flowra's own ``HooksImpl``, and a second
``OtelHooks`` is still refused. Any other ``HookSubscription`` makes flowra give its agents no
hooks at all: ``install`` says so (``TypeError``) instead of tracing nothing, silently.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import pytest
from flowra.agent import Agent, AgentRuntime, step
from flowra.agent.flow.hooks import HooksImpl, HookSubscription
from flowra.lib.chat import ChatAgent
from flowra.lib.turn import hook_events
from flowra.llm import ToolResultBlock
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import _flowra
from flowra_otel.core import semconv
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended
from tests.runtime_hooks.support import (
    SSN,
    ScriptedProvider,
    chat_runtime,
    lookup_customer,
    replace_result_text,
    result_text,
    run_chat,
    scoped_hook,
    text_response,
    tool_calls_response,
)

MakeHooks = Callable[..., OtelHooks]
CHAT = "chat sonnet-4-5"
SCRUB = f"{__name__}.scrub_ssn"
LEDGER_KEYS = (
    "flowra.redaction.applied",
    "flowra.redaction.fields",
    "flowra.redaction.result.handlers",
    "flowra.redaction.result.original_length",
    "flowra.redaction.result.final_length",
)


def scrub_ssn(event: Any) -> None:
    """The app's redaction hook (agent-scoped): the model never sees the SSN."""
    event.data.result = replace_result_text(event.data.result, lambda text: text.replace(SSN, "[SSN]"))


# ------------------------------------------------------------------------------ hooks shapes
class PlainSubclass(HooksImpl):
    """No override at all."""

    __slots__ = ()


class OwnEmit(HooksImpl):
    """Agents get views of this class (``for_agent``), whose ``emit`` counts, then is flowra's."""

    __slots__ = ()
    emitted: int = 0

    def for_agent(self, context: Any) -> HooksImpl:
        return OwnEmit(context=context, _root=self._root)

    async def emit[T](self, data: T) -> T:
        OwnEmit.emitted += 1
        return await super().emit(data)


class WrappingOn(HooksImpl):
    """Wraps every handler it is given (as a timing or error-logging subscription would)."""

    __slots__ = ()
    calls: int = 0

    def on(self, event_type: Any, handler: Any, **kw: Any) -> None:
        super().on(event_type, self._wrap(handler), **kw)

    def on_span(self, span_type: Any, handler: Any, **kw: Any) -> None:
        super().on_span(span_type, self._wrap(handler), **kw)

    @staticmethod
    def _wrap(handler: Any) -> Any:
        @functools.wraps(handler)
        def wrapped(event: Any) -> Any:
            WrappingOn.calls += 1
            return handler(event)

        return wrapped


SHAPES: dict[str, Callable[[], HooksImpl] | None] = {
    "flowra_default": None,
    "plain_subclass": PlainSubclass,
    "own_emit": OwnEmit,
    "wrapping_on": WrappingOn,
}


def customer_runtime(shape: str) -> tuple[AgentRuntime, ScriptedProvider]:
    make = SHAPES[shape]
    provider = ScriptedProvider(
        tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("Looked up.")
    )
    services: dict[type, Any] = {HookSubscription: make()} if make is not None else {}
    runtime = chat_runtime(provider, lookup_customer, services=services)
    assert type(runtime.hooks) is (make if make is not None else HooksImpl)
    scoped_hook(runtime, hook_events.AfterToolCallEvent, scrub_ssn, ChatAgent)
    return runtime, provider


async def run_customer(runtime: AgentRuntime, provider: ScriptedProvider) -> None:
    result = await run_chat(runtime, "Look up Ada")
    assert result.response == "Looked up."
    given = [b for m in provider.requests[-1].messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert [result_text(b) for b in given] == ["Ada: SSN [SSN], card 4111 1111 1111 1111"]


def redaction_points(reader: InMemoryMetricReader) -> list[tuple[dict[str, Any], int | float]]:
    data = reader.get_metrics_data()
    out: list[tuple[dict[str, Any], int | float]] = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "flowra.redactions":
                    points = metric.data.data_points
                    out += [(dict(p.attributes or {}), p.value) for p in points if isinstance(p, NumberDataPoint)]
    return out


def ledger_of(exporter: InMemorySpanExporter) -> dict[str, Any]:
    roots = span_tree.build(exporter.get_finished_spans(), LEDGER_KEYS)
    assert span_tree.shape(roots) == [
        ("invoke_agent assistant", [(CHAT, []), ("execute_tool lookup_customer", []), (CHAT, [])])
    ]
    return {n.name: n.attrs for n in span_tree.walk(roots)}["execute_tool lookup_customer"]


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_every_hooks_subclass_gets_the_same_spans_and_ledger(
    shape: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    runtime, provider = customer_runtime(shape)
    make_otel_hooks().install(runtime)
    await run_customer(runtime, provider)

    ledger_attrs = ledger_of(span_exporter)
    assert {k: ledger_attrs[k] for k in LEDGER_KEYS[:3]} == {
        "flowra.redaction.applied": True,
        "flowra.redaction.fields": ["result"],
        "flowra.redaction.result.handlers": [SCRUB],
    }
    assert (
        ledger_attrs["flowra.redaction.result.original_length"] > ledger_attrs["flowra.redaction.result.final_length"]
    )
    assert redaction_points(metric_reader) == [
        ({semconv.GEN_AI_TOOL_NAME: "lookup_customer", "flowra.redaction.field": "result"}, 1)
    ]
    if shape == "own_emit":
        assert OwnEmit.emitted > 0
    # The plugin finds its own subscription on any subclass: a second OtelHooks is refused.
    with pytest.raises(ValueError, match="another OtelHooks already traces this runtime"):
        make_otel_hooks().install(runtime)
    assert_all_ended(ledger, span_exporter)


async def test_without_flowras_own_on_a_wrapping_subclass_loses_the_ledger_and_the_single_install(
    monkeypatch: pytest.MonkeyPatch, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """Paired negative: ``_flowra.subscribe`` / ``subscribe_span`` made to subscribe through the
    subclass's own ``on`` / ``on_span`` (which wrap the handler): the patched ``emit`` no longer
    finds the plugin's marker, so the redaction ledger is gone, and a second ``OtelHooks`` is
    installed beside the first instead of being refused."""
    monkeypatch.setattr(_flowra, "subscribe", lambda hooks, t, h: hooks.on(t, h))
    monkeypatch.setattr(_flowra, "subscribe_span", lambda hooks, t, h: hooks.on_span(t, h))
    runtime, provider = customer_runtime("wrapping_on")
    make_otel_hooks().install(runtime)
    await run_customer(runtime, provider)
    assert all(k not in ledger_of(span_exporter) for k in LEDGER_KEYS)
    make_otel_hooks().install(runtime)  # not refused: the first one cannot be found


# ------------------------------------------------------------------------------ not a HooksImpl
class CustomSubscription(HookSubscription):
    """A ``HookSubscription`` of the app's own: flowra gives agents no hooks from it."""

    def on(self, *args: Any, **kwargs: Any) -> None:
        pass

    def on_span(self, *args: Any, **kwargs: Any) -> None:
        pass

    def on_self_span(self, *args: Any, **kwargs: Any) -> None:
        pass


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Greeting:
    name: str


class Greeter(Agent[Greeting, Greeting]):
    """An agent that needs no hooks (so it runs with any ``HookSubscription``); it answers with a
    dataclass, as a step must before 0.0.56."""

    __slots__ = ()

    @step("greet", entry=True)
    async def greet(self, spec: Greeting) -> Greeting:
        return Greeting(name=f"Hello {spec.name}")


def custom_runtime() -> AgentRuntime:
    return AgentRuntime(agents={"greeter": Greeter}, services={HookSubscription: CustomSubscription()})


def test_a_subscription_that_is_not_a_hooks_impl_is_refused_at_install(make_otel_hooks: MakeHooks) -> None:
    runtime = custom_runtime()
    assert isinstance(runtime.hooks, HooksImpl)  # flowra made one of its own, which no agent emits on
    with pytest.raises(TypeError, match="HookSubscription service is a CustomSubscription, not a flowra HooksImpl"):
        make_otel_hooks().install(runtime)


async def test_without_the_check_a_foreign_subscription_is_traced_as_nothing(
    monkeypatch: pytest.MonkeyPatch, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """Paired negative: ``_flowra.check`` made to accept the runtime: ``install`` succeeds and the
    agent's run leaves no span at all (flowra opened none on the hooks the plugin watches)."""
    monkeypatch.setattr(_flowra, "check", lambda runtime: None)
    runtime = custom_runtime()
    make_otel_hooks().install(runtime)
    assert await runtime.run(agent=Greeter, spec=Greeting(name="Ada")) == Greeting(name="Hello Ada")
    assert span_exporter.get_finished_spans() == ()
