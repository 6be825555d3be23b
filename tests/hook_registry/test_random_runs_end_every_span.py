"""Property: whatever mix of hostile inputs concurrent runs meet, every span ends in its own trace.

Each seed drives several concurrent runs on one ``OtelHooks`` with random mixes of: duplicate,
empty and redirected tool-use ids, parallel tools, agents used as tools, tools that fail, hooks
that raise or scrub results, exceptions whose ``__str__`` raises, odd usage values (token counts
beyond int64 among them), interrupts and cancellation, on a ``HookRegistry`` or a subclass of it
(one overriding ``emit``, one wrapping every handler ``on`` is given), and (``TrustMix``) a model
that prefixes tool names with ``functions.`` with a hook that strips it, a name nobody offered, a
tool whose result holds a credential as ``bytes``, and a hook that has every result checked by a
small agent run on the app's own registry (given the raw value). Whatever the runs' outcomes, the
spans started equal the spans ended, every span sits in the trace of the run that made it (one
root per trace, the run's conversation id on every span), every int on a span fits int64, the
credential is nowhere (``redact_secrets=["api_key"]``), a run a hook started records no content,
no invented or prefixed name is a tool's name, and neither the plugin nor
``opentelemetry.context`` logs an error (conftest).

A second property: a durable run stopped at a random LLM call (its task cancelled; agents used
as tools included) and resumed on a fresh runtime continues as one trace, its root linked to
the stopped run's, every span ended.

A third (the fourth trust round, ``tests/round_four.py``): content on spans, in the details events
or both; ``FlowraInstrumentor`` instrumented and uninstrumented at random before and after the app
installs its own ``OtelHooks``; a tool that runs another conversation on the same runtime; a tool
result (and arguments) holding an integer beyond int64 and a value nested 30 deep; and a private
key of 100 - 5 000 characters placed around the cut of a random budget. Every span ends, the
nested run keeps its own conversation id, the app's tool results survive the instrumentor, no key
material is recorded on any span or event, and every event's messages survive the OTLP round trip.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import random
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, cast

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, BeforeToolCallEvent, ToolLoopResult, ToolLoopStatus
from flowra.llm import LLMResponse, StopReason, ToolResultBlock, ToolUseBlock, Usage
from flowra.runtime import AgentRuntime
from flowra.runtime.storage import InMemorySessionStorage
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import durable_link, semconv
from flowra_otel.instrumentor import FlowraInstrumentor
from flowra_otel.testing import find_leaks
from tests.hook_registry.conftest import SpanLedger, assert_all_ended
from tests.hook_registry.flowra_support import (
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    as_local_tool,
    delayed,
    get_weather,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)
from tests.round_four import check, memory_logs, missing_features, redact_keys, round_four

RUNS_PER_SEED = 6
BIG = 2**64 - 1


class EmittingRegistry(HookRegistry):
    """A subclass overriding ``emit`` (around flowra's own)."""

    async def emit(self, data: Any) -> Any:
        return await super().emit(data)


class WrappingRegistry(HookRegistry):
    """A subclass whose ``on`` wraps every handler it is given."""

    def on(self, event_type: Any, handler: Any, *, prepend: bool = False) -> None:
        @functools.wraps(handler)
        def wrapped(event: Any) -> Any:
            return handler(event)

        super().on(event_type, wrapped, prepend=prepend)


REGISTRIES: tuple[type[HookRegistry], ...] = (HookRegistry, HookRegistry, EmittingRegistry, WrappingRegistry)


class UnprintableError(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no message")


class HookBoomError(RuntimeError):
    pass


def echo(word: str) -> str:
    """Repeat the word."""
    return f"echo {word}"


def broken(word: str) -> str:
    """Always fails."""
    raise RuntimeError(f"broken {word}")


async def slow(word: str) -> str:
    """Answer after a moment."""
    await asyncio.sleep(0.01)
    return f"slow {word}"


@dataclasses.dataclass
class Mix:
    """The random choices for one run."""

    redirect: bool
    scrub: bool
    raise_in_hook: bool
    cancel_after: float | None
    interrupt: bool


class RandomHooks:
    """Hooks with random behaviour, registered after (or before) the plugin."""

    def __init__(self, mix: Mix, rng: random.Random) -> None:
        self.mix = mix
        self.rng = rng

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.on(BeforeToolCallEvent, self.before)
        registry.on(AfterToolCallEvent, self.after)

    def before(self, event: Any) -> None:
        if self.mix.redirect and self.rng.random() < 0.5:
            event.data.tool_use = dataclasses.replace(event.data.tool_use, id="fixed", name="echo")

    def after(self, event: Any) -> None:
        if self.mix.raise_in_hook and self.rng.random() < 0.3:
            raise HookBoomError("hook failed")
        if self.mix.scrub:
            event.data.result = ToolResultBlock(tool_use_id=event.data.tool_use.id, content="[scrubbed]")


def _usage(rng: random.Random) -> Usage | None:
    return rng.choice(
        [
            None,
            Usage(input_tokens=10, output_tokens=5, cost_usd=0.01),
            Usage(input_tokens="7", output_tokens=None, cost_usd="n/a"),  # type: ignore[arg-type]
            Usage(input_tokens=3, output_tokens=2, cost_usd=float("nan")),
            Usage(input_tokens=BIG, output_tokens=BIG, cache_read_input_tokens=BIG, cost_usd=1e308),
        ]
    )


def _script(rng: random.Random, run: int, tools: list[str]) -> tuple[list[Any], dict[str, list[Any]]]:
    steps: list[Any] = []
    children: dict[str, list[Any]] = {}
    for it in range(rng.randint(1, 3)):
        calls = []
        for k in range(rng.randint(1, 3)):
            call_id = rng.choice(["dup", "", f"c{it}{k}", "dup"])
            tool = rng.choice(tools)
            if tool == "research":
                query = f"q{run}-{it}-{k}"
                children[query] = [rng.choice([text_response(f"answer {query}"), RuntimeError("child down")])]
                calls.append((call_id, tool, {"query": query}))
            else:
                calls.append((call_id, tool, {"word": f"w{run}{it}{k}", "city": "Oslo"}))
        steps.append(tool_calls_response(calls, usage=_usage(rng)))
    steps.append(
        rng.choice(
            [text_response("done", usage=_usage(rng))] * 3 + [UnprintableError(), delayed(RuntimeError("down"), 0.01)]
        )
    )
    return steps, children


AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
CREDENTIAL = f"aws_access_key_id={AWS_KEY}".encode()
INVENTED = "wire_money_q7"
CHECKER_MODEL = "openai/gpt-4o-mini"


async def _read_credentials(ctx: ToolExecutionContext) -> ToolResult:
    """A tool answering with a structure that holds raw bytes (flowra passes it on as it is)."""
    return ToolResult(content=cast("str", {"file": CREDENTIAL, "sealed": b"\xff\xfe" + CREDENTIAL}))


READ_CREDENTIALS = LocalTool(
    definition=ToolDefinition(name="read_credentials", description="Reads.", input_schema={"type": "object"}),
    handler=_read_credentials,
)


@dataclasses.dataclass(frozen=True)
class TrustMix:
    """Inputs of issue 19's content items, decided up front."""

    prefix: bool = False
    """The model prefixes every tool name with ``functions.``; a hook strips it."""
    invent: bool = False
    """The first batch of calls has one more, to a name nobody offered (prefixed too, if so)."""
    bytes_result: bool = False
    """The first batch calls ``read_credentials``, whose result holds the credential as bytes."""
    check_results: bool = False
    """A hook has every tool result checked by a small agent run on the app's own registry."""

    @staticmethod
    def strip_prefix(event: Any) -> None:
        use = event.data.tool_use
        if use.name.startswith("functions."):
            event.data.tool_use = dataclasses.replace(use, name=use.name.removeprefix("functions."))

    def edit(self, steps: list[Any], run: int) -> None:
        """The model's side: an invented call, a call whose result holds bytes, prefixed names."""
        batches = [s for s in steps if isinstance(s, LLMResponse) and s.stop_reason == StopReason.TOOL_USE]
        if not batches:
            return
        blocks: list[Any] = batches[0].message.blocks
        if self.invent:
            blocks.insert(0, ToolUseBlock(id=f"r{run}inv", name=INVENTED, input={"amount": 100}))
        if self.bytes_result:
            blocks.append(ToolUseBlock(id=f"r{run}creds", name="read_credentials", input={}))
        if self.prefix:
            for step in batches:
                step_blocks: list[Any] = step.message.blocks
                for index, block in enumerate(step_blocks):
                    if isinstance(block, ToolUseBlock):
                        step_blocks[index] = dataclasses.replace(block, name=f"functions.{block.name}")


class ResultChecker:
    """The ``check_results`` hook: a small agent (a run on the app's own registry) is given
    each raw result."""

    def __init__(self, registry: HookRegistry, run: int) -> None:
        self.registry = registry
        self.run = run

    async def check(self, event: Any) -> None:
        provider = ScriptedProvider([text_response("fine")])
        async with tool_registry() as no_tools:
            runtime = tool_loop_runtime(provider, no_tools, self.registry, model=CHECKER_MODEL)
            metadata = {"conversation_id": f"conv-{self.run}"}
            await run_tool_loop(runtime, f"Check: {event.data.result.content!r}", metadata=metadata)


@dataclasses.dataclass
class Plan:
    run: int
    steps: list[Any]
    children: dict[str, list[Any]]
    mix: Mix
    hooks_first: bool
    rng: random.Random
    registry: type[HookRegistry] = HookRegistry
    trust: TrustMix = TrustMix()


def _plan(rng: random.Random, run: int) -> Plan:
    tools = ["echo", "broken", "slow", "get_\udcffweather", "get_weather"] + (
        ["research"] * 2 if HAS_AGENT_TOOLS else []
    )
    steps, children = _script(rng, run, tools)
    mix = Mix(
        redirect=rng.random() < 0.3,
        scrub=rng.random() < 0.3,
        raise_in_hook=rng.random() < 0.2,
        cancel_after=rng.choice([None, None, None, rng.uniform(0.0, 0.03)]),
        interrupt=rng.random() < 0.2,
    )
    if mix.interrupt:
        steps.insert(0, tool_calls_response([("i", "interrupter", {"word": "now"}), ("s", "slow", {"word": "x"})]))
    plan = Plan(run, steps, children, mix, hooks_first=rng.random() < 0.5, rng=rng, registry=rng.choice(REGISTRIES))
    trust_rng = random.Random(rng.random())  # a stream of its own
    plan.trust = TrustMix(
        prefix=trust_rng.random() < 0.25,
        invent=trust_rng.random() < 0.25,
        bytes_result=trust_rng.random() < 0.25,
        check_results=trust_rng.random() < 0.2,
    )
    plan.trust.edit(plan.steps, run)
    return plan


async def _one_run(plan: Plan, hooks: OtelHooks, child_provider: ScriptedProvider) -> None:
    user_hooks = RandomHooks(plan.mix, plan.rng)
    registry = plan.registry()
    if plan.hooks_first:
        registry.add(hooks)
        registry.add(user_hooks)
    else:
        registry.on(BeforeToolCallEvent, user_hooks.before)
        registry.on(AfterToolCallEvent, user_hooks.after)
        registry.add(hooks)
    if plan.trust.prefix:
        registry.on(BeforeToolCallEvent, plan.trust.strip_prefix)
    if plan.trust.check_results:
        registry.on(AfterToolCallEvent, ResultChecker(registry, plan.run).check)
    holder: dict[str, AgentRuntime] = {}

    async def interrupter(word: str) -> str:
        """Stop the run."""
        holder["runtime"].interrupt()
        return "stopping"

    local: list[Any] = [echo, broken, slow, get_weather, as_local_tool(interrupter, name="interrupter")]
    local.append(READ_CREDENTIALS)
    if HAS_AGENT_TOOLS:
        local.append(research_tool())
    async with tool_registry(*local) as tool_reg, tool_registry(get_weather) as child_tools:
        runtime = tool_loop_runtime(
            ScriptedProvider(plan.steps),
            tool_reg,
            registry,
            researcher=ResearcherSetup(provider=child_provider, registry=child_tools) if HAS_AGENT_TOOLS else None,
        )
        holder["runtime"] = runtime
        metadata = {"conversation_id": f"conv-{plan.run}"}
        task = asyncio.ensure_future(run_tool_loop(runtime, f"run {plan.run}", metadata=metadata))
        if plan.mix.cancel_after is not None:
            await asyncio.sleep(plan.mix.cancel_after)
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("seed", range(8))
async def test_random_mixes_end_every_span_in_its_own_trace(
    seed: int, make_otel_hooks: Any, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    rng = random.Random(seed)
    hooks = make_otel_hooks(capture_content=rng.random() < 0.5, redact_secrets=["api_key"])
    plans = [_plan(random.Random(seed * 100 + i), i) for i in range(RUNS_PER_SEED)]
    child_provider = ScriptedProvider.by_first_user_text({})
    for plan in plans:
        for query, child_steps in plan.children.items():
            child_provider.extend(child_steps, key=query)
    await asyncio.gather(*(_one_run(plan, hooks, child_provider) for plan in plans))

    assert ledger.started, "no span was started at all"
    assert ledger.open_spans() == []
    spans = span_exporter.get_finished_spans()
    by_trace: dict[int, list[Any]] = defaultdict(list)
    for span in spans:
        assert span.context is not None
        by_trace[span.context.trace_id].append(span)
    for trace_spans in by_trace.values():
        roots = [s for s in trace_spans if s.parent is None]
        assert len(roots) == 1, [s.name for s in roots]
        conversation = {str((s.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID)) for s in trace_spans}
        assert len(conversation) == 1, conversation
    assert len(by_trace) <= RUNS_PER_SEED
    assert_ints_fit_int64(spans)
    assert_trusted(spans)


def assert_trusted(spans: Any) -> None:
    """The third round's properties: the credential nowhere (neither raw nor in the base64 bytes
    were once recorded as), no content on a run a hook started (its model, and the agent above
    it), no invented or prefixed name as a tool's name."""
    leaks = find_leaks(spans, [AWS_KEY, base64.b64encode(CREDENTIAL).decode("ascii")])
    assert leaks == [], [str(leak) for leak in leaks]
    content = {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_DEFINITIONS,
    }
    checker_agents = {s.parent.span_id for s in spans if s.name == "chat gpt-4o-mini" and s.parent is not None}
    for span in spans:
        attributes = span.attributes or {}
        if span.name == "chat gpt-4o-mini" or (span.context is not None and span.context.span_id in checker_agents):
            assert not content & set(attributes), span.name
        name = str(attributes.get(semconv.GEN_AI_TOOL_NAME, ""))
        assert INVENTED not in span.name and INVENTED not in name, span.name
        assert "functions." not in span.name and "functions." not in name, span.name


def assert_ints_fit_int64(spans: Any) -> None:
    """Every int a span carries (alone or in an array) is one OTLP can encode."""
    for span in spans:
        for key, value in (span.attributes or {}).items():
            for item in value if isinstance(value, tuple) else (value,):
                if type(item) is int:
                    assert -(2**63) <= item < 2**63, (span.name, key, item)


# ------------------------------------------------------------------------------ stopped and resumed
class Hang:
    """A scripted LLM call that never answers: the run is stopped there (its task cancelled),
    after flowra saved the cycle before it."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()

    async def __call__(self, request: Any) -> Any:
        self.reached.set()
        await asyncio.sleep(3600)
        raise AssertionError("never answered")


def _durable_script(rng: random.Random) -> tuple[list[Any], dict[str, list[Any]], Hang]:
    """The main loop's script, the researchers' (by query), and where the run hangs: before a
    random LLM call of either (the real answer follows, for the resumed call). At most one
    researcher per batch: a sibling's LLM call in the cycle that never completed would run again
    on resume (flowra's own at-least-once), which a fixed script cannot know."""
    main: list[Any] = []
    children: dict[str, list[Any]] = {}
    for it in range(rng.randint(1, 2)):
        calls: list[tuple[str, str, dict[str, Any]]] = []
        for k in range(rng.randint(1, 2)):
            if HAS_AGENT_TOOLS and rng.random() < 0.6 and not any(c[1] == "research" for c in calls):
                query = f"q{it}{k}"
                child: list[Any] = [text_response(f"answer {query}")]
                if rng.random() < 0.5:
                    child.insert(0, tool_calls_response([(f"w{it}{k}", "get_weather", {"city": "Oslo"})]))
                children[query] = child
                calls.append((f"r{it}{k}", "research", {"query": query}))
            else:
                calls.append((f"e{it}{k}", "echo", {"word": f"w{it}{k}"}))
        main.append(tool_calls_response(calls, usage=Usage(input_tokens=10, output_tokens=5)))
    main.append(text_response("done"))
    hang = Hang()
    slots = [(None, i) for i in range(len(main))] + [(q, i) for q, steps in children.items() for i in range(len(steps))]
    where, index = rng.choice(slots)
    (main if where is None else children[where]).insert(index, hang)
    return main, children, hang


@pytest.mark.parametrize("seed", range(8))
async def test_a_run_stopped_at_a_random_llm_call_resumes_as_one_linked_trace(
    seed: int, make_otel_hooks: Any, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    rng = random.Random(seed)
    otel = make_otel_hooks(capture_content=rng.random() < 0.5)
    main, children, hang = _durable_script(rng)
    provider = ScriptedProvider(main)
    child_provider = ScriptedProvider.by_first_user_text(children)
    storage = InMemorySessionStorage()
    local: list[Any] = [echo] + ([research_tool()] if HAS_AGENT_TOOLS else [])
    async with tool_registry(*local) as tools, tool_registry(get_weather) as child_tools:
        setup = ResearcherSetup(provider=child_provider, registry=child_tools) if HAS_AGENT_TOOLS else None

        def runtime() -> AgentRuntime:
            registry = rng.choice(REGISTRIES)()
            registry.add(otel)
            return tool_loop_runtime(provider, tools, registry, researcher=setup, storage=storage)

        first = runtime()
        metadata = {"conversation_id": f"conv-{seed}"}
        task = asyncio.ensure_future(run_tool_loop(first, "Do the work", metadata=metadata))
        await asyncio.wait_for(hang.reached.wait(), 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert await first.has_pending_execution()
        stopped = {s.context.span_id: s for s in span_exporter.get_finished_spans() if s.context is not None}
        (stopped_root,) = [s for s in stopped.values() if s.parent is None]

        result = await runtime().resume()
    assert isinstance(result, ToolLoopResult) and result.status == ToolLoopStatus.COMPLETED
    provider.assert_exhausted()
    child_provider.assert_exhausted()

    assert_all_ended(ledger, span_exporter)
    resumed = [
        s for s in span_exporter.get_finished_spans() if s.context is not None and s.context.span_id not in stopped
    ]
    assert len({s.context.trace_id for s in resumed if s.context is not None}) == 1, "one trace"
    (root,) = [s for s in resumed if s.parent is None]
    assert root.name == "invoke_agent assistant"
    assert root.context is not None and stopped_root.context is not None
    assert root.context.trace_id != stopped_root.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in root.links] == [
        (stopped_root.context.trace_id, stopped_root.context.span_id)
    ]
    assert (root.attributes or {})[durable_link.RESUMED] is True
    ids = {s.context.span_id for s in resumed if s.context is not None}
    assert all(s.parent is None or s.parent.span_id in ids for s in resumed), "every parent in the trace"
    assert {(s.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID) for s in resumed} == {f"conv-{seed}"}
    assert_ints_fit_int64(span_exporter.get_finished_spans())


# ------------------------------------------------------------------------------------ the fourth round
def _instrumentor(ops: tuple[str, ...], tracer_provider: Any, meter_provider: Any) -> None:
    instrumentor = FlowraInstrumentor()
    for op in ops:
        if op == "instrument" and not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        elif op == "uninstrument" and instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()


@pytest.fixture
def instrumentor_off() -> Iterator[None]:
    yield
    instrumentor = FlowraInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


@pytest.mark.parametrize("seed", range(48))
async def test_the_fourth_rounds_random_runs(
    seed: int,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    instrumentor_off: None,
) -> None:
    """Content modes with events, instrument/uninstrument interleaved around the app's own
    ``OtelHooks``, a nested run on the same runtime and a private key of 100 - 5 000 characters
    placed around the cut of a random budget (``tests/round_four.py``): every span ends, the
    nested run is a conversation of its own, the app's tool result and events survive the
    instrumentor, no key material is recorded anywhere, and every event's messages reach the wire."""
    plan = round_four(random.Random(seed))
    logger_provider, log_exporter = memory_logs()
    holder: dict[str, AgentRuntime] = {}

    async def keyed_file(name: str, size: int | None = None, deep: dict[str, Any] | None = None) -> str:
        """Reads a file (it holds a private key around the content budget's cut)."""
        return plan.result_text(f"end of {name}")

    async def ask_again(name: str) -> str:
        """Asks the same assistant again: another conversation, on the runtime running this tool."""
        metadata = {"conversation_id": "inner", "user_id": "u-inner"}
        result = await run_tool_loop(holder["runtime"], name, metadata=metadata, storage_key="inner")
        return str(result.status)

    calls: list[tuple[str, str, dict[str, Any]]] = [("k1", "keyed_file", {"name": "id_rsa", **plan.arguments_extra()})]
    script: list[Any] = []
    if plan.nested:
        calls.append(("n1", "ask_again", {"name": "Who else?"}))
        script.append(text_response("inner answer"))
    provider = ScriptedProvider([tool_calls_response(calls), *script, text_response("outer answer")])
    _instrumentor(plan.before_install, tracer_provider, meter_provider)
    registry = HookRegistry()  # made while instrumented, it carries the instrumentor's OtelHooks too
    registry.add(
        OtelHooks(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=plan.mode,
            max_content_length=plan.budget,
            redact=redact_keys,
        )
    )
    _instrumentor(plan.after_install, tracer_provider, meter_provider)
    tools = [as_local_tool(keyed_file, name="keyed_file"), as_local_tool(ask_again, name="ask_again")]
    async with tool_registry(*tools) as tool_reg:
        runtime = tool_loop_runtime(provider, tool_reg, registry)
        holder["runtime"] = runtime
        metadata = {"conversation_id": "outer", "user_id": "u-outer"}
        result = await run_tool_loop(runtime, "Read id_rsa", metadata=metadata)
    assert result.status == ToolLoopStatus.COMPLETED

    assert_all_ended(ledger, span_exporter)
    spans = span_exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    conversation = semconv.GEN_AI_CONVERSATION_ID
    inner = sorted(s.name for s in spans if (s.attributes or {}).get(conversation) == "inner")
    assert inner == (["chat sonnet-4-5", "invoke_agent assistant"] if plan.nested else [])
    check(plan, spans, log_exporter.get_finished_logs(), chats=3 if plan.nested else 2)


def test_the_fourth_rounds_plans_cover_every_feature() -> None:
    assert missing_features(range(48)) == set()
