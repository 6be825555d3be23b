"""How failures and early ends show up on spans.

Two rules meet here. The semantic conventions want ``error.type`` plus an ERROR status whose
description is the exception message. Our redaction promise wants no content in a trace unless
content capture is on, and exception messages routinely carry content (a tool's error text, a
provider's echo of the prompt). So the message is recorded only when capture is on; with it
off the span still says *that* and *what type of* error happened.

A third rule overrides the first: an exception raised inside one of the app's hooks is recorded
without its message or stack trace even with capture on. A redaction hook that gives up
(``ValueError(f"cannot scrub {value}")``, or Python's own ``int("4111 ...")``) holds the very
value it was redacting, which no hook finished with: unredacted content. The adapters name the
functions in whose frames they run the app's hooks (``hook_boundary``); an exception whose
traceback, or that of any exception chained to it, passes through one of them was raised in a
hook (``_raised_in_hook``; one it cannot tell about counts as raised in a hook). Its span keeps
``error.type``, the ERROR status with a fixed description (``HOOK_RAISED``), and an
``exception`` event naming the hook and where it raised.

Everything here reads user-controlled exceptions (``__str__`` may raise, a traceback may be
odd), so every read goes through ``safety``: recording a failure never fails itself.
"""

from __future__ import annotations

import asyncio
import builtins
import traceback
from collections.abc import Callable
from types import CodeType, TracebackType
from typing import Any, Final

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import semconv
from .provider_errors import classify_provider_error
from .safety import safe_str, utf8_safe

HOOK_RAISED: Final = "raised in a hook (message withheld: it may hold the unredacted value)"
"""The status description of a span failed by an exception raised inside an app's hook."""

EXCEPTION_LOCATION: Final = "flowra.exception.location"
"""On an ``exception`` event whose message is withheld: ``file:line in function`` of the raise."""
EXCEPTION_HOOK: Final = "flowra.exception.hook"
"""On the ``exception`` event of an exception raised in a hook: the hook, ``module.Qualname``
(the ledger's name for it)."""

_HOOK_BOUNDARIES: Final[set[CodeType]] = set()
_MAX_CHAINED: Final = 32
"""Exceptions of a chain (``__cause__``, ``__context__``, a group's members) looked at, at most."""
_MAX_FRAMES: Final = 1000
"""Traceback entries looked at per exception, at most (bounded work whatever the input)."""
_PLUMBING: Final = ("flowra.", "flowra_otel.")


def hook_boundary(*functions: Callable[..., Any]) -> None:
    """Name the functions (an adapter's) in whose frames the app's hooks run: an exception
    whose traceback passes through one of them was raised in a hook (``_raised_in_hook``)."""
    for function in functions:
        _HOOK_BOUNDARIES.add(function.__code__)


_UNKNOWN_HOOK: Final = object()
"""``_raised_in_hook``'s answer when it cannot tell (a chain or traceback past its bounds, or one
that fails to read): taken as raised in a hook, so the message is withheld (fail closed)."""


def _raised_in_hook(exc: BaseException) -> TracebackType | object | None:
    """Whether ``exc``, or an exception chained to it (``__cause__``, ``__context__``, a group's
    members), left one of the app's hooks: the traceback entry just below the boundary it passed
    (where the hook's frames start), ``_UNKNOWN_HOOK`` when it cannot tell, None when not.
    Never raises; bounded work."""
    try:
        pending: list[BaseException] = [exc]
        seen: set[int] = set()
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            if len(seen) >= _MAX_CHAINED:
                return _UNKNOWN_HOOK
            seen.add(id(current))
            tb = current.__traceback__
            for _ in range(_MAX_FRAMES):
                if tb is None:
                    break
                if tb.tb_frame.f_code in _HOOK_BOUNDARIES:
                    return tb.tb_next if tb.tb_next is not None else _UNKNOWN_HOOK
                tb = tb.tb_next
            else:
                return _UNKNOWN_HOOK
            pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
            if isinstance(current, BaseExceptionGroup):
                pending.extend(current.exceptions)
    except Exception:
        return _UNKNOWN_HOOK
    return None


def _hook_name(below: TracebackType | object) -> str:
    """The app's hook that raised: the first frame below the boundary that is not flowra's or
    ours (flowra's wrapper of an agent-scoped handler), as ``module.Qualname``."""
    if not isinstance(below, TracebackType):
        return ""
    try:
        tb: TracebackType | None = below
        for _ in range(_MAX_FRAMES):
            if tb is None:
                break
            code = tb.tb_frame.f_code
            module = str(tb.tb_frame.f_globals.get("__name__", "") or "")
            if code not in _HOOK_BOUNDARIES and not (module + ".").startswith(_PLUMBING):
                return utf8_safe(f"{module}.{code.co_qualname}" if module else code.co_qualname)
            tb = tb.tb_next
    except Exception:
        return ""
    return ""


def error_type_of(exc: BaseException) -> str:
    """``error.type`` for an exception: builtins by bare name, others fully qualified.

    Matches what ``exception.type`` carries, so a backend can join the two.
    """
    cls = type(exc)
    name = str(getattr(cls, "__qualname__", cls.__name__))
    module = str(getattr(cls, "__module__", "") or "")
    if module == "builtins" or getattr(builtins, cls.__name__, None) is cls:
        return utf8_safe(name)
    return utf8_safe(f"{module}.{name}" if module else name)


def end_error_type(error: BaseException | None, reason: str | None) -> str | None:
    """The ``error.type`` a span ending this way carries (and its duration metric), if any."""
    if error is not None:
        return error_type_of(error)
    if reason == semconv.END_ERROR:
        return semconv.ERROR_TYPE_OTHER
    return None


def end_metric_error(
    error: BaseException | None, reason: str | None, *, classify: bool
) -> dict[str, AttributeValue] | None:
    """The error attributes of a duration metric: ``error.type`` and, for LLM calls and agents
    (``classify``), the failure's kind, retryability and HTTP status (low-cardinality only)."""
    etype = end_error_type(error, reason)
    if etype is None:
        return None
    attrs: dict[str, AttributeValue] = {semconv.ERROR_TYPE: etype}
    if classify and error is not None and not isinstance(error, asyncio.CancelledError):
        attrs.update(classify_provider_error(error).metric_attributes())
    return attrs


def record_end(
    span: Span,
    *,
    error: BaseException | None,
    reason: str | None,
    render: Callable[[str], str] | None,
    classify: bool = False,
) -> None:
    """Say on ``span`` how it ended.

    ``reason`` (``flowra.end_reason``) is set whenever a span ends other than by its own
    event: interrupted (a requested stop, status left unset), cancelled or timed out (ERROR,
    with the exception), error (ERROR), or run_ended (the run returned around it).
    ``render`` is the content choke point when capture is on, None when off. ``classify``
    (LLM calls and agents) adds the provider-failure classification (``provider_errors``).
    """
    if not span.is_recording():
        return
    if reason is not None:
        span.set_attribute(semconv.FLOWRA_END_REASON, reason)
    if error is not None:
        record_error(span, error, render=render)
        if classify and not isinstance(error, asyncio.CancelledError):
            # What kind of failure (rate limit, auth, outage...), never its message.
            span.set_attributes(classify_provider_error(error).attributes())
    elif reason == semconv.END_ERROR:
        span.set_attribute(semconv.ERROR_TYPE, semconv.ERROR_TYPE_OTHER)
        span.set_status(Status(StatusCode.ERROR))


def record_error(span: Span, exc: BaseException, *, render: Callable[[str], str] | None) -> None:
    """Mark ``span`` failed by ``exc``: ``error.type``, an ``exception`` event, ERROR status."""
    etype = error_type_of(exc)
    span.set_attribute(semconv.ERROR_TYPE, etype)
    attrs: dict[str, AttributeValue] = {"exception.type": etype}
    below = _raised_in_hook(exc)
    if below is not None:
        # Raised in a hook: its message and stack trace may hold the value the hook never
        # finished redacting, capture on or off. The type, the hook and the place only.
        hook = _hook_name(below)
        if hook:
            attrs[EXCEPTION_HOOK] = hook
        where = _location(exc)
        if where:
            attrs[EXCEPTION_LOCATION] = where
        span.add_event("exception", attrs)
        span.set_status(Status(StatusCode.ERROR, HOOK_RAISED))
        return
    if render is not None:
        message = render(safe_str(exc))
        attrs["exception.message"] = message
        attrs["exception.stacktrace"] = render(_stacktrace(exc))
        span.add_event("exception", attrs)
        span.set_status(Status(StatusCode.ERROR, message or etype))
        return
    # The exception event without exception.message or a stack trace (its last line repeats
    # the message): the type and where it was raised, never what it said.
    where = _location(exc)
    if where:
        attrs[EXCEPTION_LOCATION] = where
    span.add_event("exception", attrs)
    span.set_status(Status(StatusCode.ERROR))


def _stacktrace(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(exc))
    except Exception:
        return f"{error_type_of(exc)} (traceback unavailable)"


def _location(exc: BaseException) -> str:
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except Exception:
        return ""
    if not frames:
        return ""
    last = frames[-1]
    return utf8_safe(f"{last.filename}:{last.lineno} in {last.name}")
