"""One trace from the agent to a real MCP server: flowra's own MCP client sends the
``execute_tool`` span's W3C context in ``params._meta``, and the ``mcp`` SDK's server (its own
process and venv, tests/mcp_tool_server.py) continues it: ``invoke_agent`` -> ``execute_tool``
(with the MCP attributes, as the conventions' MCP page asks of an outer GenAI instrumentation) ->
the server's SERVER span ``tools/call forecast`` -> the tool's own ``lookup_forecast`` span, all
read back from a real OTLP export. Both protocol eras: the stateless ``2026-07-28`` one and the
handshake one (``Mcp-Session-Id``). Also the failure paths: every span ends and the agent's
result is what it would be untraced.

Needs ``FLOWRA_OTEL_MCP_PYTHON`` (the python of ``.venv-mcp``, built by ``./dev test`` from
requirements/mcp.lock); skipped without it on a developer machine, failed in CI on a home release.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
from flowra.agent import AgentRuntime
from flowra.lib.turn import TurnAgent, TurnConfig
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import mcp_client
from tests import mcp_server_process
from tests.mcp_server_process import mcp_server
from tests.otlp_receiver import OtlpReceiver, SpanRecord
from tests.runtime_hooks.support import (
    ScriptedProvider,
    llm_config,
    run_turn,
    system,
    text_response,
    tool_calls_response,
)
from tests.semconv_conformance import check_metrics, check_spans

pytestmark = pytest.mark.skipif(not mcp_client.CALL_TAKES_META, reason="this flowra's MCP client sends no _meta")

SECRET: Final = "Oslo-4711-secret"
"""A tool argument: it must reach the server as the argument and nowhere else."""


@pytest.fixture
def mcp_python() -> str:
    return mcp_server_process.mcp_python()


class Telemetry:
    """The agent side's real SDK and OTLP/HTTP exporters, to the test's receiver."""

    def __init__(self, rx: OtlpReceiver) -> None:
        self.tracer_provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=rx.http_traces_endpoint)))
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=rx.http_metrics_endpoint), export_interval_millis=3_600_000
        )
        self.memory = InMemorySpanExporter()  # the same spans, for the conformance checker
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[reader, self.metrics])

    def conformance_problems(self) -> list[str]:
        return check_spans(self.memory.get_finished_spans()) + check_metrics(self.metrics.get_metrics_data())

    def hooks(self, **options: Any) -> OtelHooks:
        return OtelHooks(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options)

    def flush(self) -> None:
        assert self.tracer_provider.force_flush(10_000)
        assert self.meter_provider.force_flush(10_000)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[Any]:
    from flowra.tools import McpConnection

    connection = await McpConnection.connect(url)
    try:
        yield connection
    finally:
        await connection.close()


def mcp_runtime(provider: ScriptedProvider, connection: Any) -> AgentRuntime:
    """A ``TurnAgent`` whose tools are the MCP server's (flowra's ``snapshot()`` registry)."""
    turn = TurnConfig(llm_config=llm_config(provider), system=system(), history=[], tools=connection.snapshot())
    return AgentRuntime(agents={"assistant": TurnAgent}, services={TurnConfig: turn})


def forecast_script(tool: str = "forecast") -> ScriptedProvider:
    return ScriptedProvider(tool_calls_response(("call-1", tool, {"city": SECRET})), text_response("It is sunny."))


def wait_for_named(rx: OtlpReceiver, name: str, timeout: float = 15.0) -> list[SpanRecord]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [s for s in rx.spans() if s.name == name]
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"no span {name!r} arrived; got {sorted({s.name for s in rx.spans()})}")


async def run_agent(url: str, telemetry: Telemetry | None, tool: str = "forecast", **options: Any) -> Any:
    async with connected(url) as connection:
        runtime = mcp_runtime(forecast_script(tool), connection)
        if telemetry is not None:
            telemetry.hooks(**options).install(runtime)
        return await run_turn(runtime, "What is the weather?")


@pytest.mark.parametrize(("era", "version"), [("stateless", "2026-07-28"), ("handshake", None)])
async def test_one_trace_from_the_agent_through_the_mcp_server(mcp_python: str, era: str, version: str | None) -> None:
    with OtlpReceiver() as rx, mcp_server(mcp_python, era, rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
            try:
                result = await run_agent(url, telemetry)
            finally:
                otel_context.detach(token)
            telemetry.flush()
            (tool_span,) = wait_for_named(rx, "lookup_forecast")
            (server_span,) = [s for s in wait_for_named(rx, "tools/call forecast") if s.kind == "SERVER"]
            points = rx.wait_for_metric_points("mcp.client.operation.duration")
            assert telemetry.conformance_problems() == []
        finally:
            telemetry.shutdown()
    agent_spans = [s for s in rx.spans() if s.resource_attributes.get("service.name") == "agent"]
    (invoke,) = [s for s in agent_spans if s.name.startswith("invoke_agent")]
    (execute,) = [s for s in agent_spans if s.name == "execute_tool forecast"]
    # one trace, with the right parents, across the process boundary
    assert invoke.is_root
    assert execute.trace_id == invoke.trace_id == server_span.trace_id == tool_span.trace_id
    assert server_span.parent_span_id == execute.span_id
    assert tool_span.parent_span_id == server_span.span_id
    # what _meta carried: the W3C keys (flowra's own protocol keys in the stateless era), the
    # app's baggage and nothing else: no argument, no content
    sent = set(tool_span.attributes["request.meta.keys"])  # type: ignore[arg-type]
    assert {"traceparent", "baggage"} <= sent
    assert sent - {"traceparent", "tracestate", "baggage"} <= {
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/clientCapabilities",
        "progressToken",
    }
    assert tool_span.attributes["request.meta.baggage"] == "tenant=acme"
    assert SECRET not in repr(tool_span.attributes)
    assert execute.parent_span_id is not None
    # the MCP attributes, on execute_tool (the page: no separate client span under an outer one)
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert execute.attributes["gen_ai.tool.name"] == "forecast"
    assert execute.attributes["server.address"] == "127.0.0.1"
    assert execute.attributes["network.transport"] == "tcp"
    assert "error.type" not in execute.attributes
    assert server_span.attributes["gen_ai.tool.name"] == "forecast"
    negotiated = execute.attributes["mcp.protocol.version"]
    assert negotiated == server_span.attributes["mcp.protocol.version"]
    if version is not None:
        assert negotiated == version
        assert "mcp.session.id" not in execute.attributes
    else:
        assert negotiated != "2026-07-28"
        assert execute.attributes["mcp.session.id"]
    # nothing of the call's content travelled anywhere but as the tool's argument
    for span in (server_span, tool_span):
        assert SECRET not in repr(span.attributes)
    (point,) = [p for p in points if p.attributes.get("gen_ai.tool.name") == "forecast"]
    assert point.attributes["mcp.method.name"] == "tools/call"
    assert point.attributes["mcp.protocol.version"] == negotiated
    assert "mcp.session.id" not in point.attributes
    assert result.text == "It is sunny." if hasattr(result, "text") else result


async def test_propagation_off_starts_a_new_trace_on_the_server(mcp_python: str) -> None:
    """``mcp_propagation=False``: the server's span is the root of a trace of its own (and the
    attributes and metric stay). The paired check: the test above shows the same server joining
    the agent's trace when it is on."""
    with OtlpReceiver() as rx, mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            await run_agent(url, telemetry, mcp_propagation=False)
            telemetry.flush()
            (server_span,) = [s for s in wait_for_named(rx, "tools/call forecast") if s.kind == "SERVER"]
        finally:
            telemetry.shutdown()
    (execute,) = [s for s in rx.spans() if s.name == "execute_tool forecast"]
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert server_span.trace_id != execute.trace_id
    assert server_span.is_root


async def test_a_server_not_on_the_allow_list_gets_no_context(mcp_python: str) -> None:
    with OtlpReceiver() as rx, mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            await run_agent(url, telemetry, mcp_servers=["tools.example.com"])
            telemetry.flush()
            (server_span,) = [s for s in wait_for_named(rx, "tools/call forecast") if s.kind == "SERVER"]
        finally:
            telemetry.shutdown()
    assert server_span.is_root


async def test_a_tool_error_is_classified_and_the_result_unchanged(mcp_python: str) -> None:
    with OtlpReceiver() as rx, mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
        untraced = await run_agent(url, None, tool="broken")
        telemetry = Telemetry(rx)
        try:
            traced = await run_agent(url, telemetry, tool="broken")
            telemetry.flush()
            server_spans = [s for s in wait_for_named(rx, "tools/call broken") if s.kind == "SERVER"]
        finally:
            telemetry.shutdown()
    (execute,) = [s for s in rx.spans() if s.name == "execute_tool broken"]
    assert execute.attributes["error.type"] == "tool_error"
    (server_span,) = [s for s in server_spans if s.trace_id == execute.trace_id]
    assert server_span.parent_span_id == execute.span_id
    assert server_span.attributes["error.type"] == "tool_error"
    assert repr(traced) == repr(untraced)


async def test_a_server_that_went_down_ends_every_span(mcp_python: str) -> None:
    """The server dies after the connection is made: flowra's client reconnects, fails, and
    answers with a tool error; the ``execute_tool`` span ends and the result is flowra's."""
    with OtlpReceiver() as rx:
        telemetry = Telemetry(rx)
        try:
            with mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
                connection_cm = connected(url)
                connection = await connection_cm.__aenter__()
            try:
                runtime = mcp_runtime(forecast_script(), connection)
                telemetry.hooks().install(runtime)
                result = await run_turn(runtime, "What is the weather?")
            finally:
                await connection_cm.__aexit__(None, None, None)
            telemetry.flush()
        finally:
            telemetry.shutdown()
    (execute,) = [s for s in rx.spans() if s.name == "execute_tool forecast"]
    assert execute.end_time_unix_nano >= execute.start_time_unix_nano
    assert execute.attributes["mcp.method.name"] == "tools/call"
    assert "error.type" in execute.attributes
    assert result is not None


async def test_a_cancelled_call_ends_every_span(mcp_python: str) -> None:
    """The agent is cancelled while the MCP call is in flight: the call's span still ends."""
    with OtlpReceiver() as rx, mcp_server(mcp_python, "stateless", rx.http_traces_endpoint) as url:
        telemetry = Telemetry(rx)
        try:
            async with connected(url) as connection:
                runtime = mcp_runtime(forecast_script(), connection)
                telemetry.hooks().install(runtime)
                task = asyncio.ensure_future(run_turn(runtime, "What is the weather?"))
                for _ in range(2000):
                    await asyncio.sleep(0.001)
                    if any(s.name == "chat" or s.name.startswith("chat ") for s in rx.spans()):
                        break
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            telemetry.flush()
        finally:
            telemetry.shutdown()
    spans = rx.spans()
    assert any(s.name.startswith("invoke_agent") for s in spans)
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano > 0 for s in spans)


def test_the_server_script_is_not_imported_by_the_suite() -> None:
    assert "mcp" not in sys.modules or not hasattr(sys.modules["mcp"], "server")
