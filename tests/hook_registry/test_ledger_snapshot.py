"""The redaction ledger describes the original as it was at the first change, not as later hooks left it.

Hook A replaces the tool call with a copy that shares a mutable object with the model's original
(``dataclasses.replace`` keeps the same ``input`` dict, a shallow copy keeps the same nested
dict); hook B then scrubs that shared object in place. After B, the "original" object itself
holds the scrubbed value, so a ledger computed from it at the end would describe the redacted
value. ``flowra.redaction.arguments.original_length`` and ``.original_hmac_sha256`` must be those
of the model's original arguments, computed here independently over the canonical form
(``json.dumps(input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, see
``flowra_otel/redaction.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import BeforeToolCallEvent, ToolLoopStatus
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.testing import assert_no_leak
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

SECRET = "sk-live-ÄÖ-9f8e7d6c5b4a"
HMAC_KEY = b"ledger-snapshot-key-0123456789"
ORIGINAL_INPUT: dict[str, Any] = {"account": "acme", "token": SECRET, "options": {"region": "eu", "pin": SECRET}}
PREFIX = "flowra.redaction.arguments."


def connect(account: str, token: str, options: dict[str, str]) -> str:
    """Connect to an account with an access token."""
    return f"connected to {account}"


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def mac(text: str) -> str:
    return hmac.new(HMAC_KEY, text.encode("utf-8"), hashlib.sha256).hexdigest()


# ----------------------------------------------------------------- hook A: a copy sharing state
def retag_call_id(event: Event[BeforeToolCallEvent]) -> None:
    """A new tool-use block with another id; ``input`` is the very same dict object."""
    tool_use = event.data.tool_use
    event.data.tool_use = dataclasses.replace(tool_use, id=f"{tool_use.id}-checked")


def shallow_redact(event: Event[BeforeToolCallEvent]) -> None:
    """A shallow copy with one key redacted: the nested ``options`` dict is shared."""
    tool_use = event.data.tool_use
    event.data.tool_use = dataclasses.replace(tool_use, input={**tool_use.input, "token": "[REDACTED]"})


# ----------------------------------------------------------------- hook B: in-place scrub
def scrub_in_place(event: Event[BeforeToolCallEvent]) -> None:
    """Edits the (shared) dicts of the current tool use in place; replaces nothing."""
    arguments = event.data.tool_use.input
    arguments["token"] = "[REDACTED]"
    arguments["options"]["pin"] = "[REDACTED]"


FINAL_INPUT: dict[str, Any] = {
    "account": "acme",
    "token": "[REDACTED]",
    "options": {"region": "eu", "pin": "[REDACTED]"},
}


@pytest.mark.parametrize(
    "first_change", [retag_call_id, shallow_redact], ids=["replace_sharing_input", "shallow_copy_sharing_nested"]
)
async def test_original_length_and_hmac_describe_the_model_original(
    first_change: Callable[[Event[BeforeToolCallEvent]], None],
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    model_input = copy.deepcopy(ORIGINAL_INPUT)  # the dict the model's tool-use block carries
    provider = ScriptedProvider([tool_calls_response([("c1", "connect", model_input)]), text_response("ok")])
    registry = HookRegistry()
    registry.add(make_otel_hooks(capture_content=True, redaction_hmac_key=HMAC_KEY))
    registry.on(BeforeToolCallEvent, first_change)
    registry.on(BeforeToolCallEvent, scrub_in_place)
    async with tool_registry(connect) as tools:
        result = await run_tool_loop(tool_loop_runtime(provider, tools, registry), "connect acme")
    assert result.status == ToolLoopStatus.COMPLETED
    assert_all_ended(ledger, span_exporter)

    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool connect"]
    attrs = dict(tool.attributes or {})
    original_text = canonical(ORIGINAL_INPUT)
    final_text = canonical(FINAL_INPUT)
    assert original_text != final_text and len(original_text) != len(final_text)

    assert attrs["flowra.redaction.applied"] is True
    assert tuple(attrs["flowra.redaction.fields"]) == ("arguments",)  # type: ignore[arg-type]
    assert attrs[f"{PREFIX}original_length"] == len(original_text)
    assert attrs[f"{PREFIX}original_hmac_sha256"] == mac(original_text)
    assert attrs[f"{PREFIX}final_length"] == len(final_text)
    # Hook A made the first change; hook B's in-place edit is a change of its own.
    handlers = list(attrs[f"{PREFIX}handlers"])  # type: ignore[arg-type]
    assert handlers == [f"{__name__}.{first_change.__name__}", f"{__name__}.scrub_in_place"]
    # Paired negative: had the ledger been computed from the shared (now scrubbed) object at the
    # end, it would say this; it must not.
    assert attrs[f"{PREFIX}original_hmac_sha256"] != mac(final_text)
    # The recorded arguments are the final ones, and the secret is nowhere.
    assert json.loads(str(attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS])) == FINAL_INPUT
    assert_no_leak(span_exporter.get_finished_spans(), [SECRET])


@pytest.mark.parametrize("hmac_key", [None, HMAC_KEY], ids=["no_key", "key"])
async def test_an_in_place_scrub_alone_is_in_the_ledger(
    hmac_key: bytes | None, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """A hook that edits the tool input in place (no new object at all) is a redaction too: the
    audit must show that and where it happened, with the original's length (and HMAC)."""
    model_input = copy.deepcopy(ORIGINAL_INPUT)
    provider = ScriptedProvider([tool_calls_response([("c1", "connect", model_input)]), text_response("ok")])
    registry = HookRegistry()
    registry.add(make_otel_hooks(capture_content=True, redaction_hmac_key=hmac_key))
    registry.on(BeforeToolCallEvent, scrub_in_place)
    async with tool_registry(connect) as tools:
        await run_tool_loop(tool_loop_runtime(provider, tools, registry), "connect acme")
    assert_all_ended(ledger, span_exporter)

    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool connect"]
    attrs = dict(tool.attributes or {})
    original_text = canonical(ORIGINAL_INPUT)
    expected = {
        "flowra.redaction.applied": True,
        "flowra.redaction.fields": ("arguments",),
        f"{PREFIX}handlers": (f"{__name__}.scrub_in_place",),
        f"{PREFIX}original_length": len(original_text),
        f"{PREFIX}final_length": len(canonical(FINAL_INPUT)),
    }
    if hmac_key is not None:
        expected[f"{PREFIX}original_hmac_sha256"] = mac(original_text)
    assert {k: v for k, v in attrs.items() if k.startswith("flowra.redaction.")} == expected
    assert json.loads(str(attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS])) == FINAL_INPUT
    assert_no_leak(span_exporter.get_finished_spans(), [SECRET])
