"""A real MCP tool server for the end-to-end MCP tests, run in its own process and venv
(``.venv-mcp``, from requirements/mcp.lock: the ``mcp`` SDK, which flowra-otel never imports).

    python tests/mcp_tool_server.py PORT stateless|handshake

Streamable HTTP on 127.0.0.1:PORT/mcp. The SDK's own ``OpenTelemetryMiddleware`` makes a SERVER
span ``tools/call <tool>`` for each call, parented on the W3C context the request carries in
``params._meta``; the ``forecast`` tool makes a span of its own under it, as a real tool's database
or HTTP calls would. Spans go by OTLP/HTTP to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the test's
receiver), one batch at a time, flushed on every call so the test need not wait for a timer.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "mcp-tool-server"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("mcp-tool-server")

server = MCPServer("flowra-otel-test-tools")


@server.tool()
def forecast(city: str) -> str:
    """The weather forecast for a city."""
    with tracer.start_as_current_span("lookup_forecast") as span:
        span.set_attribute("forecast.source", "test")
        return f"Sunny in {city}"


@server.tool()
def broken(city: str) -> str:
    """Always fails (a tool error the server reports with isError)."""
    msg = f"no forecast service for {city}"
    raise RuntimeError(msg)


def main() -> None:
    port = int(sys.argv[1])
    stateless = sys.argv[2] == "stateless"
    server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=stateless)


if __name__ == "__main__":
    main()
