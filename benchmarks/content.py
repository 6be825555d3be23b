"""Content-capture cost benchmark: ``./dev python benchmarks/content.py [--quick]``.

Two workloads through a real flowra ``AgentRuntime`` (zero-latency scripted provider, real SDK
with a dropping exporter), printed as ratios side by side:

* **long loop**: 1 500 sequential tool calls (each request carries the whole, growing history);
  capture on vs capture off. Target: at most 2x.
* **big results**: 15 tool calls that each return 1 MB of text; ``redact_secrets=True`` vs capture
  on without it. Target: at most 2x.

Each real run uses whatever the span core calls today. The content renderer is also measured
standalone on the very requests those runs made (recorded by the provider), both the legacy
string-level path (``split_messages`` + ``ContentPolicy.render``: what a traced run did before the
renderer) and the per-run ``ContentRenderer``; the "expected" ratio replaces the legacy content
cost inside the real capture-on time by the renderer's. Not a test: numbers vary by machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowra.agent import HookRegistry
from flowra.lib import LLMConfig
from flowra.lib.tool_loop import ToolLoopAgent, ToolLoopConfig, ToolLoopSpec
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from flowra.runtime import AgentRuntime
from flowra.tools import ToolRegistry, get_local_tool, tool

from benchmarks.workload import RecordingSdk
from flowra_otel import OtelHooks
from flowra_otel.attributes import finish_reason
from flowra_otel.content import ContentPolicy, output_messages, split_messages, tool_definitions

MODEL = "anthropic/sonnet-4-5"
MB = 1024 * 1024
_WORDS = "the order 4711 shipped to warehouse B7 on 2026-03-14; status ok, weight 12.5 kg. "
BIG_RESULT = (_WORDS * (MB // len(_WORDS) + 1))[:MB]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepInput:
    seq: int = 0


@tool("ping", "Answer pong.")
def ping(params: StepInput) -> str:
    return "pong"


@tool("dump", "Return one megabyte of order history.")
def dump(params: StepInput) -> str:
    return BIG_RESULT


class RecordingProvider(LLMProvider):
    """Asks for ``tool`` ``iterations`` times, then answers; keeps every request (and response)."""

    def __init__(self, tool_name: str, iterations: int) -> None:
        usage = Usage(input_tokens=120, output_tokens=18)
        self.responses = [
            LLMResponse(
                message=AssistantMessage(blocks=[ToolUseBlock(id=f"call_{i}", name=tool_name, input={"seq": i})]),
                stop_reason=StopReason.TOOL_USE,
                usage=usage,
            )
            for i in range(iterations)
        ]
        self.final = LLMResponse(
            message=AssistantMessage(blocks=[TextBlock(text="done")]), stop_reason=StopReason.END_TURN, usage=usage
        )
        self.calls = 0
        self.recorded: list[tuple[LLMRequest, list[Any], LLMResponse]] = []
        self.record = False

    async def call(self, request: LLMRequest) -> LLMResponse:
        response = self.responses[self.calls] if self.calls < len(self.responses) else self.final
        self.calls += 1
        if self.record:  # a snapshot of the list: flowra may reuse it; the message objects are shared
            self.recorded.append((request, list(request.messages), response))
        return response


async def real_run(tool_fn: Any, iterations: int, *, record: bool = False, **options: Any) -> tuple[float, Any]:
    """One real run; returns (seconds, provider). ``options`` None => no plugin at all."""
    local = get_local_tool(tool_fn)
    provider = RecordingProvider(local.definition.name, iterations)
    provider.record = record
    registry = await ToolRegistry.create([local])
    hooks = HookRegistry()
    sdk = RecordingSdk.create()
    if options.get("capture_content") is not None:
        hooks.add(OtelHooks(tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider, **options))
    config = ToolLoopConfig(llm_config=LLMConfig(model=MODEL), session_messages=[], max_llm_calls=iterations + 5)
    runtime = AgentRuntime(
        agents={"assistant": ToolLoopAgent},
        services={LLMProvider: provider, ToolRegistry: registry, ToolLoopConfig: config, HookRegistry: hooks},
    )
    start = time.perf_counter()
    await runtime.run(agent="assistant", spec=ToolLoopSpec(user_message="Go."))
    elapsed = time.perf_counter() - start
    sdk.shutdown()
    if provider.calls != iterations + 1:
        raise RuntimeError(f"bad workload: {provider.calls} LLM calls, expected {iterations + 1}")
    last = provider.recorded[-1][1] if provider.recorded else []
    if record and sum(1 for m in last for b in m.blocks if getattr(b, "is_error", False)):
        raise RuntimeError("bad workload: a tool call failed")
    return elapsed, provider


def legacy_content(policy: ContentPolicy, recorded: Sequence[tuple[LLMRequest, list[Any], LLMResponse]]) -> float:
    """What the span core did per chat before the renderer: everything re-serialised and scanned."""
    start = time.perf_counter()
    for request, messages, response in recorded:
        system, history = split_messages(messages)
        policy.render(history)
        if system:
            policy.render(system)
        policy.render(tool_definitions(request.tools))
        policy.render(output_messages(response.message, response.stop_reason, {}))
        for block in response.message.blocks:
            if isinstance(block, ToolUseBlock):
                policy.render(block.input)
        last = messages[-1]
        for block in getattr(last, "blocks", ()):
            content = getattr(block, "content", None)
            if isinstance(content, str):
                policy.render(content)  # the previous step's tool result, on its execute_tool span
    return time.perf_counter() - start


def renderer_content(policy: ContentPolicy, recorded: Sequence[tuple[LLMRequest, list[Any], LLMResponse]]) -> float:
    """The same attributes through one per-run ``ContentRenderer``."""
    start = time.perf_counter()
    renderer = policy.renderer()
    for request, messages, response in recorded:
        renderer.input_messages(messages)
        renderer.tool_definitions(request.tools)
        renderer.output_messages(response.message, finish_reason(response.stop_reason), {})
        for block in response.message.blocks:
            if isinstance(block, ToolUseBlock):
                renderer.tool_arguments(block.input)
        last = messages[-1]
        for block in getattr(last, "blocks", ()):
            content = getattr(block, "content", None)
            if isinstance(content, str):
                renderer.tool_result(content)
    return time.perf_counter() - start


def best(repeats: int, measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(repeats))


def best_run(repeats: int, tool_fn: Any, iterations: int, **options: Any) -> float:
    return min(asyncio.run(real_run(tool_fn, iterations, **options))[0] for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations and repeats (noisier)")
    args = parser.parse_args()
    loop_calls = 300 if args.quick else 1_500
    repeats = 1 if args.quick else 2
    plain = ContentPolicy.build(redact=None, redact_secrets=False, max_length=32_768)
    scrubbing = ContentPolicy.build(redact=None, redact_secrets=True, max_length=32_768)

    # ---- long loop: capture on vs off
    off = best_run(repeats, ping, loop_calls, capture_content=False)
    on = best_run(1, ping, loop_calls, capture_content=True)
    _, provider = asyncio.run(real_run(ping, loop_calls, record=True, capture_content=False))
    old = best(1, lambda: legacy_content(plain, provider.recorded))
    new = best(repeats, lambda: renderer_content(plain, provider.recorded))
    print(f"\n== long loop: {loop_calls} sequential tool calls (real runs; span core as it is today)")
    print(f"  capture off                       {off:8.3f} s")
    print(f"  capture on                        {on:8.3f} s   {on / off:6.2f}x")
    print("   content work alone, on the same requests:")
    print(f"  legacy split_messages + render    {old:8.3f} s")
    print(f"  ContentRenderer                   {new:8.3f} s   ({old / new:.1f}x less)")
    expected_loop = (off + new) / off
    print(f"  expected capture on / off once wired: (off + renderer) / off = {expected_loop:.2f}x  (target <= 2x)")

    # ---- big results: redact_secrets vs capture on
    calls = 15
    big_off = best_run(repeats, dump, calls, capture_content=False)
    big_on = best_run(repeats, dump, calls, capture_content=True)
    big_secrets = best_run(1, dump, calls, capture_content=True, redact_secrets=True)
    _, provider = asyncio.run(real_run(dump, calls, record=True, capture_content=False))
    old_plain = best(repeats, lambda: legacy_content(plain, provider.recorded))
    new_plain = best(repeats, lambda: renderer_content(plain, provider.recorded))
    old_secrets = best(1, lambda: legacy_content(scrubbing, provider.recorded))
    new_secrets = best(repeats, lambda: renderer_content(scrubbing, provider.recorded))
    print(f"\n== big results: {calls} tool calls returning 1 MB each (real runs; span core as it is today)")
    print(f"  capture off                       {big_off:8.3f} s")
    print(f"  capture on                        {big_on:8.3f} s")
    print(f"  capture on + redact_secrets       {big_secrets:8.3f} s   {big_secrets / big_on:6.2f}x capture on")
    print("   content work alone, on the same requests:")
    print(f"  legacy, capture on                {old_plain:8.3f} s")
    print(f"  legacy, + redact_secrets          {old_secrets:8.3f} s")
    print(f"  ContentRenderer, capture on       {new_plain:8.3f} s")
    print(f"  ContentRenderer, + redact_secrets {new_secrets:8.3f} s")
    expected_big = (big_off + new_secrets) / (big_off + new_plain)
    print(f"  expected redact_secrets / capture on once wired: {expected_big:.2f}x  (target <= 2x)")
    print(f"\nRESULT expected long-loop capture-on/off {expected_loop:.2f}x, big-results redact/on {expected_big:.2f}x")


if __name__ == "__main__":
    main()
