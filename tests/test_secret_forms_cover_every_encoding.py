"""``secret_forms`` (behind ``find_leaks`` / ``assert_no_leak`` and the tests' own leak checks)
holds a secret's base64 in every Unicode encoding a document may be in: UTF-8, UTF-16 and UTF-32
in either byte order, at any byte offset (base64's three alignments), in either alphabet. A text
document a tool read in UTF-16 goes out as base64 of its bytes when nothing scrubs it: a check
with only the UTF-8 forms reported no leak with the key right there.

Flowra-free: the span is the OpenTelemetry SDK's, set by hand the way the recorder sets a blob part.
"""

from __future__ import annotations

import base64
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.testing import find_leaks, secret_forms

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
CODECS = ["utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("offset", range(6))
def test_the_base64_of_a_secret_in_any_encoding_at_any_offset_is_one_of_its_forms(codec: str, offset: int) -> None:
    data = "x" * offset + f"key={AWS_KEY};" + "y" * 7
    for bom in ("", "\ufeff"):
        raw = (bom + data).encode(codec)
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(raw).decode("ascii")
            assert any(form in encoded for form in secret_forms(AWS_KEY)), (codec, offset, bom, encode)


def test_a_short_secret_has_no_base64_forms_in_any_encoding() -> None:
    """Under 12 bytes of UTF-8 its few base64 characters would turn up in any base64 by chance."""
    short = "hunter2-Zq"
    assert not any(form in base64.b64encode(short.encode("utf-16")).decode() for form in secret_forms(short))


@pytest.mark.parametrize("codec", ["utf-16", "utf-32"])
def test_find_leaks_sees_a_key_in_a_utf16_or_utf32_blob_part(codec: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    blob = base64.b64encode(f"id,key\n1,{AWS_KEY}\n".encode(codec)).decode("ascii")
    with provider.get_tracer("t").start_as_current_span("execute_tool fetch_file") as span:
        span.set_attribute("gen_ai.tool.call.result", json.dumps({"content": [{"type": "blob", "content": blob}]}))
    (leak,) = find_leaks(exporter.get_finished_spans(), [AWS_KEY])
    assert (leak.where, leak.decoded) == ("attribute gen_ai.tool.call.result", True)
    provider.shutdown()
