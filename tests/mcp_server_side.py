"""What the test MCP servers (tests/mcp_tool_server.py: the ``mcp`` SDK's; tests/fastmcp_tool_server.py:
FastMCP's) share. Runs in the servers' own venvs (the ``backend-mcp`` and ``backend-fastmcp``
sessions'), imported by its bare name from those scripts (their folder is on ``sys.path``), never by the suite.

- ``server_tracing``: the server's tracer. Run plainly, the script gives its process an SDK tracer
  provider exporting OTLP/HTTP to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (one span at a time, so the
  test need not wait for a timer), as a server's own set-up code would. Run under
  ``opentelemetry-instrument`` (the zero-code route FastMCP's docs recommend for HTTP servers), the
  distro has already installed one from the ``OTEL_*`` variables, and it is used as is.
- ``record_request``: what reached the server, on the tool's own span, for the test to read back:
  the ``_meta`` keys, its baggage, every ``traceparent`` and ``baggage`` HTTP header the request
  carried (two traceparents would mean a doubled header), and a digest of the argument (which
  tells the calls apart; the argument itself is a test's secret, which must reach the server as
  the argument only).
- ``HandshakeEraOnly``: refuse the stateless era (HTTP 400), as a server from before ``2026-07-28``
  does, so flowra's client falls back to ``initialize`` and an ``Mcp-Session-Id``.
"""

# mypy: disable-error-code="import-not-found"
# (it runs in the MCP servers' venvs; the project venv has no mcp)
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, Tracer


def server_tracing(service_name: str) -> Tracer:
    """The tracer of the server's own spans; an exporting SDK provider unless one is installed."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):  # not under opentelemetry-instrument
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    return trace.get_tracer(service_name)


def record_request(span: Span, city: str, meta: Any, headers: Any) -> None:
    """Put what the request carried on ``span`` (the tool's argument ``city`` identifies the call)."""
    raw = meta if isinstance(meta, Mapping) else (meta.model_dump(by_alias=True) if meta is not None else {})
    span.set_attribute("request.city.sha256", hashlib.sha256(city.encode()).hexdigest())  # never the city itself
    span.set_attribute("request.meta.keys", sorted(str(k) for k in raw))
    span.set_attribute("request.meta.baggage", str(raw.get("baggage", "")))
    getlist = getattr(headers, "getlist", None)
    for header in ("traceparent", "baggage"):
        span.set_attribute(f"request.header.{header}", list(getlist(header)) if getlist is not None else [])


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
