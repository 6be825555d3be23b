"""Environment variables the plugin reads, each documented where it is defined.

Keyword arguments to ``OtelHooks`` always win over these; these win over the defaults.
"""

from __future__ import annotations

from typing import Final

OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Opt in to recording prompts, completions, tool arguments and tool results, and say where.

The standard OpenTelemetry GenAI switch, with opentelemetry-util-genai's values (case-insensitive):
``NO_CONTENT`` (or unset, ``false``, ``0``, ``no``, ``off``): none; ``SPAN_ONLY`` (or ``true``,
``1``, ``yes``, ``on``): on spans; ``EVENT_ONLY``: only in each model call's
``gen_ai.client.inference.operation.details`` event (a log record), never on a span;
``SPAN_AND_EVENT``: both. Any other value logs one warning (once per process, listing these values) and means none.
Used only when ``OtelHooks(capture_content=None)`` (the default)."""

CAPTURE_ON_VALUES: Final = frozenset({"true", "1", "yes", "on"})
CAPTURE_OFF_VALUES: Final = frozenset({"", "false", "0", "no", "off"})

OTEL_SEMCONV_STABILITY_OPT_IN: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
"""The standard OpenTelemetry switch between convention versions, a comma-separated list. The value
``gen_ai_latest_experimental/dup`` makes this plugin write, beside the current GenAI names, the
ones the conventions replaced since its previous target (``gen_ai.usage.cache_creation.input_tokens``,
cache counts on ``invoke_agent``, ``finish_reason`` inside output messages), for backends that
still read them. Any other value (or unset): the current names only. Used only when
``OtelHooks(semconv_compat=None)`` (the default)."""

SEMCONV_DUP_VALUE: Final = "gen_ai_latest_experimental/dup"

OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK: Final = "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK"
"""opentelemetry-util-genai's completion hook; the value ``upload`` (with
``OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH``) makes this plugin write each model call's content
to storage and put references on its span, as util-genai's upload hook does. Used only when
``OtelHooks(content_upload=None)`` (the default)."""

OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH: Final = "OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH"
"""Where content goes with the ``upload`` completion hook: a directory (a path or ``file://`` URL)
or, with ``fsspec`` installed, any fsspec URL (``gs://bucket/prefix``)."""

OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT: Final = "OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT"
"""``json`` (default: one JSON document per file) or ``jsonl`` (one message or part per line)."""

OTEL_METRICS_EXPORTER: Final = "OTEL_METRICS_EXPORTER"
"""The standard OpenTelemetry switch for metric export. ``none`` also turns off the plugin's metric
recording when ``OtelHooks(metrics=None)`` (the default): nothing would be exported, so nothing is
recorded. Any other value (or unset) leaves metrics on."""
