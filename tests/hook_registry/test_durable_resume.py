"""A durable run that dies, resumed in a fresh process: one linked continuation of its trace.

flowra 0.0.3 - 0.0.8 saves a durable run in its session storage after every engine cycle;
``AgentRuntime.resume()`` rebuilds the tree there (node ids included) and runs its pending nodes
again. The counterpart of ``tests/runtime_hooks/test_durable_resume.py``. The plugin keeps the
run's root span context (and conversation id) as node state under a key of its own per run
(``durable.KEY_PREFIX`` + the run's root node id), so that:

* the resumed run's root ``invoke_agent`` span links to the trace of the run it continues
  (``flowra.link.type = resumed_from``), says ``flowra.resumed``, and keeps the conversation id;
* the tool loops and tool calls that were running when the process died are reopened, outermost
  first (``SpanBook.reopen``), so a sub-agent the crash interrupted continues under its
  ``execute_tool`` span: one continuation, not a trace per resumed agent;
* a later run of the same session never reads an earlier run's link, so it is never stamped
  with an earlier run's conversation id.

The run dies for real: this module, run as a script (``python -m
tests.hook_registry.test_durable_resume <scenario> <dir>``), ends its own process with
``os._exit`` inside a tool or an LLM call, printing every span as it starts and ends (spans of a
process that dies never end). The test process is the fresh one that resumes.

flowra 0.0.7 - 0.0.8 cannot resume a run that died inside a tool: the restored tool-call node
has its spec twice (pending and agent spec, deserialized apart), and its step fails with
``Ambiguous binding for parameter 'spec'``; the plugin changes nothing about that (checked).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import ToolLoopResult, ToolLoopStatus
from flowra.runtime import AgentRuntime
from flowra.runtime.execution import ExecutionNode
from flowra.runtime.storage import ChangeSet, FileSessionStorage
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import patches, span_book
from flowra_otel.adapters.hook_registry.durable import NodeStateLinkStore
from flowra_otel.adapters.hook_registry.span_book import SpanBook
from flowra_otel.core import semconv
from tests import span_tree
from tests.both_lines import durable_resume as durable
from tests.both_lines.durable_resume import (
    AGENT_RESUMED,
    CHAT,
    CID,
    RESUMED,
    SESSION,
    Announce,
    Crashed,
    assert_died_in_the_tool,
    assert_kept_link,
    assert_one_linked_continuation,
    ids,
    names,
    records,
    resumed_tree,
)
from tests.hook_registry.conftest import SpanLedger, assert_all_ended, hooks_with
from tests.hook_registry.flowra_support import (
    HAS_AGENT_TOOLS,
    ResearcherSetup,
    ScriptedProvider,
    create_tool_registry,
    final_text,
    research_tool,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
)

MakeHooks = Callable[..., OtelHooks]

CRASH = "FLOWRA_OTEL_TEST_CRASH"
NEEDS_AGENT_TOOLS = pytest.mark.skipif(not HAS_AGENT_TOOLS, reason="agents as tools need flowra >= 0.0.6")
RESUMES_A_TOOL_CALL: bool = "agent_spec" not in {f.name for f in dataclasses.fields(ExecutionNode)}
"""flowra 0.0.3 - 0.0.6 (no agent spec on engine nodes): a tool call that was running resumes;
0.0.7 - 0.0.8 fail to bind its spec."""


# ================================================================================ the dying process
def checkpoint(step: str) -> str:
    """Save progress."""
    if os.environ.get(CRASH) == "1":  # flowra saved the run after its previous cycle; the process dies mid-tool
        durable.dying()
    return f"{step} saved"


def die(request: Any) -> Any:
    """A scripted LLM call that ends the process (flowra saved the run after its previous cycle)."""
    durable.dying()


class OneKeyLinkStore(durable.OneKeyLinkStore):
    """The design the plugin avoids, in node state (``tests.both_lines.durable_resume``)."""

    async def write(self, scalars: dict[str, Any]) -> None:
        await self.storage.save_node_state(self.KEY, ChangeSet(scalars=scalars, appends={}))

    async def read(self) -> Any:
        return await self.storage.load_node_state(self.KEY)


ONE_KEY_STORES = durable.one_key_stores(OneKeyLinkStore)


async def durable_runtime(
    base: str, hooks: HookRegistry, *, sub_agent: bool, main: list[Any], researcher: list[Any]
) -> AgentRuntime:
    """``assistant`` with ``checkpoint`` (or with the ``research`` agent as a tool, whose own loop
    has ``checkpoint``), durable in ``base``. The tool registries stay open (a process's life)."""
    storage = FileSessionStorage(base, SESSION)
    if not sub_agent:
        return tool_loop_runtime(ScriptedProvider(main), await create_tool_registry(checkpoint), hooks, storage=storage)
    setup = ResearcherSetup(provider=ScriptedProvider(researcher), registry=await create_tool_registry(checkpoint))
    tools = await create_tool_registry(checkpoint, research_tool())
    return tool_loop_runtime(ScriptedProvider(main), tools, hooks, researcher=setup, storage=storage)


CHECKPOINT_CALL = tool_calls_response([("c1", "checkpoint", {"step": "one"})])


async def die_in_a_run(scenario: str, base: str) -> None:
    """The process that dies. ``tool``: in the assistant's own tool call (``plain`` suffix: with no
    ``OtelHooks``); ``sub_agent``: in the research agent's LLM call, while the assistant's
    ``research`` call waits for it (a ``checkpoint`` call beside it has completed);
    ``after_alice*``: a run with conversation ``alice-conv`` completes, then a run with none dies
    in its LLM call."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(Announce())
    otel = OtelHooks(tracer_provider=tracer_provider)
    hooks = HookRegistry() if scenario.endswith(":plain") else hooks_with(otel)
    if scenario.startswith("tool"):
        os.environ[CRASH] = "1"
        runtime = await durable_runtime(base, hooks, sub_agent=False, main=[CHECKPOINT_CALL], researcher=[])
        await run_tool_loop(runtime, "Save my work", metadata={"conversation_id": "conv-42", "user_id": "u-42"})
    elif scenario == "sub_agent":
        main: list[Any] = [
            tool_calls_response([("c0", "checkpoint", {"step": "beside"}), ("r1", "research", {"query": "Why?"})])
        ]
        runtime = await durable_runtime(base, hooks, sub_agent=True, main=main, researcher=[die])
        await run_tool_loop(runtime, "Research and save", metadata={"conversation_id": "conv-42", "user_id": "u-42"})
    else:
        store = ONE_KEY_STORES.get(scenario.removeprefix("after_alice:"))
        if store is not None:
            vars(patches)["NodeStateLinkStore"] = store  # what the negative checks remove
        main = [text_response("Hello Alice."), CHECKPOINT_CALL, die]
        runtime = await durable_runtime(base, hooks, sub_agent=False, main=main, researcher=[])
        await run_tool_loop(runtime, "I am Alice", metadata={"conversation_id": "alice-conv", "user_id": "alice"})
        print(json.dumps({"event": "first run completed"}), flush=True)
        await run_tool_loop(runtime, "Save my work")
    raise AssertionError("the run was to die")


if __name__ == "__main__":
    asyncio.run(die_in_a_run(sys.argv[1], sys.argv[2]))


# ================================================================================ helpers
@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Crashed:
    return durable.crashed_runs(tmp_path_factory, "tests.hook_registry.test_durable_resume")


async def kept_link(base: Path, run_id: str = "r1") -> dict[str, Any] | None:
    """What the plugin keeps for the run rooted at ``run_id`` (its own node-state key)."""
    return await NodeStateLinkStore(FileSessionStorage(str(base), SESSION), run_id).load()


async def resume(base: Path, otel: OtelHooks, *, sub_agent: bool = False) -> ToolLoopResult:
    main = [text_response("All done." if sub_agent else "Saved.")]
    researcher = [text_response("Because.")]
    runtime = await durable_runtime(str(base), hooks_with(otel), sub_agent=sub_agent, main=main, researcher=researcher)
    result = await runtime.resume()
    assert isinstance(result, ToolLoopResult) and result.status == ToolLoopStatus.COMPLETED
    assert not await runtime.has_pending_execution()
    return result


# ================================================================================ resume after a crash in a tool
@pytest.mark.skipif(not RESUMES_A_TOOL_CALL, reason="flowra 0.0.7+ cannot resume a tool call that was running")
async def test_a_run_that_died_in_a_tool_resumes_linked_to_its_trace(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    paused_root = assert_died_in_the_tool(crashed("tool", tmp_path))
    # What the plugin kept for the next process: under its run's own key.
    assert_kept_link(await kept_link(tmp_path), paused_root, "conv-42", "u-42")

    result = await resume(tmp_path, make_otel_hooks())
    assert final_text(result) == "Saved."
    durable.assert_resumed_from_the_tool(span_exporter, paused_root)
    assert_all_ended(ledger, span_exporter)


@pytest.mark.skipif(RESUMES_A_TOOL_CALL, reason="flowra 0.0.3 - 0.0.6 resume a tool call that was running")
async def test_flowras_own_failure_to_resume_a_tool_call_is_unchanged(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    """flowra 0.0.7+ fails to resume a run that died inside a tool (its own bug): the same error
    with the plugin as without it, and every span the plugin started for the resume ended."""
    crashed("tool", tmp_path / "traced")
    crashed("tool:plain", tmp_path / "plain")
    errors: list[str] = []
    for base, hooks in ((tmp_path / "plain", HookRegistry()), (tmp_path / "traced", hooks_with(make_otel_hooks()))):
        runtime = await durable_runtime(
            str(base), hooks, sub_agent=False, main=[text_response("Saved.")], researcher=[]
        )
        with pytest.raises(RuntimeError, match="Ambiguous binding for parameter 'spec'") as failure:
            await runtime.resume()
        errors.append(str(failure.value))
    assert errors[0] == errors[1]
    (root,) = resumed_tree(span_exporter)
    assert span_tree.shape([root]) == [("invoke_agent assistant", [("execute_tool checkpoint", [])])]
    assert root.status == "ERROR"
    assert_all_ended(ledger, span_exporter)


# ================================================================================ resume after a crash in a sub-agent
RESUMED_SUB_AGENT: list[Any] = [
    (
        "invoke_agent assistant",
        [("execute_tool research", [("invoke_agent research", [(CHAT, [])])]), (CHAT, [])],
    )
]


@NEEDS_AGENT_TOOLS
async def test_a_crash_inside_a_sub_agent_resumes_as_one_linked_continuation(
    crashed: Crashed,
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
        "execute_tool checkpoint",
        "execute_tool research",
        "invoke_agent research",
        CHAT,
    ]
    assert names(records(lines, "end")) == [CHAT]
    paused_root = started[0]

    result = await resume(tmp_path, make_otel_hooks(capture_content=True), sub_agent=True)
    assert final_text(result) == "All done."

    # The assistant's loop and its research call are reopened, outermost first; the researcher's
    # loop, resumed in its LLM call, continues under them: one continuation. The checkpoint call
    # beside it had completed before the crash: it has no span here, and its result is not
    # taken for the research call's.
    root = assert_one_linked_continuation(span_exporter, paused_root)
    assert span_tree.shape([root]) == RESUMED_SUB_AGENT
    conv = {CID: "conv-42", durable.USER: "u-42"}  # kept from the dead run
    assert [(n.name, n.attrs) for n in span_tree.walk([root])] == [
        ("invoke_agent assistant", {**conv, RESUMED: True}),
        ("execute_tool research", conv),
        ("invoke_agent research", {**conv, AGENT_RESUMED: True}),
        (CHAT, conv),
        (CHAT, conv),
    ]
    spans = {n.name: n.attrs for n in span_tree.walk(span_tree.build(span_exporter.get_finished_spans()))}
    assert spans["execute_tool research"][semconv.GEN_AI_TOOL_CALL_ID] == "r1"
    assert spans["execute_tool research"][semconv.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"query":"Why?"}'
    assert "Because." in spans["execute_tool research"][semconv.GEN_AI_TOOL_CALL_RESULT]
    assert spans["invoke_agent research"][semconv.GEN_AI_AGENT_DESCRIPTION] == (
        "Research a query with a dedicated sub-agent that has its own tools."
    )
    assert_all_ended(ledger, span_exporter)


@NEEDS_AGENT_TOOLS
async def test_without_reopening_a_resumed_sub_agent_starts_a_trace_of_its_own(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negative: ``SpanBook.reopen`` made to reopen nothing: the resumed sub-agent's loop
    and the assistant's become root spans of two traces, and the resumed research call gets no
    span at all (what was observed)."""
    monkeypatch.setattr(SpanBook, "reopen", lambda self, node: setattr(self, "resuming", False))
    crashed("sub_agent", tmp_path)
    await resume(tmp_path, make_otel_hooks(), sub_agent=True)
    roots = resumed_tree(span_exporter)
    assert span_tree.shape(roots) == [
        ("invoke_agent research", [(CHAT, [])]),
        ("invoke_agent assistant", [(CHAT, [])]),
    ]
    assert len({ids(r)[0] for r in roots}) == 2


@NEEDS_AGENT_TOOLS
async def test_without_matching_by_call_a_completed_calls_result_ends_the_reopened_one(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negative: ``span_book._same_call`` made to match any call: the result of the
    ``checkpoint`` call that completed before the crash (reported first) is taken for the
    reopened research call's, which then ends before the sub-agent it ran."""
    monkeypatch.setattr(span_book, "_same_call", lambda a, b: True)
    crashed("sub_agent", tmp_path)
    await resume(tmp_path, make_otel_hooks(capture_content=True), sub_agent=True)
    spans = {n.name: n.attrs for n in span_tree.walk(span_tree.build(span_exporter.get_finished_spans()))}
    assert "beside saved" in spans["execute_tool research"][semconv.GEN_AI_TOOL_CALL_RESULT]


# ================================================================================ conversation ids stay with their run
async def test_a_later_run_without_a_conversation_id_never_resumes_with_an_earlier_ones(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    lines = crashed("after_alice", tmp_path)
    # The later run dies in its second LLM call, after its checkpoint call.
    second_started = ["invoke_agent assistant", CHAT, "execute_tool checkpoint", CHAT]
    paused_root = durable.alice_then_another(lines, second_started)

    # Each run kept its own link: r1's says alice-conv, r2's says it has no conversation id.
    first_link = await kept_link(tmp_path, "r1")
    assert first_link is not None and first_link["conversation_id"] == "alice-conv"
    assert first_link["user_id"] == "alice"
    assert_kept_link(await kept_link(tmp_path, "r2"), paused_root, None, None)

    await resume(tmp_path, make_otel_hooks())
    root = assert_one_linked_continuation(span_exporter, paused_root)
    assert [(n.name, n.attrs) for n in span_tree.walk([root])] == [
        ("invoke_agent assistant", {RESUMED: True}),
        (CHAT, {}),
    ]
    assert_all_ended(ledger, span_exporter)


@pytest.mark.parametrize(
    ("store", "leaks"),
    [("one_key", False), ("one_key_drops_none", True)],
    ids=["one_key", "one_key_dropping_none"],
)
async def test_with_one_link_for_every_run_alice_leaks_unless_none_is_kept(
    store: str,
    leaks: bool,
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paired negatives: the link kept under one key for every run of the session (the per-run
    ``NodeStateLinkStore`` replaced, in the dying process and here). Saving the later run's
    conversation id explicitly as None (``durable_link.link_state``) still overwrites alice's;
    with that removed too, the resumed run is stamped ``alice-conv`` (what was observed)."""
    monkeypatch.setattr(patches, "NodeStateLinkStore", ONE_KEY_STORES[store])
    crashed(f"after_alice:{store}", tmp_path)
    await resume(tmp_path, make_otel_hooks())
    durable.assert_stamped(span_exporter, leaks=leaks)
