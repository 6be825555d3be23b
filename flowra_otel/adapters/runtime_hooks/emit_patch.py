"""flowra's ``HooksImpl.emit``, run by the adapter for the few events it acts on after every hook.

Why: flowra 0.0.86+ calls global subscriptions (``runtime.hooks.on``, where the adapter
subscribes) *before* agent-scoped ones and has no ``prepend``, so a handler of ours would see a
tool result before an agent's redaction hook changes it; and no event tells that all handlers ran.
For the events in ``CONTENT_EVENTS`` on a runtime this adapter traces (its marker handler is among
the event's handlers), the patched ``emit`` runs flowra's own loop itself (same ``Event``, same
handlers in the same order, same awaiting, same exceptions), skips the marker, lets the redaction
ledger watch each other handler, and then hands the event, as every handler left it, to the
tracing that owns the marker. Every other event, and every event on a runtime this adapter does
not trace, goes to flowra's own ``emit`` untouched (one set lookup).

While the handlers of such an event run, ``IN_HOOKS`` is set: an agent run a hook starts there
(a small model scrubbing a value) records no content, since the value it is given may be the very
one being redacted. Streaming chunks are watched here too (time to first chunk), never subscribed.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from ...core.chat_invocation import ChatInvocation
from ...core.field_tracker import FieldTracker
from ...core.safety import guarded
from ._flowra import CONTENT_EVENTS, DELTA_EVENTS, LEDGER_FIELDS, Event, HooksImpl, context_of, handlers_of

if TYPE_CHECKING:
    from .tracing import RuntimeTracing

logger = logging.getLogger("flowra_otel")

IN_HOOKS: ContextVar[bool] = ContextVar("flowra_otel_in_hooks", default=False)
"""True while the handlers of a traced content event run (in their task, and tasks they start)."""
CURRENT_CHAT: ContextVar[ChatInvocation | None] = ContextVar("flowra_otel_current_chat", default=None)
"""The chat whose provider call runs in this task (set and reset by the LLM call's span handler)."""

MARKERS: Final[set[Callable[..., Any]]] = set()
"""The unbound functions whose bound methods mark a tracing's subscription (``RuntimeTracing.on_event``)."""

_WATCHED: Final = CONTENT_EVENTS | DELTA_EVENTS
_lock = threading.Lock()
_original: list[Callable[..., Any]] = []


def install() -> None:
    """Patch ``HooksImpl.emit`` (once per process; idempotent)."""
    with _lock:
        if _original:
            return
        original = HooksImpl.__dict__["emit"]
        _original.append(original)
        HooksImpl.emit = _make_emit(original)  # type: ignore[method-assign]


def uninstall() -> None:
    """Put flowra's own ``emit`` back."""
    with _lock:
        if _original:
            HooksImpl.emit = _original.pop()  # type: ignore[method-assign]


def installed() -> bool:
    return bool(_original)


def _make_emit(original: Callable[..., Any]) -> Callable[..., Any]:
    def emit(self: Any, data: Any) -> Coroutine[Any, Any, Any]:
        if type(data) not in _WATCHED:
            return original(self, data)  # type: ignore[no-any-return]
        return _emit_watched(self, data, original)

    emit.__doc__ = original.__doc__
    emit.__qualname__ = original.__qualname__
    emit.__wrapped__ = original  # type: ignore[attr-defined]
    return emit


async def _emit_watched(hooks: Any, data: Any, original: Callable[..., Any]) -> Any:
    cls = type(data)
    if cls in DELTA_EVENTS:
        chat = CURRENT_CHAT.get()
        if chat is not None:
            guarded(chat.chunk)
        return await original(hooks, data)
    handlers = handlers_of(hooks, cls)
    tracing: RuntimeTracing | None = None
    for handler in handlers:
        if getattr(handler, "__func__", None) in MARKERS:
            tracing = getattr(handler, "__self__", None)
            break
    if tracing is None:  # not a runtime this adapter traces: flowra's own loop
        return await original(hooks, data)
    event = Event(data=data, context=context_of(hooks))
    field = LEDGER_FIELDS.get(cls)
    tracker = _tracker(field, data)
    start_ns = time.time_ns()
    token = IN_HOOKS.set(True)
    try:
        for handler in handlers:
            if getattr(handler, "__func__", None) in MARKERS:
                continue  # a marker, never called: the tracing acts once every handler has run
            if tracker is not None:
                guarded(tracker.start)
            result = handler(event)
            if inspect.isawaitable(result):
                await result
            if tracker is not None:
                tracker.after(getattr(data, tracker.field, None), handler)
    except BaseException as exc:
        IN_HOOKS.reset(token)
        tracing.event_done(event, tracker, start_ns, exc)
        raise
    IN_HOOKS.reset(token)
    if tracing.event_done(event, tracker, start_ns, None):
        await tracing.persist()
    return event.data


def _tracker(field: str | None, data: Any) -> FieldTracker | None:
    if field is None:
        return None
    try:
        return FieldTracker(field, getattr(data, field, None))
    except Exception:  # the ledger loses this event; the agent never notices
        logger.exception("flowra_otel: could not start the redaction ledger of an event")
        return None


__all__ = ["CURRENT_CHAT", "IN_HOOKS", "MARKERS", "install", "installed", "uninstall"]
