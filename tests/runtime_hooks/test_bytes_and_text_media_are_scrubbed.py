"""Bytes that are not opaque media are content: scrubbed before they are recorded (flowra 0.0.86+).

On this line a tool's own ``bytes`` reach the model as base64 text (flowra's ``format_result``),
and that text is what is recorded (``test_hostile_input``). Bytes still reach the plugin as bytes
in two places, and both are scrubbed like text (the old line's ``test_bytes_in_results_are_scrubbed``
covers bytes inside a tool's result there):

* a ``BeforeToolCallEvent`` hook that leaves ``bytes`` in the tool's arguments (a credentials file
  it attached): recorded as the text when UTF-8, else as base64 whose text goes through the
  scrubber, in ``gen_ai.tool.call.arguments`` and the response's ``tool_call`` part;
* a ``MediaBlock`` whose media type is text (``text/plain``, JSON, XML...): a document, not an
  image; its ``blob`` part still carries base64, but of the text scrubbed. Images stay as they are.
  The tool returns the files (flowra 0.0.89+); before 0.0.89 a tool's answer is text, and an
  ``AfterToolCallEvent`` hook attaches them as the tool's result instead (the same blocks reach
  the model, and the plugin records them the same way). A document saved as UTF-16 or UTF-32 with
  its byte order mark is read in it and goes out as base64 of its scrubbed text's UTF-8; unscrubbed,
  ``find_leaks`` and ``flowra-otel audit`` find the key in its base64.

The paired negatives put the old rule back (every bytes leaf and every blob base64, unscrubbed)
and show the key leave in base64.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flowra.agent import Event
from flowra.lib.turn.hook_events import AfterToolCallEvent, BeforeToolCallEvent
from flowra.llm import MediaBlock, TextBlock, ToolResultBlock
from flowra.tools import ToolResult, tool
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import bounded_json, semconv
from flowra_otel.core.audit import audit_file
from flowra_otel.export import OtlpJsonFileSpanExporter
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended
from tests.runtime_hooks.support import (
    HAS_RESULT_BLOCKS,
    HAS_TOOL_BLOCKS,
    CityParams,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    requires,
    run_chat,
    text_response,
    tool_calls_response,
)

MakeHooks = Callable[..., OtelHooks]

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
CREDENTIALS = f"[default]\naws_access_key_id = {AWS_KEY}\n".encode()
SCRUBBED = "[default]\naws_access_key_id = [REDACTED:api_key]\n"
PNG = b"\x89PNG\r\n\x1a\n" + AWS_KEY.encode()  # an image's bytes are opaque, whatever they hold


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def leak_places(exporter: InMemorySpanExporter, secret: str) -> set[tuple[str, str]]:
    return {(leak.span_name, leak.where) for leak in find_leaks(exporter.get_finished_spans(), [secret])}


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return sorted((s for s in exporter.get_finished_spans() if s.name == name), key=lambda s: s.start_time or 0)


# ------------------------------------------------------------------------------------ bytes in arguments
def attach_credentials(event: Event[BeforeToolCallEvent]) -> None:
    """A hook that attaches the credentials file to the call, as bytes."""
    tool_use = event.data.tool_use
    arguments = tool_use.input if isinstance(tool_use.input, dict) else {}
    event.data.tool_use = dataclasses.replace(tool_use, input={**arguments, "auth": CREDENTIALS})


async def run_with_attached_bytes(hooks: OtelHooks) -> None:
    provider = ScriptedProvider(tool_calls_response(("c1", "get_weather", {"city": "Oslo"})), text_response("Done."))
    runtime = chat_runtime(provider, get_weather)
    hooks.install(runtime)
    runtime.hooks.on(BeforeToolCallEvent, attach_credentials)
    await run_chat(runtime, "Weather?")


async def test_bytes_a_hook_leaves_in_the_arguments_are_scrubbed_as_text(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    await run_with_attached_bytes(make_otel_hooks(capture_content=True, redact_secrets=True))
    assert_all_ended(ledger, span_exporter)
    (tool,) = named(span_exporter, "execute_tool get_weather")
    arguments = {"city": "Oslo", "auth": SCRUBBED}
    assert json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == arguments
    first, second = named(span_exporter, "chat sonnet-4-5")
    (message,) = json.loads(attrs(first)[semconv.GEN_AI_OUTPUT_MESSAGES])
    history = json.loads(attrs(second)[semconv.GEN_AI_INPUT_MESSAGES])
    calls = [p["arguments"] for m in [message, *history] for p in m["parts"] if p["type"] == "tool_call"]
    assert calls == [arguments, arguments]
    assert_no_leak(span_exporter.get_finished_spans(), [AWS_KEY, b64(CREDENTIALS)])


async def test_without_scrubbing_bytes_the_attached_key_leaves_in_base64(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: ``Walk.data`` made ``Walk.binary`` (bytes base64, unscrubbed, as before)."""
    monkeypatch.setattr(bounded_json.Walk, "data", bounded_json.Walk.binary)
    await run_with_attached_bytes(make_otel_hooks(capture_content=True, redact_secrets=True))
    places = {
        (leak.span_name, leak.where) for leak in find_leaks(span_exporter.get_finished_spans(), [b64(CREDENTIALS)])
    }
    assert places == {
        ("execute_tool get_weather", f"attribute {semconv.GEN_AI_TOOL_CALL_ARGUMENTS}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_OUTPUT_MESSAGES}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),  # the call, in the next history
    }


# ------------------------------------------------------------------------------------ text media
def files_of(city: str) -> list[MediaBlock | TextBlock]:
    return [
        MediaBlock(data=CREDENTIALS, media_type="text/plain; charset=utf-8"),
        MediaBlock(data=PNG, media_type="image/png"),
        TextBlock(text=f"files of {city}"),
    ]


@tool("fetch_file")
async def fetch_file(params: CityParams) -> ToolResult:
    """Fetches the branch's config file and its floor plan."""
    if HAS_TOOL_BLOCKS:
        return ToolResult(content=files_of(params.city))
    return ToolResult(content=params.city)  # flowra 0.0.86 - 0.0.88: text; attach_files gives the files


def attach_files(event: Event[AfterToolCallEvent]) -> None:
    """Before flowra 0.0.89: the files reach the tool's result through a hook (the tool answers text)."""
    result = event.data.result
    event.data.result = ToolResultBlock(tool_use_id=result.tool_use_id, content=files_of(result.text))


async def run_with_media(hooks: OtelHooks) -> ScriptedProvider:
    provider = ScriptedProvider(tool_calls_response(("c1", "fetch_file", {"city": "Oslo"})), text_response("Done."))
    runtime = chat_runtime(provider, fetch_file)
    hooks.install(runtime)
    if not HAS_TOOL_BLOCKS:
        runtime.hooks.on(AfterToolCallEvent, attach_files)
    await run_chat(runtime, "Files?")
    return provider


def blobs(parts: list[dict[str, Any]]) -> dict[str, str]:
    return {p["mime_type"]: p["content"] for p in parts if p["type"] == "blob"}


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
async def test_text_media_is_scrubbed_inside_its_base64_and_images_are_not(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    provider = await run_with_media(make_otel_hooks(capture_content=True, redact_secrets=True))
    assert_all_ended(ledger, span_exporter)
    given = [b for m in provider.requests[1].messages for r in m.blocks for b in getattr(r, "content", None) or ()]
    assert [b.data for b in given if isinstance(b, MediaBlock)] == [CREDENTIALS, PNG]  # the model got both files
    (tool,) = named(span_exporter, "execute_tool fetch_file")
    result = json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT])
    history = json.loads(attrs(named(span_exporter, "chat sonnet-4-5")[1])[semconv.GEN_AI_INPUT_MESSAGES])
    (response,) = [p["response"] for m in history for p in m["parts"] if p["type"] == "tool_call_response"]
    expected = {"text/plain; charset=utf-8": b64(SCRUBBED.encode()), "image/png": b64(PNG)}
    assert blobs(result["content"]) == expected
    assert blobs(response) == expected
    assert_no_leak(span_exporter.get_finished_spans(), [b64(CREDENTIALS)])


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
async def test_without_scrubbing_text_media_the_key_leaves_in_base64(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: every media part base64 as it is (``Walk.media`` made ``Walk.binary``)."""
    monkeypatch.setattr(bounded_json.Walk, "media", lambda walk, data, textual: walk.binary(data))
    await run_with_media(make_otel_hooks(capture_content=True, redact_secrets=True))
    places = {
        (leak.span_name, leak.where) for leak in find_leaks(span_exporter.get_finished_spans(), [b64(CREDENTIALS)])
    }
    assert places == {
        ("execute_tool fetch_file", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
    }


# ------------------------------------------------------------------------------------ every text media type
CONFIG = f'{{"user": "deploy", "aws_access_key_id": "{AWS_KEY}", "notes": "{"n" * 300}"}}\n'.encode()
"""A text document with the key near its start and a long tail: a small budget cuts the tail."""
TEXT_MEDIA = [
    "application/json",
    "application/xml",
    "application/vnd.api+json",
    "application/atom+xml",
    "application/x-yaml",
    "text/csv",
    "application/javascript",
    "application/x-ndjson",
    "TEXT/HTML; charset=utf-8",
]
BUDGETS = {"within": 32_768, "over": 300, "unlimited": None}


def one_file(media_type: str) -> Callable[[str], list[MediaBlock | TextBlock]]:
    def files(city: str) -> list[MediaBlock | TextBlock]:
        return [MediaBlock(data=CONFIG, media_type=media_type), TextBlock(text=f"file of {city}")]

    return files


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
@pytest.mark.parametrize("budget", list(BUDGETS))
@pytest.mark.parametrize("media_type", TEXT_MEDIA)
async def test_every_text_media_type_is_scrubbed_within_over_and_without_a_budget(
    media_type: str,
    budget: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """JSON, XML, ``+json`` / ``+xml`` suffixes, YAML, CSV, JavaScript, NDJSON, any ``text/*``: a
    document, scrubbed inside its base64, whether the content fits the budget, is cut by it, or
    has none; the key is found in no form (raw, escaped, base64 at any alignment)."""
    monkeypatch.setitem(globals(), "files_of", one_file(media_type))
    hooks = make_otel_hooks(capture_content=True, redact_secrets=True, max_content_length=BUDGETS[budget])
    await run_with_media(hooks)
    (tool,) = named(span_exporter, "execute_tool fetch_file")
    result = attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT]
    assert media_type in result  # the blob part is there, under its own type
    assert_no_leak(span_exporter.get_finished_spans(), [AWS_KEY])
    if budget != "over":
        (blob,) = blobs(json.loads(result)["content"]).values()
        assert base64.b64decode(blob) == CONFIG.replace(AWS_KEY.encode(), b"[REDACTED:api_key]")


# ------------------------------------------------------------------------------------ a document that is not UTF-8
LATIN_CONFIG = f"[default]\naws_access_key_id = {AWS_KEY}\nowner = José\n".encode("cp1252")
"""A text document saved in Windows-1252 (its ``é`` is no UTF-8): the scrubber finds the key in it
read as text, each invalid byte a U+FFFD."""


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
async def test_a_text_document_that_is_not_utf8_is_scrubbed_and_still_base64(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blob part's content is base64 whatever it holds: the scrubbed text of such a document went
    out as plain text in the part (a backend decoding it got garbage or an error). Paired negative:
    that was the code before (``media`` handing the text of ``data`` on as it is); this test then
    fails to decode the part."""
    monkeypatch.setitem(globals(), "files_of", one_file("text/plain"))
    monkeypatch.setitem(globals(), "CONFIG", LATIN_CONFIG)
    await run_with_media(make_otel_hooks(capture_content=True, redact_secrets=True))
    (tool,) = named(span_exporter, "execute_tool fetch_file")
    (blob,) = blobs(json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT])["content"]).values()
    recorded = base64.b64decode(blob, validate=True).decode("utf-8")
    assert recorded == "[default]\naws_access_key_id = [REDACTED:api_key]\nowner = Jos\ufffd\n"
    assert_no_leak(span_exporter.get_finished_spans(), [AWS_KEY, b64(LATIN_CONFIG)])


# ------------------------------------------------------------------------------------ UTF-16 and UTF-32 documents
WIDE_CONFIG = f"id,user,aws_access_key_id\n1,deploy,{AWS_KEY}\n2,José,none\n"
"""A CSV a tool read as it was saved: UTF-16 or UTF-32 with a byte order mark (Excel's "Unicode
text", PowerShell 5's ``>``); read as UTF-8 it holds a NUL beside every ASCII character."""
WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]


def wide_document(codec: str) -> bytes:
    return ("\ufeff" + WIDE_CONFIG).encode(codec)


async def run_with_wide_document(hooks: OtelHooks, codec: str, media_type: str) -> ScriptedProvider:
    def files(city: str) -> list[MediaBlock | TextBlock]:
        return [MediaBlock(data=wide_document(codec), media_type=media_type), TextBlock(text=f"file of {city}")]

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(globals(), "files_of", files)
        return await run_with_media(hooks)


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
@pytest.mark.parametrize("media_type", ["text/csv", "application/json"])
@pytest.mark.parametrize("codec", WIDE)
async def test_a_utf16_or_utf32_document_is_scrubbed_and_recorded_as_base64_of_its_utf8(
    codec: str,
    media_type: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    """Read in the encoding its byte order mark names, scrubbed as text, recorded as base64 of the
    scrubbed text's UTF-8 (one encoding for every scrubbed text document a backend decodes). The
    model still gets the document as the tool read it."""
    hooks = make_otel_hooks(capture_content=True, redact_secrets=True)
    provider = await run_with_wide_document(hooks, codec, media_type)
    assert_all_ended(ledger, span_exporter)
    given = [b for m in provider.requests[1].messages for r in m.blocks for b in getattr(r, "content", None) or ()]
    assert [b.data for b in given if isinstance(b, MediaBlock)] == [wide_document(codec)]
    (tool,) = named(span_exporter, "execute_tool fetch_file")
    history = json.loads(attrs(named(span_exporter, "chat sonnet-4-5")[1])[semconv.GEN_AI_INPUT_MESSAGES])
    (response,) = [p["response"] for m in history for p in m["parts"] if p["type"] == "tool_call_response"]
    scrubbed = WIDE_CONFIG.replace(AWS_KEY, "[REDACTED:api_key]")
    for parts in (json.loads(attrs(tool)[semconv.GEN_AI_TOOL_CALL_RESULT])["content"], response):
        (blob,) = blobs(parts).values()
        assert base64.b64decode(blob, validate=True).decode("utf-8") == scrubbed
    assert_no_leak(span_exporter.get_finished_spans(), [AWS_KEY, b64(wide_document(codec))])


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
@pytest.mark.parametrize("codec", WIDE)
async def test_without_reading_its_bom_the_key_in_a_utf16_document_leaves_and_the_checks_see_it(
    codec: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: the BOM not read (``_marked_text`` finding none, the code before), the
    document goes out as base64 of its UTF-16 or UTF-32 bytes, key and all; ``find_leaks`` sees the
    key there (its base64 forms in UTF-16 and UTF-32: before them it reported no leak)."""
    monkeypatch.setattr(bounded_json.Walk, "_marked_text", staticmethod(lambda data, chars: None))
    await run_with_wide_document(make_otel_hooks(capture_content=True, redact_secrets=True), codec, "text/csv")
    assert leak_places(span_exporter, AWS_KEY) == {
        ("execute_tool fetch_file", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
    }


@requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")
@pytest.mark.parametrize("codec", WIDE)
async def test_the_audit_finds_the_key_of_an_unscrubbed_utf16_document_in_a_traces_file(
    codec: str, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """Without ``redact_secrets`` the document goes out as it is, base64 of its UTF-16 or UTF-32:
    ``flowra-otel audit`` decodes base64 whose bytes are text and reports the key (its built-in
    pattern and the given secret) where it is; the scrubbed run's file is clean."""
    for redact, path in ((False, tmp_path / "raw.jsonl"), (True, tmp_path / "scrubbed.jsonl")):
        span_exporter.clear()
        await run_with_wide_document(make_otel_hooks(capture_content=True, redact_secrets=redact), codec, "text/csv")
        exporter = OtlpJsonFileSpanExporter(path)
        exporter.export(span_exporter.get_finished_spans())
        exporter.shutdown()
    report = audit_file(tmp_path / "raw.jsonl", secrets=[AWS_KEY])
    assert {(leak.span_name, leak.where, leak.kind) for leak in report.leaks} == {
        ("execute_tool fetch_file", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}", "api_key"),
        ("execute_tool fetch_file", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}", "given_secret"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}", "api_key"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}", "given_secret"),
    }
    assert audit_file(tmp_path / "scrubbed.jsonl", secrets=[AWS_KEY]).clean
