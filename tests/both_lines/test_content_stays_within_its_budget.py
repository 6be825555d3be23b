"""Every content attribute holds to ``max_content_length``, whatever the run.

The budget is applied inside each JSON value (docs/redaction.md): a content attribute is at most
``max_content_length`` characters, or ``FLOOR`` when the budget is too tiny for any valid value.
Two places once broke it: the names-only fallback of ``gen_ai.tool.definitions`` (150 tools at a
budget of 4 096 gave 10 051 characters) was never held to the budget, and the marker message of
``gen_ai.input.messages`` ("N earlier messages omitted") was sized for an N of as many digits as
the request has messages, while N counts semconv messages (one per tool result), so 150 parallel
results in a short history ended one character over. The property test runs random real runs
(random budgets, tools, prompts, arguments, results, histories) and checks every JSON content
attribute of every span.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from flowra.llm import AssistantMessage, TextBlock, ToolUseBlock, UserMessage
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.core.content import MESSAGE_OMITTED, OMITTED_MESSAGES, TOOLS_OMITTED, ContentPolicy
from tests.both_lines.line import MakeHooks, S
from tests.conftest import SpanLedger

FLOOR = len(
    json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": OMITTED_MESSAGES.format(count=10**6)}]},
            {"role": "assistant", "parts": [{"type": "text", "content": MESSAGE_OMITTED}]},
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
)
"""The longest JSON content value a budget too tiny for any valid value gets (markers only)."""

JSON_CONTENT = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_TOOL_DEFINITIONS,
    semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
    semconv.GEN_AI_TOOL_CALL_RESULT,
)
_TOOLS_OMITTED = re.compile(re.escape(TOOLS_OMITTED).replace(re.escape("{count}"), r"(\d+)"))
_MESSAGES_OMITTED = re.compile(re.escape(OMITTED_MESSAGES).replace(re.escape("{count}"), r"(\d+)"))


async def run(otel: OtelHooks, steps: list[Any], offered: list[Any], text: str, prompt: str = "You help.") -> None:
    await S.budget_run(otel, steps, offered, text, prompt)


def content_sizes(exporter: InMemorySpanExporter) -> list[tuple[str, str, int]]:
    return [
        (span.name, key, len(str(value)))
        for span in exporter.get_finished_spans()
        for key, value in (span.attributes or {}).items()
        if key in JSON_CONTENT
    ]


async def test_many_tools_are_named_as_far_as_the_budget_goes(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    """150 tools at a budget of 4 096: the first names, then a marker entry counting the rest."""
    budget = 4_096
    await run(
        make_otel_hooks(capture_content=True, max_content_length=budget),
        [S.answer("Hello.")],
        S.note_tools(150),
        "Hi",
    )
    S.assert_all_ended(ledger, span_exporter)
    (chat,) = [s for s in span_exporter.get_finished_spans() if s.name.startswith("chat")]
    text = str((chat.attributes or {})[semconv.GEN_AI_TOOL_DEFINITIONS])
    assert len(text) <= budget
    definitions = json.loads(text)
    *named, marker = definitions
    assert [d["name"] for d in named] == [f"tool_{i:03d}" for i in range(len(named))]
    assert all(d == {"type": "function", "name": d["name"]} for d in named)  # names only: no room for schemas
    match = _TOOLS_OMITTED.fullmatch(marker["name"])
    assert match is not None and int(match.group(1)) == 150 - len(named)
    assert len(named) > 40  # as many as fit, not a token few


def wide_history(results: int) -> list[Any]:
    """A short conversation (five messages) holding ``results`` parallel tool calls and results."""
    calls: list[Any] = [ToolUseBlock(id=f"c{i}", name="tool_000", input={"note": "n"}) for i in range(results)]
    answers: list[Any] = [S.tool_result_block(f"c{i}", f"note {i:03d}") for i in range(results)]
    return [
        UserMessage(blocks=[TextBlock(text="Check every account.")]),
        AssistantMessage(blocks=calls),
        UserMessage(blocks=answers),
        AssistantMessage(blocks=[TextBlock(text="All checked.")]),
        UserMessage(blocks=[TextBlock(text="And now?")]),
    ]


def test_the_omitted_messages_marker_fits_whatever_its_count() -> None:
    """Five flowra messages, 150 tool results among them: at every budget the history fits, with
    three-digit counts in its marker (the marker was sized for a one-digit count)."""
    history = wide_history(150)
    counts: set[int] = set()
    for budget in range(1_200, 4_000, 7):
        policy = ContentPolicy.build(redact=None, redact_secrets=False, max_length=budget)
        text = policy.renderer(S.MESSAGES).conversation(history)
        assert len(text) <= budget, budget
        match = _MESSAGES_OMITTED.search(text)
        assert match is not None
        counts.add(int(match.group(1)))
    assert min(counts) >= 100  # three digits, in a request of five messages


def _script(rng: random.Random, offered: int) -> list[Any]:
    steps: list[Any] = []
    for turn in range(rng.randint(1, 3)):
        calls = [
            (f"c{turn}{k}", f"tool_{rng.randrange(offered):03d}", {"note": "x" * rng.choice([0, 10, 300, 3_000])})
            for k in range(rng.choice([1, 2, 5, 30]))
        ]
        steps.append(S.tool_calls(*calls, text=rng.choice([None, "y" * rng.randint(0, 2_000)])))
    steps.append(S.answer("z" * rng.choice([1, 100, 5_000])))
    return steps


@pytest.mark.parametrize("seed", range(12))
async def test_random_runs_keep_every_content_attribute_within_the_budget(
    seed: int, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    rng = random.Random(seed)
    budget = rng.choice([rng.randint(1, FLOOR), rng.randint(FLOOR, 1_500), rng.randint(1_500, 6_000)])
    offered = rng.choice([1, 3, 20, 150])
    steps = _script(rng, offered)
    otel = make_otel_hooks(capture_content=True, max_content_length=budget, redact_secrets=rng.random() < 0.5)
    prompt = "p" * rng.choice([10, 1_000, 10_000])
    await run(otel, steps, S.note_tools(offered, rng), "u" * rng.choice([1, 500, 20_000]), prompt)
    S.assert_all_ended(ledger, span_exporter)
    sizes = content_sizes(span_exporter)
    assert {key for _, key, _ in sizes} >= {semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_TOOL_DEFINITIONS}
    over = [(name, key, size) for name, key, size in sizes if size > max(budget, FLOOR)]
    assert over == [], f"budget {budget}"
