"""Issue 18, cost on flowra 0.0.93: a content event only the plugin's marker subscribes to skips
the handler loop, and nothing a user can observe tells the two paths apart.

When the one handler of a content event (``StartTurnEvent`` ... ``AfterToolCallEvent``) is the
tracing's marker, the emit patch hands the agent a coroutine that acts on the event when awaited
(no ``Event`` envelope, no ledger, no loop; a ``BeforeToolCallEvent`` no hook saw tells the
tracing nothing at all), and an event nothing subscribes to goes straight to flowra's ``emit``.
These tests hold the fast path to the loop:

* the same trace, attribute for attribute, and the same metrics as runs where a user hook on every
  content event forces the loop (the loop itself is tested everywhere else), with content
  capture on and off, for two calls in one message, a second message, an error result and a
  conversation id from the spec's metadata; and the fast path really ran (no loop);
* paired negative: a fast path that does not act makes the traces differ.

Real ``AgentRuntime`` and ``TurnAgent``, scripted provider, real OpenTelemetry SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import _flowra, emit_patch
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import (
    INPUT_EVENT,
    ScriptedProvider,
    explode,
    get_weather,
    run_turn,
    text_response,
    tool_calls_response,
    turn_runtime,
)

MakeHooks = Callable[..., OtelHooks]
DURATIONS = {"gen_ai.client.operation.duration", "gen_ai.execute_tool.duration", "gen_ai.invoke_agent.duration"}
type Points = dict[tuple[str, str], tuple[int, float]]


def _script() -> ScriptedProvider:
    return ScriptedProvider(
        tool_calls_response(("c1", "get_weather", {"city": "Paris"}), ("c2", "get_weather", {"city": "Oslo"})),
        tool_calls_response(("c3", "explode", {"city": "Rome"})),
        text_response("done"),
    )


def _comparable(nodes: list[span_tree.Node]) -> list[Any]:
    return [(n.name, n.kind, n.status, n.attrs, _comparable(n.children)) for n in nodes]


def _metrics(reader: InMemoryMetricReader) -> Points:
    """Every data point (cumulative) by metric and attributes: its count and sum (a histogram's)
    or value (a counter's, count 0)."""
    points: Points = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, str(sorted((point.attributes or {}).items())))
                    points[key] = (getattr(point, "count", 0), getattr(point, "sum", getattr(point, "value", 0)))
    return points


def _recorded(before: Points, after: Points) -> dict[tuple[str, str], tuple[int, float | None]]:
    """What one run added: counts and sums per data point (durations: counts only)."""
    added: dict[tuple[str, str], tuple[int, float | None]] = {}
    for key, (count, total) in after.items():
        count_before, total_before = before.get(key, (0, 0))
        if (count, total) != (count_before, total_before):
            added[key] = (count - count_before, None if key[0] in DURATIONS else total - total_before)
    return added


class _Loops:
    """Counts the content events that took the handler loop (``_emit_watched``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        looped = emit_patch._emit_watched

        def counting(hooks: Any, data: Any, original: Any) -> Any:
            if type(data) in _flowra.CONTENT_EVENTS:
                self.count += 1
            return looped(hooks, data, original)

        monkeypatch.setattr(emit_patch, "_emit_watched", counting)


async def _run(
    make_otel_hooks: MakeHooks,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
    *,
    loop: bool,
    capture_content: bool,
) -> tuple[list[Any], dict[tuple[str, str], tuple[int, float | None]]]:
    already = len(exporter.get_finished_spans())
    before = _metrics(reader)
    runtime = traced(make_otel_hooks, turn_runtime(_script(), get_weather, explode), capture_content=capture_content)
    seen: list[str] = []
    if loop:  # a hook that changes nothing: every content event takes the loop
        for event_type in _flowra.CONTENT_EVENTS:
            runtime.hooks.on(event_type, lambda event: seen.append(type(event.data).__name__))
    result = await run_turn(runtime, "Weather, please", conversation_id="conv-7")
    assert str(result.status) == "completed"
    if loop:
        assert {INPUT_EVENT.__name__, "BeforeToolCallEvent", "AfterToolCallEvent"} <= set(seen)
    trace = _comparable(span_tree.build(exporter.get_finished_spans()[already:], None))
    return trace, _recorded(before, _metrics(reader))


@pytest.mark.parametrize("capture_content", [False, True], ids=["content_off", "content_on"])
async def test_the_fast_path_records_what_the_handler_loop_records(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
    monkeypatch: pytest.MonkeyPatch,
    capture_content: bool,
) -> None:
    loops = _Loops(monkeypatch)
    alone, alone_metrics = await _run(
        make_otel_hooks, span_exporter, metric_reader, loop=False, capture_content=capture_content
    )
    assert loops.count == 0, "with the marker alone, no content event may take the loop"
    with_loop, loop_metrics = await _run(
        make_otel_hooks, span_exporter, metric_reader, loop=True, capture_content=capture_content
    )
    assert loops.count > 0

    assert span_tree.shape([_node(t) for t in alone]) == [
        (
            "invoke_agent assistant",
            [
                ("chat sonnet-4-5", []),
                ("execute_tool get_weather", []),
                ("execute_tool get_weather", []),
                ("chat sonnet-4-5", []),
                ("execute_tool explode", []),
                ("chat sonnet-4-5", []),
            ],
        )
    ]
    assert alone == with_loop
    assert alone_metrics == loop_metrics
    assert {name for name, _ in alone_metrics} >= {"gen_ai.client.token.usage", "gen_ai.execute_tool.duration"}
    assert any("gen_ai.conversation.id" in str(t) for t in alone)
    assert_all_ended(ledger, span_exporter)


async def test_a_fast_path_that_does_not_act_is_caught(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negative: the fast path made a no-op (the event passes, the tracing never hears of
    it); the comparison above then fails: results, error status and conversation id go missing."""

    async def deaf(tracing: Any, data: Any) -> Any:
        return data

    monkeypatch.setattr(emit_patch, "_traced_alone", deaf)
    alone, _ = await _run(make_otel_hooks, span_exporter, metric_reader, loop=False, capture_content=True)
    with_loop, _ = await _run(make_otel_hooks, span_exporter, metric_reader, loop=True, capture_content=True)
    assert alone != with_loop


def _node(t: Any) -> span_tree.Node:
    name, kind, status, attrs, children = t
    return span_tree.Node(name, kind, attrs, status, [_node(c) for c in children])
