"""Environment variables the plugin reads, each documented where it is defined.

Keyword arguments to ``OtelHooks`` always win over these; these win over the defaults.
"""

from __future__ import annotations

from typing import Final

OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Opt in to recording prompts, completions, tool arguments and tool results on spans.

The standard OpenTelemetry GenAI switch. Case-insensitive values:
``true``/``1``/``yes``/``on``/``SPAN_ONLY``/``SPAN_AND_EVENT`` turn capture on;
``false``/``0``/``no``/``off``/``NO_CONTENT``/``EVENT_ONLY`` (this plugin writes no content
events) or unset leave it off. Any other value logs a warning and means off.
Used only when ``OtelHooks(capture_content=None)`` (the default)."""

CAPTURE_ON_VALUES: Final = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
CAPTURE_OFF_VALUES: Final = frozenset({"", "false", "0", "no", "off", "no_content", "event_only"})

OTEL_METRICS_EXPORTER: Final = "OTEL_METRICS_EXPORTER"
"""The standard OpenTelemetry switch for metric export. ``none`` also turns off the plugin's metric
recording when ``OtelHooks(metrics=None)`` (the default): nothing would be exported, so nothing is
recorded. Any other value (or unset) leaves metrics on."""
