"""Where content goes (``ContentMode``) and which convention names are written (compatibility).

Why a module of its own: both are read from standard environment variables that other GenAI
instrumentations read too (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``,
``OTEL_SEMCONV_STABILITY_OPT_IN``), with the same values, so one process configures them all the
same way; and both are validated once, when ``OtelHooks`` is built, never in the middle of a run.
"""

from __future__ import annotations

import enum
import logging
import os
from typing import Final

from .environment_variables import (
    CAPTURE_OFF_VALUES,
    CAPTURE_ON_VALUES,
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
    OTEL_SEMCONV_STABILITY_OPT_IN,
    SEMCONV_DUP_VALUE,
)

logger = logging.getLogger("flowra_otel.options")

__all__ = ["ContentMode", "content_mode_from_env", "parse_content_mode", "semconv_compat_from_env"]


class ContentMode(enum.Enum):
    """Where captured content is recorded: opentelemetry-util-genai's ``ContentCapturingMode``.

    ``NO_CONTENT``: nowhere. ``SPAN_ONLY``: on spans (JSON attributes). ``EVENT_ONLY``: only in the
    ``gen_ai.client.inference.operation.details`` event of each model call (a log record), never on
    a span. ``SPAN_AND_EVENT``: both.
    """

    NO_CONTENT = "no_content"
    SPAN_ONLY = "span_only"
    EVENT_ONLY = "event_only"
    SPAN_AND_EVENT = "span_and_event"

    @property
    def on_spans(self) -> bool:
        return self is ContentMode.SPAN_ONLY or self is ContentMode.SPAN_AND_EVENT

    @property
    def in_events(self) -> bool:
        return self is ContentMode.EVENT_ONLY or self is ContentMode.SPAN_AND_EVENT


_BY_NAME: Final = {mode.value: mode for mode in ContentMode}


def parse_content_mode(value: object) -> ContentMode | None:
    """``capture_content=``: None (read the environment), a bool (``True`` is ``SPAN_ONLY``, as
    before content modes existed), a ``ContentMode`` or one of its names, case-insensitive
    (``"event_only"``). Anything else fails now, with the accepted values in the message."""
    if value is None or isinstance(value, ContentMode):
        return value
    if isinstance(value, bool):
        return ContentMode.SPAN_ONLY if value else ContentMode.NO_CONTENT
    if isinstance(value, str):
        mode = _BY_NAME.get(value.strip().lower())
        if mode is None:
            msg = f"capture_content={value!r} is not a content mode; use one of {sorted(_BY_NAME)} or True/False"
            raise ValueError(msg)
        return mode
    msg = f"capture_content must be a bool, a content mode name ({sorted(_BY_NAME)}) or None, got {value!r}"
    raise TypeError(msg)


def content_mode_from_env() -> ContentMode:
    """``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: the four mode names (as util-genai
    reads them), and ``true``/``false`` (and ``1``/``yes``/``on`` ...) as before. Unknown values
    warn and mean no content."""
    raw = os.environ.get(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "")
    value = raw.strip().lower()
    mode = _BY_NAME.get(value)
    if mode is not None:
        return mode
    if value in CAPTURE_ON_VALUES:
        return ContentMode.SPAN_ONLY
    if value not in CAPTURE_OFF_VALUES and raw not in _reported:
        # Read by every OtelHooks and by configure_telemetry (for logs): said once per value.
        _reported.add(raw)
        logger.warning(
            "%s=%r is not a recognised value, so content capture stays off; use one of %s "
            "(case-insensitive; also true/false, 1/0, yes/no, on/off)",
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
            raw,
            ", ".join(mode.name for mode in ContentMode),
        )
    return ContentMode.NO_CONTENT


_reported: set[str] = set()
"""The unrecognised values already warned about in this process."""


def semconv_compat_from_env() -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` (a comma-separated list, as for every OpenTelemetry
    domain) holds ``gen_ai_latest_experimental/dup``: the current names and the ones they replaced."""
    raw = os.environ.get(OTEL_SEMCONV_STABILITY_OPT_IN, "")
    return any(item.strip().lower() == SEMCONV_DUP_VALUE for item in raw.split(","))
