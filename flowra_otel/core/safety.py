"""Helpers that keep the plugin from ever raising into flowra or sending the exporter a bad value.

Why one module: the plugin runs inside flowra's ``emit`` and engine steps and reads values that
users, hooks and models control (tool inputs, usage objects, exception messages, tool names). Any
comparison, conversion or ``str()`` of such a value can raise, and one lone surrogate in one
string makes the OTLP encoder drop a whole export batch. Every such operation goes through here.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import Callable
from typing import Any, Final

logger = logging.getLogger("flowra_otel")


def guarded[**P](fn: Callable[P, object], /, *args: P.args, **kwargs: P.kwargs) -> None:
    """Run ``fn``; an exception is logged and swallowed: the agent is never affected."""
    try:
        fn(*args, **kwargs)
    except Exception:
        internal_error(f"flowra_otel: internal error in {_name(fn)}; the agent is unaffected")


def internal_error(message: str, *, level: int = logging.ERROR, log: logging.Logger = logger) -> None:
    """Log the exception being handled (call it in an ``except`` block) as the plugin's own
    failure: ``message``, the exception's type and the frames it went through (file, line,
    function), never its message, its source lines or a formatted traceback. Why not
    ``logger.exception``: inside the plugin the failing value is the user's content (a
    ``KeyError`` names the key, a ``TypeError`` quotes the value), and the log must carry none."""
    exc = sys.exc_info()[1]
    log.log(level, "%s (%s)", message, failure_trail(exc) if exc is not None else "no exception")


def _name(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def changed(new: Any, old: Any) -> bool:
    """Whether a hook replaced a value: identity first, equality guarded.

    Equality of user values can raise or be ambiguous (array-likes compare element-wise); a value
    whose equality cannot be decided counts as changed, which only costs a ledger entry.
    """
    if new is old:
        return False
    try:
        return not bool(new == old)
    except Exception:
        return True


def safe_str(value: object) -> str:
    """``str(value)`` that never raises (a ``__str__`` may), UTF-8 encodable."""
    if type(value) is str and value.isascii():  # the common case, no further call
        return value
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = f"<{type(value).__qualname__}: str() failed>"
    return utf8_safe(text)


def utf8_safe(text: str) -> str:
    """Lone surrogates (``surrogateescape`` decoding, sliced emoji) cannot be encoded as UTF-8 and
    make OTLP exporters fail a whole batch: each becomes U+FFFD. ASCII text costs one C-level check.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)
    return text


_SURROGATES: Final = re.compile("[\ud800-\udfff]")


INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
"""The int range OTLP carries: a larger int attribute is dropped by the encoder, and one in a
metric exemplar fails the whole metrics export."""


def safe_int(value: object) -> int:
    """A count as an int OTLP can carry (a larger magnitude is capped to int64); anything that is
    not a finite number counts as 0."""
    if type(value) is int:
        number = value
    else:
        try:
            as_float = float(value)  # type: ignore[arg-type]
        except Exception:
            return 0
        if not math.isfinite(as_float):
            return 0
        number = int(as_float)
    if INT64_MIN <= number <= INT64_MAX:
        return number
    return INT64_MAX if number > 0 else INT64_MIN


def safe_float(value: object) -> float | None:
    """A cost as a float, or None when it is absent or not a finite number."""
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except Exception:
        return None
    return number if math.isfinite(number) else None


def _type_name(cls: type) -> str:
    """``module.Qualname`` of an exception class; a builtin's, or one that names no module, bare."""
    module = getattr(cls, "__module__", "")
    qualname = getattr(cls, "__qualname__", cls.__name__)
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def failure_summary(exc: BaseException) -> str:
    """What the plugin's own log says about a failure of the user's code (``redact=``, a name or
    conversation-id callable): the exception's type and where it was raised (file, line,
    function), never its message or traceback text, which routinely echo the value being
    processed (``invalid literal for int(): '4111 1111 1111 1111'``)."""
    name = _type_name(type(exc))
    where = ""
    try:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            code = tb.tb_frame.f_code
            where = f" at {code.co_filename}:{tb.tb_lineno} in {code.co_name}"
    except Exception:  # an odd traceback: the type alone
        where = ""
    return utf8_safe(name + where)


def failure_trail(exc: BaseException, *, frames: int = 12) -> str:
    """``failure_summary`` with the whole way there: the exception's type, then each frame it
    went through, innermost first (the last ``frames``), as ``file:line in function``; for a chained
    exception, the type of its cause. No message, no source text."""
    name = _type_name(type(exc))
    steps: list[str] = []
    try:
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            steps.append(f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}")
            tb = tb.tb_next
        cause = exc.__cause__ or exc.__context__
        tail = f"; while handling {type(cause).__qualname__}" if cause is not None else ""
    except Exception:  # an odd traceback: the type alone
        steps, tail = [], ""
    return utf8_safe(" <- ".join([name, *reversed(steps[-frames:])]) + tail)
