"""A span exporter that prints each finished trace as a tree, for demos with no collector.

Why not the SDK's ``ConsoleSpanExporter``: it prints one JSON document per span, in end order
(children before parents), which is unreadable for an agent run of twenty spans. This exporter
buffers spans per trace and prints the whole tree once its top-most span has ended::

    trace 4bf92f3577b34da6a3ce929d0e0e4736
    invoke_agent support_bot  1530.0 ms  provider=anthropic
    ├─ chat claude-sonnet-4-5  800.0 ms  provider=anthropic in_tokens=120 out_tokens=40 finish=tool_call
    ├─ execute_tool get_weather  210.0 ms  call_id=toolu_01
    └─ chat claude-sonnet-4-5  500.0 ms  provider=anthropic in_tokens=180 out_tokens=50 finish=stop

When is a tree complete? Spans are exported as they end, children first, possibly over several
``export()`` calls. A span is the top of what this process will see when its parent is absent,
remote (``parent.is_remote``: the caller's span lives in another process) or already printed
(the child outlived its parent). When such a span ends, it and every buffered descendant are
printed. An in-process caller span that is exported too (an HTTP server span around the agent)
is simply the top of the tree: the agent spans wait for it and the trace prints once.

What is never complete (a parent that is in this process but never exported) stays buffered,
bounded by ``max_traces`` and ``max_spans_per_trace``, and is printed, marked ``incomplete``,
on ``shutdown()`` rather than silently lost.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, TextIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from . import redaction, semconv

__all__ = ["DEFAULT_ATTRIBUTES", "ConsoleTreeExporter", "format_duration_ms"]

_logger = logging.getLogger("flowra_otel.console")


DEFAULT_ATTRIBUTES: Final[Mapping[str, str]] = MappingProxyType(
    {
        semconv.GEN_AI_PROVIDER_NAME: "provider",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: "in_tokens",
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "out_tokens",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: "finish",
        semconv.GEN_AI_TOOL_CALL_ID: "call_id",
        semconv.FLOWRA_END_REASON: "end_reason",
        semconv.FLOWRA_TOOL_LOOP_STATUS: "loop_status",
        redaction.APPLIED: "redacted",
    }
)
"""Attribute key -> label shown on each line. The agent, model and tool names are left out on
purpose: the GenAI span names (``chat {model}``, ``execute_tool {tool}``) already carry them."""

_EXCEPTION_EVENT: Final = "exception"
_EXCEPTION_TYPE: Final = "exception.type"
_MAX_VALUE_CHARS: Final = 48
_REMEMBERED_SPANS: Final = 10_000
"""How many printed span ids are remembered, to recognise a child that ends after its parent."""


def format_duration_ms(duration_ns: int) -> str:
    """Default duration format: milliseconds with one decimal (``1530.0 ms``)."""
    return f"{duration_ns / 1_000_000:.1f} ms"


@dataclass(frozen=True, slots=True)
class _Glyphs:
    tee: str
    last: str
    pipe: str
    blank: str
    error: str
    ellipsis: str


_UNICODE: Final = _Glyphs(tee="├─ ", last="└─ ", pipe="│  ", blank="   ", error="✗", ellipsis="…")
_ASCII: Final = _Glyphs(tee="|- ", last="`- ", pipe="|  ", blank="   ", error="x", ellipsis="...")

_RESET: Final = "\x1b[0m"
_BOLD: Final = "\x1b[1m"
_DIM: Final = "\x1b[2m"
_RED: Final = "\x1b[1;31m"
_CYAN: Final = "\x1b[36m"
_YELLOW: Final = "\x1b[33m"


@dataclass(slots=True)
class _PendingTrace:
    """Spans of one trace still waiting for the span that tops them."""

    spans: dict[int, ReadableSpan] = field(default_factory=dict)
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class _Block:
    """One printed tree: its top span(s), the parent id -> children map, header notes."""

    trace_id: int
    roots: list[ReadableSpan]
    children: dict[int, list[ReadableSpan]]
    notes: list[str] = field(default_factory=list)


class ConsoleTreeExporter(SpanExporter):
    """Print every finished trace as an indented tree (``├─ └─ │``) on a text stream.

    Args:
        stream: Where to write. ``None`` (the default) means ``sys.stdout`` looked up at each
            write, so redirections made after construction (pytest's capture, ``contextlib.
            redirect_stdout``) are honoured.
        attributes: Which attributes to show after the duration. A mapping gives key -> label;
            a plain iterable of keys shows each under its own key. Default: `DEFAULT_ATTRIBUTES`.
        color: ``None`` colours only when the stream is a terminal and ``NO_COLOR`` is unset;
            ``True``/``False`` force it on/off.
        ascii_only: ``None`` falls back to ASCII guides when the stream's encoding cannot
            encode the box-drawing characters (a legacy Windows console); ``True``/``False`` force.
        duration_format: Turns a duration in nanoseconds into text; tests pass a fixed string.
        max_traces: Traces buffered while waiting for their top span. Past this, the oldest
            is dropped (one warning is logged per exporter) so a parent that is never exported
            cannot grow memory without bound.
        max_spans_per_trace: Spans buffered per trace. Past this, further descendants are
            dropped (one warning) and the printed header says how many.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        attributes: Mapping[str, str] | Iterable[str] | None = None,
        color: bool | None = None,
        ascii_only: bool | None = None,
        duration_format: Callable[[int], str] = format_duration_ms,
        max_traces: int = 1000,
        max_spans_per_trace: int = 1000,
    ) -> None:
        if max_traces < 1 or max_spans_per_trace < 1:
            raise ValueError("max_traces and max_spans_per_trace must be at least 1")
        self._stream = stream
        if attributes is None:
            attributes = DEFAULT_ATTRIBUTES
        self._attributes: tuple[tuple[str, str], ...] = (
            tuple(attributes.items()) if isinstance(attributes, Mapping) else tuple((key, key) for key in attributes)
        )
        self._color = color
        self._ascii_only = ascii_only
        self._duration_format = duration_format
        self._max_traces = max_traces
        self._max_spans_per_trace = max_spans_per_trace
        self._lock = threading.Lock()
        self._pending: OrderedDict[int, _PendingTrace] = OrderedDict()
        self._printed: OrderedDict[tuple[int, int], None] = OrderedDict()
        self._warned_traces = False
        self._warned_spans = False
        self._shut_down = False

    # --- SpanExporter -------------------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Buffer ``spans``; print every tree whose top span is among them."""
        with self._lock:
            if self._shut_down:
                _logger.warning("ConsoleTreeExporter already shut down, ignoring %d span(s)", len(spans))
                return SpanExportResult.FAILURE
            blocks: list[_Block] = []
            for span in spans:
                block = self._accept(span)
                if block is not None:
                    blocks.append(block)
            if not blocks:
                return SpanExportResult.SUCCESS
            return self._write(blocks)

    def shutdown(self) -> None:
        """Print what is still buffered, marked ``incomplete``, instead of dropping it."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
            blocks: list[_Block] = []
            for trace_id, pending in self._pending.items():
                roots, children = _index(pending.spans.values())
                notes = ["incomplete"]
                if pending.dropped:
                    notes.append(f"{pending.dropped} spans dropped")
                blocks.append(_Block(trace_id, roots, children, notes))
            self._pending.clear()
            self._printed.clear()
            if blocks:
                self._write(blocks)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing to flush: complete trees are written when their top span ends.

        Buffered, incomplete trees are deliberately kept: printing them now would split a
        trace that is still running into fragments.
        """
        return True

    # --- buffering ----------------------------------------------------------------------------

    def _accept(self, span: ReadableSpan) -> _Block | None:
        """Buffer one span; return a block to print if it tops its (sub)tree."""
        context = span.get_span_context()
        if context is None or not context.is_valid:
            return None
        trace_id, span_id = context.trace_id, context.span_id
        parent = span.parent
        late = parent is not None and (trace_id, parent.span_id) in self._printed
        is_top = parent is None or parent.is_remote or late

        pending = self._pending.get(trace_id)
        if pending is None:
            if is_top:  # a lone span: nothing buffered to wait for or to join
                self._remember(trace_id, [span_id])
                return _Block(trace_id, [span], {}, ["continued"] if late else [])
            pending = self._new_trace(trace_id)
        elif not is_top and len(pending.spans) >= self._max_spans_per_trace and span_id not in pending.spans:
            pending.dropped += 1
            if not self._warned_spans:
                self._warned_spans = True
                _logger.warning(
                    "ConsoleTreeExporter: a trace has more than %d spans waiting for their parent; "
                    "dropping the excess (further drops are not logged)",
                    self._max_spans_per_trace,
                )
            return None
        pending.spans[span_id] = span
        if not is_top:
            return None

        # Print this span and every buffered descendant; other subtrees of the trace (another
        # child of the same remote caller, still running) stay buffered.
        _, children = _index(pending.spans.values())
        subtree: set[int] = set()
        stack = [span_id]
        while stack:
            current = stack.pop()
            if current not in subtree:
                subtree.add(current)
                stack.extend(_span_id(child) for child in children.get(current, ()))
        for sid in subtree:
            del pending.spans[sid]
        notes = ["continued"] if late else []
        if pending.dropped:
            notes.append(f"{pending.dropped} spans dropped")
            pending.dropped = 0
        if not pending.spans:
            del self._pending[trace_id]
        self._remember(trace_id, subtree)
        return _Block(trace_id, [span], children, notes)

    def _new_trace(self, trace_id: int) -> _PendingTrace:
        if len(self._pending) >= self._max_traces:
            self._pending.popitem(last=False)
            if not self._warned_traces:
                self._warned_traces = True
                _logger.warning(
                    "ConsoleTreeExporter: more than %d traces are waiting for their top span; "
                    "dropping the oldest (further drops are not logged)",
                    self._max_traces,
                )
        pending = _PendingTrace()
        self._pending[trace_id] = pending
        return pending

    def _remember(self, trace_id: int, span_ids: Iterable[int]) -> None:
        for span_id in span_ids:
            self._printed[trace_id, span_id] = None
        while len(self._printed) > _REMEMBERED_SPANS:
            self._printed.popitem(last=False)

    # --- rendering ----------------------------------------------------------------------------

    def _write(self, blocks: list[_Block]) -> SpanExportResult:
        stream = self._stream if self._stream is not None else sys.stdout
        glyphs = _ASCII if self._use_ascii(stream) else _UNICODE
        color = self._use_color(stream)
        lines: list[str] = []
        for block in blocks:
            lines.extend(self._render(block, glyphs=glyphs, color=color))
            lines.append("")
        try:
            stream.write("\n".join(lines) + "\n")
            stream.flush()
        except (OSError, ValueError):  # closed or broken stream, e.g. at interpreter exit
            _logger.debug("ConsoleTreeExporter could not write to its stream", exc_info=True)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _render(self, block: _Block, *, glyphs: _Glyphs, color: bool) -> list[str]:
        notes, children = block.notes, block.children
        header = f"trace {block.trace_id:032x}" + (f" ({', '.join(notes)})" if notes else "")
        lines = [_paint(header, _YELLOW if "incomplete" in notes else _DIM, color)]
        # Iterative depth-first walk: a trace may be deeper than Python's recursion limit.
        stack: list[tuple[ReadableSpan, str, str]] = [(root, "", "") for root in reversed(_by_start(block.roots))]
        seen: set[int] = set()
        while stack:
            span, guide, prefix = stack.pop()
            span_id = _span_id(span)
            if span_id in seen:
                continue
            seen.add(span_id)
            lines.append(_paint(guide, _DIM, color) + self._line(span, bold=not guide, glyphs=glyphs, color=color))
            kids = _by_start(children.get(span_id, ()))
            for index in range(len(kids) - 1, -1, -1):
                last = index == len(kids) - 1
                stack.append(
                    (
                        kids[index],
                        prefix + (glyphs.last if last else glyphs.tee),
                        prefix + (glyphs.blank if last else glyphs.pipe),
                    )
                )
        return lines

    def _line(self, span: ReadableSpan, *, bold: bool, glyphs: _Glyphs, color: bool) -> str:
        parts = [_paint(span.name, _BOLD, color and bold)]
        if span.start_time is not None and span.end_time is not None:
            parts.append(_paint(self._duration_format(span.end_time - span.start_time), _CYAN, color))
        if span.status.status_code is StatusCode.ERROR:
            error_type = _error_type(span)
            if error_type is not None:
                marker = f"{glyphs.error} error.type={_format_value(error_type, glyphs)}"
            elif span.status.description:
                marker = f"{glyphs.error} ERROR: {_format_value(span.status.description, glyphs)}"
            else:
                marker = f"{glyphs.error} ERROR"
            parts.append(_paint(marker, _RED, color))
        attributes = span.attributes or {}
        shown = [
            f"{label}={_format_value(attributes[key], glyphs)}" for key, label in self._attributes if key in attributes
        ]
        if shown:
            parts.append(_paint(" ".join(shown), _DIM, color))
        return "  ".join(parts)

    def _use_color(self, stream: TextIO) -> bool:
        if self._color is not None:
            return self._color
        if os.environ.get("NO_COLOR"):
            return False
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False

    def _use_ascii(self, stream: TextIO) -> bool:
        if self._ascii_only is not None:
            return self._ascii_only
        encoding = getattr(stream, "encoding", None)
        if not encoding:
            return False
        try:
            "".join((_UNICODE.tee, _UNICODE.last, _UNICODE.pipe, _UNICODE.error, _UNICODE.ellipsis)).encode(encoding)
        except (UnicodeEncodeError, LookupError):
            return True
        return False


def _index(spans: Iterable[ReadableSpan]) -> tuple[list[ReadableSpan], dict[int, list[ReadableSpan]]]:
    """Split buffered spans into tops (parent not buffered) and a parent id -> children map."""
    buffered = list(spans)
    ids = {_span_id(span) for span in buffered}
    roots: list[ReadableSpan] = []
    children: dict[int, list[ReadableSpan]] = {}
    for span in buffered:
        parent = span.parent
        if parent is not None and parent.span_id in ids and parent.span_id != _span_id(span):
            children.setdefault(parent.span_id, []).append(span)
        else:
            roots.append(span)
    return roots, children


def _span_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    return context.span_id if context is not None else 0


def _by_start(spans: Iterable[ReadableSpan]) -> list[ReadableSpan]:
    """Siblings in start order; ties broken by end time, then name, so output is stable."""
    return sorted(spans, key=lambda s: (s.start_time or 0, s.end_time or 0, s.name))


def _error_type(span: ReadableSpan) -> str | None:
    """``error.type``, else the type of a recorded exception (what ``record_exception`` adds)."""
    attributes = span.attributes or {}
    value = attributes.get(semconv.ERROR_TYPE)
    if value is not None:
        return str(value)
    for event in span.events:
        if event.name == _EXCEPTION_EVENT and event.attributes and _EXCEPTION_TYPE in event.attributes:
            return str(event.attributes[_EXCEPTION_TYPE])
    return None


def _format_value(value: object, glyphs: _Glyphs) -> str:
    text = _plain(value)
    if not text.isprintable():  # keep one span on one line
        text = text.encode("unicode_escape").decode("ascii")
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - len(glyphs.ellipsis)] + glyphs.ellipsis
    return text


def _plain(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return ",".join(f"{key}:{_plain(item)}" for key, item in value.items())
    if isinstance(value, Sequence):  # finish_reasons and other homogeneous arrays
        return ",".join(_plain(item) for item in value)
    return str(value)


def _paint(text: str, code: str, enabled: bool) -> str:
    return f"{code}{text}{_RESET}" if enabled and text else text
