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
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs as otel_logs
from opentelemetry import trace
from opentelemetry.trace import Span

from . import semconv

logger = logging.getLogger("flowra_otel")

__all__ = ["emit_inference_details", "events_supported"]


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
                attrs[key] = json.loads(text)
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
