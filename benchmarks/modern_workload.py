"""The benchmark workload on flowra 0.0.86 - 0.0.93: a zero-latency scripted ``TurnAgent``, and the SDK set-ups.

The same shape as ``workload.py`` (flowra 0.0.8), on today's API: the real ``AgentRuntime`` and
``TurnAgent`` (``ToolLoopAgent`` was renamed), a scripted ``LLMProvider`` that answers at once,
one trivial tool (``ping``, returns ``"pong"``). Each run makes ``ITERATIONS`` LLM calls that each
ask for one tool call, then one more LLM call that answers; every response carries token usage.
flowra-otel makes ``1 invoke_agent + (ITERATIONS + 1) chat + ITERATIONS execute_tool`` spans per
run (flowra's own machinery, the tool-call agent of each call, gets none).

Self-contained (nothing from ``tests/``), and it never imports ``flowra_otel``: the bare and floor
variants run in processes that must never patch flowra (the plugin patches ``HooksImpl.emit`` for
the whole process).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from flowra.agent import AgentRuntime
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
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

ITERATIONS = 20
"""LLM calls per run that ask for a tool call; one more LLM call then answers."""

MODEL = "anthropic/sonnet-4-5"
USER_MESSAGE = "Ping the service 20 times, then say done."
AGENT = "assistant"


def spans_per_run(iterations: int = ITERATIONS) -> int:
    """flowra-otel's spans: invoke_agent + one chat per LLM call + one execute_tool per tool call (42)."""
    return 1 + (iterations + 1) + iterations


@dataclasses.dataclass(frozen=True, kw_only=True)
class PingInput:
    seq: int = 0


@tool("ping", "Answer pong. The benchmark's trivial tool.")
def ping(params: PingInput) -> str:
    return "pong"


class ScriptedToolLoopProvider(LLMProvider):
    """Zero latency: call ``k`` of a turn asks for ``ping`` while ``k < iterations``, then answers.

    ``k`` is the number of assistant messages already in the request, so the provider keeps no
    per-run state and one instance serves any number of runs. The responses are built once.
    """

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


def build_runtime(iterations: int = ITERATIONS) -> AgentRuntime:
    """A runtime with flowra's ``TurnAgent`` as ``assistant``, built once and run many times."""
    config = TurnConfig(
        tools=ToolRegistry([ping]),
        llm_config=LLMConfig(provider=ScriptedToolLoopProvider(iterations), model=MODEL),
        system=[],
        history=[],
        max_llm_calls=iterations + 5,
    )
    return AgentRuntime(agents={AGENT: TurnAgent}, services={TurnConfig: config})


async def run_once(runtime: AgentRuntime) -> object:
    return await runtime.run(agent=TurnAgent, spec=TurnSpec.text(USER_MESSAGE))


async def check_run(runtime: AgentRuntime, iterations: int = ITERATIONS) -> None:
    """Fail loudly if the workload is not the one described (a broken tool would make runs short)."""
    result = await run_once(runtime)
    if not isinstance(result, TurnResult):
        raise RuntimeError(f"expected a TurnResult, got {result!r}")
    results = [b for m in result.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    errors = [b for b in results if b.is_error]
    if str(result.status) != "completed" or len(results) != iterations or errors:
        raise RuntimeError(f"bad workload run: status={result.status} tool_results={len(results)} errors={errors}")


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
    """Every traced variant's set-up: a recording ``TracerProvider`` with a ``BatchSpanProcessor``
    into a dropping exporter, and a ``MeterProvider`` whose ``InMemoryMetricReader`` makes every
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

    def flush(self) -> None:
        self.tracer_provider.force_flush()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
