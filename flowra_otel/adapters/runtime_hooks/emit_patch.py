"""flowra's ``HooksImpl.emit``, run by the adapter for the few events it acts on after every hook.

Why: flowra (0.0.47 - 0.0.93) calls global subscriptions (``runtime.hooks.on``, where the adapter
subscribes) *before* agent-scoped ones and has no ``prepend``, so a handler of ours would see a
tool result before an agent's redaction hook changes it; and no event tells that all handlers ran.
For the events in ``CONTENT_EVENTS`` on a runtime this adapter traces (its marker handler is among
the event's handlers), the patched ``emit`` runs flowra's own loop itself (same ``Event``, same
handlers in the same order, same awaiting, same exceptions), skips the marker, lets the redaction
ledger watch each other handler, and then hands the event, as every handler left it, to the
tracing that owns the marker (at once, with no loop, when the marker is the event's one
handler). Every other event, and every event on a runtime this adapter does not trace, goes to
flowra's own ``emit`` untouched (straight away when nothing subscribes to it).

While the handlers of any event run (a content event or not, on any runtime), ``IN_HOOKS`` is
set: an agent run a hook starts there (a small model scrubbing a value), or in a task the hook
starts, records no content, since the value it is given may be the very one being redacted.
An exception a handler raises passes through this module's frames on its way out, which is how
its span knows it was raised in a hook and withholds its message (``core.errors.hook_boundary``).
Streaming chunks are watched here too (time to first chunk), never subscribed.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol

from ...core.errors import hook_boundary
from ...core.field_tracker import FieldTracker
from ...core.safety import guarded, internal_error
from ._flowra import (
    CONTENT_EVENTS,
    DELTA_EVENTS,
    LEDGER_FIELDS,
    SEVERAL,
    UNCHANGED_ALONE,
    Event,
    HooksImpl,
    context_of,
    emit_shape_missing,
    handlers_of,
    hook_of,
    lone_handler,
)
from .task_state import CURRENT_CHAT, IN_HOOKS

logger = logging.getLogger("flowra_otel")


class EventSink(Protocol):
    """What the patch needs of the tracing that owns a marker (``RuntimeTracing``): told once
    every handler of a content event has run, it answers whether the run's trace link must be
    saved again, which ``persist`` then does (awaited, in the agent's task)."""

    def event_done(
        self, event: Any, tracker: FieldTracker | None, start_ns: int, exc: BaseException | None
    ) -> bool: ...

    def data_done(self, data: Any, tracker: FieldTracker | None, exc: BaseException | None) -> bool: ...

    async def persist(self) -> None: ...


MARKERS: Final[set[Callable[..., Any]]] = set()
"""The unbound functions whose bound methods mark a tracing's subscription (``RuntimeTracing.on_event``)."""

_WATCHED: Final = CONTENT_EVENTS | DELTA_EVENTS
_lock = threading.Lock()
_original: list[Callable[..., Any]] = []


_owners: Final[weakref.WeakSet[Any]] = weakref.WeakSet()
"""Who needs the patch (the adapters: the app's ``OtelHooks`` and the zero-code instrumentor's).
Weak: an adapter the app dropped with its runtimes no longer holds it."""


def install(owner: object | None = None) -> None:
    """Patch ``HooksImpl.emit`` (once per process; idempotent), held for ``owner`` until
    ``uninstall(owner)``, after verifying the handler storage the patched ``emit`` reads: the
    second line of defence behind the release gate of ``flowra_otel.adapters`` (a patch on
    another storage would fail every run of the app).

    Raises:
        TypeError: this flowra's ``HooksImpl`` is not the shape the patch reads (nothing patched).
    """
    with _lock:
        if _original:
            if owner is not None:
                _owners.add(owner)
            return
        missing = emit_shape_missing()
        if missing:
            msg = (
                f"flowra_otel cannot trace this flowra: its HooksImpl lacks {', '.join(missing)} "
                "(flowra 0.0.47 - 0.0.93 expected); nothing was patched"
            )
            raise TypeError(msg)
        if owner is not None:
            _owners.add(owner)
        original = HooksImpl.__dict__["emit"]
        _original.append(original)
        HooksImpl.emit = _make_emit(original)  # type: ignore[method-assign]


def uninstall(owner: object | None = None) -> None:
    """``owner`` no longer needs the patch: flowra's own ``emit`` is put back once no live owner
    does, so ``FlowraInstrumentor().uninstrument()`` never switches off an ``OtelHooks`` the app
    installed itself. None: every owner lets go (tests that need flowra's own ``emit``)."""
    with _lock:
        if owner is None:
            _owners.clear()
        else:
            _owners.discard(owner)
        if _original and not _owners:
            HooksImpl.emit = _original.pop()  # type: ignore[method-assign]


def installed() -> bool:
    return bool(_original)


def _make_emit(original: Callable[..., Any]) -> Callable[..., Any]:
    def emit(self: Any, data: Any) -> Coroutine[Any, Any, Any]:
        cls = type(data)
        # flowra's handler storage, read as its own emit reads it (``emit_shape_missing`` verified it)
        handler = lone_handler(self, cls)
        if handler is None and cls not in DELTA_EVENTS:
            return original(self, data)  # type: ignore[no-any-return]  # no handler runs: nothing to mark
        if cls not in _WATCHED:
            if IN_HOOKS.get():  # an event emitted by a hook: marked already
                return original(self, data)  # type: ignore[no-any-return]
            return _marked(original(self, data))
        # the one handler, a global subscription (no filter of ours, it always matches): a marker?
        if handler is not SEVERAL and self._context is not None and getattr(handler, "__func__", None) in MARKERS:
            return _as_is(data) if cls in UNCHANGED_ALONE else _traced_alone(handler.__self__, data)
        return _emit_watched(self, data, original)

    emit.__doc__ = original.__doc__
    emit.__qualname__ = original.__qualname__
    emit.__wrapped__ = original  # type: ignore[attr-defined]
    return emit


async def _marked(emitting: Coroutine[Any, Any, Any]) -> Any:
    """flowra's own ``emit`` of an event, with ``IN_HOOKS`` set while its handlers run."""
    token = IN_HOOKS.set(True)
    try:
        return await emitting
    finally:
        IN_HOOKS.reset(token)


async def _as_is(data: Any) -> Any:
    """An event the tracing learns nothing from when no other handler saw it (``UNCHANGED_ALONE``)."""
    return data


async def _traced_alone(tracing: EventSink, data: Any) -> Any:
    """A content event whose one handler is a tracing's marker: no handler runs, so none can
    change it (no ``Event`` envelope, ledger or ``IN_HOOKS`` to set up); the tracing acts on it
    when it is awaited, as flowra's own ``emit`` would have run the handlers."""
    if tracing.data_done(data, None, None):
        await tracing.persist()
    return data


async def _emit_watched(hooks: Any, data: Any, original: Callable[..., Any]) -> Any:
    cls = type(data)
    if cls in DELTA_EVENTS:
        chat = CURRENT_CHAT.get()
        if chat is not None:
            guarded(chat.chunk)
        return await _marked(original(hooks, data))
    handlers = handlers_of(hooks, cls)
    tracing: EventSink | None = None
    for handler in handlers:
        if getattr(handler, "__func__", None) in MARKERS:
            tracing = getattr(handler, "__self__", None)
            break
    if tracing is None:  # not a runtime this adapter traces: flowra's own loop
        return await _marked(original(hooks, data))
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
            if tracker is not None:  # the ledger names the app's own hook, never flowra's wrapper of it
                tracker.after(getattr(data, tracker.field, None), hook_of(handler))
    except BaseException as exc:
        IN_HOOKS.reset(token)
        tracing.event_done(event, tracker, start_ns, exc)
        raise
    IN_HOOKS.reset(token)
    if tracing.event_done(event, tracker, start_ns, None):
        await tracing.persist()
    return event.data


hook_boundary(_emit_watched, _marked)
"""An exception that left these frames was raised in one of the app's hooks: its span withholds
its message and stack trace (``core.errors``), which may hold the value the hook was redacting."""


def _tracker(field: str | None, data: Any) -> FieldTracker | None:
    if field is None:
        return None
    try:
        return FieldTracker(field, getattr(data, field, None))
    except Exception:  # the ledger loses this event; the agent never notices
        internal_error("flowra_otel: could not start the redaction ledger of an event")
        return None


__all__ = ["MARKERS", "EventSink", "install", "installed", "uninstall"]
