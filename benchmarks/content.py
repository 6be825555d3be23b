"""Content-capture cost benchmark: ``./dev bench-content [--quick]`` (flowra 0.0.8).

Two workloads through a real flowra ``AgentRuntime`` (zero-latency scripted provider, real SDK
with a dropping exporter), printed as ratios side by side:

* **long loop**: 1 500 sequential tool calls (each request carries the whole, growing history);
  capture on vs capture off. Target: at most 2x.
* **big results**: 15 tool calls that each return 1 MB of text; ``redact_secrets=True`` vs capture
  on without it. Target: at most 2x.

Variants run interleaved in one process, best of N wall times each; the ratios are what to quote.
Not a test: numbers vary by machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable
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
from sdk import RecordingSdk

from flowra_otel import OtelHooks

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
    if record and any(getattr(b, "is_error", False) for m in last for b in m.blocks):
        raise RuntimeError("bad workload: a tool call failed")
    return elapsed, provider


def interleaved(repeats: int, variants: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Each variant ``repeats`` times, in turn (A B A B ...), so drift hits all alike; the best of each."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, measure in variants.items():
            times[name].append(measure())
    return {name: min(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations and repeats (noisier)")
    args = parser.parse_args()
    loop_calls = 300 if args.quick else 1_500
    repeats = 2 if args.quick else 3

    def run(tool_fn: Any, iterations: int, **options: Any) -> Callable[[], float]:
        return lambda: asyncio.run(real_run(tool_fn, iterations, **options))[0]

    loop = interleaved(
        repeats,
        {
            "off": run(ping, loop_calls, capture_content=False),
            "on": run(ping, loop_calls, capture_content=True),
        },
    )
    print(f"\n== long loop: {loop_calls} sequential tool calls, real runs (best of {repeats}, interleaved)")
    print(f"  capture off                       {loop['off']:8.3f} s")
    ratio_loop = loop["on"] / loop["off"]
    print(f"  capture on                        {loop['on']:8.3f} s   {ratio_loop:6.2f}x  (target <= 2x)")

    calls = 15
    big = interleaved(
        repeats,
        {
            "on": run(dump, calls, capture_content=True),
            "secrets": run(dump, calls, capture_content=True, redact_secrets=True),
        },
    )
    ratio_big = big["secrets"] / big["on"]
    print(f"\n== big results: {calls} tool calls returning 1 MB each, real runs (best of {repeats}, interleaved)")
    print(f"  capture on                        {big['on']:8.3f} s")
    print(f"  capture on + redact_secrets       {big['secrets']:8.3f} s   {ratio_big:6.2f}x  (target <= 2x)")
    print(f"\nRESULT long_loop_capture_on_vs_off={ratio_loop:.2f}x big_results_redact_vs_on={ratio_big:.2f}x")


if __name__ == "__main__":
    main()
