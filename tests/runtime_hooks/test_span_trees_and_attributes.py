"""The span tree and attributes of real flowra 0.0.86+ runs, on the real SDK.

Each test runs flowra's own agents through ``AgentRuntime`` with a scripted provider and compares
the whole normalised span tree, so a wrong parent, a missing or an extra span fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from flowra.llm import LLMRequest, LLMResponse, StopReason
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import (
    CURRENT_SPAN_IN_TOOL,
    HAS_RESPONSE_MODEL,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    probe,
    research_runtime,
    run_chat,
    run_turn,
    slow,
    text_response,
    tool_calls_response,
    turn_runtime,
    usage,
)

MakeHooks = Callable[..., OtelHooks]
WEATHER = "Current weather for a city."


def tree(exporter: InMemorySpanExporter, keys: tuple[str, ...] | None = None) -> list[span_tree.Node]:
    return span_tree.build(exporter.get_finished_spans(), keys)


def simple(nodes: list[span_tree.Node]) -> list[Any]:
    """(name, kind, status, children) without attributes."""
    return [(n.name, n.kind, n.status, simple(n.children)) for n in nodes]


def assert_nested_in_time(nodes: list[span_tree.Node]) -> None:
    for node in span_tree.walk(nodes):
        assert node.span is not None
        for child in node.children:
            assert child.span is not None
            assert node.span.start_time is not None and node.span.end_time is not None
            assert child.span.start_time is not None and child.span.end_time is not None
            assert node.span.start_time <= child.span.start_time <= child.span.end_time <= node.span.end_time


RESPONSE_MODEL: dict[str, Any] = {"model": "claude-sonnet-4-5-20250929"} if HAS_RESPONSE_MODEL else {}
"""``LLMResponse.model``: flowra 0.0.82+."""


async def test_chat_with_a_tool_exact_tree_and_attributes(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = ScriptedProvider(
        tool_calls_response(("call_1", "get_weather", {"city": "Paris"})),
        LLMResponse(
            messages=text_response("Sunny.").messages,
            stop_reason=StopReason.END_TURN,
            usage=usage(20, 7, cache_read_input_tokens=3, cache_creation_input_tokens=2, cost_usd=0.25),
            **RESPONSE_MODEL,
        ),
    )
    runtime = traced(make_otel_hooks, chat_runtime(provider, get_weather))
    result = await run_chat(runtime, "Weather in Paris?")
    assert result.response == "Sunny."

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
        semconv.GEN_AI_AGENT_NAME: "assistant",  # the ChatAgent's name, carried by its TurnAgent
        semconv.FLOWRA_AGENT_PATH: "assistant/turn",
        semconv.FLOWRA_TOOL_LOOP_STATUS: "completed",
        semconv.FLOWRA_TOOL_LOOP_ITERATIONS: 2,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
        semconv.GEN_AI_REQUEST_MODEL: "sonnet-4-5",
        # The run's totals (flowra's own TurnResult.usage), under the keys of invoke_agent.
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10 + 20 + 3 + 2,
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
        semconv.GEN_AI_AGENT_NAME: "assistant",
    }
    assert chat1.attrs == {
        **request_attrs,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["tool_call"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
    }
    assert chat2.attrs == {
        **request_attrs,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
        **({semconv.GEN_AI_RESPONSE_MODEL: "claude-sonnet-4-5-20250929"} if HAS_RESPONSE_MODEL else {}),
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 25,  # semconv counts cached tokens in input
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 3,
        semconv.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: 2,
        semconv.FLOWRA_USAGE_COST_USD: 0.25,
    }
    assert tool.attrs == {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "get_weather",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.GEN_AI_TOOL_CALL_ID: "call_1",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        semconv.GEN_AI_TOOL_DESCRIPTION: WEATHER,
    }
    assert len({s.context.trace_id for s in span_exporter.get_finished_spans() if s.context}) == 1
    assert_nested_in_time(spans)
    assert_all_ended(ledger, span_exporter)


async def test_request_settings_and_a_bare_turn_agent(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    provider = ScriptedProvider(text_response("Hi."))
    settings = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 256, "stop_sequences": ["END"]}
    runtime = traced(make_otel_hooks, turn_runtime(provider, model="gpt-4o", llm=settings))
    await run_turn(runtime, "Hi?")
    (agent,) = tree(span_exporter)
    assert agent.name == "invoke_agent assistant"
    assert agent.attrs[semconv.FLOWRA_AGENT_PATH] == "assistant"
    (chat,) = agent.children
    assert chat.name == "chat gpt-4o"
    assert {k: chat.attrs[k] for k in chat.attrs if k.startswith("gen_ai.request") or k == "gen_ai.provider.name"} == {
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4o",
        semconv.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        semconv.GEN_AI_REQUEST_TOP_P: 0.9,
        semconv.GEN_AI_REQUEST_MAX_TOKENS: 256,
        semconv.GEN_AI_REQUEST_STOP_SEQUENCES: ["END"],
    }


async def test_sampling_relevant_attributes_are_given_at_span_start(
    make_otel_hooks: MakeHooks, tracer_provider: TracerProvider
) -> None:
    """Samplers see start attributes only: operation, provider, model and tool name must be there."""
    seen: dict[str, dict[str, Any]] = {}

    class Capture(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            seen[span.name] = dict(span.attributes)

    tracer_provider.add_span_processor(Capture())
    provider = ScriptedProvider(tool_calls_response(("c1", "get_weather", {"city": "Oslo"})), text_response())
    await run_chat(traced(make_otel_hooks, chat_runtime(provider, get_weather)))
    assert seen["invoke_agent assistant"][semconv.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert seen["chat sonnet-4-5"][semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert seen["chat sonnet-4-5"][semconv.GEN_AI_REQUEST_MODEL] == "sonnet-4-5"
    assert seen["execute_tool get_weather"][semconv.GEN_AI_TOOL_NAME] == "get_weather"
    assert seen["execute_tool get_weather"][semconv.GEN_AI_TOOL_CALL_ID] == "c1"


async def test_agent_as_tool_nests_under_its_execute_tool_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    main = ScriptedProvider(
        tool_calls_response(("r1", "research", {"question": "Why?"}), ("w1", "get_weather", {"city": "Oslo"})),
        text_response("All done."),
    )
    researcher = ScriptedProvider(
        tool_calls_response(("rw", "get_weather", {"city": "Rome"})), text_response("Because.")
    )
    runtime = traced(make_otel_hooks, research_runtime(main, researcher, get_weather))
    await run_chat(runtime, "Research and weather")
    spans = tree(span_exporter, (semconv.GEN_AI_AGENT_NAME, semconv.GEN_AI_AGENT_DESCRIPTION))
    assert span_tree.shape(spans) == [
        (
            "invoke_agent assistant",
            [
                ("chat sonnet-4-5", []),
                (
                    "execute_tool research",
                    [
                        (
                            "invoke_agent researcher",
                            [
                                (
                                    "invoke_agent researcher/turn",
                                    [
                                        ("chat sonnet-4-5", []),
                                        ("execute_tool get_weather", []),
                                        ("chat sonnet-4-5", []),
                                    ],
                                )
                            ],
                        )
                    ],
                ),
                ("execute_tool get_weather", []),
                ("chat sonnet-4-5", []),
            ],
        )
    ]
    research = spans[0].children[1].children[0]
    assert research.attrs == {
        semconv.GEN_AI_AGENT_NAME: "researcher",
        semconv.GEN_AI_AGENT_DESCRIPTION: "Research one question in depth",  # the tool's description
    }
    inner_tool = research.children[0].children[1]
    assert inner_tool.attrs == {semconv.GEN_AI_AGENT_NAME: "researcher/turn"}
    assert_nested_in_time(spans)
    assert_all_ended(ledger, span_exporter)


async def test_parallel_tool_calls_are_siblings_each_current_while_its_tool_runs(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """Each tool runs in a task of its own, in parallel: each sees its own execute_tool span as
    the current span (an HTTP client span made there nests under it), never its sibling's."""
    seen = CURRENT_SPAN_IN_TOOL
    seen.clear()
    provider = ScriptedProvider(
        tool_calls_response(
            ("a", "probe", {"name": "a"}), ("b", "probe", {"name": "b"}), ("c", "probe", {"name": "c"})
        ),
        text_response(),
    )
    runtime = traced(make_otel_hooks, chat_runtime(provider, probe))
    await run_chat(runtime)
    spans = tree(span_exporter, (semconv.GEN_AI_TOOL_CALL_ID,))
    agent = spans[0]
    tools = [n for n in agent.children if n.name == "execute_tool probe"]
    assert len(tools) == 3
    by_call = {n.attrs[semconv.GEN_AI_TOOL_CALL_ID]: n for n in tools}
    for name, span_id in seen.items():
        node = by_call[name]
        assert node.span is not None and node.span.context is not None
        assert node.span.context.span_id == span_id
    assert_all_ended(ledger, span_exporter)


async def test_the_provider_call_runs_with_its_chat_span_current(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    seen: list[int] = []

    def answer(request: LLMRequest) -> LLMResponse:
        seen.append(trace.get_current_span().get_span_context().span_id)
        return text_response()

    await run_chat(traced(make_otel_hooks, chat_runtime(ScriptedProvider(answer))))
    (agent,) = tree(span_exporter)
    (chat,) = agent.children
    assert chat.span is not None and chat.span.context is not None
    assert seen == [chat.span.context.span_id]


async def test_concurrent_runs_never_mix(make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter) -> None:
    async def one(i: int) -> None:
        provider = ScriptedProvider(
            tool_calls_response((f"w{i}", "slow", {"seconds": 0.01 * (i % 3)})), text_response(f"r{i}"), delay=0.001
        )
        await run_chat(traced(make_otel_hooks, chat_runtime(provider, slow)), f"q{i}", conversation_id=f"conv-{i}")

    await asyncio.gather(*(one(i) for i in range(8)))
    roots = tree(span_exporter, (semconv.GEN_AI_CONVERSATION_ID, semconv.GEN_AI_TOOL_CALL_ID))
    assert len(roots) == 8
    for root in roots:
        cid = root.attrs[semconv.GEN_AI_CONVERSATION_ID]
        i = cid.removeprefix("conv-")
        assert span_tree.shape([root]) == [
            ("invoke_agent assistant", [("chat sonnet-4-5", []), ("execute_tool slow", []), ("chat sonnet-4-5", [])])
        ]
        for node in span_tree.walk([root]):
            assert node.attrs[semconv.GEN_AI_CONVERSATION_ID] == cid
        assert root.children[1].attrs[semconv.GEN_AI_TOOL_CALL_ID] == f"w{i}"
    assert len({r.span.context.trace_id for r in roots if r.span and r.span.context}) == 8


async def test_the_root_joins_the_callers_current_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    runtime = traced(make_otel_hooks, chat_runtime(ScriptedProvider(text_response())))
    tracer = make_otel_hooks().telemetry.tracer
    with tracer.start_as_current_span("POST /chat"):
        await run_chat(runtime)
    assert span_tree.shape(tree(span_exporter)) == [
        ("POST /chat", [("invoke_agent assistant", [("chat sonnet-4-5", [])])])
    ]
    assert not trace.get_current_span().is_recording()  # nothing the plugin attached is left behind
