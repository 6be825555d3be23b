"""The benchmark workload on flowra 0.0.8: a zero-latency scripted tool loop, and the SDK set-ups.

Self-contained on purpose (nothing from ``tests/``): a scripted ``LLMProvider``, one trivial tool,
the real ``AgentRuntime`` + ``ToolLoopAgent``. Each run makes ``ITERATIONS`` LLM calls that each
ask for one tool call, then one more LLM call that answers, so a traced run emits
``1 invoke_agent + (ITERATIONS + 1) chat + ITERATIONS execute_tool`` spans.

This module never imports ``flowra_otel`` at import time: the "bare flowra before the patch"
variant must run in a process where the plugin was never imported (importing it is harmless, but
creating an ``OtelHooks`` patches flowra's classes for the whole process).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from flowra.agent import HookRegistry
from flowra.lib import LLMConfig
from flowra.lib.tool_loop import ToolLoopAgent, ToolLoopConfig, ToolLoopResult, ToolLoopSpec
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
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

ITERATIONS = 20
"""LLM calls per run that ask for a tool call; one more LLM call then answers."""

SPANS_PER_RUN = 1 + (ITERATIONS + 1) + ITERATIONS
"""invoke_agent + chat per LLM call + execute_tool per tool call = 42."""

MODEL = "anthropic/sonnet-4-5"
USER_MESSAGE = "Ping the service 20 times, then say done."
AGENT = "assistant"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PingInput:
    seq: int = 0


@tool("ping", "Answer pong. The benchmark's trivial tool.")
def ping(params: PingInput) -> str:
    return "pong"


class ScriptedToolLoopProvider(LLMProvider):
    """Zero-latency provider: call ``k`` of a run asks for ``ping`` while ``k < iterations``, then answers.

    ``k`` is the number of assistant messages already in the request, so the provider keeps no
    per-run state and one instance serves any number of runs. The responses are built once.
    """

    __slots__ = ("_final", "_tool_calls")

    def __init__(self, iterations: int = ITERATIONS) -> None:
        usage = Usage(input_tokens=120, output_tokens=18)
        self._tool_calls = [
            LLMResponse(
                message=AssistantMessage(blocks=[ToolUseBlock(id=f"call_{i}", name="ping", input={"seq": i})]),
                stop_reason=StopReason.TOOL_USE,
                usage=usage,
            )
            for i in range(iterations)
        ]
        self._final = LLMResponse(
            message=AssistantMessage(blocks=[TextBlock(text="done")]), stop_reason=StopReason.END_TURN, usage=usage
        )

    async def call(self, request: LLMRequest) -> LLMResponse:
        done = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return self._tool_calls[done] if done < len(self._tool_calls) else self._final


async def build_runtime(hooks: HookRegistry, iterations: int = ITERATIONS) -> AgentRuntime:
    """A runtime with flowra's ``ToolLoopAgent`` as ``assistant``, built once and run many times."""
    registry = await ToolRegistry.create([get_local_tool(ping)])
    config = ToolLoopConfig(llm_config=LLMConfig(model=MODEL), session_messages=[], max_llm_calls=iterations + 5)
    return AgentRuntime(
        agents={AGENT: ToolLoopAgent},
        services={
            LLMProvider: ScriptedToolLoopProvider(iterations),
            ToolRegistry: registry,
            ToolLoopConfig: config,
            HookRegistry: hooks,
        },
    )


async def run_once(runtime: AgentRuntime, storage_key: str | None = None) -> object:
    """One run; concurrent runs on one runtime need distinct storage keys (flowra refuses a
    second live ``"root"``)."""
    return await runtime.run(agent=AGENT, spec=ToolLoopSpec(user_message=USER_MESSAGE), storage_key=storage_key)


def spans_per_run(iterations: int) -> int:
    """invoke_agent + one chat per LLM call + one execute_tool per tool call."""
    return 1 + (iterations + 1) + iterations


async def check_run(runtime: AgentRuntime, iterations: int = ITERATIONS) -> None:
    """Fail loudly if the workload is not the one described (a broken tool would make runs short)."""
    result = await run_once(runtime)
    if not isinstance(result, ToolLoopResult):
        raise RuntimeError(f"expected a ToolLoopResult, got {result!r}")
    status = str(getattr(result.status, "value", result.status))
    tool_results = sum(1 for m in result.messages for b in m.blocks if type(b).__name__ == "ToolResultBlock")
    errors = sum(1 for m in result.messages for b in m.blocks if getattr(b, "is_error", False))
    if status != "completed" or tool_results != iterations or errors:
        raise RuntimeError(f"bad workload run: status={status} tool_results={tool_results} errors={errors}")


# ------------------------------------------------------------------------------------------ SDK


class DropSpanExporter(SpanExporter):
    """Exports nowhere: the SDK's whole span pipeline runs, the network is left out. Counts spans."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


@dataclasses.dataclass
class RecordingSdk:
    """The plugin's (and the floor's) set-up: a recording ``TracerProvider`` with a ``BatchSpanProcessor`` into a
    dropping exporter, and a ``MeterProvider`` whose ``InMemoryMetricReader`` makes every
    measurement really aggregated (a provider without readers would skip that work)."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: DropSpanExporter
    metric_reader: InMemoryMetricReader

    @classmethod
    def create(cls) -> RecordingSdk:
        exporter = DropSpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        return cls(tracer_provider, MeterProvider(metric_readers=[reader]), exporter, reader)

    def exported_spans(self) -> int:
        self.tracer_provider.force_flush()
        return self.exporter.exported

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
