"""Property: whatever mix of hostile inputs concurrent runs meet, every span ends in its own trace.

Each seed drives several concurrent runs on one ``OtelHooks`` with random mixes of: duplicate,
empty and redirected tool-use ids, parallel tools, agents used as tools, tools that fail, hooks
that raise or scrub results, exceptions whose ``__str__`` raises, odd usage values, interrupts and
cancellation. Whatever the runs' outcomes, the spans started equal the spans ended, every span
sits in the trace of the run that made it (one root per trace, the run's conversation id on
every span), and neither the plugin nor ``opentelemetry.context`` logs an error (conftest).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections import defaultdict
from typing import Any

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, BeforeToolCallEvent
from flowra.llm import ToolResultBlock, Usage
from flowra.runtime import AgentRuntime
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from tests.hook_registry.conftest import SpanLedger, hooks_with
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

RUNS_PER_SEED = 6


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


@dataclasses.dataclass
class Plan:
    run: int
    steps: list[Any]
    children: dict[str, list[Any]]
    mix: Mix
    hooks_first: bool
    rng: random.Random


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
    return Plan(run, steps, children, mix, hooks_first=rng.random() < 0.5, rng=rng)


async def _one_run(plan: Plan, hooks: OtelHooks, child_provider: ScriptedProvider) -> None:
    user_hooks = RandomHooks(plan.mix, plan.rng)
    registry = hooks_with(hooks, user_hooks) if plan.hooks_first else _prepended(hooks, user_hooks)
    holder: dict[str, AgentRuntime] = {}

    async def interrupter(word: str) -> str:
        """Stop the run."""
        holder["runtime"].interrupt()
        return "stopping"

    local: list[Any] = [echo, broken, slow, get_weather, as_local_tool(interrupter, name="interrupter")]
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


def _prepended(hooks: OtelHooks, user_hooks: RandomHooks) -> HookRegistry:
    registry = HookRegistry()
    registry.on(BeforeToolCallEvent, user_hooks.before)
    registry.on(AfterToolCallEvent, user_hooks.after)
    registry.add(hooks)
    return registry


@pytest.mark.parametrize("seed", range(8))
async def test_random_mixes_end_every_span_in_its_own_trace(
    seed: int, make_otel_hooks: Any, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    rng = random.Random(seed)
    hooks = make_otel_hooks(capture_content=rng.random() < 0.5)
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
