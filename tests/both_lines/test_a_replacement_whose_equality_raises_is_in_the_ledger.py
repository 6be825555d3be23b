"""A hook's replacement whose ``__eq__`` raises still gets its redaction-ledger entry.

The ledger compares a hook's new ``tool_use`` with the previous one (identity first, then
equality, so an equal replacement is no change). User values can make equality raise (a
dataclass holding an array, a proxy); such a replacement must count as a change: the ledger
names the hook and the lengths, the run is unaffected, and nothing is logged as an internal
error. Paired negative: ``changed()`` answering "unchanged" when equality raises loses the entry.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from flowra.agent import Event
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core import field_tracker, redaction
from tests.both_lines.line import MakeHooks, S
from tests.conftest import SpanLedger


def _raising_eq(self: object, other: object) -> bool:
    raise ValueError("the truth value of an array with more than one element is ambiguous")


def redirect_with_raising_equality(event: Event[Any]) -> None:
    """The app's hook: the call rewritten, as an object whose equality raises."""
    tool_use = event.data.tool_use
    cls = type(tool_use)
    raising = type(f"Raising{cls.__name__}", (cls,), {"__eq__": _raising_eq, "__hash__": cls.__hash__})
    values = {f.name: getattr(tool_use, f.name) for f in dataclasses.fields(tool_use) if f.init}
    event.data.tool_use = raising(**{**values, "input": {"city": "Zurich"}})


async def run(make_otel_hooks: MakeHooks) -> Any:
    return await S.tool_hook_run(
        make_otel_hooks(capture_content=False),
        ("c1", "get_weather", {"city": "Paris"}),
        handlers=[redirect_with_raising_equality],
    )


def ledger_of(exporter: InMemorySpanExporter) -> dict[str, Any]:
    (tool,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool get_weather"]
    return {k: v for k, v in (tool.attributes or {}).items() if k.startswith("flowra.redaction.")}


async def test_a_replacement_whose_equality_raises_is_in_the_ledger(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    result = await run(make_otel_hooks)
    S.assert_all_ended(ledger, span_exporter)
    assert result.errors == [False]  # the tool ran, with the hook's arguments
    entry = ledger_of(span_exporter)
    assert entry[redaction.APPLIED] is True
    assert list(entry[redaction.FIELDS]) == ["arguments"]
    assert list(entry["flowra.redaction.arguments.handlers"]) == [
        redaction.handler_name(redirect_with_raising_equality)
    ]
    assert entry["flowra.redaction.arguments.original_length"] == len('{"city":"Paris"}')
    assert entry["flowra.redaction.arguments.final_length"] == len('{"city":"Zurich"}')


async def test_if_raising_equality_meant_unchanged_the_entry_was_lost(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paired negative: ``changed`` saying "unchanged" when equality raises."""

    def changed_unless_raising(new: Any, old: Any) -> bool:
        if new is old:
            return False
        try:
            return not bool(new == old)
        except Exception:
            return False

    monkeypatch.setattr(field_tracker, "changed", changed_unless_raising)
    await run(make_otel_hooks)
    assert redaction.APPLIED not in ledger_of(span_exporter)
