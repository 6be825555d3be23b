"""The test-support builders drive real flowra agents, on every supported flowra version.

These tests pin what the flowra-otel tests rely on: each builder produces a working
``AgentRuntime``, the scripted provider is consumed exactly as scripted, and the
version shims (``run`` signature, loop budget, custom agents, agents as tools) hold on the
installed flowra.  They deliberately do not import ``flowra_otel``.
"""

import asyncio
import dataclasses
import importlib.metadata
import json

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, TextDeltaEvent, ToolLoopSpec, ToolLoopStatus
from flowra.llm import LLMRequest, LLMResponse, StopReason, SystemMessage, TextBlock, ToolResultBlock, UserMessage
from flowra.runtime import InMemorySessionStorage
from flowra.tools import tool

from tests.hook_registry.flowra_support import (
    DEFAULT_MODEL,
    FLOWRA_VERSION,
    HAS_AGENT_TOOLS,
    LOOP_BUDGET_STATUS,
    RESEARCHER_SYSTEM_PROMPT,
    RUN_TAKES_STEP,
    SUMMARIZER_SYSTEM_PROMPT,
    ResearcherAgent,
    ResearcherSetup,
    ResearchResult,
    ResearchSpec,
    ScriptedProvider,
    ScriptExhaustedError,
    SummarizerAgent,
    SummarizeResult,
    SummarizeSpec,
    ToolCallAgent,
    add,
    as_local_tool,
    chat_runtime,
    delayed,
    fail_tool,
    final_text,
    first_user_text,
    get_weather,
    is_interrupted,
    make_hook_registry,
    make_slow_tool,
    research_tool,
    run_agent,
    run_chat,
    run_tool_loop,
    slow_tool,
    specialist_runtime,
    summarize_tool,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    tool_results,
    tool_uses,
    usage,
)

needs_agent_tools = pytest.mark.skipif(
    not HAS_AGENT_TOOLS, reason=f"agents as tools need flowra >= 0.0.6, have {FLOWRA_VERSION}"
)


def _tool_names(request: LLMRequest) -> list[str]:
    return [t.name for t in request.tools or []]


def _tool_result_blocks(request: LLMRequest) -> list[ToolResultBlock]:
    return [
        block
        for message in request.messages
        if isinstance(message, UserMessage)
        for block in message.blocks
        if isinstance(block, ToolResultBlock)
    ]


# -- version detection -------------------------------------------------------------------------


def test_version_flags_match_installed_flowra() -> None:
    installed = tuple(int(part) for part in importlib.metadata.version("flowra").split(".")[:3])
    assert installed == FLOWRA_VERSION
    assert (FLOWRA_VERSION >= (0, 0, 6)) == HAS_AGENT_TOOLS
    assert (FLOWRA_VERSION < (0, 0, 5)) == RUN_TAKES_STEP
    expected_budget = "max_llm_calls" if FLOWRA_VERSION >= (0, 0, 6) else "max_iterations"
    assert LOOP_BUDGET_STATUS.value == expected_budget
    expected_module = "tool_call.agent" if FLOWRA_VERSION >= (0, 0, 6) else "_tool_call_agent"
    assert ToolCallAgent.__module__.endswith(expected_module)


# -- tools ---------------------------------------------------------------------------------------


async def test_plain_functions_become_flowra_tools() -> None:
    async with tool_registry(get_weather, add, fail_tool, slow_tool) as registry:
        schemas = {t.name: t.input_schema for t in registry.get_tools()}
        assert set(schemas) == {"get_weather", "add", "fail_tool", "slow_tool"}
        assert schemas["add"] is not None
        assert schemas["add"]["required"] == ["a", "b"]

        assert (await registry.execute("get_weather", {"city": "Paris"})).content == "Sunny, 21 C in Paris"
        assert (await registry.execute("add", {"a": 2, "b": 3})).content == "5"
        slow = await registry.execute("slow_tool", {"label": "x", "seconds": 0})
        assert slow.content == "x done after 0s"
        assert not slow.is_error
        # Invalid input is rejected by flowra's own schema validation, as an error result.
        assert (await registry.execute("add", {"a": "two"})).is_error


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EchoInput:
    text: str


@tool("echo", "Echo the text back.")
def echo(params: EchoInput) -> str:
    return params.text


async def test_decorated_and_local_tools_pass_through() -> None:
    assert as_local_tool(echo).definition.name == "echo"
    fixed = make_slow_tool(0.0, name="wait")
    assert as_local_tool(fixed) is fixed
    async with tool_registry(fixed) as registry:
        assert (await registry.execute("wait", {"label": "w"})).content == "w done after 0.0s"


# -- tool loop -----------------------------------------------------------------------------------


async def test_tool_loop_one_tool_call_then_answer() -> None:
    provider = ScriptedProvider(
        [
            tool_calls_response(
                [("call_1", "get_weather", {"city": "Paris"})], text="Let me check.", usage=usage(10, 5)
            ),
            text_response("It is sunny in Paris.", usage=usage(20, 7, cache_read=3, cost_usd=0.01)),
        ]
    )
    async with tool_registry(get_weather, add) as registry:
        runtime = tool_loop_runtime(
            provider, registry, system_prompt="Be brief.", temperature=0.2, max_tokens=256, stop_sequences=["END"]
        )
        result = await run_tool_loop(runtime, "What's the weather in Paris?", metadata={"user": "u1"})

    assert result.status == ToolLoopStatus.COMPLETED
    assert result.stop_reason == StopReason.END_TURN
    assert final_text(result) == "It is sunny in Paris."
    assert [(u.id, u.name, u.input) for u in tool_uses(result)] == [("call_1", "get_weather", {"city": "Paris"})]
    assert [(r.tool_use_id, r.content, r.is_error) for r in tool_results(result)] == [
        ("call_1", "Sunny, 21 C in Paris", False)
    ]
    assert result.usage == usage(30, 12, cache_read=3, cost_usd=0.01)

    first, second = provider.requests
    assert first.model == DEFAULT_MODEL
    assert (first.temperature, first.max_tokens, first.stop_sequences) == (0.2, 256, ["END"])
    assert isinstance(first.messages[0], SystemMessage)
    assert first_user_text(first) == "What's the weather in Paris?"
    assert sorted(_tool_names(first)) == ["add", "get_weather"]
    assert [b.content for b in _tool_result_blocks(second)] == ["Sunny, 21 C in Paris"]
    assert not any(c.streamed for c in provider.calls)
    provider.assert_exhausted()


async def test_two_parallel_tool_calls_run_concurrently() -> None:
    events: list[str] = []

    async def probe(label: str) -> str:
        """Record when the call starts and ends."""
        events.append(f"start {label}")
        await asyncio.sleep(0.05)
        events.append(f"end {label}")
        return label.upper()

    provider = ScriptedProvider(
        [
            tool_calls_response([("c1", "probe", {"label": "a"}), ("c2", "probe", {"label": "b"})]),
            text_response("A and B"),
        ]
    )
    async with tool_registry(probe) as registry:
        result = await run_tool_loop(tool_loop_runtime(provider, registry), "run both")

    assert final_text(result) == "A and B"
    # Both calls started before either finished: flowra ran the two tool-call nodes concurrently.
    assert events[:2] == ["start a", "start b"]
    assert sorted(events[2:]) == ["end a", "end b"]
    # Results go back to the model in call order, in a single user message.
    assert [(b.tool_use_id, b.content) for b in _tool_result_blocks(provider.requests[1])] == [("c1", "A"), ("c2", "B")]


async def test_fail_tool_becomes_an_error_result() -> None:
    provider = ScriptedProvider(
        [tool_calls_response([("c1", "fail_tool", {"reason": "disk full"})]), text_response("Sorry, it failed.")]
    )
    async with tool_registry(fail_tool) as registry:
        result = await run_tool_loop(tool_loop_runtime(provider, registry), "try it")

    assert result.status == ToolLoopStatus.COMPLETED
    assert [(r.content, r.is_error) for r in tool_results(result)] == [("Error: disk full", True)]
    assert final_text(result) == "Sorry, it failed."


async def test_provider_exception_propagates_from_run() -> None:
    provider = ScriptedProvider([tool_calls_response([("c1", "add", {"a": 1, "b": 2})]), ConnectionError("LLM down")])
    async with tool_registry(add) as registry:
        with pytest.raises(ConnectionError, match="LLM down"):
            await run_tool_loop(tool_loop_runtime(provider, registry), "add")
    assert len(provider.requests) == 2


async def test_unscripted_call_raises_clear_error() -> None:
    provider = ScriptedProvider([tool_calls_response([("c1", "add", {"a": 1, "b": 2})])])
    async with tool_registry(add) as registry:
        with pytest.raises(ScriptExhaustedError, match=r"LLM call #2 was not scripted"):
            await run_tool_loop(tool_loop_runtime(provider, registry), "add")


async def test_llm_call_budget_is_honoured() -> None:
    provider = ScriptedProvider([tool_calls_response([(f"c{i}", "add", {"a": i, "b": 1})]) for i in range(3)])
    async with tool_registry(add) as registry:
        result = await run_tool_loop(tool_loop_runtime(provider, registry, max_llm_calls=2), "loop")
    assert result.status == LOOP_BUDGET_STATUS
    assert len(provider.requests) == 2
    assert provider.remaining() == 1


async def test_callable_steps_see_the_request() -> None:
    def answer(request: LLMRequest) -> LLMResponse:
        return text_response(f"{len(request.messages)} messages, tools={_tool_names(request)}")

    async def answer_later(request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(0)
        return text_response("async")

    provider = ScriptedProvider([answer, answer_later, delayed(text_response("late"), 0.01), delayed(answer, 0)])
    async with tool_registry(add) as registry:
        runtime = tool_loop_runtime(provider, registry)
        assert final_text(await run_tool_loop(runtime, "one")) == "1 messages, tools=['add']"
        assert final_text(await run_tool_loop(runtime, "two")) == "async"
        assert final_text(await run_tool_loop(runtime, "three")) == "late"
        assert final_text(await run_tool_loop(runtime, "four")) == "1 messages, tools=['add']"


async def test_streaming_yields_text_deltas() -> None:
    deltas: list[str] = []
    hooks = HookRegistry()
    hooks.on(TextDeltaEvent, lambda event: deltas.append(event.data.text))
    provider = ScriptedProvider([text_response("Hello streaming world")], chunk_size=5)
    async with tool_registry() as registry:
        result = await run_tool_loop(tool_loop_runtime(provider, registry, hooks), "hi")

    assert deltas == ["Hello", " stre", "aming", " worl", "d"]
    assert final_text(result) == "Hello streaming world"
    assert [c.streamed for c in provider.calls] == [True]


async def test_hook_providers_are_registered() -> None:
    seen: list[tuple[str, bool]] = []

    class Recorder:
        def register_hooks(self, registry: HookRegistry) -> None:
            registry.on(AfterToolCallEvent, self.after_tool)

        def after_tool(self, event: Event[AfterToolCallEvent]) -> None:
            seen.append((event.data.tool_use.name, event.data.result.is_error))

    assert isinstance(make_hook_registry([Recorder(), Recorder()]), HookRegistry)
    provider = ScriptedProvider([tool_calls_response([("c1", "fail_tool", {})]), text_response("ok")])
    async with tool_registry(fail_tool) as registry:
        await run_tool_loop(tool_loop_runtime(provider, registry, Recorder()), "go")
    assert seen == [("fail_tool", True)]


async def test_interrupt_during_a_tool_is_reported_on_every_version() -> None:
    provider = ScriptedProvider(
        [tool_calls_response([("c1", "slow_tool", {"seconds": 0.5})]), text_response("never reached")]
    )
    async with tool_registry(slow_tool) as registry:
        runtime = tool_loop_runtime(provider, registry)
        task = asyncio.create_task(run_agent(runtime, "assistant", ToolLoopSpec(user_message="wait"), step="start"))
        await asyncio.sleep(0.05)
        runtime.interrupt()
        result = await task
    assert is_interrupted(result)
    assert len(provider.requests) == 1


async def test_keyed_provider_serves_concurrent_runs() -> None:
    provider = ScriptedProvider.by_first_user_text(
        {
            "weather": [tool_calls_response([("w1", "get_weather", {"city": "Rome"})]), text_response("Rome: sunny")],
            "sum": [tool_calls_response([("s1", "add", {"a": 2, "b": 2})]), text_response("4")],
        },
        delay=0.01,
    )
    async with tool_registry(get_weather, add) as registry:
        # Separate runtimes: one runtime only runs concurrently with distinct storage keys.
        runs = [run_tool_loop(tool_loop_runtime(provider, registry), text) for text in ("weather", "sum")]
        weather, total = await asyncio.gather(*runs)

    assert (final_text(weather), final_text(total)) == ("Rome: sunny", "4")
    assert [b.content for b in tool_results(total)] == ["4"]
    assert len(provider.requests_for("weather")) == len(provider.requests_for("sum")) == 2
    provider.assert_exhausted()
    with pytest.raises(ScriptExhaustedError, match="no script for key 'other'"):
        await provider.call(LLMRequest(model="m", messages=[UserMessage(blocks=[TextBlock(text="other")])]))


# -- chat ----------------------------------------------------------------------------------------


async def test_chat_agent_multi_turn() -> None:
    provider = ScriptedProvider(
        [
            tool_calls_response([("c1", "get_weather", {"city": "Oslo"})]),
            text_response("Oslo is sunny.", usage=usage(12, 4)),
        ]
    )
    async with tool_registry(get_weather) as registry:
        runtime = chat_runtime(
            provider, registry, system_prompt="You are a chat bot.", storage=InMemorySessionStorage()
        )
        first = await run_chat(runtime, "Weather in Oslo?", storage_key="session")
        provider.extend([text_response("You asked about Oslo.")])
        second = await run_chat(runtime, "What did I ask?", storage_key="session")

    assert first.response == "Oslo is sunny."
    assert first.usage == usage(12, 4)
    assert final_text(second) == "You asked about Oslo."
    turn2 = provider.requests[2]
    assert isinstance(turn2.messages[0], SystemMessage)
    # The session history (turn 1 incl. its tool exchange) precedes the new user message.
    assert first_user_text(turn2) == "Weather in Oslo?"
    last = turn2.messages[-1]
    assert isinstance(last, UserMessage)
    assert last.blocks == [TextBlock(text="What did I ask?")]


# -- custom agents -------------------------------------------------------------------------------


async def test_summarizer_calls_the_provider_directly() -> None:
    provider = ScriptedProvider([text_response("Short.", usage=usage(40, 2))])
    result = await run_agent(
        specialist_runtime(provider, model="openai/gpt-5"), SummarizerAgent, SummarizeSpec(text="A long text.")
    )
    assert result == SummarizeResult(summary="Short.")
    (request,) = provider.requests
    assert request.model == "openai/gpt-5"
    assert request.tools is None
    assert request.messages[0] == SystemMessage(blocks=[TextBlock(text=SUMMARIZER_SYSTEM_PROMPT)])


async def test_researcher_runs_its_own_tool_loop_directly() -> None:
    """Works on every version: a custom agent spawning a ToolLoopAgent with its own services."""
    child = ScriptedProvider(
        [tool_calls_response([("k1", "get_weather", {"city": "Oslo"})]), text_response("Oslo: sunny")]
    )
    unused_parent = ScriptedProvider([])
    async with tool_registry(get_weather) as child_tools, tool_registry(add) as parent_tools:
        runtime = tool_loop_runtime(
            unused_parent, parent_tools, researcher=ResearcherSetup(provider=child, registry=child_tools, model="m2")
        )
        result = await run_agent(runtime, ResearcherAgent, ResearchSpec(query="weather in Oslo"))

    assert result == ResearchResult(answer="Oslo: sunny")
    assert unused_parent.requests == []
    first = child.requests[0]
    assert first.model == "m2"
    assert first.messages[0] == SystemMessage(blocks=[TextBlock(text=RESEARCHER_SYSTEM_PROMPT)])
    assert _tool_names(first) == ["get_weather"]


@needs_agent_tools
async def test_agent_as_tool_child_calls_its_own_tool() -> None:
    child = ScriptedProvider(
        [tool_calls_response([("k1", "get_weather", {"city": "Oslo"})]), text_response("Oslo: sunny, 21 C")]
    )
    parent = ScriptedProvider(
        [tool_calls_response([("p1", "research", {"query": "weather in Oslo"})]), text_response("It is sunny in Oslo.")]
    )
    after_tool: list[str] = []
    hooks = HookRegistry()
    hooks.on(AfterToolCallEvent, lambda event: after_tool.append(event.data.tool_use.name))
    async with tool_registry(get_weather) as child_tools, tool_registry(research_tool(), add) as parent_tools:
        runtime = tool_loop_runtime(
            parent, parent_tools, hooks, researcher=ResearcherSetup(provider=child, registry=child_tools)
        )
        result = await run_tool_loop(runtime, "How is the weather in Oslo?")

    assert final_text(result) == "It is sunny in Oslo."
    assert sorted(_tool_names(parent.requests[0])) == ["add", "research"]
    assert parent.requests[0].tools is not None
    research_schema = (
        parent.requests[0].tools[[t.name for t in parent.requests[0].tools].index("research")].input_schema
    )
    assert research_schema is not None
    assert "query" in research_schema["properties"]
    # The child loop got the query as its user message and only its own tools.
    assert first_user_text(child.requests[0]) == "weather in Oslo"
    assert _tool_names(child.requests[0]) == ["get_weather"]
    assert [b.content for b in _tool_result_blocks(child.requests[1])] == ["Sunny, 21 C in Oslo"]
    # The parent sees the researcher's result, JSON-encoded by ToolCallAgent.
    (research_result,) = tool_results(result)
    assert json.loads(research_result.content) == {"answer": "Oslo: sunny, 21 C"}
    assert not research_result.is_error
    # One shared HookRegistry: the child's tool call is seen before the parent's.
    assert after_tool == ["get_weather", "research"]


@needs_agent_tools
async def test_agent_as_tool_under_chat_with_one_keyed_provider() -> None:
    shared = ScriptedProvider.by_first_user_text(
        {
            "Plan my trip to Rome": [
                tool_calls_response(
                    [("p1", "research", {"query": "Rome weather"}), ("p2", "summarize", {"text": "Rome trip"})]
                ),
                text_response("Pack sunglasses."),
            ],
            "Rome weather": [tool_calls_response([("k1", "get_weather", {"city": "Rome"})]), text_response("Sunny")],
            "Rome trip": [text_response("A trip.")],
        }
    )
    async with tool_registry(get_weather) as child_tools, tool_registry(research_tool(), summarize_tool()) as tools:
        runtime = chat_runtime(
            shared,
            tools,
            extra_agents={"summarizer": SummarizerAgent},
            researcher=ResearcherSetup(provider=shared, registry=child_tools),
        )
        result = await run_chat(runtime, "Plan my trip to Rome")

    assert result.response == "Pack sunglasses."
    results = _tool_result_blocks(shared.requests_for("Plan my trip to Rome")[1])
    assert [(b.tool_use_id, json.loads(b.content)) for b in results] == [
        ("p1", {"answer": "Sunny"}),
        ("p2", {"summary": "A trip."}),
    ]
    shared.assert_exhausted()
