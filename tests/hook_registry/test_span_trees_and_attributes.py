"""Issue 2: the span tree and attributes of real flowra runs, on the real SDK.

Each test runs flowra's own agents through ``AgentRuntime`` with a scripted provider and
compares the whole normalised span tree, so a wrong parent, a missing or an extra span fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from collections.abc import Callable
from typing import Any

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import TextDeltaEvent, ThinkingDeltaEvent, ToolLoopAgentContext, ToolLoopStatus
from flowra.llm import LLMRequest, StopReason
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolResult
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import patches as otel_patches
from flowra_otel.adapters.hook_registry.span_book import SpanBook
from flowra_otel.core import semconv
from tests import span_tree
from tests.hook_registry.flowra_support import (
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    add,
    chat_runtime,
    fail_tool,
    first_user_text,
    get_weather,
    is_interrupted,
    make_slow_tool,
    research_tool,
    run_agent,
    run_chat,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    usage,
)

MakeHooks = Callable[..., OtelHooks]

CHAT_KEYS = (
    semconv.GEN_AI_OPERATION_NAME,
    semconv.GEN_AI_PROVIDER_NAME,
    semconv.GEN_AI_REQUEST_MODEL,
    semconv.GEN_AI_REQUEST_TEMPERATURE,
    semconv.GEN_AI_REQUEST_MAX_TOKENS,
    semconv.GEN_AI_REQUEST_STOP_SEQUENCES,
    semconv.GEN_AI_RESPONSE_FINISH_REASONS,
    semconv.GEN_AI_USAGE_INPUT_TOKENS,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    semconv.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
    semconv.FLOWRA_USAGE_COST_USD,
    semconv.FLOWRA_LLM_MODEL,
)


WEATHER_DESCRIPTION = "Get the current weather for a city."


def hooks_with(otel: OtelHooks) -> HookRegistry:
    registry = HookRegistry()
    registry.add(otel)
    return registry


def tree(exporter: InMemorySpanExporter, keys: tuple[str, ...] | None = None) -> list[span_tree.Node]:
    return span_tree.build(exporter.get_finished_spans(), keys)


def simple(nodes: list[span_tree.Node]) -> list[Any]:
    """(name, kind, status, children) without attributes."""
    return [(n.name, n.kind, n.status, simple(n.children)) for n in nodes]


# ------------------------------------------------------------------------------------ single loop
async def test_single_tool_loop_exact_tree_and_attributes(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    provider = ScriptedProvider(
        [
            tool_calls_response([("call_1", "get_weather", {"city": "Paris"})], usage=usage(10, 5, cache_read=3)),
            text_response("Sunny.", usage=usage(20, 7, cache_creation=2, cost_usd=0.25)),
        ]
    )
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(
            provider, tools, hooks_with(otel_hooks), temperature=0.2, max_tokens=256, stop_sequences=["END"]
        )
        result = await run_tool_loop(runtime, "Weather in Paris?")
    assert result.status == ToolLoopStatus.COMPLETED

    spans = tree(span_exporter)
    assert simple(spans) == [
        (
            "invoke_agent assistant",
            "INTERNAL",
            "UNSET",
            [
                ("chat sonnet-4-5", "CLIENT", "UNSET", []),
                ("execute_tool get_weather", "INTERNAL", "UNSET", []),
                ("chat sonnet-4-5", "CLIENT", "UNSET", []),
            ],
        )
    ]
    agent = spans[0]
    assert agent.attrs == {
        semconv.GEN_AI_OPERATION_NAME: "invoke_agent",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.FLOWRA_AGENT_PATH: "assistant",
        semconv.FLOWRA_NODE_ID: "r1",
        semconv.FLOWRA_TOOL_LOOP_STATUS: "completed",
        semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 2,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
        # The agent's own model settings, known at its start (one model per flowra tool loop).
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        semconv.FLOWRA_LLM_MODEL: "anthropic/sonnet-4-5",
        semconv.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        semconv.GEN_AI_REQUEST_MAX_TOKENS: 256,
        semconv.GEN_AI_REQUEST_STOP_SEQUENCES: ["END"],
        # The run's totals, under the keys the conventions give invoke_agent.
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10 + 3 + 20 + 2,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 12,
        # No cache counts on the internal agent span (#469): the chat spans carry them.
        semconv.FLOWRA_USAGE_COST_USD: 0.25,
    }
    chat1, tool, chat2 = agent.children
    request_attrs = {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "anthropic",
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        semconv.FLOWRA_LLM_MODEL: "anthropic/sonnet-4-5",
        semconv.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        semconv.GEN_AI_REQUEST_MAX_TOKENS: 256,
        semconv.GEN_AI_REQUEST_STOP_SEQUENCES: ["END"],
        semconv.GEN_AI_AGENT_NAME: "assistant",
    }
    assert chat1.attrs == {
        **request_attrs,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["tool_call"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 13,  # semconv counts cached tokens in input
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 3,
    }
    assert chat2.attrs == {
        **request_attrs,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 22,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
        semconv.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: 2,
        semconv.FLOWRA_USAGE_COST_USD: 0.25,
    }
    assert tool.attrs == {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "get_weather",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.GEN_AI_TOOL_CALL_ID: "call_1",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_TOOL_DESCRIPTION: WEATHER_DESCRIPTION,
    }
    # One trace, all spans ended, children within their parent's time window.
    finished = span_exporter.get_finished_spans()
    assert len({s.context.trace_id for s in finished if s.context}) == 1
    for node in span_tree.walk(spans):
        assert node.span is not None
        for child in node.children:
            assert child.span is not None
            assert node.span.start_time is not None
            assert node.span.end_time is not None
            assert child.span.start_time is not None
            assert child.span.end_time is not None
            assert node.span.start_time <= child.span.start_time <= child.span.end_time <= node.span.end_time


async def test_sampling_relevant_attributes_are_given_at_span_start(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """Samplers only see start attributes: operation, provider, model and tool name must be there."""
    seen: dict[str, dict[str, Any]] = {}

    from opentelemetry.sdk.trace import SpanProcessor

    class Capture(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            seen[span.name] = dict(span.attributes)

    tracer_provider.add_span_processor(Capture())
    provider = ScriptedProvider([tool_calls_response([("c1", "add", {"a": 1, "b": 2})]), text_response("3")])
    async with tool_registry(add) as tools:
        await run_tool_loop(
            tool_loop_runtime(provider, tools, hooks_with(OtelHooks(tracer_provider=tracer_provider))), "1+2"
        )
    assert seen["chat sonnet-4-5"][semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert seen["chat sonnet-4-5"][semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert seen["chat sonnet-4-5"][semconv.GEN_AI_REQUEST_MODEL] == "sonnet-4-5"
    assert seen["execute_tool add"][semconv.GEN_AI_TOOL_NAME] == "add"
    assert seen["invoke_agent assistant"][semconv.GEN_AI_AGENT_NAME] == "assistant"


# ------------------------------------------------------------------------------------ ChatAgent
async def test_chat_agent_is_one_agent_named_after_the_chat(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    provider = ScriptedProvider([tool_calls_response([("c1", "get_weather", {"city": "Oslo"})]), text_response("Cold")])
    async with tool_registry(get_weather) as tools:
        runtime = chat_runtime(provider, tools, hooks_with(otel_hooks), system_prompt="Be brief.")
        result = await run_chat(runtime, "Weather in Oslo?")
    assert result.response == "Cold"
    spans = tree(span_exporter, (semconv.GEN_AI_AGENT_NAME, semconv.FLOWRA_AGENT_PATH, semconv.FLOWRA_NODE_ID))
    assert span_tree.shape(spans) == [
        (
            "invoke_agent chat",
            [("chat sonnet-4-5", []), ("execute_tool get_weather", []), ("chat sonnet-4-5", [])],
        )
    ]
    assert spans[0].attrs == {
        semconv.GEN_AI_AGENT_NAME: "chat",
        semconv.FLOWRA_AGENT_PATH: "chat/tool_loop",
        semconv.FLOWRA_NODE_ID: "r1.0",
    }


async def test_agent_name_override(make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter) -> None:
    provider = ScriptedProvider([text_response("hi")])
    async with tool_registry(get_weather) as tools:
        otel = make_otel_hooks(agent_name={"chat": "Support Bot"})
        await run_chat(chat_runtime(provider, tools, hooks_with(otel)), "hello")
    (agent,) = tree(span_exporter, (semconv.GEN_AI_AGENT_NAME,))
    assert agent.name == "invoke_agent Support Bot"
    assert agent.attrs == {semconv.GEN_AI_AGENT_NAME: "Support Bot"}


# ------------------------------------------------------------------------------------ parallel
async def test_parallel_tool_calls_are_siblings(otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter) -> None:
    slow = make_slow_tool(0.05, name="slow_tool")
    provider = ScriptedProvider(
        [
            tool_calls_response([("a", "slow_tool", {"label": "x"}), ("b", "slow_tool", {"label": "y"})]),
            text_response("both done"),
        ]
    )
    async with tool_registry(slow) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "go")
    spans = tree(span_exporter, (semconv.GEN_AI_TOOL_CALL_ID,))
    (agent,) = spans
    tools_spans = [c for c in agent.children if c.name == "execute_tool slow_tool"]
    assert sorted(t.attrs[semconv.GEN_AI_TOOL_CALL_ID] for t in tools_spans) == ["a", "b"]
    assert all(t.children == [] for t in tools_spans)
    # They overlapped in time: really parallel, and still both under the agent.
    a, b = (t.span for t in tools_spans)
    assert a is not None and b is not None
    assert a.start_time is not None and b.start_time is not None and a.end_time is not None
    assert b.start_time < a.end_time


# ------------------------------------------------------------------------------------ agent as tool
@pytest.mark.skipif(not HAS_AGENT_TOOLS, reason="agents as tools need flowra >= 0.0.6")
async def test_agent_as_tool_nests_under_execute_tool(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    parent_provider = ScriptedProvider(
        [tool_calls_response([("r1", "research", {"query": "weather in Rome"})]), text_response("Rome is warm.")]
    )
    child_provider = ScriptedProvider(
        [tool_calls_response([("w1", "get_weather", {"city": "Rome"})]), text_response("warm")]
    )
    async with tool_registry(research_tool()) as parent_tools, tool_registry(get_weather) as child_tools:
        runtime = tool_loop_runtime(
            parent_provider,
            parent_tools,
            hooks_with(otel_hooks),
            researcher=ResearcherSetup(provider=child_provider, registry=child_tools),
        )
        result = await run_tool_loop(runtime, "How is Rome?")
    assert result.status == ToolLoopStatus.COMPLETED
    spans = tree(span_exporter, (semconv.GEN_AI_AGENT_NAME, semconv.FLOWRA_AGENT_PATH, semconv.GEN_AI_TOOL_CALL_ID))
    assert span_tree.shape(spans) == [
        (
            "invoke_agent assistant",
            [
                ("chat sonnet-4-5", []),
                (
                    "execute_tool research",
                    [
                        (
                            "invoke_agent research",
                            [("chat sonnet-4-5", []), ("execute_tool get_weather", []), ("chat sonnet-4-5", [])],
                        )
                    ],
                ),
                ("chat sonnet-4-5", []),
            ],
        )
    ]
    child = spans[0].children[1].children[0]
    assert child.attrs == {semconv.GEN_AI_AGENT_NAME: "research", semconv.FLOWRA_AGENT_PATH: "research/tool_loop"}
    assert child.children[1].attrs[semconv.GEN_AI_AGENT_NAME] == "research"


# ------------------------------------------------------------------------------------ concurrency
async def test_twenty_concurrent_runs_on_one_registry_stay_separate(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    n = 20
    scripts = {
        f"user {i}": [
            tool_calls_response([(f"call_{i}", "add", {"a": i, "b": 1})]),
            text_response(f"answer {i}"),
        ]
        for i in range(n)
    }
    provider = ScriptedProvider.by_first_user_text(scripts, delay=0.002)
    registry = hooks_with(otel_hooks)  # one registry, one OtelHooks, twenty runs
    async with tool_registry(add) as tools:

        async def one(i: int) -> str | None:
            runtime = tool_loop_runtime(provider, tools, registry)
            result = await run_tool_loop(runtime, f"user {i}")
            return result.result_message.blocks[0].text if result.result_message else None  # type: ignore[union-attr]

        answers = await asyncio.gather(*(one(i) for i in range(n)))
    assert answers == [f"answer {i}" for i in range(n)]

    spans = tree(span_exporter, (semconv.GEN_AI_TOOL_CALL_ID,))
    assert len(spans) == n  # n roots
    trace_ids = set()
    for root in spans:
        assert root.span is not None and root.span.context is not None
        trace_ids.add(root.span.context.trace_id)
        assert span_tree.shape([root]) == [
            (
                "invoke_agent assistant",
                [("chat sonnet-4-5", []), ("execute_tool add", []), ("chat sonnet-4-5", [])],
            )
        ]
        # every span of this root is in the root's trace
        for node in span_tree.walk([root]):
            assert node.span is not None and node.span.context is not None
            assert node.span.context.trace_id == root.span.context.trace_id
    assert len(trace_ids) == n
    # Each run's tool span carries its own call id, and exactly once over all traces.
    call_ids = sorted(
        n.attrs[semconv.GEN_AI_TOOL_CALL_ID] for n in span_tree.walk(spans) if n.name == "execute_tool add"
    )
    assert call_ids == sorted(f"call_{i}" for i in range(n))


# ------------------------------------------------------------------------------------ other ends
@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        (StopReason.MAX_TOKENS, "length"),
        (StopReason.STOP_SEQUENCE, "stop"),
        (StopReason.SCHEMA_VALIDATION_FAILED, "error"),
        (StopReason.OTHER, "other"),
    ],
)
async def test_other_stop_reasons_end_the_agent(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, stop_reason: StopReason, finish: str
) -> None:
    provider = ScriptedProvider([text_response("partial", stop_reason=stop_reason)])
    async with tool_registry(get_weather) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")
    assert result.stop_reason == stop_reason
    keys = (semconv.GEN_AI_RESPONSE_FINISH_REASONS, semconv.FLOWRA_TOOL_LOOP_STATUS, semconv.FLOWRA_END_REASON)
    (agent,) = tree(span_exporter, keys)
    assert agent.attrs == {
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: [finish],
        semconv.FLOWRA_TOOL_LOOP_STATUS: "completed",
    }
    assert agent.status == "UNSET"
    assert [(c.name, c.attrs) for c in agent.children] == [
        ("chat sonnet-4-5", {semconv.GEN_AI_RESPONSE_FINISH_REASONS: [finish]})
    ]


async def test_llm_call_limit_ends_the_agent(otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter) -> None:
    provider = ScriptedProvider([tool_calls_response([(f"c{i}", "add", {"a": i, "b": i})]) for i in range(2)])
    async with tool_registry(add) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks), max_llm_calls=2), "q")
    assert result.status.value in {"max_llm_calls", "max_iterations"}
    (agent,) = tree(span_exporter, (semconv.FLOWRA_TOOL_LOOP_STATUS, semconv.FLOWRA_TOOL_LOOP_ITERATIONS))
    assert agent.attrs == {semconv.FLOWRA_TOOL_LOOP_STATUS: result.status.value, semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 2}
    assert [c.name for c in agent.children] == [
        "chat sonnet-4-5",
        "execute_tool add",
        "chat sonnet-4-5",
        "execute_tool add",
    ]


def _finish_tool() -> LocalTool:
    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        loop_ctx = ctx.services.get(ToolLoopAgentContext)
        assert loop_ctx is not None
        loop_ctx.request_finish()
        return ToolResult(content="finishing")

    return LocalTool(
        definition=ToolDefinition(name="finish", description="Stop the loop.", input_schema={"type": "object"}),
        handler=handler,
    )


async def test_finish_request_ends_the_agent(otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter) -> None:
    provider = ScriptedProvider([tool_calls_response([("f", "finish", {})])])
    async with tool_registry(_finish_tool()) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")
    assert result.status == ToolLoopStatus.FINISH_REQUESTED
    (agent,) = tree(span_exporter, (semconv.FLOWRA_TOOL_LOOP_STATUS,))
    assert agent.attrs == {semconv.FLOWRA_TOOL_LOOP_STATUS: "finish_requested"}
    assert [c.name for c in agent.children] == ["chat sonnet-4-5", "execute_tool finish"]


async def test_interrupt_ends_the_agent_as_interrupted(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    holder: dict[str, Any] = {}

    async def interrupting(ctx: ToolExecutionContext) -> ToolResult:
        holder["runtime"].interrupt()
        return ToolResult(content="interrupted the run")

    tool = LocalTool(
        definition=ToolDefinition(name="stop_now", description="Interrupt.", input_schema={"type": "object"}),
        handler=interrupting,
    )
    provider = ScriptedProvider([tool_calls_response([("s", "stop_now", {})]), text_response("never")])
    async with tool_registry(tool) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks))
        holder["runtime"] = runtime
        result = await run_agent(runtime, "assistant", _spec("q"), step="start")
    assert is_interrupted(result)
    (agent,) = tree(span_exporter, (semconv.FLOWRA_END_REASON, semconv.FLOWRA_TOOL_LOOP_STATUS, semconv.ERROR_TYPE))
    # 0.0.8: the engine returns Interrupted(); 0.0.3: a ToolLoopResult with status interrupted.
    assert agent.attrs in (
        {semconv.FLOWRA_END_REASON: "interrupted"},
        {semconv.FLOWRA_TOOL_LOOP_STATUS: "interrupted"},
    )
    assert agent.status == "UNSET"
    assert [c.name for c in agent.children] == ["chat sonnet-4-5", "execute_tool stop_now"]


def _spec(text: str) -> Any:
    from flowra.lib.tool_loop import ToolLoopSpec

    return ToolLoopSpec(user_message=text)


# ------------------------------------------------------------------------------------ exceptions
async def test_tool_exception_marks_the_tool_span(otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter) -> None:
    provider = ScriptedProvider([tool_calls_response([("x", "fail_tool", {"reason": "kaput"})]), text_response("ok")])
    async with tool_registry(fail_tool) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")
    assert result.status == ToolLoopStatus.COMPLETED  # flowra turns tool exceptions into error results
    (agent,) = tree(span_exporter, (semconv.ERROR_TYPE, semconv.FLOWRA_TOOL_IS_ERROR))
    assert agent.status == "UNSET"
    tool = agent.children[1]
    assert (tool.name, tool.status, tool.attrs) == (
        "execute_tool fail_tool",
        "ERROR",
        {semconv.ERROR_TYPE: "tool_error", semconv.FLOWRA_TOOL_IS_ERROR: True},
    )
    assert tool.span is not None
    assert tool.span.status.description is None  # content capture is off: no error text


class ProviderDownError(RuntimeError):
    pass


async def test_provider_exception_reaches_the_caller_and_marks_spans(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    provider = ScriptedProvider([ProviderDownError("503 from upstream")])
    async with tool_registry(get_weather) as tools:
        with pytest.raises(ProviderDownError, match="503 from upstream"):
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")
    (agent,) = tree(span_exporter, (semconv.ERROR_TYPE, semconv.FLOWRA_END_REASON))
    etype = f"{__name__}.ProviderDownError"
    assert (agent.status, agent.attrs) == ("ERROR", {semconv.ERROR_TYPE: etype, semconv.FLOWRA_END_REASON: "error"})
    (chat,) = agent.children
    assert (chat.name, chat.status, chat.attrs) == (
        "chat sonnet-4-5",
        "ERROR",
        {semconv.ERROR_TYPE: etype, semconv.FLOWRA_END_REASON: "error"},
    )
    for node in (agent, chat):
        assert node.span is not None
        (event,) = node.span.events
        assert event.name == "exception"
        assert event.attributes is not None
        assert event.attributes["exception.type"] == etype
        assert "exception.message" not in event.attributes  # capture off: no message text
        assert node.span.status.description is None


async def test_provider_exception_text_is_recorded_when_capture_is_on(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    provider = ScriptedProvider([ProviderDownError("503 from upstream")])
    async with tool_registry(get_weather) as tools:
        with pytest.raises(ProviderDownError):
            await run_tool_loop(
                tool_loop_runtime(provider, tools, hooks_with(make_otel_hooks(capture_content=True))), "q"
            )
    (agent,) = tree(span_exporter)
    chat = agent.children[0]
    assert chat.span is not None
    assert chat.span.status.description == "503 from upstream"
    assert chat.span.events[0].attributes is not None
    assert chat.span.events[0].attributes["exception.message"] == "503 from upstream"


# ------------------------------------------------------------------------------------ caller span
async def test_root_agent_is_a_child_of_the_callers_current_span(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    provider = ScriptedProvider([text_response("hi")])
    tracer = tracer_provider.get_tracer("app")
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks))
        with tracer.start_as_current_span("POST /chat"):
            await run_tool_loop(runtime, "hello")
    assert span_tree.shape(tree(span_exporter)) == [
        ("POST /chat", [("invoke_agent assistant", [("chat sonnet-4-5", [])])])
    ]


async def test_without_a_caller_span_the_root_agent_starts_a_trace(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    """The paired negative: nothing current means a new trace, not a stale parent."""
    assert trace.get_current_span() is trace.INVALID_SPAN
    provider = ScriptedProvider([text_response("hi")])
    async with tool_registry(get_weather) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "hello")
    (root,) = tree(span_exporter)
    assert root.span is not None and root.span.parent is None


# ------------------------------------------------------------------------------------ no side effects
def _conversation_of(result: Any) -> list[Any]:
    return [dataclasses.asdict(m) for m in result.messages]


@pytest.mark.parametrize("with_plugin", [False, True])
async def test_agent_result_identical_with_and_without_plugin(
    with_plugin: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    def script() -> list[Any]:
        return [
            tool_calls_response([("a", "add", {"a": 2, "b": 3}), ("b", "fail_tool", {})], usage=usage(3, 4)),
            text_response("5", usage=usage(5, 6, cost_usd=0.5)),
        ]

    async def run(hooks: HookRegistry) -> tuple[Any, list[LLMRequest]]:
        provider = ScriptedProvider(script())
        async with tool_registry(add, fail_tool) as tools:
            result = await run_tool_loop(tool_loop_runtime(provider, tools, hooks), "2+3")
        return result, provider.requests

    bare_result, bare_requests = await run(HookRegistry())
    hooks = hooks_with(make_otel_hooks(capture_content=True)) if with_plugin else HookRegistry()
    result, requests = await run(hooks)
    assert _conversation_of(result) == _conversation_of(bare_result)
    assert (result.status, result.stop_reason, result.usage) == (
        bare_result.status,
        bare_result.stop_reason,
        bare_result.usage,
    )
    assert requests == bare_requests
    assert (len(span_exporter.get_finished_spans()) > 0) is with_plugin


def test_no_streaming_handlers_are_registered(otel_hooks: OtelHooks) -> None:
    registry = hooks_with(otel_hooks)
    assert not registry.has_handlers(TextDeltaEvent)
    assert not registry.has_handlers(ThinkingDeltaEvent)


async def test_provider_is_called_not_streamed_with_the_plugin(otel_hooks: OtelHooks) -> None:
    provider = ScriptedProvider([text_response("hi")])
    async with tool_registry(get_weather) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "hello")
    assert [c.streamed for c in provider.calls] == [False]


async def test_no_per_run_state_survives_the_run(otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter) -> None:
    provider = ScriptedProvider([tool_calls_response([("c", "add", {"a": 1, "b": 1})]), text_response("2")])
    async with tool_registry(add) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "1+1")
    assert otel_patches.current_book() is None
    gc.collect()
    # A finished task's context may keep the (emptied) book object alive a little longer;
    # what must not survive is any record, frame or span reference in it.
    books = [o for o in gc.get_objects() if isinstance(o, SpanBook)]
    assert all(b.closed and not b.agents for b in books)


# ------------------------------------------------------------------------------------ one instance, many
async def test_one_instance_serves_several_registries_and_runtimes(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    async with tool_registry(get_weather) as tools:
        for text in ("first", "second"):
            provider = ScriptedProvider([text_response(text)])
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), text)
    roots = tree(span_exporter)
    assert [r.name for r in roots] == ["invoke_agent assistant", "invoke_agent assistant"]
    assert roots[0].span is not None and roots[1].span is not None
    assert roots[0].span.context is not None and roots[1].span.context is not None
    assert roots[0].span.context.trace_id != roots[1].span.context.trace_id


async def test_the_same_instance_added_twice_traces_once(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter
) -> None:
    registry = hooks_with(otel_hooks)
    registry.add(otel_hooks)
    provider = ScriptedProvider([text_response("hi")])
    async with tool_registry(get_weather) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, registry), "hello")
    assert span_tree.shape(tree(span_exporter)) == [("invoke_agent assistant", [("chat sonnet-4-5", [])])]


def test_first_user_text_helper_is_consistent() -> None:
    # Guards the keyed script routing the concurrency test depends on.
    assert first_user_text([]) is None
