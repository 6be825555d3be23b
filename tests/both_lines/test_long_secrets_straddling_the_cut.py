"""A cut never shows a secret the uncut value would hide (docs/redaction.md, the budget).

A long leaf is cut to ``max_content_length`` before it is scrubbed, over a margin beyond the cut
(``SCRUB_MARGIN``). With a 256-character margin, a PEM private key that starts before the cut and
ends after the margin reached ``redact=`` without its END line, so a BEGIN..END pattern missed it
and lines of key material were recorded on ``execute_tool``; the same value under a larger budget
recorded none. Here on a real run of either line, and exhaustively over cut positions for secrets
of 100 - 5 000 characters on the core's walk (seconds).
"""

from __future__ import annotations

import random
import re

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core import bounded_json, semconv
from flowra_otel.core.bounded_json import Walk, leaf_text
from tests.both_lines.line import MakeHooks, S
from tests.conftest import SpanLedger

PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)


def redact_keys(text: str) -> str:
    return PEM.sub("[KEY]", text)


def private_key(chars: int, rng: random.Random) -> tuple[str, list[str]]:
    """A PEM block about ``chars`` long and its body's lines (64 base64 characters each)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    head, tail = "-----BEGIN PRIVATE KEY-----\n", "-----END PRIVATE KEY-----"
    body = "".join(rng.choice(alphabet) for _ in range(max(8, chars - len(head) - len(tail))))
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return head + "\n".join(lines) + "\n" + tail, lines


def shown(value: str, lines: list[str]) -> list[str]:
    """The key's body lines (those long enough to be unmistakable) that appear in ``value``."""
    return [line for line in lines if len(line) >= 16 and line[:16] in value]


BUDGET = 1_000
KEY, KEY_LINES = private_key(1_700, random.Random(7))


def straddling(text: str) -> str:
    """The tool's result with a private key that starts 400 characters before the cut."""
    return "x" * (BUDGET - 400) + "\n" + KEY + "\n" + text


async def test_a_private_key_straddling_the_cut_is_redacted_whole(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    otel = make_otel_hooks(capture_content=True, max_content_length=BUDGET, redact=redact_keys)
    await S.customer_run(otel, S.answer("Done."), mask=straddling)
    S.assert_all_ended(ledger, span_exporter)
    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    result = str((tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT])
    assert "[KEY]" in result
    assert shown(result, KEY_LINES) == []
    for span in span_exporter.get_finished_spans():  # nor anywhere else (the chat's input messages)
        for value in (span.attributes or {}).values():
            assert shown(str(value), KEY_LINES) == [], span.name


async def test_with_the_old_margin_the_key_was_shown_in_part(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paired negative: the 256-character margin of before."""
    monkeypatch.setattr(bounded_json, "SCRUB_MARGIN", 256)
    otel = make_otel_hooks(capture_content=True, max_content_length=BUDGET, redact=redact_keys)
    await S.customer_run(otel, S.answer("Done."), mask=straddling)
    (tool,) = [s for s in span_exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert shown(str((tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT]), KEY_LINES) != []


def cut_leaks(margin: int | None = None) -> list[tuple[int, int, int]]:
    """Every (key length, budget, key start) where a cut leaf shows key material: keys of 100 -
    5 000 characters, each starting at every position around the cut (step 7) of a few budgets."""
    rng = random.Random(26)
    leaks = []
    for chars in (100, 300, 1_200, 2_500, 5_000):
        key, lines = private_key(chars, rng)
        short = [line for line in lines if len(line) >= 16] or [key[30:46]]
        for budget in (64, 1_000):
            for start in range(max(0, budget - len(key) - 8), budget + 8, 7):
                value = "y" * start + key + "z" * 3_000
                walk = Walk(redact_keys, budget, None)
                kept = leaf_text(walk.string(value))
                if any(line[:16] in kept for line in short):
                    leaks.append((chars, budget, start))
                    continue
                if margin is None:  # the uncut value hides the key: so must every cut of it
                    assert "[KEY]" in redact_keys(value)
    return leaks


def test_no_cut_position_shows_a_secret_of_up_to_5000_characters() -> None:
    assert cut_leaks() == []


def test_with_the_old_margin_some_cut_positions_showed_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_json, "SCRUB_MARGIN", 256)
    assert cut_leaks(256) != []
