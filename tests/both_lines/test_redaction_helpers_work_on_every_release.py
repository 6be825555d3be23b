"""The public redaction helpers (``flowra_otel.redaction``) do what docs/redaction.md says on every
release: a hook written with ``map_result_text`` scrubs a tool's result whatever shape the release
gives it (text; a list of content blocks from 0.0.86; 0.0.57's list holding the block), and
``result_digest`` / ``arguments_digest`` recompute the ledger's HMAC from the original text or input,
with nothing to know of the canonical form (on 0.0.86+ the JSON of the blocks, not the text).

The paired negatives: the hook docs/redaction.md used to show (``scrub(result.content)`` with a
``str -> str`` scrubber) fails the agent's run with ``TypeError`` where the content is a list, and
the naive HMAC of the text does not match the ledger there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
from typing import Any, Final

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.redaction import arguments_digest, map_result_text, result_digest
from flowra_otel.testing import assert_no_leak
from tests.both_lines.line import MakeHooks, S

KEY: Final = "an-auditors-key-of-32-characters"
RECORD: Final = f"Ada: SSN {S.SSN}, card {S.CARD}"
"""What ``lookup_customer`` answers for Ada (both lines' scenarios)."""


def mask_digits(text: str) -> str:
    """A redaction function of the kind users write: ``str -> str`` (``re.sub`` raises on a list)."""
    return re.sub(r"\d", "#", text)


def the_tool_span(exporter: InMemorySpanExporter) -> Any:
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool lookup_customer"]
    return span


async def test_a_hook_written_with_map_result_text_scrubs_the_result(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    otel = make_otel_hooks(capture_content=True, redaction_hmac_key=KEY)
    assert await S.customer_run(otel, S.answer("Done."), mask=mask_digits) == "Done."
    spans = span_exporter.get_finished_spans()
    assert_no_leak(spans, [S.SSN, S.CARD])
    tool = the_tool_span(span_exporter)
    assert "SSN ###-##-####, card #### #### #### ####" in str(tool.attributes["gen_ai.tool.call.result"])
    assert tool.attributes["flowra.redaction.fields"] == ("result",)
    assert str(tool.attributes["flowra.redaction.result.handlers"][0]).endswith("masked_result")


async def test_result_digest_recomputes_the_ledgers_hmac_from_the_original_text(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    otel = make_otel_hooks(capture_content=True, redaction_hmac_key=KEY)
    await S.customer_run(otel, S.answer("Done."), mask=mask_digits)
    recorded = str(the_tool_span(span_exporter).attributes["flowra.redaction.result.original_hmac_sha256"])
    assert hmac.compare_digest(result_digest(RECORD, KEY), recorded)
    assert hmac.compare_digest(result_digest(RECORD, KEY.encode()), recorded)  # bytes or str, as OtelHooks takes it
    assert result_digest(RECORD.replace("Ada", "Bob"), KEY) != recorded  # another candidate does not match
    # the same from the block itself, as a hook saw it
    assert result_digest(S.tool_result_block("c1", RECORD), KEY) == recorded
    naive = hmac.new(KEY.encode(), RECORD.encode(), hashlib.sha256).hexdigest()
    blocks = not isinstance(S.tool_result_block("c1", RECORD).content, str)
    assert (naive == recorded) is not blocks  # on 0.0.86+ the digested form is the blocks' JSON, not the text


async def test_arguments_digest_recomputes_the_ledgers_hmac_of_the_input(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    original = {"city": "Paris", "card": S.CARD}

    def drop_card(event: Any) -> None:
        tool_use = event.data.tool_use
        event.data.tool_use = dataclasses.replace(tool_use, input={"city": tool_use.input["city"]})

    await S.tool_hook_run(
        make_otel_hooks(redaction_hmac_key=KEY), ("c1", "get_weather", original), handlers=[drop_card]
    )
    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool get_weather"]
    assert tool.attributes is not None
    recorded = str(tool.attributes["flowra.redaction.arguments.original_hmac_sha256"])
    assert arguments_digest(original, KEY) == recorded
    assert arguments_digest({**original, "city": "Oslo"}, KEY) != recorded


def test_map_result_text_keeps_the_shape_of_every_result() -> None:
    block = S.tool_result_block("c1", RECORD)
    changed = map_result_text(block, mask_digits)
    assert type(changed) is type(block) and changed is not block
    assert S.tool_result_text(changed) == mask_digits(RECORD)
    assert S.tool_result_text(block) == RECORD  # never edited in place
    assert map_result_text(RECORD, mask_digits) == mask_digits(RECORD)
    assert map_result_text([block], mask_digits)[0] == changed  # 0.0.57's list
    assert map_result_text(None, mask_digits) is None


def test_a_change_that_returns_no_text_is_named_where_it_happens() -> None:
    with pytest.raises(TypeError, match="must return a str, got NoneType"):
        map_result_text(S.tool_result_block("c1", RECORD), lambda text: None)  # type: ignore[arg-type,return-value]


def test_result_digest_refuses_a_key_of_another_type() -> None:
    with pytest.raises(TypeError, match="bytes or str"):
        result_digest(RECORD, 12345)  # type: ignore[arg-type]
