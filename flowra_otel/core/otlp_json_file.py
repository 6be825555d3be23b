"""A span exporter that appends OTLP JSON lines to a file: the input of ``flowra-otel audit``.

Each export (a batch of spans) becomes one line holding one ``ExportTraceServiceRequest`` in the
OTLP JSON encoding, exactly as the OpenTelemetry Collector's ``file`` exporter writes it:
camelCase keys, trace and span ids as lowercase hex (also on links), enums as numbers, 64-bit
integers as strings. ``flowra-otel audit FILE`` reads such a file, and so does anything that
reads the Collector's output.

Select it with ``configure_telemetry(traces_file="spans.jsonl")`` or the variable
``FLOWRA_OTEL_TRACES_FILE=spans.jsonl`` (also under ``opentelemetry-instrument``), or add it to a
tracer provider of your own through a ``BatchSpanProcessor``.

The file is opened for appending when the exporter is built (a path that cannot be opened is a
``ValueError`` then, not a silent loss later): runs add to what earlier runs wrote, so delete the
file to start over. Each line is written with one unbuffered write, so processes appending to the
same file do not interleave within a line. A failed write (disk full) is logged and reported to
the span processor as a failure; it never reaches the application.

Content: the spans as recorded, so message content is in the file when capture is on (that is
what the audit checks). So a file the exporter creates is private, 0600 (as uploaded content is);
a file that already exists keeps its permissions.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped, unused-ignore]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .safety import internal_error

__all__ = ["FLOWRA_OTEL_TRACES_FILE", "OtlpJsonFileSpanExporter", "otlp_json_line"]

FLOWRA_OTEL_TRACES_FILE: Final = "FLOWRA_OTEL_TRACES_FILE"
"""A path: ``configure_telemetry()`` (with ``traces_file=None``) also appends every span there as
OTLP JSON lines (`OtlpJsonFileSpanExporter`). Empty or unset: no file."""

_ID_KEYS: Final = ("traceId", "spanId", "parentSpanId")


_logger = logging.getLogger("flowra_otel.export")


def _hex_ids(obj: dict[str, Any]) -> None:
    """protobuf's JSON mapping writes bytes as base64; OTLP JSON wants trace and span ids in hex."""
    for key in _ID_KEYS:
        value = obj.get(key)
        if isinstance(value, str) and value:
            obj[key] = base64.b64decode(value).hex()


def otlp_json_line(spans: Sequence[ReadableSpan]) -> str:
    """``spans`` as one line of OTLP JSON (an ``ExportTraceServiceRequest``), newline included."""
    request: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in request.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return json.dumps(request, separators=(",", ":"), ensure_ascii=False) + "\n"


class OtlpJsonFileSpanExporter(SpanExporter):
    """Appends each batch of spans to ``path`` as one OTLP JSON line (see the module docstring).

    Raises:
        ValueError: ``path`` cannot be opened for appending (no such directory, no permission).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # private when created
            self._file = os.fdopen(fd, "ab", buffering=0)  # open for the exporter's life
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ValueError(f"traces file {str(path)!r}: cannot open it for appending: {reason}") from None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def path(self) -> Path:
        return self._path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            data = otlp_json_line(spans).encode("utf-8")
        except Exception:
            internal_error(
                f"could not encode {len(spans)} span(s) for the traces file {self._path}",
                level=logging.WARNING,
                log=_logger,
            )
            return SpanExportResult.FAILURE
        with self._lock:
            if self._closed:
                return SpanExportResult.FAILURE
            try:
                view = memoryview(data)
                while view:
                    written = self._file.write(view)
                    if not written:
                        raise OSError("nothing written")
                    view = view[written:]
            except OSError as exc:
                _logger.warning("could not write %d span(s) to the traces file %s: %s", len(spans), self._path, exc)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True  # every export is written through

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._file.close()
            except OSError as exc:
                _logger.warning("could not close the traces file %s: %s", self._path, exc)
