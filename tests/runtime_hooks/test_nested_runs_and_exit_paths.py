"""Every span of every run ends, once, under the right parent, on flowra 0.0.86+.

Real ``AgentRuntime``, scripted provider, real OpenTelemetry SDK. Each scenario compares the whole
normalised span tree (how each span ended: status, ``flowra.end_reason``, ``error.type``) and
checks with the ``ledger`` that nothing started was left open and that nothing the plugin made
current is still current:

1. exit paths: an interrupt while a tool runs, a runtime timeout, a cancelled run task, a tool
   that raises (answered as an error, or escaping), a ``BeforeToolCallEvent`` or
   ``AfterToolCallEvent`` hook that raises (the run fails; what the hooks never finished is not
   recorded), a provider that raises, the LLM-call limit, a ``render`` that raises, ``GotoAgent``
   (the next agent parents under the nearest *open* span), a failing agent used as a tool and a
   ``WhenAny`` loser;
2. nested runs: a tool that runs another traced ``AgentRuntime`` (the inner run nests under that
   tool's ``execute_tool`` span, in the same trace), also many at once.

Durable runs resumed in another process are in ``test_durable_resume.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

import pytest
from flowra.agent import (
    Agent,
    AgentDefinitionRef,
    AgentRuntime,
    CallAgent,
    GotoAgent,
    Interrupted,
    Spawn,
    WhenAny,
    step,
)
from flowra.lib.chat import ChatAgent, ChatConfig
from flowra.lib.turn import TurnAgent, TurnConfig, TurnResult
from flowra.lib.turn import hook_events as turn_events
from flowra.llm import LLMProvider, LLMRequest, LLMResponse, TextBlock
from flowra.tools import tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import tracing
from flowra_otel.adapters.runtime_hooks.tracing import RuntimeTracing
from flowra_otel.core import semconv
from flowra_otel.core.chat_invocation import ChatInvocation
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced, wrapped_result
from tests.runtime_hooks.support import (
    CHILD,
    FLOWRA_VERSION,
    HAS_RENDER,
    PARALLEL_SAME_AGENT,
    SSN,
    CityParams,
    ResearchResult,
    ResearchSpec,
    ScriptedProvider,
    SleepParams,
    chat_runtime,
    chat_spec,
    explode,
    get_weather,
    llm_config,
    lookup_customer,
    provider_services,
    registry,
    requires,
    research_runtime,
    run_chat,
    run_turn,
    slow,
    system,
    text_response,
    tool_calls_response,
    turn_runtime,
    turn_spec,
)

MakeHooks = Callable[..., OtelHooks]

CHAT = "chat sonnet-4-5"
END_KEYS = (semconv.FLOWRA_END_REASON, semconv.ERROR_TYPE)
STATUS_KEYS = (*END_KEYS, semconv.FLOWRA_TOOL_LOOP_STATUS)


# ================================================================================ helpers
def tree(exporter: InMemorySpanExporter, keys: tuple[str, ...] | None = END_KEYS) -> list[span_tree.Node]:
    return span_tree.build(exporter.get_finished_spans(), keys)


def ends(nodes: list[span_tree.Node]) -> list[Any]:
    """(name, status, the chosen attributes, children): how each span of the tree ended."""
    return [(n.name, n.status, n.attrs, ends(n.children)) for n in nodes]


def trace_ids(exporter: InMemorySpanExporter) -> set[int]:
    return {s.context.trace_id for s in exporter.get_finished_spans() if s.context is not None}


def span_id(node: span_tree.Node) -> int:
    assert node.span is not None and node.span.context is not None
    value: int = node.span.context.span_id
    return value


def parent_id(node: span_tree.Node) -> int | None:
    assert node.span is not None
    return node.span.parent.span_id if node.span.parent is not None else None


def all_attribute_values(exporter: InMemorySpanExporter) -> str:
    """Every attribute value and status description of every span, as one string (a leak search)."""
    parts: list[str] = []
    for s in exporter.get_finished_spans():
        parts += [str(v) for v in (s.attributes or {}).values()]
        parts.append(s.status.description or "")
    return "\n".join(parts)


def turn_services(provider: LLMProvider, *tools: Any) -> dict[type, Any]:
    """A ``TurnAgent``'s services: its ``TurnConfig`` (and its provider, where that is a service)."""
    config = TurnConfig(
        llm_config=llm_config(provider), system=system(), history=[], tools=registry(*tools) if tools else None
    )
    return {TurnConfig: config, **provider_services(provider)}


class HookBoomError(RuntimeError):
    """What the raising hooks raise."""


class ProviderDownError(RuntimeError):
    """What a failing provider raises."""


class RenderBoomError(RuntimeError):
    """What a failing ``render`` raises."""


class ToolAbortError(BaseException):
    """Not an ``Exception``: flowra's ``@tool`` executor does not turn it into an error answer."""


# ================================================================================ 1. exit paths
class RuntimeHandle:
    """The runtime ``stop_now`` interrupts (a service: flowra gives it to the tool)."""

    def __init__(self) -> None:
        self.runtime: AgentRuntime | None = None


@tool("stop_now")
async def stop_now(params: SleepParams, handle: RuntimeHandle) -> str:
    """Interrupts the run, after a short wait (its sibling tool is running by then)."""
    await asyncio.sleep(params.seconds)
    assert handle.runtime is not None
    handle.runtime.interrupt()
    return "interrupt requested"


async def test_interrupt_while_a_slow_tool_runs_ends_the_turn_interrupted_not_failed(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    handle = RuntimeHandle()
    provider = ScriptedProvider(
        tool_calls_response(("s", "stop_now", {"seconds": 0.01}), ("w", "slow", {"seconds": 0.04})),
        text_response("never"),
    )
    runtime = traced(make_otel_hooks, chat_runtime(provider, stop_now, slow, services={RuntimeHandle: handle}))
    handle.runtime = runtime
    result = await runtime.run(agent=ChatAgent, spec=chat_spec("go"))
    assert isinstance(result, Interrupted)
    assert len(provider.requests) == 1  # the turn stopped before asking the model again

    # A requested stop, not a failure: no span is an error. flowra lets the running tool finish
    # and the turn ends with its own status.
    assert ends(tree(span_exporter, STATUS_KEYS)) == [
        (
            "invoke_agent assistant",
            "UNSET",
            {semconv.FLOWRA_TOOL_LOOP_STATUS: "interrupted"},
            [
                (CHAT, "UNSET", {}, []),
                ("execute_tool stop_now", "UNSET", {}, []),
                ("execute_tool slow", "UNSET", {}, []),
            ],
        )
    ]
    assert_all_ended(ledger, span_exporter)


CANCELLED = {semconv.FLOWRA_END_REASON: "cancelled", semconv.ERROR_TYPE: "asyncio.exceptions.CancelledError"}
TIMED_OUT = {semconv.FLOWRA_END_REASON: "timed_out", semconv.ERROR_TYPE: "TimeoutError"}


@pytest.mark.parametrize("where", ["run", "constructor"])
async def test_runtime_timeout_ends_every_open_span_timed_out(
    where: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(tool_calls_response(("s", "slow", {"seconds": 10.0})))
    if where == "constructor":
        config = ChatConfig(llm_config=llm_config(provider), system=system(), tools=registry(slow))
        services = {ChatConfig: config, **provider_services(provider)}
        runtime = AgentRuntime(agents={"assistant": ChatAgent}, services=services, timeout=1.0)
        run = runtime.run(agent=ChatAgent, spec=chat_spec("go"))
    else:
        runtime = chat_runtime(provider, slow)
        run = runtime.run(agent=ChatAgent, spec=chat_spec("go"), timeout=1.0)
    traced(make_otel_hooks, runtime)
    with pytest.raises(TimeoutError):
        await run

    # flowra's timeout cancels the run's task (asyncio.wait_for) and the caller gets a TimeoutError:
    # the spans it ends say the timeout too, not a bare cancellation (the paired check: the test
    # below cancels the run's task itself, and its spans say cancelled)
    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            TIMED_OUT,
            [(CHAT, "UNSET", {}, []), ("execute_tool slow", "ERROR", TIMED_OUT, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


class Gate:
    """Set once ``blocker`` runs (a service: flowra gives it to the tool)."""

    def __init__(self) -> None:
        self.running = asyncio.Event()


@tool("blocker")
async def blocker(params: SleepParams, gate: Gate) -> str:
    """Says that it runs, then waits."""
    gate.running.set()
    await asyncio.sleep(params.seconds)
    return "unreachable"


async def test_cancelling_the_run_task_ends_every_span_cancelled(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    gate = Gate()
    provider = ScriptedProvider(tool_calls_response(("b", "blocker", {"seconds": 10.0})))
    runtime = traced(make_otel_hooks, chat_runtime(provider, blocker, services={Gate: gate}))
    task = asyncio.create_task(run_chat(runtime, "go"))
    await asyncio.wait_for(gate.running.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            CANCELLED,
            [(CHAT, "UNSET", {}, []), ("execute_tool blocker", "ERROR", CANCELLED, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


@tool("abort")
async def abort(params: CityParams) -> str:
    """Pulls the plug."""
    raise ToolAbortError(f"operator stopped {params.city}")


async def test_a_raising_tool_is_a_failed_call_and_an_escaping_one_fails_the_run(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(
        tool_calls_response(("e", "explode", {"city": "Rome"})),
        tool_calls_response(("a", "abort", {"city": "Oslo"})),
        text_response("never"),
    )
    runtime = traced(make_otel_hooks, chat_runtime(provider, explode, abort), capture_content=True)
    with pytest.raises(ToolAbortError):
        await run_chat(runtime, "go")

    spans = tree(span_exporter, None)
    abort_type = f"{__name__}.ToolAbortError"
    failed = {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: abort_type}
    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            failed,
            [
                (CHAT, "UNSET", {}, []),
                # flowra answers the model with the error: the call failed, the run goes on.
                ("execute_tool explode", "ERROR", {semconv.ERROR_TYPE: semconv.ERROR_TYPE_TOOL}, []),
                (CHAT, "UNSET", {}, []),
                # Not an Exception: it escapes the tool and fails the run.
                ("execute_tool abort", "ERROR", failed, []),
            ],
        )
    ]
    exploded = spans[0].children[1]
    assert exploded.attrs == {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "explode",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.GEN_AI_TOOL_CALL_ID: "e",
        semconv.GEN_AI_TOOL_DESCRIPTION: "Always fails.",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS: '{"city":"Rome"}',
        semconv.ERROR_TYPE: semconv.ERROR_TYPE_TOOL,
        semconv.FLOWRA_TOOL_IS_ERROR: True,
        semconv.FLOWRA_TOOL_ERROR_KIND: "execution",
    }
    assert exploded.span is not None and exploded.span.status.description == "Error: boom in Rome"
    aborted = spans[0].children[3]
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in aborted.attrs  # it never answered
    assert_all_ended(ledger, span_exporter)


def raise_hook_error(event: Any) -> None:
    raise HookBoomError("quota exceeded")


async def test_a_raising_before_tool_call_hook_fails_the_run_and_withholds_the_chat_output(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(tool_calls_response(("w", "get_weather", {"city": "Rome"})), text_response("never"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, get_weather), capture_content=True)
    runtime.hooks.on(turn_events.BeforeToolCallEvent, raise_hook_error)
    with pytest.raises(HookBoomError, match="quota exceeded"):
        await run_chat(runtime, "go")

    hook_type = f"{__name__}.HookBoomError"
    # No tool ran: no execute_tool span. The chat's response asked for a call that never ran, so
    # its output is not recorded as if it had been acted on.
    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: hook_type},
            [(CHAT, "UNSET", {}, [])],
        )
    ]
    (agent,) = tree(span_exporter, None)
    (chat,) = agent.children
    assert semconv.GEN_AI_TOOL_DEFINITIONS in chat.attrs
    assert {k: v for k, v in chat.attrs.items() if k != semconv.GEN_AI_TOOL_DEFINITIONS} == {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "anthropic",
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        semconv.FLOWRA_LLM_MODEL: "anthropic/sonnet-4-5",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS: '[{"type":"text","content":"You are a helpful assistant."}]',
        semconv.GEN_AI_INPUT_MESSAGES: '[{"role":"user","parts":[{"type":"text","content":"go"}]}]',
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["tool_call"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
    }
    assert_all_ended(ledger, span_exporter)


async def test_without_withholding_the_raising_hooks_chat_shows_the_call_that_never_ran(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: a chat still open when its agent fails ends without its output
    (``ChatInvocation.fail``); with that removed, the chat records the call that never ran."""
    original = ChatInvocation.fail

    def fail_keeping_the_output(
        self: ChatInvocation,
        error: BaseException | None = None,
        *,
        reason: str | None = None,
        end_ns: int | None = None,
    ) -> Any:
        if self.response is not None:
            return self._end(None, None, self.end_ns or end_ns or time.time_ns(), withhold_output=False)
        return original(self, error, reason=reason, end_ns=end_ns)

    monkeypatch.setattr(ChatInvocation, "fail", fail_keeping_the_output)
    provider = ScriptedProvider(tool_calls_response(("w", "get_weather", {"city": "Rome"})), text_response("never"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, get_weather), capture_content=True)
    runtime.hooks.on(turn_events.BeforeToolCallEvent, raise_hook_error)
    with pytest.raises(HookBoomError):
        await run_chat(runtime, "go")
    (agent,) = tree(span_exporter, None)
    (chat,) = agent.children
    assert '"name":"get_weather"' in str(chat.attrs.get(semconv.GEN_AI_OUTPUT_MESSAGES))


async def test_a_raising_after_tool_call_hook_fails_the_run_and_records_no_result(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """A redaction hook that raises half-way: the raw result (an SSN) must not be recorded."""
    provider = ScriptedProvider(tool_calls_response(("c", "lookup_customer", {"name": "Ann"})), text_response("never"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, lookup_customer), capture_content=True)
    runtime.hooks.on(turn_events.AfterToolCallEvent, raise_hook_error)
    with pytest.raises(HookBoomError, match="quota exceeded"):
        await run_chat(runtime, "go")

    hook_type = f"{__name__}.HookBoomError"
    failed = {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: hook_type}
    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            failed,
            [(CHAT, "UNSET", {}, []), ("execute_tool lookup_customer", "ERROR", {semconv.ERROR_TYPE: hook_type}, [])],
        )
    ]
    (agent,) = tree(span_exporter, None)
    assert agent.children[1].attrs == {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "lookup_customer",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.GEN_AI_TOOL_CALL_ID: "c",
        semconv.GEN_AI_TOOL_DESCRIPTION: "A customer's record (it holds secrets).",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS: '{"name":"Ann"}',
        semconv.ERROR_TYPE: hook_type,
    }
    assert SSN not in all_attribute_values(span_exporter)
    assert_all_ended(ledger, span_exporter)


async def test_without_failing_the_call_a_raising_after_hook_leaks_the_raw_result(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: ``_tool_answered`` no longer fails the call when a hook raised; the
    result is then recorded as the hooks left it, and the SSN reaches the span."""
    original = RuntimeTracing._tool_answered

    def ignore_the_error(self: RuntimeTracing, scope: Any, data: Any, tracker: Any, exc: BaseException | None) -> None:
        original(self, scope, data, tracker, None)

    monkeypatch.setattr(RuntimeTracing, "_tool_answered", ignore_the_error)
    provider = ScriptedProvider(tool_calls_response(("c", "lookup_customer", {"name": "Ann"})), text_response("never"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, lookup_customer), capture_content=True)
    runtime.hooks.on(turn_events.AfterToolCallEvent, raise_hook_error)
    with pytest.raises(HookBoomError):
        await run_chat(runtime, "go")
    assert SSN in all_attribute_values(span_exporter)


async def test_a_raising_provider_ends_every_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(tool_calls_response(("c", "get_weather", {"city": "Oslo"})), ProviderDownError("503"))
    runtime = traced(make_otel_hooks, chat_runtime(provider, get_weather))
    with pytest.raises(ProviderDownError, match="503"):
        await run_chat(runtime, "go")

    failed = {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: f"{__name__}.ProviderDownError"}
    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            failed,
            [(CHAT, "UNSET", {}, []), ("execute_tool get_weather", "UNSET", {}, []), (CHAT, "ERROR", failed, [])],
        )
    ]
    assert_all_ended(ledger, span_exporter)


async def test_the_llm_call_limit_ends_the_turn_with_its_status_and_the_last_tool_recorded(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(tool_calls_response(("c", "get_weather", {"city": "Oslo"})), text_response("never"))
    runtime = traced(make_otel_hooks, turn_runtime(provider, get_weather, max_llm_calls=1), capture_content=True)
    result = await run_turn(runtime, "Weather?")
    assert result.status.value == "max_llm_calls"
    assert len(provider.requests) == 1

    keys = (*STATUS_KEYS, semconv.FLOWRA_TOOL_LOOP_ITERATIONS, semconv.GEN_AI_TOOL_CALL_RESULT)
    assert ends(tree(span_exporter, keys)) == [
        (
            "invoke_agent assistant",
            "UNSET",
            {semconv.FLOWRA_TOOL_LOOP_STATUS: "max_llm_calls", semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 1},
            [
                (CHAT, "UNSET", {}, []),
                # No next request: the result is recorded as the turn's messages give it.
                (
                    "execute_tool get_weather",
                    "UNSET",
                    {semconv.GEN_AI_TOOL_CALL_RESULT: wrapped_result("Sunny in Oslo")},
                    [],
                ),
            ],
        )
    ]
    assert_all_ended(ledger, span_exporter)


@pytest.mark.skipif(not HAS_RENDER, reason=f"TurnConfig.render is flowra 0.0.93+; installed: {FLOWRA_VERSION}")
async def test_a_raising_render_fails_the_turn_before_any_chat(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    def render(prompt: Any) -> Any:
        raise RenderBoomError("template missing")

    provider = ScriptedProvider(text_response("never"))
    runtime = traced(make_otel_hooks, turn_runtime(provider, render=render))
    with pytest.raises(RenderBoomError, match="template missing"):
        await run_turn(runtime, "go")
    assert provider.requests == []
    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: f"{__name__}.RenderBoomError"},
            [],
        )
    ]
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------------------- GotoAgent
class RouterAgent(Agent[ResearchSpec, TurnResult]):
    """Hands the question to a tool loop on its own node (``GotoAgent``): it ends, the loop
    starts where it was."""

    __slots__ = ()

    @step("route", entry=True)
    async def route(self, spec: ResearchSpec) -> GotoAgent:
        return GotoAgent(agent=TurnAgent, spec=turn_spec(spec.question))


class DeskAgent(Agent[ResearchSpec, ResearchResult]):
    """Calls the router as a child; the router's ``GotoAgent`` target is declared here."""

    __slots__ = ()
    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"router": RouterAgent, "turn": TurnAgent}

    @step("start", entry=True)
    async def start(self, spec: ResearchSpec) -> Spawn:
        return Spawn(children=[CallAgent(agent=RouterAgent, spec=spec)], then=self.done)

    @step("done")
    async def done(self, result: Annotated[TurnResult, CHILD]) -> ResearchResult:
        message = result.result_message
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)] if message is not None else []
        return ResearchResult(answer="\n".join(texts))


def desk_runtime(provider: ScriptedProvider) -> AgentRuntime:
    return AgentRuntime(agents={"desk": DeskAgent}, services=turn_services(provider, get_weather))


def weather_script() -> ScriptedProvider:
    return ScriptedProvider(tool_calls_response(("w", "get_weather", {"city": "Rome"})), text_response("Sunny."))


LOOP: list[Any] = [(CHAT, []), ("execute_tool get_weather", []), (CHAT, [])]


async def test_goto_agent_the_next_agent_parents_under_the_nearest_open_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    runtime = traced(make_otel_hooks, desk_runtime(weather_script()))
    result = await runtime.run(agent=DeskAgent, spec=ResearchSpec(question="Weather in Rome?"))
    assert result == ResearchResult(answer="Sunny.")

    spans = tree(span_exporter, (semconv.FLOWRA_AGENT_PATH, semconv.FLOWRA_TOOL_LOOP_STATUS))
    # The router's span ended when GotoAgent replaced it: the loop is its sibling, not its child.
    assert span_tree.shape(spans) == [
        ("invoke_agent desk", [("invoke_agent desk/router", []), ("invoke_agent desk/turn", LOOP)])
    ]
    (desk,) = spans
    router, turn = desk.children
    assert router.attrs == {semconv.FLOWRA_AGENT_PATH: "desk/router"}
    assert turn.attrs == {semconv.FLOWRA_AGENT_PATH: "desk/turn", semconv.FLOWRA_TOOL_LOOP_STATUS: "completed"}
    assert parent_id(turn) == span_id(desk)
    assert router.span is not None and turn.span is not None
    assert router.span.end_time is not None and turn.span.start_time is not None
    assert router.span.end_time <= turn.span.start_time
    assert len(trace_ids(span_exporter)) == 1
    assert_all_ended(ledger, span_exporter)


async def test_without_skipping_ended_frames_the_next_agent_nests_under_the_replaced_one(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: ``nearest_open`` replaced by "the frame itself" (ended frames are no
    longer skipped), the loop's span parents under the router's, which had already ended."""
    monkeypatch.setattr(tracing, "nearest_open", lambda frame: frame)
    runtime = traced(make_otel_hooks, desk_runtime(weather_script()))
    await runtime.run(agent=DeskAgent, spec=ResearchSpec(question="Weather in Rome?"))
    assert span_tree.shape(tree(span_exporter)) == [
        ("invoke_agent desk", [("invoke_agent desk/router", [("invoke_agent desk/turn", LOOP)])])
    ]


@pytest.mark.parametrize("caller_span", [True, False], ids=["under_a_caller_span", "no_caller_span"])
async def test_goto_agent_replacing_the_root_keeps_the_run_in_one_trace(
    caller_span: bool,
    make_otel_hooks: MakeHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    runtime = traced(
        make_otel_hooks,
        AgentRuntime(
            agents={"router": RouterAgent, "assistant": TurnAgent},
            services=turn_services(weather_script(), get_weather),
        ),
    )
    spec = ResearchSpec(question="Weather in Rome?")
    if caller_span:
        with tracer_provider.get_tracer("app").start_as_current_span("POST /ask"):
            result = await runtime.run(agent=RouterAgent, spec=spec)
    else:
        result = await runtime.run(agent=RouterAgent, spec=spec)
    assert isinstance(result, TurnResult) and result.status.value == "completed"

    spans = tree(span_exporter)
    if caller_span:
        # The caller's span is the nearest open one: the loop is the router's sibling there.
        assert span_tree.shape(spans) == [
            ("POST /ask", [("invoke_agent router", []), ("invoke_agent assistant", LOOP)])
        ]
    else:
        # No span of the run is left open: the loop stays in the run's trace, under the root it
        # replaced, rather than starting a trace of its own.
        assert span_tree.shape(spans) == [("invoke_agent router", [("invoke_agent assistant", LOOP)])]
    assert len(trace_ids(span_exporter)) == 1
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------------------- agents as tools, races
async def test_a_failing_sub_agent_used_as_a_tool_fails_every_span_up_to_the_root(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    main = ScriptedProvider(tool_calls_response(("r1", "research", {"question": "Why?"})), text_response("never"))
    researcher = ScriptedProvider(
        tool_calls_response(("e", "explode", {"city": "Lima"})), ProviderDownError("researcher's model is down")
    )
    runtime = traced(make_otel_hooks, research_runtime(main, researcher, explode))
    with pytest.raises(ProviderDownError, match="researcher's model is down"):
        await run_chat(runtime, "Research this")
    assert len(main.requests) == 1

    failed = {semconv.FLOWRA_END_REASON: "error", semconv.ERROR_TYPE: f"{__name__}.ProviderDownError"}
    assert ends(tree(span_exporter)) == [
        (
            "invoke_agent assistant",
            "ERROR",
            failed,
            [
                (CHAT, "UNSET", {}, []),
                (
                    "execute_tool research",
                    "ERROR",
                    failed,
                    [
                        (
                            "invoke_agent researcher",
                            "ERROR",
                            failed,
                            [
                                (
                                    "invoke_agent researcher/turn",
                                    "ERROR",
                                    failed,
                                    [
                                        (CHAT, "UNSET", {}, []),
                                        ("execute_tool explode", "ERROR", {semconv.ERROR_TYPE: "tool_error"}, []),
                                        (CHAT, "ERROR", failed, []),
                                    ],
                                )
                            ],
                        )
                    ],
                ),
            ],
        )
    ]
    assert len(trace_ids(span_exporter)) == 1
    assert_all_ended(ledger, span_exporter)


class ByQuestion(LLMProvider):
    """Answers by the first user message, after a delay of its own (parallel loops share it)."""

    def __init__(self, answers: dict[str, tuple[float, LLMResponse]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def call(self, request: LLMRequest) -> LLMResponse:
        first = request.messages[0].blocks[0]
        assert isinstance(first, TextBlock)
        self.asked.append(first.text)
        delay, response = self.answers[first.text]
        await asyncio.sleep(delay)
        return response


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RaceSpec:
    first: str
    second: str


class RaceAgent(Agent[RaceSpec, ResearchResult]):
    """Two tool loops, the first answer wins: flowra interrupts the other one."""

    __slots__ = ()
    __subagents__: ClassVar[dict[str, AgentDefinitionRef]] = {"turn": TurnAgent}

    @step("start", entry=True)
    async def start(self, spec: RaceSpec) -> Spawn:
        return Spawn(
            WhenAny(
                CallAgent(agent=TurnAgent, spec=turn_spec(spec.first), tag="first"),
                CallAgent(agent=TurnAgent, spec=turn_spec(spec.second), tag="second"),
            ),
            then=self.join,
        )

    @step("join")
    async def join(
        self,
        first: Annotated[TurnResult | None, CHILD("first")],
        second: Annotated[TurnResult | None, CHILD("second")],
    ) -> ResearchResult:
        winner = first or second
        message = winner.result_message if winner is not None else None
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)] if message is not None else []
        return ResearchResult(answer="\n".join(texts))


@requires(PARALLEL_SAME_AGENT, "one agent twice in parallel is flowra 0.0.76+ (before: Duplicate persistent key)")
async def test_a_when_any_loser_ends_interrupted_not_failed(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ByQuestion({"quick": (0.0, text_response("quick answer")), "slow": (0.05, text_response("late"))})
    runtime = traced(make_otel_hooks, AgentRuntime(agents={"race": RaceAgent}, services=turn_services(provider)))
    result = await runtime.run(agent=RaceAgent, spec=RaceSpec(first="quick", second="slow"))
    assert result == ResearchResult(answer="quick answer")
    assert provider.asked == ["quick"]  # the loser was stopped before it called the model

    assert ends(tree(span_exporter, STATUS_KEYS)) == [
        (
            "invoke_agent race",
            "UNSET",
            {},
            [
                (
                    "invoke_agent race/turn",
                    "UNSET",
                    {semconv.FLOWRA_TOOL_LOOP_STATUS: "completed"},
                    [(CHAT, "UNSET", {}, [])],
                ),
                ("invoke_agent race/turn", "UNSET", {semconv.FLOWRA_TOOL_LOOP_STATUS: "interrupted"}, []),
            ],
        )
    ]
    assert_all_ended(ledger, span_exporter)


# ================================================================================ 2. nested runs
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AskParams:
    question: str


class Delegation:
    """How ``delegate`` runs its question: a fresh ``AgentRuntime`` per call, traced by ``hooks``
    (a service: flowra gives it to the tool)."""

    def __init__(self, hooks: OtelHooks, *, delay: float = 0.0) -> None:
        self.hooks = hooks
        self.delay = delay

    def runtime(self, question: str) -> AgentRuntime:
        runtime = chat_runtime(ScriptedProvider(text_response(f"inner answer to {question}"), delay=self.delay))
        self.hooks.install(runtime)
        return runtime


@tool("delegate")
async def delegate(params: AskParams, delegation: Delegation) -> str:
    """Asks another assistant (a run of its own runtime)."""
    runtime = delegation.runtime(params.question)
    result = await run_chat(runtime, params.question, conversation_id=f"inner-{params.question}")
    return result.response or ""


def delegating_runtime(hooks: OtelHooks, *calls: str, delay: float = 0.0) -> AgentRuntime:
    """A chat that delegates each of ``calls`` (call id = question) in parallel, then answers."""
    provider = ScriptedProvider(
        tool_calls_response(*((q, "delegate", {"question": q}) for q in calls)), text_response("outer answer")
    )
    runtime = chat_runtime(provider, delegate, services={Delegation: Delegation(hooks, delay=delay)})
    hooks.install(runtime)
    return runtime


CONVERSATION_KEYS = (semconv.GEN_AI_CONVERSATION_ID, semconv.GEN_AI_TOOL_CALL_ID)


async def test_a_run_started_inside_a_tool_nests_under_that_tool_in_the_same_trace(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    runtime = delegating_runtime(make_otel_hooks(), "q1")
    result = await run_chat(runtime, "Ask around", conversation_id="outer")
    assert result.response == "outer answer"

    cid = semconv.GEN_AI_CONVERSATION_ID
    outer, inner = {cid: "outer"}, {cid: "inner-q1"}
    # The inner run is a run of its own (its own conversation id), in the caller's trace.
    assert ends(tree(span_exporter, CONVERSATION_KEYS)) == [
        (
            "invoke_agent assistant",
            "UNSET",
            outer,
            [
                (CHAT, "UNSET", outer, []),
                (
                    "execute_tool delegate",
                    "UNSET",
                    {**outer, semconv.GEN_AI_TOOL_CALL_ID: "q1"},
                    [("invoke_agent assistant", "UNSET", inner, [(CHAT, "UNSET", inner, [])])],
                ),
                (CHAT, "UNSET", outer, []),
            ],
        )
    ]
    assert len(trace_ids(span_exporter)) == 1
    assert_all_ended(ledger, span_exporter)


async def test_concurrent_nested_runs_each_nest_under_their_own_tool_call(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """Three outer runs at once, each with two tools that each run an inner run at once: every
    inner run under the call that started it, every outer run a trace of its own."""
    hooks = make_otel_hooks()

    async def outer(i: int) -> None:
        runtime = delegating_runtime(hooks, f"o{i}a", f"o{i}b", delay=0.002 * (3 - i))
        await run_chat(runtime, f"Ask around {i}", conversation_id=f"outer-{i}")

    await asyncio.gather(*(outer(i) for i in range(3)))

    roots = tree(span_exporter, CONVERSATION_KEYS)
    assert len(roots) == 3
    assert len(trace_ids(span_exporter)) == 3
    for root in roots:
        i = str(root.attrs[semconv.GEN_AI_CONVERSATION_ID]).removeprefix("outer-")
        calls = [n for n in root.children if n.name == "execute_tool delegate"]
        assert sorted(str(c.attrs[semconv.GEN_AI_TOOL_CALL_ID]) for c in calls) == [f"o{i}a", f"o{i}b"]
        for call in calls:
            question = call.attrs[semconv.GEN_AI_TOOL_CALL_ID]
            (inner,) = call.children
            assert span_tree.shape([inner]) == [("invoke_agent assistant", [(CHAT, [])])]
            for node in span_tree.walk([inner]):
                assert node.attrs == {semconv.GEN_AI_CONVERSATION_ID: f"inner-{question}"}
        trace = {n.span.context.trace_id for n in span_tree.walk([root]) if n.span and n.span.context}
        assert len(trace) == 1
    assert_all_ended(ledger, span_exporter)


async def test_without_the_tool_span_current_in_its_step_a_nested_run_starts_a_trace_of_its_own(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: the flowing frame's ``on_enter`` (``frames.enter``, which makes the
    node's span current for its steps) made a no-op; the inner run is then a separate trace."""
    monkeypatch.setattr(tracing, "enter", lambda frame: None)
    await run_chat(delegating_runtime(make_otel_hooks(), "q1"), "Ask around")
    assert span_tree.shape(tree(span_exporter)) == [
        ("invoke_agent assistant", [(CHAT, []), ("execute_tool delegate", []), (CHAT, [])]),
        ("invoke_agent assistant", [(CHAT, [])]),
    ]
    assert len(trace_ids(span_exporter)) == 2


SAME_AGENT_AGAIN = (
    "a run of the live agent again, inside its own tool or hook, is flowra 0.0.76+ (before: Duplicate persistent key)"
)


class SameRuntime:
    """The runtime ``ask_again`` runs its question on: the very runtime whose tool it is."""

    runtime: AgentRuntime | None = None


@tool("ask_again")
async def ask_again(params: AskParams, same: SameRuntime) -> str:
    """Asks the same assistant again: a run of its own, on the runtime running this tool."""
    assert same.runtime is not None
    result = await run_chat(same.runtime, params.question, conversation_id="inner", user_id="u-inner")
    return result.response or ""


IDENTITY_KEYS = (semconv.GEN_AI_CONVERSATION_ID, semconv.USER_ID)


def same_runtime_asking(hooks: OtelHooks) -> AgentRuntime:
    provider = ScriptedProvider(
        tool_calls_response(("c1", "ask_again", {"question": "q1"})), text_response("inner"), text_response("outer")
    )
    same = SameRuntime()
    runtime = chat_runtime(provider, ask_again, services={SameRuntime: same})
    same.runtime = runtime
    hooks.install(runtime)
    return runtime


@requires(
    PARALLEL_SAME_AGENT,
    "a run of the live agent again, inside its own tool or hook, is flowra 0.0.76+ (before: Duplicate persistent key)",
)
async def test_a_run_started_inside_a_tool_on_the_same_runtime_is_a_run_of_its_own(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """The inner run's root starts on a fresh execution stack while the outer tool's frame flows
    into it: it must be a run of its own (its conversation and user ids), nested under the tool."""
    runtime = same_runtime_asking(make_otel_hooks())
    result = await run_chat(runtime, "Ask again", conversation_id="outer", user_id="u-outer")
    assert result.response == "outer"
    outer = {semconv.GEN_AI_CONVERSATION_ID: "outer", semconv.USER_ID: "u-outer"}
    inner = {semconv.GEN_AI_CONVERSATION_ID: "inner", semconv.USER_ID: "u-inner"}
    assert ends(tree(span_exporter, IDENTITY_KEYS)) == [
        (
            "invoke_agent assistant",
            "UNSET",
            outer,
            [
                (CHAT, "UNSET", outer, []),
                (
                    "execute_tool ask_again",
                    "UNSET",
                    outer,
                    [("invoke_agent assistant", "UNSET", inner, [(CHAT, "UNSET", inner, [])])],
                ),
                (CHAT, "UNSET", outer, []),
            ],
        )
    ]
    assert len(trace_ids(span_exporter)) == 1
    assert_all_ended(ledger, span_exporter)


@requires(
    PARALLEL_SAME_AGENT,
    "a run of the live agent again, inside its own tool or hook, is flowra 0.0.76+ (before: Duplicate persistent key)",
)
async def test_a_run_a_hook_starts_on_the_same_runtime_is_a_run_of_its_own_without_content(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """The sibling from a hook: an ``AfterToolCallEvent`` handler that has the result checked by a
    run on the same runtime. Its own ids, under the tool-calling agent, and no content (a run a
    hook starts may be given the very value being redacted)."""
    provider = ScriptedProvider(
        tool_calls_response(("c1", "get_weather", {"city": "Oslo"})), text_response("fine"), text_response("outer")
    )
    runtime = chat_runtime(provider, get_weather)

    async def check(event: Any) -> None:
        metadata = {"conversation_id": "check", "user_id": "u-check"}
        await runtime.run(agent=ChatAgent, spec=chat_spec("Check the result", metadata))

    make_otel_hooks(capture_content=True).install(runtime)
    runtime.hooks.on(turn_events.AfterToolCallEvent, check)
    result = await run_chat(runtime, "Weather?", conversation_id="outer", user_id="u-outer")
    assert result.response == "outer"
    spans = span_exporter.get_finished_spans()
    checked = [s for s in spans if (s.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID) == "check"]
    assert sorted(s.name for s in checked) == [CHAT, "invoke_agent assistant"]
    assert all((s.attributes or {}).get(semconv.USER_ID) == "u-check" for s in checked)
    content = {semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES}
    assert all(not content & set(s.attributes or {}) for s in checked)
    others = [s for s in spans if s not in checked]
    assert {(s.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID) for s in others} == {"outer"}
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    assert_all_ended(ledger, span_exporter)
