"""Tool calls flowra's own MCP client sends (``flowra.tools.McpConnection.call_tool``): the MCP
attributes on their ``execute_tool`` span, ``mcp.client.operation.duration``, the span's W3C
context in ``params._meta`` and in the call's HTTP headers so the server continues the agent's
trace (core/mcp_invocation.py),
each request's outcome classified per the conventions' MCP page, the requests a reconnect sends
inside the call as CLIENT spans, and ``mcp.client.session.duration``.

Why a patch of ``call_tool`` and not a hook: no flowra event says a tool is served over MCP, nor
by which server; ``call_tool`` is where the URL, the negotiated protocol version and session are
known, and it runs in the tool's own task, under the ``execute_tool`` span the tracing made
current there. Nothing is attached or detached here: the context is read, never made current.

Why also flowra's private JSON-RPC request functions (``__jsonrpc_post`` / ``__jsonrpc_notify``):
``call_tool`` turns a JSON-RPC error, an HTTP error, a server that is down and an ``isError``
result all into the same ``ToolResult(is_error=True)``; only the request function sees which it
was, the request's ``id``, and the ``initialize`` that starts a session. The call's record goes
down to it in a context variable the ``call_tool`` wrapper sets and resets in its own task (the
request functions run in that task; flowra's background tool refresh runs in a task of its own
and so is never taken for a call). Their shape is verified once (``requests_shape_missing``); on
a flowra whose shape differs, only ``call_tool`` is wrapped and a failed call reads
``tool_error``, as before.

The patch is process-wide and owned, like ``emit_patch``: ``install(owner)`` / ``uninstall(owner)``
with a weak set of owners, so ``FlowraInstrumentor().uninstrument()`` never switches off the MCP
tracing of an ``OtelHooks`` the app installed itself. A call made outside an ``execute_tool``
span of an ``OtelHooks`` (the app calling ``call_tool`` itself) goes through untouched: what to
send then is the app's own choice.

Flowra facts, read once here (this module is the only one that touches the MCP client):
``call_tool`` takes ``meta`` (``params._meta``) and ``headers`` (the call's HTTP request) from
0.0.79; before that (0.0.47 - 0.0.78) the client has no way to send ``_meta`` or headers, so those
calls get the attributes and the metric but carry no context. The request functions' third
argument is the session: its id (a string or None) on 0.0.47 - 0.0.76, which speak only the
handshake era, and an ``McpSession`` (era, protocol version, session id) from 0.0.77, which added
the stateless era.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import logging
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any, Final

from opentelemetry.trace import get_current_span

from ...core.errors import error_type_of
from ...core.mcp_invocation import (
    McpOutcome,
    McpRequest,
    McpServer,
    McpSessionClock,
    McpToolCall,
    headers_with,
    meta_with,
    settings_of,
    trace_fields,
)
from ...core.safety import internal_error
from . import run_timeout

logger = logging.getLogger("flowra_otel")

_McpConnection: Any
try:
    from flowra.tools import mcp_connection as _mcp_connection

    _McpConnection = _mcp_connection.McpConnection
except (ImportError, AttributeError):  # a release without flowra's MCP client
    _McpConnection = None

_POST: Final = "_McpConnection__jsonrpc_post"
_NOTIFY: Final = "_McpConnection__jsonrpc_notify"
_CLIENT: Final = "_McpConnection__client"
_INITIALIZE: Final = "initialize"
_TOOLS_CALL: Final = "tools/call"
_ERROR_OTHER: Final = "_OTHER"


def _call_takes(parameter: str) -> bool:
    if _McpConnection is None:
        return False
    try:
        return parameter in inspect.signature(_McpConnection.call_tool).parameters
    except (TypeError, ValueError):
        return False


_REQUEST_SHAPES: Final[dict[str, list[str | None]]] = {
    # the leading parameters read by position (None: any name; the session was ``session_id`` on 0.0.47 - 0.0.76)
    _POST: ["cls", "client", "url", None, "method", "params"],
    _NOTIFY: ["cls", "client", "url", None, "method"],
}


def requests_shape_missing() -> list[str]:
    """What of the private request path the wrappers read this flowra lacks (empty: all there):
    ``__jsonrpc_post(client, url, session, method, params, ...)`` and ``__jsonrpc_notify(client,
    url, session, method)`` as async classmethods, the ``__client`` slot, an async ``close``."""
    if _McpConnection is None:
        return ["McpConnection"]
    missing: list[str] = []
    for attr, shape in _REQUEST_SHAPES.items():
        member = _McpConnection.__dict__.get(attr)
        func = getattr(member, "__func__", None)
        ok = isinstance(member, classmethod) and inspect.iscoroutinefunction(func)
        if ok:
            try:
                names = list(inspect.signature(func).parameters)[: len(shape)]  # type: ignore[arg-type]
            except (TypeError, ValueError):
                names = []
            ok = len(names) == len(shape) and all(want in (None, got) for want, got in zip(shape, names, strict=True))
        if not ok:
            missing.append(attr.removeprefix("_McpConnection"))
    if not isinstance(_McpConnection.__dict__.get(_CLIENT), types.MemberDescriptorType):
        missing.append("__client")
    if not inspect.iscoroutinefunction(_McpConnection.__dict__.get("close")):
        missing.append("close")
    return missing


HAS_MCP_CLIENT: Final = _McpConnection is not None
"""flowra ships ``flowra.tools.mcp_connection.McpConnection`` (0.0.47 and later)."""
CALL_TAKES_META: Final = _call_takes("meta")
"""``call_tool(..., meta=)`` puts ``meta`` into ``params._meta`` (0.0.79 and later)."""
CALL_TAKES_HEADERS: Final = _call_takes("headers")
"""``call_tool(..., headers=)`` adds ``headers`` to the call's HTTP request (0.0.79 and later)."""
REQUESTS_OBSERVABLE: Final = HAS_MCP_CLIENT and not requests_shape_missing()
"""The private request path is the shape the wrappers read: requests are classified one by one."""

_CALL: Final[contextvars.ContextVar[McpToolCall | None]] = contextvars.ContextVar("flowra_otel_mcp_call", default=None)
"""The traced ``call_tool`` running in this task, for the requests it sends (set and reset by the
``call_tool`` wrapper in its own task)."""


class _ClientState:
    """What is known of the session a connection's httpx client carries (per client, weakly)."""

    __slots__ = ("failure", "session", "version")

    def __init__(self) -> None:
        self.session: McpSessionClock | None = None
        self.failure: str | None = None  # the last request failure: what ends a session a reconnect replaces
        self.version: str | None = None  # negotiated by the last initialize (0.0.47 - 0.0.76 keep it nowhere)


def _state_of(client: Any) -> _ClientState | None:
    try:
        return _CLIENTS.get(client)
    except TypeError:  # not weakly referable: nothing known
        return None


_CLIENTS: Final[weakref.WeakKeyDictionary[Any, _ClientState]] = weakref.WeakKeyDictionary()
"""The connection's httpx client -> its session state. ``McpConnection`` has ``__slots__`` without
``__weakref__``; its client (owned by the connection alone, handed to the request functions) is
weakly referable, so the state goes when the connection does."""


def _server_of(connection: Any) -> McpServer:
    """URL, protocol version and session id as the connection knows them now."""
    url = getattr(connection, "_McpConnection__url", "") or ""
    session = getattr(connection, "session", None)
    if session is not None:
        version = getattr(session, "protocol_version", None)
        session_id = getattr(session, "session_id", None)
    else:  # before the McpSession object: the handshake era only
        state = _state_of(getattr(connection, _CLIENT, None))
        version = state.version if state is not None else None  # what its initialize answered
        session_id = getattr(connection, "_McpConnection__session_id", None)
    return McpServer(
        str(url),
        version if isinstance(version, str) else None,
        session_id if isinstance(session_id, str) and session_id else None,
    )


def _session_arg(session: Any) -> tuple[str | None, str | None]:
    """(protocol version, session id) of the request functions' session argument."""
    if session is None or isinstance(session, str):  # 0.0.47 - 0.0.76: the session id itself
        return None, session or None
    version = getattr(session, "protocol_version", None)
    session_id = getattr(session, "session_id", None)
    return (
        version if isinstance(version, str) else None,
        session_id if isinstance(session_id, str) and session_id else None,
    )


def _begin(connection: Any, name: Any, kwargs: dict[str, Any]) -> McpToolCall | None:
    """The call's record, and the trace context added to ``kwargs['meta']`` and
    ``kwargs['headers']``; None: untraced. One decision (``trace_fields``) for both."""
    span = get_current_span()
    settings = settings_of(span)
    if settings is None:
        return None
    server = _server_of(connection)
    call = McpToolCall(span, server, str(name), settings)
    fields = trace_fields(span, settings.propagation, server.url) if CALL_TAKES_META or CALL_TAKES_HEADERS else {}
    if fields and CALL_TAKES_META:
        kwargs["meta"] = meta_with(kwargs.get("meta") or {}, fields)
    if fields and CALL_TAKES_HEADERS:
        kwargs["headers"] = headers_with(kwargs.get("headers") or {}, fields)
    return call


async def _call_tool(self: Any, name: Any, arguments: Any = None, **kwargs: Any) -> Any:
    original = _originals["call_tool"]
    call: McpToolCall | None = None
    sent = dict(kwargs)
    try:
        call = _begin(self, name, sent)
    except Exception:
        internal_error("flowra_otel: internal error preparing an MCP tool call; the call is unaffected")
        call, sent = None, kwargs
    if call is None:
        return await original(self, name, arguments, **kwargs)
    token = _CALL.set(call)
    try:
        result = await original(self, name, arguments, **sent)
    except BaseException as exc:
        _finish(call, error=run_timeout.as_timeout(exc))  # the run's timeout, not a bare cancellation
        raise
    finally:
        _CALL.reset(token)
    _finish(call, tool_error=getattr(result, "is_error", False) is True)
    return result


def _finish(call: McpToolCall, *, tool_error: bool = False, error: BaseException | None = None) -> None:
    try:
        call.finish(tool_error=tool_error, error=error)
    except Exception:
        internal_error("flowra_otel: internal error recording an MCP tool call; the call is unaffected")


# ------------------------------------------------------------------ the requests a call sends


def _id_text(value: Any) -> str | None:
    """``jsonrpc.request.id``: a string or number id as a string (none for null or omitted)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return str(value)


def _answer_outcome(body: Any) -> McpOutcome:
    """The outcome of a request the server answered with a JSON-RPC response ``body``. Reads the
    ``id``, the error ``code`` and ``isError``; never a message or a result's content."""
    if not isinstance(body, dict):
        return McpOutcome(error_type=_ERROR_OTHER)
    request_id = _id_text(body.get("id"))
    error = body.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        if isinstance(code, int) and not isinstance(code, bool):
            return McpOutcome(request_id, str(code), str(code))
        return McpOutcome(request_id, _ERROR_OTHER)
    result = body.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return McpOutcome(request_id, "tool_error")
    return McpOutcome(request_id)


def _request_id_sent(exc: BaseException) -> str | None:
    """The ``id`` of the request an httpx error is about (read from its body, nothing else kept)."""
    try:
        request = exc.request  # type: ignore[attr-defined]
        body = json.loads(request.content)
    except Exception:
        return None
    return _id_text(body.get("id")) if isinstance(body, dict) else None


def _failure_outcome(exc: BaseException) -> McpOutcome:
    """The outcome of a request that raised: a JSON-RPC error in an HTTP error response (the
    stateless era answers errors with 400 / 404) by its code, another HTTP error by its status
    (``"500"``), anything else by its exception type."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if response is not None and isinstance(status, int):
        try:
            body = response.json()
        except Exception:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            outcome = _answer_outcome(body)
            if outcome.status_code is not None:
                return McpOutcome(outcome.request_id or _request_id_sent(exc), outcome.error_type, outcome.status_code)
        return McpOutcome(_request_id_sent(exc), str(status))
    return McpOutcome(_request_id_sent(exc), error_type_of(exc))


class _Request:
    """One request or notification flowra's client sends, as the wrappers see it."""

    __slots__ = ("call", "client", "method", "span", "url", "version")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        def arg(index: int, name: str) -> Any:
            return args[index] if len(args) > index else kwargs.get(name)

        self.client = arg(0, "client")
        self.url = str(arg(1, "url") or "")
        self.version, session_id = _session_arg(arg(2, "session"))
        if self.version is None and (state := _state_of(self.client)) is not None:
            self.version = state.version
        self.method = str(arg(3, "method"))
        self.call = _CALL.get()
        self.span: McpRequest | None = None
        if self.call is not None and self.method != _TOOLS_CALL:
            self.span = McpRequest(self.call, self.method, McpServer(self.url, self.version, session_id))

    def failed(self, exc: BaseException) -> None:
        outcome = _failure_outcome(exc)
        state = _state_of(self.client)
        if state is not None:
            state.failure = outcome.error_type
        self._done(outcome, None)

    def answered(self, result: Any) -> None:
        session_id, body = result if isinstance(result, tuple) and len(result) == 2 else (None, None)
        session_id = session_id if isinstance(session_id, str) and session_id else None
        outcome = _answer_outcome(body) if body is not None else McpOutcome()
        version = self.version
        if self.method == _INITIALIZE and outcome.error_type is None:
            result = body.get("result") if isinstance(body, dict) else None
            negotiated = result.get("protocolVersion") if isinstance(result, dict) else None
            version = negotiated if isinstance(negotiated, str) else version
            self._state().version = version
            if session_id is not None:  # a handshake-era session begins (none in the stateless era)
                self._session_begins(McpServer(self.url, version, session_id))
        self._done(outcome, session_id, version)

    def _state(self) -> _ClientState:
        state = _state_of(self.client)
        if state is None:
            state = _ClientState()
            with contextlib.suppress(TypeError):  # a client that cannot be weakly referenced: kept nowhere
                _CLIENTS[self.client] = state
        return state

    def _session_begins(self, server: McpServer) -> None:
        state = self._state()
        if state.session is not None:
            state.session.end(state.failure)  # replaced by a reconnect: ended by the last failure
        state.session = McpSessionClock(server)
        state.failure = None

    def _done(self, outcome: McpOutcome, session_id: str | None, version: str | None = None) -> None:
        call = self.call
        if call is None:
            return
        if self.span is not None:
            self.span.finish(outcome, protocol_version=version, session_id=session_id)
            if self.method == _INITIALIZE:
                self._claim(call)
        elif self.method == _TOOLS_CALL:
            call.attempt(outcome, session_id)
            self._claim(call)

    def _claim(self, call: McpToolCall) -> None:
        state = _state_of(self.client)
        if state is not None and state.session is not None:
            state.session.claim(call.instruments)


def _observe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Request | None:
    try:
        return _Request(args, kwargs)
    except Exception:
        internal_error("flowra_otel: internal error observing an MCP request; the request is unaffected")
        return None


def _settle(request: _Request, how: Callable[[Any], None], what: Any) -> None:
    try:
        how(what)
    except Exception:
        internal_error("flowra_otel: internal error recording an MCP request; the request is unaffected")
        span = request.span.span if request.span is not None else None
        if span is not None and span.is_recording():
            span.end()  # every span we start ends, even when recording it failed


async def _observed(name: str, answer_of: Callable[[Any], Any], cls: Any, args: Any, kwargs: Any) -> Any:
    """flowra's request function ``name``, observed: its outcome recorded (``answer_of`` turns
    what it returned into the ``(session id, response)`` pair the record reads)."""
    original = _originals[name]
    request = _observe(args, kwargs)
    if request is None:
        return await original(cls, *args, **kwargs)
    try:
        result = await original(cls, *args, **kwargs)
    except BaseException as exc:
        _settle(request, request.failed, exc)
        raise
    _settle(request, request.answered, answer_of(result))
    return result


async def _post(cls: Any, *args: Any, **kwargs: Any) -> Any:
    return await _observed(_POST, lambda result: result, cls, args, kwargs)


async def _notify(cls: Any, *args: Any, **kwargs: Any) -> Any:
    return await _observed(_NOTIFY, lambda _: (None, None), cls, args, kwargs)  # a notification: no answer


async def _close(self: Any) -> Any:
    try:
        state = _CLIENTS.pop(getattr(self, _CLIENT, None), None)
        if state is not None and state.session is not None:
            state.session.end()
    except Exception:
        internal_error("flowra_otel: internal error ending an MCP session; the connection still closes")
    return await _originals["close"](self)


# ------------------------------------------------------------------ the owned patch

_lock = threading.Lock()
_originals: dict[str, Any] = {}
"""The functions flowra had before the patch (``call_tool``, and the request path when observable)."""
_owners: Final[weakref.WeakSet[Any]] = weakref.WeakSet()
"""Who needs the patch (the adapters: the app's ``OtelHooks`` and the zero-code instrumentor's)."""


def _wrap(name: str, wrapper: Callable[..., Any], *, is_classmethod: bool = False) -> None:
    current = _McpConnection.__dict__[name]
    function = current.__func__ if is_classmethod else current
    _originals[name] = function

    async def patched(*args: Any, **kwargs: Any) -> Any:
        return await wrapper(*args, **kwargs)

    patched.__doc__ = function.__doc__
    patched.__name__ = function.__name__
    patched.__qualname__ = function.__qualname__
    patched.__wrapped__ = function  # type: ignore[attr-defined]
    setattr(_McpConnection, name, classmethod(patched) if is_classmethod else patched)


def install(owner: object | None = None) -> None:
    """Wrap ``McpConnection.call_tool`` (and the request path, when its shape is the one read)
    once per process, held for ``owner`` until ``uninstall(owner)``. No-op without flowra's MCP
    client."""
    if _McpConnection is None:
        return
    with _lock:
        if owner is not None:
            _owners.add(owner)
        if _originals:
            return
        _wrap("call_tool", _call_tool)
        if REQUESTS_OBSERVABLE:
            _wrap(_POST, _post, is_classmethod=True)
            _wrap(_NOTIFY, _notify, is_classmethod=True)
            _wrap("close", _close)
        else:
            logger.debug("flowra_otel: MCP requests not observable here (%s)", ", ".join(requests_shape_missing()))


def uninstall(owner: object | None = None) -> None:
    """``owner`` no longer needs the patch: flowra's own functions are put back once no live
    owner does. None: every owner lets go (tests that need flowra's own client)."""
    if _McpConnection is None:
        return
    with _lock:
        if owner is None:
            _owners.clear()
        else:
            _owners.discard(owner)
        if _originals and not _owners:
            for name, function in _originals.items():
                setattr(_McpConnection, name, classmethod(function) if name in (_POST, _NOTIFY) else function)
            _originals.clear()


def installed() -> bool:
    return bool(_originals)


__all__ = [
    "CALL_TAKES_HEADERS",
    "CALL_TAKES_META",
    "HAS_MCP_CLIENT",
    "REQUESTS_OBSERVABLE",
    "install",
    "installed",
    "requests_shape_missing",
    "uninstall",
]
