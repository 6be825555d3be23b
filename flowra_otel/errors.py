"""How failures show up on spans.

Two rules meet here. The semantic conventions want ``error.type`` plus an ERROR status whose
description is the exception message. Our redaction promise wants no content in a trace unless
content capture is on, and exception messages routinely carry content (a tool's error text, a
provider's echo of the prompt). So the message is recorded only when capture is on; with it
off the span still says *that* and *what type of* error happened.
"""

from __future__ import annotations

import builtins
import traceback
from collections.abc import Callable

from opentelemetry.trace import Span, Status, StatusCode

from . import semconv


def error_type_of(exc: BaseException) -> str:
    """``error.type`` for an exception: builtins by bare name, others fully qualified.

    Matches what ``exception.type`` carries, so a backend can join the two.
    """
    cls = type(exc)
    if cls.__module__ == "builtins" or getattr(builtins, cls.__name__, None) is cls:
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def record_error(span: Span, exc: BaseException, *, render: Callable[[str], str] | None) -> str:
    """Mark ``span`` failed by ``exc``; returns the ``error.type`` written.

    ``render`` is the content policy's choke point when content capture is on, None when off.
    """
    etype = error_type_of(exc)
    if not span.is_recording():
        return etype
    span.set_attribute(semconv.ERROR_TYPE, etype)
    if render is not None:
        message = render(str(exc))
        span.add_event(
            "exception",
            {
                "exception.type": etype,
                "exception.message": message,
                "exception.stacktrace": render("".join(traceback.format_exception(exc))),
                "exception.escaped": True,
            },
        )
        span.set_status(Status(StatusCode.ERROR, message or etype))
    else:
        # The exception event without exception.message or a stack trace (its last line
        # repeats the message): the type and where it was raised, never what it said.
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        attrs: dict[str, str | bool] = {"exception.type": etype, "exception.escaped": True}
        if where:
            attrs["flowra.exception.location"] = where
        span.add_event("exception", attrs)
        span.set_status(Status(StatusCode.ERROR))
    return etype
