"""``bytes`` inside a tool's result are content like any text: scrubbed before they are recorded.

A tool may hand back raw bytes inside a structure (a credentials file it read, a blob from a
store). The plugin once base64-encoded every ``bytes`` leaf as if it were an image, so
``redact=`` and ``redact_secrets=`` never saw it: an AWS key left the process in base64, in the
tool's span and again in the next request's messages. Only media (images, ``blob`` parts) is
opaque; any other bytes leaf is recorded as its text when it is UTF-8 (scrubbed as text), else as
base64 whose text goes through the scrubber too (a ``redact=`` that recognises an encoded value
still sees it), unless the scrubber finds something in the bytes read as text (each invalid byte
U+FFFD): then that text, scrubbed, so a key in a file with a stray byte never leaves in base64.
Budgets apply as for text.

Each case pairs "the key is nowhere, neither raw nor in the base64 the old rule made" with "the
scrubbed text is exactly what is recorded"; the paired negative puts the old rule back
(``Walk.data`` made ``Walk.binary``) and shows the key leave in base64.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import ToolLoopStatus
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolResult
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import bounded_json, semconv
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.hook_registry.conftest import SpanLedger, assert_all_ended
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

MakeHooks = Callable[..., OtelHooks]

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
CREDENTIALS = f"[default]\naws_access_key_id = {AWS_KEY}\n".encode()
"""UTF-8 bytes: recorded as their text, scrubbed."""
SEALED = b"\x00\xff\xfe sealed " + AWS_KEY.encode()
"""Not UTF-8, with the key in it: recorded as its text read with U+FFFD, scrubbed."""
SEALED_B64 = base64.b64encode(SEALED).decode("ascii")
SEALED_TEXT = "\x00\ufffd\ufffd sealed [REDACTED:api_key]"
OPAQUE = b"\x00\xff\xfe opaque"
"""Not UTF-8, nothing in it a scrubber takes out: recorded as base64, whose text the scrubber sees."""
OPAQUE_B64 = base64.b64encode(OPAQUE).decode("ascii")
WIDE = f"aws_access_key_id = {AWS_KEY}\n".encode("utf-16")  # its BOM first
"""UTF-16 with its byte order mark (a file PowerShell 5 wrote): read in it, recorded as its text
(the BOM left out), scrubbed; read as UTF-8 it held a NUL beside every character and no pattern
saw the key."""
LEAK_FORMS = [AWS_KEY, base64.b64encode(CREDENTIALS).decode("ascii"), SEALED_B64, base64.b64encode(WIDE).decode()]
"""The key (in every form, base64 at any alignment included), and the base64 of each value (what
the old rule recorded)."""


def read_credentials_tool() -> LocalTool:
    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult(
            content=cast(
                "str", {"profile": "default", "file": CREDENTIALS, "sealed": SEALED, "opaque": OPAQUE, "wide": WIDE}
            )
        )

    definition = ToolDefinition(
        name="read_credentials", description="Reads the credentials file.", input_schema={"type": "object"}
    )
    return LocalTool(definition=definition, handler=handler)


def mask_opaque(text: str) -> str:
    """A ``redact=`` that knows the opaque blob's base64 form (and nothing about AWS keys)."""
    return text.replace(OPAQUE_B64, "[OPAQUE]")


async def run(otel: OtelHooks) -> None:
    provider = ScriptedProvider([tool_calls_response([("c1", "read_credentials", {})]), text_response("Read.")])
    registry = HookRegistry()
    registry.add(otel)
    async with tool_registry(read_credentials_tool()) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Read my credentials")
    assert result.status == ToolLoopStatus.COMPLETED
    provider.assert_exhausted()


def span(exporter: InMemorySpanExporter, name: str, index: int = 0) -> ReadableSpan:
    return [s for s in exporter.get_finished_spans() if s.name == name][index]


def result_and_history(exporter: InMemorySpanExporter) -> tuple[Any, Any]:
    """The tool span's recorded result, and that result as the next request's history shows it."""
    tool = span(exporter, "execute_tool read_credentials")
    chat = span(exporter, "chat sonnet-4-5", 1)
    result = json.loads(str((tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT]))
    history = json.loads(str((chat.attributes or {})[semconv.GEN_AI_INPUT_MESSAGES]))
    (response,) = [p["response"] for m in history for p in m["parts"] if p["type"] == "tool_call_response"]
    return result, response


@pytest.mark.parametrize(
    ("options", "opaque"),
    [
        ({"redact_secrets": True, "redact": mask_opaque}, "[OPAQUE]"),
        ({"redact_secrets": True}, OPAQUE_B64),  # base64 with nothing in it the patterns take out
    ],
    ids=["redact_and_secrets", "secrets_only"],
)
async def test_bytes_in_a_tool_result_are_scrubbed_as_text(
    options: dict[str, Any],
    opaque: str,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    await run(make_otel_hooks(capture_content=True, **options))
    assert_all_ended(ledger, span_exporter)
    expected = {
        "profile": "default",
        "file": "[default]\naws_access_key_id = [REDACTED:api_key]\n",
        "sealed": SEALED_TEXT,
        "opaque": opaque,
        "wide": "aws_access_key_id = [REDACTED:api_key]\n",
    }
    result, response = result_and_history(span_exporter)
    assert result == expected
    assert response == expected
    assert_no_leak(span_exporter.get_finished_spans(), LEAK_FORMS)


async def test_bytes_are_text_to_the_users_redactor(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    seen: list[str] = []

    def redact(text: str) -> str:
        seen.append(text)
        return text

    await run(make_otel_hooks(capture_content=True, redact=redact))
    assert CREDENTIALS.decode() in seen  # the text of UTF-8 bytes
    assert OPAQUE_B64 in seen and SEALED_B64 in seen  # the base64 of the others (it changed nothing in them)
    assert f"aws_access_key_id = {AWS_KEY}\n" in seen  # the text of UTF-16 bytes with their BOM


async def test_a_huge_bytes_leaf_is_cut_like_text(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """10 MB of bytes cost what the budget keeps, and a key straddling the cut is still scrubbed."""
    budget = 2_000
    huge = (b"k" * (budget - 8) + AWS_KEY.encode()) * 5_000

    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult(content=cast("str", {"dump": huge}))

    definition = ToolDefinition(name="read_credentials", description="Reads.", input_schema={"type": "object"})
    provider = ScriptedProvider([tool_calls_response([("c1", "read_credentials", {})]), text_response("Read.")])
    registry = HookRegistry()
    registry.add(make_otel_hooks(capture_content=True, redact_secrets=True, max_content_length=budget))
    async with tool_registry(LocalTool(definition=definition, handler=handler)) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, registry), "Dump")
    result, _ = result_and_history(span_exporter)
    assert result["dump"].startswith("k" * 100)
    assert "…[flowra_otel: truncated " in result["dump"]
    assert len(json.dumps(result, ensure_ascii=False, separators=(",", ":"))) <= budget
    assert_no_leak(span_exporter.get_finished_spans(), [AWS_KEY, AWS_KEY[:12]])


async def test_without_scrubbing_bytes_the_key_leaves_in_base64(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: ``Walk.data`` made ``Walk.binary`` (every bytes leaf base64, unscrubbed, as
    before): the credentials leave in base64, in the tool's span and in the next request's history."""
    monkeypatch.setattr(bounded_json.Walk, "data", bounded_json.Walk.binary)
    await run(make_otel_hooks(capture_content=True, redact_secrets=True, redact=mask_opaque))
    places = {
        (leak.span_name, leak.where)
        for leak in find_leaks(span_exporter.get_finished_spans(), [base64.b64encode(CREDENTIALS).decode("ascii")])
    }
    assert places == {
        ("execute_tool read_credentials", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
    }


async def test_without_reading_its_bom_a_utf16_file_leaves_the_key_in_base64(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: the BOM not read (``Walk._marked_text`` finding none, the code before): the
    UTF-16 file goes out as base64 of its bytes, key and all, where ``find_leaks`` sees it."""
    monkeypatch.setattr(bounded_json.Walk, "_marked_text", staticmethod(lambda data, chars: None))
    await run(make_otel_hooks(capture_content=True, redact_secrets=True))
    assert {(leak.span_name, leak.where) for leak in find_leaks(span_exporter.get_finished_spans(), [AWS_KEY])} == {
        ("execute_tool read_credentials", f"attribute {semconv.GEN_AI_TOOL_CALL_RESULT}"),
        ("chat sonnet-4-5", f"attribute {semconv.GEN_AI_INPUT_MESSAGES}"),
    }
