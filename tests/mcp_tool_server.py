"""A real MCP tool server for the end-to-end MCP tests, run in its own process and venv
(the ``backend-mcp`` session's, from requirements/mcp.lock: the ``mcp`` SDK, which flowra-otel never imports).

    python tests/mcp_tool_server.py PORT stateless|handshake [HOST]
    opentelemetry-instrument python tests/mcp_tool_server.py PORT stateless|handshake [HOST]   # + ASGI spans

Streamable HTTP on HOST:PORT/mcp (HOST 127.0.0.1 unless given: the allow-list tests bind
127.0.0.12 and ::1 too). The tools: ``forecast`` (works), ``broken`` (a tool error,
``isError: true``), ``refused`` (a JSON-RPC error, code ``REFUSED_CODE``, whose message carries the
argument, as a real server's may), ``outage`` (every ``tools/call`` of it answered HTTP 500 before
the SDK sees it, as a failing proxy or a crashed handler would; their JSON-RPC ids appended to
``$MCP_TEST_MARKER_DIR/outage-ids``) and ``slow`` (writes
``$MCP_TEST_MARKER_DIR/slow-started`` once it runs, then takes ``SLOW_SECONDS``: a test cancels the
call exactly while it is in flight). The SDK's own ``OpenTelemetryMiddleware`` makes a SERVER
span ``tools/call <tool>`` for each call, parented on the W3C context the request carries in
``params._meta``; the ``forecast`` tool makes a span of its own under it, as a real tool's database
or HTTP calls would, and records there what the request carried (tests/mcp_server_side.py). Spans go
by OTLP/HTTP to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the test's receiver): run plainly, one at a
time, so the test need not wait for a timer; under ``opentelemetry-instrument`` (in the ``backend-fastmcp``
venv, which has the same SDK and the Starlette instrumentation), through the distro's set-up, which adds
the ``POST /mcp`` SERVER span of the HTTP request.
"""

# mypy: disable-error-code="import-not-found,untyped-decorator"
# (it runs in the backend-mcp venv; the project venv has neither mcp nor uvicorn)
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_server_side import HandshakeEraOnly, record_request, server_tracing

tracer = server_tracing("mcp-tool-server")

server = MCPServer("flowra-otel-test-tools")


@server.tool()
def forecast(city: str, ctx: Context) -> str:
    """The weather forecast for a city."""
    with tracer.start_as_current_span("lookup_forecast") as span:
        span.set_attribute("forecast.source", "test")
        # what the request carried (params._meta, the traceparent headers), for the test to read back
        record_request(span, city, ctx.request_context.meta, ctx.headers)
        return f"Sunny in {city}"


@server.tool()
def broken(city: str) -> str:
    """Always fails (a tool error the server reports with isError)."""
    msg = f"no forecast service for {city}"
    raise RuntimeError(msg)


REFUSED_CODE = -32050
"""A server-defined JSON-RPC error code (not one flowra acts on, such as -32601 / -32602)."""
SLOW_SECONDS = 8.0


@server.tool()
def refused(city: str) -> str:
    """Answered with a JSON-RPC error (not a tool result)."""
    raise MCPError(code=REFUSED_CODE, message=f"quota exceeded for {city}")


@server.tool()
def outage(city: str) -> str:
    """Never runs: the server answers HTTP 500 for it (``Faults``)."""
    return f"unreachable {city}"


@server.tool()
async def slow(city: str) -> str:
    """Says it started (a marker file), then takes its time."""
    marker_dir = os.environ.get("MCP_TEST_MARKER_DIR")
    if marker_dir:
        Path(marker_dir, "slow-started").write_text("started")  # noqa: ASYNC240  # tiny, once per call
    await asyncio.sleep(SLOW_SECONDS)
    return f"Slowly sunny in {city}"


class Faults:
    """ASGI wrapper: a ``tools/call`` of ``outage`` gets HTTP 500 with a plain-text body (no
    JSON-RPC error); every other request goes to the SDK's app unchanged."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        params = request.get("params") if isinstance(request, dict) else None
        if isinstance(params, dict) and request.get("method") == "tools/call" and params.get("name") == "outage":
            marker_dir = os.environ.get("MCP_TEST_MARKER_DIR")
            if marker_dir:  # the JSON-RPC ids the client sent, for the test to compare
                with Path(marker_dir, "outage-ids").open("a") as ids:  # noqa: ASYNC230  # tiny, once per call
                    ids.write(f"{request.get('id')}\n")
            await send({"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"internal server error"})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def main() -> None:
    port = int(sys.argv[1])
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    if sys.argv[2] == "stateless":
        app: Any = Faults(server.streamable_http_app(stateless_http=True, host=host))
    else:
        app = HandshakeEraOnly(Faults(server.streamable_http_app(stateless_http=False, host=host)))
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
