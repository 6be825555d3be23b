"""Which cancellation is the runtime's timeout: ``AgentRuntime.run(..., timeout=)`` (or the
runtime's own ``timeout``) on flowra 0.0.56 - 0.0.93.

Why: flowra enforces that timeout with ``asyncio.wait_for`` around its run loop, so when it
expires every span still open ends by a plain ``CancelledError`` (the same as a task the app
cancelled), and only the caller sees the ``TimeoutError``. The spans should say what happened:
``error.type`` = ``TimeoutError`` and ``flowra.end_reason`` = ``timed_out``, as on flowra 0.0.3 -
0.0.8 and as the caller sees it.

How: the run loop (``AgentRuntime.__run_loop(root, *, max_iterations, timeout)``, private; this
module is the only one that touches it) is wrapped once per process, owned like the emit patch;
the wrapper puts the run's deadline (the event loop's clock) in a context variable before the
loop starts, so every task flowra starts for the run's steps inherits it. A ``CancelledError``
that ends a span once that deadline has passed is the timeout (``timed_out``); any other is a
cancellation. Nothing is attached or detached: the variable is set and reset in the run's own
task. On a flowra whose run loop has another shape, nothing is wrapped and a timeout reads as a
cancellation, as before.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import weakref
from typing import Any, Final

from flowra.agent import AgentRuntime

from ...core.safety import internal_error

_RUN_LOOP: Final = "_AgentRuntime__run_loop"
_CLOCK_SLACK_S: Final = 0.01
"""asyncio fires a timer up to its clock resolution early: a cancellation this close to the
deadline is the timeout's."""

_DEADLINE: Final[contextvars.ContextVar[float | None]] = contextvars.ContextVar(
    "flowra_otel_run_deadline", default=None
)
"""The running run's deadline on the event loop's clock (set in the run's task, inherited by its steps)."""


def _shape_ok() -> bool:
    function = AgentRuntime.__dict__.get(_RUN_LOOP)
    if not inspect.iscoroutinefunction(function):
        return False
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    timeout = parameters.get("timeout")
    return timeout is not None and timeout.kind is inspect.Parameter.KEYWORD_ONLY


OBSERVABLE: Final = _shape_ok()
"""This flowra's run loop takes ``timeout`` by keyword: the deadline can be known."""


def as_timeout(error: BaseException) -> BaseException:
    """``error``, or a ``TimeoutError`` when it is the cancellation by which the run's timeout
    stopped it (the run's deadline has passed). Never raises."""
    if not isinstance(error, asyncio.CancelledError):
        return error
    try:
        deadline = _DEADLINE.get()
        if deadline is not None and asyncio.get_running_loop().time() >= deadline - _CLOCK_SLACK_S:
            return TimeoutError()
    except Exception:  # no running loop, or an odd value: a cancellation it stays
        return error
    return error


async def _run_loop(self: Any, root: Any, *args: Any, **kwargs: Any) -> Any:
    original = _original[0]
    token = None
    try:
        timeout = kwargs.get("timeout")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool):
            token = _DEADLINE.set(asyncio.get_running_loop().time() + float(timeout))
    except Exception:
        internal_error("flowra_otel: could not note a run's timeout; the run is unaffected")
    try:
        return await original(self, root, *args, **kwargs)
    finally:
        if token is not None:
            _DEADLINE.reset(token)


_lock = threading.Lock()
_original: list[Any] = []
_owners: Final[weakref.WeakSet[Any]] = weakref.WeakSet()


def install(owner: object) -> None:
    """Wrap the run loop once per process, held for ``owner`` until ``uninstall(owner)``."""
    if not OBSERVABLE:
        return
    with _lock:
        _owners.add(owner)
        if _original:
            return
        function = AgentRuntime.__dict__[_RUN_LOOP]
        _original.append(function)

        async def patched(self: Any, root: Any, *args: Any, **kwargs: Any) -> Any:
            return await _run_loop(self, root, *args, **kwargs)

        patched.__doc__ = function.__doc__
        patched.__name__ = function.__name__
        patched.__qualname__ = function.__qualname__
        patched.__wrapped__ = function  # type: ignore[attr-defined]
        setattr(AgentRuntime, _RUN_LOOP, patched)


def uninstall(owner: object | None = None) -> None:
    """``owner`` no longer needs the wrapper: flowra's own run loop is put back once no live owner
    does (None: every owner lets go)."""
    with _lock:
        if owner is None:
            _owners.clear()
        else:
            _owners.discard(owner)
        if _original and not _owners:
            setattr(AgentRuntime, _RUN_LOOP, _original.pop())


def installed() -> bool:
    return bool(_original)


__all__ = ["OBSERVABLE", "as_timeout", "install", "installed", "uninstall"]
