"""The same workload on flowra 0.0.93, bare and with flowra's own tracer (``flowra.ext.otel``).

Run by ``run.py`` with the python of ``benchmarks/.venv-flowra-0.0.93`` (flowra 0.0.93 and the
same opentelemetry-sdk version as the main environment); prints one JSON object on stdout.

    benchmarks/.venv-flowra-0.0.93/bin/python benchmarks/flowra093_worker.py --runs 100 --block 5
    benchmarks/.venv-flowra-0.0.93/bin/python benchmarks/flowra093_worker.py --only tracer --runs 24

``--only VARIANT`` sets up that one variant, warms it up and makes ``--runs`` runs, untimed: run
twice under an instruction counter (two run counts), the difference is its instructions per run
(``run.py --instructions``).

How flowra 0.0.93's tracer is installed (read from its sdist, ``flowra/ext/otel.py``)::

    from flowra.ext.otel import OTEL_TRACING
    OTEL_TRACING.install(runtime)   # span hooks on runtime.hooks; tracer from the *global* provider

``install`` registers ``hooks.on_span`` handlers for ``AgentSpan``, ``StepSpan``, ``LLMCallSpan`` and
``ToolCallSpan`` (``trace_steps=True`` by default, so every engine step gets a span as well) and
takes its tracer from ``trace.get_tracer(...)``: the recording SDK provider is therefore set as the
global tracer provider here. It records no metrics.

The tool loop of 0.0.93 is ``flowra.lib.turn.TurnAgent`` (``ToolLoopAgent`` was renamed); the
workload is the same shape: a zero-latency scripted provider whose first 20 responses each ask for
one call of a trivial tool and whose 21st answers. Variants are interleaved in blocks inside this
process (this tracer patches nothing, so a bare runtime is unaffected by a traced one):

* ``bare``            no tracer on the runtime;
* ``tracer``          ``OTEL_TRACING.install(runtime)``, its defaults (agent, step, LLM, tool spans);
* ``tracer_nosteps``  ``OTEL_TRACING.install(runtime, trace_steps=False)``: agent, LLM and tool spans
                      only, the closest to flowra-otel's span set.
"""

import argparse
import asyncio
import dataclasses
import gc
import importlib.metadata
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from flowra.agent import AgentRuntime
from flowra.ext.otel import OTEL_TRACING
from flowra.lib import LLMConfig
from flowra.lib.turn import TurnAgent, TurnConfig, TurnResult, TurnSpec
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from flowra.tools import ToolRegistry, tool
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

ITERATIONS = 20
MODEL = "anthropic/sonnet-4-5"
USER_MESSAGE = "Ping the service 20 times, then say done."
VARIANTS = ("bare", "tracer", "tracer_nosteps")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PingInput:
    seq: int = 0


@tool("ping", "Answer pong. The benchmark's trivial tool.")
def ping(params: PingInput) -> str:
    return "pong"


class ScriptedToolLoopProvider(LLMProvider):
    """Zero latency: call ``k`` of a turn asks for ``ping`` while ``k < iterations``, then answers."""

    __slots__ = ("_final", "_tool_calls")

    def __init__(self, iterations: int = ITERATIONS) -> None:
        usage = Usage(input_tokens=120, output_tokens=18)
        self._tool_calls = [
            LLMResponse(
                messages=[AssistantMessage(blocks=[ToolUseBlock(id=f"call_{i}", name="ping", input={"seq": i})])],
                stop_reason=StopReason.TOOL_USE,
                usage=usage,
                model=MODEL,
            )
            for i in range(iterations)
        ]
        self._final = LLMResponse(
            messages=[AssistantMessage(blocks=[TextBlock(text="done")])],
            stop_reason=StopReason.END_TURN,
            usage=usage,
            model=MODEL,
        )

    async def call(self, request: LLMRequest) -> LLMResponse:
        done = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return self._tool_calls[done] if done < len(self._tool_calls) else self._final


class DropSpanExporter(SpanExporter):
    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


def build_runtime() -> AgentRuntime:
    config = TurnConfig(
        tools=ToolRegistry([ping]),
        llm_config=LLMConfig(provider=ScriptedToolLoopProvider(), model=MODEL),
        system=[],
        history=[],
        max_llm_calls=ITERATIONS + 5,
    )
    return AgentRuntime(agents={"assistant": TurnAgent}, services={TurnConfig: config})


async def run_once(runtime: AgentRuntime) -> object:
    return await runtime.run(agent=TurnAgent, spec=TurnSpec.text(USER_MESSAGE))


async def check_run(runtime: AgentRuntime) -> None:
    result = await run_once(runtime)
    if not isinstance(result, TurnResult):
        raise RuntimeError(f"expected a TurnResult, got {result!r}")
    results = [b for m in result.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    errors = [b for b in results if b.is_error]
    if str(result.status) != "completed" or len(results) != ITERATIONS or errors:
        raise RuntimeError(f"bad workload run: status={result.status} tool_results={len(results)} errors={errors}")


async def main_async(runs: int, warmup: int, block: int) -> dict[str, Any]:
    exporter = DropSpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    runtimes: dict[str, AgentRuntime] = {}
    spans_per_run: dict[str, float | None] = {}
    for variant in VARIANTS:
        runtime = build_runtime()
        if variant == "tracer":
            OTEL_TRACING.install(runtime)
        elif variant == "tracer_nosteps":
            OTEL_TRACING.install(runtime, trace_steps=False)
        provider.force_flush()
        before = exporter.exported
        await check_run(runtime)
        provider.force_flush()
        spans_per_run[variant] = exporter.exported - before if variant != "bare" else None
        runtimes[variant] = runtime

    for _ in range(warmup):
        for variant in VARIANTS:
            await run_once(runtimes[variant])
    provider.force_flush()
    gc.collect()

    wall: dict[str, list[int]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[int]] = {v: [] for v in VARIANTS}
    wall_clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    blocks = max(1, runs // block)
    for index in range(blocks):
        order = VARIANTS[index % len(VARIANTS) :] + VARIANTS[: index % len(VARIANTS)]
        for variant in order:
            runtime = runtimes[variant]
            block_wall: list[int] = []
            block_cpu: list[int] = []
            for _ in range(block):
                start_cpu, start = cpu_clock(), wall_clock()
                await run_once(runtime)
                end = wall_clock()
                block_cpu.append(cpu_clock() - start_cpu)
                block_wall.append(end - start)
            if variant != "bare":  # the spans still queued are this block's: their export is its cost
                start_cpu, start = cpu_clock(), wall_clock()
                provider.force_flush()
                flush_wall, flush_cpu = wall_clock() - start, cpu_clock() - start_cpu
                block_wall = [t + flush_wall // block for t in block_wall]
                block_cpu = [t + flush_cpu // block for t in block_cpu]
            wall[variant].extend(block_wall)
            cpu[variant].extend(block_cpu)
    provider.shutdown()
    return {
        "flowra_version": importlib.metadata.version("flowra"),
        "otel_sdk_version": importlib.metadata.version("opentelemetry-sdk"),
        "python": sys.version.split()[0],
        "install": "flowra.ext.otel.OTEL_TRACING.install(runtime)",
        "spans_per_run": spans_per_run,
        "wall_ns": wall,
        "cpu_ns": cpu,
    }


async def plain_runs(variant: str, runs: int, warmup: int) -> dict[str, Any]:
    """One variant, no timing: ``warmup`` runs, then ``runs`` runs and a flush."""
    exporter = DropSpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    runtime = build_runtime()
    if variant == "tracer":
        OTEL_TRACING.install(runtime)
    elif variant == "tracer_nosteps":
        OTEL_TRACING.install(runtime, trace_steps=False)
    await check_run(runtime)
    for _ in range(warmup):
        await run_once(runtime)
    provider.force_flush()
    before = exporter.exported
    gc.collect()
    for _ in range(runs):
        await run_once(runtime)
    provider.force_flush()
    spans = (exporter.exported - before) / runs if runs else 0.0
    provider.shutdown()
    return {"variant": variant, "runs": runs, "spans_per_run": spans}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100, help="timed runs per variant")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs per variant first")
    parser.add_argument("--block", type=int, default=5, help="runs of one variant in a row")
    parser.add_argument("--only", choices=VARIANTS, help="one variant, untimed (for an instruction counter)")
    args = parser.parse_args()
    if args.only:
        json.dump(asyncio.run(plain_runs(args.only, args.runs, args.warmup)), sys.stdout)
    else:
        json.dump(asyncio.run(main_async(args.runs, args.warmup, args.block)), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
