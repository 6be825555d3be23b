"""Issue "Tracing cost": a step the run does not trace runs as flowra's own coroutine, and a step
that turns out to need tracing half-way is adopted without losing anything.

The engine runs each step of each node as a task. The plugin wraps a step (one coroutine layer,
its scope set in that task) only for nodes it already traces, or whose agent's registry carries
an ``OtelHooks``; every other step keeps flowra's own ``__execute_node`` coroutine. When an event
such a step emits reaches an ``OtelHooks`` (here through ``propagate_to`` only, from the
BeforeLLMCallEvent on), the step is adopted: its node is read off the task, its end reported by a
done callback, so the tool calls it spawns are still bound to their ``execute_tool`` spans and the
tools run with those spans current.

Real ``AgentRuntime`` and ``ToolLoopAgent``, scripted provider, real OpenTelemetry SDK.
"""

import asyncio

from flowra.agent import HookRegistry
from flowra.lib.tool_loop import AfterLLMCallEvent, AfterToolCallEvent, BeforeLLMCallEvent, BeforeToolCallEvent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    create_tool_registry,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
)

TWO_CALLS = [("c1", "probe", {"label": "a"}), ("c2", "probe", {"label": "b"})]


def _script() -> ScriptedProvider:
    return ScriptedProvider([tool_calls_response(TWO_CALLS), text_response("done")])


def _step_coroutine_name() -> str:
    task = asyncio.current_task()
    assert task is not None
    return str(task.get_coro().cr_code.co_name)  # type: ignore[union-attr]


async def test_a_run_nothing_traces_keeps_flowras_own_step_coroutines(otel_hooks: OtelHooks) -> None:
    seen: list[str] = []

    def probe(label: str) -> str:
        """Note which coroutine runs the tool's step."""
        seen.append(_step_coroutine_name())
        return label

    hooks_with(otel_hooks)  # a recording OtelHooks elsewhere in the process: the patches are in
    untraced = HookRegistry()
    result = await run_tool_loop(tool_loop_runtime(_script(), await create_tool_registry(probe), untraced), "go")
    assert result.status.value == "completed"
    assert seen == ["__execute_node", "__execute_node"], "an untraced step must run unwrapped"

    # The same run traced: the tool-call steps run inside the plugin's step wrapper.
    seen.clear()
    traced = hooks_with(otel_hooks)
    await run_tool_loop(tool_loop_runtime(_script(), await create_tool_registry(probe), traced), "go")
    assert seen == ["_traced_step", "_traced_step"]


async def test_a_step_adopted_mid_run_binds_its_tool_calls_and_their_spans(
    otel_hooks: OtelHooks, tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    tracer = tracer_provider.get_tracer("app")

    def probe(label: str) -> str:
        """Make a span of the tool's own."""
        with tracer.start_as_current_span(f"inside {label}"):
            return label

    traced = hooks_with(otel_hooks)
    runtime_hooks = HookRegistry()  # no OtelHooks of its own: the loop's steps start unwrapped
    runtime_hooks.propagate_to(
        traced, only=[BeforeLLMCallEvent, AfterLLMCallEvent, BeforeToolCallEvent, AfterToolCallEvent]
    )
    result = await run_tool_loop(tool_loop_runtime(_script(), await create_tool_registry(probe), runtime_hooks), "go")
    assert result.status.value == "completed"

    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    tools = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool probe"]
    assert len(tools) == 2
    agent = spans["invoke_agent assistant"]
    for tool in tools:
        assert tool.parent is not None and agent.context is not None
        assert tool.parent.span_id == agent.context.span_id
    # The step that made the first LLM call was adopted; its Spawn bound each tool call to its
    # node, so each tool ran with its own execute_tool span current.
    by_call = {s.attributes["gen_ai.tool.call.id"]: s for s in tools if s.attributes}
    for label, call_id in (("a", "c1"), ("b", "c2")):
        inner = spans[f"inside {label}"]
        assert inner.parent is not None and by_call[call_id].context is not None
        assert inner.parent.span_id == by_call[call_id].context.span_id, label
    assert_all_ended(ledger, span_exporter)
