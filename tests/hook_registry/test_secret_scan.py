"""The leak scanner finds a secret however a span encodes it, truncated JSON included.

Each case is paired with ``json_only_scan``, the strategy ``find_leaks`` and ``audit`` used before
``flowra_otel.secret_scan`` (the raw text, plus the strings of text that parses as JSON): it
misses every secret below, so these tests fail on the old scanner and pass on the new one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flowra.agent import HookRegistry
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.__main__ import main
from flowra_otel.core import semconv
from flowra_otel.core.content import BUILTIN_SECRET_PATTERNS
from flowra_otel.core.secret_scan import MAX_LAYERS, json_unescape, scan_text, text_views
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)
from tests.hook_registry.test_audit_command import otlp_json_from_spans

PEM_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
"""Newlines: JSON-escaped as ``\\n`` in every content attribute."""
PASSWORD = 'hunter2"\\pässword'
"""A quote, a backslash and a non-ASCII letter: all escaped in JSON."""
FILLER = "lorem ipsum " * 120
MAX_LENGTH = 700
"""The SDK's attribute length limit: cuts the second chat's input messages after both secrets, in
the filler, with no marker: invalid JSON."""


def json_only_scan(text: str, secret: str) -> bool:
    """The old strategy: the raw text, and the strings of text that parses as JSON (recursively)."""

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
            stripped = value.strip()
            if stripped[:1] in ("{", "[", '"'):
                try:
                    yield from strings(json.loads(stripped))
                except ValueError:
                    return
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from strings(key)
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    return any(secret in s for s in strings(text))


def read_credentials(name: str) -> str:
    """Read a credential file."""
    return f"{name}: key {PEM_KEY} password {PASSWORD} {FILLER}"


# ------------------------------------------------------------------------------------ scan_text
@pytest.mark.parametrize("secret", [PEM_KEY, PASSWORD, "plain-secret-42"])
def test_a_secret_in_a_truncated_json_document_is_found(secret: str) -> None:
    document = json.dumps([{"role": "tool", "parts": [{"type": "text", "content": f"x {secret} {FILLER}"}]}])
    cut = document[: document.index("lorem") + 40] + "…[flowra_otel: truncated 1000 of 2000 chars]"
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut)
    (finding,) = scan_text(cut, secrets=[secret])
    assert (finding.kind, finding.index, finding.match) == ("given_secret", 0, secret)
    escaped = json.dumps(secret)[1:-1] != secret
    assert finding.decoded is escaped
    assert json_only_scan(cut, secret) is not escaped  # the old scanner only found the unescaped one


def test_a_doubly_escaped_secret_in_a_cut_document_is_found() -> None:
    """A JSON tool result inside JSON messages, then cut: the secret is escaped twice."""
    inner = json.dumps({"password": PASSWORD, "note": FILLER})
    outer = json.dumps([{"role": "tool", "parts": [{"type": "tool_call_response", "response": inner}]}])
    cut = outer[: outer.index("lorem") + 10]
    assert not json_only_scan(cut, PASSWORD)
    (finding,) = scan_text(cut, secrets=[PASSWORD])
    assert finding.decoded


def test_builtin_patterns_are_matched_in_every_view() -> None:
    email = "alice@example.com"
    cut = json.dumps({"note": f"mail {email}\n{FILLER}"})[:80].replace("@", "\\u0040")
    patterns = [(name, re.compile(p)) for name, p in BUILTIN_SECRET_PATTERNS.items()]
    assert "@" not in cut
    assert [(f.kind, f.match, f.decoded) for f in scan_text(cut, patterns=patterns)] == [("email", email, True)]


def test_json_unescape_undoes_every_json_escape_and_keeps_invalid_ones() -> None:
    assert json_unescape(r"a\"b\\c\/d\n\t\r\b\f\u00e9\ud83d\ude00 \x \u12") == 'a"b\\c/d\n\t\r\b\fé\U0001f600 \\x \\u12'
    assert json_unescape("no escapes") == "no escapes"
    assert json_unescape("trailing \\") == "trailing \\"


def test_views_are_bounded_for_deeply_nested_encodings() -> None:
    text = "s3cr3t"
    for _ in range(MAX_LAYERS + 3):
        text = json.dumps(text)[:-1]  # escaped again each time, and never valid JSON
    views = list(text_views(text))
    assert len(views) <= MAX_LAYERS + 1
    assert views[0] == (text, False)


def test_nothing_is_found_where_nothing_is() -> None:
    assert scan_text(json.dumps({"a": "b\n" + FILLER})[:100], secrets=[PASSWORD, PEM_KEY]) == []


# ------------------------------------------------------------------------------------ real spans
@pytest.fixture
async def truncated_spans(meter_provider: Any, span_exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """A real run whose tool returns both secrets, recorded with content on, its attributes cut by
    the SDK's ``max_attribute_length`` (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``), which cuts any
    string: the plugin keeps its own attributes valid JSON, but a backend may still get them cut."""
    tracer_provider = TracerProvider(span_limits=SpanLimits(max_attribute_length=MAX_LENGTH))
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    registry = HookRegistry()
    registry.add(OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True))
    provider = ScriptedProvider(
        [tool_calls_response([("c1", "read_credentials", {"name": "prod"})]), text_response("Done.")]
    )
    try:
        async with tool_registry(read_credentials) as tools:
            await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Read the prod credentials.")
    finally:
        tracer_provider.shutdown()
    return sorted(span_exporter.get_finished_spans(), key=lambda s: s.start_time or 0)


def second_chat_input(spans: list[ReadableSpan]) -> str:
    chat = [s for s in spans if s.name.startswith("chat ")][1]
    value = (chat.attributes or {})[semconv.GEN_AI_INPUT_MESSAGES]
    assert isinstance(value, str)
    return value


@pytest.mark.semconv_exempt  # the SDK's attribute cut breaks the JSON on purpose here
@pytest.mark.parametrize("secret", [PEM_KEY, PASSWORD])
async def test_find_leaks_reports_a_secret_inside_a_truncated_attribute(
    truncated_spans: list[ReadableSpan], secret: str
) -> None:
    messages = second_chat_input(truncated_spans)
    assert len(messages) == MAX_LENGTH  # the premise: the attribute was cut and is no JSON any more
    with pytest.raises(json.JSONDecodeError):
        json.loads(messages)
    assert json.dumps(secret, ensure_ascii=False)[1:-1] in messages  # cut after the secret, JSON-escaped
    assert secret not in messages
    assert not json_only_scan(messages, secret)  # what the old find_leaks missed

    places = {(leak.span_name.split()[0], leak.where, leak.decoded) for leak in find_leaks(truncated_spans, [secret])}
    assert ("chat", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}", True) in places
    with pytest.raises(AssertionError, match=rf"attribute {re.escape(semconv.GEN_AI_INPUT_MESSAGES)} contains"):
        assert_no_leak(truncated_spans, [secret], allowed=[f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"])


@pytest.mark.semconv_exempt  # the SDK's attribute cut breaks the JSON on purpose here
async def test_audit_reports_a_secret_inside_a_truncated_attribute(
    truncated_spans: list[ReadableSpan], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(otlp_json_from_spans(truncated_spans)) + "\n", encoding="utf-8")
    code = main(["audit", str(path), "--no-builtin-patterns", "--secret", PASSWORD, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    places = {(leak["span_name"].split()[0], leak["where"]) for leak in report["leaks"]}
    assert ("chat", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}") in places
    assert PASSWORD not in json.dumps(report, ensure_ascii=False)  # the report masks what it found
