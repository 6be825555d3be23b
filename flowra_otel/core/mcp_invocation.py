"""One tool call sent to an MCP server: the trace context it carries, the MCP attributes of its
``execute_tool`` span, and the ``mcp.client.*`` metrics. Flowra-free: the adapter says what the
MCP client knows (server URL, protocol version, session id) and when the call ended.

Why the MCP attributes go on ``execute_tool`` and not on a span of their own: the conventions'
MCP page says an MCP instrumentation that can reliably tell an outer GenAI instrumentation is
already tracing the tool execution SHOULD NOT make a separate span and SHOULD add the MCP
attributes to that ``execute_tool`` span. This plugin is that outer instrumentation, so it knows.

What travels to the server (SEP-414; the page: "propagate context using the configured
OpenTelemetry propagators by injecting it into the MCP request ``params._meta``"): the
``execute_tool`` span's context as the process's propagators write it; with the default ones
(W3C Trace Context and Baggage) ``traceparent``, ``tracestate`` and ``baggage``, and ``baggage`` is
exactly what the app itself put in OpenTelemetry baggage. Nothing of the call's content
(arguments, results, messages) is ever written there, and a key flowra or the app already set in
``_meta`` is never replaced.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.trace import Span

logger = logging.getLogger("flowra_otel")

MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_CLIENT_OPERATION_DURATION: Final = "mcp.client.operation.duration"
MCP_CLIENT_SESSION_DURATION: Final = "mcp.client.session.duration"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_PROTOCOL_NAME: Final = "network.protocol.name"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
TOOLS_CALL: Final = "tools/call"
TOOL_ERROR: Final = "tool_error"
"""``error.type`` of a call the server answered with ``isError: true`` (the page's literal)."""

MCP_DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""The ``ExplicitBucketBoundaries`` the MCP metrics' definitions advise."""


@dataclasses.dataclass(frozen=True, slots=True)
class McpPropagation:
    """Whether a call's trace context goes into ``params._meta``, and to which servers."""

    enabled: bool = True
    servers: tuple[str, ...] | None = None
    """None: every server. Else ``host``, ``host:port`` or a URL prefix (``https://mcp.example/``)."""

    @classmethod
    def build(cls, propagate: object, servers: object) -> McpPropagation:
        """Validate ``mcp_propagation`` / ``mcp_servers`` (``TypeError``/``ValueError`` now)."""
        if not isinstance(propagate, bool):
            msg = f"mcp_propagation must be True or False, got {type(propagate).__name__}"
            raise TypeError(msg)
        if servers is None:
            return cls(propagate, None)
        if isinstance(servers, (str, bytes)) or not isinstance(servers, Iterable):
            msg = "mcp_servers must be an iterable of host names, host:port or URL prefixes (not one string)"
            raise TypeError(msg)
        items: list[str] = []
        for item in servers:
            if not isinstance(item, str) or not item.strip():
                msg = f"mcp_servers entries must be non-empty strings, got {item!r}"
                raise ValueError(msg)
            items.append(item.strip().lower())
        return cls(propagate, tuple(items))

    def allows(self, url: str) -> bool:
        """Whether the trace context may be sent to the server at ``url``."""
        if not self.enabled:
            return False
        if self.servers is None:
            return True
        lowered = url.lower()
        parts = urlsplit(lowered)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        for entry in self.servers:
            if "://" in entry:
                if lowered.startswith(entry):
                    return True
            elif entry in (host, f"{host}:{port}"):
                return True
        return False


class McpInstruments:
    """``mcp.client.operation.duration`` and ``mcp.client.session.duration`` (seconds)."""

    __slots__ = ("enabled", "operation_duration", "session_duration")

    def __init__(self, meter: Meter, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.operation_duration: Histogram = meter.create_histogram(
            MCP_CLIENT_OPERATION_DURATION,
            unit="s",
            description="Duration of the MCP request or notification as observed on the sender.",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS,
        )
        self.session_duration: Histogram = meter.create_histogram(
            MCP_CLIENT_SESSION_DURATION,
            unit="s",
            description="The duration of the MCP session as observed on the MCP client.",
            explicit_bucket_boundaries_advisory=MCP_DURATION_BUCKETS,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class McpServer:
    """What the MCP client knows of the server when a call starts."""

    url: str
    protocol_version: str | None
    session_id: str | None


def server_attributes(server: McpServer) -> dict[str, Any]:
    """The attributes the span and the metric share (low-cardinality: no session id)."""
    parts = urlsplit(server.url)
    attrs: dict[str, Any] = {
        MCP_METHOD_NAME: TOOLS_CALL,
        NETWORK_TRANSPORT: "tcp",
        NETWORK_PROTOCOL_NAME: "http",
    }
    if parts.hostname:
        attrs[SERVER_ADDRESS] = parts.hostname
        attrs[SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
    if server.protocol_version:
        attrs[MCP_PROTOCOL_VERSION] = server.protocol_version
    return attrs


def trace_meta(span: Span, meta: Mapping[str, Any], propagation: McpPropagation, url: str) -> dict[str, Any]:
    """``meta`` plus the W3C keys of ``span``'s context that ``meta`` does not already hold.

    The context is the span's, plus the baggage of the caller's current context (the app's own),
    written by the process's propagators;
    no key ``meta`` has is replaced, and nothing is added when propagation is off for ``url``."""
    merged = dict(meta)
    if not propagation.allows(url) or not span.get_span_context().is_valid:
        return merged
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    for key, value in carrier.items():
        merged.setdefault(key, value)
    return merged


class McpToolCall:
    """One ``tools/call``: its attributes on the ``execute_tool`` span, then its duration."""

    __slots__ = ("attrs", "instruments", "span", "start")

    def __init__(self, span: Span, server: McpServer, tool_name: str, instruments: McpInstruments | None) -> None:
        self.span = span
        self.instruments = instruments
        self.start = time.perf_counter()
        self.attrs = server_attributes(server)
        self.attrs[GEN_AI_TOOL_NAME] = tool_name
        if span.is_recording():
            span.set_attributes(self.attrs)
            if server.session_id:
                span.set_attribute(MCP_SESSION_ID, server.session_id)

    def finish(self, *, tool_error: bool = False, error: BaseException | None = None) -> None:
        """Record the call's duration; ``error.type`` for a tool error or a failed request."""
        attrs = dict(self.attrs)
        if error is not None:
            attrs[ERROR_TYPE] = type(error).__qualname__
        elif tool_error:
            attrs[ERROR_TYPE] = TOOL_ERROR
        if ERROR_TYPE in attrs and self.span.is_recording():
            self.span.set_attribute(ERROR_TYPE, attrs[ERROR_TYPE])
        instruments = self.instruments
        if instruments is not None and instruments.enabled:
            attrs.pop(GEN_AI_TOOL_NAME, None)
            attrs[GEN_AI_OPERATION_NAME] = "execute_tool"
            attrs[GEN_AI_TOOL_NAME] = self.attrs[GEN_AI_TOOL_NAME]
            instruments.operation_duration.record(time.perf_counter() - self.start, attrs)


_TOOL_SPANS: weakref.WeakKeyDictionary[Any, tuple[McpInstruments | None, McpPropagation]] = weakref.WeakKeyDictionary()
"""Each live ``execute_tool`` span -> the MCP settings of the ``OtelHooks`` that started it, so a
call the MCP client makes under that span is measured and propagated by that instance's options."""


def note_tool_span(span: Span, instruments: McpInstruments | None, propagation: McpPropagation) -> None:
    """Remember which options own ``span`` (an ``execute_tool`` span). Never raises."""
    with contextlib.suppress(TypeError):  # a span class that cannot be weakly referenced: untraced
        _TOOL_SPANS[span] = (instruments, propagation)


def settings_of(span: Span) -> tuple[McpInstruments | None, McpPropagation] | None:
    """The settings noted for ``span``; None when no ``OtelHooks`` of this process started it."""
    try:
        return _TOOL_SPANS.get(span)
    except TypeError:
        return None


__all__ = [
    "MCP_CLIENT_OPERATION_DURATION",
    "MCP_CLIENT_SESSION_DURATION",
    "McpInstruments",
    "McpPropagation",
    "McpServer",
    "McpToolCall",
    "note_tool_span",
    "settings_of",
    "trace_meta",
]
