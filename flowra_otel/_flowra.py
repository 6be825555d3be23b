"""The few facts about flowra's internals that the plugin relies on, in one place.

flowra 0.0.3 - 0.0.8 moved classes between modules and renamed step results; everything
version-dependent is resolved here once at import time, so the rest of the package reads
as if there were a single flowra.
"""

from __future__ import annotations

from typing import Any, Final

from flowra.agent import Event, HookContext, HookRegistry
from flowra.lib.tool_loop import hook_events as _events
from flowra.lib.tool_loop.spec import ToolLoopResult, ToolLoopStatus
from flowra.llm import LLMProvider, LLMRequest, LLMResponse, StopReason, ToolResultBlock, ToolUseBlock, Usage
from flowra.runtime import AgentRuntime
from flowra.runtime.engine import Engine

try:  # flowra >= 0.0.6
    from flowra.lib.tool_loop.tool_call import ToolCallSpec
except ImportError:  # flowra 0.0.3 - 0.0.5
    from flowra.lib.tool_loop._tool_call_agent import ToolCallSpec  # type: ignore[no-redef,import-not-found,unused-ignore]

import flowra.agent as _agent

__all__ = [
    "CONTINUATION_TYPES",
    "DELTA_EVENTS",
    "INTERRUPTED_TYPE",
    "SPAN_EVENTS",
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
    "agent_name_of",
    "events",
    "node_id_of",
    "parent_of",
    "tool_use_of",
]

events = _events

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

INTERRUPTED_TYPE: Final[type[Any] | None] = getattr(_agent, "Interrupted", None)
"""flowra >= 0.0.8 returns ``Interrupted()`` from an interrupted step; older versions return a
``ToolLoopResult`` with status ``interrupted``."""


def parent_of(node: Any) -> Any:
    """The engine node's parent (``ExecutionNode.parent``), or None for a run's root."""
    return getattr(node, "parent", None)


def agent_name_of(node: Any) -> str:
    """The registry path of the agent a node runs (``chat/tool_loop``)."""
    return str(getattr(node, "agent_name", "") or "")


def node_id_of(node: Any) -> str:
    return str(getattr(node, "node_id", "") or "")


def tool_use_of(node: Any) -> ToolUseBlock | None:
    """The tool use a tool-call node executes, or None when the node is not a tool call.

    Newer flowra (0.0.8) keeps the agent's spec on the node (``agent_spec``); flowra 0.0.3 has
    no such field, only the step's ``pending_spec``, which holds the ``ToolCallSpec`` while the
    tool-call node's ``execute`` step runs (the only time this is asked: a step that raised, a
    run started from inside a tool).
    """
    for field in ("agent_spec", "pending_spec"):
        spec = getattr(node, field, None)
        if isinstance(spec, ToolCallSpec):
            return spec.tool_use
    return None
