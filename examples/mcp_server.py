"""A traced MCP server, for ``examples/mcp_agent.py``: one trace from the agent into the server.

It is the ``mcp`` SDK's own server (``MCPServer``, Streamable HTTP on ``/mcp``) with one tool,
``forecast``. The SDK needs no tracing code of its own: its ``OpenTelemetryMiddleware`` makes a SERVER
span ``tools/call forecast`` for every call, parented on the trace context the agent's call carries
(flowra-otel puts the agent's ``execute_tool`` span there), and the tool's own span
(``lookup_forecast``) nests under it. All it needs is what every OpenTelemetry process needs: a
tracer provider with an exporter, set up below.

It runs in an environment of its own, the way MCP servers are deployed (no flowra, no flowra-otel)::

    python3.12 -m venv mcp-env                    # any Python >= 3.10
    mcp-env/bin/pip install "mcp==2.3.0" opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    mcp-env/bin/python examples/mcp_server.py --port 8931 --traces-file spans.jsonl

then, in another terminal, ``.venv/bin/python examples/mcp_agent.py --url http://127.0.0.1:8931/mcp
--traces-file spans.jsonl``. Where its spans go:

``--traces-file FILE``
    appended to FILE as OTLP JSON lines, the format of flowra-otel's traces file
    (``FLOWRA_OTEL_TRACES_FILE``) and of the Collector's file exporter: the agent appends its own
    spans to the same file, and ``flowra-otel audit FILE`` reads both.
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (without ``--traces-file``) OTLP over HTTP to your Collector or backend, as the agent's go:
    both services' spans in one trace there (docs/mcp.md says what Jaeger and Phoenix show).
neither
    printed on stdout as JSON, one document per span (the SDK's ``ConsoleSpanExporter``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)


class OtlpJsonLines(SpanExporter):
    """Spans as OTLP JSON lines: one ``ExportTraceServiceRequest`` per line, each written in one
    append (so two processes can share the file). flowra-otel has the same exporter
    (``flowra_otel.export.OtlpJsonFileSpanExporter``); this server does without the package."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from google.protobuf.json_format import MessageToJson
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        line = MessageToJson(encode_spans(spans), indent=None) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def set_up_tracing(traces_file: str | None) -> None:
    """The server process's tracer provider: every span the SDK and the tool make goes there."""
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-mcp-server"}))
    if traces_file:
        provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLines(traces_file)))
    elif os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)


server = MCPServer("weather")
tracer = trace.get_tracer("weather-mcp-server")


@server.tool()
def forecast(city: str) -> str:
    """The weather forecast for a city."""
    with tracer.start_as_current_span("lookup_forecast") as span:  # the tool's own work, in the trace
        span.set_attribute("forecast.city", city)
        return f"Sunny and 24°C in {city}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=8931)
    parser.add_argument("--traces-file", default=None, help="append spans here as OTLP JSON lines")
    args = parser.parse_args()
    set_up_tracing(args.traces_file)
    print(f"MCP server on http://127.0.0.1:{args.port}/mcp", flush=True)
    server.run("streamable-http", host="127.0.0.1", port=args.port, stateless_http=True)


if __name__ == "__main__":
    main()
