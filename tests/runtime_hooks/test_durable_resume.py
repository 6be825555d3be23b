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
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flowra.agent import AgentRuntime, ChangeSet, FileSessionStorage
from flowra.lib.chat import ChatResult
from flowra.tools import tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import tracing
from flowra_otel.adapters.runtime_hooks.durable import KEY_PREFIX, EphemeralLinkStore
from flowra_otel.adapters.runtime_hooks.frames import RunScope
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
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import (
    EPHEMERAL_STATE,
    CityParams,
    ResearcherAgent,
    ResearcherSetup,
    ScriptedProvider,
    chat_runtime,
    requires,
    research_tool,
    run_chat,
    text_response,
    tool_calls_response,
)

MakeHooks = Callable[..., OtelHooks]
LINKED = requires(EPHEMERAL_STATE, "a durable run's trace link is kept in ephemeral state (flowra 0.0.49+)")


# ================================================================================ the dying process
class Crash:
    """Whether ``checkpoint`` ends the process (a service: flowra gives it to the tool)."""

    def __init__(self, *, armed: bool) -> None:
        self.armed = armed


@tool("checkpoint")
async def checkpoint(params: CityParams, crash: Crash) -> str:
    """Save progress."""
    if crash.armed:  # flowra saved the run after its previous cycle; the process dies mid-tool
        durable.dying()
    return f"{params.city} saved"


class OneKeyLinkStore(durable.OneKeyLinkStore):
    """The design the plugin avoids (``tests.both_lines.durable_resume``), kept in *persistent*
    state: it survives the run."""

    async def write(self, scalars: dict[str, Any]) -> None:
        await self.storage.save(self.KEY, ChangeSet(scalars=scalars, appends={}))

    async def read(self) -> Any:
        return await self.storage.load(self.KEY)


ONE_KEY_STORES = durable.one_key_stores(OneKeyLinkStore)


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


CHECKPOINT_CALL = tool_calls_response(("c1", "checkpoint", {"city": "Rome"}))


async def die_in_a_run(scenario: str, base: str) -> None:
    """The process that dies. ``tool``: the chat's own tool call; ``sub_agent``: the research
    agent's tool call, while the chat's ``research`` call waits for it; ``after_alice*``: a run
    with conversation ``alice-conv`` (user ``alice``) completes, then a run with neither dies in its tool."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(Announce())
    hooks = OtelHooks(tracer_provider=tracer_provider)
    if scenario == "tool":
        runtime = durable_runtime(base, sub_agent=False, crash=True, main=[CHECKPOINT_CALL], researcher=[])
        hooks.install(runtime)
        await run_chat(runtime, "Save my work", conversation_id="conv-42", user_id="u-42")
    elif scenario == "sub_agent":
        main = [tool_calls_response(("r1", "research", {"question": "Why?"}))]
        runtime = durable_runtime(base, sub_agent=True, crash=True, main=main, researcher=[CHECKPOINT_CALL])
        hooks.install(runtime)
        await run_chat(runtime, "Research and save", conversation_id="conv-42", user_id="u-42")
    else:
        store = ONE_KEY_STORES.get(scenario.removeprefix("after_alice:"))
        if store is not None:
            vars(tracing)["EphemeralLinkStore"] = store  # what the negative checks remove
        main = [text_response("Hello Alice."), CHECKPOINT_CALL]
        runtime = durable_runtime(base, sub_agent=False, crash=True, main=main, researcher=[])
        hooks.install(runtime)
        await run_chat(runtime, "I am Alice", conversation_id="alice-conv", user_id="alice")
        print(json.dumps({"event": "first run completed"}), flush=True)
        await run_chat(runtime, "Save my work")
    raise AssertionError("the run was to die in its tool")


if __name__ == "__main__":
    asyncio.run(die_in_a_run(sys.argv[1], sys.argv[2]))


# ================================================================================ helpers
@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Crashed:
    return durable.crashed_runs(tmp_path_factory, "tests.runtime_hooks.test_durable_resume")


def storage(base: Path) -> FileSessionStorage:
    return FileSessionStorage(str(base), SESSION)


def files_named_ours(base: Path) -> list[Path]:
    """Files in a session storage whose name holds the plugin's key prefix."""
    return [p for p in base.rglob("*") if KEY_PREFIX.rstrip(".") in p.name]


async def kept_link(base: Path, node_id: str = "r1") -> dict[str, Any] | None:
    """What the plugin keeps for the run rooted at ``node_id`` (its ephemeral key)."""
    return await EphemeralLinkStore(storage(base), node_id).load()


# ================================================================================ resume after a crash in a tool
@LINKED
async def test_a_run_that_died_in_a_tool_resumes_linked_to_its_trace(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    paused_root = assert_died_in_the_tool(crashed("tool", tmp_path))
    # What the plugin kept for the next process: in the storage's ephemeral state, under its
    # run's key, never in the persistent state (which outlives the run).
    assert_kept_link(await kept_link(tmp_path), paused_root, "conv-42", "u-42")
    if hasattr(storage(tmp_path), "scope_keys"):  # listing the persistent keys: not on 0.0.49 - 0.0.70
        assert [k for k in await storage(tmp_path).scope_keys() if k.startswith(KEY_PREFIX.rstrip("."))] == []

    runtime = traced(
        make_otel_hooks,
        durable_runtime(str(tmp_path), sub_agent=False, crash=False, main=[text_response("Saved.")], researcher=[]),
    )
    result = await runtime.resume()
    assert isinstance(result, ChatResult) and result.response == "Saved."

    # The tool call the resume reopened is named once the agent's next request offers it.
    durable.assert_resumed_from_the_tool(span_exporter, paused_root)
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


@LINKED
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
    conv = {CID: "conv-42", durable.USER: "u-42"}  # kept from the dead run
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
    crashed: Crashed,
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


@requires(not EPHEMERAL_STATE, "flowra 0.0.47 - 0.0.48 only: no ephemeral state to keep a trace link in")
async def test_without_ephemeral_state_a_resumed_run_is_one_trace_of_its_own(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    """flowra 0.0.47 - 0.0.48 keep no per-run state a resume could read the dead run's trace from
    (docs/design.md): the resumed run is one new trace with no link to the dead one, the reopened
    sub-agent still nested under its tool call, and the plugin wrote nothing into the storage."""
    started = records(crashed("sub_agent", tmp_path), "start")
    result = await resume_sub_agent_runtime(tmp_path, make_otel_hooks).resume()
    assert isinstance(result, ChatResult) and result.response == "All done."
    roots = resumed_tree(span_exporter)
    assert span_tree.shape(roots) == RESUMED_SUB_AGENT
    (root,) = roots
    assert root.span is not None and list(root.span.links) == []
    assert f"{ids(root)[0]:032x}" != started[0]["trace_id"]
    assert files_named_ours(tmp_path) == []
    assert_all_ended(ledger, span_exporter)


# ================================================================================ conversation ids stay with their run
@LINKED
async def test_a_later_run_without_a_conversation_id_never_resumes_with_an_earlier_ones(
    crashed: Crashed,
    tmp_path: Path,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    lines = crashed("after_alice", tmp_path)
    # The later run dies in its tool.
    paused_root = durable.alice_then_another(lines, ["invoke_agent assistant", CHAT, "execute_tool checkpoint"])

    # Run r1 completed (its link cleared with flowra's ephemeral state); r2 kept its own,
    # saying it has no conversation id.
    assert await kept_link(tmp_path, "r1") is None
    assert_kept_link(await kept_link(tmp_path, "r2"), paused_root, None, None)

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


@LINKED
@pytest.mark.parametrize(
    ("store", "leaks"),
    [("one_key", False), ("one_key_drops_none", True)],
    ids=["one_persistent_key", "one_persistent_key_dropping_none"],
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
    durable.assert_stamped(span_exporter, leaks=leaks)
