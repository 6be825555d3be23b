"""Ship traces and metrics of a flowra agent over OTLP, configured by the standard environment.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 .venv/bin/python examples/otlp_export.py

(``./dev demo`` or ``./dev setup`` builds ``.venv``; any Python >= 3.12 environment with today's
flowra and this package installed works too. The ``python3`` on many machines is older and has no
flowra: plain ``python ...`` fails there.)

(flowra 0.0.56 - 0.0.93; ``examples/hook_registry/otlp_export.py`` is the same for 0.0.3 - 0.0.8.)
``configure_telemetry()`` reads the same ``OTEL_*`` variables as every OpenTelemetry SDK, so the
code below never changes between a laptop and production:

``OTEL_EXPORTER_OTLP_ENDPOINT``
    Where to send both signals: an OpenTelemetry Collector, Grafana Alloy, a vendor's OTLP intake,
    anything that takes traces *and* metrics. For HTTP give the base URL
    (``http://localhost:4318``): ``/v1/traces`` and ``/v1/metrics`` are appended.
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    Traces only, used exactly as given (for HTTP it ends in ``/v1/traces``): the one to give a
    trace backend (Jaeger, Tempo, Phoenix, Langfuse), which refuses metrics (docs/backends.md).
    No metric exporter is built then.
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
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://localhost:4318/v1/traces OTEL_SERVICE_NAME=weather-bot \\
        .venv/bin/python examples/otlp_export.py

then open http://localhost:16686. For the metrics too, run the Collector of docs/export.md
(section 4) and give it the base endpoint. The LLM here is a scripted stand-in, so no API key
is needed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os

from flowra.agent import AgentRuntime
from flowra.lib import LLMConfig
from flowra.lib.chat import ChatAgent, ChatConfig, ChatResult, ChatSpec
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from flowra.tools import ToolRegistry, tool

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry, resolve_otlp_protocol


class ScriptedLLM(LLMProvider):
    """A stand-in for a real provider: one tool call, then the answer."""

    def __init__(self) -> None:
        self._responses = [
            LLMResponse(
                messages=[
                    AssistantMessage(blocks=[ToolUseBlock(id="call_1", name="get_weather", input={"city": "Lisbon"})])
                ],
                stop_reason=StopReason.TOOL_USE,
                usage=Usage(input_tokens=85, output_tokens=14, cost_usd=0.0004),
            ),
            LLMResponse(
                messages=[AssistantMessage(blocks=[TextBlock(text="It is sunny and 24 C in Lisbon.")])],
                stop_reason=StopReason.END_TURN,
                usage=Usage(input_tokens=120, output_tokens=12, cache_read_input_tokens=64, cost_usd=0.0005),
            ),
        ]

    async def call(self, request: LLMRequest) -> LLMResponse:
        return self._responses.pop(0)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class City:
    city: str


@tool("get_weather")
async def get_weather(params: City) -> str:
    """Current weather for a city."""
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
    telemetry = configure_telemetry(service_name="flowra-otlp-example")

    llm = LLMConfig(provider=ScriptedLLM(), model="anthropic/claude-sonnet-4-5")
    runtime = AgentRuntime(
        agents={"assistant": ChatAgent},
        services={
            ChatConfig: ChatConfig(
                llm_config=llm,
                system=[SystemMessage(blocks=[TextBlock(text="You answer weather questions.")])],
                tools=ToolRegistry([get_weather]),
            )
        },
    )
    OtelHooks().install(runtime)  # uses the providers configure_telemetry() installed globally

    result = await runtime.run(agent=ChatAgent, spec=ChatSpec.text("Weather in Lisbon?"))

    # A short-lived program must flush: the batch processor would otherwise still be waiting.
    flushed = telemetry.force_flush(timeout_millis=10_000)
    telemetry.shutdown()
    assert isinstance(result, ChatResult)
    print(f"answer: {result.response}")
    if endpoint or traces_endpoint:
        # force_flush() says whether the exporters finished in time; a refused or failed delivery
        # is logged by the exporters themselves (retried first, for transient errors).
        print("export: flushed" if flushed else "export: timed out (is the endpoint reachable?)")


if __name__ == "__main__":
    asyncio.run(main())
