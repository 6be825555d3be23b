"""Hostile input never breaks the agent, never changes the host, and never leaves a span open.

Each test is one input that broke an earlier version of the plugin (a span left open, a run
that raised because of the plugin, a host class changed, a whole export batch dropped); each
asserts the agent's outcome is what it is without the plugin, every started span ended, and
(through the autouse fixture) the plugin logged no internal error.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, BeforeToolCallEvent, ToolLoopStatus
from flowra.llm import LLMProvider, LLMRequest, LLMResponse, ToolResultBlock, Usage
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with, wrapped_result
from tests.hook_registry.flowra_support import (
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    delayed,
    final_text,
    get_weather,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    tool_results,
)
from tests.otlp_receiver import OtlpReceiver

MakeHooks = Callable[..., OtelHooks]
NEEDS_AGENT_TOOLS = pytest.mark.skipif(not HAS_AGENT_TOOLS, reason="agents as tools need flowra >= 0.0.6")
CHAT = "chat sonnet-4-5"


def spans_named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith(prefix)), key=lambda s: s.start_time or 0
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# ------------------------------------------------------------------ values that raise when read
class UnprintableError(RuntimeError):
    """A provider SDK exception whose ``__str__`` itself fails (seen with lazily formatted bodies)."""

    def __str__(self) -> str:
        raise ValueError("no message for you")


async def test_an_exception_whose_str_raises_still_ends_every_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider([tool_calls_response([("c", "get_weather", {"city": "Oslo"})]), UnprintableError()])
    async with tool_registry(get_weather) as tools:
        with pytest.raises(UnprintableError):
            await run_tool_loop(
                tool_loop_runtime(provider, tools, hooks_with(make_otel_hooks(capture_content=True))), "q"
            )
    failed = spans_named(span_exporter, CHAT)[-1]
    assert attrs(failed)[semconv.ERROR_TYPE] == f"{__name__}.UnprintableError"
    (event,) = [e for e in failed.events if e.name == "exception"]
    assert "str() failed" in str((event.attributes or {})["exception.message"])
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize("cost", ["a lot", float("nan"), object(), -0.5], ids=["str", "nan", "object", "negative"])
async def test_odd_usage_values_cost_their_numbers_not_the_spans(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger, cost: Any
) -> None:
    odd = Usage(input_tokens="12", output_tokens=None, cost_usd=cost)  # type: ignore[arg-type]
    provider = ScriptedProvider([text_response("fine", usage=odd)])
    async with tool_registry(get_weather) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(otel_hooks)), "q")
    assert final_text(result) == "fine"
    (chat,) = spans_named(span_exporter, CHAT)
    expected_cost = {semconv.FLOWRA_USAGE_COST_USD: -0.5} if cost == -0.5 else {}
    usage_keys = {k: v for k, v in attrs(chat).items() if k.startswith(("gen_ai.usage.", "flowra.usage."))}
    assert usage_keys == {semconv.GEN_AI_USAGE_INPUT_TOKENS: 12, semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 0, **expected_cost}
    assert_all_ended(ledger, span_exporter)


class MixedKeys:
    """A hook that puts a non-string key into a tool input (canonical JSON cannot sort the keys)."""

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(BeforeToolCallEvent, self.before)

    @staticmethod
    def before(event: Any) -> None:
        use = event.data.tool_use
        event.data.tool_use = dataclasses.replace(use, input={**use.input, 7: "seven", (1, 2): "tuple"})


async def test_a_non_string_key_in_a_tool_input_ends_every_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    hooks = make_otel_hooks(capture_content=True, redaction_hmac_key=b"0123456789abcdef")
    provider = ScriptedProvider([tool_calls_response([("c", "get_weather", {"city": "Oslo"})]), text_response("ok")])
    async with tool_registry(get_weather) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, hooks_with(hooks, MixedKeys())), "q")
    assert result.status == ToolLoopStatus.COMPLETED
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)["flowra.redaction.fields"] == ("arguments",)
    assert_all_ended(ledger, span_exporter)


class Ambiguous:
    """An array-like tool input: ``==`` is element-wise and its truth value raises (numpy, pandas)."""

    def __eq__(self, other: object) -> Any:
        return Ambiguous()

    def __ne__(self, other: object) -> Any:
        return Ambiguous()

    def __bool__(self) -> bool:
        raise ValueError("The truth value of an array with more than one element is ambiguous.")

    __hash__ = None  # type: ignore[assignment]


class ArrayLikeInput:
    """Puts a fresh array-like into the tool input; registered twice, the second replacement is
    compared with the first, array-like with array-like."""

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(BeforeToolCallEvent, self.before)

    @staticmethod
    def before(event: Any) -> None:
        event.data.tool_use = dataclasses.replace(event.data.tool_use, input={"city": "Oslo", "matrix": Ambiguous()})


async def _array_like_run(registry: HookRegistry) -> Any:
    provider = ScriptedProvider([tool_calls_response([("c", "get_weather", {"city": "Oslo"})]), text_response("ok")])
    async with tool_registry(get_weather) as tools:
        return await run_tool_loop(tool_loop_runtime(provider, tools, registry), "q")


async def test_an_array_like_tool_input_does_not_break_the_run(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    traced = await _array_like_run(hooks_with(otel_hooks, ArrayLikeInput(), ArrayLikeInput()))
    untraced_registry = HookRegistry()  # the plugin is installed, but this registry has no OtelHooks
    untraced_registry.add(ArrayLikeInput())
    untraced_registry.add(ArrayLikeInput())
    untraced = await _array_like_run(untraced_registry)
    assert traced.status == untraced.status == ToolLoopStatus.COMPLETED
    assert [r.content for r in tool_results(traced)] == [r.content for r in tool_results(untraced)]
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)["flowra.redaction.fields"] == ("arguments",)  # undecidable equality counts as a change
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------ the host's classes
def test_provider_classes_keep_their_cooperative_init_subclass(make_otel_hooks: MakeHooks) -> None:
    seen: list[tuple[str, object]] = []

    class Registering:
        def __init_subclass__(cls, /, flavour: object = None, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            seen.append((cls.__name__, flavour))

    make_otel_hooks()  # installs the plugin's hook for providers defined from now on

    class MixedProvider(LLMProvider, Registering, flavour="spicy"):
        async def call(self, request: LLMRequest) -> LLMResponse:
            return text_response("hi")

    class Plain(Registering, flavour="mild"):
        pass

    assert seen == [("MixedProvider", "spicy"), ("Plain", "mild")]
    assert hasattr(MixedProvider.__dict__["call"], "__wrapped__")  # and the provider is traced


# ------------------------------------------------------------------ tool-use ids are not keys
def _results_by_span(exporter: InMemorySpanExporter) -> list[tuple[str, str, str, object]]:
    return [
        (
            s.name,
            str(attrs(s)[semconv.GEN_AI_TOOL_CALL_ID]),
            s.status.status_code.name,
            attrs(s).get(semconv.GEN_AI_TOOL_CALL_RESULT),
        )
        for s in spans_named(exporter, "execute_tool")
    ]


def echo(word: str) -> str:
    """Repeat the word."""
    return f"echo {word}"


@pytest.mark.parametrize("call_id", ["dup", ""], ids=["same_id", "empty_id"])
async def test_tool_calls_sharing_an_id_each_get_their_own_span_and_result(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger, call_id: str
) -> None:
    provider = ScriptedProvider(
        [
            tool_calls_response([(call_id, "echo", {"word": "one"}), (call_id, "echo", {"word": "two"})]),
            text_response("done"),
        ]
    )
    async with tool_registry(echo) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(make_otel_hooks(capture_content=True)))
        result = await run_tool_loop(runtime, "q")
    assert final_text(result) == "done"
    assert sorted(_results_by_span(span_exporter), key=lambda r: str(r[3])) == [
        ("execute_tool echo", call_id, "UNSET", wrapped_result("echo one")),
        ("execute_tool echo", call_id, "UNSET", wrapped_result("echo two")),
    ]
    assert_all_ended(ledger, span_exporter)


class FixedId:
    """A hook that redirects every call to one fixed id (and another tool)."""

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(BeforeToolCallEvent, self.before)

    @staticmethod
    def before(event: Any) -> None:
        event.data.tool_use = dataclasses.replace(event.data.tool_use, id="fixed", name="echo")


async def test_a_hook_redirecting_calls_to_one_fixed_id_leaves_no_span_open(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(
        [
            tool_calls_response([("a", "get_weather", {"word": "one"}), ("b", "get_weather", {"word": "two"})]),
            text_response("done"),
        ]
    )
    async with tool_registry(echo, get_weather) as tools:
        runtime = tool_loop_runtime(provider, tools, hooks_with(make_otel_hooks(capture_content=True), FixedId()))
        await run_tool_loop(runtime, "q")
    assert sorted(_results_by_span(span_exporter), key=lambda r: str(r[3])) == [
        ("execute_tool echo", "fixed", "UNSET", wrapped_result("echo one")),
        ("execute_tool echo", "fixed", "UNSET", wrapped_result("echo two")),
    ]
    assert_all_ended(ledger, span_exporter)


def _research_script(fail_query: str | None = None, slow_query: str | None = None) -> dict[str, list[Any]]:
    def answer(query: str) -> Any:
        step: Any = text_response(f"answer {query}")
        if query == fail_query:
            step = RuntimeError("researcher model down")
        if query == slow_query:
            step = delayed(step, 0.3)
        return step

    return {"alpha": [answer("alpha")], "beta": [answer("beta")]}


@NEEDS_AGENT_TOOLS
async def test_agents_as_tools_sharing_an_id_nest_under_their_own_execute_tool(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    parent = ScriptedProvider(
        [
            tool_calls_response([("same", "research", {"query": "alpha"}), ("same", "research", {"query": "beta"})]),
            text_response("both done"),
        ]
    )
    child = ScriptedProvider.by_first_user_text(_research_script())
    async with tool_registry(research_tool()) as tools, tool_registry(get_weather) as child_tools:
        runtime = tool_loop_runtime(
            parent,
            tools,
            hooks_with(make_otel_hooks(capture_content=True)),
            researcher=ResearcherSetup(provider=child, registry=child_tools),
        )
        result = await run_tool_loop(runtime, "go")
    assert final_text(result) == "both done"
    spans = span_exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    tools_seen = set()
    for agent in spans_named(span_exporter, "invoke_agent research"):
        assert agent.parent is not None and agent.context is not None
        tool = by_id[agent.parent.span_id]
        (chat,) = [s for s in spans if s.parent is not None and s.parent.span_id == agent.context.span_id]
        answer = json.loads(str(attrs(chat)[semconv.GEN_AI_OUTPUT_MESSAGES]))[0]["parts"][0]["content"]
        # the researcher's answer is the result of the very execute_tool it nests under
        assert tool.name == "execute_tool research"
        assert answer in str(attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT])
        tools_seen.add(agent.parent.span_id)
    assert len(tools_seen) == 2
    assert_all_ended(ledger, span_exporter)


@NEEDS_AGENT_TOOLS
async def test_a_failing_parallel_sub_agent_detaches_nothing_in_another_task(
    otel_hooks: OtelHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    parent = ScriptedProvider(
        [tool_calls_response([("a", "research", {"query": "alpha"}), ("b", "research", {"query": "beta"})])]
    )
    child = ScriptedProvider.by_first_user_text(_research_script(fail_query="alpha", slow_query="beta"))
    async with tool_registry(research_tool()) as tools, tool_registry(get_weather) as child_tools:
        runtime = tool_loop_runtime(
            parent, tools, hooks_with(otel_hooks), researcher=ResearcherSetup(provider=child, registry=child_tools)
        )
        with pytest.raises(RuntimeError, match="researcher model down"):
            await run_tool_loop(runtime, "go")
    # The autouse fixture fails the test on any ERROR from opentelemetry.context ("Failed to
    # detach context"); the sibling's chat span ended with the run, as cut short.
    chats = {str(attrs(s).get(semconv.FLOWRA_END_REASON)) for s in spans_named(span_exporter, CHAT)}
    assert "error" in chats
    assert_all_ended(ledger, span_exporter)


# ------------------------------------------------------------------ strings the exporter cannot encode
async def test_a_tool_name_with_a_lone_surrogate_does_not_drop_the_export_batch() -> None:
    bad_name = "get_\udcffweather"
    with OtlpReceiver() as rx:
        provider = TracerProvider()
        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{rx.http_endpoint}/v1/traces", timeout=5))
        provider.add_span_processor(processor)
        hooks = OtelHooks(tracer_provider=provider, capture_content=True)
        try:
            script = [tool_calls_response([("c", bad_name, {"city": "Oslo"})]), text_response("sorry")]
            async with tool_registry(get_weather) as tools:
                await run_tool_loop(tool_loop_runtime(ScriptedProvider(script), tools, hooks_with(hooks)), "q")
                await run_tool_loop(
                    tool_loop_runtime(ScriptedProvider([text_response("healthy")]), tools, hooks_with(hooks)), "q"
                )
            assert provider.force_flush(10_000)
            spans = rx.wait_for_spans(6)
        finally:
            provider.shutdown()
    names = sorted(s.name for s in spans)
    # The name the model invented is not a tool the request offered: content, recorded (UTF-8-safe)
    # only as such; the span is named after the placeholder.
    assert names == sorted(
        ["invoke_agent assistant", CHAT, "execute_tool _unknown_tool", CHAT, "invoke_agent assistant", CHAT]
    )
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.attributes[semconv.FLOWRA_TOOL_REQUESTED_NAME] == "get_\ufffdweather"


# ------------------------------------------------------------------ a hook that replaces the event object
SECRET = "sk-live-0123456789abcdefSECRET"


class ReplaceEvent:
    """A redaction hook that replaces the whole event object instead of assigning its field."""

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(AfterToolCallEvent, self.after)

    @staticmethod
    def after(event: Any) -> None:
        clean = ToolResultBlock(tool_use_id=event.data.tool_use.id, content="[redacted]")
        event.data = dataclasses.replace(event.data, result=clean)


def leak(word: str) -> str:
    """Answer with a secret in the text."""
    return f"the key is {SECRET}"


@pytest.mark.skipif(
    getattr(getattr(Event, "__dataclass_params__", None), "frozen", False),
    reason="this flowra's Event is frozen: a hook cannot replace event.data",
)
async def test_a_hook_replacing_the_event_object_is_what_gets_recorded(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider([tool_calls_response([("c", "leak", {"word": "x"})]), text_response("ok")])
    async with tool_registry(leak) as tools:
        registry = hooks_with(make_otel_hooks(capture_content=True), ReplaceEvent())
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "q")
    assert [r.content for r in tool_results(result)] == ["[redacted]"]  # what flowra itself uses
    (tool,) = spans_named(span_exporter, "execute_tool")
    assert attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("[redacted]")
    dumped = json.dumps([dict(s.attributes or {}) for s in span_exporter.get_finished_spans()], default=str)
    assert SECRET not in dumped
    assert_all_ended(ledger, span_exporter)
