"""``flowra-otel audit``: read exported traces, list every tool call with its redaction ledger,
and report any span value that looks like a secret.

    python -m flowra_otel audit FILE [--secret S ...] [--secrets-file F] [--no-builtin-patterns] [--json]
    python -m flowra_otel audit --phoenix URL --project NAME [--since WHEN] [--secret S ...] ...

Why: the redaction ledger (``flowra.redaction.*`` on ``execute_tool`` spans, see ``redaction.py``)
says which hook changed which tool argument or result; this command turns a trace export into
the review an auditor asks for ("which tool calls were redacted, by what, and did anything slip
through?") without a tracing backend, or reads a running Phoenix directly.

Input, detected from the content (never from the file name):

* OTLP JSON as the OpenTelemetry Collector's ``file`` exporter writes it: one
  ``ExportTraceServiceRequest`` per line (``{"resourceSpans": [...]}``), or one such document;
  also Jaeger v2's ``/api/v3`` answers, which wrap it in ``{"result": ...}``. Ids may be hex (the
  OTLP JSON encoding) or base64 (protobuf's generic JSON mapping); enums numbers or names; keys
  camelCase or snake_case. Lines holding metrics or logs are skipped.
* Jaeger's JSON trace export (``{"data": [{"traceID", "spans": [...], "processes": {...}}]}``),
  as the Jaeger UI downloads it and its v1 HTTP API returns it.
* Phoenix's span exports as its REST API returns them: ``GET /v1/projects/{p}/spans``
  (``{"data": [{"context", "name", "attributes", ...}]}``) and ``.../spans/otlpv1`` (OTLP-shaped
  spans with snake_case keys); also a bare array or JSON lines of such spans. Phoenix writes every
  unset field as an explicit ``null``: a null is no value, never the text "None".
* With ``--phoenix URL --project NAME``: the project's spans read live from that REST API (all
  pages; ``--since`` an ISO time or a duration such as ``2h``; ``PHOENIX_API_KEY`` sent if set).

An input that yields no span at all is an error (exit 2), never "clean": an audit of nothing
proves nothing.

Checked, on every span: its name, attribute keys and values of every type as text (strings,
numbers, booleans, bytes and what they encode, arrays and key-value lists, walked), event names and
attributes, link attributes and trace state, the status message, and the resource (OTLP
``resource`` attributes, Jaeger process tags) and instrumentation scope (name, version, attributes)
that made it, each once. A string that is itself JSON
(``gen_ai.input.messages``...) is also decoded, and text that is cut (a truncated attribute) is
JSON-unescaped, so a secret escaped inside either is still found (``flowra_otel.secret_scan``).
What is looked for: the plugin's built-in secret patterns
(``flowra_otel.content.BUILTIN_SECRET_PATTERNS``: API keys, bearer tokens, e-mail addresses, card
numbers) unless ``--no-builtin-patterns``, and every exact string given with ``--secret`` or in
``--secrets-file`` (one per line; blank lines and lines starting with ``#`` are skipped). Matches
are printed masked, and so is every value the report prints (tool names, call ids, agent names,
ledger values, span names) wherever a secret or a pattern matches in it: the report itself never
spreads a secret.

Exit status: 0 nothing found, 1 at least one leak, 2 the input could not be read or understood, or
held no span (one line on stderr says why).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import dataclasses
import datetime
import json
import math
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TextIO

from . import redaction, semconv
from .content import BUILTIN_SECRET_PATTERNS
from .safety import utf8_safe
from .same_origin_http import open_url
from .secret_scan import scan_text
from .shown_url import hidden_parts, shown_url
from .text_input import UnreadableTextError, read_text_file

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CLEAN",
    "EXIT_LEAK",
    "AuditInputError",
    "AuditReport",
    "AuditSpan",
    "Leak",
    "McpServerCall",
    "SpanEvent",
    "ToolCall",
    "add_arguments",
    "audit_file",
    "audit_phoenix",
    "audit_spans",
    "fetch_phoenix_spans",
    "is_mcp_server_call",
    "load_traces",
    "mcp_server_calls",
    "parse_since",
    "render_json",
    "render_text",
    "run",
]

EXIT_CLEAN: Final = 0
EXIT_LEAK: Final = 1
EXIT_BAD_INPUT: Final = 2

Format = Literal["otlp-json", "jaeger-json", "phoenix-json", "phoenix-otlp-json"]

_LEDGER_PREFIX: Final = redaction.APPLIED.rsplit(".", 1)[0] + "."  # flowra.redaction.
_STATUS_NAMES: Final = {0: "UNSET", 1: "OK", 2: "ERROR"}
_JAEGER_STATUS_TAGS: Final = frozenset({"otel.status_code", "otel.status_description", "error"})
_JAEGER_META_TAGS: Final = frozenset(
    {"span.kind", "otel.scope.name", "otel.scope.version", "otel.library.name", "otel.library.version"}
)
_NON_TRACE_KEYS: Final = ("resourceMetrics", "resource_metrics", "resourceLogs", "resource_logs")


class AuditInputError(Exception):
    """The file cannot be read or is not a trace export this command understands (exit 2)."""


# --------------------------------------------------------------------------------- the data


@dataclasses.dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    attributes: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class AuditSpan:
    """One span, whichever format it came from; ids are lowercase hex."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    attributes: dict[str, Any]
    events: tuple[SpanEvent, ...] = ()
    link_attributes: tuple[dict[str, Any], ...] = ()
    status_code: str = "UNSET"
    """``UNSET``, ``OK`` or ``ERROR``."""
    status_message: str = ""
    service_name: str | None = None
    resource_attributes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The attributes of the resource that made the span (OTLP ``resource``, Jaeger process tags):
    shared, by identity, with the other spans of that resource, and checked once per resource."""
    scope: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The instrumentation scope: its ``name``, ``version`` and ``attributes`` (checked once per scope)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCall:
    """An ``execute_tool`` span and its redaction ledger (the ``flowra.redaction.*`` attributes)."""

    trace_id: str
    span_id: str
    tool_name: str
    call_id: str | None
    status: str
    """``ok`` or ``error``."""
    error_type: str | None
    end_reason: str | None
    agent_name: str | None
    ledger: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class McpServerCall:
    """An MCP server's ``tools/call`` span (the server's side of an agent's MCP tool call): not a
    tool call of its own, so reported apart from them, with the agent's ``execute_tool`` span it
    continues when the input holds it."""

    trace_id: str
    span_id: str
    tool_name: str
    service_name: str | None
    status: str
    """``ok`` or ``error``."""
    error_type: str | None
    continues: str | None
    """The span id of the agent's ``execute_tool`` span above it in the trace; None when the
    server's span is in a trace of its own (no context reached the server) or that span is not in
    the input."""


@dataclasses.dataclass(frozen=True, slots=True)
class Leak:
    """A span value matching a secret pattern or a given secret; ``preview`` is masked."""

    trace_id: str
    span_id: str
    span_name: str
    where: str
    """``span name``, ``attribute <key>``, ``event <name>``, ``event <name> attribute <key>``,
    ``link attribute <key>`` or ``status message``."""
    kind: str
    """The built-in pattern's name (``api_key``...) or ``given_secret``."""
    preview: str


@dataclasses.dataclass(frozen=True, slots=True)
class AuditReport:
    path: str
    format: str
    trace_count: int
    span_count: int
    tool_calls: tuple[ToolCall, ...]
    leaks: tuple[Leak, ...]
    patterns: tuple[str, ...]
    given_secrets: int
    mcp_server_calls: tuple[McpServerCall, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.leaks

    @property
    def exit_code(self) -> int:
        return EXIT_CLEAN if self.clean else EXIT_LEAK


# --------------------------------------------------------------------------------- reading


def load_traces(path: str | Path) -> tuple[Format, list[AuditSpan]]:
    """Every span of a trace export file (see the module docstring), and which format it was.

    Raises:
        AuditInputError: missing or unreadable file, not JSON, JSON of another shape, or no span
            at all (an audit of nothing must never read "clean").
    """
    name = str(path)
    try:
        text = read_text_file(path)
    except FileNotFoundError:
        raise AuditInputError(f"{name}: no such file") from None
    except UnreadableTextError as exc:
        raise AuditInputError(f"{name}: {exc} (expected {_EXPECTED})") from None
    except OSError as exc:
        raise AuditInputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if not text.strip():
        raise AuditInputError(f"{name}: empty file (expected {_EXPECTED})")

    formats: set[Format] = set()
    spans: list[AuditSpan] = []
    saw_traces = False
    for where, document in _json_documents(name, text):
        found = _document_spans(name, where, document)
        if found is None:
            continue
        saw_traces = True
        formats.add(found[0])
        spans.extend(found[1])
    if not saw_traces:
        raise AuditInputError(f"{name}: holds no traces (only metrics or logs)")
    if not spans:
        raise AuditInputError(f"{name}: holds no spans (nothing to audit)")
    return (formats.pop() if len(formats) == 1 else "otlp-json"), spans


_EXPECTED: Final = "OTLP JSON, Jaeger JSON or Phoenix span JSON"


def _json_documents(name: str, text: str) -> list[tuple[str, Any]]:
    """The file as one JSON document, or as JSON lines (the Collector's file exporter)."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise AuditInputError(f"{name}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    else:
        if isinstance(whole, list):
            return [(f"item {i}", item) for i, item in enumerate(whole)]
        return [("", whole)]
    documents: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            documents.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise AuditInputError(f"{name}: line {number} is not JSON ({exc.msg}, column {exc.colno})") from None
    return documents


def _document_spans(name: str, where: str, document: Any) -> tuple[Format, list[AuditSpan]] | None:
    """The spans of one JSON document and its format; None for a metrics or logs document."""
    at = f"{name}: {where + ': ' if where else ''}"
    if isinstance(document, dict):
        if _first(document, "resourceSpans", "resource_spans") is not None:
            return "otlp-json", list(_otlp_spans(at, document))
        result = document.get("result")
        if isinstance(result, dict) and _first(result, "resourceSpans", "resource_spans") is not None:
            return "otlp-json", list(_otlp_spans(at, result))  # Jaeger's API v3 wraps OTLP JSON
        data = document.get("data")
        if isinstance(data, list):  # Jaeger's API and download, Phoenix's REST API: {"data": [...]}
            return _data_items(at, data)
        if _item_kind(document) in ("phoenix-json", "phoenix-otlp-json"):  # one span per line or array item
            return _data_items(at, [document])
        if any(key in document for key in _NON_TRACE_KEYS):
            return None
        keys = ", ".join(sorted(str(k) for k in document)[:6]) or "none"
        raise AuditInputError(f"{at}JSON of an unknown shape: expected {_EXPECTED}, found an object with keys: {keys}")
    raise AuditInputError(f"{at}JSON of an unknown shape: expected {_EXPECTED}, found {_json_type(document)}")


def _item_kind(item: Any) -> Format | None:
    """What one element of a ``data`` array is: a Jaeger trace, a Phoenix span, an OTLP span."""
    if not isinstance(item, dict):
        return None
    if "spans" in item and "context" not in item:
        return "jaeger-json"
    context = item.get("context")
    if isinstance(context, dict) and "span_id" in context and "trace_id" in context:
        return "phoenix-json"
    if _first(item, "spanId", "span_id") is not None and _first(item, "traceId", "trace_id") is not None:
        return "phoenix-otlp-json"
    return None


def _data_items(at: str, data: list[Any]) -> tuple[Format, list[AuditSpan]]:
    formats: set[Format] = set()
    spans: list[AuditSpan] = []
    for i, item in enumerate(data):
        kind = _item_kind(item)
        if kind is None:
            found = (
                f"an object with keys: {', '.join(sorted(item)[:6])}" if isinstance(item, dict) else _json_type(item)
            )
            raise AuditInputError(
                f"{at}data[{i}] is neither a Jaeger trace (traceID, spans), a Phoenix span (context, name) "
                f"nor an OTLP span (trace_id, span_id): found {found}"
            )
        formats.add(kind)
        if kind == "jaeger-json":
            spans.extend(_jaeger_trace_spans(at, f"data[{i}]", item))
        elif kind == "phoenix-json":
            spans.append(_phoenix_span(at, item))
        else:
            spans.append(_otlp_span(at, item, None))
    if len(formats) > 1:
        raise AuditInputError(f"{at}data mixes {' and '.join(sorted(formats))} items")
    return (formats.pop() if formats else "jaeger-json"), spans


# --- OTLP JSON --------------------------------------------------------------------------------


def _otlp_spans(at: str, document: dict[str, Any]) -> Iterator[AuditSpan]:
    for i, resource_spans in enumerate(_list(at, "resourceSpans", _first(document, "resourceSpans", "resource_spans"))):
        rs = _object(at, f"resourceSpans[{i}]", resource_spans)
        resource = _object(at, f"resourceSpans[{i}].resource", rs.get("resource") or {})
        resource_attrs = _otlp_attributes(at, resource.get("attributes"))
        service = resource_attrs.get("service.name")
        scopes = _first(rs, "scopeSpans", "scope_spans", "instrumentationLibrarySpans")
        for j, scope_spans in enumerate(_list(at, f"resourceSpans[{i}].scopeSpans", scopes)):
            ss = _object(at, f"resourceSpans[{i}].scopeSpans[{j}]", scope_spans)
            raw_scope = _first(ss, "scope", "instrumentationLibrary") or {}
            scope = _object(at, f"resourceSpans[{i}].scopeSpans[{j}].scope", raw_scope)
            scope_info = {
                "name": _text(scope.get("name")),
                "version": _text(scope.get("version")),
                "attributes": _otlp_attributes(at, scope.get("attributes")),
            }
            for k, raw in enumerate(_list(at, f"resourceSpans[{i}].scopeSpans[{j}].spans", ss.get("spans"))):
                span = _object(at, f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]", raw)
                yield _otlp_span(at, span, str(service) if service is not None else None, resource_attrs, scope_info)


def _otlp_span(
    at: str,
    span: dict[str, Any],
    service: str | None,
    resource: Mapping[str, Any] | None = None,
    scope: Mapping[str, Any] | None = None,
) -> AuditSpan:
    status = span.get("status") or {}
    code = status.get("code", 0) if isinstance(status, dict) else 0
    events = tuple(
        SpanEvent(_text(ev.get("name")), _otlp_attributes(at, ev.get("attributes")))
        for ev in (_object(at, "event", e) for e in _list(at, "events", span.get("events")))
    )
    links = tuple(_link_values(at, _object(at, "link", link)) for link in _list(at, "links", span.get("links")))
    return AuditSpan(
        trace_id=_span_id(_first(span, "traceId", "trace_id")) or "",
        span_id=_span_id(_first(span, "spanId", "span_id")) or "",
        parent_span_id=_span_id(_first(span, "parentSpanId", "parent_span_id")),
        name=_text(span.get("name")),
        attributes=_otlp_attributes(at, span.get("attributes")),
        events=events,
        link_attributes=links,
        status_code=_status_name(code),
        status_message=_text(status.get("message")) if isinstance(status, dict) else "",
        service_name=service,
        resource_attributes=resource if resource is not None else {},
        scope=scope if scope is not None else {},
    )


def _link_values(at: str, link: dict[str, Any]) -> dict[str, Any]:
    """A link's attributes, and its ``traceState`` (free text a producer may fill) when set."""
    values = _otlp_attributes(at, link.get("attributes"))
    state = _first(link, "traceState", "trace_state")
    if state:
        values = {**values, "(trace state)": _text(state)}
    return values


def _otlp_attributes(at: str, raw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in _list(at, "attributes", raw):
        kv = _object(at, "attribute", item)
        value = _any_value(kv.get("value"))
        if value is not None:
            out[_text(kv.get("key"))] = value
    return out


def _any_value(value: Any) -> Any:
    """An OTLP JSON ``AnyValue`` as a Python value (arrays as lists, kvlists as dicts)."""
    if not isinstance(value, dict):
        return value
    for key, decode in _ANY_VALUE_FIELDS:
        if value.get(key) is not None:  # Phoenix writes every field, the unset ones as null
            return decode(value[key])
    return None


def _int_value(raw: Any) -> Any:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return raw


def _double_value(raw: Any) -> Any:
    try:
        return float(raw)  # "NaN" / "Infinity" are how JSON spells those
    except (TypeError, ValueError):
        return raw


def _array_value(raw: Any) -> list[Any]:
    values = raw.get("values", []) if isinstance(raw, dict) else []
    return [_any_value(v) for v in values] if isinstance(values, list) else []


def _bytes_value(raw: Any) -> Any:
    """A ``bytesValue`` (base64 in JSON): its text as exported, and the text it encodes."""
    text = _text(raw)
    try:
        decoded = base64.b64decode(text, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return text
    return [text, decoded]


def _kvlist_value(raw: Any) -> dict[str, Any]:
    values = raw.get("values", []) if isinstance(raw, dict) else []
    if not isinstance(values, list):
        return {}
    return {_text(kv.get("key")): _any_value(kv.get("value")) for kv in values if isinstance(kv, dict)}


_ANY_VALUE_FIELDS: Final = (
    ("stringValue", str),
    ("string_value", str),
    ("boolValue", bool),
    ("bool_value", bool),
    ("intValue", _int_value),
    ("int_value", _int_value),
    ("doubleValue", _double_value),
    ("double_value", _double_value),
    ("arrayValue", _array_value),
    ("array_value", _array_value),
    ("kvlistValue", _kvlist_value),
    ("kvlist_value", _kvlist_value),
    ("bytesValue", _bytes_value),
    ("bytes_value", _bytes_value),
)


def _status_name(code: Any) -> str:
    if isinstance(code, int):
        return _STATUS_NAMES.get(code, "UNSET")
    text = str(code).upper().removeprefix("STATUS_CODE_")
    return text if text in ("UNSET", "OK", "ERROR") else "UNSET"


# --- Jaeger JSON ------------------------------------------------------------------------------


def _jaeger_trace_spans(at: str, what: str, trace: dict[str, Any]) -> Iterator[AuditSpan]:
    processes = trace.get("processes") or {}
    if not isinstance(processes, dict):
        raise AuditInputError(f"{at}{what}.processes is {_json_type(processes)}, expected an object")
    resources: dict[int, dict[str, Any]] = {}  # one dict per process: checked once, whatever its spans
    for k, raw in enumerate(_list(at, f"{what}.spans", trace.get("spans"))):
        span = _object(at, f"{what}.spans[{k}]", raw)
        process = processes.get(span.get("processID")) or span.get("process") or {}
        service = process.get("serviceName") if isinstance(process, dict) else None
        resource = resources.get(id(process))
        if resource is None:
            resource = resources[id(process)] = _jaeger_process(at, process)
        yield _jaeger_span(at, span, trace.get("traceID"), service, resource)


def _jaeger_process(at: str, process: Any) -> dict[str, Any]:
    """A Jaeger process as resource attributes: its tags, and its service name."""
    if not isinstance(process, dict):
        return {}
    attributes = _jaeger_tags(at, process.get("tags"))
    if process.get("serviceName") is not None:
        attributes.setdefault("service.name", process["serviceName"])
    return attributes


def _jaeger_span(
    at: str, span: dict[str, Any], trace_id: Any, service: Any, resource: Mapping[str, Any] | None = None
) -> AuditSpan:
    tags = _jaeger_tags(at, span.get("tags"))
    parent: str | None = None
    for ref in _list(at, "references", span.get("references")):
        if isinstance(ref, dict) and ref.get("refType", "CHILD_OF") == "CHILD_OF":
            parent = _span_id(ref.get("spanID"))
            break
    code = _text(tags.get("otel.status_code")).upper()
    if not code and tags.get("error") is True:
        code = "ERROR"
    events = []
    for log in _list(at, "logs", span.get("logs")):
        fields = _jaeger_tags(at, _object(at, "log", log).get("fields"))
        event_name = _text(fields.pop("event", None))
        events.append(SpanEvent(event_name, fields))
    attributes = {k: v for k, v in tags.items() if k not in _JAEGER_STATUS_TAGS and k not in _JAEGER_META_TAGS}
    return AuditSpan(
        trace_id=_span_id(span.get("traceID") or trace_id) or "",
        span_id=_span_id(span.get("spanID")) or "",
        parent_span_id=parent,
        name=_text(span.get("operationName")),
        attributes=attributes,
        events=tuple(events),
        status_code=code if code in ("OK", "ERROR") else "UNSET",
        status_message=_text(tags.get("otel.status_description")),
        service_name=str(service) if service is not None else None,
        resource_attributes=resource if resource is not None else {},
        scope={k: v for k, v in tags.items() if k in _JAEGER_META_TAGS and k != "span.kind"},
    )


def _jaeger_tags(at: str, raw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in _list(at, "tags", raw):
        tag = _object(at, "tag", item)
        if tag.get("value") is not None:
            out[_text(tag.get("key"))] = tag.get("value")
    return out


# --- Phoenix REST spans ---------------------------------------------------------------------


def _phoenix_span(at: str, span: dict[str, Any]) -> AuditSpan:
    """One span as ``GET /v1/projects/{project}/spans`` returns it: flat attribute keys, values
    possibly nested or null, OpenInference attributes Phoenix derived from ``gen_ai.*`` included."""
    context = _object(at, "context", span.get("context"))
    attributes = _object(at, "attributes", span.get("attributes") or {})
    events = tuple(
        SpanEvent(_text(ev.get("name")), _non_null(_object(at, "event attributes", ev.get("attributes") or {})))
        for ev in (_object(at, "event", e) for e in _list(at, "events", span.get("events")))
    )
    code = _text(span.get("status_code")).upper()
    return AuditSpan(
        trace_id=_span_id(context.get("trace_id")) or "",
        span_id=_span_id(context.get("span_id")) or "",
        parent_span_id=_span_id(span.get("parent_id")),
        name=_text(span.get("name")),
        attributes=_non_null(attributes),
        events=events,
        status_code=code if code in ("OK", "ERROR") else "UNSET",
        status_message=_text(span.get("status_message")),
    )


def _non_null(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in attributes.items() if v is not None}


# --- shared helpers ---------------------------------------------------------------------------


def _text(value: Any) -> str:
    """A string field as text; an absent or explicit-null one (Phoenix writes those) as ""."""
    return "" if value is None else str(value)


def _first(obj: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _list(at: str, what: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AuditInputError(f"{at}{what} is {_json_type(value)}, expected an array")
    return value


def _object(at: str, what: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AuditInputError(f"{at}{what} is {_json_type(value)}, expected an object")
    return value


_HEX: Final = re.compile(r"[0-9a-fA-F]+")


def _span_id(value: Any) -> str | None:
    """Hex (OTLP JSON, Jaeger) or base64 (protobuf JSON mapping) id -> lowercase hex; None if empty."""
    if not value or not isinstance(value, str):
        return None
    if len(value) % 2 == 0 and _HEX.fullmatch(value):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return value


# --------------------------------------------------------------------------------- auditing


def audit_spans(
    spans: Iterable[AuditSpan], *, secrets: Sequence[str] = (), builtin_patterns: bool = True
) -> tuple[list[ToolCall], list[Leak]]:
    """The tool calls (``execute_tool`` spans, with their ledger) and the leaks among ``spans``.

    Every value is checked as text (numbers and booleans too: a secret card number exported as
    an ``intValue``), the span's resource and scope included (once each, reported with the first
    of their spans); values the report prints (tool names, ids, ledger values, span names) are
    masked wherever a secret or a pattern matches in them, so the report never spreads one."""
    patterns = [(n, re.compile(p)) for n, p in BUILTIN_SECRET_PATTERNS.items()] if builtin_patterns else []
    needles = [s for s in dict.fromkeys(secrets) if s]
    tool_calls: list[ToolCall] = []
    leaks: list[Leak] = []
    checked: set[int] = set()  # the resources and scopes already checked (shared dicts, by identity)
    for span in spans:
        is_tool_call = span.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.OP_EXECUTE_TOOL
        if is_tool_call and not is_mcp_server_call(span):  # an MCP server's tools/call is the same call's other side
            tool_calls.append(_masked_call(_tool_call(span), needles, patterns))
        seen: set[tuple[str, str]] = set()
        name = _masked(span.name, needles, patterns)
        for where, text in _span_texts(span, checked):
            for finding in scan_text(text, secrets=needles, patterns=patterns):
                if (where, finding.kind) in seen:
                    continue
                seen.add((where, finding.kind))
                where_shown = _masked(where, needles, patterns)
                leaks.append(Leak(span.trace_id, span.span_id, name, where_shown, finding.kind, _mask(finding.match)))
    return tool_calls, leaks


_MCP_METHOD: Final = "mcp.method.name"
_MCP_TOOLS_CALL: Final = "tools/call"


def is_mcp_server_call(span: AuditSpan) -> bool:
    """An MCP server's span of one ``tools/call`` request: ``mcp.method.name`` = ``tools/call`` and
    the name the MCP conventions give a server span, ``tools/call {tool}`` (the ``mcp`` SDK's and
    FastMCP's; the SDK's also says ``gen_ai.operation.name`` = ``execute_tool``). The agent's own
    span of that call is ``execute_tool {tool}`` (with the same MCP attributes)."""
    name = span.name
    return span.attributes.get(_MCP_METHOD) == _MCP_TOOLS_CALL and (
        name == _MCP_TOOLS_CALL or name.startswith(_MCP_TOOLS_CALL + " ")
    )


def mcp_server_calls(
    spans: Sequence[AuditSpan],
    tool_calls: Sequence[ToolCall],
    *,
    secrets: Sequence[str] = (),
    builtin_patterns: bool = True,
) -> list[McpServerCall]:
    """The MCP servers' ``tools/call`` spans among ``spans``, each with the agent's tool call (of
    ``tool_calls``) it continues: the first ``execute_tool`` span up its parent chain (through the
    server's HTTP span and the client's, where there are)."""
    patterns = [(n, re.compile(p)) for n, p in BUILTIN_SECRET_PATTERNS.items()] if builtin_patterns else []
    needles = [s for s in dict.fromkeys(secrets) if s]
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    agent_calls = {(c.trace_id, c.span_id) for c in tool_calls}
    found: list[McpServerCall] = []
    for span in spans:
        if not is_mcp_server_call(span):
            continue
        continues = None
        parent, hops = span.parent_span_id, 0
        while parent is not None and hops < 64:
            if (span.trace_id, parent) in agent_calls:
                continues = parent
                break
            above = by_id.get((span.trace_id, parent))
            parent, hops = (above.parent_span_id if above is not None else None), hops + 1
        error_type = span.attributes.get(semconv.ERROR_TYPE)
        tool_name = span.attributes.get(semconv.GEN_AI_TOOL_NAME) or span.name.removeprefix(_MCP_TOOLS_CALL).strip()
        service = span.service_name
        found.append(
            McpServerCall(
                trace_id=span.trace_id,
                span_id=span.span_id,
                tool_name=_masked(str(tool_name), needles, patterns),
                service_name=_masked(service, needles, patterns) if service is not None else None,
                status="error" if span.status_code == "ERROR" or error_type is not None else "ok",
                error_type=_masked(str(error_type), needles, patterns) if error_type is not None else None,
                continues=continues,
            )
        )
    return found


def _masked(text: str, needles: Sequence[str], patterns: Sequence[tuple[str, re.Pattern[str]]]) -> str:
    """``text`` as the report may print it: each given secret and each pattern match masked."""
    for needle in needles:
        if needle in text:
            text = text.replace(needle, _mask(needle))
    for _, pattern in patterns:
        text = pattern.sub(lambda m: _mask(m.group(0)), text)
    return text


def _masked_value(value: Any, needles: Sequence[str], patterns: Sequence[tuple[str, re.Pattern[str]]]) -> Any:
    if isinstance(value, str):
        return _masked(value, needles, patterns)
    if isinstance(value, list | tuple):
        return [_masked_value(v, needles, patterns) for v in value]
    if isinstance(value, Mapping):
        return {_masked(str(k), needles, patterns): _masked_value(v, needles, patterns) for k, v in value.items()}
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        text = _scalar_text(value)
        shown = _masked(text, needles, patterns)
        return value if shown == text else shown
    return value


def _masked_call(call: ToolCall, needles: Sequence[str], patterns: Sequence[tuple[str, re.Pattern[str]]]) -> ToolCall:
    def mask(text: str | None) -> str | None:
        return None if text is None else _masked(text, needles, patterns)

    return dataclasses.replace(
        call,
        tool_name=_masked(call.tool_name, needles, patterns),
        call_id=mask(call.call_id),
        error_type=mask(call.error_type),
        end_reason=mask(call.end_reason),
        agent_name=mask(call.agent_name),
        ledger={_masked(k, needles, patterns): _masked_value(v, needles, patterns) for k, v in call.ledger.items()},
    )


def _tool_call(span: AuditSpan) -> ToolCall:
    attrs = span.attributes
    ledger = {k: _ledger_value(v) for k, v in sorted(attrs.items()) if k.startswith(_LEDGER_PREFIX)}
    error_type = attrs.get(semconv.ERROR_TYPE)
    end_reason = attrs.get(semconv.FLOWRA_END_REASON)
    call_id = attrs.get(semconv.GEN_AI_TOOL_CALL_ID)
    agent = attrs.get(semconv.GEN_AI_AGENT_NAME)
    tool_name = attrs.get(semconv.GEN_AI_TOOL_NAME) or span.name.removeprefix(semconv.OP_EXECUTE_TOOL).strip()
    return ToolCall(
        trace_id=span.trace_id,
        span_id=span.span_id,
        tool_name=str(tool_name),
        call_id=str(call_id) if call_id is not None else None,
        status="error" if span.status_code == "ERROR" or error_type is not None else "ok",
        error_type=str(error_type) if error_type is not None else None,
        end_reason=str(end_reason) if end_reason is not None else None,
        agent_name=str(agent) if agent is not None else None,
        ledger=ledger,
    )


def _ledger_value(value: Any) -> Any:
    """Jaeger carries array attributes as JSON text: give the ledger's lists back their shape."""
    if isinstance(value, str) and value.startswith("["):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(decoded, list):
            return decoded
    return value


def _span_texts(span: AuditSpan, checked: set[int] | None = None) -> Iterator[tuple[str, str]]:
    """(where, text) for every value a span carries, as text (`scan_text` looks inside encoded
    ones): name, attributes (keys too), events, links, status, and its resource and scope the
    first time they are seen (``checked``: the ids of those already seen)."""
    yield "span name", span.name
    yield from _attribute_texts("attribute", span.attributes)
    for event in span.events:
        yield f"event {event.name}", event.name
        yield from _attribute_texts(f"event {event.name} attribute", event.attributes)
    for link in span.link_attributes:
        yield from _attribute_texts("link attribute", link)
    if span.status_message:
        yield "status message", span.status_message
    seen = checked if checked is not None else set()
    if span.resource_attributes and id(span.resource_attributes) not in seen:
        seen.add(id(span.resource_attributes))
        yield from _attribute_texts("resource attribute", span.resource_attributes)
    if span.scope and id(span.scope) not in seen:
        seen.add(id(span.scope))
        for key, value in span.scope.items():
            if key == "attributes" and isinstance(value, Mapping):
                yield from _attribute_texts("scope attribute", value)
            else:
                for text in _strings(value):
                    yield f"scope {key}", text


def _attribute_texts(where: str, attributes: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key, value in attributes.items():
        yield f"{where} key", str(key)
        for text in _strings(value):
            yield f"{where} {key}", text


def _strings(value: Any) -> Iterator[str]:
    """Every value, as text, in a value as a backend returned it (nested objects and arrays
    walked, keys included; numbers and booleans as their text; explicit nulls carry nothing).
    Encoded text inside is `scan_text`'s business."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif value is not None:
        yield _scalar_text(value)


def _scalar_text(value: Any) -> str:
    """A number or boolean as the text a secret would be compared with (``true``, ``42``, ``1.5``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value))  # a card number exported as a double: 4111111111111111.0
    return str(value)


def _mask(secret: str) -> str:
    keep = 4 if len(secret) >= 12 else 1
    return f"{secret[:keep]}…[{len(secret)} chars]"


def audit_file(path: str | Path, *, secrets: Sequence[str] = (), builtin_patterns: bool = True) -> AuditReport:
    """Load and audit one export file.

    Raises:
        AuditInputError: see `load_traces`.
    """
    fmt, spans = load_traces(path)
    return _report(str(path), fmt, spans, secrets=secrets, builtin_patterns=builtin_patterns)


def audit_phoenix(
    url: str,
    project: str,
    *,
    since: datetime.datetime | None = None,
    secrets: Sequence[str] = (),
    builtin_patterns: bool = True,
    timeout: float = 30.0,
) -> AuditReport:
    """Audit what a running Phoenix holds for ``project`` (spans started at or after ``since``),
    read through its REST API, so what is checked is what its UI and API give out.

    Raises:
        AuditInputError: Phoenix unreachable or answering an error, no such project, or no span.
    """
    spans = fetch_phoenix_spans(url, project, since=since, timeout=timeout)
    where = f"{shown_url(url).rstrip('/')} project {project!r}" + (f" since {since.isoformat()}" if since else "")
    if not spans:
        raise AuditInputError(f"{where}: no spans (nothing to audit)")
    return _report(where, "phoenix-json", spans, secrets=secrets, builtin_patterns=builtin_patterns)


def fetch_phoenix_spans(
    url: str, project: str, *, since: datetime.datetime | None = None, timeout: float = 30.0
) -> list[AuditSpan]:
    """Every span of ``project`` from ``GET /v1/projects/{project}/spans``, all pages.

    ``PHOENIX_API_KEY``, when set, is sent as a bearer token (Phoenix with authentication on),
    never to another origin on a redirect, and never after a redirect from https (``same_origin_http``).
    """
    base = _phoenix_base(url)
    headers = {"Accept": "application/json"}
    api_key = os.environ.get("PHOENIX_API_KEY")
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    at = f"{base} project {project!r}: "
    spans: list[AuditSpan] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        query: dict[str, str | int] = {"limit": _PAGE_SIZE}
        if since is not None:
            query["start_time"] = since.isoformat()
        if cursor:
            query["cursor"] = cursor
        address = f"{base}/v1/projects/{urllib.parse.quote(project, safe='')}/spans?{urllib.parse.urlencode(query)}"
        page = _get_json(address, headers, timeout, at)
        if not isinstance(page, dict) or not isinstance(page.get("data"), list):
            raise AuditInputError(f"{at}not a Phoenix spans answer (no data array)")
        for item in page["data"]:
            spans.append(_phoenix_span(at, _object(at, "span", item)))
        cursor = page.get("next_cursor")
        if not cursor:
            return spans
    raise AuditInputError(f"{at}more than {_MAX_PAGES * _PAGE_SIZE} spans: narrow it with --since")


_PAGE_SIZE: Final = 1000
_MAX_PAGES: Final = 1000


def _phoenix_base(url: str) -> str:
    """``--phoenix URL`` as the base of the API's addresses: http or https, no user info, query
    or fragment (the key goes in ``PHOENIX_API_KEY``; a message shows the URL without them).

    Whitespace around it (a copy-paste's, a shell variable's newline) is dropped; whitespace or a
    control character inside it is refused, never dropped: parsers disagree on it (``urlsplit``
    deletes a tab or newline, so ``h<TAB>x.com`` would be ``hx.com`` to one and not to another)."""
    url = url.strip(_ASCII_WHITESPACE)
    shown = shown_url(url)
    if any(c.isspace() or not c.isprintable() for c in url):
        raise AuditInputError(f"--phoenix {shown!r}: the URL holds whitespace or a control character")
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in ("http", "https"):
        raise AuditInputError(f"--phoenix {shown!r}: give Phoenix's http:// or https:// URL")
    hidden = hidden_parts(url)
    if hidden:
        raise AuditInputError(
            f"--phoenix {shown!r}: the URL holds {' and '.join(hidden)}; give the base URL alone "
            "(an API key goes in PHOENIX_API_KEY)"
        )
    return url.rstrip("/")


_ASCII_WHITESPACE: Final = " \t\n\r\f\v"


def _get_json(address: str, headers: Mapping[str, str], timeout: float, at: str) -> Any:
    request = urllib.request.Request(address, headers=dict(headers))
    try:
        with open_url(request, timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:200].decode("utf-8", "replace").strip()
        what = "no such project" if exc.code == 404 else f"HTTP {exc.code}"
        raise AuditInputError(f"{at}{what}{': ' + detail if detail else ''}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AuditInputError(f"{at}cannot reach Phoenix: {reason}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise AuditInputError(f"{at}the answer is not JSON") from None


def parse_since(text: str, *, now: datetime.datetime | None = None) -> datetime.datetime:
    """``--since``: an ISO 8601 time (UTC when it has no offset) or a duration back from now
    (``90s``, ``30m``, ``2h``, ``7d``)."""
    match = _DURATION.fullmatch(text.strip())
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        seconds = amount * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
        return (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(seconds=seconds)
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise AuditInputError(
            f"--since {text!r}: expected an ISO 8601 time (2026-11-23T10:00:00Z) or a duration (30m, 2h, 7d)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


_DURATION: Final = re.compile(r"(\d+)([smhd])")


def _report(
    where: str, fmt: str, spans: Sequence[AuditSpan], *, secrets: Sequence[str], builtin_patterns: bool
) -> AuditReport:
    tool_calls, leaks = audit_spans(spans, secrets=secrets, builtin_patterns=builtin_patterns)
    servers = mcp_server_calls(spans, tool_calls, secrets=secrets, builtin_patterns=builtin_patterns)
    return AuditReport(
        path=where,
        format=fmt,
        trace_count=len({s.trace_id for s in spans}),
        span_count=len(spans),
        tool_calls=tuple(tool_calls),
        leaks=tuple(leaks),
        patterns=tuple(BUILTIN_SECRET_PATTERNS) if builtin_patterns else (),
        given_secrets=len([s for s in dict.fromkeys(secrets) if s]),
        mcp_server_calls=tuple(servers),
    )


# --------------------------------------------------------------------------------- output


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):  # NaN and infinities too: "nan", "inf"
        return str(value)
    return json.dumps(value, ensure_ascii=False)


_FORMAT_LABELS: Final = {
    "otlp-json": "OTLP JSON",
    "jaeger-json": "Jaeger JSON",
    "phoenix-json": "Phoenix spans",
    "phoenix-otlp-json": "Phoenix OTLP spans",
}


def render_text(report: AuditReport) -> str:
    label = _FORMAT_LABELS.get(report.format, report.format)
    lines = [
        f"flowra-otel audit: {report.path} ({label}: {report.trace_count} trace(s), {report.span_count} span(s))",
        "",
        f"tool calls: {len(report.tool_calls)}",
    ]
    for call in report.tool_calls:
        status = call.status
        if call.error_type:
            status += f" ({call.error_type})"
        if call.end_reason:
            status += f" end_reason={call.end_reason}"
        lines.append(
            f"  {call.tool_name}  call_id={call.call_id or '-'}  status={status}"
            f"  trace_id={call.trace_id}  span_id={call.span_id}"
        )
        if call.ledger:
            lines.append("    redaction ledger:")
            lines.extend(f"      {key} = {_format_value(value)}" for key, value in call.ledger.items())
        else:
            lines.append("    redaction ledger: none (no hook changed the arguments or the result)")
    if report.mcp_server_calls:
        lines += [
            "",
            f"MCP server spans: {len(report.mcp_server_calls)} (servers' side of the MCP tool calls above)",
        ]
        for server in report.mcp_server_calls:
            status = server.status + (f" ({server.error_type})" if server.error_type else "")
            continues = f"span_id={server.continues}" if server.continues else "none (a trace of its own)"
            lines.append(
                f"  {server.tool_name}  service={server.service_name or '-'}  status={status}  continues={continues}"
                f"  trace_id={server.trace_id}  span_id={server.span_id}"
            )
    lines.append("")
    checked = f"{len(report.patterns)} built-in pattern(s), {report.given_secrets} given secret(s)"
    if report.clean:
        lines.append(f"leaks: none found (checked {checked})")
        lines.append("result: clean")
    else:
        lines.append(f"leaks: {len(report.leaks)} (checked {checked})")
        lines.extend(
            f"  LEAK {leak.kind}: span {leak.span_name!r} (trace_id={leak.trace_id} span_id={leak.span_id})"
            f" {leak.where}: {leak.preview}"
            for leak in report.leaks
        )
        lines.append(f"result: LEAK ({len(report.leaks)} finding(s))")
    return "\n".join(lines) + "\n"


def render_json(report: AuditReport) -> str:
    document = {
        "file": report.path,
        "format": report.format,
        "traces": report.trace_count,
        "spans": report.span_count,
        "patterns": list(report.patterns),
        "given_secrets": report.given_secrets,
        "tool_calls": [dataclasses.asdict(call) for call in report.tool_calls],
        "mcp_server_calls": [dataclasses.asdict(server) for server in report.mcp_server_calls],
        "leaks": [dataclasses.asdict(leak) for leak in report.leaks],
        "clean": report.clean,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", help="exported traces: OTLP JSON (lines), Jaeger JSON or Phoenix span JSON")
    parser.add_argument(
        "--phoenix", metavar="URL", help="audit a running Phoenix instead of a file, e.g. http://127.0.0.1:6006"
    )
    parser.add_argument("--project", metavar="NAME", help="the Phoenix project to read (with --phoenix)")
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="with --phoenix: only spans started since WHEN, an ISO 8601 time or a duration back (30m, 2h, 7d)",
    )
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="S",
        help="an exact string that must not appear in any span (repeatable)",
    )
    parser.add_argument(
        "--secrets-file",
        metavar="F",
        help=(
            "a file of such strings, one per line (blank lines and lines starting with # are skipped; "
            "UTF-8, or UTF-16/32 with a byte order mark)"
        ),
    )
    parser.add_argument(
        "--no-builtin-patterns",
        action="store_true",
        help="do not look for the built-in secret shapes (API keys, bearer tokens, e-mails, card numbers)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


def _read_secrets(path: str) -> list[str]:
    """One secret a line, as any editor saves them (``text_input.read_text_file``: UTF-8, UTF-16 or
    UTF-32, with or without a byte order mark, else refused; LF, CRLF or CR line ends).
    Each is stripped of surrounding whitespace (an editor's trailing space would otherwise make
    the secret never match; a stripped secret matches wherever the unstripped one would)."""
    try:
        text = read_text_file(path)
    except FileNotFoundError:
        raise AuditInputError(f"{path}: no such secrets file") from None
    except (OSError, UnreadableTextError) as exc:
        raise AuditInputError(f"{path}: cannot read the secrets file: {exc}") from None
    lines = (line.strip() for line in _LINE_BREAK.split(text))
    return [line for line in lines if line and not line.startswith("#")]


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """The ``audit`` subcommand; returns the exit status."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        secrets = list(args.secret)
        if any(not s for s in secrets):
            raise AuditInputError("--secret must not be empty")
        if any(utf8_safe(s) != s for s in secrets):  # lone surrogates: bytes the locale could not decode
            raise AuditInputError("--secret holds bytes that are not valid UTF-8 (the locale could not decode them)")
        if args.secrets_file:
            secrets.extend(_read_secrets(args.secrets_file))
        builtin = not args.no_builtin_patterns
        if args.phoenix:
            if args.file:
                raise AuditInputError("give a FILE or --phoenix URL, not both")
            if not args.project:
                raise AuditInputError("--phoenix needs --project NAME (Phoenix's default project is 'default')")
            since = parse_since(args.since) if args.since else None
            report = audit_phoenix(args.phoenix, args.project, since=since, secrets=secrets, builtin_patterns=builtin)
        else:
            if not args.file:
                raise AuditInputError("nothing to audit: give a FILE, or --phoenix URL --project NAME")
            if args.project or args.since:
                raise AuditInputError("--project and --since go with --phoenix URL")
            report = audit_file(args.file, secrets=secrets, builtin_patterns=builtin)
    except AuditInputError as exc:
        err.write(f"flowra-otel audit: error: {exc}\n")
        return EXIT_BAD_INPUT
    out.write(render_json(report) if args.json else render_text(report))
    return report.exit_code
