"""How failures and early ends show up on spans.

Two rules meet here. The semantic conventions want ``error.type`` plus an ERROR status whose
description is the exception message. Our redaction promise wants no content in a trace unless
content capture is on, and exception messages routinely carry content (a tool's error text, a
provider's echo of the prompt). So the message is recorded only when capture is on; with it
off the span still says *that* and *what type of* error happened.

Everything here reads user-controlled exceptions (``__str__`` may raise, a traceback may be
odd), so every read goes through ``safety``: recording a failure never fails itself.
"""

from __future__ import annotations

import asyncio
import builtins
import traceback
from collections.abc import Callable

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import semconv
from .provider_errors import classify_provider_error
from .safety import safe_str, utf8_safe


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
        attrs["flowra.exception.location"] = where
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
