"""A real FastMCP 4.x tool server for the end-to-end MCP tests, run in its own process and venv
(the ``backend-fastmcp`` session's, from requirements/fastmcp.lock: FastMCP, the OpenTelemetry distro, the OTLP/HTTP
exporter and the Starlette and httpx instrumentations), written as FastMCP's docs show:

    python tests/fastmcp_tool_server.py PORT stateless|handshake [HOST]                          # native
    opentelemetry-instrument python tests/fastmcp_tool_server.py PORT stateless|handshake [HOST] # + ASGI

Streamable HTTP on HOST:PORT/mcp (HOST 127.0.0.1 unless given), one tool, ``forecast``, that makes a span of its own
(``lookup_forecast``) and records there what the request carried (tests/mcp_server_side.py). FastMCP's
native telemetry makes the SERVER span ``tools/call forecast`` (scope ``fastmcp``), parented on the
W3C context in ``params._meta`` only when no span is current; under ``opentelemetry-instrument`` the
Starlette instrumentation's ``POST /mcp`` SERVER span is current by then, made from the request's
HTTP headers.
"""

# mypy: disable-error-code="import-not-found,untyped-decorator"
# (it runs in the backend-fastmcp venv; the project venv has neither fastmcp nor uvicorn)
from __future__ import annotations

import sys
from typing import Any

import uvicorn
from fastmcp import FastMCP
from fastmcp.server.dependencies import fastmcp_request_ctx, get_http_request
from mcp_server_side import HandshakeEraOnly, record_request, server_tracing

tracer = server_tracing("fastmcp-tool-server")
server = FastMCP("flowra-otel-test-tools")


@server.tool
def forecast(city: str) -> str:
    """The weather forecast for a city."""
    with tracer.start_as_current_span("lookup_forecast") as span:
        request_ctx = fastmcp_request_ctx.get()
        record_request(span, city, getattr(request_ctx, "meta", None), get_http_request().headers)
        return f"Sunny in {city}"


def main() -> None:
    port = int(sys.argv[1])
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    app: Any = server.http_app(stateless_http=sys.argv[2] == "stateless")
    if sys.argv[2] != "stateless":
        app = HandshakeEraOnly(app)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
