"""A real MCP tool server for the end-to-end MCP tests, run in its own process and venv
(``.venv-mcp``, from requirements/mcp.lock: the ``mcp`` SDK, which flowra-otel never imports).

    python tests/mcp_tool_server.py PORT stateless|handshake

Streamable HTTP on 127.0.0.1:PORT/mcp. The SDK's own ``OpenTelemetryMiddleware`` makes a SERVER
span ``tools/call <tool>`` for each call, parented on the W3C context the request carries in
``params._meta``; the ``forecast`` tool makes a span of its own under it, as a real tool's database
or HTTP calls would. Spans go by OTLP/HTTP to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the test's
receiver), one batch at a time, flushed on every call so the test need not wait for a timer.
"""

# mypy: disable-error-code="import-not-found,untyped-decorator"
# (it runs in .venv-mcp; the project venv has neither mcp nor uvicorn)
from __future__ import annotations

import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
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
def forecast(city: str, ctx: Context) -> str:
    """The weather forecast for a city."""
    with tracer.start_as_current_span("lookup_forecast") as span:
        span.set_attribute("forecast.source", "test")
        # what the request's params._meta carried, for the test to read back
        meta = ctx.request_context.meta
        raw = meta if isinstance(meta, dict) else (meta.model_dump(by_alias=True) if meta is not None else {})
        span.set_attribute("request.meta.keys", sorted(str(k) for k in raw))
        span.set_attribute("request.meta.baggage", str(raw.get("baggage", "")))
        return f"Sunny in {city}"


@server.tool()
def broken(city: str) -> str:
    """Always fails (a tool error the server reports with isError)."""
    msg = f"no forecast service for {city}"
    raise RuntimeError(msg)


class HandshakeEraOnly:
    """ASGI wrapper: refuse the stateless era's requests (HTTP 400), as a server from before
    ``2026-07-28`` does, so a client falls back to ``initialize`` and an ``Mcp-Session-Id``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
            if version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
                await send({"type": "http.response.start", "status": 400, "headers": []})
                await send({"type": "http.response.body", "body": b"unsupported protocol version"})
                return
        await self.app(scope, receive, send)


def main() -> None:
    port = int(sys.argv[1])
    if sys.argv[2] == "stateless":
        server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=True)
        return
    app = HandshakeEraOnly(server.streamable_http_app(stateless_http=False))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
