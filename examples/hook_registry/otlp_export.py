"""Ship traces and metrics of a flowra agent over OTLP, configured by the standard environment.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 \\
        .venv-flowra-0.0.8/bin/python examples/hook_registry/otlp_export.py

(``./dev pytest-on 0.0.8`` builds ``.venv-flowra-0.0.8``; any Python >= 3.12 environment with flowra
0.0.3 - 0.0.8 and this package installed works too. The ``python3`` on many machines is older and
has no flowra: plain ``python ...`` fails there.)

``configure_telemetry()`` reads the same ``OTEL_*`` variables as every OpenTelemetry SDK, so the
code below never changes between a laptop and production:

``OTEL_EXPORTER_OTLP_ENDPOINT``
    Where to send both signals: an OpenTelemetry Collector, Grafana Alloy, a vendor's OTLP intake,
    anything that takes traces *and* metrics. For HTTP give the base URL
    (``http://localhost:4318``): ``/v1/traces`` and ``/v1/metrics`` are appended.
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``
    One signal only, used exactly as given (nothing appended). The traces endpoint is the one to
    give a trace backend (Jaeger, Tempo, Phoenix, Langfuse), which refuses metrics
    (docs/backends.md); no metric exporter is built then.
Neither set: the trace is printed to the console as a tree, and metrics are not exported (this
example says so and carries on).
``OTEL_EXPORTER_OTLP_PROTOCOL`` (or ``..._TRACES_PROTOCOL`` / ``..._METRICS_PROTOCOL``)
    ``http/protobuf`` (the default, port 4318) or ``grpc`` (port 4317); with an endpoint set,
    anything else is an error (with none, nothing reads it).
``OTEL_EXPORTER_OTLP_HEADERS``
    ``key=value,key2=value2`` sent with every export, e.g. an API key for a hosted backend.
``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``
    ``service.name`` and other resource attributes (``deployment.environment=prod,...``); the
    ``service_name=`` given in code is only the fallback.
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
    ``true`` records prompts, completions, tool arguments and results on spans (off by default;
    see ``redaction_audit.py`` before turning it on).
``OTEL_BSP_SCHEDULE_DELAY`` / ``OTEL_METRIC_EXPORT_INTERVAL``
    How often spans (ms, default 5000) and metrics (ms, default 60000) are sent; this example
    also flushes both before it exits.

To look at the traces locally in Jaeger (it stores traces only, so give it the traces endpoint)::

    docker run --rm -p 16686:16686 -p 4318:4318 jaegertracing/jaeger:2.19.0
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://localhost:4318/v1/traces OTEL_SERVICE_NAME=weather-bot \
        python examples/hook_registry/otlp_export.py

then open http://localhost:16686. For the metrics too, run the Collector of docs/export.md
(section 4) and give it the base endpoint. The LLM here is a scripted stand-in, so no API key
is needed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
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

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry, resolve_otlp_protocol


class ScriptedLLM(LLMProvider):
    """A stand-in for a real provider: one tool call, then the answer."""

    def __init__(self, responses: Sequence[LLMResponse]) -> None:
        self._responses = list(responses)

    async def call(self, request: LLMRequest) -> LLMResponse:
        return self._responses.pop(0)


SCRIPT = [
    LLMResponse(
        message=AssistantMessage(blocks=[ToolUseBlock(id="call_1", name="get_weather", input={"city": "Lisbon"})]),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=85, output_tokens=14, cost_usd=0.0004),
    ),
    LLMResponse(
        message=AssistantMessage(blocks=[TextBlock(text="It is sunny and 24 C in Lisbon.")]),
        stop_reason=StopReason.END_TURN,
        usage=Usage(input_tokens=120, output_tokens=12, cache_read_input_tokens=64, cost_usd=0.0005),
    ),
]


@dataclasses.dataclass(frozen=True, slots=True)
class City:
    city: str


@tool("get_weather", "Current weather for a city.")
async def get_weather(params: City) -> str:
    return f"sunny, 24 C in {params.city}"


async def main() -> None:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    traces_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if endpoint:
        print(f"exporting traces and metrics to {endpoint} over {resolve_otlp_protocol('traces')}")
    elif traces_endpoint:
        print(f"exporting traces only to {traces_endpoint} over {resolve_otlp_protocol('traces')}")
    else:
        print("OTEL_EXPORTER_OTLP_ENDPOINT is not set: printing the trace to the console instead")
    handles = configure_telemetry(service_name="flowra-otlp-example")

    hooks = HookRegistry()
    hooks.add(OtelHooks())  # uses the providers configure_telemetry() installed globally

    async with await ToolRegistry.create([get_local_tool(get_weather)]) as tools:
        runtime = AgentRuntime(
            agents={"assistant": ToolLoopAgent},
            services={
                LLMProvider: ScriptedLLM(SCRIPT),
                ToolRegistry: tools,
                ToolLoopConfig: ToolLoopConfig(
                    llm_config=LLMConfig(model="anthropic/claude-sonnet-4-5"), session_messages=[]
                ),
                HookRegistry: hooks,
            },
        )
        result = await runtime.run(agent="assistant", spec=ToolLoopSpec(user_message="Weather in Lisbon?"))

    # A short-lived program must flush: the batch processor would otherwise still be waiting.
    flushed = handles.force_flush(timeout_millis=10_000)
    handles.shutdown()
    assert isinstance(result, ToolLoopResult) and result.result_message is not None
    answer = next(b.text for b in result.result_message.blocks if isinstance(b, TextBlock))
    print(f"answer: {answer}")
    if endpoint or traces_endpoint:
        # force_flush() says whether the exporters finished in time; a refused or failed delivery
        # is logged by the exporters themselves (retried first, for transient errors).
        print("export: flushed" if flushed else "export: timed out (is the endpoint reachable?)")


if __name__ == "__main__":
    asyncio.run(main())
