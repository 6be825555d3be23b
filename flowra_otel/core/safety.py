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
from collections.abc import Callable
from typing import Any, Final

logger = logging.getLogger("flowra_otel")


def guarded[**P](fn: Callable[P, object], /, *args: P.args, **kwargs: P.kwargs) -> None:
    """Run ``fn``; an exception is logged and swallowed: the agent is never affected."""
    try:
        fn(*args, **kwargs)
    except Exception:
        logger.exception("flowra_otel: internal error in %s; the agent is unaffected", _name(fn))


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
