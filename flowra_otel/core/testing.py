"""Test helpers for users of flowra-otel: prove that your redaction hooks keep secrets out of traces.

Why this exists: flowra-otel records tool arguments, tool results and messages only after every
hook has run, but whether *your* hooks really remove what they should (every channel, every
registration order, every error path) is something only your own tests can show. These helpers
make that a one-liner on the spans of the OpenTelemetry SDK's ``InMemorySpanExporter``::

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from flowra_otel.testing import assert_no_leak

    ...  # run your agent with OtelHooks(tracer_provider=..., capture_content=True)
    assert_no_leak(exporter.get_finished_spans(), ["sk-test-123", "alice@example.com"])

Every place a span can carry a value is searched, as text: the span name, attribute keys and
values of every type (strings, numbers, booleans, arrays of them: a card number set as an int
attribute is found), event names and attributes, link attributes, the status description, the
resource attributes and the instrumentation scope. Content attributes are JSON
(``gen_ai.input.messages``...), where a secret may only appear escaped (``"pa\\"ss"``,
``"\\u00e9"``, a PEM key's ``\\n``, a JSON document inside a JSON string), media and bytes go
out as base64, and a truncated attribute is JSON no more: so each secret is searched for as plain
substrings, in every form it can take there (`secret_forms`: as is, JSON-escaped up to
``JSON_LAYERS`` strings deep, with or without ``\\u`` escapes, percent-encoded, base64 of its
UTF-8, UTF-16 or UTF-32 (either byte order) at each of its three alignments, Python-escaped).
Nothing is decoded or parsed, so a cut document is searched like a whole one.

Why not the audit's scanner (``flowra_otel.secret_scan``): these helpers are how the package's own
tests judge every safeguard, that scanner among them. Written apart from it, a scanner that stops
looking too early cannot make the tests that check it stop looking too.

Pair every ``assert_no_leak`` with a positive check (the redacted replacement *is* recorded):
a trace with no content at all also has no leak.

Content in events (``capture_content="event_only"`` / ``"span_and_event"``) travels as log
records: ``find_log_leaks`` / ``assert_no_log_leak`` search those the same way (event name,
body, every attribute key and every leaf of the structured values, resource and scope).
"""

from __future__ import annotations

import base64
import dataclasses
import fnmatch
import functools
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, quote_plus

from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["Leak", "assert_no_leak", "assert_no_log_leak", "find_leaks", "find_log_leaks", "secret_forms"]

JSON_LAYERS: Final = 4
"""How many JSON strings deep a secret's escaped form is looked for (a JSON document in a JSON
string in a JSON string...)."""
BASE64_FROM: Final = 12
"""Bytes a secret needs (in UTF-8) before its base64 forms are looked for (a shorter one's few
base64 characters would turn up in unrelated base64 by chance)."""
BASE64_ENCODINGS: Final = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
"""The encodings a secret's base64 forms are made of: bytes and media go out as base64 of what
they hold, and a document a tool read may be UTF-16 or UTF-32 (a BOM'd file: the recorder scrubs
its text, a hook may not, and with ``redact_secrets`` off it goes out as it is)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Leak:
    """One secret found in one place of one span."""

    span_name: str
    span_id: str
    """The span id as 16 hex digits (empty when the span has no context)."""
    where: str
    """``span name``, ``attribute <key>``, ``event <name> name``, ``event <name> attribute <key>``,
    ``link <index> attribute <key>``, ``status description``, ``resource attribute <key>``,
    ``instrumentation scope name`` / ``version`` / ``attribute <key>``, or ``... attribute key``
    (the secret is an attribute's key)."""
    secret_index: int
    """Position of the secret in the ``secrets`` given to ``find_leaks``."""
    secret: str = dataclasses.field(repr=False)
    decoded: bool = False
    """True when the secret was found only in an encoded form (JSON-escaped, base64...)."""

    def __str__(self) -> str:
        how = " (encoded)" if self.decoded else ""
        return f"span {self.span_name!r} [{self.span_id}]: {self.where} contains {_describe(self)}{how}"


def _describe(leak: Leak) -> str:
    """Which secret, without printing it whole into CI logs."""
    shown = f"{leak.secret[:4]}…" if len(leak.secret) >= 8 else "…"
    return f"secret #{leak.secret_index} ({shown!r}, {len(leak.secret)} chars)"


def _secrets(secrets: str | Iterable[str]) -> tuple[str, ...]:
    given: tuple[object, ...] = (secrets,) if isinstance(secrets, str) else tuple(secrets)
    values: list[str] = []
    for value in given:  # typed callers cannot get this wrong, untyped test code can
        if not isinstance(value, str):
            msg = f"secrets must be strings, got {type(value).__name__}"
            raise TypeError(msg)
        if not value:
            msg = "an empty secret would match everywhere"
            raise ValueError(msg)
        values.append(value)
    return tuple(values)


@functools.lru_cache(maxsize=256)
def secret_forms(secret: str) -> tuple[str, ...]:
    """Every text ``secret`` may be written as in an export or a log line, itself first: see the
    module docstring. Each form once; a plain substring search for them is the whole check."""
    forms: dict[str, None] = {secret: None}
    for ascii_only in (False, True):
        layer = secret
        for _ in range(JSON_LAYERS):
            layer = json.dumps(layer, ensure_ascii=ascii_only)[1:-1]
            forms.setdefault(layer, None)
    forms.setdefault(repr(secret)[1:-1], None)
    for encoded in (quote(secret, safe=""), quote(secret), quote_plus(secret)):
        forms.setdefault(encoded, None)
    if len(secret.encode("utf-8", "surrogatepass")) >= BASE64_FROM:
        for codec in BASE64_ENCODINGS:
            data = secret.encode(codec, "surrogatepass")
            for offset in range(3):
                for encode in (base64.b64encode, base64.urlsafe_b64encode):
                    forms.setdefault(_base64_core(encode, data, offset), None)
    return tuple(forms)


def _base64_core(encode: Any, data: bytes, offset: int) -> str:
    """The base64 characters that ``data`` alone decides when it starts ``offset`` bytes into a
    longer value (the characters it shares with its neighbours are left out)."""
    text: str = encode(b"\0" * offset + data + b"\0\0").decode("ascii")
    first = -(-8 * offset // 6)  # the first character made of the data's bits only
    last = (8 * (offset + len(data))) // 6  # one past the last such character
    return text[first:last]


def _find(text: str, secrets: Sequence[str]) -> Iterator[tuple[int, bool]]:
    """(secret index, found only in an encoded form) for each secret in ``text``."""
    for index, secret in enumerate(secrets):
        forms = secret_forms(secret)
        if forms[0] in text:
            yield index, False
        elif any(form in text for form in forms[1:]):
            yield index, True


def _attribute_texts(attributes: Mapping[str, Any] | None, prefix: str) -> Iterator[tuple[str, str]]:
    """Every key, and every value as text: strings, and numbers and booleans as the text a
    secret would be (a card number set as an int attribute is a leak too), in arrays as well."""
    for key, value in (attributes or {}).items():
        where = f"{prefix}attribute {key}"
        yield f"{prefix}attribute key", str(key)
        items = value if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray) else (value,)
        for item in items:
            yield where, _as_text(item)


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value))
    return str(value)


def _texts(span: ReadableSpan) -> Iterator[tuple[str, str]]:
    """(where, text) for every text a span carries."""
    yield "span name", span.name
    yield from _attribute_texts(span.attributes, "")
    for event in span.events:
        yield f"event {event.name} name", event.name
        yield from _attribute_texts(event.attributes, f"event {event.name} ")
    for index, link in enumerate(span.links):
        yield from _attribute_texts(link.attributes, f"link {index} ")
    description = span.status.description
    if description:
        yield "status description", description
    yield from _attribute_texts(span.resource.attributes, "resource ")
    scope = span.instrumentation_scope
    if scope is not None:
        yield "instrumentation scope name", scope.name
        if scope.version:
            yield "instrumentation scope version", scope.version
        yield from _attribute_texts(scope.attributes, "instrumentation scope ")


def find_leaks(spans: Iterable[ReadableSpan], secrets: str | Iterable[str]) -> list[Leak]:
    """Every place in ``spans`` where one of ``secrets`` appears (substring match), in span order.

    ``secrets``: the values that must not be exported (a single string counts as one secret).
    A secret is also found in its encoded forms (`secret_forms`: JSON-escaped, base64...).
    Raises ``ValueError`` for an empty secret and ``TypeError`` for a non-string one.
    """
    values = _secrets(secrets)
    leaks: list[Leak] = []
    for span in spans:
        span_id = format(span.context.span_id, "016x") if span.context is not None else ""
        seen: set[tuple[str, int]] = set()
        for where, text in _texts(span):
            for index, decoded in _find(text, values):
                if (where, index) in seen:  # one entry per place, also for string arrays
                    continue
                seen.add((where, index))
                leaks.append(Leak(span.name, span_id, where, index, values[index], decoded))
    return leaks


def assert_no_leak(spans: Iterable[ReadableSpan], secrets: str | Iterable[str], *, allowed: Iterable[str] = ()) -> None:
    """Fail with every place a secret was found; pass silently otherwise.

    ``allowed``: ``fnmatch`` patterns of ``Leak.where`` values that may contain a secret, e.g.
    ``"attribute app.debug.*"``. Raises ``AssertionError`` listing span, place and secret,
    and also when ``spans`` is empty: a leak check on nothing usually means the exporter was
    not wired to the ``OtelHooks`` under test, and would pass for the wrong reason.
    """
    span_list = list(spans)
    if not span_list:
        msg = "assert_no_leak got no spans: is the exporter wired to the OtelHooks under test?"
        raise AssertionError(msg)
    patterns = tuple(allowed)
    leaks = [
        leak for leak in find_leaks(span_list, secrets) if not any(fnmatch.fnmatchcase(leak.where, p) for p in patterns)
    ]
    if leaks:
        lines = "\n".join(f"  - {leak}" for leak in leaks)
        msg = f"{len(leaks)} secret leak(s) in exported spans:\n{lines}"
        raise AssertionError(msg)


# ==================================================================================== log records
def _leaves(value: object, where: str) -> Iterator[tuple[str, str]]:
    """Every key and leaf of a structured log value (maps and lists nest), as text."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{where} key", str(key)
            yield from _leaves(item, where)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        for item in value:
            yield from _leaves(item, where)
    elif value is not None:
        yield where, _as_text(value)


def _log_texts(record: Any) -> Iterator[tuple[str, str]]:
    name = getattr(record, "event_name", None)
    if name:
        yield "event name", str(name)
    yield from _leaves(getattr(record, "body", None), "body")
    for key, value in (getattr(record, "attributes", None) or {}).items():
        yield "attribute key", str(key)
        yield from _leaves(value, f"attribute {key}")
    resource = getattr(record, "resource", None)
    resource_attributes = getattr(resource, "attributes", None) or getattr(record, "resource_attributes", None)
    for key, value in (resource_attributes or {}).items():
        yield "resource attribute key", str(key)
        yield from _leaves(value, f"resource attribute {key}")


def find_log_leaks(records: Iterable[Any], secrets: str | Iterable[str]) -> list[Leak]:
    """Every place in log ``records`` where one of ``secrets`` appears: the SDK's
    ``ReadableLogRecord`` (``InMemoryLogRecordExporter.get_finished_logs()``) or any record with
    ``event_name`` / ``body`` / ``attributes`` (a decoded OTLP record). A leak's ``span_name`` is
    ``log <event name>``, its ``span_id`` the record's span id."""
    values = _secrets(secrets)
    leaks: list[Leak] = []
    for item in records:
        record = getattr(item, "log_record", item)
        span_id = getattr(record, "span_id", None)
        sid = format(span_id, "016x") if isinstance(span_id, int) else str(span_id or "")
        name = f"log {getattr(record, 'event_name', None) or ''}".rstrip()
        texts = list(_log_texts(record))
        resource = getattr(item, "resource", None)  # the SDK keeps the resource beside the record
        if resource is not None and resource is not getattr(record, "resource", None):
            texts += [(f"resource attribute {k}", _as_text(v)) for k, v in (resource.attributes or {}).items()]
        seen: set[tuple[str, int]] = set()
        for where, text in texts:
            for index, decoded in _find(text, values):
                if (where, index) not in seen:
                    seen.add((where, index))
                    leaks.append(Leak(name, sid, where, index, values[index], decoded))
    return leaks


def assert_no_log_leak(records: Iterable[Any], secrets: str | Iterable[str]) -> None:
    """``AssertionError`` listing every place a secret appears in the log ``records`` (and when
    there are none: a check on nothing would pass for the wrong reason)."""
    record_list = list(records)
    if not record_list:
        msg = "assert_no_log_leak got no log records: is the logger provider wired to the OtelHooks under test?"
        raise AssertionError(msg)
    leaks = find_log_leaks(record_list, secrets)
    if leaks:
        raise AssertionError("secrets in log records:\n" + "\n".join(str(leak) for leak in leaks))
