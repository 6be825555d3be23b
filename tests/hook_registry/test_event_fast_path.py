"""Issue "Tracing cost": an event only the plugin's handler sees skips flowra's handler loop, and
nothing a user can observe tells the two paths apart.

When the one handler a plain ``HookRegistry`` has for an event is an ``OtelHooks``'s, the emit
patch hands the agent a coroutine that acts on the event and returns it (no ``Event`` envelope,
no handler loop). These tests hold it to the loop's behaviour:

* the same trace, attribute for attribute, as a run where a user hook on every event forces the
  loop (the loop itself is tested everywhere else);
* an emit that is never awaited leaves no trace, as flowra's own emit runs no handler then;
* steps set their scope and spans without resetting them, because every engine step is a task of
  its own: the caller of ``run()`` must find its context exactly as it left it.

Real ``AgentRuntime`` and ``ToolLoopAgent``, scripted provider, real OpenTelemetry SDK.
"""

from typing import Any

from flowra.agent import HookRegistry
from flowra.lib.tool_loop import (
    AfterLLMCallEvent,
    AfterToolCallEvent,
    BeforeLLMCallEvent,
    BeforeToolCallEvent,
    MessageAcceptedEvent,
    UserMessageEvent,
)
from flowra.llm import TextBlock, UserMessage
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolResult
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import patches as otel_patches
from tests import span_tree
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

TRACED_EVENTS = (
    UserMessageEvent,
    MessageAcceptedEvent,
    BeforeLLMCallEvent,
    AfterLLMCallEvent,
    BeforeToolCallEvent,
    AfterToolCallEvent,
)
VOLATILE = {"gen_ai.tool.call.id"}  # the same in both runs, but listed to keep the check honest


def _tool(name: str, handler: Any) -> LocalTool:
    return LocalTool(
        definition=ToolDefinition(name=name, description="A test tool.", input_schema={"type": "object"}),
        handler=handler,
    )


def _script() -> ScriptedProvider:
    return ScriptedProvider(
        [
            tool_calls_response([("c1", "probe", {"label": "a"}), ("c2", "probe", {"label": "b"})]),
            tool_calls_response([("c3", "probe", {"label": "c"})]),
            text_response("done"),
        ]
    )


async def _probe(ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult(content="probed")


def _comparable(nodes: list[span_tree.Node]) -> list[Any]:
    return [
        (n.name, n.kind, n.status, {k: v for k, v in n.attrs.items() if k not in VOLATILE}, _comparable(n.children))
        for n in nodes
    ]


async def _trace_of(registry: HookRegistry, exporter: InMemorySpanExporter) -> list[Any]:
    already = len(exporter.get_finished_spans())
    async with tool_registry(_tool("probe", _probe)) as tools:
        result = await run_tool_loop(tool_loop_runtime(_script(), tools, registry), "go")
    assert result.status.value == "completed"
    return _comparable(span_tree.build(exporter.get_finished_spans()[already:], None))


async def test_the_fast_path_records_what_the_handler_loop_records(
    make_otel_hooks: Any, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    otel = make_otel_hooks(capture_content=True)
    alone = await _trace_of(hooks_with(otel), span_exporter)

    seen: list[str] = []
    looped = hooks_with(otel)
    for event_type in TRACED_EVENTS:  # a hook that changes nothing: every event takes the loop
        looped.on(event_type, lambda event: seen.append(type(event.data).__name__))
    with_loop = await _trace_of(looped, span_exporter)

    assert "BeforeToolCallEvent" in seen and "AfterLLMCallEvent" in seen, "the loop must have run"
    assert [n[0] for n in alone] == ["invoke_agent assistant"]
    assert alone == with_loop
    assert_all_ended(ledger, span_exporter)


async def test_an_emit_that_is_never_awaited_leaves_no_trace(
    make_otel_hooks: Any, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    registry = hooks_with(make_otel_hooks(capture_content=True))

    async def second_thoughts(ctx: ToolExecutionContext) -> ToolResult:
        # Builds an emit, then decides against it: flowra's own emit would run no handler.
        pending = registry.emit(UserMessageEvent(messages=[UserMessage(blocks=[TextBlock(text="dropped text")])]))
        pending.close()
        return ToolResult(content="probed")

    provider = ScriptedProvider([tool_calls_response([("c1", "reconsider", {})]), text_response("done")])
    async with tool_registry(_tool("reconsider", second_thoughts)) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, registry), "go")

    tree = span_tree.build(span_exporter.get_finished_spans(), None)
    assert span_tree.shape(tree) == [
        ("invoke_agent assistant", [("chat sonnet-4-5", []), ("execute_tool reconsider", []), ("chat sonnet-4-5", [])])
    ]
    for node in span_tree.walk(tree):
        assert "dropped text" not in str(node.attrs), f"an unawaited event was recorded on {node.name}"
    assert_all_ended(ledger, span_exporter)


async def test_a_traced_run_leaves_the_callers_context_as_it_found_it(
    otel_hooks: OtelHooks, tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("request") as request:
        before = otel_context.get_current()
        async with tool_registry(_tool("probe", _probe)) as tools:
            await run_tool_loop(tool_loop_runtime(_script(), tools, hooks_with(otel_hooks)), "go")
        # Steps set their scope, their execute_tool span and their chat span without resetting
        # them: that is sound only because each step runs in a task of its own.
        assert otel_context.get_current() is before
        assert trace.get_current_span() is request
        assert otel_patches.current_step() is None
    assert len(span_exporter.get_finished_spans()) == 1 + 1 + 3 + 3  # request, agent, chats, tools
    assert_all_ended(ledger, span_exporter)
