"""Inputs and checks shared by each flowra line's fourth-round random runs
(``test_random_runs_end_every_span.py``): a private key of random length placed around the cut,
the ``redact=`` that hides it, the content modes, and the OTLP round trip of the details events.

Kept flowra-free: each line's test builds its runs; this module decides and checks.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan

from flowra_otel.core import semconv
from flowra_otel.testing import find_leaks, find_log_leaks

PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)
MODES = ("span_only", "event_only", "span_and_event")
SPAN_CONTENT = frozenset(
    {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_DEFINITIONS,
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
    }
)
EVENT_CONTENT = (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES)


def redact_keys(text: str) -> str:
    """The app's ``redact=``: every PEM private key block, whole."""
    return PEM.sub("[KEY]", text)


def private_key(chars: int, rng: random.Random) -> tuple[str, list[str]]:
    """A PEM block about ``chars`` long, and the 16-character heads of its body's lines (what
    must never be recorded)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    head, tail = "-----BEGIN PRIVATE KEY-----\n", "-----END PRIVATE KEY-----"
    body = "".join(rng.choice(alphabet) for _ in range(max(16, chars - len(head) - len(tail))))
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return head + "\n".join(lines) + "\n" + tail, [line[:16] for line in lines if len(line) >= 16]


@dataclasses.dataclass(frozen=True)
class RoundFour:
    """One seed's fourth-round inputs, all decided up front."""

    mode: str
    """``capture_content``: on spans only, in the details events only, or both."""
    budget: int
    key: str
    key_lines: list[str]
    key_at: int
    """Where the key starts in the tool's result: around ``budget`` (before, across or after the cut)."""
    nested: bool
    """A tool runs another conversation on the same runtime (its own metadata)."""
    before_install: tuple[str, ...]
    """``instrument`` / ``uninstrument`` calls before the app installs its own ``OtelHooks``."""
    after_install: tuple[str, ...]
    """... and after it (the app's hooks must keep tracing whatever the instrumentor does)."""
    structured: bool = False
    """The tool answers with a JSON object that holds an integer beyond int64 and a value nested
    30 levels deep beside the text (JSON holds both; OTLP, decoded in an event, does not)."""

    @property
    def events(self) -> bool:
        return self.mode != "span_only"

    @property
    def spans_carry_content(self) -> bool:
        return self.mode != "event_only"

    def result_text(self, tail: str = "") -> str:
        text = "x" * self.key_at + "\n" + self.key + "\n" + tail
        if not self.structured:
            return text
        return json.dumps({**self.arguments_extra(), "text": text})

    def arguments_extra(self) -> dict[str, Any]:
        """More tool arguments (``size``, ``deep``) when ``structured``: what the model's output
        message carries into the event, whatever the budget leaves of the result."""
        if not self.structured:
            return {}
        deep: dict[str, Any] = {}
        for _ in range(30):
            deep = {"a": deep}
        return {"size": 2**70, "deep": deep}


def round_four(rng: random.Random) -> RoundFour:
    budget = rng.choice([256, 1_000, 4_096])
    chars = rng.randint(100, 5_000)
    key, lines = private_key(chars, rng)
    ops = ("instrument", "uninstrument")
    return RoundFour(
        mode=rng.choice(MODES),
        budget=budget,
        key=key,
        key_lines=lines,
        key_at=rng.randint(max(0, budget - len(key) - 2), budget + 16),
        nested=rng.random() < 0.5,
        before_install=tuple(rng.choice(ops) for _ in range(rng.randint(0, 3))),
        after_install=tuple(rng.choice(ops) for _ in range(rng.randint(0, 3))),
        structured=rng.random() < 0.4,
    )


def features(plan: RoundFour) -> set[str]:
    """What one plan exercises (``missing_features`` checks the seeds cover them all)."""
    found = {f"mode {plan.mode}", f"nested {plan.nested}", f"structured {plan.structured}"}
    if plan.key_at < plan.budget < plan.key_at + len(plan.key):
        found.add("key straddles the cut")
        found.add("long key straddles" if len(plan.key) > 2_000 else "short key straddles")
    if "uninstrument" in plan.after_install and "instrument" in (*plan.before_install, *plan.after_install):
        found.add("uninstrumented after the app installed its hooks")
    if "instrument" in plan.before_install:
        found.add("instrumented when the runtime was made")
    return found


ALL_FEATURES: frozenset[str] = frozenset(
    {
        *(f"mode {m}" for m in MODES),
        "nested True",
        "nested False",
        "structured True",
        "key straddles the cut",
        "long key straddles",
        "short key straddles",
        "uninstrumented after the app installed its hooks",
        "instrumented when the runtime was made",
    }
)


def missing_features(seeds: Iterable[int]) -> set[str]:
    seen: set[str] = set()
    for seed in seeds:
        seen |= features(round_four(random.Random(seed)))
    return set(ALL_FEATURES - seen)


def memory_logs() -> tuple[LoggerProvider, InMemoryLogRecordExporter]:
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider, exporter


def over_the_wire(records: Sequence[Any]) -> list[dict[str, Any]]:
    """The records as a receiver decodes them (OTLP protobuf, encoded and parsed back): each
    record's attribute keys and their kinds. An attribute OTLP cannot carry is missing here."""
    if not records:
        return []
    data = encode_logs(list(records)).SerializeToString()
    request = ExportLogsServiceRequest.FromString(data)
    return [
        {kv.key: kv.value.WhichOneof("value") for kv in record.attributes}
        for resource in request.resource_logs
        for scope in resource.scope_logs
        for record in scope.log_records
    ]


def check(plan: RoundFour, spans: Iterable[ReadableSpan], records: Sequence[Any], chats: int) -> None:
    """The fourth round's properties over one seed's spans and details events."""
    spans = list(spans)
    leaks = [str(leak) for leak in find_leaks(spans, plan.key_lines)]
    assert leaks == [], f"key material on a span (key {len(plan.key)} chars at {plan.key_at}, budget {plan.budget})"
    log_leaks = [str(leak) for leak in find_log_leaks(records, plan.key_lines)]
    assert log_leaks == [], "key material in a details event"
    on_spans = {key for s in spans for key in (s.attributes or {}) if key in SPAN_CONTENT}
    if plan.spans_carry_content:
        tools = [s for s in spans if s.name.startswith("execute_tool") and "keyed" in s.name]
        assert tools, "the app's tool call was not traced"
        assert all(semconv.GEN_AI_TOOL_CALL_RESULT in (t.attributes or {}) for t in tools), "a tool result was lost"
    else:
        assert on_spans == set(), on_spans
    if plan.events:
        assert len(records) == chats, (len(records), chats)
        for received in over_the_wire(records):
            for key in EVENT_CONTENT:
                assert received.get(key) == "array_value", (key, received.get(key))
    else:
        assert records == () or list(records) == []
