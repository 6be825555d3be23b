"""The renderer's kept history gives, call after call, exactly what a fresh renderer gives.

A ``ContentRenderer`` keeps the conversation it rendered last (the messages by position, the
specs of their leaves, the JSON when it was recorded whole) and renders only what is new or
changed. Whatever the history does between two calls (grows, is handed over as a deep copy as
flowra 0.0.86+ does, is edited in place, shrinks, has a message moved), and whatever the budget
(``max_content_length``: the oldest messages dropped behind a marker, the newest shrunk), and
whatever the scrubbing (a ``redact=`` that lengthens text and adds characters JSON escapes, the
built-in secret patterns), each call's ``gen_ai.input.messages`` must equal, character for
character, the one a renderer that never saw the earlier calls makes of the same messages, and be
valid JSON within the budget. Random histories on the installed flowra line's own message types.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from flowra.llm import AssistantMessage, TextBlock, ToolUseBlock, UserMessage

from flowra_otel.core.content import ContentPolicy
from tests.both_lines.line import S

WORDS = [
    "order",
    "1042",
    "shipped",
    "gate code 4451",
    "ünïcode",
    'quote"s',
    "x" * 300,
    "tab\there",
    "ann@example.com",
    "sk-" + "a1" * 12,
    "\ud800 lone",
]


def _lengthening(text: str) -> str:
    """A redactor whose output is longer than its input and full of what JSON must escape."""
    return text.replace("4451", '[gate "code" \\ withheld\n]').replace("order", "ordér")


SCRUBS: dict[str, tuple[Callable[[str], str] | None, bool]] = {
    "none": (None, False),
    "scrubbed": (_lengthening, True),
}
"""``redact=`` and ``redact_secrets=`` of each scrubbing case."""


def _message(rng: random.Random, n: int) -> Any:
    kind = rng.randrange(4)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 6)))
    if kind == 0:
        return UserMessage(blocks=[TextBlock(text=text)])
    if kind == 1:
        arguments: Any = {"city": text, "n": rng.randrange(3), "nested": {"k": [text, True, 1.5]}}
        return AssistantMessage(blocks=[ToolUseBlock(id=f"c{n}", name="get_weather", input=arguments)])
    if kind == 2:
        return UserMessage(blocks=[S.tool_result_block(f"c{n}", text) for _ in range(rng.randrange(1, 3))])
    return AssistantMessage(blocks=[TextBlock(text=text), ToolUseBlock(id=f"d{n}", name="t", input={"q": text})])


def _edit(rng: random.Random, history: list[Any]) -> None:
    """An app's change to an earlier message, in place."""
    if not history:
        return
    message = rng.choice(history)
    block = rng.randrange(len(message.blocks))
    target = message.blocks[block]
    choice = rng.randrange(5)
    if choice == 0 and isinstance(getattr(target, "input", None), dict):
        target.input[rng.choice(["city", "q", "n"])] = rng.choice(["[redacted]", 1, True])
    elif choice == 3 and isinstance(getattr(target, "input", None), dict) and "nested" in target.input:
        target.input["nested"]["k"][rng.randrange(3)] = rng.choice(["[redacted]", False, 2.5])  # deep, in place
    elif choice == 4:
        message.blocks.append(TextBlock(text=f"added {rng.random()}"))  # the same list, one more block
    elif choice == 1 and type(target).__name__ == "ToolResultBlock":
        message.blocks[block] = S.tool_result_block(target.tool_use_id, "[redacted]")
    else:
        message.blocks[block] = TextBlock(text=f"edited {rng.random()}")


@pytest.mark.parametrize("scrub", list(SCRUBS))
@pytest.mark.parametrize("copies", [True, False], ids=["deep-copied-per-call", "same-objects"])
@pytest.mark.parametrize("budget", [None, 400, 1_500, 6_000])
@pytest.mark.parametrize("seed", range(6))
def test_each_call_renders_as_a_fresh_renderer_would(copies: bool, budget: int | None, seed: int, scrub: str) -> None:
    rng = random.Random(seed * 1000 + (budget or 0) + copies)
    redact, secrets = SCRUBS[scrub]
    policy = ContentPolicy.build(max_length=budget, redact=redact, redact_secrets=secrets)
    kept = policy.renderer(S.MESSAGES)
    history: list[Any] = []
    for call in range(40):
        history.extend(_message(rng, call * 10 + i) for i in range(rng.randrange(1, 3)))
        if rng.random() < 0.25:
            _edit(rng, history)
        if rng.random() < 0.08:  # compacted: the oldest messages go
            del history[: rng.randrange(1, max(2, len(history) // 2))]
        if rng.random() < 0.05 and len(history) > 2:  # a message moves
            history.insert(0, history.pop(rng.randrange(len(history))))
        given = copy.deepcopy(history) if copies else list(history)
        got = kept.conversation(given)
        assert got == policy.renderer(S.MESSAGES).conversation(given), (seed, call)
        decoded = json.loads(got)
        if scrub == "scrubbed":
            assert "4451" not in got and "ann@example.com" not in got, (seed, call)
            assert all(isinstance(m, dict) and "parts" in m for m in decoded)
        if budget is not None:
            assert len(got) <= budget
