"""Tool calls flowra's own MCP client sends (``flowra.tools.McpConnection.call_tool``): the MCP
attributes on their ``execute_tool`` span, ``mcp.client.operation.duration``, and the span's W3C
context in ``params._meta`` so the server continues the agent's trace (core/mcp_invocation.py).

Why a patch of ``call_tool`` and not a hook: no flowra event says a tool is served over MCP, nor
by which server; ``call_tool`` is where the URL, the negotiated protocol version and session are
known, and it runs in the tool's own task, under the ``execute_tool`` span the tracing made
current there. Nothing is attached or detached here: the context is read, never made current.

The patch is process-wide, owned (a marker on the wrapper: installing twice wraps once) and
installed by the adapter, so only after the runtime check passed. A call made outside an
``execute_tool`` span of an ``OtelHooks`` (the app calling ``call_tool`` itself) goes through
untouched: what to send then is the app's own choice.

Flowra facts, read once here (this module is the only one that touches the MCP client):
``call_tool`` takes ``meta`` (``params._meta``) from 0.0.79; before that (0.0.56 - 0.0.78) the
client has no way to send ``_meta``, so those calls get the attributes and the metric but carry
no context.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Final

from opentelemetry.trace import get_current_span

from ...core.mcp_invocation import McpServer, McpToolCall, settings_of, trace_meta
from ...core.safety import internal_error

logger = logging.getLogger("flowra_otel")

_McpConnection: Any
try:
    from flowra.tools import mcp_connection as _mcp_connection

    _McpConnection = _mcp_connection.McpConnection
except (ImportError, AttributeError):  # a release without flowra's MCP client
    _McpConnection = None

_MARKER: Final = "_flowra_otel_mcp"
_ORIGINAL: Final = "_flowra_otel_original"


def _takes_meta() -> bool:
    if _McpConnection is None:
        return False
    try:
        return "meta" in inspect.signature(_McpConnection.call_tool).parameters
    except (TypeError, ValueError):
        return False


HAS_MCP_CLIENT: Final = _McpConnection is not None
"""flowra ships ``flowra.tools.mcp_connection.McpConnection`` (0.0.56 and later)."""
CALL_TAKES_META: Final = _takes_meta()
"""``call_tool(..., meta=)`` puts ``meta`` into ``params._meta`` (0.0.79 and later)."""


def _server_of(connection: Any) -> McpServer:
    """URL, protocol version and session id as the connection knows them now."""
    url = getattr(connection, "_McpConnection__url", "") or ""
    session = getattr(connection, "session", None)
    if session is not None:
        version = getattr(session, "protocol_version", None)
        session_id = getattr(session, "session_id", None)
    else:  # before the McpSession object: the handshake era only
        version = None
        session_id = getattr(connection, "_McpConnection__session_id", None)
    return McpServer(
        str(url),
        version if isinstance(version, str) else None,
        session_id if isinstance(session_id, str) and session_id else None,
    )


def _begin(connection: Any, name: Any, kwargs: dict[str, Any]) -> McpToolCall | None:
    """The call's record, and the trace context added to ``kwargs['meta']``; None: untraced."""
    span = get_current_span()
    settings = settings_of(span)
    if settings is None:
        return None
    instruments, propagation = settings
    server = _server_of(connection)
    call = McpToolCall(span, server, str(name), instruments)
    if CALL_TAKES_META:
        meta = kwargs.get("meta")
        kwargs["meta"] = trace_meta(span, meta if meta is not None else {}, propagation, server.url)
    return call


async def _call_tool(self: Any, name: Any, arguments: Any = None, **kwargs: Any) -> Any:
    original = _McpConnection.__dict__["call_tool"].__dict__[_ORIGINAL]
    call: McpToolCall | None = None
    sent = dict(kwargs)
    try:
        call = _begin(self, name, sent)
    except Exception:
        internal_error("flowra_otel: internal error preparing an MCP tool call; the call is unaffected")
        call, sent = None, kwargs
    if call is None:
        return await original(self, name, arguments, **kwargs)
    try:
        result = await original(self, name, arguments, **sent)
    except BaseException as exc:
        _finish(call, error=exc)
        raise
    _finish(call, tool_error=getattr(result, "is_error", False) is True)
    return result


def _finish(call: McpToolCall, *, tool_error: bool = False, error: BaseException | None = None) -> None:
    try:
        call.finish(tool_error=tool_error, error=error)
    except Exception:
        internal_error("flowra_otel: internal error recording an MCP tool call; the call is unaffected")


def install() -> None:
    """Wrap ``McpConnection.call_tool`` once per process (no-op without flowra's MCP client)."""
    if _McpConnection is None:
        return
    current = _McpConnection.__dict__.get("call_tool")
    if current is None or getattr(current, _MARKER, False):
        return

    async def call_tool(self: Any, name: Any, arguments: Any = None, **kwargs: Any) -> Any:
        return await _call_tool(self, name, arguments, **kwargs)

    call_tool.__dict__[_MARKER] = True
    call_tool.__dict__[_ORIGINAL] = current
    call_tool.__doc__ = current.__doc__
    call_tool.__name__ = current.__name__
    call_tool.__qualname__ = current.__qualname__
    _McpConnection.call_tool = call_tool


def uninstall() -> None:
    """Put flowra's own ``call_tool`` back."""
    if _McpConnection is None:
        return
    current = _McpConnection.__dict__.get("call_tool")
    if current is not None and getattr(current, _MARKER, False):
        _McpConnection.call_tool = current.__dict__[_ORIGINAL]


__all__ = ["CALL_TAKES_META", "HAS_MCP_CLIENT", "install", "uninstall"]
