"""The few facts about flowra's internals that the plugin relies on, in one place.

flowra 0.0.3 - 0.0.8 moved classes between modules and renamed step results; everything
version-dependent is resolved here once at import time, so the rest of the package reads
as if there were a single flowra. This is the only module that reads flowra's private names
(name-mangled ``HookRegistry`` and ``AgentRuntime`` fields, ``Engine.__execute_node``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

from flowra.agent import Event, HookContext, HookRegistry
from flowra.lib.tool_loop import ToolLoopAgent, ToolLoopConfig
from flowra.lib.tool_loop import hook_events as _events
from flowra.lib.tool_loop.spec import ToolLoopResult, ToolLoopStatus
from flowra.llm import LLMProvider, LLMRequest, LLMResponse, StopReason, ToolResultBlock, ToolUseBlock, Usage
from flowra.runtime import AgentRuntime
from flowra.runtime.engine import Engine
from flowra.tools import ToolRegistry

try:  # flowra >= 0.0.6
    from flowra.lib.tool_loop.tool_call import ToolCallSpec
except ImportError:  # flowra 0.0.3 - 0.0.5
    from flowra.lib.tool_loop._tool_call_agent import ToolCallSpec  # type: ignore[no-redef,import-not-found,unused-ignore]

import flowra.agent as _agent

__all__ = [
    "CONTINUATION_TYPES",
    "DELTA_EVENTS",
    "EXECUTE_NODE",
    "INTERRUPTED_TYPE",
    "INTERRUPT_EXCEPTIONS",
    "LEDGER_FIELDS",
    "SPAN_EVENTS",
    "SPAWN_TYPE",
    "TRACED_EVENTS",
    "AgentRuntime",
    "Engine",
    "Event",
    "HookContext",
    "HookRegistry",
    "LLMProvider",
    "LLMRequest",
    "LLMResponse",
    "StopReason",
    "ToolCallSpec",
    "ToolLoopResult",
    "ToolLoopStatus",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "agent_llm_config",
    "agent_name_of",
    "child_index_of",
    "children_of",
    "context_of_registry",
    "events",
    "forward_target",
    "handler_map",
    "is_completed",
    "node_id_of",
    "node_of_step_task",
    "offered_tools",
    "owning_agent_path",
    "parent_of",
    "provider_class_of",
    "registry_context",
    "registry_handlers",
    "remove_handlers",
    "resumed_run_id",
    "run_id_of",
    "runtime_services",
    "runtime_storage",
    "services_of",
    "spawned_tool_uses",
    "tool_call_of",
]

events = _events

LEDGER_FIELDS: Final[dict[type[Any], str]] = {
    _events.BeforeToolCallEvent: "tool_use",
    _events.AfterToolCallEvent: "result",
}
"""Tool events whose payload field hooks may replace, and whose changes the ledger records."""

TRACED_EVENTS: Final[tuple[type[Any], ...]] = (
    _events.UserMessageEvent,
    _events.MessageAcceptedEvent,
    _events.StartIterationEvent,
    _events.BeforeLLMCallEvent,
    _events.AfterLLMCallEvent,
    _events.TextReasoningEvent,
    _events.ThinkingEvent,
    _events.ResultMessageEvent,
    _events.BeforeToolCallEvent,
    _events.AfterToolCallEvent,
)
"""The tool-loop events the plugin subscribes to. Never the delta events: a handler for those
switches flowra to streaming, and tracing must not change how the agent behaves."""

SPAN_EVENTS: Final[tuple[type[Any], ...]] = (
    _events.UserMessageEvent,
    _events.MessageAcceptedEvent,
    _events.BeforeLLMCallEvent,
    _events.AfterLLMCallEvent,
    _events.BeforeToolCallEvent,
    _events.AfterToolCallEvent,
)
"""The events that start, feed or end a span: the only ones the plugin subscribes to. The other
tool-loop events (iteration start, text/thinking blocks, result message) carry nothing a span
needs, so they cost the plugin nothing."""

DELTA_EVENTS: Final[tuple[type[Any], ...]] = (_events.TextDeltaEvent, _events.ThinkingDeltaEvent)
"""Streaming chunks. Seen through the patched ``emit`` (for time to first chunk), never subscribed."""

CONTINUATION_TYPES: Final[tuple[type[Any], ...]] = tuple(
    t for name in ("GotoStep", "GotoAgent", "Goto", "Spawn") if isinstance(t := getattr(_agent, name, None), type)
)
"""Step results that mean "this agent goes on"; any other result (or ``None``) completes it."""

SPAWN_TYPE: Final[type[Any]] = _agent.Spawn

_INTERRUPTED: Any = getattr(_agent, "Interrupted", None)

INTERRUPTED_TYPE: Final[type[Any] | None] = (
    _INTERRUPTED if isinstance(_INTERRUPTED, type) and not issubclass(_INTERRUPTED, BaseException) else None
)
"""flowra 0.0.8 returns ``Interrupted()`` from an interrupted step; older versions return a
``ToolLoopResult`` with status ``interrupted`` (0.0.3 - 0.0.6) or raise (0.0.7)."""

INTERRUPT_EXCEPTIONS: Final[tuple[type[BaseException], ...]] = tuple(
    t
    for t in (_INTERRUPTED, getattr(_agent, "InterruptedError", None))
    if isinstance(t, type) and issubclass(t, BaseException)
)
"""What an interrupted step raises: ``Interrupted`` on flowra 0.0.7 (its engine then ends the run),
``InterruptedError`` inside 0.0.8's steps (its engine turns it into an ``Interrupted()`` result)."""


def parent_of(node: Any) -> Any:
    """The engine node's parent (``ExecutionNode.parent``), or None for a run's root."""
    return getattr(node, "parent", None)


def agent_name_of(node: Any) -> str:
    """The registry path of the agent a node runs (``chat/tool_loop``)."""
    return str(getattr(node, "agent_name", "") or "")


def node_id_of(node: Any) -> str:
    return str(getattr(node, "node_id", "") or "")


EXECUTE_NODE: Final = "_Engine__execute_node"
"""``Engine.__execute_node(node)``: the coroutine of one step of one node (a task of its own)."""

_EXECUTE_NODE_CODE: Final[Any] = getattr(getattr(Engine.__dict__.get(EXECUTE_NODE), "__func__", None), "__code__", None)


def node_of_step_task(task: Any) -> Any:
    """The ``ExecutionNode`` whose step ``task`` runs, or None when it runs something else.

    Every engine from 0.0.3 to 0.0.8 runs a step as a task whose coroutine is flowra's own
    ``__execute_node(node)`` (``gather``/``ensure_future`` over it), and the plugin hands that
    coroutine back untouched for steps it needs no wrapper for: its frame's ``node`` is the node.
    Recognised by the function's code object, so any other coroutine gives None.
    """
    get_coro = getattr(task, "get_coro", None)
    coro = get_coro() if get_coro is not None else None
    if _EXECUTE_NODE_CODE is None or getattr(coro, "cr_code", None) is not _EXECUTE_NODE_CODE:
        return None
    frame = coro.cr_frame  # type: ignore[union-attr]
    return frame.f_locals.get("node") if frame is not None else None


_HANDLERS: Final = "_HookRegistry__handlers"
_CONTEXT: Final = "_HookRegistry__context"

handler_map: Final[Callable[[Any], dict[type[Any], list[Any]]]] = operator.attrgetter(_HANDLERS)
"""A plain ``HookRegistry``'s handler lists by event type (flowra's own dict, live): the hot path's
C-level accessor, for registries whose type is exactly ``HookRegistry`` (0.0.3 - 0.0.8 slots)."""

context_of_registry: Final[Callable[[Any], Any]] = operator.attrgetter(_CONTEXT)
"""A plain ``HookRegistry``'s ``HookContext`` (or None): what its ``emit`` stamps on events."""


def registry_handlers(registry: Any, event_type: type[Any]) -> list[Any] | None:
    """The live handler list of ``registry`` for ``event_type`` (flowra's own list, not a copy)."""
    handlers = getattr(registry, _HANDLERS, None)
    return handlers.get(event_type) if isinstance(handlers, dict) else None


def remove_handlers(registry: Any, owner: object) -> bool:
    """Drop every handler of ``registry`` that is a method of ``owner``, and every list this leaves
    empty (flowra's ``on`` made it for them, has no way to remove one, and ``propagate_to``
    forwards every event type that has a list): the registry is as flowra would have it without
    them. A handler a registry subclass's ``on`` wrapped (``functools.wraps``: its ``__wrapped__``
    leads to the method) goes too. True when the registry then has no handler at all."""
    handlers = getattr(registry, _HANDLERS, None)
    if not isinstance(handlers, dict):
        return False
    for event_type, current in list(handlers.items()):
        kept = [h for h in current if not _is_method_of(h, owner)]
        if len(kept) == len(current):
            continue
        if kept:
            current[:] = kept
        else:
            del handlers[event_type]
    return not handlers


def _is_method_of(handler: Any, owner: object) -> bool:
    """``handler`` is a method of ``owner``, or wraps one (``__wrapped__``, a few levels at most)."""
    for _ in range(8):
        if getattr(handler, "__self__", None) is owner:
            return True
        handler = getattr(handler, "__wrapped__", None)
        if handler is None:
            return False
    return False


def forward_target(handler: Any) -> Any:
    """The registry a ``propagate_to`` forwarder re-emits to, or None for any other handler.

    Every flowra from 0.0.3 to 0.0.8 registers ``async def _forward(event, _target=target)``.
    """
    if getattr(handler, "__name__", None) != "_forward":
        return None
    defaults = getattr(handler, "__defaults__", None)
    return defaults[0] if defaults else None


def registry_context(registry: Any) -> Any:
    """The ``HookContext`` a registry stamps on the events it emits (None when it has none)."""
    return getattr(registry, _CONTEXT, None)


def runtime_storage(runtime: Any) -> Any:
    """The ``SessionStorage`` of a durable ``AgentRuntime`` (None without one)."""
    return getattr(runtime, "_AgentRuntime__storage", None)


def runtime_services(runtime: Any) -> dict[type, Any]:
    """The runtime-wide services an ``AgentRuntime`` hands every agent (a dict flowra keeps)."""
    services = getattr(runtime, "_AgentRuntime__services", None)
    if not isinstance(services, dict):
        msg = f"expected a flowra AgentRuntime, got {type(runtime).__name__}"
        raise TypeError(msg)
    return services


def services_of(node: Any) -> dict[type, Any]:
    """The services a node's agent receives (its ``HookRegistry`` among them)."""
    scope = getattr(node, "scope", None)
    get = getattr(scope, "get_services", None)
    services = get() if get is not None else None
    return services if isinstance(services, dict) else {}


def agent_llm_config(node: Any) -> Any:
    """The ``LLMConfig`` of the tool loop a node runs, when it is a fixed value (flowra also
    accepts a function resolved per call; then the model is known only from the calls)."""
    config = services_of(node).get(ToolLoopConfig)
    llm_config = getattr(config, "llm_config", None)
    return llm_config if isinstance(getattr(llm_config, "model", None), str) else None


def provider_class_of(node: Any) -> str | None:
    """The class name of the ``LLMProvider`` a node's agent calls (flowra's own are recognised)."""
    provider = services_of(node).get(LLMProvider)
    return type(provider).__name__ if provider is not None else None


def child_index_of(node: Any) -> int | None:
    """A child's position in its parent's ``Spawn(children=[...])``.

    Every engine from 0.0.3 to 0.0.8 names a child ``f"{parent.node_id}.{child_index}"`` where
    ``child_index`` is its position in the spawn's children list.
    """
    node_id = getattr(node, "node_id", None)
    if type(node_id) is not str:  # flowra's are: read as they are, once per tool call
        node_id = node_id_of(node)
    _, sep, index = node_id.rpartition(".")
    return int(index) if sep and index.isdigit() else None


def spawned_tool_uses(result: Any) -> list[Any] | None:
    """For a step that returned ``Spawn``: each child's tool use (None for a non-tool child), in
    child order; None when the result is not a ``Spawn``.

    A tool loop spawns one tool-call child per tool use, in the order of its BeforeToolCallEvents,
    each with the tool use as its hooks left it.
    """
    if not isinstance(result, SPAWN_TYPE):
        return None
    out: list[Any] = []
    for child in getattr(result, "children", None) or ():
        spec = getattr(child, "spec", None)
        out.append(spec.tool_use if isinstance(spec, ToolCallSpec) else None)
    return out


def owning_agent_path(node: Any) -> str:
    """The user's agent that owns a tool loop: ``chat`` for ``chat/tool_loop``.

    A tool loop registered as a sub-agent of its parent node's agent belongs to that agent
    (ChatAgent and user agents built the same way); a tool loop registered on its own is the
    agent.
    """
    path = agent_name_of(node)
    parent = parent_of(node)
    if parent is not None:
        parent_path = agent_name_of(parent)
        if parent_path and path.startswith(parent_path + "/"):
            return parent_path
    return path


# ---------------------------------------------------------------------------------- durable runs
def run_id_of(node: Any) -> str:
    """The node id of the run a node belongs to: its root's (``r<run number>``, the same after a
    resume: every runtime from 0.0.3 to 0.0.8 builds the root as ``f"r{run_id}"`` and restores
    node ids from the execution snapshot)."""
    root = node
    parent = parent_of(root)
    while parent is not None:
        root, parent = parent, parent_of(parent)
    return node_id_of(root)


async def resumed_run_id(storage: Any) -> str | None:
    """The root node id of the run ``resume()`` is about to continue, from the execution snapshot
    flowra saved (``node_id`` of its root, 0.0.3 - 0.0.8), or None when there is none."""
    execution = await storage.load_execution()
    node_id = execution.get("node_id") if isinstance(execution, dict) else None
    return node_id if isinstance(node_id, str) and node_id else None


def children_of(node: Any) -> list[Any]:
    """A node's children while it waits for them (``Spawn``), else none."""
    children = getattr(node, "children", None)
    return list(children) if isinstance(children, list) else []


def is_completed(node: Any) -> bool:
    status = getattr(node, "status", None)
    return getattr(status, "value", status) == "completed"


_TOOL_CALL_AGENT: Final[Any] = ToolLoopAgent.__agent_definition__.subagents.get("tool_call")
_TOOL_CALL_DEFINITION: Final[Any] = getattr(_TOOL_CALL_AGENT, "__agent_definition__", _TOOL_CALL_AGENT)


def tool_call_of(node: Any) -> tuple[Any, Any] | None:
    """For a tool-call node (flowra's tool-call agent), the tool use it runs, as every
    ``BeforeToolCallEvent`` hook left it, and its ``ToolCallSpec`` (None when only the tool use
    is known); None for any other node. The spec is the node's agent spec (0.0.7+) or, before
    its first step ran, its pending spec; a call waiting for an agent it called (0.0.6+) keeps
    the tool use in its own ``tool_use`` slot."""
    for spec in (getattr(node, "agent_spec", None), getattr(node, "pending_spec", None)):
        if isinstance(spec, ToolCallSpec):
            return spec.tool_use, spec
    if _TOOL_CALL_DEFINITION is None or getattr(node, "defn", None) is not _TOOL_CALL_DEFINITION:
        return None
    snapshot = getattr(getattr(node, "scope", None), "snapshot", None)
    stored = snapshot() if snapshot is not None else None
    tool_use = stored.get("tool_use") if isinstance(stored, dict) else None
    return (tool_use, None) if isinstance(tool_use, ToolUseBlock) else None


def offered_tools(node: Any, spec: Any) -> dict[str, str]:
    """The tools a tool loop's requests offer for a call made under ``spec`` (name ->
    description): its ``ToolRegistry``'s, less those the call's allow / deny lists rule out (a
    name in neither is kept out only when an allow list exists; ``spec`` None: no lists)."""
    registry = services_of(node).get(ToolRegistry)
    get = getattr(registry, "get_llm_tools", None)
    out: dict[str, str] = {}
    for tool in get() if get is not None else ():
        name, description = getattr(tool, "name", None), getattr(tool, "description", None)
        if isinstance(name, str):
            out[name] = description if isinstance(description, str) else ""
    allowed = getattr(spec, "allowed_tools", None)
    denied = getattr(spec, "denied_tools", None)
    return {
        name: description
        for name, description in out.items()
        if (not isinstance(allowed, set | frozenset) or name in allowed)
        and (not isinstance(denied, set | frozenset) or name not in denied)
    }
