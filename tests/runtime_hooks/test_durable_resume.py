"""A durable run that dies, resumed in a fresh process: one linked continuation of its trace.

flowra (0.0.86+) saves a durable run in its session storage after every engine cycle;
``AgentRuntime.resume()`` rebuilds the tree there and continues. The plugin keeps the run's root
span context (and conversation id) in the storage's *ephemeral* state, under a key of its own
per run (``durable.KEY_PREFIX`` + the run's root node id), so that:

* the resumed run's root ``invoke_agent`` span links to the trace of the run it continues
  (``flowra.link.type = resumed_from``), says ``flowra.resumed``, and keeps the conversation id;
* the agents and tool calls that were running when the process died are reopened as one
  continuation, each under its resumed parent (flowra reopens them outside their parents'
  flowing values: ``frames.RESUMING`` / ``RunScope.resume_frames``), not as separate traces;
* the link is gone once the run completes (flowra clears ephemeral state), so a later run never
  inherits an earlier run's conversation id.

The run dies for real: this module, run as a script (``python -m
tests.runtime_hooks.test_durable_resume <scenario> <dir>``), ends its own process with
``os._exit`` inside a tool, printing every span as it starts and ends (spans of a process that
dies never end). The test process is the fresh one that resumes.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from flowra.agent import AgentRuntime, ChangeSet, FileSessionStorage
from flowra.lib.chat import ChatResult
from flowra.tools import tool
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import tracing
from flowra_otel.adapters.runtime_hooks.durable import KEY_PREFIX, EphemeralLinkStore
from flowra_otel.adapters.runtime_hooks.frames import RunScope
from flowra_otel.core import durable_link, semconv
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import (
    CityParams,
    ResearcherAgent,
    ResearcherSetup,
    ScriptedProvider,
    chat_runtime,
    research_tool,
    run_chat,
    text_response,
    tool_calls_response,
)

MakeHooks = Callable[..., OtelHooks]

REPO_ROOT = Path(__file__).resolve().parents[2]
SESSION = "s1"
CHAT = "chat sonnet-4-5"
CID = semconv.GEN_AI_CONVERSATION_ID
RESUMED = durable_link.RESUMED
AGENT_RESUMED = semconv.FLOWRA_AGENT_RESUMED


# ================================================================================ the dying process
class Crash:
    """Whether ``checkpoint`` ends the process (a service: flowra gives it to the tool)."""

    def __init__(self, *, armed: bool) -> None:
        self.armed = armed


@tool("checkpoint")
async def checkpoint(params: CityParams, crash: Crash) -> str:
    """Save progress."""
    if crash.armed:  # flowra saved the run after its previous cycle; the process dies mid-tool
        print(json.dumps({"event": "dying"}), flush=True)
        os._exit(0)
    return f"{params.city} saved"


class OneKeyLinkStore:
    """The design the plugin avoids (for the negative checks): one link for every run, kept in
    *persistent* state (it survives the run), under one key; ``keeps_none=False`` also leaves
    out a conversation id of None (FileSessionStorage merges the values it saves)."""

    KEY = "__flowra_otel"
    keeps_none = True

    def __init__(self, storage: Any, root_node_id: str) -> None:
        self.storage = storage

    async def save(self, state: dict[str, Any]) -> None:
        scalars = state if self.keeps_none else {k: v for k, v in state.items() if v is not None}
        await self.storage.save(self.KEY, ChangeSet(scalars=scalars, appends={}))

    async def load(self) -> dict[str, Any] | None:
        state = await self.storage.load(self.KEY)
        return dict(state) if isinstance(state, dict) else None


class DropsNoneLinkStore(OneKeyLinkStore):
    keeps_none = False


ONE_KEY_STORES: dict[str, type[OneKeyLinkStore]] = {
    "one_key": OneKeyLinkStore,
    "one_key_drops_none": DropsNoneLinkStore,
}


def durable_runtime(base: str, *, sub_agent: bool, crash: bool, main: list[Any], researcher: list[Any]) -> AgentRuntime:
    """A chat with ``checkpoint`` (or with the ``research`` agent as a tool, whose own loop has
    ``checkpoint``), durable in ``base``."""
    storage = FileSessionStorage(base, SESSION)
    services: dict[type, Any] = {Crash: Crash(armed=crash)}
    if not sub_agent:
        return chat_runtime(ScriptedProvider(*main), checkpoint, services=services, storage=storage)
    setup = ResearcherSetup(provider=ScriptedProvider(*researcher), tools=[checkpoint])
    return chat_runtime(
        ScriptedProvider(*main),
        research_tool,
        agents={"researcher": ResearcherAgent},
        services={**services, ResearcherSetup: setup},
        storage=storage,
    )


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


CHECKPOINT_CALL = tool_calls_response(("c1", "checkpoint", {"city": "Rome"}))


async def die_in_a_run(scenario: str, base: str) -> None:
    """The process that dies. ``tool``: the chat's own tool call; ``sub_agent``: the research
    agent's tool call, while the chat's ``research`` call waits for it; ``after_alice*``: a run
    with conversation ``alice-conv`` completes, then a run with none dies in its tool."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(Announce())
    hooks = OtelHooks(tracer_provider=tracer_provider)
    if scenario == "tool":
        runtime = durable_runtime(base, sub_agent=False, crash=True, main=[CHECKPOINT_CALL], researcher=[])
        hooks.install(runtime)
        await run_chat(runtime, "Save my work", conversation_id="conv-42")
    elif scenario == "sub_agent":
        main = [tool_calls_response(("r1", "research", {"question": "Why?"}))]
        runtime = durable_runtime(base, sub_agent=True, crash=True, main=main, researcher=[CHECKPOINT_CALL])
        hooks.install(runtime)
        await run_chat(runtime, "Research and save", conversation_id="conv-42")
    else:
        store = ONE_KEY_STORES.get(scenario.removeprefix("after_alice:"))
        if store is not None:
            vars(tracing)["EphemeralLinkStore"] = store  # what the negative checks remove
        main = [text_response("Hello Alice."), CHECKPOINT_CALL]
        runtime = durable_runtime(base, sub_agent=False, crash=True, main=main, researcher=[])
        hooks.install(runtime)
        await run_chat(runtime, "I am Alice", conversation_id="alice-conv")
        print(json.dumps({"event": "first run completed"}), flush=True)
        await run_chat(runtime, "Save my work")
    raise AssertionError("the run was to die in its tool")


if __name__ == "__main__":
    asyncio.run(die_in_a_run(sys.argv[1], sys.argv[2]))


# ================================================================================ helpers
Lines = list[dict[str, Any]]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Path], Lines]:
    """``crashed(scenario, into)``: the session storage of a run that died in ``scenario``,
    copied into ``into``, and the dying process's span records (each scenario dies once per
    module; every test resumes its own copy)."""
    done: dict[str, tuple[Path, Lines]] = {}

    def crash(scenario: str, into: Path) -> Lines:
        if scenario not in done:
            base = tmp_path_factory.mktemp("crashed")
            proc = subprocess.run(
                [sys.executable, "-m", "tests.runtime_hooks.test_durable_resume", scenario, str(base)],
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


def storage(base: Path) -> FileSessionStorage:
    return FileSessionStorage(str(base), SESSION)


async def kept_link(base: Path, node_id: str = "r1") -> dict[str, Any] | None:
    """What the plugin keeps for the run rooted at ``node_id`` (its ephemeral key)."""
    return await EphemeralLinkStore(storage(base), node_id).load()


def resumed_tree(
    exporter: InMemorySpanExporter, keys: tuple[str, ...] = (CID, RESUMED, AGENT_RESUMED)
) -> list[span_tree.Node]:
    return span_tree.build(exporter.get_finished_spans(), keys)


def ids(node: span_tree.Node) -> tuple[int, int]:
    assert node.span is not None and node.span.context is not None
    return node.span.context.trace_id, node.span.context.span_id


def links_of(node: span_tree.Node) -> list[tuple[str, str, Mapping[str, Any]]]:
    assert node.span is not None
    return [
        (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}", dict(link.attributes or {}))
        for link in node.span.links
    ]


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


# ================================================================================ resume after a crash in a tool
async def test_a_run_that_died_in_a_tool_resumes_linked_to_its_trace(
    crashed: Callable[[str, Path], Lines],
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    lines = crashed("tool", tmp_path)
    started = records(lines, "start")
    assert names(started) == ["invoke_agent assistant", CHAT, "execute_tool checkpoint"]
    assert names(records(lines, "end")) == [CHAT]  # the rest died open
    paused_root = started[0]
    assert paused_root["parent_id"] is None
    assert [s["attributes"].get(CID) for s in started[1:]] == ["conv-42"] * 2

    # What the plugin kept for the next process: in the storage's ephemeral state, under its
    # run's key, never in the persistent state (which outlives the run).
    kept = await kept_link(tmp_path)
    assert kept is not None
    assert kept["conversation_id"] == "conv-42"
    assert kept["traceparent"].startswith(f"00-{paused_root['trace_id']}-{paused_root['span_id']}-")
    assert set(kept) == {"traceparent", "conversation_id"}
    assert [k for k in await storage(tmp_path).scope_keys() if k.startswith(KEY_PREFIX.rstrip("."))] == []

    runtime = traced(
        make_otel_hooks,
        durable_runtime(str(tmp_path), sub_agent=False, crash=False, main=[text_response("Saved.")], researcher=[]),
    )
    result = await runtime.resume()
    assert isinstance(result, ChatResult) and result.response == "Saved."

    root = assert_one_linked_continuation(span_exporter, paused_root)
    conv = {CID: "conv-42"}
    assert span_tree.shape([root]) == [("invoke_agent assistant", [("execute_tool checkpoint", []), (CHAT, [])])]
    assert [(n.name, n.attrs) for n in span_tree.walk([root])] == [
        ("invoke_agent assistant", {**conv, RESUMED: True}),
        ("execute_tool checkpoint", conv),
        (CHAT, conv),
    ]
    # The tool call the resume reopened is named once the agent's next request offers it.
    tool_span = span_tree.build(span_exporter.get_finished_spans())[0].children[0]
    assert tool_span.attrs == {
        semconv.GEN_AI_OPERATION_NAME: "execute_tool",
        semconv.GEN_AI_TOOL_NAME: "checkpoint",
        semconv.GEN_AI_TOOL_TYPE: "function",
        semconv.GEN_AI_TOOL_CALL_ID: "c1",
        semconv.GEN_AI_TOOL_DESCRIPTION: "Save progress.",
        semconv.GEN_AI_AGENT_NAME: "assistant",
        CID: "conv-42",
    }
    # The run completed: flowra cleared its ephemeral state, and the link with it.
    assert await kept_link(tmp_path) is None
    assert not await runtime.has_pending_execution()
    assert_all_ended(ledger, span_exporter)


# ================================================================================ resume after a crash in a sub-agent
RESUMED_SUB_AGENT: list[Any] = [
    (
        "invoke_agent assistant",
        [
            (
                "execute_tool research",
                [
                    (
                        "invoke_agent researcher",
                        [("invoke_agent researcher/turn", [("execute_tool checkpoint", []), (CHAT, [])])],
                    )
                ],
            ),
            (CHAT, []),
        ],
    )
]


def resume_sub_agent_runtime(base: Path, make_otel_hooks: MakeHooks) -> AgentRuntime:
    return traced(
        make_otel_hooks,
        durable_runtime(
            str(base),
            sub_agent=True,
            crash=False,
            main=[text_response("All done.")],
            researcher=[text_response("Because.")],
        ),
    )


async def test_a_crash_inside_a_sub_agent_resumes_as_one_linked_continuation(
    crashed: Callable[[str, Path], Lines],
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    lines = crashed("sub_agent", tmp_path)
    started = records(lines, "start")
    assert names(started) == [
        "invoke_agent assistant",
        CHAT,
        "execute_tool research",
        "invoke_agent researcher",
        "invoke_agent researcher/turn",
        CHAT,
        "execute_tool checkpoint",
    ]
    assert names(records(lines, "end")) == [CHAT, CHAT]
    paused_root = started[0]

    runtime = resume_sub_agent_runtime(tmp_path, make_otel_hooks)
    result = await runtime.resume()
    assert isinstance(result, ChatResult) and result.response == "All done."

    # flowra reopens the chat's turn, its research call, the researcher and its turn and tool
    # call, each outside its parent's flowing value: still one continuation, each under its parent.
    root = assert_one_linked_continuation(span_exporter, paused_root)
    assert span_tree.shape([root]) == RESUMED_SUB_AGENT
    conv = {CID: "conv-42"}
    assert [(n.name, n.attrs) for n in span_tree.walk([root])] == [
        ("invoke_agent assistant", {**conv, RESUMED: True}),
        ("execute_tool research", conv),
        ("invoke_agent researcher", {**conv, AGENT_RESUMED: True}),
        ("invoke_agent researcher/turn", {**conv, AGENT_RESUMED: True}),
        ("execute_tool checkpoint", conv),
        (CHAT, conv),
        (CHAT, conv),
    ]
    assert await kept_link(tmp_path) is None
    assert_all_ended(ledger, span_exporter)


async def test_without_the_resume_frames_a_resumed_sub_agent_starts_separate_traces(
    crashed: Callable[[str, Path], Lines],
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negative: ``RunScope.resumed_parent`` (the frame opened last one level up,
    ``resume_frames``) made to find nothing: the resumed sub-agent's spans become root spans of
    traces of their own, and the reopened tool calls get no span at all."""
    monkeypatch.setattr(RunScope, "resumed_parent", lambda self, depth: None)
    crashed("sub_agent", tmp_path)
    await resume_sub_agent_runtime(tmp_path, make_otel_hooks).resume()
    roots = resumed_tree(span_exporter)
    assert span_tree.shape(roots) == [
        ("invoke_agent assistant", [(CHAT, [])]),
        ("invoke_agent researcher", []),
        ("invoke_agent researcher/turn", [(CHAT, [])]),
    ]
    assert len({ids(r)[0] for r in roots}) == 3


# ================================================================================ conversation ids stay with their run
async def test_a_later_run_without_a_conversation_id_never_resumes_with_an_earlier_ones(
    crashed: Callable[[str, Path], Lines],
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    lines = crashed("after_alice", tmp_path)
    first_done = lines.index({"event": "first run completed"})
    first, second = lines[:first_done], lines[first_done + 1 :]
    assert {r["attributes"].get(CID) for r in records(first, "end")} == {"alice-conv"}
    assert names(records(second, "start")) == ["invoke_agent assistant", CHAT, "execute_tool checkpoint"]
    assert {r["attributes"].get(CID) for r in second if "attributes" in r} == {None}
    paused_root = records(second, "start")[0]

    # Run r1 completed (its link cleared with flowra's ephemeral state); r2 kept its own,
    # saying it has no conversation id.
    assert await kept_link(tmp_path, "r1") is None
    kept = await kept_link(tmp_path, "r2")
    assert kept is not None and kept["conversation_id"] is None

    runtime = traced(
        make_otel_hooks,
        durable_runtime(str(tmp_path), sub_agent=False, crash=False, main=[text_response("Saved.")], researcher=[]),
    )
    await runtime.resume()
    root = assert_one_linked_continuation(span_exporter, paused_root)
    assert [(n.name, n.attrs) for n in span_tree.walk([root])] == [
        ("invoke_agent assistant", {RESUMED: True}),
        ("execute_tool checkpoint", {}),
        (CHAT, {}),
    ]
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize(
    ("store", "leaks"),
    [("one_key", False), ("one_key_drops_none", True)],
    ids=["one_persistent_key", "one_persistent_key_dropping_none"],
)
async def test_with_one_link_for_every_run_alice_leaks_unless_none_is_kept(
    store: str,
    leaks: bool,
    crashed: Callable[[str, Path], Lines],
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negatives: the link kept once for every run, in state that outlives the run
    (``EphemeralLinkStore`` replaced, in the dying process and here). Saving the later run's
    conversation id explicitly as None (``durable_link.link_state``) still overwrites alice's;
    with that removed too, the resumed run is stamped ``alice-conv``."""
    monkeypatch.setattr(tracing, "EphemeralLinkStore", ONE_KEY_STORES[store])
    crashed(f"after_alice:{store}", tmp_path)
    await traced(
        make_otel_hooks,
        durable_runtime(str(tmp_path), sub_agent=False, crash=False, main=[text_response("Saved.")], researcher=[]),
    ).resume()
    stamped = {(s.attributes or {}).get(CID) for s in span_exporter.get_finished_spans()}
    assert stamped == ({"alice-conv"} if leaks else {None})
