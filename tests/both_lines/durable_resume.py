"""What both lines' ``test_durable_resume.py`` share: the dying process's span records, the
``crashed`` runs, the stand-in link store of the negative checks and the assertions on a resumed
run that do not depend on the line.

The runs themselves stay per line (``tests/hook_registry/test_durable_resume.py``,
``tests/runtime_hooks/test_durable_resume.py``): flowra 0.0.3 - 0.0.8 keeps the link in node
state and resumes a ``ToolLoopAgent`` (a sub-agent through ``make_agent_tool``); 0.0.86+ keeps it
in ephemeral state and resumes a ``ChatAgent`` whose sub-agent has a turn of its own, so the
agent paths, the span trees and the resume APIs differ.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core import durable_link, semconv
from tests import span_tree

REPO_ROOT = Path(__file__).resolve().parents[2]
SESSION = "s1"
CHAT = "chat sonnet-4-5"
CID = semconv.GEN_AI_CONVERSATION_ID
USER = semconv.USER_ID
RESUMED = durable_link.RESUMED
AGENT_RESUMED = semconv.FLOWRA_AGENT_RESUMED

Lines = list[dict[str, Any]]
Crashed = Callable[[str, Path], Lines]


# ================================================================================ the dying process
def span_record(span: SdkSpan | ReadableSpan) -> dict[str, Any]:
    ctx, parent = span.get_span_context(), span.parent
    assert ctx is not None
    return {
        "name": span.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "attributes": dict(span.attributes or {}),
    }


class Announce(SpanProcessor):
    """Prints every span as it starts and as it ends."""

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        print(json.dumps({"event": "start", **span_record(span)}), flush=True)

    def on_end(self, span: ReadableSpan) -> None:
        print(json.dumps({"event": "end", **span_record(span)}), flush=True)


def dying() -> None:
    """Says so, then ends the process (flowra saved the run after its previous cycle)."""
    print(json.dumps({"event": "dying"}), flush=True)
    os._exit(0)


class OneKeyLinkStore:
    """The design the plugin avoids (for the negative checks): one link for every run of a
    session, under one key; ``keeps_none=False`` also leaves out a conversation id of None
    (flowra's storages merge the values they save). Each line says where it is kept."""

    KEY = "__flowra_otel"
    keeps_none = True

    def __init__(self, storage: Any, *run: Any) -> None:
        self.storage = storage

    async def save(self, state: dict[str, Any]) -> None:
        await self.write({k: v for k, v in state.items() if self.keeps_none or v is not None})

    async def load(self) -> dict[str, Any] | None:
        state = await self.read()
        return dict(state) if isinstance(state, dict) else None

    async def write(self, scalars: dict[str, Any]) -> None:
        raise NotImplementedError

    async def read(self) -> Any:
        raise NotImplementedError


def one_key_stores(store: type[OneKeyLinkStore]) -> dict[str, type[OneKeyLinkStore]]:
    """``one_key``: ``store``; ``one_key_drops_none``: the same, leaving out a None."""
    return {"one_key": store, "one_key_drops_none": type(f"DropsNone{store.__name__}", (store,), {"keeps_none": False})}


# ================================================================================ the crashed runs
def crashed_runs(tmp_path_factory: pytest.TempPathFactory, module: str) -> Crashed:
    """``crash(scenario, into)``: the session storage of a run that died in ``scenario`` (``python
    -m module scenario dir``), copied into ``into``, and the dying process's span records (each
    scenario dies once per test module; every test resumes its own copy)."""
    done: dict[str, tuple[Path, Lines]] = {}

    def crash(scenario: str, into: Path) -> Lines:
        if scenario not in done:
            base = tmp_path_factory.mktemp("crashed")
            proc = subprocess.run(
                [sys.executable, "-m", module, scenario, str(base)],
                cwd=REPO_ROOT,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr
            assert "flowra_otel" not in proc.stderr, proc.stderr  # the plugin logged no internal error
            lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
            assert lines[-1] == {"event": "dying"}, proc.stdout
            done[scenario] = (base, lines)
        base, lines = done[scenario]
        shutil.copytree(base, into, dirs_exist_ok=True)
        return lines

    return crash


def records(lines: Lines, event: str) -> Lines:
    return [line for line in lines if line["event"] == event]


def names(lines: Lines) -> list[str]:
    return [line["name"] for line in lines]


# ================================================================================ what the dead run left
def assert_died_in_the_tool(lines: Lines) -> dict[str, Any]:
    """The ``tool`` scenario: the assistant died in its ``checkpoint`` call; its root span record."""
    started = records(lines, "start")
    assert names(started) == ["invoke_agent assistant", CHAT, "execute_tool checkpoint"]
    assert names(records(lines, "end")) == [CHAT]  # the rest died open
    paused_root = started[0]
    assert paused_root["parent_id"] is None
    assert [s["attributes"].get(CID) for s in started[1:]] == ["conv-42"] * 2
    assert [s["attributes"].get(USER) for s in started[1:]] == ["u-42"] * 2
    return paused_root


def alice_then_another(lines: Lines, second_started: list[str]) -> dict[str, Any]:
    """The ``after_alice`` scenarios: a run with conversation ``alice-conv`` completed, then a run
    with none (its spans started ``second_started``) died; that run's root span record."""
    first_done = lines.index({"event": "first run completed"})
    first, second = lines[:first_done], lines[first_done + 1 :]
    assert {r["attributes"].get(CID) for r in records(first, "end")} == {"alice-conv"}
    assert {r["attributes"].get(USER) for r in records(first, "end")} == {"alice"}
    assert names(records(second, "start")) == second_started
    assert {r["attributes"].get(CID) for r in second if "attributes" in r} == {None}
    assert {r["attributes"].get(USER) for r in second if "attributes" in r} == {None}
    return records(second, "start")[0]


def assert_kept_link(
    kept: dict[str, Any] | None, paused_root: dict[str, Any], conversation_id: str | None, user_id: str | None
) -> None:
    """What the plugin kept for the next process: the dead run's root span, conversation and user ids."""
    assert kept is not None
    assert set(kept) == {"traceparent", "conversation_id", "user_id"}
    assert kept["conversation_id"] == conversation_id
    assert kept["user_id"] == user_id
    assert kept["traceparent"].startswith(f"00-{paused_root['trace_id']}-{paused_root['span_id']}-")


# ================================================================================ the resumed run
def ids(node: span_tree.Node) -> tuple[int, int]:
    assert node.span is not None and node.span.context is not None
    return node.span.context.trace_id, node.span.context.span_id


def links_of(node: span_tree.Node) -> list[tuple[str, str, Mapping[str, Any]]]:
    assert node.span is not None
    return [
        (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}", dict(link.attributes or {}))
        for link in node.span.links
    ]


def resumed_tree(exporter: InMemorySpanExporter) -> list[span_tree.Node]:
    return span_tree.build(exporter.get_finished_spans(), (CID, USER, RESUMED, AGENT_RESUMED))


def assert_one_linked_continuation(exporter: InMemorySpanExporter, paused_root: dict[str, Any]) -> span_tree.Node:
    """One new trace, whose root links to the dead run's root span and is not its child."""
    roots = resumed_tree(exporter)
    assert len(roots) == 1, span_tree.shape(roots)
    (root,) = roots
    assert root.span is not None and root.span.parent is None
    trace_id, _ = ids(root)
    assert f"{trace_id:032x}" != paused_root["trace_id"]  # linked, not a late child of a span that is gone
    assert links_of(root) == [
        (paused_root["trace_id"], paused_root["span_id"], {durable_link.LINK_TYPE: durable_link.LINK_RESUMED_FROM})
    ]
    assert {s.context.trace_id for s in exporter.get_finished_spans() if s.context} == {trace_id}
    return root


def assert_resumed_from_the_tool(exporter: InMemorySpanExporter, paused_root: dict[str, Any]) -> None:
    """The ``tool`` scenario resumed: the assistant and its ``checkpoint`` call reopened as one
    linked continuation, the call named and described (the agent's tools), then its answer."""
    root = assert_one_linked_continuation(exporter, paused_root)
    conv = {CID: "conv-42", USER: "u-42"}  # both kept from the dead run: the resume accepts no message
    assert span_tree.shape([root]) == [("invoke_agent assistant", [("execute_tool checkpoint", []), (CHAT, [])])]
    assert [(n.name, n.attrs) for n in span_tree.walk([root])] == [
        ("invoke_agent assistant", {**conv, RESUMED: True}),
        ("execute_tool checkpoint", conv),
        (CHAT, conv),
    ]
    tool_span = span_tree.build(exporter.get_finished_spans())[0].children[0]
    assert tool_span.attrs == {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "checkpoint",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.GEN_AI_TOOL_CALL_ID: "c1",
        semconv.GEN_AI_TOOL_DESCRIPTION: "Save progress.",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        CID: "conv-42",
        USER: "u-42",
    }


def assert_stamped(exporter: InMemorySpanExporter, *, leaks: bool) -> None:
    """The resumed later run is stamped alice's conversation and user ids (``leaks``) or none at all."""
    stamped = {((s.attributes or {}).get(CID), (s.attributes or {}).get(USER)) for s in exporter.get_finished_spans()}
    assert stamped == ({("alice-conv", "alice")} if leaks else {(None, None)})
