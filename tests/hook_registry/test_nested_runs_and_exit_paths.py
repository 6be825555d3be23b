"""Issue "Lifecycle under stress": every span of every run ends, once, under the right parent.

Real ``AgentRuntime``, scripted provider, real OpenTelemetry SDK. Each scenario compares the whole
normalised span tree and checks, with a ``SpanProcessor`` that sees every ``on_start`` and
``on_end``, that nothing started was left open and that no run's book outlives the run:

1. child ``HookRegistry``s given to a sub-agent (``child_registry``, plain ``propagate_to``, an
   isolated child with its own ``OtelHooks``, both registries traced);
2. custom agents calling ``LLMProvider.call`` directly (root, agent-as-tool, late subclasses);
3. every exit path (interrupt, runtime timeout and iteration limit, ``WhenAny`` losers, the
   ``timeout()`` child, raising hooks, tools and providers, task cancellation);
4. durable runs resumed in a fresh process, linked to the trace of the run they continue;
5. conversation id and user attributes on every span;
6. HTTP/SDK spans made inside a provider call nest under ``chat``, and only there;
7. a soak of 2 000 runs on one ``OtelHooks``: no memory growth, no surviving records.
"""

import asyncio
import dataclasses
import gc
import inspect
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import flowra.agent
import flowra.lib.tool_loop
import pytest
from flowra.agent import Agent, HookContext, HookRegistry, ServiceLocator, Spawn
from flowra.agent import step as flowra_step
from flowra.lib import LLMConfig
from flowra.lib.tool_loop import (
    BeforeLLMCallEvent,
    TextDeltaEvent,
    ToolLoopAgent,
    ToolLoopConfig,
    ToolLoopResult,
    ToolLoopSpec,
    UserMessageEvent,
)
from flowra.llm import LLMProvider, LLMRequest, LLMResponse
from flowra.runtime import AgentRuntime
from flowra.runtime.storage import FileSessionStorage
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolRegistry, ToolResult
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import durable
from flowra_otel.adapters.hook_registry import patches as otel_patches
from flowra_otel.adapters.hook_registry._flowra import TRACED_EVENTS
from flowra_otel.adapters.hook_registry.span_book import SpanBook
from flowra_otel.core import durable_link, semconv
from tests import span_tree
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with
from tests.hook_registry.flowra_support import (
    _GENERIC_AGENT,
    HAS_AGENT_TOOLS,
    INTERRUPTED_LOOP_HAS_NO_RESULT,
    RUNTIME_REUSABLE_AFTER_INTERRUPT,
    ResearcherSetup,
    ScriptedProvider,
    SummarizerAgent,
    SummarizeSpec,
    _entry_step,
    _resolved_llm_config,
    _ResultBase,
    _spawn_child,
    _SpecBase,
    add,
    delayed,
    fail_tool,
    final_text,
    first_user_text,
    get_weather,
    is_interrupted,
    make_slow_tool,
    research_tool,
    run_agent,
    run_tool_loop,
    specialist_runtime,
    summarize_tool,
    text_response,
    tool_calls_response,
    tool_loop_config,
    tool_loop_runtime,
    tool_registry,
    tool_results,
)

MakeHooks = Callable[..., OtelHooks]

HAS_WHEN_ANY: bool = hasattr(flowra.agent, "WhenAny")
"""``Spawn(WhenAny(...))`` and the built-in ``timeout()`` child: flowra >= 0.0.8."""
RUN_HAS_LIMITS: bool = "timeout" in inspect.signature(AgentRuntime.run).parameters
"""``AgentRuntime.run(timeout=..., max_iterations=...)``: flowra >= 0.0.8."""

NEEDS_AGENT_TOOLS = pytest.mark.skipif(not HAS_AGENT_TOOLS, reason="agents as tools need flowra >= 0.0.6")
NEEDS_WHEN_ANY = pytest.mark.skipif(not HAS_WHEN_ANY, reason="WhenAny / timeout() children need flowra >= 0.0.8")
NEEDS_RUN_LIMITS = pytest.mark.skipif(
    not RUN_HAS_LIMITS, reason="AgentRuntime timeout / max_iterations need flowra >= 0.0.8"
)

CHAT = "chat sonnet-4-5"
END_KEYS = (semconv.FLOWRA_END_REASON, semconv.ERROR_TYPE)


# ================================================================================ helpers
def tree(exporter: InMemorySpanExporter, keys: tuple[str, ...] | None = ()) -> list[span_tree.Node]:
    return span_tree.build(exporter.get_finished_spans(), keys)


def ends(nodes: list[span_tree.Node]) -> list[Any]:
    """(name, status, end attributes, children): how each span of the tree ended."""
    return [(n.name, n.status, n.attrs, ends(n.children)) for n in nodes]


def only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def spec(text: str, metadata: dict[str, Any] | None = None) -> ToolLoopSpec:
    return ToolLoopSpec(user_message=text, metadata=metadata)


def named_tool(
    name: str, handler: Callable[[ToolExecutionContext], Any], description: str = "A test tool."
) -> LocalTool:
    return LocalTool(
        definition=ToolDefinition(name=name, description=description, input_schema={"type": "object"}),
        handler=handler,
    )


# ================================================================================ 1. child registries
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PlanSpec(_SpecBase):
    goal: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PlanResult(_ResultBase):
    plan: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PlannerSetup:
    """How ``PlannerAgent`` builds the ``HookRegistry`` its child tool loop emits on."""

    child_hooks: Callable[[HookRegistry], HookRegistry]


if TYPE_CHECKING or _GENERIC_AGENT:  # noqa: SIM108
    _PlannerBase = Agent[PlanSpec, PlanResult]
else:
    _PlannerBase = Agent


class PlannerAgent(_PlannerBase):
    """A custom agent that gives its tool-loop child a ``HookRegistry`` of its own.

    Registered as ``planning``: without a ``HookContext`` its loop is named after that path.
    """

    __slots__ = ()
    __subagents__: ClassVar[dict[str, Any]] = {"tool_loop": ToolLoopAgent}

    def __init__(self, services: ServiceLocator, hooks: HookRegistry, setup: PlannerSetup) -> None:
        config = tool_loop_config(system_prompt="Plan with your tools.")
        provide: Callable[[type, object], None] = services.provide
        provide(HookRegistry, setup.child_hooks(hooks))
        provide(ToolLoopConfig, config)
        provide(LLMConfig, _resolved_llm_config(config))

    @_entry_step("plan")
    async def plan(self, spec: PlanSpec) -> Spawn:
        child = _spawn_child(ToolLoopAgent, ToolLoopSpec(user_message=spec.goal), entry_step="start")
        return Spawn(children=[child], then=self.collect)

    @flowra_step("collect")
    async def collect(self, result: ToolLoopResult) -> PlanResult:
        return PlanResult(plan=final_text(result))


def plan_tool() -> LocalTool:
    """``PlannerAgent`` as the parent's ``plan`` tool (flowra >= 0.0.6)."""
    make_agent_tool: Callable[..., LocalTool] = flowra.lib.tool_loop.make_agent_tool
    return make_agent_tool(PlannerAgent, name="plan", description="Plan with a dedicated sub-agent.")


def planner_provider(*, as_tool: bool) -> ScriptedProvider:
    """One script per conversation: the parent's (only when the planner is its tool) and the child's."""
    scripts: dict[str, list[Any]] = {
        "Paris weather": [
            tool_calls_response([("w1", "get_weather", {"city": "Paris"})]),
            text_response("Sunny in Paris."),
        ]
    }
    if as_tool:
        scripts["Plan a trip"] = [
            tool_calls_response([("p1", "plan", {"goal": "Paris weather"})]),
            text_response("Trip planned."),
        ]
    return ScriptedProvider.by_first_user_text(scripts)


async def run_planner(
    provider: ScriptedProvider,
    parent: HookRegistry,
    child_hooks: Callable[[HookRegistry], HookRegistry],
    *,
    as_tool: bool,
) -> None:
    """The planner as the parent loop's ``plan`` tool, or (any flowra) as the root agent."""
    async with tool_registry(get_weather, *([plan_tool()] if as_tool else [])) as tools:
        runtime = tool_loop_runtime(
            provider,
            tools,
            parent,
            extra_agents={"planning": PlannerAgent},
            extra_services={PlannerSetup: PlannerSetup(child_hooks=child_hooks)},
        )
        if as_tool:
            result = await run_tool_loop(runtime, "Plan a trip")
            assert final_text(result) == "Trip planned."
        else:
            plan = await run_agent(runtime, PlannerAgent, PlanSpec(goal="Paris weather"))
            assert plan == PlanResult(plan="Sunny in Paris.")
    provider.assert_exhausted()


def planner_subtree(name: str) -> tuple[str, list[Any]]:
    return (f"invoke_agent {name}", [(CHAT, []), ("execute_tool get_weather", []), (CHAT, [])])


def expected_planner_tree(name: str, *, as_tool: bool) -> list[Any]:
    if as_tool:
        return [
            ("invoke_agent assistant", [(CHAT, []), ("execute_tool plan", [planner_subtree(name)]), (CHAT, [])]),
        ]
    return [("request", [planner_subtree(name)])]


def _forwarding_child(
    context: HookContext | None, *, own: OtelHooks | None = None
) -> Callable[[HookRegistry], HookRegistry]:
    def make(parent: HookRegistry) -> HookRegistry:
        child = HookRegistry(context=context)
        if own is not None:
            child.add(own)
        child.propagate_to(parent, only=list(TRACED_EVENTS))
        return child

    return make


AS_TOOL = pytest.param(True, id="as_tool", marks=NEEDS_AGENT_TOOLS)
AS_ROOT = pytest.param(False, id="as_root")


@pytest.mark.parametrize("as_tool", [AS_TOOL, AS_ROOT])
@pytest.mark.parametrize("mode", ["child_registry", "propagate_to", "isolated", "both_traced", "both_same_instance"])
async def test_child_registry_variants_trace_the_child_once_and_nested(
    mode: str,
    as_tool: bool,
    make_otel_hooks: MakeHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    otel = make_otel_hooks()
    parent = hooks_with(otel)
    planner_context = HookContext(agent_type=PlannerAgent, agent_path="planner")
    child_hooks: Callable[[HookRegistry], HookRegistry]
    if mode == "child_registry":
        child_hooks = lambda p: OtelHooks.child_registry(p, agent_path="planner")  # noqa: E731
    elif mode == "propagate_to":
        child_hooks = _forwarding_child(planner_context)
    elif mode == "isolated":
        own = make_otel_hooks()
        child_hooks = lambda _p: hooks_with(own)  # noqa: E731
    elif mode == "both_traced":
        child_hooks = _forwarding_child(planner_context, own=make_otel_hooks())
    else:
        child_hooks = _forwarding_child(planner_context, own=otel)
    provider = planner_provider(as_tool=as_tool)
    with tracer_provider.get_tracer("app").start_as_current_span("request"):
        await run_planner(provider, parent, child_hooks, as_tool=as_tool)

    # An isolated child has no HookContext: its loop is named after its owner's path.
    name = "planning" if mode == "isolated" else "planner"
    spans = tree(span_exporter, None)
    (request,) = spans
    assert span_tree.shape(request.children if as_tool else spans) == expected_planner_tree(name, as_tool=as_tool)
    assert len({s.context.trace_id for s in span_exporter.get_finished_spans() if s.context}) == 1
    (child_agent,) = [n for n in span_tree.walk(spans) if n.name == f"invoke_agent {name}"]
    assert child_agent.attrs[semconv.GEN_AI_AGENT_NAME] == name
    assert child_agent.attrs[semconv.FLOWRA_AGENT_PATH] == "planning/tool_loop"
    assert child_agent.attrs[semconv.FLOWRA_NODE_ID] == ("r1.0.0.0" if as_tool else "r1.0")
    assert [c.streamed for c in provider.calls] == [False] * len(provider.calls)
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize("as_tool", [AS_TOOL, AS_ROOT])
@pytest.mark.parametrize("parent_streams", [False, True])
async def test_child_registry_streams_only_if_the_parent_has_a_delta_handler(
    parent_streams: bool,
    as_tool: bool,
    otel_hooks: OtelHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    parent = hooks_with(otel_hooks)
    deltas: list[str] = []
    if parent_streams:
        parent.on(TextDeltaEvent, lambda event: deltas.append(event.data.text))
    provider = planner_provider(as_tool=as_tool)
    with tracer_provider.get_tracer("app").start_as_current_span("request"):
        await run_planner(
            provider, parent, lambda p: OtelHooks.child_registry(p, agent_path="planner"), as_tool=as_tool
        )

    child_calls = [c for c in provider.calls if c.key == "Paris weather"]
    assert len(child_calls) == 2
    assert [c.streamed for c in child_calls] == [parent_streams, parent_streams]
    # The parent's handler sees the child's chunks through the child registry's forwarding.
    assert ("Sunny in Paris." in "".join(deltas)) is parent_streams
    (request,) = tree(span_exporter)
    assert span_tree.shape(request.children if as_tool else [request]) == expected_planner_tree(
        "planner", as_tool=as_tool
    )
    keys = (semconv.GEN_AI_REQUEST_STREAM, semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
    (request,) = tree(span_exporter, keys)
    chats = [n.attrs for n in span_tree.walk([request]) if n.name == CHAT]
    assert len(chats) == len(provider.calls)
    if parent_streams:
        assert all(a[semconv.GEN_AI_REQUEST_STREAM] is True for a in chats)
        # Chunks come only with text: the tool-call turns stream none.
        with_text = [a for a in chats if semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in a]
        assert len(with_text) == len(chats) // 2
    else:
        assert chats == [{}] * len(chats)
    assert_all_ended(ledger, span_exporter)


async def test_a_run_started_inside_a_tool_nests_under_that_tool(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """A tool that runs another runtime: one trace, the inner agent under ``execute_tool``."""
    inner_provider = ScriptedProvider([text_response("inner answer")])
    outer_provider = ScriptedProvider([tool_calls_response([("d", "delegate", {})]), text_response("outer answer")])
    async with tool_registry(get_weather) as inner_tools:
        inner_runtime = tool_loop_runtime(inner_provider, inner_tools, hooks_with(otel_hooks))

        async def delegate(ctx: ToolExecutionContext) -> ToolResult:
            result = await run_tool_loop(inner_runtime, "inner question")
            return ToolResult(content=final_text(result) or "")

        async with tool_registry(named_tool("delegate", delegate)) as tools:
            result = await run_tool_loop(tool_loop_runtime(outer_provider, tools, hooks_with(otel_hooks)), "q")
    assert final_text(result) == "outer answer"
    assert span_tree.shape(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            [(CHAT, []), ("execute_tool delegate", [("invoke_agent assistant", [(CHAT, [])])]), (CHAT, [])],
        )
    ]
    assert len({s.context.trace_id for s in span_exporter.get_finished_spans() if s.context}) == 1
    assert_all_ended(ledger, span_exporter)


async def test_a_run_started_inside_a_tool_on_the_same_runtime_is_a_run_of_its_own(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """The same runtime (another storage key): the inner run keeps its own conversation and user
    ids, under the tool's span, in the caller's trace (the runtime.hooks line got this wrong)."""
    provider = ScriptedProvider(
        [tool_calls_response([("d", "ask_again", {})]), text_response("inner answer"), text_response("outer answer")]
    )
    holder: dict[str, AgentRuntime] = {}

    async def ask_again(ctx: ToolExecutionContext) -> ToolResult:
        metadata = {"conversation_id": "inner", "user_id": "u-inner"}
        result = await run_tool_loop(holder["runtime"], "inner question", metadata=metadata, storage_key="inner")
        return ToolResult(content=final_text(result) or "")

    async with tool_registry(named_tool("ask_again", ask_again)) as tools:
        holder["runtime"] = tool_loop_runtime(provider, tools, hooks_with(otel_hooks))
        metadata = {"conversation_id": "outer", "user_id": "u-outer"}
        result = await run_tool_loop(holder["runtime"], "q", metadata=metadata)
    assert final_text(result) == "outer answer"
    outer = {semconv.GEN_AI_CONVERSATION_ID: "outer", semconv.USER_ID: "u-outer"}
    inner = {semconv.GEN_AI_CONVERSATION_ID: "inner", semconv.USER_ID: "u-inner"}
    keys = (semconv.GEN_AI_CONVERSATION_ID, semconv.USER_ID)
    simple = [
        (n.name, n.attrs, [(c.name, c.attrs, [(g.name, g.attrs) for g in c.children]) for c in n.children])
        for n in tree(span_exporter, keys)
    ]
    assert simple == [
        (
            "invoke_agent assistant",
            outer,
            [
                (CHAT, outer, []),
                ("execute_tool ask_again", outer, [("invoke_agent assistant", inner)]),
                (CHAT, outer, []),
            ],
        )
    ]
    (nested,) = [
        s
        for s in span_exporter.get_finished_spans()
        if s.name == CHAT and s.attributes and s.attributes.get(semconv.GEN_AI_CONVERSATION_ID) == "inner"
    ]
    assert nested is not None
    assert len({s.context.trace_id for s in span_exporter.get_finished_spans() if s.context}) == 1
    assert_all_ended(ledger, span_exporter)


# ================================================================================ 2. custom agents
CHAT_ATTRS = (semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_PROVIDER_NAME, semconv.GEN_AI_REQUEST_MODEL)
EXPECTED_CHAT_ATTRS = {
    semconv.GEN_AI_OPERATION_NAME: "chat",
    semconv.GEN_AI_PROVIDER_NAME: "anthropic",
    semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
}


@pytest.mark.parametrize("caller_span", [False, True])
async def test_custom_agent_direct_call_as_root_gets_one_chat_span(
    caller_span: bool,
    otel_hooks: OtelHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    provider = ScriptedProvider([text_response("A short summary.")])
    runtime = specialist_runtime(provider, hooks_with(otel_hooks))
    if caller_span:
        with tracer_provider.get_tracer("app").start_as_current_span("request"):
            result = await run_agent(runtime, SummarizerAgent, SummarizeSpec(text="A long text."))
    else:
        result = await run_agent(runtime, SummarizerAgent, SummarizeSpec(text="A long text."))
    assert getattr(result, "summary", None) == "A short summary."

    spans = tree(span_exporter, CHAT_ATTRS)
    chat: tuple[str, str, dict[str, Any], list[Any]] = (CHAT, "CLIENT", EXPECTED_CHAT_ATTRS, [])
    simple: list[Any] = [(n.name, n.kind, n.attrs, [(c.name, c.kind, c.attrs, []) for c in n.children]) for n in spans]
    if caller_span:
        assert simple == [("request", "INTERNAL", {}, [chat])]
    else:
        assert simple == [chat]
        assert spans[0].span is not None and spans[0].span.parent is None
    assert len(provider.calls) == 1
    assert_all_ended(ledger, span_exporter)


@NEEDS_AGENT_TOOLS
async def test_custom_agent_as_tool_chat_is_under_execute_tool_and_loop_calls_are_not_doubled(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider.by_first_user_text(
        {
            "Summarize this": [
                tool_calls_response([("s1", "summarize", {"text": "A very long text."})]),
                text_response("Here is the summary."),
            ],
            "A very long text.": [text_response("Short.")],
        }
    )
    async with tool_registry(summarize_tool()) as tools:
        runtime = tool_loop_runtime(
            provider, tools, hooks_with(otel_hooks), extra_agents={"summarizer": SummarizerAgent}
        )
        result = await run_tool_loop(runtime, "Summarize this")
    assert final_text(result) == "Here is the summary."
    provider.assert_exhausted()

    spans = tree(span_exporter, CHAT_ATTRS)
    assert span_tree.shape(spans) == [
        ("invoke_agent assistant", [(CHAT, []), ("execute_tool summarize", [(CHAT, [])]), (CHAT, [])]),
    ]
    direct = spans[0].children[1].children[0]
    assert (direct.kind, direct.attrs) == ("CLIENT", EXPECTED_CHAT_ATTRS)
    chats = [n for n in span_tree.walk(spans) if n.name.startswith("chat")]
    assert len(chats) == len(provider.calls) == 3
    assert_all_ended(ledger, span_exporter)


async def test_provider_subclass_defined_after_otel_hooks_is_traced(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    otel = make_otel_hooks()  # patches installed before the class below exists

    class LateProvider(LLMProvider):
        __slots__ = ("calls",)

        def __init__(self) -> None:
            self.calls = 0

        async def call(self, request: LLMRequest) -> LLMResponse:
            self.calls += 1
            return text_response("Late but traced.")

    provider = LateProvider()
    runtime = specialist_runtime(provider, hooks_with(otel))
    result = await run_agent(runtime, SummarizerAgent, SummarizeSpec(text="text"))
    assert getattr(result, "summary", None) == "Late but traced."
    assert provider.calls == 1
    assert [(n.name, n.attrs) for n in tree(span_exporter, CHAT_ATTRS)] == [(CHAT, EXPECTED_CHAT_ATTRS)]
    assert_all_ended(ledger, span_exporter)


# ================================================================================ 3. exit paths
class HookBoomError(RuntimeError):
    pass


class ProviderDownError(RuntimeError):
    pass


class ToolAbortError(BaseException):
    """Not an ``Exception``: flowra's tool registry does not turn it into an error result."""


def blocking_tool(started: asyncio.Event, *, name: str = "blocker") -> LocalTool:
    """A tool that signals it runs, then never returns on its own."""

    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        await asyncio.sleep(3600)
        return ToolResult(content="unreachable")

    return named_tool(name, handler, "Block until cancelled.")


def interrupting_tool(holder: dict[str, AgentRuntime], *, after: float = 0.0) -> LocalTool:
    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        if after:
            await asyncio.sleep(after)  # let the sibling tool get going first
        holder["runtime"].interrupt()
        return ToolResult(content="interrupt requested")

    return named_tool("stop_now", handler, "Interrupt the run.")


async def test_interrupt_mid_tool_ends_every_span(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    holder: dict[str, AgentRuntime] = {}
    provider = ScriptedProvider(
        [
            tool_calls_response([("s", "stop_now", {}), ("w", "slow_tool", {"label": "sibling"})]),
            text_response("never"),
        ]
    )
    async with tool_registry(interrupting_tool(holder, after=0.01), make_slow_tool(0.05)) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks))
        holder["runtime"] = runtime
        result = await run_agent(runtime, "assistant", spec("go"), step="start")
    assert is_interrupted(result)
    assert len(provider.calls) == 1

    spans = tree(span_exporter, (*END_KEYS, semconv.FLOWRA_TOOL_LOOP_STATUS))
    # flowra >= 0.0.7: the loop raises (no ToolLoopResult, so no status); before, it returns its status.
    agent_end = (
        {semconv.FLOWRA_END_REASON: "interrupted"}
        if INTERRUPTED_LOOP_HAS_NO_RESULT
        else {semconv.FLOWRA_TOOL_LOOP_STATUS: "interrupted"}
    )
    assert ends(spans) == [
        (
            "invoke_agent assistant",
            "UNSET",
            agent_end,
            [
                (CHAT, "UNSET", {}, []),
                ("execute_tool stop_now", "UNSET", {}, []),
                # Running when the interrupt came; flowra lets it finish and reports its result.
                ("execute_tool slow_tool", "UNSET", {}, []),
            ],
        )
    ]
    assert_all_ended(ledger, span_exporter)


@NEEDS_RUN_LIMITS
@pytest.mark.parametrize("where", ["run", "constructor"])
async def test_runtime_timeout_ends_open_spans_as_timed_out(
    where: str, otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    started = asyncio.Event()
    provider = ScriptedProvider([tool_calls_response([("b", "blocker", {})])])
    async with tool_registry(blocking_tool(started)) as tools:
        if where == "constructor":
            config = tool_loop_config()
            services: dict[type, Any] = {
                LLMProvider: provider,
                ToolRegistry: tools,
                ToolLoopConfig: config,
                HookRegistry: hooks_with(otel_hooks),
            }
            runtime = AgentRuntime(agents={"assistant": ToolLoopAgent}, services=services, timeout=1.0)
            run = runtime.run(agent="assistant", spec=spec("go"))
        else:
            runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks))
            run = runtime.run(agent="assistant", spec=spec("go"), timeout=1.0)
        with pytest.raises(TimeoutError):
            await run
    assert started.is_set()

    timed_out = {semconv.FLOWRA_END_REASON: "timed_out", semconv.ERROR_TYPE: "TimeoutError"}
    assert ends(tree(span_exporter, END_KEYS)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            timed_out,
            [(CHAT, "UNSET", {}, []), ("execute_tool blocker", "ERROR", timed_out, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


@NEEDS_RUN_LIMITS
async def test_runtime_max_iterations_raises_and_ends_open_spans(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider([tool_calls_response([("c", "get_weather", {"city": "Rome"})]), text_response("x")])
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks))
        # Engine cycles: start, call_llm, the tool call; the limit stops it before collect_results.
        with pytest.raises(RuntimeError, match="max_iterations"):
            await runtime.run(agent="assistant", spec=spec("weather?"), max_iterations=3)

    failed = {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: "RuntimeError"}
    assert ends(tree(span_exporter, END_KEYS)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            failed,
            [(CHAT, "UNSET", {}, []), ("execute_tool get_weather", "ERROR", failed, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


if HAS_WHEN_ANY:
    from flowra.agent import CallAgent, FromChild, TimeoutExpired, WhenAny
    from flowra.agent import timeout as timeout_child

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class RaceSpec:
        first: str
        second: str

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class RaceResult:
        winner: str | None

    class RaceAgent(Agent[RaceSpec, RaceResult]):
        """Two tool loops, first answer wins: flowra interrupts the other one."""

        __slots__ = ()
        __subagents__: ClassVar[dict[str, Any]] = {"tool_loop": ToolLoopAgent}

        @flowra_step("start", entry=True)
        async def start(self, spec: RaceSpec) -> Spawn:
            return Spawn(
                WhenAny(
                    CallAgent(agent=ToolLoopAgent, spec=ToolLoopSpec(user_message=spec.first), tag="first"),
                    CallAgent(agent=ToolLoopAgent, spec=ToolLoopSpec(user_message=spec.second), tag="second"),
                ),
                then=self.join,
            )

        @flowra_step("join")
        async def join(
            self,
            first: Annotated[ToolLoopResult | None, FromChild("first")],
            second: Annotated[ToolLoopResult | None, FromChild("second")],
        ) -> RaceResult:
            winner = first or second
            return RaceResult(winner=final_text(winner) if winner is not None else None)

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class DeadlineSpec:
        question: str
        seconds: float

    class DeadlineAgent(Agent[DeadlineSpec, RaceResult]):
        """A tool loop raced against flowra's built-in ``timeout()`` child."""

        __slots__ = ()
        __subagents__: ClassVar[dict[str, Any]] = {"tool_loop": ToolLoopAgent}

        @flowra_step("start", entry=True)
        async def start(self, spec: DeadlineSpec) -> Spawn:
            return Spawn(
                WhenAny(
                    CallAgent(agent=ToolLoopAgent, spec=ToolLoopSpec(user_message=spec.question), tag="work"),
                    timeout_child(seconds=spec.seconds),
                ),
                then=self.join,
            )

        @flowra_step("join")
        async def join(
            self,
            work: Annotated[ToolLoopResult | None, FromChild("work")],
            expired: Annotated[TimeoutExpired | None, FromChild],
        ) -> RaceResult:
            return RaceResult(winner=None if expired is not None or work is None else final_text(work))


@NEEDS_WHEN_ANY
async def test_when_any_loser_ends_interrupted(
    otel_hooks: OtelHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    provider = ScriptedProvider.by_first_user_text(
        {
            "quick question": [text_response("quick answer")],
            "slow question": [delayed(tool_calls_response([("s1", "slow_tool", {})]), 0.05)],
        }
    )
    async with tool_registry(make_slow_tool(0.01)) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks), extra_agents={"race": RaceAgent})
        with tracer_provider.get_tracer("app").start_as_current_span("request"):
            result = await runtime.run(agent="race", spec=RaceSpec(first="quick question", second="slow question"))
    assert result == RaceResult(winner="quick answer")
    # flowra 0.0.8 counts a child's first finished *step* (the loop's ``start``) as satisfying
    # WhenAny, so the first child wins after one engine cycle and the second is interrupted
    # before its first LLM call.
    assert provider.requests_for("slow question") == []

    keys = (*END_KEYS, semconv.FLOWRA_NODE_ID, semconv.FLOWRA_TOOL_LOOP_STATUS)
    assert ends(tree(span_exporter, keys)) == [
        (
            "request",
            "UNSET",
            {},
            [
                (
                    "invoke_agent race",
                    "UNSET",
                    {semconv.FLOWRA_NODE_ID: "r1.0", semconv.FLOWRA_TOOL_LOOP_STATUS: "completed"},
                    [(CHAT, "UNSET", {}, [])],
                ),
                (
                    "invoke_agent race",
                    "UNSET",
                    {semconv.FLOWRA_NODE_ID: "r1.1", semconv.FLOWRA_END_REASON: "interrupted"},
                    [],
                ),
            ],
        )
    ]
    assert_all_ended(ledger, span_exporter)


@NEEDS_WHEN_ANY
async def test_timeout_child_interrupts_the_tool_loop(
    otel_hooks: OtelHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    async def slow_guardrail(event: Any) -> None:
        await asyncio.sleep(0.2)  # e.g. a moderation call on the user's message

    registry = hooks_with(otel_hooks)
    registry.on(UserMessageEvent, slow_guardrail)
    provider = ScriptedProvider([text_response("too late")])
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(provider, tools, registry, extra_agents={"deadline": DeadlineAgent})
        with tracer_provider.get_tracer("app").start_as_current_span("request"):
            result = await runtime.run(agent="deadline", spec=DeadlineSpec(question="q", seconds=0.02))
    assert result == RaceResult(winner=None)
    # The deadline passed while the loop's first step ran: its next step is interrupted
    # before the LLM is called.
    assert provider.calls == []

    assert ends(tree(span_exporter, END_KEYS)) == [
        (
            "request",
            "UNSET",
            {},
            [("invoke_agent deadline", "UNSET", {semconv.FLOWRA_END_REASON: "interrupted"}, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize("prepend", [False, True], ids=["hook_after_plugin", "hook_before_plugin"])
async def test_raising_user_hook_reaches_the_caller_unchanged(
    prepend: bool, otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    boom = HookBoomError("quota exceeded")

    def raising(event: Any) -> None:
        raise boom

    registry = hooks_with(otel_hooks)
    registry.on(BeforeLLMCallEvent, raising, prepend=prepend)
    provider = ScriptedProvider([text_response("never")])
    async with tool_registry(get_weather) as tools:
        with pytest.raises(HookBoomError) as info:
            await run_tool_loop(tool_loop_runtime(provider, tools, registry), "hi")
    assert info.value is boom
    assert provider.calls == []

    etype = f"{__name__}.HookBoomError"
    failed = {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: etype}
    # Before the plugin saw the event, there was no call to trace: no chat span at all.
    chats: list[Any] = [] if prepend else [(CHAT, "ERROR", {semconv.ERROR_TYPE: etype}, [])]
    assert ends(tree(span_exporter, END_KEYS)) == [("invoke_agent assistant", "ERROR", failed, chats)]
    assert_all_ended(ledger, span_exporter)


async def test_tool_exception_and_escaping_tool_abort(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    async def aborting(ctx: ToolExecutionContext) -> ToolResult:
        raise ToolAbortError("operator pulled the plug")

    provider = ScriptedProvider(
        [
            tool_calls_response([("f", "fail_tool", {"reason": "kaput"})]),
            tool_calls_response([("a", "abort", {})]),
            text_response("never"),
        ]
    )
    async with tool_registry(fail_tool, named_tool("abort", aborting)) as tools:
        with pytest.raises(ToolAbortError):
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")

    etype = f"{__name__}.ToolAbortError"
    assert ends(tree(span_exporter, END_KEYS)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: etype},
            [
                (CHAT, "UNSET", {}, []),
                ("execute_tool fail_tool", "ERROR", {semconv.ERROR_TYPE: "tool_error"}, []),
                (CHAT, "UNSET", {}, []),
                ("execute_tool abort", "ERROR", {semconv.ERROR_TYPE: etype}, []),
            ],
        )
    ]
    assert_all_ended(ledger, span_exporter)


async def test_provider_exception_ends_every_span(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(
        [tool_calls_response([("c", "get_weather", {"city": "Oslo"})]), ProviderDownError("503")]
    )
    async with tool_registry(get_weather) as tools:
        with pytest.raises(ProviderDownError, match="503"):
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")

    etype = f"{__name__}.ProviderDownError"
    failed = {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: etype}
    assert ends(tree(span_exporter, END_KEYS)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            failed,
            [(CHAT, "UNSET", {}, []), ("execute_tool get_weather", "UNSET", {}, []), (CHAT, "ERROR", failed, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


async def test_provider_exception_in_a_direct_call_ends_its_chat_span(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    runtime = specialist_runtime(ScriptedProvider([ProviderDownError("503")]), hooks_with(otel_hooks))
    with pytest.raises(ProviderDownError, match="503"):
        await run_agent(runtime, SummarizerAgent, SummarizeSpec(text="long"))
    etype = f"{__name__}.ProviderDownError"
    assert ends(tree(span_exporter, END_KEYS)) == [
        (CHAT, "ERROR", {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: etype}, [])
    ]
    assert_all_ended(ledger, span_exporter)


async def test_cancelling_the_run_task_ends_spans_as_cancelled(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    started = asyncio.Event()
    provider = ScriptedProvider([tool_calls_response([("b", "blocker", {})])])
    async with tool_registry(blocking_tool(started)) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks))
        task = asyncio.create_task(run_tool_loop(runtime, "go"))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    cancelled = {semconv.FLOWRA_END_REASON: "cancelled", semconv.ERROR_TYPE: "asyncio.exceptions.CancelledError"}
    assert ends(tree(span_exporter, END_KEYS)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            cancelled,
            [(CHAT, "UNSET", {}, []), ("execute_tool blocker", "ERROR", cancelled, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


# ================================================================================ 4. durable resume
REPO_ROOT = Path(__file__).resolve().parents[2]

DURABLE_SCRIPT = '''
"""One process of a durable flowra run: "run" dies in its second LLM call, "resume" finishes it."""
import asyncio
import json
import os
import sys

from flowra.agent import HookRegistry
from flowra.runtime.storage import FileSessionStorage
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from flowra_otel import OtelHooks
from tests.hook_registry.flowra_support import (
    ScriptedProvider, final_text, run_tool_loop, text_response, tool_calls_response, tool_loop_runtime, tool_registry,
)

MODE, BASE = sys.argv[1], sys.argv[2]


def span_json(span):
    ctx, parent = span.get_span_context(), span.parent
    return {
        "name": span.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "attributes": dict(span.attributes or {}),
        "links": [
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
    }


class Announce(SpanProcessor):
    """Prints every span as it starts and as it ends: a process that dies never ends its root."""

    def on_start(self, span, parent_context=None):
        print(json.dumps({"event": "start", **span_json(span)}), flush=True)

    def on_end(self, span):
        print(json.dumps({"event": "end", **span_json(span)}), flush=True)


def checkpoint(step: str) -> str:
    """Save progress."""
    return f"{step} saved"


def die(request):
    # flowra saved the execution after the previous cycle; the process is killed mid-call.
    print(json.dumps({"event": "dying"}), flush=True)
    os._exit(0)


async def main():
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(Announce())
    hooks = HookRegistry()
    hooks.add(OtelHooks(tracer_provider=tracer_provider))
    storage = FileSessionStorage(BASE, "s1")
    if MODE == "run":
        provider = ScriptedProvider([tool_calls_response([("c1", "checkpoint", {"step": "one"})]), die])
    else:
        provider = ScriptedProvider([text_response("resumed and done")])
    async with tool_registry(checkpoint) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks, storage=storage)
        if MODE == "run":
            await run_tool_loop(runtime, "Save my work", metadata={"conversation_id": "conv-42"})
        else:
            result = await runtime.resume()
            print(json.dumps({"event": "result", "text": final_text(result)}), flush=True)


asyncio.run(main())
'''


async def run_durable_process(tmp_path: Path, mode: str) -> list[dict[str, Any]]:
    """Run the script above in a fresh interpreter; its JSON lines (span starts and ends)."""
    script = tmp_path / "durable_run.py"
    script.write_text(DURABLE_SCRIPT)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        mode,
        str(tmp_path),
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()
    assert b"flowra_otel" not in stderr, stderr.decode()  # the plugin logged no internal error
    return [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]


def records(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def names(lines: list[dict[str, Any]]) -> list[str]:
    return [line["name"] for line in lines]


async def test_resume_in_a_fresh_process_links_to_the_run_that_died(tmp_path: Path) -> None:
    first = await run_durable_process(tmp_path, "run")
    assert first[-1] == {"event": "dying"}
    started = records(first, "start")
    assert names(started) == ["invoke_agent assistant", CHAT, "execute_tool checkpoint", CHAT]
    assert names(records(first, "end")) == [CHAT, "execute_tool checkpoint"]  # the rest died open
    paused_root = started[0]
    assert paused_root["parent_id"] is None
    # Known from the spec's metadata once the root span had started: on every later span.
    assert [s["attributes"].get(semconv.GEN_AI_CONVERSATION_ID) for s in started[1:]] == ["conv-42"] * 3
    # What the plugin kept in flowra's own session state for the next process (under its run's key):
    kept = await durable.NodeStateLinkStore(FileSessionStorage(str(tmp_path), "s1"), "r1").load()
    assert kept is not None
    assert kept["conversation_id"] == "conv-42"
    assert kept["traceparent"].startswith(f"00-{paused_root['trace_id']}-{paused_root['span_id']}-")

    second = await run_durable_process(tmp_path, "resume")
    assert records(second, "result") == [{"event": "result", "text": "resumed and done"}]
    assert_resumed_trace(second, paused_root["trace_id"], paused_root["span_id"])


async def test_resume_in_a_fresh_process_after_the_run_task_was_cancelled(
    tmp_path: Path, otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    calling = asyncio.Event()

    async def hanging_call(request: LLMRequest) -> LLMResponse:
        calling.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    provider = ScriptedProvider([tool_calls_response([("c1", "checkpoint", {"step": "one"})]), hanging_call])
    storage = FileSessionStorage(str(tmp_path), "s1")

    def checkpoint(step: str) -> str:
        """Save progress."""
        return f"{step} saved"

    async with tool_registry(checkpoint) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(otel_hooks), storage=storage)
        task = asyncio.create_task(run_tool_loop(runtime, "Save my work", metadata={"conversation_id": "conv-42"}))
        await asyncio.wait_for(calling.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await runtime.has_pending_execution()
    assert_all_ended(ledger, span_exporter)
    cancelled = {semconv.FLOWRA_END_REASON: "cancelled", semconv.ERROR_TYPE: "asyncio.exceptions.CancelledError"}
    assert ends(tree(span_exporter, END_KEYS)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            cancelled,
            [(CHAT, "UNSET", {}, []), ("execute_tool checkpoint", "UNSET", {}, []), (CHAT, "ERROR", cancelled, [])],
        )
    ]
    paused_root = only(span_exporter, "invoke_agent assistant")
    assert paused_root.context is not None and paused_root.attributes is not None
    assert paused_root.attributes[semconv.GEN_AI_CONVERSATION_ID] == "conv-42"

    second = await run_durable_process(tmp_path, "resume")
    assert records(second, "result") == [{"event": "result", "text": "resumed and done"}]
    assert_resumed_trace(second, f"{paused_root.context.trace_id:032x}", f"{paused_root.context.span_id:016x}")


def assert_resumed_trace(lines: list[dict[str, Any]], paused_trace_id: str, paused_span_id: str) -> None:
    """The resumed process: a new trace whose root links to the paused run's root span."""
    ended = records(lines, "end")
    assert sorted(names(records(lines, "start"))) == sorted(names(ended))  # every span ended
    assert names(ended) == [CHAT, "invoke_agent assistant"]
    chat, root = ended
    assert root["parent_id"] is None
    assert root["trace_id"] != paused_trace_id  # linked, not a late child of a span that is gone
    assert root["links"] == [
        {
            "trace_id": paused_trace_id,
            "span_id": paused_span_id,
            "attributes": {durable_link.LINK_TYPE: durable_link.LINK_RESUMED_FROM},
        }
    ]
    assert root["attributes"][durable_link.RESUMED] is True
    assert chat["parent_id"] == root["span_id"]
    assert chat["trace_id"] == root["trace_id"]
    assert [r["attributes"][semconv.GEN_AI_CONVERSATION_ID] for r in ended] == ["conv-42", "conv-42"]


# ================================================================================ 5. conversation id, attributes
def stamped(exporter: InMemorySpanExporter) -> list[tuple[str, Any, Any]]:
    return [
        (s.name, (s.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID), (s.attributes or {}).get("tenant"))
        for s in exporter.get_finished_spans()
    ]


async def _run_maybe_nested(hooks: HookRegistry, *, nested: bool, metadata: dict[str, Any] | None) -> int:
    """A loop with a tool, or (nested) with the researcher agent-as-tool; returns the span count."""
    if nested:
        child = ScriptedProvider(
            [tool_calls_response([("w", "get_weather", {"city": "Lima"})]), text_response("Warm.")]
        )
        parent = ScriptedProvider([tool_calls_response([("r", "research", {"query": "Lima"})]), text_response("ok")])
        async with tool_registry(get_weather) as child_tools, tool_registry(research_tool()) as tools:
            runtime = tool_loop_runtime(
                parent, tools, hooks, researcher=ResearcherSetup(provider=child, registry=child_tools)
            )
            await run_tool_loop(runtime, "q", metadata=metadata)
        return 1 + 3 + 1 + 3  # parent agent, 2 chats + tool; child agent, 2 chats + tool
    provider = ScriptedProvider([tool_calls_response([("w", "get_weather", {"city": "Lima"})]), text_response("ok")])
    async with tool_registry(get_weather) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, hooks), "q", metadata=metadata)
    return 4


NESTED = [pytest.param(False, id="flat"), pytest.param(True, id="nested_agent_tool", marks=NEEDS_AGENT_TOOLS)]


@pytest.mark.parametrize("nested", NESTED)
async def test_conversation_id_and_attributes_options_on_every_span(
    nested: bool, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    otel = make_otel_hooks(conversation_id="c-1", attributes={"tenant": "acme"})
    count = await _run_maybe_nested(hooks_with(otel), nested=nested, metadata={"conversation_id": "ignored"})
    rows = stamped(span_exporter)
    assert len(rows) == count
    assert {(cid, tenant) for _, cid, tenant in rows} == {("c-1", "acme")}
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize("nested", NESTED)
async def test_conversation_id_from_metadata_on_every_span(
    nested: bool, otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    count = await _run_maybe_nested(hooks_with(otel_hooks), nested=nested, metadata={"conversation_id": "c-2"})
    rows = stamped(span_exporter)
    assert len(rows) == count
    assert {(cid, tenant) for _, cid, tenant in rows} == {("c-2", None)}
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize(
    "options",
    [
        {"attributes": {"tenant": {"nested": "dict"}}},
        {"attributes": {"tenant": None}},
        {"attributes": {"tenant": [1, object()]}},
        {"attributes": {"": "empty key"}},
        {"attributes": ["tenant", "acme"]},
        {"conversation_id": 5},
        {"conversation_id": ""},
    ],
    ids=[
        "dict_value",
        "none_value",
        "mixed_list",
        "empty_key",
        "not_a_mapping",
        "int_conversation",
        "empty_conversation",
    ],
)
def test_invalid_conversation_id_or_attributes_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        OtelHooks(**options)


# ================================================================================ 6. HTTP spans under chat
async def test_http_span_inside_the_provider_call_nests_under_chat_and_only_there(
    otel_hooks: OtelHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    http = tracer_provider.get_tracer("http")
    app = tracer_provider.get_tracer("app")

    def over_http(response: LLMResponse) -> Callable[[LLMRequest], LLMResponse]:
        def call(request: LLMRequest) -> LLMResponse:
            with http.start_as_current_span("POST /v1/messages"):
                return response

        return call

    async def probe(ctx: ToolExecutionContext) -> ToolResult:
        with app.start_as_current_span("tool work"):
            return ToolResult(content="probed")

    provider = ScriptedProvider(
        [over_http(tool_calls_response([("p", "probe", {})])), over_http(text_response("done"))]
    )
    async with tool_registry(named_tool("probe", probe)) as tools:
        with app.start_as_current_span("request"):
            await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")

    assert span_tree.shape(tree(span_exporter)) == [
        (
            "request",
            [
                (
                    "invoke_agent assistant",
                    [
                        (CHAT, [("POST /v1/messages", [])]),
                        # The chat span was current only during the call; during the tool's
                        # step its execute_tool span is, so the tool's own span nests there.
                        ("execute_tool probe", [("tool work", [])]),
                        (CHAT, [("POST /v1/messages", [])]),
                    ],
                ),
            ],
        )
    ]
    assert_all_ended(ledger, span_exporter)


async def test_http_span_inside_a_direct_provider_call_nests_under_its_chat(
    otel_hooks: OtelHooks, tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    http = tracer_provider.get_tracer("http")

    def call(request: LLMRequest) -> LLMResponse:
        with http.start_as_current_span("POST /v1/messages"):
            return text_response("short")

    runtime = specialist_runtime(ScriptedProvider([call]), hooks_with(otel_hooks))
    await run_agent(runtime, SummarizerAgent, SummarizeSpec(text="long"))
    assert span_tree.shape(tree(span_exporter)) == [(CHAT, [("POST /v1/messages", [])])]
    assert_all_ended(ledger, span_exporter)


# ================================================================================ 7. soak
SOAK_RUNS = 2000
SOAK_WARMUP = 200
SOAK_BATCH = 100
SOAK_MAX_BYTES_PER_RUN = 200

_SOAK_ADD = tool_calls_response([("a", "add", {"a": 1, "b": 2})])
_SOAK_STOP = tool_calls_response([("s", "stop_now", {})])
_SOAK_FINAL = text_response("3")


class SoakProvider(LLMProvider):
    """Stateless and recording nothing, so the soak measures the plugin, not the test double."""

    __slots__ = ()

    async def call(self, request: LLMRequest) -> LLMResponse:
        if len(request.messages) > 1:
            return _SOAK_FINAL
        return _SOAK_STOP if first_user_text(request) == "interrupt" else _SOAK_ADD


class SpanCounter(SpanProcessor):
    def __init__(self) -> None:
        self.started = 0
        self.ended = 0

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


@pytest.fixture
def soak_tracer_provider() -> Iterator[tuple[TracerProvider, SpanCounter]]:
    counter = SpanCounter()
    provider = TracerProvider()
    provider.add_span_processor(counter)
    yield provider, counter
    provider.shutdown()


async def test_soak_many_runs_no_growth_no_surviving_records(
    soak_tracer_provider: tuple[TracerProvider, SpanCounter], meter_provider: MeterProvider
) -> None:
    tracer_provider, counter = soak_tracer_provider
    otel = OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    registry = hooks_with(otel)
    provider = SoakProvider()
    holder: dict[str, AgentRuntime] = {}
    outcomes = {"completed": 0, "interrupted": 0}

    async def batch(first: int, tools: ToolRegistry) -> None:
        runtime = tool_loop_runtime(provider, tools, registry)  # one runtime per batch, runs in sequence
        holder["runtime"] = runtime
        for i in range(first, first + SOAK_BATCH):
            interrupt = i % 4 == 3
            result = await run_agent(runtime, "assistant", spec("interrupt" if interrupt else "add"), step="start")
            assert is_interrupted(result) is interrupt
            if interrupt and not RUNTIME_REUSABLE_AFTER_INTERRUPT:  # flowra 0.0.7 leaks the root key
                runtime = tool_loop_runtime(provider, tools, registry)
                holder["runtime"] = runtime
            if not interrupt:
                assert isinstance(result, ToolLoopResult) and final_text(result) == "3"
                assert [r.is_error for r in tool_results(result)] == [False]
            outcomes["interrupted" if interrupt else "completed"] += 1
        holder.clear()

    began = time.perf_counter()
    async with tool_registry(add, interrupting_tool(holder)) as tools:
        for first in range(0, SOAK_WARMUP, SOAK_BATCH):
            await batch(first, tools)
        gc.collect()
        tracemalloc.start()
        try:
            gc.collect()
            baseline = tracemalloc.get_traced_memory()[0]
            halfway = SOAK_WARMUP + (SOAK_RUNS - SOAK_WARMUP) // 2
            at_halfway = baseline
            for first in range(SOAK_WARMUP, SOAK_RUNS, SOAK_BATCH):
                await batch(first, tools)
                if first + SOAK_BATCH == halfway:
                    gc.collect()
                    at_halfway = tracemalloc.get_traced_memory()[0]
            gc.collect()
            at_end = tracemalloc.get_traced_memory()[0]
            top = tracemalloc.take_snapshot().statistics("lineno")[:5]
        finally:
            tracemalloc.stop()
    elapsed = time.perf_counter() - began

    measured = SOAK_RUNS - SOAK_WARMUP
    grown = at_end - baseline
    per_run = grown / measured
    # One-off growth (interpreter and library caches warming up) shows in the first half only;
    # a leak grows in both.
    second_half = at_end - at_halfway
    print(
        f"\nsoak: {SOAK_RUNS} runs ({outcomes['completed']} completed, {outcomes['interrupted']} interrupted) "
        f"in {elapsed:.1f}s; {counter.started} spans; memory growth over the last {measured} runs: "
        f"{grown} bytes ({per_run:.1f} bytes/run), of which {second_half} bytes in the second half "
        f"({second_half / (SOAK_RUNS - halfway):.1f} bytes/run)"
    )
    assert outcomes == {"completed": SOAK_RUNS * 3 // 4, "interrupted": SOAK_RUNS // 4}
    assert counter.started == counter.ended > 0
    assert per_run < SOAK_MAX_BYTES_PER_RUN, [str(s) for s in top]
    assert otel_patches.current_book() is None
    books = [o for o in gc.get_objects() if isinstance(o, SpanBook)]
    assert all(b.closed and not b.agents for b in books)
