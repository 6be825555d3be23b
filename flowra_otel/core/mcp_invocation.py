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

Why the HTTP headers too: a server run under an HTTP server instrumentation (``opentelemetry-
instrument`` with the ASGI / Starlette instrumentation, as FastMCP's docs recommend) makes its
``POST /mcp`` SERVER span from the request's headers before any MCP code reads ``_meta``; with
no ``traceparent`` header that span is a root, and a server that continues ``_meta`` only when no
span is current (FastMCP) puts its ``tools/call`` span in that new trace. The same fields go into
both, from one decision (``trace_fields``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import string
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from .errors import error_type_of
from .server_allow_list import DEFAULT_PORTS, ServerEntry, allowed, parse_entries

logger = logging.getLogger("flowra_otel")

JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
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
    servers: tuple[ServerEntry, ...] | None = None
    """None: every server. Else the parsed ``mcp_servers`` entries (``server_allow_list``)."""

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
        return cls(propagate, parse_entries(servers))

    def allows(self, url: str) -> bool:
        """Whether the trace context may be sent to the server at ``url``: the one question every
        way of sending it asks (the URL matched by its parts, ``server_allow_list``)."""
        if not self.enabled:
            return False
        return self.servers is None or allowed(url, self.servers)


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


def server_attributes(server: McpServer, method: str = TOOLS_CALL) -> dict[str, Any]:
    """The attributes the span and the metric share (low-cardinality: no session id)."""
    attrs: dict[str, Any] = {MCP_METHOD_NAME: method, NETWORK_TRANSPORT: "tcp"}
    attrs.update(_endpoint_attributes(server))
    return attrs


def _endpoint_attributes(server: McpServer) -> dict[str, Any]:
    parts = urlsplit(server.url)
    attrs: dict[str, Any] = {NETWORK_PROTOCOL_NAME: "http"}
    with contextlib.suppress(ValueError):  # a port that is not a number: no address
        if parts.hostname:
            attrs[SERVER_ADDRESS] = parts.hostname
            attrs[SERVER_PORT] = parts.port or DEFAULT_PORTS.get(parts.scheme, 80)
    if server.protocol_version:
        attrs[MCP_PROTOCOL_VERSION] = server.protocol_version
    return attrs


@dataclasses.dataclass(frozen=True, slots=True)
class McpOutcome:
    """How one JSON-RPC request ended, in low-cardinality terms only (never a message).

    ``error_type``: the JSON-RPC error code as a string when the server answered one (then also
    ``status_code``), ``tool_error`` for a ``CallToolResult`` with ``isError: true``, the HTTP
    status (``"500"``) for an HTTP error without a JSON-RPC error, else the failure's exception
    type; None: the request succeeded."""

    request_id: str | None = None
    error_type: str | None = None
    status_code: str | None = None

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if self.error_type is not None:
            attrs[ERROR_TYPE] = self.error_type
        if self.status_code is not None:
            attrs[RPC_RESPONSE_STATUS_CODE] = self.status_code
        return attrs


@dataclasses.dataclass(frozen=True, slots=True)
class McpSettings:
    """The MCP options of the ``OtelHooks`` that started an ``execute_tool`` span."""

    instruments: McpInstruments | None
    propagation: McpPropagation
    tracer: Tracer | None = None
    """Makes the CLIENT spans of the requests a call sends besides ``tools/call`` (a reconnect)."""


_HEADER_NAME_CHARS: Final = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")
"""An HTTP header name is a token (RFC 9110)."""
_TRANSPORT_HEADERS: Final = frozenset({"content-type", "accept"})
"""Headers the Streamable HTTP transport sets itself (and every ``Mcp-*`` one): never sent by us."""
_PROTOCOL_META_PREFIX: Final = "io.modelcontextprotocol/"
"""The protocol's own ``_meta`` namespace (the stateless era's version, client info, capabilities)."""


def trace_fields(span: Span, propagation: McpPropagation, url: str) -> dict[str, str]:
    """The trace context one MCP request carries, or nothing: the **one decision per request**.

    Both places the context goes (``params._meta`` and the request's HTTP headers) take these
    fields, so the off switch and the allow-list decide for both at once, by a single
    ``propagation.allows(url)``. The fields are ``span``'s context plus the baggage of the caller's
    current context (the app's own), as the process's propagators write them (with the default
    ones: ``traceparent``, ``tracestate``, ``baggage``)."""
    if not propagation.allows(url) or not span.get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def meta_with(meta: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """``meta`` plus the ``fields`` it does not already hold: a key flowra or the app set is never
    replaced, and nothing goes into the protocol's own ``io.modelcontextprotocol/`` keys."""
    merged = dict(meta)
    for key, value in fields.items():
        if not key.startswith(_PROTOCOL_META_PREFIX):
            merged.setdefault(key, value)
    return merged


def headers_with(headers: Mapping[str, str], fields: Mapping[str, str]) -> dict[str, str]:
    """``headers`` plus the ``fields`` it does not already hold (names compared case-insensitively,
    as HTTP does): one ``traceparent`` per request, never two. A field that is not a valid header
    (name, printable ASCII value) or that the transport sets itself is left out, so the request
    is never refused because of it.

    An HTTP client instrumentation (opentelemetry-instrumentation-httpx) sets these headers again
    when it sends the request, replacing ours with its CLIENT span's context: its span is then the
    server's parent, and the header is still there once."""
    merged = dict(headers)
    present = {name.lower() for name in merged}
    for name, value in fields.items():
        lowered = name.lower()
        if (
            lowered in present
            or not name
            or not set(name) <= _HEADER_NAME_CHARS
            or lowered in _TRANSPORT_HEADERS
            or lowered.startswith("mcp-")
            or not all(char == "\t" or 0x20 <= ord(char) <= 0x7E for char in value)
        ):
            continue
        merged[name] = value
        present.add(lowered)
    return merged


class McpToolCall:
    """One ``tools/call``: its attributes on the ``execute_tool`` span, then its duration.

    A call can send ``tools/call`` twice (flowra retries once after a reconnect): what the span
    and the metric say is the last attempt's (its ``jsonrpc.request.id``, its outcome), the one
    whose answer the agent got."""

    __slots__ = ("attrs", "last", "settings", "span", "start")

    def __init__(self, span: Span, server: McpServer, tool_name: str, settings: McpSettings) -> None:
        self.span = span
        self.settings = settings
        self.start = time.perf_counter()
        self.last: McpOutcome | None = None
        self.attrs = server_attributes(server)
        self.attrs[GEN_AI_TOOL_NAME] = tool_name
        if span.is_recording():
            span.set_attributes(self.attrs)
            if server.session_id:
                span.set_attribute(MCP_SESSION_ID, server.session_id)

    @property
    def instruments(self) -> McpInstruments | None:
        return self.settings.instruments

    def attempt(self, outcome: McpOutcome, session_id: str | None) -> None:
        """A ``tools/call`` request of this call ended (the retry's replaces the first's)."""
        self.last = outcome
        if self.span.is_recording():
            if outcome.request_id is not None:
                self.span.set_attribute(JSONRPC_REQUEST_ID, outcome.request_id)
            if session_id:
                self.span.set_attribute(MCP_SESSION_ID, session_id)

    def finish(self, *, tool_error: bool = False, error: BaseException | None = None) -> None:
        """Record the call's duration and how it ended: the exception it raised, else the last
        request's outcome, else ``tool_error`` when flowra answered with an error result all
        the same (a tool it does not know, an answer it rejected)."""
        attrs = dict(self.attrs)
        last = self.last
        if error is not None:
            attrs[ERROR_TYPE] = error_type_of(error)
        elif last is not None and last.error_type is not None:
            attrs.update(last.attributes())
        elif tool_error:
            attrs[ERROR_TYPE] = TOOL_ERROR
        if ERROR_TYPE in attrs:
            with contextlib.suppress(TypeError):
                _CALL_ERRORS[self.span] = str(attrs[ERROR_TYPE])
            if self.span.is_recording():
                self.span.set_attribute(ERROR_TYPE, attrs[ERROR_TYPE])
                if RPC_RESPONSE_STATUS_CODE in attrs:
                    self.span.set_attribute(RPC_RESPONSE_STATUS_CODE, attrs[RPC_RESPONSE_STATUS_CODE])
        instruments = self.instruments
        if instruments is not None and instruments.enabled:
            attrs[GEN_AI_OPERATION_NAME] = "execute_tool"
            instruments.operation_duration.record(time.perf_counter() - self.start, attrs)


class McpRequest:
    """A request or notification a tool call sends besides ``tools/call``: flowra's reconnect
    (``initialize``, ``notifications/initialized``, ``tools/list``) inside the call. A CLIENT
    span ``{mcp.method.name}`` under the ``execute_tool`` span (not made current: nothing runs
    under it) and its ``mcp.client.operation.duration``; this is what shows a server that went
    down and came back inside the agent's trace."""

    __slots__ = ("attrs", "instruments", "span", "start")

    def __init__(self, call: McpToolCall, method: str, server: McpServer) -> None:
        self.instruments = call.settings.instruments
        self.attrs = server_attributes(server, method)
        self.start = time.perf_counter()
        tracer = call.settings.tracer
        self.span: Span | None = None
        if tracer is not None:
            attrs = dict(self.attrs)
            if server.session_id:
                attrs[MCP_SESSION_ID] = server.session_id
            self.span = tracer.start_span(
                method, context=trace.set_span_in_context(call.span), kind=SpanKind.CLIENT, attributes=attrs
            )

    def finish(
        self, outcome: McpOutcome, *, protocol_version: str | None = None, session_id: str | None = None
    ) -> None:
        """End the span (ERROR when the request failed) and record the duration."""
        duration = time.perf_counter() - self.start
        attrs = {**self.attrs, **outcome.attributes()}
        if protocol_version:
            attrs[MCP_PROTOCOL_VERSION] = protocol_version
        span = self.span
        if span is not None:
            try:
                if span.is_recording():
                    span.set_attributes(attrs)
                    if outcome.request_id is not None:
                        span.set_attribute(JSONRPC_REQUEST_ID, outcome.request_id)
                    if session_id:
                        span.set_attribute(MCP_SESSION_ID, session_id)
                    if outcome.error_type is not None:
                        span.set_status(Status(StatusCode.ERROR))
            finally:
                span.end()
        instruments = self.instruments
        if instruments is not None and instruments.enabled:
            instruments.operation_duration.record(duration, attrs)


class McpSessionClock:
    """One handshake-era session (an ``Mcp-Session-Id``), from its ``initialize`` to its
    replacement by a reconnect or to ``close()``, for ``mcp.client.session.duration``.

    Recorded by the meter of the ``OtelHooks`` whose ``execute_tool`` first used the session
    (``claim``); a session no traced call used is recorded by none."""

    __slots__ = ("attrs", "ended", "instruments", "start")

    def __init__(self, server: McpServer) -> None:
        self.start = time.perf_counter()
        self.attrs = _endpoint_attributes(server)
        self.instruments: McpInstruments | None = None
        self.ended = False

    def claim(self, instruments: McpInstruments | None) -> None:
        if self.instruments is None:
            self.instruments = instruments

    def end(self, error_type: str | None = None) -> None:
        """The session is over (``error_type``: the failure that made the client replace it)."""
        if self.ended:
            return
        self.ended = True
        instruments = self.instruments
        if instruments is None or not instruments.enabled:
            return
        attrs = dict(self.attrs)
        if error_type is not None:
            attrs[ERROR_TYPE] = error_type
        instruments.session_duration.record(time.perf_counter() - self.start, attrs)


_CALL_ERRORS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""``execute_tool`` span -> the ``error.type`` its MCP call ended with, which its result's
``tool_error`` must not replace."""


def call_error_type(span: Span) -> str | None:
    """The ``error.type`` the MCP call under ``span`` ended with, if it was one. Never raises."""
    try:
        return _CALL_ERRORS.get(span)
    except TypeError:
        return None


_TOOL_SPANS: weakref.WeakKeyDictionary[Any, McpSettings] = weakref.WeakKeyDictionary()
"""Each live ``execute_tool`` span -> the MCP settings of the ``OtelHooks`` that started it, so a
call the MCP client makes under that span is measured and propagated by that instance's options."""


def note_tool_span(span: Span, settings: McpSettings) -> None:
    """Remember which options own ``span`` (an ``execute_tool`` span). Never raises."""
    with contextlib.suppress(TypeError):  # a span class that cannot be weakly referenced: untraced
        _TOOL_SPANS[span] = settings


def settings_of(span: Span) -> McpSettings | None:
    """The settings noted for ``span``; None when no ``OtelHooks`` of this process started it."""
    try:
        return _TOOL_SPANS.get(span)
    except TypeError:
        return None


__all__ = [
    "MCP_CLIENT_OPERATION_DURATION",
    "MCP_CLIENT_SESSION_DURATION",
    "McpInstruments",
    "McpOutcome",
    "McpPropagation",
    "McpRequest",
    "McpServer",
    "McpSessionClock",
    "McpSettings",
    "McpToolCall",
    "call_error_type",
    "headers_with",
    "meta_with",
    "note_tool_span",
    "settings_of",
    "trace_fields",
]
