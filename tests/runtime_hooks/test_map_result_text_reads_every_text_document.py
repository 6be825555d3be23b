"""``map_result_text`` changes a text document a tool read whatever its encoding (flowra 0.0.86+).

A tool hands on documents as they were saved: a spreadsheet's CSV export in Windows-1252, a UTF-16
text file with its byte order mark, a ``charset=`` in the media type. The helper used to read a
``MediaBlock`` as UTF-8 only and hand any other document on unchanged, without a word: the app's
redaction hook looked as if it had run, and the card number in the document reached the model and
the trace (for UTF-16, in a form ``assert_no_leak`` does not look for). Now it reads the document in
the encoding its BOM or ``charset=`` names, else UTF-8, else Latin-1 (every byte one character,
so an ASCII secret is found in any 8-bit encoding), and writes it back in the same encoding.

Each case runs a real agent whose tool answers the document (0.0.89+; on 0.0.86 - 0.0.88 a hook
attaches it, as the media tests do) and an app hook written with ``map_result_text``; the model
must get the document masked, byte for byte in its own encoding, and the trace must hold the
masked document only. The paired negative is the helper reading UTF-8 alone (the code before):
these cases then reach the model unmasked.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Final

import pytest
from flowra.agent import Event
from flowra.lib.turn.hook_events import AfterToolCallEvent
from flowra.llm import MediaBlock, TextBlock, ToolResultBlock
from flowra.tools import ToolResult, tool
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.redaction import map_result_text
from flowra_otel.testing import assert_no_leak
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended
from tests.runtime_hooks.support import (
    HAS_RESULT_BLOCKS,
    HAS_TOOL_BLOCKS,
    CityParams,
    ScriptedProvider,
    chat_runtime,
    requires,
    run_chat,
    text_response,
    tool_calls_response,
)

pytestmark = requires(HAS_RESULT_BLOCKS, "media in a tool result is flowra 0.0.86+ (a result is text before)")

CARD: Final = "4111 1111 1111 1111"
MASKED: Final = "**** 1111"
SHEET: Final = f"name;city;card\nJosé Müller;Zürich;{CARD}\n"
"""A customer sheet with letters outside ASCII, as a spreadsheet exports it."""
RECORD: Final = json.dumps({"owner": "José", "card": CARD}, ensure_ascii=False)
DOCUMENTS: Final = {  # id: (bytes as saved, media type, the codec they are read and written in)
    "windows-1252 csv": (SHEET.encode("cp1252"), "text/csv", "cp1252"),
    "windows-1252 csv, charset named": (SHEET.encode("cp1252"), "text/csv; charset=windows-1252", "cp1252"),
    "latin-1 json": (RECORD.encode("latin-1"), "application/json", "latin-1"),
    "utf-16 with its bom": (SHEET.encode("utf-16"), "text/plain", "utf-16"),
    "utf-16 big-endian, charset named": (SHEET.encode("utf-16-be"), 'text/plain; charset="UTF-16"', "utf-16-be"),
    "utf-8": (SHEET.encode(), "text/csv; charset=utf-8", "utf-8"),
}


def mask_card(text: str) -> str:
    return text.replace(CARD, MASKED)


def masked(document: tuple[bytes, str, str]) -> bytes:
    """The document as the hook must leave it: the card masked, every other byte as it was."""
    data, _, codec = document
    return data.decode(codec).replace(CARD, MASKED).encode(codec)


async def run_with_document(hooks: OtelHooks, document: tuple[bytes, str, str]) -> ScriptedProvider:
    data, media_type, _ = document

    def files() -> list[MediaBlock | TextBlock]:
        return [TextBlock(text="the customer sheet"), MediaBlock(data=data, media_type=media_type)]

    @tool("fetch_sheet")
    async def fetch_sheet(params: CityParams) -> ToolResult:
        """Fetches a branch's customer sheet."""
        return ToolResult(content=files() if HAS_TOOL_BLOCKS else params.city)

    def attach_sheet(event: Event[AfterToolCallEvent]) -> None:
        """Before flowra 0.0.89 a tool answers text: the document reaches its result through a hook."""
        event.data.result = ToolResultBlock(tool_use_id=event.data.result.tool_use_id, content=files())

    def redact_result(event: Event[AfterToolCallEvent]) -> None:
        """The app's redaction hook, as docs/redaction.md writes it."""
        event.data.result = map_result_text(event.data.result, mask_card)

    provider = ScriptedProvider(tool_calls_response(("c1", "fetch_sheet", {"city": "Zürich"})), text_response("Done."))
    runtime = chat_runtime(provider, fetch_sheet)
    hooks.install(runtime)
    if not HAS_TOOL_BLOCKS:
        runtime.hooks.on(AfterToolCallEvent, attach_sheet)
    runtime.hooks.on(AfterToolCallEvent, redact_result)
    await run_chat(runtime, "The sheet of Zürich?")
    return provider


def given_documents(provider: ScriptedProvider) -> list[bytes]:
    blocks = [b for m in provider.requests[1].messages for r in m.blocks for b in getattr(r, "content", None) or ()]
    return [b.data for b in blocks if isinstance(b, MediaBlock)]


def recorded_documents(exporter: InMemorySpanExporter) -> list[bytes]:
    (tool_span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool fetch_sheet"]
    result = json.loads(str((tool_span.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT]))
    return [base64.b64decode(p["content"]) for p in result["content"] if p["type"] == "blob"]


@pytest.mark.parametrize("name", list(DOCUMENTS))
async def test_a_document_in_any_encoding_is_masked_for_the_model_and_the_trace(
    name: str, make_otel_hooks: Any, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    document = DOCUMENTS[name]
    provider = await run_with_document(make_otel_hooks(capture_content=True), document)
    assert_all_ended(ledger, span_exporter)
    assert given_documents(provider) == [masked(document)]  # byte for byte, in its own encoding
    assert recorded_documents(span_exporter) == [masked(document)]
    codec = document[2]
    assert_no_leak(span_exporter.get_finished_spans(), [CARD, base64.b64encode(CARD.encode(codec)).decode()])
    (tool_span,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool fetch_sheet"]
    assert (tool_span.attributes or {})["flowra.redaction.fields"] == ("result",)


def test_a_document_the_change_leaves_alone_is_the_same_block() -> None:
    """No re-encoding when nothing changed: the ledger sees no change, the model the same bytes."""
    for data, media_type, codec in DOCUMENTS.values():
        without_card = data.decode(codec).replace(CARD, "none on file").encode(codec)
        block = MediaBlock(data=without_card, media_type=media_type)
        assert map_result_text(block, mask_card) is block


def test_a_character_the_encoding_cannot_hold_becomes_a_question_mark() -> None:
    data, media_type, _ = DOCUMENTS["windows-1252 csv"]
    changed = map_result_text(MediaBlock(data=data, media_type=media_type), lambda t: t.replace(CARD, "█ 1111"))
    assert changed.data == SHEET.replace(CARD, "? 1111").encode("cp1252")


def test_a_bom_its_codec_cannot_read_is_no_error_and_the_next_reading_is_tried() -> None:
    """UTF-16 cut at an odd byte, and ``FF FE 00 00`` that is UTF-16 LE starting with a NUL (not
    UTF-32): the helper trusted the BOM and raised ``UnicodeDecodeError`` inside the app's hook,
    failing the agent's run. Now a BOM whose codec does not decode the rest names nothing: the
    first is read as Latin-1 (no card shows through its NULs: handed on as it is), the second as
    the UTF-16 LE it is, and masked."""
    cut = MediaBlock(data=SHEET.encode("utf-16") + b"!", media_type="text/csv")
    assert map_result_text(cut, mask_card) is cut
    nul_first = MediaBlock(data=("\ufeff\0" + SHEET).encode("utf-16-le"), media_type="text/csv")
    changed = map_result_text(nul_first, mask_card)
    assert changed.data == ("\ufeff\0" + SHEET.replace(CARD, MASKED)).encode("utf-16-le")
