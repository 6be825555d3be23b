"""The ``gen_ai.client.inference.operation.details`` event: one model call's details as a log record.

Why an event: content in a trace is seen by everyone who can read traces. The conventions (and
opentelemetry-util-genai, whose shape this follows) offer the same details, content included, as
an event on the logs pipeline, so a team can keep prompts out of its traces (``EVENT_ONLY``) and
route them to a store with its own access rules and retention.

What it carries (events.yaml: the attributes of the inference span, no body, no severity, as
util-genai 1.3b0 emits it): the ``chat`` span's start attributes, its response and usage
attributes, ``error.type`` when the call failed, the content (``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``) as
structured values rather than JSON strings (log attributes may nest), and the ``*_ref`` keys when
content is also written to storage. The content is the very value the span would carry: the same
renderer, after every hook, ``redact=``, the secret patterns and within ``max_content_length``.
The record is tied to the ``chat`` span (its trace and span id) and stamped with the call's end.

Decoded, that value must still be one OTLP can carry, or the exporter drops the whole attribute
(and logs the offending number): an integer beyond int64 is recorded as its digits (a string),
and containers nested deeper than ``MAX_EVENT_DEPTH`` as their compact JSON text (a protobuf
decoder refuses messages nested ~100 deep, and each level of a map is three messages).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry import _logs as otel_logs
from opentelemetry import trace
from opentelemetry.trace import Span

from . import semconv

logger = logging.getLogger("flowra_otel")

__all__ = ["MAX_EVENT_DEPTH", "emit_inference_details", "events_supported", "loggable"]

MAX_EVENT_DEPTH: Final = 20
"""Containers (maps and arrays) nested deeper than this in an event value are recorded as their
JSON text. 20 levels of maps are 60 nested protobuf messages plus the request's envelope: well
within the 100 a protobuf decoder accepts (at 40 levels the suite's receiver refused the request)."""
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def _int64_or_digits(text: str) -> int | str:
    """``json.loads``'s ``parse_int``: an integer OTLP can carry (int64), else its digits."""
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else text


def _bounded_depth(value: Any, depth: int) -> Any:
    if isinstance(value, dict):
        if depth >= MAX_EVENT_DEPTH:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return {k: _bounded_depth(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= MAX_EVENT_DEPTH:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return [_bounded_depth(v, depth + 1) for v in value]
    return value


def loggable(text: str) -> Any:
    """Rendered JSON content as a log attribute value that OTLP encodes whole (see above)."""
    return _bounded_depth(json.loads(text, parse_int=_int64_or_digits), 0)


@functools.cache
def events_supported() -> bool:
    """Whether this opentelemetry-api's ``LogRecord`` takes an ``event_name`` (events need it)."""
    try:
        return "event_name" in inspect.signature(otel_logs.LogRecord.__init__).parameters
    except (TypeError, ValueError):
        return False


def emit_inference_details(
    event_logger: otel_logs.Logger,
    span: Span,
    end_ns: int,
    attributes: Mapping[str, Any],
    content: Mapping[str, str | None],
) -> None:
    """Emit one call's event. ``content``: attribute key -> rendered JSON text (or None); each is
    recorded as the structure it encodes. Never raises (a failure is logged, without content)."""
    try:
        attrs: dict[str, Any] = dict(attributes)
        for key, text in content.items():
            if text is not None:
                attrs[key] = loggable(text)
        event_logger.emit(
            otel_logs.LogRecord(
                timestamp=end_ns,
                context=trace.set_span_in_context(span),
                event_name=semconv.EVENT_INFERENCE_DETAILS,
                attributes=attrs,
            )
        )
    except Exception as exc:
        logger.error("flowra_otel: could not emit %s (%s)", semconv.EVENT_INFERENCE_DETAILS, type(exc).__name__)
