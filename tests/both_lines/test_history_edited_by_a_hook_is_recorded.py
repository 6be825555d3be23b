"""An earlier message of the conversation that a hook edits is recorded as the model then gets it.

Each chat span's ``gen_ai.input.messages`` is built from what the span before it rendered: the
renderer keeps the conversation's rendered messages and checks each one, on every call, against
the leaves it rendered (``core/leaf_spec.py``), so only new and changed messages are rendered
again. A hook may change an old message at any time before a call: replace one of its blocks,
or edit a call's arguments in place (the same dict object, on flowra 0.0.3 - 0.0.8 the very
message of the history). Every chat span after the edit must show the edited message and never
the old text, every span before it the old one: the recorded conversation equals, call by call,
what a fresh renderer makes of what the model got.

The cost side: each message is rendered once, whatever the length of the conversation (the
counted ``redact=`` calls of a leaf are the times it was rendered).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.core.content import ContentPolicy
from tests.both_lines.line import HistoryEdit, S
from tests.conftest import SpanLedger

MakeHooks = Callable[..., OtelHooks]
SECRET = "gate code 4451"
CITIES = [f"Paris, {SECRET}", "Rome", "Oslo", "Lima"]


def _results(message: Any) -> list[tuple[int, Any]]:
    return [(i, b) for i, b in enumerate(message.blocks) if type(b).__name__ == "ToolResultBlock"]


def redact_old_result(messages: list[Any], call: int) -> None:
    """From the third call on: the tool result that holds the secret is replaced by a redacted
    block (a new block in the message's list)."""
    if call < 2:
        return
    for message in messages:
        for i, block in _results(message):
            text = S.tool_result_text(block)
            if SECRET in text:
                message.blocks[i] = S.tool_result_block(block.tool_use_id, text.replace(SECRET, "[redacted]"))


def redact_old_arguments(messages: list[Any], call: int) -> None:
    """From the third call on: the call that holds the secret has its arguments edited in place
    (the same dict object) and its result replaced."""
    redact_old_result(messages, call)
    if call < 2:
        return
    for message in messages:
        for block in message.blocks:
            arguments = getattr(block, "input", None)
            if isinstance(arguments, dict) and SECRET in str(arguments.get("city")):
                arguments["city"] = "Paris, [redacted]"


def _inputs(exporter: InMemorySpanExporter) -> list[Any]:
    chats = sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("chat")), key=lambda s: s.start_time or 0
    )
    return [json.loads(str((s.attributes or {})[semconv.GEN_AI_INPUT_MESSAGES])) for s in chats]


def _parts(conversation: list[Any], kind: str) -> str:
    """The JSON of every part of ``kind`` (``tool_call`` or ``tool_call_response``) of a recorded conversation."""
    return json.dumps([p for m in conversation for p in m["parts"] if p["type"] == kind])


@pytest.mark.parametrize(
    ("edit", "edited"),
    [(redact_old_result, "tool_call_response"), (redact_old_arguments, "tool_call")],
    ids=["block-replaced", "arguments-in-place"],
)
async def test_an_old_message_a_hook_edits_is_recorded_as_the_model_gets_it(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger, edit: HistoryEdit, edited: str
) -> None:
    otel = make_otel_hooks(capture_content=True)
    seen = await S.history_edit_run(otel, CITIES, edit)
    recorded = _inputs(span_exporter)
    assert len(recorded) == len(seen) == len(CITIES) + 1
    fresh = ContentPolicy.build(redact=None, redact_secrets=False, max_length=32_768)
    for call, (messages, attribute) in enumerate(zip(seen, recorded, strict=True)):
        # exactly what a renderer that never saw the earlier calls makes of what the model got
        assert attribute == json.loads(fresh.renderer(S.MESSAGES).conversation(messages)), call
        parts = _parts(attribute, edited)
        if call >= 2:  # the edit is seen on every later call
            assert SECRET not in parts, call
            assert "[redacted]" in parts, call
        else:  # the model did get it before the hook redacted it
            assert SECRET in json.dumps(attribute) or call == 0, call
            assert "[redacted]" not in json.dumps(attribute), call


async def test_each_message_of_a_long_conversation_is_rendered_once(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """A leaf is scrubbed once per rendering: the user's message once (the agent's input and the
    first call share it), each tool result at most twice (its tool span, then the history),
    however many calls follow (flowra 0.0.86+ hands each call a deep copy of the history)."""
    seen: list[str] = []

    def counting(text: str) -> str:
        seen.append(text)
        return text

    cities = [f"City-{i}" for i in range(30)]
    await S.history_edit_run(make_otel_hooks(capture_content=True, redact=counting), cities, lambda m, c: None)
    assert len(_inputs(span_exporter)) == len(cities) + 1
    assert seen.count("Weather, city by city?") == 1
    for city in cities:
        results = [t for t in seen if t.endswith(f" in {city}")]
        assert 1 <= len(results) <= 2, (city, results)
        assert seen.count(city) <= 3, (city, seen.count(city))  # tool span, its chat's output, the history
